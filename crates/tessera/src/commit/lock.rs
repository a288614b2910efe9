//! The array's process-safe lock (docs/format.md, "Vacuum and the lock"). `__lock` is held
//! shared by readers (while an array is open for reading), by writers (from the start of a write
//! to its commit) and by consolidations, and exclusively by vacuum, which waits (up to
//! `sm.vacuum.lock_timeout_ms`) until every holder, in any process, has released it, so no one
//! ever loses a file it is reading or writing.
//!
//! So that a stream of overlapping readers cannot starve vacuum, it first holds a gate,
//! `__lock.gate`, exclusively: readers and writers pass the gate (a shared lock taken and
//! released at once) before they take `__lock`, so while vacuum waits no new one comes in. It
//! holds the gate for at most a second at a time while the holders already in finish, then lets
//! waiting ones pass and tries again, so a long-lived reader delays others by a second at most.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{ArrayError, Result};
use crate::storage::{LockGuard, LockKind, Storage, StorageError};

pub(crate) use crate::paths::{GATE_FILE, LOCK_FILE};

/// How long vacuum holds the gate at a time while readers already in finish.
const DRAIN: Duration = Duration::from_millis(1000);

/// Takes lock `path` of kind `kind`, polling until `deadline` (so a lock held by another thread
/// of this process cannot deadlock the wait); `Ok(None)` when the deadline passed.
fn poll(storage: &dyn Storage, path: &Path, kind: LockKind, deadline: Instant) -> Result<Option<LockGuard>> {
    loop {
        match storage.lock(path, kind, false) {
            Ok(g) => return Ok(Some(g)),
            Err(StorageError::WouldBlock { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(StorageError::WouldBlock { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Takes the array's lock shared (readers, writers), waiting up to `timeout`: through the gate
/// when the array has one.
pub(crate) fn lock_shared(storage: &dyn Storage, uri: &Path, timeout: Duration) -> Result<LockGuard> {
    let deadline = Instant::now() + timeout;
    let busy = || ArrayError::Busy { path: uri.to_path_buf(), waited_ms: timeout.as_millis() as u64 };
    let gate = uri.join(GATE_FILE);
    let passed = if storage.is_file(&gate) {
        Some(poll(storage, &gate, LockKind::Shared, deadline)?.ok_or_else(busy)?)
    } else {
        None
    };
    let guard = poll(storage, &uri.join(LOCK_FILE), LockKind::Shared, deadline)?.ok_or_else(busy)?;
    drop(passed);
    Ok(guard)
}

/// Takes the array's lock exclusively (vacuum), waiting up to `timeout`: holding the gate so no
/// new reader comes in while those inside finish (see the module doc). Returns the lock and
/// the gate; creates the gate of arrays made before it existed.
pub(crate) fn lock_exclusive(storage: &dyn Storage, uri: &Path, timeout: Duration) -> Result<(LockGuard, LockGuard)> {
    let deadline = Instant::now() + timeout;
    let busy = || ArrayError::Busy { path: uri.to_path_buf(), waited_ms: timeout.as_millis() as u64 };
    let gate = uri.join(GATE_FILE);
    if !storage.is_file(&gate) {
        // Never replaced once it exists (a replaced file would be a second gate).
        match storage.create(&gate) {
            Ok(h) => h.finish()?,
            Err(_) if storage.is_file(&gate) => {}
            Err(e) => return Err(e.into()),
        }
    }
    loop {
        let held = poll(storage, &gate, LockKind::Exclusive, deadline)?.ok_or_else(busy)?;
        let drain = (Instant::now() + DRAIN).min(deadline);
        if let Some(lock) = poll(storage, &uri.join(LOCK_FILE), LockKind::Exclusive, drain)? {
            return Ok((lock, held));
        }
        drop(held);
        if Instant::now() >= deadline {
            return Err(busy().into());
        }
        // Let the readers waiting at the gate pass.
        std::thread::sleep(Duration::from_millis(5));
    }
}
