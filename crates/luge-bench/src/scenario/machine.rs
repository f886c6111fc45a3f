//! What a result was measured on: CPU model, cores, kernel, commit, build profile, load, date.

use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

/// The machine and the build, recorded with every result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// `model name` of `/proc/cpuinfo`.
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cores: usize,
    /// `uname -r`.
    pub kernel: String,
    /// `git rev-parse --short HEAD` of the working directory, `-dirty` when it has changes.
    pub commit: String,
    /// The commit this binary was built from (`HEAD` when its build last ran; `unknown` without
    /// git). It differs from [`commit`](Self::commit) when an older binary runs from a newer
    /// checkout, as in a before/after comparison: then the numbers are this commit's.
    pub binary_commit: String,
    /// `release` or `debug` (debug numbers prove the pipeline, nothing more).
    pub build: String,
    /// `/proc/loadavg` when the scenario started: other work on the box shows here.
    pub load_average: String,
    /// Start of the scenario, UTC (ISO 8601).
    pub started_utc: String,
    /// The same, for a directory name (`YYYYMMDDTHHMMSSZ`).
    #[serde(skip)]
    pub stamp: String,
}

impl Machine {
    /// Reads everything now.
    pub fn detect() -> Self {
        let (iso, stamp) = utc(SystemTime::now());
        Self {
            cpu_model: cpu_model(),
            cores: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            commit: commit(),
            binary_commit: env!("LUGE_BUILD_COMMIT").to_owned(),
            build: if cfg!(debug_assertions) { "debug" } else { "release" }.to_owned(),
            load_average: load_average(),
            started_utc: iso,
            stamp,
        }
    }

    /// One line for a summary.
    pub fn describe(&self) -> String {
        format!(
            "{}, {} cores, Linux {}, {}, {} build, load average {} at {}",
            self.cpu_model,
            self.cores,
            self.kernel,
            self.code(),
            self.build,
            self.load_average,
            self.started_utc
        )
    }

    /// Which code ran: the checkout's commit, and the binary's when it was built elsewhere.
    fn code(&self) -> String {
        let checkout = self.commit.trim_end_matches("-dirty");
        if self.binary_commit == "unknown" || self.binary_commit == checkout {
            format!("commit {}", self.commit)
        } else {
            format!(
                "binary built at commit {} (run from checkout {})",
                self.binary_commit, self.commit
            )
        }
    }
}

/// The first three fields of `/proc/loadavg`.
pub(crate) fn load_average() -> String {
    let text = read_trimmed("/proc/loadavg");
    text.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path).map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn commit() -> String {
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(c) if !c.is_empty() => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{c}-dirty") } else { c }
        }
        _ => "unknown".to_owned(),
    }
}

/// (`YYYY-MM-DDTHH:MM:SSZ`, `YYYYMMDDTHHMMSSZ`) of a time.
pub fn utc(t: SystemTime) -> (String, String) {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (h, m, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let (y, mo, d) = civil_from_days(days);
    (
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{m:02}:{s:02}Z"),
        format!("{y:04}{mo:02}{d:02}T{h:02}{m:02}{s:02}Z"),
    )
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn utc_dates() {
        let at = |s: u64| utc(UNIX_EPOCH + Duration::from_secs(s));
        assert_eq!(at(0).0, "1970-01-01T00:00:00Z");
        assert_eq!(at(951_782_400).0, "2000-02-29T00:00:00Z");
        assert_eq!(at(1_700_000_000), ("2023-11-14T22:13:20Z".into(), "20231114T221320Z".into()));
    }

    #[test]
    fn a_binary_from_another_commit_is_named() {
        let mut m = Machine::detect();
        m.commit = "abc1234-dirty".into();
        m.binary_commit = "abc1234".into();
        assert!(m.describe().contains("commit abc1234-dirty,"), "{}", m.describe());
        m.binary_commit = "0ld0ld0".into();
        assert!(
            m.describe()
                .contains("binary built at commit 0ld0ld0 (run from checkout abc1234-dirty)"),
            "{}",
            m.describe()
        );
        m.binary_commit = "unknown".into();
        assert!(m.describe().contains("commit abc1234-dirty,"), "{}", m.describe());
    }

    #[test]
    fn this_build_knows_its_commit() {
        // Built from a git checkout (CI clones one), the build script found HEAD.
        let m = Machine::detect();
        if m.commit == "unknown" {
            // No git, or a checkout git refuses to read (owned by another user): said, not
            // silently passed; scripts/install-deps.sh installs git.
            eprintln!("git cannot read this checkout's commit: nothing to compare");
        } else {
            assert!(m.commit.starts_with(&m.binary_commit), "{} vs {}", m.commit, m.binary_commit);
        }
    }
}
