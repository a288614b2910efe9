//! The cost of plain and conditioned reads, for before/after comparisons (run it under
//! `valgrind --tool=callgrind` for instruction counts, or as is for wall times):
//!
//! ```text
//! cargo run --release -p tessera --example read_cost -- DIR plain|where|filter [REPEAT]
//! ```
//!
//! `plain` reads a 1000 x 1000 dense int32 array and a sparse array of 1,000,000 cells (two
//! overlapping fragments) whole; `where` reads the sparse one with `a >= 900000 and b < 50`
//! (about 5% of the cells) in the engine; `filter` reads it whole and filters in the caller,
//! the reference `where` is measured against. The arrays are made in `DIR` on first use.

#![allow(clippy::unwrap_used, missing_docs)]

use std::time::Instant;

use tessera::*;

const N: i64 = 1000;

fn bytes<T: Copy>(v: &[T], f: impl Fn(T) -> Vec<u8>) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

fn make(ctx: &Context, dir: &std::path::Path) {
    let dense = dir.join("dense");
    if !dense.exists() {
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("r", Datatype::Int64, (0, (N - 1).into()), 100))
            .dim(Dimension::new("c", Datatype::Int64, (0, (N - 1).into()), 100))
            .attr(Attribute::new("a", Datatype::Int32))
            .build()
            .unwrap();
        Array::create(ctx, &dense, &schema).unwrap();
        let v: Vec<i32> = (0..(N * N) as i32).collect();
        let w = Array::open(ctx, &dense, Mode::Write).unwrap();
        w.write(
            &Subarray::full(&schema),
            Layout::RowMajor,
            &[AttrInput::fixed("a", &bytes(&v, |x| x.to_le_bytes().to_vec()))],
        )
        .unwrap();
    }
    let sparse = dir.join("sparse");
    if !sparse.exists() {
        let schema = ArraySchema::builder(ArrayType::Sparse)
            .dim(Dimension::new("x", Datatype::Int64, (0, (N - 1).into()), 100))
            .dim(Dimension::new("y", Datatype::Int64, (0, (N - 1).into()), 100))
            .attr(Attribute::new("a", Datatype::Int32))
            .attr(Attribute::new("b", Datatype::Float64))
            .build()
            .unwrap();
        Array::create(ctx, &sparse, &schema).unwrap();
        // All cells, then a tenth of them again (newer values).
        for (step, base) in [(1i64, 0i32), (10, 1)] {
            let cells: Vec<i64> = (0..N * N).step_by(step as usize).collect();
            let xs: Vec<i64> = cells.iter().map(|k| k / N).collect();
            let ys: Vec<i64> = cells.iter().map(|k| k % N).collect();
            let a: Vec<i32> = cells.iter().map(|&k| base + k as i32).collect();
            let b: Vec<f64> = cells.iter().map(|&k| ((k * 7919) % 1000) as f64 / 10.0).collect();
            let w = Array::open(ctx, &sparse, Mode::Write).unwrap();
            w.write_sparse(
                &[
                    CoordInput { name: "x", data: &bytes(&xs, |x| x.to_le_bytes().to_vec()) },
                    CoordInput { name: "y", data: &bytes(&ys, |x| x.to_le_bytes().to_vec()) },
                ],
                &[
                    AttrInput::fixed("a", &bytes(&a, |x| x.to_le_bytes().to_vec())),
                    AttrInput::fixed("b", &bytes(&b, |x| x.to_le_bytes().to_vec())),
                ],
            )
            .unwrap();
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = std::path::PathBuf::from(&args[1]);
    let what = args.get(2).map_or("plain", String::as_str);
    let repeat: usize = args.get(3).map_or(1, |r| r.parse().unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let ctx = Context::new(Config::new()).unwrap();
    make(&ctx, &dir);
    let all = vec![Vec::new(), Vec::new()];
    for _ in 0..repeat {
        let t = Instant::now();
        let cells = match what {
            "plain" => {
                let d = Array::open(&ctx, dir.join("dense"), Mode::Read).unwrap();
                let n = d.read(&Subarray::full(d.schema()), &["a"], Layout::RowMajor).unwrap().cells;
                let s = Array::open(&ctx, dir.join("sparse"), Mode::Read).unwrap();
                n + s.sparse_query(&all, &[], Layout::Unordered).unwrap().read_all().unwrap().cells
            }
            "filter" => {
                let s = Array::open(&ctx, dir.join("sparse"), Mode::Read).unwrap();
                let r = s.sparse_query(&all, &[], Layout::Unordered).unwrap().read_all().unwrap();
                let a = &r.attr("a").unwrap().data;
                let b = &r.attr("b").unwrap().data;
                a.chunks_exact(4)
                    .zip(b.chunks_exact(8))
                    .filter(|(a, b)| {
                        i32::from_le_bytes((*a).try_into().unwrap()) >= 900_000
                            && f64::from_le_bytes((*b).try_into().unwrap()) < 50.0
                    })
                    .count() as u64
            }
            _ => {
                let s = Array::open(&ctx, dir.join("sparse"), Mode::Read).unwrap();
                let c = Condition::parse("a >= 900000 and b < 50").unwrap();
                s.sparse_query_where(&all, &[], Layout::Unordered, &c).unwrap().read_all().unwrap().cells
            }
        };
        println!("{what}: {cells} cells in {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    }
}
