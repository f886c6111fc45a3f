//! `luge bench` end to end from the built binary: every scenario in `--quick` mode exits 0,
//! prints its table and writes its dated results directory (`report.json`, `summary.md`, the
//! SVG plots); `luge bench run` drives a `luge serve` over both protocols.
//!
//! No spinning servers in parallel tests (they would starve each other on a 2-core box) — `compare` runs with `--modes sleep` here
//! (its spin mode is exercised by the release runs recorded in `docs/benchmarks.md`), and the
//! scenarios run one at a time (they start servers and load generators on a 2-core box).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

mod common;

use common::{LUGE, Server};

/// One scenario at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn cache() -> PathBuf {
    std::env::temp_dir().join("luge-bench-test-cache")
}

/// Runs `luge bench <args> --quick` into a fresh directory; returns the one results directory,
/// its report and the printed summary.
fn quick(name: &str, args: &[&str]) -> (PathBuf, Value, String) {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let root = std::env::temp_dir().join(format!("luge-bench-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let started = Instant::now();
    let out = Command::new(LUGE)
        .arg("bench")
        .args(args)
        .args(["--quick", "--quiet", "--out"])
        .arg(&root)
        .env("XDG_CACHE_HOME", cache())
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "luge bench {args:?} failed:\n{stdout}\n{stderr}");
    eprintln!("luge bench {args:?} --quick: {:.1} s", started.elapsed().as_secs_f64());
    let dirs: Vec<PathBuf> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(dirs.len(), 1, "one results directory: {dirs:?}");
    let dir = dirs.into_iter().next().unwrap();
    let dir_name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(dir_name.starts_with(&format!("{}-", args[0])), "{dir_name}");
    assert!(dir_name.ends_with('Z'), "dated in UTC: {dir_name}");
    assert!(stderr.contains(&dir.display().to_string()), "names the directory: {stderr}");
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(stdout.contains(summary.trim()), "prints summary.md");
    for must in ["machine:", "cores", "commit", "layouts", "wait modes"] {
        assert!(summary.contains(must), "summary names {must}: {summary}");
    }
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["scenario"], args[0]);
    assert_eq!(report["quick"], true);
    assert!(report["machine"]["cpu_model"].is_string() && report["machine"]["kernel"].is_string());
    (dir, report, stdout)
}

fn svgs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    v.sort();
    v
}

fn done(dir: &Path) {
    if let Some(root) = dir.parent() {
        let _ = std::fs::remove_dir_all(root);
    }
}

#[test]
fn compare_prints_the_ratio_table() {
    // Sleep mode only (no spinning servers in parallel tests).
    let (dir, report, stdout) =
        quick("compare", &["compare", "--modes", "sleep", "--layouts", "inline", "--trials", "2"]);
    assert!(stdout.contains("Ratios (Luge ÷ baseline)"), "{stdout}");
    assert!(stdout.contains("2 interleaved trials"), "{stdout}");
    // Each trial's ratios, then one row of medians per pair.
    let all = report["results"]["ratios"].as_array().unwrap();
    assert_eq!(all.len(), 8, "{all:?}");
    assert_eq!(all.iter().filter(|r| r["trial"] == 1).count(), 4, "{all:?}");
    let ratios = report["results"]["medians"].as_array().unwrap();
    let baselines: Vec<(&str, &str)> = ratios
        .iter()
        .map(|r| (r["protocol"].as_str().unwrap(), r["baseline"].as_str().unwrap()))
        .collect();
    assert_eq!(
        baselines,
        [
            ("udp", "udp-echo (sleep)"),
            ("udp", "process"),
            ("http", "bare-hyper"),
            ("http", "process")
        ]
    );
    for r in ratios {
        assert_eq!((r["wait"].as_str(), r["layout"].as_str()), (Some("sleep"), Some("inline")));
        assert!(r["p50"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
    // Every server answered its requests.
    for s in report["results"]["servers"].as_array().unwrap() {
        assert!(s["latency"]["planned"].as_u64().unwrap() > 0, "{s}");
        assert_eq!(s["latency"]["errors"], 0, "{s}");
    }
    done(&dir);
}

#[test]
fn noop_sweeps_both_protocols_and_layouts() {
    let (dir, report, _) = quick("noop", &["noop"]);
    let series = report["results"]["series"].as_array().unwrap();
    let names: Vec<String> = series
        .iter()
        .map(|s| format!("{} {} {}", s["protocol"], s["server"], s["layout"]).replace('"', ""))
        .collect();
    for want in [
        "udp luge inline",
        "udp luge threads",
        "udp udp-echo -",
        "http luge inline",
        "http bare-hyper -",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} in {names:?}");
    }
    assert!(series.iter().all(|s| !s["points"].as_array().unwrap().is_empty()));
    let plots = svgs(&dir);
    for want in ["udp-p99.svg", "http-p99.svg", "udp-throughput.svg"] {
        assert!(plots.iter().any(|p| p == want), "{want} in {plots:?}");
    }
    done(&dir);
}

#[test]
fn policies_compare_sledgescale_and_fifo() {
    let (dir, report, stdout) =
        quick("policies", &["policies", "--policies", "sledgescale,fifo,srpt"]);
    assert!(stdout.contains("sledgescale ÷ fifo"), "{stdout}");
    assert!(stdout.contains("Each policy ÷ srpt"), "{stdout}");
    assert!(stdout.contains("short missed %"), "{stdout}");
    assert!(stdout.contains("sent too late %"), "{stdout}");
    for p in report["results"]["points"].as_array().unwrap() {
        let (late, missed) = (&p["short_sent_too_late_rate"], &p["short_miss_rate"]);
        assert!(late.as_f64().unwrap() <= missed.as_f64().unwrap(), "{p}");
    }
    assert_eq!(report["results"]["trials"], 1, "quick runs one trial");
    let points = report["results"]["points"].as_array().unwrap();
    assert!(points.iter().all(|p| p["trial"] == 1), "{points:?}");
    for policy in ["sledgescale", "fifo", "srpt"] {
        for workload in ["high-bimodal", "lognormal,truncate=20ms"] {
            let p = points
                .iter()
                .find(|p| p["policy"] == policy && p["workload"] == workload)
                .unwrap_or_else(|| panic!("{policy} {workload}"));
            assert!(p["point"]["planned"].as_u64().unwrap() > 10, "{p}");
        }
    }
    assert!(report["results"]["calibration"]["ns_per_iteration"].as_f64().unwrap() > 0.0);
    assert_eq!(svgs(&dir).len(), 4);
    done(&dir);
}

#[test]
fn density_registers_distinct_copies() {
    let (dir, report, _) = quick("density", &["density", "--memory-init", "cow,copy"]);
    let points = report["results"]["points"].as_array().unwrap();
    let copies: Vec<u64> = points.iter().map(|p| p["copies"].as_u64().unwrap()).collect();
    assert_eq!(copies, [1, 100, 1, 100], "each number of copies with each memory start");
    let memory: Vec<&str> = points.iter().map(|p| p["memory_init"].as_str().unwrap()).collect();
    assert_eq!(memory, ["cow", "cow", "copy", "copy"]);
    for p in points {
        assert!(p["point"]["planned"].as_u64().unwrap() > 0, "{p}");
        assert_eq!(p["point"]["errors"], 0, "{p}");
        assert!(p["rss_registered_kib"].as_u64().is_some(), "{p}");
    }
    let rows = report["results"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "one row per memory start and number of copies");
    assert_eq!(rows[0]["p99_ratio"][0], 1.0, "the first row is its own base: {rows:?}");
    assert_eq!(svgs(&dir), ["p99.svg", "rss-per-function.svg"]);
    done(&dir);
}

#[test]
fn sim_vs_real_reports_both_sides() {
    let (dir, report, _) = quick("sim-vs-real", &["sim-vs-real"]);
    assert_eq!(report["results"]["trials"], 1, "quick runs one trial");
    let rows = report["results"]["rows"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["trial"] == 1), "{rows:?}");
    let all = rows.iter().find(|r| r["class"] == "all").unwrap();
    assert_eq!(all["real"]["requests"], all["sim"]["requests"], "the same arrivals");
    assert!(all["sim"]["p50_us"].as_f64().is_some(), "{all}");
    // The real side's p50 is null when over half its requests failed, as on a box whose cores
    // other work takes (seen with two CPU hogs: every short request refused); the key is there.
    assert!(all["real"]["p50_us"].is_f64() || all["real"]["p50_us"].is_null(), "{all}");
    assert!(report["results"]["path_outside_node_ns"].as_u64().unwrap() > 0);
    assert_eq!(svgs(&dir).len(), 1);
    done(&dir);
}

#[test]
fn overload_answers_every_request_past_capacity() {
    let (dir, report, summary) = quick("overload", &["overload"]);
    let r = &report["results"];
    assert_eq!(r["deadline_admission"], true, "measures the node as shipped");
    let capacity = r["capacity"].as_array().unwrap();
    assert_eq!(capacity.len(), 4, "two protocols × two mixes: {capacity:?}");
    for c in capacity {
        assert!(c["capacity_rps"].as_f64().unwrap() > 0.0, "{c}");
    }
    let points = r["points"].as_array().unwrap();
    assert_eq!(r["settings"]["trials"], 1, "quick runs one trial");
    assert_eq!(points.len(), 8, "1× and 5× of each: {points:?}");
    for p in points {
        assert_eq!(p["trial"], 1, "{p}");
        assert!(p["planned"].as_u64().unwrap() > 0, "{p}");
        // Exactly one answer per request: nothing times out, even at 5×.
        assert_eq!(p["timeouts"], 0, "{p}");
        assert_eq!(p["local_failures"], 0, "{p}");
        // Besides 200s and refusals, the one other answer is a request still running at its
        // deadline that yielded to on-time ones (504 `deadline_missed`).
        let late = p["failures_by_kind"]["deadline_missed"].as_u64().unwrap_or(0);
        assert_eq!(p["other_answers"].as_u64().unwrap(), late, "{p}");
        // HTTP: one connection per request in flight at most, so the load generator never
        // crosses the node's per-address connection cap (1 024) with its window of 900.
        if p["protocol"] == "http" {
            let connections = p["max_connections"].as_u64().unwrap();
            assert!(connections <= p["window"].as_u64().unwrap(), "{p}");
        }
    }
    // At 5× the node must refuse (and say so) rather than queue doomed work: it refuses, and
    // most 200s it gives met their deadline in the node. (Not a share of the offer: in a debug
    // build on a busy 2-core box the client itself may not manage to send 5×; its send lag
    // then reached ~0.5 s and only 42 % of what it planned was refused. Nor the release
    // figure, 99.9 %: here the node shares 2 cores with its load generator and other tests,
    // executions run longer than their estimates, and 85–88 % was seen in CI. Without
    // admission on the wait it is ~0 %: every 200 waited behind the whole queue.)
    for p in points.iter().filter(|p| p["multiple"] == 5.0 && p["mix"] == "fixed") {
        assert!(p["refused"].as_u64().unwrap() > 0, "{p}");
        assert!(p["ok_within_deadline_in_node_share"].as_f64().unwrap() >= 0.5, "{p}");
        assert!(p["refusal_in_node_p50_us"].as_f64().is_some(), "{p}");
    }
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for s in steps {
        assert!(!s["bins"].as_array().unwrap().is_empty(), "{s}");
        assert_eq!(s["no_answer"], 0, "{s}");
    }
    assert!(summary.contains("## Step"), "{summary}");
    assert_eq!(svgs(&dir), ["goodput.svg", "refused.svg", "step-http.svg", "step-udp.svg"]);
    done(&dir);
}

#[test]
fn slow_clients_hold_connections_while_a_client_is_served() {
    let (dir, report, summary) = quick("slow-clients", &["slow-clients"]);
    let r = &report["results"];
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2, "one quiet and one slow trial: {trials:?}");
    let slow = trials.iter().find(|t| t["condition"] == "slow").unwrap();
    // Every slow connection was open at the node while the client was measured…
    assert_eq!(slow["slow_open_start"], r["connections"], "{slow}");
    assert!(slow["node_connections"].as_u64().unwrap() >= 300, "{slow}");
    // …and the client was still served, every request answered.
    for t in trials {
        assert!(t["point"]["planned"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["point"]["errors"], 0, "{t}");
    }
    assert!(summary.contains("slow ÷ quiet"), "{summary}");
    done(&dir);
}

#[test]
fn tenants_measures_one_tenant_beside_another_over_its_limit() {
    let (dir, report, summary) = quick("tenants", &["tenants"]);
    let r = &report["results"];
    assert_eq!(r["tenant_limits"], true, "measures the limits by default");
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2, "one trial with B at its limit, one at 10×: {trials:?}");
    let flooded = trials.iter().find(|t| t["condition"] == "at_10x").unwrap();
    // B offered 10× its limit and most of it was refused (TenantLimit), while A was served.
    let b = &flooded["b"];
    assert!(b["errors"].as_u64().unwrap() * 2 > b["planned"].as_u64().unwrap(), "{b}");
    for t in trials {
        assert!(t["a"]["planned"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["a"]["errors"], 0, "{t}");
    }
    assert!(summary.contains("at 10× ÷ at its limit"), "{summary}");
    done(&dir);
}

#[test]
fn horse_measures_ull_readiness_with_and_without_the_lane_and_ready_sandboxes() {
    let (dir, report, summary) = quick("horse", &["horse"]);
    let r = &report["results"];
    let trials = r["trials"].as_array().unwrap();
    // Quick: the no-op and the 5 µs function, three conditions, alone and beside the long load,
    // and the echo floor.
    assert_eq!(trials.len(), 13, "{trials:?}");
    for t in trials {
        assert!(t["short"]["planned"].as_u64().unwrap() > 0, "{t}");
        // The node reported readiness on every answer: within the whole trigger.
        let share = t["short"]["readiness_share"].as_f64().unwrap();
        assert!(share > 0.0 && share <= 1.0, "{t}");
        assert!(t["short"]["readiness_p50_us"].as_f64().unwrap() > 0.0, "{t}");
        let beside = t["background"] == "beside";
        assert_eq!(t["long"].is_object(), beside, "{t}");
        if beside {
            assert!(t["long"]["throughput_rps"].as_f64().unwrap() > 0.0, "{t}");
        }
    }
    for condition in ["off", "lane", "lane+ready"] {
        assert!(trials.iter().any(|t| t["condition"] == condition), "{condition}");
    }
    for function in ["no-op", "5 µs"] {
        assert!(trials.iter().any(|t| t["function"] == function), "{function}");
        assert!(r["ratios"][function]["readiness_off_over_shipped_alone"].is_f64(), "{r}");
    }
    assert!(summary.contains("readiness `off` ÷ `lane+ready`"), "{summary}");
    // The floor: the echo baseline reported its readiness (it answers what asks for it), and the
    // summary sets Luge's beside it.
    let floor = trials.iter().find(|t| t["condition"] == "echo floor").unwrap();
    assert!(floor["long"].is_null(), "{floor}");
    assert!(r["floor_readiness_p50_us"].as_f64().unwrap() > 0.0, "{r}");
    assert!(summary.contains("above the echo floor's"), "{summary}");
    done(&dir);
}

#[test]
fn path_measures_the_shipped_node_the_threads_layout_and_the_echo_with_their_cpu() {
    let (dir, report, summary) = quick("path", &["path", "--modes", "sleep"]);
    let r = &report["results"];
    let trials = r["results"].as_array().unwrap();
    // Quick: one trial of each server.
    assert_eq!(trials.len(), 3, "{trials:?}");
    for server in ["luge", "luge threads", "udp-echo"] {
        let t = trials.iter().find(|t| t["server"] == server).unwrap();
        for run in ["single", "closed"] {
            assert!(t[run]["throughput_rps"].as_f64().unwrap() > 0.0, "{t}");
            // The server's threads were found and worked: CPU per request is measured.
            assert!(t[run]["cpu_us"].as_f64().unwrap() > 0.0, "{server} {run}: {t}");
        }
    }
    assert!(summary.contains("closed ÷ echo"), "{summary}");
    done(&dir);
}

#[test]
fn isolation_answers_every_hostile_request_with_its_typed_error() {
    let (dir, report, summary) = quick("isolation", &["isolation"]);
    let r = &report["results"];
    assert_eq!(r["hostile_counts"], serde_json::json!([0, 4]), "quick: N = 0 and 4");
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2, "{trials:?}");
    for t in trials {
        assert!(t["good"]["planned"].as_u64().unwrap() > 0, "{t}");
    }
    // (Not that the well-behaved tenant is served without errors: its deadline is 10 ms, and a
    // debug build on a busy 2-core box refuses some even alone. The release figures are in
    // `docs/reliability.md`; the behaviour behind them has tests of its own in luge-sched and
    // luge-runtime.)
    for t in trials {
        assert!(t["good_errors"].get("timeout").is_none(), "every request answered: {t}");
    }
    let crowded = trials.iter().find(|t| t["hostile"] == 4).unwrap();
    let bad = &crowded["bad"];
    // Every hostile request got an answer, and none of them a success: loops are ended at
    // their deadline or budget, memory growth at its cap, recursion by a trap.
    assert_eq!(bad["unanswered"], 0, "{bad}");
    let outcomes = bad["outcomes"].as_object().unwrap();
    assert!(!outcomes.contains_key("ok"), "{bad}");
    let answered: u64 = outcomes.values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(answered, bad["point"]["planned"].as_u64().unwrap(), "{bad}");
    assert!(summary.contains("p99 ÷ N = 0"), "{summary}");
    done(&dir);
}

/// The edge manifest, whose `keypoints` chain names C functions `scripts/setup.sh` builds.
fn edge_manifest() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/edge.toml").display().to_string()
}

#[test]
fn chain_answers_what_its_stages_give_by_hand_and_reports_its_hand_over() {
    let manifest = edge_manifest();
    let (dir, report, summary) = quick("chain", &["chain", "--manifest", &manifest]);
    let r = &report["results"];
    assert_eq!(r["stages"], serde_json::json!(["resize", "resize", "sift"]));
    let calls = r["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 8, "2 protocols × (3 stages + the chain): {calls:?}");
    for c in calls {
        assert_eq!(c["point"]["errors"], 0, "{c}");
        assert!(c["point"]["p99_us"].as_f64().unwrap() > 0.0, "{c}");
    }
    for p in ["http", "udp"] {
        let ratio = &r["chain_p99_over_stage_p99_sum"][p]["median"];
        assert!(ratio.as_f64().unwrap() > 0.0, "{p}: {ratio}");
    }
    assert!(summary.contains("byte for byte"), "{summary}");
    done(&dir);
    // A chain the manifest does not declare is an error naming it.
    let out = Command::new(LUGE)
        .args(["bench", "chain", "--quick", "--manifest", &manifest, "--chain", "nope"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no chain `nope`"));
}

#[test]
fn edge_rt_runs_fig_14_with_loops_demoted_killed_and_under_plain_edf_fig_11_chains_and_fig_6() {
    let (dir, report, summary) = quick("edge-rt", &["edge-rt"]);
    let r = &report["results"]["fig14"];
    assert_eq!(r["hogs_per_worker"], serde_json::json!([0, 2]), "quick: k = 0 and 2");
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 6, "2 k × 3 treatments: {trials:?}");
    for t in trials {
        assert!(t["good"]["planned"].as_u64().unwrap() > 0, "{t}");
        let hogs = &t["hogs"];
        if t["hogs_per_worker"] == 0 {
            assert!(hogs.is_null(), "{t}");
            assert_eq!(t["demoted"], 0, "{t}");
            continue;
        }
        // An infinite loop never succeeds, whatever its treatment.
        assert!(!hogs["outcomes"].as_object().unwrap().contains_key("ok"), "{t}");
        match t["treatment"].as_str().unwrap() {
            // The loops overran their deadlines and ran on in the lane…
            "demote" => assert!(t["demoted"].as_u64().unwrap() > 0, "{t}"),
            // …while the papers' setting refuses and demotes nothing.
            "edf" => {
                assert_eq!(t["demoted"], 0, "{t}");
                let outcomes = hogs["outcomes"].as_object().unwrap();
                assert!(!outcomes.keys().any(|k| k.starts_with("deadline")), "{t}");
            }
            "kill" => {}
            other => panic!("unknown treatment {other}"),
        }
    }
    assert!(summary.contains("Fig. 14"), "{summary}");
    // Fig. 11: every contender ran the chains at 0.9, and every stage ran as written (a chain
    // answered late or refused is the figure; one that failed in its guest or was never sent is
    // a broken scenario). Timeouts are not checked: the fair-share baseline under overload may
    // answer past the quick run's 3 s timeout on a loaded CI machine.
    let r = &report["results"]["fig11"];
    assert_eq!(r["loads"], serde_json::json!([0.9]), "quick: 0.9");
    let trials = r["trials"].as_array().unwrap();
    let labels: Vec<&str> =
        trials.iter().map(|t| t["contender"]["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["luge", "edf", "fifo", "fair-share"]);
    for t in trials {
        assert!(t["point"]["planned"].as_u64().unwrap() > 100, "{t}");
        let errors = t["errors"].as_object().unwrap();
        for kind in ["unsent", "exit_failure", "trap"] {
            assert!(!errors.contains_key(kind), "{kind}: {t}");
        }
        for class in ["light_met", "heavy_met"] {
            let met = t[class].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&met), "{class}: {t}");
        }
    }
    assert!(summary.contains("Fig. 11"), "{summary}");
    // Fig. 6b: the Δtimer sweep, off and 250 µs. Off, nothing is left to the ticker; on, the
    // light stages (10 ms deadline) have the slack for it and are.
    let r = &report["results"]["fig6b"];
    assert_eq!(r["intervals_us"], serde_json::json!([0, 250]), "quick: 0 and 250 µs");
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2, "{trials:?}");
    for t in trials {
        assert!(t["point"]["planned"].as_u64().unwrap() > 100, "{t}");
        // Reported; often 0 since an idle inline worker reads its own socket (a UDP arrival
        // wakes no thread: `crates/luge-server/tests/udp_ingress.rs` holds that), while the
        // worker still sleeps between bursts.
        assert!(t["wakeups_per_request"].as_f64().is_some_and(|w| w >= 0.0), "{t}");
        assert!(t["sleeps_per_request"].as_f64().unwrap() > 0.0, "{t}");
        let deferred = t["deferred_per_request"].as_f64().unwrap();
        match t["notify_interval_us"].as_u64().unwrap() {
            0 => assert_eq!(deferred, 0.0, "{t}"),
            _ => assert!(deferred > 0.0, "{t}"),
        }
    }
    assert!(summary.contains("Fig. 6b"), "{summary}");
    // Fig. 6a: the Δbatch sweep on the threads layout, off and 8 ms. Off, nothing is batched;
    // on, light stages due within 8 ms of each other run back to back.
    let r = &report["results"]["fig6a"];
    assert_eq!(r["windows_us"], serde_json::json!([0, 8000]), "quick: 0 and 8 ms");
    let trials = r["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 2, "{trials:?}");
    for t in trials {
        assert!(t["point"]["planned"].as_u64().unwrap() > 100, "{t}");
        assert_eq!(t["layout"], "threads", "{t}");
        let batched = t["batched_per_request"].as_f64().unwrap();
        let followed = t["followed_per_request"].as_f64().unwrap();
        assert!(followed <= batched, "{t}");
        match t["batch_window_us"].as_u64().unwrap() {
            0 => assert_eq!(batched, 0.0, "{t}"),
            _ => assert!(followed > 0.0, "{t}"),
        }
    }
    assert!(summary.contains("Fig. 6a"), "{summary}");
    done(&dir);
}

#[test]
fn soak_samples_memory_fds_and_threads_for_a_minute() {
    // The one-minute version CI runs (`--quick`); `docs/reliability.md` has a long run.
    let (dir, report, summary) = quick("soak", &["soak"]);
    let r = &report["results"];
    let samples = r["samples"].as_array().unwrap();
    assert!(samples.len() >= 10, "a sample every 5 s: {}", samples.len());
    for s in samples {
        assert!(s["rss_kib"].as_u64().unwrap() > 0, "{s}");
    }
    assert!(r["rss_kib_per_min"].is_f64(), "a slope is fitted: {r}");
    // No request leaves a descriptor or a thread behind.
    assert_eq!(r["fd_growth"], 0, "{r}");
    assert_eq!(r["thread_growth"], 0, "{r}");
    // Every hostile request was answered, none with a success.
    assert!(r["hostile_answered"].as_u64().unwrap() >= 500, "{r}");
    assert_eq!(r["hostile_ok"], 0, "{r}");
    assert!(summary.contains("RSS slope after warm-up"), "{summary}");
    done(&dir);
}

#[test]
fn run_drives_a_running_server_over_both_protocols() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let server = Server::start(&[], &cache());
    let csv = std::env::temp_dir().join(format!("luge-bench-test-{}.csv", std::process::id()));
    let targets = [format!("udp://{}", server.rpc), server.http.clone()];
    for target in &targets {
        let out = Command::new(LUGE)
            .args(["bench", "run", "--target", target, "--admin", &server.admin])
            .args(["--function", "noop", "--workload", "fixed,rate=300,deadline=100ms"])
            .args(["--duration", "300ms", "--format", "json", "--quiet", "--csv"])
            .arg(&csv)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let planned = report["planned"].as_u64().unwrap();
        assert!(planned > 20, "{report}");
        assert_eq!(report["completed"].as_u64(), Some(planned), "{report}");
        let rows = std::fs::read_to_string(&csv).unwrap().lines().count() as u64;
        assert_eq!(rows, planned + 1, "a CSV row per request plus the header");
    }
    // Closed loop with spin: the calibration is measured on the node and reported.
    let out = Command::new(LUGE)
        .args(["bench", "run", "--target", &targets[0], "--admin", &server.admin])
        .args(["--workload", "fixed", "--mode", "closed:2", "--duration", "200ms", "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("closed loop") && table.contains("calibration  spin:"), "{table}");
    let _ = std::fs::remove_file(&csv);
}

#[test]
fn overhead_compares_native_and_wasm() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out_dir = std::env::temp_dir().join(format!("luge-overhead-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let out = Command::new(LUGE)
        .args([
            "bench",
            "overhead",
            "--only",
            "ekf,resize",
            "--sizes",
            "small",
            "--budget-ms",
            "20",
        ])
        .arg("--functions")
        .arg(repo.join("functions"))
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "| ekf | small |",
        "| resize | small |",
        "| default |",
        "| instantiated-ahead |",
        "| epochs-off |",
        "| bounds-checked |",
        "| unoptimised |",
        "| zeroing-reset |",
        "| copied-init |",
        "epochs-off ÷ native |",
        "spread over repetitions",
    ] {
        assert!(table.contains(needle), "missing `{needle}` in:\n{table}");
    }
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report.as_array().unwrap().len(), 2);
    // Five interleaved repetitions, each native and the seven configurations.
    let reps = report[0]["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 5);
    assert!(reps.iter().all(|r| r.as_array().unwrap().len() == 8));
    std::fs::remove_dir_all(&out_dir).unwrap();
}

#[test]
fn backpressure_compares_a_client_that_heeds_the_load_signal() {
    let (dir, report, summary) = quick("backpressure", &["backpressure"]);
    let r = &report["results"];
    let trials = r["trials"].as_array().unwrap();
    let of = |c: &str| trials.iter().find(|t| t["client"] == c).unwrap();
    let (fixed, adaptive) = (of("fixed"), of("adaptive"));
    let callers = r["callers"].as_u64().unwrap();
    for t in [fixed, adaptive] {
        assert_eq!(t["lost"], 0, "every call answered: {t}");
        assert!(t["ok_rps"].as_f64().unwrap() > 0.0, "{t}");
    }
    // Far more callers than 10 ms of queue: the node refuses the naive client's excess…
    assert!(fixed["refused_rps"].as_f64().unwrap() > 0.0, "{fixed}");
    assert_eq!(fixed["window_end"].as_u64(), Some(callers), "{fixed}");
    // …and the client that heeds the signal shrinks its window and is refused less.
    assert!(adaptive["window_end"].as_u64().unwrap() < callers, "{adaptive}");
    assert!(
        adaptive["refused_rps"].as_f64().unwrap() < fixed["refused_rps"].as_f64().unwrap(),
        "{adaptive} vs {fixed}"
    );
    assert!(summary.contains("adaptive ÷ fixed"), "{summary}");
    done(&dir);
}

#[test]
fn tracing_measures_span_export_against_none() {
    let (dir, report, summary) = quick("tracing", &["tracing"]);
    let r = &report["results"];
    let trials = r["trials"].as_array().unwrap();
    let conditions: Vec<&str> = trials.iter().map(|t| t["condition"].as_str().unwrap()).collect();
    assert_eq!(conditions, ["off", "sample_1pct", "sample_all"], "interleaved, one each");
    for t in trials {
        assert!(t["point"]["planned"].as_u64().unwrap() > 0, "{t}");
        assert_eq!(t["point"]["errors"], 0, "{t}");
    }
    // Spans reached the collector only when exported; every request's when all are sampled.
    let exports = |c: &str| trials.iter().find(|t| t["condition"] == c).unwrap()["exports"].clone();
    assert_eq!(exports("off"), 0);
    assert!(exports("sample_all").as_u64().unwrap() >= 1, "{trials:?}");
    assert!(r["ratios"]["sample_all"]["throughput"].is_f64(), "{r}");
    assert!(summary.contains("| sample_all"), "{summary}");
    done(&dir);
}

#[test]
fn peers_drives_luge_serve_bare_hyper_and_nginx_with_wrk() {
    let (dir, report, summary) = quick("peers", &["peers", "--connections", "4"]);
    let r = &report["results"];
    let trials = r["results"].as_array().unwrap();
    // setup.sh installs wrk and nginx; scripts/peers.sh (not run by CI: it compiles
    // wasmtime-cli, ~25 minutes) adds `wasmtime serve`, which is otherwise left out with why.
    let mut servers = vec!["luge", "bare-hyper", "nginx"];
    let left_out = r["left_out"].as_array().unwrap();
    if left_out.is_empty() {
        servers.push("wasmtime-serve");
    } else {
        // Both of its parts: the no-op server and the spin handler of the deadline mix.
        let out: Vec<&str> = left_out.iter().map(|l| l["server"].as_str().unwrap()).collect();
        assert_eq!(out, ["wasmtime-serve", "wasmtime-spin"], "{left_out:?}");
        assert!(summary.contains("wasmtime serve left out: "), "{summary}");
        assert!(summary.contains("wasmtime serve (spin) left out: "), "{summary}");
    }
    assert_eq!(trials.len(), servers.len(), "one run each: {trials:?}");
    for server in servers {
        let t = trials.iter().find(|t| t["server"] == server).unwrap();
        assert_eq!(t["connections"], 4);
        assert!(t["rps"].as_f64().unwrap() > 100.0, "{t}");
        assert!(t["p99_us"].as_f64().unwrap() >= t["p50_us"].as_f64().unwrap(), "{t}");
        // Every answer a 2xx: Luge ran the no-op, the others answered their floor.
        assert_eq!(t["errors"], 0, "{t}");
        // The server process's threads were read: its CPU per request is measured.
        assert!(t["cpu_us"].as_f64().unwrap() > 0.0, "{t}");
    }
    assert!(summary.contains("Luge ÷ it, req/s"), "{summary}");
    // The deadline mix ran against Luge's `spin` (calibrated on it) and met deadlines.
    let mix = r["mix"]["results"].as_array().unwrap();
    let luge = mix.iter().find(|m| m["server"] == "luge").unwrap();
    assert!(luge["planned"].as_u64().unwrap() > 0, "{luge}");
    assert!(luge["deadline_miss_rate"].as_f64().unwrap() < 1.0, "{luge}");
    assert!(r["mix"]["calibration"]["ns_per_iteration"].as_f64().unwrap() > 0.0, "{r}");
    assert!(summary.contains("deadlines met (%)"), "{summary}");
    done(&dir);
}
