//! Dense writes. A `DenseWriter` owns one new fragment covering a subarray `W`. Submits deliver
//! cells either as sub-rectangles of `W` in row- or column-major order, or as consecutive runs of
//! `W`'s cells in global order. Cells are copied into space tiles in whole contiguous runs; a tile
//! is filtered and written as soon as every one of its cells inside `W` has arrived, so memory
//! stays bounded by the tiles in progress. Cells of a tile outside `W` hold the fill value and are
//! never returned by reads (they lie outside the fragment's non-empty domain). Tiles are built
//! row-major; under a curve cell order each finished tile's cells are moved into curve order
//! with the tile shape's cached permutation (`geometry/order.rs`) just before filtering.

use std::collections::HashMap;
use std::sync::Arc;

use rayon::prelude::*;

use super::{FragmentWriter, UnfilteredTile};
use crate::config::{check_limit, memory_limit, TileChunking};
use crate::error::{QueryError, Result};
use crate::fragment::{
    chunks_tile, summarize, summarize_runs, summarized_from_data, FileKind, FileSpec, FragmentMetadata, FragmentName,
    SummaryKind, TileEntry, TileRuns, TileSummary,
};
use crate::geometry::Layout;
use crate::geometry::{
    cells, checked_cells, contiguous_runs, copy_strided, for_each_cell_pair, intersect, meet, split_interval, strides,
    within, Rect, Strided, Subarray, TilePermutation,
};
use crate::input::{validate, AttrInput};
use crate::schema::{ArraySchema, CellOrder};
use crate::snapshot::{shared_lock, Snapshot};
use crate::stats::{self, Counter, Timer};
use crate::uninit::as_uninit;

/// One box of cells moving from a submit's buffers into one tile.
#[derive(Debug)]
struct Placement {
    shape: Vec<u64>,
    src: Strided,
    dst: Strided,
}

/// Where a variable-length cell's bytes are: a retained submit chunk and a byte range.
#[derive(Debug, Clone, Copy)]
struct VarRef {
    chunk: u32,
    start: u64,
    len: u64,
}

const FILL_CHUNK: u32 = u32::MAX;

/// A tile a submit fills: its position among the fragment's tiles, its buffers, and the boxes of
/// the submit's cells that go into it.
type TileJob = (u64, PartialTile, Vec<Placement>);

/// A tile that has received some but not all of its cells.
#[derive(Debug)]
struct PartialTile {
    /// Per fragment file: the unfiltered buffer (fixed data and validity), empty for var files.
    buffers: Vec<Vec<u8>>,
    /// Per variable-length attribute (in schema order of var attributes): a ref per tile cell.
    var: Vec<Vec<VarRef>>,
    /// Cells inside `W` still to arrive.
    remaining: u64,
    /// Per fragment file: written straight from the submit's buffer (see `direct_files`).
    direct: Vec<bool>,
    /// Once complete: whether its summaries are recorded (it lies whole inside the fragment).
    summarize: bool,
}

/// A retained copy of one submit's variable-length data.
#[derive(Debug)]
struct VarChunk {
    data: Arc<Vec<u8>>,
}

/// Writes one dense fragment; see the module documentation.
#[derive(Debug)]
pub struct DenseWriter {
    snap: Snapshot,
    rect: Rect,
    layout: Layout,
    specs: Vec<FileSpec>,
    frag: Option<FragmentWriter>,
    trange: Rect,
    /// Number of tiles of `trange`.
    tiles: u64,
    partial: HashMap<u64, PartialTile>,
    var_chunks: Vec<Vec<VarChunk>>,
    /// Tile position and cells before it, for global-order submits.
    global_pos: (u64, u64),
    cursor: u64,
    submitted: Vec<Rect>,
    written: u64,
    total: u64,
    poisoned: bool,
    /// Shared lock on the array held until the fragment is committed or dropped, so vacuum
    /// never takes an unfinished fragment for a crashed writer's remains.
    _lock: Option<std::sync::Arc<crate::storage::LockGuard>>,
}

impl DenseWriter {
    /// Makes the fragment a consolidation's output replacing `inputs` (see
    /// `FragmentWriter::set_replaces`).
    pub(crate) fn set_replaces(&mut self, inputs: Vec<crate::commit::Placed>) {
        if let Some(f) = self.frag.as_mut() {
            f.set_replaces(inputs);
        }
    }

    /// A writer of `subarray` (cells arriving in `layout`) into a new fragment called `name`.
    pub(crate) fn named(snap: &Snapshot, subarray: &Subarray, layout: Layout, name: FragmentName) -> Result<Self> {
        let schema = snap.schema();
        if layout == Layout::Unordered {
            return Err(QueryError::Layout("dense writes take layout row-major, col-major or global".into()).into());
        }
        let norm = subarray.normalize(schema)?;
        if norm.iter().any(|r| r.len() != 1) {
            return Err(QueryError::BadSubarray("a dense write takes exactly one range per dimension".into()).into());
        }
        let rect: Rect = norm.into_iter().map(|r| r[0]).collect();
        let total = checked_cells(&rect).ok_or_else(|| {
            QueryError::BadSubarray("the subarray holds 2^64 cells or more, more than a write can count".into())
        })?;
        let grid = &snap.grid;
        let trange = grid.tile_range(&rect);
        // Tile count < 2^64 (a schema rule). The fragment keeps an entry per tile and file from
        // the start: refuse a subarray whose entries alone would not fit in memory.
        let tiles = cells(&trange);
        let specs = FileSpec::for_schema(schema);
        let entry = std::mem::size_of::<Option<TileEntry>>() as u128;
        let bookkeeping = u128::from(tiles) * specs.len() as u128 * entry;
        if let Some((limit, from)) = memory_limit(None, bookkeeping) {
            return Err(QueryError::BadSubarray(format!(
                "the subarray covers {tiles} space tiles, whose index needs {bookkeeping} bytes, more than the \
                 {limit} bytes allowed by {from}: write it as several smaller subarrays"
            ))
            .into());
        }
        let tile_limit = snap.ctx.config().limits().tile_bytes;
        check_tile_sizes(schema, snap.grid.cells_per_tile(), tile_limit)?;
        let mut frag = FragmentWriter::new(&snap.ctx, snap.uri.clone(), name, specs.clone(), rect.clone(), tiles);
        frag.summarize_files(schema);
        // Fixed-size attributes only: the size of variable-length ones is not known in advance.
        if !schema.attrs.iter().any(|a| a.is_var()) {
            let cell_bytes: u64 = schema.attrs.iter().map(|a| a.cell_size() as u64 + u64::from(a.nullable)).sum();
            let per_tile = snap.grid.cells_per_tile().saturating_mul(cell_bytes);
            frag.pack_if_small(tiles.saturating_mul(per_tile));
        }
        let nvar = schema.attrs.iter().filter(|a| a.is_var()).count();
        let lock = shared_lock(&snap.ctx, &snap.uri, true)?;
        Ok(Self {
            _lock: lock,
            snap: snap.clone(),
            total,
            rect,
            layout,
            specs,
            frag: Some(frag),
            trange,
            tiles,
            partial: HashMap::new(),
            var_chunks: (0..nvar).map(|_| Vec::new()).collect(),
            global_pos: (0, 0),
            cursor: 0,
            submitted: Vec::new(),
            written: 0,
            poisoned: false,
        })
    }

    /// The name the fragment will be committed under.
    pub fn fragment_name(&self) -> Option<&FragmentName> {
        self.frag.as_ref().map(FragmentWriter::name)
    }

    /// Submits cells. With layout row- or column-major, the inputs cover the writer's whole
    /// subarray; with global layout, they hold the next cells in global order (any count).
    ///
    /// # Errors
    /// Bad buffers (nothing is written then), a submit after an error, or a storage failure.
    pub fn submit(&mut self, inputs: &[AttrInput<'_>]) -> Result<()> {
        count_write_submit(self.layout);
        let _t = stats::timer(Timer::WriterWrite);
        match self.layout {
            Layout::Global | Layout::Unordered => self.submit_global(inputs),
            Layout::RowMajor | Layout::ColMajor => {
                let sub = Subarray {
                    ranges: self
                        .rect
                        .iter()
                        .zip(&self.snap.schema.dims)
                        .map(|(r, d)| vec![(d.denormalize(r[0]), d.denormalize(r[1]))])
                        .collect(),
                };
                self.part(&sub, inputs)
            }
        }
    }

    /// Submits the cells of `part`, a sub-rectangle of the writer's subarray that no earlier
    /// submit covered, in the writer's layout (row- or column-major).
    ///
    /// # Errors
    /// As [`DenseWriter::submit`], plus a part outside the subarray or overlapping an earlier one.
    pub fn submit_part(&mut self, part: &Subarray, inputs: &[AttrInput<'_>]) -> Result<()> {
        count_write_submit(self.layout);
        let _t = stats::timer(Timer::WriterWrite);
        self.part(part, inputs)
    }

    fn part(&mut self, part: &Subarray, inputs: &[AttrInput<'_>]) -> Result<()> {
        self.check_usable()?;
        let order = match self.layout {
            Layout::RowMajor => CellOrder::RowMajor,
            Layout::ColMajor => CellOrder::ColMajor,
            Layout::Global | Layout::Unordered => {
                return Err(QueryError::Layout("submit_part needs row-major or col-major layout".into()).into())
            }
        };
        let schema = self.snap.schema.clone();
        let norm = part.normalize(&schema)?;
        if norm.iter().any(|r| r.len() != 1) {
            return Err(QueryError::BadSubarray("a dense write takes exactly one range per dimension".into()).into());
        }
        let r: Rect = norm.into_iter().map(|x| x[0]).collect();
        if !within(&r, &self.rect) {
            return Err(QueryError::BadSubarray("the part lies outside the writer's subarray".into()).into());
        }
        if self.submitted.iter().any(|s| meet(s, &r)) {
            return Err(QueryError::WriteState("the part overlaps cells an earlier submit wrote".into()).into());
        }
        let (inputs, n) = validate(&schema, inputs, Some(cells(&r)))?;
        let shape: Vec<u64> = r.iter().map(|[a, b]| b - a + 1).collect();
        let st = strides(&shape, order);
        let grid = self.snap.grid.clone();
        let mut work: Vec<(u64, Vec<Placement>)> = Vec::new();
        for tc in grid.tiles_in(&grid.tile_range(&r)) {
            let t = grid.tile_rect(&tc);
            let Some(i) = intersect(&r, &t) else { continue };
            let p = Placement {
                shape: i.iter().map(|[a, b]| b - a + 1).collect(),
                src: Strided { offset: offset_of(&i, &r, &st), strides: st.clone() },
                dst: Strided { offset: offset_of(&i, &t, &grid.cell_strides), strides: grid.cell_strides.clone() },
            };
            work.push((grid.tile_index(&self.trange, &tc), vec![p]));
        }
        self.submitted.push(r);
        self.apply(&inputs, work)?;
        self.written += n;
        Ok(())
    }

    fn submit_global(&mut self, inputs: &[AttrInput<'_>]) -> Result<()> {
        self.check_usable()?;
        let schema = self.snap.schema.clone();
        let (inputs, n) = validate(&schema, inputs, None)?;
        if self.cursor.saturating_add(n) > self.total {
            return Err(QueryError::WriteState(format!(
                "global-order submit of {n} cells passes the end of the subarray ({} of {} written)",
                self.cursor, self.total
            ))
            .into());
        }
        let (c0, c1) = (self.cursor, self.cursor + n);
        let grid = self.snap.grid.clone();
        let mut work: Vec<(u64, Vec<Placement>)> = Vec::new();
        let (mut pos, mut before) = self.global_pos;
        while pos < self.tiles && before < c1 {
            let tc = grid.tile_at(&self.trange, pos);
            let t = grid.tile_rect(&tc);
            let i = intersect(&self.rect, &t).unwrap_or_default();
            let nt = cells(&i);
            if before + nt > c0 {
                let (a, b) = (c0.max(before) - before, c1.min(before + nt) - before);
                let shape: Vec<u64> = i.iter().map(|[x, y]| y - x + 1).collect();
                let st = strides(&shape, grid.cell_order);
                let mut ps = Vec::new();
                for bx in split_interval(&shape, grid.cell_order, a, b) {
                    let lo: u64 = bx.iter().zip(&st).map(|(r, s)| r[0] * s).sum();
                    let abs: Rect = bx.iter().zip(&i).map(|(r, o)| [r[0] + o[0], r[1] + o[0]]).collect();
                    ps.push(Placement {
                        shape: bx.iter().map(|[x, y]| y - x + 1).collect(),
                        src: Strided { offset: before + lo - c0, strides: st.clone() },
                        dst: Strided {
                            offset: offset_of(&abs, &t, &grid.cell_strides),
                            strides: grid.cell_strides.clone(),
                        },
                    });
                }
                work.push((pos, ps));
            }
            if before + nt <= c1 {
                before += nt;
                pos += 1;
            } else {
                break;
            }
        }
        self.global_pos = (pos, before);
        self.apply(&inputs, work)?;
        self.cursor = c1;
        self.written += n;
        Ok(())
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned || self.frag.is_none() {
            return Err(QueryError::WriteState("the writer failed or finished; start a new write".into()).into());
        }
        Ok(())
    }

    /// Moves the inputs' cells into their tiles, then filters and writes every completed tile.
    fn apply(&mut self, inputs: &[AttrInput<'_>], work: Vec<(u64, Vec<Placement>)>) -> Result<()> {
        let result = self.apply_inner(inputs, work);
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn apply_inner(&mut self, inputs: &[AttrInput<'_>], work: Vec<(u64, Vec<Placement>)>) -> Result<()> {
        let schema = self.snap.schema.clone();
        let tile_cells = self.snap.grid.cells_per_tile();
        // Retain variable-length data of this submit.
        let mut var = VarInputs::default();
        for (i, (a, inp)) in schema.attrs.iter().zip(inputs).enumerate() {
            if a.is_var() {
                let chunks = &mut self.var_chunks[var.attrs.len()];
                var.chunk_ids.push(chunks.len() as u32);
                chunks.push(VarChunk { data: Arc::new(inp.data.to_vec()) });
                var.attrs.push(i);
                var.offsets.push(inp.offsets.unwrap_or(&[]));
                var.lens.push(inp.data.len() as u64);
            }
        }
        let tile_bytes: u64 = schema.attrs.iter().map(|a| a.cell_size() as u64 + 1).sum::<u64>() * tile_cells;
        let threads = self.snap.ctx.compute_threads();
        let budget = (self.snap.ctx.config().memory_budget() / 2).max(tile_bytes);
        let batch = ((budget / tile_bytes.max(1)) as usize).clamp(1, 4 * threads.max(1));
        let specs = self.specs.clone();
        let fills: Vec<Vec<u8>> = schema.attrs.iter().map(|a| a.fill_bytes()).collect();
        let mut iter = work.into_iter().peekable();
        while iter.peek().is_some() {
            let chunk: Vec<(u64, Vec<Placement>)> = iter.by_ref().take(batch).collect();
            let mut jobs = self.take_tiles(&schema, &fills, inputs, chunk);
            self.snap.ctx.install(|| {
                jobs.par_iter_mut().for_each(|(_, tile, ps)| place_cells(&schema, &specs, inputs, &var, tile, ps));
            });
            self.write_complete(&schema, &fills, inputs, jobs)?;
        }
        if self.partial.is_empty() {
            // No tile refers to retained variable-length data any more.
            for c in &mut self.var_chunks {
                c.clear();
            }
        }
        Ok(())
    }

    /// The tiles the placements `chunk` fill: those partly filled by earlier submits, or new
    /// ones (with the files that go straight from the caller's buffers marked direct).
    fn take_tiles(
        &mut self,
        schema: &ArraySchema,
        fills: &[Vec<u8>],
        inputs: &[AttrInput<'_>],
        chunk: Vec<(u64, Vec<Placement>)>,
    ) -> Vec<TileJob> {
        let grid = self.snap.grid.clone();
        let chunking = self.frag.as_ref().map_or(TileChunking::Whole, FragmentWriter::chunking);
        let tile_cells = grid.cells_per_tile();
        let mut jobs = Vec::with_capacity(chunk.len());
        for (idx, ps) in chunk {
            let tile = match self.partial.remove(&idx) {
                Some(t) => t,
                None => {
                    let tc = grid.tile_at(&self.trange, idx);
                    let inside = intersect(&self.rect, &grid.tile_rect(&tc)).map_or(0, |r| cells(&r));
                    let covered: u64 = ps.iter().map(|p| p.shape.iter().product::<u64>()).sum();
                    // Tiles stored in curve order are permuted first: none goes straight out.
                    let direct = if grid.cell_curve.is_some() {
                        vec![false; self.specs.len()]
                    } else {
                        direct_files(schema, &self.specs, inputs, &ps, tile_cells, chunking)
                    };
                    new_tile(schema, &self.specs, fills, tile_cells, inside, covered == tile_cells, direct)
                }
            };
            jobs.push((idx, tile, ps));
        }
        jobs
    }

    /// Writes the tiles of `jobs` (in tile order) that are complete and keeps the others for
    /// later submits. Each file's tiles are appended in tile order: runs of complete tiles that
    /// go out the same way (which files come straight from the caller's buffers) are written in
    /// turn, each run as [`DenseWriter::write_run`] does.
    fn write_complete(
        &mut self,
        schema: &ArraySchema,
        fills: &[Vec<u8>],
        inputs: &[AttrInput<'_>],
        jobs: Vec<TileJob>,
    ) -> Result<()> {
        let mut run: Vec<TileJob> = Vec::new();
        for (idx, tile, ps) in jobs {
            if tile.remaining != 0 {
                self.partial.insert(idx, tile);
                continue;
            }
            if run.last().is_some_and(|last| last.1.direct != tile.direct) {
                self.write_run(schema, fills, inputs, std::mem::take(&mut run))?;
            }
            run.push((idx, tile, ps));
        }
        self.write_run(schema, fills, inputs, run)
    }

    /// Writes the complete tiles `run` (in tile order, every one with the same direct files):
    /// direct files straight from the caller's buffers, the other files filtered in parallel.
    fn write_run(
        &mut self,
        schema: &ArraySchema,
        fills: &[Vec<u8>],
        inputs: &[AttrInput<'_>],
        run: Vec<TileJob>,
    ) -> Result<()> {
        let specs = &self.specs;
        let tile_cells = self.snap.grid.cells_per_tile();
        let mut done = Vec::new();
        let mut gathered = Vec::new();
        let mut summarized = Vec::new();
        let summarize = self.frag.as_ref().is_some_and(FragmentWriter::summarizes);
        // Attributes the fragment writer does not summarize from their data files by itself.
        let own = summarize && schema.attrs.iter().any(|a| !summarized_from_data(a));
        for (idx, mut tile, ps) in run {
            let direct = tile.direct.iter().any(|&d| d);
            let whole = summarize && self.holds_whole_tile(idx);
            tile.summarize = whole;
            if direct {
                let frag = self.frag.as_mut().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
                write_direct(frag, schema, specs, inputs, idx, &tile, &ps[0])?;
                let runs = filtered_runs(schema, specs, inputs, &tile.direct, &ps[0]);
                gathered.extend(runs.into_iter().map(|(f, r)| (idx, f, r, whole)));
            }
            if whole && own {
                summarized.push((idx, done.len(), direct.then(|| ps.into_iter().next()).flatten()));
            }
            done.push((idx, tile));
        }
        if !summarized.is_empty() {
            let rows: Vec<_> = self.snap.ctx.install(|| {
                summarized
                    .par_iter()
                    .flat_map_iter(|(idx, at, p)| {
                        tile_summaries(schema, specs, inputs, *idx, &done[*at].1, p.as_ref(), tile_cells)
                    })
                    .collect()
            });
            let frag = self.frag.as_mut().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
            frag.add_summaries(rows);
        }
        if !done.is_empty() {
            let chunks = &self.var_chunks;
            let perm = self.snap.grid.permutation();
            let ready: Vec<UnfilteredTile> = self.snap.ctx.install(|| {
                done.into_par_iter()
                    .map(|(idx, t)| finish_tile(specs, schema, chunks, fills, perm.as_deref(), idx, t))
                    .collect()
            });
            let frag = self.frag.as_mut().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
            self.snap.ctx.install(|| frag.write_tiles(ready))?;
        }
        if !gathered.is_empty() {
            let frag = self.frag.as_mut().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
            self.snap.ctx.install(|| frag.write_tile_runs(gathered))?;
        }
        Ok(())
    }

    /// Whether tile `idx` (among the tiles of `trange`) lies whole inside the written subarray:
    /// its buffers then hold only cells of the fragment, whose summary the metadata keeps.
    fn holds_whole_tile(&self, idx: u64) -> bool {
        let grid = &self.snap.grid;
        let rect = grid.tile_rect(&grid.tile_at(&self.trange, idx));
        let whole = rect.iter().zip(&grid.extents).all(|([lo, hi], e)| hi - lo + 1 == *e);
        whole && rect.iter().zip(&self.rect).all(|([lo, hi], [wlo, whi])| wlo <= lo && hi <= whi)
    }

    /// Commits the fragment. Every cell of the subarray must have been submitted.
    ///
    /// # Errors
    /// Missing cells (nothing is committed), or a storage failure.
    pub fn finish(mut self) -> Result<FragmentMetadata> {
        self.check_usable()?;
        if self.written != self.total || !self.partial.is_empty() {
            return Err(QueryError::WriteState(format!(
                "write is incomplete: {} of {} cells of the subarray were submitted",
                self.written, self.total
            ))
            .into());
        }
        let frag = self.frag.take().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
        let total = self.total;
        frag.finish(total, None, None)
    }
}

/// The variable-length attributes of a submit: their indices, the caller's offsets and data
/// lengths, and the retained chunk each submit's data went to.
#[derive(Default)]
struct VarInputs<'a> {
    attrs: Vec<usize>,
    offsets: Vec<&'a [u64]>,
    lens: Vec<u64>,
    chunk_ids: Vec<u32>,
}

/// Copies the cells of placements `ps` from the caller's buffers into `tile`: fixed-size values
/// and validity as strided runs, variable-length cells as references into the retained data.
fn place_cells(
    schema: &ArraySchema,
    specs: &[FileSpec],
    inputs: &[AttrInput<'_>],
    var: &VarInputs<'_>,
    tile: &mut PartialTile,
    ps: &[Placement],
) {
    for p in ps {
        for (f, spec) in specs.iter().enumerate() {
            if tile.direct[f] {
                continue;
            }
            let inp = &inputs[spec.attr];
            match spec.kind {
                FileKind::Data if !schema.attrs[spec.attr].is_var() => {
                    let cs = schema.attrs[spec.attr].cell_size();
                    copy_strided(cs, &p.shape, inp.data, &p.src, as_uninit(&mut tile.buffers[f]), &p.dst);
                }
                FileKind::Validity => {
                    let v = inp.validity.unwrap_or(&[]);
                    copy_strided(1, &p.shape, v, &p.src, as_uninit(&mut tile.buffers[f]), &p.dst);
                }
                _ => {}
            }
        }
        for k in 0..var.attrs.len() {
            let (offs, len, refs) = (var.offsets[k], var.lens[k], &mut tile.var[k]);
            for_each_cell_pair(&p.shape, &p.src, &p.dst, |s, d| {
                let start = offs[s as usize];
                let end = offs.get(s as usize + 1).copied().unwrap_or(len);
                refs[d as usize] = VarRef { chunk: var.chunk_ids[k], start, len: end - start };
            });
        }
        tile.remaining -= p.shape.iter().product::<u64>();
    }
}

/// Which files of a new tile go straight from the submit's buffers, never copied into a tile
/// buffer: the tile is covered by one placement whose cells form contiguous runs, the file is of
/// fixed-size cells, and it is either unfiltered (written from the runs as they are) or filtered
/// into chunks (as `chunking` says; each chunk gathered from the runs and filtered, see `TileRuns`).
fn direct_files(
    schema: &ArraySchema,
    specs: &[FileSpec],
    inputs: &[AttrInput<'_>],
    ps: &[Placement],
    tile_cells: u64,
    chunking: TileChunking,
) -> Vec<bool> {
    let [p] = ps else { return vec![false; specs.len()] };
    if p.shape.iter().product::<u64>() != tile_cells {
        return vec![false; specs.len()];
    }
    specs
        .iter()
        .map(|s| {
            let Some((elem, src)) = fixed_source(schema, s, inputs) else { return false };
            if s.filters.is_empty() {
                return contiguous_runs(elem, &p.shape, &p.src, &p.dst).is_some();
            }
            let chunked = chunks_tile(chunking, tile_cells.saturating_mul(elem as u64));
            chunked && tile_runs(s, elem, src, p).is_some()
        })
        .collect()
}

/// The cell width and the caller's buffer of a fixed-size file (data or validity), else `None`.
fn fixed_source<'a>(schema: &ArraySchema, spec: &FileSpec, inputs: &[AttrInput<'a>]) -> Option<(usize, &'a [u8])> {
    let a = &schema.attrs[spec.attr];
    match spec.kind {
        FileKind::Data if !a.is_var() => Some((a.cell_size(), inputs[spec.attr].data)),
        FileKind::Validity => Some((1, inputs[spec.attr].validity.unwrap_or(&[]))),
        _ => None,
    }
}

/// The bytes of one file of the tile that placement `p` covers, as runs of the caller's buffer.
fn tile_runs<'a>(spec: &'a FileSpec, elem: usize, src: &'a [u8], p: &Placement) -> Option<TileRuns<'a>> {
    TileRuns::new(spec.elem_size, src, contiguous_runs(elem, &p.shape, &p.src, &p.dst)?)
}

/// The direct filtered files of a complete tile, as runs of the caller's buffers.
fn filtered_runs<'a>(
    schema: &ArraySchema,
    specs: &'a [FileSpec],
    inputs: &[AttrInput<'a>],
    direct: &[bool],
    p: &Placement,
) -> Vec<(usize, TileRuns<'a>)> {
    let filtered = specs.iter().enumerate().filter(|(f, s)| direct[*f] && !s.filters.is_empty());
    filtered
        .filter_map(|(f, s)| {
            let (elem, src) = fixed_source(schema, s, inputs)?;
            Some((f, tile_runs(s, elem, src, p)?))
        })
        .collect()
}

/// Writes the direct unfiltered files of a complete tile from the inputs' runs, in tile order.
fn write_direct(
    frag: &mut FragmentWriter,
    schema: &ArraySchema,
    specs: &[FileSpec],
    inputs: &[AttrInput<'_>],
    idx: u64,
    tile: &PartialTile,
    p: &Placement,
) -> Result<()> {
    let direct = &tile.direct;
    for (f, spec) in specs.iter().enumerate() {
        if !direct[f] || !spec.filters.is_empty() {
            continue;
        }
        let Some((elem, src)) = fixed_source(schema, spec, inputs) else { continue };
        let runs = contiguous_runs(elem, &p.shape, &p.src, &p.dst).unwrap_or_default();
        let parts: Vec<&[u8]> = runs.iter().map(|&(s, _, len)| &src[s..s + len]).collect();
        frag.write_tile_parts(idx, f, &parts, tile.summarize)?;
    }
    Ok(())
}

fn offset_of(inner: &[[u64; 2]], outer: &[[u64; 2]], st: &[u64]) -> u64 {
    inner.iter().zip(outer).zip(st).map(|((i, o), s)| (i[0] - o[0]) * s).sum()
}

/// Refuses a dense write whose space tiles hold more bytes in one file than `limit`
/// (`sm.limits.tile_bytes`): a tile is allocated whole even for one cell, and readers would
/// refuse it. Fixed-size data, offsets and validity tiles have sizes the schema fixes.
pub(crate) fn check_tile_sizes(schema: &ArraySchema, cells: u64, limit: u64) -> Result<()> {
    for a in &schema.attrs {
        let per_cell = if a.is_var() { 8 } else { a.cell_size() as u64 };
        let bytes = cells.saturating_mul(per_cell);
        let what = || format!("a space tile of attribute {} ({cells} cells of {per_cell} bytes)", a.name);
        check_limit("sm.limits.tile_bytes", what, bytes, limit)?;
    }
    Ok(())
}

fn new_tile(
    schema: &ArraySchema,
    specs: &[FileSpec],
    fills: &[Vec<u8>],
    tile_cells: u64,
    inside: u64,
    fully_covered: bool,
    direct: Vec<bool>,
) -> PartialTile {
    let buffers = specs
        .iter()
        .zip(&direct)
        .map(|(s, &d)| {
            let a = &schema.attrs[s.attr];
            match s.kind {
                _ if d => Vec::new(),
                FileKind::Data if !a.is_var() => {
                    if fully_covered {
                        vec![0u8; tile_cells as usize * a.cell_size()]
                    } else {
                        fills[s.attr].repeat(tile_cells as usize)
                    }
                }
                FileKind::Validity => vec![0u8; tile_cells as usize],
                _ => Vec::new(),
            }
        })
        .collect();
    let nvar = schema.attrs.iter().filter(|a| a.is_var()).count();
    let var = (0..nvar).map(|_| vec![VarRef { chunk: FILL_CHUNK, start: 0, len: 0 }; tile_cells as usize]).collect();
    PartialTile { buffers, var, remaining: inside, direct, summarize: false }
}

/// The summaries of the attributes of complete tile `idx` that the fragment writer does not
/// summarize from their data files (nullable and variable-length ones): from its buffers, or, when some
/// of its files go straight from the caller's buffers (`p`, the one placement covering it), from
/// the caller's buffers for every file of those attributes.
fn tile_summaries(
    schema: &ArraySchema,
    specs: &[FileSpec],
    inputs: &[AttrInput<'_>],
    idx: u64,
    tile: &PartialTile,
    p: Option<&Placement>,
    cells: u64,
) -> Vec<(u64, u32, SummaryKind, TileSummary)> {
    let mut out = Vec::with_capacity(schema.attrs.len());
    for (i, a) in schema.attrs.iter().enumerate() {
        if summarized_from_data(a) {
            // The fragment writer summarizes it while filtering its data file.
            continue;
        }
        let file = |kind: FileKind| specs.iter().position(|s| s.attr == i && s.kind == kind);
        let (data, valid) = (file(FileKind::Data), file(FileKind::Validity));
        let direct = [data, valid].iter().flatten().any(|&f| tile.direct[f]);
        let summary = match p {
            Some(p) if direct => {
                let inp = &inputs[i];
                let Some(runs) = contiguous_runs(1, &p.shape, &p.src, &p.dst) else { continue };
                summarize_runs(a, inp.data, inp.validity, runs.into_iter().map(|(s, _, len)| (s, len)))
            }
            _ => {
                // Variable-length data is not summarized (only its validity is counted).
                let d = data.filter(|_| !a.is_var()).map_or(&[][..], |f| &tile.buffers[f][..]);
                summarize(a, d, valid.map(|f| &tile.buffers[f][..]), cells)
            }
        };
        out.push((idx, i as u32, SummaryKind::of(a), summary));
    }
    out
}

/// Turns a complete tile into its unfiltered buffers (building offsets and data of var files),
/// its cells in stored order: row-major, or moved by `perm` into the cell order's curve.
fn finish_tile(
    specs: &[FileSpec],
    schema: &ArraySchema,
    chunks: &[Vec<VarChunk>],
    fills: &[Vec<u8>],
    perm: Option<&TilePermutation>,
    idx: u64,
    mut tile: PartialTile,
) -> UnfilteredTile {
    if let Some(p) = perm {
        for refs in &mut tile.var {
            *refs = p.to_logical.iter().map(|&i| refs[i as usize]).collect();
        }
        for (f, s) in specs.iter().enumerate() {
            let elem = match s.kind {
                FileKind::Data if !schema.attrs[s.attr].is_var() => schema.attrs[s.attr].cell_size(),
                FileKind::Validity => 1,
                _ => continue,
            };
            tile.buffers[f] = p.row_major_to_stored(elem, &tile.buffers[f]);
        }
    }
    let mut var_k = 0;
    let mut built: Vec<Option<(Vec<u8>, Vec<u8>)>> = vec![None; schema.attrs.len()];
    for (i, a) in schema.attrs.iter().enumerate() {
        if !a.is_var() {
            continue;
        }
        let refs = &tile.var[var_k];
        let total: u64 = refs.iter().map(|r| if r.chunk == FILL_CHUNK { fills[i].len() as u64 } else { r.len }).sum();
        let mut data = Vec::with_capacity(total as usize);
        let mut offs = Vec::with_capacity(refs.len() * 8);
        let mut run: Option<(u32, u64, u64)> = None;
        let flush = |run: &mut Option<(u32, u64, u64)>, data: &mut Vec<u8>| {
            if let Some((c, s, e)) = run.take() {
                data.extend_from_slice(&chunks[var_k][c as usize].data[s as usize..e as usize]);
            }
        };
        let mut pos = 0u64;
        for r in refs {
            offs.extend_from_slice(&pos.to_le_bytes());
            if r.chunk == FILL_CHUNK {
                flush(&mut run, &mut data);
                data.extend_from_slice(&fills[i]);
                pos += fills[i].len() as u64;
                continue;
            }
            match &mut run {
                Some((c, _, e)) if *c == r.chunk && *e == r.start => *e += r.len,
                _ => {
                    flush(&mut run, &mut data);
                    run = Some((r.chunk, r.start, r.start + r.len));
                }
            }
            pos += r.len;
        }
        flush(&mut run, &mut data);
        built[i] = Some((data, offs));
        var_k += 1;
    }
    let buffers = specs
        .iter()
        .enumerate()
        .map(|(f, s)| match s.kind {
            FileKind::Data if schema.attrs[s.attr].is_var() => {
                built[s.attr].as_ref().map(|b| b.0.clone()).unwrap_or_default()
            }
            FileKind::Offsets => built[s.attr].as_ref().map(|b| b.1.clone()).unwrap_or_default(),
            _ => std::mem::take(&mut tile.buffers[f]),
        })
        .collect();
    UnfilteredTile { index: idx, buffers, skip: tile.direct, summarize: tile.summarize }
}

/// Counts one write submit and its layout.
pub(crate) fn count_write_submit(layout: Layout) {
    stats::add(Counter::SmQuerySubmitWrite, 1);
    stats::add(crate::geometry::layout_counter(layout), 1);
}
