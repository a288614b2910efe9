//! Consolidation: merging consecutive fragments into one (`plan.rs` chooses, pure;
//! `execute.rs` does it in bounded memory) and vacuuming the fragments a consolidation
//! superseded (`vacuum.rs`, under an exclusive process-safe lock).

mod execute;
mod plan;
mod vacuum;

pub use execute::consolidate;
pub use plan::{plan, ConsolidationPlan, Selection};
pub(crate) use vacuum::{lock_shared, GATE_FILE, LOCK_FILE};
pub use vacuum::{vacuum, VacuumReport};
