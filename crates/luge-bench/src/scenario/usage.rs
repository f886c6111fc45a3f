//! What the server threads of this process (or of a server process) spent: CPU time and context
//! switches of the threads whose names start with given prefixes, read from `/proc/self/task`
//! or `/proc/<pid>/task` (`schedstat`'s time on CPU in ns; `status`'s voluntary and involuntary
//! switches). A scenario samples before and after
//! a run of a server started in the same process and divides by the requests it answered. A
//! thread that exits between the samples is lost from the difference: sample within the server's
//! lifetime.

use std::fs;

/// CPU time and context switches summed over the matching threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Usage {
    /// Time on CPU, ns.
    pub cpu_ns: u64,
    /// Voluntary and involuntary context switches.
    pub switches: u64,
    /// Threads that matched.
    pub threads: usize,
}

impl Usage {
    /// Reads the threads of this process whose name starts with one of `prefixes` (`None` when
    /// `/proc/self/task` cannot be read).
    pub(crate) fn of_threads(prefixes: &[&str]) -> Option<Self> {
        Self::of_tasks("/proc/self/task", |name| prefixes.iter().any(|p| name.starts_with(p)))
    }

    /// Reads every thread of process `pid` (another process: a server a scenario started).
    pub(crate) fn of_process(pid: u32) -> Option<Self> {
        Self::of_tasks(&format!("/proc/{pid}/task"), |_| true)
    }

    /// Sums the threads in `tasks` whose name `matches`.
    fn of_tasks(tasks: &str, matches: impl Fn(&str) -> bool) -> Option<Self> {
        let mut usage = Usage::default();
        for entry in fs::read_dir(tasks).ok()?.flatten() {
            let dir = entry.path();
            let Ok(name) = fs::read_to_string(dir.join("comm")) else { continue };
            if !matches(name.trim_end()) {
                continue;
            }
            let cpu = fs::read_to_string(dir.join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok());
            let switches = fs::read_to_string(dir.join("status")).ok().map(|s| switches_of(&s));
            if let (Some(cpu), Some(switches)) = (cpu, switches) {
                usage.cpu_ns += cpu;
                usage.switches += switches;
                usage.threads += 1;
            }
        }
        Some(usage)
    }

    /// What was spent between `earlier` and `self`, per one of `requests` requests: (CPU µs,
    /// context switches); `None` without requests, or when either sample found no thread (an
    /// unreadable `/proc`, or prefixes naming none: not 0 µs).
    pub(crate) fn per_request(&self, earlier: &Usage, requests: u64) -> Option<(f64, f64)> {
        (requests > 0 && self.threads > 0 && earlier.threads > 0).then(|| {
            let n = requests as f64;
            (
                self.cpu_ns.saturating_sub(earlier.cpu_ns) as f64 / 1_000.0 / n,
                self.switches.saturating_sub(earlier.switches) as f64 / n,
            )
        })
    }
}

/// `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches` of a `status` file.
fn switches_of(status: &str) -> u64 {
    status
        .lines()
        .filter(|l| {
            l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches")
        })
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_named_thread_that_works_is_counted() {
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("usage-test-spin".into())
            .spawn(move || {
                let start = std::time::Instant::now();
                let mut x = 0u64;
                while start.elapsed() < std::time::Duration::from_millis(30) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                let _ = wait.recv();
            })
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(60));
        let usage = Usage::of_threads(&["usage-test-spin"]).unwrap();
        assert_eq!(usage.threads, 1);
        assert!(usage.cpu_ns >= 10_000_000, "{usage:?}");
        let before = Usage { threads: 1, ..Usage::default() };
        let (cpu_us, _) = usage.per_request(&before, 1000).unwrap();
        assert!(cpu_us >= 10.0, "{cpu_us}");
        let none = Usage::of_threads(&["no-such-thread"]).unwrap();
        assert_eq!(none.threads, 0);
        assert_eq!(none.per_request(&none, 1000), None, "no thread found is no figure, not 0");
        // The whole process, read as another process would be: this thread and the rest too.
        let all = Usage::of_process(std::process::id()).unwrap();
        assert!(all.threads >= 2 && all.cpu_ns >= usage.cpu_ns, "{all:?} vs {usage:?}");
        assert!(Usage::of_process(u32::MAX).is_none(), "no such process");
        go.send(()).unwrap();
        worker.join().unwrap();
    }

    #[test]
    fn switches_add_both_kinds() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t7\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(switches_of(status), 10);
    }
}
