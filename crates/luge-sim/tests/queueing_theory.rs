//! Validation of the simulator against closed forms of queueing theory (ideal machine,
//! `Overheads::NONE`, FIFO): M/M/1 at ρ = 0.5 and 0.8, M/M/2 (Erlang C) and M/D/1
//! (Pollaczek–Khinchine). Each uses ≥ 10⁶ requests and a batch-means 95 % confidence interval
//! : the test fails if the interval is wider than the 3 % tolerance (not enough power)
//! or if the simulated mean is more than 3 % from theory.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sched::{FunctionId, Overrun, PolicyKind};
use luge_sim::{Job, Overheads, SimConfig, simulate};

const MEAN_SERVICE: f64 = 100_000.0; // 100 µs
const N: usize = 1_000_000;

struct Rng(u64);
impl Rng {
    fn unit(&mut self) -> f64 {
        // SplitMix64.
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.unit()).ln()
    }
}

fn poisson_jobs(seed: u64, rate_per_ns: f64, service: impl Fn(&mut Rng) -> f64) -> Vec<Job> {
    let mut rng = Rng(seed);
    let mut t = 0.0;
    (0..N)
        .map(|_| {
            t += rng.exp(1.0 / rate_per_ns);
            let execution = service(&mut rng).round().max(1.0) as u64;
            Job {
                arrival: t as u64,
                function: FunctionId(0),
                class: 0,
                execution,
                relative_deadline: execution * 10,
                stages: 1,
                on_overrun: Overrun::Kill,
            }
        })
        .collect()
}

/// Mean response time (ns) with its batch-means 95 % half-width, dropping a 2 % warm-up.
fn mean_response(policy: PolicyKind, workers: usize, jobs: &[Job]) -> (f64, f64) {
    let mut cfg = SimConfig::new(policy, workers);
    // Queueing theory describes a queue that refuses nothing.
    cfg.policy_config.admission = luge_sched::Admission::NONE;
    cfg.overheads = Overheads::NONE;
    let out = simulate(&cfg, jobs).unwrap();
    let lat: Vec<f64> =
        out.records.iter().skip(N / 50).map(|r| r.latency().unwrap() as f64).collect();
    let batches = 30;
    let size = lat.len() / batches;
    let means: Vec<f64> = (0..batches)
        .map(|b| lat[b * size..(b + 1) * size].iter().sum::<f64>() / size as f64)
        .collect();
    let mean = means.iter().sum::<f64>() / batches as f64;
    let var = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (batches - 1) as f64;
    let t_29 = 2.045; // Student t, 97.5 %, 29 degrees of freedom.
    (mean, t_29 * (var / batches as f64).sqrt())
}

fn assert_close(what: &str, (mean, half): (f64, f64), theory: f64) {
    let err = (mean - theory).abs() / theory;
    eprintln!(
        "{what}: sim {mean:.0} ± {half:.0} ns, theory {theory:.0} ns, error {:.2} %",
        err * 100.0
    );
    assert!(
        half / theory < 0.03,
        "{what}: confidence interval ±{:.1} % is too wide",
        100.0 * half / theory
    );
    assert!(err < 0.03, "{what}: {:.2} % from theory", err * 100.0);
}

#[test]
fn mm1_at_half_and_eighty_percent_load() {
    for (rho, seed) in [(0.5, 11), (0.8, 12)] {
        let jobs = poisson_jobs(seed, rho / MEAN_SERVICE, |r| r.exp(MEAN_SERVICE));
        // M/M/1: T = 1 / (μ − λ) = S / (1 − ρ).
        assert_close(
            &format!("M/M/1 ρ={rho}"),
            mean_response(PolicyKind::Fifo, 1, &jobs),
            MEAN_SERVICE / (1.0 - rho),
        );
    }
}

#[test]
fn mm2_matches_erlang_c() {
    let (c, rho) = (2.0f64, 0.8f64);
    let a = c * rho; // offered load in Erlangs
    let jobs = poisson_jobs(21, c * rho / MEAN_SERVICE, |r| r.exp(MEAN_SERVICE));
    // Erlang C for c = 2: P(wait) = a² / (2 (1 − ρ)) / (1 + a + a² / (2 (1 − ρ))).
    let top = a * a / (2.0 * (1.0 - rho));
    let p_wait = top / (1.0 + a + top);
    let theory = MEAN_SERVICE + p_wait * MEAN_SERVICE / (c * (1.0 - rho));
    assert_close("M/M/2 ρ=0.8", mean_response(PolicyKind::Fifo, 2, &jobs), theory);
}

#[test]
fn md1_matches_pollaczek_khinchine() {
    let rho = 0.7;
    let jobs = poisson_jobs(31, rho / MEAN_SERVICE, |_| MEAN_SERVICE);
    // M/D/1: W = ρ S / (2 (1 − ρ)).
    let theory = MEAN_SERVICE + rho * MEAN_SERVICE / (2.0 * (1.0 - rho));
    assert_close("M/D/1 ρ=0.7", mean_response(PolicyKind::Fifo, 1, &jobs), theory);
}
