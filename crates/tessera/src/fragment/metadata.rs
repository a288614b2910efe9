//! Fragment metadata (the paper's "bookkeeping"): the fragment's non-empty domain, cell count and,
//! per file, the byte range, unfiltered size and checksum of every tile; for sparse fragments also
//! each data tile's cell count, MBR, first and last coordinates and a packed R-tree over the MBRs.
//! Binary, little-endian, ended by a checksummed footer (docs/format.md, "Fragment metadata").

use std::path::Path;

use crate::error::{Error, Result};
use crate::footer::{seal, unseal, FORMAT_VERSION};
use crate::fragment::block_index::{BlockIndex, APART_TAG, INLINE_BLOCK_SUMS, INLINE_TAG};
use crate::fragment::blocks::checksum_of_sums;
use crate::fragment::chunks::{
    chunk_count, stored_offsets, wants_chunks, Chunk, ChunkIndex, TileChunks, CHUNK_LOG2_RANGE,
};
use crate::fragment::rtree::RTree;
use crate::fragment::tile_stats::{TileStats, STATS_TAG};
use crate::fragment::FragmentName;
use crate::geometry::Rect;

pub use crate::paths::{METADATA_FILE, PACKED_FILE};
const MAGIC: &[u8; 8] = b"TSRAFRAG";
/// The footer magic of metadata files.
pub(crate) const FOOTER_MAGIC: &[u8; 8] = b"TSRAFMDF";

/// Where one tile of one file lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileEntry {
    /// Byte offset in the file.
    pub offset: u64,
    /// Bytes stored (after filtering).
    pub stored_size: u64,
    /// Bytes after unfiltering.
    pub unfiltered_size: u64,
    /// xxh3-64 of the stored bytes.
    pub checksum: u64,
}

/// What a fragment holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FragmentKind {
    /// Every cell of a hyper-rectangle, tile by tile.
    Dense,
    /// Cells with explicit coordinates.
    Sparse,
    /// Deletions (tombstones).
    Delete,
}

impl FragmentKind {
    /// "dense", "sparse" or "delete".
    pub fn name(self) -> &'static str {
        match self {
            FragmentKind::Dense => "dense",
            FragmentKind::Sparse => "sparse",
            FragmentKind::Delete => "delete",
        }
    }
}

/// The index of a sparse fragment's data tiles (coordinates as ordinals).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SparseIndex {
    /// Cells per data tile.
    pub tile_cells: Vec<u64>,
    /// Minimum bounding rectangle of each data tile.
    pub mbrs: Vec<Rect>,
    /// Coordinates of each tile's first cell in global order.
    pub first: Vec<Vec<u64>>,
    /// Coordinates of each tile's last cell in global order.
    pub last: Vec<Vec<u64>>,
    /// Packed R-tree over `mbrs`.
    pub rtree: RTree,
}

/// Bit of the flags byte (the byte after the fragment kind; version 7): the fragment is packed.
const FLAG_PACKED: u8 = 1;
/// Tag of the chunk section of the metadata ("CHKS", format version 4).
const CHUNKS_TAG: &[u8; 4] = b"CHKS";

/// Everything a reader needs to know about one fragment without reading its tiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentMetadata {
    /// The fragment's name (timestamps, uuid, version).
    pub name: FragmentName,
    /// The non-empty domain, in normalized coordinates (dense) or ordinals (sparse).
    pub domain: Rect,
    /// Cells in the fragment.
    pub cell_count: u64,
    /// Per file (name, tile index in tile order).
    pub files: Vec<(String, Vec<TileEntry>)>,
    /// Sparse and delete fragments: the data-tile index (of the deleted points, for deletes).
    pub sparse: Option<SparseIndex>,
    /// Delete fragments: the deleted rectangles (ordinals); `None` for other fragments.
    pub deletes: Option<Vec<Rect>>,
    /// Block checksums of unfiltered tiles.
    pub blocks: BlockIndex,
    /// Chunks of chunked (filtered) tiles.
    pub chunks: ChunkIndex,
    /// Per-tile summaries of attribute values (version 6; empty before).
    pub stats: TileStats,
    /// Whether every file's tiles are stored in the one file `PACKED_FILE` (version 7), the
    /// file entries' offsets being offsets in it; otherwise each file is stored under its name.
    pub packed: bool,
}

impl FragmentMetadata {
    /// What the fragment holds.
    pub fn kind(&self) -> FragmentKind {
        if self.is_delete() {
            FragmentKind::Delete
        } else if self.is_dense() {
            FragmentKind::Dense
        } else {
            FragmentKind::Sparse
        }
    }

    /// Whether the fragment is dense (a hyper-rectangle stored tile by tile).
    pub fn is_dense(&self) -> bool {
        self.sparse.is_none()
    }

    /// Whether the fragment holds deletions (tombstones) instead of cells.
    pub fn is_delete(&self) -> bool {
        self.deletes.is_some()
    }

    /// Whether the fragment may hold cells (or deletions) inside `rect` (ordinals): its
    /// non-empty domain meets `rect` and, for a fragment of sparse cells, one of its data
    /// tiles' MBRs does. Dense fragments and deletions count by their domain alone.
    pub(crate) fn may_hold_in(&self, rect: &[[u64; 2]]) -> bool {
        crate::geometry::meet(&self.domain, rect)
            && (self.is_delete()
                || self
                    .sparse
                    .as_ref()
                    .is_none_or(|sp| !sp.rtree.search(&sp.mbrs, |r| crate::geometry::meet(r, rect)).is_empty()))
    }

    /// Whether a delete fragment deletes the cell with ordinals `p`'s rectangles (points are
    /// in its coordinate tiles).
    pub(crate) fn rect_deletes(&self, p: &[u64]) -> bool {
        self.deletes
            .as_ref()
            .is_some_and(|rs| rs.iter().any(|r| r.iter().zip(p).all(|(b, x)| b[0] <= *x && *x <= b[1])))
    }

    /// The non-empty domain in the dimensions' own numbers.
    pub fn nonempty_domain(&self, schema: &crate::schema::ArraySchema) -> Vec<crate::geometry::DimRange> {
        self.domain
            .iter()
            .zip(&schema.dims)
            .map(|([lo, hi], d)| crate::geometry::DimRange::from_ordinals(d, *lo, *hi))
            .collect()
    }

    /// Where the cells lie along dimension `dim`: per data tile of a sparse fragment, its
    /// bounding range along `dim` and its cell count; a dense fragment as one span (its
    /// non-empty domain, all its cells); nothing for a delete fragment. Planners use it to cut
    /// a read into pieces of about equal work.
    pub fn cell_spans(&self, schema: &crate::schema::ArraySchema, dim: usize) -> Vec<(crate::geometry::DimRange, u64)> {
        let Some(d) = schema.dims.get(dim) else { return Vec::new() };
        if self.is_delete() {
            return Vec::new();
        }
        let span = |r: &[[u64; 2]]| r.get(dim).map(|[lo, hi]| crate::geometry::DimRange::from_ordinals(d, *lo, *hi));
        match &self.sparse {
            Some(sp) => sp.mbrs.iter().zip(&sp.tile_cells).filter_map(|(r, n)| span(r).map(|s| (s, *n))).collect(),
            None => span(&self.domain).map(|s| (s, self.cell_count)).into_iter().collect(),
        }
    }

    /// Number of tiles.
    pub fn tile_count(&self) -> usize {
        self.files.first().map_or(0, |f| f.1.len())
    }

    /// The name of the file in the fragment's folder that holds the tiles of the file entry
    /// called `name`: `PACKED_FILE` for a packed fragment, else `name` itself.
    pub fn stored_file<'a>(&self, name: &'a str) -> &'a str {
        if self.packed {
            PACKED_FILE
        } else {
            name
        }
    }

    /// The tile index of the file called `name`.
    pub fn file(&self, name: &str) -> Option<&[TileEntry]> {
        self.files.iter().find(|f| f.0 == name).map(|f| f.1.as_slice())
    }

    /// Total stored bytes of all tiles (saturating: the sizes come from disk).
    pub fn stored_bytes(&self) -> u64 {
        self.files.iter().flat_map(|f| f.1.iter()).map(|t| t.stored_size).fold(0, u64::saturating_add)
    }

    /// Total unfiltered bytes of all tiles (saturating).
    pub fn unfiltered_bytes(&self) -> u64 {
        self.files.iter().flat_map(|f| f.1.iter()).map(|t| t.unfiltered_size).fold(0, u64::saturating_add)
    }

    /// The binary form, footer included, keeping at most [`INLINE_BLOCK_SUMS`] block checksums
    /// inline (more are kept apart: [`encode_with_block_file`](Self::encode_with_block_file)).
    pub fn encode(&self) -> Vec<u8> {
        self.encode_with_block_file(INLINE_BLOCK_SUMS).0
    }

    /// The binary form, footer included, with at most `inline_max` block checksums inline,
    /// and the fragment's file `BLOCK_SUMS_FILE` when it keeps them apart (format §8.1,
    /// version 9), to be written beside the metadata.
    pub fn encode_with_block_file(&self, inline_max: u64) -> (Vec<u8>, Option<Vec<u8>>) {
        (self.encode_inline_max(inline_max), self.blocks.encode_apart(&self.files, inline_max))
    }

    fn encode_inline_max(&self, inline_max: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.push(if self.deletes.is_some() { 2 } else { u8::from(self.sparse.is_some()) });
        b.extend_from_slice(&[u8::from(self.packed) * FLAG_PACKED, 0, 0]);
        b.extend_from_slice(&(self.domain.len() as u32).to_le_bytes());
        for [lo, hi] in &self.domain {
            b.extend_from_slice(&lo.to_le_bytes());
            b.extend_from_slice(&hi.to_le_bytes());
        }
        b.extend_from_slice(&self.cell_count.to_le_bytes());
        b.extend_from_slice(&(self.tile_count() as u64).to_le_bytes());
        b.extend_from_slice(&(self.files.len() as u32).to_le_bytes());
        for (name, tiles) in &self.files {
            b.extend_from_slice(&(name.len() as u16).to_le_bytes());
            b.extend_from_slice(name.as_bytes());
            for t in tiles {
                for v in [t.offset, t.stored_size, t.unfiltered_size, t.checksum] {
                    b.extend_from_slice(&v.to_le_bytes());
                }
            }
        }
        if let Some(sp) = &self.sparse {
            encode_sparse(&mut b, sp);
        }
        if let Some(rects) = &self.deletes {
            b.extend_from_slice(&(rects.len() as u64).to_le_bytes());
            for r in rects {
                for [lo, hi] in r {
                    b.extend_from_slice(&lo.to_le_bytes());
                    b.extend_from_slice(&hi.to_le_bytes());
                }
            }
        }
        self.encode_blocks_and_chunks(inline_max, &mut b);
        self.stats.encode(&mut b);
        seal(b, FOOTER_MAGIC)
    }

    /// The optional block-checksum and chunk sections (after the tile index).
    fn encode_blocks_and_chunks(&self, inline_max: u64, b: &mut Vec<u8>) {
        self.blocks.encode(&self.files, inline_max, b);
        // The section's chunk size is the smallest of its tiles'; every entry gives its own.
        if let Some(log2) = self.chunks.entries().map(|(_, _, c)| c.log2).min() {
            b.extend_from_slice(CHUNKS_TAG);
            b.extend_from_slice(&log2.to_le_bytes());
            b.extend_from_slice(&(self.chunks.entries().count() as u64).to_le_bytes());
            for (f, t, chunks) in self.chunks.entries() {
                b.extend_from_slice(&(f as u32).to_le_bytes());
                b.extend_from_slice(&chunks.log2.to_le_bytes());
                b.extend_from_slice(&(t as u64).to_le_bytes());
                b.extend_from_slice(&(chunks.list.len() as u64).to_le_bytes());
                for c in &chunks.list {
                    b.extend_from_slice(&c.stored.to_le_bytes());
                    b.extend_from_slice(&c.checksum.to_le_bytes());
                }
            }
        }
    }

    /// Parses the binary form; `path` names the file in errors.
    ///
    /// # Errors
    /// `Error::Corrupt` naming the file and the field that is wrong.
    pub fn decode(bytes: &[u8], name: FragmentName, path: &Path) -> Result<Self> {
        let payload = unseal(bytes, FOOTER_MAGIC, path)?;
        let mut r = Reader { b: payload, at: 0, path };
        if r.take(8)? != MAGIC {
            return Err(Error::corrupt(path, "fragment metadata magic is wrong"));
        }
        let version = r.u32()?;
        let head = r.take(4)?;
        let (kind, flags) = (head[0], head[1]);
        if kind > 2 {
            return Err(Error::corrupt(path, format!("fragment kind {kind} is not known to this build")));
        }
        // Versions before 7 wrote the flags byte as zero (reserved).
        if flags & !FLAG_PACKED != 0 || (version < 7 && flags != 0) {
            return Err(Error::corrupt(path, format!("fragment flags {flags:#04x} are not known to this build")));
        }
        let packed = flags & FLAG_PACKED != 0;
        let ndim = r.u32()? as usize;
        if ndim == 0 || ndim > 32 {
            return Err(Error::corrupt(path, format!("dimension count {ndim} out of range")));
        }
        let mut domain = Vec::with_capacity(ndim);
        for d in 0..ndim {
            let lo = r.u64()?;
            let hi = r.u64()?;
            if lo > hi {
                return Err(Error::corrupt(path, format!("non-empty domain of dimension {d} is reversed")));
            }
            domain.push([lo, hi]);
        }
        let cell_count = r.u64()?;
        let tile_count = r.u64()?;
        let nfiles = r.u32()? as usize;
        // Each file entry takes at least 2 bytes and each tile entry 32: bound the counts by
        // what the file can hold (before allocating for them).
        let entry = tile_count.saturating_mul(32).saturating_add(2);
        if entry.saturating_mul(nfiles as u64) > payload.len() as u64 {
            return Err(Error::corrupt(path, "file or tile count larger than the file can hold"));
        }
        let files = (0..nfiles).map(|_| decode_file(&mut r, tile_count, path)).collect::<Result<Vec<_>>>()?;
        let sparse = if kind >= 1 { Some(decode_sparse(&mut r, tile_count as usize, ndim, path)?) } else { None };
        let deletes = if kind == 2 { Some(decode_deletes(&mut r, ndim, path)?) } else { None };
        // Optional sections, each at most once and in this order: BLKS or BLKF, CHKS, STAT.
        let (mut blocks, mut chunks, mut stats) = (BlockIndex::default(), ChunkIndex::default(), TileStats::default());
        let mut seen = 0;
        while r.at < payload.len() {
            match r.take(4)? {
                t if t == INLINE_TAG && seen < 1 => {
                    blocks = BlockIndex::decode_inline(&mut r, &files, path)?;
                    seen = 1;
                }
                t if t == APART_TAG && seen < 1 && version >= 9 => {
                    blocks = BlockIndex::decode_apart(&mut r, &files, path)?;
                    seen = 1;
                }
                t if t == CHUNKS_TAG && seen < 2 => {
                    chunks = decode_chunks(&mut r, &files, &blocks, path)?;
                    seen = 2;
                }
                t if t == STATS_TAG && seen < 3 => {
                    // A dense tile's cell count needs the schema: its readers check it.
                    let cells = |k: u64| {
                        sparse.as_ref().map_or(u64::MAX, |s| s.tile_cells.get(k as usize).copied().unwrap_or(0))
                    };
                    stats = TileStats::decode(r.b, &mut r.at, tile_count, cells, path)?;
                    seen = 3;
                }
                _ => return Err(Error::corrupt(path, "unknown or repeated section after the tile index")),
            }
        }
        Ok(Self { name, domain, cell_count, files, sparse, deletes, blocks, chunks, stats, packed })
    }
}

/// One file entry of the tile index: its name and `tile_count` tile entries (the caller has
/// bounded the count by the file's size).
fn decode_file(r: &mut Reader<'_>, tile_count: u64, path: &Path) -> Result<(String, Vec<TileEntry>)> {
    let len = r.u16()? as usize;
    let fname =
        std::str::from_utf8(r.take(len)?).map_err(|_| Error::corrupt(path, "file name is not UTF-8"))?.to_string();
    let mut tiles = Vec::with_capacity(tile_count as usize);
    for _ in 0..tile_count {
        tiles.push(TileEntry {
            offset: r.u64()?,
            stored_size: r.u64()?,
            unfiltered_size: r.u64()?,
            checksum: r.u64()?,
        });
    }
    Ok((fname, tiles))
}

/// The deleted rectangles of a delete fragment (`ndim` dimensions each, none reversed).
fn decode_deletes(r: &mut Reader<'_>, ndim: usize, path: &Path) -> Result<Vec<Rect>> {
    let count = r.u64()? as usize;
    if (count as u64).saturating_mul(16 * ndim as u64) > (r.b.len() - r.at) as u64 {
        return Err(Error::corrupt(path, "deleted rectangle count larger than the file"));
    }
    let mut rects = Vec::with_capacity(count);
    for _ in 0..count {
        let mut rect = Vec::with_capacity(ndim);
        for _ in 0..ndim {
            let (lo, hi) = (r.u64()?, r.u64()?);
            if lo > hi {
                return Err(Error::corrupt(path, "a deleted rectangle is reversed"));
            }
            rect.push([lo, hi]);
        }
        rects.push(rect);
    }
    Ok(rects)
}

/// The sparse index: tile cell counts, MBRs, first and last coordinates, and the R-tree.
fn encode_sparse(b: &mut Vec<u8>, sp: &SparseIndex) {
    let mut put = |v: u64| b.extend_from_slice(&v.to_le_bytes());
    sp.tile_cells.iter().for_each(|&c| put(c));
    for r in &sp.mbrs {
        r.iter().for_each(|&[lo, hi]| {
            put(lo);
            put(hi);
        });
    }
    sp.first.iter().chain(&sp.last).flatten().for_each(|&v| put(v));
    put(u64::from(sp.rtree.fanout) | ((sp.rtree.levels.len() as u64) << 32));
    for level in &sp.rtree.levels {
        put(level.len() as u64);
        for r in level {
            r.iter().for_each(|&[lo, hi]| {
                put(lo);
                put(hi);
            });
        }
    }
}

/// The chunk section: every entry names an existing tile without block checksums, holds as
/// many chunks as its unfiltered size implies, and its chunks' stored sizes and checksums add up
/// to the tile's stored size and checksum.
fn decode_chunks(
    r: &mut Reader<'_>,
    files: &[(String, Vec<TileEntry>)],
    blocks: &BlockIndex,
    path: &Path,
) -> Result<ChunkIndex> {
    let section_log2 = r.u32()?;
    if !CHUNK_LOG2_RANGE.contains(&section_log2) {
        return Err(Error::corrupt(path, format!("chunk size 2^{section_log2} out of range")));
    }
    let count = r.u64()?;
    if count.saturating_mul(24) > (r.b.len() - r.at) as u64 {
        return Err(Error::corrupt(path, "chunked tile count larger than the file"));
    }
    let mut chunks: Vec<Vec<TileChunks>> = files.iter().map(|(_, t)| vec![TileChunks::default(); t.len()]).collect();
    for _ in 0..count {
        let (f, own_log2, t, n) = (r.u32()? as usize, r.u32()?, r.u64()?, r.u64()?);
        let entry = files.get(f).and_then(|(_, tiles)| tiles.get(usize::try_from(t).ok()?));
        let bad = |what: String| Error::corrupt(path, format!("file {f}, tile {t}: {what}"));
        let Some(entry) = entry else { return Err(bad("chunks of a tile that does not exist".into())) };
        // Version 4 entries hold 0: the section's chunk size.
        let log2 = if own_log2 == 0 { section_log2 } else { own_log2 };
        if !CHUNK_LOG2_RANGE.contains(&log2) {
            return Err(bad(format!("chunk size 2^{log2} out of range")));
        }
        if n != chunk_count(entry.unfiltered_size, log2) || !wants_chunks(entry.unfiltered_size, log2) {
            return Err(bad(format!("{n} chunks for {} unfiltered bytes", entry.unfiltered_size)));
        }
        if n.saturating_mul(16) > (r.b.len() - r.at) as u64 {
            return Err(bad("chunk list larger than the file".into()));
        }
        if blocks.count(f, t).is_some() || !chunks[f][t as usize].list.is_empty() {
            return Err(bad("chunks given twice, or beside block checksums".into()));
        }
        let list = (0..n).map(|_| Ok(Chunk { stored: r.u64()?, checksum: r.u64()? })).collect::<Result<Vec<_>>>()?;
        if stored_offsets(&list).and_then(|o| o.last().copied()) != Some(entry.stored_size) {
            return Err(bad(format!("chunk sizes do not add up to the stored size {}", entry.stored_size)));
        }
        let sums: Vec<u64> = list.iter().map(|c| c.checksum).collect();
        if checksum_of_sums(&sums) != entry.checksum {
            return Err(bad("the tile checksum is not that of its chunks".into()));
        }
        chunks[f][t as usize] = TileChunks { log2, list };
    }
    Ok(ChunkIndex { chunks })
}

fn decode_sparse(r: &mut Reader<'_>, k: usize, n: usize, path: &Path) -> Result<SparseIndex> {
    let remaining = (r.b.len() - r.at) as u64;
    if (k as u64).saturating_mul(8 * (1 + 4 * n as u64)) > remaining {
        return Err(Error::corrupt(path, "sparse tile index larger than the file"));
    }
    let rect = |r: &mut Reader<'_>| -> Result<Rect> {
        (0..n)
            .map(|_| {
                let (lo, hi) = (r.u64()?, r.u64()?);
                if lo > hi {
                    return Err(Error::corrupt(path, "an MBR is reversed"));
                }
                Ok([lo, hi])
            })
            .collect()
    };
    let tile_cells = r.u64s(k as u64)?;
    let mbrs = (0..k).map(|_| rect(r)).collect::<Result<Vec<_>>>()?;
    let point = |r: &mut Reader<'_>| r.u64s(n as u64);
    let first = (0..k).map(|_| point(r)).collect::<Result<Vec<_>>>()?;
    let last = (0..k).map(|_| point(r)).collect::<Result<Vec<_>>>()?;
    let head = r.u64()?;
    let (fanout, nlevels) = ((head & 0xffff_ffff) as u32, head >> 32);
    if fanout < 2 || nlevels > 64 {
        return Err(Error::corrupt(path, "R-tree header out of range"));
    }
    let mut levels = Vec::new();
    let mut below = k;
    for _ in 0..nlevels {
        let m = r.u64()? as usize;
        if m != below.div_ceil(fanout as usize) {
            return Err(Error::corrupt(path, "R-tree level size does not match the level below"));
        }
        levels.push((0..m).map(|_| rect(r)).collect::<Result<Vec<_>>>()?);
        below = m;
    }
    Ok(SparseIndex { tile_cells, mbrs, first, last, rtree: RTree { fanout, levels } })
}

/// Reads the fields of a metadata payload, each read bounded by what is left.
pub(super) struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    path: &'a Path,
}

impl<'a> Reader<'a> {
    /// Bytes not read yet.
    pub(super) fn left(&self) -> usize {
        self.b.len() - self.at
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.b.len() - self.at < n {
            return Err(Error::corrupt(self.path, format!("fragment metadata ends early at byte {}", self.at)));
        }
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }
    fn u16(&mut self) -> Result<u16> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    pub(super) fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    pub(super) fn u64(&mut self) -> Result<u64> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    /// `n` u64 values in a row (one bounds check for all of them: a fragment with large
    /// uncompressed tiles holds hundreds of thousands of block checksums).
    pub(super) fn u64s(&mut self, n: u64) -> Result<Vec<u64>> {
        let bytes = usize::try_from(n).ok().and_then(|n| n.checked_mul(8)).unwrap_or(usize::MAX);
        let s = self.take(bytes)?;
        Ok(s.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> FragmentMetadata {
        let e = |i: u64| TileEntry { offset: i * 10, stored_size: 10, unfiltered_size: 40, checksum: i };
        FragmentMetadata {
            name: FragmentName::new(5),
            domain: vec![[0, 9], [3, 7]],
            cell_count: 50,
            files: vec![("a0.data".into(), vec![e(0), e(1)]), ("a0.valid".into(), vec![e(2), e(3)])],
            sparse: None,
            deletes: None,
            blocks: BlockIndex::default(),
            chunks: ChunkIndex::default(),
            stats: TileStats::default(),
            packed: false,
        }
    }

    /// The packed flag (version 7) round-trips and names the stored file; any other flag bit,
    /// or a flag in a header of an earlier version (whose byte was reserved), is corruption.
    #[test]
    fn the_packed_flag_round_trips_and_unknown_flags_are_corruption() {
        let m = FragmentMetadata { packed: true, ..sample() };
        let bytes = m.encode();
        assert_eq!(bytes[13], FLAG_PACKED);
        let back = FragmentMetadata::decode(&bytes, m.name.clone(), Path::new("m")).unwrap();
        assert_eq!(back, m);
        assert_eq!((back.stored_file("a0.data"), sample().stored_file("a0.data")), (PACKED_FILE, "a0.data"));
        let resealed = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut payload = bytes[..bytes.len() - 20].to_vec();
            edit(&mut payload);
            FragmentMetadata::decode(&seal(payload, FOOTER_MAGIC), m.name.clone(), Path::new("m"))
        };
        let e = resealed(&|p| p[13] = 3).unwrap_err();
        assert!(e.to_string().contains("fragment flags 0x03"), "{e}");
        let e = resealed(&|p| p[8..12].copy_from_slice(&6u32.to_le_bytes())).unwrap_err();
        assert!(e.to_string().contains("fragment flags 0x01"), "{e}");
        let unpacked = resealed(&|p| {
            p[8..12].copy_from_slice(&6u32.to_le_bytes());
            p[13] = 0;
        });
        assert!(!unpacked.unwrap().packed);
    }

    #[test]
    fn block_checksums_round_trip_and_are_checked() {
        let mut m = sample();
        // Tiles of 5000 bytes in blocks of 1 KiB: 5 checksums each.
        for t in &mut m.files[0].1 {
            t.stored_size = 5000;
        }
        m.blocks = BlockIndex::inline(10, vec![vec![vec![1, 2, 3, 4, 5], vec![]], vec![vec![], vec![]]]);
        let bytes = m.encode();
        let back = FragmentMetadata::decode(&bytes, m.name.clone(), Path::new("m")).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.blocks.of(0, 0), Some(&[1, 2, 3, 4, 5][..]));
        assert_eq!(back.blocks.of(0, 1), None);
        for n in 0..bytes.len() {
            assert!(FragmentMetadata::decode(&bytes[..n], m.name.clone(), Path::new("m")).is_err());
        }
        // A count that does not match the tile's size is corruption, even under a valid footer.
        let mut bad = m.clone();
        bad.blocks.sums[0][0].pop();
        let e = FragmentMetadata::decode(&bad.encode(), m.name.clone(), Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("4 block checksums for 5000 bytes"), "{e}");
    }

    /// Tiles chunked at different sizes keep each its own (version 5); a version 4 section, whose
    /// entries hold 0, gives all its tiles the section's size; a size out of range, or one that
    /// does not match an entry's chunk count, is corruption.
    #[test]
    fn chunk_sizes_are_per_tile() {
        let mut m = sample();
        let chunked = |n: u64, log2: u32| {
            let list: Vec<Chunk> = (0..n).map(|i| Chunk { stored: 100, checksum: 7 + i }).collect();
            let sums: Vec<u64> = list.iter().map(|c| c.checksum).collect();
            let entry = TileEntry { offset: 0, stored_size: 100 * n, unfiltered_size: n << log2, checksum: 0 };
            (TileEntry { checksum: checksum_of_sums(&sums), ..entry }, TileChunks { log2, list })
        };
        let ((e0, c0), (e1, c1)) = (chunked(3, 13), chunked(4, 12));
        m.files[0].1 = vec![e0, e1];
        m.chunks = ChunkIndex { chunks: vec![vec![c0.clone(), c1.clone()], vec![]] };
        let bytes = m.encode();
        let back = FragmentMetadata::decode(&bytes, m.name.clone(), Path::new("m")).unwrap();
        assert_eq!(back.chunks.of(0, 0), Some(&c0));
        assert_eq!(back.chunks.of(0, 1), Some(&c1));
        // The section: tag, u32 size (the smallest, 12), u64 count, then entries whose second
        // u32 is the tile's size.
        let payload = &bytes[..bytes.len() - 20];
        let at = payload.windows(4).rposition(|w| w == CHUNKS_TAG).unwrap();
        assert_eq!(&payload[at + 4..at + 8], &12u32.to_le_bytes());
        let first_entry = at + 16;
        let second_entry = first_entry + 24 + 3 * 16;
        let patched = |edits: &[(usize, u32)]| {
            let mut p = payload.to_vec();
            for &(at, v) in edits {
                p[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            FragmentMetadata::decode(&seal(p, FOOTER_MAGIC), m.name.clone(), Path::new("m"))
        };
        // Version 4: both entries 0, the section's size 12 for both: tile 0 (3 chunks of 8 KiB)
        // no longer adds up.
        let e = patched(&[(first_entry + 4, 0), (second_entry + 4, 0)]).unwrap_err();
        assert!(e.to_string().contains("3 chunks for 24576 unfiltered bytes"), "{e}");
        let v4 = patched(&[(at + 4, 13), (first_entry + 4, 0), (second_entry + 4, 12)]).unwrap();
        assert_eq!(v4.chunks, back.chunks);
        let e = patched(&[(first_entry + 4, 31)]).unwrap_err();
        assert!(e.to_string().contains("chunk size 2^31 out of range"), "{e}");
    }

    #[test]
    fn delete_round_trip() {
        let mut m = sparse_sample();
        m.deletes = Some(vec![vec![[1, 2], [3, 3]], vec![[0, 0], [5, 9]]]);
        let bytes = m.encode();
        assert_eq!(FragmentMetadata::decode(&bytes, m.name.clone(), Path::new("m")).unwrap(), m);
        for n in 0..bytes.len() {
            assert!(FragmentMetadata::decode(&bytes[..n], m.name.clone(), Path::new("m")).is_err());
        }
    }

    fn sparse_sample() -> FragmentMetadata {
        let mut m = sample();
        let mbrs = vec![vec![[0, 4], [3, 5]], vec![[5, 9], [4, 7]]];
        m.sparse = Some(SparseIndex {
            tile_cells: vec![3, 2],
            rtree: RTree::build(&mbrs, 2),
            mbrs,
            first: vec![vec![0, 3], vec![5, 7]],
            last: vec![vec![4, 5], vec![9, 4]],
        });
        use crate::fragment::{Extremes, SummaryKind, TileSummary};
        let s = TileSummary { nulls: 0, values: 2, extremes: Extremes::Int { sum: -3, min: -2, max: -1 } };
        m.stats = TileStats::collect(vec![(0, 0, SummaryKind::Signed, s), (1, 0, SummaryKind::Signed, s)]);
        m
    }

    /// A sparse tile's summary counting more cells than the tile holds is corruption.
    #[test]
    fn tile_statistics_are_checked_against_the_sparse_index() {
        let m = sparse_sample();
        assert!(FragmentMetadata::decode(&m.encode(), m.name.clone(), Path::new("m")).is_ok());
        let mut bad = m.clone();
        bad.sparse.as_mut().unwrap().tile_cells = vec![3, 1];
        let e = FragmentMetadata::decode(&bad.encode(), m.name.clone(), Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("tile 1: 0 nulls and 2 values"), "{e}");
    }

    #[test]
    fn sparse_round_trip_and_corruption() {
        let m = sparse_sample();
        let bytes = m.encode();
        let back = FragmentMetadata::decode(&bytes, m.name.clone(), Path::new("m")).unwrap();
        assert_eq!(back, m);
        for n in 0..bytes.len() {
            assert!(FragmentMetadata::decode(&bytes[..n], m.name.clone(), Path::new("m")).is_err());
        }
    }

    /// Zero tiles per file and 2^32 - 1 files: the file count is bounded by the file's size
    /// before anything is allocated for it (it used to reserve ~200 GB and abort).
    #[test]
    fn file_count_is_bounded_by_the_file() {
        let mut m = sample();
        for f in &mut m.files {
            f.1.clear();
        }
        let mut payload = m.encode();
        payload.truncate(payload.len() - 20);
        // The file count follows the cell count and the tile count.
        let at = 8 + 4 + 4 + 4 + 16 * 2 + 8 + 8;
        payload[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = FragmentMetadata::decode(&seal(payload, FOOTER_MAGIC), m.name.clone(), Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("file or tile count larger than the file"), "{e}");
    }

    #[test]
    fn round_trip() {
        let m = sample();
        let back = FragmentMetadata::decode(&m.encode(), m.name.clone(), Path::new("m")).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn truncation_and_flips_are_corruption_not_panics() {
        let m = sample();
        let bytes = m.encode();
        for n in 0..bytes.len() {
            assert!(FragmentMetadata::decode(&bytes[..n], m.name.clone(), Path::new("m")).is_err());
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(matches!(FragmentMetadata::decode(&b, m.name.clone(), Path::new("m")), Err(Error::Corrupt { .. })));
        }
    }
}
