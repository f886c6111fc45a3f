//! What preemption's checks cost, and what else could stop a guest (issue: the Wasm-vs-native
//! gap, `docs/functions.md`, "What the checks cost").
//!
//! Each C function of `functions/` (built by `make -C functions`) runs under six ways of
//! stopping it, each a ratio to `none` measured in the same run:
//! - `none`: an engine without any check: the floor; nothing could stop or preempt the guest;
//! - `epochs`: Wasmtime's epoch checks, as Luge runs every guest (`Config::epoch_interruption`);
//! - `trap`, `call`, `outer`: the module rewritten with checks of our own at the same places,
//!   on the engine without epochs (`rewrite.rs`, [`Checks`]), the flag's memory not exported;
//! - `trap (exported)`: `trap` with the flag's memory exported, as a host that sets the flag
//!   through Wasmtime's API needs it.
//!
//! Only `_start`'s call is timed, on the bench thread with a plain sync call and a minimal WASI
//! (`common/bare.rs`): the code's cost, not the sandbox's. The ways are measured in turns, each
//! repetition starting one further along, and every figure is the median over the repetitions.
//! Before timing, every way's output is checked against the function's expected output, and a
//! flag set from another thread must stop a looping guest under each rewritten way.
//!
//! Run: `make -C functions && cargo bench -p luge-runtime --bench interrupt` (medium inputs,
//! 10 repetitions; `-- --size small|medium|large --repetitions N`). `cargo test --all-targets`
//! runs it once on small inputs with its checks (65 modules compiled: a few seconds).

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)] // bench: a panic is the report

#[path = "../common/bare.rs"]
mod bare;
mod rewrite;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use rewrite::{Checks, FLAG_EXPORT, instrument};
use wasmtime::{Config, Engine, InstancePre, Module, OptLevel, Store};

/// The ways a guest is stopped, in their column order. The rewritten ways' flag memory is not
/// exported (a region of its own for Cranelift's alias analysis, `rewrite.rs`), but for
/// `trap (exported)`, the same as `trap` with the export the host needs to find the flag.
const WAYS: [&str; 6] = ["none", "epochs", "trap", "call", "outer", "trap (exported)"];

fn engine(epochs: bool) -> Engine {
    let mut config = Config::new();
    config.epoch_interruption(epochs).cranelift_opt_level(OptLevel::Speed);
    Engine::new(&config).unwrap()
}

/// `wasm` prepared for `way` on the engine it needs (`exported`: the flag memory exported
/// whatever the way says, as the liveness check needs).
fn prepare(
    wasm: &[u8],
    way: &str,
    exported: bool,
    (plain, epochs): (&Engine, &Engine),
) -> InstancePre<bare::State> {
    let checks = match way {
        "trap" => Some((Checks::Trap, exported)),
        "trap (exported)" => Some((Checks::Trap, true)),
        "call" => Some((Checks::Call, exported)),
        "outer" => Some((Checks::Outer, exported)),
        _ => None,
    };
    let (engine, bytes) = match checks {
        Some((c, exported)) => (plain, instrument(wasm, c, exported).unwrap()),
        None if way == "epochs" => (epochs, wasm.to_vec()),
        None => (plain, wasm.to_vec()),
    };
    let module = Module::new(engine, bytes).unwrap();
    bare::linker(engine).instantiate_pre(&module).unwrap()
}

/// Under each rewritten way, a guest looping forever — in an innermost loop, and in an outer
/// loop whose inner loop ends every turn — ends with a trap once another thread sets the flag.
fn checks_stop_a_looping_guest(engines: (&Engine, &Engine)) {
    let modules = [
        ("an innermost loop", "(loop (loop (br 0)))"),
        ("an outer loop", "(loop (loop (br_if 0 (i32.const 0))) (br 0))"),
    ];
    for (what, body) in modules {
        let wat =
            format!(r#"(module (memory (export "memory") 1) (func (export "_start") {body}))"#);
        let forever = wat::parse_str(&wat).unwrap();
        for way in ["trap", "call", "outer"] {
            let pre = prepare(&forever, way, true, engines);
            let mut store = Store::new(pre.module().engine(), bare::State::default());
            let instance = pre.instantiate(&mut store).unwrap();
            let start = instance.get_typed_func::<(), ()>(&mut store, "_start").unwrap();
            let flag = instance.get_memory(&mut store, FLAG_EXPORT).unwrap();
            let at = flag.data_ptr(&store) as usize;
            let (stopped, watch) = std::sync::mpsc::channel::<()>();
            let setter = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                // SAFETY: `at` is word 0 of the flag memory: one page that never grows, mapped
                // while `store` lives, which is dropped only after this thread is joined below.
                // Aligned to the page.
                unsafe { AtomicU32::from_ptr(at as *mut u32) }.store(1, Ordering::Relaxed);
                // The guest's end drops the sender; only a timeout means it went on.
                if let Err(RecvTimeoutError::Timeout) = watch.recv_timeout(Duration::from_secs(10))
                {
                    eprintln!("`{way}`, {what}: a set flag did not stop the guest within 10 s");
                    std::process::abort();
                }
            });
            let ended = start.call(&mut store, ());
            drop(stopped);
            setter.join().unwrap();
            drop(store);
            let err = ended.expect_err("the looping guest ended without a trap");
            assert_eq!(
                err.downcast_ref::<wasmtime::Trap>(),
                Some(&wasmtime::Trap::UnreachableCodeReached),
                "`{way}`, {what}: {err:?}"
            );
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn geomean(v: &[f64]) -> f64 {
    (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let bench = args.iter().any(|a| a == "--bench");
    let size = value("--size").map_or(if bench { "medium" } else { "small" }, |s| s.as_str());
    let reps: usize = value("--repetitions")
        .map_or(if bench { 10 } else { 1 }, |r| r.parse().expect("--repetitions takes a count"));
    let build = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../functions/build");
    let mut names: Vec<String> = std::fs::read_dir(build.join("wasm"))
        .expect("functions/build/wasm: run `make -C functions` (scripts/setup.sh does)")
        .map(|e| e.unwrap().path().file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no function in functions/build/wasm");
    let (plain, epochs) = (engine(false), engine(true));
    checks_stop_a_looping_guest((&plain, &epochs));

    // Per function: each way's timings (µs), one per repetition.
    let mut rows = Vec::new();
    for name in &names {
        let wasm = std::fs::read(build.join(format!("wasm/{name}.wasm"))).unwrap();
        let input = std::fs::read(build.join(format!("inputs/{name}-{size}.in"))).unwrap();
        let expected = std::fs::read(build.join(format!("expected/{name}-{size}.out"))).unwrap();
        let pres: Vec<_> =
            WAYS.iter().map(|w| prepare(&wasm, w, false, (&plain, &epochs))).collect();
        for (way, pre) in WAYS.iter().zip(&pres) {
            let (out, _) = bare::timed(pre, input.clone(), |_, _| {}).unwrap();
            assert!(out == expected, "{name} under `{way}`: output differs from expected");
        }
        let mut times = vec![Vec::new(); WAYS.len()];
        for r in 0..reps {
            for k in 0..WAYS.len() {
                let w = (r + k) % WAYS.len();
                let (_, took) = bare::timed(&pres[w], input.clone(), |_, _| {}).unwrap();
                times[w].push(took.as_secs_f64() * 1e6);
            }
        }
        rows.push((name.clone(), times));
    }

    println!("\ninterrupt: `_start` of each function ({size} input), median of {reps} repetitions");
    println!("| function | none µs | {} |", WAYS[1..].join(" ÷ none | ") + " ÷ none");
    println!("|---|---:|{}", "---:|".repeat(WAYS.len() - 1));
    for (name, times) in &rows {
        let floor = median(times[0].clone());
        let ratios: Vec<String> =
            times[1..].iter().map(|t| format!("{:.2}×", median(t.clone()) / floor)).collect();
        println!("| {name} | {floor:.1} | {} |", ratios.join(" | "));
    }
    // The geometric mean over the functions of each way's ratio to `none`, per repetition.
    let mut summary = Vec::new();
    for w in 1..WAYS.len() {
        let per_rep: Vec<f64> = (0..reps)
            .map(|r| geomean(&rows.iter().map(|(_, t)| t[w][r] / t[0][r]).collect::<Vec<_>>()))
            .collect();
        let (lo, hi) = per_rep.iter().fold((f64::MAX, 0f64), |(l, h), x| (l.min(*x), h.max(*x)));
        let of_medians = geomean(
            &rows
                .iter()
                .map(|(_, t)| median(t[w].clone()) / median(t[0].clone()))
                .collect::<Vec<_>>(),
        );
        summary.push(format!("{}: {of_medians:.3}× [{lo:.3}–{hi:.3}]", WAYS[w]));
    }
    println!("geometric mean ÷ none [spread over repetitions]: {}", summary.join(", "));
}
