//! Faults of the machine under a `luge serve` (`docs/reliability.md`, "Faults"): a full disk
//! under the AoT cache, and a thread the node needs that stops. (SIGTERM under load is in `cli.rs`; faults of guests and clients
//! are in `luge-server`'s `tests/faults.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::os::unix::fs::DirBuilderExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

mod common;

use common::Server;

/// The file size limit of the "full" node: above the copy-on-write memory images Wasmtime
/// writes to memfds for the built-ins' data segments (a page or two; a memfd is a file to
/// `RLIMIT_FSIZE`, and a real full disk does not touch memfds), below every compiled artifact
/// (13 KiB and more), so each artifact write fails part way, as on a disk that fills up.
const FILE_SIZE_LIMIT: libc::rlim_t = 8 << 10;

/// Every built-in, a request and its answer.
const CALLS: [(&str, &str, &[u8]); 5] = [
    ("noop", "", b""),
    ("echo", "full disk", b"full disk"),
    ("hello", "disk", b"Hello, disk!\n"),
    ("fib", "20", b"6765\n"),
    ("spin", "1000", b"432f32487609ff83\n"),
];

/// In the child, before `luge` runs: writes beyond [`FILE_SIZE_LIMIT`] bytes fail with `EFBIG`
/// (SIGXFSZ ignored, which survives exec; its default would kill the process instead).
fn full_disk() -> std::io::Result<()> {
    // SAFETY: signal(2), getrlimit(2) and setrlimit(2) are async-signal-safe, as code between
    // fork and exec must be; `limit` is a valid rlimit to read and write.
    unsafe {
        if libc::signal(libc::SIGXFSZ, libc::SIG_IGN) == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        limit.rlim_cur = FILE_SIZE_LIMIT.min(limit.rlim_max);
        if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Every entry of `dir`, sorted.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    all.sort();
    all
}

fn serves_every_builtin(server: &Server) {
    for (name, data, answer) in CALLS {
        let out = server.invoke(&[name, "--data", data]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.stdout, answer, "{name}");
    }
}

/// A full disk under an existing cache directory (every artifact write fails part way): the
/// node starts and serves every function, compiled, warns once per function that it is not
/// cached and why, and leaves nothing in the directory (no partial artifact a later start
/// could trust, no temporary file taking space). Once the disk has room again, a start caches
/// them all.
#[test]
fn a_full_disk_under_the_cache_means_serving_compiled() {
    let xdg = std::env::temp_dir().join(format!("luge-full-disk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&xdg);
    let dir = xdg.join("luge");
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).unwrap();

    let server = Server::start_configured(&[], &xdg, "warn", |command| {
        // SAFETY: `full_disk` only makes async-signal-safe calls.
        unsafe { command.pre_exec(full_disk) };
    });
    serves_every_builtin(&server);
    let log = server.stop_with_log();
    assert_eq!(entries(&dir), Vec::<PathBuf>::new(), "left in the cache directory");
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("not cached")).collect();
    assert_eq!(warnings.len(), CALLS.len(), "one warning per function:\n{log}");
    for (name, _, _) in CALLS {
        let warning = warnings.iter().find(|l| l.contains(&format!("\"{name}\"")));
        let warning = warning.unwrap_or_else(|| panic!("no warning for {name}:\n{log}"));
        assert!(warning.contains("served compiled"), "{warning}");
        assert!(warning.contains("File too large"), "the reason is missing: {warning}");
    }

    // Room again: the next start compiles, caches every artifact whole, and serves.
    let server = Server::start_logging(&[], &xdg, "warn");
    serves_every_builtin(&server);
    let log = server.stop_with_log();
    assert!(!log.contains("not cached"), "{log}");
    let cached = entries(&dir);
    assert_eq!(cached.len(), CALLS.len(), "{cached:?}");
    assert!(cached.iter().all(|p| p.extension().is_some_and(|e| e == "cwasm")), "{cached:?}");
    std::fs::remove_dir_all(&xdg).unwrap();
}

/// A thread the node needs stops (a bug; injected here, in this debug build, by
/// `LUGE_TEST_STOP_THREAD_AFTER_MS`): the node could answer `/healthz` 503 but would serve no
/// more, so `luge serve` finishes what it can and exits with status 1, saying why — for a
/// supervisor without an HTTP check (systemd's `Restart=on-failure`) to restart it.
#[test]
fn a_stopped_thread_ends_luge_serve_with_a_failure() {
    let cache = std::env::temp_dir().join(format!("luge-stopped-thread-{}", std::process::id()));
    let server = Server::start_configured(&[], &cache, "error", |command| {
        command.env("LUGE_TEST_STOP_THREAD_AFTER_MS", "1000");
    });
    serves_every_builtin(&server);
    let (code, log) = server.wait_for_exit(std::time::Duration::from_secs(30));
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("a thread serving the runtime has stopped; restart the node"), "{log}");
    let _ = std::fs::remove_dir_all(&cache);
}
