//! The WASI target: Luge's preview1 layer (`luge-runtime`'s `wasi.rs`) called with guest-chosen
//! pointers, lengths, iovec arrays and descriptors.
//!
//! A fixed guest, `guest/wasi_driver.wat`, is registered once per process; it interprets the
//! request body as a program of WASI calls with arguments taken from the body, plus guest
//! memory writes (to lay out iovecs), `memory.grow` and traps. Each input is one request, run
//! by [`Runtime::run_here`] in a fresh sandbox on this thread — the future a worker polls — so
//! a run costs one instantiation, not one compile. (Generating a module per input would spend
//! nearly all of each run in Cranelift; module validation is the `upload` target's concern.)
//!
//! Every outcome must be a typed result: output within the cap, or a guest failure (trap, exit
//! status, memory or output cap, budget). `Failure::Internal`, a host panic, or a sandbox left
//! alive after its request are findings.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use luge_runtime::{Failure, Function, FunctionConfig, Limits, Runtime, RuntimeConfig};

/// The guest (WAT; the runtime compiles it).
pub const DRIVER: &str = include_str!("../guest/wasi_driver.wat");

/// The driver's limits: small, so a run stays cheap (the sandbox's checks are the same).
pub const LIMITS: Limits = Limits {
    max_execution: Duration::from_millis(50),
    max_memory_bytes: 1 << 20,
    max_request_bytes: 1 << 20,
    max_output_bytes: 4 << 10,
};

struct Driver {
    runtime: Runtime,
    function: Arc<Function>,
}

/// The runtime and the registered driver, made on first use in each process (so after AFL++'s
/// fork: threads do not survive a fork).
fn driver() -> Option<&'static Driver> {
    static DRIVER_FN: OnceLock<Option<Driver>> = OnceLock::new();
    DRIVER_FN
        .get_or_init(|| {
            let config = RuntimeConfig { max_sandboxes: 8, ..RuntimeConfig::default() };
            let runtime = Runtime::start(config).ok()?;
            let mut function = FunctionConfig::new("wasi-driver");
            function.limits = LIMITS;
            let function = runtime.register(function, DRIVER.as_bytes()).ok()?;
            Some(Driver { runtime, function })
        })
        .as_ref()
}

/// Runs `data` as one request of the driver and checks the outcome.
pub fn run(data: &[u8]) {
    // Every outcome the guest can cause is acceptable; `outcome` checks which.
    let _ = outcome(data);
}

/// [`run`], returning the request's result (for the tests).
pub fn outcome(data: &[u8]) -> Result<Vec<u8>, Failure> {
    let Some(d) = driver() else { panic!("the WASI driver does not register") };
    let result = d.runtime.run_here(&d.function, data.to_vec());
    match &result {
        Ok(out) => assert!(out.len() as u64 <= LIMITS.max_output_bytes, "output over the cap"),
        Err(
            Failure::Trap(_)
            | Failure::Exit(_)
            | Failure::MemoryLimit { .. }
            | Failure::OutputTooLarge { .. }
            | Failure::Killed { .. },
        ) => {}
        Err(other) => panic!("untyped or impossible outcome of a guest: {other}"),
    }
    assert_eq!(d.runtime.live_sandboxes(), 0, "a sandbox outlived its request");
    result
}
