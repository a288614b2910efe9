//! The SS-DB benchmark (`docs/ssdb.md`, the exact rules in SSDB.md) on Tessera: the sky tiles and
//! image generator, the storage design, cooking (F1, F1'), grouping (F2) and the run report.

mod cook;
mod group;
mod keys;
mod observation;

pub mod generator;
pub mod params;
pub mod progress;
pub mod raw;
pub mod tiles;

pub use cook::{
    cook_image, cook_image_chunked, cook_image_parallel, trace_object, CookError, CookParams, DIRECTIONS, TH_F1,
    TH_F1_PRIME,
};
pub use group::{group_all, Group, GroupError, GroupSet, Grouper, Member, D3, T_MATCH};
pub use keys::{
    group_key, groups_sha256, hex, key_of, observation_key, observation_keys_sha256, sha256_hex, sorted_keys_sha256,
    F1Accumulator, F1Summary, F2Summary,
};
pub use observation::{assign_ids, cycle_of, Observation, IMAGES_PER_CYCLE};

pub mod cli;
pub mod pipeline;
#[cfg(test)]
mod tests;

pub use cli::{run_command, SsdbArgs};
