;; leak (test) — detects state leaking between requests.
;;
;; Input:  any bytes on stdin; only the first 16 are used.
;; Output: the 16 bytes found at memory offset 1024 at the start of the
;;         request. In a fresh sandbox these are always 16 zero bytes.
;; Exit:   0 on success; 1 if fd_read/fd_write reports an error.
;;
;; After writing the output it copies (up to) the first 16 input bytes to
;; offset 1024. If the runtime ever reused a sandbox (or its memory) for a
;; second request, that request would see the previous request's bytes
;; instead of zeros.
;;
;; Memory layout (1 page):
;;   0..8        iovec { buf_ptr, buf_len }
;;   8..12       nread / nwritten result slot
;;   1024..1040  the "secret" slot that must start out zeroed
;;   2048..2064  input buffer (first 16 bytes of stdin)
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 1)

  (global $SLOT i32 (i32.const 1024))  ;; the 16-byte slot under test
  (global $IN i32 (i32.const 2048))    ;; input buffer

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

  ;; Entry point.
  (func $start (export "_start")
    (local $n i32)
    ;; 1. read up to 16 bytes of input
    (local.set $n (call $read_all (global.get $IN) (i32.const 16)))
    ;; 2. report what the slot holds right now (zeros if fresh)
    (call $write_all (i32.const 1) (global.get $SLOT) (i32.const 16))
    ;; 3. plant the input in the slot for any later request to find
    (memory.copy (global.get $SLOT) (global.get $IN) (local.get $n)))
)
