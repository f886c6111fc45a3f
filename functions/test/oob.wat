;; oob (test) — an out-of-bounds memory access.
;;
;; Input:  ignored.  Output: none.
;; Exit:   traps with "out of bounds memory access": the memory is one
;;         page (64 KiB) and the load targets address 0xFFFF_FFF0 (~4 GiB).
(module
  (memory (export "memory") 1)

  ;; Entry point: load from far beyond the end of memory, and store the
  ;; value at 0 so the load is observably used.
  (func $start (export "_start")
    (i32.store (i32.const 0)
      (i32.load (i32.const 0xFFFFFFF0))))
)
