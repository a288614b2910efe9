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
) -> Result<(Vec<u8>, Vec<Chunk>, u64), FilterError> {
    let parts: Vec<Vec<u8>> =
        data.par_chunks(1 << log2).map(|c| filters.encode_slice(c, elem_size)).collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(parts.iter().map(Vec::len).sum());
    let mut chunks = Vec::with_capacity(parts.len());
    for p in &parts {
        chunks.push(Chunk { stored: p.len() as u64, checksum: xxh3_64(p) });
        out.extend_from_slice(p);
    }
    let sums: Vec<u64> = chunks.iter().map(|c| c.checksum).collect();
    Ok((out, chunks, checksum_of_sums(&sums)))
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
