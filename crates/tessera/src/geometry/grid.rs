//! The space-tile grid of a dense array: tile extents, tile coordinates, and the tile order in
//! which fragments store their tiles (row-major, col-major, or a curve of `order.rs`: the tiles
//! of a range sorted by their keys over the domain's tile coordinates).

use std::sync::Arc;

use super::copy::Dims;
use super::order::{ranked_tiles, tile_permutation, Curve, RankedTiles, TilePermutation};
use super::rect::{strides, Rect};
use crate::schema::{ArraySchema, CellOrder, Dimension};

/// The regular grid of space tiles over a normalized domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TileGrid {
    /// Tile extent per dimension.
    pub extents: Vec<u64>,
    /// Number of tiles per dimension.
    pub counts: Vec<u64>,
    /// Order of cells inside a tile.
    pub cell_order: CellOrder,
    /// Order of tiles.
    pub tile_order: CellOrder,
    /// Element strides of a tile's cells in cell order.
    pub cell_strides: Dims,
    /// The last normalized coordinate per dimension (domain size - 1).
    pub last: Vec<u64>,
    /// The tile order's curve over tile coordinates, if it is one.
    pub tile_curve: Option<Curve>,
    /// The cell order's curve over offsets inside a tile, if it is one (stored tiles only).
    pub cell_curve: Option<Curve>,
}

impl TileGrid {
    /// The grid of a schema.
    pub(crate) fn new(schema: &ArraySchema) -> Self {
        let extents: Vec<u64> = schema.dims.iter().map(Dimension::tile_extent).collect();
        let cell_strides = strides(&extents, schema.cell_order);
        Self {
            counts: schema.dims.iter().map(|d| d.tile_count()).collect(),
            extents,
            cell_order: schema.cell_order,
            tile_order: schema.tile_order,
            cell_strides,
            last: schema.dims.iter().map(|d| d.domain_size() - 1).collect(),
            tile_curve: Curve::new(schema.tile_order, &schema.tile_curve_widths()),
            cell_curve: if schema.legacy_hilbert() {
                None
            } else {
                Curve::new(schema.cell_order, &schema.cell_curve_widths())
            },
        }
    }

    /// The permutation between a tile's working (row-major) and stored cell order, when the cell
    /// order is a curve (computed once per tile shape).
    pub(crate) fn permutation(&self) -> Option<Arc<TilePermutation>> {
        self.cell_curve.as_ref().map(|c| tile_permutation(c, &self.extents))
    }

    /// Tile coordinates of the tile numbered `lin` row-major inside `trange`.
    fn row_major_tile(trange: &[[u64; 2]], lin: u64) -> Vec<u64> {
        let mut tc = vec![0u64; trange.len()];
        let mut rest = lin;
        for d in (0..trange.len()).rev() {
            let side = trange[d][1] - trange[d][0] + 1;
            tc[d] = trange[d][0] + rest % side;
            rest /= side;
        }
        tc
    }

    /// Cells per tile.
    pub(crate) fn cells_per_tile(&self) -> u64 {
        self.extents.iter().product()
    }

    /// The cell rectangle of the tile at tile coordinates `tc`, cut at the end of the domain:
    /// the last tile of a dimension whose extent does not divide the domain would otherwise end
    /// past it, and past `u64::MAX` for a domain of 2^64 - 1 coordinates.
    pub(crate) fn tile_rect(&self, tc: &[u64]) -> Rect {
        tc.iter()
            .zip(&self.extents)
            .zip(&self.last)
            .map(|((&t, &e), &last)| {
                // A tile of the domain starts inside it (`t * e <= last`); saturating keeps a
                // tile coordinate past the domain from wrapping around to its start.
                let lo = t.saturating_mul(e);
                [lo, lo.saturating_add(e - 1).min(last)]
            })
            .collect()
    }

    /// The rectangle of tile coordinates of the tiles that overlap `r`.
    pub(crate) fn tile_range(&self, r: &[[u64; 2]]) -> Rect {
        r.iter().zip(&self.extents).map(|(&[lo, hi], &e)| [lo / e, hi / e]).collect()
    }

    /// Tile coordinates in `trange`, in tile order, one at a time: a range may hold more tiles
    /// than memory could list (callers stop early, e.g. at the end of a batch).
    /// Curve orders rank the range's tiles first (not cached: query pieces rarely repeat): as
    /// many as the cells a read or write of the range handles at least.
    pub(crate) fn tiles_in<'a>(&self, trange: &'a [[u64; 2]]) -> Box<dyn Iterator<Item = Vec<u64>> + 'a> {
        if let Some(c) = &self.tile_curve {
            let ranked = RankedTiles::build(c, trange);
            return Box::new((0..ranked.len()).map(move |r| Self::row_major_tile(trange, ranked.lin(r))));
        }
        let n = trange.len();
        let fastest_first: Vec<usize> = match self.tile_order {
            CellOrder::ColMajor => (0..n).collect(),
            _ => (0..n).rev().collect(),
        };
        let mut next: Option<Vec<u64>> = Some(trange.iter().map(|r| r[0]).collect());
        Box::new(std::iter::from_fn(move || {
            let tc = next.take()?;
            let mut after = tc.clone();
            for &d in &fastest_first {
                if after[d] < trange[d][1] {
                    after[d] += 1;
                    next = Some(after);
                    break;
                }
                after[d] = trange[d][0];
            }
            Some(tc)
        }))
    }

    /// Position of tile `tc` among the tiles of `trange` in tile order.
    pub(crate) fn tile_index(&self, trange: &[[u64; 2]], tc: &[u64]) -> u64 {
        if let Some(c) = &self.tile_curve {
            return ranked_tiles(c, trange).rank(c.key(tc));
        }
        let shape: Vec<u64> = trange.iter().map(|[lo, hi]| hi - lo + 1).collect();
        let st = strides(&shape, self.tile_order);
        tc.iter().zip(trange).zip(&st).map(|((t, r), s)| (t - r[0]) * s).sum()
    }

    /// The tile at position `index` among the tiles of `trange` in tile order (the inverse of
    /// [`TileGrid::tile_index`]).
    pub(crate) fn tile_at(&self, trange: &[[u64; 2]], index: u64) -> Vec<u64> {
        if let Some(c) = &self.tile_curve {
            return Self::row_major_tile(trange, ranked_tiles(c, trange).lin(index));
        }
        let shape: Vec<u64> = trange.iter().map(|[lo, hi]| hi - lo + 1).collect();
        let st = strides(&shape, self.tile_order);
        let mut rest = index;
        let mut tc = vec![0u64; trange.len()];
        // Slowest dimension first.
        let dims: Vec<usize> = match self.tile_order {
            CellOrder::ColMajor => (0..trange.len()).rev().collect(),
            _ => (0..trange.len()).collect(),
        };
        for d in dims {
            tc[d] = trange[d][0] + rest / st[d];
            rest %= st[d];
        }
        tc
    }

    /// Element offset inside a tile whose first cell is `tile_lo` of the cell at `at`.
    pub(crate) fn cell_offset(&self, tile_lo: &[u64], at: &[u64]) -> u64 {
        at.iter().zip(tile_lo).zip(&self.cell_strides).map(|((a, l), s)| (a - l) * s).sum()
    }
}

/// One tile a dense read of a whole-domain fragment copies from ([`dense_tile_parts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TilePart {
    /// The tile's position in tile order.
    pub position: u64,
    /// Per rectangle of the subarray that meets the tile, the offsets (in the tile's stored cell
    /// order) of the first and the last cell of their intersection: the span of the tile a copy
    /// of that intersection reads. A curve cell order stores no box contiguously: the whole tile.
    pub spans: Vec<[u64; 2]>,
    /// The copy is the whole tile as one contiguous run of the result (a subarray of one range
    /// per dimension, the result laid out in `layout`): the reader then reads an unfiltered tile
    /// that its tile cache does not take straight into the result.
    pub one_run: bool,
    /// Cells the copies move one by one because their runs are no longer than a cell (a column
    /// of a row-major tile; not points): the reader streams a tile it reads whole into the
    /// result only while these are at most a 64th of the tile's cells.
    pub cell_runs: u64,
}

/// The tiles of `schema` (a dense fragment over its whole domain) that a read of `subarray` into
/// a result laid out in `layout` copies from, with the spans of cells it copies from each: the
/// reader's own plan, for a layout advisor pricing reads of part of a tile (checksum blocks of
/// unfiltered tiles, chunks of filtered ones) without writing the array. Sorted by position (the
/// order in which a dense fragment over the whole domain stores its tiles), each tile once.
///
/// # Errors
/// The subarray's errors ([`super::Subarray::normalize`]); `BadSubarray` also when the touched
/// tiles, or the intersections of the subarray's rectangles with them (the spans), would be more
/// than `max_tiles` (the list is built in memory) or the domain has more than 2^32 tiles.
pub fn dense_tile_parts(
    schema: &ArraySchema,
    subarray: &super::Subarray,
    layout: super::Layout,
    max_tiles: u64,
) -> Result<Vec<TilePart>, crate::error::QueryError> {
    let touched = TouchedTiles::of(schema, subarray, max_tiles)?;
    let grid = &touched.grid;
    let cells = grid.cells_per_tile();
    let single = touched.ranges.iter().all(|r| r.len() == 1);
    // The result's strides (a box as long as the subarray's ranges per dimension together).
    let result_shape: Vec<u64> = touched.ranges.iter().map(|r| r.iter().map(|[lo, hi]| hi - lo + 1).sum()).collect();
    let result_order = if layout == super::Layout::ColMajor { CellOrder::ColMajor } else { CellOrder::RowMajor };
    let result_strides = strides(&result_shape, result_order);
    let mut out: Vec<TilePart> = touched
        .tiles
        .iter()
        .map(|(position, tc)| {
            let tile = grid.tile_rect(tc);
            let tile_lo: Vec<u64> = tile.iter().map(|r| r[0]).collect();
            let parts = touched.parts_in(&tile);
            let spans = parts
                .iter()
                .map(|p| match grid.cell_curve {
                    Some(_) => [0, cells - 1],
                    None => {
                        let lo: Vec<u64> = p.iter().map(|r| r[0]).collect();
                        let first = grid.cell_offset(&tile_lo, &lo);
                        let hi: Vec<u64> = p.iter().map(|r| r[1]).collect();
                        [first, grid.cell_offset(&tile_lo, &hi)]
                    }
                })
                .collect();
            let whole = parts.len() == 1 && parts[0] == tile && grid.extents.iter().zip(&tile).all(|(e, r)| r[1] - r[0] + 1 == *e);
            let one_run = single && whole && grid.cell_curve.is_none() && {
                let src = super::Strided { offset: 0, strides: grid.cell_strides.clone() };
                let dst = super::Strided { offset: 0, strides: result_strides.clone() };
                let shape: Vec<u64> = tile.iter().map(|r| r[1] - r[0] + 1).collect();
                matches!(super::contiguous_runs(1, &shape, &src, &dst).as_deref(), Some([(0, 0, n)]) if *n as u64 == cells)
            };
            let cell_runs = match grid.cell_curve {
                Some(_) => 0,
                None => parts.iter().map(|p| single_cell_runs(p, &grid.cell_strides, &result_strides)).sum(),
            };
            TilePart { position: *position, spans, one_run, cell_runs }
        })
        .collect();
    out.sort_unstable_by_key(|t| t.position);
    Ok(out)
}

/// The cells of the copy of rectangle `part` (from a tile of cell strides `src` into a result
/// of strides `dst`) that move one by one: all of them when the copy has no run longer than a
/// cell (and is not one cell), else none.
fn single_cell_runs(part: &[[u64; 2]], src: &[u64], dst: &[u64]) -> u64 {
    let shape: Vec<u64> = part.iter().map(|r| r[1] - r[0] + 1).collect();
    if shape.iter().all(|&n| n == 1) {
        return 0;
    }
    let src = super::Strided { offset: 0, strides: src.into() };
    let dst = super::Strided { offset: 0, strides: dst.into() };
    match super::contiguous_runs(1, &shape, &src, &dst) {
        Some(_) => 0,
        None => shape.iter().product(),
    }
}

/// The tiles the rectangles of a subarray touch, with their tile coordinates.
struct TouchedTiles {
    grid: TileGrid,
    /// The subarray's normalized ranges per dimension.
    ranges: Vec<Vec<[u64; 2]>>,
    /// (position in tile order, tile coordinates), each tile once.
    tiles: Vec<(u64, Vec<u64>)>,
}

impl TouchedTiles {
    fn of(schema: &ArraySchema, subarray: &super::Subarray, max_tiles: u64) -> Result<Self, crate::error::QueryError> {
        use crate::error::QueryError;
        let too_large = QueryError::BadSubarray;
        let grid = TileGrid::new(schema);
        let domain_tiles = grid.counts.iter().try_fold(1u64, |a, &c| a.checked_mul(c)).filter(|&t| t <= 1 << 32);
        if domain_tiles.is_none() {
            return Err(too_large("the domain has more than 2^32 tiles".into()));
        }
        let full: Rect = grid.counts.iter().map(|&c| [0, c - 1]).collect();
        let ranges = subarray.normalize(schema)?;
        // Tile ranges per dimension, merged where they overlap or touch (several cell ranges may
        // share tiles).
        let per_dim: Vec<Vec<[u64; 2]>> = ranges
            .iter()
            .zip(&grid.extents)
            .map(|(rs, &e)| {
                let mut t: Vec<[u64; 2]> = rs.iter().map(|&[lo, hi]| [lo / e, hi / e]).collect();
                t.sort_unstable();
                let mut merged: Vec<[u64; 2]> = Vec::with_capacity(t.len());
                for r in t {
                    match merged.last_mut() {
                        Some(last) if r[0] <= last[1].saturating_add(1) => last[1] = last[1].max(r[1]),
                        _ => merged.push(r),
                    }
                }
                merged
            })
            .collect();
        let touched = per_dim
            .iter()
            .map(|rs| rs.iter().map(|[lo, hi]| hi - lo + 1).sum::<u64>())
            .try_fold(1u64, u64::checked_mul)
            .filter(|&t| t <= max_tiles)
            .ok_or_else(|| too_large(format!("the subarray touches more than {max_tiles} tiles")))?;
        // The parts (a rectangle's intersection with a tile) over all tiles: per dimension, the
        // tiles each range spans, summed; their product. At least `touched`.
        ranges
            .iter()
            .zip(&grid.extents)
            .map(|(rs, &e)| rs.iter().try_fold(0u64, |a, &[lo, hi]| a.checked_add(hi / e - lo / e + 1)))
            .try_fold(1u64, |a, n| a.checked_mul(n?))
            .filter(|&p| p <= max_tiles)
            .ok_or_else(|| too_large(format!("the subarray's rectangles meet tiles more than {max_tiles} times")))?;
        let mut tiles = Vec::with_capacity(usize::try_from(touched).unwrap_or(0));
        let n = per_dim.len();
        let mut pick = vec![0usize; n];
        loop {
            let trange: Rect = (0..n).map(|d| per_dim[d][pick[d]]).collect();
            let shape: Vec<u64> = trange.iter().map(|[lo, hi]| hi - lo + 1).collect();
            let count: u64 = shape.iter().product();
            for lin in 0..count {
                let tc = TileGrid::row_major_tile(&trange, lin);
                tiles.push((grid.tile_index(&full, &tc), tc));
            }
            // Next combination of one tile range per dimension (odometer).
            let mut d = n;
            loop {
                if d == 0 {
                    return Ok(Self { grid, ranges, tiles });
                }
                d -= 1;
                pick[d] += 1;
                if pick[d] < per_dim[d].len() {
                    break;
                }
                pick[d] = 0;
            }
        }
    }

    /// The intersections with `tile` of the subarray's rectangles that meet it.
    fn parts_in(&self, tile: &[[u64; 2]]) -> Vec<Rect> {
        // Per dimension, the parts of its ranges inside the tile; their cross product.
        let per_dim: Vec<Vec<[u64; 2]>> = self
            .ranges
            .iter()
            .zip(tile)
            .map(|(rs, t)| {
                rs.iter().filter(|r| r[0] <= t[1] && t[0] <= r[1]).map(|r| [r[0].max(t[0]), r[1].min(t[1])]).collect()
            })
            .collect();
        let mut out: Vec<Rect> = vec![Rect::new()];
        for parts in &per_dim {
            out = out.iter().flat_map(|o| parts.iter().map(move |p| o.iter().copied().chain([*p]).collect())).collect();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A grid over domains of `sizes` coordinates with tile `extents` (cell strides unused).
    fn grid(sizes: &[u64], extents: &[u64], order: CellOrder) -> TileGrid {
        let counts: Vec<u64> = sizes.iter().zip(extents).map(|(s, e)| s.div_ceil(*e)).collect();
        let widths: Vec<u32> = counts.iter().map(|&c| crate::schema::bit_width(c)).collect();
        TileGrid {
            tile_curve: Curve::new(order, &widths),
            cell_curve: None,
            extents: extents.to_vec(),
            counts: sizes.iter().zip(extents).map(|(s, e)| s.div_ceil(*e)).collect(),
            cell_order: order,
            tile_order: order,
            cell_strides: Dims::from_elem(1, sizes.len()),
            last: sizes.iter().map(|s| s - 1).collect(),
        }
    }

    /// Domain sizes up to the most allowed (2^64 - 1), extents up to the size, and a coordinate
    /// near either end of the domain.
    fn dim() -> impl Strategy<Value = (u64, u64, u64)> {
        let size = prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), Just(1u64 << 63), 1u64..100];
        (size, any::<u64>(), 0u64..16, any::<bool>(), any::<bool>()).prop_map(|(size, e, k, top, big)| {
            // Small extents that do not divide 2^64 - 1, or any extent up to the size.
            let e = if big { 1 + e % size } else { 1 + e % 20.min(size) };
            let k = k.min(size - 1);
            (size, e, if top { size - 1 - k } else { k })
        })
    }

    proptest! {
        /// Tile coordinates, rectangles and positions against a reference in u128.
        #[test]
        fn tiles_at_the_end_of_u64_domains(dims in prop::collection::vec(dim(), 1..4), o in 0..4usize) {
            let order = [CellOrder::RowMajor, CellOrder::ColMajor, CellOrder::Z, CellOrder::Hilbert][o];
            let sizes: Vec<u64> = dims.iter().map(|d| d.0).collect();
            let extents: Vec<u64> = dims.iter().map(|d| d.1).collect();
            let g = grid(&sizes, &extents, order);
            // Schemas whose curve keys need more than 128 bits are refused.
            let widths: Vec<u32> = g.counts.iter().map(|&c| crate::schema::bit_width(c)).collect();
            prop_assume!(order.curve_bits(&widths) <= 128);
            let at: Vec<u64> = dims.iter().map(|d| d.2).collect();
            let point: Rect = at.iter().map(|&x| [x, x]).collect();
            let tr = g.tile_range(&point);
            let tc: Vec<u64> = tr.iter().map(|r| r[0]).collect();
            let rect = g.tile_rect(&tc);
            for d in 0..dims.len() {
                let (size, e, x) = (u128::from(sizes[d]), u128::from(extents[d]), u128::from(at[d]));
                let t = x / e;
                prop_assert_eq!(u128::from(tc[d]), t);
                prop_assert_eq!(u128::from(rect[d][0]), t * e);
                prop_assert_eq!(u128::from(rect[d][1]), (t * e + e - 1).min(size - 1));
            }
            // Positions among the tiles of a range around the point, when it has fewer than 2^64.
            let around: Rect = tc.iter().zip(&g.counts).map(|(&t, &n)| [t.saturating_sub(2), t.saturating_add(2).min(n - 1)]).collect();
            let count: u128 = around.iter().map(|r| u128::from(r[1] - r[0] + 1)).product();
            let index = g.tile_index(&around, &tc);
            prop_assert!(u128::from(index) < count);
            prop_assert_eq!(g.tile_at(&around, index), tc.clone());
            let all: Vec<Vec<u64>> = g.tiles_in(&around).collect();
            prop_assert_eq!(all.len() as u128, count);
            for (k, t) in all.iter().enumerate() {
                prop_assert_eq!(g.tile_index(&around, t), k as u64);
                prop_assert_eq!(&g.tile_at(&around, k as u64), t);
            }
        }
    }
}
