//! Dense reads: results too large for memory are refused before anything is allocated, with an
//! error that says how much memory the result needs and how to read it in batches.

use std::sync::Arc;

use tessera::*;

use crate::common::*;

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
