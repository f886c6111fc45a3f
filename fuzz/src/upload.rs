//! The upload target: what `PUT /admin/functions/<name>` hands the runtime once the body is
//! read — [`Runtime::register`] on untrusted bytes (Wasm binary or WAT text): the size and
//! section-count limits read with `wasmparser` before compiling, Wasmtime's validation and
//! compile, the import, export and memory checks, then [`Runtime::unregister`].
//!
//! The first input byte chooses the function's memory cap, the rest is the module. The
//! registration limits are tighter than the defaults (the same checks, but a module within them
//! compiles in milliseconds, so a run stays short).
//!
//! A refusal must be a typed [`Error::Register`] naming the function, an accepted module must
//! be listed under its name until unregistered, with a SHA-256 hex hash. The runtime caches its
//! AoT artifacts on disk as `luge serve` does by default, and an accepted module is registered
//! under a second name too: that one must come from the cache (Wasmtime's `deserialize` of the
//! artifact the first compiled, behind the cache's own checks) with the same hash.

use std::sync::OnceLock;
use std::time::Duration;

use luge_runtime::{
    Error, FunctionConfig, RegisterError, RegistrationLimits, Runtime, RuntimeConfig,
};

/// The bounds the fuzzed runtime registers under.
pub const REGISTRATION: RegistrationLimits = RegistrationLimits {
    max_module_bytes: 64 << 10,
    max_functions: 200,
    max_function_bytes: 16 << 10,
    max_code_bytes: 32 << 10,
    max_imports: 100,
    max_data_segments: 100,
    max_element_segments: 100,
    max_tables: 10,
    max_globals: 200,
    max_concurrent_compiles: 2,
    compile_wait: Duration::from_secs(30),
};

/// The runtime's own memory bound.
const MAX_MEMORY: u64 = 16 << 20;

/// The artifact cache's bound: small, so that a long run's cache stays small too.
const CACHE_BYTES: u64 = 64 << 20;

fn runtime() -> Option<&'static Runtime> {
    static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            // One directory per process, left behind (the runtime creates it owner-only;
            // `CACHE_BYTES` at most).
            let cache =
                std::env::temp_dir().join(format!("luge-fuzz-upload-{}", std::process::id()));
            let config = RuntimeConfig {
                max_sandboxes: 2,
                max_memory_bytes: MAX_MEMORY,
                registration: REGISTRATION,
                cache_dir: Some(cache),
                cache_max_bytes: CACHE_BYTES,
                ..RuntimeConfig::default()
            };
            Runtime::start(config).ok()
        })
        .as_ref()
}

/// Registers `data[1..]` with a memory cap chosen by `data[0]`, checks the outcome, and
/// unregisters what was accepted.
pub fn run(data: &[u8]) {
    let Some(runtime) = runtime() else { panic!("the runtime does not start") };
    let Some((&choice, module)) = data.split_first() else { return };
    // 64 KiB … 16 MiB, and once above the runtime's bound (a refusal before compiling).
    let cap = match choice % 4 {
        0 => 64 << 10,
        1 => 1 << 20,
        2 => MAX_MEMORY,
        _ => MAX_MEMORY + 1,
    };
    // One name per thread: the replay test runs on several threads at once.
    let name = format!("upload-{:?}", std::thread::current().id()).replace(['(', ')'], "");
    let mut config = FunctionConfig::new(&name);
    config.limits.max_memory_bytes = cap;
    match runtime.register(config.clone(), module) {
        Ok(function) => {
            assert!(cap <= MAX_MEMORY, "a cap above the runtime's bound was accepted");
            assert!(module.len() as u64 <= REGISTRATION.max_module_bytes, "module over the limit");
            let hash = &function.module_hash;
            assert!(hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()), "hash");
            assert!(runtime.function(&name).is_some(), "registered but not listed");
            // The same module under a second name, while the first holds it: from the artifact
            // the first registration cached (unregistering deletes a module's artifact).
            let twin = FunctionConfig { name: format!("{name}-twin"), ..config };
            let again = match runtime.register(twin, module) {
                Ok(again) => again,
                Err(e) => panic!("accepted once, refused from the cache: {e}"),
            };
            assert!(again.from_cache, "the second registration compiled again");
            assert_eq!(&again.module_hash, hash, "the cached artifact's hash");
            assert!(runtime.unregister(&format!("{name}-twin")).is_ok(), "cannot unregister");
            assert!(runtime.unregister(&name).is_ok(), "cannot unregister");
            assert!(runtime.function(&name).is_none(), "listed after unregister");
        }
        Err(Error::Register { name: refused, reason }) => {
            assert_eq!(refused, name, "the refusal names another function");
            assert!(!reason.to_string().is_empty());
            if let RegisterError::OverLimit { had, max, .. } = reason {
                assert!(had > max, "refused within the limit: {had} ≤ {max}");
            }
        }
        Err(other) => panic!("registration failed with an untyped error: {other}"),
    }
}
