//! Registration limits at their defaults, through the runtime: a module just beyond a bound is
//! refused before it is compiled, with a message naming the bound; one at the bound registers.
//! (Each bound at a configured value, and the concurrent-compile bound, are unit-tested in
//! `src/registry.rs`.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::time::{Duration, Instant};

use luge_runtime::{Error, FunctionConfig, Runtime, RuntimeConfig, SubmitOptions};

/// A command module with `functions` defined functions (`_start` among them) after the module
/// fields `extra` (imports first).
fn module(functions: usize, extra: &str) -> String {
    let mut wat =
        format!("(module {extra} (memory (export \"memory\") 1) (func (export \"_start\"))");
    wat.push_str(&"(func)".repeat(functions - 1));
    wat.push(')');
    wat
}

fn refusal(rt: &Runtime, wat: &[u8]) -> String {
    match rt.register(FunctionConfig::new("big"), wat) {
        Err(e @ Error::Register { .. }) => e.to_string(),
        other => panic!("expected a registration error, got {other:?}"),
    }
}

#[test]
fn a_module_beyond_a_default_limit_is_refused_before_compiling() {
    let rt = Runtime::start(RuntimeConfig::default()).unwrap();
    let started = Instant::now();
    // 100,000 empty functions: ~550 MiB of resident memory once compiled, refused in a parse.
    assert_eq!(
        refusal(&rt, module(100_000, "").as_bytes()),
        "function `big`: module defines 100000 functions; the limit is 10000 \
         (registration.max_functions)"
    );
    assert_eq!(
        refusal(&rt, module(10_001, "").as_bytes()),
        "function `big`: module defines 10001 functions; the limit is 10000 \
         (registration.max_functions)"
    );
    let imports = r#"(import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))"#;
    assert!(
        refusal(&rt, module(1, &imports.repeat(1001)).as_bytes())
            .ends_with("module has 1001 imports; the limit is 1000 (registration.max_imports)")
    );
    assert!(
        refusal(&rt, module(1, &r#"(data (i32.const 0) "x")"#.repeat(10_001)).as_bytes())
            .ends_with(
                "module has 10001 data segments; the limit is 10000 \
                 (registration.max_data_segments)"
            )
    );
    assert!(refusal(&rt, module(1, &"(elem declare func 0)".repeat(10_001)).as_bytes()).ends_with(
        "module has 10001 element segments; the limit is 10000 \
             (registration.max_element_segments)"
    ));
    assert!(
        refusal(&rt, module(1, &"(global i32 (i32.const 0))".repeat(10_001)).as_bytes())
            .ends_with("module has 10001 globals; the limit is 10000 (registration.max_globals)")
    );
    assert!(
        refusal(&rt, module(1, &"(table 0 funcref)".repeat(2)).as_bytes())
            .ends_with("module has 2 tables; the limit is 1 (registration.max_tables)")
    );
    let huge = vec![b' '; (16 << 20) + 1];
    assert!(refusal(&rt, &huge).ends_with(
        "module is 16777217 bytes; the limit is 16777216 (registration.max_module_bytes)"
    ));
    // Refused by counting, not by compiling (which takes seconds for 100,000 functions).
    assert!(started.elapsed() < Duration::from_secs(20), "took {:?}", started.elapsed());
    assert!(rt.functions().is_empty());
}

#[test]
fn a_module_at_the_default_limits_registers_and_runs() {
    let rt = Runtime::start(RuntimeConfig::default()).unwrap();
    let imports = r#"(import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))"#;
    let wat = module(
        10_000,
        &[
            imports.repeat(10),
            r#"(data (i32.const 0) "x")"#.repeat(10_000),
            "(elem declare func 0)".repeat(10_000),
            "(global i32 (i32.const 0))".repeat(10_000),
        ]
        .concat(),
    );
    let f = rt.register(FunctionConfig::new("at-limits"), wat.as_bytes()).unwrap();
    let outcome = rt
        .submit("at-limits", Vec::new(), SubmitOptions::default())
        .wait_timeout(Duration::from_secs(60))
        .unwrap();
    assert_eq!(outcome.result, Ok(Vec::new()));
    drop(f);
    rt.unregister("at-limits").unwrap();
}
