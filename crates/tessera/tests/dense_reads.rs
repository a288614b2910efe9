//! Dense reads: float bounds take the integers inside them, as sparse reads do; results too large
//! for memory are refused before anything is allocated, with an error that says how much memory
//! the result needs and how to read it in batches.

use std::sync::Arc;

use proptest::prelude::*;
use tessera::*;

use crate::common::*;

/// A dense and a sparse 10 x 10 array holding the same cells (value `100 r + c`).
fn twin_arrays() -> (Context, Array, Array) {
    let ctx = mem_ctx();
    let dense = schema_2d(10, 10, 3, 4);
    Array::create(&ctx, "/dense", &dense).unwrap();
    let vals: Vec<i32> = (0..100).map(|k| 100 * (1 + k / 10) + 1 + k % 10).collect();
    Array::open(&ctx, "/dense", Mode::Write)
        .unwrap()
        .write(&Subarray::full(&dense), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))])
        .unwrap();
    let sparse = ArraySchema::builder(ArrayType::Sparse)
        .dim(dim("r", 1, 10, 3))
        .dim(dim("c", 1, 10, 4))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/sparse", &sparse).unwrap();
    let rs: Vec<i64> = (0..100).map(|k| 1 + k / 10).collect();
    let cs: Vec<i64> = (0..100).map(|k| 1 + k % 10).collect();
    Array::open(&ctx, "/sparse", Mode::Write)
        .unwrap()
        .write_sparse(
            &[
                CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
                CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
            ],
            &[AttrInput::fixed("a", i32_bytes(&vals))],
        )
        .unwrap();
    let d = Array::open(&ctx, "/dense", Mode::Read).unwrap();
    let s = Array::open(&ctx, "/sparse", Mode::Read).unwrap();
    (ctx, d, s)
}

/// A bound in quarter steps over [0.75, 10.25] (some outside the domain [1, 10]).
fn bound() -> impl Strategy<Value = f64> {
    (3u32..=41).prop_map(|q| f64::from(q) / 4.0)
}

proptest! {
    /// Dense and sparse reads of the same float bounds return the same cells, or the same
    /// refusal; a dense range without an integer inside is refused.
    #[test]
    fn float_bounds_read_what_a_sparse_read_reads(
        ranges in prop::collection::vec(prop::collection::vec((bound(), bound()), 1..3), 2..=2),
    ) {
        let (_ctx, d, s) = twin_arrays();
        let dr: Vec<Vec<DimRange>> =
            ranges.iter().map(|rs| rs.iter().map(|&(a, b)| DimRange::Float(a.min(b), a.max(b))).collect()).collect();
        let sparse = s.sparse_query(&dr, &["a"], Layout::RowMajor).and_then(|mut q| q.read_all());
        let dense = Subarray::from_dim_ranges(d.schema(), &dr)
            .map_err(Error::from)
            .and_then(|sub| d.read(&sub, &["a"], Layout::RowMajor));
        let empty = dr.iter().flatten().any(|r| match *r {
            DimRange::Float(a, b) => a.ceil() > b.floor(),
            DimRange::Int(..) => false,
        });
        match (dense, sparse) {
            (Ok(dv), Ok(sv)) => {
                prop_assert!(!empty);
                // Each dimension's ranges are disjoint here only if they do not overlap: the
                // dense result repeats overlapping cells, the sparse one does not.
                let disjoint = dr.iter().all(|rs| rs.len() == 1);
                let got = as_i32(&dv.attrs[0].data);
                if disjoint {
                    prop_assert_eq!(got, as_i32(&sv.attr("a").unwrap().data));
                }
                // The integers inside each range: ceil(lo) ..= floor(hi).
                let lists: Vec<Vec<i32>> = dr.iter().map(|rs| rs.iter().flat_map(|r| match *r {
                    DimRange::Float(a, b) => (a.ceil() as i32)..=(b.floor() as i32),
                    DimRange::Int(..) => unreachable!(),
                }).collect()).collect();
                let want: Vec<i32> = lists[0].iter().flat_map(|&r| lists[1].iter().map(move |&c| 100 * r + c)).collect();
                let got = as_i32(&dv.attrs[0].data);
                prop_assert_eq!(got, want);
            }
            (Err(e), Ok(_)) => {
                prop_assert!(empty, "{}", e);
                prop_assert!(e.to_string().contains("holds no integer coordinate"), "{}", e);
            }
            (Err(de), Err(se)) => prop_assert_eq!(de.to_string(), se.to_string()),
            (Ok(_), Err(se)) => prop_assert!(false, "the sparse read failed alone: {}", se),
        }
    }
}

#[test]
fn a_fractional_bound_is_not_truncated() {
    let (_ctx, d, _s) = twin_arrays();
    let sub =
        Subarray::from_dim_ranges(d.schema(), &[vec![DimRange::Float(1.5, 3.0)], vec![DimRange::Int(1, 1)]]).unwrap();
    assert_eq!(sub.ranges, vec![vec![(2, 3)], vec![(1, 1)]]);
    assert_eq!(as_i32(&d.read(&sub, &["a"], Layout::RowMajor).unwrap().attrs[0].data), [201, 301]);
    let e = Subarray::from_dim_ranges(d.schema(), &[vec![DimRange::Float(1.2, 1.8)], vec![]]).unwrap_err();
    assert_eq!(e.to_string(), "subarray: dimension r: range [1.2, 1.8] holds no integer coordinate");
    let e = Subarray::from_dim_ranges(d.schema(), &[vec![DimRange::Float(0.5, 2.0)], vec![]]).unwrap_err();
    assert!(matches!(e, QueryError::OutOfDomain { .. }), "{e}");
}

/// A 1-D array of 2^40 int32 cells: reading it whole needs 4 TiB.
fn huge(config: Config) -> Array {
    let ctx = Context::with_storage(config, Arc::new(MemoryStorage::new())).unwrap();
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::UInt64, (0, (1 << 40) - 1), 1 << 20))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/huge", &schema).unwrap();
    Array::open(&ctx, "/huge", Mode::Read).unwrap()
}

#[test]
fn a_read_larger_than_memory_is_refused_before_allocating() {
    let a = huge(Config::new());
    let e = a.read(&Subarray::full(a.schema()), &["a"], Layout::RowMajor).unwrap_err();
    assert!(matches!(e, Error::Query(QueryError::ResultTooLarge { cells: 1_099_511_627_776, .. })), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("cells (4 bytes each) needs 4398046511104 bytes (4.0 TiB), more than"), "{msg}");
    assert!(msg.contains("memory the system reports available") && msg.contains("iter_batches"), "{msg}");
    // The same query reads in batches.
    let mut q = a.read_query(&Subarray::full(a.schema()), &["a"], Layout::RowMajor).unwrap();
    let b = q.next_batch(1 << 20).unwrap().unwrap();
    assert_eq!(b.cells, 1 << 18);
    assert!(as_i32(&b.attrs[0].data).iter().all(|&v| v == i32::MIN));
    // A batch size beyond memory is refused the same way, and the query goes on.
    assert!(matches!(q.next_batch(u64::MAX), Err(Error::Query(QueryError::ResultTooLarge { .. }))));
    assert_eq!(q.next_batch(8).unwrap().unwrap().start, 1 << 18);
}

#[test]
fn the_result_limit_can_be_set() {
    let mut config = Config::new();
    config.set("sm.read.max_result_bytes", "400").unwrap();
    let a = huge(config.clone());
    let ok = a.read(&Subarray::from_ranges(&[(0, 99)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(ok.cells, 100);
    let e = a.read(&Subarray::from_ranges(&[(0, 100)]), &["a"], Layout::RowMajor).unwrap_err().to_string();
    assert!(
        e.contains(
            "of 101 cells (4 bytes each) needs 404 bytes, more than the 400 bytes allowed by sm.read.max_result_bytes"
        ),
        "{e}"
    );
    // Sparse reads too.
    let ctx = Context::with_storage(config, Arc::new(MemoryStorage::new())).unwrap();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(dim("x", 0, 999, 100))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/s", &schema).unwrap();
    let xs: Vec<i64> = (0..100).collect();
    let vals = vec![1i32; 100];
    Array::open(&ctx, "/s", Mode::Write)
        .unwrap()
        .write_sparse(
            &[CoordInput { name: "x", data: bytemuck::cast_slice(&xs) }],
            &[AttrInput::fixed("a", i32_bytes(&vals))],
        )
        .unwrap();
    let s = Array::open(&ctx, "/s", Mode::Read).unwrap();
    let e = s.sparse_query(&[vec![]], &["a"], Layout::RowMajor).unwrap().read_all().unwrap_err().to_string();
    assert!(e.contains("the result of 100 cells (12 bytes each) needs 1200 bytes"), "{e}");
    let mut q = s.sparse_query(&[vec![]], &["a"], Layout::RowMajor).unwrap();
    let mut n = 0;
    while let Some(b) = q.next_batch(120).unwrap() {
        n += b.cells;
    }
    assert_eq!(n, 100);
}

/// A dense write over 2^63 one-cell tiles: the writer's index of them would not fit in memory,
/// so the writer is refused before it allocates.
#[test]
fn a_write_over_too_many_tiles_is_refused_before_allocating() {
    let ctx = mem_ctx();
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::UInt64, (0, 1 << 63), 1))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, "/w", &schema).unwrap();
    let w = Array::open(&ctx, "/w", Mode::Write).unwrap();
    let e = w.writer(&Subarray::from_ranges(&[(0, 1 << 63)]), Layout::Global).unwrap_err().to_string();
    assert!(e.contains("covers 9223372036854775809 space tiles") && e.contains("several smaller subarrays"), "{e}");
    // A small part of the same domain writes.
    w.write(&Subarray::from_ranges(&[(1 << 63, 1 << 63)]), Layout::Global, &[AttrInput::fixed("a", i32_bytes(&[7]))])
        .unwrap();
}

/// Result columns are not zeroed before a read writes them (the plan writes every cell, from a
/// fragment or as the fill value): reads one after another, each result's memory freed and
/// likely handed to the next, over a full array, a partly written one and an empty one, with
/// plain and compressed tiles, return exactly their cells, never a byte of an earlier result.
#[test]
fn no_byte_of_an_earlier_result_shows_through() {
    for filters in [vec![], vec![Filter::Zstd { level: 1 }]] {
        let ctx = mem_ctx();
        let make = |uri: &str| {
            let mut a = Attribute::new("a", Datatype::Int32);
            a.filters = FilterPipeline::new(filters.clone());
            let schema = ArraySchema::builder(ArrayType::Dense)
                .dim(dim("r", 0, 127, 32))
                .dim(dim("c", 0, 127, 32))
                .attr(a)
                .build()
                .unwrap();
            Array::create(&ctx, uri, &schema).unwrap();
            schema
        };
        let full = make("/full");
        let full_vals = vec![0x5A5A_5A5Ai32; 128 * 128];
        Array::open(&ctx, "/full", Mode::Write)
            .unwrap()
            .write(&Subarray::full(&full), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&full_vals))])
            .unwrap();
        make("/part");
        let part_vals = vec![7i32; 10 * 20];
        Array::open(&ctx, "/part", Mode::Write)
            .unwrap()
            .write(
                &Subarray::from_ranges(&[(40, 49), (50, 69)]),
                Layout::RowMajor,
                &[AttrInput::fixed("a", i32_bytes(&part_vals))],
            )
            .unwrap();
        make("/empty");
        let whole = Subarray::from_ranges(&[(0, 127), (0, 127)]);
        let read = |uri: &str| {
            let r = Array::open(&ctx, uri, Mode::Read).unwrap();
            as_i32(&r.read(&whole, &["a"], Layout::RowMajor).unwrap().attrs[0].data)
        };
        for _ in 0..3 {
            assert!(read("/full").iter().all(|&v| v == 0x5A5A_5A5A));
            assert!(read("/empty").iter().all(|&v| v == i32::MIN), "{filters:?}");
            assert!(read("/full").iter().all(|&v| v == 0x5A5A_5A5A));
            let got = read("/part");
            for (k, &v) in got.iter().enumerate() {
                let (r, c) = (k / 128, k % 128);
                let want = if (40..50).contains(&r) && (50..70).contains(&c) { 7 } else { i32::MIN };
                assert_eq!(v, want, "cell ({r}, {c}) {filters:?}");
            }
        }
    }
}
