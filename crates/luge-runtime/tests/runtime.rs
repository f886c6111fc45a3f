//! Runtime behaviour end to end: real Wasmtime sandboxes on real worker threads. Every test uses
//! sleep mode and unpinned threads (no spinning or pinned servers in parallel tests: they would
//! starve each other on a small box).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use luge_runtime::{
    BadRequest, CodeOpt, CtEdfConfig, Error, Failure, FunctionConfig, Health, Layout, Limits,
    Outcome, Overrun, PolicyKind, QueueKind, RegisterError, Rejection, Runtime, RuntimeConfig,
    SubmitOptions, TrapKind, scheduled_deadline,
};

const NOOP: &str = include_str!("../../../functions/builtin/noop.wat");
const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");
const HELLO: &str = include_str!("../../../functions/builtin/hello.wat");
const FIB: &str = include_str!("../../../functions/builtin/fib.wat");
const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");
const LOOP: &str = include_str!("../../../functions/test/loop.wat");
const MEMBOMB: &str = include_str!("../../../functions/test/membomb.wat");
const STACK: &str = include_str!("../../../functions/test/stackoverflow.wat");
const OOB: &str = include_str!("../../../functions/test/oob.wat");
const BIGOUT: &str = include_str!("../../../functions/test/bigout.wat");
const EXIT3: &str = include_str!("../../../functions/test/exit3.wat");
const LEAK: &str = include_str!("../../../functions/test/leak.wat");
const ARGS: &str = include_str!("../../../functions/test/args.wat");

fn runtime(workers: usize, policy: PolicyKind) -> Runtime {
    let config = RuntimeConfig { workers, policy, ..RuntimeConfig::default() };
    Runtime::start(config).unwrap()
}

fn register(rt: &Runtime, name: &str, wat: &str, tune: impl FnOnce(&mut FunctionConfig)) {
    let mut config = FunctionConfig::new(name);
    tune(&mut config);
    rt.register(config, wat.as_bytes()).unwrap();
}

fn call(rt: &Runtime, name: &str, payload: &[u8]) -> Outcome {
    rt.submit(name, payload.to_vec(), SubmitOptions::default())
        .wait_timeout(Duration::from_secs(60))
        .unwrap()
}

/// Waits until a sandbox runs (a request started), failing with `what` after 10 s.
fn until_running(rt: &Runtime, what: &str) {
    let start = Instant::now();
    while rt.live_sandboxes() == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::yield_now();
    }
}

fn ok(outcome: Outcome) -> Vec<u8> {
    match outcome.result {
        Ok(out) => out,
        Err(e) => panic!("request {} failed: {e}", outcome.request_id),
    }
}

#[test]
fn builtin_functions_answer() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    for (name, wat) in [("noop", NOOP), ("echo", ECHO), ("hello", HELLO), ("fib", FIB)] {
        register(&rt, name, wat, |_| {});
    }
    register(&rt, "spin", SPIN, |_| {});
    assert_eq!(ok(call(&rt, "noop", b"")), b"");
    let kib: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
    assert_eq!(ok(call(&rt, "echo", &kib)), kib);
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(ok(call(&rt, "echo", &big)), big);
    assert_eq!(ok(call(&rt, "hello", b"")), b"Hello from Luge!\n");
    assert_eq!(ok(call(&rt, "hello", b"edge\n")), b"Hello, edge!\n");
    assert_eq!(ok(call(&rt, "fib", b"20\n")), b"6765\n");
    assert_eq!(ok(call(&rt, "spin", b"1000")), b"432f32487609ff83\n");
    assert_eq!(call(&rt, "fib", b"nope").result, Err(Failure::Exit(2)));
    let outcome = call(&rt, "spin", b"1000000");
    let t = outcome.timing;
    assert!(t.executed > Duration::ZERO && t.total >= t.executed, "{t:?}");
    // Readiness: receipt to the first guest instruction, the sandbox's whole start-up included
    // (the store, WASI, the instantiation, the entry's lookup; also part of the execution).
    assert!(t.instantiation > Duration::ZERO && t.instantiation < t.executed, "{t:?}");
    assert!(t.start_up > t.instantiation && t.start_up < t.executed, "{t:?}");
    assert_eq!(t.readiness(), t.queued + t.start_up);
    assert!(t.readiness() <= t.total, "{t:?}");
}

/// An answer callback that panics (the embedder's bug, on a runtime thread) is caught: the
/// thread goes on, later requests are answered and the runtime shuts down. Before, the panic
/// ended the worker between answering and telling its dispatcher, and shutdown hung.
#[test]
fn a_callback_that_panics_leaves_the_runtime_serving() {
    for layout in [Layout::Inline, Layout::Threads] {
        let config = RuntimeConfig { workers: 1, layout, ..RuntimeConfig::default() };
        let rt = Arc::new(Runtime::start(config).unwrap());
        // Printing the panic's backtrace takes the thread a while: the deadline is not the point.
        register(&rt, "noop", NOOP, |c| c.relative_deadline = Duration::from_secs(30));
        rt.submit_with("noop", Vec::new(), SubmitOptions::default(), |_| {
            panic!("an embedder's bug in its answer callback")
        });
        for _ in 0..3 {
            ok(call(&rt, "noop", b""));
        }
        let (done, stopped) = std::sync::mpsc::channel();
        let stopping = Arc::clone(&rt);
        std::thread::spawn(move || {
            stopping.shutdown();
            done.send(()).unwrap();
        });
        stopped.recv_timeout(Duration::from_secs(30)).expect("{layout:?}: shutdown hung");
    }
}

#[test]
fn failures_are_typed() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    let limits = Limits {
        max_execution: Duration::from_millis(50),
        max_memory_bytes: 8 << 20,
        max_output_bytes: 1 << 20,
        max_request_bytes: 1024,
    };
    for (name, wat) in [
        ("loop", LOOP),
        ("membomb", MEMBOMB),
        ("stack", STACK),
        ("oob", OOB),
        ("bigout", BIGOUT),
        ("exit3", EXIT3),
        ("echo", ECHO),
    ] {
        register(&rt, name, wat, |c| c.limits = limits);
    }
    let killed = call(&rt, "loop", b"");
    assert_eq!(killed.result, Err(Failure::Killed { budget: Duration::from_millis(50) }));
    assert!(killed.timing.executed >= Duration::from_millis(50), "{:?}", killed.timing);
    assert_eq!(call(&rt, "membomb", b"").result, Err(Failure::MemoryLimit { cap: 8 << 20 }));
    assert_eq!(call(&rt, "stack", b"").result, Err(Failure::Trap(TrapKind::StackOverflow)));
    assert_eq!(call(&rt, "oob", b"").result, Err(Failure::Trap(TrapKind::MemoryOutOfBounds)));
    assert_eq!(call(&rt, "bigout", b"").result, Err(Failure::OutputTooLarge { cap: 1 << 20 }));
    assert_eq!(call(&rt, "exit3", b"").result, Err(Failure::Exit(3)));
    assert_eq!(
        call(&rt, "echo", &[0; 1025]).result,
        Err(Failure::BadRequest(BadRequest::TooLarge { size: 1025, cap: 1024 }))
    );
    assert_eq!(
        call(&rt, "nosuch", b"").result,
        Err(Failure::BadRequest(BadRequest::UnknownFunction("nosuch".into())))
    );
    // The runtime is unharmed: a well-behaved request still succeeds.
    assert_eq!(ok(call(&rt, "echo", b"still fine")), b"still fine");
    assert_eq!(rt.live_sandboxes(), 0);
}

/// What a module's Wasm `start` function does while it is instantiated — exit, overrun its
/// budget, trap — is answered as the guest's failure, as in `_start`, not as the node's
/// (`internal`).
#[test]
fn failures_in_a_start_function_are_the_guests() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    let module = |body: &str| {
        format!(
            r#"(module
                (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
                (memory (export "memory") 1)
                (func $init {body})
                (start $init)
                (func (export "_start")))"#
        )
    };
    let budget = Duration::from_millis(50);
    for (name, body) in [
        ("exits", "(call $exit (i32.const 3))"),
        ("spins", "(loop $again (br $again))"),
        ("traps", "unreachable"),
    ] {
        register(&rt, name, &module(body), |c| {
            c.limits.max_execution = budget;
            c.relative_deadline = Duration::from_secs(10);
        });
    }
    assert_eq!(call(&rt, "exits", b"").result, Err(Failure::Exit(3)));
    assert_eq!(call(&rt, "spins", b"").result, Err(Failure::Killed { budget }));
    assert_eq!(call(&rt, "traps", b"").result, Err(Failure::Trap(TrapKind::Unreachable)));
}

/// The CPU-time clocks a guest reads are its request's own (they start at its first read), not
/// the node's process or worker thread, whose CPU time would show it the other tenants' load.
#[test]
fn cpu_time_clocks_are_the_requests_own() {
    const CLOCKS: &str = r#"(module
        (import "wasi_snapshot_preview1" "clock_time_get"
            (func $clock (param i32 i64 i32) (result i32)))
        (import "wasi_snapshot_preview1" "fd_write"
            (func $write (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 1)
        (func (export "_start")
            (drop (call $clock (i32.const 2) (i64.const 1) (i32.const 0)))
            (drop (call $clock (i32.const 3) (i64.const 1) (i32.const 8)))
            (i32.store (i32.const 64) (i32.const 0))
            (i32.store (i32.const 68) (i32.const 16))
            (drop (call $write (i32.const 1) (i32.const 64) (i32.const 1) (i32.const 72)))))"#;
    let rt = runtime(1, PolicyKind::SledgeScale);
    // The process has compiled modules and run requests: its own CPU time is well past 1 ms.
    register(&rt, "spin", SPIN, |_| {});
    ok(call(&rt, "spin", b"1000000"));
    register(&rt, "clocks", CLOCKS, |_| {});
    let out = ok(call(&rt, "clocks", b""));
    let read = |i: usize| u64::from_le_bytes(out[8 * i..8 * i + 8].try_into().unwrap());
    let (process, thread) = (read(0), read(1));
    assert!(process < 1_000_000, "the process clock read {process} ns");
    assert!(thread >= process && thread < 1_000_000, "{process} then {thread} ns");
}

/// `random_get` fills at most 1 MiB a call (a host call cannot be preempted): more is refused
/// with `EINVAL`, as WASI lets it be; a small request is filled.
#[test]
fn random_get_is_bounded_per_call() {
    const RANDOM: &str = r#"(module
        (import "wasi_snapshot_preview1" "random_get"
            (func $random (param i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "fd_write"
            (func $write (param i32 i32 i32 i32) (result i32)))
        (memory (export "memory") 40)
        (func (export "_start")
            (i32.store (i32.const 0) (call $random (i32.const 64) (i32.const 256)))
            (i32.store (i32.const 4) (call $random (i32.const 64) (i32.const 2097152)))
            (i32.store (i32.const 16) (i32.const 0))
            (i32.store (i32.const 20) (i32.const 8))
            (drop (call $write (i32.const 1) (i32.const 16) (i32.const 1) (i32.const 24)))))"#;
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "random", RANDOM, |_| {});
    let out = ok(call(&rt, "random", b""));
    let errno = |i: usize| u32::from_le_bytes(out[4 * i..4 * i + 4].try_into().unwrap());
    assert_eq!((errno(0), errno(1)), (0, 28), "256 bytes filled, 2 MiB refused (EINVAL)");
}

#[test]
fn bad_modules_are_rejected_at_registration() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    let reason = |wat: &str| match rt.register(FunctionConfig::new("bad"), wat.as_bytes()) {
        Err(Error::Register { reason, .. }) => reason,
        other => panic!("expected a registration error, got {other:?}"),
    };
    assert!(matches!(reason("(module"), RegisterError::Invalid(_)));
    assert!(matches!(reason("\0asm\x01\0\0\0\x7f"), RegisterError::Invalid(_)));
    assert!(matches!(
        reason(r#"(module (memory (export "memory") 1))"#),
        RegisterError::MissingExport("_start")
    ));
    assert!(matches!(
        reason(r#"(module (func (export "_start")))"#),
        RegisterError::MissingExport("memory")
    ));
    assert!(matches!(
        reason(
            r#"(module (import "env" "f" (func)) (import "wasi_snapshot_preview1" "nope" (func))
                (memory (export "memory") 1) (func (export "_start")))"#
        ),
        RegisterError::UnsupportedImports(list)
            if list == ["env::f", "wasi_snapshot_preview1::nope"]
    ));
    assert!(matches!(
        reason(
            r#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32)))
                  (memory (export "memory") 1) (func (export "_start")))"#
        ),
        RegisterError::Link(_)
    ));
    // Beyond the pool's slot size: Wasmtime's own check, with a clear message.
    assert!(matches!(
        reason(r#"(module (memory (export "memory") 2000) (func (export "_start")))"#),
        RegisterError::Invalid(m) if m.contains("exceeds the limit")
    ));
    // Beyond the function's cap.
    let mut small = FunctionConfig::new("small");
    small.limits.max_memory_bytes = 1 << 20;
    let wat = r#"(module (memory (export "memory") 20) (func (export "_start")))"#;
    assert!(matches!(
        rt.register(small, wat.as_bytes()),
        Err(Error::Register { reason: RegisterError::MemoryTooLarge { needed: 1310720, .. }, .. })
    ));
    register(&rt, "noop", NOOP, |_| {});
    assert!(matches!(
        rt.register(FunctionConfig::new("noop"), NOOP.as_bytes()),
        Err(Error::Register { reason: RegisterError::Duplicate, .. })
    ));
}

#[test]
fn guest_sees_its_name_id_and_deadline() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "args", ARGS, |_| {});
    let outcome = call(&rt, "args", b"");
    let id = outcome.request_id;
    let text = String::from_utf8(ok(outcome)).unwrap();
    assert!(text.starts_with("args\n\n"), "{text}");
    assert!(text.contains(&format!("LUGE_REQUEST_ID={id}\n")), "{text}");
    assert!(text.contains("LUGE_FUNCTION=args\n") && text.contains("LUGE_DEADLINE_US="), "{text}");
    assert!(!text.contains("TRACEPARENT="), "no trace, no TRACEPARENT: {text}");
    // A request in a trace: its context, as W3C `traceparent`.
    let trace =
        luge_proto::TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    let options = SubmitOptions { trace, ..SubmitOptions::default() };
    let outcome = rt.submit("args", Vec::new(), options).wait_timeout(Duration::from_secs(60));
    let text = String::from_utf8(ok(outcome.unwrap())).unwrap();
    let line = "TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n";
    assert!(text.contains(line), "{text}");
}

#[test]
fn sandboxes_never_see_a_previous_request() {
    let rt = runtime(2, PolicyKind::SledgeScale);
    register(&rt, "leak", LEAK, |_| {});
    for i in 0..50u8 {
        assert_eq!(ok(call(&rt, "leak", &[i.wrapping_add(1); 16])), [0u8; 16], "request {i}");
    }
    // Premise: a module that keeps its instance would show the bytes (checked by the WAT's own
    // test, functions/test/check_wat.py); here every request got a fresh one.
}

/// Reports, then dirties, one place on each of five pages, a data segment on page 3, and a page
/// it grows: what a fresh sandbox must always find zeroed (or as the module's image has it).
/// Stdout: 8 bytes from each of pages 0, 1, 2 and 4, the grown page 5, then the segment.
const SCRIBBLE: &str = r#"
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 5)
  (data (i32.const 196616) "PRISTINE")
  (func (export "_start")
    (local $i i32)
    (drop (memory.grow (i32.const 1)))
    ;; Gather what each place holds now at 4096.., then dirty it.
    (loop $each
      (i64.store
        (i32.add (i32.const 4096) (i32.mul (local.get $i) (i32.const 8)))
        (i64.load (call $place (local.get $i))))
      (i64.store (call $place (local.get $i)) (i64.const 0x4142434445464748))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $each (i32.lt_u (local.get $i) (i32.const 6))))
    (i32.store (i32.const 0) (i32.const 4096))
    (i32.store (i32.const 4) (i32.const 48))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
  ;; Place n: 8 bytes into pages 0, 1, 2, 4, 5 (n = 0..4; page 0 at 1024), then the segment.
  (func $place (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 1024))
      (else (if (result i32) (i32.eq (local.get $n) (i32.const 5))
        (then (i32.const 196616))
        (else (i32.add
          (i32.mul
            (i32.add (local.get $n) (i32.ge_u (local.get $n) (i32.const 3)))
            (i32.const 65536))
          (i32.const 8))))))))
"#;

#[test]
fn a_reused_slot_is_reset_whatever_pages_the_last_sandbox_dirtied() {
    // The pool resets a slot by the pages the last sandbox dirtied (`RuntimeConfig::
    // pagemap_scan`, Linux's PAGEMAP_SCAN) or by zeroing its low part: either way, every page
    // written — early, late, grown — and the data segment overwritten read as new for the next
    // request on that slot — whether memory starts from a copy-on-write image or from its data
    // segments copied in (`memory_init_cow`). One worker and one slot, so every request reuses
    // the last one's.
    let expected: Vec<u8> = [[0u8; 8]; 5].concat().into_iter().chain(*b"PRISTINE").collect();
    for (pagemap_scan, memory_init_cow) in
        [(true, true), (false, true), (true, false), (false, false)]
    {
        let config = RuntimeConfig {
            max_sandboxes: 1,
            pagemap_scan,
            memory_init_cow,
            ..RuntimeConfig::default()
        };
        let rt = Runtime::start(config).unwrap();
        register(&rt, "scribble", SCRIBBLE, |_| {});
        for i in 0..20 {
            assert_eq!(
                ok(call(&rt, "scribble", b"")),
                expected,
                "request {i}, scan {pagemap_scan}, cow {memory_init_cow}"
            );
        }
    }
}

#[test]
fn ready_sandboxes_serve_one_request_each_and_never_show_a_previous_one() {
    // Ready sandboxes (after HORSE §1–2's warm sandboxes): a uLL function's requests start in
    // sandboxes built ahead of them (no instantiation on their path) — each fresh: request n's
    // write is never seen by n + 1.
    for layout in [Layout::Threads, Layout::Inline] {
        let rt = Runtime::start(RuntimeConfig { layout, ..RuntimeConfig::default() }).unwrap();
        register(&rt, "leak", LEAK, |c| c.ull = true);
        let mut ready = 0;
        for i in 0..50u8 {
            if i > 0 {
                // Between two requests the worker is idle and builds the next one's sandbox
                // (waited for, briefly: on a loaded box the next call could otherwise beat the
                // build; not long: a function called again after more than a second is not
                // worth one, `ready.rs`).
                let start = Instant::now();
                while rt.worker_stats()[0].ready == 0
                    && start.elapsed() < Duration::from_millis(200)
                {
                    std::thread::yield_now();
                }
            }
            let outcome = call(&rt, "leak", &[i.wrapping_add(1); 16]);
            let (built_for_it, start_up) = (outcome.timing.instantiation, outcome.timing.start_up);
            assert_eq!(ok(outcome), [0u8; 16], "{layout:?} request {i}");
            // A ready sandbox still has a start-up (its stdin, the entry), which readiness counts.
            assert!(start_up > built_for_it, "{layout:?} request {i}");
            ready += usize::from(built_for_it.is_zero());
        }
        // Every request after the first two found one (the second asks for it).
        assert!(ready >= 45, "{layout:?}: only {ready} of 50 requests found a ready sandbox");
        // The worker refills once it has answered: wait for it.
        let start = Instant::now();
        while rt.worker_stats()[0].ready_bytes == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "{layout:?}: no ready sandbox");
            std::thread::yield_now();
        }
        let held = rt.worker_stats()[0].ready;
        assert!((1..=2).contains(&held), "{layout:?}: {held} ready sandboxes");
        assert!(rt.worker_stats()[0].ready_bytes >= 65_536, "{layout:?}: one page each at least");
        // Ready sandboxes are not live ones.
        assert_eq!(rt.live_sandboxes(), 0, "{layout:?}");
    }
    // Without the lane there are none: every request builds its own.
    let rt = Runtime::start(RuntimeConfig { ull_lane: false, ..RuntimeConfig::default() }).unwrap();
    register(&rt, "leak", LEAK, |c| c.ull = true);
    for i in 0..5u8 {
        let outcome = call(&rt, "leak", &[i; 16]);
        assert!(!outcome.timing.instantiation.is_zero());
    }
    assert_eq!(rt.worker_stats()[0].ready, 0);
}

/// Calls `name` on `rt` until a worker holds a ready sandbox for it; fails after 10 s.
fn until_ready(rt: &Runtime, name: &str) {
    let start = Instant::now();
    while rt.worker_stats()[0].ready == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "no ready sandbox for {name}");
        ok(call(rt, name, b"x"));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until no worker holds a ready sandbox; how long that took (fails after 10 s).
fn until_none_ready(rt: &Runtime) -> Duration {
    let start = Instant::now();
    while rt.worker_stats().iter().any(|w| w.ready > 0) {
        assert!(start.elapsed() < Duration::from_secs(10), "ready sandboxes kept");
        std::thread::sleep(Duration::from_millis(20));
    }
    start.elapsed()
}

#[test]
fn an_idle_worker_lets_unused_ready_sandboxes_go_and_drops_a_removed_functions() {
    for layout in [Layout::Threads, Layout::Inline] {
        let rt = Runtime::start(RuntimeConfig { layout, ..RuntimeConfig::default() }).unwrap();
        register(&rt, "leak", LEAK, |c| c.ull = true);
        // Unused, they go one a second, with no request to wake the worker.
        until_ready(&rt, "leak");
        let waited = until_none_ready(&rt);
        assert!(waited >= Duration::from_millis(500), "{layout:?}: gone after {waited:?}");
        // A removed function's go at the worker's next look.
        until_ready(&rt, "leak");
        rt.unregister("leak").unwrap();
        let waited = until_none_ready(&rt);
        assert!(waited < Duration::from_millis(1_500), "{layout:?}: kept {waited:?}");
    }
}

/// `unregister_with` runs its closure once the name is gone from the registry (the admin API
/// drops the routes there) — and not at all for a name that is not registered; and
/// `unregister_exact` removes only the function it is given.
#[test]
fn unregister_with_runs_once_the_function_is_gone() {
    let rt = Runtime::start(RuntimeConfig::default()).unwrap();
    register(&rt, "gone", NOOP, |_| {});
    assert!(rt.unregister_with("gone", || rt.function("gone").is_none()).unwrap());
    let mut ran = false;
    assert!(matches!(rt.unregister_with("gone", || ran = true), Err(Error::UnknownFunction(_))));
    assert!(!ran);
    // `unregister_exact` removes only the very function given, not one registered again under
    // its name since (an admin PUT undoing itself must not remove another client's).
    let first = rt.register(FunctionConfig::new("again"), NOOP.as_bytes()).unwrap();
    rt.unregister("again").unwrap();
    let second = rt.register(FunctionConfig::new("again"), NOOP.as_bytes()).unwrap();
    assert!(!rt.unregister_exact(&first));
    assert_eq!(rt.function("again").unwrap().id, second.id);
    assert!(rt.unregister_exact(&second));
    assert!(rt.function("again").is_none());
}

#[test]
fn an_urgent_request_preempts_a_long_one() {
    urgent_requests_preempt(runtime(1, PolicyKind::SledgeScale));
}

#[test]
fn the_inline_layout_preempts_too() {
    // Dispatcher and worker share one thread: arrivals are seen from the epoch callback.
    let config = RuntimeConfig { layout: Layout::Inline, ..RuntimeConfig::default() };
    urgent_requests_preempt(Runtime::start(config).unwrap());
    let config = RuntimeConfig { layout: Layout::Inline, workers: 2, ..RuntimeConfig::default() };
    assert!(matches!(Runtime::start(config), Err(Error::Config(_))));
}

#[test]
fn timeline_worker_queues_preempt_too() {
    // CT-EDF (Edge-RT §IV-C) as the worker's queue: deadlines 10 ms apart lie in different
    // 500 µs quanta, so the urgent requests still run in EDF order, ahead of the long one.
    let mut config = RuntimeConfig::default();
    config.policy_config.worker_queue = QueueKind::Timeline(CtEdfConfig::default());
    urgent_requests_preempt(Runtime::start(config).unwrap());
}

/// One worker serving `noop` and `loop`, a runaway due 50 ms after it arrives whose budget
/// (20 s) is far off.
/// A runtime with a `loop` due in 50 ms that `budget` of CPU ends, and a no-op.
fn with_a_runaway(budget: Duration) -> Runtime {
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "loop", LOOP, |c| {
        c.relative_deadline = Duration::from_millis(50);
        c.limits.max_execution = budget;
    });
    register(&rt, "noop", NOOP, |_| {});
    rt
}

/// Lets the `loop` of `ticket` run past its deadline (alone, it runs on), then calls the no-op,
/// due after it: the no-op gets the worker at once and the loop is answered, its outcome.
fn end_late(rt: &Runtime, ticket: luge_runtime::Ticket) -> Outcome {
    until_running(rt, "the loop never started");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(rt.live_sandboxes(), 1, "the loop still runs");
    let later = SubmitOptions { deadline: Some(Duration::from_secs(5)), ..Default::default() };
    ok(rt.submit("noop", Vec::new(), later).wait_timeout(Duration::from_secs(10)).unwrap());
    ticket.wait_timeout(Duration::from_secs(10)).unwrap()
}

#[test]
fn a_runaway_past_its_deadline_yields_and_is_answered_late() {
    // Edge-RT §VI-D: a request still running at its deadline no longer outranks anyone; it is
    // answered as late instead of resumed.
    let rt = with_a_runaway(Duration::from_secs(20));
    let runaway = end_late(&rt, rt.submit("loop", Vec::new(), SubmitOptions::default()));
    assert_eq!(runaway.result, Err(Failure::Late));
    assert!(runaway.timing.preemptions >= 1, "{:?}", runaway.timing);
}

#[test]
fn a_function_whose_runs_end_late_is_refused_but_probed() {
    let budget = Duration::from_millis(400);
    let rt = with_a_runaway(budget);
    let first = end_late(&rt, rt.submit("loop", Vec::new(), SubmitOptions::default()));
    assert_eq!(first.result, Err(Failure::Late));
    // It would have run at least its deadline: the next request is a probe (the first goes at
    // once), run in the best-effort lane, where it yields to the no-op at once and runs on in
    // the spare time until its budget ends it…
    let probe = rt.submit("loop", Vec::new(), SubmitOptions::default());
    // …while the one after it is refused at once, its estimate overrunning its deadline.
    let refused = call(&rt, "loop", b"");
    assert_eq!(refused.result, Err(Failure::Rejected(Rejection::DeadlineInfeasible)));
    assert_eq!(end_late(&rt, probe).result, Err(Failure::Killed { budget }));
    assert_eq!(rt.group_stats().iter().map(|g| g.demoted).sum::<u64>(), 1, "the probe");
}

#[test]
fn a_demoted_runaway_finishes_late_on_the_spare_worker_time() {
    // Edge-RT §IV-C with `on_overrun = demote`: past its deadline the runaway yields to on-time
    // work as a killed one would, but then runs on in the best-effort lane and completes late
    // (spin(10^8) runs ~0.2 s against a 50 ms deadline), with its output intact.
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "spin", SPIN, |c| {
        c.relative_deadline = Duration::from_millis(50);
        c.limits.max_execution = Duration::from_secs(20);
        c.on_overrun = luge_runtime::Overrun::Demote;
    });
    register(&rt, "noop", NOOP, |_| {});
    let alone = ok(rt
        .submit(
            "spin",
            b"100000000".to_vec(),
            SubmitOptions { deadline: Some(Duration::from_secs(30)), ..Default::default() },
        )
        .wait_timeout(Duration::from_secs(30))
        .unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let finished = Arc::clone(&order);
    rt.submit_with("spin", b"100000000".to_vec(), SubmitOptions::default(), move |o| {
        finished.lock().unwrap().push("spin");
        tx.send(o).unwrap();
    });
    until_running(&rt, "the runaway never started");
    std::thread::sleep(Duration::from_millis(80));
    let later = SubmitOptions { deadline: Some(Duration::from_secs(5)), ..Default::default() };
    ok(rt.submit("noop", Vec::new(), later).wait_timeout(Duration::from_secs(10)).unwrap());
    order.lock().unwrap().push("noop");
    let late = rx.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(ok(late.clone()), alone, "the demoted run resumed where it was");
    assert!(late.timing.preemptions >= 1, "{:?}", late.timing);
    assert_eq!(*order.lock().unwrap(), ["noop", "spin"]);
    let demoted = || rt.group_stats().iter().map(|g| g.demoted).sum::<u64>();
    assert_eq!(demoted(), 1);
    // Its function is now known to overrun its deadline: its next request is not refused but
    // goes to the lane at once, and with the worker free runs there to its result.
    let next = rt.submit("spin", b"100000000".to_vec(), SubmitOptions::default());
    assert_eq!(ok(next.wait_timeout(Duration::from_secs(30)).unwrap()), alone);
    assert_eq!(demoted(), 2);
}

#[test]
fn a_demoted_runaway_is_still_killed_at_its_budget() {
    let budget = Duration::from_millis(400);
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "loop", LOOP, |c| {
        c.relative_deadline = Duration::from_millis(50);
        c.limits.max_execution = budget;
        c.on_overrun = luge_runtime::Overrun::Demote;
    });
    register(&rt, "noop", NOOP, |_| {});
    let demoted = || rt.group_stats().iter().map(|g| g.demoted).sum::<u64>();
    let first = rt.submit("loop", Vec::new(), SubmitOptions::default());
    until_running(&rt, "the loop never started");
    std::thread::sleep(Duration::from_millis(100));
    let later = SubmitOptions { deadline: Some(Duration::from_secs(5)), ..Default::default() };
    ok(rt.submit("noop", Vec::new(), later).wait_timeout(Duration::from_secs(10)).unwrap());
    assert_eq!(demoted(), 1, "demoted when the no-op arrived");
    // It ran past its deadline: its function's estimate learnt that at the demotion, long
    // before its run ends, so the next request goes to the lane at once rather than holding
    // the worker with EDF's rank until its own deadline.
    let second = rt.submit("loop", Vec::new(), SubmitOptions::default());
    let start = Instant::now();
    while demoted() < 2 {
        assert!(start.elapsed() < Duration::from_millis(250), "the second loop was not demoted");
        std::thread::yield_now();
    }
    for ticket in [first, second] {
        let outcome = ticket.wait_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(outcome.result, Err(Failure::Killed { budget }));
    }
}

#[test]
fn demoted_requests_that_never_finish_are_answered_at_the_lanes_expiry() {
    // Runaways demoted one after the other share the spare time round robin; none finishes
    // (a 20 s budget), so each is answered once it is `demoted_expiry` past its deadline.
    let mut config = RuntimeConfig { workers: 1, ..RuntimeConfig::default() };
    config.policy_config.demoted_expiry = 300_000_000;
    let rt = Runtime::start(config).unwrap();
    register(&rt, "loop", LOOP, |c| {
        c.relative_deadline = Duration::from_millis(50);
        c.limits.max_execution = Duration::from_secs(20);
        c.on_overrun = luge_runtime::Overrun::Demote;
    });
    let start = Instant::now();
    let tickets: Vec<_> = (0..8)
        .map(|_| {
            let t = rt.submit("loop", Vec::new(), SubmitOptions::default());
            std::thread::sleep(Duration::from_millis(20));
            t
        })
        .collect();
    for t in tickets {
        let outcome = t.wait_timeout(Duration::from_secs(10)).expect("answered at the expiry");
        assert!(
            matches!(outcome.result, Err(Failure::Late | Failure::Rejected(Rejection::Shed))),
            "{:?}",
            outcome.result
        );
    }
    // 160 ms of submissions, 50 ms deadlines, 300 ms expiry: well under 10 s.
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
}

fn urgent_requests_preempt(rt: Runtime) {
    // spin(10^8) runs ~0.2 s; tell the estimator so its slack is known.
    register(&rt, "spin", SPIN, |c| {
        c.expected_execution = Some(Duration::from_millis(200));
        c.relative_deadline = Duration::from_secs(20);
        c.limits.max_execution = Duration::from_secs(20);
    });
    register(&rt, "noop", NOOP, |c| c.expected_execution = Some(Duration::from_micros(50)));
    let long = rt.submit("spin", b"100000000".to_vec(), SubmitOptions::default());
    // Wait until the long request is running (premise), then send urgent ones.
    until_running(&rt, "long request never started");
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let urgent: Vec<_> = (0..3)
        .map(|i| {
            let order = Arc::clone(&order);
            let options = SubmitOptions {
                deadline: Some(Duration::from_millis(50 + i * 10)),
                ..Default::default()
            };
            let (tx, rx) = std::sync::mpsc::channel();
            rt.submit_with("noop", Vec::new(), options, move |o| {
                order.lock().unwrap().push(i);
                tx.send(o).unwrap();
            });
            rx
        })
        .collect();
    for rx in urgent {
        ok(rx.recv_timeout(Duration::from_secs(10)).unwrap());
    }
    let long = long.wait_timeout(Duration::from_secs(30)).unwrap();
    assert!(long.timing.preemptions >= 1, "no preemption happened: {:?}", long.timing);
    assert_eq!(ok(long).len(), 17);
    // EDF order among the urgent ones (deadlines 50, 60, 70 ms).
    assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
}

/// Which of a long `spin` request (deadline 20 s) and a no-op submitted while it runs (deadline
/// 30 s, its config `tune`d) is answered first, the long one's preemptions, and the arrivals the
/// group counted in the uLL lane.
fn ull_beside_a_long_request(
    config: RuntimeConfig,
    tune: fn(&mut FunctionConfig),
) -> (Vec<&'static str>, u32, u64) {
    let rt = Runtime::start(config).unwrap();
    register(&rt, "spin", SPIN, |c| {
        c.expected_execution = Some(Duration::from_millis(200));
        c.relative_deadline = Duration::from_secs(20);
        c.limits.max_execution = Duration::from_secs(20);
    });
    register(&rt, "noop", NOOP, |c| {
        c.relative_deadline = Duration::from_secs(30);
        tune(c);
    });
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let answer = |name: &'static str| {
        let (order, (tx, rx)) = (Arc::clone(&order), std::sync::mpsc::channel());
        let payload = if name == "spin" { b"100000000".to_vec() } else { Vec::new() };
        rt.submit_with(name, payload, SubmitOptions::default(), move |o| {
            order.lock().unwrap().push(name);
            tx.send(o).unwrap();
        });
        rx
    };
    let long = answer("spin");
    until_running(&rt, "long request never started");
    let short = answer("noop");
    ok(short.recv_timeout(Duration::from_secs(30)).unwrap());
    let long = long.recv_timeout(Duration::from_secs(30)).unwrap();
    let preemptions = long.timing.preemptions;
    ok(long);
    let order = order.lock().unwrap().clone();
    (order, preemptions, rt.group_stats()[0].ull)
}

#[test]
fn a_ull_request_does_not_wait_for_a_running_long_one_in_either_layout() {
    // HORSE §4.1.3: a declared uLL function runs at the next epoch tick of a long request, even
    // with a later deadline (EDF alone would let it wait ~0.2 s).
    let declared: fn(&mut FunctionConfig) = |c| c.ull = true;
    // Undeclared, with an estimate within the lane's threshold (20 µs), it is uLL too.
    let short: fn(&mut FunctionConfig) = |c| c.expected_execution = Some(Duration::from_micros(5));
    for (layout, tune) in
        [(Layout::Threads, declared), (Layout::Inline, declared), (Layout::Auto, short)]
    {
        let config = RuntimeConfig { layout, ..RuntimeConfig::default() };
        let (order, preemptions, ull) = ull_beside_a_long_request(config, tune);
        assert_eq!(order, ["noop", "spin"], "{layout:?}");
        assert_eq!((preemptions, ull), (1, 1), "{layout:?}");
    }
    // Without the lane, or neither declared nor known to be short (never run, not seeded), it
    // waits.
    let config = RuntimeConfig { ull_lane: false, ..RuntimeConfig::default() };
    assert_eq!(ull_beside_a_long_request(config, declared), (vec!["spin", "noop"], 0, 0));
    let unknown = ull_beside_a_long_request(RuntimeConfig::default(), |_| {});
    assert_eq!(unknown, (vec!["spin", "noop"], 0, 0));
}

/// The lane takes no client's word: a trusted client estimate within the lane's threshold does
/// not put a request of a never-run function in the lane; a request of a function the node knows
/// to be short takes it only if its client's estimate is short too (a client's figure can lose
/// the lane, as a long request of a mixed function should; never earn it; `docs/security.md`).
#[test]
fn a_clients_estimate_never_earns_the_lane() {
    let ull_after = |seed: Option<Duration>, claimed: Duration| {
        let rt = Runtime::start(RuntimeConfig::default()).unwrap();
        register(&rt, "noop", NOOP, |c| {
            c.trust_client_estimate = true;
            c.expected_execution = seed;
        });
        let options = SubmitOptions { expected: Some(claimed), ..Default::default() };
        ok(rt.submit("noop", Vec::new(), options).wait());
        rt.group_stats()[0].ull
    };
    assert_eq!(ull_after(None, Duration::from_micros(1)), 0, "a client's claim");
    let seed = Some(Duration::from_micros(5));
    assert_eq!(ull_after(seed, Duration::from_millis(1)), 0, "a long request of a short function");
    assert_eq!(ull_after(seed, Duration::from_micros(1)), 1, "both short");
}

/// Ever more urgent arrivals cannot hold every pool slot with suspended sandboxes: with two
/// slots on one worker (none to spare for a suspended one), the second and third long requests
/// wait for the running one instead of preempting it, and all three are answered — where the
/// third used to find no slot (`PoolExhausted`, as would every other tenant's request).
#[test]
fn preemptions_stop_short_of_exhausting_the_pool() {
    let config = RuntimeConfig { max_sandboxes: 2, ..RuntimeConfig::default() };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "spin", SPIN, |c| {
        c.relative_deadline = Duration::from_secs(30);
        c.limits.max_execution = Duration::from_secs(30);
    });
    let submit = |deadline_s: u64| {
        let options =
            SubmitOptions { deadline: Some(Duration::from_secs(deadline_s)), ..Default::default() };
        rt.submit("spin", b"20000000".to_vec(), options)
    };
    let first = submit(20);
    until_running(&rt, "the first never started");
    let second = submit(10);
    until_queued_or_running(&rt);
    let third = submit(5);
    for ticket in [first, second, third] {
        ok(ticket.wait_timeout(Duration::from_secs(60)).unwrap());
    }
    assert!(rt.group_stats()[0].preemptions_deferred >= 1);
}

/// Waits until the runtime's one group has taken every submission.
fn until_queued_or_running(rt: &Runtime) {
    let start = Instant::now();
    while rt.group_stats()[0].submissions > 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "submissions never taken");
        std::thread::yield_now();
    }
    std::thread::sleep(Duration::from_millis(5));
}

#[test]
fn every_policy_serves_a_mixed_load() {
    let layouts = PolicyKind::ALL
        .into_iter()
        .map(|p| (p, Layout::Threads, 2))
        .chain([PolicyKind::SledgeScale, PolicyKind::Fifo].map(|p| (p, Layout::Inline, 1)));
    for (policy, layout, workers) in layouts {
        let config = RuntimeConfig {
            workers,
            dispatchers: if layout == Layout::Inline { workers } else { 1 },
            policy,
            layout,
            ..RuntimeConfig::default()
        };
        let rt = Runtime::start(config).unwrap();
        register(&rt, "echo", ECHO, |_| {});
        register(&rt, "spin", SPIN, |c| c.relative_deadline = Duration::from_secs(10));
        let tickets: Vec<_> = (0..40)
            .map(|i| {
                if i % 4 == 0 {
                    rt.submit("spin", b"200000".to_vec(), SubmitOptions::default())
                } else {
                    rt.submit("echo", vec![i as u8; 10], SubmitOptions::default())
                }
            })
            .collect();
        for t in tickets {
            let outcome = t.wait_timeout(Duration::from_secs(60)).unwrap();
            assert!(outcome.is_ok(), "{policy}: {outcome:?}");
        }
        rt.shutdown();
        assert_eq!(rt.live_sandboxes(), 0, "{policy}");
    }
}

#[test]
fn concurrent_submitters_get_exactly_one_answer_each() {
    let config =
        RuntimeConfig { workers: 2, dispatchers: 2, max_sandboxes: 8, ..RuntimeConfig::default() };
    let rt = Arc::new(Runtime::start(config).unwrap());
    register(&rt, "echo", ECHO, |_| {});
    register(&rt, "exit3", EXIT3, |_| {});
    register(&rt, "oob", OOB, |_| {});
    register(&rt, "spin", SPIN, |_| {});
    let answers = Arc::new(AtomicUsize::new(0));
    let per_thread = 300;
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let rt = Arc::clone(&rt);
            let answers = Arc::clone(&answers);
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for i in 0..per_thread {
                    let (name, payload): (&str, Vec<u8>) = match i % 4 {
                        0 => ("echo", format!("{t}:{i}").into_bytes()),
                        1 => ("exit3", Vec::new()),
                        2 => ("oob", Vec::new()),
                        _ => ("spin", b"20000".to_vec()),
                    };
                    let expect = payload.clone();
                    let answers = Arc::clone(&answers);
                    let (tx, rx) = std::sync::mpsc::channel();
                    rt.submit_with(name, payload, SubmitOptions::default(), move |o| {
                        answers.fetch_add(1, Ordering::Relaxed);
                        let _ = tx.send(o);
                    });
                    let o = rx.recv_timeout(Duration::from_secs(60)).unwrap();
                    match (i % 4, &o.result) {
                        (0, Ok(out)) => assert_eq!(*out, expect),
                        (1, Err(Failure::Exit(3))) => {}
                        (2, Err(Failure::Trap(TrapKind::MemoryOutOfBounds))) => {}
                        (3, Ok(out)) => assert_eq!(out.len(), 17),
                        (_, Err(Failure::Rejected(_))) => {}
                        other => panic!("unexpected {other:?}"),
                    }
                    // A second answer would arrive on the closed channel: none may.
                    assert!(rx.recv_timeout(Duration::from_millis(0)).is_err());
                    ids.push(o.request_id);
                }
                ids
            })
        })
        .collect();
    let mut ids: Vec<u64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    assert_eq!(answers.load(Ordering::Relaxed), 8 * per_thread);
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 8 * per_thread, "request ids must be unique");
    assert_eq!(rt.live_sandboxes(), 0, "pool slots leaked");
}

#[test]
fn shutdown_answers_everything_in_flight() {
    // A dispatcher thread of its own ends the loop after the grace; an inline one must do it
    // from the loop's own epoch callback, since its thread is busy running the loop.
    for (layout, workers) in [(Layout::Threads, 2), (Layout::Inline, 1)] {
        shutdown_answers_everything_in_flight_in(layout, workers);
    }
}

fn shutdown_answers_everything_in_flight_in(layout: Layout, workers: usize) {
    let config = RuntimeConfig {
        workers,
        dispatchers: if layout == Layout::Inline { workers } else { 1 },
        layout,
        shutdown_grace: Duration::from_millis(300),
        ..RuntimeConfig::default()
    };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "spin", SPIN, |c| c.relative_deadline = Duration::from_secs(60));
    register(&rt, "loop", LOOP, |c| {
        // On time throughout (else it yields to the spins at its deadline, answered late):
        // only the shutdown can stop it.
        c.relative_deadline = Duration::from_secs(60);
        c.limits.max_execution = Duration::from_secs(60);
    });
    let mut tickets: Vec<_> =
        (0..200).map(|_| rt.submit("spin", b"300000".to_vec(), SubmitOptions::default())).collect();
    tickets.push(rt.submit("loop", Vec::new(), SubmitOptions::default()));
    let started = Instant::now();
    rt.shutdown();
    let (mut done, mut refused) = (0, 0);
    for t in tickets {
        match t.wait_timeout(Duration::from_secs(10)).unwrap().result {
            Ok(_) => done += 1,
            Err(Failure::Rejected(Rejection::ShuttingDown)) => refused += 1,
            Err(e) => panic!("{layout:?}: unexpected failure {e}"),
        }
    }
    assert_eq!(done + refused, 201, "{layout:?}");
    assert!(refused >= 1, "{layout:?}: the endless loop must have been stopped");
    // One grace period and a tick or two: the loop's 60 s budget did not end it.
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "{layout:?}: shutdown took {took:?} (grace 300 ms)");
    assert_eq!(
        call(&rt, "spin", b"1").result,
        Err(Failure::Rejected(Rejection::ShuttingDown)),
        "{layout:?}: no new work after shutdown"
    );
    assert_eq!(rt.live_sandboxes(), 0, "{layout:?}");
}

#[test]
fn compiled_modules_are_cached_on_disk() {
    let dir = std::env::temp_dir().join(format!("luge-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = RuntimeConfig { cache_dir: Some(dir.clone()), ..RuntimeConfig::default() };
    let first = Runtime::start(config.clone()).unwrap();
    let f = first.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
    assert!(!f.from_cache);
    drop(first);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let second = Runtime::start(config.clone()).unwrap();
    let f = second.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
    assert!(f.from_cache, "second start must load the artifact");
    assert_eq!(ok(call(&second, "echo", b"cached")), b"cached");
    // Nothing may hold the module any more: it maps the artifact (a node's artifacts must not be
    // changed in place while it runs; Luge itself only ever replaces them by renaming).
    drop((f, second));
    // A corrupt artifact (from a crash, a bad disk, a different build) is ignored, recompiled
    // and replaced.
    let artifact = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
    std::fs::write(&artifact, b"not an artifact").unwrap();
    let third = Runtime::start(config.clone()).unwrap();
    let f = third.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
    assert!(!f.from_cache, "a corrupt artifact must not load");
    assert_eq!(ok(call(&third, "echo", b"recompiled")), b"recompiled");
    drop((f, third));
    assert!(std::fs::read(&artifact).unwrap().len() > 1000, "the artifact was not replaced");
    // An artifact that cannot be written (here a directory is in its way) costs a compile,
    // not the registration.
    std::fs::remove_file(&artifact).unwrap();
    std::fs::create_dir(&artifact).unwrap();
    let fourth = Runtime::start(config).unwrap();
    let f = fourth.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
    assert!(!f.from_cache);
    assert_eq!(ok(call(&fourth, "echo", b"uncached")), b"uncached");
    drop((f, fourth));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A cache directory that cannot be created (a file is in the way; the same for a read-only or
/// full disk) means serving without the cache, not refusing to start.
#[test]
fn an_unusable_cache_directory_means_serving_without_it() {
    let file = std::env::temp_dir().join(format!("luge-cache-file-{}", std::process::id()));
    std::fs::write(&file, b"").unwrap();
    let config = RuntimeConfig { cache_dir: Some(file.join("cache")), ..RuntimeConfig::default() };
    let rt = Runtime::start(config).unwrap();
    let f = rt.register(FunctionConfig::new("echo"), ECHO.as_bytes()).unwrap();
    assert!(!f.from_cache);
    assert_eq!(ok(call(&rt, "echo", b"no cache")), b"no cache");
    drop(rt);
    std::fs::remove_file(&file).unwrap();
}

#[test]
fn infeasible_deadlines_are_refused_at_once() {
    // The default estimate (for functions never run) is far above the deadline below.
    let config = RuntimeConfig { default_estimate: Duration::from_secs(1), ..Default::default() };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "noop", NOOP, |c| c.expected_execution = Some(Duration::from_millis(5)));
    let options = SubmitOptions { deadline: Some(Duration::from_millis(1)), ..Default::default() };
    let outcome = rt.submit("noop", Vec::new(), options).wait();
    assert_eq!(outcome.result, Err(Failure::Rejected(Rejection::DeadlineInfeasible)));
    // A function never run has no estimate worth refusing on: it runs, and is learned. (A
    // deadline of 100 ms, not less: on a loaded machine admission alone can take milliseconds,
    // and a request already past its deadline is refused whatever the estimate.)
    register(&rt, "fresh", NOOP, |_| {});
    let tight = SubmitOptions { deadline: Some(Duration::from_millis(100)), ..Default::default() };
    assert!(rt.submit("fresh", Vec::new(), tight).wait().is_ok());
    // Once learned, a feasible deadline is served… (10 s: until the dispatcher has read the
    // first run's completion — on a busy box it may not have yet — it still counts that run's
    // 1 s default estimate as the worker's remaining work, and 1 s would then be unreachable.)
    let second = SubmitOptions { deadline: Some(Duration::from_secs(10)), ..Default::default() };
    assert!(rt.submit("fresh", Vec::new(), second).wait().is_ok());
    // …and one below the learned execution is refused.
    let impossible =
        SubmitOptions { deadline: Some(Duration::from_nanos(1)), ..Default::default() };
    let outcome = rt.submit("fresh", Vec::new(), impossible).wait();
    assert_eq!(outcome.result, Err(Failure::Rejected(Rejection::DeadlineInfeasible)));
}

#[test]
fn the_front_ends_delivery_time_is_set_aside_at_admission() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    // The client's estimate, trusted: every request is judged on it, not on the no-op's runs.
    register(&rt, "noop", NOOP, |c| c.trust_client_estimate = true);
    let refused = |expected_ms, delivery| {
        let options = SubmitOptions {
            deadline: Some(Duration::from_millis(100)),
            expected: Some(Duration::from_millis(expected_ms)),
            delivery,
            ..Default::default()
        };
        let outcome = rt.submit("noop", Vec::new(), options).wait();
        matches!(outcome.result, Err(Failure::Rejected(_)))
    };
    // 80 ms fits 100 ms, and 100 − 10 ms; not 100 − 25 ms.
    assert!(!refused(80, Duration::ZERO));
    assert!(!refused(80, Duration::from_millis(10)));
    assert!(refused(80, Duration::from_millis(25)));
    // At most a quarter of the deadline is set aside: 70 ms still fits 100 − 1 s.
    assert!(!refused(70, Duration::from_secs(1)));
    assert_eq!(
        scheduled_deadline(Duration::from_millis(100), Duration::from_secs(1)),
        Duration::from_millis(75)
    );
}

/// Arrivals refused by the thread that submitted them so far.
fn refused_early(rt: &Runtime) -> u64 {
    rt.group_stats().iter().map(|g| g.refused_early).sum()
}

/// Waits until `rt`'s one group holds `n` queued requests, failing with `what` after 10 s.
fn until_queued(rt: &Runtime, n: usize, what: &str) {
    let start = Instant::now();
    while rt.group_stats()[0].queued < n {
        assert!(start.elapsed() < Duration::from_secs(10), "{what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// On one worker, one `loop` of 3 s runs and two wait, each due 10 s after it arrives (9 s of
/// work, as each is expected); then a fourth, due as late, is submitted. `submit(deadline)`
/// submits one. Returns the fourth's outcome.
fn a_fourth_behind_three(rt: &Runtime, submit: impl Fn(u64) -> luge_runtime::Ticket) -> Outcome {
    let _running = submit(10);
    until_running(rt, "the first loop never started");
    let _waiting = [submit(10), submit(10)];
    until_queued(rt, 2, "the two never queued");
    submit(10).wait_timeout(Duration::from_secs(5)).unwrap()
}

#[test]
fn what_the_dispatcher_would_refuse_is_refused_by_the_thread_that_submits_it() {
    // Refused where it arrives (docs/scheduling.md): once the dispatcher has published a backlog
    // that a newcomer cannot fit behind, the submitting thread refuses it itself. Here on the
    // client's estimate, trusted.
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "loop", LOOP, |c| {
        c.trust_client_estimate = true;
        c.limits.max_execution = Duration::from_secs(60);
    });
    let submit = |deadline: u64| {
        let options = SubmitOptions {
            deadline: Some(Duration::from_secs(deadline)),
            expected: Some(Duration::from_secs(3)),
            ..Default::default()
        };
        rt.submit("loop", Vec::new(), options)
    };
    // The fourth would end 12 s after the first started, past its deadline: refused at once,
    // without reaching the dispatcher.
    let fourth = a_fourth_behind_three(&rt, submit);
    assert_eq!(fourth.result, Err(Failure::Rejected(Rejection::DeadlineUnreachable)));
    assert_eq!(refused_early(&rt), 1);
    // One with time for it goes to the dispatcher, which queues it.
    let _later = submit(60);
    until_queued(&rt, 3, "the later one never queued");
    assert_eq!(refused_early(&rt), 1);
    rt.shutdown_within(Duration::ZERO);
}

#[test]
fn a_thread_counts_what_it_handed_over_since_the_dispatcher_last_published() {
    // A receive thread's batch is judged on one published picture; each request it lets
    // through counts for the next (`Backlog::behind`). Here the dispatcher is kept from
    // publishing between them: arrivals with slack are left to a ticker that runs once a
    // second, and the running loop gives it nothing to report.
    let config = RuntimeConfig {
        workers: 1,
        policy: PolicyKind::SledgeScale,
        notify_interval: Duration::from_secs(1),
        tick: Duration::from_secs(1),
        ..RuntimeConfig::default()
    };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "loop", LOOP, |c| {
        c.trust_client_estimate = true;
        c.limits.max_execution = Duration::from_secs(60);
    });
    let submit = || {
        let options = SubmitOptions {
            deadline: Some(Duration::from_secs(10)),
            expected: Some(Duration::from_secs(3)),
            ..Default::default()
        };
        rt.submit("loop", Vec::new(), options)
    };
    let _running = submit();
    until_running(&rt, "the first loop never started");
    // The picture holds the running loop only: each of the next three fits behind it alone,
    // but the third not behind the two handed over before it (3 + 3 + 3 + 3 s > 10 s).
    let _handed = [submit(), submit()];
    let third = submit();
    assert_eq!(refused_early(&rt), 1, "refused on the picture with the two counted");
    let outcome = third.wait_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(outcome.result, Err(Failure::Rejected(Rejection::DeadlineUnreachable)));
    rt.shutdown_within(Duration::ZERO);
}

#[test]
fn the_submitter_refuses_on_the_dispatchers_published_estimate_and_leaves_demotion_to_it() {
    // No client estimate: the dispatcher publishes the function's (declared, then measured)
    // after judging its first request, and the submitter refuses on it.
    let rt = runtime(1, PolicyKind::SledgeScale);
    let declared = |c: &mut FunctionConfig| {
        c.expected_execution = Some(Duration::from_secs(3));
        c.relative_deadline = Duration::from_secs(10);
        c.limits.max_execution = Duration::from_secs(60);
    };
    register(&rt, "loop", LOOP, declared);
    let submit = |rt: &Runtime, deadline: u64| {
        let options =
            SubmitOptions { deadline: Some(Duration::from_secs(deadline)), ..Default::default() };
        rt.submit("loop", Vec::new(), options)
    };
    let fourth = a_fourth_behind_three(&rt, |d| submit(&rt, d));
    assert_eq!(fourth.result, Err(Failure::Rejected(Rejection::DeadlineUnreachable)));
    assert_eq!(refused_early(&rt), 1);
    rt.shutdown_within(Duration::ZERO);
    // A function that asks for demotion: its fourth is demoted by the dispatcher (Edge-RT §IV-C),
    // not refused by the submitter.
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "loop", LOOP, |c| {
        declared(c);
        c.on_overrun = Overrun::Demote;
    });
    let _first = submit(&rt, 10);
    until_running(&rt, "the first loop never started");
    let _waiting = [submit(&rt, 10), submit(&rt, 10)];
    until_queued(&rt, 2, "the two never queued");
    let _fourth = submit(&rt, 10);
    let start = Instant::now();
    while rt.group_stats()[0].demoted == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "the fourth was not demoted");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(refused_early(&rt), 0);
    rt.shutdown_within(Duration::ZERO);
}

#[test]
fn time_before_submission_counts_against_the_deadline() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "noop", NOOP, |c| c.expected_execution = Some(Duration::from_micros(50)));
    // The runtime's clock starts with it, and a receipt before that reads as its start: let it
    // be older than the receipts below.
    std::thread::sleep(Duration::from_millis(100));
    let ago = |ms| Instant::now().checked_sub(Duration::from_millis(ms)).unwrap();
    // Received 30 ms ago (say, a slow front end): queueing and total count from then.
    let options = SubmitOptions {
        deadline: Some(Duration::from_secs(1)),
        received: Some(ago(30)),
        ..Default::default()
    };
    let outcome = rt.submit("noop", Vec::new(), options).wait();
    assert!(outcome.is_ok(), "{:?}", outcome.result);
    assert!(outcome.timing.queued >= Duration::from_millis(30), "{:?}", outcome.timing);
    assert!(outcome.timing.total >= Duration::from_millis(30), "{:?}", outcome.timing);
    // Received 50 ms ago with a 20 ms deadline: already lost, refused as infeasible (its own
    // execution, from now, overruns the deadline) instead of run.
    let late = SubmitOptions {
        deadline: Some(Duration::from_millis(20)),
        received: Some(ago(50)),
        ..Default::default()
    };
    let outcome = rt.submit("noop", Vec::new(), late).wait();
    assert_eq!(outcome.result, Err(Failure::Rejected(Rejection::DeadlineInfeasible)));
    // A receipt "in the future" is read as the submission.
    let future = SubmitOptions {
        deadline: Some(Duration::from_secs(1)),
        received: Some(Instant::now() + Duration::from_secs(60)),
        ..Default::default()
    };
    let outcome = rt.submit("noop", Vec::new(), future).wait();
    assert!(outcome.is_ok() && outcome.timing.total < Duration::from_secs(1), "{outcome:?}");
}

#[test]
fn explicit_bounds_checks_and_unoptimised_code_still_isolate() {
    let config = RuntimeConfig {
        explicit_bounds_checks: true,
        code_opt: CodeOpt::None,
        ..RuntimeConfig::default()
    };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "echo", ECHO, |_| {});
    register(&rt, "oob", OOB, |_| {});
    register(&rt, "membomb", MEMBOMB, |c| c.limits.max_memory_bytes = 4 << 20);
    assert_eq!(ok(call(&rt, "echo", b"checked")), b"checked");
    assert_eq!(call(&rt, "oob", b"").result, Err(Failure::Trap(TrapKind::MemoryOutOfBounds)));
    assert_eq!(call(&rt, "membomb", b"").result, Err(Failure::MemoryLimit { cap: 4 << 20 }));
}

#[test]
fn a_spinning_runtime_shuts_down() {
    // One spinning thread only (inline layout), for a few ms: the suite keeps spinning servers
    // out of parallel tests, but an idle spinning dispatcher once never saw `shutdown`.
    let config = RuntimeConfig {
        wait: luge_runtime::WaitMode::Spin,
        layout: Layout::Inline,
        ..RuntimeConfig::default()
    };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "noop", NOOP, |_| {});
    assert!(call(&rt, "noop", b"").is_ok());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        rt.shutdown();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("spin-mode shutdown hung");
}

/// `Runtime::health` (behind `/readyz`): ready while it can take requests, not ready while
/// every sandbox slot is in use, and not ready once shut down.
#[test]
fn health_says_when_the_runtime_cannot_take_requests() {
    let config = RuntimeConfig { max_sandboxes: 1, ..RuntimeConfig::default() };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "spin", SPIN, |c| {
        c.relative_deadline = Duration::from_secs(20);
        c.limits.max_execution = Duration::from_secs(20);
    });
    assert_eq!(rt.health(), Health::Ready);
    let long = rt.submit("spin", b"100000000".to_vec(), SubmitOptions::default());
    until_running(&rt, "the request never started");
    assert!(
        matches!(rt.health(), Health::NotReady(why) if why.contains("sandbox slot")),
        "{:?}",
        rt.health()
    );
    assert!(long.wait_timeout(Duration::from_secs(60)).unwrap().is_ok());
    let start = Instant::now();
    while rt.health() != Health::Ready {
        assert!(start.elapsed() < Duration::from_secs(10), "still {:?}", rt.health());
        std::thread::yield_now();
    }
    rt.shutdown();
    assert_eq!(rt.health(), Health::NotReady("shutting down"));
}

#[test]
fn worker_and_group_stats_count_what_ran() {
    let rt = runtime(1, PolicyKind::SledgeScale);
    register(&rt, "spin", SPIN, |c| {
        c.expected_execution = Some(Duration::from_millis(60));
        c.relative_deadline = Duration::from_secs(20);
        c.limits.max_execution = Duration::from_secs(20);
    });
    let spin = |n: &[u8]| rt.submit("spin", n.to_vec(), SubmitOptions::default());
    // ~0.3 s: long enough for the other three to be seen queued behind it.
    let first = spin(b"150000000");
    until_running(&rt, "the first request never started");
    // Three more wait behind it (later deadlines: no preemption) in the one group's queue.
    let rest: Vec<_> = (0..3).map(|_| spin(b"30000000")).collect();
    let start = Instant::now();
    while rt.group_stats()[0].queued < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "queue: {:?}", rt.group_stats());
        std::thread::yield_now();
    }
    let outcomes: Vec<Outcome> = std::iter::once(first)
        .chain(rest)
        .map(|t| t.wait_timeout(Duration::from_secs(60)).unwrap())
        .collect();
    let preemptions: u64 = outcomes.iter().map(|o| u64::from(o.timing.preemptions)).sum();
    let cpu: Duration = outcomes.iter().map(|o| o.timing.executed).sum();
    let [worker] = &rt.worker_stats()[..] else { panic!("one worker: {:?}", rt.worker_stats()) };
    assert_eq!((worker.index, worker.group), (0, 0));
    assert_eq!(worker.segments, 4 + preemptions, "{outcomes:?}");
    // Busy time is the wall time the sandboxes held the worker: at least the CPU they had.
    assert!(worker.busy >= cpu.mul_f64(0.95), "busy {:?}, cpu {cpu:?}", worker.busy);
    let groups = rt.group_stats();
    assert_eq!((groups.len(), &groups[0].workers[..]), (1, &[0][..]));
    let start = Instant::now();
    while rt.group_stats()[0].queued != 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "queue: {:?}", rt.group_stats());
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn periodic_notification_leaves_arrivals_with_slack_to_the_ticker() {
    // Δtimer (Edge-RT §IV-B) of 20 ms, in both layouts: an arrival with more slack than that
    // wakes nobody; the ticker notifies its group within an interval, once for a whole burst.
    for (layout, workers) in [(Layout::Inline, 1), (Layout::Threads, 1)] {
        let config = RuntimeConfig {
            workers,
            layout,
            notify_interval: Duration::from_millis(20),
            // The ticker then runs every 20 ms, not every 1 ms: room to see the node asleep.
            tick: Duration::from_millis(20),
            ..RuntimeConfig::default()
        };
        let rt = Runtime::start(config).unwrap();
        register(&rt, "relaxed", ECHO, |c| c.relative_deadline = Duration::from_secs(10));
        register(&rt, "urgent", ECHO, |c| c.relative_deadline = Duration::from_millis(15));
        let stats = |rt: &Runtime| rt.group_stats()[0].clone();
        // Answered although no submitter woke the node: the ticker did.
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(ok(call(&rt, "relaxed", b"a")), b"a", "{layout:?}");
        assert_eq!(stats(&rt).deferred, 1, "{layout:?}");
        // Less slack than the interval: notified at once, not deferred.
        std::thread::sleep(Duration::from_millis(30));
        let wakeups = stats(&rt).wakeups;
        assert_eq!(ok(call(&rt, "urgent", b"b")), b"b", "{layout:?}");
        let after = stats(&rt);
        assert_eq!(after.deferred, 1, "{layout:?}: an urgent arrival was deferred");
        assert!(after.wakeups > wakeups, "{layout:?}: an urgent arrival woke nobody");
        // A burst of relaxed arrivals costs fewer wake-ups than arrivals.
        std::thread::sleep(Duration::from_millis(30));
        let wakeups = stats(&rt).wakeups;
        let burst: Vec<_> = (0..50)
            .map(|_| rt.submit("relaxed", b"c".to_vec(), SubmitOptions::default()))
            .collect();
        for t in burst {
            assert_eq!(ok(t.wait_timeout(Duration::from_secs(60)).unwrap()), b"c");
        }
        let after = stats(&rt);
        assert_eq!(after.deferred, 51, "{layout:?}");
        // With a dispatcher thread, each request still crosses to the worker and back (wake-ups
        // the arrival's notification does not decide); inline, the burst's are all there is.
        if layout == Layout::Inline {
            let spent = after.wakeups - wakeups;
            assert!(spent < 50, "{spent} wake-ups for 50 deferred arrivals");
        }
        assert!(after.sleeps > 0, "{layout:?}");
        // A deferred arrival the node took while awake costs no wake-up at the period's end:
        // an urgent request wakes the node, a relaxed one lands right behind it, both run, the
        // node falls asleep, and later ticks do not wake it for nothing.
        std::thread::sleep(Duration::from_millis(30));
        let urgent = rt.submit("urgent", b"d".to_vec(), SubmitOptions::default());
        let relaxed = rt.submit("relaxed", b"e".to_vec(), SubmitOptions::default());
        assert_eq!(ok(urgent.wait_timeout(Duration::from_secs(60)).unwrap()), b"d");
        assert_eq!(ok(relaxed.wait_timeout(Duration::from_secs(60)).unwrap()), b"e");
        // The completions' own hand-offs settle (threads layout) well within a period.
        std::thread::sleep(Duration::from_millis(2));
        let idle = stats(&rt).wakeups;
        eprintln!("DEBUG {layout:?} {:?}", stats(&rt));
        std::thread::sleep(Duration::from_millis(50));
        eprintln!("DEBUG after {:?}", stats(&rt));
        assert_eq!(stats(&rt).wakeups, idle, "{layout:?}: woken with nothing to do");
    }
}

#[test]
fn periodic_notification_wakes_a_group_at_most_once_per_interval() {
    // The ticker runs every 1 ms (its `tick`) but notifies once per 30 ms interval: relaxed
    // arrivals 5 ms apart, each finding the node asleep, share those notifications instead of
    // costing one wake-up each.
    let config = RuntimeConfig {
        notify_interval: Duration::from_millis(30),
        tick: Duration::from_millis(1),
        ..RuntimeConfig::default()
    };
    let rt = Runtime::start(config).unwrap();
    register(&rt, "relaxed", ECHO, |c| c.relative_deadline = Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(10));
    let before = rt.group_stats()[0].wakeups;
    let start = Instant::now();
    let tickets: Vec<_> = (0..12)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(5));
            rt.submit("relaxed", b"x".to_vec(), SubmitOptions::default())
        })
        .collect();
    for t in tickets {
        assert_eq!(ok(t.wait_timeout(Duration::from_secs(60)).unwrap()), b"x");
    }
    let elapsed = start.elapsed();
    let spent = rt.group_stats()[0].wakeups - before;
    // One per interval that passed, and one more for the phase: a wake-up per arrival (12) only
    // if the run was stretched past ~300 ms.
    let bound = (elapsed.as_millis() / 30) as u64 + 2;
    assert!(spent <= bound, "{spent} wake-ups for 12 arrivals in {elapsed:?} (bound {bound})");
}
