//! Replay of a recorded request trace (CSV).
//!
//! # Trace format
//!
//! ```text
//! # optional comment lines start with '#'; blank lines are ignored
//! arrival_us,function,execution_us,deadline_us
//! 0,3,120.5,1205
//! 12.25,0,26,
//! 40,1,,
//! ```
//!
//! - The first non-comment line is the **header**: comma-separated column names, in any order,
//!   each at most once. Exactly one arrival column is required:
//!   - `arrival_ns` or `arrival_us` — arrival instant from the start of the trace
//!     (non-decreasing down the file).
//!
//!   All other columns are optional:
//!   - `function` — the function id (`u32`); default: one function per class (id = class tag).
//!   - `class` — the class tag (`u16`); default: the class sampled from the spec's distribution
//!     when the execution is sampled, else the distribution's
//!     [`classify`](crate::ServiceDist::classify) of the given execution.
//!   - `execution_ns` or `execution_us` — execution time; default: sampled from the spec's
//!     distribution — from the row's class's part of it when the row gives a class
//!     ([`sample_in_class`](crate::ServiceDist::sample_in_class)).
//!   - `deadline_ns` or `deadline_us` — the *relative* deadline; default: the spec's
//!     [`DeadlineRule`](crate::DeadlineRule).
//! - Every data line has exactly as many comma-separated cells as the header; cells are trimmed;
//!   an empty cell in an optional column means "use the default" for that row. `_us` values are
//!   decimal microseconds converted exactly to ns (rounded half up below 1 ns); `_ns` values are
//!   decimal too.
//! - Errors name the file and the 1-based line number (every line counts).
//!
//! So a trace of bare arrival instants (e.g. inter-arrival patterns extracted from the Azure
//! Functions trace, as SFS §VII did) combines with any distribution,
//! and a full trace (arrival, function, execution, deadline) replays exactly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use luge_sched::{FunctionId, Nanos};

use crate::error::WorkloadError;
use crate::text::parse_decimal_ns;

/// One row of a [`Trace`]; `None` fields take the spec's defaults (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceRow {
    /// Arrival instant (ns from the start of the trace).
    pub at: Nanos,
    /// Function id, if the trace has one for this row.
    pub function: Option<FunctionId>,
    /// Class tag, if given.
    pub class: Option<u16>,
    /// Execution time (ns), if given.
    pub execution: Option<Nanos>,
    /// Relative deadline (ns), if given.
    pub relative_deadline: Option<Nanos>,
}

/// A parsed trace: its path (for display) and its rows, shared cheaply between clones.
#[derive(Debug, Clone)]
pub struct Trace {
    path: PathBuf,
    rows: Arc<[TraceRow]>,
}

impl PartialEq for Trace {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && (Arc::ptr_eq(&self.rows, &other.rows) || self.rows == other.rows)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Column {
    Arrival(u64),
    Function,
    Class,
    Execution(u64),
    Deadline(u64),
}

impl Column {
    fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "arrival_ns" => Column::Arrival(1),
            "arrival_us" => Column::Arrival(1_000),
            "function" => Column::Function,
            "class" => Column::Class,
            "execution_ns" => Column::Execution(1),
            "execution_us" => Column::Execution(1_000),
            "deadline_ns" => Column::Deadline(1),
            "deadline_us" => Column::Deadline(1_000),
            _ => return None,
        })
    }

    /// Columns that may not appear together (`arrival_ns` and `arrival_us`, …).
    fn same_kind(self, other: Self) -> bool {
        std::mem::discriminant(&self) == std::mem::discriminant(&other)
    }
}

impl Trace {
    /// Reads and parses a trace file.
    pub fn load(path: &Path) -> Result<Self, WorkloadError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| WorkloadError::Io { path: path.to_owned(), source })?;
        Self::parse(&text, path)
    }

    /// Parses trace text; `path` labels errors and is what the trace displays as.
    pub fn parse(text: &str, path: &Path) -> Result<Self, WorkloadError> {
        let mut header: Option<Vec<Column>> = None;
        let mut rows = Vec::new();
        let mut last_at = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let bad =
                |message: String| WorkloadError::BadLine { path: path.to_owned(), line, message };
            let content = raw.trim();
            if content.is_empty() || content.starts_with('#') {
                continue;
            }
            let cells: Vec<&str> = content.split(',').map(str::trim).collect();
            let Some(columns) = &header else {
                let mut columns: Vec<Column> = Vec::new();
                for name in &cells {
                    let col = Column::from_name(name).ok_or_else(|| {
                        bad(format!(
                            "unknown column `{name}` in the header; expected arrival_ns|arrival_us, \
                             function, class, execution_ns|execution_us, deadline_ns|deadline_us"
                        ))
                    })?;
                    if columns.iter().any(|c| c.same_kind(col)) {
                        return Err(bad(format!("column `{name}` given twice (or in both units)")));
                    }
                    columns.push(col);
                }
                if !columns.iter().any(|c| matches!(c, Column::Arrival(_))) {
                    return Err(bad("the header needs an arrival_ns or arrival_us column".into()));
                }
                header = Some(columns);
                continue;
            };
            if cells.len() != columns.len() {
                return Err(bad(format!(
                    "{} cell(s) but the header has {} column(s)",
                    cells.len(),
                    columns.len()
                )));
            }
            let mut row = TraceRow {
                at: 0,
                function: None,
                class: None,
                execution: None,
                relative_deadline: None,
            };
            for (col, cell) in columns.iter().zip(&cells) {
                if cell.is_empty() {
                    if matches!(col, Column::Arrival(_)) {
                        return Err(bad("empty arrival time".into()));
                    }
                    continue;
                }
                match *col {
                    Column::Arrival(unit) => {
                        row.at = parse_decimal_ns(cell, unit)
                            .map_err(|e| bad(format!("arrival: {e}")))?;
                    }
                    Column::Function => {
                        let id = cell.parse::<u32>().map_err(|_| {
                            bad(format!("function: `{cell}` is not an integer id (u32)"))
                        })?;
                        row.function = Some(FunctionId(id));
                    }
                    Column::Class => {
                        let tag = cell.parse::<u16>().map_err(|_| {
                            bad(format!("class: `{cell}` is not a class tag (u16)"))
                        })?;
                        row.class = Some(tag);
                    }
                    Column::Execution(unit) => {
                        row.execution = Some(
                            parse_decimal_ns(cell, unit)
                                .map_err(|e| bad(format!("execution: {e}")))?,
                        );
                    }
                    Column::Deadline(unit) => {
                        let deadline = parse_decimal_ns(cell, unit)
                            .map_err(|e| bad(format!("deadline: {e}")))?;
                        // As a spec's `deadline=` is: due the instant it arrives, it cannot
                        // be met.
                        if deadline == 0 {
                            return Err(bad("deadline: must be positive".to_owned()));
                        }
                        row.relative_deadline = Some(deadline);
                    }
                }
            }
            if row.at < last_at {
                return Err(bad(format!(
                    "arrival {} ns is earlier than the previous row's {last_at} ns (arrivals must \
                     be non-decreasing)",
                    row.at
                )));
            }
            last_at = row.at;
            rows.push(row);
        }
        if header.is_none() {
            return Err(WorkloadError::BadFile {
                path: path.to_owned(),
                message: "no header line (e.g. `arrival_us,function,execution_us,deadline_us`)"
                    .to_owned(),
            });
        }
        Ok(Self { path: path.to_owned(), rows: rows.into() })
    }

    /// The trace's path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The rows, in arrival order.
    pub fn rows(&self) -> &[TraceRow] {
        &self.rows
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let text = "# a comment\n\
                    arrival_us,function,execution_us,deadline_us\n\
                    0,3,120.5,1205\n\
                    \n\
                    12.25, 0 ,26,\n\
                    40,1,,\n";
        let t = Trace::parse(text, Path::new("t.csv")).unwrap();
        assert_eq!(
            t.rows(),
            [
                TraceRow {
                    at: 0,
                    function: Some(FunctionId(3)),
                    class: None,
                    execution: Some(120_500),
                    relative_deadline: Some(1_205_000)
                },
                TraceRow {
                    at: 12_250,
                    function: Some(FunctionId(0)),
                    class: None,
                    execution: Some(26_000),
                    relative_deadline: None
                },
                TraceRow {
                    at: 40_000,
                    function: Some(FunctionId(1)),
                    class: None,
                    execution: None,
                    relative_deadline: None
                },
            ]
        );
        let ns = Trace::parse("class,arrival_ns\n7,5\n", Path::new("n.csv")).unwrap();
        assert_eq!(ns.rows()[0].at, 5);
        assert_eq!(ns.rows()[0].class, Some(7));
        assert_eq!(ns.path(), Path::new("n.csv"));
    }

    #[test]
    fn errors_carry_the_line_number() {
        let cases = [
            ("arrival_us\n1\n2\n1\n", 4, "non-decreasing"),
            ("# c\narrival_us,bogus\n", 2, "unknown column `bogus`"),
            ("arrival_us,arrival_ns\n", 1, "twice"),
            ("function\n", 1, "arrival_ns or arrival_us"),
            ("arrival_us,function\n1,2\n\n3\n", 4, "1 cell(s)"),
            ("arrival_us,function\n1,x\n", 2, "function"),
            ("arrival_us,execution_us\n1,-3\n", 2, "execution"),
            ("arrival_us,class\n1,70000\n", 2, "class"),
            ("arrival_us\n\n,\n", 3, "2 cell(s)"),
            ("arrival_us,function\n,1\n", 2, "empty arrival"),
            ("arrival_us,deadline_us\n1,0\n", 2, "deadline: must be positive"),
        ];
        for (text, line, needle) in cases {
            let err = Trace::parse(text, Path::new("t.csv")).unwrap_err();
            let msg = err.to_string();
            assert!(msg.starts_with(&format!("t.csv:{line}: ")), "{msg}");
            assert!(msg.contains(needle), "{msg}");
        }
        let empty = Trace::parse("# nothing\n", Path::new("e.csv")).unwrap_err();
        assert!(empty.to_string().contains("no header"), "{empty}");
        assert!(Trace::parse("arrival_us\n", Path::new("e.csv")).unwrap().rows().is_empty());
    }
}
