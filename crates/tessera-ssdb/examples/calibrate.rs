//! SSDB.md §1's calibration of the sky tiles, measured with this crate's cooking: each of the 10
//! tiles of a `tileData` file cooked as a 1000 x 1000 image; detections (8-connected components
//! before the drop rule) per 10^6 cells at thresholds 1000 and 900, the mean polygon size, the
//! share over 50 vertices, saturated cells and the mean pix.
//!
//! Then the speed of F1 on them.
//!
//! `cargo run --release -p tessera-ssdb --example calibrate -- PATH/tileData`

use std::time::Instant;

use tessera_ssdb::{cook_image, cook_image_parallel, sha256_hex, CookParams};

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| "/work/ssdb-cache/tileData".into());
    let bytes = std::fs::read(&path).expect("read tileData");
    println!("{path}: {} bytes, sha256 {}", bytes.len(), sha256_hex(&bytes));
    let int = |i: usize| i32::from_le_bytes([bytes[4 * i], bytes[4 * i + 1], bytes[4 * i + 2], bytes[4 * i + 3]]);
    let side = usize::try_from(int(0)).expect("xSize");
    assert_eq!(int(1) as usize, side, "square tiles");
    let cells = side * side;
    let (mut sum, mut sat) = (0u64, 0u64);
    let mut tiles = Vec::new();
    for k in 0..10 {
        let at = 16 + 2 * cells * k;
        let pix: Vec<i32> =
            bytes[at..at + 2 * cells].chunks_exact(2).map(|b| i32::from(u16::from_le_bytes([b[0], b[1]]))).collect();
        sum += pix.iter().map(|&p| p as u64).sum::<u64>();
        sat += pix.iter().filter(|&&p| p == 65535).count() as u64;
        tiles.push(pix);
    }
    let total = (10 * cells) as f64;
    println!("mean pix {:.1}, saturated {:.4}%", sum as f64 / total, 100.0 * sat as f64 / total);
    for th in [1000, 900] {
        let p = CookParams { th, d1: u32::MAX, d2: u32::MAX };
        let (mut n, mut vertices, mut over50, mut kept) = (0usize, 0usize, 0usize, 0usize);
        for pix in &tiles {
            let obs = cook_image_parallel(pix, side, side, (0, 0), 0, p).expect("cook");
            n += obs.len();
            vertices += obs.iter().map(|o| o.polygon.len()).sum::<usize>();
            over50 += obs.iter().filter(|o| o.polygon.len() > 50).count();
            kept +=
                cook_image_parallel(pix, side, side, (0, 0), 0, CookParams { th, d1: 50, d2: 50 }).expect("cook").len();
        }
        println!(
            "th {th}: {:.1} detections per 10^6 cells, mean polygon {:.2} vertices, {:.2}% over 50 vertices, \
             {:.1} kept per 10^6 cells with D1 = D2 = 50",
            n as f64 / total * 1e6,
            vertices as f64 / n as f64,
            100.0 * over50 as f64 / n as f64,
            kept as f64 / total * 1e6
        );
    }
    // Speed of F1 (D1 = D2 = 50) over the 10 tiles, 3 times.
    let p = CookParams::f1(50, 50);
    for (name, parallel) in [("sequential", false), ("parallel", true)] {
        let t0 = Instant::now();
        for _ in 0..3 {
            for pix in &tiles {
                let f = if parallel { cook_image_parallel } else { cook_image };
                std::hint::black_box(f(pix, side, side, (0, 0), 0, p).expect("cook"));
            }
        }
        let s = t0.elapsed().as_secs_f64();
        println!("F1 {name}: {:.0} M cells/s", 3.0 * total / s / 1e6);
    }
}
