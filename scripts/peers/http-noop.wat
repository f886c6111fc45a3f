;; http-noop — a wasi-http handler that does nothing: `wasmtime serve`'s counterpart of Luge's
;; built-in `noop`, for `luge bench peers`.
;;
;; Every request is answered `200` with no headers and an empty body: the handler drops the
;; request, builds an empty `fields`, an `outgoing-response` from it, and sets it on the
;; response outparam. It never takes the response's body, so the host sends an empty one.
;;
;; This is the core module of the component; `scripts/peers.sh` turns it into a component of
;; the `wasi:http/proxy` world with `wasm-tools component embed` and `component new`, against
;; the WIT files of the wasmtime-wasi-http crate of the Wasmtime version Luge pins (no Rust
;; wasm target is needed). The import signatures are the canonical ABI's flattening of the WIT
;; functions (`wasm-tools component embed --dummy` prints them):
;;   [constructor]fields: func() -> fields
;;   [constructor]outgoing-response: func(headers: headers) -> outgoing-response
;;   [static]response-outparam.set: func(param: response-outparam,
;;                                       response: result<outgoing-response, error-code>)
;;     flattened: the outparam, the result's case (0 = ok), then the joined payload slots of
;;     `outgoing-response` and `error-code` (the response handle in the first).
(module
  (import "wasi:http/types@0.2.12" "[constructor]fields"
    (func $fields (result i32)))
  (import "wasi:http/types@0.2.12" "[constructor]outgoing-response"
    (func $response (param i32) (result i32)))
  (import "wasi:http/types@0.2.12" "[static]response-outparam.set"
    (func $set (param i32 i32 i32 i32 i64 i32 i32 i32 i32)))
  (import "wasi:http/types@0.2.12" "[resource-drop]incoming-request"
    (func $drop-request (param i32)))

  (memory (export "memory") 0)

  (func (export "wasi:http/incoming-handler@0.2.12#handle") (param $request i32) (param $out i32)
    (call $drop-request (local.get $request))
    (call $set
      (local.get $out)
      (i32.const 0)                       ;; ok
      (call $response (call $fields))     ;; the response
      (i32.const 0) (i64.const 0) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0))))
