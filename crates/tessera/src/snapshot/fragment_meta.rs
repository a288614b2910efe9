//! Consolidated fragment metadata (docs/format.md §15): files holding copies of many
//! fragments' `__fragment_metadata` files, so opening an array with thousands of fragments reads
//! a few files instead of thousands. `consolidate_fragment_metadata` writes one of every visible
//! fragment; a writer that checkpoints the commit log writes one of the fragments committed since
//! the previous checkpoint. Fragment metadata never changes once written, so a copy stays right
//! for as long as its fragment is committed; the snapshot uses a copy only for fragments the
//! commit log says are visible (the newest file's, reading files newest first until each has
//! one), and reads the others' own files.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::footer::{seal, unseal};
use crate::fragment::{now_ms, FRAGMENTS_DIR, METADATA_FILE};
use crate::storage::{Bytes, StorageError};

/// Folder of consolidated fragment metadata files.
pub(crate) const FRAGMENT_META_DIR: &str = "__fragment_meta";
/// The footer magic of a consolidated fragment metadata file.
const MAGIC: &[u8; 8] = b"TSRFMETA";
/// The largest consolidated file a reader accepts (its copies are held in memory while an array
/// opens).
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 30;

/// The most bytes of consolidated files an open reads (and holds) in all.
const READ_BUDGET: u64 = MAX_FILE_BYTES;

/// How many consolidated files an open reads at once.
const READ_BATCH: usize = 4;

/// Copies of fragment metadata files by fragment name, as ranges of the bytes of one or more
/// consolidated files.
#[derive(Default)]
pub(crate) struct Copies {
    /// The files they come from: path and bytes.
    files: Vec<(PathBuf, Bytes)>,
    /// Fragment name -> file, start, end (the newest file's copy where several hold one).
    ranges: HashMap<String, (usize, usize, usize)>,
}

impl Copies {
    /// The copy of fragment `name`'s metadata and the file holding it, if a file holds one.
    pub(crate) fn get(&self, name: &str) -> Option<(&Path, &[u8])> {
        self.ranges.get(name).map(|&(f, a, b)| (self.files[f].0.as_path(), &self.files[f].1[a..b]))
    }

    /// Adds the entries of a file older than those added before (theirs win).
    fn add_older(&mut self, path: PathBuf, bytes: Bytes, ranges: HashMap<String, (usize, usize)>) {
        let f = self.files.len();
        for (name, (a, b)) in ranges {
            self.ranges.entry(name).or_insert((f, a, b));
        }
        self.files.push((path, bytes));
    }
}

/// The name of a new consolidated file: `__<ms>_<uuid>.fmeta`.
fn new_name() -> String {
    format!("__{}_{}.fmeta", now_ms(), uuid::Uuid::new_v4().simple())
}

/// (ms, uuid) of a consolidated file's name, or `None` for other names.
fn parse_name(name: &str) -> Option<(u64, &str)> {
    let (t, uuid) = name.strip_prefix("__")?.strip_suffix(".fmeta")?.split_once('_')?;
    let ok = uuid.len() == 32 && uuid.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then(|| t.parse().ok().map(|t| (t, uuid))).flatten()
}

/// The consolidated files of the array at `uri`, oldest first.
pub(crate) fn list(ctx: &Context, uri: &Path) -> Result<Vec<String>> {
    let mut names = match ctx.storage().list_dir(&uri.join(FRAGMENT_META_DIR)) {
        Ok(n) => n,
        Err(StorageError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    names.retain(|n| parse_name(n).is_some());
    names.sort_by(|a, b| parse_name(a).cmp(&parse_name(b)));
    Ok(names)
}

/// Writes one consolidated file of the metadata of committed fragments `names` (read from their
/// own files, in parallel); returns its name.
pub(crate) fn write_copies_of(ctx: &Context, uri: &Path, names: Vec<String>) -> Result<String> {
    let storage = ctx.storage();
    let entries = ctx.install(|| {
        names
            .into_par_iter()
            .map(|n| {
                let bytes = storage.read_all(&uri.join(FRAGMENTS_DIR).join(&n).join(METADATA_FILE))?;
                Ok((n, bytes.to_vec()))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    write(ctx, uri, &entries)
}

/// Writes one consolidated file of `entries` (fragment name, bytes of its metadata file);
/// returns its name.
pub(crate) fn write(ctx: &Context, uri: &Path, entries: &[(String, Vec<u8>)]) -> Result<String> {
    let total: usize = entries.iter().map(|(n, b)| 12 + n.len() + b.len()).sum();
    let mut payload = Vec::with_capacity(8 + total);
    payload.extend_from_slice(&(entries.len() as u64).to_le_bytes());
    for (name, bytes) in entries {
        payload.extend_from_slice(&u32::try_from(name.len()).unwrap_or(u32::MAX).to_le_bytes());
        payload.extend_from_slice(name.as_bytes());
        payload.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        payload.extend_from_slice(bytes);
    }
    let sealed = seal(payload, MAGIC);
    if sealed.len() as u64 > MAX_FILE_BYTES {
        return Err(Error::corrupt(
            uri.join(FRAGMENT_META_DIR),
            format!("{} bytes of fragment metadata is more than one file may hold ({MAX_FILE_BYTES})", sealed.len()),
        ));
    }
    let storage = ctx.storage();
    let dir = uri.join(FRAGMENT_META_DIR);
    storage.create_dir_all(&dir)?;
    let name = new_name();
    storage.write_atomic(&dir.join(&name), &sealed)?;
    storage.sync_dir(&dir)?;
    Ok(name)
}

/// What reading one consolidated file gave.
enum FileRead {
    Read(Bytes, HashMap<String, (usize, usize)>),
    /// Removed by a vacuum after the listing (a newer file covers its fragments).
    Gone,
    /// Larger than the bytes it was allowed.
    TooLarge(u64),
}

fn read_file(ctx: &Context, path: &Path, limit: u64) -> Result<FileRead> {
    let bytes = match ctx.storage().read_all_within(path, limit) {
        Ok(Err(size)) => return Ok(FileRead::TooLarge(size)),
        Ok(Ok(bytes)) => bytes,
        Err(StorageError::NotFound { .. }) => return Ok(FileRead::Gone),
        Err(e) => return Err(e.into()),
    };
    crate::stats::add(crate::stats::Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    let ranges = decode(&bytes, path)?;
    Ok(FileRead::Read(bytes, ranges))
}

/// The copies the array at `uri` holds of the metadata of fragments `wanted` (all of them when
/// `None`): consolidated files read newest first, a few at a time in parallel, until every
/// wanted fragment has a copy or no file is left; of several copies, the newest file's. At most
/// [`READ_BUDGET`] bytes are read in all: older files beyond it are left unread (copies are only
/// a shortcut). A damaged file is an error (it names the file), not a silent fallback.
pub(crate) fn read_copies(ctx: &Context, uri: &Path, wanted: Option<&[String]>) -> Result<Copies> {
    read_listed(ctx, uri, list(ctx, uri)?, wanted)
}

/// As [`read_copies`], from `listing` (what [`list`] returned, perhaps a while ago: files
/// removed since are skipped).
pub(crate) fn read_listed(
    ctx: &Context,
    uri: &Path,
    listing: Vec<String>,
    wanted: Option<&[String]>,
) -> Result<Copies> {
    read_within(ctx, uri, listing, wanted, READ_BUDGET)
}

/// As [`read_listed`], reading at most `budget` bytes.
fn read_within(
    ctx: &Context,
    uri: &Path,
    listing: Vec<String>,
    wanted: Option<&[String]>,
    budget: u64,
) -> Result<Copies> {
    let dir = uri.join(FRAGMENT_META_DIR);
    let mut queue: std::collections::VecDeque<String> = listing.into_iter().rev().collect();
    let mut copies = Copies::default();
    let (mut spent, mut solo) = (0u64, false);
    let covered = |c: &Copies| wanted.is_some_and(|w| w.iter().all(|n| c.ranges.contains_key(n)));
    while !queue.is_empty() && !covered(&copies) {
        let remaining = budget.saturating_sub(spent);
        // A file larger than its share of a batch is read again alone, with all that remains.
        let n = if solo { 1 } else { queue.len().min(READ_BATCH) };
        let batch: Vec<String> = queue.drain(..n).collect();
        let share = remaining / n as u64;
        let reads: Vec<Result<FileRead>> =
            ctx.install_for(uri, || batch.par_iter().map(|name| read_file(ctx, &dir.join(name), share)).collect());
        solo = false;
        for (i, (name, read)) in batch.iter().zip(reads).enumerate() {
            match read? {
                FileRead::Read(bytes, ranges) => {
                    spent += bytes.len() as u64;
                    copies.add_older(dir.join(name), bytes, ranges);
                }
                FileRead::Gone => {}
                FileRead::TooLarge(size) if size > MAX_FILE_BYTES => {
                    return Err(Error::corrupt(
                        dir.join(name),
                        format!("{size} bytes, more than a consolidated metadata file may hold"),
                    ));
                }
                FileRead::TooLarge(size) if n > 1 && size <= remaining => {
                    // Read alone next, then the older files after it, in order (what this
                    // batch read of those is dropped).
                    for later in batch[i..].iter().rev() {
                        queue.push_front(later.clone());
                    }
                    solo = true;
                    break;
                }
                // Beyond what is left to read: older files stay unread.
                FileRead::TooLarge(_) => return Ok(copies),
            }
        }
    }
    Ok(copies)
}

/// The entries' ranges in `bytes`, every count and length checked against what is there.
fn decode(bytes: &[u8], path: &Path) -> Result<HashMap<String, (usize, usize)>> {
    let payload = unseal(bytes, MAGIC, path)?;
    let bad = |what: &str| Error::corrupt(path, format!("consolidated fragment metadata: {what}"));
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<(usize, usize)> {
        let end = at.checked_add(n).filter(|&e| e <= payload.len()).ok_or_else(|| bad("an entry runs past the end"))?;
        let r = (at, end);
        at = end;
        Ok(r)
    };
    let u64_at = |r: (usize, usize)| u64::from_le_bytes(payload[r.0..r.1].try_into().unwrap_or([0; 8]));
    let count = u64_at(take(8)?);
    // Each entry takes at least 12 bytes: the count cannot claim more entries than that allows.
    if count > (payload.len() as u64) / 12 {
        return Err(bad("more entries than bytes"));
    }
    let mut ranges = HashMap::with_capacity(count as usize);
    for _ in 0..count {
        let r = take(4)?;
        let name_len = u32::from_le_bytes(payload[r.0..r.1].try_into().unwrap_or([0; 4])) as usize;
        let r = take(name_len)?;
        let name = std::str::from_utf8(&payload[r.0..r.1]).map_err(|_| bad("a name is not UTF-8"))?.to_owned();
        let len = usize::try_from(u64_at(take(8)?)).map_err(|_| bad("a length does not fit"))?;
        let r = take(len)?;
        if ranges.insert(name, r).is_some() {
            return Err(bad("a fragment appears twice"));
        }
    }
    if at != payload.len() {
        return Err(bad("bytes follow the last entry"));
    }
    Ok(ranges)
}

/// Deletes the consolidated files whose copies of fragments in `live` a newer file also holds
/// (or that hold none), the caller holding the array's lock exclusively; returns their names.
/// Files beyond what [`read_copies`] reads are kept.
pub(crate) fn remove_old(ctx: &Context, uri: &Path, live: &HashSet<String>) -> Result<Vec<String>> {
    let copies = read_copies(ctx, uri, None)?;
    // Per file (newest first), whether some live fragment takes its copy from it.
    let mut used = vec![false; copies.files.len()];
    for name in live {
        if let Some(&(f, _, _)) = copies.ranges.get(name) {
            used[f] = true;
        }
    }
    let dir = uri.join(FRAGMENT_META_DIR);
    let storage = ctx.storage();
    let mut removed = Vec::new();
    for ((path, _), used) in copies.files.iter().zip(used) {
        if used {
            continue;
        }
        match storage.remove_file(path) {
            Ok(()) | Err(StorageError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        removed.extend(path.file_name().map(|n| n.to_string_lossy().into_owned()));
    }
    if !removed.is_empty() {
        storage.sync_dir(&dir)?;
    }
    Ok(removed)
}

/// Decodes arbitrary bytes as a consolidated file (fuzzing): errors, never a panic.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fuzz_decode(data: &[u8]) {
    let _ = decode(data, Path::new("fuzz"));
}

/// Seeds for the fuzz target: payloads (unsealed) of small valid files.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fuzz_seeds() -> Vec<Vec<u8>> {
    let mut one = Vec::new();
    one.extend_from_slice(&1u64.to_le_bytes());
    one.extend_from_slice(&9u32.to_le_bytes());
    one.extend_from_slice(b"__1_1_a_3");
    one.extend_from_slice(&3u64.to_le_bytes());
    one.extend_from_slice(&[1, 2, 3]);
    vec![0u64.to_le_bytes().to_vec(), one]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_round_trip_and_damage_is_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(crate::Config::new()).unwrap();
        let entries = vec![("__1_1_a_3".to_string(), vec![1u8, 2, 3]), ("__2_2_b_3".to_string(), vec![])];
        let name = write(&ctx, dir.path(), &entries).unwrap();
        let copies = read_copies(&ctx, dir.path(), None).unwrap();
        assert_eq!(copies.get("__1_1_a_3").map(|c| c.1), Some(&[1u8, 2, 3][..]));
        assert_eq!(copies.get("__2_2_b_3").map(|c| c.1), Some(&[][..]));
        assert_eq!(copies.get("__3_3_c_3"), None);
        let path = dir.path().join(FRAGMENT_META_DIR).join(&name);
        let bytes = std::fs::read(&path).unwrap();
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x04;
            assert!(matches!(decode(&b, &path), Err(Error::Corrupt { .. })), "byte {i}");
        }
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n], &path).is_err());
        }
    }

    #[test]
    fn counts_and_lengths_beyond_the_bytes_are_corruption() {
        let path = Path::new("m");
        let mut huge = Vec::new();
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode(&seal(huge, MAGIC), path).is_err());
        let mut long = Vec::new();
        long.extend_from_slice(&1u64.to_le_bytes());
        long.extend_from_slice(&1u32.to_le_bytes());
        long.push(b'x');
        long.extend_from_slice(&(u64::MAX - 3).to_le_bytes());
        assert!(decode(&seal(long, MAGIC), path).is_err());
    }

    /// Writes `files` (each a list of (fragment, byte)) oldest first, their names in order.
    fn files(ctx: &Context, dir: &Path, files: &[&[(&str, u8)]]) -> Vec<String> {
        files
            .iter()
            .map(|entries| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                let entries: Vec<(String, Vec<u8>)> = entries.iter().map(|(n, b)| (n.to_string(), vec![*b])).collect();
                write(ctx, dir, &entries).unwrap()
            })
            .collect()
    }

    #[test]
    fn the_newest_copy_wins_and_reading_stops_once_every_wanted_fragment_has_one() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(crate::Config::new()).unwrap();
        let names =
            files(&ctx, dir.path(), &[&[("a", 1), ("b", 1)], &[("e", 5)], &[("f", 6)], &[("a", 2)], &[("c", 3)]]);
        let get = |c: &Copies, n: &str| c.get(n).map(|c| c.1[0]);
        let all = read_copies(&ctx, dir.path(), None).unwrap();
        assert_eq!((get(&all, "a"), get(&all, "b"), get(&all, "c")), (Some(2), Some(1), Some(3)));
        // The oldest file is damaged: a read wanting only what the newest batch of files holds
        // never reads it.
        let oldest = dir.path().join(FRAGMENT_META_DIR).join(&names[0]);
        std::fs::write(&oldest, b"damaged").unwrap();
        let some = read_copies(&ctx, dir.path(), Some(&["a".to_string(), "c".to_string()])).unwrap();
        assert_eq!((get(&some, "a"), get(&some, "c")), (Some(2), Some(3)));
        assert!(matches!(read_copies(&ctx, dir.path(), None), Err(Error::Corrupt { .. })));
    }

    /// A file larger than its share of a batch is read again alone; once a file is beyond what
    /// is left of the budget, it and every older file stay unread.
    #[test]
    fn reads_stay_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(crate::Config::new()).unwrap();
        // Oldest first: a (small), b (2,000 bytes), c and d (small).
        for (name, len) in [("a", 10), ("b", 2000), ("c", 10), ("d", 10)] {
            std::thread::sleep(std::time::Duration::from_millis(2));
            write(&ctx, dir.path(), &[(name.to_string(), vec![7u8; len])]).unwrap();
        }
        let listing = || list(&ctx, dir.path()).unwrap();
        let has = |c: &Copies| ["a", "b", "c", "d"].map(|n| c.get(n).is_some());
        // 3,000 bytes: a batch of four gives each file 750; b is read again alone, then a.
        let held = |c: &Copies| c.files.iter().map(|f| f.1.len()).sum::<usize>();
        let all = read_within(&ctx, dir.path(), listing(), None, 3000).unwrap();
        assert_eq!(has(&all), [true; 4]);
        assert!(held(&all) <= 3000, "{}", held(&all));
        assert_eq!(all.get("b").map(|c| c.1.len()), Some(2000));
        // 1,000 bytes: c and d fit; b does not, so neither b nor the older a is read.
        let some = read_within(&ctx, dir.path(), listing(), None, 1000).unwrap();
        assert_eq!(has(&some), [false, false, true, true]);
        assert!(held(&some) <= 1000, "{}", held(&some));
        // Wanting only d reads no further than the first batch.
        let d = read_within(&ctx, dir.path(), listing(), Some(&["d".to_string()]), 3000).unwrap();
        assert!(d.get("d").is_some());
    }

    #[test]
    fn vacuum_keeps_the_files_live_fragments_take_copies_from() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(crate::Config::new()).unwrap();
        let names = files(&ctx, dir.path(), &[&[("a", 1), ("b", 1)], &[("a", 2)], &[("c", 3)], &[("d", 4)]]);
        let live: HashSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        // The first file still gives b; the last holds only a fragment no longer live.
        let mut removed = remove_old(&ctx, dir.path(), &live).unwrap();
        removed.sort();
        assert_eq!(removed, vec![names[3].clone()]);
        let live: HashSet<String> = ["a", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(remove_old(&ctx, dir.path(), &live).unwrap(), vec![names[0].clone()]);
        assert_eq!(list(&ctx, dir.path()).unwrap(), vec![names[1].clone(), names[2].clone()]);
        let left = read_copies(&ctx, dir.path(), None).unwrap();
        assert_eq!(left.get("a").map(|c| c.1[0]), Some(2));
    }
}
