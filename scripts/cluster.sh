#!/usr/bin/env bash
# Starts a small Luge cluster on this machine: N `luge serve` nodes (1 worker each) behind
# HAProxy, which weights them by their load-balancer agents (`luge serve --agent`: HAProxy
# agent-check, `ready up <w>%` from each node's queue, `drain` while it drains) and health-checks them
# on /healthz (which overload never fails, so a node answering 503s is weighted down, not
# ejected). Runs in the foreground until Ctrl-C (or SIGTERM), then stops everything.
#
#   scripts/cluster.sh [--nodes 3] [--base 18000] [--balance agent|roundrobin] [--luge PATH]
#
# Ports: HAProxy on 127.0.0.1:BASE; node i (1…N) serves HTTP on BASE+i, UDP-RPC on BASE+100+i,
# its agent on BASE+200+i. `--balance agent` (default) is `leastconn` with agent weights;
# `roundrobin` ignores the agents (the baseline `luge bench run` compares against). When the
# cluster is up it prints `cluster ready: http://127.0.0.1:BASE` and each node's pid, e.g.
#
#   cargo run --release -p luge -- bench run --target http://127.0.0.1:18000 ...
#
# Needs haproxy (scripts/install-deps.sh installs Debian's).
set -euo pipefail

nodes=3
base=18000
balance=agent
luge=""
while [ $# -gt 0 ]; do
    case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --base) base="$2"; shift 2 ;;
        --balance) balance="$2"; shift 2 ;;
        --luge) luge="$2"; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "cluster: unknown argument $1" >&2; exit 2 ;;
    esac
done
case "$balance" in
    agent|roundrobin) ;;
    *) echo "cluster: --balance is agent or roundrobin" >&2; exit 2 ;;
esac
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "$luge" ]; then
    cargo build --release -q -p luge --manifest-path "$root/Cargo.toml"
    luge="$root/target/release/luge"
fi
command -v haproxy >/dev/null || { echo "cluster: haproxy not found (scripts/install-deps.sh)" >&2; exit 1; }

dir="$(mktemp -d -t luge-cluster.XXXXXX)"
pids=()
stop() {
    trap - EXIT INT TERM
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap stop EXIT
trap 'exit 0' INT TERM

# The nodes' manifest: the built-in functions, and no per-client connection cap or body share —
# every connection comes from the balancer's one address (docs/manifest.md,
# `max_connections_per_client` and `max_buffered_body_bytes_per_client`: 0 behind a load
# balancer).
printf '[server]\nmax_connections_per_client = 0\nmax_buffered_body_bytes_per_client = 0\n' >"$dir/node.toml"
for name in noop echo hello fib spin; do
    printf '\n[[function]]\nname = "%s"\nmodule = "builtin:%s"\n' "$name" "$name" >>"$dir/node.toml"
done

servers=""
for i in $(seq 1 "$nodes"); do
    "$luge" serve --manifest "$dir/node.toml" --workers 1 --admin off \
        --http "127.0.0.1:$((base + i))" --rpc "127.0.0.1:$((base + 100 + i))" \
        --agent "127.0.0.1:$((base + 200 + i))" >"$dir/node$i.out" 2>"$dir/node$i.err" &
    pids+=($!)
    echo "node$i pid $! http http://127.0.0.1:$((base + i)) rpc 127.0.0.1:$((base + 100 + i))"
    agent=""
    if [ "$balance" = agent ]; then
        agent=" agent-check agent-addr 127.0.0.1 agent-port $((base + 200 + i)) agent-inter 100ms"
    fi
    # weight 100: HAProxy applies an agent's `up <w>%` to the configured weight in integers,
    # so at its default weight of 1 anything below 100 % would round down to 0.
    servers+="    server node$i 127.0.0.1:$((base + i)) weight 100 check inter 200ms fall 2 rise 1${agent}"$'\n'
done
algorithm=$([ "$balance" = agent ] && echo leastconn || echo roundrobin)
cat >"$dir/haproxy.cfg" <<EOF
global
    maxconn 8192
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    # A connection refused by a node that died is retried on another one; a request is only
    # ever lost if the node died while running it (it is not replayed: it may have run). Each
    # request opens its own connection to a node: a kept-alive one to a node that has since
    # died would fail after the request was sent, indistinguishable from a death mid-run.
    option http-buffer-request
    http-reuse never
    retries 3
    retry-on conn-failure
    option redispatch 1
frontend luge
    bind 127.0.0.1:$base
    default_backend nodes
backend nodes
    balance $algorithm
    option httpchk GET /healthz
    http-check expect status 200
$servers
EOF
for i in $(seq 1 "$nodes"); do
    for attempt in $(seq 1 400); do
        grep -q "^luge: serving" "$dir/node$i.out" 2>/dev/null && break
        kill -0 "${pids[$((i - 1))]}" 2>/dev/null || { cat "$dir/node$i.err" >&2; exit 1; }
        [ "$attempt" -lt 400 ] || { echo "cluster: node$i did not start" >&2; exit 1; }
        sleep 0.05
    done
done
haproxy -db -f "$dir/haproxy.cfg" &
balancer=$!
pids+=("$balancer")
echo "haproxy pid $balancer balance $balance ($algorithm)"
ready=""
for _ in $(seq 1 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$base") 2>/dev/null; then
        ready=yes
        break
    fi
    sleep 0.05
done
[ -n "$ready" ] || { echo "cluster: haproxy does not accept on $base" >&2; exit 1; }
echo "cluster ready: http://127.0.0.1:$base"
# A node may die (that is what the balancer is for); the cluster ends with the balancer.
wait "$balancer" || true
echo "cluster: haproxy ended; stopping" >&2
exit 1
