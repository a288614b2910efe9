//! Tiles with block checksums read as streams. A tile the read takes whole goes into its place
//! in the result ([`read_blocked`]); a tile whose copies are runs of bytes into the result (a
//! box cut inside a tile, a few columns of it, points), whole or only the blocks the runs need,
//! goes through a small buffer ([`read_streamed`]), each piece hashed and its runs copied into
//! the result as it arrives, with no tile buffer. From disk either is one sequential stream of
//! growing pieces ([`stream_from_disk`], the kernel reading ahead while the pieces are hashed
//! and copied), each through a reader of its own ([`Storage::immutable_stream`]) so that the
//! streams of one read run side by side without breaking each other's readahead; from memory,
//! pieces are read in parallel into the result, or one after another through the buffer. A
//! whole tile's tile checksum (the xxh3-64 of the block checksums, docs/format.md §8.1) is
//! checked once the last piece is in, a part's blocks against the stored block checksums. On a
//! storage that cannot tell where the bytes are (a map, an object store) a streamed range is
//! read whole (a map lends it in place) and walked in the same pieces.

use std::mem::MaybeUninit;
use std::ops::Range;
use std::path::Path;

use crate::context::Context;
use crate::error::{Error, Result};
use crate::fragment::{hash_blocks, verify_sums, FileSpec};
use crate::snapshot::{block_sums, count_fetched, file_path, storage_err, Snapshot, TileKey};
use crate::stats::{self, Counter, Timer};
use crate::storage::{cold_piece_reads, cold_read_pieces, Storage, COLD_PROBE, COLD_READ_LARGEST};
use crate::uninit::{assume_written, write_bytes, OutBytes};

/// Bytes per piece of a direct tile read from memory: a large tile is read and verified in
/// pieces of whole checksum blocks, in parallel, so that one tile keeps every I/O thread busy.
/// A piece is hashed right after it is copied, while it is still in the core's cache: warm reads
/// of a 10 MB tile were 8-12% faster with 256 KiB pieces than with 2 MiB ones. Public for the
/// layout advisor, which prices reads as the reader makes them.
pub const DIRECT_PIECE: usize = 256 << 10;

/// Where the pieces of a stream go: each to its place in the tile's bytes (`InPlace`, the
/// tile's slot), or one after another through the start of a buffer (`Through`).
enum Landing<'a, 'b> {
    InPlace(&'a mut OutBytes<'b>),
    Through(&'a mut [MaybeUninit<u8>]),
}

impl Landing<'_, '_> {
    fn piece(&mut self, r: Range<usize>) -> &mut [MaybeUninit<u8>] {
        match self {
            Landing::InPlace(slot) => &mut slot[r],
            Landing::Through(buf) => &mut buf[..r.len()],
        }
    }
}

/// The file offset of byte `i` of a tile at `offset` of `path` (past the largest offset: the
/// tile entry is corrupt).
fn file_offset(path: &Path, offset: u64, i: usize) -> Result<u64> {
    offset.checked_add(i as u64).ok_or_else(|| Error::corrupt(path, "tile offset out of range"))
}

/// Hashes the blocks (of `2^log2` bytes) of `bytes`, the tile's bytes from `start` (a block
/// bound), into their places in `sums`, the tile's block checksums.
fn hash_piece(bytes: &[u8], start: usize, (log2, sums): (u32, &mut [u64])) {
    let first = start >> log2;
    hash_blocks(bytes, &mut sums[first..first + bytes.len().div_ceil(1 << log2)], log2);
}

/// Reads the `len` bytes of the tile at `offset` of `path` as one sequential stream from disk
/// ([`cold_read_pieces`]; blocks of `2^log2` bytes no larger than the first piece, so that
/// every piece starts on a block bound), each piece landing as `land` says, its blocks hashed
/// into `sums` and then handed to `each` with its start in the tile. The stream reads through
/// a reader of its own when the storage has one ([`Storage::immutable_stream`]; otherwise
/// through the storage's shared reads).
fn stream_from_disk(
    (storage, path, offset): (&dyn Storage, &Path, u64),
    len: usize,
    mut land: Landing<'_, '_>,
    (log2, sums): (u32, &mut [u64]),
    mut each: impl FnMut(&[u8], usize),
) -> Result<()> {
    let mut own = storage.immutable_stream(path).map_err(|e| storage_err(path, e))?;
    for (i, r) in cold_read_pieces(0, len).enumerate() {
        let piece = land.piece(r.clone());
        for read in cold_piece_reads(0..r.len(), i == 0) {
            let at = file_offset(path, offset, r.start + read.start)?;
            let got = match own.as_mut() {
                Some(own) => own.read_into(at, &mut piece[read]),
                None => storage.read_immutable_into(path, at, &mut piece[read]),
            };
            got.map_err(|e| storage_err(path, e))?;
        }
        // SAFETY: the reads succeeded and covered the piece, so they wrote every byte of it.
        #[allow(unsafe_code)]
        let bytes = unsafe { assume_written(piece) };
        hash_piece(bytes, r.start, (log2, sums));
        each(bytes, r.start);
    }
    Ok(())
}

/// Reads a tile with block checksums (blocks of `2^log2` bytes, at most
/// [`COLD_READ_FIRST`](crate::storage::COLD_READ_FIRST); its tile checksum `checksum` is the
/// xxh3-64 of them) at `offset` of `path` into `slot`,
/// hashing each piece's blocks as it arrives, and then checks the tile checksum (`bad` makes
/// the error from the stored and computed values). When the storage holds the tile in memory
/// (its first [`COLD_PROBE`] bytes were there, or it does not know) pieces of [`DIRECT_PIECE`]
/// are read, in parallel when `parallel` gives the context ([`Context::io_map`]); when the
/// tile is on disk it is read as one sequential stream ([`stream_from_disk`]).
pub(super) fn read_blocked(
    (storage, parallel): (&dyn Storage, Option<&Context>),
    path: &Path,
    offset: u64,
    mut slot: OutBytes<'_>,
    (checksum, log2): (u64, u32),
    bad: &(dyn Fn((u64, u64)) -> Error + Sync),
) -> Result<()> {
    let block = 1usize << log2;
    let piece = (DIRECT_PIECE / block).max(1) * block;
    let probe = COLD_PROBE.min(slot.len());
    let mut sums = vec![0u64; slot.len().div_ceil(block)];
    let cached = storage.read_immutable_cached(path, offset, &mut slot[..probe]).map_err(|e| storage_err(path, e))?;
    match cached {
        Some(n) if n < probe => {
            let len = slot.len();
            let land = Landing::InPlace(&mut slot);
            stream_from_disk((storage, path, offset), len, land, (log2, &mut sums), |_, _| {})?;
        }
        // In memory: the probe's bytes (all of them, or none when the storage cannot tell) are
        // not read again.
        cached => {
            let have = cached.unwrap_or(0);
            let one = |i: usize, (p, out): (OutBytes<'_>, &mut [u64])| {
                let skip = if i == 0 { have } else { 0 };
                let from = i * piece + skip;
                let at = file_offset(path, offset, from)?;
                storage.read_immutable_into(path, at, &mut p[skip..]).map_err(|e| storage_err(path, e))?;
                // SAFETY: the read wrote `p[skip..]`; the probe wrote `p[..skip]` (the first
                // piece's `have` bytes, all it was asked for).
                #[allow(unsafe_code)]
                let p = unsafe { assume_written(p) };
                hash_blocks(p, out, log2);
                Ok(())
            };
            let jobs: Vec<_> = slot.chunks_mut(piece).zip(sums.chunks_mut(piece >> log2)).collect();
            match parallel {
                Some(ctx) => ctx.io_map(path, jobs, one).map(drop)?,
                None => jobs.into_iter().enumerate().try_for_each(|(i, j)| one(i, j))?,
            }
        }
    }
    verify_sums(&sums, checksum).map_err(bad)
}

/// Reads the blocks `needed` (ranges `[a, b)` of checksum blocks, sorted and disjoint; the
/// whole tile, or only the blocks a read in part needs) of unfiltered tile `key` of file `f`
/// (its tile entry checked at planning: stored and unfiltered sizes are the tile's bytes,
/// blocks no larger than [`COLD_READ_FIRST`](crate::storage::COLD_READ_FIRST)) and copies
/// their bytes into `runs`: (offset in the tile, the run's place in the result; every run
/// inside the blocks read). Each piece is hashed and its runs copied while it is in the core's
/// cache, so the bytes cross memory once after the storage's copy: from disk each range of
/// blocks is one sequential stream ([`stream_from_disk`]); from memory, pieces of
/// [`DIRECT_PIECE`] go through one reused buffer; from a storage that cannot tell where the
/// bytes are (a map, an object store), each range is read whole (a map lends it in place) and
/// walked in the same pieces. The whole tile is checked against its tile checksum, a part block
/// by block against the stored block checksums.
pub(super) fn read_streamed(
    array: &Snapshot,
    spec: &FileSpec,
    (key, f): (TileKey, usize),
    needed: &[(u64, u64)],
    mut runs: Vec<(u64, OutBytes<'_>)>,
) -> Result<()> {
    let _t = stats::timer(Timer::ReaderFetchTiles);
    let frag = &array.fragments[key.0];
    let entry = frag.files[f].1[key.1 as usize];
    let log2 = frag.blocks.log2;
    let path = file_path(array, key.0, &spec.name);
    let storage = array.ctx.storage();
    let len = usize::try_from(entry.stored_size).map_err(|_| Error::corrupt_tile(&path, key.1, "tile too large"))?;
    let block = 1usize << log2;
    let ranges = byte_ranges(needed, log2, len)
        .ok_or_else(|| Error::corrupt_tile(&path, key.1, format!("blocks {needed:?} of a {len}-byte tile")))?;
    let read: usize = ranges.iter().map(|r| r.1.len()).sum();
    runs.sort_unstable_by_key(|r| r.0);
    let copied: u64 = runs.iter().map(|r| r.1.len() as u64).sum();
    let piece = (DIRECT_PIECE / block).max(1) * block;
    let mut sums = vec![0u64; len.div_ceil(block)];
    let mut next = 0;
    let mut buf: Vec<MaybeUninit<u8>> = Vec::with_capacity(COLD_READ_LARGEST.max(piece).min(read));
    // SAFETY: the length is the capacity, and `MaybeUninit` needs no initialization (only
    // bytes a read wrote are used).
    #[allow(unsafe_code)]
    unsafe {
        buf.set_len(buf.capacity())
    };
    let first = ranges.first().map_or(0..0, |r| r.1.clone());
    let probe = COLD_PROBE.min(first.len());
    let at0 = file_offset(&path, entry.offset, first.start)?;
    let cached = storage.read_immutable_cached(&path, at0, &mut buf[..probe]).map_err(|e| storage_err(&path, e))?;
    for (i, (a, r)) in ranges.iter().enumerate() {
        let at = file_offset(&path, entry.offset, r.start)?;
        match cached {
            // The storage cannot tell (a map, an object store): one read of the range.
            None => {
                let raw = storage.read_immutable(&path, at, r.len() as u64).map_err(|e| storage_err(&path, e))?;
                for (j, bytes) in raw.chunks(piece).enumerate() {
                    let start = r.start + j * piece;
                    hash_piece(bytes, start, (log2, &mut sums));
                    copy_runs_in(bytes, start, &mut runs, &mut next);
                }
            }
            Some(n) if n < probe => {
                let land = Landing::Through(&mut buf);
                let copy = |bytes: &[u8], from: usize| copy_runs_in(bytes, r.start + from, &mut runs, &mut next);
                stream_from_disk((storage.as_ref(), &path, at), r.len(), land, (log2, &mut sums[*a..]), copy)?;
            }
            // In memory: the probe's bytes start the first piece of the first range.
            Some(n) => {
                for p in (r.start..r.end).step_by(piece).map(|s| s..(s + piece).min(r.end)) {
                    let skip = if i == 0 && p.start == r.start { n.min(p.len()) } else { 0 };
                    let dst = &mut buf[..p.len()];
                    if skip < dst.len() {
                        let at = file_offset(&path, entry.offset, p.start + skip)?;
                        storage.read_immutable_into(&path, at, &mut dst[skip..]).map_err(|e| storage_err(&path, e))?;
                    }
                    // SAFETY: the read wrote `dst[skip..]`; the probe wrote `dst[..skip]` (the
                    // first piece's `n` bytes, all it was asked for).
                    #[allow(unsafe_code)]
                    let bytes = unsafe { assume_written(dst) };
                    hash_piece(bytes, p.start, (log2, &mut sums));
                    copy_runs_in(bytes, p.start, &mut runs, &mut next);
                }
            }
        }
    }
    check_blocks(array, (key, f), &path, (&ranges, log2), &sums)?;
    finish(array, spec, read as u64, copied);
    Ok(())
}

/// Checks the block checksums `sums` (the tile's, those of blocks not read left at 0) computed
/// by a streamed read of the block byte ranges `ranges` (blocks of `2^log2` bytes) of tile `key`
/// of file `f`, at `path`: the whole tile against its tile checksum, a part block by block
/// against the stored block checksums.
fn check_blocks(
    array: &Snapshot,
    (key, f): (TileKey, usize),
    path: &Path,
    (ranges, log2): (&[(usize, Range<usize>)], u32),
    sums: &[u64],
) -> Result<()> {
    let entry = array.fragments[key.0].files[f].1[key.1 as usize];
    if matches!(ranges, [(0, r)] if r.len() as u64 == entry.stored_size) {
        return verify_sums(sums, entry.checksum).map_err(|s| Error::tile_checksum(path, key.1, s));
    }
    let stored = block_sums(array, key, f)?.unwrap_or(&[]);
    let mut blocks = ranges.iter().flat_map(|(a, r)| *a..a + r.len().div_ceil(1 << log2));
    match blocks.find(|&k| stored.get(k) != Some(&sums[k])) {
        Some(k) => {
            let want = stored.get(k).copied().unwrap_or(!sums[k]);
            Err(Error::block_checksum(path, key.1, k, (want, sums[k])))
        }
        None => Ok(()),
    }
}

/// The byte ranges of the block ranges `needed` (`[a, b)`, blocks of `2^log2` bytes) of a tile
/// of `len` bytes, each with its first block; `None` if a range is empty or passes the tile.
fn byte_ranges(needed: &[(u64, u64)], log2: u32, len: usize) -> Option<Vec<(usize, Range<usize>)>> {
    let blocks = len.div_ceil(1 << log2);
    let range = |&(a, b): &(u64, u64)| {
        let (a, b) = (usize::try_from(a).ok()?, usize::try_from(b).ok()?);
        (a < b && b <= blocks).then(|| (a, a << log2..(b << log2).min(len)))
    };
    needed.iter().map(range).collect()
}

/// Counts a streamed tile in the statistics: touched, `read` bytes of it fetched, `copied`
/// bytes copied.
fn finish(array: &Snapshot, spec: &FileSpec, read: u64, copied: u64) {
    stats::add(Counter::ReaderNumAttrTilesTouched, 1);
    count_fetched(array.schema(), spec, read, read);
    super::execute::count_copied(false, copied);
}

/// Copies into `runs` (sorted by their offset in the tile; from `*next` on, the runs before it
/// being complete) the parts that lie in the tile's bytes `data`, which start at byte `at`;
/// then moves `*next` past the runs complete by the end of `data`. Runs may overlap (a point
/// read twice) and straddle pieces.
fn copy_runs_in(data: &[u8], at: usize, runs: &mut [(u64, OutBytes<'_>)], next: &mut usize) {
    let end = at + data.len();
    for (src, slot) in runs[*next..].iter_mut() {
        let src = *src as usize;
        if src >= end {
            break;
        }
        let (lo, hi) = (src.max(at), (src + slot.len()).min(end));
        if lo < hi {
            write_bytes(&mut slot[lo - src..hi - src], &data[lo - at..hi - at]);
        }
    }
    while runs.get(*next).is_some_and(|(src, slot)| *src as usize + slot.len() <= end) {
        *next += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs copied piece by piece, however the pieces cut them and overlapping or not, get
    /// exactly their bytes.
    #[test]
    fn runs_get_their_bytes_across_pieces() {
        let tile: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let spans = [(0usize, 10usize), (5, 20), (4090, 20), (4096, 4096), (5000, 1), (9000, 1000), (9000, 4)];
        for piece in [1usize, 7, 4096, 10_000] {
            let mut outs: Vec<Vec<MaybeUninit<u8>>> = spans.iter().map(|s| vec![MaybeUninit::new(0); s.1]).collect();
            let mut runs: Vec<(u64, OutBytes<'_>)> =
                spans.iter().zip(outs.iter_mut()).map(|(s, o)| (s.0 as u64, &mut o[..])).collect();
            let mut next = 0;
            for (i, data) in tile.chunks(piece).enumerate() {
                copy_runs_in(data, i * piece, &mut runs, &mut next);
            }
            assert_eq!(next, runs.len());
            drop(runs);
            for (s, o) in spans.iter().zip(&outs) {
                // SAFETY: every byte was initialized at creation.
                #[allow(unsafe_code)]
                let got = unsafe { assume_written(o) };
                assert_eq!(got, &tile[s.0..s.0 + s.1], "piece {piece}, span {s:?}");
            }
        }
    }
}
