//! Arrays on an S3 server (the workspace's `tessera-s3-server`, in process on loopback): round
//! trips, what reads cost in requests, the lock-free protocol (vacuum's grace period, the commit
//! deadline of writers) and faults between the engine and the server.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use tessera::*;
use tessera_s3_server::{Faults, S3Server, ServerOptions};

use crate::common::*;

const BUCKET: &str = "tessera-test";

/// A running server (with its folder) and a context connected to it.
struct S3 {
    server: S3Server,
    _dir: tempfile::TempDir,
}

impl S3 {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let opts = ServerOptions { buckets: vec![BUCKET.into()], ..ServerOptions::default() };
        let server = S3Server::start(dir.path(), opts).unwrap();
        Self { server, _dir: dir }
    }

    /// A new context (own connections, request counts and tile cache) with vacuum grace `grace_ms`
    /// and `extra` settings.
    fn ctx(&self, grace_ms: u64, extra: &[(&str, &str)]) -> Context {
        let mut c = Config::new();
        c.set("vfs.s3.endpoint", &self.server.endpoint()).unwrap();
        c.set("vfs.s3.region", "us-east-1").unwrap();
        c.set("vfs.s3.access_key_id", self.server.access_key()).unwrap();
        c.set("vfs.s3.secret_access_key", self.server.secret_key()).unwrap();
        c.set("vfs.s3.allow_http", "true").unwrap();
        c.set("sm.vacuum.grace_ms", &grace_ms.to_string()).unwrap();
        c.set("sm.compute_concurrency", "2").unwrap();
        for (k, v) in extra {
            c.set(k, v).unwrap();
        }
        Context::new(c).unwrap()
    }
}

fn uri(name: &str) -> String {
    format!("s3://{BUCKET}/{name}")
}

fn requests(ctx: &Context, uri: &str) -> RequestTally {
    ctx.object_store_requests(uri).unwrap().unwrap()
}

fn write_box(ctx: &Context, uri: &str, rows: (i128, i128), cols: (i128, i128), value: i32) {
    let n = ((rows.1 - rows.0 + 1) * (cols.1 - cols.0 + 1)) as usize;
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write(
        &Subarray::from_ranges(&[rows, cols]),
        Layout::RowMajor,
        &[AttrInput::fixed("a", i32_bytes(&vec![value; n]))],
    )
    .unwrap();
}

fn read_all(ctx: &Context, uri: &str, rows: i128, cols: i128) -> Vec<i32> {
    let r = Array::open(ctx, uri, Mode::Read).unwrap();
    as_i32(&r.read(&Subarray::from_ranges(&[(1, rows), (1, cols)]), &["a"], Layout::RowMajor).unwrap().attrs[0].data)
}

#[test]
fn dense_round_trip_consolidation_and_vacuum() {
    let s3 = S3::start();
    let ctx = s3.ctx(0, &[]);
    let u = uri("arrays/img");
    Array::create(&ctx, &u, &schema_2d(30, 40, 7, 9)).unwrap();
    assert_eq!(object_kind(&ctx, &u).unwrap(), Some(ObjectKind::Array));
    let vals: Vec<i32> = (0..30 * 40).collect();
    let w = Array::open(&ctx, &u, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema_2d(30, 40, 7, 9)), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))])
        .unwrap();
    write_box(&ctx, &u, (3, 5), (10, 12), -1);
    let mut expect = vals.clone();
    for i in 3..=5 {
        for j in 10..=12 {
            expect[(i - 1) * 40 + (j - 1)] = -1;
        }
    }
    assert_eq!(read_all(&ctx, &u, 30, 40), expect);
    // Another context (another client) sees the same.
    assert_eq!(read_all(&s3.ctx(0, &[]), &u, 30, 40), expect);
    consolidate(&ctx, &u, &Selection::All).unwrap();
    let report = vacuum(&ctx, &u).unwrap();
    assert_eq!(report.removed.len(), 2, "{report:?}");
    assert!(report.deferred.is_empty());
    let r = Array::open(&ctx, &u, Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 1);
    assert_eq!(read_all(&ctx, &u, 30, 40), expect);
}

#[test]
fn reading_tiles_costs_one_get_each_at_most() {
    let s3 = S3::start();
    let setup = s3.ctx(3_600_000, &[]);
    let u = uri("tiles");
    // 4 x 4 tiles of 25 x 25 cells; no coalescing so every tile is its own range.
    Array::create(&setup, &u, &schema_2d(100, 100, 25, 25)).unwrap();
    write_box(&setup, &u, (1, 100), (1, 100), 7);
    let ctx = s3.ctx(3_600_000, &[("sm.tile_cache_size", "0"), ("vfs.coalesce_gap", "0")]);
    let before_open = requests(&ctx, &u);
    let r = Array::open(&ctx, &u, Mode::Read).unwrap();
    let opened = requests(&ctx, &u);
    let open_cost = opened.since(&before_open);
    assert_eq!(open_cost.put + open_cost.delete + open_cost.multipart, 0, "{open_cost:?}");
    // The schema, the commit log and the consolidated fragment metadata folder (a LIST each),
    // the schema and the record, which carries the fragment's metadata (a GET each); no HEAD
    // of the folder marker (the schema's listing answers whether the array exists).
    assert_eq!(open_cost, RequestTally { list: 3, get: 2, ..RequestTally::default() }, "open");
    // One tile: one GET for its data, nothing else.
    r.read(&Subarray::from_ranges(&[(26, 50), (51, 75)]), &["a"], Layout::RowMajor).unwrap();
    let one = requests(&ctx, &u).since(&opened);
    assert_eq!(one, RequestTally { get: 1, ..RequestTally::default() }, "one tile");
    // A rectangle over 2 x 3 tiles: at most 6 GETs, and only GETs.
    let at = requests(&ctx, &u);
    let res = r.read(&Subarray::from_ranges(&[(20, 30), (20, 60)]), &["a"], Layout::RowMajor).unwrap();
    assert!(as_i32(&res.attrs[0].data).iter().all(|&v| v == 7));
    let six = requests(&ctx, &u).since(&at);
    assert!(six.get <= 6 && six.get >= 1, "{six:?}");
    assert_eq!(six.total(), six.get, "{six:?}");
    // With coalescing (default 1 MiB gap) neighbouring tiles of one file come in fewer GETs.
    let coalescing = s3.ctx(3_600_000, &[("sm.tile_cache_size", "0")]);
    let r = Array::open(&coalescing, &u, Mode::Read).unwrap();
    let at = requests(&coalescing, &u);
    r.read(&Subarray::from_ranges(&[(1, 100), (1, 100)]), &["a"], Layout::RowMajor).unwrap();
    let all = requests(&coalescing, &u).since(&at);
    assert!(all.get < 16, "16 tiles of one file read in {} GETs", all.get);
}

#[test]
fn vacuum_keeps_replaced_fragments_for_the_grace_period() {
    let s3 = S3::start();
    let grace_ms = 1500;
    let ctx = s3.ctx(grace_ms, &[("sm.tile_cache_size", "0")]);
    let u = uri("grace");
    Array::create(&ctx, &u, &schema_2d(10, 10, 5, 5)).unwrap();
    for v in 1..=3 {
        write_box(&ctx, &u, (1, 10), (1, 10), v);
    }
    // A reader opened before the consolidation keeps reading the fragments it replaced.
    let reader = Array::open(&s3.ctx(grace_ms, &[("sm.tile_cache_size", "0")]), &u, Mode::Read).unwrap();
    consolidate(&ctx, &u, &Selection::All).unwrap();
    let report = vacuum(&ctx, &u).unwrap();
    assert!(report.removed.is_empty(), "{report:?}");
    assert_eq!(report.deferred.len(), 3, "{report:?}");
    let got = reader.read(&Subarray::from_ranges(&[(1, 10), (1, 10)]), &["a"], Layout::RowMajor).unwrap();
    assert!(as_i32(&got.attrs[0].data).iter().all(|&v| v == 3));
    std::thread::sleep(Duration::from_millis(grace_ms + 200));
    let report = vacuum(&ctx, &u).unwrap();
    // (The first vacuum's checkpoint dropped the records that named them: this one cannot tell
    // replaced fragments from abandoned folders, and waited for the later of both times.)
    assert_eq!(report.removed.len() + report.uncommitted.len(), 3, "{report:?}");
    assert!(report.deferred.is_empty());
    assert_eq!(read_all(&ctx, &u, 10, 10), vec![3; 100]);
}

#[test]
fn vacuum_spares_a_fragment_being_written_and_a_late_commit_is_refused() {
    let s3 = S3::start();
    let grace_ms = 1200;
    let ctx = s3.ctx(grace_ms, &[]);
    let u = uri("late");
    let schema = schema_2d(10, 10, 5, 5);
    Array::create(&ctx, &u, &schema).unwrap();
    write_box(&ctx, &u, (1, 10), (1, 10), 1);
    let a = Array::open(&ctx, &u, Mode::Write).unwrap();
    let mut w = a.writer(&Subarray::from_ranges(&[(1, 5), (1, 10)]), Layout::RowMajor).unwrap();
    w.submit_part(&Subarray::from_ranges(&[(1, 5), (1, 10)]), &[AttrInput::fixed("a", i32_bytes(&[2; 50]))]).unwrap();
    // The unfinished fragment's folder is young: vacuum leaves it.
    let report = vacuum(&ctx, &u).unwrap();
    assert!(report.uncommitted.is_empty(), "{report:?}");
    std::thread::sleep(Duration::from_millis(grace_ms / 2 + 100));
    // Past half the grace a commit is refused (a vacuum could have deleted the files).
    match w.finish() {
        Err(Error::Array(ArrayError::CommitTooLate { elapsed_ms, grace_ms: g, .. })) => {
            assert!(elapsed_ms >= grace_ms / 2);
            assert_eq!(g, grace_ms);
        }
        other => panic!("expected CommitTooLate, got {other:?}"),
    }
    assert_eq!(read_all(&ctx, &u, 10, 10), vec![1; 100]);
    assert_eq!(Array::open(&ctx, &u, Mode::Read).unwrap().fragments().len(), 1);
}

#[test]
fn writers_consolidators_and_vacuums_at_once_lose_nothing() {
    let s3 = S3::start();
    let u = uri("busy");
    let setup = s3.ctx(300, &[]);
    Array::create(&setup, &u, &schema_2d(8, 8, 4, 4)).unwrap();
    // Each writer owns one row and writes it again and again with increasing values.
    let done = Mutex::new(BTreeMap::new());
    std::thread::scope(|sc| {
        for row in 1..=3i128 {
            let (s3, u, done) = (&s3, &u, &done);
            sc.spawn(move || {
                let ctx = s3.ctx(300, &[]);
                for v in 1..=6 {
                    write_box(&ctx, u, (row, row), (1, 8), row as i32 * 100 + v);
                    done.lock().unwrap().insert(row, row as i32 * 100 + v);
                }
            });
        }
        for _ in 0..2 {
            let (s3, u) = (&s3, &u);
            sc.spawn(move || {
                let ctx = s3.ctx(300, &[]);
                for _ in 0..4 {
                    match consolidate(&ctx, u, &Selection::All) {
                        Ok(_) | Err(Error::Array(ArrayError::ConsolidationConflict { .. })) => {}
                        Err(e) => panic!("{e}"),
                    }
                    vacuum(&ctx, u).unwrap();
                }
            });
        }
    });
    let got = read_all(&s3.ctx(300, &[]), &u, 8, 8);
    let done = done.into_inner().unwrap();
    for row in 1..=3usize {
        assert_eq!(&got[(row - 1) * 8..row * 8], &[done[&(row as i128)]; 8], "row {row}");
    }
}

#[test]
fn faults_between_engine_and_server_lose_no_commit_and_show_nothing_partial() {
    let s3 = S3::start();
    let u = uri("faulty");
    let ctx = s3.ctx(3_600_000, &[("sm.tile_cache_size", "0"), ("vfs.s3.max_retries", "20")]);
    Array::create(&ctx, &u, &schema_2d(6, 6, 3, 3)).unwrap();
    write_box(&ctx, &u, (1, 6), (1, 6), 0);
    s3.server
        .set_faults(Faults {
            seed: 7,
            error_rate: 0.15,
            drop_rate: 0.05,
            drop_after_rate: 0.1,
            slow_rate: 0.05,
            slow_ms: 20,
            ..Faults::default()
        })
        .unwrap();
    let mut model = vec![0i32; 36];
    for v in 1..=12 {
        let row = (v % 6 + 1) as i128;
        write_box(&ctx, &u, (row, row), (1, 6), v);
        model[(row as usize - 1) * 6..row as usize * 6].fill(v);
        assert_eq!(read_all(&ctx, &u, 6, 6), model, "after write {v}");
    }
    consolidate(&ctx, &u, &Selection::All).unwrap();
    vacuum(&ctx, &u).unwrap();
    assert_eq!(read_all(&ctx, &u, 6, 6), model);
    let faults = s3.server.counts().faults;
    assert!(faults.error > 0 && faults.drop_after > 0, "{faults:?}");
    assert!(requests(&ctx, &u).failed > 0);
    s3.server.set_faults(Faults::default()).unwrap();
    // One commit record per write, none duplicated by a retried conditional put.
    let r = Array::open(&s3.ctx(3_600_000, &[]), &u, Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 1);
}

#[test]
fn opening_many_fragments_takes_few_requests_once_their_metadata_is_consolidated() {
    let s3 = S3::start();
    let ctx = s3.ctx(0, &[]);
    let u = uri("many");
    Array::create(&ctx, &u, &schema_2d(20, 4, 5, 4)).unwrap();
    for row in 1..=20 {
        write_box(&ctx, &u, (row, row), (1, 4), row as i32);
    }
    let open_cost = |extra: &[(&str, &str)]| {
        let c = s3.ctx(0, extra);
        let before = requests(&c, &u);
        let r = Array::open(&c, &u, Mode::Read).unwrap();
        assert_eq!(r.fragments().len(), 20);
        requests(&c, &u).since(&before)
    };
    let each = open_cost(&[]);
    // The schema and one GET per commit record, in parallel: each record carries its
    // fragment's metadata.
    assert_eq!(each.get, 21, "{each:?}");
    consolidate_fragment_metadata(&ctx, &u).unwrap();
    vacuum(&ctx, &u).unwrap();
    let few = open_cost(&[("sm.io_concurrency", "3")]);
    // The checkpoint and the consolidated metadata: a handful whatever the fragment count.
    assert!(few.total() <= 10, "{few:?}");
    assert!(few.get <= 4, "{few:?}");
    let expect: Vec<i32> = (1..=20).flat_map(|r| [r; 4]).collect();
    assert_eq!(read_all(&ctx, &u, 20, 4), expect);
}

/// Requests that do not depend on each other go out together, so that their round trips
/// overlap: a create's folder markers and lock files, an open's listings of the schema, the log
/// and the metadata copies, and the tiles of many fragments. The server answers each request
/// only after 150 ms, so requests sent together are seen in flight together.
#[test]
fn independent_requests_go_out_together() {
    let s3 = S3::start();
    let ctx = s3.ctx(3_600_000, &[("sm.tile_cache_size", "0")]);
    let u = uri("together");
    let slow = || s3.server.set_faults(Faults { slow_rate: 1.0, slow_ms: 150, ..Faults::default() }).unwrap();
    slow();
    s3.server.reset_counts();
    Array::create(&ctx, &u, &schema_2d(40, 40, 10, 10)).unwrap();
    let created = s3.server.counts();
    assert!(created.max_in_flight >= 7, "5 folder markers and 2 lock files at once: {created:?}");
    s3.server.set_faults(Faults::default()).unwrap();
    for k in 0..4 {
        let at = 1 + 10 * k as i128;
        write_box(&ctx, &u, (at, at + 9), (1, 40), k);
    }
    slow();
    s3.server.reset_counts();
    let r = Array::open(&ctx, &u, Mode::Read).unwrap();
    let opened = s3.server.counts();
    assert!(opened.max_in_flight >= 3, "three listings at once: {opened:?}");
    s3.server.reset_counts();
    let res = r.read(&Subarray::from_ranges(&[(1, 40), (1, 40)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), (0..40).flat_map(|i| [i / 10; 40]).collect::<Vec<i32>>());
    let read = s3.server.counts();
    assert!(read.max_in_flight >= 4, "the 4 fragments' tiles at once: {read:?}");
    s3.server.set_faults(Faults::default()).unwrap();
}
