//! Faults: flipped bytes on disk become `Corrupt` errors naming the file and tile; a write that
//! fails at any storage operation leaves the array readable with exactly its earlier contents.

use std::sync::Arc;
use std::time::Duration;

use tessera::*;

use crate::common::*;

#[test]
fn flipped_tile_byte_is_reported_with_file_and_tile() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = local_ctx();
    let schema = schema_2d(10, 10, 5, 5);
    Array::create(&ctx, &uri, &schema).unwrap();
    let vals: Vec<i32> = (0..100).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let name = w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    // Tile 2 of 4 (25 cells of 4 bytes each), in the fragment's one packed file.
    let stored = flip_stored(&uri, &name, "a0.data", 2 * 100 + 17, 0x10);
    assert_eq!(stored, PACKED_FILE);
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    // Tile 0 is intact and still reads.
    r.read(&Subarray::from_ranges(&[(1, 5), (1, 5)]), &["a"], Layout::RowMajor).unwrap();
    let e = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Corrupt { .. }), "{msg}");
    assert!(msg.contains(&stored) && msg.contains("tile 2") && msg.contains("checksum"), "{msg}");
    // Reading exactly tile 2 takes the direct path (straight into the result): still caught.
    let e = r.read(&Subarray::from_ranges(&[(6, 10), (1, 5)]), &["a"], Layout::RowMajor).unwrap_err();
    assert!(e.to_string().contains("tile 2") && e.to_string().contains("checksum"), "{e}");
}

/// A tile larger than a direct read's piece, read straight into the result from disk (one
/// sequential stream of growing pieces, each verified as it arrives) or from memory (pieces in
/// parallel): the same cells either way, and a flipped byte anywhere, in the part the probe
/// found in memory or after it, is corruption of that tile.
#[test]
fn large_tiles_read_from_disk_or_memory_are_verified_piece_by_piece() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    // One tile of 1,100 x 1,000 int32: 4.4 MB, in 4 KiB blocks.
    let schema = schema_2d(1100, 1000, 1100, 1000);
    let vals: Vec<i32> = (0..1_100_000).map(|i: i32| i.wrapping_mul(2_654_435_761_u32 as i32)).collect();
    let name = {
        let ctx = local_ctx();
        Array::create(&ctx, &uri, &schema).unwrap();
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap()
    };
    // No tile cache: a tile it would take is read through it instead of into the result.
    let ctx = cached_ctx;
    // In memory (all of the probe there), from disk (none of it, or part of a block of it).
    let modes = [usize::MAX, 0, 5_000];
    // Boxes needing most of the tile's blocks as runs (streamed into the result): all but the
    // first row and column, and three columns of every row.
    let boxes = [((2, 1100), (2, 1000)), ((1, 1100), (500, 502))];
    let cells = |(r, c): ((i128, i128), (i128, i128))| -> Vec<i32> {
        let vals = &vals;
        (r.0..=r.1).flat_map(|i| (c.0..=c.1).map(move |j| vals[((i - 1) * 1000 + j - 1) as usize])).collect()
    };
    for &cached in &modes {
        let r = Array::open(&ctx(cached), &uri, Mode::Read).unwrap();
        let got = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
        assert_eq!(as_i32(&got.attrs[0].data), &vals[..], "cached {cached}");
        for b in boxes {
            let got = r.read(&Subarray::from_ranges(&[b.0, b.1]), &["a"], Layout::RowMajor).unwrap();
            assert_eq!(as_i32(&got.attrs[0].data), cells(b), "cached {cached}, box {b:?}");
        }
    }
    let file = uri.join(FRAGMENTS_DIR).join(name.to_string()).join("a0.data");
    let clean = std::fs::read(&file).unwrap();
    // In the first block (inside what a 5,000-byte probe found), in the last block of the probe's
    // first 64 KiB, in a later piece of the ramp, and in the last (short) piece.
    for at in [100, 65_535, 1_500_001, clean.len() - 1] {
        let mut bytes = clean.clone();
        bytes[at] ^= 0x10;
        std::fs::write(&file, &bytes).unwrap();
        for &cached in &modes {
            let r = Array::open(&ctx(cached), &uri, Mode::Read).unwrap();
            // A streamed box verifies the whole tile, the bytes it does not copy included.
            let reads = [Subarray::full(&schema), Subarray::from_ranges(&[boxes[0].0, boxes[0].1])];
            for sub in &reads {
                let e = r.read(sub, &["a"], Layout::RowMajor).unwrap_err();
                let msg = e.to_string();
                assert!(matches!(e, Error::Corrupt { .. }), "byte {at}, cached {cached}: {msg}");
                assert!(msg.contains("a0.data") && msg.contains("tile 0") && msg.contains("checksum"), "{msg}");
            }
        }
    }
    std::fs::write(&file, &clean).unwrap();
}

#[test]
fn flipped_metadata_or_schema_byte_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = local_ctx();
    let schema = schema_2d(10, 10, 5, 5);
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let name =
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[3; 100]))]).unwrap();
    // The commit record's copy of the metadata: a flipped byte fails the record's checksum.
    let record = uri.join(COMMITS_DIR).join("00000000000000000001.commit");
    let orig = std::fs::read(&record).unwrap();
    let mut bad = orig.clone();
    bad[orig.len() - 40] ^= 1;
    std::fs::write(&record, &bad).unwrap();
    let e = Array::open(&ctx, &uri, Mode::Read).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("00000000000000000001.commit"), "{e}");
    std::fs::write(&record, &orig).unwrap();
    // The fragment's own metadata file, which readers use when the record holds no copy.
    crate::tamper::drop_record_copies(&uri);
    let meta = uri.join(FRAGMENTS_DIR).join(name.to_string()).join(METADATA_FILE);
    let orig = std::fs::read(&meta).unwrap();
    let mut bad = orig.clone();
    bad[40] ^= 1;
    std::fs::write(&meta, &bad).unwrap();
    let e = Array::open(&ctx, &uri, Mode::Read).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains(METADATA_FILE), "{e}");
    std::fs::write(&meta, &orig).unwrap();
    let sdir = uri.join(SCHEMA_DIR);
    let sfile = std::fs::read_dir(&sdir).unwrap().next().unwrap().unwrap().path();
    let mut s = std::fs::read(&sfile).unwrap();
    s[5] ^= 0x20;
    std::fs::write(&sfile, &s).unwrap();
    let e = Array::open(&ctx, &uri, Mode::Read).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("checksum"), "{e}");
}

#[test]
fn a_write_failing_at_any_step_leaves_earlier_contents() {
    let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let good = Context::with_storage(Config::new(), inner.clone()).unwrap();
    let schema = schema_2d(8, 8, 4, 4);
    Array::create(&good, "/a", &schema).unwrap();
    let w = Array::open(&good, "/a", Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[1; 64]))]).unwrap();
    let read_all = |ctx: &Context| {
        let r = Array::open(ctx, "/a", Mode::Read).unwrap();
        as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data)
    };
    let before = read_all(&good);
    let mut n = 0;
    loop {
        let failing = Arc::new(FailingStorage::new(inner.clone()));
        failing.fail_after(Some(n));
        let ctx = Context::with_storage(Config::new(), failing.clone()).unwrap();
        let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
        let res = w.write(
            &Subarray::from_ranges(&[(2, 7), (2, 7)]),
            Layout::RowMajor,
            &[AttrInput::fixed("a", i32_bytes(&[9; 36]))],
        );
        if res.is_ok() {
            assert!(n > 5, "the write needs several storage operations");
            break;
        }
        assert_eq!(read_all(&good), before, "failure after {n} operations changed what readers see");
        n += 1;
    }
    let after = read_all(&good);
    assert_eq!(after.iter().filter(|&&v| v == 9).count(), 36);
}

/// Child half of `killed_writer_leaves_a_committed_state`: writes the whole array with the
/// value k, for k = 1, 2, ..., until killed.
#[test]
#[ignore = "run as a child process by killed_writer_leaves_a_committed_state"]
fn child_writer_loop() {
    let Ok(uri) = std::env::var("TESSERA_CHILD_ARRAY") else { return };
    let ctx = local_ctx();
    let schema = Array::open(&ctx, &uri, Mode::Read).unwrap().schema().clone();
    let n = 300 * 200;
    for k in 1.. {
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let vals = vec![k; n];
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    }
}

#[test]
fn killed_writer_leaves_a_committed_state() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = local_ctx();
    let mut schema = schema_2d(300, 200, 64, 64);
    schema.attrs[0].filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    Array::create(&ctx, &uri, &schema).unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut last_seen = 0;
    for round in 0..6u64 {
        kill_child_after(&exe, "faults::child_writer_loop", "TESSERA_CHILD_ARRAY", &uri, 150 + 97 * round);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let vals = as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data);
        // Whole writes only: every cell holds the value of the newest committed write.
        let v = vals[0];
        assert!(vals.iter().all(|&x| x == v), "round {round}: a mix of writes is visible");
        let committed = r.fragments().len();
        if committed > 0 {
            assert!(v >= 1, "round {round}: committed fragments but fill values");
        }
        last_seen = last_seen.max(committed);
    }
    assert!(last_seen > 0, "the child never committed a write; the test proved nothing");
}

/// A dense array with overlapping dense writes and a sparse update: four fragments.
/// Runs the ignored test `test` of this binary as a child process (with `env` naming the array
/// at `uri`) and kills it with SIGKILL after `ms` milliseconds.
fn kill_child_after(exe: &std::path::Path, test: &str, env: &str, uri: &std::path::Path, ms: u64) {
    let mut child = std::process::Command::new(exe)
        .args(["--exact", test, "--ignored", "--nocapture"])
        .env(env, uri)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(ms));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

fn layered(ctx: &Context, uri: &str) -> ArraySchema {
    let schema = schema_2d(8, 8, 4, 4);
    Array::create(ctx, uri, &schema).unwrap();
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[1; 64]))]).unwrap();
    w.write(&Subarray::from_ranges(&[(2, 5), (3, 6)]), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[2; 16]))])
        .unwrap();
    let (rows, cols): (Vec<i64>, Vec<i64>) = ((1..=8).collect(), (1..=8).rev().collect());
    w.write_sparse(
        &[
            CoordInput { name: "r", data: bytemuck::cast_slice(&rows) },
            CoordInput { name: "c", data: bytemuck::cast_slice(&cols) },
        ],
        &[AttrInput::fixed("a", i32_bytes(&[3; 8]))],
    )
    .unwrap();
    w.write(&Subarray::from_ranges(&[(7, 8), (1, 2)]), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[4; 4]))])
        .unwrap();
    schema
}

fn read_all_cells(ctx: &Context, uri: &str, schema: &ArraySchema) -> Vec<i32> {
    let r = Array::open(ctx, uri, Mode::Read).unwrap();
    as_i32(&r.read(&Subarray::full(schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data)
}

#[test]
fn consolidation_and_vacuum_failing_at_any_step_change_nothing() {
    let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let good = Context::with_storage(Config::new(), inner.clone()).unwrap();
    let schema = layered(&good, "/a");
    let before = read_all_cells(&good, "/a", &schema);
    // The state as of the third write, for time travel after consolidation.
    let t3 = Array::open(&good, "/a", Mode::Read).unwrap().fragments()[2].name.t1;
    let at_t3 = {
        let r = Array::open_at(&good, "/a", Mode::Read, Some(t3)).unwrap();
        as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data)
    };
    assert_ne!(at_t3, before);
    let mut n = 0;
    loop {
        let failing = Arc::new(FailingStorage::new(inner.clone()));
        failing.fail_after(Some(n));
        let ctx = Context::with_storage(Config::new(), failing).unwrap();
        let ok = consolidate(&ctx, "/a", &Selection::All).is_ok();
        assert_eq!(read_all_cells(&good, "/a", &schema), before, "consolidation failing after {n} operations");
        if ok {
            break;
        }
        n += 1;
    }
    assert!(n > 5);
    assert_eq!(Array::open(&good, "/a", Mode::Read).unwrap().fragments().len(), 1, "inputs superseded");
    // Time travel to before the last input still sees the inputs up to then.
    let old = Array::open_at(&good, "/a", Mode::Read, Some(t3)).unwrap();
    assert_eq!(old.fragments().len(), 3);
    assert_eq!(as_i32(&old.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data), at_t3);
    drop(old);
    let mut n = 0;
    loop {
        let failing = Arc::new(FailingStorage::new(inner.clone()));
        failing.fail_after(Some(n));
        let ctx = Context::with_storage(Config::new(), failing).unwrap();
        let ok = vacuum(&ctx, "/a").is_ok();
        assert_eq!(read_all_cells(&good, "/a", &schema), before, "vacuum failing after {n} operations");
        if ok {
            break;
        }
        n += 1;
    }
    let frags = inner.list_dir(std::path::Path::new("/a/__fragments")).unwrap();
    assert_eq!(frags.len(), 1, "vacuum left {frags:?}");
    // The commit log is down to the one checkpoint vacuum wrote.
    let commits = inner.list_dir(std::path::Path::new("/a/__commits")).unwrap();
    assert!(commits.len() == 1 && commits[0].ends_with(".commit"), "{commits:?}");
}

#[test]
fn vacuum_waits_for_readers() {
    let mut c = Config::new();
    c.set("sm.vacuum.lock_timeout_ms", "50").unwrap();
    let ctx = Context::with_storage(c, Arc::new(MemoryStorage::new())).unwrap();
    let schema = layered(&ctx, "/a");
    consolidate(&ctx, "/a", &Selection::Timestamps(0, u64::MAX)).unwrap();
    let reader = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let e = vacuum(&ctx, "/a").unwrap_err();
    assert!(matches!(e, Error::Array(ArrayError::Busy { .. })), "{e}");
    // The reader's snapshot still reads while vacuum waits.
    reader.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
    drop(reader);
    let report = vacuum(&ctx, "/a").unwrap();
    assert_eq!(report.removed.len(), 4);
}

/// A query keeps its array's snapshot, and with it the lock, after the array is dropped: vacuum
/// waits for the query, which then reads the consolidated inputs to the end.
#[test]
fn vacuum_waits_for_a_query_that_outlives_its_array() {
    let mut c = Config::new();
    c.set("sm.vacuum.lock_timeout_ms", "50").unwrap();
    let ctx = Context::with_storage(c, Arc::new(MemoryStorage::new())).unwrap();
    let schema = layered(&ctx, "/a");
    let expected = read_all_cells(&ctx, "/a", &schema);
    let reader = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let mut q = reader.read_query(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
    drop(reader);
    consolidate(&ctx, "/a", &Selection::Timestamps(0, u64::MAX)).unwrap();
    let e = vacuum(&ctx, "/a").unwrap_err();
    assert!(matches!(e, Error::Array(ArrayError::Busy { .. })), "{e}");
    assert_eq!(as_i32(&q.read_all().unwrap().attrs[0].data), expected);
    drop(q);
    assert_eq!(vacuum(&ctx, "/a").unwrap().removed.len(), 4);
}

/// Readers that always overlap (one opens before the other closes) never leave the lock free;
/// vacuum must still get it: it holds the gate so no new reader comes in, and the readers
/// inside finish. The readers wait at the gate meanwhile and then carry on.
#[test]
fn overlapping_readers_do_not_starve_vacuum() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let mut c = Config::new();
    c.set("sm.vacuum.lock_timeout_ms", "20000").unwrap();
    let ctx = Context::new(c).unwrap();
    let uri_s = uri.to_str().unwrap().to_string();
    let schema = layered(&ctx, &uri_s);
    consolidate(&ctx, &uri, &Selection::Timestamps(0, u64::MAX)).unwrap();
    let stop = AtomicBool::new(false);
    let reads = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for k in 0..2u64 {
            let (ctx, uri, schema, stop, reads) = (&ctx, &uri, &schema, &stop, &reads);
            s.spawn(move || {
                // Each reader keeps its array open for 30 ms, the two half a period apart.
                std::thread::sleep(Duration::from_millis(15 * k));
                while !stop.load(Ordering::Relaxed) {
                    let r = Array::open(ctx, uri, Mode::Read).unwrap();
                    r.read(&Subarray::full(schema), &["a"], Layout::RowMajor).unwrap();
                    std::thread::sleep(Duration::from_millis(30));
                    drop(r);
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        std::thread::sleep(Duration::from_millis(100));
        let t = std::time::Instant::now();
        let result = vacuum(&ctx, &uri);
        let took = t.elapsed();
        let before = reads.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(200));
        let after = reads.load(Ordering::Relaxed);
        // The readers stop before anything is asserted, so a failure cannot hang the test.
        stop.store(true, Ordering::Relaxed);
        assert_eq!(result.unwrap().removed.len(), 4);
        assert!(took < Duration::from_secs(10), "vacuum took {took:?}");
        assert!(after > before, "readers carry on after vacuum");
    });
}

#[test]
fn vacuum_removes_what_crashed_writers_left() {
    let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let good = Context::with_storage(Config::new(), inner.clone()).unwrap();
    let schema = layered(&good, "/a");
    let before = read_all_cells(&good, "/a", &schema);
    // A writer that dies after writing some files (its folder stays: the failure is injected
    // where even the cleanup cannot remove it).
    let failing = Arc::new(FailingStorage::new(inner.clone()));
    let ctx = Context::with_storage(Config::new(), failing.clone()).unwrap();
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    failing.fail_after(Some(3));
    assert!(w
        .write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[9; 64]))])
        .is_err());
    drop(w);
    let leftovers = inner.list_dir(std::path::Path::new("/a/__fragments")).unwrap().len();
    assert_eq!(leftovers, 5, "the dead writer's folder is still there");
    let report = vacuum(&good, "/a").unwrap();
    assert_eq!(report.uncommitted.len(), 1);
    assert_eq!(read_all_cells(&good, "/a", &schema), before);
}

/// Child half of `killed_consolidation_changes_nothing`: consolidates and vacuums until killed.
#[test]
#[ignore = "run as a child process by killed_consolidation_changes_nothing"]
fn child_consolidator_loop() {
    let Ok(uri) = std::env::var("TESSERA_CHILD_CONSOLIDATE") else { return };
    let ctx = local_ctx();
    loop {
        let _ = consolidate(&ctx, &uri, &Selection::All).unwrap();
        vacuum(&ctx, &uri).unwrap();
        // New fragments to consolidate next time: rewrite the same values.
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let schema = r.schema().clone();
        let vals = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
        drop(r);
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        for half in [(1, 150), (151, 300)] {
            let rows = half.1 - half.0 + 1;
            let start = ((half.0 - 1) * 200 * 4) as usize;
            let part = &vals.attrs[0].data[start..start + (rows * 200 * 4) as usize];
            w.write(&Subarray::from_ranges(&[half, (1, 200)]), Layout::RowMajor, &[AttrInput::fixed("a", part)])
                .unwrap();
        }
    }
}

#[test]
fn killed_consolidation_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = local_ctx();
    let mut schema = schema_2d(300, 200, 64, 64);
    schema.attrs[0].filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let vals: Vec<i32> = (0..300 * 200).collect();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    let (rows, cols): (Vec<i64>, Vec<i64>) = ((1..=300).collect(), (1..=300).map(|i| 1 + i % 200).collect());
    w.write_sparse(
        &[
            CoordInput { name: "r", data: bytemuck::cast_slice(&rows) },
            CoordInput { name: "c", data: bytemuck::cast_slice(&cols) },
        ],
        &[AttrInput::fixed("a", i32_bytes(&[-1; 300]))],
    )
    .unwrap();
    drop(w);
    let expect = {
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data)
    };
    let exe = std::env::current_exe().unwrap();
    for round in 0..6u64 {
        kill_child_after(&exe, "faults::child_consolidator_loop", "TESSERA_CHILD_CONSOLIDATE", &uri, 120 + 83 * round);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let got = as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data);
        assert_eq!(got, expect, "round {round}: a killed consolidation changed what readers see");
    }
    // Whatever the kills left behind, vacuum cleans it and the values stay.
    vacuum(&ctx, &uri).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data), expect);
}

/// A flipped byte in the coordinates of one of many update fragments fails the read that builds
/// the update index with the fragment's file named, as it fails a read without the index; reads
/// never return results built from a corrupt tile.
#[test]
fn flipped_update_coordinate_fails_the_update_index_build() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = local_ctx();
    let schema = schema_2d(40, 40, 10, 10);
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[0; 1600]))]).unwrap();
    let mut names = Vec::new();
    for k in 0..20i64 {
        let rs: Vec<i64> = (0..10).map(|j| 1 + (k * 7 + j * 3) % 40).collect();
        let cs: Vec<i64> = (0..10).map(|j| 1 + (k * 11 + j * 13) % 40).collect();
        let vals: Vec<i32> = (0..10).map(|j| (k * 10 + j) as i32 + 1).collect();
        names.push(
            w.write_sparse(
                &[
                    CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
                    CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
                ],
                &[AttrInput::fixed("a", i32_bytes(&vals))],
            )
            .unwrap(),
        );
    }
    let stored = flip_stored(&uri, &names[7], "d1.data", 3, 0x40);
    for index in [true, false] {
        let mut config = Config::new();
        config.set("sm.read.update_index_size", if index { "134217728" } else { "0" }).unwrap();
        let ctx = Context::new(config).unwrap();
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let e = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Corrupt { .. }), "index {index}: {msg}");
        assert!(msg.contains(&names[7].to_string()) && msg.contains(&stored), "index {index}: {msg}");
    }
}
