//! The results directory of a scenario run, Markdown tables and number formatting.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use luge_sim::{Chart, Series, svg};
use serde_json::json;

use super::machine::{Machine, load_average};
use super::{ScenarioOptions, ScenarioOutput, layout_name, wait_name};
use crate::error::BenchError;

/// `<root>/<scenario>-<stamp>/` and the files written into it.
pub(crate) struct Results {
    dir: PathBuf,
    files: Vec<PathBuf>,
}

impl Results {
    /// Creates a fresh directory (a `-2`, `-3`, … suffix if the second is taken).
    pub(crate) fn create(
        root: &Path,
        scenario: &str,
        machine: &Machine,
    ) -> Result<Self, BenchError> {
        let fail = |p: &Path, e: std::io::Error| {
            BenchError::Scenario(format!("cannot create {}: {e}", p.display()))
        };
        std::fs::create_dir_all(root).map_err(|e| fail(root, e))?;
        for n in 1.. {
            let name = if n == 1 {
                format!("{scenario}-{}", machine.stamp)
            } else {
                format!("{scenario}-{}-{n}", machine.stamp)
            };
            let dir = root.join(name);
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Self { dir, files: Vec::new() }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 100 => {}
                Err(e) => return Err(fail(&dir, e)),
            }
        }
        unreachable!("the loop returns")
    }

    /// The directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes a file of the directory.
    pub(crate) fn write(&mut self, name: &str, text: &str) -> Result<(), BenchError> {
        let path = self.dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| BenchError::Scenario(format!("cannot write {}: {e}", path.display())))?;
        self.files.push(path);
        Ok(())
    }

    /// Writes an SVG line chart.
    pub(crate) fn plot(
        &mut self,
        name: &str,
        chart: &Chart,
        series: &[Series],
    ) -> Result<(), BenchError> {
        self.write(name, &svg(chart, series))
    }

    /// Writes `summary.md` and `report.json` and returns the output.
    pub(crate) fn finish(
        mut self,
        scenario: &str,
        opts: &ScenarioOptions,
        machine: Machine,
        pinning: &str,
        body: String,
        results: serde_json::Value,
    ) -> Result<ScenarioOutput, BenchError> {
        let load_after = load_average();
        let mut summary = String::new();
        let _ = writeln!(
            summary,
            "# luge bench {scenario}{}\n",
            if opts.quick { " (quick)" } else { "" }
        );
        let _ = writeln!(summary, "- machine: {}", machine.describe());
        let _ = writeln!(summary, "- load average at the end: {load_after}");
        let _ = writeln!(
            summary,
            "- Luge: 1 worker, 1 dispatcher; layouts {}; wait modes {}",
            opts.layouts.iter().map(|l| layout_name(*l)).collect::<Vec<_>>().join(", "),
            opts.modes.iter().map(|m| wait_name(*m)).collect::<Vec<_>>().join(", ")
        );
        let _ = writeln!(summary, "- threads: {pinning}");
        if machine.build == "debug" {
            let _ = writeln!(
                summary,
                "- **debug build**: these numbers prove the pipeline only; measure with --release"
            );
        }
        let _ = writeln!(summary);
        summary.push_str(&body);
        let report = json!({
            "scenario": scenario,
            "quick": opts.quick,
            "machine": machine,
            "load_average_end": load_after,
            "layouts": opts.layouts.iter().map(|l| layout_name(*l)).collect::<Vec<_>>(),
            "wait_modes": opts.modes.iter().map(|m| wait_name(*m)).collect::<Vec<_>>(),
            "workers": 1,
            "dispatchers": 1,
            "pinning": pinning,
            "seed": opts.seed,
            "results": results,
        });
        self.write("summary.md", &summary)?;
        self.write("report.json", &serde_json::to_string_pretty(&report).unwrap_or_default())?;
        Ok(ScenarioOutput { dir: self.dir, summary, files: self.files, report })
    }
}

/// A Markdown table.
pub(crate) struct Table {
    header: Vec<String>,
    right: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns; a leading `>` right-aligns one (numbers).
    pub(crate) fn new(columns: &[&str]) -> Self {
        Self {
            header: columns.iter().map(|c| c.trim_start_matches('>').to_owned()).collect(),
            right: columns.iter().map(|c| c.starts_with('>')).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row of cells, in column order.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// The table under a `## title` heading, a blank line after it.
    pub(crate) fn section(&self, title: &str) -> String {
        format!("## {title}\n\n{}\n", self.render())
    }

    /// The table: the header row, the alignment row, then a row per [`row`](Self::row), each
    /// column padded to its widest cell.
    pub(crate) fn render(&self) -> String {
        let n = self.header.len();
        let mut width: Vec<usize> = self.header.iter().map(|h| h.chars().count().max(3)).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, w) in width.iter().enumerate() {
                let c = cells.get(i).map_or("", String::as_str);
                let pad = w.saturating_sub(c.chars().count());
                if self.right[i] {
                    let _ = write!(s, " {}{c} |", " ".repeat(pad));
                } else {
                    let _ = write!(s, " {c}{} |", " ".repeat(pad));
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.header);
        out.push('|');
        for (i, w) in width.iter().enumerate() {
            if self.right[i] {
                let _ = write!(out, "{}:|", "-".repeat(w + 1));
            } else {
                let _ = write!(out, "{}|", "-".repeat(w + 2));
            }
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// `name` for a file name: every character but ASCII letters and digits becomes `-`.
pub(crate) fn slug(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect()
}

/// µs with sensible precision; `inf` for `None` (a failure at that rank).
pub(crate) fn us(v: Option<f64>) -> String {
    match v {
        None => "inf".to_owned(),
        Some(x) if x >= 1000.0 => format!("{x:.0}"),
        Some(x) if x >= 10.0 => format!("{x:.1}"),
        Some(x) => format!("{x:.2}"),
    }
}

/// Requests per second.
pub(crate) fn rps(v: f64) -> String {
    if v >= 10_000.0 { format!("{:.1}k", v / 1000.0) } else { format!("{v:.0}") }
}

/// A ratio (`1.23×`), `∞` or `-`.
pub(crate) fn ratio(v: Option<f64>) -> String {
    match v {
        None => "-".to_owned(),
        Some(x) if x.is_infinite() => "∞".to_owned(),
        Some(x) if x >= 100.0 => format!("{x:.0}×"),
        Some(x) => format!("{x:.2}×"),
    }
}

/// Median, minimum and maximum of `v` (sorted in place; an infinite value is a failure at its
/// rank); `None` when `v` is empty or the median is infinite. With an even count the median is
/// the mean of the two middle values.
pub(crate) fn spread(v: &mut [f64]) -> Option<(f64, f64, f64)> {
    v.sort_by(f64::total_cmp);
    let m = middle(v)?;
    m.is_finite().then(|| (m, v[0], v[v.len() - 1]))
}

/// The median of sorted `v`: its middle value, or the mean of its two middle ones.
pub(crate) fn middle(v: &[f64]) -> Option<f64> {
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// A ratio's [`spread`] as `median [min–max]` (just the median when there is no spread).
pub(crate) fn ratio_range(s: Option<(f64, f64, f64)>) -> String {
    match s {
        Some((m, lo, hi)) if lo < hi => {
            format!("{} [{}–{}]", ratio(Some(m)), ratio(Some(lo)), ratio(Some(hi)))
        }
        Some((m, _, _)) => ratio(Some(m)),
        None => ratio(None),
    }
}

/// Percent with 2 decimals.
pub(crate) fn pct(v: f64) -> String {
    format!("{:.2}", 100.0 * v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_render_as_markdown() {
        let mut t = Table::new(&["name", ">value"]);
        t.row(vec!["a".into(), "1.5".into()]);
        t.row(vec!["long name".into(), "10".into()]);
        let s = t.render();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].ends_with(":|"), "{s}");
        assert!(lines.iter().all(|l| l.chars().count() == lines[0].chars().count()), "{s}");
        assert_eq!(us(None), "inf");
        assert_eq!(ratio(Some(f64::INFINITY)), "∞");
        assert_eq!(rps(123_456.0), "123.5k");
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(spread(&mut [3.0, 1.0, 2.0]), Some((2.0, 1.0, 3.0)));
        assert_eq!(spread(&mut [4.0, 1.0, 2.0, 3.0]), Some((2.5, 1.0, 4.0)));
        assert_eq!(spread(&mut [1.0, f64::INFINITY]), None, "a failure in the middle");
        assert_eq!(spread(&mut [1.0, 2.0, f64::INFINITY]), Some((2.0, 1.0, f64::INFINITY)));
        assert_eq!(spread(&mut []), None);
    }
}
