//! Interleavings that the multi-process stress test (`python/tests/test_stress.py`) hits by
//! chance, made deterministic: a storage wrapper runs another process's operation at a chosen
//! point of this one.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tessera::*;

use crate::common::*;

/// The `at`-th time (from 0) a `__commits` folder is listed through the returned storage, runs a
/// vacuum of the array at `uri` (on `inner`, as another process would) before the listing is
/// returned; the flag says whether it ran.
fn vacuum_after_listing(inner: Arc<dyn Storage>, uri: &'static str, at: u64) -> (Arc<dyn Storage>, Arc<AtomicBool>) {
    let fired = Arc::new(AtomicBool::new(false));
    let listings = AtomicU64::new(0);
    let other = Arc::clone(&inner);
    let flag = Arc::clone(&fired);
    let hook = move |point: Hook, path: &Path| {
        if point != Hook::AfterList || !path.ends_with(COMMITS_DIR) || listings.fetch_add(1, Ordering::SeqCst) != at {
            return;
        }
        flag.store(true, Ordering::SeqCst);
        // A short wait: where this process holds the array's lock, the vacuum is kept out (that
        // is the protocol working), and the test must not wait ten minutes for it.
        let mut config = Config::new();
        config.set("sm.vacuum.lock_timeout_ms", "50").unwrap();
        let ctx = Context::with_storage(config, Arc::clone(&other)).unwrap();
        match vacuum(&ctx, uri) {
            Ok(report) => assert!(!report.removed.is_empty(), "the vacuum had nothing to do"),
            Err(Error::Array(ArrayError::Busy { .. })) => {}
            Err(e) => panic!("vacuum: {e}"),
        }
    };
    (Arc::new(Hooked { inner, hook: Arc::new(hook), cached: None }), fired)
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
        let (racing, fired) = vacuum_after_listing(inner, "/a", at);
        let rctx = Context::with_storage(Config::new(), racing).unwrap();
        let w = Array::open(&rctx, "/a", Mode::Write).unwrap_or_else(|e| panic!("vacuum after listing {at}: {e}"));
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[4; 16]))])
            .unwrap_or_else(|e| panic!("vacuum after listing {at}: {e}"));
        if !fired.load(Ordering::SeqCst) {
            // The write's commit lists the log at least once.
            assert!(at > 0, "open and write never list {COMMITS_DIR}");
            break;
        }
        let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
        let got = as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data);
        assert_eq!(got, [4; 16], "vacuum after listing {at}");
    }
}
