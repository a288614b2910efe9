//! The TileDB paper's Figure 12 at our scale (issue 4): a dense array written as one fragment,
//! then 10, 100 and 1000 sparse fragments of 1,000 random cells each; the mean time of random
//! 1K x 1K subarray reads after each step and after consolidation; consolidation time beside the
//! initial load time. Each step's reads alternate with the same reads of the one-fragment
//! snapshot (time travel to the load), so ratios compare like with like on a busy machine.
//!
//! `cargo bench -p tessera --bench fragments -- [--rows R] [--cols C] [--reads N] [--passes P]`
//! (default 15000 x 17500 int32 = 1.05 GB in 1000 x 2500 tiles, 100 reads timed 4 times each).
//! The first read after each step's open is timed apart: it builds the update index of the small
//! fragments (`sm.read.update_index_size`), which later reads use. `FRAGMENT_STEPS=10,100`
//! chooses the steps; `FRAGMENT_KEEP=1` stops before consolidation and keeps the array for profiling.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use std::time::{Duration, Instant};

use tessera::*;

mod common;
use common::Rng;

fn arg(name: &str, default: i128) -> i128 {
    let v: Vec<String> = std::env::args().collect();
    v.iter().position(|a| a == name).and_then(|i| v.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn read_square(r: &Array, x: i128, y: i128, side: i128) -> Duration {
    let t = Instant::now();
    let res =
        r.read(&Subarray::from_ranges(&[(x, x + side - 1), (y, y + side - 1)]), &["a"], Layout::RowMajor).unwrap();
    std::hint::black_box(res);
    t.elapsed()
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Reads every square from `base` (the one-fragment snapshot, opened at the load's timestamp)
/// and from `now`, alternately, so that both see the same machine: the ratio of the two is what
/// the step costs, even while other work slows the machine down. Returns the median and mean
/// of `now`, the ratio of the means and the median of the pairs' ratios.
fn paired_reads(
    base: &Array,
    now: &Array,
    squares: &[(i128, i128)],
    side: i128,
    per_pass: usize,
) -> (Duration, Duration, f64, f64) {
    let (mut b, mut n) = (Vec::new(), Vec::new());
    for (k, &(x, y)) in squares.iter().enumerate() {
        // Which goes first alternates between neighbours and between passes (`per_pass` reads
        // each), so that every read is first in half of its passes: the second read of a read
        // finds it in the CPU caches, and reads differ in cost.
        if (k + k / per_pass.max(1)).is_multiple_of(2) {
            b.push(read_square(base, x, y, side));
            n.push(read_square(now, x, y, side));
        } else {
            n.push(read_square(now, x, y, side));
            b.push(read_square(base, x, y, side));
        }
    }
    let mean = |v: &[Duration]| v.iter().sum::<Duration>() / v.len() as u32;
    let (mb, mn) = (mean(&b), mean(&n));
    // The median of the pairs' own ratios: robust to a few slow reads on either side.
    let mut ratios: Vec<f64> = n.iter().zip(&b).map(|(n, b)| n.as_secs_f64() / b.as_secs_f64()).collect();
    ratios.sort_by(f64::total_cmp);
    (median(&mut n), mn, mn.as_secs_f64() / mb.as_secs_f64(), ratios[ratios.len() / 2])
}

fn report(label: &str, (med, mean, rmean, rmed): (Duration, Duration, f64, f64), extra: &str) {
    println!(
        "{label:<17} {:>8.3} ms per read ({rmean:.2}x), median {:.3} ms (median ratio {rmed:.2}x){extra}",
        mean.as_secs_f64() * 1e3,
        med.as_secs_f64() * 1e3
    );
}

fn main() {
    let (rows, cols, nreads) = (arg("--rows", 15000), arg("--cols", 17500), arg("--reads", 100) as usize);
    let passes = arg("--passes", 4).max(1) as usize;
    let side = 1000.min(rows).min(cols);
    let dir = std::env::temp_dir().join("tessera-bench-fragments");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let uri = dir.join("a");
    let ctx = Context::new(Config::new()).unwrap();
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (1, rows), 1000.min(rows as u64)))
        .dim(Dimension::new("c", Datatype::Int64, (1, cols), 2500.min(cols as u64)))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    let ncols = cols as i32;
    let data: Vec<i32> = (0..rows as i32).flat_map(|i| (0..cols as i32).map(move |j| i % ncols + j)).collect();
    Array::create(&ctx, &uri, &schema).unwrap();
    let t = Instant::now();
    Array::open(&ctx, &uri, Mode::Write)
        .unwrap()
        .write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&data))])
        .unwrap();
    let load = t.elapsed();
    drop(data);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let squares: Vec<(i128, i128)> = (0..nreads)
        .map(|_| (1 + rng.below((rows - side + 1) as u64) as i128, 1 + rng.below((cols - side + 1) as u64) as i128))
        .collect();
    println!(
        "# fragments: {rows} x {cols} int32 ({:.2} GB) in 1000 x 2500 tiles; {nreads} random {side} x {side} reads per step",
        (rows * cols * 4) as f64 / 1e9
    );
    println!("initial load (one dense fragment): {:.3} s", load.as_secs_f64());
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let loaded_at = r.fragments()[0].name.t1;
    let base = Array::open_at(&ctx, &uri, Mode::Read, Some(loaded_at)).unwrap();
    assert_eq!(base.fragments().len(), 1);
    // Warm the page cache.
    paired_reads(&base, &r, &squares[..nreads.min(10)], side, nreads);
    // Every square is read `passes` times (in turn), so one slow read weighs less.
    let timed = squares.repeat(passes);
    report("    1 fragments:", paired_reads(&base, &r, &timed, side, nreads), "");
    drop(r);
    let mut written = 0;
    let steps: Vec<usize> = match std::env::var("FRAGMENT_STEPS") {
        Ok(v) => v.split(',').filter_map(|x| x.parse().ok()).collect(),
        Err(_) => vec![10, 100, 1000],
    };
    for target in steps {
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let t = Instant::now();
        while written < target {
            let n = 1000;
            let rs: Vec<i64> = (0..n).map(|_| 1 + rng.below(rows as u64) as i64).collect();
            let cs: Vec<i64> = (0..n).map(|_| 1 + rng.below(cols as u64) as i64).collect();
            let mut seen = std::collections::HashSet::new();
            let keep: Vec<usize> = (0..n).filter(|&k| seen.insert((rs[k], cs[k]))).collect();
            let (rs, cs): (Vec<i64>, Vec<i64>) = keep.iter().map(|&k| (rs[k], cs[k])).unzip();
            let vals: Vec<i32> = (0..rs.len() as i32).map(|k| -k).collect();
            w.write_sparse(
                &[
                    CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
                    CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
                ],
                &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))],
            )
            .unwrap();
            written += 1;
        }
        let writes = t.elapsed();
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        assert_eq!(r.fragments().len(), 1 + target);
        let first = read_square(&r, squares[0].0, squares[0].1, side);
        report(
            &format!("{:>5} fragments:", 1 + target),
            paired_reads(&base, &r, &timed, side, nreads),
            &format!(
                "   [{} updates of 1,000 cells written in {:.2} s; first read after opening {:.1} ms]",
                target,
                writes.as_secs_f64(),
                first.as_secs_f64() * 1e3
            ),
        );
    }
    if std::env::var_os("FRAGMENT_KEEP").is_some() {
        println!("kept {} (FRAGMENT_KEEP)", uri.display());
        return;
    }
    let t = Instant::now();
    consolidate(&ctx, &uri, &Selection::All).unwrap();
    let cons = t.elapsed();
    // The one-fragment snapshot holds a shared lock that vacuum would wait for; the consolidated
    // array is compared with a fresh copy of the load instead.
    drop(base);
    vacuum(&ctx, &uri).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let copy = dir.join("base");
    Array::create(&ctx, &copy, &schema).unwrap();
    let data: Vec<i32> = (0..rows as i32).flat_map(|i| (0..cols as i32).map(move |j| i % ncols + j)).collect();
    // The same load again, timed: the disk's speed drifts (the first load took 1.4-3.0 s in
    // different runs), so consolidation is also compared with a load made just after it.
    let t = Instant::now();
    Array::open(&ctx, &copy, Mode::Write)
        .unwrap()
        .write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&data))])
        .unwrap();
    let reload = t.elapsed();
    drop(data);
    let base = Array::open(&ctx, &copy, Mode::Read).unwrap();
    paired_reads(&base, &r, &squares[..nreads.min(10)], side, nreads);
    report("consolidated:", paired_reads(&base, &r, &timed, side, nreads), "");
    println!(
        "consolidation of {} fragments: {:.3} s ({:.2}x the initial load, {:.2}x the same load made just after it, {:.3} s)",
        1 + written,
        cons.as_secs_f64(),
        cons.as_secs_f64() / load.as_secs_f64(),
        cons.as_secs_f64() / reload.as_secs_f64(),
        reload.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
