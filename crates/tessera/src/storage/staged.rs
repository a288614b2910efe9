//! Staged files: a file's content made durable ahead of the moment it is given its name, so that
//! a commit's record is written and synced in the same round as the fragment's files, and naming
//! it (the commit) is one link and one folder sync (docs/format.md, "Committing").
//!
//! [`Storage::stage_new`] is the backend's way to do this; backends without one (object stores,
//! whose conditional put is the publish) hold the bytes and publish them with
//! [`Storage::write_new`].

use std::path::Path;

use super::{Storage, StorageError};

/// The name that the temporary files of [`Storage::stage_new`] are named after.
pub(crate) const STAGED_NAME: &str = "staged";

/// Content made durable under a temporary name (hidden from `list_dir`), not yet visible. Dropping
/// it removes the temporary file (best effort: vacuum removes what a killed process leaves).
pub trait StagedFile: Send + Sync {
    /// Gives the content the name `path` (in the folder it was staged in) if nothing exists
    /// there, durably, and returns `true`; returns `false` and changes nothing if something
    /// does: [`Storage::write_new`]'s contract. May be called again after `false`.
    ///
    /// # Errors
    /// [`StorageError::Io`]; the content is then not published, or published without its
    /// folder synced (as for `write_new`).
    fn publish_new(&self, path: &Path) -> Result<bool, StorageError>;
}

/// Content staged in a folder, to be published under a name chosen later ([`Staged::publish_new`]).
pub(crate) struct Staged<'a> {
    storage: &'a dyn Storage,
    data: Vec<u8>,
    file: Option<Box<dyn StagedFile>>,
}

impl<'a> Staged<'a> {
    /// Stages `data` in the folder `dir` of `storage`: durable on return where the backend can
    /// stage, else held here.
    ///
    /// # Errors
    /// The backend's: the folder is missing, the write or sync failed.
    pub(crate) fn new(storage: &'a dyn Storage, dir: &Path, data: Vec<u8>) -> Result<Self, StorageError> {
        let file = storage.stage_new(dir, &data)?;
        Ok(Self { storage, data, file })
    }

    /// The storage it was staged in.
    pub(crate) fn storage(&self) -> &'a dyn Storage {
        self.storage
    }

    /// The content's length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.data.len()
    }

    /// [`StagedFile::publish_new`]: the content under the name `path`, if it is free.
    ///
    /// # Errors
    /// The backend's.
    pub(crate) fn publish_new(&self, path: &Path) -> Result<bool, StorageError> {
        match &self.file {
            Some(f) => f.publish_new(path),
            None => self.storage.write_new(path, &self.data),
        }
    }
}
