//! The space-tile grid of a dense array: tile extents, tile coordinates, and the tile order in
//! which fragments store their tiles.

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
    pub cell_strides: Vec<u64>,
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
        }
    }

    /// Cells per tile.
    pub(crate) fn cells_per_tile(&self) -> u64 {
        self.extents.iter().product()
    }

    /// The cell rectangle of the tile at tile coordinates `tc` (may extend past the domain).
    pub(crate) fn tile_rect(&self, tc: &[u64]) -> Rect {
        tc.iter().zip(&self.extents).map(|(&t, &e)| [t * e, t * e + e - 1]).collect()
    }

    /// The rectangle of tile coordinates of the tiles that overlap `r`.
    pub(crate) fn tile_range(&self, r: &[[u64; 2]]) -> Rect {
        r.iter().zip(&self.extents).map(|(&[lo, hi], &e)| [lo / e, hi / e]).collect()
    }

    /// Tile coordinates in `trange`, in tile order.
    pub(crate) fn tiles_in(&self, trange: &[[u64; 2]]) -> Vec<Vec<u64>> {
        let shape: Vec<u64> = trange.iter().map(|[lo, hi]| hi - lo + 1).collect();
        let n = shape.len();
        let total: u64 = shape.iter().product();
        let fastest_first: Vec<usize> = match self.tile_order {
            CellOrder::RowMajor | CellOrder::Hilbert => (0..n).rev().collect(),
            CellOrder::ColMajor => (0..n).collect(),
        };
        let mut out = Vec::with_capacity(total as usize);
        let mut tc: Vec<u64> = trange.iter().map(|r| r[0]).collect();
        for _ in 0..total {
            out.push(tc.clone());
            for &d in &fastest_first {
                tc[d] += 1;
                if tc[d] <= trange[d][1] {
                    break;
                }
                tc[d] = trange[d][0];
            }
        }
        out
    }

    /// Position of tile `tc` among the tiles of `trange` in tile order.
    pub(crate) fn tile_index(&self, trange: &[[u64; 2]], tc: &[u64]) -> u64 {
        let shape: Vec<u64> = trange.iter().map(|[lo, hi]| hi - lo + 1).collect();
        let st = strides(&shape, self.tile_order);
        tc.iter().zip(trange).zip(&st).map(|((t, r), s)| (t - r[0]) * s).sum()
    }

    /// Element offset inside a tile whose first cell is `tile_lo` of the cell at `at`.
    pub(crate) fn cell_offset(&self, tile_lo: &[u64], at: &[u64]) -> u64 {
        at.iter().zip(tile_lo).zip(&self.cell_strides).map(|((a, l), s)| (a - l) * s).sum()
    }
}
