//! Sparse load and read micro-benchmark: N skewed 2-D int64 points (clusters plus uniform
//! background, like AIS positions) in 10 unordered writes, then box queries of growing size, in
//! global and unordered layout. `cargo bench -p tessera --bench sparse -- [--points N]`.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use std::time::Instant;

use tessera::*;

mod common;
use common::Rng;

fn main() {
    let v: Vec<String> = std::env::args().collect();
    let n: usize = v
        .iter()
        .position(|a| a == "--points")
        .and_then(|i| v.get(i + 1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let dir = std::env::temp_dir().join("tessera-bench-sparse");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let uri = dir.join("a");
    let ctx = Context::new(Config::new()).unwrap();
    let mut attrs = Vec::new();
    for name in ["sog", "cog", "heading", "rot", "status"] {
        let mut a = Attribute::new(name, Datatype::Int64);
        a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
        attrs.push(a);
    }
    let mut b = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, 359_999_999), 10_000_000))
        .dim(Dimension::new("y", Datatype::Int64, (0, 179_999_999), 10_000_000))
        .capacity(10_000);
    for a in attrs {
        b = b.attr(a);
    }
    let schema = b.build().unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let mut rng = Rng(42);
    let centres: Vec<(f64, f64)> = (0..300).map(|_| (rng.unit() * 3.6e8, rng.unit() * 1.8e8)).collect();
    let mut load = std::time::Duration::ZERO;
    let per = n / 10;
    for month in 0..10 {
        let mut xs = Vec::with_capacity(per);
        let mut ys = Vec::with_capacity(per);
        let mut seen = std::collections::HashSet::with_capacity(per);
        while xs.len() < per {
            let (x, y) = if rng.unit() < 0.8 {
                let c = centres[(rng.next() % 300) as usize];
                let r = 2e6 * rng.unit().powi(2);
                let a = rng.unit() * std::f64::consts::TAU;
                (c.0 + r * a.cos(), c.1 + r * a.sin())
            } else {
                (rng.unit() * 3.6e8, rng.unit() * 1.8e8)
            };
            let (x, y) = ((x as i64).clamp(0, 359_999_999), (y as i64).clamp(0, 179_999_999));
            if seen.insert((x, y, month)) {
                xs.push(x);
                ys.push(y);
            }
        }
        let vals: Vec<Vec<i64>> = (0..5).map(|k| (0..per as i64).map(|i| i * (k + 1)).collect()).collect();
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let names = ["sog", "cog", "heading", "rot", "status"];
        let inputs: Vec<AttrInput<'_>> =
            names.iter().zip(&vals).map(|(nm, v)| AttrInput::fixed(nm, bytemuck::cast_slice(v))).collect();
        let t = Instant::now();
        w.write_sparse(
            &[
                CoordInput { name: "x", data: bytemuck::cast_slice(&xs) },
                CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
            ],
            &inputs,
        )
        .unwrap();
        load += t.elapsed();
    }
    println!("# sparse: {n} points in 10 unordered writes, 5 int64 attributes (zstd-1)");
    println!("load: {:.3} s ({:.2} M points/s)", load.as_secs_f64(), n as f64 / 1e6 / load.as_secs_f64());
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let c = centres[0];
    for half in [2e6f64, 3e7, 1e8] {
        let ranges = vec![
            vec![DimRange::Int((c.0 - half).max(0.0) as i128, (c.0 + half).min(359_999_999.0) as i128)],
            vec![DimRange::Int((c.1 - half).max(0.0) as i128, (c.1 + half).min(179_999_999.0) as i128)],
        ];
        for layout in [Layout::Global, Layout::Unordered] {
            let mut times = Vec::new();
            let mut cells = 0;
            for _ in 0..5 {
                let t = Instant::now();
                let mut q = r.sparse_query(&ranges, &[], layout).unwrap();
                cells = q.read_all().unwrap().cells;
                times.push(t.elapsed());
            }
            times.sort();
            println!("box +-{half:>9.0}: {cells:>8} cells, {:>9.3} ms ({:?})", times[2].as_secs_f64() * 1e3, layout);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
