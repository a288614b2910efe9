//! Reads: a query over a subarray and a set of attributes, planned into per-tile copy operations
//! (`plan`) and executed with coalesced, parallel I/O and parallel unfiltering (`execute`); query
//! conditions are applied to the merged cells (`condition`).
//! Results larger than the caller's buffers come back in parts.

mod condition;
mod execute;
mod newest_wins;
mod overlay;
mod plan;
mod query;
mod sparse;
mod streamed;

pub use execute::units_read_in_part;
pub use query::{AttrBuffer, AttrData, ReadQuery, ReadResult, ReadStatus};
pub(crate) use sparse::result_cell_bytes;
pub use sparse::SparseReadQuery;
pub use streamed::DIRECT_PIECE;
