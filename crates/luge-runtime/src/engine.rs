//! The Wasmtime engine Luge runs every sandbox on: pooling allocator, copy-on-write memory
//! images, epoch interruption, fibers for async execution.

use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, OptLevel, PoolingAllocationConfig,
};

use crate::config::{CodeOpt, RuntimeConfig};
use crate::error::Error;

/// Linear memory kept resident and reset in place between sandboxes of a slot, instead of being
/// unmapped (SledgeScale §3.4 reuses sandbox memory and zeroes what was used; small functions
/// touch well under this). Without `PAGEMAP_SCAN` Wasmtime zeroes all of it that is accessible,
/// touched or not (64 KiB for a one-page no-op, 320 KiB for a C function's five initial pages,
/// every request); with it, only the pages the sandbox dirtied
/// ([`RuntimeConfig::pagemap_scan`]).
const KEEP_RESIDENT: usize = 1 << 20;

/// Host headroom on each fiber stack beyond the Wasm stack (host calls and Wasmtime's own
/// frames run there too).
const HOST_STACK_HEADROOM: usize = 256 << 10;

/// Builds the engine for `config`.
pub(crate) fn build(config: &RuntimeConfig) -> Result<Engine, Error> {
    let mut pool = PoolingAllocationConfig::new();
    let slots = config.max_sandboxes.max(1);
    pool.total_core_instances(slots)
        .total_memories(slots)
        .total_tables(slots)
        .total_stacks(slots)
        .total_component_instances(0)
        .max_memories_per_module(1)
        .max_tables_per_module(1)
        .max_memory_size(config.max_memory_bytes as usize)
        .linear_memory_keep_resident(KEEP_RESIDENT)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(64 << 10)
        .max_unused_warm_slots(slots)
        .pagemap_scan(if config.pagemap_scan { Enabled::Auto } else { Enabled::No });
    let mut wasm = Config::new();
    wasm.allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .memory_init_cow(config.memory_init_cow)
        .epoch_interruption(config.epoch_interruption)
        .max_wasm_stack(config.wasm_stack_bytes)
        .async_stack_size(config.wasm_stack_bytes + HOST_STACK_HEADROOM)
        .cranelift_opt_level(match config.code_opt {
            CodeOpt::None => OptLevel::None,
            CodeOpt::Speed => OptLevel::Speed,
            CodeOpt::SpeedAndSize => OptLevel::SpeedAndSize,
        });
    if config.explicit_bounds_checks {
        // Reserve only what a memory may use and no guard region: Cranelift then emits an
        // explicit bounds check on every access.
        wasm.memory_reservation(config.max_memory_bytes).memory_guard_size(0);
    }
    Engine::new(&wasm).map_err(|e| Error::Engine(format!("{e:#}")))
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit: every module with data segments keeps a
/// file descriptor open for its copy-on-write image, so thousands of functions need
/// more than the usual soft limit of 1024.
pub(crate) fn raise_nofile_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `lim` is a valid rlimit to write into.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0
        || lim.rlim_cur >= lim.rlim_max
    {
        return;
    }
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: `lim` is a valid rlimit whose soft value does not exceed its hard value.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
        tracing::warn!("could not raise RLIMIT_NOFILE to {}", lim.rlim_max);
    }
}

/// Returns the heap memory freed so far to the OS. Compiling a module frees hundreds of MiB of
/// Cranelift's working memory at once, and unregistering a module frees its metadata; glibc's
/// allocator keeps such memory in its per-thread arenas (resident, reusable only by further
/// allocations) unless asked to release it. Called after compiles and unregistrations, on the
/// admin thread that did them, never on request paths.
pub(crate) fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free memory of glibc's allocator (which Rust's
    // default `System` allocator is); it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Pins the calling thread to `cpu`; failures are logged, not fatal (the layout still works).
pub(crate) fn pin_current_thread(cpu: usize) {
    if !crate::affinity::set_affinity(&[cpu]) {
        tracing::warn!(cpu, "could not pin thread");
    }
}
