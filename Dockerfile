# syntax=docker/dockerfile:1
# The Luge node image (docs/deploy.md): `docker build -t luge .` at the repository root.
# crates/luge/tests/deploy.rs checks this file against the code: the user, the ports, the
# flags and the cache directory. No Docker engine runs in CI, so the build itself is not.

# ---- builder: the C edge functions (wasm32-wasi) and the `luge` binary
FROM rust:1.95-bookworm AS builder
WORKDIR /src
# clang, lld, wasi-libc, ... by the script the development machines use (one list of packages).
COPY scripts/install-deps.sh scripts/install-deps.sh
RUN LUGE_DEPS=build ./scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    make -C functions \
    && cargo build --release --locked -p luge \
    && install -D -m 0755 target/release/luge /out/luge \
    && mkdir -p /out/cache

# ---- runtime: the binary, the edge functions and the manifest that serves them; nothing else
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/luge /usr/local/bin/luge
# examples/edge.toml names its modules ../functions/build/wasm/*.wasm: keep that layout.
COPY --from=builder /src/examples/edge.toml /opt/luge/examples/edge.toml
COPY --from=builder /src/functions/build/wasm/ /opt/luge/functions/build/wasm/
# The AoT cache is $XDG_CACHE_HOME/luge: mount a writable volume (or a tmpfs) here when the
# root filesystem is read-only. Luge creates the `luge` directory in it, owner-only (0700).
COPY --from=builder --chown=65532:65532 /out/cache/ /var/cache/luge/
ENV XDG_CACHE_HOME=/var/cache/luge
WORKDIR /opt/luge
USER 65532:65532
# HTTP (functions, /healthz, /readyz, /metrics) and UDP-RPC. The admin listener stays on
# loopback inside the container and is not exposed.
EXPOSE 8080/tcp 8081/udp
ENTRYPOINT ["/usr/local/bin/luge"]
# The built-in example functions; `--manifest /opt/luge/examples/edge.toml` serves the C ones.
CMD ["serve", "--http", "0.0.0.0:8080", "--rpc", "0.0.0.0:8081", "--admin", "127.0.0.1:8082", "--log-format", "json"]
