//! Cooking speed on a synthetic star field (background ~120, Gaussian stars, ~400 objects per
//! 10^6 cells at threshold 1000, like the sky tiles): cells per second of the sequential pass and
//! of the chunked parallel pass; then the speed of grouping and of storing and reading back.
//!
//! `cargo run --release -p tessera-ssdb --example cook_speed [side] [repeats]`

use std::time::Instant;

use tessera::{Config, Context};
use tessera_ssdb::{
    assign_ids, cook_image, cook_image_parallel, create_groups, create_observations, read_groups_meeting,
    read_observations, write_groups, write_observations, CookParams, Grouper, ObsBox, D3,
};

fn main() {
    let mut args = std::env::args().skip(1);
    let side: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3750);
    let repeats: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let pix = star_field(side, 42);
    let p = CookParams::f1(50, 50);
    let cells = (side * side * repeats) as f64;
    for (name, f) in [
        ("sequential", cook_image as fn(&[i32], usize, usize, (i64, i64), i64, CookParams) -> _),
        ("parallel", cook_image_parallel),
    ] {
        let t0 = Instant::now();
        let mut n = 0;
        for r in 0..repeats {
            n = f(&pix, side, side, (0, 0), r as i64, p).expect("cook").len();
        }
        let s = t0.elapsed().as_secs_f64();
        println!(
            "{name:>10}: {side} x {side}, {n} observations, {:.1} ms per image, {:.0} M cells/s ({} threads)",
            1000.0 * s / repeats as f64,
            cells / s / 1e6,
            rayon::current_num_threads()
        );
    }
    // Grouping: 40 images of the field, each seen from an origin moved by the ±1 apparent motion,
    // so that every object is re-observed in every image (more matches than the benchmark's data).
    let mut images = Vec::new();
    let mut next = 1;
    for t in 0..40i64 {
        let origin = (500_000 + t % 3 - 1, 500_000 + (t / 3) % 3 - 1);
        let mut obs = cook_image_parallel(&pix, side, side, origin, t, p).expect("cook");
        next = assign_ids(&mut obs, next);
        images.push(obs);
    }
    let t0 = Instant::now();
    let mut g = Grouper::new(D3::parse("0.1").expect("d3"));
    for (t, obs) in images.iter().enumerate() {
        g.push_image(t as i64, obs).expect("group");
    }
    let n = g.observations();
    let set = g.finish();
    let s = t0.elapsed().as_secs_f64();
    println!(
        "  grouping: {n} observations of 40 images, {} groups, {:.0} k observations/s",
        set.groups.len(),
        n as f64 / s / 1e3
    );

    // Storage: the observations one fragment per cycle, the groups, and reads of a cycle's box.
    let dir = tempfile::tempdir().expect("tempdir");
    let ctx = Context::new(Config::new()).expect("context");
    let uri = dir.path().join("observations");
    create_observations(&ctx, &uri).expect("create");
    let t0 = Instant::now();
    for cycle in images.chunks(20) {
        write_observations(&ctx, &uri, &cycle.concat()).expect("write");
    }
    let w = t0.elapsed().as_secs_f64();
    create_groups(&ctx, dir.path()).expect("create groups");
    let t0 = Instant::now();
    write_groups(&ctx, dir.path(), &set).expect("write groups");
    let wg = t0.elapsed().as_secs_f64();
    let (x, y) = ((501_000, 501_999), (501_000, 501_999));
    let t0 = Instant::now();
    let got = read_observations(&ctx, &uri, &ObsBox::cycle(1, x, y)).expect("read");
    let r = t0.elapsed().as_secs_f64();
    let t0 = Instant::now();
    let groups = read_groups_meeting(&ctx, dir.path(), x, y).expect("read groups");
    let rg = t0.elapsed().as_secs_f64();
    println!(
        "   storage: observations written at {:.0} k/s, groups at {:.0} k/s; a cycle's 1000 x 1000 box: \
         {} observations in {:.1} ms, {} groups in {:.1} ms",
        n as f64 / w / 1e3,
        set.groups.len() as f64 / wg / 1e3,
        got.len(),
        1e3 * r,
        groups.len(),
        1e3 * rg
    );
}

/// A deterministic star field: background 120 ± 25, ~700 stars per 10^6 cells.
fn star_field(side: usize, seed: u64) -> Vec<i32> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut rnd = move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut img: Vec<f64> = (0..side * side).map(|_| 120.0 + 50.0 * (rnd() - 0.5)).collect();
    let stars = side * side * 7 / 10_000;
    for _ in 0..stars {
        let (x, y) = (rnd() * side as f64, rnd() * side as f64);
        let a = 500.0 * (1.0 - rnd()).powf(-1.0 / 0.85);
        let sigma = 1.6 + 2.0 * rnd();
        let h = (sigma * (2.0 * (a / 0.01).max(1.0).ln()).sqrt()).min(40.0);
        let (x0, x1) = ((x - h).max(0.0) as usize, ((x + h) as usize).min(side - 1));
        let (y0, y1) = ((y - h).max(0.0) as usize, ((y + h) as usize).min(side - 1));
        for ty in y0..=y1 {
            for tx in x0..=x1 {
                let d2 = (tx as f64 + 0.5 - x).powi(2) + (ty as f64 + 0.5 - y).powi(2);
                img[ty * side + tx] += a * (-d2 / (2.0 * sigma * sigma)).exp();
            }
        }
    }
    img.into_iter().map(|v| v.round().clamp(0.0, 65535.0) as i32).collect()
}
