;; args (test) — dumps the WASI arguments and environment.
;;
;; Input:  ignored.
;; Output: every argument followed by "\n", then one more "\n" (a blank
;;         line), then every environment entry ("KEY=VALUE") followed by
;;         "\n". E.g. args [a, b], env [X=1] -> "a\nb\n\nX=1\n".
;;         The runtime passes the function name, request id and deadline
;;         here, so tests can check them.
;; Exit:   0 on success; 1 on a WASI error or if the args (or the environ)
;;         need more than 31 KiB (pointer array + strings).
;;
;; Memory layout (1 page):
;;   0..8          iovec { buf_ptr, buf_len }
;;   8..12         nwritten result slot
;;   16..20        count       (from *_sizes_get)
;;   20..24        buffer size (from *_sizes_get)
;;   32            "\n"
;;   64..          error message
;;   1024..32768   args:    pointer array, then the NUL-terminated strings
;;   32768..65536  environ: pointer array, then the NUL-terminated strings
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit"
    (func $proc_exit (param i32)))
  (import "wasi_snapshot_preview1" "args_sizes_get"
    (func $args_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "args_get"
    (func $args_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_sizes_get"
    (func $environ_sizes_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get"
    (func $environ_get (param i32 i32) (result i32)))

  (memory (export "memory") 1)

  (data (i32.const 32) "\n")
  (data (i32.const 64) "args: args or environ too large\n")  ;; 32 bytes

  (global $ARGS i32 (i32.const 1024))   ;; args region
  (global $ENV i32 (i32.const 32768))   ;; environ region
  (global $REGION i32 (i32.const 31744)) ;; usable bytes per region

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

  ;; Exit with code 1 if a WASI call returned a non-zero errno.
  (func $check (param $errno i32)
    (if (local.get $errno)
      (then (call $proc_exit (i32.const 1)) (unreachable))))

  ;; Check that `count` pointers plus `size` string bytes fit in a region;
  ;; otherwise print an error and exit with code 1.
  (func $check_fits (param $count i32) (param $size i32)
    (if (i32.or (i32.or (i32.gt_u (local.get $count) (global.get $REGION))
                        (i32.gt_u (local.get $size) (global.get $REGION)))
                (i32.gt_u (i32.add (i32.mul (local.get $count) (i32.const 4))
                                   (local.get $size))
                          (global.get $REGION)))
      (then
        (call $write_all (i32.const 2) (i32.const 64) (i32.const 32))
        (call $proc_exit (i32.const 1))
        (unreachable))))

  ;; Length of the NUL-terminated string at `p`.
  (func $strlen (param $p i32) (result i32)
    (local $q i32)
    (local.set $q (local.get $p))
    (block $end
      (loop $scan
        (br_if $end (i32.eqz (i32.load8_u (local.get $q))))
        (local.set $q (i32.add (local.get $q) (i32.const 1)))
        (br $scan)))
    (i32.sub (local.get $q) (local.get $p)))

  ;; Write each of the `count` strings pointed to by the array at `ptrs`
  ;; to stdout, each followed by "\n".
  (func $dump (param $count i32) (param $ptrs i32)
    (local $s i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $count)))
        (local.set $s (i32.load (local.get $ptrs)))
        (call $write_all (i32.const 1) (local.get $s) (call $strlen (local.get $s)))
        (call $write_all (i32.const 1) (i32.const 32) (i32.const 1))
        (local.set $ptrs (i32.add (local.get $ptrs) (i32.const 4)))
        (local.set $count (i32.sub (local.get $count) (i32.const 1)))
        (br $next))))

  ;; Entry point.
  (func $start (export "_start")
    (local $count i32)
    ;; args: sizes, fetch (pointers first, strings after them), print
    (call $check (call $args_sizes_get (i32.const 16) (i32.const 20)))
    (local.set $count (i32.load (i32.const 16)))
    (call $check_fits (local.get $count) (i32.load (i32.const 20)))
    (call $check (call $args_get (global.get $ARGS)
      (i32.add (global.get $ARGS) (i32.mul (local.get $count) (i32.const 4)))))
    (call $dump (local.get $count) (global.get $ARGS))

    ;; the blank line separating args from environ
    (call $write_all (i32.const 1) (i32.const 32) (i32.const 1))

    ;; environ: same steps in its own region
    (call $check (call $environ_sizes_get (i32.const 16) (i32.const 20)))
    (local.set $count (i32.load (i32.const 16)))
    (call $check_fits (local.get $count) (i32.load (i32.const 20)))
    (call $check (call $environ_get (global.get $ENV)
      (i32.add (global.get $ENV) (i32.mul (local.get $count) (i32.const 4)))))
    (call $dump (local.get $count) (global.get $ENV)))
)
