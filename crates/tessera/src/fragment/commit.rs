//! The commit protocol. A fragment's files and metadata are written and fsynced into
//! `__fragments/<name>/`; the fragment folder and its parent are fsynced; then the empty file
//! `__commits/<name>.ok` is created atomically (temporary name, fsync, rename, fsync folder).
//! Readers see exactly the fragments that have a commit file.

use std::path::Path;

use crate::error::Result;
use crate::fragment::FragmentName;
use crate::storage::Storage;

/// Folder holding one sub-folder per fragment.
pub const FRAGMENTS_DIR: &str = "__fragments";
/// Folder holding one `<name>.ok` file per committed fragment.
pub const COMMITS_DIR: &str = "__commits";

/// Makes the fragment `name` visible, after its files and metadata have been fsynced.
///
/// # Errors
/// A storage failure; the fragment is then not committed.
pub(crate) fn commit_fragment(storage: &dyn Storage, array: &Path, name: &FragmentName) -> Result<()> {
    let frags = array.join(FRAGMENTS_DIR);
    storage.sync_dir(&frags.join(name.to_string()))?;
    storage.sync_dir(&frags)?;
    storage.write_atomic(&array.join(COMMITS_DIR).join(format!("{name}.ok")), b"")?;
    Ok(())
}

/// The committed fragments of the array at `array`, oldest first in fragment order.
/// Entries of `__commits` that are not `<valid name>.ok` are ignored.
///
/// # Errors
/// A storage failure listing the folder.
pub(crate) fn list_committed(storage: &dyn Storage, array: &Path) -> Result<Vec<FragmentName>> {
    let mut names: Vec<FragmentName> = storage
        .list_dir(&array.join(COMMITS_DIR))?
        .iter()
        .filter_map(|f| f.strip_suffix(".ok").and_then(FragmentName::parse))
        .collect();
    names.sort_by(|a, b| a.order_key().cmp(&b.order_key()));
    Ok(names)
}
