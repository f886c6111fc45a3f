;; clockspin (test) — spins forever reading the clock.
;;
;; Input:  ignored.  Output: none.
;; Exit:   never; every iteration calls the host (`clock_time_get`), so
;;         the guest spends its time half in Wasm and half in the host's
;;         WASI layer. The runtime must stop it when its execution budget
;;         runs out, as it stops a pure Wasm loop (`loop.wat`).
(module
  (import "wasi_snapshot_preview1" "clock_time_get"
    (func $clock_time_get (param i32 i64 i32) (result i32)))

  (memory (export "memory") 1)

  ;; Entry point: read the monotonic clock (id 1) into address 0, forever.
  (func $start (export "_start")
    (loop $forever
      (drop (call $clock_time_get (i32.const 1) (i64.const 0) (i32.const 0)))
      (br $forever)))
)
