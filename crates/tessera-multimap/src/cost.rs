//! The analytic I/O cost model of MULTIMAP.md §4 (the paper's Appendix A) for the Naive and
//! MultiMap mappings, with the §4 reconciliation notes applied:
//! (a) MultiMap moves inside a cube cost `α · (q_i - 1 - Njmp_i)`;
//! (b) a Naive jump shorter than a track (`Δ < T` sectors) costs `(Δ/T)·rev` plus, with
//!     probability `Δ/T`, one head switch, instead of `Seek + RotLat`;
//! (c) when `q` is a multiple of `K`, the aligned starts number `floor(S/K) - q/K + 1`;
//! and `Njmp` computed exactly as the expectation the text defines it to be ([`njmp`]).
//!
//! Jump distances are computed in tracks as the formulas give them and converted to cylinders
//! (`ceil(d / R)`) for the seek curve, which is defined on cylinders **\[choice\]**: this is what
//! reproduces the calculated MultiMap cubes quoted in MULTIMAP.md note (a).

use crate::disk::DiskModel;
use anyhow::{ensure, Result};
use serde::Serialize;

/// Parameters of the analytic model (MULTIMAP.md §4, Atlas 10k III).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostParams {
    /// Seek curve (only `seek_ms` and `surfaces` are used) and `rev_ms` for short jumps.
    pub disk: DiskModel,
    /// `RotLat`: average rotational latency, ms.
    pub rot_lat_ms: f64,
    /// `C_init`: initial positioning, ms.
    pub c_init_ms: f64,
    /// `σ`: transfer time per block, ms.
    pub sigma_ms: f64,
    /// `α`: cost of one semi-sequential access to an adjacent block, ms.
    pub alpha_ms: f64,
    /// `T` used by the model (sectors per track).
    pub sectors_per_track: u64,
    /// Head-switch cost in short Naive jumps (note (b): "≈ 1 ms").
    pub head_switch_ms: f64,
}

impl Default for CostParams {
    fn default() -> Self {
        CostParams {
            disk: DiskModel::default(),
            rot_lat_ms: 3.0,
            c_init_ms: 8.3,
            sigma_ms: 0.015,
            alpha_ms: 1.5,
            sectors_per_track: 686,
            head_switch_ms: 1.0,
        }
    }
}

/// Checks the query against the dataset; afterwards every product of extents fits in u64.
fn check(s: &[u64], q: &[u64]) -> Result<()> {
    ensure!(!s.is_empty(), "query: no dimensions");
    ensure!(s.len() == q.len(), "query: {} extents for a {}-D dataset", q.len(), s.len());
    for i in 0..s.len() {
        ensure!(q[i] >= 1 && q[i] <= s[i], "query: q_{i} = {} outside 1..={}", q[i], s[i]);
    }
    s.iter()
        .try_fold(1u64, |a, &b| a.checked_mul(b))
        .ok_or_else(|| anyhow::anyhow!("shape: the number of cells overflows u64"))?;
    Ok(())
}

impl CostParams {
    /// `Seek(d)` for a jump of `d` tracks (converted to `ceil(d / R)` cylinders).
    pub fn seek_tracks_ms(&self, tracks: u64) -> f64 {
        self.disk.seek_ms(tracks.div_ceil(self.disk.surfaces))
    }

    /// Cost of a Naive jump of `delta` sectors: note (b) below a track, `Seek + RotLat` above.
    pub fn naive_jump_ms(&self, delta: u64) -> f64 {
        let t = self.sectors_per_track;
        if delta < t {
            let p = delta as f64 / t as f64;
            p * self.disk.rev_ms + p * self.head_switch_ms
        } else {
            self.seek_tracks_ms(delta.div_ceil(t)) + self.rot_lat_ms
        }
    }

    /// Total cost in ms of the box query `q` on a Naive (row-major) `s` dataset (Eqs. 7-9).
    ///
    /// # Errors
    /// Mismatched ranks or `q_i` outside `1..=S_i`.
    pub fn naive_cost(&self, s: &[u64], q: &[u64]) -> Result<f64> {
        check(s, q)?;
        let n = s.len();
        let mut cost = self.c_init_ms;
        for i in 1..n {
            let jumps = (q[i] - 1) as f64 * q[i + 1..].iter().product::<u64>() as f64;
            if jumps == 0.0 {
                continue;
            }
            // Δ = Π_{j<i} S_j - q_0 + 1 - Σ_{j=1}^{i-1} (q_j - 1) Π_{k<j} S_k  (Eq. 9, in sectors)
            let mut delta = s[..i].iter().product::<u64>() + 1 - q[0];
            for j in 1..i {
                delta -= (q[j] - 1) * s[..j].iter().product::<u64>();
            }
            cost += self.naive_jump_ms(delta) * jumps;
        }
        Ok(cost + self.sigma_ms * q.iter().product::<u64>() as f64)
    }

    /// Total cost in ms of the box query `q` on a MultiMap `s` dataset with basic cube `k`
    /// (Eqs. 10-15 with notes (a) and (c)).
    ///
    /// # Errors
    /// Mismatched ranks, `q_i` outside `1..=S_i`, or `K_i = 0`.
    pub fn multimap_cost(&self, s: &[u64], k: &[u64], q: &[u64]) -> Result<f64> {
        check(s, q)?;
        ensure!(k.len() == s.len() && k.iter().all(|&x| x > 0), "cube: need {} positive extents", s.len());
        let n = s.len();
        let t = self.sectors_per_track;
        let volume = k
            .iter()
            .try_fold(1u64, |a, &b| a.checked_mul(b))
            .ok_or_else(|| anyhow::anyhow!("cube: the basic cube's volume overflows u64"))?;
        let cube_tracks = volume.div_ceil(t);
        // d_i = ceil(Π K / T) · Π_{j<i} ceil(S_j / K_j) tracks (Eq. 12); saturating: a distance
        // past u64 is far beyond any disk and prices as the longest seek the curve gives
        let dist = |i: usize| -> u64 { (0..i).fold(cube_tracks, |a, j| a.saturating_mul(s[j].div_ceil(k[j]))) };
        let jump = |i: usize| self.seek_tracks_ms(dist(i)) + self.rot_lat_ms;
        let mut cost = self.c_init_ms + jump(0) * njmp(q[0], k[0], s[0]);
        for i in 1..n {
            let nj = njmp(q[i], k[i], s[i]);
            let per = self.alpha_ms * ((q[i] - 1) as f64 - nj) + jump(i) * nj;
            cost += per * q[i + 1..].iter().product::<u64>() as f64;
        }
        Ok(cost + self.sigma_ms * q.iter().product::<u64>() as f64)
    }
}

/// `Njmp(q, K, S)` as MULTIMAP.md §4 defines it: the expected number of basic-cube boundaries a
/// `q`-long run crosses over all `S - q + 1` start positions, computed exactly. It equals the
/// published Eqs. 13-15 with note (c) ([`njmp_published`]) except where those miscount the
/// partial last cube (`S mod K != 0`): there they give a single cell (`q = 1`) a positive chance
/// of a jump, and a run of `q > K` one jump too many (e.g. `Njmp(259, 128, 259)` is 3 instead
/// of 2). Requires `1 <= q <= S` and `K >= 1`; returns NaN otherwise.
pub fn njmp(q: u64, k: u64, s: u64) -> f64 {
    if q == 0 || q > s || k == 0 {
        return f64::NAN;
    }
    // G(n) = Σ_{x<n} floor(x/K)
    let g = |n: u64| -> u128 {
        let (t, r) = ((n / k) as u128, (n % k) as u128);
        k as u128 * t * t.saturating_sub(1) / 2 + t * r
    };
    // Σ_a floor((a+q-1)/K) - floor(a/K) over a in 0..=S-q
    let total = g(s) - g(q - 1) - g(s - q + 1);
    total as f64 / (s - q + 1) as f64
}

/// `Njmp(q, K, S)` exactly as published (Eqs. 13-15), with note (c) (aligned starts counted as
/// `floor(S/K) - q/K + 1` when `q` is a multiple of `K`). Kept for comparison; see [`njmp`].
/// Requires `1 <= q <= S` and `K >= 1`; returns NaN otherwise.
pub fn njmp_published(q: u64, k: u64, s: u64) -> f64 {
    if q == 0 || q > s || k == 0 {
        return f64::NAN;
    }
    let starts = (s - q + 1) as f64;
    let loc_s = if q.is_multiple_of(k) {
        (s / k + 1 - q / k) as f64
    } else {
        let loc_k = k - (q % (k + 1)) + 1;
        (loc_k * (s / k - q / k) + (s % k) / loc_k) as f64
    };
    let p = (loc_s / starts).clamp(0.0, 1.0);
    let c = q.div_ceil(k) as f64;
    (c - 1.0) * p + c * (1.0 - p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn njmp_known_values() {
        // q = K = S: one start, no boundary
        assert_eq!(njmp(259, 259, 259), 0.0);
        assert_eq!(njmp(32, 32, 32), 0.0);
        // q = 2K = S: exactly one boundary
        assert_eq!(njmp(32, 16, 32), 1.0);
        // q = 10 in K = 128, S = 259: Loc_K = 119, Loc_S = 238 of 250 starts
        assert!((njmp(10, 128, 259) - 12.0 / 250.0).abs() < 1e-12);
    }

    fn brute_njmp(q: u64, k: u64, s: u64) -> f64 {
        let total: u64 = (0..=s - q).map(|a| (a + q - 1) / k - a / k).sum();
        total as f64 / (s - q + 1) as f64
    }

    #[test]
    fn njmp_is_the_exact_expectation() {
        for k in 1..=9u64 {
            for s in 1..=40u64 {
                for q in 1..=s {
                    assert!((njmp(q, k, s) - brute_njmp(q, k, s)).abs() < 1e-9, "q={q} k={k} s={s}");
                }
            }
        }
        assert!((njmp(259, 128, 259) - 2.0).abs() < 1e-12);
        assert_eq!(njmp(1, 128, 259), 0.0);
        assert!(njmp(0, 4, 8).is_nan() && njmp(9, 4, 8).is_nan() && njmp(2, 0, 8).is_nan());
        assert!(njmp_published(9, 4, 8).is_nan());
    }

    #[test]
    fn published_njmp_agrees_when_s_is_a_multiple_of_k() {
        // With S a multiple of K and q < K, or q a multiple of K (note (c)), Eqs. 13-15 are exact.
        for &(k, s) in &[(8u64, 32u64), (16, 64), (5, 25), (128, 256), (16, 32)] {
            for q in (1..k).chain([k, 2 * k]) {
                if q <= s {
                    assert!((njmp_published(q, k, s) - brute_njmp(q, k, s)).abs() < 1e-9, "q={q} k={k} s={s}");
                }
            }
        }
        // ... and miscount the partial last cube
        assert_eq!(njmp_published(259, 128, 259), 3.0);
        assert!(njmp_published(1, 128, 259) > 0.0);
    }

    #[test]
    fn naive_short_jump_and_long_jump() {
        let p = CostParams::default();
        // Δ = 259 < T: (259/686)·(6 + 1)
        assert!((p.naive_jump_ms(259) - 259.0 / 686.0 * 7.0).abs() < 1e-12);
        // Δ = 67081: 98 tracks = 25 cylinders
        assert!((p.naive_jump_ms(67_081) - (p.disk.seek_ms(25) + 3.0)).abs() < 1e-12);
    }

    #[test]
    fn mm_cube_note_a_values() {
        // MULTIMAP.md note (a): 174/736/1782 for the 3-D cubes
        let p = CostParams::default();
        let s = [259, 259, 259];
        let k = [259, 128, 259];
        for (q, want) in [(10, 174.0), (20, 736.0), (30, 1782.0)] {
            let got = p.multimap_cost(&s, &k, &[q, q, q]).expect("valid");
            assert!((got - want).abs() / want < 0.01, "q={q}: {got} vs {want}");
        }
        // note (b): 290/1138/2575 for the Naive cubes
        for (q, want) in [(10, 290.0), (20, 1138.0), (30, 2575.0)] {
            let got = p.naive_cost(&s, &[q, q, q]).expect("valid");
            assert!((got - want).abs() / want < 0.01, "q={q}: {got} vs {want}");
        }
        assert!(p.naive_cost(&s, &[260, 1, 1]).is_err());
        assert!(p.naive_cost(&s, &[1, 1]).is_err());
        assert!(p.naive_cost(&[u64::MAX, 3], &[1, 1]).is_err());
        assert!(p.multimap_cost(&s, &[0, 1, 1], &[1, 1, 1]).is_err());
        assert!(p.multimap_cost(&s, &[u64::MAX, u64::MAX, 2], &[1, 1, 1]).is_err());
    }
}
