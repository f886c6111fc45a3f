#!/usr/bin/env bash
# Installs the Debian packages needed to build Luge's C functions (functions/) to wasm32-wasi and
# to native code: clang, lld, wasi-libc, the wasm32 compiler-rt builtins, wabt (wasm-objdump /
# wasm2wat for inspecting modules) and make; and Debian's chromium, the headless browser the status
# page's test loads the page in (crates/luge-server/tests/status_page.rs); and HAProxy, the load
# balancer scripts/cluster.sh puts in front of several nodes (crates/luge/tests/cluster.rs); and wrk
# and nginx, the load generator and the HTTP server `luge bench peers` measures Luge against.
#
# For the tests also procps (pgrep: scripts/fuzz.sh reads the fuzzer's memory) and git (a build
# names its commit, which a test checks).
#
# Idempotent: checks each package is installed (not merely known to dpkg: a removed package keeps
# its configuration) and runs apt-get only when something is missing. Services the packages
# bring (nginx, haproxy) are not started: only their binaries are used, and a package whose
# service failed to start (port 80 taken, no IPv6 for nginx's default site) would fail the
# install.
# As root it installs what is missing; as any other user with packages missing it fails with a
# clear message (it never calls sudo on its own).
set -euo pipefail

PACKAGES=(clang lld wasi-libc libclang-rt-14-dev-wasm32 wabt make)
# What only the tests need; `LUGE_DEPS=build` (the container's builder stage) leaves it out.
if [ "${LUGE_DEPS:-all}" != build ]; then
    PACKAGES+=(chromium haproxy wrk nginx-light procps git)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all present (${PACKAGES[*]})"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages: ${missing[*]}" >&2
    echo "install-deps: run as root (e.g. 'sudo $0') or install them with:" >&2
    echo "    apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# No service starts during the install (Debian's policy-rc.d protocol: 101 = not allowed), unless
# the machine has a policy of its own.
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
# Refresh the package lists only if apt has never fetched them (fresh container images ship none).
if ! ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
    apt-get update
fi
if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
    echo "install-deps: install failed; refreshing package lists and retrying once" >&2
    apt-get update
    apt-get install -y --no-install-recommends "${missing[@]}"
fi
echo "install-deps: installed ${missing[*]}"
