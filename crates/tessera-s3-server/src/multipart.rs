//! [`Uploads`]: completing a multipart upload by moving its parts instead of copying them through
//! the server.
//!
//! s3s-fs completes an upload by reading every part back in 64 KiB pieces, hashing it again
//! and writing it into a new file: about 0.4 s for a 128 MiB object on the benchmark machine,
//! a cost S3 does not have (it never copies parts on completion). Here:
//! - each part's MD5 (its ETag) and size are kept when the part is stored, in a side file
//!   `<part file>.md5` beside s3s-fs's part file (same prefix, so an abort removes it too);
//! - completion checks every part (present, consecutive numbers, at least 5 MiB but the last,
//!   the ETag the client names equal to the stored one, as S3 checks), then renames the first
//!   part to a temporary file, appends the others with `std::io::copy` (in-kernel
//!   `copy_file_range` on Linux: no pass through user space, a shared extent on file systems
//!   with reflinks) and renames the result over the object, so readers see the old object or
//!   the whole new one;
//! - the new object's internal info holds only its ETag: checksums of an earlier object of the
//!   same key no longer stick to it.
//!
//! A part whose side file is missing or disagrees with the part's size (two uploads of one
//! part number racing) is hashed at completion instead.
//!
//! This relies on s3s-fs 0.14's files under the root (its version is pinned in Cargo.lock):
//! `.upload-<id>.json` (the upload, with its owner's access key), `.upload_id-<id>.part-<n>`
//! (the parts), `.bucket-<b64>.object-<b64>[.upload-<id>].metadata.json` (attributes given at
//! create) and `.bucket-<b64>.object-<b64>.internal.json` (the ETag). The tests of
//! `tests/s3/objects.rs` read completed objects back through s3s-fs, so a change of layout
//! fails them.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use s3s::crypto::{Checksum as _, Md5};
use s3s::{S3Result, s3_error};

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

/// A part checked for completion: its file, size and MD5.
struct CheckedPart {
    path: PathBuf,
    size: u64,
    md5: [u8; 16],
}

/// The multipart-upload files of s3s-fs under one root; see the module doc.
#[derive(Debug, Clone)]
pub(crate) struct Uploads {
    root: PathBuf,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex_md5(text: &str) -> Option<[u8; 16]> {
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

fn md5_of_file(path: &Path) -> std::io::Result<[u8; 16]> {
    let mut file = File::open(path)?;
    let mut md5 = Md5::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok(md5.finalize());
        }
        md5.update(&buf[..n]);
    }
}

pub(crate) fn internal(e: impl std::fmt::Display) -> s3s::S3Error {
    s3_error!(InternalError, "{e}")
}

/// Writes `data` to `dest` through a temporary file in the same folder and a rename.
fn write_replacing(dest: &Path, data: &[u8]) -> std::io::Result<()> {
    let mut tmp = dest.as_os_str().to_owned();
    tmp.push(".tessera-tmp");
    fs::write(&tmp, data)?;
    fs::rename(&tmp, dest)
}

impl Uploads {
    /// The uploads of s3s-fs serving `root` (canonical, as s3s-fs makes it).
    pub(crate) fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The upload id in the form s3s-fs names files with (a lowercase hyphenated UUID), or
    /// `NoSuchUpload`; nothing else may reach a file name.
    fn checked_id(id: &str) -> S3Result<String> {
        let id = id.to_ascii_lowercase();
        let dashes = [8, 13, 18, 23];
        let ok = id.len() == 36
            && id.bytes().enumerate().all(|(i, b)| if dashes.contains(&i) { b == b'-' } else { b.is_ascii_hexdigit() });
        if ok { Ok(id) } else { Err(s3_error!(NoSuchUpload)) }
    }

    fn part_path(&self, id: &str, number: i32) -> PathBuf {
        self.root.join(format!(".upload_id-{id}.part-{number}"))
    }

    fn md5_path(&self, id: &str, number: i32) -> PathBuf {
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

    /// Records the MD5 (hex, as in the part's ETag) and size of part `number` of upload `id`,
    /// just stored by s3s-fs. Best effort: completion hashes a part whose record is missing.
    pub(crate) fn record_part(&self, id: &str, number: i32, md5_hex: &str) {
        let Ok(id) = Self::checked_id(id) else { return };
        let Ok(meta) = fs::metadata(self.part_path(&id, number)) else { return };
        let _ = write_replacing(&self.md5_path(&id, number), format!("{md5_hex} {}", meta.len()).as_bytes());
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
            let path = self.part_path(id, part.number);
            let size = match fs::metadata(&path) {
                Ok(m) => m.len(),
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    return Err(s3_error!(InvalidPart, "part {} was not uploaded", part.number));
                }
                Err(e) => return Err(internal(e)),
            };
            if i + 1 < parts.len() && size < MIN_PART_SIZE {
                return Err(s3_error!(EntityTooSmall, "part {} holds {size} bytes, under 5 MiB", part.number));
            }
            let recorded = fs::read_to_string(self.md5_path(id, part.number)).ok().and_then(|text| {
                let (md5, len) = text.split_once(' ')?;
                (len.parse::<u64>().ok()? == size).then(|| unhex_md5(md5)).flatten()
            });
            let md5 = match recorded {
                Some(md5) => md5,
                None => md5_of_file(&path).map_err(internal)?,
            };
            if let Some(named) = &part.e_tag
                && !named.trim_matches('"').eq_ignore_ascii_case(&hex(&md5))
            {
                return Err(s3_error!(InvalidPart, "part {}'s ETag is not the one named", part.number));
            }
            checked.push(CheckedPart { path, size, md5 });
        }
        Ok(checked)
    }

    /// Joins checked parts into `tmp`: the first renamed, the others appended. On failure the
    /// first part is put back as it was.
    fn join_parts(tmp: &Path, parts: &[CheckedPart]) -> std::io::Result<()> {
        let first = &parts[0];
        fs::rename(&first.path, tmp)?;
        let appended = (|| {
            // Not opened to append: `copy_file_range` refuses a file opened so, and
            // `std::io::copy` would fall back to copying through a small buffer.
            let mut out = OpenOptions::new().write(true).open(tmp)?;
            out.seek(SeekFrom::End(0))?;
            for p in &parts[1..] {
                let copied = std::io::copy(&mut File::open(&p.path)?, &mut out)?;
                if copied != p.size {
                    return Err(std::io::Error::other(format!("part {} changed while joined", p.path.display())));
                }
            }
            Ok(())
        })();
        if let Err(e) = appended {
            let _ = OpenOptions::new().write(true).open(tmp).and_then(|f| f.set_len(first.size));
            let _ = fs::rename(tmp, &first.path);
            return Err(e);
        }
        Ok(())
    }

    /// Completes upload `id` of `bucket`/`key` into the file `object` from `parts` and returns
    /// the object's ETag (MD5 of the parts' MD5s, `-<count>`). Blocking file work: run it off
    /// the async workers. The caller holds the key's write lock and checked its conditions.
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
        self.check_owner(&id, access_key)?;
        let checked = self.check_parts(&id, parts)?;
        let tmp = self.root.join(format!(".tmp.tessera-complete-{id}"));
        Self::join_parts(&tmp, &checked).map_err(internal)?;
        let placed = object.parent().map_or(Ok(()), fs::create_dir_all).and_then(|()| fs::rename(&tmp, object));
        if let Err(e) = placed {
            let _ = fs::remove_file(&tmp);
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
