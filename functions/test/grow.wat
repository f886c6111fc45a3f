;; grow (test) — grows its memory on request.
;;
;; Input:  a decimal page count n in ASCII on stdin (1 page = 64 KiB),
;;         0 <= n < 10^18, optional surrounding whitespace, at most 255
;;         bytes in total. Example: "16\n".
;; Output: "ok\n"   if memory.grow(n) succeeded,
;;         "fail\n" if it returned -1 (over the runtime's memory cap, or
;;                  n > 65536, which can never fit in 32-bit memory).
;; Exit:   0 after printing ok/fail;
;;         2 with a message on stderr if the input is not a number;
;;         1 if fd_read/fd_write reports an error.
;;
;; The module starts with exactly 1 page and declares no maximum.
;;
;; Memory layout (1 page at start):
;;   0..8        iovec { buf_ptr, buf_len }
;;   8..12       nread / nwritten result slot
;;   64..        "ok\n", "fail\n"
;;   256..       error message
;;   1024..1280  input buffer
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (data (i32.const 64) "ok\n")    ;; 3 bytes
  (data (i32.const 72) "fail\n")  ;; 5 bytes
  (data (i32.const 256) "grow: expected a decimal page count n on stdin\n") ;; 47 bytes

  (global $IN i32 (i32.const 1024))     ;; input buffer address
  (global $IN_CAP i32 (i32.const 256))  ;; input buffer size

  ;; Write all `len` bytes at `ptr` to `fd`, retrying on partial writes.
  ;; Exits with code 1 on an error or a zero-byte write.
  (func $write_all (param $fd i32) (param $ptr i32) (param $len i32)
    (local $n i32)
    (block $done
      (loop $more
        (br_if $done (i32.eqz (local.get $len)))
        (i32.store (i32.const 0) (local.get $ptr))
        (i32.store (i32.const 4) (local.get $len))
        (if (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        (local.set $n (i32.load (i32.const 8)))
        (if (i32.eqz (local.get $n))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        (local.set $ptr (i32.add (local.get $ptr) (local.get $n)))
        (local.set $len (i32.sub (local.get $len) (local.get $n)))
        (br $more))))

  ;; Read stdin into [ptr, ptr+cap) until EOF or the buffer is full.
  ;; Returns the number of bytes read. Exits with code 1 on a read error.
  (func $read_all (param $ptr i32) (param $cap i32) (result i32)
    (local $len i32)
    (block $done
      (loop $more
        (br_if $done (i32.eq (local.get $len) (local.get $cap)))
        (i32.store (i32.const 0) (i32.add (local.get $ptr) (local.get $len)))
        (i32.store (i32.const 4) (i32.sub (local.get $cap) (local.get $len)))
        (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        (br_if $done (i32.eqz (i32.load (i32.const 8))))
        (local.set $len (i32.add (local.get $len) (i32.load (i32.const 8))))
        (br $more)))
    (local.get $len))

  ;; Is `c` ASCII whitespace (space, \t, \n, \r)?
  (func $is_space (param $c i32) (result i32)
    (i32.or (i32.or (i32.eq (local.get $c) (i32.const 32))
                    (i32.eq (local.get $c) (i32.const 9)))
            (i32.or (i32.eq (local.get $c) (i32.const 10))
                    (i32.eq (local.get $c) (i32.const 13)))))

  ;; Parse [ptr, ptr+len) as: whitespace* digit+ whitespace*.
  ;; Returns the value, or -1 if the syntax is wrong or the value is
  ;; >= 10^18 (so every accepted value fits comfortably in an i64).
  (func $parse_u64 (param $ptr i32) (param $len i32) (result i64)
    (local $end i32) (local $d i32) (local $acc i64) (local $digits i32)
    (local.set $end (i32.add (local.get $ptr) (local.get $len)))
    ;; skip leading whitespace
    (block $b
      (loop $l
        (br_if $b (i32.ge_u (local.get $ptr) (local.get $end)))
        (br_if $b (i32.eqz (call $is_space (i32.load8_u (local.get $ptr)))))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (br $l)))
    ;; digits: acc = acc*10 + d
    (block $b
      (loop $l
        (br_if $b (i32.ge_u (local.get $ptr) (local.get $end)))
        (local.set $d (i32.sub (i32.load8_u (local.get $ptr)) (i32.const 48)))
        (br_if $b (i32.gt_u (local.get $d) (i32.const 9)))  ;; not '0'..'9'
        (if (i64.ge_u (local.get $acc) (i64.const 100000000000000000))
          (then (return (i64.const -1))))                     ;; too many digits
        (local.set $acc (i64.add (i64.mul (local.get $acc) (i64.const 10))
                                 (i64.extend_i32_u (local.get $d))))
        (local.set $digits (i32.add (local.get $digits) (i32.const 1)))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (br $l)))
    (if (i32.eqz (local.get $digits)) (then (return (i64.const -1))))
    ;; only whitespace may follow
    (block $b
      (loop $l
        (br_if $b (i32.ge_u (local.get $ptr) (local.get $end)))
        (if (i32.eqz (call $is_space (i32.load8_u (local.get $ptr))))
          (then (return (i64.const -1))))
        (local.set $ptr (i32.add (local.get $ptr) (i32.const 1)))
        (br $l)))
    (local.get $acc))

  ;; Entry point.
  (func $start (export "_start")
    (local $len i32) (local $n i64)
    ;; read and parse n; input filling the whole buffer counts as too long
    (local.set $len (call $read_all (global.get $IN) (global.get $IN_CAP)))
    (local.set $n (i64.const -1))
    (if (i32.lt_u (local.get $len) (global.get $IN_CAP))
      (then (local.set $n (call $parse_u64 (global.get $IN) (local.get $len)))))
    (if (i64.eq (local.get $n) (i64.const -1))
      (then
        (call $write_all (i32.const 2) (i32.const 256) (i32.const 47))
        (call $proc_exit (i32.const 2))
        (unreachable)))
    ;; n > 65536 pages (4 GiB) can never succeed: answer without trying
    (if (i64.gt_u (local.get $n) (i64.const 65536))
      (then
        (call $write_all (i32.const 1) (i32.const 72) (i32.const 5))
        (return)))
    ;; memory.grow returns the old size in pages, or -1 on failure
    (if (i32.eq (memory.grow (i32.wrap_i64 (local.get $n))) (i32.const -1))
      (then (call $write_all (i32.const 1) (i32.const 72) (i32.const 5)))
      (else (call $write_all (i32.const 1) (i32.const 64) (i32.const 3)))))
)
