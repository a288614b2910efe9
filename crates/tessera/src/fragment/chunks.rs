//! Chunked tiles (format version 4). A tile of a filtered file whose unfiltered size exceeds
//! two chunks of `2^log2` bytes is filtered chunk by chunk: chunk `j` is unfiltered bytes
//! `[j * 2^log2, min((j + 1) * 2^log2, N))`, each chunk goes through the whole filter pipeline
//! by itself, and the results are stored back to back. The fragment metadata records every
//! chunk's stored size and checksum (the xxh3-64 of its stored bytes); the tile's checksum is the
//! xxh3-64 of its chunk checksums, as for block checksums. Chunks are filtered and unfiltered
//! in parallel, and a read that needs a few cells of a large tile reads, verifies and decodes
//! only the chunks holding them. Each tile records its own chunk size (format version 5): a
//! writer left to choose (`sm.tile_chunk_size` auto) samples a tile's first MiB at 64 KiB,
//! 256 KiB and 1 MiB chunks, then, if 1 MiB won, its first 4 MiB at 1 and 4 MiB, and takes the
//! smallest that stores the sample about as well as the largest, so smooth data is not stored
//! many times larger than whole tiles for the sake of reads that decode at most 4 MiB for one
//! cell.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::blocks::checksum_of_sums;
use super::tile_stats::{summarize, TileSummary};
use crate::checksum::xxh3_64;
use crate::error::checksum_mismatch;
use crate::filter::{FilterError, FilterPipeline};
use crate::schema::Attribute;
use crate::uninit::{as_uninit, assume_written, write_bytes};

use crate::config::TileChunking;
pub(crate) use crate::config::CHUNK_LOG2_RANGE;

/// The chunk sizes (log2) a writer choosing by itself tries, smallest first: 64 KiB, 256 KiB,
/// 1 MiB, 4 MiB. The largest bounds what a read of one cell decodes.
pub(crate) const AUTO_CHUNK_LOG2S: [u32; 4] = [16, 18, 20, 22];

/// How many of `AUTO_CHUNK_LOG2S` the first round of a choice tries (on the tile's first MiB);
/// each later round tries one more size, only when the previous round's largest won.
const AUTO_FIRST_ROUND: usize = 3;

/// The automatic choice "whole tiles": a tile that the largest of `AUTO_CHUNK_LOG2S` does not
/// chunk is filtered whole, a larger one is chunked at that size (which bounds what a read of one
/// cell decodes). Not a chunk size: no fragment records it.
pub(crate) const AUTO_WHOLE: u32 = u32::MAX;

/// A larger chunk is chosen only if the sample stored in chunks of the smaller one takes more
/// than this many times the best size (in tenths: 11 is 1.1x).
const AUTO_TOLERANCE_TENTHS: usize = 11;

/// One chunk of a chunked tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Stored (filtered) bytes of the chunk.
    pub stored: u64,
    /// xxh3-64 of the chunk's stored bytes.
    pub checksum: u64,
}

/// The chunks of one tile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TileChunks {
    /// Chunks hold `2^log2` unfiltered bytes (the last may hold fewer).
    pub log2: u32,
    /// The chunks, first to last (empty: the tile is filtered whole).
    pub list: Vec<Chunk>,
}

/// The chunks of a fragment's chunked tiles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkIndex {
    /// Per file, per tile: the tile's chunks (none: the tile is filtered whole).
    pub chunks: Vec<Vec<TileChunks>>,
}

impl ChunkIndex {
    /// The chunks of tile `tile` of file `file`, if it is chunked.
    pub fn of(&self, file: usize, tile: u64) -> Option<&TileChunks> {
        self.chunks.get(file)?.get(usize::try_from(tile).ok()?).filter(|c| !c.list.is_empty())
    }

    /// Every chunked tile: (file, tile, chunks).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, usize, &TileChunks)> {
        self.chunks.iter().enumerate().flat_map(|(f, tiles)| {
            tiles.iter().enumerate().filter(|(_, c)| !c.list.is_empty()).map(move |(t, c)| (f, t, c))
        })
    }
}

/// A chunked tile filtered: its stored bytes, its chunks and its checksum.
pub(crate) type EncodedTile = (Vec<u8>, TileChunks, u64);

/// Whether a tile of `unfiltered` bytes of a filtered file is chunked, with chunks of `2^log2`.
pub(crate) fn wants_chunks(unfiltered: u64, log2: u32) -> bool {
    unfiltered > 2u64 << log2
}

/// Whether a writer chunking as `chunking` says stores a tile of `unfiltered` bytes of a filtered
/// file in chunks.
pub(crate) fn chunks_tile(chunking: TileChunking, unfiltered: u64) -> bool {
    match chunking {
        TileChunking::Whole => false,
        TileChunking::Fixed(log2) => wants_chunks(unfiltered, log2),
        TileChunking::Auto => wants_chunks(unfiltered, AUTO_CHUNK_LOG2S[0]),
    }
}

/// The chunk size (log2) of a tile of `unfiltered` bytes of a filtered file for a writer whose
/// chunk size is `wanted`: the largest of `AUTO_CHUNK_LOG2S` up to `wanted` at which the tile is
/// chunked, `wanted` itself if it is none of them, or for `AUTO_WHOLE` the largest of them if it
/// chunks the tile; `None`: the tile is filtered whole.
pub(crate) fn fit_chunk_log2(unfiltered: u64, wanted: u32) -> Option<u32> {
    let [.., largest] = AUTO_CHUNK_LOG2S;
    if wanted == AUTO_WHOLE {
        return wants_chunks(unfiltered, largest).then_some(largest);
    }
    if !AUTO_CHUNK_LOG2S.contains(&wanted) {
        return wants_chunks(unfiltered, wanted).then_some(wanted);
    }
    AUTO_CHUNK_LOG2S.iter().rev().copied().find(|&l| l <= wanted && wants_chunks(unfiltered, l))
}

/// The chunk size (log2) to store a tile of `len` unfiltered bytes in, from the tile's first
/// bytes: `sample(n)` gives the first `n` (at most 4 MiB), in rounds. The first round filters
/// the first MiB in chunks of 64 KiB, 256 KiB and 1 MiB (those at which the tile is chunked) and,
/// when 1 MiB chunks do not chunk it, as one piece (the whole tile, `AUTO_WHOLE`). Each round
/// chooses the smallest candidate storing the sample within 10% of the best (chunks first,
/// smallest first: reads of a few cells decode least). When that is its largest chunk size,
/// data that compresses across larger distances may gain from larger pieces: the next round
/// filters the first `4x` bytes in chunks of that size and in chunks of the next (or, if the
/// tile is not chunked at it, as one piece: the whole tile), up to the largest of
/// `AUTO_CHUNK_LOG2S`. A round's pieces are filtered in parallel; its first piece of the smaller
/// size is the previous round's measure, not filtered again. `None`: the tile is too small to
/// be chunked.
///
/// # Errors
/// A filter failure.
pub(crate) fn choose_chunk_log2<'s>(
    filters: &FilterPipeline,
    elem_size: usize,
    len: u64,
    sample: impl Fn(usize) -> std::borrow::Cow<'s, [u8]>,
) -> Result<Option<u32>, FilterError> {
    let sizes = AUTO_CHUNK_LOG2S;
    let mut top = AUTO_FIRST_ROUND - 1;
    let mut tried: Vec<u32> = sizes[..=top].iter().copied().filter(|&l| wants_chunks(len, l)).collect();
    if tried.is_empty() {
        return Ok(None);
    }
    // The stored size of the first piece of `tried[0]`, when the previous round measured it.
    let mut known = None;
    loop {
        if !wants_chunks(len, sizes[top]) {
            tried.push(AUTO_WHOLE);
        }
        let data = sample(usize::try_from(len).unwrap_or(usize::MAX).min(1 << sizes[top]));
        let stored = stored_in_pieces(filters, elem_size, &data, &tried, known)?;
        let best = stored.iter().copied().min().unwrap_or(0);
        let pick = stored.iter().position(|&n| n * 10 <= best * AUTO_TOLERANCE_TENTHS).unwrap_or(0);
        if tried[pick] != sizes[top] || top + 1 == sizes.len() {
            return Ok(Some(tried[pick]));
        }
        known = Some(stored[pick]);
        top += 1;
        tried = std::iter::once(sizes[top - 1]).chain(Some(sizes[top]).filter(|&l| wants_chunks(len, l))).collect();
    }
}

/// The stored size of `data` filtered in pieces of each of `tried` (chunk sizes, log2, or
/// `AUTO_WHOLE`: one piece), every piece in parallel; `known`: the stored size of the first piece
/// of `tried[0]`, not filtered again.
fn stored_in_pieces(
    filters: &FilterPipeline,
    elem_size: usize,
    data: &[u8],
    tried: &[u32],
    known: Option<usize>,
) -> Result<Vec<usize>, FilterError> {
    let piece = |l: u32| if l == AUTO_WHOLE { data.len().max(1) } else { 1 << l };
    let skip = |i: usize| usize::from(i == 0 && known.is_some());
    let jobs: Vec<(usize, &[u8])> =
        tried.iter().enumerate().flat_map(|(i, &l)| data.chunks(piece(l)).skip(skip(i)).map(move |c| (i, c))).collect();
    let sizes: Vec<(usize, usize)> = jobs
        .par_iter()
        .map(|&(i, c)| Ok((i, filters.encode_slice(c, elem_size)?.len())))
        .collect::<Result<_, FilterError>>()?;
    let mut stored = vec![0usize; tried.len()];
    stored[0] = known.unwrap_or(0);
    sizes.iter().for_each(|&(i, n)| stored[i] += n);
    Ok(stored)
}

/// One file's chunk size while a writer chooses it (`sm.tile_chunk_size` auto): chosen from a
/// tile's sample, kept for the next `resample` unfiltered bytes of the file's tiles, then
/// chosen again (the data may change along the array).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct AutoChunkSize {
    /// The size (log2) chosen last and the bytes it still holds for.
    chosen: Option<(u32, u64)>,
}

impl AutoChunkSize {
    /// The state `(log2, bytes it still holds for)` another writer of the same file left
    /// ([`AutoChunkSize::state`]).
    pub(crate) fn resumed(state: Option<(u32, u64)>) -> Self {
        Self { chosen: state }
    }

    /// The size chosen last and the bytes it still holds for, if a choice was made.
    pub(crate) fn state(&self) -> Option<(u32, u64)> {
        self.chosen
    }

    /// The chunk size (log2) of the file's next tile, of `len` unfiltered bytes (`None`: filtered
    /// whole); `choose` samples the tile when a choice is due (see `choose_chunk_log2`).
    ///
    /// # Errors
    /// `choose`'s.
    pub(crate) fn next<E>(
        &mut self,
        len: u64,
        resample: u64,
        choose: impl FnOnce() -> Result<Option<u32>, E>,
    ) -> Result<Option<u32>, E> {
        let [smallest, .., largest] = AUTO_CHUNK_LOG2S;
        match fit_chunk_log2(len, largest) {
            // Too small to chunk: nothing to choose.
            None => Ok(None),
            Some(_) => {
                let (chosen, left) = match self.chosen {
                    Some((l, left)) if left > 0 => (l, left),
                    _ => (choose()?.unwrap_or(smallest), resample),
                };
                self.chosen = Some((chosen, left.saturating_sub(len)));
                Ok(fit_chunk_log2(len, chosen))
            }
        }
    }
}

/// Number of chunks of a tile of `unfiltered` bytes.
pub(crate) fn chunk_count(unfiltered: u64, log2: u32) -> u64 {
    unfiltered.div_ceil(1 << log2)
}

/// The largest stored size a chunked tile of `unfiltered` bytes can have: the pipeline's bound
/// for every chunk, summed (saturating).
pub(crate) fn max_chunked_len(filters: &FilterPipeline, unfiltered: u64, log2: u32) -> u64 {
    let (full, rest) = (unfiltered >> log2, unfiltered & ((1 << log2) - 1));
    let tail = if rest > 0 { filters.max_filtered_len(rest) } else { 0 };
    full.saturating_mul(filters.max_filtered_len(1 << log2)).saturating_add(tail)
}

/// Filters `data` chunk by chunk in parallel: the stored bytes, the chunks and the tile checksum.
///
/// # Errors
/// A filter failure.
#[cfg(test)]
pub(crate) fn encode_chunked(
    filters: &FilterPipeline,
    data: &[u8],
    elem_size: usize,
    log2: u32,
) -> Result<EncodedTile, FilterError> {
    Ok(encode_chunked_summarized(filters, data, elem_size, log2, None)?.0)
}

/// `encode_chunked` (tests), also summarizing the tile's values as attribute `attr` (a non-nullable
/// attribute of fixed-size cells; `None`: no summary) chunk by chunk, while each chunk is in
/// cache; the chunks' summaries merge in chunk order.
pub(crate) fn encode_chunked_summarized(
    filters: &FilterPipeline,
    data: &[u8],
    elem_size: usize,
    log2: u32,
    attr: Option<&Attribute>,
) -> Result<(EncodedTile, Option<TileSummary>), FilterError> {
    let parts: Vec<(Vec<u8>, Option<TileSummary>)> = data
        .par_chunks(1 << log2)
        .map(|c| Ok((filters.encode_slice(c, elem_size)?, attr.map(|a| summarize_chunk(a, c)))))
        .collect::<Result<_, FilterError>>()?;
    let summary = merge_summaries(parts.iter().map(|p| p.1));
    let stored: Vec<Vec<u8>> = parts.into_iter().map(|p| p.0).collect();
    Ok((assemble(&stored, log2), summary))
}

/// The summary of a chunk of whole cells of a non-nullable attribute.
fn summarize_chunk(attr: &Attribute, chunk: &[u8]) -> TileSummary {
    summarize(attr, chunk, None, (chunk.len() / attr.cell_size().max(1)) as u64)
}

/// Summaries of consecutive pieces of a tile merged in order (`None` if any is missing).
fn merge_summaries(parts: impl Iterator<Item = Option<TileSummary>>) -> Option<TileSummary> {
    parts.reduce(|a, b| Some(a?.merge(b?))).flatten()
}

/// A tile of a fixed-size file whose unfiltered bytes lie in a caller's buffer as runs (a tile's
/// rows inside a larger array): filtered chunk by chunk, each chunk gathered into a small buffer
/// that stays in cache, so the tile is never assembled whole.
pub(crate) struct TileRuns<'a> {
    pub elem_size: usize,
    src: &'a [u8],
    /// `(offset in src, offset in the tile, length)`, sorted by tile offset, covering the tile.
    runs: Vec<(usize, usize, usize)>,
    len: usize,
}

impl<'a> TileRuns<'a> {
    /// The tile whose bytes are `runs` of `src` (`(offset in src, offset in the tile, length)`
    /// in any order); `None` unless the runs lie inside `src` and cover the tile's bytes
    /// `[0, len)` exactly once.
    pub(crate) fn new(elem_size: usize, src: &'a [u8], mut runs: Vec<(usize, usize, usize)>) -> Option<Self> {
        runs.sort_unstable_by_key(|r| r.1);
        let mut len = 0usize;
        for &(s, d, n) in &runs {
            if d != len || s.checked_add(n)? > src.len() {
                return None;
            }
            len = len.checked_add(n)?;
        }
        Some(Self { elem_size, src, runs, len })
    }

    /// Unfiltered bytes of the tile.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies the tile's bytes `[lo, lo + out.len())` into `out` (inside the tile).
    pub(crate) fn gather(&self, lo: usize, out: &mut [u8]) {
        let hi = lo + out.len();
        let mut i = self.runs.partition_point(|&(_, d, n)| d + n <= lo);
        let mut at = lo;
        while at < hi {
            let (s, d, n) = self.runs[i];
            let skip = at - d;
            let take = (n - skip).min(hi - at);
            out[at - lo..at - lo + take].copy_from_slice(&self.src[s + skip..s + skip + take]);
            at += take;
            i += 1;
        }
    }
}

/// `encode_chunked` (tests) of tiles given as runs, each with its chunk size (log2), every chunk of
/// every tile in parallel: per tile, the stored bytes, the chunks and the tile checksum, exactly
/// as `encode_chunked` of the assembled tile gives them.
///
/// # Errors
/// A filter failure.
pub(crate) fn encode_chunked_runs(tiles: &[ChunkedRuns<'_, '_>]) -> Result<Vec<SummarizedTile>, FilterError> {
    let jobs: Vec<(usize, usize)> = tiles
        .iter()
        .enumerate()
        .flat_map(|(t, (r, _, log2, _))| (0..r.len.div_ceil(1 << log2)).map(move |j| (t, j << log2)))
        .collect();
    let parts: Vec<(Vec<u8>, Option<TileSummary>)> = jobs
        .par_iter()
        .map_init(Vec::new, |scratch: &mut Vec<u8>, &(t, lo)| {
            let (r, filters, log2, attr) = tiles[t];
            scratch.resize((1usize << log2).min(r.len - lo), 0);
            r.gather(lo, scratch);
            Ok((filters.encode_slice(scratch, r.elem_size)?, attr.map(|a| summarize_chunk(a, scratch))))
        })
        .collect::<Result<_, FilterError>>()?;
    let mut out = Vec::with_capacity(tiles.len());
    let mut parts = parts.into_iter();
    for &(r, _, log2, _) in tiles {
        let n = r.len.div_ceil(1 << log2);
        let (mine, sums): (Vec<Vec<u8>>, Vec<Option<TileSummary>>) = parts.by_ref().take(n).unzip();
        out.push((assemble(&mine, log2), merge_summaries(sums.into_iter())));
    }
    Ok(out)
}

/// A tile given as runs, the pipeline that filters it, its chunk size (log2), and the attribute
/// to summarize it as, if any.
pub(crate) type ChunkedRuns<'t, 'a> = (&'t TileRuns<'a>, &'t FilterPipeline, u32, Option<&'t Attribute>);
/// A filtered tile and its summary, if asked for.
pub(crate) type SummarizedTile = (EncodedTile, Option<TileSummary>);

/// Filtered chunks `parts` of `2^log2` bytes of one tile, back to back: the stored bytes, the
/// chunks and the tile checksum.
fn assemble(parts: &[Vec<u8>], log2: u32) -> EncodedTile {
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    let mut list = Vec::with_capacity(parts.len());
    for p in parts {
        list.push(Chunk { stored: p.len() as u64, checksum: xxh3_64(p) });
        out.extend_from_slice(p);
    }
    let sums: Vec<u64> = list.iter().map(|c| c.checksum).collect();
    (out, TileChunks { log2, list }, checksum_of_sums(&sums))
}

/// Where chunk `j` of a tile with `chunks` starts in the tile's stored bytes, for every `j`
/// (and the end, last); `None` on overflow.
pub(crate) fn stored_offsets(chunks: &[Chunk]) -> Option<Vec<u64>> {
    let mut at = 0u64;
    let mut out = Vec::with_capacity(chunks.len() + 1);
    out.push(0);
    for c in chunks {
        at = at.checked_add(c.stored)?;
        out.push(at);
    }
    Some(out)
}

/// Largest chunk decoded through the per-thread buffer, which outlives the read: the largest
/// automatic chunk size (larger ones, of fixed chunk sizes, get a buffer of their own, freed
/// after the chunk).
const SCRATCH_KEPT: usize = 1 << AUTO_CHUNK_LOG2S[AUTO_CHUNK_LOG2S.len() - 1];

/// Chunks up to this size are decoded outside the memory budget (`sm.memory_budget`): a
/// per-thread buffer of this size is part of the engine's fixed cost. Larger ones count, whether
/// the per-thread buffer grows for them or they get a buffer of their own.
const SCRATCH_UNCOUNTED: u64 = 1 << 20;

/// The bytes [`ChunkedTile::decode_scattered`] may allocate to decode `chunks` chunks of
/// `2^log2` bytes on `threads` threads, beyond the per-thread buffers of `SCRATCH_UNCOUNTED`
/// bytes: a buffer of the chunk's size for each chunk in flight larger than that.
pub(crate) fn scattered_decode_bytes(log2: u32, chunks: u64, threads: usize) -> u64 {
    let size = 1u64.checked_shl(log2).unwrap_or(u64::MAX);
    if size <= SCRATCH_UNCOUNTED {
        return 0;
    }
    chunks.min(threads as u64).saturating_mul(size)
}

thread_local! {
    /// Per thread, the buffer a chunk is decoded into when no one piece takes it whole.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Pieces of one chunk to fill: (offset in the chunk, bytes).
type Pieces<'b> = Vec<(usize, &'b mut [MaybeUninit<u8>])>;

/// A chunk that failed: its number and what is wrong.
pub(crate) type ChunkError = (usize, String);

/// A chunked tile as a reader sees it: its pipeline, element width, chunk size, unfiltered size
/// and chunks.
pub(crate) struct ChunkedTile<'a> {
    pub filters: &'a FilterPipeline,
    pub elem_size: usize,
    pub log2: u32,
    pub unfiltered: u64,
    pub chunks: &'a [Chunk],
}

impl<'a> ChunkedTile<'a> {
    /// Tile `chunks` of the file `spec`, of `unfiltered` bytes.
    pub(crate) fn of(spec: &'a super::FileSpec, unfiltered: u64, chunks: &'a TileChunks) -> Self {
        let (log2, chunks) = (chunks.log2, chunks.list.as_slice());
        Self { filters: &spec.filters, elem_size: spec.elem_size, log2, unfiltered, chunks }
    }

    /// Verifies and unfilters chunks `range`, whose stored bytes are `raw` (back to back), in
    /// parallel: their unfiltered bytes, back to back, in a buffer that is never zeroed (each
    /// chunk is decoded straight into its place).
    ///
    /// # Errors
    /// A chunk whose checksum differs or that does not decode to its size, or a buffer that
    /// cannot be allocated (reported as chunk `range.start`).
    #[allow(unsafe_code)]
    pub(crate) fn decode(&self, range: std::ops::Range<usize>, raw: &[u8]) -> Result<Vec<u8>, ChunkError> {
        let (first, log2) = (range.start, self.log2);
        let chunks = self.chunks.get(range.clone()).ok_or((first, format!("no chunks {range:?}")))?;
        let starts = stored_offsets(chunks).ok_or((first, "chunk sizes overflow".to_owned()))?;
        if starts.last().copied() != Some(raw.len() as u64) {
            return Err((first, format!("chunks hold {:?} stored bytes, {} were read", starts.last(), raw.len())));
        }
        let at = |j: usize| ((j as u64) << log2).min(self.unfiltered);
        let len = at(range.end).saturating_sub(at(first));
        let len = usize::try_from(len).map_err(|_| (first, format!("{len} bytes do not fit in memory")))?;
        let mut out: Vec<u8> = Vec::new();
        out.try_reserve_exact(len).map_err(|e| (first, format!("cannot allocate {len} bytes: {e}")))?;
        let spare = &mut out.spare_capacity_mut()[..len];
        // Chunk `first + i` goes to piece `i` of `spare`: there must be one piece per chunk (only
        // the tile's last chunk may be short), and `decode_into` then writes every byte of each.
        if len.div_ceil(1 << log2) != chunks.len() {
            return Err((first, format!("chunks {range:?} do not make {len} bytes")));
        }
        spare.par_chunks_mut(1 << log2).zip(chunks.par_iter().zip(starts.par_windows(2))).enumerate().try_for_each(
            |(i, (dst, (c, w)))| {
                let bytes = &raw[w[0] as usize..w[1] as usize];
                let sum = xxh3_64(bytes);
                if sum != c.checksum {
                    return Err((first + i, checksum_mismatch(c.checksum, sum)));
                }
                self.filters.decode_into(bytes, self.elem_size, dst).map_err(|e| (first + i, e.to_string()))
            },
        )?;
        // SAFETY: every one of the first `len` bytes was written by `decode_into` (above), and the
        // capacity is at least `len`.
        unsafe { out.set_len(len) };
        Ok(out)
    }

    /// Verifies and unfilters the chunks holding `pieces`, each `(offset in the tile, bytes to
    /// fill)` (disjoint, in any order), in parallel, and fills the pieces. `stored` holds runs
    /// of the tile's stored chunks, `(first chunk, their stored bytes back to back)`, that must
    /// hold every chunk a piece needs; no other chunk is decoded. A chunk that one piece covers
    /// exactly is decoded straight into it (a whole tile read into its place in a result), any
    /// other into a per-thread buffer that stays in cache and is copied out: no tile-sized
    /// buffer is ever made.
    ///
    /// # Errors
    /// A piece outside the tile, a needed chunk `stored` does not hold, a chunk whose checksum
    /// differs or that does not decode to its size.
    pub(crate) fn decode_scattered(
        &self,
        stored: &[(usize, &[u8])],
        pieces: Vec<(u64, &mut [MaybeUninit<u8>])>,
    ) -> Result<(), ChunkError> {
        let log2 = self.log2;
        let starts = stored_offsets(self.chunks).ok_or((0, "chunk sizes overflow".to_owned()))?;
        // The stored bytes of chunk `j`, from the run that holds it.
        let bytes_of = |j: usize| -> Result<&[u8], ChunkError> {
            let r = stored.partition_point(|r| r.0 <= j).checked_sub(1).map(|r| stored[r]);
            let held = r.and_then(|(first, bytes)| {
                let (lo, hi) = (starts.get(j)? - starts[first], starts.get(j + 1)? - starts[first]);
                bytes.get(usize::try_from(lo).ok()?..usize::try_from(hi).ok()?)
            });
            held.ok_or_else(|| (j, "the chunk's stored bytes were not read".to_owned()))
        };
        // Pieces cut at chunk boundaries, grouped by chunk: (chunk, [(offset in the chunk, bytes)]).
        let mut cut: Vec<(usize, usize, &mut [MaybeUninit<u8>])> = Vec::new();
        for (mut at, mut rest) in pieces {
            if at.checked_add(rest.len() as u64).is_none_or(|end| end > self.unfiltered) {
                return Err((0, format!("bytes {at}+{} are outside the tile of {}", rest.len(), self.unfiltered)));
            }
            while !rest.is_empty() {
                let j = at >> log2;
                let within = at - (j << log2);
                let (head, tail) = rest.split_at_mut(((1u64 << log2) - within).min(rest.len() as u64) as usize);
                at += head.len() as u64;
                cut.push((j as usize, within as usize, head));
                rest = tail;
            }
        }
        cut.sort_unstable_by_key(|c| (c.0, c.1));
        let mut groups: Vec<(usize, Pieces<'_>)> = Vec::new();
        for (j, within, bytes) in cut {
            match groups.last_mut() {
                Some(g) if g.0 == j => g.1.push((within, bytes)),
                _ => groups.push((j, vec![(within, bytes)])),
            }
        }
        groups.into_par_iter().try_for_each(|(j, mut parts)| {
            let (c, bytes) = (self.chunks[j], bytes_of(j)?);
            let sum = xxh3_64(bytes);
            if sum != c.checksum {
                return Err((j, checksum_mismatch(c.checksum, sum)));
            }
            let len = (1u64 << log2).min(self.unfiltered - ((j as u64) << log2)) as usize;
            let decode = |out: &mut [MaybeUninit<u8>]| {
                self.filters.decode_into(bytes, self.elem_size, out).map_err(|e| (j, e.to_string()))
            };
            match parts.as_mut_slice() {
                [(0, whole)] if whole.len() == len => decode(whole),
                _ => {
                    let copy_out = |decoded: &[u8]| {
                        for (within, out) in parts {
                            let n = out.len();
                            write_bytes(out, &decoded[within..within + n]);
                        }
                    };
                    if len > SCRATCH_KEPT {
                        // A buffer of its own, not zeroed: the decode writes every byte of it.
                        let mut own = Box::<[u8]>::new_uninit_slice(len);
                        decode(&mut own)?;
                        // SAFETY: `decode_into` succeeded, so it wrote all `len` bytes.
                        #[allow(unsafe_code)]
                        copy_out(unsafe { assume_written(&own) });
                        return Ok(());
                    }
                    // Zeroed once per thread: the buffer outlives the read.
                    SCRATCH.with_borrow_mut(|scratch| {
                        if scratch.len() < len {
                            scratch.resize(len, 0);
                        }
                        decode(as_uninit(&mut scratch[..len]))?;
                        copy_out(&scratch[..len]);
                        Ok(())
                    })
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Filter;
    use proptest::prelude::*;

    /// `len` bytes of xorshift noise from `seed`.
    fn noise_bytes(mut x: u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    fn pipelines() -> Vec<FilterPipeline> {
        vec![
            FilterPipeline::new(vec![Filter::Zstd { level: 3 }]),
            FilterPipeline::new(vec![Filter::Delta, Filter::ByteShuffle, Filter::Gzip { level: 6 }]),
            FilterPipeline::new(vec![Filter::Rle, Filter::Lz4]),
        ]
    }

    proptest! {
        /// Any run of chunks decodes to the same bytes as the tile's slice, and every stored size
        /// is within the bound readers check.
        #[test]
        fn chunks_decode_to_their_slice(len in 0usize..20_000, from in 0usize..8, count in 1usize..8, p in 0usize..3) {
            let data: Vec<u8> = (0..len).map(|i| ((i / 7) % 251) as u8).collect();
            let filters = &pipelines()[p];
            let (stored, chunks, _) = encode_chunked(filters, &data, 4, 12).unwrap();
            let chunks = chunks.list;
            prop_assert_eq!(chunks.len() as u64, chunk_count(len as u64, 12));
            prop_assert!(stored.len() as u64 <= max_chunked_len(filters, len as u64, 12));
            let starts = stored_offsets(&chunks).unwrap();
            let from = from.min(chunks.len());
            let to = (from + count).min(chunks.len());
            let raw = &stored[starts[from] as usize..starts[to] as usize];
            let lo = from << 12;
            let hi = (to << 12).min(len);
            let tile = ChunkedTile { filters, elem_size: 4, log2: 12, unfiltered: len as u64, chunks: &chunks };
            let out = tile.decode(from..to, raw).unwrap();
            prop_assert_eq!(out.len(), hi.saturating_sub(lo));
            prop_assert_eq!(&out[..], &data[lo.min(len)..hi]);
        }
    }

    proptest! {
        /// Tiles given as runs of a larger row-major buffer (a box of rows inside it, runs in any
        /// order) store exactly what `encode_chunked` of the assembled tiles stores.
        #[test]
        fn runs_encode_as_the_assembled_tile(
            tiles in prop::collection::vec((1usize..40, 1usize..300, 0usize..50, 0usize..3, any::<bool>()), 1..4),
            log2 in 12u32..14,
        ) {
            let src: Vec<u8> = (0..200_000u32).map(|i| ((i / 5) % 241) as u8).collect();
            let pipes = pipelines();
            let mut runs = Vec::new();
            let mut assembled = Vec::new();
            for &(rows, width, at, p, reversed) in &tiles {
                // `rows` rows of `width` bytes, 400 bytes apart, from byte `at * 97` of `src`.
                let mut r: Vec<(usize, usize, usize)> = (0..rows).map(|i| (at * 97 + i * 400, i * width, width)).collect();
                let tile: Vec<u8> = r.iter().flat_map(|&(s, _, n)| src[s..s + n].to_vec()).collect();
                if reversed {
                    r.reverse();
                }
                runs.push((TileRuns::new(4, &src, r).unwrap(), p));
                assembled.push((tile, p));
            }
            let attr = Attribute::new("a", crate::schema::Datatype::Int32);
            let refs: Vec<ChunkedRuns<'_, '_>> = runs.iter().map(|(r, p)| (r, &pipes[*p], log2, Some(&attr))).collect();
            let got = encode_chunked_runs(&refs).unwrap();
            for ((tile, p), g) in assembled.iter().zip(&got) {
                prop_assert_eq!(&g.0, &encode_chunked(&pipes[*p], tile, 4, log2).unwrap());
                // The chunks' summaries merge into the whole tile's.
                prop_assert_eq!(g.1, Some(summarize(&attr, tile, None, (tile.len() / 4) as u64)));
            }
        }
    }

    proptest! {
        /// Pieces of a tile filled from its chunks (straight, or through the per-thread buffer)
        /// hold exactly the tile's bytes, whatever the pieces' sizes and order.
        #[test]
        fn scattered_pieces_hold_the_tile_bytes(
            len in 8193usize..40_000,
            cuts in prop::collection::vec(0usize..40_000, 0..12),
            p in 0usize..3,
            reversed in any::<bool>(),
        ) {
            let data: Vec<u8> = (0..len).map(|i| ((i / 3) % 239) as u8).collect();
            let filters = &pipelines()[p];
            let (stored, chunks, _) = encode_chunked(filters, &data, 4, 12).unwrap();
            let tile = ChunkedTile { filters, elem_size: 4, log2: 12, unfiltered: len as u64, chunks: &chunks.list };
            let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c % len).chain([0, len]).collect();
            bounds.sort_unstable();
            bounds.dedup();
            let mut out = vec![0xAAu8; len];
            let mut pieces: Vec<(u64, &mut [MaybeUninit<u8>])> = Vec::new();
            let mut rest = as_uninit(out.as_mut_slice());
            for w in bounds.windows(2) {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
                pieces.push((w[0] as u64, head));
                rest = tail;
            }
            if reversed {
                pieces.reverse();
            }
            tile.decode_scattered(&[(0, &stored)], pieces).unwrap();
            prop_assert_eq!(out, data);
        }
    }

    #[test]
    fn scattered_pieces_are_checked() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        let filters = &pipelines()[0];
        let (mut stored, chunks, _) = encode_chunked(filters, &data, 1, 12).unwrap();
        let tile = ChunkedTile { filters, elem_size: 1, log2: 12, unfiltered: 50_000, chunks: &chunks.list };
        let mut out = [0u8; 100];
        let (_, what) = tile.decode_scattered(&[(0, &stored)], vec![(49_950, as_uninit(&mut out[..]))]).unwrap_err();
        assert!(what.contains("outside the tile"), "{what}");
        let starts = stored_offsets(&chunks.list).unwrap();
        let (s5, s7, s9) = (starts[5] as usize, starts[7] as usize, starts[9] as usize);
        // Only chunks 5 and 6, then 7 and 8, were read: a piece in chunk 4 or 9 is refused.
        let runs = [(5, &stored[s5..s7]), (7, &stored[s7..s9])];
        for at in [4 * 4096, 9 * 4096 - 50] {
            let (j, what) = tile.decode_scattered(&runs, vec![(at, as_uninit(&mut out[..]))]).unwrap_err();
            assert!(what.contains("not read") && (j == 4 || j == 9), "{j} {what}");
        }
        tile.decode_scattered(&runs, vec![(7 * 4096 - 50, as_uninit(&mut out[..]))]).unwrap();
        assert_eq!(&out[..], &data[7 * 4096 - 50..7 * 4096 + 50]);
        stored[s7 + 2] ^= 1;
        let (j, what) =
            tile.decode_scattered(&[(0, &stored)], vec![(7 * 4096 + 10, as_uninit(&mut out[..]))]).unwrap_err();
        assert_eq!(j, 7);
        assert!(what.contains("checksum mismatch"), "{what}");
        assert!(
            tile.decode_scattered(&[(0, &stored)], vec![(6 * 4096, as_uninit(&mut out[..]))]).is_ok(),
            "chunk 7 is not read"
        );
    }

    #[test]
    fn runs_must_cover_the_tile_once_inside_the_buffer() {
        let src = [0u8; 100];
        assert!(TileRuns::new(1, &src, vec![(50, 10, 10), (0, 0, 10)]).is_some());
        assert!(TileRuns::new(1, &src, vec![(0, 0, 10), (50, 11, 10)]).is_none(), "a gap");
        assert!(TileRuns::new(1, &src, vec![(0, 0, 10), (50, 5, 10)]).is_none(), "an overlap");
        assert!(TileRuns::new(1, &src, vec![(0, 0, 10), (95, 10, 10)]).is_none(), "past the buffer");
    }

    #[test]
    fn a_flipped_byte_names_its_chunk() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        let filters = &pipelines()[0];
        let (mut stored, chunks, _) = encode_chunked(filters, &data, 1, 12).unwrap();
        let chunks = chunks.list;
        let starts = stored_offsets(&chunks).unwrap();
        stored[starts[5] as usize + 3] ^= 0x10;
        let tile = ChunkedTile { filters, elem_size: 1, log2: 12, unfiltered: data.len() as u64, chunks: &chunks };
        let (j, what) = tile.decode(0..chunks.len(), &stored).unwrap_err();
        assert_eq!(j, 5);
        assert!(what.contains("checksum mismatch"), "{what}");
        assert!(wants_chunks(8193, 12) && !wants_chunks(8192, 12));
    }

    /// The choice holds for `resample` bytes of tiles, then the next tile large enough is
    /// sampled again; tiles too small to choose for neither sample nor spend it.
    #[test]
    fn a_choice_holds_for_its_bytes_then_is_made_again() {
        const M: u64 = 1 << 20;
        let mut auto = AutoChunkSize::default();
        let mut calls = 0;
        let mut next = |len: u64, pick: u32| {
            auto.next::<()>(len, 10 * M, || {
                calls += 1;
                Ok(Some(pick))
            })
            .unwrap()
        };
        assert_eq!(next(4 * M, 20), Some(20), "sampled");
        assert_eq!(next(100_000, 16), None, "too small to chunk");
        assert_eq!(next(300_000, 16), Some(16), "only 64 KiB chunks it");
        assert_eq!(next(M, 16), Some(18), "the choice, fitted to the tile");
        assert_eq!(next(5 * M, 16), Some(20), "10 MiB chosen for");
        assert_eq!(next(4 * M, 16), Some(16), "sampled again");
        assert_eq!(next(4 * M, 20), Some(16));
        assert_eq!(calls, 2);
    }

    #[test]
    fn a_tile_fits_the_largest_chunk_size_it_is_chunked_at() {
        const K: u64 = 1024;
        assert_eq!(fit_chunk_log2(128 * K, 20), None, "two chunks of 64 KiB: whole");
        assert_eq!(fit_chunk_log2(128 * K + 1, 20), Some(16));
        assert_eq!(fit_chunk_log2(512 * K + 1, 20), Some(18));
        assert_eq!(fit_chunk_log2(2048 * K + 1, 20), Some(20));
        assert_eq!(fit_chunk_log2(2048 * K + 1, 18), Some(18), "never above the wanted size");
        assert_eq!(fit_chunk_log2(9000, 12), Some(12), "a fixed size outside the automatic ones");
        assert_eq!(fit_chunk_log2(8192, 12), None);
    }

    /// Smooth data that compresses far better in large chunks gets them; noise, which stores
    /// the same at any chunk size, keeps the smallest (reads of a few cells decode least).
    #[test]
    fn the_chosen_chunk_size_is_the_smallest_that_stores_about_as_well() {
        let zstd = &pipelines()[0];
        let len = 8u64 << 20;
        // A slow ramp of f64: each 64 KiB chunk costs zstd a fixed overhead it is mostly made of.
        let smooth: Vec<u8> = (0..len / 8).flat_map(|i| ((i / 4096) as f64).to_le_bytes()).collect();
        let asked = std::cell::Cell::new(0);
        let sample = |n: usize| {
            asked.set(asked.get().max(n));
            std::borrow::Cow::Borrowed(&smooth[..n])
        };
        assert_eq!(choose_chunk_log2(zstd, 8, len, sample).unwrap(), Some(20));
        assert_eq!(asked.get(), 4 << 20, "1 MiB won the first round: 1 MiB against 4 MiB pieces");
        let noise = noise_bytes(0x9e37_79b9_7f4a_7c15, len as usize);
        asked.set(0);
        let sample = |n: usize| {
            asked.set(asked.get().max(n));
            std::borrow::Cow::Borrowed(&noise[..n])
        };
        assert_eq!(choose_chunk_log2(zstd, 8, len, sample).unwrap(), Some(16));
        assert_eq!(asked.get(), 1 << 20, "64 KiB won the first round: no second");
        let sample = |n: usize| std::borrow::Cow::Borrowed(&smooth[..n]);
        assert_eq!(
            choose_chunk_log2(zstd, 8, 1 << 20, sample).unwrap(),
            Some(AUTO_WHOLE),
            "1 MiB: 64, 256 KiB or whole"
        );
        let sample = |n: usize| std::borrow::Cow::Borrowed(&noise[..n]);
        assert_eq!(choose_chunk_log2(zstd, 8, 1 << 20, sample).unwrap(), Some(16));
        let never = |_: usize| -> std::borrow::Cow<'static, [u8]> { unreachable!("no chunks: no sample") };
        assert_eq!(choose_chunk_log2(zstd, 8, 100 << 10, never).unwrap(), None);
    }

    /// A tile that only the smallest size chunks is stored whole when chunks of it cost more
    /// than 10% over the whole (SS-DB's 500 KB image tiles took 28% more disk in 64 KiB
    /// chunks), and in chunks when they cost about the same. The sample is the whole tile.
    #[test]
    fn a_tile_only_the_smallest_size_chunks_is_stored_whole_when_chunks_cost_more() {
        let zstd = &pipelines()[0];
        let len = 500usize << 10;
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut noise = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        };
        // A 40 KiB random block repeated: zstd stores it once in one piece, once per 64 KiB chunk.
        let block: Vec<u8> = (0..40 << 10).map(|_| noise()).collect();
        let repeated: Vec<u8> = block.iter().copied().cycle().take(len).collect();
        let asked = std::cell::Cell::new(0);
        let sample = |n: usize| {
            asked.set(n);
            std::borrow::Cow::Borrowed(&repeated[..n])
        };
        assert_eq!(choose_chunk_log2(zstd, 8, len as u64, sample).unwrap(), Some(AUTO_WHOLE));
        assert_eq!(asked.get(), len, "the whole tile is the sample");
        let noise: Vec<u8> = (0..len).map(|_| noise()).collect();
        let sample = |n: usize| std::borrow::Cow::Borrowed(&noise[..n]);
        assert_eq!(choose_chunk_log2(zstd, 8, len as u64, sample).unwrap(), Some(16));
        // Whole: such a tile is filtered whole, a tile beyond two chunks of 4 MiB in 4 MiB chunks.
        assert_eq!(fit_chunk_log2(len as u64, AUTO_WHOLE), None);
        assert_eq!(fit_chunk_log2(8 << 20, AUTO_WHOLE), None);
        assert_eq!(fit_chunk_log2((8 << 20) + 1, AUTO_WHOLE), Some(22));
    }

    /// Data whose content every chunk restates (a random block of 300 KiB, repeated) stores once
    /// per piece: 1 MiB pieces beat smaller ones, 4 MiB pieces beat 1 MiB: a tile beyond two
    /// 4 MiB chunks gets 4 MiB chunks, a smaller one (over 2 MiB) stays whole. The sample never
    /// exceeds 4 MiB.
    #[test]
    fn data_restated_in_every_mebibyte_gets_larger_pieces() {
        let zstd = &pipelines()[0];
        let block = noise_bytes(0x0123_4567_89ab_cdef, 300 << 10);
        let len = 16usize << 20;
        let repeated: Vec<u8> = block.iter().copied().cycle().take(len).collect();
        let asked = std::cell::RefCell::new(Vec::new());
        let sample = |n: usize| {
            asked.borrow_mut().push(n);
            std::borrow::Cow::Borrowed(&repeated[..n])
        };
        assert_eq!(choose_chunk_log2(zstd, 1, len as u64, sample).unwrap(), Some(22));
        assert_eq!(*asked.borrow(), [1 << 20, 4 << 20], "two rounds");
        let sample = |n: usize| std::borrow::Cow::Borrowed(&repeated[..n]);
        assert_eq!(choose_chunk_log2(zstd, 1, 6 << 20, sample).unwrap(), Some(AUTO_WHOLE));
        assert_eq!(fit_chunk_log2(6 << 20, AUTO_WHOLE), None, "a 6 MiB tile filtered whole");
        // The choice applies to later tiles of the file at the largest size that chunks them.
        assert_eq!(fit_chunk_log2(6 << 20, 22), Some(20));
        assert_eq!(fit_chunk_log2(64 << 20, 22), Some(22));
    }

    /// Counting the first MiB of the second round from the first changes nothing: the choice is
    /// the one of measuring every piece.
    #[test]
    fn a_known_first_piece_counts_as_measured() {
        let zstd = &pipelines()[0];
        let data: Vec<u8> = (0..3u32 << 20).map(|i| (i / 3000 % 251) as u8).collect();
        let all = stored_in_pieces(zstd, 1, &data, &[20, AUTO_WHOLE], None).unwrap();
        let first = zstd.encode_slice(&data[..1 << 20], 1).unwrap().len();
        assert_eq!(stored_in_pieces(zstd, 1, &data, &[20, AUTO_WHOLE], Some(first)).unwrap(), all);
    }
}
