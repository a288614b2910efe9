//! Aggregates against a reference map: random dense and sparse arrays written by overlapping
//! fragments (rectangles, point updates, deletes), then every aggregate of an int32, a uint64
//! (sums beyond u64) and a nullable float64 (with NaN) attribute over random boxes, with and
//! without a random condition, read in batches much smaller than the array
//! (`sm.memory_budget`) with the update index on or off, stored tile summaries used or not, and
//! the fragments sometimes consolidated (whose output has summaries of every whole tile). The
//! reference computes each aggregate
//! over the newest value of each cell (the fill value for never-written or deleted cells of
//! dense arrays), exactly.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use tessera::*;

use crate::common::*;

const SIDE: i128 = 8;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Cell {
    a: i32,
    u: u64,
    v: Option<f64>,
}

/// The fill cell of dense arrays: the types' default fill values, `v` null.
const FILL: Cell = Cell { a: i32::MIN, u: u64::MAX, v: None };

/// A deterministic value for the cell at `(r, c)` of write `seed`.
fn cell_of(seed: u64, r: i128, c: i128) -> Cell {
    let h = (seed ^ ((r as u64) << 8 | c as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    let h2 = h.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let u = if h.is_multiple_of(2) { h2 % 100 } else { u64::MAX - h2 % 100 };
    let v = match (h >> 8) % 5 {
        0 => None,
        1 => Some(f64::NAN),
        k => Some(((h2 >> 16) % 81) as f64 / 4.0 - 10.0 + f64::from(k as u8) - 2.0),
    };
    Cell { a: ((h >> 16) % 100) as i32 - 50, u, v }
}

/// Whether write `seed` touches `(r, c)` of its rectangle (point updates and deletes take
/// about a third of the cells).
fn picked(seed: u64, r: i128, c: i128) -> bool {
    cell_of(seed, r, c).a.rem_euclid(3) == 0
}

#[derive(Debug, Clone)]
struct Case {
    sparse: bool,
    tiles: (u64, u64),
    capacity: u64,
    /// Kind (0 rectangle, 1 points, 2 delete), rectangle, seed.
    ops: Vec<(u8, [(i128, i128); 2], u64)>,
    /// Per dimension: None for the whole dimension.
    queries: Vec<([Option<(i128, i128)>; 2], Option<Condition>)>,
    index: bool,
    /// `sm.aggregate.tile_stats`.
    stats: bool,
    /// Consolidate every fragment before reading.
    consolidate: bool,
}

fn range() -> impl Strategy<Value = (i128, i128)> {
    (0..SIDE, 0..SIDE).prop_map(|(a, b)| (a.min(b), a.max(b)))
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let op = (0u8..3, [range(), range()], any::<u64>());
    let query = (
        [prop::option::weighted(0.8, range()), prop::option::weighted(0.8, range())],
        prop::option::of(cond_strategy(-50, 50)),
    );
    (
        any::<bool>(),
        // Small tiles half the time: more tiles lie whole inside queries.
        prop_oneof![(1u64..=3, 1u64..=3), (1u64..=8, 1u64..=8)],
        1u64..10,
        prop::collection::vec(op, 0..6),
        prop::collection::vec(query, 1..5),
        any::<bool>(),
        prop::bool::weighted(0.8),
        any::<bool>(),
    )
        .prop_map(|(sparse, tiles, capacity, ops, queries, index, stats, consolidate)| Case {
            sparse,
            tiles,
            capacity,
            ops,
            queries,
            index,
            stats,
            consolidate,
        })
}

fn create(c: &Case, uri: &std::path::Path) -> Context {
    let mut config = Config::new();
    config.set("sm.compute_concurrency", "2").unwrap();
    // Batches of a few tiles: a tile holds at most this many cells of at most 40 bytes (values,
    // validity, coordinates).
    let tile_cells = (c.tiles.0 * c.tiles.1).max(c.capacity);
    config.set("sm.memory_budget", &(tile_cells * 40 + 64).max(300).to_string()).unwrap();
    config.set("sm.aggregate.tile_stats", if c.stats { "true" } else { "false" }).unwrap();
    if c.index {
        config.set("sm.read.update_index_min_fragments", "1").unwrap();
        config.set("sm.read.update_index_after_reads", "0").unwrap();
    } else {
        config.set("sm.read.update_index_size", "0").unwrap();
    }
    let ctx = Context::with_storage(config, Arc::new(MemoryStorage::new())).unwrap();
    let builder = ArraySchema::builder(if c.sparse { ArrayType::Sparse } else { ArrayType::Dense })
        .dim(dim("r", 0, SIDE - 1, c.tiles.0))
        .dim(dim("c", 0, SIDE - 1, c.tiles.1))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(Attribute::new("u", Datatype::UInt64))
        .attr(Attribute { nullable: true, ..Attribute::new("v", Datatype::Float64) })
        .capacity(c.capacity);
    Array::create(&ctx, uri, &builder.build().unwrap()).unwrap();
    ctx
}

/// Writes `cells` as a sparse fragment (points of either kind of array).
fn write_points(w: &Array, cells: &BTreeMap<(i64, i64), Cell>) {
    let (rs, cs): (Vec<i64>, Vec<i64>) = cells.keys().copied().unzip();
    let a: Vec<i32> = cells.values().map(|x| x.a).collect();
    let u: Vec<u64> = cells.values().map(|x| x.u).collect();
    let v: Vec<f64> = cells.values().map(|x| x.v.unwrap_or(0.0)).collect();
    let valid: Vec<u8> = cells.values().map(|x| u8::from(x.v.is_some())).collect();
    w.write_sparse(
        &[
            CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
            CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
        ],
        &[
            AttrInput::fixed("a", i32_bytes(&a)),
            AttrInput::fixed("u", bytemuck::cast_slice(&u)),
            AttrInput { name: "v", data: bytemuck::cast_slice(&v), offsets: None, validity: Some(&valid) },
        ],
    )
    .unwrap();
}

/// Applies the case's writes to the array and returns the reference map.
fn write_all(c: &Case, ctx: &Context, uri: &std::path::Path) -> BTreeMap<(i64, i64), Cell> {
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    let mut model = BTreeMap::new();
    for &(kind, [(r0, r1), (c0, c1)], seed) in &c.ops {
        let coords = (r0..=r1).flat_map(|r| (c0..=c1).map(move |c| (r, c)));
        let key = |(r, c): (i128, i128)| (r as i64, c as i64);
        match kind {
            0 if !c.sparse => {
                let cells: Vec<Cell> = coords.clone().map(|(r, c)| cell_of(seed, r, c)).collect();
                let a: Vec<i32> = cells.iter().map(|x| x.a).collect();
                let u: Vec<u64> = cells.iter().map(|x| x.u).collect();
                let v: Vec<f64> = cells.iter().map(|x| x.v.unwrap_or(0.0)).collect();
                let valid: Vec<u8> = cells.iter().map(|x| u8::from(x.v.is_some())).collect();
                w.write(
                    &Subarray::from_ranges(&[(r0, r1), (c0, c1)]),
                    Layout::RowMajor,
                    &[
                        AttrInput::fixed("a", i32_bytes(&a)),
                        AttrInput::fixed("u", bytemuck::cast_slice(&u)),
                        AttrInput { name: "v", data: bytemuck::cast_slice(&v), offsets: None, validity: Some(&valid) },
                    ],
                )
                .unwrap();
                model.extend(coords.zip(cells).map(|(k, x)| (key(k), x)));
            }
            0 | 1 => {
                let cells: BTreeMap<(i64, i64), Cell> = coords
                    .filter(|&(r, c)| kind == 0 || picked(seed, r, c))
                    .map(|(r, c)| (key((r, c)), cell_of(seed, r, c)))
                    .collect();
                if !cells.is_empty() {
                    write_points(&w, &cells);
                    model.extend(cells);
                }
            }
            _ => {
                let gone: Vec<(i64, i64)> = coords.filter(|&(r, c)| picked(seed, r, c)).map(key).collect();
                if gone.is_empty() {
                    continue;
                }
                let (rs, cs): (Vec<i64>, Vec<i64>) = gone.iter().copied().unzip();
                w.delete_cells(&[
                    CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
                    CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
                ])
                .unwrap();
                for k in gone {
                    model.remove(&k);
                }
            }
        }
    }
    model
}

fn requests() -> Vec<AggregateRequest> {
    let mut out =
        vec![AggregateRequest::new("a", AggregateOp::Count), AggregateRequest::new("a", AggregateOp::NullCount)];
    for attr in ["a", "u", "v"] {
        for op in [AggregateOp::CountValid, AggregateOp::Sum, AggregateOp::Min, AggregateOp::Max, AggregateOp::Mean] {
            out.push(AggregateRequest::new(attr, op));
        }
    }
    out.push(AggregateRequest::new("v", AggregateOp::NullCount));
    out
}

/// The reference: `requests()` over `cells`.
fn reference(cells: &[Cell]) -> Vec<AggregateValue> {
    let ints = |f: &dyn Fn(&Cell) -> i128| -> Vec<AggregateValue> {
        let vals: Vec<i128> = cells.iter().map(f).collect();
        let n = vals.len();
        let sum: i128 = vals.iter().sum();
        let ext = |x: Option<&i128>| x.map_or(AggregateValue::Null, |v| AggregateValue::Int(*v));
        vec![
            AggregateValue::Count(n as u64),
            AggregateValue::Int(sum),
            ext(vals.iter().min()),
            ext(vals.iter().max()),
            if n == 0 { AggregateValue::Null } else { AggregateValue::Float(sum as f64 / n as f64) },
        ]
    };
    let mut out = vec![AggregateValue::Count(cells.len() as u64), AggregateValue::Count(0)];
    out.extend(ints(&|x| x.a.into()));
    out.extend(ints(&|x| x.u.into()));
    let vals: Vec<f64> = cells.iter().filter_map(|x| x.v).filter(|v| !v.is_nan()).collect();
    let valid = cells.iter().filter(|x| x.v.is_some()).count();
    // The values are multiples of 1/4 far below 2^50: their sums are exact in any order.
    let sum: f64 = vals.iter().sum();
    let ext = |x: Option<f64>| x.map_or(AggregateValue::Null, AggregateValue::Float);
    out.extend([
        AggregateValue::Count(valid as u64),
        AggregateValue::Float(sum),
        ext(vals.iter().copied().reduce(f64::min)),
        ext(vals.iter().copied().reduce(f64::max)),
        if vals.is_empty() { AggregateValue::Null } else { AggregateValue::Float(sum / vals.len() as f64) },
        AggregateValue::Count((cells.len() - valid) as u64),
    ]);
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn aggregates_equal_the_reference(c in case_strategy()) {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("arr");
        let ctx = create(&c, &uri);
        let model = write_all(&c, &ctx, &uri);
        if c.consolidate && Array::open(&ctx, &uri, Mode::Read).unwrap().fragments().len() > 1 {
            if let Err(e) = consolidate(&ctx, &uri, &Selection::All) {
                // Only a sparse run holding deletions with older fragments outside may be refused.
                prop_assert!(e.to_string().contains("start the run at the oldest fragment"), "{}", e);
            }
        }
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        for (ranges, cond) in &c.queries {
            let bounds: Vec<(i128, i128)> = ranges.iter().map(|x| x.unwrap_or((0, SIDE - 1))).collect();
            let mut cells = Vec::new();
            for row in bounds[0].0..=bounds[0].1 {
                for col in bounds[1].0..=bounds[1].1 {
                    let cell = match model.get(&(row as i64, col as i64)) {
                        Some(x) => *x,
                        None if c.sparse => continue,
                        None => FILL,
                    };
                    if cond.as_ref().is_none_or(|cd| cond_holds(cd, cell.a, cell.v.is_none())) {
                        cells.push(cell);
                    }
                }
            }
            let dim_ranges: Vec<Vec<DimRange>> =
                ranges.iter().map(|x| x.map(|(lo, hi)| vec![DimRange::Int(lo, hi)]).unwrap_or_default()).collect();
            let got = r.aggregate(&dim_ranges, cond.as_ref(), &requests()).unwrap();
            let want = reference(&cells);
            for ((g, w), q) in got.iter().zip(&want).zip(requests()) {
                prop_assert_eq!(g, w, "{:?} of {}, {:?}, condition {:?}", q.op, q.attr, ranges, cond.as_ref().map(ToString::to_string));
            }
        }
    }
}

/// Aggregates of a dense array read in many batches count the batches and cells, and the
/// errors name the attribute and the operation.
#[test]
fn bad_requests_are_refused_with_the_attribute() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = mem_ctx();
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 0, 9, 5))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(s)
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let all = vec![vec![]];
    let err = |attr: &str, op| r.aggregate(&all, None, &[AggregateRequest::new(attr, op)]).unwrap_err().to_string();
    assert_eq!(
        err("s", AggregateOp::Sum),
        "aggregate sum of attribute s: the attribute holds text (utf8); only count, count_valid and null_count apply"
    );
    assert!(err("x", AggregateOp::Count).starts_with("unknown attribute \"x\""));
    // Never-written cells of a dense array hold the fill value and are counted.
    let got = r
        .aggregate(
            &all,
            None,
            &[AggregateRequest::new("s", AggregateOp::Count), AggregateRequest::new("a", AggregateOp::Min)],
        )
        .unwrap();
    assert_eq!(got, vec![AggregateValue::Count(10), AggregateValue::Int(i32::MIN.into())]);
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    assert!(w
        .aggregate(&all, None, &[AggregateRequest::new("a", AggregateOp::Count)])
        .unwrap_err()
        .to_string()
        .contains("aggregate"));
}
