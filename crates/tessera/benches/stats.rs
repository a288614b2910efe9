//! Statistics and tile-cache benchmark (issue 5).
//!
//! 1. A read-heavy run (many small reads) with statistics disabled and enabled, median of
//!    several runs each, interleaved. The cost of the disabled hooks is bounded from the same
//!    run: the number of hook calls (counted with statistics enabled) times the measured cost of
//!    one disabled hook call, over the run's time.
//! 2. A read with a cold tile cache against the same read repeated with a warm one.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use std::time::{Duration, Instant};

use tessera::stats::{self, Counter};
use tessera::*;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let dir = std::env::temp_dir().join("tessera-bench-stats");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (rows, cols) = (4000i128, 4000i128);
    let mut a = Attribute::new("a", Datatype::Int32);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("r", Datatype::Int64, (1, rows), 100))
        .dim(Dimension::new("c", Datatype::Int64, (1, cols), 100))
        .attr(a)
        .build()
        .unwrap();
    let vals: Vec<i32> = (0..rows * cols).map(|k| ((k / cols) * 7 + (k % cols)) as i32).collect();
    let ctx = Context::new(Config::new()).unwrap();
    let uri = dir.join("a");
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();

    // 1. Read-heavy run: 400 reads of 120 x 120 squares at pseudo-random places (4 tiles each).
    let squares: Vec<(i128, i128)> =
        (0..400u64).map(|i| (1 + ((i * 7919) % 3800) as i128, 1 + ((i * 104_729) % 3800) as i128)).collect();
    let run = || {
        let t = Instant::now();
        for &(x, y) in &squares {
            let res = r.read(&Subarray::from_ranges(&[(x, x + 119), (y, y + 119)]), &["a"], Layout::RowMajor).unwrap();
            std::hint::black_box(res);
        }
        t.elapsed()
    };
    run(); // warm the page cache
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..7 {
        stats::disable();
        off.push(run());
        stats::reset();
        stats::enable();
        on.push(run());
        stats::disable();
    }
    let hook_calls = stats::hook_calls();
    // One disabled hook: a relaxed atomic load and a branch.
    let n = 50_000_000u64;
    let t = Instant::now();
    for i in 0..n {
        stats::add(Counter::VfsReadNumRequests, std::hint::black_box(i) & 1);
    }
    let per_hook = t.elapsed().as_secs_f64() / n as f64;
    let (off_m, on_m) = (median(off), median(on));
    let per_run_calls = hook_calls as f64; // the last enabled run (reset before each)
    println!("# statistics overhead: 400 reads of 120 x 120 int32 (zstd-1 tiles of 100 x 100), median of 7 runs");
    println!("stats disabled: {:>9.3} ms per run", off_m.as_secs_f64() * 1e3);
    println!(
        "stats enabled:  {:>9.3} ms per run ({:+.2}% vs disabled)",
        on_m.as_secs_f64() * 1e3,
        100.0 * (on_m.as_secs_f64() / off_m.as_secs_f64() - 1.0)
    );
    println!(
        "disabled hooks: {:.0} calls per run x {:.2} ns = {:.3} ms, {:.4}% of the run (bound on their cost)",
        per_run_calls,
        per_hook * 1e9,
        per_run_calls * per_hook * 1e3,
        100.0 * per_run_calls * per_hook / off_m.as_secs_f64()
    );

    // 2. Cold against warm tile cache: one 1000 x 4000 read (40 tiles).
    let mut c = Config::new();
    c.set("sm.tile_cache_size", &(256u64 << 20).to_string()).unwrap();
    let sub = Subarray::from_ranges(&[(1, 1000), (1, cols)]);
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let cctx = Context::new(c.clone()).unwrap(); // a new, empty cache
        let rc = Array::open(&cctx, &uri, Mode::Read).unwrap();
        let t = Instant::now();
        std::hint::black_box(rc.read(&sub, &["a"], Layout::RowMajor).unwrap());
        cold.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(rc.read(&sub, &["a"], Layout::RowMajor).unwrap());
        warm.push(t.elapsed());
        assert_eq!(cctx.tile_cache().stats().hits, 400);
    }
    let (cold, warm) = (median(cold), median(warm));
    println!("\n# tile cache: read of 1000 x 4000 int32 (400 zstd-1 tiles of 100 x 100), median of 5");
    println!("cold cache: {:>9.3} ms", cold.as_secs_f64() * 1e3);
    println!(
        "warm cache: {:>9.3} ms ({:.1}x faster: no I/O, no decompression)",
        warm.as_secs_f64() * 1e3,
        cold.as_secs_f64() / warm.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
