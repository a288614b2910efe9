//! The in-memory backend: [`MemoryStorage`], a tree of files and folders in a map, with the same
//! semantics as the local backend (checked by the shared conformance suite). Owns its node map,
//! its write handles and its thread-level shared/exclusive locks. Meant for tests.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::io::ErrorKind;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::{is_temp_name, temp_created_ms, Bytes, LockGuard, LockKind, Storage, StorageError, WriteHandle};

/// A file or folder.
enum Node {
    /// A folder; its entries are the map's keys below it.
    Dir,
    /// A file. `id` tells apart files created at the same path, so a write handle only ever
    /// publishes into the file it created.
    File { data: Arc<Vec<u8>>, id: u64 },
}

/// Holders of one lock.
#[derive(Default)]
struct LockCounts {
    shared: u64,
    exclusive: bool,
}

/// The lock of one path: its holders and a condition variable to wait for a release.
#[derive(Default)]
struct LockState {
    counts: Mutex<LockCounts>,
    released: Condvar,
}

/// State shared by the storage and its open write handles.
#[derive(Default)]
struct Inner {
    nodes: Mutex<BTreeMap<PathBuf, Node>>,
    locks: Mutex<HashMap<PathBuf, Arc<LockState>>>,
    next_id: AtomicU64,
}

impl Inner {
    fn nodes(&self) -> MutexGuard<'_, BTreeMap<PathBuf, Node>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Files and folders in memory, for tests. The root folder (`/`, or the empty path for
/// relative paths) always exists. Locks exclude each other between threads exactly as file
/// locks do between processes.
#[derive(Default)]
pub struct MemoryStorage {
    inner: Arc<Inner>,
}

impl Debug for MemoryStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStorage").field("entries", &self.inner.nodes().len()).finish()
    }
}

impl MemoryStorage {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }
}

/// Whether `path` is a root (always an existing folder).
fn is_root(path: &Path) -> bool {
    path.parent().is_none()
}

fn is_dir_in(nodes: &BTreeMap<PathBuf, Node>, path: &Path) -> bool {
    is_root(path) || matches!(nodes.get(path), Some(Node::Dir))
}

/// Checks that the folder holding `path` exists.
fn check_parent(nodes: &BTreeMap<PathBuf, Node>, op: &'static str, path: &Path) -> Result<(), StorageError> {
    match path.parent() {
        None => Err(StorageError::kind(op, path, ErrorKind::InvalidInput)),
        Some(parent) if is_dir_in(nodes, parent) => Ok(()),
        Some(parent) => match nodes.get(parent) {
            Some(Node::File { .. }) => Err(StorageError::kind(op, path, ErrorKind::NotADirectory)),
            _ => Err(StorageError::NotFound { path: path.to_path_buf() }),
        },
    }
}

/// The contents of the file at `path`.
fn file_data(nodes: &BTreeMap<PathBuf, Node>, op: &'static str, path: &Path) -> Result<Arc<Vec<u8>>, StorageError> {
    match nodes.get(path) {
        Some(Node::File { data, .. }) => Ok(Arc::clone(data)),
        Some(Node::Dir) => Err(StorageError::kind(op, path, ErrorKind::IsADirectory)),
        None if is_root(path) => Err(StorageError::kind(op, path, ErrorKind::IsADirectory)),
        None => Err(StorageError::NotFound { path: path.to_path_buf() }),
    }
}

/// A file being written by [`MemoryStorage::create`]. Its bytes become visible at `finish` (or
/// when dropped unfinished, like the local backend's buffer being flushed on drop).
struct MemoryWriter {
    inner: Arc<Inner>,
    path: PathBuf,
    id: u64,
    buf: Vec<u8>,
    published: bool,
}

impl MemoryWriter {
    /// Stores the written bytes in the file, unless it was removed or replaced meanwhile.
    fn publish(&mut self) {
        self.published = true;
        let buf = std::mem::take(&mut self.buf);
        let mut nodes = self.inner.nodes();
        if let Some(Node::File { data, id }) = nodes.get_mut(&self.path) {
            if *id == self.id {
                *data = Arc::new(buf);
            }
        }
    }
}

impl WriteHandle for MemoryWriter {
    fn write_all(&mut self, data: &[u8]) -> Result<(), StorageError> {
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn position(&self) -> u64 {
        self.buf.len() as u64
    }

    fn finish(mut self: Box<Self>) -> Result<(), StorageError> {
        self.publish();
        Ok(())
    }
}

impl Drop for MemoryWriter {
    fn drop(&mut self) {
        if !self.published {
            self.publish();
        }
    }
}

/// A held lock of [`MemoryStorage`]; releases it on drop.
struct MemoryLock {
    state: Arc<LockState>,
    kind: LockKind,
}

impl Drop for MemoryLock {
    fn drop(&mut self) {
        let mut counts = self.state.counts.lock().unwrap_or_else(|e| e.into_inner());
        match self.kind {
            LockKind::Shared => counts.shared = counts.shared.saturating_sub(1),
            LockKind::Exclusive => counts.exclusive = false,
        }
        drop(counts);
        self.state.released.notify_all();
    }
}

impl Storage for MemoryStorage {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        let data = file_data(&self.inner.nodes(), "read", path)?;
        let (start, n) = StorageError::check_range(path, offset, len, data.len() as u64)?;
        Ok(Bytes::from_arc(data).slice(start, n))
    }

    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        Ok(Bytes::from_arc(file_data(&self.inner.nodes(), "read", path)?))
    }

    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        Ok(file_data(&self.inner.nodes(), "stat", path)?.len() as u64)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let mut nodes = self.inner.nodes();
        check_parent(&nodes, "create", path)?;
        if nodes.contains_key(path) {
            return Err(StorageError::kind("create", path, ErrorKind::AlreadyExists));
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        nodes.insert(path.to_path_buf(), Node::File { data: Arc::default(), id });
        Ok(Box::new(MemoryWriter {
            inner: Arc::clone(&self.inner),
            path: path.to_path_buf(),
            id,
            buf: Vec::new(),
            published: false,
        }))
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        let mut nodes = self.inner.nodes();
        check_parent(&nodes, "write_atomic", path)?;
        if matches!(nodes.get(path), Some(Node::Dir)) {
            return Err(StorageError::kind("rename", path, ErrorKind::IsADirectory));
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        nodes.insert(path.to_path_buf(), Node::File { data: Arc::new(data.to_vec()), id });
        Ok(())
    }

    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        let mut nodes = self.inner.nodes();
        check_parent(&nodes, "write_new", path)?;
        if nodes.contains_key(path) {
            return Ok(false);
        }
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        nodes.insert(path.to_path_buf(), Node::File { data: Arc::new(data.to_vec()), id });
        Ok(true)
    }

    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        let nodes = self.inner.nodes();
        if !is_dir_in(&nodes, dir) {
            return Err(StorageError::NotFound { path: dir.to_path_buf() });
        }
        Ok(nodes
            .range::<Path, _>((Bound::Excluded(dir), Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(dir))
            .filter(|k| k.parent() == Some(dir))
            .filter_map(|k| k.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| is_temp_name(n))
            .map(|n| {
                let created = temp_created_ms(&n);
                (n, created)
            })
            .collect())
    }

    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        let mut nodes = self.inner.nodes();
        let mut missing = Vec::new();
        for dir in path.ancestors().filter(|a| !is_root(a)) {
            match nodes.get(dir) {
                Some(Node::Dir) => break,
                Some(Node::File { .. }) => {
                    return Err(StorageError::kind("create_dir_all", path, ErrorKind::AlreadyExists))
                }
                None => missing.push(dir.to_path_buf()),
            }
        }
        for dir in missing {
            nodes.insert(dir, Node::Dir);
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> Result<(), StorageError> {
        if is_root(path) || self.inner.nodes().contains_key(path) {
            Ok(())
        } else {
            Err(StorageError::NotFound { path: path.to_path_buf() })
        }
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError> {
        let nodes = self.inner.nodes();
        match nodes.get(path) {
            Some(Node::Dir) => {}
            Some(Node::File { .. }) => return Err(StorageError::kind("list_dir", path, ErrorKind::NotADirectory)),
            None if is_root(path) => {}
            None => return Err(StorageError::NotFound { path: path.to_path_buf() }),
        }
        let mut names: Vec<String> = nodes
            .range::<Path, _>((Bound::Excluded(path), Bound::Unbounded))
            .map(|(k, _)| k)
            .take_while(|k| k.starts_with(path))
            .filter(|k| k.parent() == Some(path))
            .filter_map(|k| k.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !is_temp_name(n))
            .collect();
        names.sort_unstable();
        Ok(names)
    }

    fn is_dir(&self, path: &Path) -> bool {
        is_dir_in(&self.inner.nodes(), path)
    }

    fn is_file(&self, path: &Path) -> bool {
        matches!(self.inner.nodes().get(path), Some(Node::File { .. }))
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        let mut nodes = self.inner.nodes();
        match nodes.get(path) {
            Some(Node::File { .. }) => {
                nodes.remove(path);
                Ok(())
            }
            Some(Node::Dir) => Err(StorageError::kind("remove_file", path, ErrorKind::IsADirectory)),
            None if is_root(path) => Err(StorageError::kind("remove_file", path, ErrorKind::IsADirectory)),
            None => Err(StorageError::NotFound { path: path.to_path_buf() }),
        }
    }

    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        let mut nodes = self.inner.nodes();
        match nodes.get(path) {
            Some(Node::Dir) => {}
            Some(Node::File { .. }) => {
                return Err(StorageError::kind("remove_dir_all", path, ErrorKind::NotADirectory))
            }
            None if is_root(path) => {}
            None => return Err(StorageError::NotFound { path: path.to_path_buf() }),
        }
        nodes.retain(|k, _| !k.starts_with(path));
        Ok(())
    }

    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> Result<LockGuard, StorageError> {
        {
            let mut nodes = self.inner.nodes();
            check_parent(&nodes, "open lock", path)?;
            match nodes.get(path) {
                Some(Node::File { .. }) => {}
                Some(Node::Dir) => return Err(StorageError::kind("open lock", path, ErrorKind::IsADirectory)),
                None => {
                    let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
                    nodes.insert(path.to_path_buf(), Node::File { data: Arc::default(), id });
                }
            }
        }
        let state = {
            let mut locks = self.inner.locks.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(locks.entry(path.to_path_buf()).or_default())
        };
        let mut counts = state.counts.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let free = match kind {
                LockKind::Shared => !counts.exclusive,
                LockKind::Exclusive => !counts.exclusive && counts.shared == 0,
            };
            if free {
                match kind {
                    LockKind::Shared => counts.shared += 1,
                    LockKind::Exclusive => counts.exclusive = true,
                }
                break;
            }
            if !wait {
                return Err(StorageError::WouldBlock { path: path.to_path_buf() });
            }
            counts = state.released.wait(counts).unwrap_or_else(|e| e.into_inner());
        }
        drop(counts);
        Ok(LockGuard::new(Box::new(MemoryLock { state, kind })))
    }
}
