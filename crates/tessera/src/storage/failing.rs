//! Fault injection: [`FailingStorage`] wraps another backend, counts its mutating operations and,
//! past a chosen budget, fails every further mutation with [`StorageError::Injected`], to
//! simulate a crash at every point of a write path. Owns the counters and the wrapping write
//! handle.

use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Bytes, ImmutableStream, LockGuard, LockKind, Storage, StorageError, WriteHandle};

/// Counters shared by the storage and its write handles.
#[derive(Debug, Default)]
struct Budget {
    /// Mutating operations let through so far.
    done: AtomicU64,
    /// Value of `done` past which mutations fail (`u64::MAX`: never).
    limit: AtomicU64,
}

impl Budget {
    /// Counts one mutation of `op` on `path`, or fails it if the budget is spent.
    fn spend(&self, op: &'static str, path: &Path) -> Result<(), StorageError> {
        let limit = self.limit.load(Ordering::SeqCst);
        self.done
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |d| (d < limit).then(|| d + 1))
            .map(|_| ())
            .map_err(|_| StorageError::Injected { op, path: path.to_path_buf() })
    }
}

/// A backend that fails on purpose: it passes everything to `inner`, counting the mutating
/// operations (`create`, each `write_all`, `finish`, `write_atomic`, `create_dir_all`,
/// `sync_dir`, `remove_file`, `remove_dir_all`). After [`FailingStorage::fail_after`]`(Some(n))`,
/// the next `n` mutations succeed and every later one returns [`StorageError::Injected`] without
/// reaching `inner`. Reads, queries and locks are never counted nor failed. Thread-safe.
#[derive(Debug)]
pub struct FailingStorage {
    inner: Arc<dyn Storage>,
    budget: Arc<Budget>,
}

impl FailingStorage {
    /// Wraps `inner`; never fails until [`FailingStorage::fail_after`] is called.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        let budget = Budget { done: AtomicU64::new(0), limit: AtomicU64::new(u64::MAX) };
        Self { inner, budget: Arc::new(budget) }
    }

    /// Lets `n` more mutating operations succeed (counted from now), then fails every further
    /// one; `None` never fails. On a fresh wrapper, `Some(n)` fails the `n + 1`-th mutation.
    pub fn fail_after(&self, n: Option<u64>) {
        let limit = match n {
            Some(n) => self.budget.done.load(Ordering::SeqCst).saturating_add(n),
            None => u64::MAX,
        };
        self.budget.limit.store(limit, Ordering::SeqCst);
    }

    /// The number of mutating operations let through so far (injected failures not counted).
    pub fn mutations(&self) -> u64 {
        self.budget.done.load(Ordering::SeqCst)
    }

    /// The wrapped backend.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }
}

/// A write handle of [`FailingStorage`]: each `write_all` and the `finish` count as mutations.
struct FailingWriter {
    inner: Box<dyn WriteHandle>,
    budget: Arc<Budget>,
    path: PathBuf,
}

impl WriteHandle for FailingWriter {
    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        self.budget.spend("write", &self.path)?;
        self.inner.write_all(data)
    }

    fn position(&self) -> u64 {
        self.inner.position()
    }

    fn write_all_vectored(&mut self, parts: &[&[u8]]) -> Result<(), StorageError> {
        self.budget.spend("write", &self.path)?;
        self.inner.write_all_vectored(parts)
    }

    fn finish(self: Box<Self>) -> Result<(), StorageError> {
        self.budget.spend("finish", &self.path)?;
        self.inner.finish()
    }
}

impl Storage for FailingStorage {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        self.inner.read_range(path, offset, len)
    }

    fn read_range_into(&self, path: &Path, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        self.inner.read_range_into(path, offset, buf)
    }

    fn read_immutable(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        self.inner.read_immutable(path, offset, len)
    }

    fn read_immutable_into(&self, path: &Path, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError> {
        self.inner.read_immutable_into(path, offset, buf)
    }

    fn read_immutable_cached(
        &self,
        path: &Path,
        offset: u64,
        buf: &mut [MaybeUninit<u8>],
    ) -> Result<Option<usize>, StorageError> {
        self.inner.read_immutable_cached(path, offset, buf)
    }

    fn immutable_stream(&self, path: &Path) -> Result<Option<Box<dyn ImmutableStream>>, StorageError> {
        self.inner.immutable_stream(path)
    }

    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        self.inner.read_all(path)
    }

    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        self.inner.file_size(path)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        self.budget.spend("create", path)?;
        let inner = self.inner.create(path)?;
        Ok(Box::new(FailingWriter { inner, budget: Arc::clone(&self.budget), path: path.to_path_buf() }))
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        self.budget.spend("write_atomic", path)?;
        self.inner.write_atomic(path, data)
    }

    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        self.budget.spend("write_new", path)?;
        self.inner.write_new(path, data)
    }

    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        self.inner.list_temps(dir)
    }

    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.budget.spend("create_dir_all", path)?;
        self.inner.create_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> Result<(), StorageError> {
        self.budget.spend("sync_dir", path)?;
        self.inner.sync_dir(path)
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError> {
        self.inner.list_dir(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }

    fn is_file(&self, path: &Path) -> bool {
        self.inner.is_file(path)
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        self.budget.spend("remove_file", path)?;
        self.inner.remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.budget.spend("remove_dir_all", path)?;
        self.inner.remove_dir_all(path)
    }

    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> Result<LockGuard, StorageError> {
        self.inner.lock(path, kind, wait)
    }

    fn lock_free_grace(&self, path: &Path) -> Option<std::time::Duration> {
        self.inner.lock_free_grace(path)
    }

    fn remote(&self, path: &Path) -> bool {
        self.inner.remote(path)
    }

    fn modified_ms(&self, path: &Path) -> Result<u64, StorageError> {
        self.inner.modified_ms(path)
    }

    fn usage(&self, path: &Path) -> Result<(u64, u64), StorageError> {
        self.inner.usage(path)
    }
}
