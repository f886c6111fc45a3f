;; spin_relay — spin's CPU burner, relaying its input: a chain of it passes k from stage to stage.
;;
;; Input:  as spin (functions/builtin/spin.wat): a decimal iteration count k in ASCII on stdin,
;;         at most 255 bytes with surrounding whitespace.
;; Output: its input, byte for byte (so that stage k's stdout is stage k+1's k).
;; Exit:   as spin: 0, 2 if the input is not a number, 1 on an I/O error.
;;
;; The hash loop is spin's; its result is stored at 64..72 so that the loop stays live.
;; Used by `luge bench edge-rt` (Edge-RT Fig. 11: chains of stages of known execution).
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (data (i32.const 128) "0123456789abcdef")
  (data (i32.const 256) "spin: expected a decimal iteration count k (0 <= k < 10^18) on stdin\n") ;; 69 bytes

  (global $IN i32 (i32.const 1024))     ;; input buffer address
  (global $IN_CAP i32 (i32.const 256))  ;; input buffer size
  (global $OUT i32 (i32.const 64))      ;; hex output buffer
  (global $HEX i32 (i32.const 128))     ;; hex digit table

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

  ;; Run the hash loop k times from x = 0 and return x.
  (func $spin (param $k i64) (result i64)
    (local $x i64)
    (block $done
      (br_if $done (i64.eqz (local.get $k)))
      (loop $iter
        ;; LCG step, then xor-shift to mix the high bits down
        (local.set $x (i64.add (i64.mul (local.get $x) (i64.const 6364136223846793005))
                               (i64.const 1442695040888963407)))
        (local.set $x (i64.xor (local.get $x)
                               (i64.shr_u (local.get $x) (i64.const 33))))
        ;; k -= 1; continue while k != 0
        (local.set $k (i64.sub (local.get $k) (i64.const 1)))
        (br_if $iter (i64.ne (local.get $k) (i64.const 0)))))
    (local.get $x))

  ;; Entry point.
  (func $start (export "_start")
    (local $len i32) (local $k i64) (local $x i64)
    ;; read and parse k; input filling the whole buffer counts as too long
    (local.set $len (call $read_all (global.get $IN) (global.get $IN_CAP)))
    (local.set $k (i64.const -1))
    (if (i32.lt_u (local.get $len) (global.get $IN_CAP))
      (then (local.set $k (call $parse_u64 (global.get $IN) (local.get $len)))))
    (if (i64.eq (local.get $k) (i64.const -1))
      (then
        (call $write_all (i32.const 2) (i32.const 256) (i32.const 69))
        (call $proc_exit (i32.const 2))
        (unreachable)))
    (local.set $x (call $spin (local.get $k)))
    (i64.store (global.get $OUT) (local.get $x))
    (call $write_all (i32.const 1) (global.get $IN) (local.get $len)))
)
