//! Sparse reads. Per fragment, the R-tree over data-tile MBRs selects the tiles that may hold
//! cells of the query; their coordinate tiles are fetched and filtered cell by cell (tiles whose
//! MBR lies inside the query skip the test). Each fragment yields its matching cells in global
//! order; the streams are merged so that, where coordinates repeat across fragments and the
//! schema does not allow duplicates, the newest fragment wins. Results are then ordered as the
//! layout asks (global, row-major, col-major or unordered) and attribute values are gathered in
//! whole runs per tile, batch by batch. A tile inside the query that no other fragment can
//! change (see `whole_tiles`) skips all of that: it is taken whole, its coordinates and
//! fixed-size values decoded straight into the result columns.

use std::mem::MaybeUninit;
use std::sync::Arc;

use crate::fast_hash::{FastMap, FastSet};

use rayon::prelude::*;

use super::execute::count_copied;
use super::newest_wins::{merge_with_largest, newest_unordered};
use super::query::{
    buffer_cells, check_result_size, copy_prefix, count_submit, resolve_attrs, AttrBuffer, AttrData, ReadResult,
    ReadStatus,
};
use crate::condition::Condition;
use crate::error::{Error, QueryError, Result};
use crate::fragment::{FileKind, FileSpec};
use crate::geometry::Layout;
use crate::geometry::{
    cells_in_box, check_in_range, ordinal_ranges, ordinal_values, ordinals, ordinals_at, pack_keys_with_width,
    DimRange, OrderKeys,
};
use crate::schema::Attribute;
use crate::snapshot::{fetch_tiles, fetch_tiles_into, tile_cells, Snapshot, TileKey, UpdateIndex};
use crate::stats::{self, Timer};
use crate::uninit::{write_bytes, OutBytes};

/// One result cell: fragment, tile, cell within the tile; or [`FROM_INDEX`], 0, the cell's place
/// in the update index (whose values the read copies).
pub(super) type CellRef = (u32, u32, u32);

/// Cells per run from which [`gather_runs`] copies run by run (one memcpy each) rather than into
/// a zeroed output with one fixed-size copy per cell.
const LONG_RUN: usize = 16;

/// The fragment number of result cells whose values come from the update index.
const FROM_INDEX: u32 = u32::MAX;

/// A candidate tile's matching cells and their ordinals (one column per dimension).
type TileMatches = (TileKey, Vec<u32>, Vec<Vec<u64>>);

/// A tile the read takes whole ([`whole_tiles`]): its cells are not in `cells`, they come in
/// the result right before `cells[before]` (after the last, when `before` is its length), and
/// their coordinates and values are read straight from the tile.
#[derive(Debug, Clone, Copy)]
struct WholeTile {
    key: TileKey,
    cells: u64,
    before: usize,
}

/// A run of consecutive result cells: cells `[a, b)` of `cells`, or cells `[s, e)` of whole
/// tile `w`.
#[derive(Debug, Clone, Copy)]
enum Piece {
    Cells(usize, usize),
    Tile(usize, u64, u64),
}

impl Piece {
    fn len(self) -> usize {
        match self {
            Piece::Cells(a, b) => b - a,
            Piece::Tile(_, s, e) => (e - s) as usize,
        }
    }
}

/// A read of a sparse array; results come back whole or in batches.
#[derive(Debug)]
pub struct SparseReadQuery {
    pub(super) array: Snapshot,
    attrs: Vec<usize>,
    specs: Vec<FileSpec>,
    pub(super) cells: Vec<CellRef>,
    /// The ordinals of each result cell, one per dimension (dimension values are made from
    /// them, so coordinate tiles are not kept).
    pub(super) ords: Vec<u64>,
    /// Tiles taken whole, in result order (never with a query condition, which filters
    /// `cells`).
    whole: Vec<WholeTile>,
    whole_cells: u64,
    cursor: u64,
    layout: Layout,
    /// The update index some cells' values come from.
    index: Option<Arc<UpdateIndex>>,
}

/// Bytes per result cell of a sparse read of attributes `attrs` (indices) of `schema`:
/// coordinates and fixed-size values exactly, validity, 16 for variable-length values (their
/// offset and a guess at the values).
pub(crate) fn result_cell_bytes(schema: &crate::schema::ArraySchema, attrs: &[usize]) -> u64 {
    let dims: u64 = schema.dims.iter().map(|d| d.datatype.size() as u64).sum();
    let values: u64 = attrs
        .iter()
        .map(|&i| {
            let a = &schema.attrs[i];
            u64::from(a.nullable) + if a.is_var() { 16 } else { a.cell_size() as u64 }
        })
        .sum();
    dims + values
}

/// The tiles of fragments the update index does not cover whose MBRs meet the query ranges
/// (per dimension, ordinal ranges), with whether the tile lies inside them.
fn candidate_tiles(
    array: &Snapshot,
    oranges: &[Vec<[u64; 2]>],
    indexed: impl Fn(usize) -> bool,
    skip: Option<&FastSet<TileKey>>,
) -> Vec<(TileKey, bool)> {
    let mut cand = Vec::new();
    for (fi, f) in array.fragments.iter().enumerate() {
        let Some(sp) = f.sparse.as_ref().filter(|_| !indexed(fi)) else { continue };
        for t in sp.rtree.search(&sp.mbrs, |r| overlaps(r, oranges)) {
            if skip.is_some_and(|s| s.contains(&(fi, t as u64))) {
                continue;
            }
            cand.push(((fi, t as u64), inside(&sp.mbrs[t], oranges)));
        }
    }
    cand
}

/// The matching cells of every candidate tile, with their ordinals, in parallel. Cells are
/// tested on the stored values against the query's bounding box `bbox`; only those inside
/// become ordinals, then are tested against `ranges` (several per dimension) if given.
fn match_tiles(
    array: &Snapshot,
    specs: &[FileSpec],
    cand: &[(TileKey, bool)],
    bbox: &[[u64; 2]],
    ranges: Option<&[Vec<[u64; 2]>]>,
) -> Result<Vec<TileMatches>> {
    let schema = array.schema();
    let nd = schema.ndim();
    let requests: Vec<(TileKey, usize)> = cand.iter().flat_map(|&(k, _)| (0..nd).map(move |d| (k, d))).collect();
    let tiles = fetch_tiles(array, specs, &requests)?;
    array.ctx.install(|| {
        cand.par_iter()
            .map(|&(k, full)| {
                let raw: Vec<&[u8]> = (0..nd).map(|d| tiles.get(&(k, d)).map_or(&[][..], |b| &b[..])).collect();
                let mut keep: Vec<u32> = if full {
                    let n = raw.first().map_or(0, |c| c.len() / schema.dims[0].datatype.size());
                    (0..n as u32).collect()
                } else {
                    cells_in_box(&schema.dims, &raw, bbox)
                };
                let mut ords: Vec<Vec<u64>> = schema
                    .dims
                    .iter()
                    .zip(&raw)
                    .map(|(d, c)| {
                        let o = if full { ordinals(d, c) } else { ordinals_at(d, c, &keep) };
                        o.map_err(|b| {
                            Error::corrupt_tile(
                                array.fragment_dir(k.0).join(&specs[0].name),
                                k.1,
                                format!("coordinate {} of cell {} {}", b.value, b.cell, b.why),
                            )
                        })
                    })
                    .collect::<Result<_>>()?;
                if let Some(ranges) = ranges.filter(|_| !full) {
                    retain_in_ranges(&mut keep, &mut ords, ranges);
                }
                Ok((k, keep, ords))
            })
            .collect::<Result<Vec<_>>>()
    })
}

/// The box around the query ranges (per dimension, ordinal ranges).
fn bounding_box(oranges: &[Vec<[u64; 2]>]) -> Vec<[u64; 2]> {
    oranges
        .iter()
        .map(|rs| [rs.iter().map(|q| q[0]).min().unwrap_or(0), rs.iter().map(|q| q[1]).max().unwrap_or(0)])
        .collect()
}

/// Whether the update index may hold cells in the query ranges: a tile of a fragment it covers
/// (`covers`, per fragment) meets them.
fn index_may_hold(array: &Snapshot, covers: &[bool], oranges: &[Vec<[u64; 2]>]) -> bool {
    array
        .fragments
        .iter()
        .zip(covers)
        .any(|(f, &c)| c && f.sparse.as_ref().is_some_and(|sp| sp.mbrs.iter().any(|m| overlaps(m, oranges))))
}

/// The update index of the fragments `covers` (per fragment) marks, built if no read has built
/// it yet while `matches` runs (both read and decode tiles: one's reads overlap the other's
/// work), and what `matches` gives.
fn index_and_matches(
    array: &Snapshot,
    covers: &[bool],
    matches: impl FnOnce() -> Result<Vec<TileMatches>> + Send,
) -> Result<(Option<Arc<UpdateIndex>>, Vec<TileMatches>)> {
    let (index, per_tile) = array
        .ctx
        .install(|| rayon::join(|| if covers.contains(&true) { array.update_index() } else { Ok(None) }, matches));
    let index = index?;
    // The index is built from the same plan (`UpdateIndex::fragments`) the read left out.
    debug_assert!(covers.iter().enumerate().all(|(fi, &c)| index.as_ref().is_some_and(|ix| ix.covers(fi)) == c));
    Ok((index, per_tile?))
}

fn overlaps(r: &[[u64; 2]], ranges: &[Vec<[u64; 2]>]) -> bool {
    r.iter().zip(ranges).all(|(m, rs)| rs.iter().any(|q| m[0] <= q[1] && q[0] <= m[1]))
}

fn inside(r: &[[u64; 2]], ranges: &[Vec<[u64; 2]>]) -> bool {
    r.iter().zip(ranges).all(|(m, rs)| rs.iter().any(|q| q[0] <= m[0] && m[1] <= q[1]))
}

/// Which candidate tiles (`cand`: tile, inside the query) the read takes whole, with no
/// per-cell work: with no query condition (`filtered`) and no deletion in the snapshot, in a
/// layout that keeps each tile's cells in stored order (unordered; global when every cell
/// comes from one fragment, `one_fragment`), a tile inside the query, unless duplicates are
/// allowed, that no tile of another fragment overlaps (so none of its cells is another
/// fragment's cell again, and none of theirs is one of its). Such a tile's cells are exactly
/// those the general path gives, in the same place of the result.
fn whole_tiles(
    array: &Snapshot,
    cand: &[(TileKey, bool)],
    layout: Layout,
    filtered: bool,
    one_fragment: bool,
) -> Vec<bool> {
    let fragments = &array.fragments;
    let usable = array.ctx.config().sparse_whole_tiles()
        && !filtered
        && !fragments.iter().any(|f| f.is_delete())
        && (layout == Layout::Unordered || (layout == Layout::Global && one_fragment));
    if !usable {
        return vec![false; cand.len()];
    }
    let dups = array.schema().allows_duplicates;
    cand.iter()
        .map(|&((f, t), full)| {
            let Some(mbr) = fragments[f].sparse.as_ref().and_then(|sp| sp.mbrs.get(t as usize)) else { return false };
            full && (dups || fragments.iter().enumerate().all(|(g, other)| g == f || !other.may_hold_in(mbr)))
        })
        .collect()
}

impl SparseReadQuery {
    pub(crate) fn new(
        array: &Snapshot,
        ranges: &[Vec<DimRange>],
        attrs: &[&str],
        layout: Layout,
        condition: Option<&Condition>,
    ) -> Result<Self> {
        Self::skipping(array, ranges, attrs, layout, condition, None)
    }

    /// As `new`, leaving out the cells of the data tiles `skip` (fragment, tile) of fragments
    /// the update index does not cover: aggregates take those tiles from their summaries.
    pub(crate) fn skipping(
        array: &Snapshot,
        ranges: &[Vec<DimRange>],
        attrs: &[&str],
        layout: Layout,
        condition: Option<&Condition>,
        skip: Option<&FastSet<TileKey>>,
    ) -> Result<Self> {
        let _t = stats::timer(Timer::ReaderPlan);
        let schema = array.schema().clone();
        if ranges.len() != schema.ndim() {
            return Err(QueryError::BadSubarray(format!(
                "{} dimensions given, the array has {}",
                ranges.len(),
                schema.ndim()
            ))
            .into());
        }
        let idx = resolve_attrs(&schema, attrs)?;
        let bound = condition.map(|c| c.bind(&schema)).transpose()?;
        let oranges = ordinal_ranges(&schema, ranges)?;
        let specs = FileSpec::for_sparse(&schema);
        let nd = schema.ndim();
        let any = oranges.iter().all(|v| !v.is_empty());
        // Small fragments' cells come from the update index, not their tiles; it is built (on
        // the first read that needs it) while the other fragments' coordinates are read.
        let covers = if any { array.update_index_covers() } else { Vec::new() };
        let indexed = |fi: usize| covers.get(fi).copied().unwrap_or(false);
        let cand = if any { candidate_tiles(array, &oranges, indexed, skip) } else { Vec::new() };
        let bbox = bounding_box(&oranges);
        let one_box = oranges.iter().all(|rs| rs.len() == 1);
        let one_fragment = !index_may_hold(array, &covers, &oranges) && cand.windows(2).all(|w| w[0].0 .0 == w[1].0 .0);
        let take = whole_tiles(array, &cand, layout, bound.is_some(), one_fragment);
        let whole_keys: Vec<TileKey> = cand.iter().zip(&take).filter(|t| *t.1).map(|t| t.0 .0).collect();
        let cand: Vec<(TileKey, bool)> = cand.iter().zip(&take).filter(|t| !*t.1).map(|t| *t.0).collect();
        let ranges = (!one_box).then_some(&oranges[..]);
        let (index, per_tile) = index_and_matches(array, &covers, || match_tiles(array, &specs, &cand, &bbox, ranges))?;
        // The update index's cells in the box, and their places in the index when it holds every
        // requested attribute's values.
        let read_attrs = idx.iter().chain(bound.as_ref().map_or(&[][..], |b| b.attr_indices()));
        let values_in_index = index.as_ref().is_some_and(|ix| read_attrs.clone().all(|&a| ix.values_of(a).is_some()));
        let (from_index, index_place) = match &index {
            Some(ix) => index_matches(ix, nd, &bbox, ranges, values_in_index),
            None => (Vec::new(), FastMap::default()),
        };
        // One stream per fragment, oldest first, tiles in order.
        let mut per_tile = per_tile;
        if !from_index.is_empty() {
            per_tile.extend(from_index);
            per_tile.sort_unstable_by_key(|m| m.0);
        }
        let (mut cells, ords) = order_results(array, &per_tile, layout);
        // The layouts of whole tiles keep the cells in tile order: each whole tile goes before
        // the first cell of a later tile.
        let whole: Vec<WholeTile> = whole_keys
            .iter()
            .map(|&key| WholeTile {
                key,
                cells: tile_cells(array, key.0, key.1),
                before: cells.partition_point(|c| (c.0 as usize, u64::from(c.1)) < key),
            })
            .collect();
        let whole_cells = whole.iter().map(|w| w.cells).sum();
        if !index_place.is_empty() {
            for c in cells.iter_mut().filter(|c| indexed(c.0 as usize)) {
                if let Some(&at) = index_place.get(c) {
                    *c = (FROM_INDEX, 0, at);
                }
            }
        }
        let index = index.filter(|_| !index_place.is_empty());
        let mut q =
            Self { array: array.clone(), attrs: idx, specs, cells, ords, whole, whole_cells, cursor: 0, layout, index };
        if let Some(b) = &bound {
            q.apply_condition(b)?;
        }
        Ok(q)
    }

    /// Cells in the whole result.
    pub fn total_cells(&self) -> u64 {
        self.cells.len() as u64 + self.whole_cells
    }

    /// Whether every cell has been returned.
    pub fn is_complete(&self) -> bool {
        self.cursor >= self.total_cells()
    }

    /// Reads every remaining cell: dimension columns first, then the attributes.
    ///
    /// # Errors
    /// Storage failures and corrupt tiles.
    pub fn read_all(&mut self) -> Result<ReadResult> {
        let (c0, c1) = (self.cursor, self.total_cells());
        let r = self.materialize(c0, c1)?;
        self.cursor = c1;
        Ok(r)
    }

    /// Reads the next batch of about `max_bytes` (at least one cell), or `None` when done.
    ///
    /// # Errors
    /// Storage failures and corrupt tiles.
    pub fn next_batch(&mut self, max_bytes: u64) -> Result<Option<ReadResult>> {
        if self.is_complete() {
            return Ok(None);
        }
        let n = (max_bytes / self.cell_bytes().max(1)).max(1);
        let c1 = self.cursor.saturating_add(n).min(self.total_cells());
        let r = self.materialize(self.cursor, c1)?;
        self.cursor = c1;
        Ok(Some(r))
    }

    /// Fills the caller's buffers (one per dimension, then one per requested attribute) with
    /// the next cells, as many as fit in every buffer; `complete: false` while cells remain (a
    /// submit that returns 0 cells needs larger buffers).
    ///
    /// # Errors
    /// A wrong number of buffers, missing offsets or validity buffers, storage failures and
    /// corrupt tiles.
    pub fn submit(&mut self, bufs: &mut [AttrBuffer<'_>]) -> Result<ReadStatus> {
        let schema = self.array.schema().clone();
        let nd = schema.ndim();
        if bufs.len() != nd + self.attrs.len() {
            return Err(QueryError::AttributeSet(format!(
                "{} buffers for {} dimensions and {} attributes",
                bufs.len(),
                nd,
                self.attrs.len()
            ))
            .into());
        }
        let mut fit = self.total_cells() - self.cursor;
        for (k, b) in bufs.iter().enumerate() {
            if k < nd {
                fit = fit.min(b.data.len() as u64 / schema.dims[k].datatype.size() as u64);
                continue;
            }
            fit = fit.min(buffer_cells(&schema.attrs[self.attrs[k - nd]], b)?);
        }
        let mut status = ReadStatus { complete: self.is_complete(), cells: 0, data_bytes: vec![0; bufs.len()] };
        if fit == 0 {
            return Ok(status);
        }
        let r = self.materialize(self.cursor, self.cursor + fit)?;
        let n = copy_prefix(&r, bufs, &mut status.data_bytes);
        self.cursor += n;
        status.cells = n;
        status.complete = self.is_complete();
        Ok(status)
    }

    /// Bytes per result cell (see [`result_cell_bytes`]).
    fn cell_bytes(&self) -> u64 {
        result_cell_bytes(self.array.schema(), &self.attrs)
    }

    fn materialize(&self, c0: u64, c1: u64) -> Result<ReadResult> {
        check_result_size(self.array.ctx.config(), c1 - c0, self.cell_bytes())?;
        count_submit(self.layout);
        let _t = stats::timer(Timer::ReaderRead);
        let pieces = self.pieces(c0, c1);
        let attrs = match pieces.as_slice() {
            [] => self.cell_columns(0, 0)?,
            &[Piece::Cells(a, b)] => self.cell_columns(a, b)?,
            _ => self.piece_columns(&pieces)?,
        };
        Ok(ReadResult { start: c0, cells: c1 - c0, attrs })
    }

    /// The pieces that make result cells `[c0, c1)`, in order.
    fn pieces(&self, c0: u64, c1: u64) -> Vec<Piece> {
        let mut out = Vec::new();
        // Result cells `[lo, lo + n)` clipped to `[c0, c1)`, as offsets from `lo`.
        let clip = |lo: u64, n: u64| {
            let (s, e) = (c0.max(lo), c1.min(lo + n));
            (s < e).then(|| (s - lo, e - lo))
        };
        // `at`: the result cell of `cells[ci]`.
        let (mut at, mut ci) = (0u64, 0usize);
        for (w, tile) in self.whole.iter().enumerate() {
            if at >= c1 {
                return out;
            }
            let n = (tile.before - ci) as u64;
            if let Some((s, e)) = clip(at, n) {
                out.push(Piece::Cells(ci + s as usize, ci + e as usize));
            }
            if let Some((s, e)) = clip(at + n, tile.cells) {
                out.push(Piece::Tile(w, s, e));
            }
            (at, ci) = (at + n + tile.cells, tile.before);
        }
        if let Some((s, e)) = clip(at, (self.cells.len() - ci) as u64) {
            out.push(Piece::Cells(ci + s as usize, ci + e as usize));
        }
        out
    }

    /// The columns of result cells `cells[a..b]`: dimensions from their ordinals, then the
    /// attributes gathered from their tiles.
    fn cell_columns(&self, a: usize, b: usize) -> Result<Vec<AttrData>> {
        let schema = self.array.schema();
        let nd = schema.ndim();
        let mut out = Vec::with_capacity(nd + self.attrs.len());
        let part_ords = &self.ords[a * nd..b * nd];
        // The dimensions' values are made while the attributes are gathered.
        let (dims, attrs) = self.array.ctx.install(|| {
            rayon::join(
                || {
                    schema
                        .dims
                        .par_iter()
                        .enumerate()
                        .map(|(d, dim)| {
                            let data = ordinal_values(dim, part_ords, d, nd);
                            count_copied(false, data.len() as u64);
                            AttrData { name: dim.name.clone(), data, offsets: None, validity: None }
                        })
                        .collect::<Vec<_>>()
                },
                || self.gather(&self.cells[a..b], &self.attrs),
            )
        });
        out.extend(dims);
        out.extend(attrs?);
        Ok(out)
    }

    /// The columns of the result cells `pieces`, some of them from whole tiles. Dimensions and
    /// fixed-size attributes without validity are filled in place: a whole tile's part decoded
    /// straight into it (or copied from the tile cache), a part of a tile copied from the
    /// fetched tile, other cells as [`Self::cell_columns`] makes them. The other attributes are
    /// gathered in runs, a whole tile one run.
    fn piece_columns(&self, pieces: &[Piece]) -> Result<Vec<AttrData>> {
        let schema = self.array.schema();
        let nd = schema.ndim();
        let n: usize = pieces.iter().map(|p| p.len()).sum();
        let file_of = |attr: usize, kind: FileKind| self.specs.iter().position(|s| s.attr == attr && s.kind == kind);
        let in_place = |i: usize| !schema.attrs[i].is_var() && !schema.attrs[i].nullable;
        let direct: Vec<usize> = self.attrs.iter().copied().filter(|&i| in_place(i)).collect();
        // (file, cell size) of each column filled in place: the dimensions' coordinates (the
        // first files of a sparse fragment), then the attributes'.
        let mut files: Vec<(usize, usize)> =
            schema.dims.iter().enumerate().map(|(d, x)| (d, x.datatype.size())).collect();
        for &i in &direct {
            let f = file_of(i, FileKind::Data).ok_or_else(|| Error::corrupt(&self.array.uri, "no data file"))?;
            files.push((f, schema.attrs[i].cell_size()));
        }
        let mut columns = self.fill_columns(pieces, &files, &direct, n)?;
        self.check_tile_coordinates(pieces, &mut columns)?;
        let others: Vec<usize> = self.attrs.iter().copied().filter(|&i| !in_place(i)).collect();
        let mut gathered = if others.is_empty() {
            Vec::new()
        } else {
            let (keys, runs) = self.piece_runs(pieces);
            self.gather_runs(&keys, &runs, n, &others)?
        }
        .into_iter();
        let mut columns = columns.into_iter();
        let mut out: Vec<AttrData> = Vec::with_capacity(nd + self.attrs.len());
        for dim in &schema.dims {
            out.push(AttrData {
                name: dim.name.clone(),
                data: columns.next().unwrap_or_default(),
                offsets: None,
                validity: None,
            });
        }
        for &i in &self.attrs {
            let column = if in_place(i) {
                AttrData {
                    name: schema.attrs[i].name.clone(),
                    data: columns.next().unwrap_or_default(),
                    offsets: None,
                    validity: None,
                }
            } else {
                gathered.next().ok_or_else(|| Error::corrupt(&self.array.uri, "attribute not gathered"))?
            };
            out.push(column);
        }
        Ok(out)
    }

    /// The columns filled in place, one per `(file, cell size)` of `files` (`direct`: the
    /// attributes among them): cells of whole tiles fetched straight into them, cells of cut
    /// tiles copied from those tiles, loose cells gathered.
    fn fill_columns(
        &self,
        pieces: &[Piece],
        files: &[(usize, usize)],
        direct: &[usize],
        n: usize,
    ) -> Result<Vec<Vec<u8>>> {
        let schema = self.array.schema();
        let nd = schema.ndim();
        // The cells not from whole tiles, gathered at once; and the parts of whole tiles.
        let loose: Vec<CellRef> = pieces
            .iter()
            .filter_map(|p| if let Piece::Cells(a, b) = *p { Some(a..b) } else { None })
            .flat_map(|r| self.cells[r].iter().copied())
            .collect();
        let loose_values = self.gather(&loose, direct)?;
        let partial: Vec<(TileKey, usize)> = pieces
            .iter()
            .filter_map(|p| match *p {
                Piece::Tile(w, s, e) if s > 0 || e < self.whole[w].cells => Some(self.whole[w].key),
                _ => None,
            })
            .flat_map(|k| files.iter().map(move |&(f, _)| (k, f)))
            .collect();
        let partial = fetch_tiles(&self.array, &self.specs, &partial)?;
        // Not zeroed: the pieces cover every cell, and each column is written whole below
        // before it is taken as bytes (zeroing them was 7% of a large read's CPU).
        let mut columns: Vec<Vec<u8>> = files.iter().map(|&(_, cs)| Vec::with_capacity(n * cs)).collect();
        let mut jobs: Vec<((TileKey, usize), OutBytes<'_>)> = Vec::new();
        for (c, (&(f, cs), buf)) in files.iter().zip(columns.iter_mut()).enumerate() {
            let mut rest: &mut [MaybeUninit<u8>] = &mut buf.spare_capacity_mut()[..n * cs];
            let mut at_loose = 0usize;
            for &p in pieces {
                let (slot, tail) = std::mem::take(&mut rest).split_at_mut(p.len() * cs);
                rest = tail;
                match p {
                    Piece::Tile(w, s, e) => {
                        let key = self.whole[w].key;
                        if s == 0 && e == self.whole[w].cells {
                            jobs.push(((key, f), slot));
                            continue;
                        }
                        let src = partial.get(&(key, f)).and_then(|t| t.get(s as usize * cs..e as usize * cs));
                        let what = format!("tile holds fewer than {e} cells");
                        let src =
                            src.ok_or_else(|| Error::corrupt_tile(self.array.fragment_dir(key.0), key.1, what))?;
                        write_bytes(slot, src);
                    }
                    Piece::Cells(a, b) => {
                        if c < nd {
                            write_bytes(slot, &ordinal_values(&schema.dims[c], &self.ords[a * nd..b * nd], c, nd));
                        } else {
                            let src = &loose_values[c - nd].data;
                            write_bytes(slot, &src[at_loose * cs..(at_loose + b - a) * cs]);
                            at_loose += b - a;
                        }
                    }
                }
            }
            count_copied(false, (n * cs) as u64);
        }
        fetch_tiles_into(&self.array, &self.specs, jobs)?;
        for (column, &(_, cs)) in columns.iter_mut().zip(files) {
            // SAFETY: the pieces partition the `n` cells, and each cell's `cs` bytes were
            // written above: copied, or by `fetch_tiles_into`, which on success writes every
            // byte of every job's slot.
            #[allow(unsafe_code)]
            unsafe {
                column.set_len(n * cs);
            }
        }
        Ok(columns)
    }

    /// Coordinates read straight from tiles into `columns` (the first, one per dimension):
    /// checked against their tile's bounding box (as the general path checks them against the
    /// domain).
    fn check_tile_coordinates(&self, pieces: &[Piece], columns: &mut [Vec<u8>]) -> Result<()> {
        let schema = self.array.schema();
        let nd = schema.ndim();
        for (d, column) in columns.iter_mut().enumerate().take(nd) {
            let size = schema.dims[d].datatype.size();
            let mut at = 0usize;
            for &p in pieces {
                if let Piece::Tile(w, s, _) = p {
                    let key = self.whole[w].key;
                    let mbr = self.array.fragments[key.0].sparse.as_ref().and_then(|sp| sp.mbrs.get(key.1 as usize));
                    let range = mbr.and_then(|m| m.get(d)).copied().unwrap_or([0, u64::MAX]);
                    check_in_range(&schema.dims[d], &mut column[at * size..(at + p.len()) * size], range).map_err(
                        |b| {
                            Error::corrupt_tile(
                                self.array.fragment_dir(key.0).join(&self.specs[d].name),
                                key.1,
                                format!("coordinate {} of cell {} {}", b.value, s as usize + b.cell, b.why),
                            )
                        },
                    )?;
                }
                at += p.len();
            }
        }
        Ok(())
    }

    /// The pieces as runs `(slot, first cell, end cell)` of the tiles `keys` (slots).
    fn piece_runs(&self, pieces: &[Piece]) -> TileRuns {
        let mut out = RunsBuilder::default();
        for &p in pieces {
            match p {
                Piece::Cells(a, b) => out.append(self.array.ctx.install(|| tile_runs(&self.cells[a..b]))),
                Piece::Tile(w, s, e) => {
                    let slot = out.slot(self.whole[w].key);
                    out.runs.push((slot, s as u32, e as u32));
                }
            }
        }
        out.finish()
    }

    /// The values of attributes `attrs` of the result cells `part`, gathered in runs per tile
    /// (each needed tile fetched once).
    pub(super) fn gather(&self, part: &[CellRef], attrs: &[usize]) -> Result<Vec<AttrData>> {
        let (keys, runs) = self.array.ctx.install(|| tile_runs(part));
        self.gather_runs(&keys, &runs, part.len(), attrs)
    }

    /// The values of attributes `attrs` of the `cells` result cells that runs `runs` of the
    /// tiles `keys` (slots) make.
    fn gather_runs(
        &self,
        keys: &[TileKey],
        runs: &[(u32, u32, u32)],
        cells: usize,
        attrs: &[usize],
    ) -> Result<Vec<AttrData>> {
        let schema = self.array.schema();
        let file_of = |attr: usize, kind: FileKind| self.specs.iter().position(|s| s.attr == attr && s.kind == kind);
        let mut requests = Vec::new();
        let from_index = |k: &TileKey| k.0 == FROM_INDEX as usize;
        for &i in attrs {
            for kind in [FileKind::Data, FileKind::Offsets, FileKind::Validity] {
                if let Some(f) = file_of(i, kind) {
                    requests.extend(keys.iter().filter(|k| !from_index(k)).map(|&k| (k, f)));
                }
            }
        }
        let tiles = fetch_tiles(&self.array, &self.specs, &requests)?;
        // One attribute per task: each column is a pass over the runs, copies of a few cells.
        let gather_one = |i: usize| -> Result<AttrData> {
            let in_index = self.index.as_ref().and_then(|ix| ix.values_of(i));
            let per_slot = |kind| -> Vec<&[u8]> {
                keys.iter()
                    .map(|k| match (from_index(k), in_index) {
                        (true, Some((data, valid))) => match kind {
                            FileKind::Data => data,
                            FileKind::Validity => valid.unwrap_or(&[]),
                            _ => &[],
                        },
                        _ => file_of(i, kind).and_then(|f| tiles.get(&(*k, f))).map_or(&[][..], |b| &b[..]),
                    })
                    .collect()
            };
            let slots = Slots {
                data: per_slot(FileKind::Data),
                offsets: per_slot(FileKind::Offsets),
                validity: per_slot(FileKind::Validity),
            };
            let a = &schema.attrs[i];
            let column = gather_attr(a, &slots, runs, cells).map_err(|sl| {
                let k = keys[sl];
                let fragments = &self.array.fragments;
                Error::corrupt_tile(
                    if k.0 < fragments.len() { self.array.fragment_dir(k.0) } else { &self.array.uri },
                    k.1,
                    format!("offsets of attribute {} out of order or past the data", a.name),
                )
            })?;
            Ok(column)
        };
        let out = self.array.ctx.install(|| attrs.par_iter().map(|&i| gather_one(i)).collect::<Result<Vec<_>>>())?;
        Ok(out)
    }
}

/// Attribute `a`'s values of `cells` result cells, gathered from the runs of cells of the
/// tiles (slots) they come from. On bad offsets, the slot whose offsets are wrong.
fn gather_attr(
    a: &Attribute,
    slots: &Slots<'_>,
    runs: &[(u32, u32, u32)],
    cells: usize,
) -> std::result::Result<AttrData, usize> {
    let cs = a.cell_size();
    let mut data = Vec::with_capacity(if a.is_var() { 0 } else { cells * cs });
    let mut offsets = a.is_var().then(|| Vec::with_capacity(cells));
    let mut validity = a.nullable.then(|| Vec::with_capacity(cells));
    if !a.is_var() {
        gather_runs(&mut data, &slots.data, runs, cs);
        if let Some(v) = validity.as_mut() {
            gather_runs(v, &slots.validity, runs, 1);
        }
    }
    for &(sl, s, e) in runs.iter().filter(|_| a.is_var()) {
        let (sl, s, e) = (sl as usize, s as usize, e as usize);
        let d = slots.data[sl];
        if let Some(offs) = offsets.as_mut() {
            let o = slots.offsets[sl];
            let at = |c: usize| -> u64 {
                match o.get(c * 8..c * 8 + 8) {
                    Some(b) => u64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
                    None => d.len() as u64,
                }
            };
            let (start, end) = (at(s), at(e));
            if start > end || end > d.len() as u64 {
                return Err(sl);
            }
            let base = data.len() as u64;
            offs.extend((s..e).map(|c| at(c) - start + base));
            data.extend_from_slice(&d[start as usize..end as usize]);
        }
        if let Some(v) = validity.as_mut() {
            v.extend_from_slice(&slots.validity[sl][s..e]);
        }
    }
    count_copied(a.is_var(), data.len() as u64 + offsets.as_ref().map_or(0, |o| 8 * o.len() as u64));
    count_copied(false, validity.as_ref().map_or(0, |v| v.len() as u64));
    Ok(AttrData { name: a.name.clone(), data, offsets, validity })
}

/// One attribute's data, offsets and validity tiles per slot (tile of [`tile_runs`]).
struct Slots<'a> {
    data: Vec<&'a [u8]>,
    offsets: Vec<&'a [u8]>,
    validity: Vec<&'a [u8]>,
}

/// The tiles (slots) of some result cells and the runs `(slot, first cell, end cell)` they make.
type TileRuns = (Vec<TileKey>, Vec<(u32, u32, u32)>);

/// Runs `(slot, first cell, end cell)` of consecutive result cells of one tile, and the tiles
/// numbered by first appearance (slots), so callers index vectors instead of looking tiles up
/// per run. Many cells are cut in parts whose runs are found in parallel (a run across a cut
/// becomes two).
fn tile_runs(part: &[CellRef]) -> TileRuns {
    const PART: usize = 1 << 16;
    if part.len() <= PART {
        return tile_runs_of(part);
    }
    let parts: Vec<TileRuns> = part.par_chunks(PART).map(tile_runs_of).collect();
    let mut out = RunsBuilder::default();
    out.runs.reserve(parts.iter().map(|p| p.1.len()).sum());
    parts.into_iter().for_each(|p| out.append(p));
    out.finish()
}

/// [`tile_runs`] on one thread.
fn tile_runs_of(part: &[CellRef]) -> TileRuns {
    let mut out = RunsBuilder::default();
    for &(f, t, c) in part {
        let key = (f as usize, u64::from(t));
        let slot = match out.runs.last() {
            Some(&(sl, _, _)) if out.keys[sl as usize] == key => sl,
            _ => out.slot(key),
        };
        match out.runs.last_mut() {
            Some((sl, _, end)) if *sl == slot && *end == c => *end += 1,
            _ => out.runs.push((slot, c, c + 1)),
        }
    }
    out.finish()
}

/// Runs of result cells being collected, with their tiles numbered (slots) by first appearance.
#[derive(Default)]
struct RunsBuilder {
    keys: Vec<TileKey>,
    slot_of: FastMap<TileKey, u32>,
    runs: Vec<(u32, u32, u32)>,
}

impl RunsBuilder {
    /// The slot of tile `key`, numbered now if it is new.
    fn slot(&mut self, key: TileKey) -> u32 {
        let keys = &mut self.keys;
        *self.slot_of.entry(key).or_insert_with(|| {
            keys.push(key);
            (keys.len() - 1) as u32
        })
    }

    /// Appends runs numbered by another builder, renumbering their slots.
    fn append(&mut self, (keys, runs): TileRuns) {
        let map: Vec<u32> = keys.iter().map(|&k| self.slot(k)).collect();
        self.runs.extend(runs.iter().map(|&(sl, s, e)| (map[sl as usize], s, e)));
    }

    fn finish(self) -> TileRuns {
        (self.keys, self.runs)
    }
}

/// The update index's cells inside `bbox` (and in `ranges`, when a dimension has several),
/// grouped by tile as the candidate tiles' matches are, and (`places`) the index place of each.
fn index_matches(
    ix: &UpdateIndex,
    nd: usize,
    bbox: &[[u64; 2]],
    ranges: Option<&[Vec<[u64; 2]>]>,
    places: bool,
) -> (Vec<TileMatches>, FastMap<CellRef, u32>) {
    // Places fetched once: the index is large, the hits are few.
    let mut hits: Vec<(CellRef, usize)> = ix.cells_in_box(bbox).into_iter().map(|i| (ix.place(i), i)).collect();
    hits.sort_unstable();
    let index_place: FastMap<CellRef, u32> =
        if places { hits.iter().map(|&(p, i)| (p, i as u32)).collect() } else { FastMap::default() };
    let mut matches: Vec<TileMatches> = Vec::new();
    for ((f, t, c), i) in hits {
        let k = (f as usize, u64::from(t));
        if matches.last().is_none_or(|m| m.0 != k) {
            matches.push((k, Vec::new(), vec![Vec::new(); nd]));
        }
        if let Some((_, keep, ords)) = matches.last_mut() {
            keep.push(c);
            for (d, o) in ords.iter_mut().enumerate() {
                o.push(ix.ordinal(i, d));
            }
        }
    }
    if let Some(ranges) = ranges {
        for (_, keep, ords) in &mut matches {
            retain_in_ranges(keep, ords, ranges);
        }
    }
    (matches, index_place)
}

/// Keeps the cells (`keep`, with their ordinals `ords`, one column per dimension) that lie in
/// the ranges `oranges` (several per dimension: the ranges' bounding box holds cells between
/// them).
fn retain_in_ranges(keep: &mut Vec<u32>, ords: &mut [Vec<u64>], oranges: &[Vec<[u64; 2]>]) {
    let ok: Vec<bool> = (0..keep.len())
        .map(|i| ords.iter().zip(oranges).all(|(o, rs)| rs.iter().any(|q| q[0] <= o[i] && o[i] <= q[1])))
        .collect();
    let mut it = ok.iter();
    keep.retain(|_| *it.next().unwrap_or(&false));
    for o in ords {
        let mut it = ok.iter();
        o.retain(|_| *it.next().unwrap_or(&false));
    }
}

/// Appends, for each run `(slot, s, e)`, cells `s..e` of `srcs[slot]` (cells of `cs` bytes) to
/// `out`. Sparse results are often runs of one cell: common cell sizes copy a fixed-size value
/// instead of calling memcpy per run. Long runs (whole tiles of a large read) are appended
/// without zeroing the output first.
fn gather_runs(out: &mut Vec<u8>, srcs: &[&[u8]], runs: &[(u32, u32, u32)], cs: usize) {
    let cells: usize = runs.iter().map(|&(_, s, e)| (e - s) as usize).sum();
    if cells >= LONG_RUN * runs.len() {
        out.reserve(cells * cs);
        for &(sl, s, e) in runs {
            out.extend_from_slice(&srcs[sl as usize][s as usize * cs..e as usize * cs]);
        }
        return;
    }
    // Into the spare capacity, not zeroed first: every byte of it is written by one run.
    fn fixed<const N: usize>(out: &mut Vec<u8>, srcs: &[&[u8]], runs: &[(u32, u32, u32)]) {
        let total: usize = runs.iter().map(|&(_, s, e)| (e - s) as usize * N).sum();
        out.reserve(total);
        let mut rest = &mut out.spare_capacity_mut()[..total];
        for &(sl, s, e) in runs {
            let src = &srcs[sl as usize][s as usize * N..e as usize * N];
            let (dst, tail) = std::mem::take(&mut rest).split_at_mut(src.len());
            match (<&mut [MaybeUninit<u8>; N]>::try_from(&mut *dst), <&[u8; N]>::try_from(src)) {
                // One cell: a copy of a size known at compile time (no call to memcpy).
                (Ok(d), Ok(c)) => write_bytes(d, c),
                _ => write_bytes(dst, src),
            }
            rest = tail;
        }
        let len = out.len() + total;
        // SAFETY: the runs' lengths sum to `total`, and each wrote its part of the `total`
        // spare bytes after the initialized ones, in order, so all of `..len` is written.
        #[allow(unsafe_code)]
        unsafe {
            out.set_len(len);
        }
    }
    match cs {
        1 => fixed::<1>(out, srcs, runs),
        2 => fixed::<2>(out, srcs, runs),
        4 => fixed::<4>(out, srcs, runs),
        8 => fixed::<8>(out, srcs, runs),
        16 => fixed::<16>(out, srcs, runs),
        _ => {
            for &(sl, s, e) in runs {
                out.extend_from_slice(&srcs[sl as usize][s as usize * cs..e as usize * cs]);
            }
        }
    }
}

/// Orders the matching cells of all fragments as `layout` asks, dropping older duplicates when
/// the schema does not allow duplicates: the cells and their ordinals (`nd` per cell).
fn order_results(array: &Snapshot, per_tile: &[TileMatches], layout: Layout) -> (Vec<CellRef>, Vec<u64>) {
    let schema = array.schema();
    let nd = schema.ndim();
    let mut frags = per_tile.iter().filter(|t| !t.1.is_empty()).map(|t| t.0 .0);
    let first = frags.next();
    let single = frags.all(|f| Some(f) == first);
    let (mut refs, mut ords) = array.ctx.install(|| concat_matches(per_tile, nd));
    let fragments = &array.fragments;
    let any_deletes = fragments.iter().any(|f| f.is_delete());
    if single && !any_deletes && matches!(layout, Layout::Global | Layout::Unordered) {
        return (refs, ords);
    }
    if !any_deletes && layout == Layout::Unordered {
        if !schema.allows_duplicates {
            let keep = array.ctx.install(|| newest_unordered(&refs, &ords, nd, &OrderKeys::new(schema)));
            retain_marked(&mut refs, &mut ords, nd, &keep);
        }
        return (refs, ords);
    }
    let keys = OrderKeys::new(schema);
    let w = keys.width();
    let mut kbuf = vec![0u64; refs.len() * w];
    array.ctx.install(|| {
        kbuf.par_chunks_mut(w).zip(ords.par_chunks(nd.max(1))).for_each(|(k, o)| keys.key(o, k));
    });
    let kat = |i: u32| &kbuf[i as usize * w..i as usize * w + w];
    // Global order; among equal coordinates the newest fragment first.
    let mut perm: Vec<u32> = array.ctx.install(|| match pack_keys_with_width(&kbuf, w) {
        Some((packed, width)) => merge_with_largest(&refs, &packed, width),
        None => {
            let mut p: Vec<u32> = (0..refs.len() as u32).collect();
            p.par_sort_by(|&a, &b| kat(a).cmp(kat(b)).then(refs[b as usize].0.cmp(&refs[a as usize].0)));
            p
        }
    });
    if any_deletes {
        perm = apply_deletes(array, &refs, &ords, &perm, kat);
    } else if !schema.allows_duplicates && !single {
        perm.dedup_by(|b, a| kat(*a) == kat(*b));
    }
    let oat = |i: u32| &ords[i as usize * nd..i as usize * nd + nd];
    match layout {
        Layout::RowMajor => array.ctx.install(|| perm.par_sort_by(|&a, &b| oat(a).cmp(oat(b)))),
        Layout::ColMajor => array.ctx.install(|| {
            perm.par_sort_by(|&a, &b| oat(a).iter().rev().cmp(oat(b).iter().rev()));
        }),
        _ => {}
    }
    pick(&refs, &ords, nd, &perm)
}

/// The matching cells of every tile in turn, and their ordinals interleaved (the ordinals of
/// one cell together). Per-fragment streams are already in global order. Tiles are copied in
/// parallel, each into its own part of the outputs (not zeroed first).
fn concat_matches(per_tile: &[TileMatches], nd: usize) -> (Vec<CellRef>, Vec<u64>) {
    let total: usize = per_tile.iter().map(|t| t.1.len()).sum();
    let mut refs: Vec<CellRef> = Vec::with_capacity(total);
    let mut ords: Vec<u64> = Vec::with_capacity(total * nd);
    let mut jobs = Vec::with_capacity(per_tile.len());
    let (mut refs_left, mut ords_left) =
        (&mut refs.spare_capacity_mut()[..total], &mut ords.spare_capacity_mut()[..total * nd]);
    for m in per_tile.iter().filter(|m| !m.1.is_empty()) {
        let (r, rest) = std::mem::take(&mut refs_left).split_at_mut(m.1.len());
        refs_left = rest;
        let (o, rest) = std::mem::take(&mut ords_left).split_at_mut(m.1.len() * nd);
        ords_left = rest;
        jobs.push((m, r, o));
    }
    jobs.into_par_iter().for_each(|(((f, t), keep, kept), r, o)| {
        // Every slot is to be written: a tile's ordinal columns are as long as its matches.
        assert!(kept.iter().all(|k| k.len() == keep.len()), "ordinal columns as long as the tile's matches");
        for (slot, &c) in r.iter_mut().zip(keep) {
            slot.write((*f as u32, *t as u32, c));
        }
        match kept.as_slice() {
            [x, y] => {
                for ((slot, &a), &b) in o.chunks_exact_mut(2).zip(x).zip(y) {
                    slot[0].write(a);
                    slot[1].write(b);
                }
            }
            _ => {
                for (j, slot) in o.chunks_exact_mut(nd.max(1)).enumerate() {
                    for (d, v) in slot.iter_mut().enumerate() {
                        v.write(kept[d][j]);
                    }
                }
            }
        }
    });
    // SAFETY: the jobs' slots partition the first `total` (and `total * nd`) spare elements,
    // and each job wrote every one of its slots: one cell per match and, with the ordinal
    // columns as long as the matches (asserted), `nd` ordinals per match.
    #[allow(unsafe_code)]
    unsafe {
        refs.set_len(total);
        ords.set_len(total * nd);
    }
    (refs, ords)
}

/// Keeps the cells marked in `keep`. In place, run by run: a fresh copy of a large result
/// costs more in page faults than the dedup, and updates drop few cells, so the runs kept are
/// long.
pub(super) fn retain_marked(refs: &mut Vec<CellRef>, ords: &mut Vec<u64>, nd: usize, keep: &[bool]) {
    let n = refs.len();
    let (mut w, mut i) = (0, 0);
    while i < n {
        let j = i + keep[i..].iter().position(|k| !k).unwrap_or(n - i);
        if w != i {
            refs.copy_within(i..j, w);
            ords.copy_within(i * nd..j * nd, w * nd);
        }
        w += j - i;
        i = j + keep[j..].iter().position(|k| *k).unwrap_or(n - j);
    }
    refs.truncate(w);
    ords.truncate(w * nd);
}

/// The cells of `perm` (global order, newest first among equal coordinates) that deletes leave.
/// Per coordinates, newest first: a deleted point removes itself and every older cell; without
/// duplicates only the newest cell stays. Then deleted rectangles of fragments newer than a
/// cell remove it.
fn apply_deletes<'k>(
    array: &Snapshot,
    refs: &[CellRef],
    ords: &[u64],
    perm: &[u32],
    kat: impl Fn(u32) -> &'k [u64],
) -> Vec<u32> {
    let (fragments, schema) = (&array.fragments, array.schema());
    let nd = schema.ndim();
    let mut kept = Vec::with_capacity(perm.len());
    let mut i = 0;
    while i < perm.len() {
        let mut j = i + 1;
        while j < perm.len() && kat(perm[j]) == kat(perm[i]) {
            j += 1;
        }
        for &c in &perm[i..j] {
            if fragments[refs[c as usize].0 as usize].is_delete() {
                break;
            }
            kept.push(c);
            if !schema.allows_duplicates {
                break;
            }
        }
        i = j;
    }
    let ord = |c: u32| &ords[c as usize * nd..c as usize * nd + nd];
    let rect_deleters: Vec<usize> =
        (0..fragments.len()).filter(|&i| fragments[i].deletes.as_ref().is_some_and(|r| !r.is_empty())).collect();
    kept.retain(|&c| {
        let f = refs[c as usize].0 as usize;
        !rect_deleters.iter().any(|&d| d > f && fragments[d].rect_deletes(ord(c)))
    });
    kept
}

/// The cells `which` of `refs` (with ordinals `ords`, `nd` per cell), in that order.
fn pick(refs: &[CellRef], ords: &[u64], nd: usize, which: &[u32]) -> (Vec<CellRef>, Vec<u64>) {
    let cells = which.iter().map(|&i| refs[i as usize]).collect();
    let mut out = Vec::with_capacity(which.len() * nd);
    for &i in which {
        out.extend_from_slice(&ords[i as usize * nd..i as usize * nd + nd]);
    }
    (cells, out)
}
