//! Interleavings that the multi-process stress test (`python/tests/test_stress.py`) hits by
//! chance, made deterministic: a storage wrapper runs another process's operation at a chosen
//! point of this one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tessera::*;

use crate::common::*;

/// Passes everything to `inner`; the `at`-th time (from 0) a `__commits` folder is listed, runs
/// a vacuum of the array (on `inner`, as another process would) before returning the listing.
#[derive(Debug)]
struct VacuumAfterListing {
    inner: Arc<dyn Storage>,
    uri: &'static str,
    at: u64,
    listings: AtomicU64,
    fired: AtomicBool,
}

impl Storage for VacuumAfterListing {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        self.inner.read_range(path, offset, len)
    }
    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        self.inner.read_all(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        self.inner.file_size(path)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        self.inner.create(path)
    }
    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        self.inner.write_atomic(path, data)
    }
    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        self.inner.write_new(path, data)
    }
    fn list_temps(&self, dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        self.inner.list_temps(dir)
    }
    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> Result<(), StorageError> {
        self.inner.sync_dir(path)
    }
    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError> {
        let listing = self.inner.list_dir(path)?;
        if path.ends_with(COMMITS_DIR) && self.listings.fetch_add(1, Ordering::SeqCst) == self.at {
            self.fired.store(true, Ordering::SeqCst);
            // A short wait: where this process holds the array's lock, the vacuum is kept out
            // (that is the protocol working), and the test must not wait ten minutes for it.
            let mut config = Config::new();
            config.set("sm.vacuum.lock_timeout_ms", "50").unwrap();
            let other = Context::with_storage(config, Arc::clone(&self.inner)).unwrap();
            match vacuum(&other, self.uri) {
                Ok(report) => assert!(!report.removed.is_empty(), "the vacuum had nothing to do"),
                Err(Error::Array(ArrayError::Busy { .. })) => {}
                Err(e) => panic!("vacuum: {e}"),
            }
        }
        Ok(listing)
    }
    fn is_dir(&self, path: &Path) -> bool {
        self.inner.is_dir(path)
    }
    fn is_file(&self, path: &Path) -> bool {
        self.inner.is_file(path)
    }
    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.inner.remove_dir_all(path)
    }
    fn lock(&self, path: &Path, kind: LockKind, wait: bool) -> Result<LockGuard, StorageError> {
        self.inner.lock(path, kind, wait)
    }
}

/// Before the commit log, opening an array for writing listed `__commits` and then read the
/// consolidation lists it found, without the lock that keeps vacuum out: a vacuum in between
/// removed a list, and the open failed with "does not exist" (seen as `write_error` in the
/// stress test). Now a vacuum runs after each listing of `__commits` in turn (an open for
/// writing lists nothing; the commit lists the log under the lock); the write must succeed and
/// be read back.
#[test]
fn open_for_writing_survives_a_vacuum_between_listing_and_reading() {
    for at in 0.. {
        let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let ctx = Context::with_storage(Config::new(), Arc::clone(&inner)).unwrap();
        let schema = schema_2d(4, 4, 2, 2);
        Array::create(&ctx, "/a", &schema).unwrap();
        for v in 1..=3 {
            let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
            w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[v; 16]))]).unwrap();
        }
        consolidate(&ctx, "/a", &Selection::All).unwrap().unwrap();
        let racing = Arc::new(VacuumAfterListing {
            inner,
            uri: "/a",
            at,
            listings: AtomicU64::new(0),
            fired: AtomicBool::new(false),
        });
        let rctx = Context::with_storage(Config::new(), racing.clone()).unwrap();
        let w = Array::open(&rctx, "/a", Mode::Write).unwrap_or_else(|e| panic!("vacuum after listing {at}: {e}"));
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[4; 16]))])
            .unwrap_or_else(|e| panic!("vacuum after listing {at}: {e}"));
        if !racing.fired.load(Ordering::SeqCst) {
            // The write's commit lists the log at least once.
            assert!(at > 0, "open and write never list {COMMITS_DIR}");
            break;
        }
        let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
        let got = as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data);
        assert_eq!(got, [4; 16], "vacuum after listing {at}");
    }
}
