//! Streamed reads of unfiltered tiles: a tile with block checksums that a read needs most of,
//! as runs of bytes into the result (a box cut a little inside a tile, a few columns of it), is
//! read as one sequential stream of pieces through a small buffer; each piece's blocks are
//! hashed and its runs copied into the result as it arrives, while the kernel reads the next
//! one ahead. No tile buffer is allocated, and the tile checksum (the xxh3-64 of the block
//! checksums, docs/format.md §8.1) is checked once the last piece is in. A tile in memory is
//! streamed the same way in pieces of the buffer's size; on a storage that cannot tell where
//! the tile is (a map, an object store) it is read whole and copied from there.

use std::mem::MaybeUninit;

use crate::error::{Error, Result};
use crate::fragment::{hash_blocks, verify_sums, verify_tile, FileSpec, TileEntry};
use crate::snapshot::{count_fetched, file_path, storage_err, Snapshot, TileKey};
use crate::stats::{self, Counter, Timer};
use crate::storage::{cold_read_pieces, COLD_READ_FIRST, COLD_READ_LARGEST};
use crate::uninit::{assume_written, write_bytes, OutBytes};

/// Reads unfiltered tile `key` of file `f` (its tile entry checked at planning: stored and
/// unfiltered sizes are the tile's bytes, blocks no larger than [`COLD_READ_FIRST`]) and
/// copies its bytes into `runs`: (offset in the tile, the run's place in the result).
pub(super) fn read_streamed(
    array: &Snapshot,
    spec: &FileSpec,
    (key, f): (TileKey, usize),
    mut runs: Vec<(u64, OutBytes<'_>)>,
) -> Result<()> {
    let _t = stats::timer(Timer::ReaderFetchTiles);
    let frag = &array.fragments[key.0];
    let entry = frag.files[f].1[key.1 as usize];
    let log2 = frag.blocks.log2;
    let path = file_path(array, key.0, &spec.name);
    let storage = array.ctx.storage();
    let len = usize::try_from(entry.stored_size).map_err(|_| Error::corrupt_tile(&path, key.1, "tile too large"))?;
    let bad = |(stored, sum): (u64, u64)| {
        let what = format!("checksum mismatch (stored {stored:016x}, computed {sum:016x})");
        Error::corrupt_tile(&path, key.1, what)
    };
    runs.sort_unstable_by_key(|r| r.0);
    let copied: u64 = runs.iter().map(|r| r.1.len() as u64).sum();
    let size = COLD_READ_LARGEST.min(len);
    let mut buf: Vec<MaybeUninit<u8>> = Vec::with_capacity(size);
    // SAFETY: `size` is within the capacity, and `MaybeUninit` needs no initialization (only
    // bytes a read wrote are used).
    #[allow(unsafe_code)]
    unsafe {
        buf.set_len(size)
    };
    let probe = COLD_READ_FIRST.min(len);
    let cached =
        storage.read_immutable_cached(&path, entry.offset, &mut buf[..probe]).map_err(|e| storage_err(&path, e))?;
    let Some(n) = cached else {
        // The storage cannot tell (a map, an object store): one read of the whole tile.
        drop(buf);
        let raw = storage.read_immutable(&path, entry.offset, entry.stored_size).map_err(|e| storage_err(&path, e))?;
        verify_tile(&raw, entry.checksum, Some(log2)).map_err(bad)?;
        copy_runs_in(&raw, 0, &mut runs, &mut 0);
        finish(array, spec, entry, copied);
        return Ok(());
    };
    let block = 1usize << log2;
    let mut sums = vec![0u64; len.div_ceil(block)];
    let mut next = 0;
    // The probe's whole blocks, then pieces from there, all starting on block bounds: from disk
    // growing ones (multiples of COLD_READ_FIRST, itself a multiple of the block), from memory
    // the buffer's size (a multiple of the block unless it holds the tile's end).
    let head = if n == len { n } else { n / block * block };
    // SAFETY: the probe wrote the first `n >= head` bytes.
    #[allow(unsafe_code)]
    let bytes = unsafe { assume_written(&buf[..head]) };
    hash_blocks(bytes, &mut sums[..head.div_ceil(block)], log2);
    copy_runs_in(bytes, 0, &mut runs, &mut next);
    let pieces: Box<dyn Iterator<Item = std::ops::Range<usize>>> = if n < probe {
        Box::new(cold_read_pieces(head, len))
    } else {
        let step = buf.len();
        Box::new((head..len).step_by(step).map(move |a| a..(a + step).min(len)))
    };
    for r in pieces {
        let piece = &mut buf[..r.len()];
        let at = entry.offset + r.start as u64;
        storage.read_immutable_into(&path, at, piece).map_err(|e| storage_err(&path, e))?;
        // SAFETY: the read succeeded, so it wrote every byte of `piece`.
        #[allow(unsafe_code)]
        let bytes = unsafe { assume_written(piece) };
        let first = r.start >> log2;
        hash_blocks(bytes, &mut sums[first..first + bytes.len().div_ceil(block)], log2);
        copy_runs_in(bytes, r.start, &mut runs, &mut next);
    }
    verify_sums(&sums, entry.checksum).map_err(bad)?;
    finish(array, spec, entry, copied);
    Ok(())
}

/// Counts a streamed tile in the statistics: touched, its bytes fetched, `copied` bytes copied.
fn finish(array: &Snapshot, spec: &FileSpec, entry: TileEntry, copied: u64) {
    stats::add(Counter::ReaderNumAttrTilesTouched, 1);
    count_fetched(array.schema(), spec, entry.stored_size, entry.unfiltered_size);
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
