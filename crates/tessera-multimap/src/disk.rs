//! The synthetic disk of MULTIMAP.md §2: a single-zone disk with `T` sectors per track, `R`
//! surfaces and `NC` cylinders, a three-region seek curve, a per-track LBN skew, and the
//! adjacency functions (`GETSKEW`, `GETTRACKBOUNDARIES`, `GETADJACENT`) MultiMap builds on.
//!
//! Layout: track `tr = lbn div T` (cylinder `tr div R`, head `tr mod R`), offset `o = lbn mod T`.
//! The sector with offset `o` on track `tr` passes under the head at angle
//! `((o + k·tr) mod T) / T` of a revolution, `k` being the track skew in sectors.

use serde::Serialize;

/// Parameters of the modelled disk (MULTIMAP.md §2). [`DiskModel::default`] is the Atlas-10k-III-like
/// disk the paper's experiments used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiskModel {
    /// `T`: sectors (logical blocks) per track; one zone.
    pub sectors_per_track: u64,
    /// `R`: recording surfaces (heads).
    pub surfaces: u64,
    /// `NC`: cylinders.
    pub cylinders: u64,
    /// Time of one revolution, ms.
    pub rev_ms: f64,
    /// `s`: settle time, ms; also the cost of a head switch and of seeks up to `C` cylinders.
    pub settle_ms: f64,
    /// `C`: the seek time is flat (`s`) up to this many cylinders.
    pub seek_flat_cylinders: u64,
    /// `L`: the end of the square-root region of the seek curve.
    pub seek_sqrt_end_cylinders: u64,
    /// Coefficient of `sqrt d - sqrt C` in the square-root region, ms.
    pub seek_sqrt_coef_ms: f64,
    /// Seek time at the start of the linear region, ms (3.0 in MULTIMAP.md).
    pub seek_linear_base_ms: f64,
    /// Slope of the linear region, ms per cylinder.
    pub seek_linear_coef_ms: f64,
    /// Extra angle added to the settle angle to form the adjacency angle `W`, degrees.
    pub conservatism_deg: f64,
}

impl Default for DiskModel {
    fn default() -> Self {
        DiskModel {
            sectors_per_track: 686,
            surfaces: 4,
            cylinders: 31_002,
            rev_ms: 6.0,
            settle_ms: 1.1,
            seek_flat_cylinders: 17,
            seek_sqrt_end_cylinders: 1_600,
            seek_sqrt_coef_ms: 0.0557,
            seek_linear_base_ms: 3.0,
            seek_linear_coef_ms: 2.55e-4,
            conservatism_deg: 30.0,
        }
    }
}

impl DiskModel {
    /// Number of tracks (`NC · R`).
    pub fn tracks(&self) -> u64 {
        self.cylinders * self.surfaces
    }

    /// Number of logical blocks on the disk.
    pub fn capacity(&self) -> u64 {
        self.tracks() * self.sectors_per_track
    }

    /// `Seek(d)` for a move of `d` cylinders, ms. `Seek(0)` is 0 (same cylinder; a head switch
    /// is priced separately by [`DiskModel::positioning_ms`]).
    pub fn seek_ms(&self, cylinders: u64) -> f64 {
        let c = self.seek_flat_cylinders;
        let l = self.seek_sqrt_end_cylinders;
        if cylinders == 0 {
            0.0
        } else if cylinders <= c {
            self.settle_ms
        } else if cylinders <= l {
            self.settle_ms + self.seek_sqrt_coef_ms * ((cylinders as f64).sqrt() - (c as f64).sqrt())
        } else {
            self.seek_linear_base_ms + self.seek_linear_coef_ms * (cylinders - l) as f64
        }
    }

    /// Positioning time from track `from` to track `to`: 0 on the same track, `s` for a head
    /// switch on the same cylinder, `Seek(|Δcyl|)` otherwise.
    pub fn positioning_ms(&self, from: u64, to: u64) -> f64 {
        if from == to {
            return 0.0;
        }
        let (ca, cb) = (from / self.surfaces, to / self.surfaces);
        if ca == cb {
            self.settle_ms
        } else {
            self.seek_ms(ca.abs_diff(cb))
        }
    }

    /// The adjacency angle `W` in degrees: the angle the platter turns during the settle time
    /// plus the conservatism.
    pub fn adjacency_angle_deg(&self) -> f64 {
        360.0 * self.settle_ms / self.rev_ms + self.conservatism_deg
    }

    /// Time to pass `W` degrees, i.e. the ideal cost `α` of one semi-sequential access, ms.
    pub fn alpha_ms(&self) -> f64 {
        self.adjacency_angle_deg() / 360.0 * self.rev_ms
    }

    /// Track skew `k = ceil(W/360 · T)` in sectors.
    pub fn skew_sectors(&self) -> u64 {
        (self.adjacency_angle_deg() / 360.0 * self.sectors_per_track as f64).ceil() as u64
    }

    /// Track holding `lbn`.
    pub fn track(&self, lbn: u64) -> u64 {
        lbn / self.sectors_per_track
    }

    /// Cylinder holding `lbn`.
    pub fn cylinder(&self, lbn: u64) -> u64 {
        self.track(lbn) / self.surfaces
    }

    /// Angular position of the start of `lbn`, in sectors (`[0, T)`).
    pub fn angle_sectors(&self, lbn: u64) -> u64 {
        let t = self.sectors_per_track;
        let o = lbn % t;
        let tr = self.track(lbn);
        (o + (self.skew_sectors() % t) * (tr % t)) % t
    }

    /// `GETSKEW(lbn)`: angular position of `lbn` in degrees.
    pub fn get_skew(&self, lbn: u64) -> f64 {
        360.0 * self.angle_sectors(lbn) as f64 / self.sectors_per_track as f64
    }

    /// `GETTRACKBOUNDARIES(lbn)`: first and last LBN of the track holding `lbn`.
    pub fn get_track_boundaries(&self, lbn: u64) -> (u64, u64) {
        let first = self.track(lbn) * self.sectors_per_track;
        (first, first + self.sectors_per_track - 1)
    }

    /// `GETADJACENT(lbn, step)`: the block `W` degrees ahead of `lbn` on the track `step` tracks
    /// further; `None` past the end of the disk. The delta is taken in `[0, 360)` (the published
    /// pseudocode adds 360 on equality, which would jump a whole track).
    pub fn get_adjacent(&self, lbn: u64, step: u64) -> Option<u64> {
        let t = self.sectors_per_track;
        let target = (self.get_skew(lbn) + self.adjacency_angle_deg()).rem_euclid(360.0);
        let target_track = self.track(lbn).checked_add(step)?;
        if target_track >= self.tracks() {
            return None;
        }
        let low = target_track * t;
        let delta = (target - self.get_skew(low)).rem_euclid(360.0);
        let off = ((delta / 360.0 * t as f64).round() as u64) % t;
        Some(low + off)
    }

    /// The `D` adjacent blocks of `lbn` (steps `1..=depth`), as far as the disk reaches.
    pub fn adjacent_set(&self, lbn: u64, depth: u64) -> Vec<u64> {
        (1..=depth).filter_map(|s| self.get_adjacent(lbn, s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn seek_curve_regions() {
        let d = DiskModel::default();
        assert_eq!(d.seek_ms(0), 0.0);
        assert!(close(d.seek_ms(1), 1.1, 1e-12));
        assert!(close(d.seek_ms(17), 1.1, 1e-12));
        // sqrt region: s + 0.0557 (sqrt 100 - sqrt 17)
        assert!(close(d.seek_ms(100), 1.1 + 0.0557 * (10.0 - 17f64.sqrt()), 1e-12));
        // ≈ 3.0 ms at L (the sqrt formula gives 3.098 there; MULTIMAP.md rounds to 3.0)
        assert!(close(d.seek_ms(1_600), 3.098, 0.001));
        // linear region: ≈ 5.2 ms at NC/3, 10.5 ms full stroke
        assert!(close(d.seek_ms(31_002 / 3), 5.23, 0.01));
        assert!(close(d.seek_ms(31_001), 10.5, 0.01));
        // monotone apart from the documented step at L
        let mut prev = 0.0;
        for c in 1..=1_600 {
            let s = d.seek_ms(c);
            assert!(s >= prev);
            prev = s;
        }
    }

    #[test]
    fn positioning_and_head_switch() {
        let d = DiskModel::default();
        assert_eq!(d.positioning_ms(8, 8), 0.0);
        assert_eq!(d.positioning_ms(8, 9), d.settle_ms); // same cylinder, other head
        assert_eq!(d.positioning_ms(8, 12), d.seek_ms(1));
        assert_eq!(d.positioning_ms(400, 0), d.seek_ms(100));
    }

    #[test]
    fn rotational_angle_and_skew() {
        let d = DiskModel::default();
        // W = 66° settle + 30° conservatism; α = 1.6 ms at 6 ms/rev; k = ceil(96/360·686) = 183
        assert!(close(d.adjacency_angle_deg(), 96.0, 1e-9));
        assert!(close(d.alpha_ms(), 1.6, 1e-9));
        assert_eq!(d.skew_sectors(), 183);
        assert_eq!(d.get_skew(0), 0.0);
        assert!(close(d.get_skew(343), 180.0, 1e-9)); // half a track = half a revolution
        assert!(close(d.get_skew(686), 360.0 * 183.0 / 686.0, 1e-9)); // next track is skewed
        assert_eq!(d.get_track_boundaries(700), (686, 1371));
    }

    #[test]
    fn adjacent_blocks_are_w_ahead_on_later_tracks() {
        let d = DiskModel::default();
        let t = d.sectors_per_track;
        for &lbn in &[0u64, 5, 685, 686 * 37 + 300, 686 * 1000 + 17] {
            for step in [1u64, 2, 7, 128] {
                let a = d.get_adjacent(lbn, step).expect("on disk");
                assert_eq!(d.track(a), d.track(lbn) + step);
                let ahead = (d.get_skew(a) - d.get_skew(lbn)).rem_euclid(360.0);
                // within half a sector of W
                assert!((ahead - d.adjacency_angle_deg()).abs() <= 180.0 / t as f64 + 1e-9);
            }
        }
        assert_eq!(d.adjacent_set(0, 128).len(), 128);
        assert_eq!(d.get_adjacent(d.capacity() - 1, 1), None);
    }
}
