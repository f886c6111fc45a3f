#!/usr/bin/env bash
# Instructions the node spends per no-op request, counted by callgrind: deterministic where
# wall-clock ratios drift with a VM's neighbours (docs/benchmarks.md, "Instructions per no-op
# request"). Every server thread counts; the load generator runs outside valgrind.
#
#   scripts/callgrind-noop.sh [BINARY] [http|udp] [REQUESTS]
#
# BINARY defaults to target/release/luge (build it first: cargo build --release -p luge).
# The node is `luge serve` with its defaults but `max_sandboxes = 4` (valgrind cannot map the
# default pool) on ports 18090-18092. After 300 requests of warm-up the counters are zeroed,
# REQUESTS (default 2000) no-ops run one at a time, and the same time is then counted with the
# node idle; per request = (measured - idle) / REQUESTS. Needs valgrind (apt install valgrind).
set -euo pipefail

bin=${1:-target/release/luge}
proto=${2:-http}
n=${3:-2000}
for tool in valgrind callgrind_control curl python3; do
  command -v "$tool" > /dev/null || { echo "needs $tool (apt install valgrind curl python3)" >&2; exit 1; }
done
[ -x "$bin" ] || { echo "no binary at $bin (cargo build --release -p luge)" >&2; exit 1; }
bin=$(realpath "$bin")
case $proto in
  http) target=http://127.0.0.1:18090 ;;
  udp) target=udp://127.0.0.1:18091 ;;
  *) echo "protocol is http or udp, not $proto" >&2; exit 1 ;;
esac

dir=$(mktemp -d)
node=
stop() {
  if [ -n "$node" ]; then
    kill "$node" 2> /dev/null || true
    wait "$node" 2> /dev/null || true # its ports are free for the next run
  fi
  rm -rf "$dir"
}
trap stop EXIT
cat > "$dir/luge.toml" << 'EOF'
[server]
http = "127.0.0.1:18090"
rpc = "127.0.0.1:18091"
admin = "127.0.0.1:18092"
max_sandboxes = 4

[[function]]
name = "noop"
module = "builtin:noop"
EOF

valgrind --tool=callgrind --callgrind-out-file="$dir/out" \
  "$bin" serve --manifest "$dir/luge.toml" > "$dir/serve.log" 2>&1 &
node=$!
ready=
for _ in $(seq 120); do
  kill -0 "$node" 2> /dev/null || { echo "the node exited:" >&2; cat "$dir/serve.log" >&2; exit 1; }
  if curl -sf -o /dev/null -X POST http://127.0.0.1:18090/noop; then ready=1; break; fi
  sleep 1
done
[ -n "$ready" ] || { echo "the node did not answer within 120 s" >&2; exit 1; }

run() {
  "$bin" bench run --target "$target" --admin http://127.0.0.1:18092 --function noop \
    --payload= --mode closed:1 --workload fixed,rate=1000,deadline=10s --timeout 30s \
    --duration 300s --quiet "$@"
}
run --max-requests 300 > /dev/null
callgrind_control -z "$node" > /dev/null 2>&1
start=$(date +%s.%N)
run --max-requests "$n" --format json > "$dir/run.json"
end=$(date +%s.%N)
callgrind_control -d measured "$node" > /dev/null 2>&1
callgrind_control -z "$node" > /dev/null 2>&1
sleep "$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$end")"
callgrind_control -d idle "$node" > /dev/null 2>&1

for dump in out.1 out.2; do
  [ -s "$dir/$dump" ] || { echo "callgrind wrote no $dump (callgrind_control failed)" >&2; exit 1; }
done
total() { grep -h '^summary:\|^totals:' "$1" | head -1 | awk '{print $2}'; }
measured=$(total "$dir/out.1")
idle=$(total "$dir/out.2")
ok=$(python3 -c "import json,sys; r = json.load(open(sys.argv[1])); print(r['completed'])" "$dir/run.json")
[ "$ok" = "$n" ] || { echo "only $ok of $n no-ops succeeded" >&2; exit 1; }
echo "$proto: $(( (measured - idle) / n )) instructions per no-op ($n requests; measured $measured, idle $idle)"
