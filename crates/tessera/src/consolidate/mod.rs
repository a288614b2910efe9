//! Consolidation: merging consecutive fragments into one (`plan.rs` chooses, pure;
//! `execute.rs` does it in bounded memory, a sparse one band of the global order at a time,
//! `bands.rs`) and vacuuming the fragments a consolidation
//! superseded (`vacuum.rs`, under the array's lock held exclusively); one file of every
//! fragment's metadata for fast opens (`fragment_meta.rs`).

mod bands;
mod execute;
mod fragment_meta;
mod plan;
mod vacuum;

pub use execute::consolidate;
pub use fragment_meta::consolidate_fragment_metadata;
pub use plan::{plan, ConsolidationPlan, Selection};
pub use vacuum::{vacuum, VacuumReport};
