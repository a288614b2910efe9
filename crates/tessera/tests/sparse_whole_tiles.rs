//! Sparse reads that take tiles whole (`sm.read.sparse_whole_tiles`): every read gives exactly
//! what the general path gives (the same cells, values and order, whole or in batches), with a
//! second fragment overlapping the first, deletions, duplicates allowed, the update index and a
//! query box that cuts tiles; and tiles read whole go straight into the result, not into the
//! tile cache.

use std::sync::Arc;

use proptest::prelude::*;
use tessera::*;

use crate::common::*;

/// Two contexts on one in-memory store: sparse reads take tiles whole in the first, never in
/// the second; both with or without the update index (`index`).
fn contexts(index: bool) -> (Context, Context) {
    let storage = Arc::new(MemoryStorage::new());
    let make = |whole: &str| {
        let mut c = Config::new();
        c.set("sm.compute_concurrency", "2").unwrap();
        c.set("sm.read.sparse_whole_tiles", whole).unwrap();
        if index {
            c.set("sm.read.update_index_min_fragments", "1").unwrap();
            c.set("sm.read.update_index_after_reads", "0").unwrap();
        } else {
            c.set("sm.read.update_index_size", "0").unwrap();
        }
        Context::with_storage(c, storage.clone()).unwrap()
    };
    (make("true"), make("false"))
}

/// x and y in [0, 99] (tiles of 10 x 10); a plain int64, a nullable int32 and a
/// variable-length attribute, filtered as the bench's are (byte shuffle + zstd) or not.
fn schema(dups: bool, capacity: u64, filtered: bool) -> ArraySchema {
    let filters = if filtered {
        FilterPipeline::new(vec![Filter::ByteShuffle, Filter::Zstd { level: 1 }])
    } else {
        FilterPipeline::new(vec![])
    };
    let mut a = Attribute::new("a", Datatype::Int64);
    a.filters = filters.clone();
    let mut n = Attribute { nullable: true, ..Attribute::new("n", Datatype::Int32) };
    n.filters = filters.clone();
    let mut v = Attribute::new("v", Datatype::UInt8);
    v.cell_val_num = CellValNum::Var;
    v.filters = filters;
    ArraySchema::builder(ArrayType::Sparse)
        .dim(dim("x", 0, 99, 10))
        .dim(dim("y", 0, 99, 10))
        .capacity(capacity)
        .allows_duplicates(dups)
        .attr(a)
        .attr(n)
        .attr(v)
        .build()
        .unwrap()
}

/// Writes the points `pts` as one fragment, values numbered from `first`.
fn write(ctx: &Context, uri: &str, pts: &[(i64, i64)], first: i64) {
    let (xs, ys): (Vec<i64>, Vec<i64>) = pts.iter().copied().unzip();
    let a: Vec<i64> = (0..pts.len() as i64).map(|k| first + k).collect();
    let n: Vec<i32> = a.iter().map(|&v| v as i32).collect();
    let valid: Vec<u8> = a.iter().map(|v| u8::from(v % 5 != 0)).collect();
    let (mut v, mut offs) = (Vec::new(), Vec::new());
    for k in &a {
        offs.push(v.len() as u64);
        v.extend((0..k % 3).map(|j| (k + j) as u8));
    }
    let arr = Array::open(ctx, uri, Mode::Write).unwrap();
    let mut w = arr.sparse_writer(Layout::Unordered).unwrap();
    w.submit(
        &[
            CoordInput { name: "x", data: bytemuck::cast_slice(&xs) },
            CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
        ],
        &[
            AttrInput::fixed("a", bytemuck::cast_slice(&a)),
            AttrInput { name: "n", data: bytemuck::cast_slice(&n), offsets: None, validity: Some(&valid) },
            AttrInput { name: "v", data: &v, offsets: Some(&offs), validity: None },
        ],
    )
    .unwrap();
    w.finish().unwrap();
}

#[derive(Debug, Clone)]
struct Case {
    dups: bool,
    capacity: u64,
    filtered: bool,
    base: Vec<(i64, i64)>,
    update: Vec<(i64, i64)>,
    delete: Option<(i64, i64, i64, i64)>,
    consolidate: bool,
    index: bool,
    /// Per dimension, the read's ranges (none: the whole dimension).
    ranges: [Vec<(i64, i64)>; 2],
    layout: Layout,
    attrs: usize,
    batch: Option<u64>,
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let pt = (0i64..100, 0i64..100);
    let range = (0i64..100, 0i64..100).prop_map(|(a, b)| (a.min(b), a.max(b)));
    let ranges = prop::collection::vec(range, 0..3);
    let layout = prop_oneof![Just(Layout::Unordered), Just(Layout::Global), Just(Layout::RowMajor)];
    (
        (any::<bool>(), 2u64..40, any::<bool>()),
        prop::collection::vec(pt.clone(), 1..400),
        prop::collection::vec(pt, 0..30),
        prop::option::weighted(0.3, (0i64..100, 0i64..100, 0i64..20, 0i64..20)),
        (any::<bool>(), any::<bool>()),
        (ranges.clone(), ranges),
        (layout, 0usize..4, prop::option::of(16u64..4000)),
    )
        .prop_map(
            |(
                (dups, capacity, filtered),
                base,
                update,
                delete,
                (consolidate, index),
                ranges,
                (layout, attrs, batch),
            )| {
                Case {
                    dups,
                    capacity,
                    filtered,
                    base,
                    update,
                    delete,
                    consolidate,
                    index,
                    ranges: [ranges.0, ranges.1],
                    layout,
                    attrs,
                    batch,
                }
            },
        )
}

/// The read of `c` in `ctx`: whole, or every batch in turn.
fn read(ctx: &Context, c: &Case) -> Vec<ReadResult> {
    let arr = Array::open(ctx, "/s", Mode::Read).unwrap();
    let q: Vec<Vec<DimRange>> =
        c.ranges.iter().map(|rs| rs.iter().map(|&(a, b)| DimRange::Int(a.into(), b.into())).collect()).collect();
    // All attributes, one fixed-size one, the variable-length one, or the nullable one.
    let attrs: &[&str] = [&[][..], &["a"], &["v", "a"], &["n"]][c.attrs];
    let mut query = arr.sparse_query(&q, attrs, c.layout).unwrap();
    match c.batch {
        None => vec![query.read_all().unwrap()],
        Some(bytes) => std::iter::from_fn(|| query.next_batch(bytes).unwrap()).collect(),
    }
}

fn run(c: &Case) -> Result<(), TestCaseError> {
    let (fast, general) = contexts(c.index);
    Array::create(&fast, "/s", &schema(c.dups, c.capacity, c.filtered)).unwrap();
    let dedup = |pts: &[(i64, i64)]| {
        let mut seen = std::collections::HashSet::new();
        pts.iter().copied().filter(|p| c.dups || seen.insert(*p)).collect::<Vec<_>>()
    };
    write(&fast, "/s", &dedup(&c.base), 0);
    if !c.update.is_empty() {
        write(&fast, "/s", &dedup(&c.update), 100_000);
    }
    if let Some((x, y, w, h)) = c.delete {
        let arr = Array::open(&fast, "/s", Mode::Write).unwrap();
        let r = |lo: i64, len: i64| vec![DimRange::Int(lo.into(), (lo + len).min(99).into())];
        arr.delete_ranges(&[r(x, w), r(y, h)]).unwrap();
    }
    if c.consolidate {
        consolidate(&fast, "/s", &Selection::All).unwrap();
    }
    let (got, want) = (read(&fast, c), read(&general, c));
    let cells = |r: &[ReadResult]| r.iter().map(|b| b.cells).sum::<u64>();
    prop_assert_eq!(cells(&got), cells(&want));
    prop_assert_eq!(got, want);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn whole_tiles_read_as_the_general_path(c in case_strategy()) {
        run(&c)?;
    }
}

/// One fragment read whole: its coordinate and fixed-size value tiles go straight into the
/// result and leave the tile cache empty; the general path gives the same result and caches
/// its tiles.
/// A read of the whole array, unordered, of attributes `attrs` (as [`read`] numbers them), in one
/// batch, on capacity-50 filtered tiles of base points `base`.
fn everything(dups: bool, base: Vec<(i64, i64)>, attrs: usize) -> Case {
    Case {
        dups,
        capacity: 50,
        filtered: true,
        base,
        update: Vec::new(),
        delete: None,
        consolidate: false,
        index: false,
        ranges: [Vec::new(), Vec::new()],
        layout: Layout::Unordered,
        attrs,
        batch: None,
    }
}

#[test]
fn whole_tiles_skip_the_tile_cache() {
    let (fast, general) = contexts(false);
    Array::create(&fast, "/s", &schema(false, 50, true)).unwrap();
    let pts: Vec<(i64, i64)> = (0..2000).map(|k| ((k * 37) % 100, (k * 11 + k / 100) % 100)).collect();
    let mut seen = std::collections::HashSet::new();
    let pts: Vec<(i64, i64)> = pts.into_iter().filter(|p| seen.insert(*p)).collect();
    write(&fast, "/s", &pts, 0);
    let c = everything(false, pts.clone(), 1);
    let got = read(&fast, &c);
    assert_eq!(got[0].cells as usize, pts.len());
    assert_eq!(fast.tile_cache().size_bytes(), 0, "whole tiles were cached");
    assert_eq!(got, read(&general, &c));
    assert!(general.tile_cache().size_bytes() > 0);
    // Every point's value comes back with it.
    let col = |k: usize| -> Vec<i64> {
        got[0].attrs[k].data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
    };
    let (xs, ys, a) = (col(0), col(1), col(2));
    for ((x, y), a) in xs.iter().zip(&ys).zip(&a) {
        assert_eq!(pts[*a as usize], (*x, *y));
    }
}

/// Consolidation reads every tile of its inputs once: it takes none of the tile cache's room
/// (the tiles other reads cached stay, no tile of the fragments it replaces is kept), whether
/// its reads take tiles whole or not, and its output is what the inputs held.
#[test]
fn consolidation_leaves_the_tile_cache_alone() {
    for whole in [true, false] {
        let (fast, general) = contexts(false);
        let ctx = if whole { fast } else { general };
        Array::create(&ctx, "/s", &schema(false, 50, true)).unwrap();
        let pts: Vec<(i64, i64)> = (0..100).flat_map(|x| (0..30).map(move |y| (x, y * 3 + x % 3))).collect();
        write(&ctx, "/s", &pts[..1500], 0);
        write(&ctx, "/s", &pts[1000..], 5000);
        // One attribute: the cache holds some of the tiles consolidation reads, not all.
        let mut c = everything(false, pts.clone(), 1);
        c.layout = Layout::Global;
        let before = read(&ctx, &c);
        let cached = ctx.tile_cache().stats();
        consolidate(&ctx, "/s", &Selection::All).unwrap().unwrap();
        let after = ctx.tile_cache().stats();
        assert_eq!(after.inserts, cached.inserts, "consolidation put tiles in the cache");
        assert_eq!(after.evictions, cached.evictions, "consolidation pushed tiles out of the cache");
        assert!(read(&ctx, &c) == before, "the consolidated fragment holds other cells than its inputs");
    }
}

/// A flipped byte in a tile read whole, straight into a result column that was not zeroed
/// first, is corruption naming the file, and no partly written column comes back.
#[test]
fn a_flipped_byte_in_a_tile_read_whole_is_corruption() {
    for filtered in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("s");
        let uri = uri.to_str().unwrap();
        let ctx = local_ctx();
        Array::create(&ctx, uri, &schema(false, 50, filtered)).unwrap();
        let pts: Vec<(i64, i64)> = (0..100).flat_map(|x| (0..10).map(move |y| (x, y * 10))).collect();
        write(&ctx, uri, &pts, 0);
        let read_a = || {
            let r = Array::open(&ctx, uri, Mode::Read).unwrap();
            r.sparse_query(&[vec![], vec![]], &["a"], Layout::Unordered).and_then(|mut q| q.read_all())
        };
        assert_eq!(read_a().unwrap().cells as usize, pts.len());
        let frags = std::path::Path::new(uri).join(FRAGMENTS_DIR);
        let frag = std::fs::read_dir(&frags).unwrap().next().unwrap().unwrap().path();
        let name = fragment_name_of(&frag);
        let (_, tiles) = stored_file(std::path::Path::new(uri), &name, "a0.data");
        let half = tiles.iter().map(|t| t.stored_size).sum::<u64>() / 2;
        let stored = flip_stored(std::path::Path::new(uri), &name, "a0.data", half, 0x40);
        let e = read_a().unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Corrupt { .. }), "{msg}");
        assert!(msg.contains(&stored), "{msg}");
    }
}

/// A read of thousands of fragments, each a read of its own on the I/O pool, unfilters each
/// read's tiles on the compute pool: the I/O threads never wait on the compute pool (an I/O
/// thread that did took up the next read meanwhile, one stack frame deeper per read, and a
/// read of 1,001 fragments overflowed its stack), whether tiles go into the result or through
/// the tile cache.
#[test]
fn reads_of_thousands_of_fragments_do_not_nest_on_the_io_threads() {
    let (fast, general) = contexts(false);
    Array::create(&fast, "/s", &schema(true, 50, true)).unwrap();
    let n = 3000;
    for k in 0..n {
        write(&fast, "/s", &[(k % 100, (k / 100) % 100)], k);
    }
    let c = everything(true, Vec::new(), 0);
    let got = read(&fast, &c);
    assert_eq!(got[0].cells, n as u64);
    assert_eq!(got, read(&general, &c));
}
