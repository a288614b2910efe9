//! Which tiles of an aggregate are answered from the summaries stored with fragments (format
//! version 6, `fragment/tile_stats.rs`) instead of their cells, and what is left to read.
//!
//! A tile's summary stands for its cells in the merged result exactly when the query covers
//! the tile whole and no other fragment can change those cells:
//! - dense arrays: a space tile inside the query box whose newest fragment among those that
//!   overlap it (by non-empty domain) is a dense fragment holding the whole tile (which is when
//!   it has a summary). The rest of the box (its border, and the tiles without a summary) is
//!   read as boxes: the frame around the covered tiles, and runs of tiles along the last
//!   dimension.
//! - sparse arrays: a data tile whose MBR lies inside the query box, of a fragment that does
//!   not come from the update index, when no data tile of another fragment overlaps the MBR
//!   and no delete fragment's non-empty domain does (with duplicates allowed, only later delete
//!   fragments count). Those tiles are skipped by the read of the box.
//!
//! Dense overlaps are tested on whole fragments' non-empty domains, so many overlapping
//! fragments simply mean fewer summaries (consolidation restores them). Work is bounded: a query with
//! more tiles x fragments than `MAX_CHECKS`, or whose remainder would take more than
//! `MAX_BOXES` reads, uses no summary.

use super::partial::Partial;
use super::{AggregateOp, Resolved};
use crate::error::{Error, Result};
use crate::fast_hash::FastSet;
use crate::fragment::{Extremes, FragmentMetadata, TileSummary, METADATA_FILE};
use crate::geometry::{meet, ordinal_ranges, within, DimRange, Rect, Subarray};
use crate::snapshot::{Snapshot, TileKey};
use crate::stats::{self, Counter};

/// Most tile x fragment tests one plan makes.
const MAX_CHECKS: u64 = 1 << 22;
/// Most boxes a dense remainder is read as.
const MAX_BOXES: usize = 4096;

/// What is left to read once the summarized tiles are taken out.
pub(super) enum Rest {
    /// Dense: these boxes (per dimension one range, in the dimensions' own numbers).
    Boxes(Vec<Vec<Vec<DimRange>>>),
    /// Sparse: the query's ranges, skipping these tiles.
    Skip(FastSet<TileKey>),
}

/// The summarized tiles' partials (one per request) and the rest to read.
pub(super) struct Plan {
    pub(super) partials: Vec<Partial>,
    pub(super) rest: Rest,
}

/// The plan for `reqs` over `ranges`, or `None` when no tile can be answered from summaries.
///
/// # Errors
/// A summary inconsistent with its tile (corrupt metadata), or the ranges' errors.
pub(super) fn plan(array: &Snapshot, ranges: &[Vec<DimRange>], reqs: &[Resolved]) -> Result<Option<Plan>> {
    if array.fragments.iter().all(|f| f.stats.is_empty()) {
        return Ok(None);
    }
    if array.schema().is_sparse() {
        sparse_plan(array, ranges, reqs)
    } else {
        dense_plan(array, ranges, reqs)
    }
}

/// The partials of `reqs` over tile `tile` (of `cells` cells) of fragment `fi`, or `None`
/// when the fragment has no summary of a requested attribute for it.
fn tile_partials(
    array: &Snapshot,
    fi: usize,
    tile: u64,
    cells: u64,
    reqs: &[Resolved],
) -> Result<Option<Vec<Partial>>> {
    let f = &array.fragments[fi];
    let mut out = Vec::with_capacity(reqs.len());
    for r in reqs {
        let Some(s) = f.stats.of(r.attr, tile) else { return Ok(None) };
        if s.nulls.checked_add(s.values).is_none_or(|n| n > cells) {
            return Err(Error::corrupt(
                array.fragment_dir(fi).join(METADATA_FILE),
                format!("tile statistics of tile {tile}: {} nulls and {} values in {cells} cells", s.nulls, s.values),
            ));
        }
        let Some(p) = partial_of(r, s, cells) else { return Ok(None) };
        out.push(p);
    }
    Ok(Some(out))
}

/// The partial of `r` over a tile of `cells` cells summarized by `s`.
fn partial_of(r: &Resolved, s: &TileSummary, cells: u64) -> Option<Partial> {
    let some = s.values > 0;
    Some(match (r.op, s.extremes) {
        (AggregateOp::Count, _) => Partial::Count(cells),
        (AggregateOp::CountValid, _) => Partial::Count(cells - s.nulls),
        (AggregateOp::NullCount, _) => Partial::Count(s.nulls),
        (AggregateOp::Sum | AggregateOp::Mean, Extremes::Int { sum, .. }) => Partial::IntSum { sum, n: s.values },
        (AggregateOp::Sum | AggregateOp::Mean, Extremes::Float { sum, .. }) => Partial::FloatSum { sum, n: s.values },
        (AggregateOp::Min, Extremes::Int { min, .. }) => Partial::IntExt(some.then_some(min)),
        (AggregateOp::Max, Extremes::Int { max, .. }) => Partial::IntExt(some.then_some(max)),
        (AggregateOp::Min, Extremes::Float { min, .. }) => Partial::FloatExt(some.then_some(min)),
        (AggregateOp::Max, Extremes::Float { max, .. }) => Partial::FloatExt(some.then_some(max)),
        _ => return None,
    })
}

/// Merges `parts` into `totals`.
fn merge_into(totals: &mut [Partial], parts: Vec<Partial>, reqs: &[Resolved], array: &Snapshot) -> Result<()> {
    for ((t, p), r) in totals.iter_mut().zip(parts).zip(reqs) {
        t.merge(p, r.op, &array.schema().attrs[r.attr].name)?;
    }
    Ok(())
}

fn dense_plan(array: &Snapshot, ranges: &[Vec<DimRange>], reqs: &[Resolved]) -> Result<Option<Plan>> {
    let schema = array.schema();
    let norm = Subarray::from_dim_ranges(schema, ranges)?.normalize(schema)?;
    if norm.iter().any(|r| r.len() != 1) {
        return Ok(None);
    }
    let q: Rect = norm.iter().map(|r| r[0]).collect();
    let grid = &array.grid;
    // Tiles lying whole inside the box, per dimension.
    let mut inner: Rect = Vec::with_capacity(q.len());
    for (&[lo, hi], &e) in q.iter().zip(&grid.extents) {
        let first = lo.div_ceil(e);
        let Some(end) = hi.checked_add(1).map(|h| h / e) else { return Ok(None) };
        if end <= first {
            return Ok(None);
        }
        inner.push([first, end - 1]);
    }
    let tiles = inner.iter().try_fold(1u64, |n, [lo, hi]| n.checked_mul(hi - lo + 1));
    let frags = array.fragments.len() as u64;
    if tiles.is_none_or(|t| t.saturating_mul(frags) > MAX_CHECKS) {
        return Ok(None);
    }
    // Each fragment's tile range (dense ones) for finding a tile's number in it.
    let tranges: Vec<Option<Rect>> =
        array.fragments.iter().map(|f| f.is_dense().then(|| grid.tile_range(&f.domain))).collect();
    let cells = grid.cells_per_tile();
    let mut totals: Vec<Partial> = reqs.iter().map(Partial::empty).collect();
    let (mut used, mut missing) = (0u64, Vec::new());
    for tc in grid.tiles_in(&inner) {
        let rect = grid.tile_rect(&tc);
        let newest = array.fragments.iter().enumerate().rev().find(|(_, f)| meet(&f.domain, &rect));
        let parts = match newest {
            Some((fi, f)) if f.is_dense() && within(&rect, &f.domain) => {
                let tr = tranges[fi].as_ref().expect("dense fragments have a tile range");
                tile_partials(array, fi, grid.tile_index(tr, &tc), cells, reqs)?
            }
            _ => None,
        };
        match parts {
            Some(p) => {
                merge_into(&mut totals, p, reqs, array)?;
                used += 1;
            }
            None => missing.push(tc),
        }
    }
    if used == 0 {
        return Ok(None);
    }
    let Some(boxes) = remainder(grid, &q, &inner, missing) else { return Ok(None) };
    stats::add(Counter::ReaderAggregateTilesFromStats, used);
    stats::add(Counter::ReaderAggregateCellsFromStats, used.saturating_mul(cells));
    let boxes = boxes
        .into_iter()
        .map(|b| b.iter().zip(&schema.dims).map(|(&[lo, hi], d)| vec![DimRange::from_ordinals(d, lo, hi)]).collect())
        .collect();
    Ok(Some(Plan { partials: totals, rest: Rest::Boxes(boxes) }))
}

/// The boxes (normalized cells) covering `q` less the tiles of `inner` not in `missing`: the
/// frame of `q` around `inner`, then the missing tiles as runs along the last dimension.
/// `None` when that takes more than `MAX_BOXES` boxes.
fn remainder(
    grid: &crate::geometry::TileGrid,
    q: &[[u64; 2]],
    inner: &[[u64; 2]],
    mut missing: Vec<Vec<u64>>,
) -> Option<Vec<Rect>> {
    let n = q.len();
    let cells_of =
        |t: &[[u64; 2]]| -> Rect { t.iter().zip(&grid.extents).map(|(&[a, b], &e)| [a * e, b * e + e - 1]).collect() };
    let core = cells_of(inner);
    let mut out = Vec::new();
    // Peel q dimension by dimension: below and above the core, then narrow to the core.
    let mut rest: Rect = q.to_vec();
    for d in 0..n {
        if rest[d][0] < core[d][0] {
            let mut b = rest.clone();
            b[d] = [rest[d][0], core[d][0] - 1];
            out.push(b);
        }
        if core[d][1] < rest[d][1] {
            let mut b = rest.clone();
            b[d] = [core[d][1] + 1, rest[d][1]];
            out.push(b);
        }
        rest[d] = core[d];
    }
    // Missing tiles, row-major, merged into runs along the last dimension.
    missing.sort_unstable();
    let mut run: Option<Vec<u64>> = None;
    let mut end = 0u64;
    for tc in missing {
        match &run {
            Some(s) if s[..n - 1] == tc[..n - 1] && end + 1 == tc[n - 1] => end = tc[n - 1],
            _ => {
                if let Some(s) = run.take() {
                    out.push(run_box(grid, &s, end));
                }
                end = tc[n - 1];
                run = Some(tc);
            }
        }
        if out.len() > MAX_BOXES {
            return None;
        }
    }
    if let Some(s) = run {
        out.push(run_box(grid, &s, end));
    }
    (out.len() <= MAX_BOXES).then_some(out)
}

/// The cells of the tiles from `start` to tile `end` of the last dimension.
fn run_box(grid: &crate::geometry::TileGrid, start: &[u64], end: u64) -> Rect {
    let n = start.len();
    let mut r = grid.tile_rect(start);
    r[n - 1][1] = grid.tile_rect(&[&start[..n - 1], &[end][..]].concat())[n - 1][1];
    r
}

fn sparse_plan(array: &Snapshot, ranges: &[Vec<DimRange>], reqs: &[Resolved]) -> Result<Option<Plan>> {
    let schema = array.schema();
    let oranges = ordinal_ranges(schema, ranges)?;
    if oranges.iter().any(|r| r.len() != 1) {
        return Ok(None);
    }
    let q: Rect = oranges.iter().map(|r| r[0]).collect();
    let index = array.update_index()?;
    let dups = schema.allows_duplicates;
    let frags = &array.fragments;
    let mut totals: Vec<Partial> = reqs.iter().map(Partial::empty).collect();
    let mut skip = FastSet::default();
    let (mut used, mut used_cells, mut checks) = (0u64, 0u64, 0u64);
    for (fi, f) in frags.iter().enumerate() {
        let Some(sp) = f.sparse.as_ref() else { continue };
        if f.is_delete() || f.stats.is_empty() || index.as_ref().is_some_and(|ix| ix.covers(fi)) {
            continue;
        }
        // The fragments that could change this one's cells.
        let others: Vec<&FragmentMetadata> = frags
            .iter()
            .enumerate()
            .filter(|&(gi, g)| gi != fi && (!dups || (gi > fi && g.is_delete())) && meet(&g.domain, &f.domain))
            .map(|(_, g)| g)
            .collect();
        for t in sp.rtree.search(&sp.mbrs, |r| meet(r, &q)) {
            let mbr = &sp.mbrs[t];
            checks += 1 + others.len() as u64;
            if checks > MAX_CHECKS {
                return Ok(None);
            }
            if !within(mbr, &q) || others.iter().any(|g| g.may_hold_in(mbr)) {
                continue;
            }
            let cells = sp.tile_cells[t];
            if let Some(p) = tile_partials(array, fi, t as u64, cells, reqs)? {
                merge_into(&mut totals, p, reqs, array)?;
                skip.insert((fi, t as u64));
                used += 1;
                used_cells += cells;
            }
        }
    }
    if used == 0 {
        return Ok(None);
    }
    stats::add(Counter::ReaderAggregateTilesFromStats, used);
    stats::add(Counter::ReaderAggregateCellsFromStats, used_cells);
    Ok(Some(Plan { partials: totals, rest: Rest::Skip(skip) }))
}
