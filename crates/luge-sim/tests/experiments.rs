//! Every named experiment runs end to end in quick mode and writes its CSV, SVG and summary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use luge_sim::{Experiment, ExperimentOptions, Overheads, run_experiment};

#[test]
fn every_experiment_runs_in_quick_mode() {
    let root = std::env::temp_dir().join(format!("luge-sim-exp-{}", std::process::id()));
    for exp in Experiment::ALL {
        let opts = ExperimentOptions {
            quick: true,
            out_dir: root.join(exp.name()),
            threads: 2,
            seed: 1,
            overheads: Overheads::DEFAULT,
        };
        let out = run_experiment(exp, &opts, &|_, _, _| {})
            .unwrap_or_else(|e| panic!("{}: {e}", exp.name()));
        assert!(out.summary.starts_with("# "), "{}", exp.name());
        let names: Vec<String> = out
            .files
            .iter()
            .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        for must in ["results.csv", "summary.md"] {
            assert!(names.iter().any(|n| n == must), "{}: no {must}", exp.name());
        }
        assert!(names.iter().any(|n| n.ends_with(".svg")), "{}: no plot", exp.name());
        let csv = std::fs::read_to_string(opts.out_dir.join("results.csv")).unwrap();
        assert!(csv.lines().count() >= 3, "{}: csv has no data rows", exp.name());
        // Unquoted CSV: every row has the header's columns (a label with a comma, or a row
        // with a field too few, shifts every column after it).
        let columns = |line: &str| line.split(',').count();
        let mut lines = csv.lines();
        let header = columns(lines.next().unwrap());
        for row in lines {
            assert_eq!(columns(row), header, "{}: {row}", exp.name());
        }
    }
    let _ = std::fs::remove_dir_all(&root);
}
