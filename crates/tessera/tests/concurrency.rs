//! Commit order under concurrency (issue 12, items 1 and 2): a write that commits while a
//! consolidation runs stays visible, and of two consolidations of the same fragments only one
//! counts. A storage wrapper pauses one thread just before it commits, so the interleavings that
//! used to lose data happen every time. Chunked tiles are read and rewritten under writers,
//! consolidations and vacuums at once.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

use tessera::*;

use crate::common::*;

/// Makes the thread named `pause` block at its first write into `__commits/` until
/// [`Pausing::release`] (through a [`Hooked`] storage).
#[derive(Debug)]
struct Pausing {
    pause: String,
    /// (paused, released)
    state: Mutex<(bool, bool)>,
    cv: Condvar,
}

impl Pausing {
    /// The pausing state and a storage over `inner` that pauses the thread named `pause`.
    fn new(inner: Arc<dyn Storage>, pause: &str) -> (Arc<Self>, Arc<dyn Storage>) {
        let p = Arc::new(Self { pause: pause.into(), state: Mutex::new((false, false)), cv: Condvar::new() });
        let hooked = Arc::clone(&p);
        let storage = Hooked {
            inner,
            hook: Arc::new(move |at, path| {
                if at == Hook::BeforeWrite {
                    hooked.maybe_pause(path);
                }
            }),
            cached: None,
        };
        (p, Arc::new(storage))
    }

    fn maybe_pause(&self, path: &Path) {
        let here = std::thread::current().name().is_some_and(|n| n == self.pause);
        if !here || !path.to_string_lossy().contains(COMMITS_DIR) {
            return;
        }
        let mut s = self.state.lock().unwrap();
        if s.0 {
            return;
        }
        s.0 = true;
        self.cv.notify_all();
        while !s.1 {
            s = self.cv.wait(s).unwrap();
        }
    }

    fn wait_paused(&self) {
        let mut s = self.state.lock().unwrap();
        while !s.0 {
            s = self.cv.wait(s).unwrap();
        }
    }

    fn release(&self) {
        self.state.lock().unwrap().1 = true;
        self.cv.notify_all();
    }
}

fn dense_rows(ctx: &Context, uri: &str) -> Vec<i32> {
    let r = Array::open(ctx, uri, Mode::Read).unwrap();
    as_i32(&r.read(&Subarray::full(r.schema()), &["a"], Layout::RowMajor).unwrap().attrs[0].data)
}

/// Issue 12 item 2: a write that started before another write, and commits after a
/// consolidation that included the other one, is not hidden behind the consolidated fragment.
#[test]
fn a_write_committing_after_a_consolidation_stays_visible() {
    let ctx = mem_ctx();
    Array::create(&ctx, "/a", &schema_2d(4, 4, 2, 2)).unwrap();
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    let all = Subarray::from_ranges(&[(1, 4), (1, 4)]);
    w.write(&all, Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[1; 16]))]).unwrap();
    // The slow writer takes its timestamp now...
    let mut slow = w.writer(&all, Layout::RowMajor).unwrap();
    slow.submit(&[AttrInput::fixed("a", i32_bytes(&[3; 16]))]).unwrap();
    // ...a later write commits, and a consolidation merges it with the first.
    w.write(&all, Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[2; 16]))]).unwrap();
    consolidate(&ctx, "/a", &Selection::All).unwrap().unwrap();
    assert_eq!(dense_rows(&ctx, "/a"), vec![2; 16]);
    // The slow write's commit returns: every read from now on sees it.
    slow.finish().unwrap();
    assert_eq!(dense_rows(&ctx, "/a"), vec![3; 16]);
    vacuum(&ctx, "/a").unwrap();
    assert_eq!(dense_rows(&ctx, "/a"), vec![3; 16]);
    consolidate(&ctx, "/a", &Selection::All).unwrap().unwrap();
    vacuum(&ctx, "/a").unwrap();
    assert_eq!(dense_rows(&ctx, "/a"), vec![3; 16]);
}

fn sparse_dup_schema() -> ArraySchema {
    ArraySchema::builder(ArrayType::Sparse)
        .dim(dim("x", 0, 99, 10))
        .attr(Attribute::new("a", Datatype::Int32))
        .capacity(4)
        .allows_duplicates(true)
        .build()
        .unwrap()
}

fn write_points(ctx: &Context, uri: &str, xs: &[i64], vals: &[i32]) {
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write_sparse(
        &[CoordInput { name: "x", data: bytemuck::cast_slice(xs) }],
        &[AttrInput::fixed("a", i32_bytes(vals))],
    )
    .unwrap();
}

fn sparse_values(ctx: &Context, uri: &str) -> Vec<i32> {
    let r = Array::open(ctx, uri, Mode::Read).unwrap();
    let res = r.sparse_query(&[Vec::new()], &["a"], Layout::Unordered).unwrap().read_all().unwrap();
    let mut v = as_i32(&res.attrs[1].data);
    v.sort_unstable();
    v
}

/// Issue 12 item 1: two consolidations of the same fragments at once. Before the commit log,
/// both committed and every cell of an array with duplicates came back twice, for good.
#[test]
fn of_two_concurrent_consolidations_of_the_same_fragments_one_commits() {
    let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let (pausing, storage) = Pausing::new(inner.clone(), "first");
    let ctx = Context::with_storage(Config::new(), storage).unwrap();
    Array::create(&ctx, "/s", &sparse_dup_schema()).unwrap();
    for i in 0..3 {
        write_points(&ctx, "/s", &[i, i + 10], &[i as i32, 10 + i as i32]);
    }
    let want = vec![0, 1, 2, 10, 11, 12];
    assert_eq!(sparse_values(&ctx, "/s"), want);
    let first = {
        let ctx = ctx.clone();
        std::thread::Builder::new()
            .name("first".into())
            .spawn(move || consolidate(&ctx, "/s", &Selection::All))
            .unwrap()
    };
    pausing.wait_paused();
    // The second consolidation runs whole while the first is about to commit.
    consolidate(&ctx, "/s", &Selection::All).unwrap().unwrap();
    pausing.release();
    let e = first.join().unwrap().unwrap_err();
    assert!(matches!(e, Error::Array(ArrayError::ConsolidationConflict { .. })), "{e}");
    assert_eq!(sparse_values(&ctx, "/s"), want);
    assert_eq!(Array::open(&ctx, "/s", Mode::Read).unwrap().fragments().len(), 1);
    vacuum(&ctx, "/s").unwrap();
    assert_eq!(sparse_values(&ctx, "/s"), want);
    // Nothing of the losing consolidation remains.
    assert_eq!(inner.list_dir(Path::new("/s/__fragments")).unwrap().len(), 1);
}

/// Issue 12 item 1, second case: a deletion must not come back when two consolidations of
/// overlapping runs race.
#[test]
fn overlapping_concurrent_consolidations_keep_deletions() {
    let inner: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let (pausing, storage) = Pausing::new(inner, "first");
    let ctx = Context::with_storage(Config::new(), storage).unwrap();
    Array::create(&ctx, "/s", &sparse_dup_schema()).unwrap();
    write_points(&ctx, "/s", &[1, 2], &[1, 2]);
    write_points(&ctx, "/s", &[3], &[3]);
    Array::open(&ctx, "/s", Mode::Write)
        .unwrap()
        .delete_cells(&[CoordInput { name: "x", data: bytemuck::cast_slice(&[2i64]) }])
        .unwrap();
    let names: Vec<String> =
        Array::open(&ctx, "/s", Mode::Read).unwrap().fragments().iter().map(|f| f.name.to_string()).collect();
    let first = {
        let ctx = ctx.clone();
        let sel = Selection::Names(names[..2].to_vec());
        std::thread::Builder::new().name("first".into()).spawn(move || consolidate(&ctx, "/s", &sel)).unwrap()
    };
    pausing.wait_paused();
    consolidate(&ctx, "/s", &Selection::All).unwrap().unwrap();
    pausing.release();
    assert!(first.join().unwrap().is_err());
    assert_eq!(sparse_values(&ctx, "/s"), vec![1, 3]);
    vacuum(&ctx, "/s").unwrap();
    assert_eq!(sparse_values(&ctx, "/s"), vec![1, 3]);
}

/// Issue 12 item 14: temporary files that killed processes left are removed by vacuum once
/// older than the grace period, and not before.
#[test]
fn vacuum_removes_old_temporary_files() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let uri = uri.to_str().unwrap();
    let ctx = local_ctx();
    Array::create(&ctx, uri, &schema_2d(4, 4, 2, 2)).unwrap();
    let commits = Path::new(uri).join(COMMITS_DIR);
    let old = format!(".00000000000000000001.commit.tmp-{}-999999-1", 1_000_000);
    let fresh = format!(".00000000000000000001.commit.tmp-{}-999999-2", u64::MAX / 2);
    std::fs::write(commits.join(&old), b"partial").unwrap();
    std::fs::write(commits.join(&fresh), b"partial").unwrap();
    let report = vacuum(&ctx, uri).unwrap();
    assert_eq!(report.temporary, vec![old.clone()]);
    assert!(!commits.join(&old).exists() && commits.join(&fresh).exists());
}

/// Issue 12 item 5: a committed fragment whose timestamp is 2^64 - 1 (here one of format 2,
/// committed by an `.ok` file) no longer makes later writes invisible: before the commit log,
/// the next write's timestamp was `t1 + 1`, which wrapped to 0 and ordered it first.
#[test]
fn a_fragment_at_the_largest_timestamp_does_not_hide_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let ctx = local_ctx();
    Array::create(&ctx, &uri, &schema_2d(4, 4, 2, 2)).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let all = Subarray::from_ranges(&[(1, 4), (1, 4)]);
    let name = w.write(&all, Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[1; 16]))]).unwrap();
    // Make it a format-2 fragment at t = 2^64 - 1.
    let max = FragmentName { t0: u64::MAX, t1: u64::MAX, uuid: name.uuid.clone(), version: 2 };
    let frags = uri.join(FRAGMENTS_DIR);
    std::fs::rename(frags.join(name.to_string()), frags.join(max.to_string())).unwrap();
    let commits = uri.join(COMMITS_DIR);
    for f in std::fs::read_dir(&commits).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    std::fs::write(commits.join(format!("{max}.ok")), b"").unwrap();
    assert_eq!(dense_rows(&ctx, uri.to_str().unwrap()), vec![1; 16]);
    w.write(&all, Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[2; 16]))]).unwrap();
    assert_eq!(dense_rows(&ctx, uri.to_str().unwrap()), vec![2; 16]);
}

/// A deletion of the cross product of many ranges is refused before the rectangles are built
/// (10^4 ranges on each of 3 dimensions would be 10^12 of them), and writes nothing.
#[test]
fn delete_ranges_bounds_the_cross_product() {
    let ctx = mem_ctx();
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("x", 0, 99_999, 100))
        .dim(dim("y", 0, 99_999, 100))
        .dim(dim("z", 0, 99_999, 100))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/d", &schema).unwrap();
    let many: Vec<DimRange> = (0..10_000).map(|i| DimRange::Int(i * 10, i * 10)).collect();
    let w = Array::open(&ctx, "/d", Mode::Write).unwrap();
    let e = w.delete_ranges(&[many.clone(), many.clone(), many]).unwrap_err();
    assert!(e.to_string().contains("10000 x 10000 x 10000"), "{e}");
    assert!(Array::open(&ctx, "/d", Mode::Read).unwrap().fragments().is_empty());
}

/// Chunked tiles (format v4) with writers, consolidations, vacuums and partial readers at once,
/// on the local file system: three writers each rewrite their band of rows (one 64 KiB tile,
/// sixteen 4 KiB chunks) again and again; consolidations and vacuums run beside them; readers
/// read two rows of a band, which decodes two chunks, and must see one whole write of it every
/// time. At the end every band holds its writer's last write.
#[test]
fn chunked_tiles_stay_right_under_writers_consolidations_and_vacuums() {
    let dir = tempfile::tempdir().unwrap();
    let zstd = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    bands_stay_right_under_load(&dir.path().join("chunked"), &[("sm.tile_chunk_size", "4096")], zstd, (16, 1024));
}

/// The same with the writers' automatic chunk size (`sm.tile_chunk_size` auto, the default) on
/// bands of 32 rows x 81,920 int32 columns: one 10 MiB tile per band whose rows of 320 KiB
/// restate each other, so every writer and every consolidation stores it in 4 MiB chunks (the
/// chooser's second round), and a reader's two rows decode one or two of them.
#[test]
fn automatic_four_mebibyte_chunks_stay_right_under_writers_consolidations_and_vacuums() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("auto");
    let zstd = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    bands_stay_right_under_load(&uri, &[("sm.tile_chunk_size", "auto")], zstd, (32, 81_920));
    let ctx = Context::new(Config::new()).unwrap();
    let a = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let mut tiles = 0;
    for frag in a.fragments() {
        for (t, chunks) in frag.chunks.chunks[0].iter().enumerate() {
            assert_eq!(chunks.log2, 22, "tile {t} of {:?}", frag.name);
            assert_eq!(chunks.list.len(), 3, "tile {t} of {:?}: 10 MiB in 4 MiB chunks", frag.name);
            tiles += 1;
        }
    }
    assert!(tiles >= 3, "{tiles} tiles");
}

/// The same with gzip-6 tiles written by zlib-rs's lazy matcher (`sm.write.deflate_encoder`
/// zlib) by writers and consolidations alike, read back by libdeflate beside them.
#[test]
fn lazy_deflate_tiles_stay_right_under_writers_consolidations_and_vacuums() {
    let dir = tempfile::tempdir().unwrap();
    let gzip = FilterPipeline::new(vec![Filter::Gzip { level: 6 }]);
    let settings = [("sm.write.deflate_encoder", "zlib")];
    bands_stay_right_under_load(&dir.path().join("lazy"), &settings, gzip, (16, 1024));
}

/// The same with unfiltered tiles whose block checksums are all kept apart (format v9,
/// `__block_checksums`, `sm.write.inline_block_checksums` 0), by writers and consolidations
/// alike: the readers' two rows are a read of part of a tile, which reads that tile's checksums
/// from the fragment's file while vacuums remove consolidated fragments beside it.
#[test]
fn block_checksums_apart_stay_right_under_writers_consolidations_and_vacuums() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("apart");
    let settings = [("sm.write.inline_block_checksums", "0")];
    bands_stay_right_under_load(&uri, &settings, FilterPipeline::default(), (16, 1024));
    let folders: Vec<_> = std::fs::read_dir(uri.join("__fragments")).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(!folders.is_empty());
    for f in folders {
        assert!(f.join(tessera::BLOCK_SUMS_FILE).is_file(), "{} keeps its checksums inline", f.display());
    }
}

/// Three writers rewrite their band of `band_rows` rows x `cols` int32 columns (one tile,
/// filtered by `filters`) `passes` times; consolidations and vacuums run beside them; a reader
/// reads two rows of a band 30 times and must see one whole write of it every time; at the end
/// every band holds its writer's last write. The array is at `uri`; every context has the
/// `settings` and no tile cache.
fn bands_stay_right_under_load(
    uri: &std::path::Path,
    settings: &[(&str, &str)],
    filters: FilterPipeline,
    (band_rows, cols): (i128, i128),
) {
    let ctx_of = || {
        let mut c = Config::new();
        for (k, v) in settings {
            c.set(k, v).unwrap();
        }
        c.set("sm.tile_cache_size", "0").unwrap();
        Context::new(c).unwrap()
    };
    let (bands, passes) = (3i128, 4i32);
    let mut a = Attribute::new("a", Datatype::Int32);
    a.filters = filters;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (0, bands * band_rows - 1), band_rows as u64))
        .dim(Dimension::new("c", Datatype::Int64, (0, cols - 1), cols as u64))
        .attr(a)
        .build()
        .unwrap();
    let ctx = ctx_of();
    Array::create(&ctx, uri, &schema).unwrap();
    // Pass `v` of the writer of band `w` writes `w * 1_000_000 + v * 10_000 + c` into each row.
    let band_values = |w: i128, v: i32, rows: usize, c0: i128, c1: i128| -> Vec<i32> {
        let row: Vec<i32> = (c0..=c1).map(|c| (w as i32) * 1_000_000 + v * 10_000 + c as i32).collect();
        row.repeat(rows)
    };
    let write_band = |ctx: &Context, w: i128, v: i32| {
        let sub = Subarray::from_ranges(&[(w * band_rows, (w + 1) * band_rows - 1), (0, cols - 1)]);
        let values = band_values(w, v, band_rows as usize, 0, cols - 1);
        let a = Array::open(ctx, uri, Mode::Write).unwrap();
        a.write(&sub, Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&values))]).unwrap();
    };
    for w in 0..bands {
        write_band(&ctx, w, 0);
    }
    std::thread::scope(|sc| {
        for w in 0..bands {
            let write_band = &write_band;
            sc.spawn(move || {
                let ctx = ctx_of();
                for v in 1..=passes {
                    write_band(&ctx, w, v);
                }
            });
        }
        sc.spawn(|| {
            let ctx = ctx_of();
            for _ in 0..3 {
                match consolidate(&ctx, uri, &Selection::All) {
                    Ok(_) | Err(Error::Array(ArrayError::ConsolidationConflict { .. })) => {}
                    Err(e) => panic!("{e}"),
                }
                vacuum(&ctx, uri).unwrap();
            }
        });
        sc.spawn(|| {
            let ctx = ctx_of();
            for i in 0..30i128 {
                let (w, r) = (i % bands, i % (band_rows - 2));
                let c0 = 100 + i * 7_919 % (cols - 500);
                let c1 = c0 + 300;
                let sub = Subarray::from_ranges(&[(w * band_rows + r, w * band_rows + r + 1), (c0, c1)]);
                let got = {
                    let a = Array::open(&ctx, uri, Mode::Read).unwrap();
                    as_i32(&a.read(&sub, &["a"], Layout::RowMajor).unwrap().attrs[0].data)
                };
                let v = (got[0] - (w as i32) * 1_000_000 - c0 as i32) / 10_000;
                assert!((0..=passes).contains(&v), "read {i}: {} is no write of band {w}", got[0]);
                assert_eq!(got, band_values(w, v, 2, c0, c1), "read {i}: not one whole write of band {w}");
            }
        });
    });
    let a = Array::open(&ctx, uri, Mode::Read).unwrap();
    for w in 0..bands {
        let sub = Subarray::from_ranges(&[(w * band_rows, (w + 1) * band_rows - 1), (0, cols - 1)]);
        let got = as_i32(&a.read(&sub, &["a"], Layout::RowMajor).unwrap().attrs[0].data);
        assert_eq!(got, band_values(w, passes, band_rows as usize, 0, cols - 1), "band {w}");
    }
}

/// A sparse consolidation read band by band (a 512-byte buffer cuts the global order into many
/// bands, `consolidate/bands.rs`) beside writers, vacuums and readers, on local files: writers
/// append fragments of distinct points; consolidations and vacuums run between them; readers
/// must never see a point twice (the schema allows duplicates, so a cell read in two bands
/// would show) or a value that was not written. At the end every point is there once.
#[test]
fn banded_sparse_consolidation_stays_right_under_writers_vacuums_and_readers() {
    banded_consolidation_under_load(None);
}

/// The same on a 2-D array under Hilbert and Z tile orders, whose bands are cubes of tiles
/// (`bands.rs`, `CurveGrid`): `y` is a function of `x`, so values still name points.
#[test]
fn banded_consolidation_under_curve_tile_orders_stays_right_beside_writers_and_vacuums() {
    banded_consolidation_under_load(Some(CellOrder::Hilbert));
    banded_consolidation_under_load(Some(CellOrder::Z));
}

/// Writers, a consolidator with a 512-byte buffer (many bands) and vacuums, and readers, at once
/// on one sparse array: 1-D, or 2-D under the tile order `curve`.
fn banded_consolidation_under_load(curve: Option<CellOrder>) {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("banded");
    let uri = uri.to_str().unwrap();
    let ctx_of = || {
        let mut c = Config::new();
        c.set("sm.consolidation.buffer_size", "512").unwrap();
        c.set("sm.tile_cache_size", "0").unwrap();
        Context::new(c).unwrap()
    };
    let mut builder = ArraySchema::builder(ArrayType::Sparse).dim(dim("x", 0, 9_999, 50));
    if let Some(order) = curve {
        builder = builder.dim(dim("y", 0, 96, 8)).tile_order(order);
    }
    let schema =
        builder.attr(Attribute::new("a", Datatype::Int32)).capacity(8).allows_duplicates(true).build().unwrap();
    let nd = schema.dims.len();
    let ctx = ctx_of();
    Array::create(&ctx, uri, &schema).unwrap();
    // Writer `w` owns the x with x % 3 == w; its pass `p` writes `per` of them spread over the
    // domain (distinct across passes), each with value x (and y = x % 97 in 2-D).
    let (writers, passes, per) = (3i64, 6i64, 25i64);
    let points = |w: i64, p: i64| -> Vec<i64> { (0..per).map(|k| ((p * per + k) * 131 % 3_333) * 3 + w).collect() };
    let mut want: Vec<i32> =
        (0..writers).flat_map(|w| (0..passes).flat_map(move |p| points(w, p))).map(|x| x as i32).collect();
    want.sort_unstable();
    assert!(want.windows(2).all(|w| w[0] < w[1]), "the test's points are distinct");
    let want = &want;
    let write = |ctx: &Context, xs: &[i64]| {
        let vals: Vec<i32> = xs.iter().map(|&x| x as i32).collect();
        if nd == 1 {
            return write_points(ctx, uri, xs, &vals);
        }
        let ys: Vec<i64> = xs.iter().map(|x| x % 97).collect();
        let w = Array::open(ctx, uri, Mode::Write).unwrap();
        let coords = [
            CoordInput { name: "x", data: bytemuck::cast_slice(xs) },
            CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
        ];
        w.write_sparse(&coords, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    };
    let values = |ctx: &Context| {
        let r = Array::open(ctx, uri, Mode::Read).unwrap();
        let res = r.sparse_query(&vec![Vec::new(); nd], &["a"], Layout::Unordered).unwrap().read_all().unwrap();
        let mut v = as_i32(&res.attrs[nd].data);
        v.sort_unstable();
        v
    };
    let (write, values) = (&write, &values);
    std::thread::scope(|sc| {
        for w in 0..writers {
            sc.spawn(move || {
                let ctx = ctx_of();
                for p in 0..passes {
                    write(&ctx, &points(w, p));
                }
            });
        }
        sc.spawn(move || {
            let ctx = ctx_of();
            for _ in 0..4 {
                match consolidate(&ctx, uri, &Selection::All) {
                    Ok(_) | Err(Error::Array(ArrayError::ConsolidationConflict { .. })) => {}
                    Err(e) => panic!("{e}"),
                }
                vacuum(&ctx, uri).unwrap();
            }
        });
        sc.spawn(move || {
            let ctx = ctx_of();
            for _ in 0..20 {
                let got = values(&ctx);
                assert!(got.windows(2).all(|w| w[0] < w[1]), "a point seen twice");
                assert!(got.iter().all(|v| want.binary_search(v).is_ok()), "a value never written");
            }
        });
    });
    consolidate(&ctx, uri, &Selection::All).unwrap();
    vacuum(&ctx, uri).unwrap();
    assert_eq!(&values(&ctx), want);
    assert_eq!(Array::open(&ctx, uri, Mode::Read).unwrap().fragments().len(), 1);
}
