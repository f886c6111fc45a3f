#!/usr/bin/env bash
# Installs what Luge needs on a fresh Debian 12 machine. Idempotent; safe to run every time.
# A Rust toolchain (stable, 1.95+), which the machine image provides, and the Debian packages
# that build the C functions in functions/ (scripts/install-deps.sh: clang, lld, wasi-libc, ...).
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found; install Rust 1.95+ (stable) first" >&2
    exit 1
fi
cargo --version
# CI checks formatting and lints: both components must be there (rustup's default profile has
# them; a minimal one does not, and CI cannot download them).
for component in fmt clippy; do
    if ! cargo "$component" --version >/dev/null 2>&1; then
        echo "setup: cargo $component not found; add it (rustup component add ${component/fmt/rustfmt})" >&2
        exit 1
    fi
done
"$(dirname "$0")/install-deps.sh"
# The C functions (wasm and native builds, inputs, expected outputs): the runtime's byte-equality
# test reads functions/build/. Incremental; a few seconds from clean.
make -s -C "$(dirname "$0")/../functions"
