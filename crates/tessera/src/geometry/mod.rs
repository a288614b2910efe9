//! Geometry of the cell space: inclusive rectangles over normalized (zero-based `u64`)
//! coordinates, the space-tile grid, cell and tile orders (row-major, col-major, and the Z and
//! Hilbert curves of `order.rs`), moving cells into a new order (`gather.rs`), and the two
//! kernels every read and write runs through: splitting a run of cells of an ordered box into
//! sub-boxes, and copying a box between two strided buffers in whole contiguous runs.

mod coords;
mod copy;
mod gather;
mod grid;
mod layout;
mod order;
mod rect;
mod subarray;

pub(crate) use coords::{
    cells_in_box, check_in_range, ordinal_values, ordinals, ordinals_at, pack_keys_with_width, sort_permutation,
    value_text, KeysCome, OrderKeys,
};
pub(crate) use copy::{contiguous_runs, copy_strided, fill_strided, for_each_cell_pair, Dims, Strided};
pub(crate) use gather::gather_cells;
pub(crate) use grid::TileGrid;
pub use grid::{dense_tile_parts, TilePart};
pub(crate) use layout::layout_counter;
pub use layout::Layout;
pub use order::curve_key;
pub(crate) use order::{Curve, TilePermutation};
pub(crate) use rect::{
    bounding_box, cells, checked_cells, intersect, meet, split_interval, strides, subtract, within, Rect,
};
pub(crate) use subarray::ordinal_ranges;
pub use subarray::{DimRange, Subarray};
