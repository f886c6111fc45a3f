//! The last handle to a runtime dropped on one of its own threads — a chain in flight holds one,
//! and its caller let go of the runtime — shuts it down on a thread of its own: that thread can
//! neither join itself nor wait for the dispatcher that waits for it. Before, the worker
//! panicked joining itself and the other threads never stopped. Its own test binary, so that
//! the process's thread list holds this runtime's threads only.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use luge_runtime::{ChainConfig, FunctionConfig, Runtime, RuntimeConfig, SubmitOptions};

const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");
const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");

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
