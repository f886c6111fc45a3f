//! Compiling a module and removing its function give the memory back to the OS: Cranelift's
//! working memory is freed after a compile but stays resident in the allocator's arenas unless
//! the registry trims them (before it did, three uploads of a 100,000-function module kept
//! 1.5 GiB resident after their functions were removed). A test binary of its own, so no other
//! test's allocations move this process's resident size.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use luge_runtime::{FunctionConfig, Runtime, RuntimeConfig};

/// `VmRSS` or `VmHWM` of this process, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn compiling_and_removing_a_function_returns_the_memory() {
    let rt = Runtime::start(RuntimeConfig::default()).unwrap();
    let mut wat = String::from("(module (memory (export \"memory\") 1) (func (export \"_start\"))");
    wat.push_str(&"(func (result i32) i32.const 1 i32.const 2 i32.add)".repeat(4_999));
    wat.push(')');
    let baseline = status_kib("VmRSS:");
    // On a thread of its own, as the admin API compiles on a blocking thread: its allocations
    // go to an arena of their own, which glibc does not shrink by itself.
    std::thread::scope(|s| {
        s.spawn(|| {
            rt.register(FunctionConfig::new("big"), wat.as_bytes()).unwrap();
            rt.unregister("big").unwrap();
        });
    });
    let (peak, after) = (status_kib("VmHWM:"), status_kib("VmRSS:"));
    let (compiled, kept) = (peak.saturating_sub(baseline), after.saturating_sub(baseline));
    assert!(compiled > 8 << 10, "compiling 5,000 functions took only {compiled} KiB");
    assert!(
        kept < compiled / 3,
        "{kept} KiB of the {compiled} KiB compiling took stayed resident (baseline {baseline} KiB)"
    );
}
