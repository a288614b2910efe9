//! MultiMap (Shao et al., "MultiMap: Preserving disk locality for multidimensional datasets",
//! CMU-PDL-05-102 / ICDE 2007), as specified by `shared/MULTIMAP.md`: a synthetic disk model
//! with adjacent blocks ([`DiskModel`]), the Naive and MultiMap mappings of N-D cells to logical
//! blocks ([`NaiveMapping`], [`MultiMapMapping`]), the analytic cost model ([`CostParams`]), a
//! simulator replaying block accesses on the disk model ([`Simulator`]), the paper's Table 3
//! ([`reproduce`]) and its Figures 12 and 13 as SVG bar charts ([`BarChart`]); and the layout
//! advisor for Tessera arrays built on the same cost reasoning ([`advise`]). See
//! `docs/multimap.md`.

pub mod advise;
mod cost;
mod disk;
mod mapping;
mod plot;
mod sim;
mod table3;

pub use cost::{njmp, njmp_published, CostParams};
pub use disk::DiskModel;
pub use mapping::{box_cells, Mapping, MultiMapMapping, NaiveMapping};
pub use plot::{Bar, BarChart, Group, Scale, Series};
pub use sim::Simulator;
pub use table3::{
    experiment_3d, experiment_4d, paper_row, reproduce, run_experiment, run_reproduce_command, simulate, Experiment,
    PaperRow, QuerySpec, Table3, Table3Row, DEPTH, FIGURES, RUNS, SEED,
};
