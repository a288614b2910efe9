//! Consolidation: merging consecutive fragments into one (`plan.rs` chooses, pure;
//! `execute.rs` does it in bounded memory) and vacuuming the fragments a consolidation
//! superseded (`vacuum.rs`, under the array's lock held exclusively).

mod execute;
mod plan;
mod vacuum;

pub use execute::consolidate;
pub use plan::{plan, ConsolidationPlan, Selection};
pub use vacuum::{vacuum, VacuumReport};
