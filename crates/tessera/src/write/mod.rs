//! Writes: validating the caller's buffers and placing their cells into space tiles of a new
//! fragment (docs/format.md, "Dense fragments").

mod dense;
mod fragment_writer;
mod sparse;

pub(crate) use dense::check_tile_sizes;
pub use dense::DenseWriter;
pub(crate) use fragment_writer::{FragmentWriter, UnfilteredTile};
pub(crate) use sparse::coord_ordinals;
pub use sparse::SparseWriter;
