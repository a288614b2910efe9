//! Layouts: the order of cells in a query's buffers, and the statistics counter of each.

use crate::stats::Counter;

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

/// The statistics counter of a query layout.
pub(crate) fn layout_counter(layout: Layout) -> Counter {
    match layout {
        Layout::RowMajor => Counter::SmQuerySubmitLayoutRowMajor,
        Layout::ColMajor => Counter::SmQuerySubmitLayoutColMajor,
        Layout::Global => Counter::SmQuerySubmitLayoutGlobalOrder,
        Layout::Unordered => Counter::SmQuerySubmitLayoutUnordered,
    }
}
