//! Dense arrays at the edges of the integer types: domains that end at the last coordinate a
//! 64-bit type can hold (2^64 - 1 coordinates, the most a dimension may have), tile extents that
//! do not divide the domain, so the last space tile reaches past the end of the type. Random
//! writes, updates and reads in windows at both ends of every dimension, each read compared with
//! a model (a map from coordinates to the newest value); then the same after consolidation.

use std::collections::HashMap;

use proptest::prelude::*;
use tessera::*;

use crate::common::*;

/// Coordinates of the window at each end of a dimension.
const WINDOW: i128 = 10;

#[derive(Debug, Clone)]
struct EdgeCase {
    datatype: Datatype,
    dims: Vec<(i128, i128, u64)>, // (lo, hi, tile)
    cell_order: CellOrder,
    tile_order: CellOrder,
    writes: Vec<(Vec<(i128, i128)>, Layout, u64)>, // rect, layout, seed
    /// Before write i: points written as one sparse fragment of updates.
    updates: Vec<Vec<Coord>>,
    reads: Vec<(Vec<Vec<(i128, i128)>>, Layout, u64)>, // ranges, layout, batch bytes (0: whole)
}

/// Domains of one type: the most coordinates allowed (2^64 - 1) or half as many, and small
/// ones at either end of the type; the whole type for the small types. (The tiles of a domain
/// number fewer than 2^64 and hold at most 2^34 cells, so at most one dimension is huge.)
fn domains(dt: Datatype) -> Vec<(i128, i128)> {
    let (u, i) = (i128::from(u64::MAX), i128::from(i64::MAX));
    match dt {
        Datatype::UInt64 => vec![(0, u - 1), (1, u), (1 << 63, u), (0, 6), (u - 7, u - 1), (u - 20, u)],
        Datatype::Int64 => vec![(-i - 1, i - 1), (-i, i), (-5, i), (-i - 1, -i + 5), (i - 12, i), (-i - 1, -i + 30)],
        Datatype::UInt8 => vec![(0, 255)],
        _ => vec![(-128, 127)],
    }
}

/// A coordinate in one of the two windows of `[lo, hi]`.
fn coord_in(lo: i128, hi: i128) -> impl Strategy<Value = i128> {
    (0..2 * WINDOW).prop_map(move |k| if k < WINDOW { (lo + k).min(hi) } else { (hi - (k - WINDOW)).max(lo) })
}

/// A range inside one window of `[lo, hi]`.
fn range_in(lo: i128, hi: i128) -> impl Strategy<Value = (i128, i128)> {
    (any::<bool>(), 0..WINDOW, 0..WINDOW).prop_map(move |(top, a, b)| {
        let (a, b) = (a.min(b), a.max(b));
        if top {
            ((hi - b).max(lo), (hi - a).max(lo))
        } else {
            ((lo + a).min(hi), (lo + b).min(hi))
        }
    })
}

fn case_strategy() -> impl Strategy<Value = EdgeCase> {
    let dt = prop_oneof![Just(Datatype::UInt64), Just(Datatype::Int64), Just(Datatype::UInt8), Just(Datatype::Int8)];
    (dt, 1usize..4)
        .prop_flat_map(|(dt, nd)| {
            let doms = domains(dt);
            let dim = (0..doms.len(), 1u64..20).prop_map(move |(k, t)| {
                let (lo, hi) = doms[k];
                // The extent may not exceed the domain; 7 and 13 do not divide 2^64 - 1 or 256.
                let t = t.min(u64::try_from(hi - lo + 1).unwrap_or(u64::MAX));
                (lo, hi, t)
            });
            (Just(dt), prop::collection::vec(dim, nd..=nd))
        })
        .prop_flat_map(|(dt, dims)| {
            let rect = dims.iter().map(|&(lo, hi, _)| range_in(lo, hi)).collect::<Vec<_>>();
            let writes = prop::collection::vec((rect, layout_strategy(), any::<u64>()), 0..4);
            let point = dims.iter().map(|&(lo, hi, _)| coord_in(lo, hi)).collect::<Vec<_>>();
            let updates = prop::collection::vec(prop::collection::vec(point, 0..6), 0..4);
            let ranges =
                dims.iter().map(|&(lo, hi, _)| prop::collection::vec(range_in(lo, hi), 1..3)).collect::<Vec<_>>();
            let batch = prop_oneof![Just(0u64), 1u64..64];
            let reads = prop::collection::vec((ranges, layout_strategy(), batch), 1..4);
            (Just(dt), Just(dims), order_strategy(), order_strategy(), writes, updates, reads)
        })
        .prop_map(|(datatype, dims, cell_order, tile_order, writes, updates, reads)| EdgeCase {
            datatype,
            dims,
            cell_order,
            tile_order,
            writes,
            updates,
            reads,
        })
}

/// The schema, unless its domain has 2^64 space tiles or more (a schema rule).
fn schema_of(c: &EdgeCase) -> Option<ArraySchema> {
    let mut b = ArraySchema::builder(ArrayType::Dense).cell_order(c.cell_order).tile_order(c.tile_order);
    for (i, &(lo, hi, tile)) in c.dims.iter().enumerate() {
        b = b.dim(Dimension::new(format!("d{i}"), c.datatype, (lo, hi), tile));
    }
    match b.attr(Attribute::new("a", Datatype::Int32)).build() {
        Ok(s) => Some(s),
        Err(e) => {
            // Curve orders over domains of that many tiles need keys of more than 128 bits.
            let e = e.to_string();
            assert!(e.contains("2^64 or more space tiles") || e.contains("more than 128"), "{e}");
            None
        }
    }
}

/// The cells of rectangle `w` in the array's global order (tiles in tile order, cells of a tile
fn cells_in_layout(c: &EdgeCase, ranges: &[Vec<(i128, i128)>], layout: Layout) -> Vec<Coord> {
    let dims = c.dims.iter().map(|&(lo, hi, t)| (lo, t, (hi - lo + 1) as u64)).collect();
    GridOrder { dims, cell_order: c.cell_order, tile_order: c.tile_order }.cells_in_layout(ranges, layout)
}

fn value_for(seed: u64, k: usize) -> i32 {
    (seed.wrapping_mul(6364136223846793005).wrapping_add((k as u64).wrapping_mul(1442695040888963407)) >> 32) as i32
}

/// Coordinate `x` as a value of `dt`, little-endian.
fn coord_bytes(dt: Datatype, x: i128) -> Vec<u8> {
    match dt {
        Datatype::UInt64 => u64::try_from(x).unwrap().to_le_bytes().to_vec(),
        Datatype::Int64 => i64::try_from(x).unwrap().to_le_bytes().to_vec(),
        Datatype::UInt8 => u8::try_from(x).unwrap().to_le_bytes().to_vec(),
        _ => i8::try_from(x).unwrap().to_le_bytes().to_vec(),
    }
}

fn coord_columns(c: &EdgeCase, pts: &[Coord]) -> Vec<Vec<u8>> {
    (0..c.dims.len()).map(|d| pts.iter().flat_map(|p| coord_bytes(c.datatype, p[d])).collect()).collect()
}

fn names(c: &EdgeCase) -> Vec<String> {
    (0..c.dims.len()).map(|d| format!("d{d}")).collect()
}

/// Writes the points (a point given twice: its last value wins) as one sparse fragment.
fn apply_update(ctx: &Context, uri: &str, c: &EdgeCase, pts: &[Coord], seed: u64, model: &mut HashMap<Coord, i32>) {
    if pts.is_empty() {
        return;
    }
    let vals: Vec<i32> = (0..pts.len()).map(|k| value_for(seed, k)).collect();
    let cols = coord_columns(c, pts);
    let names = names(c);
    let coords: Vec<CoordInput<'_>> =
        (0..c.dims.len()).map(|d| CoordInput { name: &names[d], data: &cols[d] }).collect();
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write_sparse(&coords, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    for (p, v) in pts.iter().zip(vals) {
        model.insert(p.clone(), v);
    }
}

fn check_reads(ctx: &Context, uri: &str, c: &EdgeCase, model: &HashMap<Coord, i32>) -> Result<(), TestCaseError> {
    let r = Array::open(ctx, uri, Mode::Read).unwrap();
    let want = |k: &Coord| model.get(k).copied().unwrap_or(i32::MIN);
    for (ranges, layout, batch) in &c.reads {
        let layout =
            if ranges.iter().any(|r| r.len() > 1) && *layout == Layout::Global { Layout::RowMajor } else { *layout };
        let cells = cells_in_layout(c, ranges, layout);
        let expected: Vec<i32> = cells.iter().map(want).collect();
        let sub = Subarray { ranges: ranges.clone() };
        let got = if *batch == 0 {
            as_i32(&r.read(&sub, &["a"], layout).unwrap().attrs[0].data)
        } else {
            let mut q = r.read_query(&sub, &["a"], layout).unwrap();
            prop_assert_eq!(q.total_cells(), cells.len() as u64);
            let mut got = Vec::new();
            while let Some(b) = q.next_batch(*batch).unwrap() {
                got.extend(as_i32(&b.attrs[0].data));
            }
            got
        };
        prop_assert_eq!(&got, &expected, "read {:?} {:?}", ranges, layout);
        // The same cells as point reads.
        let cols = coord_columns(c, &cells);
        let names = names(c);
        let coords: Vec<CoordInput<'_>> =
            (0..c.dims.len()).map(|d| CoordInput { name: &names[d], data: &cols[d] }).collect();
        let pts = as_i32(&r.read_points(&coords, &["a"]).unwrap().attrs[0].data);
        prop_assert_eq!(&pts, &expected, "points of read {:?}", ranges);
    }
    Ok(())
}

fn run_case(c: &EdgeCase) -> Result<(), TestCaseError> {
    let Some(schema) = schema_of(c) else { return Err(TestCaseError::reject("too many space tiles")) };
    let ctx = mem_ctx();
    let uri = "/edges";
    Array::create(&ctx, uri, &schema).unwrap();
    let mut model: HashMap<Coord, i32> = HashMap::new();
    for (wi, (rect, layout, seed)) in c.writes.iter().enumerate() {
        if let Some(pts) = c.updates.get(wi) {
            apply_update(&ctx, uri, c, pts, seed ^ 0x5555, &mut model);
        }
        let cells = cells_in_layout(c, &rect.iter().map(|&r| vec![r]).collect::<Vec<_>>(), *layout);
        let vals: Vec<i32> = (0..cells.len()).map(|k| value_for(*seed, k)).collect();
        let w = Array::open(&ctx, uri, Mode::Write).unwrap();
        w.write(&Subarray::from_ranges(rect), *layout, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
        for (coord, v) in cells.into_iter().zip(vals) {
            model.insert(coord, v);
        }
    }
    if let Some(pts) = c.updates.get(c.writes.len()) {
        apply_update(&ctx, uri, c, pts, 77, &mut model);
    }
    check_reads(&ctx, uri, c, &model)?;
    // A dense consolidation writes the bounding box of its inputs: only where that is small
    // (fragments at both ends of a huge domain would make it span the domain).
    let mut bbox: Vec<(i128, i128)> = vec![(i128::MAX, i128::MIN); c.dims.len()];
    for (rect, _, _) in &c.writes {
        for (b, r) in bbox.iter_mut().zip(rect) {
            *b = (b.0.min(r.0), b.1.max(r.1));
        }
    }
    for p in c.updates.iter().flatten() {
        for (b, x) in bbox.iter_mut().zip(p) {
            *b = (b.0.min(*x), b.1.max(*x));
        }
    }
    let small = bbox.iter().all(|b| b.1.saturating_sub(b.0) < 4 * WINDOW);
    if small && Array::open(&ctx, uri, Mode::Read).unwrap().fragments().len() > 1 {
        consolidate(&ctx, uri, &Selection::All).unwrap();
        check_reads(&ctx, uri, c, &model)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]
    #[test]
    fn reads_at_the_edges_of_the_types_match_the_model(c in case_strategy()) {
        run_case(&c)?;
    }
}

/// A uint64 dimension whose domain ends at 2^64 - 2 with tile 7: the last space tile starts at
/// 2^64 - 2 and would end past 2^64 - 1.
#[test]
fn the_last_cell_of_a_full_uint64_domain() {
    let ctx = mem_ctx();
    let top = i128::from(u64::MAX) - 1;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::UInt64, (0, top), 7))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/a", &schema).unwrap();
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    w.write(&Subarray::from_ranges(&[(top, top)]), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&[5]))])
        .unwrap();
    let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let got = r.read(&Subarray::from_ranges(&[(top - 3, top)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&got.attrs[0].data), [i32::MIN, i32::MIN, i32::MIN, 5]);
    // An update of the cell before it, as a sparse fragment.
    let x = (top as u64 - 1).to_le_bytes();
    w.write_sparse(&[CoordInput { name: "x", data: &x }], &[AttrInput::fixed("a", i32_bytes(&[6]))]).unwrap();
    let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let got = r.read(&Subarray::from_ranges(&[(top - 3, top)]), &["a"], Layout::Global).unwrap();
    assert_eq!(as_i32(&got.attrs[0].data), [i32::MIN, i32::MIN, 6, 5]);
}

/// 2^32 x 2^32 cells are one more than a u64 counts: the read is refused, and one cell fewer is
/// counted exactly.
#[test]
fn cell_counts_of_huge_regions() {
    // Its 2^32-cell tiles (16 GiB) are beyond the default `sm.limits.tile_bytes`: raised here, as
    // nothing is written.
    let mut config = Config::new();
    config.set("sm.limits.tile_bytes", "17179869184").unwrap();
    let ctx = Context::with_storage(config, std::sync::Arc::new(MemoryStorage::new())).unwrap();
    let side = 1i128 << 32;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::UInt64, (0, side - 1), 1 << 16))
        .dim(Dimension::new("y", Datatype::UInt64, (0, side), 1 << 16))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/a", &schema).unwrap();
    let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let e =
        r.read_query(&Subarray::from_ranges(&[(0, side - 1), (0, side - 1)]), &["a"], Layout::RowMajor).unwrap_err();
    assert!(e.to_string().contains("2^64"), "{e}");
    let e = r.read_query(&Subarray::from_ranges(&[(0, side - 1), (0, side)]), &["a"], Layout::Global).unwrap_err();
    assert!(e.to_string().contains("2^64"), "{e}");
    let q = r.read_query(&Subarray::from_ranges(&[(0, side - 1), (1, side - 1)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(q.total_cells(), u64::MAX - u64::from(u32::MAX));
    assert_eq!(q.shape(), [1u64 << 32, (1u64 << 32) - 1]);
    // Its first batch reads.
    let mut q = q;
    let b = q.next_batch(64).unwrap().unwrap();
    assert_eq!(as_i32(&b.attrs[0].data), [i32::MIN; 16]);
}

/// Global order over 2^62 one-cell tiles: a batch lists only the tiles it reads.
#[test]
fn a_global_order_batch_of_a_region_of_2_62_tiles() {
    let ctx = mem_ctx();
    let side = 1i128 << 31;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::UInt64, (0, side - 1), 1))
        .dim(Dimension::new("y", Datatype::UInt64, (0, side - 1), 1))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/g", &schema).unwrap();
    let w = Array::open(&ctx, "/g", Mode::Write).unwrap();
    w.write(&Subarray::from_ranges(&[(0, 0), (1, 2)]), Layout::Global, &[AttrInput::fixed("a", i32_bytes(&[4, 5]))])
        .unwrap();
    let r = Array::open(&ctx, "/g", Mode::Read).unwrap();
    let mut q = r.read_query(&Subarray::full(&schema), &["a"], Layout::Global).unwrap();
    assert_eq!(q.total_cells(), 1 << 62);
    let b = q.next_batch(16).unwrap().unwrap();
    assert_eq!(as_i32(&b.attrs[0].data), [i32::MIN, 4, 5, i32::MIN]);
}

/// A sparse array whose space tile holds more than 2^64 cells (two int64 dimensions with
/// tiles of 2^40, e.g. nanosecond times with day-sized tiles): opening, writing, reading and
/// consolidating it must not overflow the cell strides of a tile (they are unused for sparse
/// tiles, but were computed with an overflowing product, a panic under overflow checks).
#[test]
fn sparse_tiles_of_more_than_2_64_cells() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = Context::new(Config::new()).unwrap();
    let mut b = ArraySchema::builder(ArrayType::Sparse);
    for name in ["a", "b"] {
        b = b.dim(Dimension::new(name, Datatype::Int64, (-(1 << 62), 1 << 62), 1 << 40));
    }
    let schema = b.attr(Attribute::new("v", Datatype::Int32)).build().unwrap();
    let uri = dir.path().join("s");
    Array::create(&ctx, &uri, &schema).unwrap();
    let xs: [i64; 3] = [-(1 << 62), 0, 1 << 62];
    let col: Vec<u8> = xs.iter().flat_map(|x| x.to_le_bytes()).collect();
    let vals: Vec<u8> = [1i32, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
    for _ in 0..2 {
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let coords: Vec<CoordInput<'_>> = ["a", "b"].iter().map(|n| CoordInput { name: n, data: &col }).collect();
        w.write_sparse(&coords, &[AttrInput::fixed("v", &vals)]).unwrap();
    }
    tessera::consolidate(&ctx, &uri, &Selection::All).unwrap().unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let all = vec![vec![DimRange::Int(-(1 << 62), 1 << 62)]; 2];
    let res = r.sparse_query(&all, &["v"], Layout::RowMajor).unwrap().read_all().unwrap();
    // The second write replaced the first's three cells (no duplicates).
    assert_eq!(res.cells, 3);
    let v: Vec<i32> =
        res.attrs.last().unwrap().data.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(v, vec![1, 2, 3]);
}

/// Sparse dimensions built without filters get delta, byte shuffle and zstd level 3 (the
/// default coordinate filters, docs/format.md §9), and coordinates spread over most of the int64
/// range (deltas of every size, wrapping ones included) read back exactly through them.
#[test]
fn default_coordinate_filters_round_trip_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = Context::new(Config::new()).unwrap();
    let (lo, hi) = (-(1i64 << 62), 1i64 << 62);
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (lo.into(), hi.into()), 1 << 40))
        .dim(Dimension::new("y", Datatype::Int64, (lo.into(), hi.into()), 1 << 40))
        .attr(Attribute::new("v", Datatype::Int32))
        .capacity(4_000)
        .build()
        .unwrap();
    let want = FilterPipeline::new(vec![Filter::Delta, Filter::ByteShuffle, Filter::Zstd { level: 3 }]);
    assert_eq!(default_coord_filters(), want);
    assert!(schema.dims.iter().all(|d| d.filters == want), "{:?}", schema.dims);
    let uri = dir.path().join("s");
    Array::create(&ctx, &uri, &schema).unwrap();
    // Distinct points: a few far apart (both ends of the domain), most in small clusters.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        state >> 1
    };
    let mut pts: Vec<(i64, i64)> = vec![(lo, lo), (lo, hi), (hi, lo), (hi, hi), (0, 0)];
    for k in 0..20_000i64 {
        let far = next() % 8 == 0;
        let x = if far { lo + (next() % (1 << 63)) as i64 } else { (k / 100) * 1_000 + (next() % 300) as i64 };
        let y = if far { lo + (next() % (1 << 63)) as i64 } else { (next() % 1_000_000) as i64 - 500_000 };
        pts.push((x, y));
    }
    pts.sort_unstable();
    pts.dedup();
    let col = |f: fn(&(i64, i64)) -> i64| -> Vec<u8> { pts.iter().flat_map(|p| f(p).to_le_bytes()).collect() };
    let (xs, ys) = (col(|p| p.0), col(|p| p.1));
    let vals: Vec<i32> = (0..pts.len() as i32).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write_sparse(
        &[CoordInput { name: "x", data: &xs }, CoordInput { name: "y", data: &ys }],
        &[AttrInput::fixed("v", i32_bytes(&vals))],
    )
    .unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let all = vec![vec![DimRange::Int(lo.into(), hi.into())]; 2];
    let res = r.sparse_query(&all, &["v"], Layout::RowMajor).unwrap().read_all().unwrap();
    let i64s = |b: &[u8]| -> Vec<i64> { b.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect() };
    let got: Vec<(i64, i64)> = i64s(&res.attrs[0].data).into_iter().zip(i64s(&res.attrs[1].data)).collect();
    assert_eq!(got, pts);
    assert_eq!(as_i32(&res.attrs[2].data), vals);
}
