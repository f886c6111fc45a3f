//! Discrete service-time mixes and the user-defined *mix file* format (`file:PATH`).
//!
//! A [`Mix`] is a list of request classes, each with an execution time (a point, or a uniform
//! range), a relative weight and optionally a fixed relative deadline. The named bimodal, SD-VBS,
//! Edge-RT and Azure workloads are mixes too (see `dist.rs`).
//!
//! # Mix file format
//!
//! Plain text, one class per line; no dependency on a TOML or CSV parser:
//!
//! ```text
//! # name          execution_us   weight   [deadline_us]
//! sift            113            90
//! segmentation    1100           9        2200
//! classification  2070           1        4140
//! batch           200..400       5
//! ```
//!
//! - Fields are separated by whitespace; `#` starts a comment (anywhere on a line); blank lines
//!   are ignored. Line numbers in errors are 1-based and count every line.
//! - `name`: the class name (unique, no whitespace). Classes get tags 0, 1, 2, … in file order;
//!   a mix has at most 65 536 (the tag is a `u16`), and a line past that is refused.
//! - `execution_us`: execution time in microseconds, a decimal number (`113`, `2.5`) converted
//!   exactly to nanoseconds, or `lo..hi` for a uniform range (both ends inclusive, `lo ≤ hi`).
//! - `weight`: positive relative frequency (share of *requests*, not of work); weights are
//!   normalised, so `90 9 1` and `0.9 0.09 0.01` are the same mix.
//! - `deadline_us` (optional): the class's fixed relative deadline in microseconds, used by the
//!   `class:Kx` deadline rule (the default); classes without one get K × execution.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use luge_sched::Nanos;

use crate::error::WorkloadError;
use crate::text::parse_decimal_ns;

/// One class of a [`Mix`].
#[derive(Debug, Clone, PartialEq)]
pub struct MixClass {
    /// Class name (unique within the mix, no whitespace).
    pub name: String,
    /// Shortest execution time (ns); the only one for a point class.
    pub execution: Nanos,
    /// Longest execution time (ns); equal to `execution` for a point class, otherwise executions
    /// are uniform on `[execution, execution_max]`.
    pub execution_max: Nanos,
    /// Relative frequency (> 0, finite); normalised over the mix.
    pub weight: f64,
    /// Fixed relative deadline of the class, if it has one (ns).
    pub deadline: Option<Nanos>,
}

impl MixClass {
    /// A class whose requests all execute for exactly `execution` ns.
    pub fn point(name: &str, execution: Nanos, weight: f64) -> Self {
        Self { name: name.to_owned(), execution, execution_max: execution, weight, deadline: None }
    }

    /// A class whose executions are uniform on `[lo, hi]` ns.
    pub fn uniform(name: &str, lo: Nanos, hi: Nanos, weight: f64) -> Self {
        Self { name: name.to_owned(), execution: lo, execution_max: hi, weight, deadline: None }
    }

    /// Gives the class a fixed relative deadline (builder style).
    pub fn with_deadline(mut self, deadline: Nanos) -> Self {
        self.deadline = Some(deadline);
        self
    }
}

/// A discrete mix of request classes (see the module documentation for the file format).
#[derive(Debug, Clone, PartialEq)]
pub struct Mix {
    classes: Vec<MixClass>,
}

impl Mix {
    /// Validates a list of classes: at least one and at most 65 536 classes, unique non-empty
    /// names without whitespace, finite positive weights, `execution ≤ execution_max`, and a
    /// positive mean (not every execution 0).
    pub fn new(classes: Vec<MixClass>) -> Result<Self, String> {
        if classes.is_empty() {
            return Err("a mix needs at least one class".to_owned());
        }
        if classes.len() > MAX_CLASSES {
            return Err(format!(
                "{} classes; at most {MAX_CLASSES} fit a u16 class tag",
                classes.len()
            ));
        }
        if classes.iter().all(|c| c.execution_max == 0) {
            return Err("at least one class needs a positive execution time".to_owned());
        }
        let mut names = HashSet::with_capacity(classes.len());
        for c in &classes {
            validate_class(c)?;
            if !names.insert(c.name.as_str()) {
                return Err(format!("duplicate class name `{}`", c.name));
            }
        }
        // Weights are relative: each finite, but their sum must be too (two of 1e308 made every
        // class's share 0, and the workload silently empty).
        if !classes.iter().map(|c| c.weight).sum::<f64>().is_finite() {
            return Err("the weights' sum is not a finite number: scale them down".to_owned());
        }
        Ok(Self { classes })
    }

    /// A mix from classes known to be valid (the presets; checked by a unit test in `dist.rs`).
    pub(crate) fn trusted(classes: Vec<MixClass>) -> Self {
        Self { classes }
    }

    /// The classes, in tag order.
    pub fn classes(&self) -> &[MixClass] {
        &self.classes
    }

    /// Reads and parses a mix file.
    pub fn load(path: &Path) -> Result<Self, WorkloadError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| WorkloadError::Io { path: path.to_owned(), source })?;
        Self::parse(&text, path)
    }

    /// Parses mix-file text; `origin` only labels error messages. A class past the 65 536th is
    /// refused at its line, before the rest of the file is read.
    pub fn parse(text: &str, origin: &Path) -> Result<Self, WorkloadError> {
        let mut classes: Vec<MixClass> = Vec::new();
        let mut names: HashSet<&str> = HashSet::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let bad =
                |message: String| WorkloadError::BadLine { path: origin.to_owned(), line, message };
            let content = raw.split('#').next().unwrap_or("");
            let fields: Vec<&str> = content.split_whitespace().collect();
            if fields.is_empty() {
                continue;
            }
            if !(3..=4).contains(&fields.len()) {
                return Err(bad(format!(
                    "expected `name execution_us weight [deadline_us]`, found {} field(s)",
                    fields.len()
                )));
            }
            let name = fields[0];
            if classes.len() == MAX_CLASSES {
                return Err(bad(format!(
                    "more than {MAX_CLASSES} classes; at most {MAX_CLASSES} fit a u16 class tag"
                )));
            }
            let (lo, hi) = match fields[1].split_once("..") {
                Some((lo, hi)) => (
                    parse_decimal_ns(lo, 1_000).map_err(|e| bad(format!("execution_us: {e}")))?,
                    parse_decimal_ns(hi, 1_000).map_err(|e| bad(format!("execution_us: {e}")))?,
                ),
                None => {
                    let v = parse_decimal_ns(fields[1], 1_000)
                        .map_err(|e| bad(format!("execution_us: {e}")))?;
                    (v, v)
                }
            };
            let weight: f64 = fields[2]
                .parse()
                .map_err(|_| bad(format!("weight: `{}` is not a number", fields[2])))?;
            let deadline = match fields.get(3) {
                Some(d) => {
                    Some(parse_decimal_ns(d, 1_000).map_err(|e| bad(format!("deadline_us: {e}")))?)
                }
                None => None,
            };
            let class = MixClass {
                name: name.to_owned(),
                execution: lo,
                execution_max: hi,
                weight,
                deadline,
            };
            validate_class(&class).map_err(bad)?;
            if !names.insert(name) {
                return Err(bad(format!("duplicate class name `{name}`")));
            }
            classes.push(class);
        }
        Self::new(classes)
            .map_err(|message| WorkloadError::BadFile { path: PathBuf::from(origin), message })
    }
}

/// The most classes a mix may have: class tags are `u16`.
const MAX_CLASSES: usize = u16::MAX as usize + 1;

fn validate_class(c: &MixClass) -> Result<(), String> {
    if c.name.is_empty() || c.name.chars().any(char::is_whitespace) {
        return Err(format!("class name `{}` must be non-empty without whitespace", c.name));
    }
    if !(c.weight.is_finite() && c.weight > 0.0) {
        return Err(format!("weight of `{}` must be a positive number, got {}", c.name, c.weight));
    }
    if c.execution > c.execution_max {
        return Err(format!("execution range of `{}` has lo > hi", c.name));
    }
    // As a spec's `deadline=` is: a request due the instant it arrives cannot be met.
    if c.deadline == Some(0) {
        return Err(format!("deadline of `{}` must be positive", c.name));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example() {
        let text = "# name execution_us weight [deadline_us]\n\
                    sift 113 90\n\
                    \n\
                    segmentation 1100 9 2200   # fixed deadline\n\
                    classification 2070 1 4140\n\
                    batch 200..400.5 5\n";
        let mix = Mix::parse(text, Path::new("x.mix")).unwrap();
        let c = mix.classes();
        assert_eq!(c.len(), 4);
        assert_eq!(c[0], MixClass::point("sift", 113_000, 90.0));
        assert_eq!(c[1].deadline, Some(2_200_000));
        assert_eq!((c[3].execution, c[3].execution_max), (200_000, 400_500));
    }

    #[test]
    fn errors_carry_the_line_number() {
        let cases = [
            ("a 10 1\nb ten 1\n", 2, "execution_us"),
            ("# c\n\na 10 1\nb 10 0\n", 4, "weight"),
            ("a 10 1 5 6\n", 1, "field"),
            ("a 10 1\na 20 1\n", 2, "duplicate"),
            ("a 30..20 1\n", 1, "lo > hi"),
            ("a 10 x\n", 1, "weight"),
            ("a 10 1 0\n", 1, "deadline of `a` must be positive"),
        ];
        for (text, line, needle) in cases {
            let err = Mix::parse(text, Path::new("m.mix")).unwrap_err();
            let msg = err.to_string();
            assert!(matches!(err, WorkloadError::BadLine { line: l, .. } if l == line), "{msg}");
            assert!(msg.starts_with(&format!("m.mix:{line}: ")), "{msg}");
            assert!(msg.contains(needle), "{msg}");
        }
        let huge = Mix::parse("a 10 1e308\nb 20 1e308\n", Path::new("h.mix")).unwrap_err();
        assert!(huge.to_string().contains("weights' sum"), "{huge}");
        let empty = Mix::parse("# nothing\n", Path::new("e.mix")).unwrap_err();
        assert!(empty.to_string().contains("at least one class"), "{empty}");
    }

    /// The class limit is checked as the file is read: the 65 537th class is refused at its
    /// line (the rest of a huge file is never parsed); 65 536 distinct classes are a mix.
    #[test]
    fn the_class_limit_is_met_while_reading() {
        let mut text: String = (0..MAX_CLASSES).map(|i| format!("c{i} 10 1\n")).collect();
        let mix = Mix::parse(&text, Path::new("big.mix")).unwrap();
        assert_eq!(mix.classes().len(), MAX_CLASSES);
        assert_eq!(Mix::new(mix.classes().to_vec()).unwrap(), mix);
        text.push_str("extra 10 1\nnot a class line\n");
        let err = Mix::parse(&text, Path::new("big.mix")).unwrap_err();
        assert!(
            matches!(&err, WorkloadError::BadLine { line, .. } if *line == MAX_CLASSES + 1),
            "{err}"
        );
        assert!(err.to_string().contains("more than 65536 classes"), "{err}");
        let mut dup = mix.classes().to_vec();
        dup.push(MixClass::point("c7", 10, 1.0));
        dup.remove(0);
        assert!(Mix::new(dup).unwrap_err().contains("duplicate class name `c7`"));
    }
}
