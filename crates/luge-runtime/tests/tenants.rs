//! Tenant limits end to end: a tenant over a limit is refused at once with the limit named,
//! gets its capacity back when its requests are answered, and other tenants never see its
//! refusals.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::time::Duration;

use luge_runtime::{
    Error, Failure, FunctionConfig, Outcome, RegisterError, Rejection, Runtime, RuntimeConfig,
    SubmitOptions, TenantConfig, TenantLimit,
};

const NOOP: &str = include_str!("../../../functions/builtin/noop.wat");
const LOOP: &str = include_str!("../../../functions/test/loop.wat");

fn register(rt: &Runtime, name: &str, wat: &str, tenant: u32) -> Result<(), Error> {
    let mut config = FunctionConfig::new(name);
    config.tenant = tenant;
    // The loop is killed after 300 ms of execution; its deadline leaves room for that.
    config.limits.max_execution = Duration::from_millis(300);
    config.relative_deadline = Duration::from_secs(10);
    rt.register(config, wat.as_bytes()).map(|_| ())
}

fn wait(ticket: luge_runtime::Ticket) -> Outcome {
    ticket.wait_timeout(Duration::from_secs(60)).unwrap()
}

fn call(rt: &Runtime, name: &str) -> Outcome {
    wait(rt.submit(name, Vec::new(), SubmitOptions::default()))
}

fn limited(o: &Outcome) -> Option<TenantLimit> {
    match &o.result {
        Err(Failure::Rejected(Rejection::TenantLimit(l))) => Some(*l),
        _ => None,
    }
}

#[test]
fn a_tenant_over_its_limits_is_refused_and_others_are_not() {
    let tenants = vec![
        TenantConfig {
            max_concurrent: Some(1),
            max_functions: Some(2),
            ..TenantConfig::new(1, "busy")
        },
        TenantConfig { rate_per_sec: Some(0.01), burst: Some(1), ..TenantConfig::new(3, "rare") },
    ];
    let rt =
        Runtime::start(RuntimeConfig { workers: 2, tenants, ..RuntimeConfig::default() }).unwrap();
    register(&rt, "loop", LOOP, 1).unwrap();
    register(&rt, "noop-1", NOOP, 1).unwrap();
    register(&rt, "noop-2", NOOP, 0).unwrap();
    register(&rt, "noop-3", NOOP, 3).unwrap();
    // Tenants are declared: a function of one that is not (a mistyped id) would escape every
    // limit, so it is refused.
    match register(&rt, "stray", NOOP, 2) {
        Err(Error::Register { reason: RegisterError::UnknownTenant(2), .. }) => {}
        other => panic!("a function of undeclared tenant 2 was not refused: {other:?}"),
    }
    assert!(rt.function("stray").is_none());
    // Registered functions: tenant 1 has its two.
    match register(&rt, "third", NOOP, 1) {
        Err(Error::Register {
            reason: RegisterError::TenantFunctions { tenant: 1, max: 2, .. },
            ..
        }) => {}
        other => panic!("a third function of tenant 1 was not refused: {other:?}"),
    }
    assert!(rt.function("third").is_none());

    // Concurrency: while the loop runs, tenant 1's next request is refused at once…
    let running = rt.submit("loop", Vec::new(), SubmitOptions::default());
    let refused = call(&rt, "noop-1");
    assert_eq!(limited(&refused), Some(TenantLimit::Concurrency), "{refused:?}");
    let reason = refused.result.as_ref().unwrap_err().to_string();
    assert!(reason.contains("concurrent"), "{reason}");
    // …while tenant 0, the operator's own and without limits, is served.
    assert_eq!(call(&rt, "noop-2").result, Ok(Vec::new()));
    // The loop ends (killed at its budget) and gives its slot back.
    assert!(matches!(wait(running).result, Err(Failure::Killed { .. })));
    assert_eq!(call(&rt, "noop-1").result, Ok(Vec::new()));

    // Rate: one request per 100 s, a burst of one.
    assert_eq!(call(&rt, "noop-3").result, Ok(Vec::new()));
    assert_eq!(limited(&call(&rt, "noop-3")), Some(TenantLimit::Rate));

    let stats = rt.tenant_stats();
    let busy = stats.iter().find(|s| s.id == 1).unwrap();
    assert_eq!(busy.name, "busy");
    assert_eq!((busy.admitted, busy.in_flight), (2, 0));
    assert_eq!(busy.limited[TenantLimit::Concurrency as usize], 1);
    assert!(busy.cpu_ns > 0, "the loop's CPU is charged to its tenant");
    let rare = stats.iter().find(|s| s.id == 3).unwrap();
    assert_eq!((rare.admitted, rare.limited[TenantLimit::Rate as usize]), (1, 1));
    let ids: Vec<u32> = stats.iter().map(|s| s.id).collect();
    assert_eq!(ids, [1, 3], "only declared tenants are counted");
}

#[test]
fn bad_tenant_limits_stop_the_runtime_from_starting() {
    let tenants = vec![TenantConfig { cpu_share: Some(0.0), ..TenantConfig::new(1, "zero") }];
    match Runtime::start(RuntimeConfig { tenants, ..RuntimeConfig::default() }) {
        Err(Error::Config(reason)) => assert!(reason.contains("cpu_share"), "{reason}"),
        other => panic!("started with a CPU share of 0: {other:?}"),
    }
}

/// A function no request of which could ever be admitted is refused when it is registered: a
/// memory cap above its tenant's `max_memory_bytes`, or a declared execution not below its
/// deadline (unless it demotes).
#[test]
fn a_function_that_could_never_be_admitted_is_refused() {
    let small = TenantConfig { max_memory_bytes: Some(1 << 20), ..TenantConfig::new(1, "small") };
    let rt =
        Runtime::start(RuntimeConfig { tenants: vec![small], ..RuntimeConfig::default() }).unwrap();
    let refused = |config: FunctionConfig| match rt.register(config, NOOP.as_bytes()) {
        Err(Error::Register { reason: RegisterError::Limit(why), .. }) => why,
        other => panic!("registered: {other:?}"),
    };
    let mut big = FunctionConfig::new("big");
    big.tenant = 1;
    assert!(refused(big.clone()).contains("tenant 1 (`small`)'s max_memory_bytes"));
    big.limits.max_memory_bytes = 1 << 20;
    rt.register(big, NOOP.as_bytes()).unwrap();

    let mut slow = FunctionConfig::new("slow");
    slow.expected_execution = Some(Duration::from_millis(60));
    slow.relative_deadline = Duration::from_millis(2);
    assert!(refused(slow.clone()).contains("not below the relative deadline"));
    slow.on_overrun = luge_runtime::Overrun::Demote;
    rt.register(slow, NOOP.as_bytes()).unwrap();

    // Declared uLL but estimated above the lane's slice (100 µs): each request would be
    // preempted at the slice and lose its place.
    let mut long_ull = FunctionConfig::new("long-ull");
    long_ull.ull = true;
    long_ull.expected_execution = Some(Duration::from_millis(5));
    assert!(refused(long_ull.clone()).contains("above the lane's slice"));
    long_ull.expected_execution = Some(Duration::from_micros(5));
    rt.register(long_ull, NOOP.as_bytes()).unwrap();
    // A value the admin API would refuse is refused here too (`FunctionConfig::check`).
    let mut silent = FunctionConfig::new("silent");
    silent.limits.max_output_bytes = 0;
    assert!(refused(silent).contains("max_output_bytes must be at least 1"));
}

#[test]
fn a_tenant_memory_bound_of_zero_is_refused() {
    let tenants = vec![TenantConfig { max_memory_bytes: Some(0), ..TenantConfig::new(1, "none") }];
    match Runtime::start(RuntimeConfig { tenants, ..RuntimeConfig::default() }) {
        Err(Error::Config(reason)) => assert!(reason.contains("max_memory_bytes"), "{reason}"),
        other => panic!("started with a memory bound of 0: {other:?}"),
    }
}

/// Registrations of one tenant compiling side by side cannot all pass `max_functions`: the
/// count is taken again when each is inserted, so exactly the limit's worth succeed — and the
/// others, refused after compiling, leave no artifact in the cache.
#[test]
fn concurrent_registrations_keep_to_max_functions() {
    let tenants = vec![TenantConfig { max_functions: Some(1), ..TenantConfig::new(5, "one") }];
    let cache = std::env::temp_dir().join(format!("luge-tenant-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let config = RuntimeConfig { tenants, cache_dir: Some(cache.clone()), ..Default::default() };
    let rt = Runtime::start(config).unwrap();
    let rt = std::sync::Arc::new(rt);
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(4));
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let (rt, barrier) = (std::sync::Arc::clone(&rt), std::sync::Arc::clone(&barrier));
            std::thread::spawn(move || {
                // Distinct modules (a different export each), so none comes from another's cache.
                let wat = format!(
                    "(module (memory (export \"memory\") 1) (func (export \"_start\")) \
                     (func (export \"f{i}\")))"
                );
                barrier.wait();
                register(&rt, &format!("f{i}"), &wat, 5)
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 1, "{results:?}");
    for r in results.iter().filter(|r| r.is_err()) {
        assert!(
            matches!(r, Err(Error::Register { reason: RegisterError::TenantFunctions { .. }, .. })),
            "{r:?}"
        );
    }
    let artifacts = std::fs::read_dir(&cache)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "cwasm"))
        .count();
    assert_eq!(artifacts, 1, "the refused registrations' artifacts stayed");
    let _ = std::fs::remove_dir_all(&cache);
}
