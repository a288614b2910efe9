//! Helpers shared by the integration tests.

use std::sync::Arc;

use tessera::*;

pub fn mem_ctx() -> Context {
    let mut c = Config::new();
    c.set("sm.compute_concurrency", "2").unwrap();
    Context::with_storage(c, Arc::new(MemoryStorage::new())).unwrap()
}

pub fn local_ctx() -> Context {
    Context::new(Config::new()).unwrap()
}

pub fn dim(name: &str, lo: i128, hi: i128, tile: u64) -> Dimension {
    Dimension::new(name, Datatype::Int64, (lo, hi), tile)
}

pub fn i32_bytes(v: &[i32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

pub fn as_i32(b: &[u8]) -> Vec<i32> {
    b.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// A 2-D int32 array `rows x cols` with tiles `tr x tc`.
pub fn schema_2d(rows: i128, cols: i128, tr: u64, tc: u64) -> ArraySchema {
    ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, rows, tr))
        .dim(dim("c", 1, cols, tc))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap()
}
