//! The AoT cache end to end: an artifact is loaded only if it is intact and Luge wrote it for
//! this very module into a directory only this user can write; anything else is recompiled, and
//! the function then behaves as its module says (planted code never runs). Removing a function
//! removes its artifact unless another function shares it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use luge_runtime::{Function, FunctionConfig, Outcome, Runtime, RuntimeConfig, SubmitOptions};
use sha2::{Digest, Sha256};

const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");
const HELLO: &str = include_str!("../../../functions/builtin/hello.wat");

/// A fresh, not yet existing directory for one test.
fn fresh_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("luge-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn runtime(cache: &Path) -> Runtime {
    let config = RuntimeConfig { cache_dir: Some(cache.to_owned()), ..RuntimeConfig::default() };
    Runtime::start(config).unwrap()
}

fn register(rt: &Runtime, name: &str, wat: &str) -> Arc<Function> {
    rt.register(FunctionConfig::new(name), wat.as_bytes()).unwrap()
}

fn call(rt: &Runtime, name: &str, payload: &[u8]) -> Vec<u8> {
    let outcome: Outcome = rt
        .submit(name, payload.to_vec(), SubmitOptions::default())
        .wait_timeout(Duration::from_secs(60))
        .unwrap();
    outcome.result.unwrap()
}

/// Every `*.cwasm` file in `dir`, sorted.
fn artifacts(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "cwasm"))
        .collect();
    all.sort();
    all
}

/// The artifact of the module `wat` in `dir` (its name starts with the module's SHA-256).
fn artifact_of(dir: &Path, wat: &str) -> PathBuf {
    let hash: String =
        Sha256::digest(wat::parse_str(wat).unwrap()).iter().map(|b| format!("{b:02x}")).collect();
    let found: Vec<_> = artifacts(dir)
        .into_iter()
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&hash))
        .collect();
    assert_eq!(found.len(), 1, "one artifact of the module in {}", dir.display());
    found.into_iter().next().unwrap()
}

/// `hello` and `echo` compiled once into `dir` by a runtime that is gone again.
fn cache_hello_and_echo(dir: &Path) -> (PathBuf, PathBuf) {
    let rt = runtime(dir);
    assert!(!register(&rt, "hello", HELLO).from_cache);
    assert!(!register(&rt, "echo", ECHO).from_cache);
    drop(rt);
    (artifact_of(dir, HELLO), artifact_of(dir, ECHO))
}

#[test]
fn the_cache_directory_is_created_owner_only() {
    let dir = fresh_dir("cache-mode");
    let rt = runtime(&dir);
    register(&rt, "echo", ECHO);
    assert_eq!(std::fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
    assert_eq!(artifacts(&dir).len(), 1);
    drop(rt);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn removing_a_function_removes_its_artifact_unless_another_shares_it() {
    let dir = fresh_dir("cache-unregister");
    let rt = runtime(&dir);
    register(&rt, "echo-a", ECHO);
    assert!(register(&rt, "echo-b", ECHO).from_cache, "same module, same artifact");
    register(&rt, "hello", HELLO);
    let echo = artifact_of(&dir, ECHO);
    assert_eq!(artifacts(&dir).len(), 2);
    rt.unregister("echo-a").unwrap();
    assert!(echo.exists(), "echo-b still uses the artifact");
    assert_eq!(call(&rt, "echo-b", b"still here"), b"still here");
    rt.unregister("echo-b").unwrap();
    assert!(!echo.exists(), "no function uses the artifact any more");
    assert_eq!(artifacts(&dir), [artifact_of(&dir, HELLO)], "other artifacts stay");
    rt.unregister("hello").unwrap();
    assert!(artifacts(&dir).is_empty());
    drop(rt);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bit_flipped_artifact_is_recompiled() {
    let dir = fresh_dir("cache-flip");
    let (hello, _) = cache_hello_and_echo(&dir);
    // Flip one bit of the greeting in the artifact's data: the file stays a well-formed module
    // that Wasmtime would load, and it would greet with "Iello".
    let mut bytes = std::fs::read(&hello).unwrap();
    let at = bytes.windows(16).position(|w| w == b"Hello from Luge!").expect("the greeting");
    bytes[at] ^= 0x01;
    std::fs::write(&hello, &bytes).unwrap();
    let rt = runtime(&dir);
    assert!(!register(&rt, "hello", HELLO).from_cache, "a corrupted artifact must not load");
    assert_eq!(call(&rt, "hello", b""), b"Hello from Luge!\n");
    drop(rt);
    let rewritten = std::fs::read(&hello).unwrap();
    assert!(rewritten.windows(16).any(|w| w == b"Hello from Luge!"), "the artifact was rewritten");
    // …and the rewritten artifact loads again.
    let rt = runtime(&dir);
    assert!(register(&rt, "hello", HELLO).from_cache);
    assert_eq!(call(&rt, "hello", b"Luge"), b"Hello, Luge!\n");
    drop(rt);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An intact artifact is loaded only as a regular file of this uid that no other user can
/// write: one reached through a symlink, or that others may write, is compiled anew (and
/// rewritten as ours), whatever its header says.
#[test]
fn an_artifact_others_could_have_put_there_is_recompiled() {
    let dir = fresh_dir("cache-not-ours");
    let (hello, echo) = cache_hello_and_echo(&dir);
    // `hello`'s artifact moved elsewhere and linked back; `echo`'s made writable by all.
    let elsewhere = dir.with_extension("elsewhere");
    std::fs::rename(&hello, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &hello).unwrap();
    std::fs::set_permissions(&echo, std::fs::Permissions::from_mode(0o666)).unwrap();
    let rt = runtime(&dir);
    assert!(!register(&rt, "hello", HELLO).from_cache, "a symlinked artifact must not load");
    assert!(!register(&rt, "echo", ECHO).from_cache, "a world-writable artifact must not load");
    assert_eq!(call(&rt, "hello", b"Luge"), b"Hello, Luge!\n");
    drop(rt);
    // Both were written anew as regular owner-only files, and load from then on.
    for artifact in [&hello, &echo] {
        let meta = std::fs::symlink_metadata(artifact).unwrap();
        assert!(meta.is_file() && meta.mode() & 0o022 == 0, "{}", artifact.display());
    }
    let rt = runtime(&dir);
    assert!(register(&rt, "hello", HELLO).from_cache && register(&rt, "echo", ECHO).from_cache);
    drop(rt);
    std::fs::remove_file(&elsewhere).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A module refused after compiling (an import Luge does not provide, no `_start`) leaves no
/// artifact behind to take the place of useful ones.
#[test]
fn a_refused_module_leaves_no_artifact() {
    let dir = fresh_dir("cache-refused");
    let rt = runtime(&dir);
    let foreign = r#"(module (import "env" "f" (func)) (memory (export "memory") 1)
        (func (export "_start")))"#;
    let no_start = r#"(module (memory (export "memory") 1) (func (export "main")))"#;
    for wat in [foreign, no_start] {
        assert!(rt.register(FunctionConfig::new("bad"), wat.as_bytes()).is_err(), "{wat}");
    }
    assert_eq!(artifacts(&dir), Vec::<PathBuf>::new());
    register(&rt, "echo", ECHO);
    assert_eq!(artifacts(&dir).len(), 1, "an accepted one is cached");
    drop(rt);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_truncated_artifact_is_recompiled() {
    let dir = fresh_dir("cache-truncate");
    let (hello, _) = cache_hello_and_echo(&dir);
    let full = std::fs::metadata(&hello).unwrap().len();
    for keep in [full - 1, full / 2, 0] {
        std::fs::File::options().write(true).open(&hello).unwrap().set_len(keep).unwrap();
        let rt = runtime(&dir);
        assert!(!register(&rt, "hello", HELLO).from_cache, "a truncated artifact must not load");
        assert_eq!(call(&rt, "hello", b""), b"Hello from Luge!\n");
        drop(rt);
        assert_eq!(std::fs::metadata(&hello).unwrap().len(), full, "the artifact was rewritten");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A valid artifact of another module under a function's artifact name — Luge's own artifact
/// of `hello` copied over `echo`'s, or a bare Wasmtime serialization of `hello` — is not
/// loaded: `echo` echoes.
#[test]
fn a_planted_artifact_of_another_module_is_not_executed() {
    let dir = fresh_dir("cache-plant");
    let (hello, echo) = cache_hello_and_echo(&dir);
    std::fs::copy(&hello, &echo).unwrap();
    let rt = runtime(&dir);
    assert!(!register(&rt, "echo", ECHO).from_cache, "hello's artifact must not load as echo");
    assert_eq!(call(&rt, "echo", b"ping"), b"ping");
    let bare = wasmtime::Module::new(rt.engine(), wat::parse_str(HELLO).unwrap())
        .unwrap()
        .serialize()
        .unwrap();
    drop(rt);
    std::fs::write(&echo, &bare).unwrap();
    let rt = runtime(&dir);
    assert!(!register(&rt, "echo", ECHO).from_cache, "a bare serialization must not load");
    assert_eq!(call(&rt, "echo", b"pong"), b"pong");
    drop(rt);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A directory other users can write into could hold anything, digest included: it is not
/// used at all (nothing loaded, nothing written), and the runtime serves without it.
#[test]
fn a_cache_directory_others_can_write_is_refused() {
    let dir = fresh_dir("cache-open");
    let (hello, echo) = cache_hello_and_echo(&dir);
    let name = echo.file_name().unwrap().to_owned();
    // What a planter with write access could do: `hello`'s code under `echo`'s name, with a
    // header claiming `echo`'s module and the right digest.
    let rt = runtime(&dir);
    let bare = wasmtime::Module::new(rt.engine(), wat::parse_str(HELLO).unwrap())
        .unwrap()
        .serialize()
        .unwrap();
    drop(rt);
    let mut forged = b"LUGEAOT\x01".to_vec();
    forged.extend_from_slice(&Sha256::digest(wat::parse_str(ECHO).unwrap()));
    forged.extend_from_slice(&Sha256::digest(&bare));
    forged.extend_from_slice(&bare);
    std::fs::remove_file(&hello).unwrap();
    for mode in [0o777, 0o770, 0o722] {
        std::fs::write(dir.join(&name), &forged).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        let rt = runtime(&dir);
        assert!(!register(&rt, "echo", ECHO).from_cache, "mode {mode:o}: nothing is loaded");
        assert!(!register(&rt, "hello", HELLO).from_cache);
        assert_eq!(call(&rt, "echo", b"ping"), b"ping", "mode {mode:o}: echo echoes");
        drop(rt);
        assert_eq!(artifacts(&dir), [dir.join(&name)], "mode {mode:o}: nothing is written");
        assert_eq!(std::fs::read(dir.join(&name)).unwrap(), forged);
    }
    // Owned by another user (only root can arrange that).
    // SAFETY: `geteuid` has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let rt = runtime(&dir);
        assert!(!register(&rt, "echo", ECHO).from_cache, "another user's directory is not used");
        assert_eq!(call(&rt, "echo", b"ping"), b"ping");
        drop(rt);
        assert_eq!(artifacts(&dir), [dir.join(&name)]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `cache_max_bytes` holds on disk even when the registered functions' artifacts alone would
/// pass it (a volume sized to the bound must not fill): the artifact that would pass it is not
/// kept, and its function is served compiled in memory.
#[test]
fn the_cache_bound_holds_when_registered_functions_fill_it() {
    let scratch = fresh_dir("bound-sizes");
    let (hello, echo) = cache_hello_and_echo(&scratch);
    let size = |p: &Path| std::fs::metadata(p).unwrap().len();
    let (h, e) = (size(&hello), size(&echo));
    let bound = h.max(e) + h.min(e) / 2; // room for one, not for both
    let dir = fresh_dir("bound");
    let config = RuntimeConfig {
        cache_dir: Some(dir.clone()),
        cache_max_bytes: bound,
        ..RuntimeConfig::default()
    };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "hello", HELLO);
    register(&rt, "echo", ECHO);
    let kept = artifacts(&dir);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept.iter().map(|p| size(p)).sum::<u64>() <= bound);
    assert_eq!(call(&rt, "echo", b"still served"), b"still served");
    assert_eq!(call(&rt, "hello", b"x"), b"Hello, x!\n");
    drop(rt);
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::remove_dir_all(&dir);
}
