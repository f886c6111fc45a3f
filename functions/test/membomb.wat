;; membomb (test) — allocates memory until the sandbox refuses.
;;
;; Input:  ignored.  Output: none.
;; Exit:   traps with `unreachable` once memory.grow fails, i.e. once the
;;         runtime's per-sandbox memory cap is reached. (The memory has no
;;         declared maximum, so only the runtime's limit stops it.)
(module
  (memory (export "memory") 1)

  ;; Entry point: grow by 16 pages (1 MiB) at a time until growth fails.
  (func $start (export "_start")
    (loop $more
      ;; memory.grow returns the old size in pages, or -1 on failure
      (if (i32.eq (memory.grow (i32.const 16)) (i32.const -1))
        (then (unreachable)))  ;; hit the cap: trap
      (br $more)))
)
