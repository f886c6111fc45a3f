//! The function registry: validates a module once, AoT-compiles it (or loads the cached
//! artifact), links it against Luge's WASI layer into one `InstancePre`, and hands out
//! `Arc<Function>`s that requests carry to their worker.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use luge_sched::FunctionId;
use sha2::{Digest, Sha256};
use wasmtime::{Engine, ExternType, InstancePre, Linker, Module};

use crate::config::FunctionConfig;
use crate::error::{Error, RegisterError};
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

/// Compiles and links modules; shared by every thread of a runtime.
pub(crate) struct Registry {
    engine: Engine,
    linker: Linker<SandboxState>,
    cache_dir: Option<PathBuf>,
    max_memory_bytes: u64,
    functions: RwLock<Functions>,
}

#[derive(Default)]
struct Functions {
    by_name: HashMap<String, Arc<Function>>,
    by_id: HashMap<u32, Arc<Function>>,
    next_id: u32,
}

fn reject(name: &str, reason: RegisterError) -> Error {
    Error::Register { name: name.to_owned(), reason }
}

impl Registry {
    pub(crate) fn new(
        engine: Engine,
        cache_dir: Option<PathBuf>,
        max_memory_bytes: u64,
    ) -> Result<Self, Error> {
        let mut linker = Linker::new(&engine);
        wasi::add_to_linker(&mut linker).map_err(|e| Error::Engine(format!("{e:#}")))?;
        // The cache only saves compile time: a directory that cannot be made (read-only or full
        // disk, a file in the way) means compiling every start, not refusing to serve.
        let cache_dir = cache_dir.filter(|dir| match std::fs::create_dir_all(dir) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "serving without the AoT cache: {e}");
                false
            }
        });
        Ok(Self { engine, linker, cache_dir, max_memory_bytes, functions: RwLock::default() })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Validates, compiles (or loads from cache) and links `bytes` (Wasm binary or WAT text),
    /// without registering it. `luge compile` uses this to check a module.
    pub(crate) fn compile(
        &self,
        config: &FunctionConfig,
        bytes: &[u8],
    ) -> Result<(InstancePre<SandboxState>, String, bool), Error> {
        let name = config.name.as_str();
        let bytes = wat::parse_bytes(bytes)
            .map_err(|e| reject(name, RegisterError::Invalid(e.to_string())))?;
        if config.limits.max_memory_bytes > self.max_memory_bytes {
            return Err(reject(
                name,
                RegisterError::Limit(format!(
                    "memory limit of {} bytes exceeds the runtime's maximum of {} bytes",
                    config.limits.max_memory_bytes, self.max_memory_bytes
                )),
            ));
        }
        let hash = hex(&Sha256::digest(&bytes));
        let (module, from_cache) = self.load_or_compile(name, &bytes, &hash)?;
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
            .instantiate_pre(&module)
            .map_err(|e| reject(name, RegisterError::Link(format!("{e:#}"))))?;
        Ok((pre, hash, from_cache))
    }

    fn load_or_compile(
        &self,
        name: &str,
        bytes: &[u8],
        hash: &str,
    ) -> Result<(Module, bool), Error> {
        let Some(dir) = &self.cache_dir else {
            let module = Module::new(&self.engine, bytes)
                .map_err(|e| reject(name, RegisterError::Invalid(format!("{e:#}"))))?;
            return Ok((module, false));
        };
        let mut compat = DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut compat);
        let path = dir.join(format!("{hash}-{:016x}.cwasm", compat.finish()));
        if path.exists() {
            // SAFETY: the artifact was written by `Module::serialize` of an engine with the same
            // compatibility hash (it is in the file name) into the operator's cache directory;
            // Wasmtime additionally checks its version and settings header on load. A file that
            // fails to load is recompiled and replaced below.
            match unsafe { Module::deserialize_file(&self.engine, &path) } {
                Ok(module) => return Ok((module, true)),
                Err(e) => tracing::warn!(path = %path.display(), "ignoring bad artifact: {e:#}"),
            }
        }
        let module = Module::new(&self.engine, bytes)
            .map_err(|e| reject(name, RegisterError::Invalid(format!("{e:#}"))))?;
        // A failed write (read-only or full disk) costs the next start a compile, nothing more.
        match module.serialize() {
            Ok(artifact) => {
                if let Err(e) = write_atomically(&path, &artifact) {
                    tracing::warn!(path = %path.display(), "cannot cache the artifact: {e}");
                }
            }
            Err(e) => tracing::warn!(function = name, "cannot serialize the artifact: {e:#}"),
        }
        Ok((module, false))
    }

    /// Compiles and registers a function under a fresh id.
    pub(crate) fn register(
        &self,
        config: FunctionConfig,
        bytes: &[u8],
    ) -> Result<Arc<Function>, Error> {
        if self.get(&config.name).is_some() {
            return Err(reject(&config.name, RegisterError::Duplicate));
        }
        let (pre, module_hash, from_cache) = self.compile(&config, bytes)?;
        let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
        if functions.by_name.contains_key(&config.name) {
            return Err(reject(&config.name, RegisterError::Duplicate));
        }
        let id = FunctionId(functions.next_id);
        functions.next_id += 1;
        let function = Arc::new(Function { id, config, module_hash, from_cache, pre });
        functions.by_name.insert(function.config.name.clone(), Arc::clone(&function));
        functions.by_id.insert(id.0, Arc::clone(&function));
        Ok(function)
    }

    /// Removes a function; requests already submitted keep their `Arc` and finish.
    pub(crate) fn unregister(&self, name: &str) -> Option<Arc<Function>> {
        let mut functions = self.functions.write().unwrap_or_else(|p| p.into_inner());
        let function = functions.by_name.remove(name)?;
        functions.by_id.remove(&function.id.0);
        Some(function)
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

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
