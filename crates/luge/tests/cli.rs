//! The `luge` binary end to end: `serve` with the built-in functions on ephemeral ports,
//! `invoke` over both protocols, `functions list`, manifest errors, and SIGTERM shutdown.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::process::Command;

mod common;

use common::{LUGE, Server};

fn cache() -> std::path::PathBuf {
    std::env::temp_dir().join("luge-cli-test-cache")
}

#[test]
fn serve_invoke_and_stop() {
    let server = Server::start(&[], &cache());
    let out = server.invoke(&["hello", "--data", "edge"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"Hello, edge!\n");
    let out = server.invoke(&["hello", "--rpc", "--data", "edge"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.stdout, b"Hello, edge!\n");
    let out = server.invoke(&["fib", "--rpc", "--data", "20"]);
    assert_eq!(out.stdout, b"6765\n");
    // A failing function: non-zero exit with the reason.
    let out = server.invoke(&["fib", "--data", "nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("exited with status 2"));
    let out = server.invoke(&["nosuch", "--rpc"]);
    assert!(!out.status.success());
    let list =
        Command::new(LUGE).args(["functions", "list", "--url", &server.http]).output().unwrap();
    let text = String::from_utf8_lossy(&list.stdout);
    for name in ["noop", "echo", "hello", "fib", "spin"] {
        assert!(text.contains(name), "{text}");
    }
    // Add with a route, call it there, remove it; a second remove fails with the reason.
    let module = concat!(env!("CARGO_MANIFEST_DIR"), "/../../functions/builtin/hello.wat");
    let functions = |args: &[&str]| {
        Command::new(LUGE).arg("functions").args(args).args(["--url", &server.http]).output()
    };
    let add = functions(&["add", "greet", module, "--route", "/v1/greet"]).unwrap();
    assert!(add.status.success(), "{}", String::from_utf8_lossy(&add.stderr));
    let out = server.invoke(&["/v1/greet", "--data", "cli"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Hello, cli!\n");
    let list = functions(&["list"]).unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains("/v1/greet"));
    assert!(functions(&["remove", "greet"]).unwrap().status.success());
    let again = functions(&["remove", "greet"]).unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("HTTP 404"));
    assert_eq!(server.stop(), 0, "SIGTERM must be a clean exit");
}

#[test]
fn manifest_errors_stop_start_up_with_file_and_line() {
    let dir = std::env::temp_dir().join(format!("luge-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[server]\nworkers = 1\n\n[[function]]\nname = \"x\"\nmodule = \"gone.wasm\"\n",
    )
    .unwrap();
    let out = Command::new(LUGE).args(["serve", "--manifest"]).arg(&path).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:6: cannot read module"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_edge_manifest_serves_the_c_functions() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = root.join("examples/edge.toml");
    let server = Server::start(&["--manifest", manifest.to_str().unwrap()], &cache());
    for (name, size) in [("resize", "small"), ("ekf", "medium"), ("ocr", "small")] {
        let input = root.join(format!("functions/build/inputs/{name}-{size}.in"));
        let expected =
            std::fs::read(root.join(format!("functions/build/expected/{name}-{size}.out")))
                .expect("functions/build is missing: run ./scripts/setup.sh");
        let out = server.invoke(&[name, "--file", input.to_str().unwrap()]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(out.stdout == expected, "{name}-{size}: output differs from the native build");
    }
    assert_eq!(server.stop(), 0);
}
