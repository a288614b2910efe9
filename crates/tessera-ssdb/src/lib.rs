//! The SS-DB benchmark (`docs/ssdb.md`, the exact rules in SSDB.md) on Tessera: the sky tiles and
//! image generator, the storage design, cooking (F1, F1'), grouping (F2), the queries Q1-Q9 and the run
//! report.

mod cook;
mod group;
mod keys;
mod observation;
mod store;

pub mod generator;
pub mod params;
pub mod progress;
pub mod query;
pub mod raw;
pub mod tiles;

pub use cook::{
    cook_image, cook_image_chunked, cook_image_parallel, trace_object, CookError, CookParams, DIRECTIONS, TH_F1,
    TH_F1_PRIME,
};
pub use group::{group_all, Closed, Group, GroupError, GroupSet, Grouper, Member, D3, T_MATCH};
pub use keys::{
    group_key, groups_sha256, hex, key_of, observation_key, observation_keys_sha256, sha256_hex, sorted_keys_sha256,
    F1Accumulator, F1Summary, F2Summary, KeyList, KeySorter,
};
pub use observation::{assign_ids, cycle_of, Observation, IMAGES_PER_CYCLE};
pub use store::{
    create_groups, create_observations, observations_schema, read_all_groups, read_groups_meeting, read_groups_meta,
    read_member_observations, read_memberships, read_observation_points, read_observations, write_group_batch,
    write_groups, write_groups_meta, write_observations, GroupWriter, GroupsMeta, ObsBox, ObsPoint, StoreError,
    CAPACITY, GROUPS, GROUPS_META, ID_MAX, MEMBERSHIPS, MEMBER_VALUES, OBSERVATIONS, TIME_MAX, WORLD_MAX, WORLD_TILE,
};

pub mod cli;
pub mod pipeline;
#[cfg(test)]
mod tests;

pub use cli::{run_command, SsdbArgs};
