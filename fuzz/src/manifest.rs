//! The manifest target: the input as `luge.toml` through [`Manifest::parse_with`], the parser
//! `luge serve --manifest` runs. Module paths are never opened: a path ending in `.wasm` reads
//! as a small module, any other as "not found", so both branches are reachable.
//!
//! An accepted manifest must be what the rest of Luge assumes: unique function and chain
//! names of `[A-Za-z0-9._-]`, unique routes starting with `/`, memory caps within the server's,
//! declared tenants that pass their own check, chains of 1 to `MAX_STAGES` known stages with a
//! non-zero deadline. A refused one must name a line of the file.

use std::collections::HashSet;
use std::path::Path;

use luge::manifest::{Manifest, check_trace_sample};
use luge_runtime::MAX_STAGES;

/// What a `*.wasm` module path reads as (the bytes are not checked by the parser).
const MODULE: &[u8] = b"\0asm\x01\0\0\0";

fn read_module(path: &Path) -> std::io::Result<Vec<u8>> {
    if path.extension().is_some_and(|e| e == "wasm") {
        Ok(MODULE.to_vec())
    } else {
        Err(std::io::Error::new(std::io::ErrorKind::NotFound, "not in the fuzzer's file system"))
    }
}

/// Parses `data` (if UTF-8) as a manifest and checks the result.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Manifest::parse_with(text, "fuzz.toml", Path::new("/fuzz"), &read_module) {
        Ok(manifest) => check(&manifest),
        Err(e) => {
            let lines = text.split('\n').count();
            assert!(
                (1..=lines).contains(&e.line),
                "error at line {} of a {lines}-line file",
                e.line
            );
            assert!(!e.to_string().is_empty());
        }
    }
}

fn check(m: &Manifest) {
    let server = &m.server;
    assert!(check_trace_sample(server.trace_sample).is_ok(), "trace_sample");
    let runtime = &server.runtime;
    assert!(1 <= runtime.dispatchers && runtime.dispatchers <= runtime.workers, "dispatchers");
    assert!(runtime.registration.max_concurrent_compiles >= 1, "max_concurrent_compiles");
    let mut tenants = HashSet::new();
    for t in &runtime.tenants {
        assert!(t.check().is_ok(), "tenant {} accepted with bad limits", t.id);
        assert!(tenants.insert(t.id), "tenant {} twice", t.id);
    }
    let mut names = HashSet::new();
    let mut routes = HashSet::new();
    let valid = |n: &str| {
        !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    };
    for f in &m.functions {
        let name = f.config.name.as_str();
        assert!(valid(name), "function name {name:?}");
        assert!(names.insert(name), "function {name} twice");
        assert!(f.route.starts_with('/') && f.route.len() >= 2, "route {:?}", f.route);
        assert!(routes.insert(f.route.as_str()), "route {} twice", f.route);
        assert!(f.config.limits.max_memory_bytes <= runtime.max_memory_bytes, "memory cap");
        let t = f.config.tenant;
        assert!(tenants.is_empty() || t == 0 || tenants.contains(&t), "undeclared tenant {t}");
        assert!(!f.module.is_empty(), "empty module");
    }
    for c in &m.chains {
        let name = c.config.name.as_str();
        assert!(valid(name), "chain name {name:?}");
        assert!(names.insert(name), "chain {name} shares a name");
        assert!(c.route.starts_with('/') && c.route.len() >= 2, "route {:?}", c.route);
        assert!(routes.insert(c.route.as_str()), "route {} twice", c.route);
        let stages = &c.config.stages;
        assert!(!stages.is_empty() && stages.len() <= MAX_STAGES, "{} stages", stages.len());
        for s in stages {
            assert!(m.functions.iter().any(|f| f.config.name == *s), "unknown stage {s}");
        }
        assert!(!c.config.relative_deadline.is_zero(), "zero chain deadline");
    }
    assert_eq!(m.node_functions().len(), m.functions.len());
    assert_eq!(m.node_chains().len(), m.chains.len());
}
