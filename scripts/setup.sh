#!/usr/bin/env bash
# Installs what Luge needs on a fresh Debian 12 machine. Idempotent; safe to run every time.
# Today that is only a Rust toolchain (stable, 1.95+), which the machine image provides.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null; then
    echo "setup: cargo not found; install Rust 1.95+ (stable) first" >&2
    exit 1
fi
cargo --version
