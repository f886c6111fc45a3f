//! Luge's own WASI preview1 layer: in-memory stdin/stdout/stderr, args and environment, clocks
//! and randomness — and nothing that could block a worker thread.
//!
//! A sandbox runs as a user-level task on a worker's executor, so a host call must never block
//! the OS thread or need a tokio runtime. The layer therefore implements only what the
//! Sledge ABI needs (stdin in, stdout out, stderr to the log, `proc_exit`), and links every other
//! preview1 function as a stub that returns `ENOSYS` (or `EBADF` for descriptors that do not
//! exist, `ENOTSUP` for `poll_oneoff`, a blocking wait): a C program built against wasi-libc
//! links and fails cleanly if it reaches for files, sockets or a sleep. Imports outside preview1
//! are rejected at registration.
//!
//! All guest pointers are bounds-checked here; a bad pointer yields `EFAULT`, never a panic.

use wasmtime::{Caller, Extern, FuncType, Linker, Memory, Val, ValType};

/// The preview1 module name.
pub(crate) const MODULE: &str = "wasi_snapshot_preview1";

const SUCCESS: i32 = 0;
const EBADF: i32 = 8;
const EFAULT: i32 = 21;
const EINVAL: i32 = 28;
const ENOSYS: i32 = 52;
const ENOTSUP: i32 = 58;
const ESPIPE: i32 = 70;

/// How many bytes of a request's stderr reach the log (`stderr_log` rate-limits the lines).
pub(crate) const STDERR_KEPT: usize = 1024;

/// The guest ended itself with `proc_exit(code)`.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("guest exited with status {0}")]
pub(crate) struct GuestExit(pub i32);

/// The guest wrote more to stdout than its cap allows.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("output cap exceeded")]
pub(crate) struct OutputCapExceeded;

/// The guest's NUL-free argument strings and `KEY=value` environment strings.
#[derive(Debug, Default)]
pub(crate) struct Strings {
    pub args: Vec<Vec<u8>>,
    pub env: Vec<Vec<u8>>,
}

/// Builds a sandbox's [`Strings`] when its guest first asks for them.
pub(crate) struct MakeStrings(Box<dyn FnOnce() -> Strings + Send>);

impl std::fmt::Debug for MakeStrings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MakeStrings")
    }
}

/// Per-sandbox WASI state: the pipes, args and environment.
#[derive(Debug, Default)]
pub(crate) struct WasiCtx {
    /// Request payload.
    pub stdin: Vec<u8>,
    /// Read position in `stdin`.
    pub stdin_pos: usize,
    /// Response bytes written so far.
    pub stdout: Vec<u8>,
    /// Stdout cap.
    pub stdout_cap: usize,
    /// The first bytes of stderr (for the log).
    pub stderr: Vec<u8>,
    /// Stderr bytes dropped beyond [`STDERR_KEPT`].
    pub stderr_dropped: usize,
    /// The args and environment, once built ([`WasiCtx::strings`]).
    strings: Strings,
    /// What builds them, until the guest first asks for them.
    make_strings: Option<MakeStrings>,
    /// The instance's exported memory, cached after instantiation.
    pub memory: Option<Memory>,
    /// When the guest first read a CPU-time clock: those clocks count from there
    /// ([`clock_time_get`]).
    cpu_clock_zero: Option<std::time::Instant>,
}

type Result<T> = wasmtime::Result<T>;

impl WasiCtx {
    /// Sets the guest's args and environment, to be built by `make` when the guest first calls
    /// `args_*` or `environ_*`: most functions never do (wasi-libc reads them only for a `main`
    /// that takes them or a `getenv`), and building them costs a request a few allocations.
    pub(crate) fn set_strings(&mut self, make: impl FnOnce() -> Strings + Send + 'static) {
        self.strings = Strings::default();
        self.make_strings = Some(MakeStrings(Box::new(make)));
    }

    /// The args and environment, built now if they were not yet.
    pub(crate) fn strings(&mut self) -> &Strings {
        if let Some(MakeStrings(make)) = self.make_strings.take() {
            self.strings = make();
        }
        &self.strings
    }
}

/// Store data that holds a [`WasiCtx`]: the host functions here are generic over it, so this
/// layer knows nothing of the sandbox that embeds it.
pub(crate) trait WasiView: 'static {
    /// The WASI state.
    fn wasi(&self) -> &WasiCtx;
    /// The WASI state, mutably.
    fn wasi_mut(&mut self) -> &mut WasiCtx;
}

fn memory<T: WasiView>(caller: &mut Caller<'_, T>) -> Option<Memory> {
    if let Some(m) = caller.data().wasi().memory {
        return Some(m);
    }
    match caller.get_export("memory") {
        Some(Extern::Memory(m)) => Some(m),
        _ => None,
    }
}

fn slice(mem: &[u8], ptr: i32, len: u32) -> Option<&[u8]> {
    let start = ptr as u32 as usize;
    mem.get(start..start.checked_add(len as usize)?)
}

fn slice_mut(mem: &mut [u8], ptr: i32, len: u32) -> Option<&mut [u8]> {
    let start = ptr as u32 as usize;
    mem.get_mut(start..start.checked_add(len as usize)?)
}

fn read_u32(mem: &[u8], ptr: u32) -> Option<u32> {
    let b = slice(mem, ptr as i32, 4)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fn write_bytes(mem: &mut [u8], ptr: i32, bytes: &[u8]) -> bool {
    match slice_mut(mem, ptr, bytes.len() as u32) {
        Some(dst) => {
            dst.copy_from_slice(bytes);
            true
        }
        None => false,
    }
}

/// The `(ptr, len)` pairs of an iovec array.
fn iovecs(mem: &[u8], iovs: i32, count: i32) -> Option<Vec<(u32, u32)>> {
    let count = u32::try_from(count).ok()?;
    if count > 1024 {
        return None;
    }
    (0..count)
        .map(|i| {
            let at = (iovs as u32).checked_add(i * 8)?;
            Some((read_u32(mem, at)?, read_u32(mem, at.checked_add(4)?)?))
        })
        .collect()
}

fn fd_read<T: WasiView>(mut caller: Caller<'_, T>, fd: i32, iovs: i32, n: i32, nread: i32) -> i32 {
    if fd != 0 {
        return EBADF;
    }
    let Some(mem) = memory(&mut caller) else { return EFAULT };
    let (mem, state) = mem.data_and_store_mut(&mut caller);
    let Some(vecs) = iovecs(mem, iovs, n) else { return EFAULT };
    let wasi = state.wasi_mut();
    let mut total = 0u32;
    for (ptr, len) in vecs {
        let rest = &wasi.stdin[wasi.stdin_pos..];
        let take = rest.len().min(len as usize);
        if !write_bytes(mem, ptr as i32, &rest[..take]) {
            return EFAULT;
        }
        wasi.stdin_pos += take;
        total += take as u32;
        if take < len as usize {
            break;
        }
    }
    if write_bytes(mem, nread, &total.to_le_bytes()) { SUCCESS } else { EFAULT }
}

fn fd_write<T: WasiView>(
    mut caller: Caller<'_, T>,
    fd: i32,
    iovs: i32,
    n: i32,
    nwritten: i32,
) -> Result<i32> {
    if fd != 1 && fd != 2 {
        return Ok(EBADF);
    }
    let Some(mem) = memory(&mut caller) else { return Ok(EFAULT) };
    let (mem, state) = mem.data_and_store_mut(&mut caller);
    let Some(vecs) = iovecs(mem, iovs, n) else { return Ok(EFAULT) };
    let wasi = state.wasi_mut();
    let mut total = 0u32;
    for (ptr, len) in vecs {
        let Some(bytes) = slice(mem, ptr as i32, len) else { return Ok(EFAULT) };
        if fd == 1 {
            if wasi.stdout.len() + bytes.len() > wasi.stdout_cap {
                return Err(wasmtime::Error::new(OutputCapExceeded));
            }
            wasi.stdout.extend_from_slice(bytes);
        } else {
            let keep = STDERR_KEPT.saturating_sub(wasi.stderr.len()).min(bytes.len());
            wasi.stderr.extend_from_slice(&bytes[..keep]);
            wasi.stderr_dropped += bytes.len() - keep;
        }
        total = total.saturating_add(len);
    }
    Ok(if write_bytes(mem, nwritten, &total.to_le_bytes()) { SUCCESS } else { EFAULT })
}

/// Writes a preview1 string table (`*_sizes_get` / `*_get` pairs share this layout).
fn strings_get<T: WasiView>(
    caller: &mut Caller<'_, T>,
    pick: fn(&Strings) -> &[Vec<u8>],
    ptrs: i32,
    buf: i32,
) -> i32 {
    let Some(mem) = memory(caller) else { return EFAULT };
    let (mem, state) = mem.data_and_store_mut(caller);
    let mut at = buf as u32;
    for (i, s) in pick(state.wasi_mut().strings()).iter().enumerate() {
        let slot = (ptrs as u32).wrapping_add(4 * i as u32);
        if !write_bytes(mem, slot as i32, &at.to_le_bytes())
            || !write_bytes(mem, at as i32, s)
            || !write_bytes(mem, at.wrapping_add(s.len() as u32) as i32, &[0])
        {
            return EFAULT;
        }
        at = at.wrapping_add(s.len() as u32 + 1);
    }
    SUCCESS
}

fn strings_sizes<T: WasiView>(
    caller: &mut Caller<'_, T>,
    pick: fn(&Strings) -> &[Vec<u8>],
    count: i32,
    size: i32,
) -> i32 {
    let Some(mem) = memory(caller) else { return EFAULT };
    let (mem, state) = mem.data_and_store_mut(caller);
    let strings = pick(state.wasi_mut().strings());
    let n = strings.len() as u32;
    let bytes: u32 = strings.iter().map(|s| s.len() as u32 + 1).sum();
    if write_bytes(mem, count, &n.to_le_bytes()) && write_bytes(mem, size, &bytes.to_le_bytes()) {
        SUCCESS
    } else {
        EFAULT
    }
}

fn args(s: &Strings) -> &[Vec<u8>] {
    &s.args
}

fn env(s: &Strings) -> &[Vec<u8>] {
    &s.env
}

/// The clocks: real time and monotonic time are the host's; the process and thread CPU-time
/// clocks (ids 2 and 3) are the request's own — the time since the guest first read one — never
/// the node's process or worker thread, whose CPU time would tell a guest how busy the other
/// tenants keep them.
fn clock_time_get<T: WasiView>(mut caller: Caller<'_, T>, id: i32, _prec: i64, out: i32) -> i32 {
    let ns = match id {
        0 | 1 => {
            let clock = if id == 0 { libc::CLOCK_REALTIME } else { libc::CLOCK_MONOTONIC };
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: `ts` is a valid, writable timespec and `clock` a valid clock id.
            if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
                return EINVAL;
            }
            (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
        }
        2 | 3 => {
            let wasi = caller.data_mut().wasi_mut();
            let zero = *wasi.cpu_clock_zero.get_or_insert_with(std::time::Instant::now);
            u64::try_from(zero.elapsed().as_nanos()).unwrap_or(u64::MAX)
        }
        _ => return EINVAL,
    };
    let Some(mem) = memory(&mut caller) else { return EFAULT };
    if write_bytes(mem.data_mut(&mut caller), out, &ns.to_le_bytes()) { SUCCESS } else { EFAULT }
}

fn clock_res_get<T: WasiView>(mut caller: Caller<'_, T>, id: i32, out: i32) -> i32 {
    if !(0..=3).contains(&id) {
        return EINVAL;
    }
    let Some(mem) = memory(&mut caller) else { return EFAULT };
    if write_bytes(mem.data_mut(&mut caller), out, &1u64.to_le_bytes()) { SUCCESS } else { EFAULT }
}

/// Bytes one `random_get` fills at most: a host call cannot be interrupted, so one over the
/// whole of a large linear memory would hold the worker past any preemption (~0.1 s for
/// 64 MiB); a larger request fails with `EINVAL` (libc asks for 256 bytes at a time).
pub(crate) const MAX_RANDOM_BYTES: u32 = 1 << 20;

fn random_get<T: WasiView>(mut caller: Caller<'_, T>, buf: i32, len: i32) -> i32 {
    if len as u32 > MAX_RANDOM_BYTES {
        return EINVAL;
    }
    let Some(mem) = memory(&mut caller) else { return EFAULT };
    let Some(dst) = slice_mut(mem.data_mut(&mut caller), buf, len as u32) else { return EFAULT };
    let mut filled = 0;
    while filled < dst.len() {
        let rest = &mut dst[filled..];
        // SAFETY: `rest` is a valid writable buffer of `rest.len()` bytes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n <= 0 {
            return EINVAL;
        }
        filled += n as usize;
    }
    SUCCESS
}

fn fd_fdstat_get<T: WasiView>(mut caller: Caller<'_, T>, fd: i32, out: i32) -> i32 {
    if !(0..=2).contains(&fd) {
        return EBADF;
    }
    // filetype CHARACTER_DEVICE (2), flags (APPEND for stdout/stderr), all rights.
    let mut stat = [0u8; 24];
    stat[0] = 2;
    stat[2] = u8::from(fd != 0);
    stat[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    let Some(mem) = memory(&mut caller) else { return EFAULT };
    if write_bytes(mem.data_mut(&mut caller), out, &stat) { SUCCESS } else { EFAULT }
}

fn fd_only(fd: i32, ok: i32) -> i32 {
    if (0..=2).contains(&fd) { ok } else { EBADF }
}

/// Preview1 functions Luge does not provide, with their signatures (`i` = i32, `I` = i64; all
/// return an i32 errno): linked so that wasi-libc programs instantiate, answering `ENOSYS`.
const UNSUPPORTED: &[(&str, &str)] = &[
    ("fd_advise", "iIIi"),
    ("fd_allocate", "iII"),
    ("fd_datasync", "i"),
    ("fd_fdstat_set_flags", "ii"),
    ("fd_fdstat_set_rights", "iII"),
    ("fd_filestat_get", "ii"),
    ("fd_filestat_set_size", "iI"),
    ("fd_filestat_set_times", "iIIi"),
    ("fd_pread", "iiiIi"),
    ("fd_pwrite", "iiiIi"),
    ("fd_readdir", "iiiIi"),
    ("fd_renumber", "ii"),
    ("fd_sync", "i"),
    ("fd_tell", "ii"),
    ("path_create_directory", "iii"),
    ("path_filestat_get", "iiiii"),
    ("path_filestat_set_times", "iiiiIIi"),
    ("path_link", "iiiiiii"),
    ("path_open", "iiiiiIIii"),
    ("path_readlink", "iiiiii"),
    ("path_remove_directory", "iii"),
    ("path_rename", "iiiiii"),
    ("path_symlink", "iiiii"),
    ("path_unlink_file", "iii"),
    ("proc_raise", "i"),
    ("sock_accept", "iii"),
    ("sock_recv", "iiiiii"),
    ("sock_send", "iiiii"),
    ("sock_shutdown", "ii"),
];

/// The preview1 functions implemented for real (the rest of preview1 is in [`UNSUPPORTED`]).
const IMPLEMENTED: &[&str] = &[
    "fd_read",
    "fd_write",
    "proc_exit",
    "args_get",
    "args_sizes_get",
    "environ_get",
    "environ_sizes_get",
    "clock_time_get",
    "clock_res_get",
    "random_get",
    "fd_fdstat_get",
    "fd_close",
    "fd_seek",
    "fd_prestat_get",
    "fd_prestat_dir_name",
    "sched_yield",
    "poll_oneoff",
];

/// Whether the linker defines `module::name`.
pub(crate) fn provides(module: &str, name: &str) -> bool {
    module == MODULE && (IMPLEMENTED.contains(&name) || UNSUPPORTED.iter().any(|(n, _)| *n == name))
}

/// Defines every preview1 import in `linker`.
pub(crate) fn add_to_linker<T: WasiView>(linker: &mut Linker<T>) -> Result<()> {
    linker.func_wrap(MODULE, "fd_read", fd_read)?;
    linker.func_wrap(MODULE, "fd_write", fd_write)?;
    linker.func_wrap(MODULE, "proc_exit", |code: i32| -> Result<()> {
        Err(wasmtime::Error::new(GuestExit(code)))
    })?;
    linker.func_wrap(MODULE, "args_get", |mut c: Caller<'_, T>, p: i32, b: i32| {
        strings_get(&mut c, args, p, b)
    })?;
    linker.func_wrap(MODULE, "args_sizes_get", |mut c: Caller<'_, T>, n: i32, s: i32| {
        strings_sizes(&mut c, args, n, s)
    })?;
    linker.func_wrap(MODULE, "environ_get", |mut c: Caller<'_, T>, p: i32, b: i32| {
        strings_get(&mut c, env, p, b)
    })?;
    linker.func_wrap(MODULE, "environ_sizes_get", |mut c: Caller<'_, T>, n: i32, s: i32| {
        strings_sizes(&mut c, env, n, s)
    })?;
    linker.func_wrap(MODULE, "clock_time_get", clock_time_get)?;
    linker.func_wrap(MODULE, "clock_res_get", clock_res_get)?;
    linker.func_wrap(MODULE, "random_get", random_get)?;
    linker.func_wrap(MODULE, "fd_fdstat_get", fd_fdstat_get)?;
    linker.func_wrap(MODULE, "fd_close", |fd: i32| fd_only(fd, SUCCESS))?;
    linker.func_wrap(MODULE, "fd_seek", |fd: i32, _off: i64, _wh: i32, _out: i32| {
        fd_only(fd, ESPIPE)
    })?;
    linker.func_wrap(MODULE, "fd_prestat_get", |_fd: i32, _out: i32| EBADF)?;
    linker.func_wrap(MODULE, "fd_prestat_dir_name", |_fd: i32, _p: i32, _l: i32| EBADF)?;
    linker.func_wrap(MODULE, "sched_yield", || SUCCESS)?;
    // Blocking waits are refused: a sandbox must never block its worker thread.
    linker.func_wrap(MODULE, "poll_oneoff", |_i: i32, _o: i32, _n: i32, _ne: i32| ENOTSUP)?;
    let engine = linker.engine().clone();
    for (name, sig) in UNSUPPORTED {
        let params = sig.chars().map(|c| if c == 'I' { ValType::I64 } else { ValType::I32 });
        let ty = FuncType::new(&engine, params, [ValType::I32]);
        linker.func_new(MODULE, name, ty, |_caller, _params, results| {
            results[0] = Val::I32(ENOSYS);
            Ok(())
        })?;
    }
    Ok(())
}

/// Takes the stderr bytes kept for the log, as text.
pub(crate) fn stderr_text(wasi: &WasiCtx) -> Option<String> {
    if wasi.stderr.is_empty() {
        return None;
    }
    // One log line, whatever the guest wrote: its line breaks and other control characters are
    // escaped (`\n`), so it cannot forge lines of the node's own log.
    let mut text = String::new();
    for c in String::from_utf8_lossy(&wasi.stderr).trim_end().chars() {
        if c.is_control() {
            text.extend(c.escape_default());
        } else {
            text.push(c);
        }
    }
    if wasi.stderr_dropped > 0 {
        text.push_str(&format!(" … ({} more bytes dropped)", wasi.stderr_dropped));
    }
    Some(text)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn stderr_is_one_log_line_whatever_the_guest_wrote() {
        let ctx = WasiCtx {
            stderr: b"oops\n2026-11-28 WARN luge_runtime: forged\r\x1b[31m\ttab \xc3\xa9\n"
                .to_vec(),
            ..WasiCtx::default()
        };
        let text = stderr_text(&ctx).unwrap();
        assert_eq!(text, "oops\\n2026-11-28 WARN luge_runtime: forged\\r\\u{1b}[31m\\ttab \u{e9}");
        assert!(!text.contains('\n') && !text.contains('\r'), "{text}");
    }

    #[test]
    fn args_and_environment_are_built_once_and_only_when_asked_for() {
        let built = Arc::new(AtomicUsize::new(0));
        let mut ctx = WasiCtx::default();
        let counter = Arc::clone(&built);
        ctx.set_strings(move || {
            counter.fetch_add(1, Ordering::Relaxed);
            Strings { args: vec![b"f".to_vec()], env: vec![b"K=v".to_vec()] }
        });
        assert_eq!(built.load(Ordering::Relaxed), 0, "built before the guest asked");
        assert_eq!(ctx.strings().args, vec![b"f".to_vec()]);
        assert_eq!(ctx.strings().env, vec![b"K=v".to_vec()]);
        assert_eq!(built.load(Ordering::Relaxed), 1, "built more than once");
    }
}
