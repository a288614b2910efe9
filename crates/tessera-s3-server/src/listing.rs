//! ListObjectsV2 and ListObjects over a bucket folder, consistent while other requests delete.
//!
//! s3s-fs walks the folder and stats each file it meets; a file deleted between the directory
//! read and the stat made the whole listing fail with 500 `InternalError`. A listing that runs
//! beside a bulk delete (a vacuum listing `__fragments/` page by page while deleting the page
//! before) then failed on every retry. S3 lists some state of the bucket; an entry that
//! vanishes while it is being listed was deleted before the listing saw it, so here it is
//! left out. The same holds for a folder removed before it is read.
//!
//! Also unlike s3s-fs: `max-keys` is capped at 1 000 as on S3; a delimiter longer than one
//! character ends the common prefix after the whole delimiter; folders that cannot hold keys
//! under the prefix are not walked; files grouped into a common prefix are not stat'ed; and
//! `encoding-type=url` percent-encodes the keys, prefixes and delimiter of the answer, as S3
//! does (botocore asks for it and decodes what it gets, so a key holding `%` or `+` came back
//! changed).

use std::collections::BTreeSet;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};

use s3s::dto::*;
use s3s::{S3Result, s3_error};

/// S3's page size and the most `max-keys` may ask for.
const MAX_KEYS: usize = 1000;

/// The objects (key, size, modification time) and common prefixes of one walk, unsorted.
struct Walked {
    objects: Vec<Object>,
    prefixes: BTreeSet<String>,
}

/// Walks `bucket_root` for keys starting with `prefix`, grouping keys that hold `delimiter`
/// after the prefix into common prefixes. Entries that vanish during the walk are skipped.
fn walk(bucket_root: &Path, prefix: &str, delimiter: Option<&str>) -> io::Result<Walked> {
    let mut walked = Walked { objects: Vec::new(), prefixes: BTreeSet::new() };
    // (folder, its key with a trailing '/', or "" for the bucket itself)
    let mut folders: Vec<(PathBuf, String)> = vec![(bucket_root.to_path_buf(), String::new())];
    while let Some((folder, folder_key)) = folders.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(e) if e.kind() == ErrorKind::NotFound && !folder_key.is_empty() => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            // Names that are not UTF-8 cannot be keys (s3s-fs skips them too).
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
            let key = format!("{folder_key}{name}");
            let file_type = match entry.file_type() {
                Ok(t) => t,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if file_type.is_dir() {
                let sub_key = key + "/";
                if sub_key.starts_with(prefix) || prefix.starts_with(&sub_key) {
                    folders.push((entry.path(), sub_key));
                }
                continue;
            }
            let Some(rest) = key.strip_prefix(prefix) else { continue };
            if let Some(at) = delimiter.and_then(|d| rest.find(d).map(|at| at + d.len())) {
                walked.prefixes.insert(key[..prefix.len() + at].to_owned());
                continue;
            }
            let metadata = match entry.metadata() {
                Ok(m) => m,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            walked.objects.push(Object {
                key: Some(key),
                size: Some(i64::try_from(metadata.len()).map_err(io::Error::other)?),
                last_modified: Some(Timestamp::from(metadata.modified()?)),
                ..Default::default()
            });
        }
    }
    Ok(walked)
}

/// One page of a listing: the objects and common prefixes after `start_after`, in key order,
/// at most `max_keys` of them together, and the last key of the page if more follow.
struct Page {
    objects: Vec<Object>,
    prefixes: Vec<CommonPrefix>,
    count: usize,
    next: Option<String>,
}

fn page(walked: Walked, start_after: Option<&str>, max_keys: usize) -> Page {
    let Walked { mut objects, prefixes } = walked;
    objects.sort_unstable_by(|a, b| a.key.cmp(&b.key));
    let after = |k: &str| start_after.is_none_or(|s| k > s);
    let mut objects = objects.into_iter().filter(|o| o.key.as_deref().is_some_and(after)).peekable();
    let mut prefixes = prefixes.into_iter().filter(|p| after(p)).peekable();
    let mut out = Page { objects: Vec::new(), prefixes: Vec::new(), count: 0, next: None };
    let mut last = None;
    while out.count < max_keys {
        let prefix_first = match (objects.peek(), prefixes.peek()) {
            (None, None) => break,
            (Some(o), Some(p)) => p.as_str() < o.key.as_deref().unwrap_or(""),
            (None, Some(_)) => true,
            (Some(_), None) => false,
        };
        if prefix_first {
            if let Some(p) = prefixes.next() {
                last = Some(p.clone());
                out.prefixes.push(CommonPrefix { prefix: Some(p) });
            }
        } else if let Some(o) = objects.next() {
            last = o.key.clone();
            out.objects.push(o);
        }
        out.count += 1;
    }
    let more = objects.peek().is_some() || prefixes.peek().is_some();
    if out.count > 0 && more {
        out.next = last;
    }
    out
}

/// Percent-encodes `s` as S3 does for `encoding-type=url`: every byte but the unreserved
/// characters and `/`.
fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What a listing does to each key, prefix and marker of its answer: `url_encode` when the
/// request asked for `encoding-type=url`, nothing otherwise.
fn encoder(kind: Option<&EncodingType>) -> impl Fn(String) -> String + use<> {
    let url = kind.is_some_and(|e| e.as_str() == EncodingType::URL);
    move |s| if url { url_encode(&s) } else { s }
}

/// ListObjectsV2 of the bucket folder `bucket_root` (which the caller has checked exists).
pub(crate) async fn list_objects_v2(bucket_root: PathBuf, input: ListObjectsV2Input) -> S3Result<ListObjectsV2Output> {
    let prefix = input.prefix.clone().unwrap_or_default();
    let delimiter = input.delimiter.clone().filter(|d| !d.is_empty());
    let walked = {
        let prefix = prefix.clone();
        let delimiter = delimiter.clone();
        tokio::task::spawn_blocking(move || walk(&bucket_root, &prefix, delimiter.as_deref()))
            .await
            .map_err(|e| s3_error!(InternalError, "listing task failed: {e}"))?
            .map_err(|e| s3_error!(InternalError, "listing the bucket folder failed: {e}"))?
    };
    let max_keys = input.max_keys.and_then(|m| usize::try_from(m).ok()).unwrap_or(MAX_KEYS).min(MAX_KEYS);
    // A continuation token is the last key of the page before (S3's are opaque; this one is
    // the key itself, so it may be compared with StartAfter).
    let start_after = match (input.continuation_token.as_deref(), input.start_after.as_deref()) {
        (Some(token), Some(after)) => Some(token.max(after)),
        (token, after) => token.or(after),
    };
    let mut page = page(walked, start_after, max_keys);
    let encode = encoder(input.encoding_type.as_ref());
    for o in &mut page.objects {
        o.key = o.key.take().map(&encode);
    }
    for p in &mut page.prefixes {
        p.prefix = p.prefix.take().map(&encode);
    }
    Ok(ListObjectsV2Output {
        key_count: Some(i32::try_from(page.count).unwrap_or(i32::MAX)),
        max_keys: Some(i32::try_from(max_keys).unwrap_or(i32::MAX)),
        is_truncated: Some(page.next.is_some()),
        contents: (!page.objects.is_empty()).then_some(page.objects),
        common_prefixes: (!page.prefixes.is_empty()).then_some(page.prefixes),
        continuation_token: input.continuation_token,
        next_continuation_token: page.next,
        delimiter: input.delimiter.map(&encode),
        encoding_type: input.encoding_type,
        name: Some(input.bucket),
        prefix: input.prefix.map(&encode),
        start_after: input.start_after.map(&encode),
        ..Default::default()
    })
}

/// ListObjects (version 1): the V2 listing with the marker as StartAfter.
pub(crate) async fn list_objects(bucket_root: PathBuf, input: ListObjectsInput) -> S3Result<ListObjectsOutput> {
    let marker = input.marker.clone();
    let v2 = list_objects_v2(bucket_root, input.into()).await?;
    // Version 1 has no opaque token: the markers are keys, URL-encoded like them when asked.
    let encode = encoder(v2.encoding_type.as_ref());
    Ok(ListObjectsOutput {
        contents: v2.contents,
        common_prefixes: v2.common_prefixes,
        delimiter: v2.delimiter,
        encoding_type: v2.encoding_type,
        name: v2.name,
        prefix: v2.prefix,
        max_keys: v2.max_keys,
        is_truncated: v2.is_truncated,
        marker: marker.map(&encode),
        next_marker: v2.next_continuation_token.map(&encode),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walked(keys: &[&str], prefixes: &[&str]) -> Walked {
        Walked {
            objects: keys.iter().map(|k| Object { key: Some((*k).to_owned()), ..Default::default() }).collect(),
            prefixes: prefixes.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    fn keys(p: &Page) -> (Vec<&str>, Vec<&str>) {
        (
            p.objects.iter().filter_map(|o| o.key.as_deref()).collect(),
            p.prefixes.iter().filter_map(|c| c.prefix.as_deref()).collect(),
        )
    }

    #[test]
    fn pages_interleave_objects_and_prefixes_in_key_order() {
        let w = || walked(&["c", "a", "e"], &["b/", "d/"]);
        let first = page(w(), None, 3);
        assert_eq!(keys(&first), (vec!["a", "c"], vec!["b/"]));
        assert_eq!(first.next.as_deref(), Some("c"));
        let second = page(w(), first.next.as_deref(), 3);
        assert_eq!(keys(&second), (vec!["e"], vec!["d/"]));
        assert_eq!(second.count, 2);
        assert_eq!(second.next, None);
        let exact = page(w(), None, 5);
        assert_eq!((exact.count, exact.next), (5, None), "a full last page is not truncated");
        assert_eq!(page(w(), None, 0).next, None, "max-keys 0 lists nothing and is not truncated");
    }

    #[test]
    fn walk_groups_by_whole_delimiters_and_skips_other_folders() {
        let dir = tempfile::tempdir().unwrap();
        for k in ["a/x--1", "a/x--2/y", "a/sub/y", "a/z", "b/q"] {
            let p = dir.path().join(k);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"v").unwrap();
        }
        let w = walk(dir.path(), "a/", Some("--")).unwrap();
        let mut objects: Vec<_> = w.objects.iter().filter_map(|o| o.key.clone()).collect();
        objects.sort();
        assert_eq!(objects, ["a/sub/y", "a/z"], "keys without the delimiter are listed, in folders too");
        assert_eq!(w.prefixes.into_iter().collect::<Vec<_>>(), ["a/x--"]);
        assert_eq!(w.objects[0].size, Some(1));
        let missing = walk(&dir.path().join("gone"), "", None);
        assert!(missing.is_err(), "a missing bucket folder is an error, not an empty listing");
    }

    #[tokio::test]
    async fn version_1_markers_are_encoded_like_keys() {
        let dir = tempfile::tempdir().unwrap();
        for k in ["a+1", "a+2", "a+3"] {
            std::fs::write(dir.path().join(k), b"v").unwrap();
        }
        let input = ListObjectsInput {
            bucket: "b".into(),
            encoding_type: Some(EncodingType::from_static(EncodingType::URL)),
            marker: Some("a+1".into()),
            max_keys: Some(1),
            ..Default::default()
        };
        let out = list_objects(dir.path().to_path_buf(), input).await.unwrap();
        let keys: Vec<_> = out.contents.iter().flatten().filter_map(|o| o.key.as_deref()).collect();
        assert_eq!(keys, ["a%2B2"]);
        assert_eq!(out.marker.as_deref(), Some("a%2B1"));
        assert_eq!(out.next_marker.as_deref(), Some("a%2B2"));
    }

    #[test]
    fn url_encoding_keeps_unreserved_characters_and_slashes() {
        assert_eq!(url_encode("a/b-c_d.e~f"), "a/b-c_d.e~f");
        assert_eq!(url_encode("a b+c%d"), "a%20b%2Bc%25d");
        assert_eq!(url_encode("é"), "%C3%A9");
    }
}
