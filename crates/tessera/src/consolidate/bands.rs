//! Cutting a sparse consolidation into bands of the global order, each planned and read on its
//! own (pure). A read in global order plans all its cells before it returns the first (their
//! coordinates fetched, keyed, merged across fragments): for a whole array that is tens of bytes
//! of plan per cell held at once, however small `sm.consolidation.buffer_size` is, and a pause
//! in which nothing is written. Cut into bands of about one batch each, the plan of the next band
//! overlaps the writing of the last, and what is held is bounded by the band.
//!
//! Under a row- or col-major tile order, the space tiles whose ids (their number in tile order)
//! lie in a range `[a, b)` are exactly the cells of that range of the global order, whatever the
//! cell order, and such a range is the union of at most `2n - 1` boxes of whole tiles, each
//! consecutive in the order. Bands are ranges of tile ids cut where the fragments' data tiles
//! (their first cells) have added up to the wanted number of cells; a space tile is never cut,
//! so a band holds at least one. Under a curve tile order (Z, Hilbert) an aligned cube of tiles
//! is a range of consecutive keys, and the cubes of one level split those of the level above
//! (`Curve::level_widths`): the parts are cubes, split while more than a band of cells starts
//! in them. Version 1's Hilbert order (over cells, not tiles) is not cut.

use crate::fragment::FragmentMetadata;
use crate::geometry::{Curve, OrderKeys, Rect};
use crate::snapshot::TileKey;

/// One part of a banded read: a box of ordinals (whole space tiles, clipped to the inputs'
/// bounding box) that follows the part before it in the global order, and the data tiles whose
/// cells run on into the next part (worth carrying over, `snapshot/carried.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Part {
    pub(super) rect: Rect,
    pub(super) shared_with_next: Vec<TileKey>,
}

/// The parts covering `bbox` (the inputs' bounding box) in the global order of `keys`, grouped in
/// bands of about `target` cells of `fragments` each (a band's boxes one part each); `None` when
/// the tile order does not cut into boxes or there is one band only. Tiles of the fragments
/// `uncarried` accepts are never named as shared (their cells are read elsewhere).
pub(super) fn parts(
    keys: &OrderKeys,
    fragments: &[FragmentMetadata],
    bbox: &Rect,
    target: u64,
    uncarried: impl Fn(usize) -> bool,
) -> Option<Vec<Part>> {
    let n = bbox.len();
    let order = match keys.tile_curve() {
        Some(curve) => TileOrder::Curve(CurveGrid::new(keys, curve, bbox)?),
        None => TileOrder::Grid(SubGrid::new(keys, bbox)?),
    };
    // Every data tile: its key, the ids of its first and last cells' space tiles, its cells.
    let tiles: Vec<(TileKey, u128, u128, u64)> = fragments
        .iter()
        .enumerate()
        .filter_map(|(f, frag)| Some((f, frag.sparse.as_ref()?)))
        .flat_map(|(f, sp)| {
            let spans = sp.first.iter().zip(&sp.last).zip(&sp.tile_cells).enumerate();
            let order = &order;
            spans
                .filter(move |(_, ((a, b), _))| a.len() == n && b.len() == n)
                .map(move |(t, ((a, b), &cells))| ((f, t as u64), order.id(a), order.id(b), cells))
        })
        .collect();
    let mut starts: Vec<(u128, u64)> = tiles.iter().map(|t| (t.1, t.3)).collect();
    starts.sort_unstable();
    // The boxes in the global order, each with the id after its last tile.
    let boxes: Vec<(Rect, u128)> = match &order {
        TileOrder::Grid(grid) => {
            let cuts = cuts(&starts, target, grid.total)?;
            let mut boxes = Vec::new();
            for w in cuts.windows(2) {
                id_range_boxes(&grid.sig_counts, w[0], w[1], &mut Vec::new(), &mut boxes);
            }
            boxes
                .into_iter()
                .map(|b| {
                    let end = b.iter().zip(&grid.sig_counts).fold(0u128, |acc, (r, &c)| acc * c + u128::from(r[1])) + 1;
                    (grid.rect(&b), end)
                })
                .collect()
        }
        TileOrder::Curve(grid) => grid.boxes(&starts, target)?,
    };
    let ends: Vec<u128> = boxes.iter().map(|b| b.1).collect();
    let mut shared: Vec<Vec<TileKey>> = vec![Vec::new(); boxes.len()];
    for &(key, a, b, _) in tiles.iter().filter(|t| !uncarried(t.0 .0)) {
        // The parts ending inside the tile's span: their next part reads it again.
        let from = ends.partition_point(|&e| e <= a);
        let to = ends.partition_point(|&e| e <= b);
        for s in &mut shared[from..to] {
            s.push(key);
        }
    }
    let parts = boxes.into_iter().zip(shared).map(|((rect, _), shared_with_next)| Part { rect, shared_with_next });
    Some(parts.collect())
}

/// How the space tiles a bounding box meets are ordered: row- or col-major ids, or the keys of
/// a curve.
enum TileOrder<'k> {
    Grid(SubGrid<'k>),
    Curve(CurveGrid<'k>),
}

impl TileOrder<'_> {
    /// The id (or curve key) of the space tile holding the cell of ordinals `cell`.
    fn id(&self, cell: &[u64]) -> u128 {
        match self {
            TileOrder::Grid(g) => g.id(cell),
            TileOrder::Curve(g) => g.id(cell),
        }
    }
}

/// The most boxes one box of a curve tile order is split into at the next level (one per
/// combination of halves of the dimensions split there); arrays of more dimensions are not cut.
const MAX_CURVE_CHILDREN: usize = 4096;

/// The space tiles a bounding box meets under a curve tile order: each aligned cube of tiles
/// (side `2^min(k, e[d])` along dimension `d` at level `k`, `e` the curve's level widths) is a
/// range of consecutive keys, and the cubes of a level split those of the level above. A
/// consolidation reads cube by cube, in key order, splitting a cube while more than a band of
/// cells starts in it.
struct CurveGrid<'k> {
    keys: &'k OrderKeys,
    curve: &'k Curve,
    bbox: &'k Rect,
    /// Per dimension: bits of its coordinate in keys (0: one tile along it).
    widths: Vec<u32>,
    /// Per dimension: the first and last tiles the box meets.
    tiles: Vec<[u64; 2]>,
}

impl<'k> CurveGrid<'k> {
    fn new(keys: &'k OrderKeys, curve: &'k Curve, bbox: &'k Rect) -> Option<Self> {
        let n = bbox.len();
        let widths = curve.level_widths();
        if n == 0 || widths.len() != n {
            return None;
        }
        let tiles = (0..n).map(|d| [keys.tile_coord(d, bbox[d][0]), keys.tile_coord(d, bbox[d][1])]).collect();
        Some(Self { keys, curve, bbox, widths, tiles })
    }

    /// The curve key of the space tile holding the cell of ordinals `cell` (clamped to the box).
    fn id(&self, cell: &[u64]) -> u128 {
        let tc: Vec<u64> =
            (0..cell.len()).map(|d| self.keys.tile_coord(d, cell[d].clamp(self.bbox[d][0], self.bbox[d][1]))).collect();
        self.curve.key(&tc)
    }

    /// The cubes covering the box in key order, each with the key after its last tile, split
    /// until at most `target` cells of the data tiles `starts` (first cells' keys, sorted, and
    /// cells) start in each (or it is one tile); `None` when the whole box is one band.
    fn boxes(&self, starts: &[(u128, u64)], target: u64) -> Option<Vec<(Rect, u128)>> {
        let mut before = Vec::with_capacity(starts.len() + 1);
        before.push(0u64);
        for s in starts {
            before.push(before.last().copied().unwrap_or(0).saturating_add(s.1));
        }
        let count = |lo: u128, hi: u128| {
            let (a, b) = (starts.partition_point(|s| s.0 < lo), starts.partition_point(|s| s.0 < hi));
            before[b] - before[a]
        };
        let top = self.widths.iter().copied().max().unwrap_or(0);
        if before.last().copied().unwrap_or(0) <= target.max(1) {
            return None;
        }
        let mut out = Vec::new();
        self.visit(top, &vec![0; self.widths.len()], &count, target.max(1), &mut out)?;
        (out.len() > 1).then_some(out)
    }

    /// Appends the cubes of the cube of level `k` at tile `corner` that meet the box, in key
    /// order; `None` when a cube would split into too many.
    fn visit(
        &self,
        k: u32,
        corner: &[u64],
        count: &impl Fn(u128, u128) -> u64,
        target: u64,
        out: &mut Vec<(Rect, u128)>,
    ) -> Option<()> {
        let n = corner.len();
        // The tiles of the cube inside the box; none: nothing to read.
        let mut tiles = Vec::with_capacity(n);
        for ((&lo, &w), &[b0, b1]) in corner.iter().zip(&self.widths).zip(&self.tiles) {
            let side = 1u64.checked_shl(k.min(w)).unwrap_or(u64::MAX);
            let hi = lo.saturating_add(side - 1);
            if hi < b0 || lo > b1 {
                return Some(());
            }
            tiles.push([lo.max(b0), hi.min(b1)]);
        }
        let shift: u32 = self.widths.iter().map(|&w| k.min(w)).sum();
        let (lo, hi) = key_range(self.curve.key(corner), shift);
        if k == 0 || count(lo, hi) <= target {
            out.push((self.rect(&tiles), hi));
            return Some(());
        }
        // Halves along the dimensions the next level splits, those meeting the box.
        let split: Vec<usize> = (0..n).filter(|&d| self.widths[d] >= k).collect();
        let half = 1u64 << (k - 1);
        let mut children: Vec<Vec<u64>> = vec![corner.to_vec()];
        for &d in &split {
            let upper = corner[d] + half;
            let mut next = Vec::with_capacity(children.len() * 2);
            for c in children {
                if upper <= self.tiles[d][1] {
                    let mut u = c.clone();
                    u[d] = upper;
                    next.push(u);
                }
                if corner[d] + half > self.tiles[d][0] {
                    next.push(c);
                }
            }
            if next.len() > MAX_CURVE_CHILDREN {
                return None;
            }
            children = next;
        }
        let mut ranked: Vec<(u128, Vec<u64>)> = children.into_iter().map(|c| (self.curve.key(&c), c)).collect();
        ranked.sort_unstable();
        for (_, c) in ranked {
            self.visit(k - 1, &c, count, target, out)?;
        }
        Some(())
    }

    /// The ordinals of the tiles `tiles` (per dimension, inside the box), clipped to the box.
    fn rect(&self, tiles: &[[u64; 2]]) -> Rect {
        tiles
            .iter()
            .enumerate()
            .map(|(d, &[t0, t1])| {
                let range = self.bbox[d];
                let lo = first_ordinal(self.keys, d, t0, range);
                let hi = if t1 >= self.tiles[d][1] { range[1] } else { first_ordinal(self.keys, d, t1 + 1, range) - 1 };
                [lo, hi]
            })
            .collect()
    }
}

/// The keys `[lo, hi)` sharing all but the low `shift` bits with `key` (`hi` saturates).
fn key_range(key: u128, shift: u32) -> (u128, u128) {
    if shift >= 128 {
        return (0, u128::MAX);
    }
    let lo = (key >> shift) << shift;
    (lo, lo.saturating_add(1u128 << shift))
}

/// Where to cut tile ids `0..total` so that each range holds about `target` cells of the data
/// tiles `starts` (the id of each one's first cell, its cells), never inside a space tile: the
/// cuts, from 0 to `total`; `None` for one range.
fn cuts(starts: &[(u128, u64)], target: u64, total: u128) -> Option<Vec<u128>> {
    let mut cuts = vec![0u128];
    let mut held = 0u64;
    for &(at, cells) in starts {
        if held >= target.max(1) && at > *cuts.last().unwrap_or(&0) {
            cuts.push(at);
            held = 0;
        }
        held = held.saturating_add(cells);
    }
    if cuts.len() < 2 {
        return None;
    }
    cuts.push(total);
    Some(cuts)
}

/// The space tiles a bounding box meets, numbered in tile order (row- or col-major like the ids
/// of the whole grid, so the two orders agree).
struct SubGrid<'k> {
    keys: &'k OrderKeys,
    bbox: &'k Rect,
    n: usize,
    /// Dimensions in order of significance, the slowest first.
    order: Vec<usize>,
    /// Per dimension: the first tile the box meets, and how many.
    first: Vec<u64>,
    counts: Vec<u128>,
    /// `counts` in order of significance.
    sig_counts: Vec<u128>,
    total: u128,
}

impl<'k> SubGrid<'k> {
    /// `None` under a tile order that does not number tiles row- or col-major, or for more
    /// tiles than ids hold.
    fn new(keys: &'k OrderKeys, bbox: &'k Rect) -> Option<Self> {
        let order = keys.tile_significance()?;
        let n = bbox.len();
        if n == 0 || order.len() != n {
            return None;
        }
        let first: Vec<u64> = (0..n).map(|d| keys.tile_coord(d, bbox[d][0])).collect();
        let counts: Vec<u128> = (0..n).map(|d| u128::from(keys.tile_coord(d, bbox[d][1]) - first[d]) + 1).collect();
        let sig_counts: Vec<u128> = order.iter().map(|&d| counts[d]).collect();
        let total = sig_counts.iter().try_fold(1u128, |acc, &c| acc.checked_mul(c))?;
        Some(Self { keys, bbox, n, order, first, counts, sig_counts, total })
    }

    /// The id of the space tile holding the cell of ordinals `cell`.
    fn id(&self, cell: &[u64]) -> u128 {
        self.order.iter().fold(0u128, |acc, &d| {
            let b = self.bbox[d];
            let t = self.keys.tile_coord(d, cell[d].clamp(b[0], b[1])) - self.first[d];
            acc * self.counts[d] + u128::from(t)
        })
    }

    /// The ordinals (dimension order) of a box of tiles (ranges in significance order), clipped
    /// to the bounding box.
    fn rect(&self, tiles: &[[u64; 2]]) -> Rect {
        let mut rect: Rect = vec![[0, 0]; self.n];
        for (k, &d) in self.order.iter().enumerate() {
            let [t0, t1] = tiles[k];
            let range = self.bbox[d];
            let lo = first_ordinal(self.keys, d, self.first[d] + t0, range);
            let hi = if u128::from(t1) + 1 >= self.counts[d] {
                range[1]
            } else {
                first_ordinal(self.keys, d, self.first[d] + t1 + 1, range) - 1
            };
            rect[d] = [lo, hi];
        }
        rect
    }
}

/// The first ordinal in `range` of space tile `t` along dimension `d` (tile coordinates rise
/// with ordinals; `t` is a tile the range meets, after its first).
fn first_ordinal(keys: &OrderKeys, d: usize, t: u64, range: [u64; 2]) -> u64 {
    let (mut lo, mut hi) = (range[0], range[1]);
    if keys.tile_coord(d, lo) >= t {
        return lo;
    }
    // tile_coord(lo) < t <= tile_coord(hi)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if keys.tile_coord(d, mid) >= t {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The boxes of tiles (ranges per dimension, significance order) whose row-major ids over a grid
/// of `counts` tiles lie in `[a, b)`, appended to `out` in id order; `prefix` holds the ranges of
/// the dimensions already fixed.
fn id_range_boxes(counts: &[u128], a: u128, b: u128, prefix: &mut Vec<[u64; 2]>, out: &mut Vec<Vec<[u64; 2]>>) {
    if a >= b {
        return;
    }
    let Some((_, rest)) = counts.split_first() else { return };
    let inner: u128 = rest.iter().product();
    // Every count and id fits u64 per dimension: `counts` came from u64 tile coordinates.
    let row = |x: u128| x as u64;
    let full = |prefix: &mut Vec<[u64; 2]>, lo: u128, hi: u128, out: &mut Vec<Vec<[u64; 2]>>| {
        let mut b = prefix.clone();
        b.push([row(lo), row(hi)]);
        b.extend(rest.iter().map(|&c| [0, row(c - 1)]));
        out.push(b);
    };
    let (ra, rb) = (a / inner, (b - 1) / inner);
    let (a_off, b_off) = (a % inner, b % inner);
    if ra == rb {
        if a_off == 0 && b_off == 0 {
            return full(prefix, ra, ra, out);
        }
        prefix.push([row(ra), row(ra)]);
        id_range_boxes(rest, a_off, (b - 1) % inner + 1, prefix, out);
        prefix.pop();
        return;
    }
    let mut first_full = ra;
    if a_off != 0 {
        prefix.push([row(ra), row(ra)]);
        id_range_boxes(rest, a_off, inner, prefix, out);
        prefix.pop();
        first_full += 1;
    }
    let last_full = if b_off == 0 { Some(rb) } else { rb.checked_sub(1) };
    if let Some(last_full) = last_full.filter(|&l| l >= first_full) {
        full(prefix, first_full, last_full, out);
    }
    if b_off != 0 {
        prefix.push([row(rb), row(rb)]);
        id_range_boxes(rest, 0, b_off, prefix, out);
        prefix.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::id_range_boxes;
    use proptest::prelude::*;

    /// The row-major ids of a box of tiles.
    fn ids(counts: &[u128], b: &[[u64; 2]]) -> Vec<u128> {
        let mut out = vec![0u128];
        for (c, r) in counts.iter().zip(b) {
            out = out.iter().flat_map(|&p| (r[0]..=r[1]).map(move |t| p * c + u128::from(t))).collect();
        }
        out
    }

    proptest! {
        #[test]
        fn id_ranges_cut_into_boxes_in_order(counts in proptest::collection::vec(1u128..5, 1..4), a in 0u128..200, len in 0u128..200) {
            let total: u128 = counts.iter().product();
            let (a, b) = (a.min(total), (a + len).min(total));
            let mut boxes = Vec::new();
            id_range_boxes(&counts, a, b, &mut Vec::new(), &mut boxes);
            let got: Vec<u128> = boxes.iter().flat_map(|x| ids(&counts, x)).collect();
            prop_assert_eq!(got, (a..b).collect::<Vec<_>>());
            prop_assert!(boxes.len() < 2 * counts.len().max(1));
        }
    }
}
