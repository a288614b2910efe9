//! The names of an array's folders and files (docs/format.md, "Layout"): one place, so every
//! layer (errors naming the array and fragment of a path included) agrees on them.

/// Folder holding one sub-folder per fragment.
pub const FRAGMENTS_DIR: &str = "__fragments";
/// Folder holding the commit log.
pub const COMMITS_DIR: &str = "__commits";
/// Folder holding the schema files.
pub const SCHEMA_DIR: &str = "__schema";
/// Folder reserved for array metadata (key-value).
pub const META_DIR: &str = "__meta";
/// Name of the file that marks a folder as a group.
pub(crate) const GROUP_FILE: &str = "__group";
/// Name of the metadata file inside a fragment folder.
pub const METADATA_FILE: &str = "__fragment_metadata";
/// A fragment's block checksums kept apart from its metadata (docs/format.md §8.1, version 9).
pub const BLOCK_SUMS_FILE: &str = "__block_checksums";
/// A packed fragment's one data file, holding the tiles of all its files (docs/format.md §8).
pub const PACKED_FILE: &str = "packed.data";
/// Name of the lock file in an array folder.
pub(crate) const LOCK_FILE: &str = "__lock";
/// Name of the gate in front of the lock (see `commit/lock.rs`).
pub(crate) const GATE_FILE: &str = "__lock.gate";
