//! Power loss: [`PowerLossStorage`], an in-memory file system that knows which of its state is
//! durable, so a test can cut the power at any point ([`PowerLossStorage::power_loss`]) and go on
//! with only what a real disk would still hold. For crash tests.
//!
//! What becomes durable, and when, is exactly what [`LocalStorage`](super::LocalStorage) asks
//! the operating system for, no more:
//!
//! - A file's contents become durable at [`WriteHandle::finish`] (which fsyncs the file); bytes
//!   written before are lost by a power loss (or, in the random mode, a prefix of them survives).
//! - A folder's entries (files and folders created in it, renames into it, removals from it)
//!   become durable at [`Storage::sync_dir`] of that folder, all at once. Until then a power loss
//!   undoes them (or, in the random mode, any subset of them survives, each change whole: a
//!   rename is never half done). A folder whose own entry in its parent is not durable is lost
//!   with everything in it, whatever was synced inside it.
//! - [`Storage::write_atomic`] and [`Storage::write_new`] write and fsync a temporary file, then
//!   rename or link it into place and fsync the folder: on return the file and every earlier
//!   change of entries in that folder are durable (the folder's fsync makes them all durable,
//!   as on the local backend). `write_new` that finds the name taken changes nothing.
//! - [`Storage::create_dir_all`], [`Storage::remove_file`] and [`Storage::remove_dir_all`] change
//!   entries only (durable at the next `sync_dir` of the parent). `remove_dir_all` also removes
//!   the entries inside the folder, which the random mode may keep or undo one by one.
//! - Locks are not state: a power loss releases them all.
//!
//! Files are inodes, so a hard link (`write_new`) and a rename keep the file's durable contents.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::io::ErrorKind;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    is_temp_name, temp_created_ms, temp_name, Bytes, LockGuard, LockKind, MemoryStorage, StagedFile, Storage,
    StorageError, WriteHandle, STAGED_NAME,
};

/// Inode numbers; the root folder is 0.
type Ino = u64;

const ROOT: Ino = 0;

/// One change of a folder's entries since its last sync.
#[derive(Debug, Clone)]
enum EntryChange {
    /// The name now points to the inode: a creation or a link, or, with `from`, a rename
    /// within the folder (the old name goes at the same moment).
    Set { name: String, ino: Ino, from: Option<String> },
    /// The name is gone.
    Remove { name: String },
}

impl EntryChange {
    fn apply(&self, entries: &mut BTreeMap<String, Ino>) {
        match self {
            EntryChange::Set { name, ino, from } => {
                if let Some(from) = from {
                    entries.remove(from);
                }
                entries.insert(name.clone(), *ino);
            }
            EntryChange::Remove { name } => {
                entries.remove(name);
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Inode {
    File {
        /// What readers see now.
        data: Arc<Vec<u8>>,
        /// What survives a power loss: the contents as of the last fsync.
        durable: Arc<Vec<u8>>,
    },
    Dir {
        /// What `list_dir` sees now.
        entries: BTreeMap<String, Ino>,
        /// The entries as of the last `sync_dir`.
        durable: BTreeMap<String, Ino>,
        /// The changes since then, oldest first.
        pending: Vec<EntryChange>,
    },
}

impl Inode {
    fn new_dir() -> Self {
        Inode::Dir { entries: BTreeMap::new(), durable: BTreeMap::new(), pending: Vec::new() }
    }
}

#[derive(Debug, Default)]
struct State {
    inodes: HashMap<Ino, Inode>,
    next: Ino,
}

/// Why a path could not be resolved.
enum Lookup {
    /// A component is missing.
    Missing,
    /// A component before the last is a file.
    NotADir,
}

impl State {
    fn fresh() -> Self {
        let mut inodes = HashMap::new();
        inodes.insert(ROOT, Inode::new_dir());
        Self { inodes, next: ROOT + 1 }
    }

    fn alloc(&mut self, inode: Inode) -> Ino {
        let ino = self.next;
        self.next += 1;
        self.inodes.insert(ino, inode);
        ino
    }

    /// The inode at `path` (absolute or relative: both start at the root).
    fn resolve(&self, path: &Path) -> Result<Ino, Lookup> {
        let mut cur = ROOT;
        for name in names(path) {
            match self.inodes.get(&cur) {
                Some(Inode::Dir { entries, .. }) => cur = *entries.get(&name).ok_or(Lookup::Missing)?,
                _ => return Err(Lookup::NotADir),
            }
        }
        Ok(cur)
    }

    fn entries(&self, dir: Ino) -> &BTreeMap<String, Ino> {
        match self.inodes.get(&dir) {
            Some(Inode::Dir { entries, .. }) => entries,
            _ => unreachable!("callers pass folders"),
        }
    }

    /// The folder holding `path` and the last name of `path`.
    fn parent(&self, op: &'static str, path: &Path) -> Result<(Ino, String), StorageError> {
        let name = names(path).pop().ok_or_else(|| StorageError::kind(op, path, ErrorKind::InvalidInput))?;
        let parent = path.parent().unwrap_or(Path::new(""));
        match self.resolve(parent) {
            Ok(p) if self.is_dir(p) => Ok((p, name)),
            Ok(_) | Err(Lookup::NotADir) => Err(StorageError::kind(op, path, ErrorKind::NotADirectory)),
            Err(Lookup::Missing) => Err(StorageError::NotFound { path: path.to_path_buf() }),
        }
    }

    fn is_dir(&self, ino: Ino) -> bool {
        matches!(self.inodes.get(&ino), Some(Inode::Dir { .. }))
    }

    /// Records an entry change of folder `dir` (visible now, durable at its next sync).
    fn change(&mut self, dir: Ino, change: EntryChange) {
        if let Some(Inode::Dir { entries, pending, .. }) = self.inodes.get_mut(&dir) {
            change.apply(entries);
            pending.push(change);
        }
    }

    /// Links `ino` as `name` in folder `dir` if the name is free (not synced): a hard link's
    /// outcome. Returns whether it linked.
    fn link_new(&mut self, dir: Ino, name: String, ino: Ino) -> bool {
        if self.entries(dir).contains_key(&name) {
            return false;
        }
        self.change(dir, EntryChange::Set { name, ino, from: None });
        true
    }

    fn sync(&mut self, dir: Ino) {
        if let Some(Inode::Dir { entries, durable, pending }) = self.inodes.get_mut(&dir) {
            durable.clone_from(entries);
            pending.clear();
        }
    }

    fn file(&self, op: &'static str, path: &Path) -> Result<Arc<Vec<u8>>, StorageError> {
        match self.resolve(path) {
            Ok(ino) => match self.inodes.get(&ino) {
                Some(Inode::File { data, .. }) => Ok(Arc::clone(data)),
                _ => Err(StorageError::kind(op, path, ErrorKind::IsADirectory)),
            },
            Err(Lookup::Missing) => Err(StorageError::NotFound { path: path.to_path_buf() }),
            Err(Lookup::NotADir) => Err(StorageError::kind(op, path, ErrorKind::NotADirectory)),
        }
    }

    /// Removes the entries under folder `dir` (recorded as changes of each folder), deepest
    /// first, as `remove_dir_all` unlinks them.
    fn remove_contents(&mut self, dir: Ino) {
        let names: Vec<(String, Ino)> = self.entries(dir).iter().map(|(n, &i)| (n.clone(), i)).collect();
        for (name, ino) in names {
            if self.is_dir(ino) {
                self.remove_contents(ino);
            }
            self.change(dir, EntryChange::Remove { name });
        }
    }
}

/// The normal components of `path` as strings.
fn names(path: &Path) -> Vec<String> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect()
}

/// A small seeded generator (splitmix64) for the random mode of a power loss.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..=n`.
    fn upto(&mut self, n: u64) -> u64 {
        self.next() % n.saturating_add(1).max(1)
    }
}

/// Distinguishes temporary files within a process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// An in-memory file system that tracks what is durable; [`PowerLossStorage::power_loss`]
/// returns the file system a power loss leaves (see the module doc). Thread-safe; locks behave
/// as [`MemoryStorage`]'s.
pub struct PowerLossStorage {
    state: Arc<Mutex<State>>,
    /// Holds the lock files' locks (the files themselves are in `state`).
    locks: MemoryStorage,
}

impl Debug for PowerLossStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PowerLossStorage").field("inodes", &self.state().inodes.len()).finish()
    }
}

impl Default for PowerLossStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl PowerLossStorage {
    /// An empty file system (only the root folder), all of it durable.
    pub fn new() -> Self {
        Self::from_state(State::fresh())
    }

    fn from_state(state: State) -> Self {
        Self { state: Arc::new(Mutex::new(state)), locks: MemoryStorage::new() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The file system that a power loss now leaves: only what is durable when `seed` is
    /// `None`; with `Some(seed)`, also a random (seeded) part of what is not: each change of a
    /// folder's entries since its last sync survives or not (in order, each one whole), and each
    /// file keeps a random prefix of the bytes written since its last fsync. Everything in the
    /// result is durable. This storage is left as it is (a process still running on it would
    /// go on, unaware; tests drop it).
    pub fn power_loss(&self, seed: Option<u64>) -> PowerLossStorage {
        let old = self.state();
        let mut rng = seed.map(SplitMix);
        let mut new = State { inodes: HashMap::new(), next: old.next };
        let mut todo = vec![ROOT];
        while let Some(ino) = todo.pop() {
            if new.inodes.contains_key(&ino) {
                continue; // a second link to a file
            }
            let inode = match old.inodes.get(&ino) {
                Some(Inode::Dir { durable, pending, .. }) => {
                    let mut entries = durable.clone();
                    if let Some(rng) = rng.as_mut() {
                        for change in pending {
                            if rng.next() % 2 == 0 {
                                change.apply(&mut entries);
                            }
                        }
                    }
                    // Inodes are never freed, so every surviving entry names one.
                    todo.extend(entries.values().copied());
                    Inode::Dir { durable: entries.clone(), entries, pending: Vec::new() }
                }
                Some(Inode::File { data, durable }) => {
                    let mut kept = durable.as_ref().clone();
                    if let Some(rng) = rng.as_mut() {
                        if data.len() > kept.len() && data.starts_with(&kept) {
                            let extra = rng.upto((data.len() - kept.len()) as u64) as usize;
                            kept.extend_from_slice(&data[durable.len()..durable.len() + extra]);
                        }
                    }
                    let kept = Arc::new(kept);
                    Inode::File { data: Arc::clone(&kept), durable: kept }
                }
                None => continue,
            };
            new.inodes.insert(ino, inode);
        }
        Self::from_state(new)
    }

    /// Paths of every file and folder, sorted (for test failure messages).
    pub fn paths(&self) -> Vec<PathBuf> {
        let state = self.state();
        let mut out = Vec::new();
        let mut todo = vec![(ROOT, PathBuf::from("/"))];
        while let Some((ino, path)) = todo.pop() {
            if let Some(Inode::Dir { entries, .. }) = state.inodes.get(&ino) {
                for (name, &child) in entries {
                    let p = path.join(name);
                    out.push(p.clone());
                    todo.push((child, p));
                }
            }
        }
        out.sort();
        out
    }

    /// Creates a new file holding `data`, fsynced, under a temporary name in folder `dir`;
    /// returns its inode and temporary name.
    fn temp_file(state: &mut State, dir: Ino, name: &str, data: &[u8]) -> (Ino, String) {
        let data = Arc::new(data.to_vec());
        let ino = state.alloc(Inode::File { data: Arc::clone(&data), durable: data });
        let tmp = temp_name(name, TEMP_COUNTER.fetch_add(1, Ordering::Relaxed));
        state.change(dir, EntryChange::Set { name: tmp.clone(), ino, from: None });
        (ino, tmp)
    }
}

/// A file staged by [`PowerLossStorage::stage_new`]: its content is durable, its temporary
/// entry is not (as after an fsync of the file alone).
struct PowerLossStaged {
    state: Arc<Mutex<State>>,
    dir: Ino,
    ino: Ino,
    tmp: String,
}

impl StagedFile for PowerLossStaged {
    fn publish_new(&self, path: &Path) -> Result<bool, StorageError> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (dir, name) = state.parent("publish_new", path)?;
        if dir != self.dir {
            // A hard link stays in its file system; the commit protocol links within a folder.
            return Err(StorageError::kind("link", path, ErrorKind::CrossesDevices));
        }
        let linked = state.link_new(dir, name, self.ino);
        if linked {
            state.sync(dir);
        }
        Ok(linked)
    }
}

impl Drop for PowerLossStaged {
    fn drop(&mut self) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.change(self.dir, EntryChange::Remove { name: std::mem::take(&mut self.tmp) });
    }
}

/// A file being written by [`PowerLossStorage::create`]: bytes are visible at once, durable at
/// `finish`.
struct PowerLossWriter {
    state: Arc<Mutex<State>>,
    ino: Ino,
    pos: u64,
}

impl PowerLossWriter {
    fn with_file(&self, f: impl FnOnce(&mut Arc<Vec<u8>>, &mut Arc<Vec<u8>>)) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Inode::File { data, durable }) = state.inodes.get_mut(&self.ino) {
            f(data, durable);
        }
    }
}

impl WriteHandle for PowerLossWriter {
    fn write_all(&mut self, bytes: &[u8]) -> Result<(), StorageError> {
        self.with_file(|data, _| Arc::make_mut(data).extend_from_slice(bytes));
        self.pos += bytes.len() as u64;
        Ok(())
    }

    fn position(&self) -> u64 {
        self.pos
    }

    fn finish(self: Box<Self>) -> Result<(), StorageError> {
        self.with_file(|data, durable| *durable = Arc::clone(data));
        Ok(())
    }
}

impl Storage for PowerLossStorage {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        let data = self.state().file("read", path)?;
        let (start, n) = StorageError::check_range(path, offset, len, data.len() as u64)?;
        Ok(Bytes::from_arc(data).slice(start, n))
    }

    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        Ok(Bytes::from_arc(self.state().file("read", path)?))
    }

    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        Ok(self.state().file("stat", path)?.len() as u64)
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let mut state = self.state();
        let (dir, name) = state.parent("create", path)?;
        if state.entries(dir).contains_key(&name) {
            return Err(StorageError::kind("create", path, ErrorKind::AlreadyExists));
        }
        let ino = state.alloc(Inode::File { data: Arc::default(), durable: Arc::default() });
        state.change(dir, EntryChange::Set { name, ino, from: None });
        Ok(Box::new(PowerLossWriter { state: Arc::clone(&self.state), ino, pos: 0 }))
    }

    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        let mut state = self.state();
        let (dir, name) = state.parent("write_atomic", path)?;
        if state.entries(dir).get(&name).is_some_and(|&i| state.is_dir(i)) {
            return Err(StorageError::kind("rename", path, ErrorKind::IsADirectory));
        }
        let (ino, tmp) = Self::temp_file(&mut state, dir, &name, data);
        state.change(dir, EntryChange::Set { name, ino, from: Some(tmp) });
        state.sync(dir);
        Ok(())
    }

    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        let mut state = self.state();
        let (dir, name) = state.parent("write_new", path)?;
        let (ino, tmp) = Self::temp_file(&mut state, dir, &name, data);
        // The temporary file is removed before the sync; when the link fails nothing is synced.
        let linked = state.link_new(dir, name, ino);
        state.change(dir, EntryChange::Remove { name: tmp });
        if linked {
            state.sync(dir);
        }
        Ok(linked)
    }

    fn stage_new(&self, dir: &Path, data: &[u8]) -> Result<Option<Box<dyn StagedFile>>, StorageError> {
        let mut state = self.state();
        let (dir_ino, name) = state.parent("stage_new", &dir.join(STAGED_NAME))?;
        let (ino, tmp) = Self::temp_file(&mut state, dir_ino, &name, data);
        Ok(Some(Box::new(PowerLossStaged { state: Arc::clone(&self.state), dir: dir_ino, ino, tmp })))
    }

    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        let state = self.state();
        match state.resolve(dir) {
            Ok(d) if state.is_dir(d) => Ok(state
                .entries(d)
                .keys()
                .filter(|n| is_temp_name(n))
                .map(|n| (n.clone(), temp_created_ms(n)))
                .collect()),
            Ok(_) | Err(Lookup::NotADir) => Err(StorageError::kind("list_dir", dir, ErrorKind::NotADirectory)),
            Err(Lookup::Missing) => Err(StorageError::NotFound { path: dir.to_path_buf() }),
        }
    }

    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        let mut state = self.state();
        let mut cur = ROOT;
        for name in names(path) {
            let next = state.entries(cur).get(&name).copied();
            cur = match next {
                Some(i) if state.is_dir(i) => i,
                Some(_) => return Err(StorageError::kind("create_dir_all", path, ErrorKind::AlreadyExists)),
                None => {
                    let ino = state.alloc(Inode::new_dir());
                    state.change(cur, EntryChange::Set { name, ino, from: None });
                    ino
                }
            };
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> Result<(), StorageError> {
        let mut state = self.state();
        match state.resolve(path) {
            Ok(d) if state.is_dir(d) => {
                state.sync(d);
                Ok(())
            }
            // fsync of a file is allowed by the OS; the backend never does it through this call.
            Ok(_) => Ok(()),
            Err(Lookup::Missing) => Err(StorageError::NotFound { path: path.to_path_buf() }),
            Err(Lookup::NotADir) => Err(StorageError::kind("open", path, ErrorKind::NotADirectory)),
        }
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError> {
        let state = self.state();
        match state.resolve(path) {
            Ok(d) if state.is_dir(d) => Ok(state.entries(d).keys().filter(|n| !is_temp_name(n)).cloned().collect()),
            Ok(_) | Err(Lookup::NotADir) => Err(StorageError::kind("list_dir", path, ErrorKind::NotADirectory)),
            Err(Lookup::Missing) => Err(StorageError::NotFound { path: path.to_path_buf() }),
        }
    }

    fn is_dir(&self, path: &Path) -> bool {
        let state = self.state();
        state.resolve(path).is_ok_and(|i| state.is_dir(i))
    }

    fn is_file(&self, path: &Path) -> bool {
        let state = self.state();
        state.resolve(path).is_ok_and(|i| !state.is_dir(i))
    }

    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        let mut state = self.state();
        let (dir, name) = state.parent("remove_file", path)?;
        match state.entries(dir).get(&name).copied() {
            None => Err(StorageError::NotFound { path: path.to_path_buf() }),
            Some(i) if state.is_dir(i) => Err(StorageError::kind("remove_file", path, ErrorKind::IsADirectory)),
            Some(_) => {
                state.change(dir, EntryChange::Remove { name });
                Ok(())
            }
        }
    }

    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        let mut state = self.state();
        if names(path).is_empty() {
            return Err(StorageError::kind("remove_dir_all", path, ErrorKind::InvalidInput));
        }
        let (dir, name) = state.parent("remove_dir_all", path)?;
        match state.entries(dir).get(&name).copied() {
            None => Err(StorageError::NotFound { path: path.to_path_buf() }),
            Some(i) if !state.is_dir(i) => Err(StorageError::kind("remove_dir_all", path, ErrorKind::NotADirectory)),
            Some(i) => {
                state.remove_contents(i);
                state.change(dir, EntryChange::Remove { name });
                Ok(())
            }
        }
    }

    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> Result<LockGuard, StorageError> {
        {
            let mut state = self.state();
            let (dir, name) = state.parent("open lock", path)?;
            match state.entries(dir).get(&name).copied() {
                Some(i) if state.is_dir(i) => {
                    return Err(StorageError::kind("open lock", path, ErrorKind::IsADirectory))
                }
                Some(_) => {}
                None => {
                    // Created empty, like `open(O_CREAT)`: an entry change, durable at a sync.
                    let ino = state.alloc(Inode::File { data: Arc::default(), durable: Arc::default() });
                    state.change(dir, EntryChange::Set { name, ino, from: None });
                }
            }
        }
        // The lock itself lives in a private memory backend, on a file of the same path.
        let key = Path::new("/").join(path.strip_prefix("/").unwrap_or(path));
        if let Some(parent) = key.parent() {
            self.locks.create_dir_all(parent)?;
        }
        self.locks.lock(&key, kind, wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    fn write(s: &PowerLossStorage, path: &str, data: &[u8], finish: bool) {
        let mut h = s.create(p(path)).unwrap();
        h.write_all(data).unwrap();
        if finish {
            h.finish().unwrap();
        }
    }

    #[test]
    fn unsynced_entries_and_unfinished_files_are_lost() {
        let s = PowerLossStorage::new();
        s.create_dir_all(p("/a/b")).unwrap();
        let after = s.power_loss(None);
        assert!(!after.is_dir(p("/a")), "the creation of /a was never synced");
        s.sync_dir(p("/")).unwrap();
        let after = s.power_loss(None);
        assert!(after.is_dir(p("/a")) && !after.is_dir(p("/a/b")));
        s.sync_dir(p("/a")).unwrap();
        write(&s, "/a/b/done", b"hello", true);
        write(&s, "/a/b/open", b"partial", false);
        assert!(!s.power_loss(None).is_file(p("/a/b/done")), "entry not synced");
        s.sync_dir(p("/a/b")).unwrap();
        let after = s.power_loss(None);
        assert_eq!(&*after.read_all(p("/a/b/done")).unwrap(), b"hello");
        assert_eq!(after.file_size(p("/a/b/open")).unwrap(), 0, "never fsynced");
        // Synced inside a folder whose own entry is not durable: all lost.
        s.create_dir_all(p("/x/y")).unwrap();
        s.sync_dir(p("/x")).unwrap();
        s.sync_dir(p("/x/y")).unwrap();
        assert!(!s.power_loss(None).is_dir(p("/x")));
    }

    #[test]
    fn write_atomic_and_write_new_are_durable_with_their_folder() {
        let s = PowerLossStorage::new();
        s.create_dir_all(p("/d")).unwrap();
        s.sync_dir(p("/")).unwrap();
        write(&s, "/d/earlier", b"e", true);
        s.write_atomic(p("/d/f"), b"one").unwrap();
        assert!(s.write_new(p("/d/n"), b"new").unwrap());
        assert!(!s.write_new(p("/d/n"), b"other").unwrap());
        let after = s.power_loss(None);
        assert_eq!(&*after.read_all(p("/d/f")).unwrap(), b"one");
        assert_eq!(&*after.read_all(p("/d/n")).unwrap(), b"new");
        assert_eq!(&*after.read_all(p("/d/earlier")).unwrap(), b"e", "the folder's fsync covers it");
        assert!(after.list_temps(p("/d")).unwrap().is_empty());
        s.write_atomic(p("/d/f"), b"two").unwrap();
        s.remove_file(p("/d/n")).unwrap();
        let after = s.power_loss(None);
        assert_eq!(&*after.read_all(p("/d/f")).unwrap(), b"two");
        assert!(after.is_file(p("/d/n")), "the removal was never synced");
    }

    #[test]
    fn a_staged_file_is_durable_once_published() {
        let s = PowerLossStorage::new();
        s.create_dir_all(p("/d")).unwrap();
        s.sync_dir(p("/")).unwrap();
        let staged = s.stage_new(p("/d"), b"record").unwrap().expect("this backend stages");
        // Staged: its content is durable, no name is; a power loss leaves at most a temporary.
        let after = s.power_loss(None);
        assert!(after.list_dir(p("/d")).unwrap().is_empty());
        assert!(staged.publish_new(p("/d/1")).unwrap());
        assert!(!staged.publish_new(p("/d/1")).unwrap());
        let after = s.power_loss(None);
        assert_eq!(&*after.read_all(p("/d/1")).unwrap(), b"record");
        // Another folder is refused: a link stays where the file was staged.
        s.create_dir_all(p("/e")).unwrap();
        assert!(staged.publish_new(p("/e/1")).is_err());
        drop(staged);
        assert!(s.list_temps(p("/d")).unwrap().is_empty());
        assert_eq!(&*s.read_all(p("/d/1")).unwrap(), b"record");
    }

    #[test]
    fn removals_come_back_until_synced() {
        let s = PowerLossStorage::new();
        s.create_dir_all(p("/d/sub")).unwrap();
        write(&s, "/d/sub/f", b"data", true);
        for d in ["/", "/d", "/d/sub"] {
            s.sync_dir(p(d)).unwrap();
        }
        s.remove_dir_all(p("/d/sub")).unwrap();
        assert!(!s.is_dir(p("/d/sub")));
        let after = s.power_loss(None);
        assert_eq!(&*after.read_all(p("/d/sub/f")).unwrap(), b"data");
        s.sync_dir(p("/d")).unwrap();
        assert!(!s.power_loss(None).is_dir(p("/d/sub")));
    }

    #[test]
    fn random_survivors_stay_between_durable_and_current() {
        let s = PowerLossStorage::new();
        s.create_dir_all(p("/d")).unwrap();
        s.sync_dir(p("/")).unwrap();
        s.sync_dir(p("/d")).unwrap();
        write(&s, "/d/a", b"0123456789", false);
        s.write_atomic(p("/d/r"), b"old").unwrap();
        let h = s.create(p("/d/t")).unwrap();
        drop(h);
        s.remove_file(p("/d/t")).unwrap();
        let mut seen_a = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let after = s.power_loss(Some(seed));
            assert_eq!(&*after.read_all(p("/d/r")).unwrap(), b"old");
            if let Ok(a) = after.read_all(p("/d/a")) {
                assert!(b"0123456789".starts_with(&a));
                seen_a.insert(a.len());
            }
            // Every survivor is durable now.
            let again = after.power_loss(None);
            assert_eq!(again.paths(), after.paths());
        }
        assert!(seen_a.len() > 2, "random prefixes: {seen_a:?}");
    }
}
