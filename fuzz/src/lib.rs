//! Luge's fuzz targets, one module each, every one a `run(&[u8])` that feeds untrusted bytes
//! to a real entry point and panics only on a violated invariant (a finding):
//!
//! - [`proto`] — the UDP-RPC datagram: decode → encode is the identity on what decodes, and
//!   encode → decode on every encodable message.
//! - [`http_head`] — raw HTTP/1.1 request heads through hyper's server parser and Luge's
//!   head handling (routes, admin token, `PUT` query, `Luge-*-Us`, `traceparent`).
//! - [`manifest`] — the operator's `luge.toml`, with module paths never opened.
//! - [`upload`] — what `PUT /admin/functions/<name>` hands the runtime: module validation,
//!   registration limits, compile, register and unregister.
//! - [`wasi`] — the WASI preview1 layer, called by a guest with fuzz-chosen pointers, lengths
//!   and iovec arrays.
//!
//! The binaries in `src/bin/` are thin AFL++ harnesses (`cargo afl build`, see
//! `docs/fuzzing.md`); `tests/replay.rs` runs every seed (`fuzz/corpus/<target>/`) and every
//! regression (`fuzz/regressions/<target>/`) through the same functions in `cargo test`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[cfg(feature = "http")]
pub mod http_head;
#[cfg(feature = "manifest")]
pub mod manifest;
pub mod proto;
#[cfg(feature = "runtime")]
pub mod upload;
#[cfg(feature = "runtime")]
pub mod wasi;

/// The files under `path` (itself if it is a file), sorted; hidden files (`.gitkeep`, AFL++'s
/// `.state`) and `README*` are skipped.
pub fn inputs(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    if path.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name.starts_with("README") {
            continue;
        }
        if entry.file_type()?.is_dir() {
            out.extend(inputs(&entry.path())?);
        } else {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

/// A harness binary's `main` without AFL++: runs `target` on every file under each argument
/// (with `--repeat N`, N times over) and reports the resident set size before and after, so a
/// leak shows as growth. A finding panics (the exit status says so).
pub fn replay_main(target: fn(&[u8])) -> ExitCode {
    let mut repeat = 1usize;
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--repeat" {
            match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => repeat = n,
                None => {
                    eprintln!("--repeat needs a number");
                    return ExitCode::from(2);
                }
            }
        } else {
            paths.push(PathBuf::from(arg));
        }
    }
    if paths.is_empty() {
        eprintln!("usage: <target> [--repeat N] FILE|DIR...  (replays inputs through the target)");
        return ExitCode::from(2);
    }
    let mut files = Vec::new();
    for path in &paths {
        match inputs(path) {
            Ok(found) => files.extend(found),
            Err(e) => {
                eprintln!("{}: {e}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    let mut data = Vec::with_capacity(files.len());
    for file in &files {
        match std::fs::read(file) {
            Ok(bytes) => data.push(bytes),
            Err(e) => {
                eprintln!("{}: {e}", file.display());
                return ExitCode::from(2);
            }
        }
    }
    let mut rss_after_first = None;
    for round in 0..repeat {
        for (file, bytes) in files.iter().zip(&data) {
            if repeat == 1 {
                eprintln!("{}", file.display());
            }
            target(bytes);
        }
        if round == 0 {
            rss_after_first = rss_kib();
        }
    }
    let inputs = files.len() * repeat;
    match (rss_after_first, rss_kib()) {
        (Some(first), Some(last)) => println!(
            "replayed {inputs} inputs ({} files × {repeat}); RSS after round 1: {first} KiB, \
             at the end: {last} KiB",
            files.len()
        ),
        _ => println!("replayed {inputs} inputs ({} files × {repeat})", files.len()),
    }
    ExitCode::SUCCESS
}

/// This process's resident set size in KiB (Linux `/proc/self/status`).
pub fn rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// A little-endian cursor over fuzz bytes: every read succeeds, past the end with zeros, so a
/// target turns any input into a value without a length check failing.
#[derive(Debug, Clone)]
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next `N` bytes (zero-padded past the end).
    pub fn array<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0; N];
        let n = N.min(self.data.len());
        out[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        out
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        self.array::<1>()[0]
    }

    /// The next little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.array())
    }

    /// The next little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.array())
    }

    /// The next little-endian u64.
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.array())
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}
