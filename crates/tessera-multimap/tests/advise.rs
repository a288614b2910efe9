//! The layout advisor against the engine: its predicted requests and bytes are what the reader
//! does, its advice follows the workload, and `apply` keeps every cell.

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::Write as _;
use std::sync::Mutex;

use tessera::stats::{self, Counter};
use tessera::*;
use tessera_multimap::advise::{self, Candidate, Device, LoggedQuery, SearchOptions};

/// The statistics are process-wide: tests that read arrays run one at a time, or one test's
/// requests are counted in another's.
static LOCK: Mutex<()> = Mutex::new(());

fn schema(tile: u64, filters: bool) -> ArraySchema {
    let mut a = Attribute::new("v", Datatype::Int32);
    if filters {
        // Size-keeping: every tile goes through the coalescing fetch (unfiltered tiles copied
        // whole are read one by one).
        a.filters = FilterPipeline::new(vec![Filter::ByteShuffle]);
    }
    ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, 63), tile))
        .dim(Dimension::new("y", Datatype::Int64, (0, 63), tile))
        .attr(a)
        .build()
        .unwrap()
}

fn make(ctx: &Context, dir: &std::path::Path, s: &ArraySchema) -> std::path::PathBuf {
    let uri = dir.join("a");
    Array::create(ctx, &uri, s).unwrap();
    let vals: Vec<i32> = (0..64 * 64).collect();
    let w = Array::open(ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(s), Layout::RowMajor, &[AttrInput::fixed("v", bytemuck::cast_slice(&vals))]).unwrap();
    uri
}

fn beams(dim: usize, n: i128) -> Vec<LoggedQuery> {
    (0..n)
        .map(|i| {
            let mut ranges = vec![(i * 5 % 64, i * 5 % 64); 2];
            ranges[dim] = (0, 63);
            LoggedQuery { ranges, weight: 1.0, col_major: false }
        })
        .collect()
}

/// The reads of `q` on the array at `uri`: (requests, bytes), counted by the statistics (the
/// open not counted). A fresh context per read: its tile cache starts empty, as the model's does.
fn measured_reads(c: &Config, uri: &std::path::Path, q: &LoggedQuery) -> (f64, f64) {
    let ctx = Context::new(c.clone()).unwrap();
    let r = Array::open(&ctx, uri, Mode::Read).unwrap();
    let layout = if q.col_major { Layout::ColMajor } else { Layout::RowMajor };
    stats::reset();
    stats::enable();
    r.read(&Subarray::from_ranges(&q.ranges), &["v"], layout).unwrap();
    stats::disable();
    let j: serde_json::Value = serde_json::from_str(&stats::json()).unwrap();
    let got = |k: Counter| j["counters"][k.name()].as_u64().unwrap_or(0) as f64;
    (got(Counter::VfsReadNumRequests), got(Counter::VfsReadTotalBytes))
}

/// The model's requests and bytes are the reader's, for every stored layout: tile orders, cell
/// orders (curves read whole tiles), tiles with and without checksum blocks (unfiltered tiles of
/// more than 8 KiB are read in part when a box needs at most half of their blocks), tiles cut
/// at the domain's end, filtered tiles (coalesced whole), row- and column-major results (an
/// unfiltered tile the tile cache does not take, copied whole as one run of the result, is read
/// straight into it), with and without the tile cache, on beams, cells and random boxes.
#[test]
fn predicted_requests_and_bytes_are_the_readers() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = |n: i128| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % n as u64) as i128
    };
    let (rows, cols) = (128i128, 96i128);
    let mut queries: Vec<LoggedQuery> = Vec::new();
    for i in 0..24 {
        let ranges = match i % 4 {
            0 => vec![(0, rows - 1), (next(cols), 0)],
            1 => vec![(next(rows), 0), (0, cols - 1)],
            2 => vec![(next(rows), 0), (next(cols), 0)],
            _ => {
                let (a, b, c, d) = (next(rows), next(rows), next(cols), next(cols));
                vec![(a.min(b), a.max(b)), (c.min(d), c.max(d))]
            }
        };
        let ranges: Vec<(i128, i128)> = ranges.iter().map(|&(a, b)| if b < a { (a, a) } else { (a, b) }).collect();
        queries.push(LoggedQuery { ranges, weight: 1.0, col_major: i % 3 == 0 });
    }
    queries.push(LoggedQuery { ranges: vec![(0, rows - 1), (0, cols - 1)], weight: 1.0, col_major: false });
    queries.push(LoggedQuery { ranges: vec![(0, 63), (0, cols - 1)], weight: 1.0, col_major: false });
    let mut checked = 0;
    for (tile, filtered, cache) in
        [([64u64, 64u64], false, "0"), ([64, 64], false, "134217728"), ([32, 64], false, "0"), ([128, 32], true, "0")]
    {
        for (tile_order, cell_order) in
            [("row-major", "row-major"), ("col-major", "col-major"), ("row-major", "col-major"), ("z", "hilbert")]
        {
            let dir = tempfile::tempdir().unwrap();
            let mut c = Config::new();
            c.set("sm.tile_cache_size", cache).unwrap();
            let ctx = Context::new(c.clone()).unwrap();
            let mut a = Attribute::new("v", Datatype::Int32);
            if filtered {
                a.filters = FilterPipeline::new(vec![Filter::ByteShuffle]);
            }
            let base = ArraySchema::builder(ArrayType::Dense)
                .dim(Dimension::new("x", Datatype::Int64, (0, rows - 1), tile[0]))
                .dim(Dimension::new("y", Datatype::Int64, (0, cols - 1), tile[1]))
                .attr(a)
                .build()
                .unwrap();
            let layout =
                Candidate { extents: tile.to_vec(), tile_order: tile_order.into(), cell_order: cell_order.into() };
            let s = advise::schema_with(&base, &layout).unwrap();
            let uri = dir.path().join("a");
            Array::create(&ctx, &uri, &s).unwrap();
            let vals: Vec<i32> = (0..(rows * cols) as i32).collect();
            let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
            w.write(&Subarray::full(&s), Layout::RowMajor, &[AttrInput::fixed("v", bytemuck::cast_slice(&vals))])
                .unwrap();
            // The open reads the fragment's metadata: the model's size of it, but for the
            // header and footer (domain, file names, checksum).
            let meta = std::fs::read_dir(uri.join(FRAGMENTS_DIR)).unwrap().next().unwrap().unwrap().path();
            let stored = std::fs::metadata(meta.join(METADATA_FILE)).unwrap().len() as f64;
            let modelled = advise::metadata_bytes(&s).unwrap();
            assert!((0.0..160.0).contains(&(stored - modelled)), "{layout:?} filtered {filtered}: {stored} {modelled}");
            let dev = Device::local(&c);
            for q in &queries {
                let sc = advise::score(&s, &layout, std::slice::from_ref(q), &dev, 1.0).unwrap();
                let (requests, bytes) = measured_reads(&c, &uri, q);
                let what = format!("{layout:?} filtered {filtered} cache {cache} {q:?}");
                assert_eq!((requests, bytes), (sc.requests, sc.bytes), "{what}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * 4 * 26);
}

#[test]
fn advice_follows_the_workload_and_apply_keeps_every_cell() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let c = Config::new();
    let ctx = Context::new(c.clone()).unwrap();
    let s = schema(8, false);
    let uri = make(&ctx, dir.path(), &s);
    let opts = SearchOptions { min_tile_bytes: 256, max_tile_bytes: 1 << 20 };
    let dev = Device::local(&c);
    // Beams along x (the slowest dimension of row-major): tiles long in x win.
    let along_x = advise::advise(&ctx, &uri, &beams(0, 16), dev, opts).unwrap();
    let best = &along_x.best().layout;
    assert!(best.extents[0] > 8 && best.extents[1] < 8, "{best:?}");
    assert!(along_x.gain() > 1.0);
    assert!(along_x.ranked.windows(2).all(|w| w[0].seconds <= w[1].seconds));
    // Beams along y: tiles long in y.
    let along_y = advise::advise(&ctx, &uri, &beams(1, 16), dev, opts).unwrap();
    let best = &along_y.best().layout;
    assert!(best.extents[1] > 8 && best.extents[0] < 64, "{best:?}");
    // Rewrite in small slabs (several fragments, whole tiles of the new layout): the same cells.
    let dst = dir.path().join("b");
    let slabs = advise::apply(&ctx, &uri, &dst, best, 64 * 4 * 16).unwrap();
    assert!(slabs >= 2, "{slabs}");
    let a = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let b = Array::open(&ctx, &dst, Mode::Read).unwrap();
    assert_eq!(b.schema().dims[0].tile_extent(), best.extents[0]);
    let full = Subarray::full(&s);
    assert_eq!(
        a.read(&full, &["v"], Layout::RowMajor).unwrap().attrs[0].data,
        b.read(&full, &["v"], Layout::RowMajor).unwrap().attrs[0].data
    );
    // The destination exists now: a second apply refuses and changes nothing.
    assert!(advise::apply(&ctx, &uri, &dst, best, 1 << 20).is_err());
}

#[test]
fn query_logs_are_checked_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let s = schema(8, false);
    let write = |text: &str| {
        let p = dir.path().join("q.jsonl");
        std::fs::File::create(&p).unwrap().write_all(text.as_bytes()).unwrap();
        p
    };
    let ok = advise::read_log(
        &write("{\"ranges\": [[0, 3], null]}\n\n{\"ranges\": {\"y\": [5, 5]}, \"weight\": 2, \"layout\": \"F\"}\n"),
        &s,
    )
    .unwrap();
    assert_eq!(ok[0].ranges, vec![(0, 3), (0, 63)]);
    assert_eq!((ok[1].ranges.clone(), ok[1].weight, ok[1].col_major), (vec![(0, 63), (5, 5)], 2.0, true));
    for (bad, why) in [
        ("{\"ranges\": [[0, 3]]}", "1 ranges given"),
        ("{\"ranges\": [[0, 64], null]}", "outside"),
        ("{\"ranges\": {\"z\": [0, 1]}}", "unknown dimension"),
        ("{\"weight\": -1}", "weight"),
        ("[1, 2]", "JSON object"),
        ("{\"layout\": \"G\"}", "layout"),
    ] {
        let e = advise::read_log(&write(&format!("{{}}\n{bad}\n")), &s).unwrap_err();
        let text = format!("{e:#}");
        assert!(text.contains("line 2") && text.contains(why), "{bad}: {text}");
    }
    assert!(advise::read_log(&write("\n"), &s).is_err());
}
