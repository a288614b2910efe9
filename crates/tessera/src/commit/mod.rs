//! Committing: the commit log that makes fragments visible and orders them, and the array's
//! process-safe lock (docs/format.md, "Commit log" and "Vacuum and the lock").
//!
//! A fragment becomes visible when a record naming it is appended to `__commits/` under the next
//! sequence number (`log.rs`); the records say which fragments are visible and in which order
//! (`resolve.rs`, pure); each is a checksummed file (`record.rs`). Appending needs only an atomic
//! create-if-absent, so the protocol takes no lock; `lock.rs` holds the lock that keeps vacuum
//! from deleting files in use.

mod lock;
mod log;
mod record;
mod resolve;

pub(crate) use lock::{lock_exclusive, lock_shared, GATE_FILE, LOCK_FILE};
pub use log::COMMITS_DIR;
pub(crate) use log::{
    checkpoint_after_write, commit_consolidation, publish_write, read_log, stage_write, write_checkpoint, Log, Scope,
};
pub(crate) use record::{record_file, Placed, Position, Record};
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use record::{MAX_EMBEDDED_METADATA, RECORD_MAGIC};
pub(crate) use resolve::resolve;
