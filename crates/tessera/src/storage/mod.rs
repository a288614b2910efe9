//! Storage: the only code that touches the file system or the network. This module owns the
//! small [`Storage`] trait and its shared vocabulary ([`StorageError`], [`Bytes`],
//! [`WriteHandle`], [`LockGuard`], [`ReadMode`], [`LockKind`]), plus the backends:
//! [`LocalStorage`] (std::fs, pread or mmap), [`ObjectStorage`] (S3-compatible object stores),
//! [`RoutedStorage`] (each path to its backend by URI scheme), [`MemoryStorage`] (in memory, for
//! tests), [`FailingStorage`] (fault injection, for crash tests) and [`PowerLossStorage`] (in
//! memory, tracking what is durable, for power-loss tests).
//!
//! Contract shared by every backend (checked by one conformance suite run against all of them):
//! files are created new, appended to and finished once, and never modified afterwards (except
//! being replaced whole by [`Storage::write_atomic`] or removed); reads past the end fail with
//! [`StorageError::OutOfBounds`]; missing paths fail with [`StorageError::NotFound`].

use std::fmt::Debug;
use std::mem::MaybeUninit;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::uninit::write_bytes;

mod failing;
mod instrumented;
mod local;
mod memory;
mod object;
mod object_http;
mod power_loss;
mod router;
mod staged;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod s3_testing;

pub use failing::FailingStorage;
pub use instrumented::InstrumentedStorage;
pub use local::LocalStorage;
pub use memory::MemoryStorage;
pub(crate) use object::MAX_PART_SIZE;
pub use object::{ObjectStorage, ObjectStoreOptions, S3_SCHEME};
pub use object_http::{RequestKind, RequestTally};
pub use power_loss::PowerLossStorage;
pub use router::RoutedStorage;
pub use staged::StagedFile;
pub(crate) use staged::{Staged, STAGED_NAME};

/// Errors of the storage layer; each names the path and the operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// An operating-system error.
    #[error("{op} {path}: {source}")]
    Io {
        /// The operation that failed ("open", "read", "write", "fsync", "rename", ...).
        op: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file or folder does not exist.
    #[error("{path} does not exist")]
    NotFound {
        /// The missing path.
        path: PathBuf,
    },
    /// A read past the end of a file.
    #[error("{path}: read of {len} bytes at offset {offset} passes the end of the file ({size} bytes)")]
    OutOfBounds {
        /// The file.
        path: PathBuf,
        /// Start of the read.
        offset: u64,
        /// Length of the read.
        len: u64,
        /// The file's size.
        size: u64,
    },
    /// A non-waiting lock request found the lock taken.
    #[error("{path} is locked by another process or thread")]
    WouldBlock {
        /// The lock file.
        path: PathBuf,
    },
    /// A fault injected by `FailingStorage` (tests only).
    #[error("injected fault at {op} {path}")]
    Injected {
        /// The operation.
        op: &'static str,
        /// The path.
        path: PathBuf,
    },
}

impl StorageError {
    /// The path the failed operation was on.
    pub fn path(&self) -> Option<&Path> {
        match self {
            StorageError::Io { path, .. }
            | StorageError::NotFound { path }
            | StorageError::OutOfBounds { path, .. }
            | StorageError::WouldBlock { path }
            | StorageError::Injected { path, .. } => Some(path),
        }
    }

    /// Maps an OS error of `op` on `path`: a "not found" error becomes [`StorageError::NotFound`],
    /// anything else [`StorageError::Io`].
    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            StorageError::NotFound { path: path.to_path_buf() }
        } else {
            StorageError::Io { op, path: path.to_path_buf(), source }
        }
    }

    /// An [`StorageError::Io`] of the given kind, for backends that have no OS error to report.
    pub(crate) fn kind(op: &'static str, path: &Path, kind: std::io::ErrorKind) -> Self {
        StorageError::Io { op, path: path.to_path_buf(), source: std::io::Error::from(kind) }
    }

    /// Checks that `offset..offset + len` lies within a file of `size` bytes and returns the
    /// range as `usize`s.
    pub(crate) fn check_range(path: &Path, offset: u64, len: u64, size: u64) -> Result<(usize, usize), StorageError> {
        let oob = || StorageError::OutOfBounds { path: path.to_path_buf(), offset, len, size };
        match offset.checked_add(len) {
            Some(end) if end <= size => {
                let start = usize::try_from(offset).map_err(|_| oob())?;
                let len = usize::try_from(len).map_err(|_| oob())?;
                Ok((start, len))
            }
            _ => Err(oob()),
        }
    }
}

/// Whether `name` is a temporary file of `write_atomic` or `write_new`
/// (`.<name>.tmp-<ms>-<pid>-<counter>`, or `.<name>.tmp-<pid>-<counter>` before format 3), which
/// `list_dir` hides.
pub(crate) fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp-")
}

/// The name of a new temporary file for `name`: `.<name>.tmp-<ms>-<pid>-<counter>`, where `ms`
/// (milliseconds since the epoch) lets a later vacuum tell how old a left-over one is.
pub(crate) fn temp_name(name: &str, counter: u64) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    format!(".{name}.tmp-{ms}-{}-{counter}", std::process::id())
}

/// The creation time (milliseconds since the epoch) written into a temporary file's name by
/// [`temp_name`]; `None` for names without one (written before format 3).
pub(crate) fn temp_created_ms(name: &str) -> Option<u64> {
    let (_, tail) = name.rsplit_once(".tmp-")?;
    let mut parts = tail.split('-');
    let (ms, _pid, _counter) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    ms.parse().ok()
}

/// How the local backend reads files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadMode {
    /// `pread` into an owned buffer.
    #[default]
    Pread,
    /// Memory-map the file and hand out borrowed slices of the mapping.
    Mmap,
}

/// Shared or exclusive advisory lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// Many holders at once.
    Shared,
    /// One holder, no shared holders.
    Exclusive,
}

/// What a [`Bytes`] points into.
#[derive(Clone)]
enum Owner {
    /// An owned buffer.
    Vec(Arc<Vec<u8>>),
    /// A read-only memory map of an immutable file.
    Mmap(Arc<memmap2::Mmap>),
    /// A buffer of an HTTP client (object stores).
    Shared(bytes::Bytes),
}

impl Owner {
    fn as_slice(&self) -> &[u8] {
        match self {
            Owner::Vec(v) => v,
            Owner::Mmap(m) => m,
            Owner::Shared(b) => b,
        }
    }
}

/// Bytes read from storage: an owned buffer or a slice of a memory map, cheap to clone and slice.
#[derive(Clone)]
pub struct Bytes {
    owner: Owner,
    start: usize,
    len: usize,
}

impl Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bytes({} bytes)", self.len)
    }
}

impl Bytes {
    /// Wraps an owned buffer.
    pub fn from_vec(v: Vec<u8>) -> Self {
        Self::from_arc(Arc::new(v))
    }

    /// Wraps a shared owned buffer (no copy).
    pub(crate) fn from_arc(v: Arc<Vec<u8>>) -> Self {
        let len = v.len();
        Self { owner: Owner::Vec(v), start: 0, len }
    }

    /// Wraps a buffer of an HTTP client (no copy).
    pub(crate) fn from_shared(b: bytes::Bytes) -> Self {
        let len = b.len();
        Self { owner: Owner::Shared(b), start: 0, len }
    }

    /// `len` bytes of a memory map starting at `start` (no copy). The caller has checked the
    /// range.
    pub(crate) fn from_mmap(map: Arc<memmap2::Mmap>, start: usize, len: usize) -> Self {
        debug_assert!(start.checked_add(len).is_some_and(|end| end <= map.len()));
        Self { owner: Owner::Mmap(map), start, len }
    }

    /// A sub-slice sharing the same buffer, in O(1).
    ///
    /// # Panics
    /// If `start + len` passes the end of `self`.
    pub fn slice(&self, start: usize, len: usize) -> Self {
        assert!(
            start.checked_add(len).is_some_and(|end| end <= self.len),
            "Bytes::slice({start}, {len}) out of range for {} bytes",
            self.len
        );
        Self { owner: self.owner.clone(), start: self.start + start, len }
    }

    /// An owned copy (no copy when this is the sole owner of a whole owned buffer).
    pub fn into_vec(self) -> Vec<u8> {
        match self.owner {
            Owner::Vec(v) if self.start == 0 && self.len == v.len() => {
                Arc::try_unwrap(v).unwrap_or_else(|shared| shared.as_ref().clone())
            }
            owner => owner.as_slice()[self.start..self.start + self.len].to_vec(),
        }
    }
}

impl Default for Bytes {
    /// Empty bytes.
    fn default() -> Self {
        Self::from_vec(Vec::new())
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Self::from_vec(v)
    }
}

impl Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.owner.as_slice()[self.start..self.start + self.len]
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for Bytes {
    /// Compares contents.
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Bytes {}

/// A file being written. Bytes are appended; `finish` flushes, fsyncs and closes it.
pub trait WriteHandle: Send {
    /// Appends bytes.
    ///
    /// # Errors
    /// An I/O error naming the file.
    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError>;
    /// Bytes written so far.
    fn position(&self) -> u64;
    /// Flushes, fsyncs and closes the file.
    ///
    /// # Errors
    /// An I/O error naming the file.
    fn finish(self: Box<Self>) -> Result<(), StorageError>;
    /// Appends the concatenation of `parts` (one vectored write where the backend can; used to
    /// write a tile's rows straight from the caller's buffer).
    ///
    /// # Errors
    /// An I/O error naming the file.
    fn write_all_vectored(&mut self, parts: &[&[u8]]) -> Result<(), StorageError> {
        for p in parts {
            self.write_all(p)?;
        }
        Ok(())
    }
}

/// Held lock; released on drop.
pub struct LockGuard {
    _inner: Box<dyn Send + Sync>,
}

impl LockGuard {
    /// A guard that releases the lock when `inner` is dropped.
    pub(crate) fn new(inner: Box<dyn Send + Sync>) -> Self {
        Self { _inner: inner }
    }
}

impl Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LockGuard")
    }
}

/// The first and largest piece of a large range read from disk (not from memory) as one
/// sequential stream. Pieces grow from the first size to the largest, doubling, each where the
/// last ended, and the first is read a page at a time ([`cold_piece_reads`]): the kernel sees
/// one sequential stream that starts small, and its readahead window grows from there to its
/// largest, reading ahead asynchronously, so the disk works while the reader copies and
/// verifies what arrived. A stream that starts with a large read gets a synchronous read of
/// that size and a readahead that lags behind it. Measured on a virtio disk with 8 MiB
/// readahead, one cold 10 MB tile (medians of 9): one `pread` 14.2 ms, growing pieces from 64
/// KiB 10.9 ms, from 16 reads of 4 KiB 6.5 ms; 8 tiles 130 MB apart one after another 134, 107
/// and 69 ms (a `pread` of 4 bytes every 4,000, as HDF5 reads a column: 67 ms). Only for large
/// ranges: 8 cold 1 MB ranges took 6 ms as one read each, 11-13 ms in ramps.
pub(crate) const COLD_READ_FIRST: usize = 64 << 10;
/// See [`COLD_READ_FIRST`].
pub(crate) const COLD_READ_LARGEST: usize = 1 << 20;
/// The reads of the first piece of a stream (the first 64 KiB), and the probe that asks
/// whether a range is in memory ([`Storage::read_immutable_cached`]): one page. A larger probe
/// of bytes on disk starts a synchronous read of its size and the stream after it comes in as
/// slowly as one that starts with a large read (10 MB: 11.6 against 6.5 ms after a 4 KiB one).
/// Public for the layout advisor, which prices reads as the reader makes them.
pub const COLD_PROBE: usize = 4 << 10;

/// The reads (ranges of the same coordinates as `r`) that read piece `r` of a stream of
/// [`cold_read_pieces`]: the stream's `first` piece one per [`COLD_PROBE`] bytes, any other in
/// one read.
pub(crate) fn cold_piece_reads(r: std::ops::Range<usize>, first: bool) -> impl Iterator<Item = std::ops::Range<usize>> {
    let step = if first { COLD_PROBE } else { r.len().max(1) };
    (r.start..r.end).step_by(step).map(move |a| a..r.end.min(a + step))
}

/// The pieces `[start, end)` in which to read bytes `from..to` from disk as one sequential
/// stream: back to back, the first [`COLD_READ_FIRST`] bytes long, each next one twice the last
/// up to [`COLD_READ_LARGEST`], the last one cut at `to`.
pub(crate) fn cold_read_pieces(from: usize, to: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut step = COLD_READ_FIRST;
    let mut at = from;
    std::iter::from_fn(move || {
        (at < to).then(|| {
            let piece = at..to.min(at.saturating_add(step));
            (at, step) = (piece.end, (step * 2).min(COLD_READ_LARGEST));
            piece
        })
    })
}

/// One sequential stream of reads of an immutable file ([`Storage::immutable_stream`]).
pub trait ImmutableStream: Send {
    /// Reads `buf.len()` bytes at `offset` straight into `buf`, as
    /// [`Storage::read_immutable_into`] does.
    ///
    /// # Errors
    /// As [`Storage::read_immutable_into`].
    fn read_into(&mut self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError>;
}

/// A file system. Paths are absolute (or relative to the process's working folder for local
/// storage); files, once finished, are never modified again.
///
/// Every error names the path and the operation; a missing file or folder is always
/// [`StorageError::NotFound`].
pub trait Storage: Send + Sync + Debug {
    /// Reads `len` bytes of the file at `offset`.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the file is missing, [`StorageError::OutOfBounds`] if the
    /// range passes its end, [`StorageError::Io`] otherwise.
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError>;
    /// Reads `buf.len()` bytes at `offset` straight into `buf` (no intermediate buffer where the
    /// backend can avoid one).
    ///
    /// # Errors
    /// As [`Storage::read_range`].
    fn read_range_into(&self, path: &Path, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let b = self.read_range(path, offset, buf.len() as u64)?;
        buf.copy_from_slice(&b);
        Ok(())
    }
    /// [`Storage::read_range`] of a file that is never modified or replaced while it exists (a
    /// fragment's data files): a backend may keep the file open or mapped between calls and skip
    /// checking that the path still names the same file.
    ///
    /// # Errors
    /// As [`Storage::read_range`].
    fn read_immutable(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        self.read_range(path, offset, len)
    }
    /// Reads `buf.len()` bytes at `offset` of an immutable file (see [`Storage::read_immutable`])
    /// straight into `buf`, which need not be initialized: on success every byte of it has been
    /// written (a result column is not zeroed before its tiles are read into it).
    ///
    /// # Errors
    /// As [`Storage::read_range`]; `buf` is then not necessarily written.
    fn read_immutable_into(&self, path: &Path, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError> {
        let b = self.read_immutable(path, offset, buf.len() as u64)?;
        if b.len() != buf.len() {
            let short = format!("{} bytes read where {} were asked for", b.len(), buf.len());
            return Err(StorageError::io("read", path, std::io::Error::new(std::io::ErrorKind::UnexpectedEof, short)));
        }
        write_bytes(buf, &b);
        Ok(())
    }
    /// Fills the start of `buf` (which need not be initialized) with the bytes at `offset` of
    /// immutable file `path` that the backend holds in memory (the page cache), without waiting
    /// for a device, and says how many it filled (`Some(buf.len())`: all were there). A caller
    /// reading a large range learns from it whether to read pieces in parallel (in memory:
    /// copies on every core) or in one sequential stream that the kernel reads ahead of (on disk:
    /// parallel pieces break the readahead). `None`: the backend does not know, and parallel
    /// pieces are right for it (the default; object stores, where concurrent requests are the
    /// fast way).
    ///
    /// # Errors
    /// As [`Storage::read_range`], for a range that passes the file's end or a missing file.
    fn read_immutable_cached(
        &self,
        path: &Path,
        offset: u64,
        buf: &mut [MaybeUninit<u8>],
    ) -> Result<Option<usize>, StorageError> {
        let _ = (path, offset, buf);
        Ok(None)
    }
    /// A reader of immutable file `path` for one sequential stream of reads, with a readahead
    /// state of its own: streams side by side through one shared descriptor break each other's
    /// readahead (8 cold 10 MB tiles on two threads: 91 ms through one descriptor, 69 ms one
    /// after another, 65 ms side by side on a descriptor each). `None` (the default): the
    /// backend has no such reader; a stream reads through [`Storage::read_immutable_into`],
    /// sharing it with the read's other streams.
    ///
    /// # Errors
    /// As [`Storage::read_range`], for a missing file.
    fn immutable_stream(&self, path: &Path) -> Result<Option<Box<dyn ImmutableStream>>, StorageError> {
        let _ = path;
        Ok(None)
    }
    /// Reads the whole file.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the file is missing, [`StorageError::Io`] otherwise.
    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError>;
    /// Reads the whole file if it holds at most `max` bytes (`Ok(Ok(bytes))`); otherwise reads
    /// nothing and gives its size (`Ok(Err(size))`). Object stores: one GET whose body is left
    /// unread when its length is beyond `max`, instead of a HEAD and a GET.
    ///
    /// # Errors
    /// As [`Storage::read_all`].
    fn read_all_within(&self, path: &Path, max: u64) -> Result<Result<Bytes, u64>, StorageError> {
        let size = self.file_size(path)?;
        if size > max {
            return Ok(Err(size));
        }
        self.read_all(path).map(Ok)
    }
    /// The size of the file in bytes.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the file is missing, [`StorageError::Io`] if it is a folder
    /// or cannot be examined.
    fn file_size(&self, path: &Path) -> Result<u64, StorageError>;
    /// Creates a new, empty file to append to; its folder must exist.
    ///
    /// # Errors
    /// [`StorageError::Io`] (kind `AlreadyExists`) if the path exists,
    /// [`StorageError::NotFound`] if its folder is missing.
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError>;
    /// Replaces (or creates) the file with `data` atomically and durably: readers see the old
    /// content or the new, never a mix, and a crash leaves one or the other.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the folder is missing, [`StorageError::Io`] otherwise.
    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError>;
    /// Creates the file with `data` atomically and durably if nothing exists at `path`, and
    /// returns `true`; returns `false` and changes nothing if something does. Of concurrent
    /// callers on one path (in any process) exactly one gets `true`; readers never see a partly
    /// written file. This is the only primitive the commit protocol needs (object stores offer
    /// it as a conditional put).
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the folder is missing, [`StorageError::Io`] otherwise.
    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError>;
    /// Makes `data` durable under a temporary name in the folder `dir`, hidden from `list_dir`,
    /// for [`StagedFile::publish_new`] to give a name later; its effect is then `write_new`'s.
    /// `None` where staging saves nothing (the default: the caller keeps the bytes and calls
    /// `write_new`).
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the folder is missing, [`StorageError::Io`] otherwise.
    fn stage_new(&self, dir: &Path, data: &[u8]) -> Result<Option<Box<dyn StagedFile>>, StorageError> {
        let _ = (dir, data);
        Ok(None)
    }
    /// The temporary files that `write_atomic` or `write_new` calls left in the folder `dir`
    /// (hidden from `list_dir`) with their creation time in milliseconds since the epoch, where
    /// known: processes killed between creating one and renaming it leave them behind.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the folder is missing, [`StorageError::Io`] otherwise.
    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError>;
    /// Creates the folder and any missing parents; succeeds if it already exists.
    ///
    /// # Errors
    /// [`StorageError::Io`] if a component is a file or the folder cannot be created.
    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError>;
    /// Makes the folder's entries (creations, renames, removals) durable.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the folder is missing, [`StorageError::Io`] otherwise.
    fn sync_dir(&self, path: &Path) -> Result<(), StorageError>;
    /// The names of the folder's entries, sorted, without `write_atomic`'s temporary files.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the folder is missing, [`StorageError::Io`] otherwise.
    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError>;
    /// Whether the path is an existing folder.
    fn is_dir(&self, path: &Path) -> bool;
    /// Whether the path is an existing file.
    fn is_file(&self, path: &Path) -> bool;
    /// Removes a file.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if it is missing, [`StorageError::Io`] otherwise (e.g. a
    /// folder).
    fn remove_file(&self, path: &Path) -> Result<(), StorageError>;
    /// Removes a folder and everything in it.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if it is missing, [`StorageError::Io`] otherwise (e.g. a
    /// file).
    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError>;
    /// Takes an advisory lock on the lock file at `path` (created empty if missing; its folder
    /// must exist). With `wait`, blocks until the lock is granted.
    ///
    /// # Errors
    /// [`StorageError::WouldBlock`] if `wait` is false and the lock is taken,
    /// [`StorageError::NotFound`] if the folder is missing, [`StorageError::Io`] otherwise.
    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> Result<LockGuard, StorageError>;
    /// `None` when the backend has the advisory locks of [`Storage::lock`]: the array's lock
    /// keeps vacuum from deleting what a reader or writer uses. `Some(grace)` when it has none
    /// (object stores; `lock` excludes nothing): vacuum then deletes a file only `grace` after it
    /// stopped being needed, readers must be done with a snapshot within `grace` of a
    /// consolidation replacing its fragments, and a writer commits only within `grace / 2` of
    /// starting its fragment (docs/format.md, "Object stores").
    fn lock_free_grace(&self, path: &Path) -> Option<std::time::Duration> {
        let _ = path;
        None
    }
    /// Whether calls on `path` are requests over a network (object stores): independent calls
    /// are then worth running at the same time, so that their round trips overlap
    /// (`join_requests`, `requests`).
    fn remote(&self, path: &Path) -> bool {
        let _ = path;
        false
    }
    /// When the file was last written, in milliseconds since the epoch; for a folder, the
    /// newest of everything in it. Vacuum uses it on backends without locks.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the path is missing, [`StorageError::Io`] otherwise (kind
    /// `Unsupported` for backends that keep no times: the in-memory ones).
    fn modified_ms(&self, path: &Path) -> Result<u64, StorageError> {
        Err(StorageError::kind("modified time", path, std::io::ErrorKind::Unsupported))
    }
    /// Bytes and number of the files under `path` (a file: its own), for reports.
    ///
    /// # Errors
    /// [`StorageError::NotFound`] if the path is missing, [`StorageError::Io`] otherwise.
    fn usage(&self, path: &Path) -> Result<(u64, u64), StorageError> {
        if !self.is_dir(path) {
            return Ok((self.file_size(path)?, 1));
        }
        let mut total = (0u64, 0u64);
        for name in self.list_dir(path)? {
            match self.usage(&path.join(name)) {
                Ok((b, n)) => total = (total.0.saturating_add(b), total.1 + n),
                // Removed while being walked.
                Err(StorageError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(total)
    }
}

/// A storage call run by [`in_parallel`] or [`requests`].
pub(crate) type StorageJob<'a> = Box<dyn FnOnce() -> Result<(), StorageError> + Send + 'a>;

/// The most storage calls [`in_parallel`] runs at once.
const PARALLEL_STORAGE_CALLS: usize = 16;

/// Runs `jobs` (storage calls that wait: syncs, uploads, requests) on threads of their own, up
/// to `PARALLEL_STORAGE_CALLS` at once, so that their waits overlap; the first error, after all
/// have ended.
pub(crate) fn in_parallel(jobs: Vec<StorageJob<'_>>) -> Result<(), StorageError> {
    let mut result = Ok(());
    let mut jobs = jobs.into_iter().peekable();
    while jobs.peek().is_some() {
        let mut batch: Vec<StorageJob<'_>> = jobs.by_ref().take(PARALLEL_STORAGE_CALLS).collect();
        let last = batch.pop().expect("a batch holds a job");
        std::thread::scope(|s| {
            let spawned: Vec<_> = batch.into_iter().map(|job| s.spawn(job)).collect();
            result = std::mem::replace(&mut result, Ok(())).and(last());
            for t in spawned {
                let r = t.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                result = std::mem::replace(&mut result, Ok(())).and(r);
            }
        });
    }
    result
}

/// Runs `jobs`: at the same time ([`in_parallel`]) when `storage` is [`Storage::remote`] for
/// `path`, else one after the other, stopping at the first error.
pub(crate) fn requests(storage: &dyn Storage, path: &Path, jobs: Vec<StorageJob<'_>>) -> Result<(), StorageError> {
    if storage.remote(path) {
        return in_parallel(jobs);
    }
    jobs.into_iter().try_for_each(|job| job())
}

/// `(a(), b())`: `b` on a thread of its own, at the same time as `a`, when `storage` is
/// [`Storage::remote`] for `path`; else one after the other.
pub(crate) fn join_requests<A: Send, B: Send>(
    storage: &dyn Storage,
    path: &Path,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if !storage.remote(path) {
        let first = a();
        return (first, b());
    }
    std::thread::scope(|s| {
        let other = s.spawn(b);
        let first = a();
        (first, other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    })
}
