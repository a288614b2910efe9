//! Reading and appending to the commit log `__commits/` (docs/format.md, "Commit log").
//!
//! Appending takes the next sequence number with [`Storage::write_new`], which creates a record
//! only if no file of that name exists: of concurrent committers exactly one gets each number,
//! in any process, with no lock. Numbers are taken in order (a committer tries one more than the
//! largest it listed), so every number below an existing record was taken before it; a listing
//! that raced with new commits and shows a gap is repeated once, and a gap that remains is a
//! commit whose process died before its record became durable: it never happened.
//!
//! Opening an array reads the log from its newest checkpoint on ([`Scope::Latest`]), newest
//! records first; writers append a checkpoint every `sm.commit.checkpoint_interval` commits
//! ([`checkpoint_after_write`]) so that this stays a few records however many commits there
//! were. Vacuum reads it whole ([`Scope::Whole`]) to know what to delete.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::record::{parse_record_file, record_file, Placed, Record, MAX_RECORD_BYTES};
use super::resolve::{inputs_are_consecutive, resolve, Resolved};
use crate::error::{ArrayError, Error, Result};
use crate::fragment::FragmentName;
use crate::stats::{self, Counter};
use crate::storage::{Bytes, Staged, Storage, StorageError};

pub use crate::paths::COMMITS_DIR;

/// How many times a committer retries after losing the race for a sequence number before giving
/// up (each loss means another commit succeeded, so the array is making progress).
const MAX_CLAIMS: usize = 100_000;

/// The most bytes of fragment metadata copies (format 8) that one read of the log keeps; the
/// copies of records read past it are dropped (their fragments' own files are read instead).
const MAX_HELD_COPIES: u64 = 256 << 20;

/// How many times a reader lists the log again when records it listed vanished (each time means
/// a vacuum deleted records behind a newer checkpoint between its listing and its reads).
const MAX_RELISTS: usize = 16;

/// The commit log of an array as read from `__commits/`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Log {
    /// Fragments committed by `<name>.ok` files (formats 1 and 2), in any order.
    pub(crate) legacy: Vec<FragmentName>,
    /// `<output>.vac` files (formats 1 and 2): a consolidated fragment and what it supersedes.
    pub(crate) legacy_vac: Vec<(FragmentName, Vec<FragmentName>)>,
    /// The newest checkpoint: its sequence number and the fragments it lists.
    pub(crate) checkpoint: Option<(u64, Vec<Placed>)>,
    /// The records after the newest checkpoint (all, without one), by sequence number.
    pub(crate) records: Vec<(u64, Record)>,
    /// The copies of fragment metadata those records carry (format 8): fragment -> the
    /// record's path and the copy.
    pub(crate) embedded: HashMap<FragmentName, (PathBuf, Bytes)>,
    /// The largest sequence number in use (0 for none).
    pub(crate) max_seq: u64,
    /// Files that the newest checkpoint made obsolete (older records; `.ok` and `.vac` files):
    /// vacuum deletes them.
    pub(crate) obsolete: Vec<String>,
}

impl Log {
    /// Takes `records` (those after the newest checkpoint) and the metadata copies they carry.
    fn set_records(&mut self, dir: &Path, records: Vec<(u64, ReadRecord)>) {
        for (seq, (record, embedded)) in records {
            if let (Record::Write(name) | Record::Consolidation(name, _), Some(bytes)) = (&record, embedded) {
                self.embedded.insert(name.clone(), (dir.join(record_file(seq)), bytes));
            }
            self.records.push((seq, record));
        }
    }
}

/// What a listing of `__commits/` holds.
struct Listing {
    seqs: Vec<u64>,
    ok: Vec<String>,
    vac: Vec<String>,
}

fn list(storage: &dyn Storage, dir: &Path) -> Result<Listing> {
    let mut l = Listing { seqs: Vec::new(), ok: Vec::new(), vac: Vec::new() };
    for f in storage.list_dir(dir)? {
        if let Some(seq) = parse_record_file(&f) {
            l.seqs.push(seq);
        } else if f.strip_suffix(".ok").and_then(FragmentName::parse).is_some() {
            l.ok.push(f);
        } else if f.strip_suffix(".vac").and_then(FragmentName::parse).is_some() {
            l.vac.push(f);
        }
    }
    l.seqs.sort_unstable();
    Ok(l)
}

/// The largest sequence number in `__commits/` (0 for none), from a listing alone.
fn max_seq(storage: &dyn Storage, dir: &Path) -> Result<u64> {
    Ok(list(storage, dir)?.seqs.last().copied().unwrap_or(0))
}

/// Whether sorted `seqs` leave out a number between their first and last.
fn has_gap(seqs: &[u64]) -> bool {
    seqs.windows(2).any(|w| w[1] != w[0] + 1)
}

/// A record and the copy of its fragment's metadata it carries, if any.
type ReadRecord = (Record, Option<Bytes>);

fn read_record(storage: &dyn Storage, path: &Path) -> Result<ReadRecord> {
    let bytes = match storage.read_all_within(path, MAX_RECORD_BYTES)? {
        Ok(bytes) => bytes,
        Err(size) => {
            return Err(Error::corrupt(path, format!("commit record of {size} bytes exceeds {MAX_RECORD_BYTES}")))
        }
    };
    stats::add(Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    let (record, embedded) = Record::decode_with(&bytes, path)?;
    Ok((record, embedded.map(|r| bytes.slice(r.start, r.len()))))
}

/// A `.vac` list of format 1 or 2: one fragment name per line, nothing else.
fn read_legacy_vac(storage: &dyn Storage, path: &Path) -> Result<Vec<FragmentName>> {
    let size = storage.file_size(path)?;
    if size > MAX_RECORD_BYTES {
        return Err(Error::corrupt(path, format!("vacuum list of {size} bytes exceeds {MAX_RECORD_BYTES}")));
    }
    let bytes = storage.read_all(path)?;
    stats::add(Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    let text = std::str::from_utf8(&bytes).map_err(|_| Error::corrupt(path, "vacuum list is not UTF-8"))?;
    text.lines()
        .enumerate()
        .map(|(i, line)| {
            FragmentName::parse(line).ok_or_else(|| {
                Error::corrupt(path, format!("line {} of the vacuum list is not a fragment name: {line:?}", i + 1))
            })
        })
        .collect()
}

/// How much of the commit log [`read_log`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every record: [`Log::obsolete`] lists what the newest checkpoint made obsolete (vacuum).
    Whole,
    /// The newest checkpoint and the records after it, read newest first from the sequence
    /// number a writer checkpointing every `interval` commits would have used (opening an
    /// array); [`Log::obsolete`] stays empty.
    Latest { interval: u64 },
}

/// The sequence number after `seq`, the largest in use in the log folder `dir`.
fn next_seq(seq: u64, dir: &Path) -> Result<u64> {
    seq.checked_add(1).ok_or_else(|| Error::corrupt(dir, "commit sequence numbers are exhausted"))
}

/// Reads records `seqs` in parallel (in the caller's thread pool); `None` for one that vanished
/// after the listing (a vacuum deleted it: it was older than a checkpoint). The metadata copies
/// they carry are kept while `copies` (bytes) lasts, and dropped after: a reader then reads
/// those fragments' own metadata files, and a log of many records with large copies does not
/// hold them all in memory at once.
fn read_records(
    storage: &dyn Storage,
    dir: &Path,
    seqs: &[u64],
    copies: &AtomicU64,
) -> Result<Vec<Option<(u64, ReadRecord)>>> {
    let keep = |bytes: &Bytes| {
        let n = bytes.len() as u64;
        copies.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| left.checked_sub(n)).is_ok()
    };
    seqs.par_iter()
        .map(|&seq| match read_record(storage, &dir.join(record_file(seq))) {
            Ok((record, copy)) => Ok(Some((seq, (record, copy.filter(keep))))),
            Err(Error::Storage(StorageError::NotFound { .. })) => Ok(None),
            Err(e) => Err(e),
        })
        .collect()
}

/// Where a [`Scope::Latest`] read starts in `seqs` (sorted): at the last number a writer's
/// checkpoint after a commit divisible by `interval` would take, if listed, else the whole log.
fn latest_start(seqs: &[u64], interval: u64) -> usize {
    let (Some(&max), true) = (seqs.last(), interval > 0) else { return 0 };
    let guess = max - (max - 1) % interval;
    seqs.partition_point(|&s| s < guess).min(seqs.len().saturating_sub(1))
}

/// Reads the commit log of the array at `uri` (all of it or from its newest checkpoint, as
/// `scope` says). Records are read in parallel (in the caller's thread pool).
///
/// # Errors
/// Storage failures; [`Error::Corrupt`] for a damaged record or `.vac` list.
pub(crate) fn read_log(storage: &dyn Storage, uri: &Path, scope: Scope) -> Result<Log> {
    let dir = uri.join(COMMITS_DIR);
    let mut listing = list(storage, &dir)?;
    if has_gap(&listing.seqs) {
        // A listing that raced with commits may miss one; every number below the largest was
        // taken before it, so a second listing sees them all (see the module doc).
        listing = list(storage, &dir)?;
    }
    let mut attempts = 0;
    // Vacuum needs no metadata copies; an open keeps at most MAX_HELD_COPIES bytes of them.
    let copies = AtomicU64::new(if scope == Scope::Whole { 0 } else { MAX_HELD_COPIES });
    let mut records: Vec<(u64, ReadRecord)> = 'listing: loop {
        // Newest first, in batches: a latest read stops at the batch holding a checkpoint.
        let seqs = &listing.seqs;
        let mut lo = match scope {
            Scope::Whole => 0,
            Scope::Latest { interval } => latest_start(seqs, interval),
        };
        let (mut hi, mut batches): (usize, Vec<Vec<(u64, ReadRecord)>>) = (seqs.len(), Vec::new());
        loop {
            let read = read_records(storage, &dir, &seqs[lo..hi], &copies)?;
            let last_vanished = seqs[lo..hi].iter().zip(&read).filter(|(_, r)| r.is_none()).map(|(s, _)| *s).max();
            let batch: Vec<(u64, ReadRecord)> = read.into_iter().flatten().collect();
            // The newer batches read before held none (a latest read stops at the first that
            // does; a whole read is one batch).
            let checkpoint = batch.iter().rev().find(|(_, (r, _))| matches!(r, Record::Checkpoint(_))).map(|(s, _)| *s);
            // Records vanish only when a vacuum deletes them after writing a newer checkpoint,
            // which this listing may not show (on storage without locks a vacuum runs beside
            // readers): list again until every listed record is read, or a checkpoint read
            // follows the vanished ones.
            if last_vanished.is_some_and(|v| checkpoint.is_none_or(|c| c < v)) {
                attempts += 1;
                if attempts >= MAX_RELISTS {
                    return Err(ArrayError::Busy { path: uri.to_path_buf(), waited_ms: 0 }.into());
                }
                listing = list(storage, &dir)?;
                continue 'listing;
            }
            batches.push(batch);
            if lo == 0 || checkpoint.is_some() {
                break;
            }
            // No checkpoint where a writer would have put it (a writer died, or the log
            // predates checkpoints): twice as many older records next.
            let n = (hi - lo).max(1) * 2;
            hi = lo;
            lo = lo.saturating_sub(n);
        }
        break batches.into_iter().rev().flatten().collect();
    };
    let max_seq = records.last().map_or(0, |r| r.0).max(listing.seqs.last().copied().unwrap_or(0));
    let mut log = Log { max_seq, ..Log::default() };
    if let Some(k) = records.iter().rposition(|(_, (r, _))| matches!(r, Record::Checkpoint(_))) {
        if scope == Scope::Whole {
            log.obsolete.extend(records[..k].iter().map(|(s, _)| record_file(*s)));
            log.obsolete.extend(listing.ok.iter().chain(&listing.vac).cloned());
        }
        let mut rest = records.split_off(k);
        let (seq, (cp, _)) = rest.remove(0);
        let Record::Checkpoint(live) = cp else { unreachable!("found as a checkpoint") };
        log.checkpoint = Some((seq, live));
        log.set_records(&dir, rest);
        return Ok(log);
    }
    log.set_records(&dir, records);
    log.legacy = listing.ok.iter().filter_map(|f| f.strip_suffix(".ok").and_then(FragmentName::parse)).collect();
    for f in &listing.vac {
        let Some(output) = f.strip_suffix(".vac").and_then(FragmentName::parse) else { continue };
        match read_legacy_vac(storage, &dir.join(f)) {
            Ok(list) => log.legacy_vac.push((output, list)),
            Err(Error::Storage(StorageError::NotFound { .. })) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(log)
}

/// Appends the record `make` returns, given the log as read (`scope`) and resolved just before,
/// at the next sequence number; repeats (re-reading the log) when another commit took that
/// number first: consolidations check the state they commit against. (Writes need no log:
/// [`publish_write`].)
fn append(
    storage: &dyn Storage,
    uri: &Path,
    scope: Scope,
    metadata: Option<&[u8]>,
    mut make: impl FnMut(&Resolved) -> Result<Record>,
) -> Result<u64> {
    let dir = uri.join(COMMITS_DIR);
    for _ in 0..MAX_CLAIMS {
        let log = read_log(storage, uri, scope)?;
        let resolved = resolve(&log, &dir, u64::MAX)?;
        let record = make(&resolved)?;
        let next = next_seq(log.max_seq, &dir)?;
        let bytes = record.encode_with(metadata);
        if storage.write_new(&dir.join(record_file(next)), &bytes)? {
            stats::add(Counter::WriterNumMetadataBytesWritten, bytes.len() as u64);
            return Ok(next);
        }
    }
    Err(ArrayError::Busy { path: uri.to_path_buf(), waited_ms: 0 }.into())
}

/// Commits the fragment `name` written by a write: it becomes visible, ordered after every
/// fragment committed before. `metadata` (the bytes of its metadata file) is copied into the
/// record when small enough ([`Record::encode_with`]). Returns its sequence number. A write
/// stages its record ([`stage_write`]) while its files are synced, and publishes it
/// ([`publish_write`]) after; this is the two in turn.
///
/// # Errors
/// A storage failure; the fragment is then not committed.
#[cfg(test)]
pub(crate) fn commit_write(
    storage: &dyn Storage,
    uri: &Path,
    name: &FragmentName,
    metadata: Option<&[u8]>,
) -> Result<u64> {
    publish_write(uri, &stage_write(storage, uri, name, metadata)?)
}

/// The record committing the fragment `name` of a write, staged in the log's folder (durable
/// where the storage can stage, not yet visible): a write's record does not depend on the log,
/// so it is written and synced at the same time as the fragment's files. `metadata` (the bytes
/// of its metadata file) is copied into the record when small enough ([`Record::encode_with`]).
///
/// # Errors
/// A storage failure (nothing is committed).
pub(crate) fn stage_write<'a>(
    storage: &'a dyn Storage,
    uri: &Path,
    name: &FragmentName,
    metadata: Option<&[u8]>,
) -> std::result::Result<Staged<'a>, StorageError> {
    let bytes = Record::Write(name.clone()).encode_with(metadata);
    Staged::new(storage, &uri.join(COMMITS_DIR), bytes)
}

/// Commits the write whose record `staged` holds: the record takes the next sequence number
/// (another if a concurrent commit took it first). Only once every file the record names is
/// durable. Returns its sequence number.
///
/// # Errors
/// A storage failure; the fragment is then not committed.
pub(crate) fn publish_write(uri: &Path, staged: &Staged<'_>) -> Result<u64> {
    let dir = uri.join(COMMITS_DIR);
    for _ in 0..MAX_CLAIMS {
        let next = next_seq(max_seq(staged.storage(), &dir)?, &dir)?;
        if staged.publish_new(&dir.join(record_file(next)))? {
            stats::add(Counter::WriterNumMetadataBytesWritten, staged.len() as u64);
            return Ok(next);
        }
    }
    Err(ArrayError::Busy { path: uri.to_path_buf(), waited_ms: 0 }.into())
}

/// After the write committed as `seq`: when `interval` divides `seq`, a checkpoint of the latest
/// state, so that readers need no record before it. Only when every record after the newest
/// checkpoint is a write (and there are no `.vac` lists of formats 1 and 2): then the checkpoint
/// resolves to exactly what those records do at every time, and reads back in time see what they
/// saw; a consolidation's inputs stay listed in the log until vacuum checkpoints it. Returns the
/// fragments of the write records the checkpoint follows when one was written (none when another
/// commit took its number first).
///
/// # Errors
/// Storage failures, a corrupt log. The write is committed whatever this returns.
pub(crate) fn checkpoint_after_write(
    storage: &dyn Storage,
    uri: &Path,
    seq: u64,
    interval: u64,
) -> Result<Option<Vec<FragmentName>>> {
    if interval == 0 || !seq.is_multiple_of(interval) {
        return Ok(None);
    }
    let dir = uri.join(COMMITS_DIR);
    let log = read_log(storage, uri, Scope::Latest { interval })?;
    let only_writes = log.records.iter().all(|(_, r)| matches!(r, Record::Write(_)));
    if log.records.is_empty() || !only_writes || (log.checkpoint.is_none() && !log.legacy_vac.is_empty()) {
        return Ok(None);
    }
    let live = resolve(&log, &dir, u64::MAX)?.live;
    let next = next_seq(log.max_seq, &dir)?;
    let bytes = Record::Checkpoint(live).encode();
    if bytes.len() as u64 > MAX_RECORD_BYTES || !storage.write_new(&dir.join(record_file(next)), &bytes)? {
        return Ok(None);
    }
    stats::add(Counter::WriterNumMetadataBytesWritten, bytes.len() as u64);
    let written = log.records.into_iter().filter_map(|(_, r)| if let Record::Write(n) = r { Some(n) } else { None });
    Ok(Some(written.collect()))
}

/// Commits the consolidated fragment `name`, replacing `inputs` (consecutive visible fragments,
/// oldest first, at the positions the consolidation saw), with a copy of `metadata` as a
/// write's commit makes ([`stage_write`] then [`publish_write`]). Returns its sequence number.
///
/// # Errors
/// [`ArrayError::ConsolidationConflict`] when the inputs are no longer consecutive visible
/// fragments (another consolidation committed first): nothing is committed. Storage failures.
pub(crate) fn commit_consolidation(
    storage: &dyn Storage,
    uri: &Path,
    name: &FragmentName,
    inputs: &[Placed],
    interval: u64,
    metadata: Option<&[u8]>,
) -> Result<u64> {
    append(storage, uri, Scope::Latest { interval }, metadata, |resolved| {
        if inputs_are_consecutive(&resolved.live, inputs) {
            Ok(Record::Consolidation(name.clone(), inputs.to_vec()))
        } else {
            Err(ArrayError::ConsolidationConflict {
                path: uri.to_path_buf(),
                fragment: name.to_string(),
                detail: "its input fragments were consolidated by another process that committed first".into(),
            }
            .into())
        }
    })
}

/// Writes a checkpoint of the latest state: from it on, readers need neither the records before
/// it nor `.ok` and `.vac` files. Returns the log it summarized (with [`Log::obsolete`] listing
/// what may now be deleted, this checkpoint's predecessors included) and the state.
///
/// # Errors
/// Storage failures, a corrupt log.
pub(crate) fn write_checkpoint(storage: &dyn Storage, uri: &Path) -> Result<(Log, Resolved)> {
    let dir = uri.join(COMMITS_DIR);
    for _ in 0..MAX_CLAIMS {
        let mut log = read_log(storage, uri, Scope::Whole)?;
        let resolved = resolve(&log, &dir, u64::MAX)?;
        let next = next_seq(log.max_seq, &dir)?;
        if storage.write_new(&dir.join(record_file(next)), &Record::Checkpoint(resolved.live.clone()).encode())? {
            // Everything listed before the new checkpoint is now obsolete.
            if let Some((seq, _)) = log.checkpoint {
                log.obsolete.push(record_file(seq));
            }
            log.obsolete.extend(log.records.iter().map(|(s, _)| record_file(*s)));
            if log.checkpoint.is_none() {
                log.obsolete.extend(log.legacy.iter().map(|n| format!("{n}.ok")));
                log.obsolete.extend(log.legacy_vac.iter().map(|(n, _)| format!("{n}.vac")));
            }
            return Ok((log, resolved));
        }
    }
    Err(ArrayError::Busy { path: uri.to_path_buf(), waited_ms: 0 }.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commit::record::Position;
    use crate::storage::MemoryStorage;

    fn setup() -> (MemoryStorage, &'static Path) {
        let s = MemoryStorage::new();
        let uri = Path::new("/a");
        s.create_dir_all(&uri.join(COMMITS_DIR)).unwrap();
        (s, uri)
    }

    /// Opens keep the metadata copies of the records they read, within a byte budget; vacuum
    /// (a whole read) keeps none, so a long log of large copies is never all in memory.
    #[test]
    fn metadata_copies_are_kept_for_opens_within_a_budget() {
        let (s, uri) = setup();
        let names: Vec<_> = (1..=4).map(FragmentName::new).collect();
        for (i, n) in names.iter().enumerate() {
            commit_write(&s, uri, n, Some(&[i as u8 + 1; 100])).unwrap();
        }
        let latest = read_log(&s, uri, Scope::Latest { interval: 32 }).unwrap();
        assert_eq!(latest.embedded.len(), 4);
        assert_eq!(latest.embedded[&names[2]].1.as_ref(), &[3u8; 100][..]);
        assert!(read_log(&s, uri, Scope::Whole).unwrap().embedded.is_empty());
        let dir = uri.join(COMMITS_DIR);
        let budget = AtomicU64::new(250);
        let read = read_records(&s, &dir, &[1, 2, 3, 4], &budget).unwrap();
        let kept = read.iter().flatten().filter(|(_, (_, copy))| copy.is_some()).count();
        assert_eq!(kept, 2, "two copies of 100 bytes fit 250");
        assert!(read.iter().flatten().all(|(_, (r, _))| matches!(r, Record::Write(_))), "records all read");
    }

    #[test]
    fn writes_take_consecutive_numbers_and_a_stale_consolidation_conflicts() {
        let (s, uri) = setup();
        let f: Vec<_> = (1..=3).map(FragmentName::new).collect();
        for (i, n) in f.iter().enumerate() {
            assert_eq!(commit_write(&s, uri, n, None).unwrap(), i as u64 + 1);
        }
        let placed = |i: usize| Placed { name: f[i].clone(), position: Position::Seq(i as u64 + 1) };
        let c1 = FragmentName::covering(1, 2);
        assert_eq!(commit_consolidation(&s, uri, &c1, &[placed(0), placed(1)], 32, None).unwrap(), 4);
        // A second consolidation of overlapping inputs planned before c1 committed: refused.
        let c2 = FragmentName::covering(2, 3);
        let e = commit_consolidation(&s, uri, &c2, &[placed(1), placed(2)], 32, None).unwrap_err();
        assert!(matches!(e, Error::Array(ArrayError::ConsolidationConflict { .. })), "{e}");
        let log = read_log(&s, uri, Scope::Whole).unwrap();
        let live: Vec<_> = resolve(&log, Path::new("c"), u64::MAX).unwrap().live.into_iter().map(|p| p.name).collect();
        assert_eq!(live, vec![c1, f[2].clone()]);
    }

    #[test]
    fn concurrent_committers_each_get_one_number() {
        let (s, uri) = setup();
        let seqs: Vec<u64> = std::thread::scope(|scope| {
            let hs: Vec<_> = (0..8)
                .map(|t| {
                    let s = &s;
                    scope.spawn(move || {
                        (0..25)
                            .map(|i| commit_write(s, uri, &FragmentName::new(t * 100 + i), None).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = seqs.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (1..=200).collect::<Vec<_>>());
    }

    #[test]
    fn a_checkpoint_makes_older_records_and_legacy_files_obsolete() {
        let (s, uri) = setup();
        let old = FragmentName::new(1);
        s.write_atomic(&uri.join(COMMITS_DIR).join(format!("{old}.ok")), b"").unwrap();
        let new = FragmentName::new(2);
        commit_write(&s, uri, &new, None).unwrap();
        let (log, resolved) = write_checkpoint(&s, uri).unwrap();
        assert_eq!(resolved.live.iter().map(|p| p.name.clone()).collect::<Vec<_>>(), vec![old.clone(), new.clone()]);
        let mut obsolete = log.obsolete.clone();
        obsolete.sort();
        assert_eq!(obsolete, vec![record_file(1), format!("{old}.ok")]);
        for f in &obsolete {
            s.remove_file(&uri.join(COMMITS_DIR).join(f)).unwrap();
        }
        let again = read_log(&s, uri, Scope::Whole).unwrap();
        assert_eq!(resolve(&again, Path::new("c"), u64::MAX).unwrap(), resolved);
        assert!(again.obsolete.is_empty());
    }

    /// One step of a commit history (`history`).
    #[derive(Debug, Clone)]
    enum Step {
        Write,
        /// Consolidate the visible fragments `from..from + len` (when they exist).
        Consolidate(usize, usize),
        /// Vacuum's checkpoint (with the obsolete records deleted when `true`).
        Vacuum(bool),
    }

    /// A fragment name covering `[t0, t1]` whose uuid follows from them (so that two histories
    /// name their fragments alike).
    fn name(t0: u64, t1: u64) -> FragmentName {
        FragmentName { uuid: format!("{t0:016x}{t1:016x}"), ..FragmentName::covering(t0, t1) }
    }

    /// Runs `steps` on a log in `s`; writers checkpoint every `interval` commits (0: never).
    fn history(s: &MemoryStorage, uri: &Path, steps: &[Step], interval: u64) {
        let mut t = 0;
        for step in steps {
            t += 1;
            match *step {
                Step::Write => {
                    let seq = commit_write(s, uri, &name(t, t), None).unwrap();
                    checkpoint_after_write(s, uri, seq, interval).unwrap();
                }
                Step::Consolidate(from, len) => {
                    let log = read_log(s, uri, Scope::Whole).unwrap();
                    let live = resolve(&log, Path::new("c"), u64::MAX).unwrap().live;
                    let Some(inputs) = live.get(from..from + len) else { continue };
                    // Named by its step, so that each name is new.
                    let out = FragmentName {
                        uuid: format!("{t:016x}{:016x}", u64::MAX),
                        ..FragmentName::covering(inputs[0].name.t0, inputs[inputs.len() - 1].name.t1)
                    };
                    commit_consolidation(s, uri, &out, inputs, interval, None).unwrap();
                }
                Step::Vacuum(delete) => {
                    let (log, _) = write_checkpoint(s, uri).unwrap();
                    if delete {
                        for f in &log.obsolete {
                            s.remove_file(&uri.join(COMMITS_DIR).join(f)).unwrap();
                        }
                    }
                }
            }
        }
    }

    fn step() -> impl proptest::strategy::Strategy<Value = Step> {
        use proptest::prelude::*;
        prop_oneof![
            6 => Just(Step::Write),
            2 => (0usize..6, 2usize..4).prop_map(|(a, b)| Step::Consolidate(a, b)),
            1 => any::<bool>().prop_map(Step::Vacuum),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]
        /// Writers' checkpoints change nothing a reader sees, at any time (time travel
        /// included), and a latest read resolves as a whole read does.
        #[test]
        fn writer_checkpoints_change_no_state_at_any_time(
            steps in proptest::collection::vec(step(), 1..60),
            interval in 1u64..6,
        ) {
            let (plain, uri) = setup();
            history(&plain, uri, &steps, 0);
            let (checked, _) = setup();
            history(&checked, uri, &steps, interval);
            let dir = Path::new("c");
            let reference = read_log(&plain, uri, Scope::Whole).unwrap();
            for log in [
                read_log(&checked, uri, Scope::Whole).unwrap(),
                read_log(&checked, uri, Scope::Latest { interval }).unwrap(),
                read_log(&checked, uri, Scope::Latest { interval: interval + 1 }).unwrap(),
                read_log(&plain, uri, Scope::Latest { interval }).unwrap(),
            ] {
                // Checkpoints take sequence numbers: positions differ, the order may not.
                let names = |l: &Log, end: u64| -> Vec<FragmentName> {
                    resolve(l, dir, end).unwrap().live.into_iter().map(|p| p.name).collect()
                };
                for end in 0..=steps.len() as u64 + 1 {
                    proptest::prop_assert_eq!(names(&log, end), names(&reference, end), "at time {}", end);
                }
            }
        }
    }

    #[test]
    fn a_latest_read_needs_no_record_before_the_newest_checkpoint() {
        let (s, uri) = setup();
        history(&s, uri, &vec![Step::Write; 70], 32);
        let dir = uri.join(COMMITS_DIR);
        let whole = read_log(&s, uri, Scope::Whole).unwrap();
        // Writers checkpointed after commits 32 and 64 (as records 33 and 65).
        assert_eq!(whole.checkpoint.as_ref().map(|c| c.0), Some(65));
        assert_eq!(whole.max_seq, 72);
        let damage = |seqs: std::ops::Range<u64>| {
            for seq in seqs {
                s.remove_file(&dir.join(record_file(seq))).unwrap();
                s.write_atomic(&dir.join(record_file(seq)), b"not a record").unwrap();
            }
        };
        let want = resolve(&whole, Path::new("c"), u64::MAX).unwrap();
        assert_eq!(want.live.len(), 70);
        // A guess from another interval reads batches of 2, 4, 8 and 16 older records: back to
        // record 43, not to the damaged ones.
        damage(1..43);
        let other = read_log(&s, uri, Scope::Latest { interval: 5 }).unwrap();
        assert_eq!(resolve(&other, Path::new("c"), u64::MAX).unwrap(), want);
        // Every record older than the checkpoint is damaged: a latest read reads none of them.
        damage(43..65);
        let latest = read_log(&s, uri, Scope::Latest { interval: 32 }).unwrap();
        assert_eq!(resolve(&latest, Path::new("c"), u64::MAX).unwrap(), want);
        assert!(read_log(&s, uri, Scope::Whole).is_err());
    }

    #[test]
    fn writers_do_not_checkpoint_over_a_consolidation() {
        let (s, uri) = setup();
        history(&s, uri, &[Step::Write, Step::Write, Step::Consolidate(0, 2), Step::Write], 0);
        // Record 5 would be divisible, but a consolidation follows no checkpoint yet.
        let seq = commit_write(&s, uri, &FragmentName::new(9), None).unwrap();
        assert_eq!(seq, 5);
        assert_eq!(checkpoint_after_write(&s, uri, seq, 5).unwrap(), None);
        // After vacuum's checkpoint, writes alone: a writer checkpoints again, and says which
        // fragments the records it summarized wrote.
        write_checkpoint(&s, uri).unwrap();
        let (a, b) = (FragmentName::new(10), FragmentName::new(11));
        commit_write(&s, uri, &a, None).unwrap();
        let seq = commit_write(&s, uri, &b, None).unwrap();
        assert_eq!(checkpoint_after_write(&s, uri, seq, seq).unwrap(), Some(vec![a, b]));
        assert_eq!(checkpoint_after_write(&s, uri, seq + 2, seq + 1).unwrap(), None, "not divisible");
    }

    #[test]
    fn a_flipped_byte_in_a_legacy_vac_list_is_corruption() {
        let (s, uri) = setup();
        let (a, c) = (FragmentName::new(1), FragmentName::covering(1, 2));
        let dir = uri.join(COMMITS_DIR);
        s.write_atomic(&dir.join(format!("{c}.vac")), format!("{a}\n").replace("__", "_~").as_bytes()).unwrap();
        assert!(matches!(read_log(&s, uri, Scope::Whole), Err(Error::Corrupt { .. })));
    }
}
