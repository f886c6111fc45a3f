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
    /// The module is larger than a [`crate::RegistrationLimits`] bound allows; refused before
    /// it is compiled.
    #[error("{}; the limit is {max} (registration.{})", limit.describe(*had), limit.key())]
    OverLimit {
        /// Which bound.
        limit: RegistrationLimit,
        /// What the module has.
        had: u64,
        /// The bound.
        max: u64,
    },
    /// `max_concurrent` modules were already compiling and none finished within `waited`.
    #[error(
        "{max_concurrent} modules are already compiling (registration.max_concurrent_compiles) \
         and none finished within {waited:?}; try again later"
    )]
    Busy {
        /// The bound on concurrent compiles.
        max_concurrent: usize,
        /// How long the registration waited for a compile slot.
        waited: std::time::Duration,
    },
    /// The name is taken.
    #[error("a function with this name is already registered")]
    Duplicate,
    /// A chain that cannot be registered: no stages, too many, an unknown stage, a zero
    /// deadline.
    #[error("invalid chain: {0}")]
    Chain(String),
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
    /// Tenants are declared and this one is not among them (nor 0, the operator's own): a
    /// mistyped id must not escape every tenant limit.
    #[error("tenant {0} is not declared in a [[tenant]] table")]
    UnknownTenant(u32),
    /// Every function and chain id has been handed out (ids are never reused, so a client that
    /// knew a removed function's id never reaches another by it).
    #[error("no function ids are left (2^32 registrations); restart the node")]
    IdsExhausted,
}

/// A bound of [`crate::RegistrationLimits`] that a module can exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RegistrationLimit {
    /// Size of the module as submitted (Wasm binary or WAT text), and of its binary.
    ModuleBytes,
    /// Functions the module defines (its function section).
    Functions,
    /// Bytes of the largest function body.
    FunctionBytes,
    /// Bytes of Wasm code (the code section).
    CodeBytes,
    /// Imports of every kind.
    Imports,
    /// Data segments.
    DataSegments,
    /// Element segments.
    ElementSegments,
    /// Tables, imported and defined.
    Tables,
    /// Globals, imported and defined.
    Globals,
}

impl RegistrationLimit {
    /// The field of [`crate::RegistrationLimits`] (and manifest key under `registration`) that
    /// sets this bound.
    pub fn key(self) -> &'static str {
        match self {
            Self::ModuleBytes => "max_module_bytes",
            Self::Functions => "max_functions",
            Self::FunctionBytes => "max_function_bytes",
            Self::CodeBytes => "max_code_bytes",
            Self::Imports => "max_imports",
            Self::DataSegments => "max_data_segments",
            Self::ElementSegments => "max_element_segments",
            Self::Tables => "max_tables",
            Self::Globals => "max_globals",
        }
    }

    /// What a module with `had` of this has, in words ("module defines 12 functions").
    fn describe(self, had: u64) -> String {
        match self {
            Self::ModuleBytes => format!("module is {had} bytes"),
            Self::Functions => format!("module defines {had} functions"),
            Self::FunctionBytes => format!("module has a function body of {had} bytes"),
            Self::CodeBytes => format!("module has {had} bytes of code"),
            Self::Imports => format!("module has {had} imports"),
            Self::DataSegments => format!("module has {had} data segments"),
            Self::ElementSegments => format!("module has {had} element segments"),
            Self::Tables => format!("module has {had} tables"),
            Self::Globals => format!("module has {had} globals"),
        }
    }
}
