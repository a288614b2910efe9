//! Executing a read plan: the tiles the copies need are fetched with adjacent byte ranges of a
//! file coalesced into one request, requests run in parallel, each tile's checksum is verified,
//! tiles are unfiltered in parallel (unfiltered tiles are used in place, with no copy), and the
//! copies move whole contiguous runs. A tile the read takes whole goes into the result without
//! a tile buffer: unfiltered, read straight into its place; chunked, each chunk decoded into its
//! runs. Tiles are processed in batches bounded by `sm.memory_budget`.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::plan::{CopyOp, FillOp};
use crate::checksum::xxh3_64;
use crate::config::check_limit;
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::fragment::{
    scattered_decode_bytes, stored_offsets, verify_tile, ChunkedTile, FileKind, FileSpec, TileChunks,
};
use crate::geometry::{contiguous_runs, copy_strided, fill_strided, for_each_cell_pair, Strided};
use crate::schema::ArraySchema;
use crate::snapshot::{
    block_sums, cache_key, count_fetched, fetch_tiles, file_path, storage_err, tile_cells, Snapshot, TileKey, Tiles,
};
use crate::stats::{self, Counter, Timer};
use crate::storage::{Bytes, COLD_READ_FIRST};
use crate::uninit::{as_uninit, assume_written, OutBytes};

use super::streamed::{read_blocked, read_streamed, DIRECT_PIECE};

/// Marks a variable-length result cell that takes the fill value.
pub(crate) const FILL_BLOB: u32 = u32::MAX;

/// Where one attribute's result cells go.
pub(crate) enum DataSink<'a> {
    /// Fixed-size cells, written in place: the buffer need not be initialized, as the plan
    /// writes every cell of it (see [`sink_buffers`]).
    Fixed(OutBytes<'a>),
    /// Variable-length cells: per result cell a (blob, start, len) reference into kept tiles.
    Var { refs: Vec<(u32, u64, u64)>, blobs: Vec<Bytes> },
}

/// One attribute's destination.
pub(crate) struct Sink<'a> {
    pub attr: usize,
    pub data: DataSink<'a>,
    pub validity: Option<&'a mut [u8]>,
}

/// Buffers for `n` result cells of attributes `attrs`: `(fixed, valid)`, one entry per
/// attribute. Fixed-size values get an empty vector with room for them, not zeroed (zeroing was a
/// third of a warm read of one 10 MB tile): [`sinks`] lends that room, and [`finish_fixed`] sets
/// the lengths once a read has written every cell. Validity bytes are zeroed; variable-length
/// values gather references.
pub(crate) fn sink_buffers(schema: &ArraySchema, attrs: &[usize], n: usize) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let fixed =
        attrs
            .iter()
            .map(|&i| {
                if schema.attrs[i].is_var() {
                    Vec::new()
                } else {
                    Vec::with_capacity(n * schema.attrs[i].cell_size())
                }
            })
            .collect();
    let valid = attrs.iter().map(|&i| if schema.attrs[i].nullable { vec![0u8; n] } else { Vec::new() }).collect();
    (fixed, valid)
}

/// Sinks writing `n` result cells of attributes `attrs` into the buffers of [`sink_buffers`].
pub(crate) fn sinks<'a>(
    schema: &ArraySchema,
    attrs: &[usize],
    n: usize,
    fixed: &'a mut [Vec<u8>],
    valid: &'a mut [Vec<u8>],
) -> Vec<Sink<'a>> {
    attrs
        .iter()
        .zip(fixed.iter_mut().zip(valid.iter_mut()))
        .map(|(&i, (f, v))| {
            let a = &schema.attrs[i];
            Sink {
                attr: i,
                data: if a.is_var() {
                    DataSink::Var { refs: vec![(FILL_BLOB, 0, 0); n], blobs: Vec::new() }
                } else {
                    DataSink::Fixed(&mut f.spare_capacity_mut()[..n * a.cell_size()])
                },
                validity: a.nullable.then_some(v.as_mut_slice()),
            }
        })
        .collect()
}

/// Whether `copies` and `fills` write every one of the `n` cells of a run of result cells: the
/// plan makes them disjoint (plan.rs: every result cell is copied once, from the newest
/// fragment that holds it, or filled), so their cells adding up to `n` means every cell.
pub(crate) fn plan_covers(copies: &[CopyOp], fills: &[FillOp], n: u64) -> bool {
    let cells = |shape: &[u64]| shape.iter().product::<u64>();
    let total = copies.iter().map(|c| cells(&c.shape)).chain(fills.iter().map(|f| cells(&f.shape)));
    total.fold(0u64, u64::saturating_add) == n
}

/// Zeroes the fixed-size buffers of `sinks`: for a plan that [`plan_covers`] does not vouch
/// for, so that no byte of a result is left unwritten.
pub(crate) fn zero_fixed(sinks: &mut [Sink<'_>]) {
    for s in sinks.iter_mut() {
        if let DataSink::Fixed(buf) = &mut s.data {
            buf.fill(MaybeUninit::new(0));
        }
    }
}

/// Gives the buffers of [`sink_buffers`] their `n` cells, once the sinks made from them have
/// been written.
///
/// # Safety
/// Every cell of every fixed-size buffer has been written through [`sinks`]: the read's plan
/// covered all `n` cells ([`plan_covers`], or [`zero_fixed`] ran first) and executed without
/// error.
#[allow(unsafe_code)]
pub(crate) unsafe fn finish_fixed(schema: &ArraySchema, attrs: &[usize], n: usize, fixed: &mut [Vec<u8>]) {
    for (&i, f) in attrs.iter().zip(fixed) {
        let a = &schema.attrs[i];
        if !a.is_var() {
            // SAFETY: the caller's promise; `sinks` lent exactly these `n * cell_size` bytes.
            unsafe { f.set_len(n * a.cell_size()) };
        }
    }
}

/// Runs `copies` and `fills` into `sinks`.
pub(crate) fn execute(array: &Snapshot, copies: Vec<CopyOp>, fills: &[FillOp], sinks: &mut [Sink<'_>]) -> Result<()> {
    let schema = array.schema();
    for s in sinks.iter_mut() {
        let a = &schema.attrs[s.attr];
        let fill = a.fill_bytes();
        for op in fills {
            match &mut s.data {
                DataSink::Fixed(buf) => fill_strided(&fill, &op.shape, buf, &op.dst),
                DataSink::Var { refs, .. } => for_each_cell_pair(&op.shape, &op.dst, &op.dst, |_, d| {
                    refs[d as usize] = (FILL_BLOB, 0, fill.len() as u64);
                }),
            }
            if let Some(v) = s.validity.as_deref_mut() {
                fill_strided(&[0], &op.shape, as_uninit(v), &op.dst);
            }
        }
    }
    if copies.is_empty() {
        return Ok(());
    }
    let specs = FileSpec::for_schema(schema);
    let wanted: Vec<usize> = (0..specs.len()).filter(|&f| sinks.iter().any(|s| s.attr == specs[f].attr)).collect();
    let by_tile = TileOps::group(copies);
    let mut keys: Vec<TileKey> = by_tile.runs.keys().copied().collect();
    // Fragment by fragment, tiles in file order: neighbours coalesce.
    keys.sort_unstable();
    // Which tiles go straight into the results, decided for the whole read: such a tile holds
    // no tile buffer (a chunked one only its stored chunks), so many of them share a batch.
    let mut direct = direct_reads(array, &specs, &keys, &by_tile, sinks);
    direct.whole.sort_unstable_by_key(|d| d.1);
    let budget = array.ctx.config().memory_budget();
    // Batches of `sm.read.batch_size`, or of one tile per compute thread when tiles are larger
    // (so that every core decodes): tiles are decoded and copied a few at a time, and each batch
    // reuses the memory the last one freed. The memory budget bounds every batch.
    let batch_size = array.ctx.config().read_batch_size();
    let threads = array.ctx.compute_threads();
    let mut batch: Vec<TileKey> = Vec::new();
    let mut batch_bytes = 0u64;
    for key in keys {
        let bytes = tile_read_bytes(array, &specs, &wanted, key, by_tile.of(key), &direct);
        // The budget holds for every tile, the first of a batch included: a read that needs a
        // larger tile is refused rather than allowed past it.
        check_limit(
            "sm.memory_budget",
            || format!("tile {} of fragment {} (the read's attributes)", key.1, array.fragments[key.0].name),
            bytes,
            budget,
        )?;
        let next = batch_bytes.saturating_add(bytes);
        if !batch.is_empty() && (next > budget || (next > batch_size && batch.len() >= threads)) {
            run_batch(array, &specs, &wanted, &std::mem::take(&mut batch), &by_tile, &direct, sinks)?;
            batch_bytes = 0;
        }
        batch.push(key);
        batch_bytes = batch_bytes.saturating_add(bytes);
    }
    run_batch(array, &specs, &wanted, &batch, &by_tile, &direct, sinks)
}

/// A read's copies grouped by tile: one vector in which each tile's copies form one run.
struct TileOps {
    ops: Vec<CopyOp>,
    /// Per tile, its run `[a, b)` of `ops`.
    runs: FastMap<TileKey, (usize, usize)>,
}

impl TileOps {
    /// Groups `ops` by tile: as they come when each tile's copies already form one run (a point
    /// plan makes them so), else moved into runs in the order each tile is first met, each
    /// tile's copies in their order.
    fn group(ops: Vec<CopyOp>) -> Self {
        if let Some(runs) = Self::runs_of(&ops) {
            return Self { ops, runs };
        }
        let mut groups: FastMap<TileKey, usize> = FastMap::default();
        let mut starts = vec![0usize];
        let group: Vec<usize> = ops
            .iter()
            .map(|op| {
                let next = groups.len();
                let g = *groups.entry((op.frag, op.tile)).or_insert(next);
                if g == next {
                    starts.push(0);
                }
                starts[g + 1] += 1;
                g
            })
            .collect();
        for g in 1..starts.len() {
            starts[g] += starts[g - 1];
        }
        let mut slots: Vec<Option<CopyOp>> = (0..ops.len()).map(|_| None).collect();
        for (op, g) in ops.into_iter().zip(group) {
            slots[starts[g]] = Some(op);
            starts[g] += 1;
        }
        let ops: Vec<CopyOp> = slots.into_iter().flatten().collect();
        let runs = Self::runs_of(&ops).unwrap_or_default();
        Self { ops, runs }
    }

    /// Each tile's run of `ops`, if each tile's copies form one run.
    fn runs_of(ops: &[CopyOp]) -> Option<FastMap<TileKey, (usize, usize)>> {
        let mut runs: FastMap<TileKey, (usize, usize)> = FastMap::default();
        let mut start = 0;
        for i in 1..=ops.len() {
            let key = (ops[start].frag, ops[start].tile);
            if i == ops.len() || (ops[i].frag, ops[i].tile) != key {
                if runs.insert(key, (start, i)).is_some() {
                    return None;
                }
                start = i;
            }
        }
        Some(runs)
    }

    /// The copies from tile `key` (none for a tile the read does not copy from).
    fn of(&self, key: TileKey) -> &[CopyOp] {
        self.runs.get(&key).map_or(&[], |&(a, b)| &self.ops[a..b])
    }
}

/// The bytes a batch holds for tile `key` (copies `ops`) of the files `wanted`: nothing for a
/// tile read straight into the result, the stored chunks of one decoded into it, the unfiltered
/// size of each file's tile, or only the blocks read of a tile read in part.
fn tile_read_bytes(
    array: &Snapshot,
    specs: &[FileSpec],
    wanted: &[usize],
    key: TileKey,
    ops: &[CopyOp],
    direct: &DirectReads,
) -> u64 {
    let frag = &array.fragments[key.0];
    wanted
        .iter()
        .map(|&f| {
            if let Some(&held) = direct.held.get(&(key, f)) {
                return held;
            }
            match partial_blocks(array, specs, key, f, ops) {
                Some((log2, runs)) => runs.iter().map(|(a, b)| (b - a) << log2).sum(),
                None => frag.files[f].1[key.1 as usize].unfiltered_size,
            }
        })
        .fold(0u64, u64::saturating_add)
}

/// A chunked tile copied cell by cell (a column of a row-major tile) is decoded into the result
/// when it copies at most one cell in this many of the tile: each cell becomes a run (ordered,
/// then cut at chunk boundaries), where a tile decoded whole into a buffer costs that buffer's
/// page faults and a strided copy.
const MAX_CELL_RUNS_PER_TILE_CELLS: u64 = 64;

/// Fewest copies for which a read makes the byte runs of its chunked tiles in parallel.
const PARALLEL_RUNS_FROM: usize = 4096;

/// A tile copied straight from storage into a result buffer: (sink, tile, data file, byte
/// offset in the sink's buffer).
type Direct = (usize, TileKey, usize, usize);

/// A chunked tile whose copies are runs of bytes, decoded chunk by chunk straight into a result
/// buffer, or an unfiltered tile streamed into them (`streamed_job`): (sink, tile, data file,
/// runs `(offset in the tile, offset in the sink's buffer, bytes)`, the ranges `[a, b)` of
/// chunks, or checksum blocks, that hold them).
type DirectChunked = (usize, TileKey, usize, Vec<(usize, usize, usize)>, Vec<(u64, u64)>);

/// The tiles of a read that go straight into the results.
struct DirectReads {
    whole: Vec<Direct>,
    /// Sorted by tile.
    chunked: Vec<DirectChunked>,
    /// Per sink, the runs of its `chunked` jobs in the order of their bytes in the sink's
    /// buffer, checked disjoint: (job, run).
    in_order: Vec<Vec<(usize, usize)>>,
    /// Per (tile, data file) read directly, the bytes a batch holds for it.
    held: FastMap<(TileKey, usize), u64>,
}

impl DirectReads {
    /// The direct reads of the tiles `batch` (sorted, as `whole` and `chunked` are), and where
    /// the batch's chunked jobs start in `chunked`.
    fn of_batch(&self, batch: &[TileKey]) -> (&[Direct], &[DirectChunked], usize) {
        let (Some(&first), Some(&last)) = (batch.first(), batch.last()) else { return (&[], &[], 0) };
        let whole =
            &self.whole[self.whole.partition_point(|d| d.1 < first)..self.whole.partition_point(|d| d.1 <= last)];
        let start = self.chunked.partition_point(|d| d.1 < first);
        let chunked = &self.chunked[start..self.chunked.partition_point(|d| d.1 <= last)];
        (whole, chunked, start)
    }
}

/// The files of one attribute: data, offsets (variable-length), validity (nullable).
#[derive(Clone, Copy)]
struct AttrFiles {
    data: Option<usize>,
    offsets: Option<usize>,
    validity: Option<usize>,
}

impl AttrFiles {
    fn of(specs: &[FileSpec], attr: usize) -> Self {
        let file_of = |kind: FileKind| specs.iter().position(|s| s.attr == attr && s.kind == kind);
        Self {
            data: file_of(FileKind::Data),
            offsets: file_of(FileKind::Offsets),
            validity: file_of(FileKind::Validity),
        }
    }
}

/// The tiles of a batch: whole tiles, and runs of blocks of tiles read in part.
struct BatchTiles {
    whole: Tiles,
    parts: FastMap<(TileKey, usize), BlockRuns>,
}

/// Runs the copies of the tiles `batch`: reads the tiles that go straight into the results,
/// fetches the rest (whole, or the blocks the copies need), then copies tile by tile.
fn run_batch(
    array: &Snapshot,
    specs: &[FileSpec],
    wanted: &[usize],
    batch: &[TileKey],
    by_tile: &TileOps,
    direct: &DirectReads,
    sinks: &mut [Sink<'_>],
) -> Result<()> {
    let (whole_direct, chunked, first_job) = direct.of_batch(batch);
    let is_direct = |key: TileKey, f: usize| direct.held.contains_key(&(key, f));
    read_direct(array, specs, whole_direct, sinks)?;
    read_direct_chunked(array, specs, chunked, (first_job, &direct.in_order), sinks)?;
    // Unfiltered tiles with block checksums, and chunked tiles, of which the copies need a few
    // blocks or chunks: only those are read, verified (and unfiltered).
    let (mut partial, mut whole) = (Vec::new(), Vec::new());
    for &key in batch {
        for &f in wanted.iter().filter(|&&f| !is_direct(key, f)) {
            match partial_blocks(array, specs, key, f, by_tile.of(key)) {
                Some((log2, runs)) => partial.push(((key, f), log2, runs)),
                None => whole.push((key, f)),
            }
        }
    }
    let tiles = BatchTiles { whole: fetch_tiles(array, specs, &whole)?, parts: fetch_blocks(array, specs, &partial)? };
    let copy = |s: &mut Sink<'_>| -> Result<()> {
        let files = AttrFiles::of(specs, s.attr);
        for &key in batch {
            let skip_data = files.data.is_some_and(|f| is_direct(key, f));
            copy_tile(array, specs, &tiles, files, key, by_tile.of(key), s, skip_data)?;
        }
        Ok(())
    };
    // Each attribute has buffers of its own: their copies run in parallel.
    if sinks.len() > 1 {
        array.ctx.install(|| sinks.par_iter_mut().try_for_each(copy))
    } else {
        sinks.iter_mut().try_for_each(copy)
    }
}

/// Direct reads of fixed-size data tiles: an unfiltered tile the tile cache does not take whose
/// only copy is one contiguous run of the whole tile goes from storage straight into the
/// result, and a chunked tile whose copies are runs of bytes (`byte_runs`) has the chunks
/// holding them read and decoded into them (no tile buffer either way), unless the tile cache
/// holds the tile or would take it and the copies need more than half its chunks (the whole
/// tile is then read, and cached). Decided once for all the tiles `keys` of a read.
fn direct_reads(
    array: &Snapshot,
    specs: &[FileSpec],
    keys: &[TileKey],
    by_tile: &TileOps,
    sinks: &[Sink<'_>],
) -> DirectReads {
    let cells_per_tile = array.grid.cells_per_tile();
    let (mut direct, mut chunked) = (Vec::new(), Vec::new());
    let mut in_order = vec![Vec::new(); sinks.len()];
    if array.grid.cell_curve.is_some() {
        // Stored in curve order: tiles go through `fetch_tiles`, which moves them back.
        return DirectReads { whole: direct, chunked, in_order, held: FastMap::default() };
    }
    let cache = array.ctx.tile_cache();
    for (si, s) in sinks.iter().enumerate() {
        let (DataSink::Fixed(buf), Some(fd)) = (&s.data, AttrFiles::of(specs, s.attr).data) else { continue };
        let cs = array.schema().attrs[s.attr].cell_size();
        let tile_bytes = cells_per_tile * cs as u64;
        let first_chunked = chunked.len();
        if specs[fd].filters.is_empty() {
            for &key in keys {
                if cache.admits(tile_bytes) {
                    continue;
                }
                let ops = by_tile.of(key);
                let whole = match ops {
                    [op] => contiguous_runs(cs, &op.shape, &op.src, &op.dst).and_then(|r| match r.as_slice() {
                        [(0, dst, len)] if *len as u64 == tile_bytes => Some(*dst),
                        _ => None,
                    }),
                    _ => None,
                };
                match whole {
                    Some(dst) => direct.push((si, key, fd, dst)),
                    None => chunked.extend(streamed_job(array, specs, (si, key, fd), cs, ops)),
                }
            }
        } else {
            let job = |&key: &TileKey| -> Option<DirectChunked> {
                let frag = &array.fragments[key.0];
                let chunks = frag.chunks.of(fd, key.1)?;
                // A tile whose size is not what its cells imply is read whole, which reports it.
                if frag.files[fd].1[key.1 as usize].unfiltered_size != tile_bytes {
                    return None;
                }
                let runs = byte_runs(cs, by_tile.of(key), cells_per_tile / MAX_CELL_RUNS_PER_TILE_CELLS)?;
                let needed = chunk_ranges(&runs, chunks.log2);
                let count: u64 = needed.iter().map(|(a, b)| b - a).sum();
                let cached = cache.admits(tile_bytes)
                    && (count * 2 > chunks.list.len() as u64 || cache.contains(&cache_key(array, key, fd)));
                (!cached).then_some((si, key, fd, runs, needed))
            };
            // Many copies (points): their runs are made tile by tile on every core.
            if by_tile.ops.len() >= PARALLEL_RUNS_FROM && keys.len() > 1 {
                chunked.extend(array.ctx.install(|| keys.par_iter().filter_map(job).collect::<Vec<_>>()));
            } else {
                chunked.extend(keys.iter().filter_map(job));
            }
        }
        // The plan copies every result cell once, so the runs into one buffer are disjoint
        // (`read_direct_chunked` splits the buffer into them); checked, not assumed.
        match runs_in_order(&chunked[first_chunked..], cs, buf.len()) {
            Some(order) => in_order[si] = order.into_iter().map(|(j, r)| (first_chunked + j, r)).collect(),
            None => chunked.truncate(first_chunked),
        }
    }
    let chunked = in_tile_order(chunked, &mut in_order);
    let held = held_bytes(array, &direct, &chunked);
    DirectReads { whole: direct, chunked, in_order, held }
}

/// A direct job for unfiltered tile `key` of data file `fd` (of sink `si`, cells of `cs`
/// bytes) when it has block checksums and its copies are byte runs: read as a stream of pieces,
/// each verified and copied into the runs as it arrives ([`read_streamed`]), with no tile
/// buffer. The job's block ranges are those the copies `ops` need when the tile is read in part
/// (`partial_blocks`), else the whole tile.
fn streamed_job(
    array: &Snapshot,
    specs: &[FileSpec],
    (si, key, fd): (usize, TileKey, usize),
    cs: usize,
    ops: &[CopyOp],
) -> Option<DirectChunked> {
    let frag = &array.fragments[key.0];
    let (blocks, log2) = (frag.blocks.count(fd, key.1)?, frag.blocks.log2);
    let entry = frag.files[fd].1[key.1 as usize];
    let cells = array.grid.cells_per_tile();
    let tile_bytes = cells * cs as u64;
    // A tile whose sizes are not what its cells imply is read whole, which reports it.
    if entry.stored_size != tile_bytes || entry.unfiltered_size != tile_bytes || (1usize << log2) > COLD_READ_FIRST {
        return None;
    }
    let runs = byte_runs(cs, ops, cells / MAX_CELL_RUNS_PER_TILE_CELLS)?;
    let needed = partial_blocks(array, specs, key, fd, ops).map_or_else(|| vec![(0, blocks)], |(_, r)| r);
    Some((si, key, fd, runs, needed))
}

/// `chunked` tile by tile (batches are runs of tiles), the job numbers of `in_order` following
/// their jobs.
fn in_tile_order(chunked: Vec<DirectChunked>, in_order: &mut [Vec<(usize, usize)>]) -> Vec<DirectChunked> {
    let mut tile_order: Vec<usize> = (0..chunked.len()).collect();
    tile_order.sort_unstable_by_key(|&j| (chunked[j].1, chunked[j].0));
    let mut moved_to = vec![0usize; chunked.len()];
    for (to, &from) in tile_order.iter().enumerate() {
        moved_to[from] = to;
    }
    let mut slots: Vec<Option<DirectChunked>> = chunked.into_iter().map(Some).collect();
    let chunked: Vec<DirectChunked> = tile_order.iter().filter_map(|&j| slots[j].take()).collect();
    for (job, _) in in_order.iter_mut().flatten() {
        *job = moved_to[*job];
    }
    chunked
}

/// What a batch holds for each direct read: nothing for a whole tile (read into the result),
/// the stored chunks and any decode buffers larger than the per-thread ones for a chunked one.
fn held_bytes(array: &Snapshot, direct: &[Direct], chunked: &[DirectChunked]) -> FastMap<(TileKey, usize), u64> {
    let threads = array.ctx.compute_threads();
    let mut held: FastMap<(TileKey, usize), u64> = direct.iter().map(|d| ((d.1, d.2), 0)).collect();
    for (_, key, f, _, needed) in chunked {
        // Tiles of `chunked` have chunks, or are unfiltered and streamed (`streamed_job`: at
        // most the blocks it reads, which a storage that cannot stream reads whole).
        let frag = &array.fragments[key.0];
        let stored = frag.files[*f].1[key.1 as usize].stored_size;
        let streamed = || {
            let blocks = needed.iter().map(|(a, b)| (b - a) << frag.blocks.log2);
            blocks.fold(0u64, u64::saturating_add).min(stored)
        };
        let bytes = frag.chunks.of(*f, key.1).map_or_else(streamed, |chunks| {
            let stored = stored_offsets(&chunks.list).unwrap_or_default();
            let at = |j: u64| stored.get(j as usize).copied().unwrap_or(0);
            let read = needed.iter().map(|&(a, b)| at(b).saturating_sub(at(a))).fold(0u64, u64::saturating_add);
            let count = needed.iter().map(|(a, b)| b - a).sum();
            read.saturating_add(scattered_decode_bytes(chunks.log2, count, threads))
        });
        held.insert((*key, *f), bytes);
    }
    held
}

/// The runs of the chunked jobs `jobs` (of one sink with cells of `cs` bytes, whose buffer holds
/// `len` bytes) in the order of their bytes in the buffer, as (job, run), empty runs left out;
/// `None` if two of them overlap or one ends past the buffer. Runs are whole cells, so when they
/// are about as many as the buffer's cells (points, a column) they are ordered by the cell they
/// start at, in one pass; else sorted.
fn runs_in_order(jobs: &[DirectChunked], cs: usize, len: usize) -> Option<Vec<(usize, usize)>> {
    let runs = jobs.iter().enumerate().flat_map(|(j, job)| job.3.iter().enumerate().map(move |(r, run)| (j, r, run)));
    let count = jobs.iter().map(|j| j.3.len()).sum::<usize>();
    let cells = len / cs.max(1);
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(count);
    if cells <= count.saturating_mul(8) {
        // Per cell, the run that starts there (`usize::MAX`: none); two runs starting at the
        // same cell overlap.
        let mut starts = vec![usize::MAX; cells];
        let mut at: Vec<(usize, usize)> = Vec::with_capacity(count);
        for (j, r, &(_, dst, n)) in runs {
            if n == 0 {
                continue;
            }
            let slot = starts.get_mut(dst / cs.max(1)).filter(|_| dst % cs.max(1) == 0)?;
            if *slot != usize::MAX {
                return None;
            }
            *slot = at.len();
            at.push((j, r));
        }
        order.extend(starts.into_iter().filter(|&i| i != usize::MAX).map(|i| at[i]));
    } else {
        let mut keyed: Vec<(usize, usize, usize)> =
            runs.filter(|(_, _, run)| run.2 > 0).map(|(j, r, run)| (run.1, j, r)).collect();
        // Each job's runs mostly come in the order of their places (a box's rows): the stable
        // sort finds those sorted stretches and merges them, where a quicksort starts over.
        keyed.sort();
        order.extend(keyed.into_iter().map(|(_, j, r)| (j, r)));
    }
    let mut end = 0usize;
    for &(j, r) in &order {
        let (_, dst, n) = jobs[j].3[r];
        if dst < end {
            return None;
        }
        end = dst.checked_add(n)?;
    }
    (end <= len).then_some(order)
}

/// Copies tile `key`'s cells of one attribute (copies `ops`) into sink `s` (its data unless
/// `skip_data`: read directly), then its validity.
#[allow(clippy::too_many_arguments)]
fn copy_tile(
    array: &Snapshot,
    specs: &[FileSpec],
    tiles: &BatchTiles,
    files: AttrFiles,
    key: TileKey,
    ops: &[CopyOp],
    s: &mut Sink<'_>,
    skip_data: bool,
) -> Result<()> {
    let a = &array.schema().attrs[s.attr];
    let get = |f: Option<usize>| f.and_then(|f| tiles.whole.get(&(key, f)));
    let missing =
        |what: &str| Error::corrupt(file_path(array, key.0, &format!("a{}", s.attr)), format!("{what} missing"));
    match &mut s.data {
        DataSink::Fixed(_) if skip_data => {}
        DataSink::Fixed(buf) => {
            let cs = a.cell_size();
            let _t = stats::timer(Timer::ReaderCopyFixedCells);
            if let Some(runs) = files.data.and_then(|f| tiles.parts.get(&(key, f))) {
                copy_from_runs(cs as u64, runs, ops, buf).ok_or_else(|| missing("data blocks"))?;
            } else {
                let src = get(files.data).ok_or_else(|| missing("data tile"))?;
                for op in ops {
                    copy_strided(cs, &op.shape, src, &op.src, buf, &op.dst);
                    count_copied(false, op.shape.iter().product::<u64>() * cs as u64);
                }
            }
        }
        DataSink::Var { refs, blobs } => {
            let data = get(files.data).ok_or_else(|| missing("data tile"))?;
            let offs = get(files.offsets).ok_or_else(|| missing("offsets tile"))?;
            let _t = stats::timer(Timer::ReaderCopyVarCells);
            let perm = array.grid.permutation();
            let at = |c: u64| perm.as_ref().map_or(c, |p| u64::from(p.to_physical[c as usize]));
            copy_var_refs(array.grid.cells_per_tile(), data, offs, ops, refs, blobs, at).map_err(|c| {
                Error::corrupt_tile(
                    file_path(array, key.0, &specs[files.offsets.unwrap_or(0)].name),
                    key.1,
                    format!("offset of cell {c} is out of order or past the data"),
                )
            })?;
        }
    }
    if let Some(v) = s.validity.as_deref_mut() {
        let src = get(files.validity).ok_or_else(|| missing("validity tile"))?;
        for op in ops {
            copy_strided(1, &op.shape, src, &op.src, as_uninit(v), &op.dst);
            count_copied(false, op.shape.iter().product::<u64>());
        }
    }
    Ok(())
}

/// Copies fixed-size cells (`cs` bytes) from the runs of blocks read of a tile. Each copy lies
/// inside one run (the runs were made from the copies' byte spans): it copies from that run,
/// its first cell shifted. `None` when a copy's run is missing.
fn copy_from_runs(cs: u64, runs: &BlockRuns, ops: &[CopyOp], buf: OutBytes<'_>) -> Option<()> {
    for op in ops {
        let first = op.src.offset * cs;
        let k = runs.partition_point(|r| r.0 <= first).saturating_sub(1);
        let (start, bytes) = runs.get(k)?;
        let src = Strided { offset: op.src.offset - start / cs, strides: op.src.strides.clone() };
        copy_strided(cs as usize, &op.shape, bytes, &src, buf, &op.dst);
        count_copied(false, op.shape.iter().product::<u64>() * cs);
    }
    Some(())
}

/// Points the result cells of variable-length copies at their values in data tile `data` (kept
/// in `blobs`), by the tile's offsets; `stored(c)` is where row-major tile cell `c` is stored
/// (the cell itself, or its place along the cell order's curve). On a bad offset, the first bad
/// cell of the tile.
fn copy_var_refs(
    cells_per_tile: u64,
    data: &Bytes,
    offs: &[u8],
    ops: &[CopyOp],
    refs: &mut [(u32, u64, u64)],
    blobs: &mut Vec<Bytes>,
    stored: impl Fn(u64) -> u64,
) -> std::result::Result<(), u64> {
    let blob = blobs.len() as u32;
    blobs.push(data.clone());
    let dlen = data.len() as u64;
    let off_at = |c: u64| -> u64 {
        let i = c as usize * 8;
        let mut w = [0u8; 8];
        w.copy_from_slice(&offs[i..i + 8]);
        u64::from_le_bytes(w)
    };
    let mut bad = None;
    let mut copied = 0u64;
    for op in ops {
        for_each_cell_pair(&op.shape, &op.src, &op.dst, |c, d| {
            let sc = stored(c);
            let start = off_at(sc);
            let end = if sc + 1 < cells_per_tile { off_at(sc + 1) } else { dlen };
            if start > end || end > dlen {
                bad = Some(sc);
                return;
            }
            refs[d as usize] = (blob, start, end - start);
            copied += end - start + 8;
        });
    }
    count_copied(true, copied);
    bad.map_or(Ok(()), Err)
}

/// Counts bytes copied from tiles into results.
pub(crate) fn count_copied(var: bool, bytes: u64) {
    let c = if var { Counter::ReaderNumVarCellBytesCopied } else { Counter::ReaderNumFixedCellBytesCopied };
    stats::add(c, bytes);
}

/// The runs of blocks read of one tile: (first byte in the tile, bytes).
type BlockRuns = Vec<(u64, Bytes)>;

/// A tile of a file read in part: (tile, file), the size of its units (blocks or chunks) as a
/// power of two, and the unit ranges `[a, b)` to read.
type PartialTile = ((TileKey, usize), u32, Vec<(u64, u64)>);

/// The unit ranges `[a, b)` of tile `key` of file `f` that the copies `ops` read, with the
/// units' size (log2), when reading only them pays: a fixed-size data file, a tile with block
/// checksums (unfiltered) or chunks (filtered) that the tile cache does not hold, and at most
/// half of its units needed.
fn partial_blocks(
    array: &Snapshot,
    specs: &[FileSpec],
    key: TileKey,
    f: usize,
    ops: &[CopyOp],
) -> Option<(u32, Vec<(u64, u64)>)> {
    let spec = &specs[f];
    let attr = &array.schema().attrs[spec.attr];
    // Units of a tile stored in curve order do not hold a box's row-major runs.
    if spec.kind != FileKind::Data || attr.is_var() || array.grid.cell_curve.is_some() {
        return None;
    }
    let frag = &array.fragments[key.0];
    let (units, log2) = if spec.filters.is_empty() {
        (frag.blocks.count(f, key.1)?, frag.blocks.log2)
    } else {
        let c = frag.chunks.of(f, key.1)?;
        (c.list.len() as u64, c.log2)
    };
    let cache = array.ctx.tile_cache();
    let entry = frag.files[f].1[key.1 as usize];
    if cache.admits(entry.unfiltered_size) && cache.contains(&cache_key(array, key, f)) {
        return None;
    }
    let cs = attr.cell_size() as u64;
    if cs == 0 || !(1u64 << log2).is_multiple_of(cs) {
        return None; // runs must start on a cell boundary
    }
    // A tile whose sizes are not what its cells imply is read whole, which reports it.
    let expected = tile_cells(array, key.0, key.1) * cs;
    if entry.unfiltered_size != expected || (spec.filters.is_empty() && entry.stored_size != expected) {
        return None;
    }
    let spans = ops.iter().map(|op| {
        let last: u64 = op.shape.iter().zip(&op.src.strides).map(|(n, s)| n.saturating_sub(1) * s).sum();
        (op.src.offset * cs, (op.src.offset + last + 1) * cs)
    });
    units_read_in_part(spans, log2, units).map(|out| (log2, out))
}

/// The ranges `[a, b)` of units (checksum blocks or chunks of `2^log2` bytes, `units` of them in
/// the tile) that copies reading the byte spans `[first, end)` of a tile need, merged, when the
/// reader reads only them: when they are at most half the tile's units. The reader's rule, which
/// a layout advisor pricing reads applies too.
pub fn units_read_in_part(
    byte_spans: impl IntoIterator<Item = (u64, u64)>,
    log2: u32,
    units: u64,
) -> Option<Vec<(u64, u64)>> {
    let out =
        merge_ranges(byte_spans.into_iter().map(|(first, end)| (first >> log2, ((end - 1) >> log2) + 1)).collect());
    let needed: u64 = out.iter().map(|(a, b)| b - a).sum();
    (needed * 2 <= units).then_some(out)
}

/// Reads the units `runs` of each tile of `partial`, verifies each block's or chunk's checksum
/// (and unfilters chunks), and returns per tile its runs as (first byte in the unfiltered tile,
/// bytes). Such tiles are not cached.
fn fetch_blocks(
    array: &Snapshot,
    specs: &[FileSpec],
    partial: &[PartialTile],
) -> Result<FastMap<(TileKey, usize), BlockRuns>> {
    if partial.is_empty() {
        return Ok(FastMap::default());
    }
    let _t = stats::timer(Timer::ReaderFetchTiles);
    // The caller reads too (`Context::io_map`).
    let tiles = array.ctx.io_map(&array.uri, partial.iter().collect(), |_, ((key, f), log2, runs)| {
        let (key, f) = (*key, *f);
        let spec = &specs[f];
        let (runs, read) = if spec.filters.is_empty() {
            read_blocks(array, spec, key, f, *log2, runs)?
        } else {
            read_chunks(array, spec, key, f, *log2, runs)?
        };
        let unfiltered: u64 = runs.iter().map(|r| r.1.len() as u64).sum();
        stats::add(Counter::ReaderNumAttrTilesTouched, 1);
        count_fetched(array.schema(), spec, read, unfiltered);
        Ok(((key, f), runs))
    })?;
    Ok(tiles.into_iter().collect())
}

/// Reads blocks `runs` of unfiltered tile `key` of file `f`, verifying each block's checksum:
/// the runs and the bytes read.
fn read_blocks(
    array: &Snapshot,
    spec: &FileSpec,
    key: TileKey,
    f: usize,
    log2: u32,
    runs: &[(u64, u64)],
) -> Result<(BlockRuns, u64)> {
    let frag = &array.fragments[key.0];
    let entry = frag.files[f].1[key.1 as usize];
    let path = file_path(array, key.0, &spec.name);
    let sums = block_sums(array, key, f)?.unwrap_or(&[]);
    let mut out = Vec::with_capacity(runs.len());
    let mut read = 0u64;
    for &(a, b) in runs {
        let start = a << log2;
        let end = (b << log2).min(entry.stored_size);
        // Mapped files give their bytes in place: blocks are verified and copied from the map.
        let run = array
            .ctx
            .storage()
            .read_immutable(&path, entry.offset + start, end - start)
            .map_err(|e| storage_err(&path, e))?;
        for (i, block) in run.chunks(1 << log2).enumerate() {
            let k = a as usize + i;
            let sum = xxh3_64(block);
            let want = sums.get(k).copied().unwrap_or(!sum);
            if sum != want {
                return Err(Error::block_checksum(&path, key.1, k, (want, sum)));
            }
        }
        read += end - start;
        out.push((start, run));
    }
    Ok((out, read))
}

/// Reads chunks `runs` of chunked tile `key` of file `f` and unfilters them, verifying each
/// chunk's checksum: the runs (unfiltered) and the stored bytes read.
fn read_chunks(
    array: &Snapshot,
    spec: &FileSpec,
    key: TileKey,
    f: usize,
    log2: u32,
    runs: &[(u64, u64)],
) -> Result<(BlockRuns, u64)> {
    let frag = &array.fragments[key.0];
    let entry = frag.files[f].1[key.1 as usize];
    let path = file_path(array, key.0, &spec.name);
    let none = TileChunks { log2, list: Vec::new() };
    let chunks = frag.chunks.of(f, key.1).unwrap_or(&none);
    let starts = stored_offsets(&chunks.list).unwrap_or_default();
    let tile = ChunkedTile::of(spec, entry.unfiltered_size, chunks);
    let mut out = Vec::with_capacity(runs.len());
    let mut read = 0u64;
    for &(a, b) in runs {
        let (Some(&s0), Some(&s1)) = (starts.get(a as usize), starts.get(b as usize)) else {
            return Err(Error::corrupt_tile(
                &path,
                key.1,
                format!("chunks {a}..{b} of {} do not exist", chunks.list.len()),
            ));
        };
        let raw =
            array.ctx.storage().read_immutable(&path, entry.offset + s0, s1 - s0).map_err(|e| storage_err(&path, e))?;
        let lo = a << log2;
        let _u = stats::timer(Timer::ReaderUnfilterTiles);
        let run = tile
            .decode(a as usize..b as usize, &raw)
            .map_err(|(j, d)| Error::corrupt_tile(&path, key.1, format!("chunk {j}: {d}")))?;
        read += s1 - s0;
        out.push((lo, Bytes::from_vec(run)));
    }
    Ok((out, read))
}

/// The copies `ops` of cells of `cs` bytes as runs of bytes `(offset in the tile, offset in the
/// result, length)`: one per cell for points (with no allocation each), the contiguous runs of a
/// box, and one per cell of a box with no runs longer than a cell (a column of a row-major
/// tile), as long as such boxes copy at most `max_cell_runs` cells in all (more runs cost more
/// to sort than decoding the tile into a buffer and copying from it); else `None`.
fn byte_runs(cs: usize, ops: &[CopyOp], max_cell_runs: u64) -> Option<Vec<(usize, usize, usize)>> {
    let mut runs = Vec::with_capacity(ops.len());
    let mut cell_runs = 0u64;
    for op in ops {
        if op.shape.iter().all(|&n| n == 1) {
            runs.push((op.src.offset as usize * cs, op.dst.offset as usize * cs, cs));
        } else if let Some(r) = contiguous_runs(cs, &op.shape, &op.src, &op.dst) {
            runs.extend(r);
        } else {
            cell_runs = cell_runs.saturating_add(op.shape.iter().product());
            if cell_runs > max_cell_runs {
                return None;
            }
            for_each_cell_pair(&op.shape, &op.src, &op.dst, |s, d| {
                runs.push((s as usize * cs, d as usize * cs, cs));
            });
        }
    }
    Some(runs)
}

/// The ranges `[a, b)` of chunks of `2^log2` bytes that hold the byte runs `runs` (`(offset,
/// _, length)`), merged.
fn chunk_ranges(runs: &[(usize, usize, usize)], log2: u32) -> Vec<(u64, u64)> {
    let spans = runs.iter().filter(|r| r.2 > 0);
    merge_ranges(spans.map(|&(src, _, len)| ((src as u64) >> log2, ((src + len - 1) as u64 >> log2) + 1)).collect())
}

/// Unit ranges `[a, b)`, sorted and with overlapping or touching ones merged.
fn merge_ranges(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Reads the chunked tiles `jobs` and decodes them into their runs of their sinks' buffers: the
/// stored chunks the runs need are read in parallel, then every one of them is verified and
/// decoded in parallel, straight into a run that holds it whole, else through a per-thread
/// buffer. Unfiltered tiles among the jobs are streamed into their runs ([`read_streamed`]).
/// `(first, in_order)`: the number of `jobs[0]` among all the read's chunked jobs, and per sink
/// the runs of all of them in the order of their bytes in its buffer ([`DirectReads::in_order`]).
fn read_direct_chunked(
    array: &Snapshot,
    specs: &[FileSpec],
    jobs: &[DirectChunked],
    (first, in_order): (usize, &[Vec<(usize, usize)>]),
    sinks: &mut [Sink<'_>],
) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let storage = array.ctx.storage();
    let streamed = |f: usize| specs[f].filters.is_empty();
    let fetch = stats::timer(Timer::ReaderFetchTiles);
    let raws: Vec<Vec<(usize, Bytes)>> = array.ctx.install_io_for(&array.uri, || {
        jobs.par_iter()
            .map(|(_, key, f, _, needed)| {
                if streamed(*f) {
                    return Ok(Vec::new()); // read as it is copied
                }
                let path = file_path(array, key.0, &specs[*f].name);
                let frag = &array.fragments[key.0];
                let entry = frag.files[*f].1[key.1 as usize];
                let chunks = frag.chunks.of(*f, key.1).map_or(&[][..], |c| c.list.as_slice());
                let starts = stored_offsets(chunks).unwrap_or_default();
                needed
                    .iter()
                    .map(|&(a, b)| {
                        let (Some(&s0), Some(&s1)) = (starts.get(a as usize), starts.get(b as usize)) else {
                            let what = format!("chunks {a}..{b} of {} do not exist", chunks.len());
                            return Err(Error::corrupt_tile(&path, key.1, what));
                        };
                        let raw = storage
                            .read_immutable(&path, entry.offset + s0, s1 - s0)
                            .map_err(|e| storage_err(&path, e))?;
                        Ok((a as usize, raw))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<_>>()
    })?;
    drop(fetch);
    // Each job's pieces of its sink's buffer: the plan copies every result cell once, so the
    // runs of a sink are disjoint and the buffer splits into them.
    let mut pieces: Vec<Vec<(u64, OutBytes<'_>)>> = jobs.iter().map(|_| Vec::new()).collect();
    for (s, order) in sinks.iter_mut().zip(in_order) {
        let DataSink::Fixed(buf) = &mut s.data else { continue };
        let (mut rest, mut consumed): (&mut [MaybeUninit<u8>], usize) = (&mut **buf, 0);
        for &(job, run) in order {
            // Only this batch's jobs.
            let Some(i) = job.checked_sub(first).filter(|&i| i < jobs.len()) else { continue };
            let (src, dst, len) = jobs[i].3[run];
            // In order, disjoint and inside the buffer (`runs_in_order`).
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(dst - consumed);
            let (slot, tail) = tail.split_at_mut(len);
            pieces[i].push((src as u64, slot));
            (rest, consumed) = (tail, dst + len);
        }
    }
    let (stream, decode): (Vec<_>, Vec<_>) = jobs.iter().zip(raws).zip(pieces).partition(|((j, _), _)| streamed(j.2));
    // The caller streams too (`Context::io_map`): one thread reads on the caller alone.
    let stream: Vec<_> = stream.into_iter().map(|((job, _), pieces)| (job, pieces)).collect();
    array.ctx.io_map(&array.uri, stream, |_, (job, pieces)| {
        read_streamed(array, &specs[job.2], (job.1, job.2), &job.4, pieces)
    })?;
    array.ctx.install(|| {
        decode.into_par_iter().try_for_each(|((job, raw), pieces)| decode_direct(array, specs, job, &raw, pieces))
    })
}

/// Decodes the chunks `raw` (first chunk, stored bytes) of the chunked job `job` into the runs'
/// places `pieces` (offset in the tile, bytes in the result).
fn decode_direct(
    array: &Snapshot,
    specs: &[FileSpec],
    (_, key, f, runs, needed): &DirectChunked,
    raw: &[(usize, Bytes)],
    pieces: Vec<(u64, OutBytes<'_>)>,
) -> Result<()> {
    let (frag, spec) = (&array.fragments[key.0], &specs[*f]);
    let entry = frag.files[*f].1[key.1 as usize];
    let path = file_path(array, key.0, &spec.name);
    let chunks = frag.chunks.of(*f, key.1).ok_or_else(|| Error::corrupt_tile(&path, key.1, "chunks missing"))?;
    let tile = ChunkedTile::of(spec, entry.unfiltered_size, chunks);
    let stored: Vec<(usize, &[u8])> = raw.iter().map(|(a, b)| (*a, &b[..])).collect();
    let _u = stats::timer(Timer::ReaderUnfilterTiles);
    tile.decode_scattered(&stored, pieces)
        .map_err(|(j, d)| Error::corrupt_tile(&path, key.1, format!("chunk {j}: {d}")))?;
    let at = |j: u64| (j << chunks.log2).min(entry.unfiltered_size);
    let decoded: u64 = needed.iter().map(|&(a, b)| at(b) - at(a)).sum();
    stats::add(Counter::ReaderNumAttrTilesTouched, 1);
    count_fetched(array.schema(), spec, stored.iter().map(|s| s.1.len() as u64).sum(), decoded);
    count_copied(false, runs.iter().map(|r| r.2 as u64).sum());
    Ok(())
}

/// Reads the direct tiles `(sink, tile, file, destination byte)` into their sinks' buffers, in
/// parallel, verifying each tile's checksum in place. A tile with block checksums is read in
/// pieces of whole blocks ([`read_blocked`]), each verified against its blocks' checksums once
/// those have been checked against the tile checksum.
fn read_direct(
    array: &Snapshot,
    specs: &[FileSpec],
    direct: &[(usize, TileKey, usize, usize)],
    sinks: &mut [Sink<'_>],
) -> Result<()> {
    if direct.is_empty() {
        return Ok(());
    }
    // (the tile's part of the destination, tile, file, whether it is read in pieces of blocks).
    let mut jobs: Vec<(OutBytes<'_>, TileKey, usize, bool)> = Vec::new();
    for (si, s) in sinks.iter_mut().enumerate() {
        let DataSink::Fixed(buf) = &mut s.data else { continue };
        let mut mine: Vec<(usize, TileKey, usize)> =
            direct.iter().filter(|d| d.0 == si).map(|d| (d.3, d.1, d.2)).collect();
        mine.sort_unstable_by_key(|m| m.0);
        let mut rest: OutBytes<'_> = buf;
        let mut consumed = 0usize;
        for (dst, key, f) in mine {
            let frag = &array.fragments[key.0];
            let entry = frag.files[f].1[key.1 as usize];
            let path = || file_path(array, key.0, &specs[f].name);
            if entry.unfiltered_size != entry.stored_size {
                let what = format!("stored size {} where {} is expected", entry.stored_size, entry.unfiltered_size);
                return Err(Error::corrupt_tile(path(), key.1, what));
            }
            let len = entry.stored_size as usize;
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(dst - consumed);
            let (slot, tail) = tail.split_at_mut(len.min(tail.len()));
            consumed = dst + slot.len();
            rest = tail;
            if slot.len() != len {
                return Err(Error::corrupt_tile(
                    path(),
                    key.1,
                    format!("stored size {len} where {} is expected", slot.len()),
                ));
            }
            stats::add(Counter::ReaderNumAttrTilesTouched, 1);
            count_fetched(array.schema(), &specs[f], entry.stored_size, entry.unfiltered_size);
            count_copied(false, entry.stored_size);
            // Blocks no larger than the first piece of a cold read keep pieces on block bounds.
            let in_blocks = frag.blocks.count(f, key.1).is_some()
                && len > DIRECT_PIECE
                && (1usize << frag.blocks.log2) <= COLD_READ_FIRST;
            jobs.push((slot, key, f, in_blocks));
        }
    }
    // Fewer tiles than threads: each large tile is read in parallel pieces.
    let split = jobs.len() < array.ctx.io_threads_for(&array.uri);
    array.ctx.io_map(&array.uri, jobs, |_, job| read_direct_tile(array, specs, job, split)).map(drop)
}

/// Reads one direct tile into its part of the destination (`slot`) and verifies it: whole, or
/// (`in_blocks`) in pieces of blocks, in parallel when `split`.
fn read_direct_tile(
    array: &Snapshot,
    specs: &[FileSpec],
    (slot, key, f, in_blocks): (OutBytes<'_>, TileKey, usize, bool),
    split: bool,
) -> Result<()> {
    let storage = array.ctx.storage();
    let path = file_path(array, key.0, &specs[f].name);
    let frag = &array.fragments[key.0];
    let entry = frag.files[f].1[key.1 as usize];
    let log2 = frag.blocks.log2;
    let bad = |sums| Error::tile_checksum(&path, key.1, sums);
    if in_blocks {
        let pieces = split.then_some(&array.ctx);
        let how = (storage.as_ref(), pieces);
        return read_blocked(how, &path, entry.offset, slot, (entry.checksum, log2), &bad);
    }
    storage.read_immutable_into(&path, entry.offset, slot).map_err(|e| storage_err(&path, e))?;
    // SAFETY: the read succeeded, so it wrote every byte of `slot`.
    #[allow(unsafe_code)]
    let slot = unsafe { assume_written(slot) };
    verify_tile(slot, entry.checksum, frag.blocks.count(f, key.1).map(|_| log2)).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(frag: usize, tile: u64, dst: u64) -> CopyOp {
        let one = |offset| Strided { offset, strides: smallvec::smallvec![1] };
        CopyOp { frag, tile, shape: smallvec::smallvec![1], src: one(0), dst: one(dst) }
    }

    fn dsts(t: &TileOps, key: TileKey) -> Vec<u64> {
        t.of(key).iter().map(|o| o.dst.offset).collect()
    }

    /// Runs of two jobs into one buffer of 4-byte cells come out in buffer order, whether
    /// ordered cell by cell (about as many runs as cells) or sorted (few long runs); an
    /// overlap or a run past the buffer is refused.
    #[test]
    fn runs_come_in_buffer_order_and_must_be_disjoint() {
        let job = |runs: Vec<(usize, usize, usize)>| -> DirectChunked { (0, (0, 0), 0, runs, Vec::new()) };
        // Points: one cell each, interleaved between the jobs, and an empty run left out.
        let jobs = [job(vec![(0, 12, 4), (8, 0, 4), (4, 20, 0)]), job(vec![(0, 8, 4), (4, 4, 4)])];
        assert_eq!(runs_in_order(&jobs, 4, 16), Some(vec![(0, 1), (1, 1), (1, 0), (0, 0)]));
        assert_eq!(runs_in_order(&jobs, 4, 12), None, "a run past the buffer");
        let overlap = [job(vec![(0, 12, 4)]), job(vec![(0, 12, 4)])];
        assert_eq!(runs_in_order(&overlap, 4, 16), None, "two runs into one cell");
        // Rows of a box: few runs in a large buffer, sorted.
        let rows = [job(vec![(0, 4000, 400), (0, 0, 400)]), job(vec![(0, 400, 3600)])];
        assert_eq!(runs_in_order(&rows, 4, 40_000), Some(vec![(0, 1), (1, 0), (0, 0)]));
        let rows = [job(vec![(0, 4000, 400), (0, 0, 400)]), job(vec![(0, 396, 3600)])];
        assert_eq!(runs_in_order(&rows, 4, 40_000), None, "overlapping rows");
        let long = [job(vec![(0, 0, 8), (0, 4, 4)])];
        assert_eq!(runs_in_order(&long, 4, 16), None, "a run starting inside another");
    }

    #[test]
    fn copies_group_by_tile_in_their_order() {
        // Interleaved tiles are moved into one run each, keeping each tile's order.
        let t = TileOps::group(vec![op(0, 3, 0), op(1, 3, 1), op(0, 3, 2), op(0, 1, 3), op(1, 3, 4), op(0, 1, 5)]);
        assert_eq!(t.ops.len(), 6);
        assert_eq!(dsts(&t, (0, 3)), [0, 2]);
        assert_eq!(dsts(&t, (1, 3)), [1, 4]);
        assert_eq!(dsts(&t, (0, 1)), [3, 5]);
        assert!(dsts(&t, (2, 0)).is_empty());
        // Runs already grouped are taken as they are.
        let t = TileOps::group(vec![op(0, 2, 7), op(0, 2, 1), op(0, 1, 0)]);
        assert_eq!(t.ops.iter().map(|o| o.dst.offset).collect::<Vec<_>>(), [7, 1, 0]);
        assert_eq!(t.runs.len(), 2);
        assert!(TileOps::group(Vec::new()).runs.is_empty());
    }
}
