//! Every citation in the repository resolves inside it: sources are cited by short name and
//! section (`SledgeScale §3.3`), each short name is listed in `docs/references.md`, and nothing
//! cites a file or a document that is not part of the repository (a paper's file name, a
//! design brief, a path outside the tree).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The text files a reader follows citations in: Rust sources, Markdown, TOML and scripts under
/// `crates/`, `docs/`, `functions/`, `scripts/`, `.ci/` and the README.
fn files() -> Vec<PathBuf> {
    let root = root();
    let mut out = vec![root.join("README.md")];
    let mut dirs: Vec<PathBuf> =
        ["crates", "docs", "functions", "scripts", ".ci"].iter().map(|d| root.join(d)).collect();
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries {
            let path = e.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "target" | "build" | "node_modules") {
                    dirs.push(path);
                }
            } else if [".rs", ".md", ".toml", ".sh", ".c", ".h", ".wat"]
                .iter()
                .any(|x| name.ends_with(x))
                || name == "run"
            {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `NNN_` followed by 16 hex digits: the file names the papers had outside the repository.
fn paper_file_name(line: &str) -> bool {
    let b = line.as_bytes();
    (0..b.len().saturating_sub(20)).any(|i| {
        b[i..i + 3].iter().all(u8::is_ascii_digit)
            && b[i + 3] == b'_'
            && b[i + 4..i + 20].iter().all(u8::is_ascii_hexdigit)
    })
}

#[test]
fn citations_stay_inside_the_repository() {
    let me = Path::new(file!()).file_name().unwrap().to_owned();
    // Built from pieces so that this file does not match itself.
    let brief = ["BRI", "EF"].concat();
    let shared = ["../", "shared"].concat();
    let mut bad = Vec::new();
    let files = files();
    assert!(files.len() > 50, "found the sources: {}", files.len());
    for path in files.iter().filter(|p| p.file_name() != Some(&me)) {
        let Ok(text) = std::fs::read_to_string(path) else { continue };
        for (n, line) in text.lines().enumerate() {
            if line.contains(&brief) || line.contains(&shared) || paper_file_name(line) {
                bad.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(bad.is_empty(), "citations of things outside the repository:\n{}", bad.join("\n"));
}

#[test]
fn every_cited_system_is_in_the_references() {
    let refs = std::fs::read_to_string(root().join("docs/references.md")).unwrap();
    let names =
        ["SledgeScale", "SFS", "Sledge", "HORSE", "Edge-RT", "Breakwater", "Shinjuku", "DARC"];
    let mut cited = Vec::new();
    for path in files() {
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for name in names {
            // "Name §…" is a citation by section.
            if text.contains(&format!("{name} §")) && !cited.contains(&name) {
                cited.push(name);
            }
        }
    }
    assert!(cited.contains(&"SledgeScale") && cited.contains(&"Edge-RT"), "{cited:?}");
    for name in cited {
        assert!(refs.contains(&format!("**{name}**")), "{name} is cited but not in references.md");
    }
}

#[test]
fn the_paper_file_name_check_matches_what_it_should() {
    // Built from pieces so that this file does not itself hold such a name.
    let cited = format!("see `{}_{}.txt` §4", "000", "790f4a71689256ac");
    assert!(paper_file_name(&cited));
    assert!(!paper_file_name("SledgeScale §4, Table 3"));
    assert!(!paper_file_name("000_79"));
}
