//! The on-disk AoT cache: compiled modules kept between starts, so a restart loads native code
//! instead of compiling it again.
//!
//! Loading an artifact is loading native code (`Module::deserialize` is `unsafe`), so the cache
//! only ever loads what this user wrote, intact:
//!
//! - **Directory.** It is created owner-only (mode 0700). A directory that already exists must
//!   be owned by the runtime's effective uid and not group- or world-writable; otherwise the
//!   runtime serves without the cache and warns (the cache only saves compile time, so an
//!   unusable one degrades, as an uncreatable one always has). This is what keeps other users
//!   from planting code: a digest alone cannot, since whoever can write a file can write its
//!   digest too.
//! - **File format.** `<module sha256>-<engine compatibility hash>.cwasm` holds a 72-byte header
//!   and then exactly what `Module::serialize` produced:
//!
//!   | bytes | content |
//!   |---|---|
//!   | 0..8 | magic `LUGEAOT` and format version `1` |
//!   | 8..40 | SHA-256 of the Wasm module the artifact was compiled from |
//!   | 40..72 | SHA-256 of the rest of the file (the serialized module) |
//!
//!   It is written to a fresh temporary file (mode 0600) and renamed into place, so a reader
//!   sees a whole file or none; the header travels with the artifact it describes, so there is
//!   no second file to keep consistent.
//! - **Load.** The file is opened without following a symlink and must be a regular file this
//!   uid owns and no other user can write (checked on the open file: another user cannot make
//!   one, even in a directory reached through a path it can change later). It is read into
//!   memory once (at most [`MAX_ARTIFACT_BYTES`]); the magic,
//!   the module digest (which must be the digest of the module being registered, so an artifact
//!   copied or renamed from another module is refused) and the content digest are checked on
//!   those bytes, and `Module::deserialize` gets the very same bytes (no re-read, no
//!   time-of-check/time-of-use gap; Wasmtime copies them into its own mapping, so the file may
//!   change or vanish afterwards). A file that fails any check is ignored with a warning, and
//!   the module is compiled and the artifact rewritten.
//! - **Size.** After an artifact is written, while the `*.cwasm` files exceed
//!   [`crate::RuntimeConfig::cache_max_bytes`], the least recently used ones (by modification
//!   time; a load touches its file) that no registered function uses are deleted; if the
//!   registered functions' artifacts alone still exceed it, the new one is deleted again (its
//!   function is served compiled in memory), so the bound holds on disk. An artifact larger
//!   than the whole bound is not written. Unregistering a function deletes its artifact unless
//!   another registered function has the same module.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{DirBuilder, File, OpenOptions};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use sha2::{Digest, Sha256};
use wasmtime::{Engine, Module};

/// Magic and format version at the start of every artifact.
const MAGIC: &[u8; 8] = b"LUGEAOT\x01";
/// Magic, module digest, content digest.
const HEADER_BYTES: usize = 8 + 32 + 32;
/// Largest artifact file read (a bigger file is not one Luge wrote for a module within the
/// registration limits, and is not read into memory).
pub(crate) const MAX_ARTIFACT_BYTES: u64 = 1 << 30;

/// Why a cached artifact was not used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Rejected {
    #[error("cannot read: {0}")]
    Io(#[from] io::Error),
    #[error("larger than {MAX_ARTIFACT_BYTES} bytes")]
    TooLarge,
    #[error("no Luge header (not written by this version of Luge)")]
    NoHeader,
    #[error("compiled from a different module")]
    OtherModule,
    #[error("content digest mismatch (truncated or corrupted)")]
    Digest,
    #[error("Wasmtime refused it: {0}")]
    Wasmtime(String),
    /// Not a regular file of this uid that only it can write (a symlink, another user's file):
    /// not something this program wrote, whatever its header says.
    #[error("not a file of the runtime's uid that only it can write: {0}")]
    NotOurs(String),
}

/// Why an artifact was not written. Either way the module is served, compiled; the next start
/// compiles it again.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotStored {
    #[error("the artifact ({size} bytes) exceeds the cache bound of {bound} bytes")]
    OverBound { size: u64, bound: u64 },
    /// With it, the artifacts of registered functions alone would pass the bound: it was
    /// written, and removed again.
    #[error(
        "the registered functions' artifacts fill the cache bound of {bound} bytes ({total} \
         bytes with this one)"
    )]
    Full { total: u64, bound: u64 },
    /// Creating, writing or renaming the file failed (a full disk, a read-only file system, a
    /// file size limit): no part of it is left under the artifact's name.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A usable (checked) cache directory.
#[derive(Debug)]
pub(crate) struct Cache {
    dir: PathBuf,
    max_bytes: u64,
    /// The engine's compatibility hash, part of every file name.
    compat: u64,
}

impl Cache {
    /// Creates `dir` owner-only if needed and checks that only this user can write to it;
    /// `None` (with a warning) when it cannot be used.
    pub(crate) fn open(engine: &Engine, dir: &Path, max_bytes: u64) -> Option<Self> {
        match usable(dir) {
            Ok(()) => {
                let mut compat = DefaultHasher::new();
                engine.precompile_compatibility_hash().hash(&mut compat);
                Some(Self { dir: dir.to_owned(), max_bytes, compat: compat.finish() })
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "serving without the AoT cache: {e}");
                None
            }
        }
    }

    /// The artifact file name of the module whose SHA-256 is `module_hash` (hex).
    pub(crate) fn file_name(&self, module_hash: &str) -> OsString {
        format!("{module_hash}-{:016x}.cwasm", self.compat).into()
    }

    fn path(&self, module_hash: &str) -> PathBuf {
        self.dir.join(self.file_name(module_hash))
    }

    /// The cached module compiled from the module with SHA-256 `module_hash`, if an intact
    /// artifact of it is cached. `Ok(None)` = nothing cached.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        module_hash: &[u8; 32],
        module_hex: &str,
    ) -> Result<Option<Module>, Rejected> {
        let path = self.path(module_hex);
        // Not through a symlink, and only a file this uid owns and alone can write: the
        // directory was checked when the cache opened, but it may be reached through a path
        // another user can change later; a file of this uid no other user can have put there.
        // (`O_NONBLOCK`: a FIFO planted there must not block the registration in `open`.)
        let flags = libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let file = match File::options().read(true).custom_flags(flags).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(Rejected::NotOurs("a symlink".into()));
            }
            Err(e) => return Err(e.into()),
        };
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(Rejected::NotOurs("not a regular file".into()));
        }
        owned_by_us(&meta).map_err(Rejected::NotOurs)?;
        let mut bytes = Vec::new();
        (&file).take(MAX_ARTIFACT_BYTES + 1).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_ARTIFACT_BYTES {
            return Err(Rejected::TooLarge);
        }
        let artifact = verified(&bytes, module_hash)?;
        // SAFETY: `Module::deserialize` trusts its input to be the output of `Module::serialize`
        // for a compatible engine. `artifact` is exactly the payload of a regular file that this
        // uid owns and alone can write (checked on the open file, not followed through a
        // symlink), in a directory only this uid could write when the cache opened, whose
        // header names the very module
        // being registered and whose SHA-256 matches the digest Luge recorded when it wrote the
        // file: so these bytes are, bit for bit, what this program serialized for this module
        // (not a truncated, corrupted, renamed or foreign file). The name carries the engine's
        // compatibility hash and Wasmtime re-checks its version and settings header. The bytes
        // were read once into memory and are what was checked; Wasmtime copies them, so later
        // changes to the file cannot affect the loaded module.
        let module = unsafe { Module::deserialize(engine, artifact) }
            .map_err(|e| Rejected::Wasmtime(format!("{e:#}")))?;
        // A load is a use: eviction goes by modification time (best effort; the file is ours).
        if let Err(e) = file.set_modified(SystemTime::now()) {
            tracing::debug!(path = %path.display(), "cannot touch the artifact: {e}");
        }
        Ok(Some(module))
    }

    /// Writes the artifact of the module with SHA-256 `module_hash` (header and `serialized`),
    /// atomically; then evicts least recently used artifacts beyond the size bound, sparing
    /// `keep` (file names, see [`Self::file_name`]) and this one.
    pub(crate) fn store(
        &self,
        module_hash: &[u8; 32],
        module_hex: &str,
        serialized: &[u8],
        keep: &HashSet<OsString>,
    ) -> Result<(), NotStored> {
        let size = (HEADER_BYTES + serialized.len()) as u64;
        if size > self.max_bytes {
            return Err(NotStored::OverBound { size, bound: self.max_bytes });
        }
        let path = self.path(module_hex);
        let mut header = [0u8; HEADER_BYTES];
        header[..8].copy_from_slice(MAGIC);
        header[8..40].copy_from_slice(module_hash);
        header[40..].copy_from_slice(&Sha256::digest(serialized));
        write_atomically(&path, &[&header, serialized])
            .map_err(|source| NotStored::Write { path: path.clone(), source })?;
        let total = self.evict(&path, keep);
        if total > self.max_bytes {
            // The bound holds on disk (a volume sized to it must not fill): this function is
            // served compiled in memory, and compiled again at the next start.
            self.remove(module_hex);
            return Err(NotStored::Full { total, bound: self.max_bytes });
        }
        Ok(())
    }

    /// Deletes the artifact of the module with SHA-256 `module_hex`, if any.
    pub(crate) fn remove(&self, module_hex: &str) {
        let path = self.path(module_hex);
        match std::fs::remove_file(&path) {
            Ok(()) => tracing::debug!(path = %path.display(), "artifact removed"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(path = %path.display(), "cannot remove the artifact: {e}"),
        }
    }

    /// Deletes the least recently used `*.cwasm` files not in `keep` (nor `written`) while the
    /// directory's artifacts exceed the bound; returns their total size then (0 if the
    /// directory cannot be listed).
    fn evict(&self, written: &Path, keep: &HashSet<OsString>) -> u64 {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) => {
                tracing::warn!(dir = %self.dir.display(), "cannot list the AoT cache: {e}");
                return 0;
            }
        };
        let mut total = 0u64;
        let mut candidates = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "cwasm") {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() {
                continue;
            }
            total = total.saturating_add(meta.len());
            if path != written && !keep.contains(&entry.file_name()) {
                let used = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                candidates.push((used, path, meta.len()));
            }
        }
        if total <= self.max_bytes {
            return total;
        }
        candidates.sort();
        for (_, path, len) in candidates {
            if total <= self.max_bytes {
                break;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    total -= len;
                    tracing::info!(path = %path.display(), "evicted from the AoT cache");
                }
                Err(e) => tracing::warn!(path = %path.display(), "cannot evict: {e}"),
            }
        }
        total
    }
}

/// The serialized module inside `bytes` if its header is Luge's, names `module_hash` and
/// carries the digest of the rest.
fn verified<'a>(bytes: &'a [u8], module_hash: &[u8; 32]) -> Result<&'a [u8], Rejected> {
    if bytes.len() < HEADER_BYTES || &bytes[..8] != MAGIC {
        return Err(Rejected::NoHeader);
    }
    let (header, artifact) = bytes.split_at(HEADER_BYTES);
    if &header[8..40] != module_hash {
        return Err(Rejected::OtherModule);
    }
    if header[40..] != Sha256::digest(artifact)[..] {
        return Err(Rejected::Digest);
    }
    Ok(artifact)
}

/// Whether `meta` (a file's or the directory's) is owned by this uid and no other user can
/// write it.
fn owned_by_us(meta: &std::fs::Metadata) -> Result<(), String> {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Err(format!("owned by uid {}, not by the runtime's uid {uid}", meta.uid()));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!("mode {:o} lets other users write into it", meta.mode() & 0o7777));
    }
    Ok(())
}

/// Creates `dir` (mode 0700) if needed and checks it is a directory only this uid can write.
fn usable(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = std::fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other("not a directory"));
    }
    owned_by_us(&meta).map_err(|e| io::Error::other(format!("{e} (make it 0700)")))?;
    Ok(())
}

/// Writes `parts` to a fresh owner-only temporary file next to `path` and renames it there. On
/// failure (say, the disk filled up half way) the temporary file is deleted: nothing is left
/// under `path`, and nothing else that would take space.
fn write_atomically(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp{}-{n}", std::process::id()));
    let written = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut file| parts.iter().try_for_each(|part| file.write_all(part)))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err()
        && let Err(e) = std::fs::remove_file(&tmp)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(path = %tmp.display(), "cannot remove the partial artifact: {e}");
    }
    written
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_an_intact_artifact_of_this_module_verifies() {
        let module = [7u8; 32];
        let artifact = b"serialized module";
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(&module);
        file.extend_from_slice(&Sha256::digest(artifact));
        file.extend_from_slice(artifact);
        assert_eq!(verified(&file, &module).unwrap(), artifact);
        assert!(matches!(verified(&file, &[8u8; 32]), Err(Rejected::OtherModule)));
        assert!(matches!(verified(&file[..file.len() - 1], &module), Err(Rejected::Digest)));
        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(matches!(verified(&flipped, &module), Err(Rejected::Digest)));
        assert!(matches!(verified(&file[..HEADER_BYTES - 1], &module), Err(Rejected::NoHeader)));
        assert!(matches!(verified(artifact, &module), Err(Rejected::NoHeader)));
    }
}
