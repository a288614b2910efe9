//! [`RoutedStorage`]: the backend of a `Context`, sending each path to the storage its URI scheme
//! names: `s3://bucket/...` to that bucket's [`ObjectStorage`] (made on first use, one per
//! bucket, from the context's configuration), everything else to local files.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::object::{ObjectStorage, ObjectStoreOptions, S3_SCHEME};
use super::{Bytes, ImmutableStream, LockGuard, LockKind, StagedFile, Storage, StorageError, WriteHandle};

/// Local files and object-store buckets behind one [`Storage`].
#[derive(Debug)]
pub struct RoutedStorage {
    local: Arc<dyn Storage>,
    options: ObjectStoreOptions,
    buckets: Mutex<HashMap<String, Arc<ObjectStorage>>>,
}

/// The bucket of an `s3://bucket/...` path; `None` for any other path.
fn bucket_of(path: &Path) -> Option<&str> {
    let rest = path.to_str()?.strip_prefix(S3_SCHEME)?;
    Some(rest.split('/').next().unwrap_or(rest))
}

impl RoutedStorage {
    /// Local paths go to `local`; buckets are opened with `options`.
    pub fn new(local: Arc<dyn Storage>, options: ObjectStoreOptions) -> Self {
        Self { local, options, buckets: Mutex::new(HashMap::new()) }
    }

    /// The object-store backend of `path`'s bucket (opened now if it was not yet); `None` for a
    /// local path.
    ///
    /// # Errors
    /// The bucket's options are incomplete or malformed.
    pub fn object_storage(&self, path: &Path) -> Result<Option<Arc<ObjectStorage>>, StorageError> {
        let Some(bucket) = bucket_of(path) else { return Ok(None) };
        let mut buckets = self.buckets.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(s) = buckets.get(bucket) {
            return Ok(Some(Arc::clone(s)));
        }
        let s = Arc::new(ObjectStorage::new(bucket, self.options.clone())?);
        buckets.insert(bucket.to_string(), Arc::clone(&s));
        Ok(Some(s))
    }

    fn route(&self, path: &Path) -> Result<Arc<dyn Storage>, StorageError> {
        Ok(match self.object_storage(path)? {
            Some(s) => s,
            None => Arc::clone(&self.local),
        })
    }
}

impl Storage for RoutedStorage {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        self.route(path)?.read_range(path, offset, len)
    }
    fn read_range_into(&self, path: &Path, offset: u64, buf: &mut [u8]) -> Result<(), StorageError> {
        self.route(path)?.read_range_into(path, offset, buf)
    }
    fn read_immutable(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        self.route(path)?.read_immutable(path, offset, len)
    }
    fn read_immutable_into(&self, path: &Path, offset: u64, buf: &mut [MaybeUninit<u8>]) -> Result<(), StorageError> {
        self.route(path)?.read_immutable_into(path, offset, buf)
    }
    fn read_immutable_cached(
        &self,
        path: &Path,
        offset: u64,
        buf: &mut [MaybeUninit<u8>],
    ) -> Result<Option<usize>, StorageError> {
        self.route(path)?.read_immutable_cached(path, offset, buf)
    }
    fn immutable_stream(&self, path: &Path) -> Result<Option<Box<dyn ImmutableStream>>, StorageError> {
        self.route(path)?.immutable_stream(path)
    }
    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        self.route(path)?.read_all(path)
    }
    fn read_all_within(&self, path: &Path, max: u64) -> Result<Result<Bytes, u64>, StorageError> {
        self.route(path)?.read_all_within(path, max)
    }
    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        self.route(path)?.file_size(path)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        self.route(path)?.create(path)
    }
    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        self.route(path)?.write_atomic(path, data)
    }
    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        self.route(path)?.write_new(path, data)
    }
    fn stage_new(&self, dir: &Path, data: &[u8]) -> Result<Option<Box<dyn StagedFile>>, StorageError> {
        self.route(dir)?.stage_new(dir, data)
    }
    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        self.route(dir)?.list_temps(dir)
    }
    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.route(path)?.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> Result<(), StorageError> {
        self.route(path)?.sync_dir(path)
    }
    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError> {
        self.route(path)?.list_dir(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.route(path).is_ok_and(|s| s.is_dir(path))
    }
    fn is_file(&self, path: &Path) -> bool {
        self.route(path).is_ok_and(|s| s.is_file(path))
    }
    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        self.route(path)?.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.route(path)?.remove_dir_all(path)
    }
    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> Result<LockGuard, StorageError> {
        self.route(path)?.lock(path, kind, wait)
    }
    fn lock_free_grace(&self, path: &Path) -> Option<Duration> {
        match bucket_of(path) {
            Some(_) => Some(self.options.grace),
            None => self.local.lock_free_grace(path),
        }
    }
    fn remote(&self, path: &Path) -> bool {
        bucket_of(path).is_some() || self.local.remote(path)
    }
    fn modified_ms(&self, path: &Path) -> Result<u64, StorageError> {
        self.route(path)?.modified_ms(path)
    }
    fn usage(&self, path: &Path) -> Result<(u64, u64), StorageError> {
        self.route(path)?.usage(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_come_from_s3_paths_only() {
        assert_eq!(bucket_of(Path::new("s3://b/a/c")), Some("b"));
        assert_eq!(bucket_of(Path::new("s3://b")), Some("b"));
        assert_eq!(bucket_of(Path::new("/data/s3://b")), None);
        assert_eq!(bucket_of(Path::new("relative/a")), None);
    }
}
