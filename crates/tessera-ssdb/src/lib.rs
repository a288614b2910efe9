//! The SS-DB benchmark (`docs/ssdb.md`, the exact rules in SSDB.md) on Tessera: the sky tiles and
//! image generator, the storage design, cooking (F1, F1'), grouping (F2) and the run report.

pub mod generator;
pub mod params;
pub mod progress;
pub mod raw;
pub mod tiles;
