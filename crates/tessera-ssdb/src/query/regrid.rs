//! Q3's 10:3 regridding (SSDB.md §4) with separable integer weights. Per axis, output cell `u`
//! covers source `[10u/3, 10(u+1)/3)`; source index `i` has weight
//! `|[10u, 10u+10) ∩ [3i, 3i+3)|` (0..3), and only indices inside the slab count, so a last
//! partial output cell averages the part inside. A cell's weight is `wx·wy` (0..9).
//! pix, var, v0..v6: `round(Σ w·v / Σ w)`, ties half away from zero, exactly; valid: AND,
//! sat: OR over the cells with `w > 0`.
//!
//! The plane is done in two passes over whole rows: a horizontal pass (each output column's
//! at most 4 weighted source columns, per source row) into an `i64` row buffer, then a vertical
//! pass over those rows. Three output rows take exactly ten source rows, so bands of
//! [`BAND_OUT`] output rows read [`BAND_SRC`] source rows each, aligned.

/// Output rows per band.
pub const BAND_OUT: usize = 75;
/// Source rows per band (`BAND_OUT * 10 / 3`).
pub const BAND_SRC: usize = 250;

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

/// `num / den` rounded to the nearest integer, ties half away from zero (`den > 0`), exactly.
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
/// row); writes `ys.len()` rows of `xs.len()` values to `out`. `h` is a scratch buffer.
pub fn regrid_band(src: &[i32], m: usize, xs: &[Span], ys: &[Span], how: Combine, h: &mut Vec<i64>, out: &mut [i32]) {
    let n = xs.len();
    let src_rows = src.len() / m;
    h.clear();
    h.resize(src_rows * n, 0);
    for (row, hrow) in src.chunks_exact(m).zip(h.chunks_exact_mut(n)) {
        for (hv, s) in hrow.iter_mut().zip(xs) {
            let cells = &row[s.i0..s.i0 + s.len];
            *hv = match how {
                Combine::Mean => cells.iter().zip(&s.w).map(|(&v, &w)| i64::from(v) * w).sum(),
                Combine::And => cells.iter().fold(-1, |a, &v| a & i64::from(v)),
                Combine::Or => cells.iter().fold(0, |a, &v| a | i64::from(v)),
            };
        }
    }
    for (orow, s) in out.chunks_exact_mut(n).zip(ys) {
        for (u, (o, sx)) in orow.iter_mut().zip(xs).enumerate() {
            let col = (0..s.len).map(|k| h[(s.i0 + k) * n + u]);
            let v = match how {
                Combine::Mean => {
                    let sum: i64 = col.zip(&s.w).map(|(v, &w)| v * w).sum();
                    round_half_away(sum, s.total * sx.total)
                }
                Combine::And => col.fold(-1, |a, v| a & v),
                Combine::Or => col.fold(0, |a, v| a | v),
            };
            // A mean of int32 values and AND/OR of int32 values are int32 values.
            *o = i32::try_from(v).unwrap_or(if v < 0 { i32::MIN } else { i32::MAX });
        }
    }
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
