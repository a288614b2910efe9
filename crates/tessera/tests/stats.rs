//! The statistics experiments of the TileDB statistics document, at a size that runs in
//! seconds, with every expected figure computed from the array's shape, not copied.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::sync::Mutex;

use tessera::stats::{self, Counter};
use tessera::*;

#[allow(dead_code, unreachable_pub)]
#[path = "common.rs"]
mod common;

static LOCK: Mutex<()> = Mutex::new(());

const N: i128 = 1200;

fn setup(tile_rows: u64, filters: Vec<Filter>, cache: u64) -> (tempfile::TempDir, Context, ArraySchema) {
    setup_chunked(tile_rows, filters, cache, 65536)
}

/// `setup` with filtered tiles written in chunks of `chunk` bytes (0: whole).
fn setup_chunked(
    tile_rows: u64,
    filters: Vec<Filter>,
    cache: u64,
    chunk: u64,
) -> (tempfile::TempDir, Context, ArraySchema) {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::new();
    c.set("sm.tile_cache_size", &cache.to_string()).unwrap();
    c.set("sm.tile_chunk_size", &chunk.to_string()).unwrap();
    let ctx = Context::new(c).unwrap();
    let mut a = Attribute::new("a", Datatype::Int32);
    a.filters = FilterPipeline::new(filters);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("rows", Datatype::Int64, (1, N), tile_rows))
        .dim(Dimension::new("cols", Datatype::Int64, (1, N), N as u64))
        .attr(a)
        .build()
        .unwrap();
    Array::create(&ctx, dir.path().join("a"), &schema).unwrap();
    let vals: Vec<i32> = (0..N * N).map(|k| (k / N + k % N) as i32).collect();
    let w = Array::open(&ctx, dir.path().join("a"), Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).unwrap();
    (dir, ctx, schema)
}

fn read_rows(ctx: &Context, dir: &tempfile::TempDir, lo: i128, hi: i128) {
    let r = Array::open(ctx, dir.path().join("a"), Mode::Read).unwrap();
    let res = r.read(&Subarray::from_ranges(&[(lo, hi), (1, N)]), &["a"], Layout::RowMajor).unwrap();
    let v: &[i32] = bytemuck::cast_slice(&res.attrs[0].data);
    assert_eq!(v[0], (lo - 1) as i32);
}

fn counter(s: &stats::Snapshot, c: Counter) -> u64 {
    s.counter(c)
}

/// Runs `f` with statistics on and reset, returning the snapshot.
fn measured(f: impl FnOnce()) -> stats::Snapshot {
    stats::reset();
    stats::enable();
    f();
    stats::disable();
    stats::snapshot()
}

/// The statistics document's first experiment; its tile is compressed whole (as the document's
/// are: `sm.tile_chunk_size` 0), so the whole tile is read for a quarter of it.
#[test]
fn one_tile_array_quarter_read_is_25_percent() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, ctx, _) = setup_chunked(N as u64, vec![Filter::Lz4], 0, 0);
    let s = measured(|| read_rows(&ctx, &dir, 1, N / 4));
    let bytes = (N * N * 4) as u64;
    assert_eq!(counter(&s, Counter::SmQuerySubmitRead), 1);
    assert_eq!(counter(&s, Counter::ReaderNumAttrTilesTouched), 1);
    assert_eq!(counter(&s, Counter::ReaderAttrTileCacheHits), 0);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesRead), bytes);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesCopied), bytes / 4);
    let text = stats::dump();
    assert!(text.contains("Read query submits: 1"), "{text}");
    assert!(
        text.contains(&format!("Fixed-length tile data copy-to-read ratio: {} / {bytes} bytes (25.0%)", bytes / 4)),
        "{text}"
    );
    assert!(text.contains("Tile cache hit ratio: 0 / 1  (0.0%)"), "{text}");
    // Tile bytes plus metadata were read from storage, and the storage layer saw them all.
    let tile_and_meta = counter(&s, Counter::ReaderNumTileBytesRead) + counter(&s, Counter::ReaderNumMetadataBytesRead);
    assert_eq!(counter(&s, Counter::VfsReadTotalBytes), tile_and_meta);
}

/// The same tile compressed in chunks of 64 KiB (`sm.tile_chunk_size` 65536): the quarter read reads and
/// decodes only the 22 chunks that hold its 1,440,000 bytes.
#[test]
fn chunked_quarter_read_decodes_only_its_chunks() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, ctx, _) = setup(N as u64, vec![Filter::Lz4], 0);
    let s = measured(|| read_rows(&ctx, &dir, 1, N / 4));
    let quarter = (N * N) as u64;
    let chunks = quarter.div_ceil(65536) * 65536;
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesRead), chunks);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesCopied), quarter);
    assert_eq!(counter(&s, Counter::ReaderNumAttrTilesTouched), 1);
    // The stored bytes read are those chunks' (less than a third of the tile's).
    let r = Array::open(&ctx, dir.path().join("a"), Mode::Read).unwrap();
    let stored = r.fragments()[0].files[0].1[0].stored_size;
    let read = counter(&s, Counter::ReaderNumTileBytesRead);
    assert!(read > 0 && read * 3 < stored, "read {read} of {stored} stored bytes");
    let tile_and_meta = read + counter(&s, Counter::ReaderNumMetadataBytesRead);
    assert_eq!(counter(&s, Counter::VfsReadTotalBytes), tile_and_meta);
    // A whole-tile read decodes every chunk (in parallel) and returns the same cells.
    read_rows(&ctx, &dir, 1, N);
}

/// From disk (the storage says nothing is in memory) an unfiltered tile is read as a stream
/// through a reader of its own, whole or in part, and the storage layer still counts every byte
/// and request of it: the statistics agree with the reader's.
#[test]
fn tiles_streamed_from_disk_count_at_the_storage_layer() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, _, _) = setup(N as u64, vec![], 0);
    let cold = common::cached_ctx(0);
    for (lo, hi) in [(1, N), (2, N)] {
        let s = measured(|| read_rows(&cold, &dir, lo, hi));
        assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesRead), (N * N * 4) as u64);
        let tile_and_meta =
            counter(&s, Counter::ReaderNumTileBytesRead) + counter(&s, Counter::ReaderNumMetadataBytesRead);
        assert!(counter(&s, Counter::VfsReadNumRequests) > 16, "a stream of pieces");
        assert_eq!(counter(&s, Counter::VfsReadTotalBytes), tile_and_meta, "rows {lo}..={hi}");
    }
}

/// Without filters the tile has block checksums (4 KiB blocks): the quarter read reads only the
/// 352 blocks that hold its 1,440,000 bytes, and the statistics say so.
#[test]
fn unfiltered_quarter_read_reads_only_its_blocks() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, ctx, _) = setup(N as u64, vec![], 0);
    let s = measured(|| read_rows(&ctx, &dir, 1, N / 4));
    let quarter = (N * N) as u64;
    let blocks = quarter.div_ceil(4096) * 4096;
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesRead), blocks);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesCopied), quarter);
    let text = stats::dump();
    assert!(text.contains(&format!("copy-to-read ratio: {quarter} / {blocks} bytes (99.9%)")), "{text}");
    let tile_and_meta = counter(&s, Counter::ReaderNumTileBytesRead) + counter(&s, Counter::ReaderNumMetadataBytesRead);
    assert_eq!(counter(&s, Counter::VfsReadTotalBytes), tile_and_meta);
}

#[test]
fn one_row_tiles_read_only_what_is_needed() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, ctx, _) = setup(1, vec![], 0);
    let s = measured(|| read_rows(&ctx, &dir, 1, N / 4));
    let want = (N / 4 * N * 4) as u64;
    assert_eq!(counter(&s, Counter::ReaderNumAttrTilesTouched), (N / 4) as u64);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesRead), want);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesCopied), want);
    assert!(stats::dump().contains(&format!("copy-to-read ratio: {want} / {want} bytes (100.0%)")));
}

#[test]
fn overlapping_reads_hit_the_cache_and_pass_100_percent() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let tile = 100u64;
    let (dir, ctx, _) = setup(tile, vec![], 100 << 20);
    let s = measured(|| {
        read_rows(&ctx, &dir, 1, 600);
        read_rows(&ctx, &dir, 301, 900);
    });
    // Tiles of 100 rows: the first read touches 6, the second 6, of which rows 301..600 (3 tiles)
    // were read by the first.
    let tile_bytes = tile * N as u64 * 4;
    assert_eq!(counter(&s, Counter::ReaderNumAttrTilesTouched), 12);
    assert_eq!(counter(&s, Counter::ReaderAttrTileCacheHits), 3);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesRead), 9 * tile_bytes);
    assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesCopied), 12 * tile_bytes);
    let text = stats::dump();
    assert!(text.contains("Tile cache hit ratio: 3 / 12  (25.0%)"), "{text}");
    assert!(
        text.contains(&format!("copy-to-read ratio: {} / {} bytes (133.3%)", 12 * tile_bytes, 9 * tile_bytes)),
        "{text}"
    );
    assert_eq!(ctx.tile_cache().stats().hits, 3);
}

#[test]
fn write_compression_ratio_comes_from_the_bytes_written() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let mut out = None;
    let s = measured(|| out = Some(setup(100, vec![Filter::Delta, Filter::Zstd { level: 3 }], 0)));
    let (dir, ctx, _) = out.unwrap();
    let r = Array::open(&ctx, dir.path().join("a"), Mode::Read).unwrap();
    let f = &r.fragments()[0];
    assert_eq!(counter(&s, Counter::SmQuerySubmitWrite), 1);
    assert_eq!(counter(&s, Counter::WriterNumAttrTilesWritten), f.tile_count() as u64);
    assert_eq!(counter(&s, Counter::WriterNumBytesBeforeFiltering), f.unfiltered_bytes());
    assert_eq!(counter(&s, Counter::WriterNumBytesWritten), f.stored_bytes());
    let meta = counter(&s, Counter::WriterNumMetadataBytesWritten);
    let (num, den) = (f.unfiltered_bytes() + meta, f.stored_bytes() + meta);
    assert!(num > 20 * den, "predictable data compresses well: {num} / {den}");
    let times = (num * 10 + den / 2) / den; // tenths, rounded half up
    let text = stats::dump();
    let expect = format!("Write compression ratio: {num} / {den} bytes ({}.{}x)", times / 10, times % 10);
    assert!(text.contains(&expect), "{expect} not in\n{text}");
    // Every byte the writer wrote went through the storage layer.
    assert!(counter(&s, Counter::VfsWriteTotalBytes) >= f.stored_bytes() + meta);
}

#[test]
fn stats_off_cost_nothing_and_count_nothing() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    stats::disable();
    stats::reset();
    let (dir, ctx, _) = setup(100, vec![], 0);
    read_rows(&ctx, &dir, 1, 10);
    let s = stats::snapshot();
    for c in Counter::ALL {
        assert_eq!(s.counter(*c), 0, "{c} counted while statistics were off");
    }
    let j: serde_json::Value = serde_json::from_str(&stats::json()).unwrap();
    assert_eq!(j["counters"]["sm_query_submit_read"], 0);
}

/// Writes one small sparse fragment: cells (`rs[i]`, `cs[i]`) of dimensions `r` and `c`, all with
/// `value` in attribute `a`.
fn write_points(w: &Array, rs: &[i64], cs: &[i64], value: i32) {
    let vals = vec![value; rs.len()];
    w.write_sparse(
        &[
            CoordInput { name: "r", data: bytemuck::cast_slice(rs) },
            CoordInput { name: "c", data: bytemuck::cast_slice(cs) },
        ],
        &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))],
    )
    .unwrap();
}

/// The update index is built by the first read of an open array and reused by later reads,
/// which then read no coordinate tile of the indexed fragments (no tile cache here, so every
/// tile a read needs is a storage request).
#[test]
fn update_index_is_built_once_per_open_array() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let ctx_of = |index: bool| {
        let mut c = Config::new();
        c.set("sm.tile_cache_size", "0").unwrap();
        c.set("sm.read.update_index_size", if index { "134217728" } else { "0" }).unwrap();
        Context::new(c).unwrap()
    };
    let ctx = ctx_of(true);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (1, 40), 10))
        .dim(Dimension::new("c", Datatype::Int64, (1, 40), 10))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&[0i32; 1600]))])
        .unwrap();
    let (fragments, per) = (20, 10);
    for k in 0..fragments {
        let rs: Vec<i64> = (0..per).map(|j| 1 + (k * 7 + j * 3) % 40).collect();
        let cs: Vec<i64> = (0..per).map(|j| 1 + (k * 11 + j * 13) % 40).collect();
        write_points(&w, &rs, &cs, k as i32 + 1);
    }
    let read = |r: &Array| r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data.clone();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let first = measured(|| drop(read(&r)));
    assert_eq!(counter(&first, Counter::ReaderUpdateIndexCells), (fragments * per) as u64);
    let mut again = Vec::new();
    let second = measured(|| again = read(&r));
    assert_eq!(counter(&second, Counter::ReaderUpdateIndexCells), 0, "built once per open array");
    let plain = Array::open(&ctx_of(false), &uri, Mode::Read).unwrap();
    let mut want = Vec::new();
    let without = measured(|| want = read(&plain));
    assert_eq!(again, want);
    assert_eq!(counter(&without, Counter::ReaderUpdateIndexCells), 0);
    // Without the index every fragment's two coordinate tiles are read as well.
    let (with_req, without_req) =
        (counter(&second, Counter::VfsReadNumRequests), counter(&without, Counter::VfsReadNumRequests));
    assert!(
        without_req >= with_req + 2 * fragments as u64,
        "{with_req} requests with the index, {without_req} without"
    );
}

/// A sparse array's first read of an open array reads its small fragments' tiles itself
/// (`sm.read.update_index_after_reads`, 1 by default): building the index costs a one-off read
/// more than it saves it. The second read builds the index, later ones reuse it, and all
/// return the same cells; with the setting at 0 the first read builds it.
#[test]
fn a_sparse_array_builds_its_update_index_on_the_second_read() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let ctx_of = |after: &str| {
        let mut c = Config::new();
        c.set("sm.read.update_index_after_reads", after).unwrap();
        Context::new(c).unwrap()
    };
    let ctx = ctx_of("1");
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("r", Datatype::Int64, (0, 99), 10))
        .dim(Dimension::new("c", Datatype::Int64, (0, 99), 10))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let (fragments, per) = (12i64, 10i64);
    for k in 0..fragments {
        let rs: Vec<i64> = (0..per).map(|j| (k * 7 + j * 31) % 100).collect();
        let cs: Vec<i64> = (0..per).map(|j| (k * 3 + j * 17) % 100).collect();
        write_points(&w, &rs, &cs, k as i32 + 1);
    }
    let full = vec![vec![DimRange::Int(0, 99)], vec![DimRange::Int(0, 99)]];
    let read = |r: &Array| {
        let res = r.sparse_query(&full, &["a"], Layout::RowMajor).unwrap().read_all().unwrap();
        res.attrs.iter().map(|a| a.data.clone()).collect::<Vec<_>>()
    };
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let mut got = Vec::new();
    for k in 0..3 {
        let mut cells = Vec::new();
        let s = measured(|| cells = read(&r));
        let want = if k == 1 { (fragments * per) as u64 } else { 0 };
        assert_eq!(counter(&s, Counter::ReaderUpdateIndexCells), want, "read {k}");
        got.push(cells);
    }
    assert!(got[0] == got[1] && got[1] == got[2]);
    assert!(!got[0][2].is_empty());
    let eager = Array::open(&ctx_of("0"), &uri, Mode::Read).unwrap();
    let mut cells = Vec::new();
    let s = measured(|| cells = read(&eager));
    assert_eq!(counter(&s, Counter::ReaderUpdateIndexCells), (fragments * per) as u64);
    assert_eq!(cells, got[0]);
}

/// A condition that passes in one tile only: the condition's attribute is read in every tile,
/// the other attribute only in that one (dense: the copies from the other tiles are dropped;
/// sparse: the failing cells are dropped before the other attribute is gathered).
#[test]
fn conditions_fetch_other_attributes_only_for_tiles_with_passing_cells() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::new();
    c.set("sm.tile_cache_size", "0").unwrap();
    let ctx = Context::new(c).unwrap();
    for sparse in [false, true] {
        let uri = dir.path().join(if sparse { "s" } else { "d" });
        let mut b = ArraySchema::builder(if sparse { ArrayType::Sparse } else { ArrayType::Dense })
            .dim(Dimension::new("x", Datatype::Int64, (0, 99), 10))
            .attr(Attribute::new("a", Datatype::Int32))
            .attr(Attribute::new("b", Datatype::Float64));
        if sparse {
            b = b.capacity(10);
        }
        let schema = b.build().unwrap();
        Array::create(&ctx, &uri, &schema).unwrap();
        let a: Vec<i32> = (0..100).collect();
        let bv: Vec<f64> = (0..100).map(f64::from).collect();
        let attrs = [AttrInput::fixed("a", bytemuck::cast_slice(&a)), AttrInput::fixed("b", bytemuck::cast_slice(&bv))];
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        if sparse {
            let xs: Vec<i64> = (0..100).collect();
            w.write_sparse(&[CoordInput { name: "x", data: bytemuck::cast_slice(&xs) }], &attrs).unwrap();
        } else {
            w.write(&Subarray::full(&schema), Layout::RowMajor, &attrs).unwrap();
        }
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let cond = Condition::parse("a between 42 and 45").unwrap();
        let mut got = None;
        let s = measured(|| {
            got = Some(if sparse {
                r.sparse_query_where(&[vec![]], &["b"], Layout::RowMajor, &cond).unwrap().read_all().unwrap()
            } else {
                r.read_query(&Subarray::full(&schema), &["b"], Layout::RowMajor)
                    .unwrap()
                    .with_condition(&cond)
                    .unwrap()
                    .read_all()
                    .unwrap()
            });
        });
        let got = got.unwrap();
        let b_out: &[f64] = bytemuck::cast_slice(&got.attr("b").unwrap().data);
        if sparse {
            assert_eq!(b_out, [42.0, 43.0, 44.0, 45.0]);
        } else {
            let want: Vec<f64> =
                (0..100).map(|k| if (42..=45).contains(&k) { f64::from(k) } else { f64::NAN }).collect();
            assert!(b_out.iter().zip(&want).all(|(g, w)| g == w || (g.is_nan() && w.is_nan())));
            assert_eq!(counter(&s, Counter::ReaderConditionCopiesSkipped), 9);
        }
        assert_eq!(counter(&s, Counter::ReaderConditionCells), 100);
        assert_eq!(counter(&s, Counter::ReaderConditionPassed), 4);
        // Ten tiles of `a` for the condition, one of `b` (coordinate tiles are not counted).
        assert_eq!(counter(&s, Counter::ReaderNumAttrTilesTouched), 10 + 1, "sparse {sparse}");
    }
}

/// Aggregates count the cells they aggregate (after the condition), their batches (within
/// `sm.memory_budget`) and, through the read, the tiles they read.
#[test]
fn aggregates_count_cells_batches_and_tiles() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::new();
    c.set("sm.tile_cache_size", "0").unwrap();
    // 400 bytes: a batch holds 100 cells of `a` (int32), so 10 tiles of 10 cells make 10 batches.
    c.set("sm.memory_budget", "400").unwrap();
    let ctx = Context::new(c).unwrap();
    let uri = dir.path().join("d");
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, 999), 100))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let a: Vec<i32> = (0..1000).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&a))]).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let cond = Condition::parse("a >= 900").unwrap();
    let mut got = None;
    let s = measured(|| {
        got = Some(r.aggregate(&[vec![]], Some(&cond), &[AggregateRequest::new("a", AggregateOp::Sum)]).unwrap());
    });
    assert_eq!(got.unwrap(), vec![AggregateValue::Int((900..1000).sum())]);
    assert_eq!(counter(&s, Counter::ReaderAggregateCells), 100);
    assert_eq!(counter(&s, Counter::ReaderAggregateBatches), 10);
    assert_eq!(counter(&s, Counter::ReaderConditionCells), 1000);
    assert_eq!(counter(&s, Counter::ReaderNumAttrTilesTouched), 10);
}

/// The tile order decides where a box's tiles lie in a fragment's files: a 2 x 2 block of tiles
/// is one run of tiles under the Z and Hilbert orders (one read request, ranges not coalesced
/// across gaps) and two runs of two tiles under row- and col-major order.
#[test]
fn tile_order_decides_the_runs_a_box_read_fetches() {
    let _g = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (order, runs) in
        [(CellOrder::RowMajor, 2), (CellOrder::ColMajor, 2), (CellOrder::Z, 1), (CellOrder::Hilbert, 1)]
    {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Config::new();
        c.set("sm.tile_cache_size", "0").unwrap();
        c.set("vfs.coalesce_gap", "0").unwrap();
        let ctx = Context::new(c).unwrap();
        // 8 x 8 cells in 2 x 2 tiles: a 4 x 4 grid of tiles, unfiltered.
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("r", Datatype::Int64, (0, 7), 2))
            .dim(Dimension::new("c", Datatype::Int64, (0, 7), 2))
            .attr(Attribute::new("a", Datatype::Int32))
            .tile_order(order)
            .build()
            .unwrap();
        let uri = dir.path().join("a");
        Array::create(&ctx, &uri, &schema).unwrap();
        let vals: Vec<i32> = (0..64).collect();
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))])
            .unwrap();
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        // The tiles (0..=1, 0..=1): cells (0..=3, 0..=3).
        let s = measured(|| {
            let res = r.read(&Subarray::from_ranges(&[(0, 3), (0, 3)]), &["a"], Layout::RowMajor).unwrap();
            let v: &[i32] = bytemuck::cast_slice(&res.attrs[0].data);
            assert_eq!(v, (0..4).flat_map(|i| (0..4).map(move |j| i * 8 + j)).collect::<Vec<i32>>().as_slice());
        });
        assert_eq!(counter(&s, Counter::VfsReadNumRequests), runs, "{order:?}");
        assert_eq!(counter(&s, Counter::VfsReadTotalBytes), 4 * 4 * 4, "{order:?}");
    }
}

/// `dense_tile_parts`' positions predict what the reader fetches: for random boxes of a 3-D array over
/// a grid of 5 x 3 x 4 tiles (not powers of two) under every tile order, the runs of consecutive
/// positions are the read requests (ranges not coalesced across gaps) and the positions times
/// the tile size the bytes.
#[test]
fn dense_tile_parts_predict_the_reads_of_a_box() {
    let _g = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for order in [CellOrder::RowMajor, CellOrder::ColMajor, CellOrder::Z, CellOrder::Hilbert] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Config::new();
        c.set("sm.tile_cache_size", "0").unwrap();
        c.set("vfs.coalesce_gap", "0").unwrap();
        let ctx = Context::new(c).unwrap();
        let sizes = [10i128, 6, 8];
        // A filter that keeps sizes: every tile goes through the coalescing fetch (unfiltered
        // tiles a read copies whole are read one by one, straight into the result).
        let mut attr = Attribute::new("a", Datatype::Int32);
        attr.filters = FilterPipeline::new(vec![Filter::ByteShuffle]);
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("x", Datatype::Int64, (0, 9), 2))
            .dim(Dimension::new("y", Datatype::Int64, (0, 5), 2))
            .dim(Dimension::new("z", Datatype::Int64, (0, 7), 2))
            .attr(attr)
            .tile_order(order)
            .build()
            .unwrap();
        let uri = dir.path().join("a");
        Array::create(&ctx, &uri, &schema).unwrap();
        let vals: Vec<i32> = (0..480).collect();
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))])
            .unwrap();
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let positions = |sub: &Subarray, max: u64| {
            dense_tile_parts(&schema, sub, Layout::RowMajor, max)
                .map(|t| t.iter().map(|p| p.position).collect::<Vec<u64>>())
        };
        let full = positions(&Subarray::full(&schema), 1000).unwrap();
        assert_eq!(full, (0..60).collect::<Vec<u64>>(), "{order:?}");
        for _ in 0..40 {
            let ranges: Vec<(i128, i128)> = sizes
                .iter()
                .map(|&n| {
                    let a = next(n as u64) as i128;
                    let b = next(n as u64) as i128;
                    (a.min(b), a.max(b))
                })
                .collect();
            let sub = Subarray::from_ranges(&ranges);
            let pos = positions(&sub, 1000).unwrap();
            let runs = 1 + pos.windows(2).filter(|w| w[1] != w[0] + 1).count() as u64;
            let s = measured(|| {
                r.read(&sub, &["a"], Layout::RowMajor).unwrap();
            });
            assert_eq!(
                counter(&s, Counter::VfsReadNumRequests),
                runs,
                "{order:?} {ranges:?} {pos:?} bytes {}",
                counter(&s, Counter::VfsReadTotalBytes)
            );
            assert_eq!(counter(&s, Counter::VfsReadTotalBytes), pos.len() as u64 * 8 * 4, "{order:?} {ranges:?}");
        }
        // Several ranges on a dimension share tiles once; too many tiles is an error.
        let two = Subarray { ranges: vec![vec![(0, 1), (1, 2)], vec![(0, 0)], vec![(0, 0)]] };
        assert_eq!(positions(&two, 1000).unwrap().len(), 2);
        assert!(positions(&Subarray::full(&schema), 59).is_err());
    }
}

/// A hostile subarray of many ranges per dimension inside one tile: each tile's spans are the
/// cross product of its ranges there, so the bound on the list holds for the spans too, not only
/// for the tiles (here 1 tile, 20^3 spans).
#[test]
fn dense_tile_parts_bound_the_spans_not_only_the_tiles() {
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, 63), 64))
        .dim(Dimension::new("y", Datatype::Int64, (0, 63), 64))
        .dim(Dimension::new("z", Datatype::Int64, (0, 63), 64))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let ranges: Vec<(i128, i128)> = (0..20).map(|k| (3 * k, 3 * k)).collect();
    let sub = Subarray { ranges: vec![ranges.clone(), ranges.clone(), ranges] };
    let e = dense_tile_parts(&schema, &sub, Layout::RowMajor, 1000).unwrap_err();
    assert!(e.to_string().contains("more than 1000 times"), "{e}");
    let parts = dense_tile_parts(&schema, &sub, Layout::RowMajor, 8000).unwrap();
    assert_eq!((parts.len(), parts[0].spans.len()), (1, 8000));
}

/// A dense grid of `rows x cols` cells (int64 dimensions `r` and `c` from 1, tiles `tile`) with
/// attributes `attrs` (name, type), each filtered by `filters`.
fn grid_schema(
    rows: i128,
    cols: i128,
    tile: (u64, u64),
    attrs: &[(&str, Datatype)],
    filters: &[Filter],
) -> ArraySchema {
    let mut b = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (1, rows), tile.0))
        .dim(Dimension::new("c", Datatype::Int64, (1, cols), tile.1));
    for (name, t) in attrs {
        let mut a = Attribute::new(*name, *t);
        a.filters = FilterPipeline::new(filters.to_vec());
        b = b.attr(a);
    }
    b.build().unwrap()
}

/// Creates the array `uri` of grid `schema` (`grid_schema`) and writes all its cells, `columns`
/// (attribute name, the whole grid's values in row-major order), as one fragment: in one submit
/// (tiles filtered straight from the caller's rows) or, with `banded`, in bands of 100 rows
/// (tiles assembled).
fn write_grid(ctx: &Context, uri: &std::path::Path, schema: &ArraySchema, banded: bool, columns: &[(&str, &[u8])]) {
    let (rows, cols) = (schema.dims[0].domain_size() as usize, schema.dims[1].domain_size() as usize);
    let inputs = |r0: usize, r1: usize| -> Vec<AttrInput<'_>> {
        let row = |bytes: &[u8]| bytes.len() / rows;
        columns.iter().map(|(name, v)| AttrInput::fixed(name, &v[r0 * row(v)..r1 * row(v)])).collect()
    };
    Array::create(ctx, uri, schema).unwrap();
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    let mut writer = w.writer(&Subarray::full(schema), Layout::RowMajor).unwrap();
    let step = if banded { 100 } else { rows };
    for r0 in (0..rows).step_by(step) {
        let r1 = (r0 + step).min(rows);
        let part = Subarray::from_ranges(&[(r0 as i128 + 1, r1 as i128), (1, cols as i128)]);
        writer.submit_part(&part, &inputs(r0, r1)).unwrap();
    }
    writer.finish().unwrap();
}

/// `sm.write.deflate_encoder` reaches every gzip tile a writer stores, whole or in chunks,
/// filtered from the caller's rows (one submit) or assembled (bands): libdeflate and zlib-rs's
/// lazy matcher store different bytes that read back the same, and auto stores every tile of
/// the file as one of the two does (its choice holds for the whole write).
#[test]
fn the_deflate_encoder_reaches_every_gzip_tile() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (rows, cols) = (1024i128, 4096i128);
    // 16 tiles of 256 x 1024 int32 (1 MiB): enough for auto to time a piece.
    let schema = grid_schema(rows, cols, (256, 1024), &[("a", Datatype::Int32)], &[Filter::Gzip { level: 6 }]);
    let grid: Vec<i32> = (0..rows * cols).map(|k| ((k / cols) % 13_000 + k % cols) as i32).collect();
    let bytes: &[u8] = bytemuck::cast_slice(&grid);
    for chunking in ["0", "65536"] {
        for banded in [false, true] {
            let mut stored = Vec::new();
            for encoder in ["libdeflate", "zlib", "auto"] {
                let mut c = Config::new();
                c.set("sm.write.deflate_encoder", encoder).unwrap();
                c.set("sm.tile_chunk_size", chunking).unwrap();
                let ctx = Context::new(c).unwrap();
                let uri = dir.path().join(format!("{chunking}-{banded}-{encoder}"));
                write_grid(&ctx, &uri, &schema, banded, &[("a", bytes)]);
                let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
                let all = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
                assert!(all.attrs[0].data == bytes, "{encoder}, chunks {chunking}, banded {banded}");
                let sizes: Vec<u64> = r.fragments()[0].files[0].1.iter().map(|t| t.stored_size).collect();
                assert_eq!(sizes.len(), 16);
                stored.push(sizes);
            }
            let what = format!("chunks {chunking}, banded {banded}");
            assert!(stored[0].iter().zip(&stored[1]).all(|(l, z)| l != z), "{what}: {stored:?}");
            assert!(stored[2] == stored[0] || stored[2] == stored[1], "{what}: {stored:?}");
        }
    }
}

/// With `sm.tile_chunk_size` auto (the default), each file's chunk size comes from a sample of
/// its data: a smooth ramp, stored far smaller in 1 MiB chunks than in 256 KiB but not in 4 MiB
/// ones, gets 1 MiB chunks; noise, stored the same at any size, keeps 64 KiB; a random block of
/// 300 KiB repeated, which every piece stores once, gets the whole 4 MiB tile. A one-cell read
/// decodes one chunk (or the whole tile), and all read back what was written, whether the tiles
/// came straight from the caller's rows (one submit) or were assembled from several.
#[test]
fn automatic_chunk_sizes_follow_the_data_and_bound_a_one_cell_read() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::new();
    c.set("sm.tile_cache_size", "0").unwrap();
    let ctx = Context::new(c).unwrap();
    let (rows, cols) = (1024i128, 2048i128);
    // Tiles of 512 x 1024 cells: 4 MiB per tile and attribute.
    let attrs = [("smooth", Datatype::Float64), ("noise", Datatype::Float64), ("restated", Datatype::Float64)];
    let schema = grid_schema(rows, cols, (512, 1024), &attrs, &[Filter::Zstd { level: 3 }]);
    let n = (rows * cols) as usize;
    let smooth: Vec<f64> = (0..n).map(|i| (i / 4096) as f64).collect();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<f64> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64
        })
        .collect();
    let restated: Vec<f64> = noise[..300 << 7].iter().copied().cycle().take(n).collect();
    let columns = [
        ("smooth", bytemuck::cast_slice(&smooth)),
        ("noise", bytemuck::cast_slice(&noise)),
        ("restated", bytemuck::cast_slice(&restated)),
    ];
    for banded in [false, true] {
        let uri = dir.path().join(format!("a{banded}"));
        write_grid(&ctx, &uri, &schema, banded, &columns);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let frag = r.fragments()[0].clone();
        for (f, want) in [(0, Some(20)), (1, Some(16)), (2, None)] {
            for t in 0..4 {
                assert_eq!(frag.chunks.of(f, t).map(|c| c.log2), want, "file {f} tile {t} (banded: {banded})");
            }
        }
        let cases = [("smooth", &smooth, 1u64 << 20), ("noise", &noise, 1 << 16), ("restated", &restated, 4 << 20)];
        for (name, want, chunk) in cases {
            let s = measured(|| {
                let res = r.read(&Subarray::from_ranges(&[(700, 700), (5, 5)]), &[name], Layout::RowMajor).unwrap();
                let v: &[f64] = bytemuck::cast_slice(&res.attrs[0].data);
                assert_eq!(v, [want[699 * cols as usize + 4]]);
            });
            assert_eq!(counter(&s, Counter::ReaderNumFixedCellBytesRead), chunk, "{name}");
            let all = r.read(&Subarray::full(&schema), &[name], Layout::RowMajor).unwrap();
            assert!(bytemuck::cast_slice::<u8, f64>(&all.attrs[0].data) == &want[..], "{name}");
        }
    }
}

/// With `sm.tile_chunk_size` auto, a tile that only 64 KiB chunks could split (here 250 x 250
/// int64, 500 KB, SS-DB's image tiles) is stored whole when its chunks would cost more than 10%
/// over the whole tile (a repeated random block, which zstd stores once per chunk), and in 64
/// KiB chunks when they cost the same (noise); both read back what was written, from one
/// submit (tiles filtered straight from the caller's rows) or from bands (tiles assembled).
#[test]
fn automatic_chunk_size_stores_a_tile_whole_when_chunks_cost_more() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let ctx = Context::new(Config::new()).unwrap();
    let (rows, cols) = (500i128, 750i128);
    let attrs = [("repeated", Datatype::Int64), ("noise", Datatype::Int64)];
    let schema = grid_schema(rows, cols, (250, 250), &attrs, &[Filter::ByteShuffle, Filter::Zstd { level: 1 }]);
    let n = (rows * cols) as usize;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as i64
    };
    let block: Vec<i64> = (0..5000).map(|_| next()).collect();
    let repeated: Vec<i64> = block.iter().copied().cycle().take(n).collect();
    let noise: Vec<i64> = (0..n).map(|_| next()).collect();
    let columns = [("repeated", bytemuck::cast_slice(&repeated)), ("noise", bytemuck::cast_slice(&noise))];
    for banded in [false, true] {
        let uri = dir.path().join(format!("a{banded}"));
        write_grid(&ctx, &uri, &schema, banded, &columns);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let frag = r.fragments()[0].clone();
        for t in 0..6 {
            assert!(frag.chunks.of(0, t).is_none(), "repeated: tile {t} stored whole (banded: {banded})");
            assert_eq!(frag.chunks.of(1, t).map(|c| c.log2), Some(16), "noise: tile {t} (banded: {banded})");
        }
        for (name, want) in [("repeated", &repeated), ("noise", &noise)] {
            let all = r.read(&Subarray::full(&schema), &[name], Layout::RowMajor).unwrap();
            assert!(bytemuck::cast_slice::<u8, i64>(&all.attrs[0].data) == &want[..], "{name} (banded: {banded})");
            let one = r.read(&Subarray::from_ranges(&[(300, 300), (600, 600)]), &[name], Layout::RowMajor).unwrap();
            assert_eq!(bytemuck::cast_slice::<u8, i64>(&one.attrs[0].data), [want[299 * cols as usize + 599]]);
        }
    }
}

/// The chunk size chosen from a sample (`sm.tile_chunk_size` auto) carries over to the array's
/// next fragment written through the same context: the second write of a 4 MiB tile compresses
/// only its chunks, where the first also compressed the sample; a new context samples again.
#[test]
fn the_next_fragment_resumes_the_chosen_chunk_size() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let mut a = Attribute::new("v", Datatype::Float64);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 3 }]);
    let cells = 1i128 << 19; // one 4 MiB tile
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, cells - 1), cells as u64))
        .attr(a)
        .build()
        .unwrap();
    let values: Vec<f64> = (0..cells).map(|i| (i / 4096) as f64).collect();
    let write = |ctx: &Context| {
        let w = Array::open(ctx, &uri, Mode::Write).unwrap();
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("v", bytemuck::cast_slice(&values))])
            .unwrap();
    };
    let calls = |s: &stats::Snapshot| s.timer(stats::Timer::CompressorZstdCompress).calls;
    let ctx = Context::new(Config::new()).unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let first = calls(&measured(|| write(&ctx)));
    let second = calls(&measured(|| write(&ctx)));
    let other = calls(&measured(|| write(&Context::new(Config::new()).unwrap())));
    let frags = Array::open(&ctx, &uri, Mode::Read).unwrap().fragments().to_vec();
    let logs: Vec<u32> = frags.iter().map(|f| f.chunks.of(0, 0).expect("chunked").log2).collect();
    assert_eq!(logs, [20, 20, 20], "every fragment in 1 MiB chunks");
    assert_eq!(second, 4, "the second write compresses its 4 chunks and no sample");
    assert!(first > second && other == first, "first {first}, second {second}, new context {other}");
}

/// An aggregate over a dense array takes the tiles it covers whole from their stored summaries:
/// it reads only the border of the box; a newer fragment over some tiles makes them read again,
/// and with `sm.aggregate.tile_stats` off every cell is read. The answers never change.
#[test]
fn aggregates_take_whole_tiles_from_their_summaries() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (0, 99), 10))
        .dim(Dimension::new("c", Datatype::Int64, (0, 99), 10))
        .attr(Attribute::new("v", Datatype::Int32))
        .build()
        .unwrap();
    let ctx = Context::new(Config::new()).unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let values: Vec<i32> = (0..10_000).map(|i| (i * 7919) % 1000 - 500).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("v", bytemuck::cast_slice(&values))])
        .unwrap();
    let reqs = [
        AggregateRequest::new("v", AggregateOp::Count),
        AggregateRequest::new("v", AggregateOp::Sum),
        AggregateRequest::new("v", AggregateOp::Min),
        AggregateRequest::new("v", AggregateOp::Max),
    ];
    // Rows 5..=94, columns 3..=99: whole tiles rows 1..=8, columns 1..=9 (72 tiles).
    let ranges = vec![vec![DimRange::Int(5, 94)], vec![DimRange::Int(3, 99)]];
    let expect = |vals: &[i32]| {
        let cells: Vec<i128> =
            (5..=94).flat_map(|r| (3..=99).map(move |c| (r, c))).map(|(r, c)| i128::from(vals[r * 100 + c])).collect();
        vec![
            AggregateValue::Count(cells.len() as u64),
            AggregateValue::Int(cells.iter().sum()),
            AggregateValue::Int(*cells.iter().min().unwrap()),
            AggregateValue::Int(*cells.iter().max().unwrap()),
        ]
    };
    let run = |ctx: &Context| {
        let r = Array::open(ctx, &uri, Mode::Read).unwrap();
        let mut got = None;
        let s = measured(|| got = Some(r.aggregate(&ranges, None, &reqs).unwrap()));
        (got.unwrap(), s.counter(Counter::ReaderAggregateTilesFromStats), s.counter(Counter::ReaderAggregateCells))
    };
    let (got, tiles, read) = run(&ctx);
    assert_eq!(got, expect(&values));
    assert_eq!((tiles, read), (72, 90 * 97 - 7200), "72 tiles from summaries, the border read");
    let mut off = Config::new();
    off.set("sm.aggregate.tile_stats", "false").unwrap();
    let (got_off, tiles_off, read_off) = run(&Context::new(off).unwrap());
    assert_eq!((got_off, tiles_off, read_off), (expect(&values), 0, 90 * 97));
    // A newer fragment over rows 20..=29, columns 20..=39 (2 tiles, written whole) and one over a
    // part of a tile (rows 50..=52, columns 50..=52): 3 tiles no longer from the first fragment,
    // 2 of them from the new one's summaries.
    let mut now = values.clone();
    for (r0, r1, c0, c1) in [(20, 29, 20, 39), (50, 52, 50, 52)] {
        let n = (r1 - r0 + 1) * (c1 - c0 + 1);
        let patch: Vec<i32> = (0..n).map(|i| 1000 + i as i32).collect();
        w.write(
            &Subarray::from_ranges(&[(r0 as i128, r1 as i128), (c0 as i128, c1 as i128)]),
            Layout::RowMajor,
            &[AttrInput::fixed("v", bytemuck::cast_slice(&patch))],
        )
        .unwrap();
        for (k, (r, c)) in (r0..=r1).flat_map(|r| (c0..=c1).map(move |c| (r, c))).enumerate() {
            now[r * 100 + c] = patch[k];
        }
    }
    let (got, tiles, read) = run(&ctx);
    assert_eq!(got, expect(&now));
    assert_eq!((tiles, read), (71, 90 * 97 - 7100));
}

/// A sparse aggregate takes the data tiles whose MBR lies inside the box from their summaries
/// while no other fragment overlaps them, and reads them once another one does.
#[test]
fn sparse_aggregates_take_tiles_inside_the_box_from_their_summaries() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("s");
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, 999), 100))
        .attr(Attribute { nullable: true, ..Attribute::new("v", Datatype::Float64) })
        .capacity(100)
        .build()
        .unwrap();
    let ctx = Context::new(Config::new()).unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let xs: Vec<i64> = (0..1000).collect();
    let vs: Vec<f64> = (0..1000).map(|i| if i % 7 == 0 { f64::NAN } else { f64::from(i) / 4.0 }).collect();
    let valid: Vec<u8> = (0..1000).map(|i| u8::from(i % 5 != 0)).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let write = |xs: &[i64], vs: &[f64], valid: &[u8]| {
        w.write_sparse(
            &[CoordInput { name: "x", data: bytemuck::cast_slice(xs) }],
            &[AttrInput { name: "v", data: bytemuck::cast_slice(vs), offsets: None, validity: Some(valid) }],
        )
        .unwrap();
    };
    write(&xs, &vs, &valid);
    let reqs = [
        AggregateRequest::new("v", AggregateOp::Count),
        AggregateRequest::new("v", AggregateOp::NullCount),
        AggregateRequest::new("v", AggregateOp::Sum),
        AggregateRequest::new("v", AggregateOp::Max),
    ];
    let ranges = vec![vec![DimRange::Int(150, 949)]];
    let expect = |vs: &[f64], valid: &[u8]| {
        let (mut nulls, mut sum, mut max) = (0u64, 0.0f64, f64::NEG_INFINITY);
        for i in 150..=949 {
            if valid[i] == 0 {
                nulls += 1;
            } else if !vs[i].is_nan() {
                sum += vs[i];
                max = max.max(vs[i]);
            }
        }
        vec![
            AggregateValue::Count(800),
            AggregateValue::Count(nulls),
            AggregateValue::Float(sum),
            AggregateValue::Float(max),
        ]
    };
    let run = || {
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let mut got = None;
        let s = measured(|| got = Some(r.aggregate(&ranges, None, &reqs).unwrap()));
        (got.unwrap(), s.counter(Counter::ReaderAggregateTilesFromStats), s.counter(Counter::ReaderAggregateCells))
    };
    // Tiles of 100 cells: [200, 899] are 7 whole tiles inside; 150..199 and 900..949 are read.
    assert_eq!(run(), (expect(&vs, &valid), 7, 100));
    // An update of x = 500 overlaps tile [500, 599] (and only it): 6 tiles from summaries.
    write(&[500], &[-1.0], &[1]);
    let (mut vs2, valid2) = (vs.clone(), valid.clone());
    vs2[500] = -1.0;
    let mut valid2 = valid2;
    valid2[500] = 1;
    assert_eq!(run(), (expect(&vs2, &valid2), 6, 200));
    // A fragment of two tiles, [0, 99] and [900, 999]: its non-empty domain meets every tile,
    // its tiles' MBRs only the first and last: still 6 tiles from summaries.
    let xs: Vec<i64> = (0..100).chain(900..1000).collect();
    let new: Vec<f64> = xs.iter().map(|&x| x as f64 + 0.5).collect();
    write(&xs, &new, &[1; 200]);
    for (&x, &v) in xs.iter().zip(&new) {
        vs2[x as usize] = v;
        valid2[x as usize] = 1;
    }
    assert_eq!(run(), (expect(&vs2, &valid2), 6, 200));
}

/// A dense consolidation reads every tile of its inputs once: it uses the tiles the cache holds
/// but puts none in it (the cache's inserts and evictions do not move), and the consolidated
/// array reads as the fragments did.
#[test]
fn dense_consolidation_leaves_the_tile_cache_alone() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let (dir, ctx, schema) = setup(100, vec![Filter::Zstd { level: 1 }], 100 << 20);
    let uri = dir.path().join("a");
    let update = Subarray::from_ranges(&[(1, 300), (1, N)]);
    let sevens = vec![7i32; (300 * N) as usize];
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&update, Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&sevens))]).unwrap();
    // Some of the tiles consolidation reads are cached, not all.
    read_rows(&ctx, &dir, 601, 900);
    let before = ctx.tile_cache().stats();
    consolidate(&ctx, &uri, &Selection::All).unwrap().unwrap();
    let after = ctx.tile_cache().stats();
    assert_eq!(after.inserts, before.inserts, "consolidation put tiles in the cache");
    assert_eq!(after.evictions, before.evictions, "consolidation pushed tiles out of the cache");
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 1);
    let res = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
    let v: &[i32] = bytemuck::cast_slice(&res.attrs[0].data);
    let want = |k: i128| if k < 300 * N { 7 } else { (k / N + k % N) as i32 };
    assert!((0..N * N).all(|k| v[k as usize] == want(k)), "the consolidated array differs");
}

/// A packed fragment stores all its files in one: reading both coordinates and three attributes
/// of its one tile is one read request, not one per file (5).
#[test]
fn a_packed_fragments_tiles_are_fetched_in_one_read() {
    let _g = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let mut c = Config::new();
    c.set("sm.tile_cache_size", "0").unwrap();
    let ctx = Context::new(c).unwrap();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, 999), 1000))
        .dim(Dimension::new("y", Datatype::Int64, (0, 999), 1000))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(Attribute::new("b", Datatype::Float64))
        .attr(Attribute::new("c", Datatype::UInt8))
        .capacity(10_000)
        .build()
        .unwrap();
    let uri = dir.path().join("a");
    Array::create(&ctx, &uri, &schema).unwrap();
    let n = 500usize;
    let xs: Vec<i64> = (0..n as i64).map(|i| i * 7 % 1000).collect();
    let ys: Vec<i64> = (0..n as i64).map(|i| i * 13 % 1000).collect();
    let a: Vec<i32> = (0..n as i32).collect();
    let b: Vec<f64> = (0..n).map(|i| i as f64 / 2.0).collect();
    let cv: Vec<u8> = (0..n).map(|i| i as u8).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write_sparse(
        &[
            CoordInput { name: "x", data: bytemuck::cast_slice(&xs) },
            CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
        ],
        &[
            AttrInput::fixed("a", bytemuck::cast_slice(&a)),
            AttrInput::fixed("b", bytemuck::cast_slice(&b)),
            AttrInput::fixed("c", &cv),
        ],
    )
    .unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert!(r.fragments()[0].packed);
    let s = measured(|| {
        let res =
            r.sparse_query(&[Vec::new(), Vec::new()], &["a", "b", "c"], Layout::Unordered).unwrap().read_all().unwrap();
        assert_eq!(res.cells, n as u64);
    });
    assert_eq!(counter(&s, Counter::VfsReadNumRequests), 1);
}
