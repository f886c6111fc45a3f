;; noop — the smallest possible Luge function.
;;
;; Input:  ignored (stdin is never read).
;; Output: nothing on stdout or stderr.
;; Exit:   0 (returns normally from _start).
;;
;; Useful as a baseline for measuring pure runtime overhead
;; (sandbox creation, scheduling, instantiation).
(module
  ;; One page of linear memory; the ABI requires a `memory` export.
  (memory (export "memory") 1)

  ;; Entry point: do nothing and return (= success).
  (func $start (export "_start"))
)
