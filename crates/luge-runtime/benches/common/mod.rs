//! What the runtime benchmark and `examples/calibrate.rs` (which includes this file by path)
//! share: the runtime they measure, and a long request that holds its only worker while urgent
//! ones preempt it.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use luge_runtime::{
    FunctionConfig, Layout, Outcome, PolicyKind, Runtime, RuntimeConfig, SubmitOptions, WaitMode,
};

const SPIN: &str = include_str!("../../../../functions/builtin/spin.wat");

/// SledgeScale with 1 dispatcher thread and 1 worker thread (`Layout::Threads`), unpinned, in
/// wait mode `wait`; a shutdown aborts what still runs after 100 ms.
pub fn runtime(wait: WaitMode) -> Runtime {
    Runtime::start(RuntimeConfig {
        workers: 1,
        dispatchers: 1,
        wait,
        layout: Layout::Threads,
        policy: PolicyKind::SledgeScale,
        shutdown_grace: Duration::from_millis(100),
        ..RuntimeConfig::default()
    })
    .unwrap()
}

/// A `spin` request of 10^11 iterations: it runs for minutes, so it is still running when a
/// measurement ends, and the runtime's shutdown aborts it.
pub struct LongSpin {
    outcome: Arc<Mutex<Option<Outcome>>>,
}

impl LongSpin {
    /// Registers `spin` on `rt` as a long function: expected to run 10 s, with 10 minutes for
    /// its deadline and its execution budget.
    pub fn register(rt: &Runtime) {
        let mut spin = FunctionConfig::new("spin");
        spin.expected_execution = Some(Duration::from_secs(10));
        spin.relative_deadline = Duration::from_secs(600);
        spin.limits.max_execution = Duration::from_secs(600);
        rt.register(spin, SPIN.as_bytes()).unwrap();
    }

    /// Submits the long request to `rt` (`spin` registered) and returns once it runs, and
    /// 20 ms more.
    pub fn start(rt: &Runtime) -> Self {
        let outcome = Arc::new(Mutex::new(None));
        let fill = Arc::clone(&outcome);
        rt.submit_with("spin", b"100000000000".to_vec(), SubmitOptions::default(), move |o| {
            *fill.lock().unwrap() = Some(o);
        });
        let t = Instant::now();
        while rt.live_sandboxes() == 0 {
            assert!(t.elapsed() < Duration::from_secs(10), "the long request never started");
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_millis(20));
        Self { outcome }
    }

    /// Shuts `rt` down, which aborts the long request after the grace period, and returns its
    /// outcome; panics if it ended before, during the measurement.
    pub fn end(self, rt: Runtime) -> Outcome {
        assert!(
            self.outcome.lock().unwrap().is_none(),
            "the long request ended during the measurement"
        );
        drop(rt);
        self.outcome.lock().unwrap().take().unwrap()
    }
}
