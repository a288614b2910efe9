//! Vacuum: deletes what no reader can see any more, under the array's lock held exclusively
//! (`crate::commit::lock_exclusive`; it waits until every reader, writer and consolidation, in
//! any process, has finished). On storage without locks (object stores,
//! [`Storage::lock_free_grace`]) it takes no lock and deletes a fragment folder only when the
//! grace period has passed since it stopped being needed: since the commit record that replaced
//! it was written (superseded fragments), or since anything in it was last written (folders that
//! were never committed: a writer may still be writing one, and commits only within half the
//! grace of starting it). Younger ones are kept for a later vacuum (`VacuumReport::deferred`).
//!
//! It first appends a checkpoint to the commit log (the visible fragments, in order), which makes
//! every earlier record and the `.ok`/`.vac` files of format 1 and 2 obsolete; then it deletes
//! those files; then the folders of fragments that are not visible (superseded by a
//! consolidation, outputs of consolidations that lost a conflict, and the remains of crashed
//! writers); then temporary files older than `sm.vacuum.temp_grace_ms` that killed processes
//! left in the array's folders. A crash at any point leaves the array readable with the same
//! fragments, and the next vacuum finishes the work.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::time::Duration;

use crate::commit::{lock_exclusive, read_log, write_checkpoint, Log, Record, Scope, COMMITS_DIR};
use crate::context::Context;
use crate::error::{ArrayError, Result};
use crate::fragment::{now_ms, FragmentName, FRAGMENTS_DIR};
use crate::storage::{Storage, StorageError};

/// What a vacuum removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VacuumReport {
    /// Fragments superseded by consolidation and removed.
    pub removed: Vec<String>,
    /// Folders of fragments never committed (crashed writers, consolidations that lost a
    /// conflict) and removed.
    pub uncommitted: Vec<String>,
    /// Temporary files of killed processes removed.
    pub temporary: Vec<String>,
    /// Array metadata files removed (replaced by a consolidated one).
    pub metadata: Vec<String>,
    /// Consolidated fragment metadata files removed (a newer one exists).
    pub fragment_metadata: Vec<String>,
    /// Fragments no reader can see that were kept because they stopped being needed less than
    /// the grace period ago (storage without locks only); a later vacuum removes them.
    pub deferred: Vec<String>,
}

/// Vacuums the array at `uri`.
///
/// # Errors
/// Readers or writers holding the array longer than `sm.vacuum.lock_timeout_ms`, or a storage
/// failure (the array stays readable; a later vacuum resumes).
pub fn vacuum(ctx: &Context, uri: impl AsRef<Path>) -> Result<VacuumReport> {
    let uri = &ctx.resolve_uri(uri.as_ref())?;
    let storage = ctx.storage().as_ref();
    if !storage.is_dir(&uri.join(COMMITS_DIR)) {
        return Err(ArrayError::NotAnArray { path: uri.to_path_buf() }.into());
    }
    let grace = storage.lock_free_grace(uri);
    let timeout = Duration::from_millis(ctx.config().vacuum_lock_timeout_ms());
    let _guard = if grace.is_none() { Some(lock_exclusive(storage, uri, timeout)?) } else { None };
    let commits = uri.join(COMMITS_DIR);
    let frags = uri.join(FRAGMENTS_DIR);
    let before = ctx.install(|| read_log(storage, uri, Scope::Whole))?;
    let (log, live) = if needs_checkpoint(&before) {
        let (log, resolved) = ctx.install(|| write_checkpoint(storage, uri))?;
        (log, resolved.live)
    } else {
        let live = crate::commit::resolve(&before, &commits, u64::MAX)?.live;
        (before, live)
    };
    // Read before the records that tell it are deleted below.
    let replaced_at = match grace {
        Some(_) => Some(replacement_times(storage, &commits, &log)?),
        None => None,
    };
    for f in &log.obsolete {
        remove_if_present(storage, &commits.join(f), false)?;
    }
    storage.sync_dir(&commits)?;
    let live: HashSet<String> = live.iter().map(|p| p.name.to_string()).collect();
    let committed = committed_names(&log);
    let mut report = VacuumReport::default();
    let mut doomed = Vec::new();
    for f in storage.list_dir(&frags)? {
        if FragmentName::parse(&f).is_none() || live.contains(&f) {
            continue;
        }
        if let (Some(grace), Some(times)) = (grace, &replaced_at) {
            if !past_grace(storage, &frags.join(&f), &f, times, grace)? {
                report.deferred.push(f);
                continue;
            }
        }
        doomed.push(f);
    }
    if grace.is_some() {
        // Without locks a writer may have committed one of them since the log was read (it
        // commits within half the grace of starting, and each was checked older than the grace
        // after that read): a log read now shows every such commit.
        let now_named = named_since(ctx, uri, log.max_seq)?;
        let (kept, gone): (Vec<String>, Vec<String>) = doomed.into_iter().partition(|f| now_named.contains(f));
        report.deferred.extend(kept);
        doomed = gone;
    }
    for f in doomed {
        remove_if_present(storage, &frags.join(&f), true)?;
        if committed.contains(&f) {
            report.removed.push(f);
        } else {
            report.uncommitted.push(f);
        }
    }
    storage.sync_dir(&frags)?;
    let meta_dir = uri.join(crate::paths::META_DIR);
    report.metadata = crate::meta::remove_replaced(ctx, uri)?;
    report.fragment_metadata = crate::snapshot::fragment_meta::remove_old(ctx, uri, &live)?;
    let grace = ctx.config().vacuum_temp_grace_ms();
    let fmeta_dir = uri.join(crate::snapshot::fragment_meta::FRAGMENT_META_DIR);
    for dir in [uri.to_path_buf(), commits, frags, uri.join(crate::schema::SCHEMA_DIR), meta_dir, fmeta_dir] {
        report.temporary.extend(remove_old_temps(storage, &dir, grace)?);
    }
    Ok(report)
}

/// When fragments stopped being visible, as far as `log` tells (times in ms since the epoch,
/// from the modification times of commit records).
struct ReplacementTimes {
    /// Inputs of consolidation records: the time of the record that replaced them.
    by_record: HashMap<String, u64>,
    /// The time of the log's checkpoint: fragments committed but not listed in it were replaced
    /// before it.
    checkpoint: Option<u64>,
}

///
/// A record that is gone was deleted by another vacuum (on storage without locks vacuums run at
/// once) after it wrote a newer checkpoint: its time is unknown and counts as now, so what it
/// replaced waits another grace period rather than going early.
fn replacement_times(storage: &dyn Storage, commits: &Path, log: &Log) -> Result<ReplacementTimes> {
    let time_of = |seq: u64| match storage.modified_ms(&commits.join(crate::commit::record_file(seq))) {
        Err(StorageError::NotFound { .. }) => Ok(now_ms()),
        r => r,
    };
    let checkpoint = log.checkpoint.as_ref().map(|(seq, _)| time_of(*seq)).transpose()?;
    let mut by_record = HashMap::new();
    for (seq, r) in &log.records {
        if let Record::Consolidation(_, inputs) = r {
            let t = time_of(*seq)?;
            for p in inputs {
                by_record.insert(p.name.to_string(), t);
            }
        }
    }
    Ok(ReplacementTimes { by_record, checkpoint })
}

/// Whether the fragment folder `dir` (named `name`) stopped being needed at least `grace` ago.
/// A fragment a record of the log replaced counts from that record. Any other (replaced behind
/// the checkpoint, whose records are gone, or never committed: a writer may still be at work on
/// it) counts from the later of the checkpoint and the newest write into the folder.
fn past_grace(
    storage: &dyn Storage,
    dir: &Path,
    name: &str,
    times: &ReplacementTimes,
    grace: Duration,
) -> Result<bool> {
    let since = match times.by_record.get(name) {
        Some(&t) => t,
        None => {
            let written = match storage.modified_ms(dir) {
                Ok(t) => t,
                Err(StorageError::NotFound { .. }) => return Ok(true),
                Err(e) => return Err(e.into()),
            };
            written.max(times.checkpoint.unwrap_or(0))
        }
    };
    Ok(now_ms().saturating_sub(since) >= u64::try_from(grace.as_millis()).unwrap_or(u64::MAX))
}

/// The fragments visible now or named by a record after sequence number `after` (committed or
/// replaced since a vacuum read the log).
fn named_since(ctx: &Context, uri: &Path, after: u64) -> Result<HashSet<String>> {
    let storage = ctx.storage().as_ref();
    let log = ctx.install(|| read_log(storage, uri, Scope::Whole))?;
    let mut out: HashSet<String> = crate::commit::resolve(&log, &uri.join(COMMITS_DIR), u64::MAX)?
        .live
        .iter()
        .map(|p| p.name.to_string())
        .collect();
    for (seq, r) in &log.records {
        if *seq <= after {
            continue;
        }
        match r {
            Record::Write(n) => {
                out.insert(n.to_string());
            }
            Record::Consolidation(n, inputs) => {
                out.insert(n.to_string());
                out.extend(inputs.iter().map(|p| p.name.to_string()));
            }
            Record::Checkpoint(live) => out.extend(live.iter().map(|p| p.name.to_string())),
        }
    }
    Ok(out)
}

/// Whether the log is more than one checkpoint: then a new checkpoint lets vacuum delete files.
fn needs_checkpoint(log: &Log) -> bool {
    !log.records.is_empty() || !log.obsolete.is_empty() || !log.legacy.is_empty() || !log.legacy_vac.is_empty()
}

/// Every fragment the log says was committed at some time (visible or superseded since).
fn committed_names(log: &Log) -> HashSet<String> {
    let mut out: HashSet<String> = log.legacy.iter().map(ToString::to_string).collect();
    for (_, r) in &log.records {
        match r {
            Record::Write(n) => {
                out.insert(n.to_string());
            }
            Record::Consolidation(_, inputs) | Record::Checkpoint(inputs) => {
                out.extend(inputs.iter().map(|p| p.name.to_string()));
            }
        }
    }
    if let Some((_, live)) = &log.checkpoint {
        out.extend(live.iter().map(|p| p.name.to_string()));
    }
    for (_, inputs) in &log.legacy_vac {
        out.extend(inputs.iter().map(ToString::to_string));
    }
    out
}

/// Removes the temporary files in `dir` created more than `grace_ms` ago; returns their names.
fn remove_old_temps(storage: &dyn Storage, dir: &Path, grace_ms: u64) -> Result<Vec<String>> {
    let temps = match storage.list_temps(dir) {
        Ok(t) => t,
        Err(StorageError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let now = now_ms();
    let mut removed = Vec::new();
    for (name, created) in temps {
        if created.is_some_and(|c| now.saturating_sub(c) >= grace_ms) {
            remove_if_present(storage, &dir.join(&name), false)?;
            removed.push(name);
        }
    }
    Ok(removed)
}

fn remove_if_present(storage: &dyn Storage, path: &Path, dir: bool) -> Result<()> {
    let r = if dir { storage.remove_dir_all(path) } else { storage.remove_file(path) };
    match r {
        Ok(()) | Err(StorageError::NotFound { .. }) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::{LocalStorage, ReadMode};

    /// Records another vacuum deleted after this one read the log (the race the object-store test
    /// of concurrent vacuums hit: `NotFound` of a commit record) count as replaced now.
    #[test]
    fn records_deleted_by_another_vacuum_count_as_replaced_now() {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(ReadMode::Pread);
        let name = FragmentName::new(1);
        let placed = crate::commit::Placed { name: name.clone(), position: crate::commit::Position::Seq(1) };
        let log = Log {
            checkpoint: Some((3, vec![placed.clone()])),
            records: vec![(4, Record::Consolidation(name.clone(), vec![placed]))],
            max_seq: 4,
            ..Log::default()
        };
        let before = now_ms();
        let times = replacement_times(&storage, dir.path(), &log).unwrap();
        assert!(times.checkpoint.is_some_and(|t| t >= before));
        assert!(times.by_record[&name.to_string()] >= before);
    }
}
