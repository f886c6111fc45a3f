//! Registration limits: bounds on what one module may cost the node, checked before it is
//! compiled.
//!
//! Compiling is the expensive part of registering a function: Cranelift's memory and time grow
//! with the number of functions, the code in them (faster than linearly within one function),
//! segments and imports, not with the module's byte size (a 0.4 MB module of 100,000 empty
//! functions costs over 500 MiB of resident memory to compile and keep). So
//! the registry reads the module's section headers with `wasmparser` (the parser Wasmtime
//! uses; no code is compiled or validated for this) and refuses a module that exceeds any bound
//! with [`RegisterError::OverLimit`], naming the bound, its value and what the module had.
//!
//! | bound ([`RegistrationLimits`] field) | default | counts |
//! |---|---|---|
//! | `max_module_bytes` | 16 MiB | the submitted bytes (binary or WAT), and the binary |
//! | `max_functions` | 10,000 | functions the module defines |
//! | `max_function_bytes` | 1 MiB | the largest function body |
//! | `max_code_bytes` | 8 MiB | the code section (all function bodies) |
//! | `max_imports` | 1,000 | imports of every kind |
//! | `max_data_segments` | 10,000 | data segments |
//! | `max_element_segments` | 10,000 | element segments |
//! | `max_tables` | 1 | tables, imported and defined (the sandbox pool holds one per instance) |
//! | `max_globals` | 10,000 | globals, imported and defined |
//! | `max_concurrent_compiles` | 2 | modules being compiled at once |
//! | `compile_wait` | 30 s | how long a compile waits for a slot |
//!
//! A registration beyond `max_concurrent_compiles` waits up to `compile_wait` for a compile
//! to finish and is then refused with [`RegisterError::Busy`] (a zero `compile_wait` refuses at
//! once). Waiting rather than refusing at once keeps start-up and scripted deploys that register
//! a few functions in parallel working, while the bound keeps compile memory at most
//! `max_concurrent_compiles` modules' worth.
//!
//! The defaults leave room for real functions: the C functions in `functions/` are 20–40 KB
//! with about 30 functions, 3 imports and 1 data segment each. A module of 10,000 empty
//! functions costs about 60 MiB of resident memory while registered.

use std::time::Duration;

use wasmparser::{Imports, Parser, Payload, TypeRef};

use crate::error::{RegisterError, RegistrationLimit};

/// Bounds on the modules a runtime accepts (held by [`crate::RuntimeConfig::registration`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RegistrationLimits {
    /// Largest module, in bytes, as submitted (Wasm binary or WAT text) and as a binary.
    pub max_module_bytes: u64,
    /// Most functions a module may define.
    pub max_functions: u32,
    /// Largest function body, in bytes of Wasm code.
    pub max_function_bytes: u64,
    /// Most Wasm code in all, in bytes (the code section).
    pub max_code_bytes: u64,
    /// Most imports a module may have.
    pub max_imports: u32,
    /// Most data segments a module may have.
    pub max_data_segments: u32,
    /// Most element segments a module may have.
    pub max_element_segments: u32,
    /// Most tables (imported and defined) a module may have.
    pub max_tables: u32,
    /// Most globals (imported and defined) a module may have.
    pub max_globals: u32,
    /// Modules compiled at once (at least 1); further registrations wait for a slot.
    pub max_concurrent_compiles: usize,
    /// How long a registration waits for a compile slot before it is refused
    /// ([`RegisterError::Busy`]); zero refuses at once.
    pub compile_wait: Duration,
}

impl Default for RegistrationLimits {
    fn default() -> Self {
        Self {
            max_module_bytes: 16 << 20,
            max_functions: 10_000,
            max_function_bytes: 1 << 20,
            max_code_bytes: 8 << 20,
            max_imports: 1_000,
            max_data_segments: 10_000,
            max_element_segments: 10_000,
            // The sandbox pool holds one table per instance (`engine.rs`): a module with more
            // is refused here, by counting, rather than after compiling.
            max_tables: 1,
            max_globals: 10_000,
            max_concurrent_compiles: 2,
            compile_wait: Duration::from_secs(30),
        }
    }
}

impl RegistrationLimits {
    /// Refuses `len` bytes of module beyond `max_module_bytes`.
    pub(crate) fn check_size(&self, len: usize) -> Result<(), RegisterError> {
        check(RegistrationLimit::ModuleBytes, len as u64, self.max_module_bytes)
    }

    /// Counts what the Wasm binary `bytes` declares and refuses it if any count exceeds its
    /// bound. Reads section headers, each import (to count compact import groups) and each
    /// function body's length, nothing more; malformed bytes are [`RegisterError::Invalid`].
    pub(crate) fn check_module(&self, bytes: &[u8]) -> Result<(), RegisterError> {
        self.check_size(bytes.len())?;
        let counts = Counts::of(bytes).map_err(|e| RegisterError::Invalid(e.to_string()))?;
        use RegistrationLimit as L;
        for (limit, had, max) in [
            (L::Functions, counts.functions, self.max_functions.into()),
            (L::FunctionBytes, counts.largest_function, self.max_function_bytes),
            (L::CodeBytes, counts.code, self.max_code_bytes),
            (L::Imports, counts.imports, self.max_imports.into()),
            (L::DataSegments, counts.data, self.max_data_segments.into()),
            (L::ElementSegments, counts.elements, self.max_element_segments.into()),
            (L::Tables, counts.tables, self.max_tables.into()),
            (L::Globals, counts.globals, self.max_globals.into()),
        ] {
            check(limit, had, max)?;
        }
        Ok(())
    }
}

fn check(limit: RegistrationLimit, had: u64, max: u64) -> Result<(), RegisterError> {
    if had > max { Err(RegisterError::OverLimit { limit, had, max }) } else { Ok(()) }
}

/// What a module declares, from its section headers.
#[derive(Debug, Default, PartialEq, Eq)]
struct Counts {
    functions: u64,
    largest_function: u64,
    code: u64,
    imports: u64,
    data: u64,
    elements: u64,
    tables: u64,
    globals: u64,
}

impl Counts {
    fn of(bytes: &[u8]) -> wasmparser::Result<Self> {
        let mut counts = Self::default();
        for payload in Parser::new(0).parse_all(bytes) {
            match payload? {
                Payload::ImportSection(section) => {
                    for group in section {
                        match group? {
                            Imports::Single(_, import) => counts.import(import.ty, 1),
                            Imports::Compact1 { items, .. } => {
                                for item in items {
                                    counts.import(item?.ty, 1);
                                }
                            }
                            Imports::Compact2 { ty, names, .. } => {
                                counts.import(ty, names.count().into());
                            }
                        }
                    }
                }
                Payload::FunctionSection(section) => counts.functions += u64::from(section.count()),
                Payload::TableSection(section) => counts.tables += u64::from(section.count()),
                Payload::GlobalSection(section) => counts.globals += u64::from(section.count()),
                Payload::ElementSection(section) => counts.elements += u64::from(section.count()),
                Payload::DataSection(section) => counts.data += u64::from(section.count()),
                Payload::CodeSectionStart { range, .. } => counts.code += range.len() as u64,
                Payload::CodeSectionEntry(body) => {
                    let len = body.range().len() as u64;
                    counts.largest_function = counts.largest_function.max(len);
                }
                _ => {}
            }
        }
        Ok(counts)
    }

    fn import(&mut self, ty: TypeRef, n: u64) {
        self.imports += n;
        match ty {
            TypeRef::Table(_) => self.tables += n,
            TypeRef::Global(_) => self.globals += n,
            _ => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_kind_imported_and_defined() {
        let wasm = wat::parse_str(
            r#"(module
                (import "a" "f" (func)) (import "a" "t" (table 1 funcref))
                (import "a" "g" (global i32)) (import "a" "m" (memory 1))
                (table 1 funcref) (table 1 funcref)
                (global i32 (i32.const 0)) (global i32 (i32.const 0)) (global i32 (i32.const 0))
                (func) (func)
                (elem (i32.const 0) func 1) (elem declare func 2)
                (data (i32.const 0) "a") (data "b") (data "c"))"#,
        )
        .unwrap();
        let counts = Counts::of(&wasm).unwrap();
        let expected = Counts {
            functions: 2,
            imports: 4,
            data: 3,
            elements: 2,
            tables: 3,
            globals: 4,
            ..counts
        };
        assert_eq!(counts, expected);
    }

    #[test]
    fn malformed_bytes_are_invalid_not_a_panic() {
        let limits = RegistrationLimits::default();
        for bytes in [&b""[..], b"\0asm", b"\0asm\x01\0\0\0\x7f", b"\0asm\x01\0\0\0\x03\x05\xff"] {
            assert!(matches!(limits.check_module(bytes), Err(RegisterError::Invalid(_))));
        }
    }

    #[test]
    fn refusals_name_the_bound_its_value_and_the_module() {
        let err = check(RegistrationLimit::Functions, 100_000, 10_000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "module defines 100000 functions; the limit is 10000 (registration.max_functions)"
        );
        assert!(check(RegistrationLimit::Functions, 10_000, 10_000).is_ok());
    }
}
