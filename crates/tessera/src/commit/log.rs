//! Reading and appending to the commit log `__commits/` (docs/format.md, "Commit log").
//!
//! Appending takes the next sequence number with [`Storage::write_new`], which creates a record
//! only if no file of that name exists: of concurrent committers exactly one gets each number,
//! in any process, with no lock. Numbers are taken in order (a committer tries one more than the
//! largest it listed), so every number below an existing record was taken before it; a listing
//! that raced with new commits and shows a gap is repeated once, and a gap that remains is a
//! commit whose process died before its record became durable: it never happened.

use std::path::Path;

use rayon::prelude::*;

use super::record::{parse_record_file, record_file, Placed, Record, MAX_RECORD_BYTES};
use super::resolve::{inputs_are_consecutive, resolve, Resolved};
use crate::error::{ArrayError, Error, Result};
use crate::fragment::FragmentName;
use crate::stats::{self, Counter};
use crate::storage::{Storage, StorageError};

pub use crate::paths::COMMITS_DIR;

/// How many times a committer retries after losing the race for a sequence number before giving
/// up (each loss means another commit succeeded, so the array is making progress).
const MAX_CLAIMS: usize = 100_000;

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
    /// The largest sequence number in use (0 for none).
    pub(crate) max_seq: u64,
    /// Files that the newest checkpoint made obsolete (older records; `.ok` and `.vac` files):
    /// vacuum deletes them.
    pub(crate) obsolete: Vec<String>,
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

fn read_record(storage: &dyn Storage, path: &Path) -> Result<Record> {
    let bytes = match storage.read_all_within(path, MAX_RECORD_BYTES)? {
        Ok(bytes) => bytes,
        Err(size) => {
            return Err(Error::corrupt(path, format!("commit record of {size} bytes exceeds {MAX_RECORD_BYTES}")))
        }
    };
    stats::add(Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    Record::decode(&bytes, path)
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

/// Reads the commit log of the array at `uri`. Records are read in parallel (in the caller's
/// thread pool).
///
/// # Errors
/// Storage failures; [`Error::Corrupt`] for a damaged record or `.vac` list.
pub(crate) fn read_log(storage: &dyn Storage, uri: &Path) -> Result<Log> {
    let dir = uri.join(COMMITS_DIR);
    let mut listing = list(storage, &dir)?;
    if has_gap(&listing.seqs) {
        // A listing that raced with commits may miss one; every number below the largest was
        // taken before it, so a second listing sees them all (see the module doc).
        listing = list(storage, &dir)?;
    }
    let read = |seq: &u64| -> Result<Option<(u64, Record)>> {
        match read_record(storage, &dir.join(record_file(*seq))) {
            Ok(r) => Ok(Some((*seq, r))),
            // Deleted by a vacuum after the listing: it was older than a checkpoint.
            Err(Error::Storage(StorageError::NotFound { .. })) => Ok(None),
            Err(e) => Err(e),
        }
    };
    let mut records: Vec<(u64, Record)>;
    let mut attempts = 0;
    loop {
        let read_all: Vec<Option<(u64, Record)>> = listing.seqs.par_iter().map(read).collect::<Result<_>>()?;
        let last_vanished = listing.seqs.iter().zip(&read_all).filter(|(_, r)| r.is_none()).map(|(s, _)| *s).max();
        records = read_all.into_iter().flatten().collect();
        // Records vanish only when a vacuum deletes them after writing a newer checkpoint,
        // which this listing may not show (on storage without locks a vacuum runs beside
        // readers): list again until every listed record is read, or a checkpoint read follows
        // the vanished ones.
        let covered =
            last_vanished.is_none_or(|v| records.iter().any(|(seq, r)| *seq > v && matches!(r, Record::Checkpoint(_))));
        if covered {
            break;
        }
        attempts += 1;
        if attempts >= MAX_RELISTS {
            return Err(ArrayError::Busy { path: uri.to_path_buf(), waited_ms: 0 }.into());
        }
        listing = list(storage, &dir)?;
    }
    let max_seq = records.last().map_or(0, |r| r.0).max(listing.seqs.last().copied().unwrap_or(0));
    let mut log = Log { max_seq, ..Log::default() };
    if let Some(k) = records.iter().rposition(|(_, r)| matches!(r, Record::Checkpoint(_))) {
        log.obsolete.extend(records[..k].iter().map(|(s, _)| record_file(*s)));
        log.obsolete.extend(listing.ok.iter().chain(&listing.vac).cloned());
        let mut rest = records.split_off(k);
        let (seq, cp) = rest.remove(0);
        let Record::Checkpoint(live) = cp else { unreachable!("found as a checkpoint") };
        log.checkpoint = Some((seq, live));
        log.records = rest;
        return Ok(log);
    }
    log.records = records;
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

/// Appends the record `make` returns, given the log as read and resolved just before, at the
/// next sequence number; repeats (re-reading the log) when another commit took that number
/// first. Writes need no log (`needs_log` false: only a listing is made); consolidations check
/// the state they commit against.
fn append(
    storage: &dyn Storage,
    uri: &Path,
    needs_log: bool,
    mut make: impl FnMut(Option<&Resolved>) -> Result<Record>,
) -> Result<u64> {
    let dir = uri.join(COMMITS_DIR);
    for _ in 0..MAX_CLAIMS {
        let (seq, record) = if needs_log {
            let log = read_log(storage, uri)?;
            let resolved = resolve(&log, &dir, u64::MAX)?;
            (log.max_seq, make(Some(&resolved))?)
        } else {
            (max_seq(storage, &dir)?, make(None)?)
        };
        let next = seq.checked_add(1).ok_or_else(|| Error::corrupt(&dir, "commit sequence numbers are exhausted"))?;
        let bytes = record.encode();
        if storage.write_new(&dir.join(record_file(next)), &bytes)? {
            stats::add(Counter::WriterNumMetadataBytesWritten, bytes.len() as u64);
            return Ok(next);
        }
    }
    Err(ArrayError::Busy { path: uri.to_path_buf(), waited_ms: 0 }.into())
}

/// Commits the fragment `name` written by a write: it becomes visible, ordered after every
/// fragment committed before. Returns its sequence number.
///
/// # Errors
/// A storage failure; the fragment is then not committed.
pub(crate) fn commit_write(storage: &dyn Storage, uri: &Path, name: &FragmentName) -> Result<u64> {
    append(storage, uri, false, |_| Ok(Record::Write(name.clone())))
}

/// Commits the consolidated fragment `name`, replacing `inputs` (consecutive visible fragments,
/// oldest first, at the positions the consolidation saw). Returns its sequence number.
///
/// # Errors
/// [`ArrayError::ConsolidationConflict`] when the inputs are no longer consecutive visible
/// fragments (another consolidation committed first): nothing is committed. Storage failures.
pub(crate) fn commit_consolidation(
    storage: &dyn Storage,
    uri: &Path,
    name: &FragmentName,
    inputs: &[Placed],
) -> Result<u64> {
    append(storage, uri, true, |resolved| {
        if resolved.is_some_and(|r| inputs_are_consecutive(&r.live, inputs)) {
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
        let mut log = read_log(storage, uri)?;
        let resolved = resolve(&log, &dir, u64::MAX)?;
        let next =
            log.max_seq.checked_add(1).ok_or_else(|| Error::corrupt(&dir, "commit sequence numbers are exhausted"))?;
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

    #[test]
    fn writes_take_consecutive_numbers_and_a_stale_consolidation_conflicts() {
        let (s, uri) = setup();
        let f: Vec<_> = (1..=3).map(FragmentName::new).collect();
        for (i, n) in f.iter().enumerate() {
            assert_eq!(commit_write(&s, uri, n).unwrap(), i as u64 + 1);
        }
        let placed = |i: usize| Placed { name: f[i].clone(), position: Position::Seq(i as u64 + 1) };
        let c1 = FragmentName::covering(1, 2);
        assert_eq!(commit_consolidation(&s, uri, &c1, &[placed(0), placed(1)]).unwrap(), 4);
        // A second consolidation of overlapping inputs planned before c1 committed: refused.
        let c2 = FragmentName::covering(2, 3);
        let e = commit_consolidation(&s, uri, &c2, &[placed(1), placed(2)]).unwrap_err();
        assert!(matches!(e, Error::Array(ArrayError::ConsolidationConflict { .. })), "{e}");
        let log = read_log(&s, uri).unwrap();
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
                            .map(|i| commit_write(s, uri, &FragmentName::new(t * 100 + i)).unwrap())
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
        commit_write(&s, uri, &new).unwrap();
        let (log, resolved) = write_checkpoint(&s, uri).unwrap();
        assert_eq!(resolved.live.iter().map(|p| p.name.clone()).collect::<Vec<_>>(), vec![old.clone(), new.clone()]);
        let mut obsolete = log.obsolete.clone();
        obsolete.sort();
        assert_eq!(obsolete, vec![record_file(1), format!("{old}.ok")]);
        for f in &obsolete {
            s.remove_file(&uri.join(COMMITS_DIR).join(f)).unwrap();
        }
        let again = read_log(&s, uri).unwrap();
        assert_eq!(resolve(&again, Path::new("c"), u64::MAX).unwrap(), resolved);
        assert!(again.obsolete.is_empty());
    }

    #[test]
    fn a_flipped_byte_in_a_legacy_vac_list_is_corruption() {
        let (s, uri) = setup();
        let (a, c) = (FragmentName::new(1), FragmentName::covering(1, 2));
        let dir = uri.join(COMMITS_DIR);
        s.write_atomic(&dir.join(format!("{c}.vac")), format!("{a}\n").replace("__", "_~").as_bytes()).unwrap();
        assert!(matches!(read_log(&s, uri), Err(Error::Corrupt { .. })));
    }
}
