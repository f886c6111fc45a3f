;; fib — naive recursive Fibonacci, a CPU-bound benchmark.
;;
;; Input:  a decimal integer n, 0 <= n <= 90, in ASCII on stdin.
;;         Leading/trailing whitespace (space, \t, \n, \r) is allowed;
;;         the whole input must be at most 255 bytes. Example: "25\n".
;; Output: fib(n) in decimal followed by "\n" (fib(0)=0, fib(1)=1).
;;         Example: "75025\n".
;; Exit:   0 on success;
;;         2 with a message on stderr if the input is not a number or n > 90;
;;         1 if fd_read/fd_write reports an error.
;;
;; fib is computed with the exponential recursion fib(n-1) + fib(n-2) on
;; purpose (~1.6^n calls), so run time grows quickly with n: fib(25) is
;; ~250k calls, fib(40) takes seconds, fib(90) never finishes in practice
;; and is stopped by the deadline.
;;
;; Memory layout (1 page):
;;   0..8        iovec { buf_ptr, buf_len }
;;   8..12       nread / nwritten result slot
;;   64..96      decimal output buffer (digits written right to left)
;;   256..       error message (data segment)
;;   1024..1280  input buffer
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (data (i32.const 256) "fib: expected a decimal integer n with 0 <= n <= 90 on stdin\n") ;; 61 bytes

  (global $IN i32 (i32.const 1024))     ;; input buffer address
  (global $IN_CAP i32 (i32.const 256))  ;; input buffer size
  (global $OUT_END i32 (i32.const 96))  ;; end of the decimal output buffer

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

  ;; Format `v` as unsigned decimal ending just before `end`, right to left.
  ;; Returns the address of the first digit.
  (func $fmt_u64 (param $v i64) (param $end i32) (result i32)
    (loop $digit
      (local.set $end (i32.sub (local.get $end) (i32.const 1)))
      (i64.store8 (local.get $end)
        (i64.add (i64.rem_u (local.get $v) (i64.const 10)) (i64.const 48)))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $v) (i64.const 0))))
    (local.get $end))

  ;; fib(n) by the naive (exponential) recursion.
  (func $fib (param $n i32) (result i64)
    (if (result i64) (i32.lt_u (local.get $n) (i32.const 2))
      (then (i64.extend_i32_u (local.get $n)))
      (else (i64.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))

  ;; Entry point.
  (func $start (export "_start")
    (local $len i32) (local $n i64) (local $first i32)
    ;; read and parse n; input filling the whole buffer counts as too long
    (local.set $len (call $read_all (global.get $IN) (global.get $IN_CAP)))
    (local.set $n (i64.const -1))
    (if (i32.lt_u (local.get $len) (global.get $IN_CAP))
      (then (local.set $n (call $parse_u64 (global.get $IN) (local.get $len)))))
    ;; reject bad input and n > 90 (unsigned compare also catches -1)
    (if (i64.gt_u (local.get $n) (i64.const 90))
      (then
        (call $write_all (i32.const 2) (i32.const 256) (i32.const 61))
        (call $proc_exit (i32.const 2))
        (unreachable)))
    ;; "<fib(n)>\n"
    (i32.store8 (i32.sub (global.get $OUT_END) (i32.const 1)) (i32.const 10))
    (local.set $first (call $fmt_u64
      (call $fib (i32.wrap_i64 (local.get $n)))
      (i32.sub (global.get $OUT_END) (i32.const 1))))
    (call $write_all (i32.const 1) (local.get $first)
      (i32.sub (global.get $OUT_END) (local.get $first))))
)
