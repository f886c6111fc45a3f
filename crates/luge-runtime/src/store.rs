//! The data a sandbox's `Store` holds: its WASI state and the limiter that enforces the
//! function's memory cap. Registration links modules against this type and sandboxes run with
//! it; the WASI layer sees it only through [`WasiView`].

use wasmtime::ResourceLimiter;

use crate::wasi::{WasiCtx, WasiView};

/// Store data of a sandbox.
pub(crate) struct SandboxState {
    pub wasi: WasiCtx,
    pub limiter: MemoryLimiter,
}

/// Enforces the function's linear-memory cap, remembering whether the guest hit it.
pub(crate) struct MemoryLimiter {
    pub cap: usize,
    pub hit: bool,
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.cap {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }
}

impl WasiView for SandboxState {
    fn wasi(&self) -> &WasiCtx {
        &self.wasi
    }

    fn wasi_mut(&mut self) -> &mut WasiCtx {
        &mut self.wasi
    }
}
