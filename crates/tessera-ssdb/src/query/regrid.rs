//! Q3's 10:3 regridding (SSDB.md §4) with separable integer weights. Per axis, output cell `u`
//! covers source `[10u/3, 10(u+1)/3)`; source index `i` has weight
//! `|[10u, 10u+10) ∩ [3i, 3i+3)|` (0..3), and only indices inside the slab count, so a last
//! partial output cell averages the part inside. A cell's weight is `wx·wy` (0..9).
//! pix, var, v0..v6: `round(Σ w·v / Σ w)`, ties half away from zero, exactly; valid: AND,
//! sat: OR over the cells with `w > 0`.
//!
//! The plane is done one output row at a time in two passes over whole rows (see
//! [`regrid_band`]). Three output rows take exactly ten source rows, so a band of source rows
//! that is a multiple of 10 maps onto whole output rows ([`band_rows`]).

/// Largest band (source rows) [`band_rows`] aligns with tiles; taller tiles get bands of
/// [`FALLBACK_BAND`] rows that cut them.
pub const MAX_BAND: usize = 1000;
/// Source rows per band when no aligned band is small enough.
pub const FALLBACK_BAND: usize = 250;

/// Source rows per band of a regridding whose source has tiles of `tile_rows` rows (from row
/// 0): the least multiple of both 10 (so a band maps onto whole output rows) and `tile_rows`
/// (so no tile is decoded by two bands) that is at least 200 rows, when that is at most
/// [`MAX_BAND`]; otherwise [`FALLBACK_BAND`].
pub fn band_rows(tile_rows: u64) -> usize {
    let t = usize::try_from(tile_rows).unwrap_or(usize::MAX).max(1);
    let (mut a, mut b) = (t, 10);
    while b != 0 {
        (a, b) = (b, a % b);
    }
    let lcm = (t / a).saturating_mul(10);
    if lcm > MAX_BAND {
        return FALLBACK_BAND;
    }
    lcm * 200usize.div_ceil(lcm)
}

/// The sources of one output cell along one axis: indices `i0 .. i0 + len` with their weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// First source index.
    pub i0: usize,
    /// Number of source indices (1..=4).
    pub len: usize,
    /// Their weights (1..=3 each).
    pub w: [i64; 4],
    /// Σ w.
    pub total: i64,
}

/// `n = ceil(3m / 10)` output cells for `m` source cells.
pub fn output_len(m: usize) -> usize {
    (3 * m).div_ceil(10)
}

/// The spans of the `output_len(m)` output cells of an axis of `m` source cells.
pub fn axis_spans(m: usize) -> Vec<Span> {
    (0..output_len(m))
        .map(|u| {
            let (lo, hi) = (10 * u, 10 * u + 10);
            let i0 = lo / 3;
            let mut s = Span { i0, len: 0, w: [0; 4], total: 0 };
            // Indices i0 ..= (10u + 9) / 3 all overlap [10u, 10u + 10); at most 4 of them.
            for i in i0..=((hi - 1) / 3).min(m - 1) {
                let w = (hi.min(3 * i + 3) - lo.max(3 * i)) as i64;
                s.w[s.len] = w;
                s.total += w;
                s.len += 1;
            }
            s
        })
        .collect()
}

/// One band of a regridding: source rows `src`, output rows `out`, and the output rows' spans
/// with `i0` relative to `src.start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Band {
    /// Source rows.
    pub src: std::ops::Range<usize>,
    /// Output rows.
    pub out: std::ops::Range<usize>,
    /// Spans of the output rows, relative to the band's first source row.
    pub ys: Vec<Span>,
}

/// The bands of `band_src` source rows (a positive multiple of 10) covering the `spans` of an
/// axis of `m` source cells: each band's output rows take source rows of that band only.
pub fn bands(spans: &[Span], m: usize, band_src: usize) -> Vec<Band> {
    debug_assert!(band_src > 0 && band_src.is_multiple_of(10));
    let band_out = band_src * 3 / 10;
    spans
        .chunks(band_out)
        .enumerate()
        .map(|(b, ys)| {
            let src0 = b * band_src;
            Band {
                src: src0..(src0 + band_src).min(m),
                out: b * band_out..b * band_out + ys.len(),
                ys: ys.iter().map(|s| Span { i0: s.i0 - src0, ..*s }).collect(),
            }
        })
        .collect()
}

/// `num / den` rounded to the nearest integer, ties half away from zero (`den > 0`), exactly.
#[inline(always)]
pub fn round_half_away(num: i64, den: i64) -> i64 {
    let (q, r) = (num / den, num % den); // truncating
    if 2 * r.abs() >= den {
        q + num.signum()
    } else {
        q
    }
}

/// How the cells of one output cell combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Weighted mean, rounded half away from zero.
    Mean,
    /// Bitwise AND over the cells with weight > 0 (`valid`).
    And,
    /// Bitwise OR over the cells with weight > 0 (`sat`).
    Or,
}

/// Regrids one band of one attribute: `src` holds `src_rows` rows of `m` values (row-major),
/// the source rows of output rows `ys` (spans with `i0` relative to the band's first source
/// row); writes `ys.len()` rows of `xs.len()` values to `out`. `v` is a scratch row.
///
/// Vertical pass first: each output row's (at most 4) weighted source rows are combined
/// element-wise over whole rows (contiguous, so the compiler vectorizes it) into one `i64` row
/// of `m` values; the horizontal pass then combines each output column's (at most 4) columns of
/// that row. Each source value is touched about once, and the gathering horizontal pass runs
/// over the band's output rows only (3 in 10 of its source rows).
pub fn regrid_band(src: &[i32], m: usize, xs: &[Span], ys: &[Span], how: Combine, v: &mut Vec<i64>, out: &mut [i32]) {
    let n = xs.len();
    v.clear();
    v.resize(m, 0);
    for (orow, s) in out.chunks_exact_mut(n).zip(ys) {
        let rows = (0..s.len).map(|k| &src[(s.i0 + k) * m..(s.i0 + k + 1) * m]);
        match how {
            Combine::Mean => {
                v.fill(0);
                for (k, row) in rows.enumerate() {
                    match s.w[k] {
                        1 => add_weighted::<1>(v, row),
                        2 => add_weighted::<2>(v, row),
                        3 => add_weighted::<3>(v, row),
                        w => v.iter_mut().zip(row).for_each(|(a, &x)| *a += w * i64::from(x)),
                    }
                }
                for (o, sx) in orow.iter_mut().zip(xs) {
                    let cells = &v[sx.i0..sx.i0 + sx.len];
                    let sum: i64 = cells.iter().zip(&sx.w).map(|(&c, &w)| c * w).sum();
                    let den = s.total * sx.total;
                    // All but the last output row and column divide by 10 x 10: a constant
                    // divisor becomes a multiplication.
                    *o = saturate(if den == 100 { round_half_away(sum, 100) } else { round_half_away(sum, den) });
                }
            }
            Combine::And | Combine::Or => {
                let and = how == Combine::And;
                for (k, row) in rows.enumerate() {
                    if k == 0 {
                        v.iter_mut().zip(row).for_each(|(a, &x)| *a = i64::from(x));
                    } else if and {
                        v.iter_mut().zip(row).for_each(|(a, &x)| *a &= i64::from(x));
                    } else {
                        v.iter_mut().zip(row).for_each(|(a, &x)| *a |= i64::from(x));
                    }
                }
                for (o, sx) in orow.iter_mut().zip(xs) {
                    let cells = v[sx.i0..sx.i0 + sx.len].iter().copied();
                    *o = saturate(if and { cells.fold(-1, |a, c| a & c) } else { cells.fold(0, |a, c| a | c) });
                }
            }
        }
    }
}

/// `acc += W · row`, element-wise; a constant weight keeps the loop in vector instructions.
fn add_weighted<const W: i64>(acc: &mut [i64], row: &[i32]) {
    acc.iter_mut().zip(row).for_each(|(a, &x)| *a += W * i64::from(x));
}

/// A mean, AND or OR of int32 values is an int32 value; saturates rather than wraps all the same.
fn saturate(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_per_axis() {
        // Output cell 0 covers [0, 10/3): sources 0, 1, 2 fully and 3 for a third.
        let s = axis_spans(10);
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].i0, s[0].len, s[0].w, s[0].total), (0, 4, [3, 3, 3, 1], 10));
        assert_eq!((s[1].i0, s[1].len, s[1].w), (3, 4, [2, 3, 3, 2]));
        assert_eq!((s[2].i0, s[2].len, s[2].w), (6, 4, [1, 3, 3, 3]));
        // Every source cell's weights over the outputs add up to 3 (it is covered once).
        for m in 1..40 {
            let mut cover = vec![0; m];
            for s in axis_spans(m) {
                for k in 0..s.len {
                    cover[s.i0 + k] += s.w[k];
                }
            }
            assert!(cover.iter().all(|&c| c == 3), "m = {m}: {cover:?}");
        }
    }

    #[test]
    fn partial_last_cell() {
        // m = 11: n = ceil(33/10) = 4; the last output [10, 13.3) holds only source 10 (weight
        // |[30, 40) ∩ [30, 33)| = 3; source 11 is outside the slab), so it is that cell's value,
        // not diluted.
        let s = axis_spans(11);
        assert_eq!(s.len(), 4);
        assert_eq!((s[3].i0, s[3].len, s[3].w[0], s[3].total), (10, 1, 3, 3));
        let s = axis_spans(200);
        assert_eq!(s.len(), 60);
        assert_eq!(axis_spans(7).last().map(|s| (s.i0, s.len, s.total)), Some((6, 1, 1)));
        let src: Vec<i32> = (0..11 * 11).collect();
        let (xs, ys) = (axis_spans(11), axis_spans(11));
        let mut out = vec![0; 16];
        regrid_band(&src, 11, &xs, &ys, Combine::Mean, &mut Vec::new(), &mut out);
        assert_eq!(out[15], 120); // the corner cell (10, 10) alone
                                  // Output (u 3, v 0): column 10, rows 0..=3 weighted 3, 3, 3, 1: values 10, 21, 32, 43;
                                  // 3·(30 + 63 + 96 + 43) / (3·10) = 23.2 -> 23.
        assert_eq!(out[3], 23);
    }

    /// Output cell (u, v) straight from the definition: every source cell of the slab with
    /// its weight |[10u, 10u+10) ∩ [3x, 3x+3)| · |[10v, 10v+10) ∩ [3y, 3y+3)|, in i128.
    fn brute(src: &[i32], m: usize, how: Combine) -> Vec<i32> {
        let n = output_len(m);
        let w = |o: usize, i: usize| (10 * o + 10).min(3 * i + 3).saturating_sub((10 * o).max(3 * i)) as i128;
        let mut out = Vec::with_capacity(n * n);
        for v in 0..n {
            for u in 0..n {
                let (mut num, mut den, mut and, mut or) = (0i128, 0i128, -1i128, 0i128);
                for y in 0..m {
                    for x in 0..m {
                        let k = w(u, x) * w(v, y);
                        if k > 0 {
                            let c = i128::from(src[y * m + x]);
                            (num, den, and, or) = (num + k * c, den + k, and & c, or | c);
                        }
                    }
                }
                out.push(match how {
                    Combine::Mean => {
                        let (q, r) = (num / den, num % den);
                        (if 2 * r.abs() >= den { q + num.signum() } else { q }) as i32
                    }
                    Combine::And => and as i32,
                    Combine::Or => or as i32,
                });
            }
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Regridding band by band (as Q3 reads: bands aligned with tiles of any height) equals
        /// the definition, for values anywhere in the int32 range.
        #[test]
        fn banded_regrid_is_the_definition(
            m in 1usize..90,
            tile in 1u64..300,
            seed in proptest::prelude::any::<u64>(),
            small in proptest::prelude::any::<bool>(),
        ) {
            let mut state = seed | 1;
            let src: Vec<i32> = (0..m * m).map(|_| {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                if small { (state % 7) as i32 - 3 } else { state as i32 }
            }).collect();
            let xs = axis_spans(m);
            let n = xs.len();
            // Bands of 10 and 20 rows as well, so that small slabs have several.
            for band in [band_rows(tile), 10, 20] {
                for how in [Combine::Mean, Combine::And, Combine::Or] {
                    let mut out = vec![0; n * n];
                    for b in bands(&xs, m, band) {
                        let rows = &src[b.src.start * m..b.src.end * m];
                        regrid_band(rows, m, &xs, &b.ys, how, &mut Vec::new(), &mut out[b.out.start * n..b.out.end * n]);
                    }
                    proptest::prop_assert_eq!(&out, &brute(&src, m, how), "band {} {:?}", band, how);
                }
            }
        }
    }

    #[test]
    fn bands_hold_whole_tiles_and_whole_output_rows() {
        assert_eq!(band_rows(200), 200);
        assert_eq!(band_rows(250), 250);
        assert_eq!(band_rows(125), 250);
        assert_eq!(band_rows(100), 200);
        assert_eq!(band_rows(3), 210);
        assert_eq!(band_rows(1), 200);
        assert_eq!(band_rows(999), FALLBACK_BAND);
        assert_eq!(band_rows(3750), FALLBACK_BAND);
        assert_eq!(band_rows(u64::MAX), FALLBACK_BAND);
        for t in 1..=1000u64 {
            let b = band_rows(t) as u64;
            assert!(b.is_multiple_of(10) && (b.is_multiple_of(t) || b == FALLBACK_BAND as u64) && b >= 200, "{t}: {b}");
        }
    }

    #[test]
    fn rounding_ties_away_from_zero() {
        assert_eq!(round_half_away(5, 2), 3);
        assert_eq!(round_half_away(-5, 2), -3);
        assert_eq!(round_half_away(7, 2), 4);
        assert_eq!(round_half_away(-7, 2), -4);
        assert_eq!(round_half_away(4, 3), 1);
        assert_eq!(round_half_away(5, 3), 2);
        assert_eq!(round_half_away(-4, 3), -1);
        assert_eq!(round_half_away(-5, 3), -2);
        assert_eq!(round_half_away(0, 9), 0);
        assert_eq!(round_half_away(45, 90), 1);
        assert_eq!(round_half_away(-45, 90), -1);
        assert_eq!(round_half_away(44, 90), 0);
    }

    #[test]
    fn and_or_over_weighted_cells() {
        // 4 x 4 source, n = 2: output cell (0, 0) covers sources 0..=3 per axis (3,3,3,1), cell
        // (1, *) only source 3 (weight 2 of [10, 20) ∩ [9, 12)).
        let mut valid = vec![1; 16];
        valid[3 * 4 + 3] = 0; // source (3, 3): in output cells (0,0) (weight 1) and (1,1)
        let (xs, ys) = (axis_spans(4), axis_spans(4));
        let mut out = vec![0; 4];
        regrid_band(&valid, 4, &xs, &ys, Combine::And, &mut Vec::new(), &mut out);
        assert_eq!(out, [0, 0, 0, 0]);
        valid[15] = 1;
        valid[0] = 0;
        regrid_band(&valid, 4, &xs, &ys, Combine::And, &mut Vec::new(), &mut out);
        assert_eq!(out, [0, 1, 1, 1]);
        let sat: Vec<i32> = (0..16).map(|i| i32::from(i == 12)).collect(); // source (0, 3)
        regrid_band(&sat, 4, &xs, &ys, Combine::Or, &mut Vec::new(), &mut out);
        assert_eq!(out, [1, 0, 1, 0]);
    }
}
