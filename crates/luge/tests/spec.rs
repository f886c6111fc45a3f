//! `docs/SPEC.md` lists every promise with the tests that enforce it: each test it names must
//! exist, as a test, in the file it names, so the page cannot outlive a renamed or deleted test.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::Path;

#[test]
fn every_test_the_spec_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let spec = std::fs::read_to_string(root.join("docs/SPEC.md")).unwrap();
    let mut checked = 0;
    let mut missing = Vec::new();
    for cite in spec.split('`').skip(1).step_by(2) {
        let Some((path, name)) = cite.split_once(".rs::") else { continue };
        let file = root.join(format!("{path}.rs"));
        let Ok(text) = std::fs::read_to_string(&file) else {
            missing.push(format!("{cite}: no file {path}.rs"));
            continue;
        };
        // The function must be declared and marked as a test just above it.
        let declared = text.find(&format!("fn {name}(")).is_some_and(|at| {
            let before = &text[..at];
            let attribute = before.rfind("#[").map(|a| &before[a..]).unwrap_or("");
            attribute.starts_with("#[test]") || attribute.starts_with("#[tokio::test")
        });
        if !declared {
            missing.push(format!("{cite}: no test `{name}` in {path}.rs"));
        }
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} tests cited: is the table format still parsed?");
    assert!(
        missing.is_empty(),
        "docs/SPEC.md names tests that do not exist:\n{}",
        missing.join("\n")
    );
}
