;; loop (test) — spins forever and never returns.
;;
;; Input:  ignored.  Output: none.
;; Exit:   never; the runtime must stop it when its time budget
;;         (deadline) runs out.
(module
  (memory (export "memory") 1)

  ;; Entry point: an empty loop that branches back to itself forever.
  (func $start (export "_start")
    (loop $forever
      (br $forever)))
)
