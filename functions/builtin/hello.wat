;; hello — a greeting.
;;
;; Input:  optional name on stdin (only the first 1024 bytes are used).
;;         Trailing '\n' / '\r' characters are trimmed.
;; Output: "Hello from Luge!\n"   if the (trimmed) input is empty,
;;         "Hello, <name>!\n"     otherwise.
;; Exit:   0 on success; 1 if fd_read/fd_write reports an error.
;;
;; Memory layout (1 page):
;;   0..8        iovec { buf_ptr, buf_len }
;;   8..12       nread / nwritten result slot
;;   256..       constant strings (data segments)
;;   1024..2048  input buffer (name)
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  ;; Constant strings.
  (data (i32.const 256) "Hello from Luge!\n")  ;; 17 bytes
  (data (i32.const 288) "Hello, ")             ;;  7 bytes
  (data (i32.const 296) "!\n")                 ;;  2 bytes

  (global $NAME i32 (i32.const 1024))     ;; input buffer address
  (global $NAME_CAP i32 (i32.const 1024)) ;; input buffer size

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
        ;; buffer full?
        (br_if $done (i32.eq (local.get $len) (local.get $cap)))
        ;; iovec = { ptr+len, cap-len }
        (i32.store (i32.const 0) (i32.add (local.get $ptr) (local.get $len)))
        (i32.store (i32.const 4) (i32.sub (local.get $cap) (local.get $len)))
        (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        ;; EOF?
        (br_if $done (i32.eqz (i32.load (i32.const 8))))
        (local.set $len (i32.add (local.get $len) (i32.load (i32.const 8))))
        (br $more)))
    (local.get $len))

  ;; Entry point.
  (func $start (export "_start")
    (local $len i32)
    (local $c i32)
    (local.set $len (call $read_all (global.get $NAME) (global.get $NAME_CAP)))

    ;; Trim trailing '\n' (10) and '\r' (13).
    (block $trimmed
      (loop $trim
        (br_if $trimmed (i32.eqz (local.get $len)))
        (local.set $c (i32.load8_u
          (i32.add (global.get $NAME) (i32.sub (local.get $len) (i32.const 1)))))
        (br_if $trimmed (i32.and (i32.ne (local.get $c) (i32.const 10))
                                 (i32.ne (local.get $c) (i32.const 13))))
        (local.set $len (i32.sub (local.get $len) (i32.const 1)))
        (br $trim)))

    (if (i32.eqz (local.get $len))
      ;; No name: the default greeting.
      (then (call $write_all (i32.const 1) (i32.const 256) (i32.const 17)))
      ;; "Hello, " <name> "!\n"
      (else
        (call $write_all (i32.const 1) (i32.const 288) (i32.const 7))
        (call $write_all (i32.const 1) (global.get $NAME) (local.get $len))
        (call $write_all (i32.const 1) (i32.const 296) (i32.const 2)))))
)
