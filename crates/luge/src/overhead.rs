//! `luge bench overhead`: what Wasm sandboxing costs against native code, per C function and
//! input size (Sledge §5, Tables 1–2) — the native build's in-process run time (the
//! `<fn>-timed` harness: parse, compute, format; no process start) against the same request in
//! a fresh Luge sandbox per request (instantiation, first-touch page faults and teardown
//! included). Both sides are thread CPU time, so a busy machine inflates neither.
//!
//! Every other configuration changes one thing against that default, so that each cost has a
//! column of its own: the sandbox instantiated *before* the timed region (what ready sandboxes
//! save), epoch interruption off (what preemption's checks at every loop header and function
//! entry cost; a runtime without them cannot preempt or stop a guest, so it is a measurement,
//! never a setting), explicit bounds checks (a memory reservation of only what a guest may use
//! instead of 4 GiB and guard pages), unoptimised code, and the pool's slot reset by zeroing all
//! of its low resident memory instead of the pages the sandbox dirtied (`PAGEMAP_SCAN`), and
//! memory initialised by copying the data segments instead of mapping a copy-on-write image.
//! The native build uses the same `-O2` and the same 128-bit vectors (SSE2 against Wasm's
//! SIMD128; `functions/Makefile`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Args;
use luge_runtime::{CodeOpt, FunctionConfig, Limits, Runtime, RuntimeConfig};

/// `luge bench overhead` options.
#[derive(Debug, Args)]
pub struct OverheadArgs {
    /// The functions directory (built with `make -C functions`).
    #[arg(long, default_value = "functions")]
    functions: PathBuf,
    /// Only these functions (comma-separated; default: all built ones).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Input sizes to measure.
    #[arg(long, value_delimiter = ',', default_value = "small,medium,large")]
    sizes: Vec<String>,
    /// Time budget per function, size and configuration (samples stop early past it).
    #[arg(long, default_value_t = 2000)]
    budget_ms: u64,
    /// Repetitions, interleaved (native and every configuration, then again): each figure is
    /// the median of the repetitions' medians, shown with their spread. The budget is shared
    /// among them.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=100))]
    repetitions: u64,
    /// Skip the other configurations (instantiated ahead, epochs off, explicit bounds checks,
    /// unoptimised code, zeroing reset, copied initialisation).
    #[arg(long)]
    default_only: bool,
    /// Results directory [default: results/overhead-<UTC time>].
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Stats {
    median_us: f64,
    p99_us: f64,
    samples: usize,
}

impl Stats {
    /// The median of the repetitions' medians and of their p99s; samples summed.
    fn of_repetitions(reps: &[Stats]) -> Stats {
        let mid = |f: fn(&Stats) -> f64| {
            let mut v: Vec<f64> = reps.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        Stats {
            median_us: mid(|s| s.median_us),
            p99_us: mid(|s| s.p99_us),
            samples: reps.iter().map(|s| s.samples).sum(),
        }
    }
}

#[derive(Debug, serde::Serialize)]
struct Row {
    function: String,
    size: String,
    native: Stats,
    wasm: Vec<(String, Stats)>,
    /// Per repetition: native, then each configuration in order.
    repetitions: Vec<Vec<Stats>>,
}

/// One configuration measured: the default with one thing changed.
struct Setting {
    label: &'static str,
    /// Explicit bounds checks instead of a 4 GiB reservation.
    bounds: bool,
    opt: CodeOpt,
    /// Epoch-interruption checks compiled in (preemption, budgets).
    epochs: bool,
    /// The sandbox instantiated before the timed region.
    ahead: bool,
    /// Pool slots reset by their dirty pages (`RuntimeConfig::pagemap_scan`).
    scan: bool,
    /// Memory initialised from a copy-on-write image (`RuntimeConfig::memory_init_cow`).
    cow: bool,
}

const DEFAULT: Setting = Setting {
    label: "default",
    bounds: false,
    opt: CodeOpt::Speed,
    epochs: true,
    ahead: false,
    scan: true,
    cow: true,
};

const CONFIGS: [Setting; 7] = [
    DEFAULT,
    Setting { label: "instantiated-ahead", ahead: true, ..DEFAULT },
    Setting { label: "epochs-off", epochs: false, ..DEFAULT },
    Setting { label: "bounds-checked", bounds: true, ..DEFAULT },
    Setting { label: "unoptimised", opt: CodeOpt::None, ..DEFAULT },
    Setting { label: "zeroing-reset", scan: false, ..DEFAULT },
    Setting { label: "copied-init", cow: false, ..DEFAULT },
];

/// Runs `luge bench overhead`.
pub fn run(args: OverheadArgs) -> Result<()> {
    let build = args.functions.join("build");
    if !build.join("wasm").is_dir() {
        bail!(
            "{} has no builds: run `make -C {}` first",
            build.display(),
            args.functions.display()
        );
    }
    let status = Command::new("make")
        .args(["-s", "-C"])
        .arg(&args.functions)
        .arg("timed")
        .status()
        .context("cannot run make to build the native timing harnesses")?;
    if !status.success() {
        bail!("make -C {} timed failed", args.functions.display());
    }
    let mut names: Vec<String> = std::fs::read_dir(build.join("wasm"))?
        .filter_map(|e| e.ok()?.path().file_stem()?.to_str().map(str::to_owned))
        .filter(|n| args.only.is_empty() || args.only.contains(n))
        .collect();
    names.sort();
    let reps = args.repetitions as usize;
    let budget = Duration::from_millis(args.budget_ms) / reps as u32;
    let configs = if args.default_only { &CONFIGS[..1] } else { &CONFIGS[..] };
    let mut rows: Vec<Row> = Vec::new();
    for name in &names {
        for size in &args.sizes {
            rows.push(Row {
                function: name.clone(),
                size: size.clone(),
                native: Stats { median_us: 0.0, p99_us: 0.0, samples: 0 },
                wasm: Vec::new(),
                repetitions: Vec::new(),
            });
        }
    }
    let runtimes: Vec<Runtime> = configs
        .iter()
        .map(|setting| runtime_for(setting, &build, &names))
        .collect::<Result<_>>()?;
    for rep in 0..reps {
        for row in rows.iter_mut() {
            let input_path = build.join(format!("inputs/{}-{}.in", row.function, row.size));
            let input = std::fs::read(&input_path)?;
            // Native and the configurations, in an order that turns every repetition (stored
            // in column order): measured in a fixed order, the last column read ~5 % below the
            // first with the two configured alike (2026-11-27, `docs/functions.md`).
            let mut measured: Vec<Option<Stats>> = vec![None; configs.len() + 1];
            for column in order(rep, configs.len() + 1) {
                measured[column] = Some(match column.checked_sub(1) {
                    None => native(&build, &row.function, &input_path)?,
                    Some(c) => {
                        wasm(&runtimes[c], &row.function, &input, (budget, configs[c].ahead))?
                    }
                });
            }
            let measured: Vec<Stats> = measured.into_iter().flatten().collect();
            eprintln!(
                "  repetition {}/{reps} {:<15} {:<7} native {:>10.1} µs  default {:>10.1} µs",
                rep + 1,
                row.function,
                row.size,
                measured[0].median_us,
                measured[1].median_us
            );
            row.repetitions.push(measured);
        }
    }
    for row in rows.iter_mut() {
        let column = |c: usize| -> Vec<Stats> { row.repetitions.iter().map(|r| r[c]).collect() };
        row.native = Stats::of_repetitions(&column(0));
        row.wasm = configs
            .iter()
            .enumerate()
            .map(|(c, setting)| (setting.label.to_string(), Stats::of_repetitions(&column(c + 1))))
            .collect();
    }
    let table = render(&rows, configs.len());
    print!("{table}");
    let out = args.out.unwrap_or_else(|| {
        let (_, stamp) = luge_bench::scenario::utc(std::time::SystemTime::now());
        PathBuf::from(format!("results/overhead-{stamp}"))
    });
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("summary.md"), &table)?;
    std::fs::write(out.join("report.json"), serde_json::to_string_pretty(&rows)?)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// A runtime of `setting` with every function of `names` registered.
fn runtime_for(setting: &Setting, build: &Path, names: &[String]) -> Result<Runtime> {
    let runtime = Runtime::start(RuntimeConfig {
        explicit_bounds_checks: setting.bounds,
        code_opt: setting.opt,
        epoch_interruption: setting.epochs,
        pagemap_scan: setting.scan,
        memory_init_cow: setting.cow,
        ..RuntimeConfig::default()
    })?;
    for name in names {
        let mut config = FunctionConfig::new(name);
        config.limits = Limits {
            max_execution: Duration::from_secs(60),
            max_memory_bytes: 64 << 20,
            max_output_bytes: 8 << 20,
            max_request_bytes: 8 << 20,
        };
        config.relative_deadline = Duration::from_secs(60);
        let module = std::fs::read(build.join(format!("wasm/{name}.wasm")))?;
        runtime.register(config, &module)?;
    }
    Ok(runtime)
}

/// Median and p99 of the native harness (`<fn>-timed`, thread CPU time per run).
fn native(build: &Path, name: &str, input: &Path) -> Result<Stats> {
    let exe = build.join(format!("native/{name}-timed"));
    let out = Command::new(&exe)
        .stdin(std::fs::File::open(input).with_context(|| format!("{}", input.display()))?)
        .stdout(Stdio::piped())
        .output()
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| -> Result<f64> {
        let mut it = text.split_whitespace();
        while let Some(k) = it.next() {
            if k == key {
                return it.next().and_then(|v| v.parse().ok()).context("bad number");
            }
        }
        bail!("{} printed no `{key}`: {text}", exe.display())
    };
    Ok(Stats {
        median_us: field("cpu_median_us")?,
        p99_us: field("cpu_p99_us")?,
        samples: field("samples")? as usize,
    })
}

/// Median and p99 of one request in a fresh Luge sandbox — the runtime's own sandbox future,
/// run on this thread (`Runtime::run_here`) — in thread CPU time, as the native harness
/// measures, so that other jobs on the machine inflate neither side. With `ahead`, the sandbox
/// is instantiated before the timed region (`Runtime::prepare_here`, as a ready sandbox is).
fn wasm(
    runtime: &Runtime,
    name: &str,
    input: &[u8],
    (budget, ahead): (Duration, bool),
) -> Result<Stats> {
    let function = runtime.function(name).context("function vanished")?;
    for _ in 0..3 {
        runtime.run_here(&function, input.to_vec()).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    }
    let start = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < 200 && (samples.len() < 11 || start.elapsed() < budget) {
        let payload = input.to_vec();
        let prepared = if ahead {
            Some(runtime.prepare_here(&function).context("cannot instantiate ahead")?)
        } else {
            None
        };
        let t0 = thread_cpu_us();
        let result = runtime.run_here_in(&function, payload, prepared);
        let t1 = thread_cpu_us();
        result.map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        samples.push(t1 - t0);
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    Ok(Stats { median_us: samples[n / 2], p99_us: samples[(n * 99) / 100], samples: n })
}

/// The order in which repetition `rep` measures `columns` columns: all of them, starting one
/// further each repetition, so that each column is measured first (and last) as often as the
/// repetitions allow.
fn order(rep: usize, columns: usize) -> impl Iterator<Item = usize> {
    (0..columns).map(move |j| (rep + j) % columns)
}

/// The calling thread's CPU time in µs.
fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write into; the clock id is a constant of libc.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

fn render(rows: &[Row], configs: usize) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    // Per function and size: native, the default, and each configuration's ratio to native.
    let labels: Vec<&str> =
        rows.first().map_or(Vec::new(), |r| r.wasm.iter().map(|(l, _)| l.as_str()).collect());
    let _ = write!(
        s,
        "| function | size | native median µs | Luge median µs | native p99 µs | Luge p99 µs |"
    );
    for l in &labels {
        let _ = write!(s, " {l} ÷ native |");
    }
    let _ = write!(s, "\n|---|---|---:|---:|---:|---:|");
    for _ in &labels {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s);
    for r in rows {
        let w = r.wasm[0].1;
        let _ = write!(
            s,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
            r.function, r.size, r.native.median_us, w.median_us, r.native.p99_us, w.p99_us
        );
        for (_, c) in &r.wasm {
            let _ = write!(s, " {:.2}× |", c.median_us / r.native.median_us);
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "\n| configuration | geometric mean of ratios | spread over repetitions | arithmetic mean |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|");
    let geomean =
        |ratios: &[f64]| (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    for c in 0..configs {
        let ratios: Vec<f64> =
            rows.iter().map(|r| r.wasm[c].1.median_us / r.native.median_us).collect();
        let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
        // The same geometric mean within each repetition: how much it moved between them.
        let reps = rows[0].repetitions.len();
        let per_rep: Vec<f64> = (0..reps)
            .map(|k| {
                let r: Vec<f64> = rows
                    .iter()
                    .map(|row| {
                        row.repetitions[k][c + 1].median_us / row.repetitions[k][0].median_us
                    })
                    .collect();
                geomean(&r)
            })
            .collect();
        let (lo, hi) =
            per_rep.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &g| (lo.min(g), hi.max(g)));
        let _ = writeln!(
            s,
            "| {} | {:.3}× | {lo:.3}–{hi:.3}× ({reps}) | {mean:.3}× |",
            rows[0].wasm[c].0,
            geomean(&ratios)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_repetition_measures_every_column_once_starting_one_further() {
        for columns in [1, 2, 7] {
            for rep in 0..columns {
                let mut seen: Vec<usize> = order(rep, columns).collect();
                assert_eq!(seen.first(), Some(&rep), "repetition {rep} starts with column {rep}");
                seen.sort_unstable();
                assert_eq!(seen, (0..columns).collect::<Vec<_>>(), "each column once");
            }
        }
    }
}
