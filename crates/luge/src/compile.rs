//! `luge compile`: validate a module as a Luge function and AoT-compile it into the artifact
//! cache, reporting imports the runtime cannot satisfy — before any server sees it.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use luge_runtime::{FunctionConfig, Runtime, RuntimeConfig};

/// `luge compile` options.
#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The module (`.wasm` binary or `.wat` text).
    module: PathBuf,
    /// Artifact cache directory [default: $XDG_CACHE_HOME/luge or ~/.cache/luge].
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// Linear-memory cap to check the module's initial memory against, in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    max_memory_bytes: u64,
}

/// Runs `luge compile`.
pub fn run(args: CompileArgs) -> Result<()> {
    let bytes = std::fs::read(&args.module)
        .with_context(|| format!("cannot read {}", args.module.display()))?;
    let cache_dir =
        args.cache_dir.or_else(|| crate::manifest::Manifest::builtin().server.runtime.cache_dir);
    let config = RuntimeConfig {
        cache_dir: cache_dir.clone(),
        max_memory_bytes: args.max_memory_bytes.max(64 << 20),
        max_sandboxes: 1,
        ..RuntimeConfig::default()
    };
    let runtime = Runtime::start(config).context("cannot start the compiler")?;
    let name = args
        .module
        .file_stem()
        .map_or_else(|| "module".to_owned(), |s| s.to_string_lossy().into_owned());
    let mut function = FunctionConfig::new(&name);
    function.limits.max_memory_bytes = args.max_memory_bytes;
    let registered = runtime.register(function, &bytes)?;
    println!(
        "ok: {} is a valid Luge function (sha256 {}){}",
        args.module.display(),
        registered.module_hash,
        match (&cache_dir, registered.from_cache) {
            (Some(_), true) => " — artifact already cached".to_owned(),
            (Some(d), false) => format!(" — artifact cached in {}", d.display()),
            (None, _) => String::new(),
        }
    );
    Ok(())
}
