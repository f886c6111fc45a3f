//! Chains end to end (Edge-RT §III, §IV-A): real sandboxes per stage, one deadline per request,
//! stage k's stdout as stage k+1's stdin. Sleep mode, unpinned threads.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use luge_runtime::{
    ChainConfig, Error, Failure, FunctionConfig, MAX_STAGES, Outcome, RegisterError, Rejection,
    Runtime, RuntimeConfig, SubmitOptions,
};

const ECHO: &str = include_str!("../../../functions/builtin/echo.wat");
const SPIN: &str = include_str!("../../../functions/builtin/spin.wat");
const EXIT3: &str = include_str!("../../../functions/test/exit3.wat");

/// spin(k) output for k = 1000 (`functions/builtin/spin.wat`).
const SPIN_1000: &[u8] = b"432f32487609ff83\n";
/// spin iterations that run ~50–100 ms.
const SPIN_LONG: &[u8] = b"30000000";

fn runtime() -> Arc<Runtime> {
    let rt = Runtime::start(RuntimeConfig { workers: 1, ..RuntimeConfig::default() }).unwrap();
    let rt = Arc::new(rt);
    for (name, wat) in [("echo", ECHO), ("spin", SPIN), ("exit3", EXIT3)] {
        let mut config = FunctionConfig::new(name);
        config.relative_deadline = Duration::from_secs(10);
        config.limits.max_execution = Duration::from_secs(10);
        rt.register(config, wat.as_bytes()).unwrap();
    }
    rt
}

fn chain(name: &str, stages: &[&str], deadline: Duration) -> ChainConfig {
    ChainConfig {
        name: name.into(),
        stages: stages.iter().map(|s| (*s).to_owned()).collect(),
        relative_deadline: deadline,
    }
}

fn call_chain(rt: &Arc<Runtime>, name: &str, payload: &[u8]) -> Outcome {
    call_chain_with(rt, name, payload, SubmitOptions::default())
}

fn call_chain_with(
    rt: &Arc<Runtime>,
    name: &str,
    payload: &[u8],
    options: SubmitOptions,
) -> Outcome {
    let chain = rt.chain(name).unwrap();
    let (tx, rx) = mpsc::channel();
    rt.submit_chain(&chain, payload.to_vec(), options, move |o| tx.send(o).unwrap());
    rx.recv_timeout(Duration::from_secs(60)).unwrap()
}

/// Registers `name`, an echo declared to need `expected`.
fn declared_echo(rt: &Runtime, name: &str, expected: Duration) {
    let mut config = FunctionConfig::new(name);
    config.expected_execution = Some(expected);
    rt.register(config, ECHO.as_bytes()).unwrap();
}

fn call(rt: &Runtime, name: &str, payload: &[u8]) -> Vec<u8> {
    let outcome = rt
        .submit(name, payload.to_vec(), SubmitOptions::default())
        .wait_timeout(Duration::from_secs(60))
        .unwrap();
    outcome.result.unwrap()
}

#[test]
fn a_chain_answers_what_its_stages_give_by_hand() {
    let rt = runtime();
    rt.register_chain(chain("c", &["echo", "spin", "echo"], Duration::from_secs(10))).unwrap();
    let by_hand = call(&rt, "echo", &call(&rt, "spin", &call(&rt, "echo", b"1000")));
    assert_eq!(by_hand, SPIN_1000);
    let outcome = call_chain(&rt, "c", b"1000");
    assert_eq!(outcome.result.as_deref(), Ok(SPIN_1000));
    let names: Vec<_> = outcome.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["echo", "spin", "echo"]);
    // One request id per stage, the chain answering under the first; the chain's time covers
    // every stage's.
    assert_eq!(outcome.request_id, outcome.stages[0].request_id);
    let ids: std::collections::HashSet<_> = outcome.stages.iter().map(|s| s.request_id).collect();
    assert_eq!(ids.len(), 3);
    let executed: Duration = outcome.stages.iter().map(|s| s.timing.executed).sum();
    assert_eq!(outcome.timing.executed, executed);
    assert!(outcome.timing.total >= outcome.stages.iter().map(|s| s.timing.total).sum());
}

/// A library caller's deadline past what an `Instant` holds is the farthest one, not a panic,
/// and stages whose declared work exceeds the chain's deadline are refused when it is
/// registered.
#[test]
fn a_chain_takes_deadlines_and_estimates_of_any_size() {
    let rt = Runtime::start(RuntimeConfig { workers: 1, ..RuntimeConfig::default() }).unwrap();
    let rt = Arc::new(rt);
    for name in ["huge2", "huge3"] {
        let mut config = FunctionConfig::new(name);
        // The longest a function may declare (an hour, `FunctionConfig::check`).
        config.expected_execution = Some(Duration::from_secs(3600));
        config.on_overrun = luge_runtime::Overrun::Demote;
        rt.register(config, ECHO.as_bytes()).unwrap();
    }
    rt.register(FunctionConfig::new("echo2"), ECHO.as_bytes()).unwrap();
    let two_hours = Duration::from_secs(7200);
    match rt.register_chain(chain("far", &["echo2", "huge2", "huge3"], two_hours)) {
        Err(Error::Register { reason: RegisterError::Chain(why), .. }) => {
            assert!(why.contains("not below its deadline"), "{why}");
        }
        other => panic!("registered a chain whose declared work exceeds its deadline: {other:?}"),
    }
    rt.register_chain(chain("far", &["echo2", "echo2"], Duration::from_secs(10))).unwrap();
    let chain = rt.chain("far").unwrap();
    let (tx, rx) = mpsc::channel();
    let options = SubmitOptions { deadline: Some(Duration::MAX), ..SubmitOptions::default() };
    rt.submit_chain(&chain, b"x".to_vec(), options, move |o| tx.send(o).unwrap());
    let outcome = rx.recv_timeout(Duration::from_secs(60)).unwrap();
    assert_eq!(outcome.result.as_deref(), Ok(&b"x"[..]));
}

#[test]
fn a_failing_stage_ends_the_chain_with_its_own_failure_and_name() {
    let rt = runtime();
    rt.register_chain(chain("c", &["echo", "exit3", "echo"], Duration::from_secs(10))).unwrap();
    let outcome = call_chain(&rt, "c", b"secret");
    assert_eq!(outcome.result, Err(Failure::Exit(3)), "no partial output");
    let names: Vec<_> = outcome.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["echo", "exit3"], "the last stage named is the one that failed");
}

#[test]
fn admission_sees_the_work_of_the_stages_still_to_run() {
    let rt = runtime();
    // The second stage is declared to need 50 ms: a chain of 20 ms could never run one
    // request, and is refused when it is registered…
    declared_echo(&rt, "slow-echo", Duration::from_millis(50));
    match rt.register_chain(chain("c", &["echo", "slow-echo"], Duration::from_millis(20))) {
        Err(Error::Register { reason: RegisterError::Chain(why), .. }) => {
            assert!(why.contains("declared executions add up to 50ms"), "{why}");
        }
        other => panic!("a chain that can never be admitted was registered: {other:?}"),
    }
    // …and a request of a 60 ms chain that asks for 20 ms is refused at its first stage before
    // anything runs.
    let c = rt.register_chain(chain("c", &["echo", "slow-echo"], Duration::from_millis(60)));
    let c = c.unwrap();
    assert_eq!(c.work_after(0), Duration::from_millis(50));
    assert_eq!(c.work_after(1), Duration::ZERO, "the last stage inherits the chain's deadline");
    let tight =
        SubmitOptions { deadline: Some(Duration::from_millis(20)), ..SubmitOptions::default() };
    let outcome = call_chain_with(&rt, "c", b"x", tight);
    assert_eq!(outcome.result, Err(Failure::Rejected(Rejection::DeadlineInfeasible)));
    assert_eq!(outcome.stages.len(), 1);
    assert_eq!(outcome.timing.executed, Duration::ZERO, "nothing ran");
    // With room for both, it runs.
    rt.register_chain(chain("roomy", &["echo", "slow-echo"], Duration::from_secs(1))).unwrap();
    assert_eq!(call_chain(&rt, "roomy", b"x").result.as_deref(), Ok(&b"x"[..]));
}

/// The front end's delivery is set aside from a chain's deadline as from a function's: a chain
/// whose stages fit its deadline but not its deadline less the delivery is refused.
#[test]
fn a_chain_sets_aside_the_front_ends_delivery() {
    let rt = runtime();
    declared_echo(&rt, "slow-echo", Duration::from_millis(50));
    declared_echo(&rt, "tight-echo", Duration::from_millis(70));
    rt.register_chain(chain("c", &["echo", "slow-echo"], Duration::from_millis(80))).unwrap();
    rt.register_chain(chain("t", &["echo", "tight-echo"], Duration::from_millis(80))).unwrap();
    let call = |name, delivery| {
        let options = SubmitOptions { delivery, ..SubmitOptions::default() };
        call_chain_with(&rt, name, b"x", options)
    };
    let ms = Duration::from_millis;
    assert_eq!(call("c", Duration::ZERO).result.as_deref(), Ok(&b"x"[..]));
    // 80 ms less 20 ms (a quarter, the most set aside) leaves 60 ms: still room for 50 ms.
    assert_eq!(call("c", ms(20)).result.as_deref(), Ok(&b"x"[..]));
    // 35 ms asked, 20 ms set aside (a quarter at most): the same.
    assert_eq!(call("c", ms(35)).result.as_deref(), Ok(&b"x"[..]));
    // 70 ms of later work does not fit 60 ms: refused at the first stage, nothing ran.
    let outcome = call("t", ms(20));
    assert_eq!(outcome.result, Err(Failure::Rejected(Rejection::DeadlineInfeasible)));
    assert_eq!(outcome.timing.executed, Duration::ZERO);
    assert_eq!(call("t", Duration::ZERO).result.as_deref(), Ok(&b"x"[..]), "it fits without");
}

#[test]
fn a_deadline_passed_mid_chain_is_missed_naming_the_stage() {
    let rt = runtime();
    // The first stage alone outlasts the chain's 20 ms (nothing kills it: it is within its
    // execution budget); the second finds no time left.
    rt.register_chain(chain("c", &["spin", "echo"], Duration::from_millis(20))).unwrap();
    let outcome = call_chain(&rt, "c", SPIN_LONG);
    assert_eq!(outcome.result, Err(Failure::DeadlineMissed));
    let names: Vec<_> = outcome.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["spin", "echo"]);
    assert!(outcome.stages[0].timing.executed > Duration::ZERO, "the first stage ran");
    assert!(outcome.timing.total >= Duration::from_millis(20));
}

#[test]
fn chains_share_the_functions_names_and_ids() {
    let rt = runtime();
    let c = rt.register_chain(chain("c", &["echo"], Duration::from_secs(1))).unwrap();
    assert_eq!(rt.chain_by_id(c.id.0).unwrap().config.name, "c");
    assert!(rt.functions().iter().all(|f| f.id != c.id), "an id of its own");
    let duplicate =
        |e: Error| matches!(e, Error::Register { reason: RegisterError::Duplicate, .. });
    // A chain cannot take a function's name, nor a function a chain's, nor two chains one.
    assert!(duplicate(
        rt.register_chain(chain("echo", &["echo"], Duration::from_secs(1))).unwrap_err()
    ));
    assert!(duplicate(rt.register(FunctionConfig::new("c"), ECHO.as_bytes()).unwrap_err()));
    assert!(duplicate(
        rt.register_chain(chain("c", &["echo"], Duration::from_secs(1))).unwrap_err()
    ));
    // Stages must exist and be few enough.
    let err = rt.register_chain(chain("d", &["echo", "nope"], Duration::from_secs(1)));
    assert!(err.unwrap_err().to_string().contains("no function named `nope`"));
    let many = vec!["echo"; MAX_STAGES + 1];
    assert!(rt.register_chain(chain("d", &many, Duration::from_secs(1))).is_err());
    // Removed, its name is free again.
    rt.unregister_chain("c").unwrap();
    assert!(rt.chain("c").is_none() && rt.chain_by_id(c.id.0).is_none());
    rt.register(FunctionConfig::new("c"), ECHO.as_bytes()).unwrap();
}

#[test]
fn a_chain_submitted_while_shutting_down_is_answered() {
    let rt = runtime();
    rt.register_chain(chain("c", &["echo", "echo"], Duration::from_secs(1))).unwrap();
    let c = rt.chain("c").unwrap();
    rt.shutdown();
    let (tx, rx) = mpsc::channel();
    rt.submit_chain(&c, b"x".to_vec(), SubmitOptions::default(), move |o| tx.send(o).unwrap());
    let outcome = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(outcome.result, Err(Failure::Rejected(Rejection::ShuttingDown)));
}
