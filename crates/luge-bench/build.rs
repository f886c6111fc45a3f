//! Records the commit the load generator is built from (`LUGE_BUILD_COMMIT`), so that a report
//! names the code that ran, not only the checkout it ran from: a binary built at one commit and
//! run from a later checkout (a before/after comparison) would otherwise carry the later name.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=LUGE_BUILD_COMMIT={commit}");
    // Built again when HEAD moves: a checkout, a commit (the branch's ref, loose or packed).
    println!("cargo:rerun-if-changed=build.rs");
    // Only files that exist: Cargo runs a build script again every time for a missing one.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        let files = ["HEAD", "packed-refs"].into_iter().map(str::to_owned).chain(branch);
        for file in files {
            let path = std::path::Path::new(&dir).join(file);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
}
