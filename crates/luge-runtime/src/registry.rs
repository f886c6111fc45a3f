//! The function registry: checks a module against the registration limits, AoT-compiles it (or
//! loads its verified cached artifact), links it against Luge's WASI layer into one
//! `InstancePre`, and hands out `Arc<Function>`s that requests carry to their worker.
//!
//! Above ~600 lines only through its tests (~260 lines); the checks before compiling live in
//! `limits`, the artifact format and its verification in `cache`.
//!
//! Registration order: the submitted size, then (on the Wasm binary) the section counts of
//! [`RegistrationLimits`] and the memory cap, all before anything is compiled; then a compile
//! slot (at most `max_concurrent_compiles` modules load or compile at once, a registration
//! waits up to `compile_wait` for one); then the cache ([`crate::cache`]: load only an intact
//! artifact Luge wrote for this very module, else compile and write one); then the import and
//! export checks and linking. Unregistering drops the registry's `Arc`s (the module is freed
//! when the last in-flight request ends) and deletes the cached artifact unless another
//! registered function has the same module. A [`Function`] also carries, per dispatcher group,
//! the estimate of its execution that group's dispatcher last published (`dispatcher::refusal`).

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use luge_sched::{FunctionId, Nanos};
use sha2::{Digest, Sha256};
use wasmtime::{Engine, ExternType, InstancePre, Linker, Module, ModuleExport};

use crate::cache::Cache;
use crate::config::{FunctionConfig, RuntimeConfig};
use crate::error::{Error, RegisterError};
use crate::limits::RegistrationLimits;
use crate::store::SandboxState;
use crate::wasi;

/// A registered function: its settings and its pre-linked module.
pub struct Function {
    /// Runtime-unique id (ids are never reused within a runtime).
    pub id: FunctionId,
    /// Settings.
    pub config: FunctionConfig,
    /// SHA-256 of the module bytes, hex.
    pub module_hash: String,
    /// Whether the compiled artifact came from the on-disk cache.
    pub from_cache: bool,
    pub(crate) pre: InstancePre<SandboxState>,
    /// Its `_start` and `memory` exports, looked up once: by name, each request would hash
    /// the name and search the export map again.
    pub(crate) exports: Exports,
    /// Per dispatcher group, its estimator's estimate (ns) of this function's execution once it
    /// rests on knowledge (0: none yet), for a submitter to refuse on
    /// (`crate::dispatcher::Published`).
    expected: Box<[AtomicU64]>,
    /// The rate limit of its guest stderr's log lines (`stderr_log`): one function's flood
    /// does not silence another's.
    pub(crate) stderr: crate::line_limit::LineLimit,
}

impl Function {
    /// Group `group`'s dispatcher estimates this function's execution at `ns`.
    pub(crate) fn publish_expected(&self, group: usize, ns: Nanos) {
        if let Some(cell) = self.expected.get(group) {
            cell.store(ns, Ordering::Relaxed);
        }
    }

    /// Group `group`'s dispatcher's latest estimate of this function's execution, if any.
    pub(crate) fn published_expected(&self, group: usize) -> Option<Nanos> {
        self.expected.get(group).map(|c| c.load(Ordering::Relaxed)).filter(|&ns| ns > 0)
    }
}

/// The exports a sandbox uses, resolved at registration ([`wasmtime::Module::get_export_index`]).
#[derive(Clone, Copy)]
pub(crate) struct Exports {
    pub start: ModuleExport,
    pub memory: ModuleExport,
}

impl Exports {
    /// `None` when the module lacks either (registration checked both before).
    fn of(module: &Module) -> Option<Self> {
        Some(Self {
            start: module.get_export_index("_start")?,
            memory: module.get_export_index("memory")?,
        })
    }
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("id", &self.id)
            .field("name", &self.config.name)
            .field("module_hash", &self.module_hash)
            .finish_non_exhaustive()
    }
}

/// A tenant's `max_functions`, checked when a function is inserted ([`Registry::register_within`]).
pub(crate) struct Quota {
    /// The tenant's id.
    pub tenant: u32,
    /// Its name, for the error.
    pub name: String,
    /// Its limit.
    pub max: u32,
}

/// Compiles and links modules; shared by every thread of a runtime.
pub(crate) struct Registry {
    engine: Engine,
    linker: Linker<SandboxState>,
    cache: Option<Cache>,
    max_memory_bytes: u64,
    limits: RegistrationLimits,
    compiles: CompileSlots,
    functions: RwLock<Functions>,
    /// Dispatcher groups of the runtime (`Function::expected`).
    groups: usize,
}

#[derive(Default)]
struct Functions {
    by_name: HashMap<String, Arc<Function>>,
    by_id: HashMap<u32, Arc<Function>>,
    /// Names and ids taken by chains (`crate::chain`): one namespace and one id space with the
    /// functions, so a route or a UDP-RPC id names one thing.
    reserved: HashMap<String, u32>,
    /// The next id to hand out; ids are never reused, and past `u32::MAX` none are left.
    next_id: u64,
}

impl Functions {
    /// A fresh id, or `None` once all 2^32 are spent.
    fn take_id(&mut self) -> Option<u32> {
        let id = u32::try_from(self.next_id).ok()?;
        self.next_id += 1;
        Some(id)
    }
}

/// What a module that is neither format is refused with.
const NOT_A_MODULE: &str = "the module is neither a Wasm binary (no `\\0asm` header) nor WAT \
                            text (not UTF-8)";

fn reject(name: &str, reason: RegisterError) -> Error {
    Error::Register { name: name.to_owned(), reason }
}

impl Registry {
    /// A registry with the default [`RegistrationLimits`] and cache bound (for unit tests).
    #[cfg(test)]
    pub(crate) fn new(
        engine: Engine,
        cache_dir: Option<std::path::PathBuf>,
        max_memory_bytes: u64,
    ) -> Result<Self, Error> {
        Self::from_config(
            engine,
            &RuntimeConfig { cache_dir, max_memory_bytes, ..RuntimeConfig::default() },
        )
    }

    /// A registry with `config`'s cache, memory bound and registration limits.
    pub(crate) fn from_config(engine: Engine, config: &RuntimeConfig) -> Result<Self, Error> {
        let limits = config.registration;
        if limits.max_concurrent_compiles == 0 {
            return Err(Error::Config(
                "registration.max_concurrent_compiles must be at least 1".into(),
            ));
        }
        let mut linker = Linker::new(&engine);
        wasi::add_to_linker(&mut linker).map_err(|e| Error::Engine(format!("{e:#}")))?;
        // The cache only saves compile time: a directory that cannot be made (read-only or full
        // disk, a file in the way) or that other users could write means compiling every start,
        // not refusing to serve.
        let cache = config
            .cache_dir
            .as_deref()
            .and_then(|dir| Cache::open(&engine, dir, config.cache_max_bytes));
        Ok(Self {
            engine,
            linker,
            cache,
            max_memory_bytes: config.max_memory_bytes,
            limits,
            compiles: CompileSlots::new(limits.max_concurrent_compiles),
            functions: RwLock::default(),
            groups: config.dispatchers.max(1),
        })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Checks, compiles (or loads from cache) and links `bytes` (Wasm binary or WAT text),
    /// without registering it. `luge compile` uses this to check a module.
    pub(crate) fn compile(
        &self,
        config: &FunctionConfig,
        bytes: &[u8],
    ) -> Result<(InstancePre<SandboxState>, String, bool), Error> {
        let name = config.name.as_str();
        // Everything up to the compile slot is bounded by the module's size and cheap next to
        // compiling: a module over a limit is refused at once, never queued.
        self.limits.check_size(bytes.len()).map_err(|e| reject(name, e))?;
        if !bytes.starts_with(b"\0asm") && std::str::from_utf8(bytes).is_err() {
            // `wat` would say "input bytes aren't valid utf-8", which names neither format.
            return Err(reject(name, RegisterError::Invalid(NOT_A_MODULE.into())));
        }
        let bytes = wat::parse_bytes(bytes)
            .map_err(|e| reject(name, RegisterError::Invalid(e.to_string())))?;
        self.limits.check_module(&bytes).map_err(|e| reject(name, e))?;
        if config.limits.max_memory_bytes > self.max_memory_bytes {
            return Err(reject(
                name,
                RegisterError::Limit(format!(
                    "memory limit of {} bytes exceeds the runtime's maximum of {} bytes",
                    config.limits.max_memory_bytes, self.max_memory_bytes
                )),
            ));
        }
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        let hash = hex(&digest);
        let slot = self.compiles.acquire(self.limits.compile_wait).ok_or_else(|| {
            reject(
                name,
                RegisterError::Busy {
                    max_concurrent: self.limits.max_concurrent_compiles,
                    waited: self.limits.compile_wait,
                },
            )
        })?;
        let ((module, pre), from_cache) =
            self.load_or_compile(name, (&bytes, &digest, &hash), |module| {
                self.linked(config, module)
            })?;
        drop(slot);
        // Build the copy-on-write memory image now, not at the function's first instantiation
        // on a worker, where it costs a request tens of µs (a memfd written with the module's
        // data). A failure here (no memfd) is left to that first instantiation to retry.
        if let Err(e) = module.initialize_copy_on_write_image() {
            tracing::warn!(function = name, "memory image not built ahead: {e:#}");
        }
        Ok((pre, hash, from_cache))
    }

    /// The checks a compiled module must pass — imports Luge provides, `_start: [] -> []`, a
    /// `memory` whose minimum fits the function's cap — and its linking: what registration
    /// refuses after compiling, done before the artifact is cached so that a refused module
    /// leaves none behind (to take the place of useful ones).
    fn linked(
        &self,
        config: &FunctionConfig,
        module: &Module,
    ) -> Result<(Module, InstancePre<SandboxState>), Error> {
        let name = config.name.as_str();
        let unsupported: Vec<String> = module
            .imports()
            .filter(|i| !wasi::provides(i.module(), i.name()))
            .map(|i| format!("{}::{}", i.module(), i.name()))
            .collect();
        if !unsupported.is_empty() {
            return Err(reject(name, RegisterError::UnsupportedImports(unsupported)));
        }
        match module.get_export("_start") {
            Some(ExternType::Func(f)) if f.params().len() == 0 && f.results().len() == 0 => {}
            _ => return Err(reject(name, RegisterError::MissingExport("_start"))),
        }
        match module.get_export("memory") {
            Some(ExternType::Memory(m)) => {
                let needed = m.minimum().saturating_mul(m.page_size());
                if needed > config.limits.max_memory_bytes {
                    return Err(reject(
                        name,
                        RegisterError::MemoryTooLarge {
                            needed,
                            cap: config.limits.max_memory_bytes,
                        },
                    ));
                }
            }
            _ => return Err(reject(name, RegisterError::MissingExport("memory"))),
        }
        let pre = self
            .linker
            .instantiate_pre(module)
            .map_err(|e| reject(name, RegisterError::Link(format!("{e:#}"))))?;
        Ok((module.clone(), pre))
    }

    /// The module of `bytes` from the cache, or compiled; `check` (the checks and linking,
    /// [`Self::linked`]) passes before a compiled module's artifact is written.
    fn load_or_compile<T>(
        &self,
        name: &str,
        (bytes, digest, hash): (&[u8], &[u8; 32], &str),
        check: impl Fn(&Module) -> Result<T, Error>,
    ) -> Result<(T, bool), Error> {
        let compile = || {
            let module = Module::new(&self.engine, bytes)
                .map_err(|e| reject(name, RegisterError::Invalid(format!("{e:#}"))));
            // Cranelift's working memory (hundreds of MiB for a large module) is free now but
            // still resident in the allocator's arenas: hand it back.
            crate::engine::trim_heap();
            module
        };
        let Some(cache) = &self.cache else {
            return Ok((check(&compile()?)?, false));
        };
        match cache.load(&self.engine, digest, hash) {
            Ok(Some(module)) => return Ok((check(&module)?, true)),
            Ok(None) => {}
            Err(e) => tracing::warn!(
                function = name,
                artifact = ?cache.file_name(hash),
                "ignoring the cached artifact, recompiling: {e}"
            ),
        }
        let module = compile()?;
        let checked = check(&module)?;
        // A failed write (read-only or full disk) costs the next start a compile, nothing more.
        match module.serialize() {
            Ok(artifact) => {
                if let Err(e) = cache.store(digest, hash, &artifact, &self.cached_in_use(cache)) {
                    tracing::warn!(
                        function = name,
                        "not cached, served compiled (the next start compiles it again): {e}"
                    );
                }
            }
            Err(e) => tracing::warn!(function = name, "cannot serialize the artifact: {e:#}"),
        }
        // The serialized copy is as large as the compiled code.
        crate::engine::trim_heap();
        Ok((checked, false))
    }

    /// File names of the artifacts of registered functions (never evicted).
    fn cached_in_use(&self, cache: &Cache) -> HashSet<OsString> {
        let functions = self.functions.read().unwrap_or_else(|p| p.into_inner());
        functions.by_name.values().map(|f| cache.file_name(&f.module_hash)).collect()
    }

    /// Compiles and registers a function under a fresh id.
    #[cfg(test)]
    pub(crate) fn register(
        &self,
        config: FunctionConfig,
        bytes: &[u8],
    ) -> Result<Arc<Function>, Error> {
        self.register_within(config, bytes, None)
    }

    /// [`register`](Self::register), refused if the function's tenant has `quota.max`
    /// functions registered when it is inserted — counted under the registry's lock, so that
    /// registrations compiling at the same time cannot all pass a count taken before.
    pub(crate) fn register_within(
        &self,
        config: FunctionConfig,
        bytes: &[u8],
        quota: Option<Quota>,
    ) -> Result<Arc<Function>, Error> {
        if self.taken(&config.name) {
            return Err(reject(&config.name, RegisterError::Duplicate));
        }
        let (pre, module_hash, from_cache) = self.compile(&config, bytes)?;
        let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
        // Checked again under the lock: registrations compiling side by side.
        let mut take = || {
            let exports =
                Exports::of(pre.module()).ok_or(RegisterError::MissingExport("_start"))?;
            if functions.by_name.contains_key(&config.name)
                || functions.reserved.contains_key(&config.name)
            {
                return Err(RegisterError::Duplicate);
            }
            if let Some(q) = &quota {
                let has =
                    functions.by_name.values().filter(|f| f.config.tenant == q.tenant).count();
                if has >= q.max as usize {
                    let (tenant, name, max) = (q.tenant, q.name.clone(), q.max);
                    return Err(RegisterError::TenantFunctions { tenant, name, max });
                }
            }
            functions.take_id().map(|id| (exports, id)).ok_or(RegisterError::IdsExhausted)
        };
        let taken = take();
        let (exports, id) = match taken {
            Ok(taken) => taken,
            Err(reason) => {
                // Refused after compiling (a race for the name or the tenant's last slot): an
                // artifact written for it goes too, unless a registered function shares it.
                let shared = functions.by_name.values().any(|f| f.module_hash == module_hash);
                drop(functions);
                if let Some(cache) = self.cache.as_ref().filter(|_| !from_cache && !shared) {
                    cache.remove(&module_hash);
                }
                return Err(reject(&config.name, reason));
            }
        };
        let id = FunctionId(id);
        let expected = (0..self.groups).map(|_| AtomicU64::new(0)).collect();
        let function = Arc::new(Function {
            id,
            config,
            module_hash,
            from_cache,
            pre,
            exports,
            expected,
            stderr: crate::line_limit::LineLimit::new(),
        });
        functions.by_name.insert(function.config.name.clone(), Arc::clone(&function));
        functions.by_id.insert(id.0, Arc::clone(&function));
        Ok(function)
    }

    /// Removes a function; requests already submitted keep their `Arc` and finish. `then` runs
    /// once the function is out of the registry (new lookups miss it) and before the slow part:
    /// its cached artifact is deleted unless another registered function has the same module,
    /// and if no request holds the function, its module is freed and the freed memory returned
    /// to the OS (otherwise that happens when the last request ends). `None`: no such function
    /// (`then` does not run).
    pub(crate) fn unregister_with<T>(&self, name: &str, then: impl FnOnce() -> T) -> Option<T> {
        let removed = self.remove_where(name, |_| true)?;
        // Outside the lock: requests look functions up under it.
        let done = then();
        self.free(removed);
        Some(done)
    }

    /// Removes `function` if it is still the one registered under its name (not one registered
    /// again under that name since), as [`unregister_with`](Self::unregister_with) does.
    pub(crate) fn unregister_exact(&self, function: &Arc<Function>) -> bool {
        let removed = self.remove_where(&function.config.name, |f| Arc::ptr_eq(f, function));
        removed.map(|r| self.free(r)).is_some()
    }

    /// Takes the function `name` out of the maps if `matches` it; with whether another
    /// registered function shares its module.
    fn remove_where(
        &self,
        name: &str,
        matches: impl FnOnce(&Arc<Function>) -> bool,
    ) -> Option<(Arc<Function>, bool)> {
        let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
        if !matches(functions.by_name.get(name)?) {
            return None;
        }
        let function = functions.by_name.remove(name)?;
        functions.by_id.remove(&function.id.0);
        let shared = functions.by_name.values().any(|f| f.module_hash == function.module_hash);
        Some((function, shared))
    }

    /// The slow part of a removal, outside the registry's lock: the cached artifact goes unless
    /// another function shares it, and the module is freed if no request holds it.
    fn free(&self, (function, shared): (Arc<Function>, bool)) {
        if let Some(cache) = self.cache.as_ref().filter(|_| !shared) {
            cache.remove(&function.module_hash);
        }
        if let Some(function) = Arc::into_inner(function) {
            drop(function);
            crate::engine::trim_heap();
        }
    }

    /// Whether a function or a chain has this name.
    fn taken(&self, name: &str) -> bool {
        let functions = self.functions.read().unwrap_or_else(|p| p.into_inner());
        functions.by_name.contains_key(name) || functions.reserved.contains_key(name)
    }

    /// Takes `name` and a fresh id for a chain; `Duplicate` if a function or chain has it.
    pub(crate) fn reserve(&self, name: &str) -> Result<FunctionId, Error> {
        let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
        if functions.by_name.contains_key(name) || functions.reserved.contains_key(name) {
            return Err(reject(name, RegisterError::Duplicate));
        }
        let id = functions.take_id().ok_or_else(|| reject(name, RegisterError::IdsExhausted))?;
        functions.reserved.insert(name.to_owned(), id);
        Ok(FunctionId(id))
    }

    /// Gives a chain's name back.
    pub(crate) fn release(&self, name: &str) -> Option<FunctionId> {
        let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
        functions.reserved.remove(name).map(FunctionId)
    }

    pub(crate) fn get_by_id(&self, id: u32) -> Option<Arc<Function>> {
        self.functions.read().unwrap_or_else(|p| p.into_inner()).by_id.get(&id).cloned()
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<Function>> {
        self.functions.read().unwrap_or_else(|p| p.into_inner()).by_name.get(name).cloned()
    }

    pub(crate) fn list(&self) -> Vec<Arc<Function>> {
        let functions = self.functions.read().unwrap_or_else(|p| p.into_inner());
        let mut all: Vec<_> = functions.by_name.values().cloned().collect();
        all.sort_by_key(|f| f.id);
        all
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A counting semaphore bounding the modules loaded or compiled at once.
struct CompileSlots {
    busy: Mutex<usize>,
    freed: Condvar,
    max: usize,
}

/// One compile slot, returned on drop.
struct CompileSlot<'a>(&'a CompileSlots);

impl CompileSlots {
    fn new(max: usize) -> Self {
        Self { busy: Mutex::new(0), freed: Condvar::new(), max }
    }

    /// A slot, waiting at most `wait` for one to free up.
    fn acquire(&self, wait: Duration) -> Option<CompileSlot<'_>> {
        let deadline = Instant::now().checked_add(wait);
        let mut busy = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        while *busy >= self.max {
            let now = Instant::now();
            let left = match deadline {
                Some(deadline) if deadline <= now => return None,
                Some(deadline) => deadline - now,
                // A wait too long to represent: wait in long steps, forever.
                None => Duration::from_secs(3600),
            };
            busy = self.freed.wait_timeout(busy, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        *busy += 1;
        Some(CompileSlot(self))
    }
}

impl Drop for CompileSlot<'_> {
    fn drop(&mut self) {
        let mut busy = self.0.busy.lock().unwrap_or_else(|p| p.into_inner());
        *busy -= 1;
        self.0.freed.notify_one();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::error::RegistrationLimit;

    /// Small limits, so modules just at and just beyond each are cheap to build and compile.
    const LIMITS: RegistrationLimits = RegistrationLimits {
        max_module_bytes: 1 << 20,
        max_functions: 5,
        max_function_bytes: 64,
        max_code_bytes: 256,
        max_imports: 3,
        max_data_segments: 4,
        max_element_segments: 4,
        max_tables: 1,
        max_globals: 6,
        max_concurrent_compiles: 1,
        compile_wait: Duration::ZERO,
    };

    fn with(limits: RegistrationLimits, cache: Option<&Path>, cache_max: u64) -> Registry {
        let config = RuntimeConfig {
            registration: limits,
            cache_dir: cache.map(Path::to_owned),
            cache_max_bytes: cache_max,
            ..RuntimeConfig::default()
        };
        Registry::from_config(crate::engine::build(&config).unwrap(), &config).unwrap()
    }

    /// A command module (binary) with `functions` defined functions and the fields `extra`.
    fn module(functions: usize, extra: &str) -> Vec<u8> {
        let funcs = "(func)".repeat(functions - 1);
        wat::parse_str(format!(
            "(module {extra} (memory (export \"memory\") 1) (func (export \"_start\")) {funcs})"
        ))
        .unwrap()
    }

    /// A function whose body is `n + 2` bytes.
    fn nops(n: usize) -> String {
        format!("(func {})", "nop ".repeat(n))
    }

    fn outcome(registry: &Registry, bytes: &[u8]) -> Result<(), RegisterError> {
        match registry.compile(&FunctionConfig::new("f"), bytes) {
            Ok(_) => Ok(()),
            Err(Error::Register { reason, .. }) => Err(reason),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn each_limit_accepts_a_module_at_it_and_refuses_one_just_beyond() {
        let registry = with(LIMITS, None, 0);
        let import = r#"(import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))"#;
        let global_import = r#"(import "wasi_snapshot_preview1" "g" (global i32))"#;
        let cases = [
            (RegistrationLimit::Functions, module(5, ""), module(6, "")),
            (
                RegistrationLimit::Imports,
                module(1, &import.repeat(3)),
                module(1, &import.repeat(4)),
            ),
            (
                RegistrationLimit::DataSegments,
                module(1, &r#"(data (i32.const 0) "x")"#.repeat(4)),
                module(1, &r#"(data "x")"#.repeat(5)),
            ),
            (
                RegistrationLimit::ElementSegments,
                module(1, &"(elem declare func 0)".repeat(4)),
                module(1, &"(elem func 0)".repeat(5)),
            ),
            (
                RegistrationLimit::Tables,
                module(1, "(table 1 funcref)"),
                module(1, &"(table 0 funcref)".repeat(2)),
            ),
            (
                RegistrationLimit::Globals,
                module(1, &"(global i32 (i32.const 0))".repeat(6)),
                module(1, &"(global i32 (i32.const 0))".repeat(7)),
            ),
            // Function bodies: `nop`s between the local declarations (1 byte) and `end`.
            (RegistrationLimit::FunctionBytes, module(1, &nops(62)), module(1, &nops(63))),
            // Code: a count byte, `_start` (3 bytes) and four bodies with their size bytes.
            (
                RegistrationLimit::CodeBytes,
                module(1, &nops(60).repeat(4)),
                module(1, &[nops(60).repeat(3), nops(61)].concat()),
            ),
            // Imported globals and tables count too (refused before linking would fail).
            (
                RegistrationLimit::Globals,
                module(1, &"(global i32 (i32.const 0))".repeat(6)),
                module(1, &[global_import, &"(global i32 (i32.const 0))".repeat(6)].concat()),
            ),
        ];
        for (limit, at, beyond) in cases {
            assert_eq!(outcome(&registry, &at).map_err(|e| e.to_string()), Ok(()), "{limit:?}");
            match outcome(&registry, &beyond) {
                Err(RegisterError::OverLimit { limit: l, had, max }) => {
                    assert_eq!((l, had), (limit, max + 1), "{limit:?}")
                }
                other => panic!("{limit:?}: expected a refusal, got {other:?}"),
            }
        }
        // Size: as submitted (WAT text here) and as a binary.
        let at = module(1, "");
        let sized =
            with(RegistrationLimits { max_module_bytes: at.len() as u64, ..LIMITS }, None, 0);
        assert_eq!(outcome(&sized, &at).map_err(|e| e.to_string()), Ok(()));
        let mut beyond = at.clone();
        beyond.extend_from_slice(b"\0\x01x"); // an empty custom section named "x"
        assert!(matches!(
            outcome(&sized, &beyond),
            Err(RegisterError::OverLimit { limit: RegistrationLimit::ModuleBytes, had, max })
                if had == max + 3
        ));
        let text = r#"(module (memory (export "memory") 1) (func (export "_start")))"#;
        let small = with(RegistrationLimits { max_module_bytes: 40, ..LIMITS }, None, 0);
        assert!(matches!(
            outcome(&small, text.as_bytes()),
            Err(RegisterError::OverLimit { limit: RegistrationLimit::ModuleBytes, .. })
        ));
    }

    #[test]
    fn compiles_beyond_the_bound_wait_then_are_refused() {
        let wasm = module(1, "");
        // Refused at once while the only slot is taken (a zero wait).
        let now = with(LIMITS, None, 0);
        let slot = now.compiles.acquire(Duration::ZERO).unwrap();
        assert!(matches!(outcome(&now, &wasm), Err(RegisterError::Busy { max_concurrent: 1, .. })));
        // A module over a limit is refused for that, not queued.
        assert!(matches!(outcome(&now, &module(6, "")), Err(RegisterError::OverLimit { .. })));
        drop(slot);
        assert!(outcome(&now, &wasm).is_ok(), "the slot is back");
        // Waiting: refused after the wait if no slot frees up…
        let wait = Duration::from_millis(200);
        let waits = with(RegistrationLimits { compile_wait: wait, ..LIMITS }, None, 0);
        let slot = waits.compiles.acquire(Duration::ZERO).unwrap();
        let start = Instant::now();
        let refused = outcome(&waits, &wasm).unwrap_err();
        assert!(start.elapsed() >= wait);
        assert_eq!(
            refused.to_string(),
            "1 modules are already compiling (registration.max_concurrent_compiles) and none \
             finished within 200ms; try again later"
        );
        // …and served as soon as one does.
        let waits = RegistrationLimits { compile_wait: Duration::from_secs(60), ..LIMITS };
        let patient = with(waits, None, 0);
        std::thread::scope(|s| {
            let slot = patient.compiles.acquire(Duration::ZERO).unwrap();
            let waiter = s.spawn(|| outcome(&patient, &wasm));
            std::thread::sleep(Duration::from_millis(100));
            assert!(!waiter.is_finished(), "waits for the slot");
            drop(slot);
            assert!(waiter.join().unwrap().is_ok());
        });
        drop(slot);
        // At most `max_concurrent_compiles` hold a slot at once.
        let two = CompileSlots::new(2);
        let a = two.acquire(Duration::ZERO).unwrap();
        let b = two.acquire(Duration::ZERO).unwrap();
        assert!(two.acquire(Duration::from_millis(10)).is_none());
        drop(a);
        assert!(two.acquire(Duration::ZERO).is_some());
        drop(b);
    }

    #[test]
    fn bytes_that_are_neither_wasm_nor_wat_are_named_as_such() {
        let registry = with(LIMITS, None, 0);
        for bytes in [&b"\xff\xfe\0\x01"[..], b"GIF89a\x80"] {
            match outcome(&registry, bytes) {
                Err(RegisterError::Invalid(reason)) => assert_eq!(reason, NOT_A_MODULE),
                other => panic!("{bytes:?}: {other:?}"),
            }
        }
        assert_eq!(
            NOT_A_MODULE,
            "the module is neither a Wasm binary (no `\\0asm` header) nor WAT text (not UTF-8)"
        );
        // Text is parsed as WAT, and a binary as Wasm: their own errors stand.
        assert!(
            matches!(outcome(&registry, b"hello"), Err(RegisterError::Invalid(r)) if r != NOT_A_MODULE)
        );
        let truncated = b"\0asm\x01\0\0\0\x01\xff";
        assert!(
            matches!(outcome(&registry, truncated), Err(RegisterError::Invalid(r)) if r != NOT_A_MODULE)
        );
    }

    #[test]
    fn zero_concurrent_compiles_is_a_configuration_error() {
        let config = RuntimeConfig {
            registration: RegistrationLimits { max_concurrent_compiles: 0, ..LIMITS },
            ..RuntimeConfig::default()
        };
        let engine = crate::engine::build(&config).unwrap();
        assert!(matches!(Registry::from_config(engine, &config), Err(Error::Config(_))));
    }

    /// Ids are never reused: the last one is handed out, then registrations and chains are
    /// refused rather than wrapping onto a live function's id.
    #[test]
    fn ids_run_out_instead_of_wrapping() {
        let registry = with(LIMITS, None, 0);
        registry.register(FunctionConfig::new("zero"), &module(1, "")).unwrap();
        registry.functions.write().unwrap().next_id = u64::from(u32::MAX);
        let last = registry.register(FunctionConfig::new("last"), &module(1, "")).unwrap();
        assert_eq!(last.id.0, u32::MAX);
        for refused in [
            registry.register(FunctionConfig::new("late"), &module(1, "")).map(|_| ()),
            registry.reserve("chain").map(|_| ()),
        ] {
            match refused {
                Err(Error::Register { reason: RegisterError::IdsExhausted, .. }) => {}
                other => panic!("expected IdsExhausted, got {other:?}"),
            }
        }
        assert_eq!(registry.get_by_id(0).unwrap().config.name, "zero");
    }

    /// A distinct module per `i`, all of the same shape (so their artifacts are the same size).
    fn numbered(i: u32) -> Vec<u8> {
        module(1, &format!(r#"(data (i32.const 0) "module-{i:04}")"#))
    }

    fn artifact(dir: &Path, registry: &Registry, bytes: &[u8]) -> PathBuf {
        let cache = registry.cache.as_ref().unwrap();
        dir.join(cache.file_name(&hex(&Sha256::digest(bytes))))
    }

    #[test]
    fn beyond_the_size_bound_the_least_recently_used_unregistered_artifacts_go() {
        let dir = std::env::temp_dir().join(format!("luge-cache-evict-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let unbounded = with(RegistrationLimits::default(), Some(&dir), u64::MAX);
        assert!(outcome(&unbounded, &numbered(0)).is_ok());
        let size = std::fs::metadata(artifact(&dir, &unbounded, &numbered(0))).unwrap().len();
        drop(unbounded);
        std::fs::remove_dir_all(&dir).unwrap();
        // Room for three and a half artifacts.
        let registry = with(RegistrationLimits::default(), Some(&dir), size * 7 / 2);
        let path = |i| artifact(&dir, &registry, &numbered(i));
        let pause = || std::thread::sleep(Duration::from_millis(20));
        // 0 is registered (so kept although it is the oldest); 1, 2 are only compiled.
        registry.register(FunctionConfig::new("zero"), &numbered(0)).unwrap();
        pause();
        assert!(outcome(&registry, &numbered(1)).is_ok());
        pause();
        assert!(outcome(&registry, &numbered(2)).is_ok());
        pause();
        // Loading 1 from the cache makes it more recently used than 2.
        let (_, _, from_cache) =
            registry.compile(&FunctionConfig::new("one"), &numbered(1)).unwrap();
        assert!(from_cache);
        pause();
        assert!([0, 1, 2].iter().all(|&i| path(i).exists()), "three fit");
        assert!(outcome(&registry, &numbered(3)).is_ok());
        assert_eq!(
            [0, 1, 2, 3].map(|i| path(i).exists()),
            [true, true, false, true],
            "the fourth evicts the least recently used unregistered one"
        );
        // Registered artifacts are never evicted; one that would take the registered ones past
        // the bound is not kept (its function is served compiled): the bound holds on disk.
        registry.register(FunctionConfig::new("one"), &numbered(1)).unwrap();
        registry.register(FunctionConfig::new("three"), &numbered(3)).unwrap();
        registry.register(FunctionConfig::new("four"), &numbered(4)).unwrap();
        assert_eq!([0, 1, 3, 4].map(|i| path(i).exists()), [true, true, true, false]);
        // An artifact larger than the whole bound is not written at all.
        let tiny = with(RegistrationLimits::default(), Some(&dir), size / 2);
        assert!(outcome(&tiny, &numbered(5)).is_ok());
        assert!(!path(5).exists());
        drop((registry, tiny));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
