//! A storage wrapper that records every operation in the statistics registry (`vfs_*` counters
//! and timers). Every `Context` wraps its backend in one; when statistics are off each operation
//! costs one relaxed atomic load more.

use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::Arc;

use super::{Bytes, ImmutableStream, LockGuard, LockKind, StagedFile, Storage, StorageError, WriteHandle};
use crate::stats::{self, Counter, Timer};

/// Records reads, writes and syncs of the wrapped backend.
#[derive(Debug)]
pub struct InstrumentedStorage {
    inner: Arc<dyn Storage>,
}

impl InstrumentedStorage {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn Storage>) -> Self {
        Self { inner }
    }
}

fn read_done(bytes: u64) {
    stats::add(Counter::VfsReadNumRequests, 1);
    stats::add(Counter::VfsReadTotalBytes, bytes);
}

fn write_done(bytes: u64) {
    stats::add(Counter::VfsWriteNumRequests, 1);
    stats::add(Counter::VfsWriteTotalBytes, bytes);
}

/// A staged file whose publishing counts as the write of its bytes (as `write_new` does).
struct InstrumentedStaged {
    inner: Box<dyn StagedFile>,
    len: u64,
}

impl StagedFile for InstrumentedStaged {
    fn publish_new(&self, path: &Path) -> Result<bool, StorageError> {
        let _t = stats::timer(Timer::VfsWrite);
        let created = self.inner.publish_new(path)?;
        if created {
            write_done(self.len);
        }
        Ok(created)
    }
}

/// A stream whose reads count as the backend's reads do.
struct InstrumentedStream {
    inner: Box<dyn ImmutableStream>,
}

impl ImmutableStream for InstrumentedStream {
    fn read_into(&mut self, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        self.inner.read_into(offset, buf)?;
        read_done(buf.len() as u64);
        Ok(())
    }
}

struct InstrumentedWriter {
    inner: Box<dyn WriteHandle>,
}

impl WriteHandle for InstrumentedWriter {
    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsWrite);
        self.inner.write_all(data)?;
        write_done(data.len() as u64);
        Ok(())
    }
    fn position(&self) -> u64 {
        self.inner.position()
    }
    fn finish(self: Box<Self>) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsSync);
        self.inner.finish()
    }
    fn write_all_vectored(&mut self, parts: &[&[u8]]) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsWrite);
        self.inner.write_all_vectored(parts)?;
        write_done(parts.iter().map(|p| p.len() as u64).sum());
        Ok(())
    }
}

impl Storage for InstrumentedStorage {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        let b = self.inner.read_range(path, offset, len)?;
        read_done(b.len() as u64);
        Ok(b)
    }
    fn read_range_into(&self, path: &Path, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        self.inner.read_range_into(path, offset, buf)?;
        read_done(buf.len() as u64);
        Ok(())
    }
    fn read_immutable(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        let b = self.inner.read_immutable(path, offset, len)?;
        read_done(b.len() as u64);
        Ok(b)
    }
    fn read_immutable_into(&self, path: &Path, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        self.inner.read_immutable_into(path, offset, buf)?;
        read_done(buf.len() as u64);
        Ok(())
    }
    fn read_immutable_cached(
        &self,
        path: &Path,
        offset: u64,
        buf: &mut [MaybeUninit<u8>],
    ) -> Result<Option<usize>, StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        let got = self.inner.read_immutable_cached(path, offset, buf)?;
        if let Some(n) = got.filter(|&n| n > 0) {
            read_done(n as u64);
        }
        Ok(got)
    }
    fn immutable_stream(&self, path: &Path) -> Result<Option<Box<dyn ImmutableStream>>, StorageError> {
        let inner = self.inner.immutable_stream(path)?;
        Ok(inner.map(|inner| Box::new(InstrumentedStream { inner }) as Box<dyn ImmutableStream>))
    }
    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        let b = self.inner.read_all(path)?;
        read_done(b.len() as u64);
        Ok(b)
    }
    fn read_all_within(&self, path: &Path, max: u64) -> Result<Result<Bytes, u64>, StorageError> {
        let _t = stats::timer(Timer::VfsRead);
        let b = self.inner.read_all_within(path, max)?;
        if let Ok(b) = &b {
            read_done(b.len() as u64);
        }
        Ok(b)
    }
    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        self.inner.file_size(path)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        Ok(Box::new(InstrumentedWriter { inner: self.inner.create(path)? }))
    }
    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsWrite);
        self.inner.write_atomic(path, data)?;
        write_done(data.len() as u64);
        Ok(())
    }
    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        let _t = stats::timer(Timer::VfsWrite);
        let created = self.inner.write_new(path, data)?;
        if created {
            write_done(data.len() as u64);
        }
        Ok(created)
    }
    fn stage_new(&self, dir: &Path, data: &[u8]) -> Result<Option<Box<dyn StagedFile>>, StorageError> {
        let _t = stats::timer(Timer::VfsWrite);
        let staged = self.inner.stage_new(dir, data)?;
        Ok(staged.map(|inner| Box::new(InstrumentedStaged { inner, len: data.len() as u64 }) as Box<dyn StagedFile>))
    }
    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        self.inner.list_temps(dir)
    }
    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> Result<(), StorageError> {
        let _t = stats::timer(Timer::VfsSync);
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
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
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
