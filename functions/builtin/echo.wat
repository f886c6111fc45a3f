;; echo — copies the whole request body to the response.
;;
;; Input:  any bytes on stdin, of any size.
;; Output: exactly the same bytes on stdout.
;; Exit:   0 on success; 1 if fd_read/fd_write reports an error
;;         (or a write makes no progress).
;;
;; Streams through a fixed 64 KiB buffer, so memory use is constant no
;; matter how large the body is.
;;
;; Memory layout (2 pages):
;;   0..8        iovec { buf_ptr: i32, buf_len: i32 }
;;   8..12       nread / nwritten result slot
;;   65536..     64 KiB transfer buffer (the whole second page)
(module
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 2)

  (global $BUF i32 (i32.const 65536))      ;; transfer buffer address
  (global $BUF_LEN i32 (i32.const 65536))  ;; transfer buffer size

  ;; Write all `len` bytes at `ptr` to `fd`, retrying on partial writes.
  ;; Exits with code 1 on an error or a zero-byte write.
  (func $write_all (param $fd i32) (param $ptr i32) (param $len i32)
    (local $n i32)
    (block $done
      (loop $more
        ;; nothing left to write?
        (br_if $done (i32.eqz (local.get $len)))
        ;; iovec = { ptr, len }
        (i32.store (i32.const 0) (local.get $ptr))
        (i32.store (i32.const 4) (local.get $len))
        ;; non-zero errno -> fail
        (if (call $fd_write (local.get $fd) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        ;; no progress -> fail (avoids spinning forever)
        (local.set $n (i32.load (i32.const 8)))
        (if (i32.eqz (local.get $n))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        ;; advance past the bytes that were written
        (local.set $ptr (i32.add (local.get $ptr) (local.get $n)))
        (local.set $len (i32.sub (local.get $len) (local.get $n)))
        (br $more))))

  ;; Entry point: read a chunk, write it back, until stdin hits EOF.
  (func $start (export "_start")
    (local $n i32)
    (block $eof
      (loop $chunk
        ;; iovec = { BUF, BUF_LEN }; read from fd 0
        (i32.store (i32.const 0) (global.get $BUF))
        (i32.store (i32.const 4) (global.get $BUF_LEN))
        (if (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
          (then (call $proc_exit (i32.const 1)) (unreachable)))
        ;; 0 bytes read = end of input
        (local.set $n (i32.load (i32.const 8)))
        (br_if $eof (i32.eqz (local.get $n)))
        ;; send the chunk to stdout and go again
        (call $write_all (i32.const 1) (global.get $BUF) (local.get $n))
        (br $chunk))))
)
