#!/usr/bin/env bash
# Load-aware vs round-robin balancing over a `scripts/cluster.sh` cluster: for each trial, for
# each balance (agent, roundrobin — interleaved), starts the cluster, drives it with
# `luge bench run` (HTTP, open loop, the high-bimodal mix by default) and stops it; then prints
# the median of the trials per balance: short- and long-request p99, deadline misses, goodput.
#
#   [TRIALS=3] [DURATION=10s] [WORKLOAD=SPEC] [BASE=18000] scripts/cluster-bench.sh
#
# WORKLOAD defaults to high-bimodal scaled ×10 (short 260 µs, long 20.7 ms) at 40 % of two
# workers. Builds the release binary first. The nodes, HAProxy and the load generator share this
# machine's cores: read the ratios, not the absolute numbers.
set -euo pipefail
case "${1:-}" in
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    "") ;;
    *) echo "cluster-bench: takes no arguments (settings are environment variables; --help)" >&2; exit 2 ;;
esac
trials="${TRIALS:-3}"
duration="${DURATION:-10s}"
workload="${WORKLOAD:-high-bimodal,scale=10,load=0.4,workers=2}"
base="${BASE:-18000}"
root="$(cd "$(dirname "$0")/.." && pwd)"
cargo build --release -q -p luge --manifest-path "$root/Cargo.toml"
luge="$root/target/release/luge"
out="$(mktemp -d -t luge-cluster-bench.XXXXXX)"

# One calibration for every run, measured on a node of the first cluster.
calibration=""
cluster=""
trap '[ -n "$cluster" ] && kill -TERM "$cluster" 2>/dev/null; wait 2>/dev/null' EXIT
for trial in $(seq 1 "$trials"); do
    for balance in agent roundrobin; do
        log="$out/cluster-$balance-$trial.log"
        "$root/scripts/cluster.sh" --luge "$luge" --base "$base" --balance "$balance" \
            >"$log" 2>&1 &
        cluster=$!
        for attempt in $(seq 1 400); do
            grep -q "cluster ready" "$log" && break
            kill -0 "$cluster" 2>/dev/null && [ "$attempt" -lt 400 ] ||
                { echo "cluster-bench: the cluster did not start:" >&2; cat "$log" >&2; exit 1; }
            sleep 0.05
        done
        if [ -z "$calibration" ]; then
            calibration=$("$luge" bench run --target "http://127.0.0.1:$((base + 1))" \
                --workload "$workload" --duration 1s --format json --quiet |
                python3 -c 'import json,sys; c=json.load(sys.stdin)["calibration"]; print("%s,%s" % (c["ns_per_iteration"], c["overhead_ns"]))')
            echo "calibration (ns/iteration,overhead ns): $calibration" >&2
        fi
        "$luge" bench run --target "http://127.0.0.1:$base" --workload "$workload" \
            --duration "$duration" --calibration "$calibration" --format json --quiet \
            >"$out/$balance-$trial.json"
        kill -TERM "$cluster" || true
        wait "$cluster" || true
        cluster=""
        echo "trial $trial $balance done" >&2
    done
done

python3 - "$out" "$trials" <<'EOF'
import json, statistics, sys
out, trials = sys.argv[1], int(sys.argv[2])
def load(balance):
    return [json.load(open(f"{out}/{balance}-{t}.json")) for t in range(1, trials + 1)]
def med(runs, f):
    xs = [f(r) for r in runs]
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def name(c):
    return c.get("name") or f"class{c['class']}"
def cls(r, wanted, key):
    for c in r["per_class"]:
        if name(c) == wanted:
            return c["latency_us"][key]
    return None
rows = {}
for balance in ("agent", "roundrobin"):
    runs = load(balance)
    classes = [name(c) for c in runs[0]["per_class"]]
    rows[balance] = {
        "p99_us": med(runs, lambda r: r["latency_us"]["p99"]),
        "miss_rate": med(runs, lambda r: r["deadline_miss_rate"]),
        "goodput_rps": med(runs, lambda r: r["goodput_rps"]),
        "errors": med(runs, lambda r: r["errors"]),
        **{f"{c}_p99_us": med(runs, lambda r, c=c: cls(r, c, "p99")) for c in classes},
    }
keys = list(rows["agent"].keys())
print("| balance | " + " | ".join(keys) + " |")
print("|---|" + "---:|" * len(keys))
for balance, row in rows.items():
    print(f"| {balance} | " + " | ".join("-" if row[k] is None else f"{row[k]:.4g}" for k in keys) + " |")
ratio = {k: (rows["agent"][k] / rows["roundrobin"][k]) if rows["agent"][k] and rows["roundrobin"][k] else None for k in keys}
print("| agent ÷ roundrobin | " + " | ".join("-" if v is None else f"{v:.2f}×" for v in ratio.values()) + " |")
print(f"\n(medians of {trials} interleaved trials; raw reports in {out})")
EOF
