;; http-spin — a wasi-http handler that burns CPU: `wasmtime serve`'s counterpart of Luge's
;; built-in `spin`, so that `luge bench run` can drive both with the same calibrated mix.
;;
;; Request body: a decimal iteration count k (what Luge's `spin` reads on stdin; any byte that is
;; not a digit is skipped). The handler reads the whole body, runs the same hash loop k times
;;   x = x * 6364136223846793005 + 1442695040888963407; x = x ^ (x >> 33)   (wrapping u64)
;; and answers `200` with an empty body (Luge's `spin` prints x; the loop is the work compared).
;;
;; Built like http-noop.wat by scripts/peers.sh. Canonical ABI, as `wasm-tools component embed
;; --dummy-names legacy` prints it for the wasi:http/proxy world:
;;   [method]incoming-request.consume(self) -> result<incoming-body>          (self, retptr)
;;   [method]incoming-body.stream(self) -> result<input-stream>               (self, retptr)
;;   [method]input-stream.blocking-read(self, len: u64)
;;       -> result<list<u8>, stream-error>                                    (self, len, retptr)
;; A result in memory: its case byte at 0, the payload from offset 4 (a handle; or a list's
;; pointer at 4 and length at 8). Lists are allocated with `cabi_realloc`: a bump allocator,
;; enough for an instance that serves one request.
(module
  (import "wasi:http/types@0.2.12" "[constructor]fields"
    (func $fields (result i32)))
  (import "wasi:http/types@0.2.12" "[constructor]outgoing-response"
    (func $response (param i32) (result i32)))
  (import "wasi:http/types@0.2.12" "[static]response-outparam.set"
    (func $set (param i32 i32 i32 i32 i64 i32 i32 i32 i32)))
  (import "wasi:http/types@0.2.12" "[method]incoming-request.consume"
    (func $consume (param i32 i32)))
  (import "wasi:http/types@0.2.12" "[method]incoming-body.stream"
    (func $stream (param i32 i32)))
  (import "wasi:io/streams@0.2.12" "[method]input-stream.blocking-read"
    (func $read (param i32 i64 i32)))
  (import "wasi:io/streams@0.2.12" "[resource-drop]input-stream"
    (func $drop-stream (param i32)))
  (import "wasi:http/types@0.2.12" "[resource-drop]incoming-body"
    (func $drop-body (param i32)))
  (import "wasi:http/types@0.2.12" "[resource-drop]incoming-request"
    (func $drop-request (param i32)))

  (memory (export "memory") 1)
  ;; 0..16: the return area of the calls above. The bump allocator starts at 1024.
  (global $heap (mut i32) (i32.const 1024))
  (global $hash (mut i64) (i64.const 0))

  (func (export "cabi_realloc") (param $old i32) (param $old_size i32) (param $align i32)
    (param $size i32) (result i32)
    (local $at i32)
    ;; Round up to the alignment (a power of two).
    (local.set $at
      (i32.and
        (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
        (i32.sub (i32.const 0) (local.get $align))))
    (global.set $heap (i32.add (local.get $at) (local.get $size)))
    (if (i32.gt_u (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
      (then
        (if (i32.eq
              (memory.grow
                (i32.add
                  (i32.shr_u (i32.sub (global.get $heap) (i32.mul (memory.size) (i32.const 65536)))
                             (i32.const 16))
                  (i32.const 1)))
              (i32.const -1))
          (then unreachable))))
    (if (i32.ne (local.get $old_size) (i32.const 0))
      (then (memory.copy (local.get $at) (local.get $old) (local.get $old_size))))
    (local.get $at))

  ;; The body's digits as a number.
  (func $iterations (param $request i32) (result i64)
    (local $body i32) (local $stream i32) (local $k i64)
    (local $p i32) (local $end i32) (local $c i32)
    (call $consume (local.get $request) (i32.const 0))
    (if (i32.load8_u (i32.const 0)) (then (return (i64.const 0))))
    (local.set $body (i32.load (i32.const 4)))
    (call $stream (local.get $body) (i32.const 0))
    (if (i32.load8_u (i32.const 0)) (then (return (i64.const 0))))
    (local.set $stream (i32.load (i32.const 4)))
    (block $closed
      (loop $more
        (call $read (local.get $stream) (i64.const 256) (i32.const 0))
        (br_if $closed (i32.load8_u (i32.const 0)))
        (local.set $p (i32.load (i32.const 4)))
        (local.set $end (i32.add (local.get $p) (i32.load (i32.const 8))))
        (block $chunk
          (loop $byte
            (br_if $chunk (i32.ge_u (local.get $p) (local.get $end)))
            (local.set $c (i32.sub (i32.load8_u (local.get $p)) (i32.const 48)))
            (if (i32.lt_u (local.get $c) (i32.const 10))
              (then
                (local.set $k
                  (i64.add (i64.mul (local.get $k) (i64.const 10))
                           (i64.extend_i32_u (local.get $c))))))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (br $byte)))
        (br $more)))
    (call $drop-stream (local.get $stream))
    (call $drop-body (local.get $body))
    (local.get $k))

  (func (export "wasi:http/incoming-handler@0.2.12#handle") (param $request i32) (param $out i32)
    (local $k i64) (local $x i64)
    (local.set $k (call $iterations (local.get $request)))
    (call $drop-request (local.get $request))
    (block $done
      (loop $spin
        (br_if $done (i64.eqz (local.get $k)))
        (local.set $x
          (i64.add (i64.mul (local.get $x) (i64.const 6364136223846793005))
                   (i64.const 1442695040888963407)))
        (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 33))))
        (local.set $k (i64.sub (local.get $k) (i64.const 1)))
        (br $spin)))
    (global.set $hash (local.get $x))
    (call $set
      (local.get $out)
      (i32.const 0)
      (call $response (call $fields))
      (i32.const 0) (i64.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))))
