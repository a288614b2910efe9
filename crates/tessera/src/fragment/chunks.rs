//! Chunked tiles (format version 4). A tile of a filtered file whose unfiltered size exceeds
//! two chunks of `2^log2` bytes is filtered chunk by chunk: chunk `j` is unfiltered bytes
//! `[j * 2^log2, min((j + 1) * 2^log2, N))`, each chunk goes through the whole filter pipeline
//! by itself, and the results are stored back to back. The fragment metadata records every
//! chunk's stored size and checksum (the xxh3-64 of its stored bytes); the tile's checksum is the
//! xxh3-64 of its chunk checksums, as for block checksums. Chunks are filtered and unfiltered
//! in parallel, and a read that needs a few cells of a large tile reads, verifies and decodes
//! only the chunks holding them.

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use super::blocks::checksum_of_sums;
use crate::filter::{FilterError, FilterPipeline};

/// Chunks of 64 KiB unless `sm.tile_chunk_size` says otherwise.
pub(crate) const DEFAULT_CHUNK_LOG2: u32 = 16;
pub(crate) use crate::config::CHUNK_LOG2_RANGE;

/// One chunk of a chunked tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Stored (filtered) bytes of the chunk.
    pub stored: u64,
    /// xxh3-64 of the chunk's stored bytes.
    pub checksum: u64,
}

/// The chunks of a fragment's chunked tiles.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChunkIndex {
    /// Chunks hold `2^log2` unfiltered bytes (the last of a tile may hold fewer).
    pub log2: u32,
    /// Per file, per tile: the tile's chunks (empty: the tile is filtered whole).
    pub chunks: Vec<Vec<Vec<Chunk>>>,
}

impl ChunkIndex {
    /// The chunks of tile `tile` of file `file`, if it is chunked.
    pub fn of(&self, file: usize, tile: u64) -> Option<&[Chunk]> {
        self.chunks.get(file)?.get(usize::try_from(tile).ok()?).filter(|c| !c.is_empty()).map(Vec::as_slice)
    }

    /// Every chunked tile: (file, tile, chunks).
    pub(crate) fn entries(&self) -> impl Iterator<Item = (usize, usize, &Vec<Chunk>)> {
        self.chunks
            .iter()
            .enumerate()
            .flat_map(|(f, tiles)| tiles.iter().enumerate().filter(|(_, c)| !c.is_empty()).map(move |(t, c)| (f, t, c)))
    }
}

/// A chunked tile filtered: its stored bytes, its chunks and its checksum.
pub(crate) type EncodedTile = (Vec<u8>, Vec<Chunk>, u64);

/// Whether a tile of `unfiltered` bytes of a filtered file is chunked, with chunks of `2^log2`.
pub(crate) fn wants_chunks(unfiltered: u64, log2: u32) -> bool {
    unfiltered > 2u64 << log2
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
pub(crate) fn encode_chunked(
    filters: &FilterPipeline,
    data: &[u8],
    elem_size: usize,
    log2: u32,
) -> Result<EncodedTile, FilterError> {
    let parts: Vec<Vec<u8>> =
        data.par_chunks(1 << log2).map(|c| filters.encode_slice(c, elem_size)).collect::<Result<_, _>>()?;
    Ok(assemble(&parts))
}

/// A tile of a fixed-size file whose unfiltered bytes lie in a caller's buffer as runs (a tile's
/// rows inside a larger array): filtered chunk by chunk, each chunk gathered into a small buffer
/// that stays in cache, so the tile is never assembled whole.
pub(crate) struct TileRuns<'a> {
    pub filters: &'a FilterPipeline,
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
    pub(crate) fn new(
        filters: &'a FilterPipeline,
        elem_size: usize,
        src: &'a [u8],
        mut runs: Vec<(usize, usize, usize)>,
    ) -> Option<Self> {
        runs.sort_unstable_by_key(|r| r.1);
        let mut len = 0usize;
        for &(s, d, n) in &runs {
            if d != len || s.checked_add(n)? > src.len() {
                return None;
            }
            len = len.checked_add(n)?;
        }
        Some(Self { filters, elem_size, src, runs, len })
    }

    /// Unfiltered bytes of the tile.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies the tile's bytes `[lo, lo + out.len())` into `out` (inside the tile).
    fn gather(&self, lo: usize, out: &mut [u8]) {
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

/// [`encode_chunked`] of tiles given as runs, every chunk of every tile in parallel: per tile,
/// the stored bytes, the chunks and the tile checksum, exactly as `encode_chunked` of the
/// assembled tile gives them.
///
/// # Errors
/// A filter failure.
pub(crate) fn encode_chunked_runs(tiles: &[&TileRuns<'_>], log2: u32) -> Result<Vec<EncodedTile>, FilterError> {
    let size = 1usize << log2;
    let jobs: Vec<(usize, usize)> =
        tiles.iter().enumerate().flat_map(|(t, r)| (0..r.len.div_ceil(size)).map(move |j| (t, j * size))).collect();
    let parts: Vec<Vec<u8>> = jobs
        .par_iter()
        .map_init(Vec::new, |scratch: &mut Vec<u8>, &(t, lo)| {
            let r = &tiles[t];
            scratch.resize(size.min(r.len - lo), 0);
            r.gather(lo, scratch);
            r.filters.encode_slice(scratch, r.elem_size)
        })
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(tiles.len());
    let mut parts = parts.into_iter();
    for r in tiles {
        let n = r.len.div_ceil(size);
        let mine: Vec<Vec<u8>> = parts.by_ref().take(n).collect();
        out.push(assemble(&mine));
    }
    Ok(out)
}

/// Filtered chunks `parts` of one tile, back to back: the stored bytes, the chunks and the tile
/// checksum.
fn assemble(parts: &[Vec<u8>]) -> EncodedTile {
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    let mut chunks = Vec::with_capacity(parts.len());
    for p in parts {
        chunks.push(Chunk { stored: p.len() as u64, checksum: xxh3_64(p) });
        out.extend_from_slice(p);
    }
    let sums: Vec<u64> = chunks.iter().map(|c| c.checksum).collect();
    (out, chunks, checksum_of_sums(&sums))
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
    /// Tile `chunks` of the file `spec`, of `unfiltered` bytes in chunks of `2^log2`.
    pub(crate) fn of(spec: &'a super::FileSpec, log2: u32, unfiltered: u64, chunks: &'a [Chunk]) -> Self {
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
                    let detail = format!("checksum mismatch (stored {:016x}, computed {sum:016x})", c.checksum);
                    return Err((first + i, detail));
                }
                self.filters.decode_into(bytes, self.elem_size, dst).map_err(|e| (first + i, e.to_string()))
            },
        )?;
        // SAFETY: every one of the first `len` bytes was written by `decode_into` (above), and the
        // capacity is at least `len`.
        unsafe { out.set_len(len) };
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Filter;
    use proptest::prelude::*;

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
                runs.push(TileRuns::new(&pipes[p], 4, &src, r).unwrap());
                assembled.push((tile, p));
            }
            let refs: Vec<&TileRuns<'_>> = runs.iter().collect();
            let got = encode_chunked_runs(&refs, log2).unwrap();
            for ((tile, p), g) in assembled.iter().zip(&got) {
                prop_assert_eq!(g, &encode_chunked(&pipes[*p], tile, 4, log2).unwrap());
            }
        }
    }

    #[test]
    fn runs_must_cover_the_tile_once_inside_the_buffer() {
        let (p, src) = (&pipelines()[0], [0u8; 100]);
        assert!(TileRuns::new(p, 1, &src, vec![(50, 10, 10), (0, 0, 10)]).is_some());
        assert!(TileRuns::new(p, 1, &src, vec![(0, 0, 10), (50, 11, 10)]).is_none(), "a gap");
        assert!(TileRuns::new(p, 1, &src, vec![(0, 0, 10), (50, 5, 10)]).is_none(), "an overlap");
        assert!(TileRuns::new(p, 1, &src, vec![(0, 0, 10), (95, 10, 10)]).is_none(), "past the buffer");
    }

    #[test]
    fn a_flipped_byte_names_its_chunk() {
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 253) as u8).collect();
        let filters = &pipelines()[0];
        let (mut stored, chunks, _) = encode_chunked(filters, &data, 1, 12).unwrap();
        let starts = stored_offsets(&chunks).unwrap();
        stored[starts[5] as usize + 3] ^= 0x10;
        let tile = ChunkedTile { filters, elem_size: 1, log2: 12, unfiltered: data.len() as u64, chunks: &chunks };
        let (j, what) = tile.decode(0..chunks.len(), &stored).unwrap_err();
        assert_eq!(j, 5);
        assert!(what.contains("checksum mismatch"), "{what}");
        assert!(wants_chunks(8193, 12) && !wants_chunks(8192, 12));
    }
}
