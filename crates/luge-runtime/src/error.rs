//! Errors of the runtime's control plane (start-up and registration). Request-level failures are
//! [`crate::Failure`]s inside an [`crate::Outcome`], never errors of this type.

/// A control-plane error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Wasmtime engine could not be built with this configuration.
    #[error("cannot build the Wasm engine: {0}")]
    Engine(String),
    /// The configuration is inconsistent.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A thread could not be started.
    #[error("cannot start thread `{name}`: {source}")]
    Thread {
        /// Thread name.
        name: String,
        /// Cause.
        source: std::io::Error,
    },
    /// A module was rejected at registration.
    #[error("function `{name}`: {reason}")]
    Register {
        /// Function name.
        name: String,
        /// Why.
        reason: RegisterError,
    },
    /// No such function.
    #[error("unknown function `{0}`")]
    UnknownFunction(String),
}

/// Why a module cannot be registered.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// Not valid WebAssembly (or WAT) for this engine.
    #[error("invalid module: {0}")]
    Invalid(String),
    /// It imports things the runtime does not provide (`module::name` each).
    #[error("unsupported imports: {} (Luge provides WASI preview1 only)", .0.join(", "))]
    UnsupportedImports(Vec<String>),
    /// It imports a preview1 function with the wrong signature, or cannot be linked.
    #[error("cannot link: {0}")]
    Link(String),
    /// A required export is missing or has the wrong type.
    #[error("missing export `{0}` (a command module exports `memory` and `_start: [] -> []`)")]
    MissingExport(&'static str),
    /// The module's initial memory exceeds the function's cap.
    #[error("initial memory of {needed} bytes exceeds the cap of {cap} bytes")]
    MemoryTooLarge {
        /// Bytes needed at start.
        needed: u64,
        /// The cap.
        cap: u64,
    },
    /// A limit exceeds what the runtime was configured for.
    #[error("{0}")]
    Limit(String),
    /// The name is taken.
    #[error("a function with this name is already registered")]
    Duplicate,
    /// The AoT cache could not be read or written.
    #[error("artifact cache: {0}")]
    Cache(String),
    /// Its tenant has `max_functions` functions registered already.
    #[error(
        "tenant {tenant} (`{name}`) has its limit of {max} functions registered (max_functions)"
    )]
    TenantFunctions {
        /// The tenant's id.
        tenant: u32,
        /// The tenant's name.
        name: String,
        /// Its limit.
        max: u32,
    },
}
