//! Reads: a query over a subarray and a set of attributes, planned into per-tile copy operations
//! (`plan`) and executed with coalesced, parallel I/O and parallel unfiltering (`execute`).
//! Results larger than the caller's buffers come back in parts.

mod execute;
mod overlay;
mod plan;
mod query;
mod sparse;
mod update_index;

pub(crate) use query::{layout_counter, memory_limit};
pub use query::{AttrBuffer, AttrData, ReadQuery, ReadResult, ReadStatus};
pub use sparse::SparseReadQuery;
pub(crate) use update_index::UpdateIndex;

/// The order of cells in a query's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The last dimension varies fastest.
    RowMajor,
    /// The first dimension varies fastest.
    ColMajor,
    /// The array's global order: tile by tile in tile order, cells in cell order inside a tile.
    Global,
    /// Any order the engine finds fastest (sparse arrays).
    Unordered,
}

impl Layout {
    /// Parses "row-major" ("C"), "col-major" ("F") or "global" ("G").
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "row-major" | "C" | "R" => Some(Layout::RowMajor),
            "col-major" | "F" => Some(Layout::ColMajor),
            "global" | "G" => Some(Layout::Global),
            "unordered" | "U" => Some(Layout::Unordered),
            _ => None,
        }
    }

    /// The name accepted by [`Layout::parse`].
    pub fn name(self) -> &'static str {
        match self {
            Layout::RowMajor => "row-major",
            Layout::ColMajor => "col-major",
            Layout::Global => "global",
            Layout::Unordered => "unordered",
        }
    }
}
