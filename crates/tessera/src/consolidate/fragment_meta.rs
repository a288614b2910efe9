//! Consolidating fragment metadata: one file holding a copy of every visible fragment's
//! metadata (`snapshot/fragment_meta.rs` reads it), so an array of many fragments opens with one
//! read instead of one per fragment. It changes nothing a reader sees.

use std::path::Path;

use crate::context::Context;
use crate::error::Result;
use crate::snapshot::{fragment_meta, Snapshot};

/// Writes a consolidated fragment metadata file for the fragments of the array at `uri` visible
/// now; returns how many it holds. Later fragments are read from their own files until the next
/// call; [`vacuum`](crate::vacuum) deletes the older consolidated files.
///
/// # Errors
/// A location that is not an array, storage failures, corrupt fragment metadata.
pub fn consolidate_fragment_metadata(ctx: &Context, uri: impl AsRef<Path>) -> Result<usize> {
    let uri = ctx.resolve_uri(uri.as_ref())?;
    // The snapshot holds the array's lock shared: vacuum cannot delete a file read here.
    let snap = Snapshot::load(ctx, uri.clone(), 0, u64::MAX, true)?;
    let names: Vec<String> = snap.fragments.iter().map(|f| f.name.to_string()).collect();
    let count = names.len();
    fragment_meta::write_copies_of(ctx, &uri, names)?;
    Ok(count)
}
