//! Replays a sequence of block accesses on the [`DiskModel`] (MULTIMAP.md §2): for each block,
//! positioning (`Seek(|Δcyl|)`, `s` for a head switch, 0 on the same track), then the wait until
//! the block's angle reaches the head, then `rev/T` of transfer. The platter turns continuously,
//! so sequential blocks cost only their transfer, adjacent blocks cost about `α`, and other
//! jumps cost a seek plus whatever rotation is left.

use crate::disk::DiskModel;

/// A disk head that serves block requests one after another.
#[derive(Debug, Clone)]
pub struct Simulator<'a> {
    disk: &'a DiskModel,
    /// Elapsed time, ms.
    now_ms: f64,
    /// Track under the head.
    track: u64,
}

impl<'a> Simulator<'a> {
    /// A head parked on track 0 at time 0 (angle 0).
    pub fn new(disk: &'a DiskModel) -> Self {
        Simulator { disk, now_ms: 0.0, track: 0 }
    }

    /// Elapsed time, ms.
    pub fn elapsed_ms(&self) -> f64 {
        self.now_ms
    }

    /// Angle under the head now, in sectors `[0, T)`.
    fn head_angle(&self) -> f64 {
        let t = self.disk.sectors_per_track as f64;
        (self.now_ms / self.disk.rev_ms).fract() * t
    }

    /// Serve one block; returns its service time in ms.
    pub fn access(&mut self, lbn: u64) -> f64 {
        let d = self.disk;
        let t = d.sectors_per_track as f64;
        let start = self.now_ms;
        let to = d.track(lbn);
        self.now_ms += d.positioning_ms(self.track, to);
        self.track = to;
        let mut wait = (d.angle_sectors(lbn) as f64 - self.head_angle()).rem_euclid(t);
        // Floating-point residue of an exactly aligned (sequential) block.
        if wait > t - 1e-6 || wait < 1e-6 {
            wait = 0.0;
        }
        self.now_ms += (wait + 1.0) * d.rev_ms / t;
        self.now_ms - start
    }

    /// Serve all blocks in order; returns the total time in ms.
    pub fn replay(&mut self, lbns: impl IntoIterator<Item = u64>) -> f64 {
        let start = self.now_ms;
        for lbn in lbns {
            self.access(lbn);
        }
        self.now_ms - start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_blocks_cost_transfer_only() {
        let d = DiskModel::default();
        let mut s = Simulator::new(&d);
        s.access(0);
        let t = s.replay(1..686);
        assert!((t - 685.0 * 6.0 / 686.0).abs() < 1e-9);
    }

    #[test]
    fn same_track_jump_waits_for_rotation() {
        let d = DiskModel::default();
        let mut s = Simulator::new(&d);
        s.access(0);
        // block 343 is half a revolution ahead; the head is 1 sector past block 0
        let t = s.access(343);
        assert!((t - 343.0 * 6.0 / 686.0).abs() < 1e-9);
        // going back to block 0 on the same track costs nearly a full revolution
        let t = s.access(0);
        assert!((t - 6.0 * 342.0 / 686.0 - 6.0 / 686.0).abs() < 1e-9);
    }

    #[test]
    fn mean_rotational_latency_is_half_a_revolution() {
        // From the end of block 0, every block of the same track once: the waits average
        // (T - 1)/2 sectors, i.e. RotLat ≈ rev/2 = 3 ms.
        let d = DiskModel::default();
        let t = d.sectors_per_track;
        let mut total = 0.0;
        for target in 0..t {
            let mut s = Simulator::new(&d);
            s.access(0);
            total += s.access(target) - d.rev_ms / t as f64; // minus the transfer
        }
        let mean = total / t as f64;
        assert!((mean - d.rev_ms / 2.0).abs() < d.rev_ms / t as f64, "{mean}");
    }

    #[test]
    fn adjacent_block_costs_about_alpha() {
        let d = DiskModel::default();
        for step in [1u64, 4, 64, 128] {
            let mut s = Simulator::new(&d);
            s.access(5000);
            let adj = d.get_adjacent(5000, step).expect("on disk");
            let t = s.access(adj);
            // W degrees of rotation (α) minus the sector just read, plus the block's transfer
            assert!((t - d.alpha_ms()).abs() < 0.02, "step {step}: {t}");
        }
        // a block on the next track that passed the head during the switch costs a missed turn
        let mut s = Simulator::new(&d);
        s.access(5000);
        assert!(s.access(5000 + 686 - 100) > d.rev_ms);
    }
}
