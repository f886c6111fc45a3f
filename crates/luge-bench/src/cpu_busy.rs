//! How busy each CPU was while the load generator ran, from the kernel's per-CPU counters
//! (`/proc/stat`), so that a result can say when the load generator had no CPU left: on a small
//! box the generator shares cores with the node, and past that point a figure measures the box
//! as much as the node.

use serde::Serialize;

/// How busy the CPUs were over a run (sending and drain), from `/proc/stat`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GeneratorCpu {
    /// Every CPU's busy share (steal counts as busy: the time was not free).
    pub busy: Vec<CpuBusy>,
    /// The CPUs the load generator could run on (the sending thread's affinity).
    pub cpus: Vec<usize>,
    /// Their mean busy share; `None` where `/proc/stat` cannot be read.
    pub generator_busy: Option<f64>,
}

impl GeneratorCpu {
    /// Runs `f` (the load generator, on threads that inherit the caller's affinity) and
    /// measures the CPUs around it.
    pub(crate) fn around<T>(f: impl FnOnce() -> T) -> (T, Self) {
        let before = CpuTimes::now();
        let out = f();
        let busy = before.zip(CpuTimes::now()).map_or(Vec::new(), |(a, b)| a.busy_until(&b));
        let cpus = luge_runtime::affinity();
        let generator_busy = busy_of(&busy, &cpus);
        (out, Self { busy, cpus, generator_busy })
    }

    /// Whether the generator's CPUs were saturated ([`SATURATED`]).
    pub fn saturated(&self) -> bool {
        self.generator_busy.is_some_and(|b| b >= SATURATED)
    }
}

/// A CPU at or above this busy share is saturated: what runs there waits for it.
pub const SATURATED: f64 = 0.95;

/// Cumulative busy and total time of every CPU, in clock ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CpuTimes(Vec<(usize, u64, u64)>);

impl CpuTimes {
    /// Now, or `None` where `/proc/stat` cannot be read (not Linux).
    pub(crate) fn now() -> Option<Self> {
        std::fs::read_to_string("/proc/stat").ok().map(|text| Self::parse(&text))
    }

    /// The `cpuN` lines of `/proc/stat` text: busy = everything but `idle` and `iowait`
    /// (steal included: the hypervisor gave that time to someone else, so it was not free).
    pub(crate) fn parse(text: &str) -> Self {
        let cpus = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_ascii_whitespace();
                let cpu = fields.next()?.strip_prefix("cpu")?.parse::<usize>().ok()?;
                let ticks: Vec<u64> = fields.map_while(|f| f.parse().ok()).collect();
                // user nice system idle iowait irq softirq steal (guest time is inside user).
                let total: u64 = ticks.iter().take(8).sum();
                let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
                Some((cpu, total.saturating_sub(idle), total))
            })
            .collect();
        Self(cpus)
    }

    /// Each CPU's busy share between `self` (earlier) and `later`, by CPU number; a CPU with no
    /// ticks in between (too short a span) is left out.
    pub(crate) fn busy_until(&self, later: &Self) -> Vec<CpuBusy> {
        self.0
            .iter()
            .filter_map(|&(cpu, busy0, total0)| {
                let &(_, busy1, total1) = later.0.iter().find(|c| c.0 == cpu)?;
                let total = total1.checked_sub(total0).filter(|&t| t > 0)?;
                let busy = busy1.saturating_sub(busy0).min(total);
                Some(CpuBusy { cpu, busy: busy as f64 / total as f64 })
            })
            .collect()
    }
}

/// One CPU's busy share over a span.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuBusy {
    /// The CPU's number.
    pub cpu: usize,
    /// The share of the span it was busy, 0 to 1.
    pub busy: f64,
}

/// The mean busy share of `cpus` (the CPUs a load generator may run on), if any was measured.
pub(crate) fn busy_of(shares: &[CpuBusy], cpus: &[usize]) -> Option<f64> {
    let of: Vec<f64> = shares.iter().filter(|s| cpus.contains(&s.cpu)).map(|s| s.busy).collect();
    (!of.is_empty()).then(|| of.iter().sum::<f64>() / of.len() as f64)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  300 0 100 1000 0 0 0 0 0 0\n\
                          cpu0 100 0 50 500 0 0 0 0 0 0\n\
                          cpu1 200 0 50 500 0 0 0 0 0 0\n\
                          intr 12345\n";
    const AFTER: &str = "cpu  600 0 200 1100 0 0 0 0 0 0\n\
                         cpu0 190 0 60 500 0 0 0 0 0 0\n\
                         cpu1 210 0 50 580 10 0 0 10 0 0\n\
                         intr 23456\n";

    #[test]
    fn busy_is_the_share_of_ticks_neither_idle_nor_waiting_for_io() {
        let (a, b) = (CpuTimes::parse(BEFORE), CpuTimes::parse(AFTER));
        // cpu0: 100 busy of 100; cpu1: 10 user + 10 steal of 110 (80 idle, 10 iowait).
        let shares = a.busy_until(&b);
        assert_eq!(shares.len(), 2, "the aggregate `cpu` line is not a CPU");
        assert_eq!(shares[0], CpuBusy { cpu: 0, busy: 1.0 });
        assert!((shares[1].busy - 20.0 / 110.0).abs() < 1e-12, "{shares:?}");
        assert_eq!(busy_of(&shares, &[0]), Some(1.0));
        assert!((busy_of(&shares, &[0, 1]).unwrap() - (1.0 + 20.0 / 110.0) / 2.0).abs() < 1e-12);
        assert_eq!(busy_of(&shares, &[7]), None);
        // No time in between: nothing to say.
        assert!(a.busy_until(&a).is_empty());
    }

    #[test]
    fn this_machine_has_per_cpu_counters() {
        let now = CpuTimes::now().unwrap();
        assert!(!now.0.is_empty());
    }
}
