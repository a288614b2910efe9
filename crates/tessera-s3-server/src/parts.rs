//! Storing and listing the parts of a multipart upload, so that completion usually has nothing
//! to copy.
//!
//! S3 does not copy parts when it completes an upload; a server that joins part files into a
//! new file does (35-40 ms for 112 MiB on the benchmark machine, all of it inside the client's
//! completion request). Clients upload parts of one size (the last one smaller), so here parts
//! go straight to their final place in one data file per upload, `.upload_id-<id>.data`:
//! - the first part stored fixes the upload's **slot** size, its length, kept in
//!   `.upload_id-<id>.slot` (the slot never changes, even across a server restart);
//! - part `n` of `len` bytes, `0 < len <= slot`, is written at `(n - 1) * slot` in the data
//!   file; every other part (larger than the slot, of unknown length, empty, or while another
//!   upload of the same part number is writing there) is stored in a file of its own,
//!   `.upload_id-<id>.part-<n>`, written to a temporary name and renamed;
//! - once a part's bytes are all stored, its **record** `.upload_id-<id>.part-<n>.md5` says
//!   where they are: `<md5 hex> <size>` for a file of its own, `<md5 hex> <size> @<offset>` in
//!   the data file. A part without a record was not (or not fully) stored; the record of a part
//!   being rewritten in the data file is removed before its first byte is written, and an
//!   upload keeps its claim on the region until its record is written, so a record never
//!   describes bytes being overwritten. Of two uploads of one part number, the one that ends
//!   last owns the record, as on S3.
//!
//! If the named parts lie back to back in the data file from offset 0 (equal sizes, the last one
//! smaller), completion truncates the data file and renames it over the object: no byte is
//! copied. Otherwise it copies them into a new file (see `multipart.rs`).
//!
//! Every part write holds its upload's gate shared, and completion and abort hold it
//! exclusively, so no part is written into a data file after it became an object, and
//! completion reads records and bytes that do not change under it. The gates live in the
//! server process, which is the only writer of its root.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use s3s::crypto::{Checksum as _, Md5};
use s3s::dto::{ETag, Part, StreamingBlob, Timestamp};
use s3s::stream::ByteStream as _;
use s3s::{S3Result, s3_error};

use crate::multipart::{Uploads, hex, internal, unhex_md5, write_replacing};

/// Highest part number S3 accepts.
const MAX_PART_NUMBER: i32 = 10_000;

/// Data files stay below this size (1 TiB): a part whose slot would end beyond it is stored in
/// a file of its own instead.
const MAX_DATA_FILE: u64 = 1 << 40;

/// Bytes gathered before one positioned write of the data file (1 MiB).
const WRITE_PIECE: usize = 1 << 20;

/// Tells apart the temporary files of parts written at the same time.
static TEMP_SERIAL: AtomicU64 = AtomicU64::new(0);

/// What the record of a stored part says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartRecord {
    pub(crate) md5: [u8; 16],
    pub(crate) size: u64,
    /// Offset in the upload's data file; `None` for a part in a file of its own.
    pub(crate) offset: Option<u64>,
}

impl PartRecord {
    fn encode(&self) -> String {
        match self.offset {
            Some(offset) => format!("{} {} @{offset}", hex(&self.md5), self.size),
            None => format!("{} {}", hex(&self.md5), self.size),
        }
    }

    fn decode(text: &str) -> Option<Self> {
        let mut words = text.split(' ');
        let md5 = unhex_md5(words.next()?)?;
        let size = words.next()?.parse().ok()?;
        let offset = match words.next() {
            None => None,
            Some(word) => Some(word.strip_prefix('@')?.parse().ok()?),
        };
        words.next().is_none().then_some(Self { md5, size, offset })
    }
}

/// One upload's state in this process: its gate, its slot and the part numbers being written
/// into its data file.
#[derive(Debug, Default)]
pub(crate) struct UploadState {
    pub(crate) gate: tokio::sync::RwLock<()>,
    placing: Mutex<Placing>,
}

#[derive(Debug, Default)]
struct Placing {
    /// The slot size once known (loaded from or written to the slot file).
    slot: Option<u64>,
    /// Part numbers whose data-file region is being written.
    writing: HashSet<i32>,
}

/// The upload states of one server, by upload id.
pub(crate) type States = Arc<Mutex<HashMap<String, Arc<UploadState>>>>;

/// Where a part being uploaded goes.
enum Placement {
    /// Its region of the data file; `claim` marks the region taken until dropped.
    Data { offset: u64, len: u64, claim: Claim },
    /// A file of its own.
    Own,
}

/// A part number's claim on its data-file region, released when dropped.
struct Claim {
    state: Arc<UploadState>,
    number: i32,
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Ok(mut placing) = self.state.placing.lock() {
            placing.writing.remove(&self.number);
        }
    }
}

impl Uploads {
    pub(crate) fn data_path(&self, id: &str) -> PathBuf {
        self.root().join(format!(".upload_id-{id}.data"))
    }

    fn slot_path(&self, id: &str) -> PathBuf {
        self.root().join(format!(".upload_id-{id}.slot"))
    }

    /// The record of part `number` of upload `id`, if there is a readable one.
    pub(crate) fn read_record(&self, id: &str, number: i32) -> Option<PartRecord> {
        PartRecord::decode(fs::read_to_string(self.record_path(id, number)).ok()?.trim_end())
    }

    /// This process's state of upload `id`.
    pub(crate) fn state(&self, id: &str) -> Arc<UploadState> {
        let mut states = self.states().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        states.entry(id.to_owned()).or_default().clone()
    }

    /// Drops this process's state of upload `id` (completed or aborted).
    pub(crate) fn forget(&self, id: &str) {
        self.states().lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(id);
    }

    /// Chooses where part `number` of `len` bytes (when known) goes; see the module doc.
    fn place(&self, id: &str, state: &Arc<UploadState>, number: i32, len: Option<u64>) -> S3Result<Placement> {
        let mut placing = state.placing.lock().map_err(internal)?;
        if placing.slot.is_none() {
            placing.slot = fs::read_to_string(self.slot_path(id)).ok().and_then(|t| t.trim().parse().ok());
        }
        let Some(len) = len.filter(|&l| l > 0) else { return Ok(Placement::Own) };
        if placing.writing.contains(&number) {
            return Ok(Placement::Own);
        }
        let slot = match placing.slot {
            Some(slot) => slot,
            None => {
                write_replacing(&self.slot_path(id), len.to_string().as_bytes()).map_err(internal)?;
                placing.slot = Some(len);
                len
            }
        };
        let index = u64::try_from(number - 1).map_err(internal)?;
        let offset = index.checked_mul(slot).filter(|o| o.checked_add(len).is_some_and(|end| end <= MAX_DATA_FILE));
        match offset {
            Some(offset) if len <= slot => {
                placing.writing.insert(number);
                Ok(Placement::Data { offset, len, claim: Claim { state: state.clone(), number } })
            }
            _ => Ok(Placement::Own),
        }
    }

    /// Stores part `number` of upload `id` from `body` and returns its ETag (the MD5 of its
    /// bytes, hex), as UploadPart does.
    pub(crate) async fn store_part(
        &self,
        id: &str,
        number: i32,
        access_key: Option<&str>,
        body: StreamingBlob,
    ) -> S3Result<String> {
        if !(1..=MAX_PART_NUMBER).contains(&number) {
            return Err(s3_error!(InvalidArgument, "Part number must be an integer between 1 and 10000, inclusive"));
        }
        let id = Self::checked_id(id)?;
        let state = self.state(&id);
        let _gate = state.gate.read().await;
        // Checked under the gate: a completion or abort that ended meanwhile removed it.
        self.check_live(&id, access_key)?;
        let declared = body.remaining_length().exact().and_then(|l| u64::try_from(l).ok());
        // A region's claim is held until its record is written: released before, another upload
        // of the part could start overwriting the region and then see its own record replaced
        // by this one's, which would name bytes no longer there.
        let (record, _claim) = match self.place(&id, &state, number, declared)? {
            Placement::Data { offset, len, claim } => {
                if self.read_record(&id, number).is_some_and(|r| r.offset.is_some()) {
                    remove_if_present(&self.record_path(&id, number)).map_err(internal)?;
                }
                let md5 = self.write_region(&id, offset, len, body).await?;
                (PartRecord { md5, size: len, offset: Some(offset) }, Some(claim))
            }
            Placement::Own => (self.write_own(&id, number, body).await?, None),
        };
        #[cfg(test)]
        tests::before_record().await;
        let path = self.record_path(&id, number);
        tokio::task::spawn_blocking(move || write_replacing(&path, record.encode().as_bytes()))
            .await
            .map_err(internal)?
            .map_err(internal)?;
        Ok(hex(&record.md5))
    }

    /// Writes exactly `len` bytes of `body` at `offset` of upload `id`'s data file, never
    /// beyond them, and returns their MD5.
    async fn write_region(&self, id: &str, offset: u64, len: u64, mut body: StreamingBlob) -> S3Result<[u8; 16]> {
        let file = OpenOptions::new().create(true).truncate(false).write(true).open(self.data_path(id));
        let file = Arc::new(file.map_err(internal)?);
        let (mut md5, mut at, mut pending, mut pending_len) = (Md5::new(), offset, Vec::new(), 0usize);
        let end = offset + len;
        loop {
            let chunk = body.next().await.transpose().map_err(|e| s3_error!(IncompleteBody, "{e}"))?;
            let done = chunk.is_none();
            if let Some(chunk) = chunk {
                if (at - offset) + (pending_len + chunk.len()) as u64 > len {
                    return Err(s3_error!(IncompleteBody, "the body is longer than its declared {len} bytes"));
                }
                md5.update(&chunk);
                pending_len += chunk.len();
                pending.push(chunk);
            }
            if pending_len >= WRITE_PIECE || (done && pending_len > 0) {
                let (file, pieces) = (file.clone(), std::mem::take(&mut pending));
                at = tokio::task::spawn_blocking(move || write_pieces_at(&file, at, &pieces))
                    .await
                    .map_err(internal)?
                    .map_err(internal)?;
                pending_len = 0;
            }
            if done {
                break;
            }
        }
        if at != end {
            return Err(s3_error!(IncompleteBody, "the body ended after {} of its declared {len} bytes", at - offset));
        }
        Ok(md5.finalize())
    }

    /// Writes `body` to part `number`'s own file (through a temporary file and a rename).
    async fn write_own(&self, id: &str, number: i32, mut body: StreamingBlob) -> S3Result<PartRecord> {
        let serial = TEMP_SERIAL.fetch_add(1, Ordering::Relaxed);
        let tmp = self.root().join(format!(".upload_id-{id}.part-{number}.tmp-{serial}"));
        let written = async {
            let mut file = tokio::fs::File::create(&tmp).await.map_err(internal)?;
            let (mut md5, mut size) = (Md5::new(), 0u64);
            while let Some(chunk) = body.next().await {
                let chunk: Bytes = chunk.map_err(|e| s3_error!(IncompleteBody, "{e}"))?;
                md5.update(&chunk);
                size += chunk.len() as u64;
                tokio::io::AsyncWriteExt::write_all(&mut file, &chunk).await.map_err(internal)?;
            }
            tokio::io::AsyncWriteExt::flush(&mut file).await.map_err(internal)?;
            tokio::fs::rename(&tmp, self.part_path(id, number)).await.map_err(internal)?;
            S3Result::Ok(PartRecord { md5: md5.finalize(), size, offset: None })
        }
        .await;
        if written.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        written
    }

    /// The stored parts of upload `id` numbered above `marker`, at most `max` of them, in order;
    /// and whether more follow. Parts without a record (written by an older server) are hashed.
    pub(crate) fn list_stored(&self, id: &str, marker: i32, max: usize) -> S3Result<(Vec<Part>, bool)> {
        let prefix = format!(".upload_id-{id}.part-");
        let mut numbers: Vec<i32> = Vec::new();
        for entry in fs::read_dir(self.root()).map_err(internal)? {
            let name = entry.map_err(internal)?.file_name();
            let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(&prefix)) else { continue };
            let number = rest.strip_suffix(".md5").unwrap_or(rest);
            if let Ok(n) = number.parse::<i32>()
                && n > marker
            {
                numbers.push(n);
            }
        }
        numbers.sort_unstable();
        numbers.dedup();
        let truncated = numbers.len() > max;
        let mut parts = Vec::with_capacity(numbers.len().min(max));
        for n in numbers.into_iter().take(max) {
            let (record_file, part_file) = (self.record_path(id, n), self.part_path(id, n));
            let (size, md5, modified) = match self.read_record(id, n) {
                Some(r) => (r.size, r.md5, fs::metadata(&record_file).and_then(|m| m.modified())),
                None => match fs::metadata(&part_file) {
                    Ok(meta) => (meta.len(), md5_of_file(&part_file).map_err(internal)?, meta.modified()),
                    Err(e) if e.kind() == ErrorKind::NotFound => continue,
                    Err(e) => return Err(internal(e)),
                },
            };
            parts.push(Part {
                part_number: Some(n),
                size: Some(i64::try_from(size).map_err(internal)?),
                e_tag: Some(ETag::Strong(hex(&md5))),
                last_modified: modified.ok().map(Timestamp::from),
                ..Default::default()
            });
        }
        Ok((parts, truncated))
    }
}

/// Writes `pieces` one after another at `at` of `file`; returns the offset after them.
fn write_pieces_at(file: &File, mut at: u64, pieces: &[Bytes]) -> std::io::Result<u64> {
    for piece in pieces {
        file.write_all_at(piece, at)?;
        at += piece.len() as u64;
    }
    Ok(at)
}

fn remove_if_present(path: &Path) -> std::io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The MD5 of a file's bytes.
pub(crate) fn md5_of_file(path: &Path) -> std::io::Result<[u8; 16]> {
    let file = File::open(path)?;
    let mut md5 = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    loop {
        let n = file.read_at(&mut buf, at)?;
        if n == 0 {
            return Ok(md5.finalize());
        }
        md5.update(&buf[..n]);
        at += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::sync::oneshot;

    use super::PartRecord;
    use crate::multipart::Uploads;

    /// A pause of the next UploadPart between its bytes and its record: it says when it is
    /// there, then waits to be let go.
    type Pause = (oneshot::Sender<()>, oneshot::Receiver<()>);

    static PAUSE: Mutex<Option<Pause>> = Mutex::new(None);

    /// Where `store_part` pauses, when a test has asked it to (see `PAUSE`).
    pub(super) async fn before_record() {
        let pause = PAUSE.lock().unwrap().take();
        if let Some((there, go)) = pause {
            there.send(()).unwrap();
            go.await.unwrap();
        }
    }

    /// The bytes part `number` of upload `id` has where its record says they are.
    fn recorded_bytes(uploads: &Uploads, id: &str, number: i32) -> Vec<u8> {
        let record = uploads.read_record(id, number).unwrap();
        match record.offset {
            Some(offset) => {
                let all = std::fs::read(uploads.data_path(id)).unwrap();
                all[offset as usize..(offset + record.size) as usize].to_vec()
            }
            None => std::fs::read(uploads.part_path(id, number)).unwrap(),
        }
    }

    /// Two uploads of one part, the first paused between its bytes and its record while the
    /// second runs whole: the record the first then writes names its own bytes, still there
    /// (the second, finding the region taken, wrote its bytes to a file of their own). With
    /// the region let go before the record, the second overwrote it and the record named bytes
    /// no longer there (seen once in CI; a race test could not make it happen at will).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_part_keeps_its_region_until_its_record_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let id = "0123abcd-0000-4000-8000-0123456789ab";
        std::fs::write(dir.path().join(format!(".upload-{id}.json")), b"null").unwrap();
        let uploads = std::sync::Arc::new(Uploads::new(dir.path().to_path_buf()));
        let (a, b) = (vec![b'a'; 1000], vec![b'b'; 1000]);
        let ((there_tx, there), (go, go_rx)) = (oneshot::channel(), oneshot::channel());
        *PAUSE.lock().unwrap() = Some((there_tx, go_rx));
        let first = {
            let (uploads, a) = (uploads.clone(), a.clone());
            tokio::spawn(async move { uploads.store_part(id, 1, None, blob(&a)).await.unwrap() })
        };
        there.await.unwrap();
        assert_eq!(uploads.read_record(id, 1), None, "the first is paused before its record");
        uploads.store_part(id, 1, None, blob(&b)).await.unwrap();
        assert!(recorded_bytes(&uploads, id, 1) == b, "the second's record names its bytes");
        go.send(()).unwrap();
        let e_tag = first.await.unwrap();
        let record = uploads.read_record(id, 1).unwrap();
        assert_eq!(super::hex(&record.md5), e_tag, "the first's record is the last written");
        assert!(recorded_bytes(&uploads, id, 1) == a, "the first's record names bytes no longer there");
    }

    #[test]
    fn records_round_trip_and_refuse_garbage() {
        let own = PartRecord { md5: [7; 16], size: 5 << 20, offset: None };
        let data = PartRecord { md5: [9; 16], size: 12, offset: Some(15 << 20) };
        for r in [own, data] {
            assert_eq!(PartRecord::decode(&r.encode()), Some(r));
        }
        let zeros = "0".repeat(32);
        for bad in ["", "07 12", &format!("{zeros} x"), &format!("{zeros} 12 15"), &format!("{zeros} 1 @2 3")] {
            assert_eq!(PartRecord::decode(bad), None, "{bad:?}");
        }
    }

    fn blob(data: &[u8]) -> s3s::dto::StreamingBlob {
        s3s::Body::from(bytes::Bytes::copy_from_slice(data)).into()
    }

    /// Parts stored in the data file and on their own are listed in order with their sizes
    /// and ETags, from a marker, a page at a time; numbers out of S3's range are refused.
    #[tokio::test]
    async fn stored_parts_are_listed_in_order_a_page_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let id = "0123abcd-0000-4000-8000-0123456789ab";
        std::fs::write(dir.path().join(format!(".upload-{id}.json")), b"null").unwrap();
        let uploads = Uploads::new(dir.path().to_path_buf());
        let parts: Vec<(i32, Vec<u8>)> =
            vec![(3, vec![3; 100]), (1, vec![1; 100]), (2, vec![2; 150]), (10, vec![9; 7])];
        let mut e_tags = std::collections::HashMap::new();
        for (n, data) in &parts {
            e_tags.insert(*n, uploads.store_part(id, *n, None, blob(data)).await.unwrap());
        }
        assert_eq!(uploads.read_record(id, 1).unwrap().offset, Some(0), "part 1 is in the data file");
        assert_eq!(uploads.read_record(id, 2).unwrap().offset, None, "part 2 is over the slot (100 bytes)");
        assert_eq!(uploads.read_record(id, 10).unwrap().offset, Some(900));
        let (first, more) = uploads.list_stored(id, 0, 2).unwrap();
        assert!(more);
        let (rest, more) = uploads.list_stored(id, 2, 1000).unwrap();
        assert!(!more);
        let listed: Vec<(i32, i64, String)> = first
            .iter()
            .chain(&rest)
            .map(|p| (p.part_number.unwrap(), p.size.unwrap(), p.e_tag.clone().unwrap().into_value()))
            .collect();
        let want: Vec<(i32, i64, String)> = [1, 2, 3, 10]
            .iter()
            .map(|n| (*n, parts.iter().find(|p| p.0 == *n).unwrap().1.len() as i64, e_tags[n].clone()))
            .collect();
        assert_eq!(listed, want);
        for bad in [0, 10_001, -1] {
            let err = uploads.store_part(id, bad, None, blob(b"x")).await.unwrap_err();
            assert_eq!(*err.code(), s3s::S3ErrorCode::InvalidArgument, "part {bad}");
        }
        let err = uploads.store_part(id, 4, Some("someone else"), blob(b"x")).await.unwrap_err();
        assert_eq!(*err.code(), s3s::S3ErrorCode::AccessDenied);
        // Made-up upload ids are refused and leave no state behind.
        for n in 0..50u32 {
            let made_up = format!("{n:08x}-0000-4000-8000-0123456789ab");
            let err = uploads.store_part(&made_up, 1, None, blob(b"x")).await.unwrap_err();
            assert_eq!(*err.code(), s3s::S3ErrorCode::NoSuchUpload);
        }
        assert_eq!(uploads.states().lock().unwrap().len(), 1, "only the real upload has a state");
    }
}
