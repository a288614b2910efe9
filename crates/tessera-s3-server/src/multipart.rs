//! [`Uploads`]: the multipart uploads of s3s-fs's root, their owners and their completion.
//!
//! s3s-fs completes an upload by reading every part back in 64 KiB pieces, hashing it again
//! and writing it into a new file: about 0.4 s for a 128 MiB object on the benchmark machine,
//! a cost S3 does not have (it never copies parts on completion). Here parts are stored where
//! the object needs them (`parts.rs`: one data file per upload, each part at its final offset
//! when the parts have one size), with each part's MD5 (its ETag) and size in a record, and
//! completion:
//! - checks every part (present, consecutive numbers, at least 5 MiB but the last, the ETag the
//!   client names equal to the stored one, as S3 checks);
//! - when the parts lie back to back from the start of the data file, truncates it to their end
//!   and renames it over the object: no byte is copied;
//! - otherwise copies the parts into a temporary file (`copy_file_range` on Linux: no pass
//!   through user space) and renames that over the object;
//!
//! so readers see the old object or the whole new one. The new object's internal info holds
//! only its ETag: checksums of an earlier object of the same key no longer stick to it. A part
//! whose record is missing or disagrees with its file's size is hashed at completion instead.
//!
//! This relies on s3s-fs 0.14's files under the root (its version is pinned in Cargo.lock):
//! `.upload-<id>.json` (the upload, with its owner's access key),
//! `.bucket-<b64>.object-<b64>[.upload-<id>].metadata.json` (attributes given at create) and
//! `.bucket-<b64>.object-<b64>.internal.json` (the ETag); every file of an upload in progress
//! is named `.upload_id-<id>.*`, which s3s-fs's abort removes. The tests of
//! `tests/s3/objects.rs` read completed objects back through s3s-fs, so a change of layout
//! fails them.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use s3s::crypto::{Checksum as _, Md5};
use s3s::{S3Result, s3_error};

use crate::parts::{States, md5_of_file};

/// Parts but the last must hold at least this many bytes (S3's rule).
const MIN_PART_SIZE: u64 = 5 << 20;

/// One part named by a CompleteMultipartUpload request.
#[derive(Debug)]
pub(crate) struct RequestedPart {
    /// Its number; the request must list 1, 2, 3, ...
    pub(crate) number: i32,
    /// The ETag the client got when it uploaded the part, when it names one.
    pub(crate) e_tag: Option<String>,
}

/// A part checked for completion: where its bytes are, its size and MD5.
struct CheckedPart {
    /// A file, and the offset of the part in it (0 for a part in a file of its own).
    path: PathBuf,
    offset: u64,
    /// Whether the file is the upload's data file.
    in_data: bool,
    size: u64,
    md5: [u8; 16],
}

/// The multipart-upload files of s3s-fs under one root and this process's state of each upload
/// in progress; see the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Uploads {
    root: PathBuf,
    states: States,
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unhex_md5(text: &str) -> Option<[u8; 16]> {
    let text = text.as_bytes();
    if text.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, pair) in text.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

pub(crate) fn internal(e: impl std::fmt::Display) -> s3s::S3Error {
    s3_error!(InternalError, "{e}")
}

/// Writes `data` to `dest` through a temporary file in the same folder and a rename.
pub(crate) fn write_replacing(dest: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut tmp = dest.as_os_str().to_owned();
    tmp.push(".tessera-tmp");
    fs::write(&tmp, data)?;
    fs::rename(&tmp, dest)
}

impl Uploads {
    /// The uploads of s3s-fs serving `root` (canonical, as s3s-fs makes it).
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root, states: States::default() }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    pub(crate) fn states(&self) -> &States {
        &self.states
    }

    /// The upload id in the form s3s-fs names files with (a lowercase hyphenated UUID), or
    /// `NoSuchUpload`; nothing else may reach a file name.
    pub(crate) fn checked_id(id: &str) -> S3Result<String> {
        let id = id.to_ascii_lowercase();
        let dashes = [8, 13, 18, 23];
        let ok = id.len() == 36
            && id.bytes().enumerate().all(|(i, b)| if dashes.contains(&i) { b == b'-' } else { b.is_ascii_hexdigit() });
        if ok { Ok(id) } else { Err(s3_error!(NoSuchUpload)) }
    }

    pub(crate) fn part_path(&self, id: &str, number: i32) -> PathBuf {
        self.root.join(format!(".upload_id-{id}.part-{number}"))
    }

    pub(crate) fn record_path(&self, id: &str, number: i32) -> PathBuf {
        self.root.join(format!(".upload_id-{id}.part-{number}.md5"))
    }
    fn object_file(&self, bucket: &str, key: &str, upload: Option<&str>) -> String {
        let enc = |s: &str| base64_simd::URL_SAFE_NO_PAD.encode_to_string(s);
        let upload = upload.map(|u| format!(".upload-{u}")).unwrap_or_default();
        format!(".bucket-{}.object-{}{upload}", enc(bucket), enc(key))
    }

    fn internal_info_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.root.join(format!("{}.internal.json", self.object_file(bucket, key, None)))
    }

    fn metadata_path(&self, bucket: &str, key: &str, upload: Option<&str>) -> PathBuf {
        self.root.join(format!("{}.metadata.json", self.object_file(bucket, key, upload)))
    }

    /// The stored ETag of the object at `object`: its internal info's, else the MD5 of its bytes
    /// (as s3s-fs computes it); `None` when there is no object.
    pub(crate) fn current_e_tag(&self, bucket: &str, key: &str, object: &Path) -> S3Result<Option<String>> {
        if !object.is_file() {
            return Ok(None);
        }
        if let Ok(text) = fs::read(self.internal_info_path(bucket, key))
            && let Ok(serde_json::Value::Object(info)) = serde_json::from_slice::<serde_json::Value>(&text)
            && let Some(serde_json::Value::String(e_tag)) = info.get("e_tag")
        {
            return Ok(Some(e_tag.clone()));
        }
        md5_of_file(object).map(|m| Some(hex(&m))).map_err(internal)
    }

    /// [`Uploads::check_owner`], dropping this process's state of `id` when there is no such
    /// upload: requests naming made-up ids leave nothing behind (no writer of a missing upload
    /// can hold its gate).
    pub(crate) fn check_live(&self, id: &str, access_key: Option<&str>) -> S3Result<()> {
        let checked = self.check_owner(id, access_key);
        if checked.as_ref().is_err_and(|e| *e.code() == s3s::S3ErrorCode::NoSuchUpload) {
            self.forget(id);
        }
        checked
    }

    /// Checks that upload `id` exists and belongs to `access_key`.
    fn check_owner(&self, id: &str, access_key: Option<&str>) -> S3Result<()> {
        let info = match fs::read(self.root.join(format!(".upload-{id}.json"))) {
            Ok(info) => info,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(s3_error!(NoSuchUpload)),
            Err(e) => return Err(internal(e)),
        };
        let owner: Option<String> = serde_json::from_slice(&info).map_err(internal)?;
        if owner.as_deref() == access_key { Ok(()) } else { Err(s3_error!(AccessDenied)) }
    }

    /// Checks every requested part of upload `id` and returns them in order.
    fn check_parts(&self, id: &str, parts: &[RequestedPart]) -> S3Result<Vec<CheckedPart>> {
        if parts.is_empty() {
            return Err(s3_error!(InvalidPart, "You must specify at least one part"));
        }
        let mut checked = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            if usize::try_from(part.number).ok() != Some(i + 1) {
                return Err(s3_error!(InvalidPartOrder, "parts must be listed as 1, 2, 3, ..."));
            }
            let p = self.stored_part(id, part.number)?;
            if i + 1 < parts.len() && p.size < MIN_PART_SIZE {
                return Err(s3_error!(EntityTooSmall, "part {} holds {} bytes, under 5 MiB", part.number, p.size));
            }
            if let Some(named) = &part.e_tag
                && !named.trim_matches('"').eq_ignore_ascii_case(&hex(&p.md5))
            {
                return Err(s3_error!(InvalidPart, "part {}'s ETag is not the one named", part.number));
            }
            checked.push(p);
        }
        Ok(checked)
    }

    /// Where part `number` of upload `id` is, from its record, or its own file hashed when it
    /// has no record matching the file.
    fn stored_part(&self, id: &str, number: i32) -> S3Result<CheckedPart> {
        let record = self.read_record(id, number);
        if let Some(r) = record
            && let Some(offset) = r.offset
        {
            let path = self.data_path(id);
            return Ok(CheckedPart { path, offset, in_data: true, size: r.size, md5: r.md5 });
        }
        let path = self.part_path(id, number);
        let size = match fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(s3_error!(InvalidPart, "part {number} was not uploaded"));
            }
            Err(e) => return Err(internal(e)),
        };
        let md5 = match record.filter(|r| r.size == size) {
            Some(r) => r.md5,
            None => md5_of_file(&path).map_err(internal)?,
        };
        Ok(CheckedPart { path, offset: 0, in_data: false, size, md5 })
    }

    /// Puts checked parts together in the file `tmp`: the data file itself, truncated to their
    /// end, when they lie back to back from its start (returns true), else a new file they are
    /// copied into (returns false).
    fn join_parts(data: &Path, tmp: &Path, parts: &[CheckedPart]) -> std::io::Result<bool> {
        let mut end = 0u64;
        let in_place = parts.iter().all(|p| {
            let next = p.in_data && p.offset == end;
            end = end.saturating_add(p.size);
            next
        });
        if in_place {
            OpenOptions::new().write(true).open(data)?.set_len(end)?;
            return fs::rename(data, tmp).map(|()| true);
        }
        let copied = (|| {
            // Not opened to append: `copy_file_range` refuses a file opened so, and
            // `std::io::copy` would fall back to copying through a small buffer. Truncated: a
            // completion of this upload interrupted by a crash may have left it (no other
            // completion of it runs now, the caller holds the upload's gate).
            let mut out = OpenOptions::new().write(true).create(true).truncate(true).open(tmp)?;
            for p in parts {
                let mut source = File::open(&p.path)?;
                source.seek(SeekFrom::Start(p.offset))?;
                let copied = std::io::copy(&mut source.take(p.size), &mut out)?;
                if copied != p.size {
                    return Err(std::io::Error::other(format!(
                        "part in {} is shorter than recorded",
                        p.path.display()
                    )));
                }
            }
            Ok(())
        })();
        if copied.is_err() {
            let _ = fs::remove_file(tmp);
        }
        copied.map(|()| false)
    }

    /// Completes upload `id` of `bucket`/`key` into the file `object` from `parts` and returns
    /// the object's ETag (MD5 of the parts' MD5s, `-<count>`). Blocking file work: run it off
    /// the async workers. The caller holds the key's write lock and the upload's gate
    /// exclusively, and checked its conditions.
    pub(crate) fn complete(
        &self,
        bucket: &str,
        key: &str,
        id: &str,
        access_key: Option<&str>,
        parts: &[RequestedPart],
        object: &Path,
    ) -> S3Result<String> {
        let id = Self::checked_id(id)?;
        self.check_live(&id, access_key)?;
        let checked = self.check_parts(&id, parts)?;
        let tmp = self.root.join(format!(".tmp.tessera-complete-{id}"));
        let data = self.data_path(&id);
        let in_place = Self::join_parts(&data, &tmp, &checked).map_err(internal)?;
        let placed = object.parent().map_or(Ok(()), fs::create_dir_all).and_then(|()| fs::rename(&tmp, object));
        if let Err(e) = placed {
            // The data file goes back (parts the completion did not name are gone with its
            // tail, as they would be after a completion that worked).
            let _ = if in_place { fs::rename(&tmp, &data) } else { fs::remove_file(&tmp) };
            return Err(internal(e));
        }
        let mut all = Md5::new();
        checked.iter().for_each(|p| all.update(&p.md5));
        let e_tag = format!("{}-{}", hex(&all.finalize()), checked.len());
        let info = serde_json::json!({ "e_tag": e_tag });
        write_replacing(&self.internal_info_path(bucket, key), info.to_string().as_bytes()).map_err(internal)?;
        let attributes = self.metadata_path(bucket, key, Some(&id));
        if attributes.is_file() {
            fs::rename(&attributes, self.metadata_path(bucket, key, None)).map_err(internal)?;
        }
        self.remove_leftovers(&id);
        Ok(e_tag)
    }

    /// Removes what is left of upload `id`: parts not joined (S3 discards parts a completion
    /// does not list), their records, and the upload itself.
    fn remove_leftovers(&self, id: &str) {
        let prefix = format!(".upload_id-{id}.");
        if let Ok(entries) = fs::read_dir(&self.root) {
            for entry in entries.flatten() {
                if entry.file_name().to_str().is_some_and(|n| n.starts_with(&prefix)) {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
        let _ = fs::remove_file(self.root.join(format!(".upload-{id}.json")));
    }
}
