//! Deadline-limited batching (Edge-RT §IV-A, `PolicyConfig::batch_window`) on the runtime's
//! `threads` layout: requests due within the window of the one a worker takes next go to that
//! worker with it and start there, one after another, without a dispatcher round trip; a
//! preemption hands the unstarted ones back. Sleep mode, unpinned threads (see `runtime.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use luge_runtime::{
    FunctionConfig, Layout, Outcome, Runtime, RuntimeConfig, SubmitOptions, Ticket,
};

const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");

/// One worker behind a dispatcher thread, batching within `window`; `spin` declared at
/// 100 µs (not short enough for the uLL lane, which stays on as shipped).
fn node(window: Duration) -> Runtime {
    let mut config = RuntimeConfig { layout: Layout::Threads, ..RuntimeConfig::default() };
    config.policy_config.batch_window = window.as_nanos() as u64;
    let rt = Runtime::start(config).unwrap();
    let mut spin = FunctionConfig::new("spin");
    spin.expected_execution = Some(Duration::from_micros(100));
    spin.relative_deadline = Duration::from_secs(20);
    spin.limits.max_execution = Duration::from_secs(20);
    rt.register(spin, SPIN.as_bytes()).unwrap();
    rt
}

fn spin(rt: &Runtime, iterations: u64, deadline: Duration) -> Ticket {
    let options = SubmitOptions { deadline: Some(deadline), ..SubmitOptions::default() };
    rt.submit("spin", iterations.to_string().into_bytes(), options)
}

fn ok(outcome: Outcome) {
    if let Err(e) = outcome.result {
        panic!("request {} failed: {e}", outcome.request_id);
    }
}

/// Waits until a sandbox runs, failing after 10 s.
fn until_running(rt: &Runtime) {
    let start = Instant::now();
    while rt.live_sandboxes() == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the long request never started");
        std::thread::yield_now();
    }
}

/// A long run (due in 1 s), then eight short requests queued behind it, due 2 s + i ms.
fn long_then_eight(rt: &Runtime) -> (Ticket, Vec<Ticket>) {
    let long = spin(rt, 20_000_000, Duration::from_secs(1));
    until_running(rt);
    let short = (0..8).map(|i| spin(rt, 1_000, Duration::from_millis(2_000 + i))).collect();
    (long, short)
}

#[test]
fn requests_due_together_run_as_one_batch() {
    let rt = node(Duration::from_millis(100));
    let (long, short) = long_then_eight(&rt);
    ok(long.wait_timeout(Duration::from_secs(30)).unwrap());
    for t in short {
        ok(t.wait_timeout(Duration::from_secs(30)).unwrap());
    }
    // The long run finishes; the first short one runs and the seven others follow it.
    let batched: u64 = rt.group_stats().iter().map(|g| g.batched).sum();
    assert_eq!(batched, 7);
    // Off: none.
    let rt = node(Duration::ZERO);
    let (long, short) = long_then_eight(&rt);
    ok(long.wait_timeout(Duration::from_secs(30)).unwrap());
    for t in short {
        ok(t.wait_timeout(Duration::from_secs(30)).unwrap());
    }
    assert_eq!(rt.group_stats().iter().map(|g| g.batched).sum::<u64>(), 0);
}

#[test]
fn a_preempted_batch_is_handed_back_and_every_request_answered_once() {
    // A run (~160 ms) with five (~16 ms) committed behind it, then an urgent request that
    // preempts it: the five come back to the dispatcher unstarted, the urgent one completes
    // first, and the six then run as a batch again.
    let rt = node(Duration::from_millis(100));
    let order = Arc::new(Mutex::new(Vec::new()));
    let submit = |i: u64, iterations: u64, deadline_ms: u64| {
        let order = Arc::clone(&order);
        let options = SubmitOptions {
            deadline: Some(Duration::from_millis(deadline_ms)),
            ..Default::default()
        };
        let (tx, rx) = mpsc::channel();
        rt.submit_with("spin", iterations.to_string().into_bytes(), options, move |o| {
            order.lock().unwrap().push(i);
            tx.send(o).unwrap();
        });
        rx
    };
    let mut answers = vec![submit(0, 100_000_000, 5_000)];
    until_running(&rt);
    answers.extend((1..6).map(|i| submit(i, 10_000_000, 5_000 + i)));
    std::thread::sleep(Duration::from_millis(2));
    answers.push(submit(9, 1_000, 3_000));
    let outcomes: Vec<Outcome> =
        answers.iter().map(|rx| rx.recv_timeout(Duration::from_secs(30)).unwrap()).collect();
    assert!(outcomes[0].timing.preemptions >= 1, "the urgent request preempted the run");
    for o in outcomes {
        ok(o);
    }
    assert!(answers.iter().all(|rx| rx.try_recv().is_err()), "one answer each");
    assert_eq!(*order.lock().unwrap(), [9, 0, 1, 2, 3, 4, 5]);
    // Committed twice: before the preemption, when all five went back, and after it.
    let stats = rt.group_stats();
    assert_eq!(stats.iter().map(|g| (g.batched, g.batch_returned)).collect::<Vec<_>>(), [(10, 5)]);
}

/// A preempted request committed as a follower still counts as holding its suspended sandbox
/// until it starts, and once more when it is handed back because the run it follows was
/// preempted in turn: the group's count (what bounds the sandboxes it keeps suspended) holds
/// both, never one twice, and every request is answered.
#[test]
fn a_suspended_follower_handed_back_still_counts_as_suspended() {
    let rt = node(Duration::from_millis(100));
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::yield_now();
        }
    };
    // A (due 5 s) runs and is preempted by X (due 3 s): A is suspended.
    let a = spin(&rt, 60_000_000, Duration::from_millis(5_000));
    until_running(&rt);
    let x = spin(&rt, 60_000_000, Duration::from_millis(3_000));
    until("X never preempted A", &|| rt.group_stats()[0].suspended == 1);
    // A2 (due 4.99 s) waits behind X; when X ends, A2 runs with A, due within the window,
    // committed behind it.
    let a2 = spin(&rt, 60_000_000, Duration::from_millis(4_990));
    // Taken by the dispatcher before X ends (else A alone would run, and A2 follow it).
    until("A2 never queued", &|| rt.group_stats()[0].queued == 2);
    ok(x.wait_timeout(Duration::from_secs(60)).unwrap());
    until("A2 never ran with A behind it", &|| rt.group_stats()[0].batched >= 1);
    // As of the dispatcher's round that committed A, which may end after the count above.
    until("A, committed behind A2, not counted", &|| rt.group_stats()[0].suspended == 1);
    // C (due 1 s) preempts A2: A comes back as a follower, still suspended.
    let c = spin(&rt, 60_000_000, Duration::from_millis(1_000));
    let mut most = 0;
    let start = Instant::now();
    while most < 2 && start.elapsed() < Duration::from_secs(10) {
        most = most.max(rt.group_stats()[0].suspended);
        std::thread::yield_now();
    }
    for t in [a, a2, c] {
        ok(t.wait_timeout(Duration::from_secs(60)).unwrap());
    }
    assert_eq!(most, 2, "A and A2 both held suspended sandboxes");
    // As of the dispatcher's last round, which may follow the last answer.
    until("a suspended sandbox stayed counted", &|| rt.group_stats()[0].suspended == 0);
}
