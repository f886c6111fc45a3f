;; bigout (test) — floods stdout.
;;
;; Input:  ignored.
;; Output: 64 MiB of 'x' (0x78), written as 1024 chunks of 64 KiB.
;; Exit:   0 if everything was written; 1 as soon as fd_write reports an
;;         error or writes nothing (e.g. the runtime's output cap is hit).
;;         The runtime may also simply kill it.
;;
;; Memory layout (2 pages):
;;   0..8        iovec { buf_ptr, buf_len }
;;   8..12       nwritten result slot
;;   65536..     64 KiB chunk of 'x' (the whole second page)
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))

  (memory (export "memory") 2)

  (global $BUF i32 (i32.const 65536))      ;; chunk address
  (global $CHUNK i32 (i32.const 65536))    ;; chunk size (64 KiB)
  (global $CHUNKS i32 (i32.const 1024))    ;; 1024 * 64 KiB = 64 MiB

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

  ;; Entry point.
  (func $start (export "_start")
    (local $i i32)
    ;; fill the chunk with 'x' (bulk-memory memory.fill)
    (memory.fill (global.get $BUF) (i32.const 0x78) (global.get $CHUNK))
    ;; write it CHUNKS times
    (local.set $i (global.get $CHUNKS))
    (loop $chunk
      (call $write_all (i32.const 1) (global.get $BUF) (global.get $CHUNK))
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $chunk (local.get $i))))
)
