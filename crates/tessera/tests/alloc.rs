//! Allocation bounds (issue 12, item 10): a counting global allocator measures the peak bytes a
//! read, write or open allocates, so decompression bombs, huge tiles and huge schemas are shown
//! to be refused (or bounded by the configured limits) before memory is spent on them. A binary
//! of its own: the allocator is process-wide, and the tests run one at a time under a lock.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use tessera::*;

#[path = "tamper.rs"]
mod tamper;
use tamper::replace_tile;

/// The system allocator, counting the bytes currently allocated and their peak.
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call forwards to `System` with the caller's arguments unchanged; the counters are
// atomics updated on the side.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: AllocLayout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
        // SAFETY: `ptr` was allocated by `System` with `layout` (all allocations go through it).
        unsafe { System.dealloc(ptr, layout) };
        CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: AllocLayout, new_size: usize) -> *mut u8 {
        // SAFETY: as for `dealloc`; `new_size` comes from the caller.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            CURRENT.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

static LOCK: Mutex<()> = Mutex::new(());

const MIB: usize = 1 << 20;

/// Runs `f` and returns its result with the peak of bytes allocated above what was allocated
/// when it started.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = CURRENT.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// The error of `r` (without printing a large `Ok` value when there is none).
fn err<T>(r: Result<T>) -> Error {
    match r {
        Ok(_) => panic!("expected an error, got a result"),
        Err(e) => e,
    }
}

fn ctx_with(settings: &[(&str, &str)]) -> Context {
    let mut c = Config::new();
    c.set("sm.compute_concurrency", "2").unwrap();
    c.set("sm.io_concurrency", "2").unwrap();
    for (k, v) in settings {
        c.set(k, v).unwrap();
    }
    Context::new(c).unwrap()
}

/// A dense 1-D array of 4 cells in one tile with a variable-length `utf8` attribute `s` filtered
/// by `filter`, holding "aa", "bb", "cc", "dd".
fn var_array(uri: &Path, filter: Filter) -> FragmentName {
    let ctx = ctx_with(&[]);
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    s.filters = FilterPipeline::new(vec![filter]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (1, 4), 4))
        .attr(s)
        .build()
        .unwrap();
    Array::create(&ctx, uri, &schema).unwrap();
    let w = Array::open(&ctx, uri, Mode::Write).unwrap();
    let offsets = [0u64, 2, 4, 6];
    let input = AttrInput { name: "s", data: b"aabbccdd", offsets: Some(&offsets), validity: None };
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[input]).unwrap()
}

fn read_one_cell(ctx: &Context, uri: &Path) -> Result<ReadResult> {
    let r = Array::open(ctx, uri, Mode::Read)?;
    r.read(&Subarray::from_ranges(&[(1, 1)]), &["s"], Layout::RowMajor)
}

/// A zstd frame of `len` zero bytes made of RLE blocks (4 bytes per 128 KiB): a 1.1 GB tile in
/// 34 KB, as a hostile writer would make it.
fn zstd_rle_bomb(len: u64) -> Vec<u8> {
    let mut out = 0xFD2F_B528u32.to_le_bytes().to_vec();
    out.push(0xE0); // frame header descriptor: 8-byte content size, single segment
    out.extend_from_slice(&len.to_le_bytes());
    let mut left = len;
    while left > 0 {
        let n = left.min(128 * 1024);
        left -= n;
        let header = u32::from(left == 0) | (1 << 1) | ((n as u32) << 3); // last?, RLE block, size
        out.extend_from_slice(&header.to_le_bytes()[..3]);
        out.push(0);
    }
    out
}

/// One RLE run packet of `len` (< 2^31) zero bytes.
fn rle_bomb(len: u64) -> Vec<u8> {
    let mut out = len.to_le_bytes().to_vec();
    out.extend_from_slice(&(((len as u32) << 1) | 1).to_le_bytes());
    out.push(0);
    out
}

/// A one-cell read of a variable-length tile that is a decompression bomb allocates almost
/// nothing: the tile's recorded size is checked against `sm.limits.tile_bytes` before a byte is
/// read, and each filter stops at the recorded size. The 1.1 GB bombs of the issue are refused
/// under the default limits; bombs made by the filters themselves are refused under a low limit,
/// and those whose recorded size lies are corrupt.
#[test]
fn var_tile_bombs_are_refused_before_decoding() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let big = 1_100_000_000u64;
    for (k, (filter, bomb)) in
        [(Filter::Zstd { level: 3 }, zstd_rle_bomb(big)), (Filter::Rle, rle_bomb(big))].into_iter().enumerate()
    {
        let uri = dir.path().join(format!("issue{k}"));
        let name = var_array(&uri, filter);
        let mut stored = big.to_le_bytes().to_vec();
        stored.extend_from_slice(if filter == Filter::Rle { &bomb[8..] } else { &bomb });
        replace_tile(&uri, &name, "a0.data", 0, &stored, big);
        let ctx = ctx_with(&[]);
        let (got, peak) = peak_of(|| read_one_cell(&ctx, &uri));
        let msg = err(got).to_string();
        // Larger than both the tile limit and the memory budget (1 GiB each by default).
        let named = msg.contains("sm.limits.tile_bytes") && msg.contains("a0.data") || msg.contains("sm.memory_budget");
        assert!(named && msg.contains("tile 0") && msg.contains("1100000"), "{msg}");
        assert!(
            peak < 2 * MIB,
            "{filter:?}: a one-cell read of a {} KB bomb allocated {peak} bytes",
            stored.len() >> 10
        );
    }
    let len = 64 * MIB;
    for (k, filter) in
        [Filter::Zstd { level: 1 }, Filter::Gzip { level: 1 }, Filter::Lz4, Filter::Rle].into_iter().enumerate()
    {
        let uri = dir.path().join(format!("made{k}"));
        let name = var_array(&uri, filter);
        let stored = FilterPipeline::new(vec![filter]).encode(vec![0u8; len], 1).unwrap();
        replace_tile(&uri, &name, "a0.data", 0, &stored, len as u64);
        let ctx = ctx_with(&[("sm.limits.tile_bytes", "1048576")]);
        let (got, peak) = peak_of(|| read_one_cell(&ctx, &uri));
        let msg = err(got).to_string();
        assert!(msg.contains("sm.limits.tile_bytes") && msg.contains("tile 0"), "{filter:?}: {msg}");
        assert!(
            peak < 2 * MIB,
            "{filter:?}: a one-cell read of a {} KB bomb allocated {peak} bytes",
            stored.len() >> 10
        );
        // The same bytes recorded as an 8-byte tile: the filter stops at 8 bytes.
        replace_tile(&uri, &name, "a0.data", 0, &stored, 8);
        let (got, peak) = peak_of(|| read_one_cell(&ctx_with(&[]), &uri));
        let e = err(got);
        assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("a0.data"), "{filter:?}: {e}");
        assert!(peak < 2 * MIB, "{filter:?}: {peak} bytes");
    }
}

/// A schema with 2^31-cell tiles: a one-cell write is refused before a tile is allocated (a tile
/// is built whole even for one cell), and a one-cell read of an empty array allocates nothing
/// large. A tile larger than `sm.limits.tile_bytes` is refused when read, before decoding.
#[test]
fn huge_tiles_are_refused_before_allocating() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("huge");
    let ctx = ctx_with(&[]);
    let mut a = Attribute::new("a", Datatype::UInt8);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    let cells: u64 = 1 << 31;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, cells as i128 - 1), cells))
        .attr(a)
        .build()
        .unwrap();
    // Creating it under the default limits is refused, naming the key, and creates nothing.
    let msg = Array::create(&ctx, &uri, &schema).unwrap_err().to_string();
    assert!(msg.contains("sm.limits.tile_bytes") && msg.contains("attribute a"), "{msg}");
    assert!(!uri.exists());
    // Created under a larger limit (as another process may have done), then used under the default.
    Array::create(&ctx_with(&[("sm.limits.tile_bytes", "4294967296")]), &uri, &schema).unwrap();
    let one = Subarray::from_ranges(&[(7, 7)]);
    let (got, peak) = peak_of(|| {
        let w = Array::open(&ctx, &uri, Mode::Write)?;
        w.write(&one, Layout::RowMajor, &[AttrInput::fixed("a", &[5])])
    });
    let msg = err(got).to_string();
    assert!(msg.contains("sm.limits.tile_bytes") && msg.contains("attribute a"), "{msg}");
    assert!(peak < 2 * MIB, "a one-cell write allocated {peak} bytes");
    assert!(Array::open(&ctx, &uri, Mode::Read).unwrap().fragments().is_empty(), "the refused write wrote nothing");
    let (got, peak) = peak_of(|| Array::open(&ctx, &uri, Mode::Read)?.read(&one, &["a"], Layout::RowMajor));
    assert_eq!(got.unwrap().attrs[0].data, [u8::MAX]);
    assert!(peak < 2 * MIB, "a one-cell read allocated {peak} bytes");

    // A 16 MiB tile written under the default limits, read under a 1 MiB limit: filtered whole
    // (`sm.tile_chunk_size` 0), a one-cell read must decode the whole tile and is refused; in
    // chunks (the default), it decodes one 64 KiB chunk and is not.
    for (name, chunk) in [("whole", "0"), ("chunked", "65536")] {
        let uri = dir.path().join(name);
        let mut a = Attribute::new("a", Datatype::UInt8);
        a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
        let cells: u64 = 1 << 24;
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("x", Datatype::Int64, (0, cells as i128 - 1), cells))
            .attr(a)
            .build()
            .unwrap();
        let writer = ctx_with(&[("sm.tile_chunk_size", chunk)]);
        Array::create(&writer, &uri, &schema).unwrap();
        Array::open(&writer, &uri, Mode::Write)
            .unwrap()
            .write(&one, Layout::RowMajor, &[AttrInput::fixed("a", &[5])])
            .unwrap();
        for (key, value) in [("sm.limits.tile_bytes", "1048576"), ("sm.memory_budget", "1048576")] {
            let small = ctx_with(&[(key, value)]);
            let (got, peak) = peak_of(|| Array::open(&small, &uri, Mode::Read)?.read(&one, &["a"], Layout::RowMajor));
            if chunk == "0" {
                let msg = err(got).to_string();
                assert!(msg.contains(key) && msg.contains("tile 0") && msg.contains("16777216"), "{msg}");
            } else {
                assert_eq!(got.unwrap().attrs[0].data, [5], "{key}");
            }
            assert!(peak < 2 * MIB, "{name}, {key}: a one-cell read of a 16 MiB tile allocated {peak} bytes");
        }
        // Within the limits, a whole tile is decoded; a chunked one only in part.
        let (got, peak) = peak_of(|| Array::open(&ctx, &uri, Mode::Read)?.read(&one, &["a"], Layout::RowMajor));
        assert_eq!(got.unwrap().attrs[0].data, [5]);
        if chunk == "0" {
            assert!(peak > 8 * MIB && peak < 40 * MIB, "within the limits the tile is decoded: {peak} bytes");
        } else {
            assert!(peak < 2 * MIB, "one chunk of the tile is decoded: {peak} bytes");
        }
    }
}

/// A dense 1-D `uint8` array of `len` cells (value `i % 251`) at `uri`, in zstd tiles of `tile`
/// cells, written with `sm.tile_chunk_size` = `chunk`; returns the values.
fn zstd_byte_array(uri: &Path, len: u64, tile: u64, chunk: &str) -> Vec<u8> {
    let mut a = Attribute::new("a", Datatype::UInt8);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, len as i128 - 1), tile))
        .attr(a)
        .build()
        .unwrap();
    let writer = ctx_with(&[("sm.tile_chunk_size", chunk)]);
    Array::create(&writer, uri, &schema).unwrap();
    let values: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
    Array::open(&writer, uri, Mode::Write)
        .unwrap()
        .write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", &values)])
        .unwrap();
    values
}

/// Points in each of 24 compressed 4 MiB tiles (96 MiB unfiltered): the read decodes and copies
/// its tiles in batches of `sm.read.batch_size` (here two tiles, one per compute thread), not all
/// at once, though the memory budget (1 GiB) would admit them all (holding hundreds of decoded
/// tiles made a 10K-point read spend more time in page faults than in decoding). A batch size of
/// 1 GiB holds every tile.
#[test]
fn a_read_of_many_tiles_holds_one_batch_of_them() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("tiles");
    let (tiles, tile) = (24u64, 4u64 << 20);
    let values = zstd_byte_array(&uri, tiles * tile, tile, "0");
    let points: Vec<i64> = (0..tiles).map(|t| (t * tile + t * 7) as i64).collect();
    let coords = [CoordInput { name: "x", data: bytemuck::cast_slice(&points) }];
    let want: Vec<u8> = points.iter().map(|&p| values[p as usize]).collect();
    drop(values);
    for (batch, lo, hi) in [("8388608", 0, 16 * MIB), ("1073741824", 90 * MIB, 200 * MIB)] {
        let ctx = ctx_with(&[("sm.tile_cache_size", "0"), ("sm.read.batch_size", batch)]);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let (got, peak) = peak_of(|| r.read_points(&coords, &["a"]));
        assert_eq!(got.unwrap().attrs[0].data, want, "batch size {batch}");
        assert!((lo..hi).contains(&peak), "batch size {batch}: the read allocated {peak} bytes");
    }
}

/// Points in every 64 KiB chunk of two compressed 4 MiB tiles, read under a 1 MiB memory budget:
/// the chunks are decoded straight into the result, so the read holds only the stored chunks and
/// is neither refused (as a read of whole tiles would be) nor allowed to allocate a tile.
#[test]
fn a_point_read_of_every_chunk_of_a_tile_holds_only_its_stored_chunks() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("chunks");
    let (tiles, tile, chunk) = (2u64, 4u64 << 20, 64u64 << 10);
    let values = zstd_byte_array(&uri, tiles * tile, tile, &chunk.to_string());
    // One point per chunk, in reverse order.
    let points: Vec<i64> = (0..tiles * tile / chunk).rev().map(|k| (k * chunk + k % 13) as i64).collect();
    let coords = [CoordInput { name: "x", data: bytemuck::cast_slice(&points) }];
    let want: Vec<u8> = points.iter().map(|&p| values[p as usize]).collect();
    drop(values);
    let ctx = ctx_with(&[("sm.tile_cache_size", "0"), ("sm.memory_budget", "1048576")]);
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let (got, peak) = peak_of(|| r.read_points(&coords, &["a"]));
    assert_eq!(got.unwrap().attrs[0].data, want);
    assert!(peak < 2 * MIB, "a point in every chunk of two 4 MiB tiles allocated {peak} bytes");

    // Chunks larger than the decoder's per-thread buffers (fixed at 2 MiB, of one 8 MiB tile)
    // need buffers of their own, which the budget counts: refused under 1 MiB before anything
    // is decoded, read under 8 MiB.
    let uri = dir.path().join("large_chunks");
    let big = 8u64 << 20;
    let values = zstd_byte_array(&uri, big, big, "2097152");
    let points: Vec<i64> = (0..4).map(|k| (k * (2 << 20) + 1000 * k + 3) as i64).collect();
    let coords = [CoordInput { name: "x", data: bytemuck::cast_slice(&points) }];
    let want: Vec<u8> = points.iter().map(|&p| values[p as usize]).collect();
    drop(values);
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.fragments()[0].chunks.of(0, 0).map(|c| c.log2), Some(21), "2 MiB chunks");
    let (got, peak) = peak_of(|| r.read_points(&coords, &["a"]));
    let msg = err(got).to_string();
    assert!(msg.contains("sm.memory_budget") && msg.contains("tile 0"), "{msg}");
    assert!(peak < MIB, "a refused read allocated {peak} bytes");
    let roomy = ctx_with(&[("sm.tile_cache_size", "0"), ("sm.memory_budget", &(8 * MIB).to_string())]);
    let r = Array::open(&roomy, &uri, Mode::Read).unwrap();
    let (got, peak) = peak_of(|| r.read_points(&coords, &["a"]));
    assert_eq!(got.unwrap().attrs[0].data, want);
    assert!(peak < 8 * MIB, "two 2 MiB chunks in flight at most: {peak} bytes");
}

/// One column of a 2-D int32 array in two compressed 4 MiB tiles of 1024 x 1024 cells with
/// 64 KiB chunks, read under a 1 MiB memory budget: every chunk holds cells of the column, and
/// each is decoded into a per-thread buffer the column's cells are copied from, so the read
/// neither holds a decoded tile (a tile decoded whole needs 4 MiB, past the budget) nor is
/// refused.
#[test]
fn a_column_of_chunked_tiles_holds_only_its_stored_chunks() {
    let _g = LOCK.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("column");
    let (rows, cols, tile) = (2048i64, 1024i64, 1024u64);
    let mut a = Attribute::new("a", Datatype::Int32);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (0, i128::from(rows) - 1), tile))
        .dim(Dimension::new("c", Datatype::Int64, (0, i128::from(cols) - 1), tile))
        .attr(a)
        .build()
        .unwrap();
    let writer = ctx_with(&[("sm.tile_chunk_size", "65536")]);
    Array::create(&writer, &uri, &schema).unwrap();
    let values: Vec<i32> = (0..rows * cols).map(|i| ((i / cols) * 3 + (i % cols) % 97) as i32).collect();
    Array::open(&writer, &uri, Mode::Write)
        .unwrap()
        .write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&values))])
        .unwrap();
    let col = 517i64;
    let want: Vec<i32> = (0..rows).map(|r| values[(r * cols + col) as usize]).collect();
    drop(values);
    let ctx = ctx_with(&[("sm.tile_cache_size", "0"), ("sm.memory_budget", "1048576")]);
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.fragments()[0].chunks.of(0, 0).map(|c| c.list.len()), Some(64), "64 KiB chunks");
    let column = Subarray::from_ranges(&[(0, i128::from(rows) - 1), (i128::from(col), i128::from(col))]);
    let (got, peak) = peak_of(|| r.read(&column, &["a"], Layout::RowMajor));
    assert_eq!(got.unwrap().attrs[0].data, bytemuck::cast_slice::<i32, u8>(&want));
    assert!(peak < 2 * MIB, "a column of two 4 MiB tiles allocated {peak} bytes");
}

/// `payload` sealed as a schema file (docs/format.md §2).
fn seal_schema(payload: Vec<u8>) -> Vec<u8> {
    tamper::seal(payload, FORMAT_VERSION, b"TSRASCHM")
}

/// A schema of `n` attributes.
fn schema_json(n: usize) -> String {
    let attrs: Vec<String> = (0..n).map(|i| format!(r#"{{"name":"a{i}","type":"int8"}}"#)).collect();
    format!(
        r#"{{"array_type":"dense","dims":[{{"name":"d","type":"int64","domain":[0,9],"tile":10}}],"attrs":[{}],"cell_order":"row-major","tile_order":"row-major"}}"#,
        attrs.join(",")
    )
}

/// A schema file of 10^6 attributes (30 MB) is refused by its size before it is read, and one
/// within the size limit but with more attributes than `sm.limits.attributes` is refused too.
#[test]
fn huge_schemas_are_refused() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = ctx_with(&[]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("d", Datatype::Int64, (0, 9), 10))
        .attr(Attribute::new("a0", Datatype::Int8))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let file = std::fs::read_dir(uri.join(SCHEMA_DIR)).unwrap().next().unwrap().unwrap().path();
    std::fs::write(&file, seal_schema(schema_json(1_000_000).into_bytes())).unwrap();
    let (got, peak) = peak_of(|| Array::open(&ctx, &uri, Mode::Read));
    let msg = err(got).to_string();
    assert!(msg.contains("sm.limits.schema_bytes") && msg.contains("schema file"), "{msg}");
    assert!(peak < 2 * MIB, "opening a 30 MB schema allocated {peak} bytes");
    std::fs::write(&file, seal_schema(schema_json(11).into_bytes())).unwrap();
    let e = err(Array::open(&ctx_with(&[("sm.limits.attributes", "10")]), &uri, Mode::Read));
    assert!(e.to_string().contains("sm.limits.attributes") && e.to_string().contains("needs 11"), "{e}");
    assert_eq!(Array::open(&ctx, &uri, Mode::Read).unwrap().schema().attrs.len(), 11);
}

/// Aggregating a 32 MiB dense array (and a sparse update over it, with a condition) within a
/// 4 MiB `sm.memory_budget` streams it in batches: the peak stays far below the result a read
/// would allocate, and equals the sums computed here.
#[test]
fn aggregates_stream_within_the_memory_budget() {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("big");
    let ctx = ctx_with(&[("sm.memory_budget", "4194304"), ("sm.tile_cache_size", "0")]);
    const N: i128 = 2048;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (0, N - 1), 256))
        .dim(Dimension::new("c", Datatype::Int64, (0, N - 1), 256))
        .attr(Attribute::new("a", Datatype::Int64))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    for band in 0..N / 256 {
        let vals: Vec<i64> = (0..256 * N as i64).map(|k| band as i64 * 256 * N as i64 + k).collect();
        let sub = Subarray::from_ranges(&[(band * 256, band * 256 + 255), (0, N - 1)]);
        w.write(&sub, Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).unwrap();
    }
    let cells = (N * N) as u64;
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let reqs = [AggregateRequest::new("a", AggregateOp::Sum), AggregateRequest::new("a", AggregateOp::Count)];
    let (got, peak) = peak_of(|| r.aggregate(&[vec![], vec![]], None, &reqs).unwrap());
    let total = i128::from(cells) * i128::from(cells - 1) / 2;
    assert_eq!(got, vec![AggregateValue::Int(total), AggregateValue::Count(cells)]);
    assert!(peak < 16 * MIB, "aggregating a 32 MiB array allocated {peak} bytes");
    let cond = Condition::attr("a").lt(1000i64);
    let (got, peak) = peak_of(|| r.aggregate(&[vec![], vec![]], Some(&cond), &reqs).unwrap());
    assert_eq!(got, vec![AggregateValue::Int(999 * 1000 / 2), AggregateValue::Count(1000)]);
    assert!(peak < 16 * MIB, "aggregating a 32 MiB array with a condition allocated {peak} bytes");
}

/// A sparse consolidation of 1M cells (24 MB of coordinates and values in 4 interleaved
/// fragments) with a 2 MiB buffer holds a bounded amount, not the array: the global order is
/// planned one band at a time (`consolidate/bands.rs`). Planned whole, it held about a hundred
/// bytes per cell of the array (keys, merge order, cell references) whatever the buffer.
#[test]
fn a_sparse_consolidation_holds_its_buffer_not_the_array() {
    consolidate_1m_cells(CellOrder::RowMajor, 1000);
}

/// The same under curve tile orders: their bands are cubes of tiles, each a range of keys
/// (planned whole before, whatever the buffer).
#[test]
fn a_sparse_consolidation_under_a_curve_tile_order_holds_its_buffer() {
    consolidate_1m_cells(CellOrder::Hilbert, 100);
    consolidate_1m_cells(CellOrder::Z, 100);
}

/// Consolidates 1M cells in 4 fragments (tile order `order`, `y` tiles of `y_tile`) with a 2 MiB
/// buffer and checks the peak of allocated memory and the result.
fn consolidate_1m_cells(order: CellOrder, y_tile: u64) {
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("sparse");
    let ctx = ctx_with(&[
        ("sm.tile_cache_size", "0"),
        ("sm.consolidation.buffer_size", "2097152"),
        ("vfs.coalesce_gap", "0"),
    ]);
    const N: i64 = 1_000_000;
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, (N - 1).into()), 10_000))
        .dim(Dimension::new("y", Datatype::Int64, (0, 999), y_tile))
        .attr(Attribute::new("a", Datatype::Int64))
        .tile_order(order)
        .capacity(10_000)
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    for f in 0..4 {
        let x: Vec<i64> = (0..N / 4).map(|k| 4 * k + f).collect();
        let y: Vec<i64> = x.iter().map(|v| v * 7919 % 1000).collect();
        let coords = [
            CoordInput { name: "x", data: bytemuck::cast_slice(&x) },
            CoordInput { name: "y", data: bytemuck::cast_slice(&y) },
        ];
        w.write_sparse(&coords, &[AttrInput::fixed("a", bytemuck::cast_slice(&x))]).unwrap();
    }
    drop(w);
    let (merged, peak) = peak_of(|| consolidate(&ctx, &uri, &Selection::All).unwrap());
    assert_eq!(merged.map(|m| m.cell_count), Some(N as u64));
    // About 12 MB whatever the buffer from 512 KiB to 32 MiB (the writer's buffers, 1 MiB per
    // file, among them); 104 MB when the whole array was planned at once.
    assert!(peak < 20 * MIB, "{order:?}: consolidating 24 MB with a 2 MiB buffer allocated {peak} bytes");
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 1);
    let got = r.sparse_query(&[vec![], vec![]], &["a"], Layout::Global).unwrap().read_all().unwrap();
    let mut a: Vec<i64> = bytemuck::cast_slice(&got.attrs[2].data).to_vec();
    if order != CellOrder::RowMajor {
        // The writer refused cells out of the global order; each cell must be there once.
        a.sort_unstable();
    }
    assert_eq!(a, (0..N).collect::<Vec<_>>(), "{order:?}: every cell once, in global order");
}
