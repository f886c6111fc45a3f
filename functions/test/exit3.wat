;; exit3 (test) — exits with a non-zero status.
;;
;; Input:  ignored.  Output: none.
;; Exit:   proc_exit(3), i.e. a function failure with exit code 3.
(module
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  ;; Entry point.
  (func $start (export "_start")
    (call $proc_exit (i32.const 3)))
)
