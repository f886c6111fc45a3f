//! The last handle to a runtime dropped on one of its own threads — a chain in flight holds one,
//! and its caller let go of the runtime — shuts it down on a thread of its own: that thread can
//! neither join itself nor wait for the dispatcher that waits for it. Before, the worker
//! panicked joining itself and the other threads never stopped. Its own test binary, its tests
//! one at a time, so that the process's thread list holds one runtime's threads only.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use luge_runtime::{ChainConfig, FunctionConfig, Runtime, RuntimeConfig, SubmitOptions};

const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");
const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");

/// Held by each test: they count the process's runtime threads, so one runs at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Names of this process's threads that belong to a runtime.
fn runtime_threads() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| name.starts_with("luge-"))
        .collect()
}

#[test]
fn the_last_handle_dropped_by_a_chain_shuts_the_runtime_down() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for layout in [luge_runtime::Layout::Inline, luge_runtime::Layout::Threads] {
        let config = RuntimeConfig { workers: 1, layout, ..RuntimeConfig::default() };
        let rt = Arc::new(Runtime::start(config).unwrap());
        let mut spin = FunctionConfig::new("spin");
        spin.relative_deadline = Duration::from_secs(30);
        rt.register(spin, SPIN.as_bytes()).unwrap();
        rt.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
        let chain = ChainConfig {
            name: "c".into(),
            stages: vec!["echo".into(), "spin".into()],
            relative_deadline: Duration::from_secs(30),
        };
        rt.register_chain(chain).unwrap();
        let chain = rt.chain("c").unwrap();
        let (tx, rx) = mpsc::channel();
        rt.submit_chain(&chain, b"3000000".to_vec(), SubmitOptions::default(), move |o| {
            tx.send(o).unwrap();
        });
        // The chain's run now holds the last handle, and drops it on the runtime's thread
        // that answers the chain.
        drop((rt, chain));
        let outcome = rx.recv_timeout(Duration::from_secs(60)).unwrap();
        assert!(outcome.result.is_ok(), "{layout:?}: {:?}", outcome.result);
        let start = Instant::now();
        while !runtime_threads().is_empty() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{layout:?}: still running: {:?}",
                runtime_threads()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `shutdown()` asked for in a completion callback — on the runtime's own thread — runs on a
/// thread of its own; a later `shutdown()` elsewhere waits for it. Before, the callback's thread
/// waited for the dispatcher, which waited for the callback: the runtime never stopped.
#[test]
fn a_shutdown_asked_for_in_a_callback_does_not_deadlock() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    for layout in [luge_runtime::Layout::Inline, luge_runtime::Layout::Threads] {
        let config = RuntimeConfig { workers: 1, layout, ..RuntimeConfig::default() };
        let rt = Arc::new(Runtime::start(config).unwrap());
        rt.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
        let (tx, rx) = mpsc::channel();
        let inside = Arc::clone(&rt);
        rt.submit_with("echo", b"x".to_vec(), SubmitOptions::default(), move |o| {
            inside.shutdown();
            tx.send(o).unwrap();
        });
        let outcome =
            rx.recv_timeout(Duration::from_secs(30)).expect("the callback never returned");
        assert!(outcome.result.is_ok(), "{layout:?}: {:?}", outcome.result);
        // A shutdown from outside now waits for the one under way, then every thread is gone.
        let (done, finished) = mpsc::channel();
        std::thread::spawn(move || {
            rt.shutdown();
            done.send(runtime_threads()).unwrap();
        });
        let left = finished.recv_timeout(Duration::from_secs(30)).expect("shutdown hung");
        assert!(left.is_empty(), "{layout:?}: still running after shutdown returned: {left:?}");
    }
}
