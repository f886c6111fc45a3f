//! The C edge functions (`functions/`, built by `make -C functions`, which `scripts/setup.sh`
//! runs) through Luge's own runtime: every function at every size answers byte for byte what
//! its native build answers, and every bad input ends in exit status 2.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::{Path, PathBuf};
use std::time::Duration;

use luge_runtime::{Failure, FunctionConfig, Limits, Runtime, RuntimeConfig, SubmitOptions};

fn build_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../functions/build");
    assert!(
        dir.join("wasm").is_dir() && dir.join("expected").is_dir(),
        "{} is missing: run ./scripts/setup.sh (or make -C functions) first",
        dir.display()
    );
    dir
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn wasm_output_equals_native_output_byte_for_byte() {
    let build = build_dir();
    let rt = Runtime::start(RuntimeConfig::default()).unwrap();
    let limits = Limits {
        max_execution: Duration::from_secs(60),
        max_memory_bytes: 64 << 20,
        max_output_bytes: 8 << 20,
        max_request_bytes: 8 << 20,
    };
    let modules = files(&build.join("wasm"), "wasm");
    assert!(modules.len() >= 13, "expected the 13 functions, found {}", modules.len());
    let (mut checked, mut bad) = (0, 0);
    for module in &modules {
        let name = module.file_stem().unwrap().to_str().unwrap().to_owned();
        let mut config = FunctionConfig::new(&name);
        config.limits = limits;
        config.relative_deadline = Duration::from_secs(60);
        rt.register(config, &std::fs::read(module).unwrap()).unwrap();
        for size in ["small", "medium", "large"] {
            let input = build.join(format!("inputs/{name}-{size}.in"));
            let expected =
                std::fs::read(build.join(format!("expected/{name}-{size}.out"))).unwrap();
            let outcome = rt
                .submit(&name, std::fs::read(&input).unwrap(), SubmitOptions::default())
                .wait_timeout(Duration::from_secs(120))
                .unwrap();
            match outcome.result {
                Ok(out) => {
                    assert!(out == expected, "{name}-{size}: wasm output differs from native")
                }
                Err(e) => panic!("{name}-{size}: {e}"),
            }
            checked += 1;
        }
        for kind in ["empty", "truncated", "garbage"] {
            let input = std::fs::read(build.join(format!("bad/{name}-{kind}.in"))).unwrap();
            let outcome = rt.submit(&name, input, SubmitOptions::default()).wait();
            assert_eq!(outcome.result, Err(Failure::Exit(2)), "{name}-{kind}");
            bad += 1;
        }
    }
    assert_eq!((checked, bad), (modules.len() * 3, modules.len() * 3));
}

/// The functions take a request of up to `LUGE_MAX_INPUT` (4 MiB, `functions/common/luge.h`)
/// bytes — exactly that many too — and refuse one byte more (run natively: stderr says why).
#[test]
fn a_request_of_exactly_the_input_limit_is_read_whole() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let native = build_dir().join("native/resize");
    let stderr_for = |len: usize| {
        let mut child = Command::new(&native)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        // The function may stop reading (and close its end) once it has refused the request.
        let _ = stdin.write_all(&vec![b'x'; len]);
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "garbage either way");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let limit = 4 << 20;
    let at = stderr_for(limit);
    assert!(!at.contains("larger than the input limit"), "refused at the limit: {at}");
    let over = stderr_for(limit + 1);
    assert!(over.contains("larger than the input limit"), "{over}");
}
