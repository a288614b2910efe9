//! Vacuum: deletes the fragments that consolidations superseded (listed in
//! `__commits/<output>.vac`), and the folders of fragments that were never committed (the remains
//! of crashed writers). It holds the array's lock file `__lock` exclusively, waiting (up to
//! `sm.vacuum.lock_timeout_ms`) until every reader and writer, in any process, has released its
//! shared lock, so no one ever loses a file it is reading or writing. For each superseded
//! fragment the commit file goes first (readers stop seeing it; the consolidated fragment holds
//! its cells), then its folder, then the `.vac` list: a crash at any point leaves a readable
//! array, and the next vacuum finishes the work.
//!
//! So that a stream of overlapping readers cannot starve it, vacuum first holds a gate,
//! `__lock.gate`, exclusively: readers and writers pass the gate (a shared lock taken and
//! released at once) before they take `__lock`, so while vacuum waits no new one comes in. It
//! holds the gate for at most a second at a time while the readers already in finish, then lets
//! waiting ones pass and tries again, so a long-lived reader delays others by a second at most.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::context::Context;
use crate::error::{ArrayError, Result};
use crate::fragment::{FragmentName, COMMITS_DIR, FRAGMENTS_DIR};
use crate::storage::{LockGuard, LockKind, Storage, StorageError};

/// Name of the lock file in an array folder.
pub(crate) const LOCK_FILE: &str = "__lock";

/// Name of the gate in front of the lock (see the module doc).
pub(crate) const GATE_FILE: &str = "__lock.gate";

/// How long vacuum holds the gate at a time while readers already in finish.
const DRAIN: Duration = Duration::from_millis(1000);

/// What a vacuum removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VacuumReport {
    /// Fragments superseded by consolidation and removed.
    pub removed: Vec<String>,
    /// Folders of fragments never committed and removed.
    pub uncommitted: Vec<String>,
}

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
fn lock_exclusive(storage: &dyn Storage, uri: &Path, timeout: Duration) -> Result<(LockGuard, LockGuard)> {
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

/// Vacuums the array at `uri`.
///
/// # Errors
/// Readers or writers holding the array longer than `sm.vacuum.lock_timeout_ms`, or a storage
/// failure (the array stays readable; a later vacuum resumes).
pub fn vacuum(ctx: &Context, uri: impl AsRef<Path>) -> Result<VacuumReport> {
    let uri = &ctx.resolve_uri(uri.as_ref())?;
    let storage = ctx.storage();
    if !storage.is_dir(&uri.join(COMMITS_DIR)) {
        return Err(ArrayError::NotAnArray { path: uri.to_path_buf() }.into());
    }
    let timeout = Duration::from_millis(ctx.config().vacuum_lock_timeout_ms());
    let _guard = lock_exclusive(storage.as_ref(), uri, timeout)?;
    let commits = uri.join(COMMITS_DIR);
    let frags = uri.join(FRAGMENTS_DIR);
    let mut report = VacuumReport::default();
    let entries = storage.list_dir(&commits)?;
    for vac in entries.iter().filter(|n| n.ends_with(".vac")) {
        let output = vac.trim_end_matches(".vac");
        if !entries.iter().any(|n| n == &format!("{output}.ok")) {
            // A consolidation that never committed (it held the lock while running, so it is
            // not running now): its list means nothing.
            remove_if_present(storage.as_ref(), &commits.join(vac), false)?;
            continue;
        }
        let list = storage.read_all(&commits.join(vac))?;
        for name in String::from_utf8_lossy(&list).lines().filter(|l| FragmentName::parse(l).is_some()) {
            remove_if_present(storage.as_ref(), &commits.join(format!("{name}.ok")), false)?;
            storage.sync_dir(&commits)?;
            remove_if_present(storage.as_ref(), &frags.join(name), true)?;
            report.removed.push(name.to_string());
        }
        storage.sync_dir(&frags)?;
        remove_if_present(storage.as_ref(), &commits.join(vac), false)?;
    }
    // Folders without a commit file: no writer holds the lock, so none is being written.
    let committed: Vec<String> = storage.list_dir(&commits)?;
    for f in storage.list_dir(&frags)? {
        if FragmentName::parse(&f).is_some() && !committed.iter().any(|c| c == &format!("{f}.ok")) {
            remove_if_present(storage.as_ref(), &frags.join(&f), true)?;
            report.uncommitted.push(f);
        }
    }
    storage.sync_dir(&commits)?;
    storage.sync_dir(&frags)?;
    Ok(report)
}

fn remove_if_present(storage: &dyn Storage, path: &Path, dir: bool) -> Result<()> {
    let r = if dir { storage.remove_dir_all(path) } else { storage.remove_file(path) };
    match r {
        Ok(()) | Err(StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
