//! Consolidated fragment metadata (docs/format.md §15): one file holding copies of many
//! fragments' `__fragment_metadata` files, so opening an array with thousands of fragments reads
//! one file instead of thousands. Fragment metadata never changes once written, so a copy stays
//! right for as long as its fragment is committed; the snapshot uses a copy only for fragments the
//! commit log says are visible, and reads the others' own files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::context::Context;
use crate::error::{Error, Result};
use crate::footer::{seal, unseal};
use crate::fragment::now_ms;
use crate::storage::{Bytes, StorageError};

/// Folder of consolidated fragment metadata files.
pub(crate) const FRAGMENT_META_DIR: &str = "__fragment_meta";
/// The footer magic of a consolidated fragment metadata file.
const MAGIC: &[u8; 8] = b"TSRFMETA";
/// The largest consolidated file a reader accepts (its copies are held in memory while an array
/// opens).
pub(crate) const MAX_FILE_BYTES: u64 = 1 << 30;

/// Copies of fragment metadata files by fragment name, as ranges of one file's bytes.
pub(crate) struct Copies {
    /// The file they come from.
    pub(crate) path: PathBuf,
    bytes: Bytes,
    ranges: HashMap<String, (usize, usize)>,
}

impl Copies {
    /// The copy of fragment `name`'s metadata, if the file holds one.
    pub(crate) fn get(&self, name: &str) -> Option<&[u8]> {
        self.ranges.get(name).map(|&(a, b)| &self.bytes[a..b])
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

/// The copies in the newest consolidated file of the array at `uri` (none when it has none).
/// A damaged file is an error (it names the file), not a silent fallback.
pub(crate) fn read_newest(ctx: &Context, uri: &Path) -> Result<Option<Copies>> {
    let Some(name) = list(ctx, uri)?.pop() else { return Ok(None) };
    let path = uri.join(FRAGMENT_META_DIR).join(name);
    let storage = ctx.storage();
    let bytes = match storage.read_all_within(&path, MAX_FILE_BYTES) {
        Ok(Err(size)) => {
            return Err(Error::corrupt(&path, format!("{size} bytes, more than a consolidated metadata file may hold")))
        }
        Ok(Ok(bytes)) => bytes,
        // Removed by a vacuum after the listing (a newer one exists): the copies are only a
        // shortcut, so each fragment's own metadata is read instead.
        Err(StorageError::NotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    crate::stats::add(crate::stats::Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    let ranges = decode(&bytes, &path)?;
    Ok(Some(Copies { path, bytes, ranges }))
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

/// Deletes every consolidated file but the newest (the caller holds the array's lock
/// exclusively); returns their names.
pub(crate) fn remove_old(ctx: &Context, uri: &Path) -> Result<Vec<String>> {
    let mut names = list(ctx, uri)?;
    names.pop();
    let dir = uri.join(FRAGMENT_META_DIR);
    let storage = ctx.storage();
    for n in &names {
        match storage.remove_file(&dir.join(n)) {
            Ok(()) | Err(StorageError::NotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if !names.is_empty() {
        storage.sync_dir(&dir)?;
    }
    Ok(names)
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
        let copies = read_newest(&ctx, dir.path()).unwrap().unwrap();
        assert_eq!(copies.get("__1_1_a_3"), Some(&[1u8, 2, 3][..]));
        assert_eq!(copies.get("__2_2_b_3"), Some(&[][..]));
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

    #[test]
    fn only_the_newest_file_is_read_and_vacuum_keeps_it() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(crate::Config::new()).unwrap();
        write(&ctx, dir.path(), &[("__1_1_a_3".into(), vec![1])]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(2));
        write(&ctx, dir.path(), &[("__1_1_a_3".into(), vec![2])]).unwrap();
        assert_eq!(read_newest(&ctx, dir.path()).unwrap().unwrap().get("__1_1_a_3"), Some(&[2u8][..]));
        assert_eq!(remove_old(&ctx, dir.path()).unwrap().len(), 1);
        assert_eq!(list(&ctx, dir.path()).unwrap().len(), 1);
        assert_eq!(read_newest(&ctx, dir.path()).unwrap().unwrap().get("__1_1_a_3"), Some(&[2u8][..]));
    }
}
