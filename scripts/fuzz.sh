#!/usr/bin/env bash
# Coverage-guided fuzzing of Luge with AFL++ through afl.rs (cargo-afl), on stable Rust: builds
# the targets of fuzz/ (luge-fuzz) with AFL instrumentation and runs afl-fuzz on each, one at a
# time, under `chrt --idle 0` (the machine may be measuring latency). docs/fuzzing.md explains
# the targets and records the long runs.
#
#   scripts/fuzz.sh --smoke                   CI: the cheap targets (SMOKE_TARGETS), ~25 s each
#   scripts/fuzz.sh --execs N [TARGET...]     each target until about N executions
#   scripts/fuzz.sh --time SECONDS [TARGET...]
#
# FUZZ_OUT (default target/fuzz) holds each run's AFL++ output and summary.tsv; FUZZ_NO_BUILD=1
# fuzzes the binaries already built.
#
# Fails if any run saved a crash or a hang (their inputs stay under $FUZZ_OUT/<target>/ for
# `cargo run -p luge-fuzz --bin <target> -- FILE` to reproduce; a fixed finding goes to
# fuzz/regressions/<target>/ with a test named after it in fuzz/tests/replay.rs).
#
# The smoke run fuzzes only `proto`: every other target links luge-server or luge-runtime, and
# an instrumented build of Wasmtime and Cranelift (cargo-afl compiles with codegen-units=1)
# takes longer than CI's whole budget for this step on 2 cores. Their corpora and regressions
# still run, uninstrumented, in `cargo test` (fuzz/tests/replay.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="$HOME/.cargo/bin:$PATH"

ALL_TARGETS=(proto http_head manifest upload wasi)
SMOKE_TARGETS=(proto)
SMOKE_SECONDS=${SMOKE_SECONDS:-25}

mode=
limit=
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --smoke) mode=smoke ;;
        --execs) mode=execs; limit=${2:?--execs needs a number}; shift ;;
        --time) mode=time; limit=${2:?--time needs seconds}; shift ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
        *) targets+=("$1") ;;
    esac
    shift
done
if [ -z "$mode" ]; then
    sed -n '2,21p' "$0" >&2
    exit 2
fi
if [ "$mode" = smoke ]; then
    targets=("${SMOKE_TARGETS[@]}")
    limit=$SMOKE_SECONDS
elif [ ${#targets[@]} -eq 0 ]; then
    targets=("${ALL_TARGETS[@]}")
fi

# cargo-afl, and AFL++ built from the source it bundles (needs make and a C compiler). The
# crate's build script may have built AFL++ already; `config --build` then refuses, harmlessly.
# The same version as the `afl` crate of fuzz/Cargo.toml: cargo-afl links the AFL++ runtime it
# built for its own version into code built against the crate's; keep the pair that was tested.
AFL_RS_VERSION=0.18.2
if ! cargo afl --version 2>/dev/null | grep -q "^cargo-afl $AFL_RS_VERSION "; then
    echo "fuzz.sh: installing cargo-afl $AFL_RS_VERSION"
    cargo install --locked cargo-afl --version "$AFL_RS_VERSION"
fi
if ! out=$(cargo afl config --build 2>&1); then
    if ! grep -q "already built" <<<"$out"; then
        echo "$out" >&2
        exit 1
    fi
fi

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}/afl
FUZZ_OUT=${FUZZ_OUT:-${CARGO_TARGET_DIR:-$ROOT/target}/fuzz}
mkdir -p "$FUZZ_OUT"

# Only the features the chosen targets need: `proto` alone builds without Wasmtime.
features=()
for t in "${targets[@]}"; do
    case "$t" in
        proto) ;;
        http_head) features+=(http) ;;
        manifest) features+=(manifest) ;;
        upload|wasi) features+=(runtime) ;;
        *) echo "fuzz.sh: unknown target $t (known: ${ALL_TARGETS[*]})" >&2; exit 2 ;;
    esac
done
bins=()
for t in "${targets[@]}"; do bins+=(--bin "$t"); done
feature_list=$(IFS=,; echo "${features[*]:-}")
if [ -n "${FUZZ_NO_BUILD:-}" ]; then
    echo "== fuzz: FUZZ_NO_BUILD set, using the binaries in $TARGET_DIR/release"
else
    echo "== fuzz: building ${targets[*]} with AFL instrumentation"
    chrt --idle 0 cargo afl build --release --locked -p luge-fuzz --target-dir "$TARGET_DIR" \
        --no-default-features ${feature_list:+--features "$feature_list"} "${bins[@]}"
fi

export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1
# Shared 2-core machines: do not pin afl-fuzz to a core another job may need.
export AFL_NO_AFFINITY=1
# The Wasmtime targets map gigabytes of address space for the pooling allocator: no -m limit.
# Their first input in each fuzzed process starts a runtime, hence the longer start-up time.
export AFL_FORKSRV_INIT_TMOUT=20000

# The process running inputs: the target binary whose parent (the fork server) is one too.
persistent_child() {
    local pid ppid
    for pid in $(pgrep -f "$1" || true); do
        [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$1" ] || continue
        ppid=$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null || true)
        if [ -n "$ppid" ] && [ "$(readlink "/proc/$ppid/exe" 2>/dev/null)" = "$1" ]; then
            echo "$pid"
            return
        fi
    done
}

stat() { awk -F' *: *' -v k="$2" '$1 == k { print $2 }' "$1"; }

status=0
summary="$FUZZ_OUT/summary.tsv"
[ -f "$summary" ] || printf 'target\texecs\tseconds\texecs_per_s\tcrashes\thangs\tcorpus\trss_start_kib\trss_end_kib\n' >"$summary"
for t in "${targets[@]}"; do
    out="$FUZZ_OUT/$t"
    rm -rf "$out"
    args=(-i "$ROOT/fuzz/corpus/$t" -o "$out")
    [ -f "$ROOT/fuzz/dict/$t.dict" ] && args+=(-x "$ROOT/fuzz/dict/$t.dict")
    case "$t" in
        upload|wasi) args+=(-t 2000 -m none) ;;
        *) args+=(-t 1000) ;;
    esac
    case "$mode" in
        smoke|time) args+=(-V "$limit") ;;
        execs) args+=(-E "$limit") ;;
    esac
    echo "== fuzz: $t (${mode} ${limit})"
    chrt --idle 0 cargo afl fuzz "${args[@]}" "$TARGET_DIR/release/$t" >"$out.log" 2>&1 &
    afl=$!
    # The persistent-mode process's resident memory early and late: a leak shows as growth.
    rss_start= rss_end=
    while kill -0 "$afl" 2>/dev/null; do
        sleep 5
        child=$(persistent_child "$TARGET_DIR/release/$t")
        if [ -n "$child" ]; then
            rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$child/status" 2>/dev/null || true)
            if [ -n "$rss" ]; then
                rss_end=$rss
                rss_start=${rss_start:-$rss}
            fi
        fi
    done
    if ! wait "$afl"; then
        echo "fuzz.sh: afl-fuzz failed on $t; its log:" >&2
        tail -n 40 "$out.log" >&2
        status=1
        continue
    fi
    stats="$out/default/fuzzer_stats"
    execs=$(stat "$stats" execs_done)
    secs=$(stat "$stats" run_time)
    crashes=$(stat "$stats" saved_crashes)
    hangs=$(stat "$stats" saved_hangs)
    corpus=$(stat "$stats" corpus_count)
    rate=$(awk -v e="$execs" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? e / s : 0) }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$execs" "$secs" "$rate" "$crashes" \
        "$hangs" "$corpus" "${rss_start:--}" "${rss_end:--}" | tee -a "$summary"
    if [ "$crashes" != 0 ] || [ "$hangs" != 0 ]; then
        echo "fuzz.sh: $t: $crashes crashes, $hangs hangs; inputs in $out/default/{crashes,hangs}" >&2
        status=1
    fi
done
exit $status
