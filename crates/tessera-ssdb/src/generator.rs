//! The image generator (SSDB.md section 1): the 11 int32 attributes of every cell of image t,
//! produced a band of rows at a time, rows in parallel.
//!
//! Per cell the work is table look-ups: the sky tile row (a slice copy per run of cells in one
//! tile), `var` and `v0` per pix value (65536 entries each), and the six noise values per
//! `s = (3141 t + 592 x + y) mod 65359` (65359 x 6 int32, computed once). `s` advances by 592
//! per cell along a row, so no division is done per cell.

use rayon::prelude::*;

use crate::params::{actual_origin, norm, Config, W};
use crate::tiles::{SkyTiles, PERIOD, TILE_SIDE};

/// The attributes of a raw image, in SSDB.md's order.
pub const ATTRS: [&str; 11] = ["pix", "var", "valid", "sat", "v0", "v1", "v2", "v3", "v4", "v5", "v6"];
/// Index of `pix` in [`ATTRS`].
pub const PIX: usize = 0;

/// The period of the noise index s.
pub const NOISE_PERIOD: i64 = 65_359;
/// The first 101 digits of pi: the tile of each tile-sized block of the world.
const PI_DIGITS: &[u8; 101] =
    b"31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679";

/// Rows of one image, one buffer per attribute (row-major, `rows * width` values each).
#[derive(Debug, Clone)]
pub struct Band {
    /// First local row.
    pub y0: i64,
    /// Number of rows.
    pub rows: usize,
    /// Cells per row (the image side).
    pub width: usize,
    /// Per attribute of [`ATTRS`], the values.
    pub attrs: Vec<Vec<i32>>,
}

impl Band {
    /// An empty band for rows of `width` cells.
    pub fn new(width: usize) -> Self {
        Self { y0: 0, rows: 0, width, attrs: vec![Vec::new(); ATTRS.len()] }
    }
}

/// Everything the per-cell work looks up; built once per run.
#[derive(Debug, Clone)]
pub struct Generator {
    config: Config,
    tiles: SkyTiles,
    /// `v1..v6` per noise index s.
    noise: Vec<[i32; 6]>,
    /// `var = floor(sqrt(pix))` per pix.
    var: Vec<i32>,
    /// `v0 = max(0, trunc((pix - 3000) * 65535 / 62535))` per pix.
    v0: Vec<i32>,
}

impl Generator {
    /// The tables for `config`.
    pub fn new(config: Config, tiles: SkyTiles) -> Self {
        let noise = (0..NOISE_PERIOD as i32).into_par_iter().map(noise_values).collect();
        let var = (0..=65_535u32).map(|p| isqrt(p) as i32).collect();
        // The exact quotient, as float64 division of these integers gives the same truncation:
        // a non-integer quotient is at least 1/62535 away from an integer, far above the
        // rounding error.
        let v0 = (0..=65_535i64).map(|p| ((p - 3000) * 65_535).div_euclid(62_535).max(0) as i32).collect();
        Self { config, tiles, noise, var, v0 }
    }

    /// The configuration.
    pub fn config(&self) -> Config {
        self.config
    }

    /// Fills `band` with rows `y0 .. y0 + rows` of image `t`, rows in parallel.
    pub fn fill(&self, t: u32, y0: i64, rows: usize, band: &mut Band) {
        let width = band.width;
        band.y0 = y0;
        band.rows = rows;
        for a in &mut band.attrs {
            a.resize(rows * width, 0);
        }
        let per_task = rows.div_ceil(rayon::current_num_threads() * 4).max(1);
        let mut tasks: Vec<Vec<&mut [i32]>> = (0..rows.div_ceil(per_task)).map(|_| Vec::with_capacity(11)).collect();
        for a in &mut band.attrs {
            for (i, chunk) in a.chunks_mut(per_task * width).enumerate() {
                tasks[i].push(chunk);
            }
        }
        let origin = actual_origin(self.config, t);
        tasks.into_par_iter().enumerate().for_each(|(i, mut cols)| {
            let first = y0 + (i * per_task) as i64;
            let n = cols[0].len() / width;
            for r in 0..n {
                let mut row: Vec<&mut [i32]> = cols.iter_mut().map(|c| &mut c[r * width..(r + 1) * width]).collect();
                self.row(t, origin, first + r as i64, &mut row);
            }
        });
    }

    /// One row: local row `y` of image `t` rendered from the actual origin `(ax, ay)`.
    fn row(&self, t: u32, (ax, ay): (i64, i64), y: i64, out: &mut [&mut [i32]]) {
        let width = out[0].len();
        let wy = ay + y;
        let ty = wy.rem_euclid(PERIOD) as usize;
        let block_row = wy.div_euclid(PERIOD) * (W / PERIOD + 1);
        // Pass 1: the sky value (pix before the shift) and valid.
        {
            let (pix, rest) = out.split_at_mut(1);
            let (pix, valid) = (&mut *pix[0], &mut *rest[1]);
            let mut x = 0usize;
            while x < width {
                let wx = ax + x as i64;
                let tx = wx.rem_euclid(PERIOD) as usize;
                let end = (x + (PERIOD as usize - tx)).min(width);
                let inside = if ty < TILE_SIDE { TILE_SIDE.saturating_sub(tx).min(end - x) } else { 0 };
                if inside > 0 {
                    let k = usize::from(PI_DIGITS[((wx.div_euclid(PERIOD) + block_row) % 101) as usize] - b'0');
                    let src = &self.tiles.row(k, ty)[tx..tx + inside];
                    for (d, s) in pix[x..x + inside].iter_mut().zip(src) {
                        *d = i32::from(*s);
                    }
                    valid[x..x + inside].fill(1);
                }
                pix[x + inside..end].fill(0);
                valid[x + inside..end].fill(0);
                x = end;
            }
        }
        // Pass 2: sat, the brightness shift, var, v0 and the noise.
        let shift = (t % 5) as i32 * 10 - 20;
        let mut s = (3141 * i64::from(t) + 592 * ax + wy).rem_euclid(NOISE_PERIOD) as usize;
        let (head, noise) = out.split_at_mut(5);
        let [pix, var, _valid, sat, v0] = head else { return };
        let [n1, n2, n3, n4, n5, n6] = noise else { return };
        for x in 0..width {
            let p = pix[x];
            sat[x] = i32::from(p == 65_535);
            let p = (p + shift).clamp(0, 65_535);
            pix[x] = p;
            var[x] = self.var[p as usize];
            v0[x] = self.v0[p as usize];
            let n = &self.noise[s];
            n1[x] = n[0];
            n2[x] = n[1];
            n3[x] = n[2];
            n4[x] = n[3];
            n5[x] = n[4];
            n6[x] = n[5];
            s += 592;
            if s >= NOISE_PERIOD as usize {
                s -= NOISE_PERIOD as usize;
            }
        }
    }
}

/// `v1..v6` for noise index `s`: `Nk = norm(6s + k)`, each value computed in float64 and
/// truncated toward zero like a C cast.
#[allow(clippy::cast_possible_truncation)]
fn noise_values(s: i32) -> [i32; 6] {
    let n = |k: i32| norm(6 * s + k);
    [
        (65_535.0 * n(1)) as i32,
        (32_768.0 + 32_768.0 * n(2)) as i32,
        (-5e8 + 1e6 * n(3)) as i32,
        (10.0 * n(4)) as i32,
        (1000.0 + 100.0 * n(5)) as i32,
        (1.0 + 0.5 * n(6)) as i32,
    ]
}

/// `floor(sqrt(p))` exactly.
fn isqrt(p: u32) -> u32 {
    let mut r = f64::from(p).sqrt() as u32;
    while r * r > p {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= p {
        r += 1;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::nominal_llc;

    /// Section 1's formula for one cell, written out directly (no tables, no increments).
    #[allow(clippy::cast_possible_truncation)]
    fn reference_cell(config: Config, tiles: &SkyTiles, t: u32, x: i64, y: i64) -> [i32; 11] {
        let (nx, ny) = nominal_llc(config, t);
        let ax = (nx + i64::from(t % 3) - 1).max(0);
        let ay = (ny + i64::from((t / 3) % 3) - 1).max(0);
        let (wx, wy) = (ax + x, ay + y);
        let k = (PI_DIGITS[((wx / 1024 + (wy / 1024) * (W / 1024 + 1)) % 101) as usize] - b'0') as usize;
        let (tx, ty) = ((wx % 1024) as usize, (wy % 1024) as usize);
        let (valid, raw) = if tx >= 1000 || ty >= 1000 { (0, 0) } else { (1, i64::from(tiles.row(k, ty)[tx])) };
        let sat = i32::from(raw == 65_535);
        let pix = (raw + (i64::from(t % 5) - 2) * 10).clamp(0, 65_535);
        let var = (pix as f64).sqrt().floor() as i32;
        let v0 = (((pix - 3000) as f64) * 65_535.0 / 62_535.0).trunc().max(0.0) as i32;
        let s = ((3141 * i64::from(t) + 592 * wx + wy) % 65_359) as i32;
        let n = |k: i32| norm(6 * s + k);
        [
            pix as i32,
            var,
            valid,
            sat,
            v0,
            (65_535.0 * n(1)).trunc() as i32,
            (32_768.0 + 32_768.0 * n(2)).trunc() as i32,
            (-5e8 + 1e6 * n(3)).trunc() as i32,
            (10.0 * n(4)).trunc() as i32,
            (1000.0 + 100.0 * n(5)).trunc() as i32,
            (1.0 + 0.5 * n(6)).trunc() as i32,
        ]
    }

    fn check_band(
        g: &Generator,
        tiles: &SkyTiles,
        t: u32,
        y0: i64,
        rows: usize,
        xs: impl Iterator<Item = i64> + Clone,
    ) {
        let s = g.config().side();
        let mut band = Band::new(s as usize);
        g.fill(t, y0, rows, &mut band);
        for r in 0..rows {
            for x in xs.clone() {
                let got: Vec<i32> = band.attrs.iter().map(|a| a[r * s as usize + x as usize]).collect();
                let want = reference_cell(g.config(), tiles, t, x, y0 + r as i64);
                assert_eq!(got, want, "image {t}, cell ({x}, {})", y0 + r as i64);
            }
        }
    }

    #[test]
    fn generator_equals_the_formula_cell_by_cell() {
        let tiles = crate::tiles::for_tests();
        let micro = Generator::new(Config::Micro, tiles.clone());
        for t in [0, 4, 7, 23, 39] {
            check_band(&micro, &tiles, t, 0, 200, 0..200);
        }
        // Tiny's images reach gap rows and columns (world x or y mod 1024 >= 1000) and the
        // sparse region; check whole images in both.
        let tiny = Generator::new(Config::Tiny, tiles.clone());
        let mut gaps = 0;
        for t in 0..80 {
            let (ax, ay) = actual_origin(Config::Tiny, t);
            let crosses = |a: i64| (a % 1024) + 500 > 1000;
            if crosses(ax) || crosses(ay) || rand_region(t) {
                gaps += 1;
                check_band(&tiny, &tiles, t, 0, 500, 0..500);
            }
        }
        assert!(gaps >= 3, "{gaps} images with gaps or in the sparse region");
        // A band in the middle of a large image, with a column stride.
        let large = Generator::new(Config::Large, tiles.clone());
        check_band(&large, &tiles, 999, 7001, 3, (0..15_000).step_by(7));
    }

    fn rand_region(t: u32) -> bool {
        crate::params::rand(3 * t as i32) >= 0.8
    }

    #[test]
    fn pi_digits_and_tables() {
        assert_eq!(PI_DIGITS.len(), 101);
        assert!(PI_DIGITS.starts_with(b"3141592653"));
        assert!(PI_DIGITS.ends_with(b"3421170679"));
        assert_eq!(isqrt(0), 0);
        assert_eq!(isqrt(65_535), 255);
        assert_eq!(isqrt(65_025), 255);
        assert_eq!(isqrt(65_024), 254);
        // trunc toward zero: 1 + 0.5 * N6 with N6 in (-6, 6) gives -1 .. 3, and -0.5 truncates to 0.
        for s in [0, 1, 65_358] {
            let v = noise_values(s);
            assert_eq!(v[3], (10.0 * norm(6 * s + 4)).trunc() as i32);
        }
    }
}
