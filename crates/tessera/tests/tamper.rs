//! Tampering with fragments on disk for the tests of hostile bytes (`hostile.rs` in the main test
//! binary, `alloc.rs` in its own): the bytes change, the checksums that guard against accidents
//! are recomputed.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use tessera::*;
use xxhash_rust::xxh3::xxh3_64;

/// The path of fragment `name`'s folder.
pub(crate) fn frag_dir(uri: &Path, name: &FragmentName) -> PathBuf {
    uri.join(FRAGMENTS_DIR).join(name.to_string())
}

/// Rewrites every commit record of the array at `uri` without the copy of its fragment's
/// metadata that records carry since format 8 (docs/format.md §4.1), re-sealed: readers then
/// read the fragments' own `__fragment_metadata` files, which the tests tamper with.
pub(crate) fn drop_record_copies(uri: &Path) {
    for entry in std::fs::read_dir(uri.join(COMMITS_DIR)).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "commit") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let (payload, footer) = bytes.split_at(bytes.len() - 20);
        let json = payload.iter().position(|&b| b == 0).map_or(payload, |i| &payload[..i]);
        let version = u32::from_le_bytes(footer[..4].try_into().unwrap());
        std::fs::write(&path, seal(json.to_vec(), version, footer[12..].try_into().unwrap())).unwrap();
    }
}

/// `payload` sealed with the footer of docs/format.md §2: u32 `version`, u64 xxh3-64 of
/// everything before it, the 8-byte `magic`.
pub(crate) fn seal(mut payload: Vec<u8>, version: u32, magic: &[u8; 8]) -> Vec<u8> {
    payload.extend_from_slice(&version.to_le_bytes());
    let sum = xxh3_64(&payload);
    payload.extend_from_slice(&sum.to_le_bytes());
    payload.extend_from_slice(magic);
    payload
}

/// Replaces the stored bytes of tile `tile` of file `file` of fragment `name`: `stored` is
/// appended to the file and the tile entry points at it with a matching checksum and the given
/// unfiltered size; the metadata is re-sealed (and the commit records' copies of it dropped). Only the checksums that guard against accidents
/// are satisfied: what the bytes mean is up to the caller.
pub(crate) fn replace_tile(uri: &Path, name: &FragmentName, file: &str, tile: usize, stored: &[u8], unfiltered: u64) {
    drop_record_copies(uri);
    let dir = frag_dir(uri, name);
    let meta_path = dir.join(METADATA_FILE);
    let mut meta = FragmentMetadata::decode(&std::fs::read(&meta_path).unwrap(), name.clone(), &meta_path).unwrap();
    let path = dir.join(meta.stored_file(file));
    let mut bytes = std::fs::read(&path).unwrap();
    let offset = bytes.len() as u64;
    bytes.extend_from_slice(stored);
    std::fs::write(&path, &bytes).unwrap();
    let f = meta.files.iter().position(|f| f.0 == file).unwrap();
    meta.files[f].1[tile] =
        TileEntry { offset, stored_size: stored.len() as u64, unfiltered_size: unfiltered, checksum: xxh3_64(stored) };
    std::fs::write(&meta_path, meta.encode()).unwrap();
}
