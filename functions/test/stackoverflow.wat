;; stackoverflow (test) — unbounded recursion.
;;
;; Input:  ignored.  Output: none.
;; Exit:   never returns normally; traps with a stack overflow (call stack
;;         exhausted) inside the sandbox.
(module
  (memory (export "memory") 1)

  ;; Calls itself forever. The addition after the call keeps the call out
  ;; of tail position, so every level needs a new stack frame.
  (func $recurse (param $depth i32) (result i32)
    (i32.add
      (call $recurse (i32.add (local.get $depth) (i32.const 1)))
      (i32.const 1)))

  ;; Entry point.
  (func $start (export "_start")
    (drop (call $recurse (i32.const 0))))
)
