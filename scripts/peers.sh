#!/usr/bin/env bash
# Builds the production peer `luge bench peers` compares Luge with, into target/peers:
# - wasmtime-cli, the same version as the Wasmtime Luge pins (Cargo.toml), for `wasmtime serve`;
# - wasm-tools, which turns the handlers in scripts/peers/ (http-noop.wat, http-spin.wat) into
#   wasi:http/proxy components (target/peers/<handler>.wasm) against the WIT files of that
#   version's wasmtime-wasi-http crate: no Rust wasm target needed.
# Idempotent. From clean it compiles both from crates.io: ~25 minutes on 2 cores, which is why
# CI does not run it (`luge bench peers` leaves `wasmtime serve` out, saying why, when it is
# not built). nginx and wrk come from Debian (scripts/install-deps.sh).
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/target/peers"
version=$(sed -n 's/^wasmtime = { version = "=\([0-9.]*\)".*/\1/p' "$root/Cargo.toml")
if [ -z "$version" ]; then
    echo "peers: cannot read the pinned Wasmtime version from Cargo.toml" >&2
    exit 1
fi
wasm_tools_version=1.263.0
installed() { "$out/bin/$1" --version 2>/dev/null | cut -d ' ' -f 2; }
if [ "$(installed wasm-tools)" != "$wasm_tools_version" ]; then
    cargo install --locked --root "$out" "wasm-tools@$wasm_tools_version"
fi
if [ "$(installed wasmtime)" != "$version" ]; then
    cargo install --locked --root "$out" "wasmtime-cli@$version"
fi
registry="${CARGO_HOME:-$HOME/.cargo}/registry/src"
wit=$(ls -d "$registry"/*/"wasmtime-wasi-http-$version/wit" 2>/dev/null | head -n 1)
if [ -z "$wit" ]; then
    echo "peers: the WIT files of wasmtime-wasi-http $version are not in $registry" >&2
    exit 1
fi
for handler in http-noop http-spin; do
    "$out/bin/wasm-tools" component embed "$wit" --world wasi:http/proxy \
        "$root/scripts/peers/$handler.wat" -o "$out/$handler.core.wasm"
    "$out/bin/wasm-tools" component new "$out/$handler.core.wasm" -o "$out/$handler.wasm"
    "$out/bin/wasm-tools" validate "$out/$handler.wasm"
done
echo "peers: $("$out/bin/wasmtime" --version), $out/http-noop.wasm and $out/http-spin.wasm are ready"
