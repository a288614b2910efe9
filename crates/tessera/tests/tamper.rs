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

/// Replaces the stored bytes of tile `tile` of file `file` of fragment `name`: `stored` is
/// appended to the file and the tile entry points at it with a matching checksum and the given
/// unfiltered size; the metadata is re-sealed. Only the checksums that guard against accidents
/// are satisfied: what the bytes mean is up to the caller.
pub(crate) fn replace_tile(uri: &Path, name: &FragmentName, file: &str, tile: usize, stored: &[u8], unfiltered: u64) {
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
