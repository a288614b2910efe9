//! Array metadata: typed key-value pairs stored beside the fragments (docs/format.md, "Array
//! metadata"). Every write is one immutable, checksummed file in `__meta/`, created atomically
//! (no reader ever sees part of it), named with its timestamp like a fragment, and holding puts
//! and deletes, each with the timestamp it was written at. A reader opened at time T applies
//! every entry of timestamp at most T in (timestamp, origin file) order, so time travel sees
//! metadata as it was, and the order never depends on which files were consolidated.
//! Consolidation merges the files into one that keeps every entry's own timestamp and origin,
//! and lists the files it replaces; readers skip those, vacuum deletes them. Time travel to any
//! time keeps working after both.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::context::Context;
use crate::error::{Error, QueryError, Result};
use crate::footer::{seal, unseal};
use crate::fragment::now_ms;
use crate::paths::META_DIR;
use crate::schema::Datatype;
use crate::storage::{Storage, StorageError};

/// The footer magic of metadata files.
const META_MAGIC: &[u8; 8] = b"TSRAMETA";

/// The longest key, in bytes.
pub const MAX_META_KEY_BYTES: usize = 4096;

/// The largest metadata file a reader accepts, and the most one write may hold.
pub const MAX_META_FILE_BYTES: u64 = 64 << 20;

/// A metadata value: `data` holds the values little-endian (`datatype.size()` bytes each) for a
/// number or a 1-D array of numbers, the UTF-8 bytes of a string (`Datatype::Utf8`), or raw
/// bytes (`datatype` `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaValue {
    /// The type of the values; `None` for raw bytes.
    pub datatype: Option<Datatype>,
    /// The values' bytes.
    pub data: Vec<u8>,
}

impl MetaValue {
    /// Checks that the data holds whole values (and valid UTF-8 for text).
    fn check(&self, key: &str) -> Result<()> {
        let bad = |detail: String| QueryError::BadBuffer { attr: format!("metadata {key:?}"), detail };
        match self.datatype {
            Some(Datatype::Utf8) if std::str::from_utf8(&self.data).is_err() => {
                Err(bad("a text value is not valid UTF-8".into()).into())
            }
            Some(d) if !self.data.len().is_multiple_of(d.size()) => {
                Err(bad(format!("{} bytes is not a whole number of {} values", self.data.len(), d.name())).into())
            }
            Some(Datatype::Bool) if self.data.iter().any(|&b| b > 1) => {
                Err(bad("a bool value is a byte other than 0 or 1".into()).into())
            }
            _ => Ok(()),
        }
    }
}

/// One entry of a metadata file: a put (`Some`) or a delete (`None`) of `key`, with the
/// timestamp and the name of the file it was first written in (the tie-break).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    key: String,
    timestamp: u64,
    origin: String,
    value: Option<MetaValue>,
}

/// A parsed metadata file: its entries and the files it replaces (a consolidated file).
#[derive(Debug, Default)]
struct MetaFile {
    replaces: Vec<String>,
    entries: Vec<Entry>,
}

/// The file name of a metadata write at `t0..=t1`: `__<t0>_<t1>_<uuid>.meta`.
///
/// `<id>` is 32 hex digits: a nanosecond clock, strictly increasing within a process, then 64
/// random bits. Entries of equal timestamp apply in origin-name order, so of two writes at one
/// timestamp (a write timestamp given to the array, or two writes in one millisecond) the later
/// one wins, as it would with distinct timestamps.
fn file_name(t0: u64, t1: u64) -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now =
        u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()))
            .unwrap_or(u64::MAX);
    let prev = LAST.fetch_max(now, Ordering::SeqCst);
    let ns = if now > prev { now } else { LAST.fetch_add(1, Ordering::SeqCst) + 1 };
    let random = uuid::Uuid::new_v4().as_u128() as u64;
    format!("__{t0}_{t1}_{ns:016x}{random:016x}.meta")
}

/// The timestamps `(t0, t1)` of a metadata file name, or `None` for other names.
fn parse_name(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("__")?.strip_suffix(".meta")?;
    let mut parts = rest.splitn(3, '_');
    let t0 = parts.next()?.parse().ok()?;
    let t1 = parts.next()?.parse().ok()?;
    let uuid = parts.next()?;
    (uuid.len() == 32 && uuid.bytes().all(|b| b.is_ascii_hexdigit()) && t0 <= t1).then_some((t0, t1))
}

const TAG_BYTES: u8 = 0xff;

fn type_tag(d: Option<Datatype>) -> u8 {
    d.map_or(TAG_BYTES, |d| Datatype::ALL.iter().position(|x| *x == d).unwrap_or(0) as u8)
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn encode(file: &MetaFile) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(file.replaces.len() as u32).to_le_bytes());
    for r in &file.replaces {
        put_str(&mut out, r);
    }
    out.extend_from_slice(&(file.entries.len() as u64).to_le_bytes());
    for e in &file.entries {
        put_str(&mut out, &e.key);
        out.extend_from_slice(&e.timestamp.to_le_bytes());
        put_str(&mut out, &e.origin);
        match &e.value {
            None => out.push(0),
            Some(v) => {
                out.push(1);
                out.push(type_tag(v.datatype));
                out.extend_from_slice(&(v.data.len() as u64).to_le_bytes());
                out.extend_from_slice(&v.data);
            }
        }
    }
    seal(out, META_MAGIC)
}

/// A cursor over a payload whose every read is bounds-checked.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: u64, what: &str) -> Result<&'a [u8]> {
        let end = usize::try_from(n).ok().and_then(|n| self.at.checked_add(n)).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(Error::corrupt(self.path, format!("{what} at byte {} runs past the end", self.at)));
        };
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        let b = self.take(8, what)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        Ok(u64::from_le_bytes(w))
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let n = self.u32(what)?;
        let b = self.take(u64::from(n), what)?;
        String::from_utf8(b.to_vec()).map_err(|_| Error::corrupt(self.path, format!("{what} is not UTF-8")))
    }
}

fn decode(bytes: &[u8], path: &Path) -> Result<MetaFile> {
    let payload = unseal(bytes, META_MAGIC, path)?;
    let mut r = Reader { bytes: payload, at: 0, path };
    let nrep = r.u32("replaced-file count")?;
    let mut file = MetaFile::default();
    for _ in 0..nrep {
        // Each name takes at least its 4-byte length: a count beyond the bytes fails on them.
        file.replaces.push(r.string("replaced file name")?);
    }
    let n = r.u64("entry count")?;
    for _ in 0..n {
        let key = r.string("key")?;
        let timestamp = r.u64("timestamp")?;
        let origin = r.string("origin")?;
        let value = match r.u8("entry kind")? {
            0 => None,
            1 => {
                let tag = r.u8("value type")?;
                let datatype = match tag {
                    TAG_BYTES => None,
                    t => Some(
                        *Datatype::ALL
                            .get(usize::from(t))
                            .ok_or_else(|| Error::corrupt(path, format!("key {key:?}: unknown value type {t}")))?,
                    ),
                };
                let len = r.u64("value length")?;
                let data = r.take(len, "value")?.to_vec();
                let v = MetaValue { datatype, data };
                v.check(&key).map_err(|e| Error::corrupt(path, e.to_string()))?;
                Some(v)
            }
            k => return Err(Error::corrupt(path, format!("key {key:?}: unknown entry kind {k}"))),
        };
        file.entries.push(Entry { key, timestamp, origin, value });
    }
    if r.at != payload.len() {
        return Err(Error::corrupt(path, format!("{} bytes after the last entry", payload.len() - r.at)));
    }
    Ok(file)
}

/// The metadata files of the array at `uri` with their timestamps, sorted by name.
fn list(storage: &dyn Storage, uri: &Path) -> Result<Vec<(String, u64, u64)>> {
    let names = match storage.list_dir(&uri.join(META_DIR)) {
        Ok(n) => n,
        // Arrays made before metadata existed may lack the folder: no metadata.
        Err(StorageError::NotFound { .. }) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut files: Vec<_> = names.into_iter().filter_map(|n| parse_name(&n).map(|(t0, t1)| (n, t0, t1))).collect();
    files.sort();
    Ok(files)
}

fn read_file(ctx: &Context, path: &Path) -> Result<MetaFile> {
    let bytes = match ctx.storage().read_all_within(path, MAX_META_FILE_BYTES)? {
        Ok(bytes) => bytes,
        Err(size) => return Err(Error::corrupt(path, format!("{size} bytes, more than a metadata file may hold"))),
    };
    decode(&bytes, path)
}

/// Every metadata file but those a consolidated file replaces (it holds their entries), parsed.
/// Entries carry their own timestamps, so a reader at any time reads all files and keeps the
/// entries up to its time: consolidation and vacuum never change what a reader sees, however
/// far back it travels.
fn visible(ctx: &Context, uri: &Path) -> Result<Vec<(String, MetaFile)>> {
    for _ in 0..MAX_LIST_PASSES {
        let names: Vec<String> = list(ctx.storage().as_ref(), uri)?.into_iter().map(|(n, _, _)| n).collect();
        if let Some(files) = read_listed(ctx, uri, &names)? {
            return Ok(files);
        }
    }
    Err(Error::corrupt(
        uri.join(META_DIR),
        format!("metadata files kept vanishing while being read ({MAX_LIST_PASSES} listings)"),
    ))
}

/// Listings of the metadata folder a reader makes before it gives up on files vanishing under it.
const MAX_LIST_PASSES: usize = 64;

/// The files of one listing, parsed, less those a consolidated file replaces; `None` when a
/// listed file vanished before it was read. Vacuum deletes only replaced files, but their
/// replacement may be newer than the listing (consolidated and vacuumed in between: a reader of
/// a group holds no lock), so the caller lists again rather than lose their entries.
fn read_listed(ctx: &Context, uri: &Path, names: &[String]) -> Result<Option<Vec<(String, MetaFile)>>> {
    let dir = uri.join(META_DIR);
    let mut files = Vec::with_capacity(names.len());
    for name in names {
        match read_file(ctx, &dir.join(name)) {
            Ok(f) => files.push((name.clone(), f)),
            Err(Error::Storage(StorageError::NotFound { .. })) => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    let replaced: std::collections::HashSet<String> =
        files.iter().flat_map(|(_, f)| f.replaces.iter().cloned()).collect();
    files.retain(|(name, _)| !replaced.contains(name));
    Ok(Some(files))
}

/// The array's metadata as of `end`: every visible entry of timestamp at most `end` applied in
/// (timestamp, origin) order.
pub(crate) fn read_meta(ctx: &Context, uri: &Path, end: u64) -> Result<BTreeMap<String, MetaValue>> {
    let mut entries: Vec<Entry> = visible(ctx, uri)?.into_iter().flat_map(|(_, f)| f.entries).collect();
    entries.retain(|e| e.timestamp <= end);
    entries.sort_by(|a, b| (a.timestamp, &a.origin).cmp(&(b.timestamp, &b.origin)));
    let mut map = BTreeMap::new();
    for e in entries {
        match e.value {
            Some(v) => map.insert(e.key, v),
            None => map.remove(&e.key),
        };
    }
    Ok(map)
}

/// Writes puts (`Some`) and deletes (`None`) as one metadata file at `timestamp` (or now).
/// All or nothing: the entries are checked first, and the file appears whole or not at all.
pub(crate) fn write_meta(
    ctx: &Context,
    uri: &Path,
    timestamp: Option<u64>,
    changes: &[(&str, Option<MetaValue>)],
) -> Result<()> {
    let mut total = 0u64;
    for (key, value) in changes {
        if key.is_empty() || key.len() > MAX_META_KEY_BYTES {
            return Err(QueryError::BadBuffer {
                attr: "metadata key".into(),
                detail: format!("a key is 1 to {MAX_META_KEY_BYTES} bytes, not {}", key.len()),
            }
            .into());
        }
        if let Some(v) = value {
            v.check(key)?;
            total = total.saturating_add(v.data.len() as u64);
        }
    }
    if total > MAX_META_FILE_BYTES / 2 {
        return Err(QueryError::BadBuffer {
            attr: "metadata".into(),
            detail: format!("{total} bytes of values in one write, more than {}", MAX_META_FILE_BYTES / 2),
        }
        .into());
    }
    let t = timestamp.unwrap_or_else(now_ms);
    let name = file_name(t, t);
    let entries = changes
        .iter()
        .map(|(k, v)| Entry { key: (*k).to_owned(), timestamp: t, origin: name.clone(), value: v.clone() })
        .collect();
    let bytes = encode(&MetaFile { replaces: Vec::new(), entries });
    let storage = ctx.storage();
    storage.create_dir_all(&uri.join(META_DIR))?;
    create_new(storage.as_ref(), &uri.join(META_DIR).join(&name), &bytes)
}

/// Creates the file at `path` with `bytes`, atomically; a name that exists already (a uuid
/// collision) is an error rather than an overwrite.
fn create_new(storage: &dyn Storage, path: &Path, bytes: &[u8]) -> Result<()> {
    if storage.write_new(path, bytes)? {
        Ok(())
    } else {
        Err(Error::corrupt(path, "a metadata file of this name exists already"))
    }
}

/// Deletes the metadata files of the array or group at `uri` that a consolidated file replaces
/// (readers skip them, and list again if one vanishes as they read); returns their names.
pub(crate) fn remove_replaced(ctx: &Context, uri: &Path) -> Result<Vec<String>> {
    let storage = ctx.storage();
    let dir = uri.join(META_DIR);
    let mut removed = Vec::new();
    for f in replaced_files(ctx, uri)? {
        match storage.remove_file(&dir.join(&f)) {
            Ok(()) | Err(StorageError::NotFound { .. }) => removed.push(f),
            Err(e) => return Err(e.into()),
        }
    }
    if !removed.is_empty() {
        storage.sync_dir(&dir)?;
    }
    Ok(removed)
}

/// Consolidates the array's visible metadata files at `uri` into one (entries keep their
/// timestamps and origins, so readers see exactly what they saw); returns the number of files
/// it replaces (0: fewer than two, nothing done). [`vacuum`](crate::vacuum) deletes them.
///
/// # Errors
/// A location that is not local, storage failures, corrupt metadata files.
pub fn consolidate_metadata(ctx: &Context, uri: impl AsRef<Path>) -> Result<usize> {
    let uri = &ctx.resolve_uri(uri.as_ref())?;
    let files = visible(ctx, uri)?;
    if files.len() < 2 {
        return Ok(0);
    }
    let t0 = files.iter().filter_map(|(n, _)| parse_name(n)).map(|t| t.0).min().unwrap_or(0);
    let t1 = files.iter().filter_map(|(n, _)| parse_name(n)).map(|t| t.1).max().unwrap_or(0);
    let replaces: Vec<String> = files.iter().map(|(n, _)| n.clone()).collect();
    // Only the newest entry per key matters to readers at or after t1; older ones are kept for
    // readers opened between the inputs' timestamps.
    let entries = files.into_iter().flat_map(|(_, f)| f.entries).collect();
    let bytes = encode(&MetaFile { replaces: replaces.clone(), entries });
    create_new(ctx.storage().as_ref(), &uri.join(META_DIR).join(file_name(t0, t1)), &bytes)?;
    Ok(replaces.len())
}

/// The metadata files a visible consolidated file replaces: what vacuum deletes.
pub(crate) fn replaced_files(ctx: &Context, uri: &Path) -> Result<Vec<String>> {
    let dir = uri.join(META_DIR);
    let mut replaced = Vec::new();
    let names = list(ctx.storage().as_ref(), uri)?;
    for (name, _, _) in &names {
        match read_file(ctx, &dir.join(name)) {
            Ok(f) => replaced.extend(f.replaces),
            Err(Error::Storage(StorageError::NotFound { .. })) => {}
            Err(e) => return Err(e),
        }
    }
    let present: std::collections::HashSet<&String> = names.iter().map(|n| &n.0).collect();
    replaced.retain(|r| present.contains(r));
    replaced.sort();
    replaced.dedup();
    Ok(replaced)
}

/// The fuzz target's body: decodes `data` as a whole file and as a sealed payload; what decodes
/// encodes back to the same payload.
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fuzz_decode(data: &[u8]) {
    let path = Path::new("__meta/__1_1_x.meta");
    for bytes in [data.to_vec(), seal(data.to_vec(), META_MAGIC)] {
        if let Ok(f) = decode(&bytes, path) {
            // The payload round-trips (the footer's version may be an older one).
            let again = encode(&f);
            assert_eq!(again[..again.len() - 20], bytes[..bytes.len() - 20], "a decoded file encodes back");
        }
    }
}

/// Seed payloads of the fuzz target (files without their footer).
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) fn fuzz_seeds() -> Vec<Vec<u8>> {
    let v = MetaValue { datatype: Some(Datatype::Int16), data: vec![1, 0, 2, 0] };
    let files = [
        MetaFile::default(),
        MetaFile {
            replaces: vec!["__1_1_a.meta".into()],
            entries: vec![
                Entry { key: "k".into(), timestamp: 3, origin: "o".into(), value: Some(v) },
                Entry { key: "gone".into(), timestamp: 4, origin: "o".into(), value: None },
                Entry {
                    key: "raw".into(),
                    timestamp: 4,
                    origin: "p".into(),
                    value: Some(MetaValue { datatype: None, data: vec![9] }),
                },
            ],
        },
    ];
    files.iter().map(encode).map(|b| b[..b.len() - 20].to_vec()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn of_two_writes_at_one_timestamp_the_later_wins() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(crate::Config::new()).unwrap();
        let text = |s: &str| Some(MetaValue { datatype: Some(Datatype::Utf8), data: s.as_bytes().to_vec() });
        for i in 0..64u64 {
            let key = format!("k{i}");
            write_meta(&ctx, dir.path(), Some(7), &[(key.as_str(), text("put"))]).unwrap();
            write_meta(&ctx, dir.path(), Some(7), &[(key.as_str(), None)]).unwrap();
            write_meta(&ctx, dir.path(), Some(7), &[("last", text(&key))]).unwrap();
        }
        let m = read_meta(&ctx, dir.path(), u64::MAX).unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["last"], "a delete lost to the put before it");
        assert_eq!(m["last"].data, b"k63");
    }

    #[test]
    fn a_reader_lists_again_when_files_vanish_under_it() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = Context::new(crate::Config::new()).unwrap();
        let uri = dir.path();
        let text = |s: &str| Some(MetaValue { datatype: Some(Datatype::Utf8), data: s.as_bytes().to_vec() });
        write_meta(&ctx, uri, Some(1), &[("a", text("x"))]).unwrap();
        write_meta(&ctx, uri, Some(2), &[("b", text("y"))]).unwrap();
        let stale: Vec<String> = list(ctx.storage().as_ref(), uri).unwrap().into_iter().map(|(n, _, _)| n).collect();
        // Consolidated and vacuumed between a reader's listing and its reads: the listed files
        // are gone and their replacement is not in the listing.
        assert_eq!(consolidate_metadata(&ctx, uri).unwrap(), 2);
        assert_eq!(remove_replaced(&ctx, uri).unwrap().len(), 2);
        assert!(read_listed(&ctx, uri, &stale).unwrap().is_none());
        let m = read_meta(&ctx, uri, u64::MAX).unwrap();
        assert_eq!((m["a"].data.as_slice(), m["b"].data.as_slice()), (&b"x"[..], &b"y"[..]));
    }

    #[test]
    fn files_round_trip_and_damage_is_corruption() {
        let v = MetaValue { datatype: Some(Datatype::Float64), data: 1.5f64.to_le_bytes().to_vec() };
        let f = MetaFile {
            replaces: vec!["__1_1_x.meta".into()],
            entries: vec![
                Entry { key: "units".into(), timestamp: 5, origin: "o".into(), value: Some(v.clone()) },
                Entry { key: "gone".into(), timestamp: 6, origin: "o".into(), value: None },
            ],
        };
        let bytes = encode(&f);
        let back = decode(&bytes, Path::new("m")).unwrap();
        assert_eq!((back.replaces, back.entries), (f.replaces, f.entries));
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x10;
            assert!(matches!(decode(&b, Path::new("m")), Err(Error::Corrupt { .. })), "byte {i}");
        }
        for n in 0..bytes.len() {
            assert!(decode(&bytes[..n], Path::new("m")).is_err());
        }
    }

    #[test]
    fn lengths_beyond_the_bytes_are_corruption_not_allocations() {
        // A sealed (checksummed) payload whose counts and lengths claim far more than it holds.
        let mut huge_count = Vec::new();
        huge_count.extend_from_slice(&0u32.to_le_bytes());
        huge_count.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut huge_value = huge_count[..4].to_vec();
        huge_value.extend_from_slice(&1u64.to_le_bytes());
        put_str(&mut huge_value, "k");
        huge_value.extend_from_slice(&7u64.to_le_bytes());
        put_str(&mut huge_value, "o");
        huge_value.extend_from_slice(&[1, 3]);
        huge_value.extend_from_slice(&(u64::MAX - 3).to_le_bytes());
        for payload in [huge_count, huge_value, vec![0xff; 4]] {
            let e = decode(&seal(payload, META_MAGIC), Path::new("m")).unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e}");
        }
    }

    #[test]
    fn names_parse_only_when_well_formed() {
        let n = file_name(3, 9);
        assert_eq!(parse_name(&n), Some((3, 9)));
        assert_eq!(parse_name("__9_3_0123456789abcdef0123456789abcdef.meta"), None);
        assert_eq!(parse_name(".__1_1_x.meta.tmp-1"), None);
    }
}
