//! Space-filling curve orders (docs/format.md §5.1): the one place that turns a point into its
//! Z (Morton) or Hilbert key, and what the engine derives from those keys: the permutation that
//! stores a dense tile's cells in curve order, and the tiles of a tile range ranked in curve
//! order. Keys are `u128`; a schema whose keys would need more bits is refused when validated
//! (`ArraySchema::validate`), so no key here wraps.
//!
//! Both derived tables are computed once per shape and kept in small process-wide caches, so
//! reads and writes only look them up.

use std::sync::{Arc, Mutex, PoisonError};

use rayon::prelude::*;

use super::gather_cells;
use crate::schema::CellOrder;

/// A space-filling curve over points whose coordinate along dimension `d` has `widths[d]` bits.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Curve {
    order: CellOrder,
    widths: Vec<u32>,
    /// The dimensions of non-zero width, in dimension order (the others are always 0).
    active: Vec<usize>,
    /// The largest width.
    top: u32,
}

impl Curve {
    /// The curve of `order` over coordinates of `widths` bits, `None` for row- and col-major.
    pub(crate) fn new(order: CellOrder, widths: &[u32]) -> Option<Self> {
        if !order.is_curve() {
            return None;
        }
        Some(Self {
            order,
            widths: widths.to_vec(),
            active: (0..widths.len()).filter(|&d| widths[d] > 0).collect(),
            top: widths.iter().copied().max().unwrap_or(0),
        })
    }

    /// The key of point `x` (one coordinate per dimension, each below `2^widths[d]`).
    pub(crate) fn key(&self, x: &[u64]) -> u128 {
        match self.active.as_slice() {
            [] => 0,
            // One dimension: every curve is the identity.
            &[d] => u128::from(x[d]),
            _ if self.order == CellOrder::Z => self.z_key(x),
            _ => self.hilbert_key(x),
        }
    }

    /// The bits each dimension's coordinate takes in keys: its width under Z, the largest
    /// width under Hilbert (every active dimension padded to it); 0 for inactive dimensions.
    /// The points of an aligned cube of side `2^min(k, e[d])` along each dimension `d` (`e`
    /// these widths) have consecutive keys, sharing all but their low `sum(min(k, e[d]))`
    /// bits: both curves visit such cubes one after the other, level by level.
    pub(crate) fn level_widths(&self) -> Vec<u32> {
        let mut e = vec![0u32; self.widths.len()];
        for &d in &self.active {
            e[d] = if self.order == CellOrder::Z || self.active.len() == 1 { self.widths[d] } else { self.top };
        }
        e
    }

    /// Bit interleaving, most significant level first; at each level the dimensions that have
    /// a bit there, first dimension first.
    fn z_key(&self, x: &[u64]) -> u128 {
        let mut k = 0u128;
        for level in (0..self.top).rev() {
            for &d in &self.active {
                if self.widths[d] > level {
                    k = (k << 1) | u128::from((x[d] >> level) & 1);
                }
            }
        }
        k
    }

    /// Skilling's transform over the active dimensions with `top` bits each.
    fn hilbert_key(&self, x: &[u64]) -> u128 {
        let mut v = [0u64; 32];
        let n = self.active.len().min(32);
        for (k, &d) in self.active.iter().take(n).enumerate() {
            v[k] = x[d];
        }
        hilbert_index(&mut v[..n], self.top)
    }
}

/// The key of point `x` along the curve of `order` over coordinates of `widths` bits, as
/// docs/format.md §5.1 defines it (Z: bits interleaved; Hilbert: Skilling's index), or `None`
/// for row- and col-major, for a curve of more than 128 bits, or for a coordinate wider than its
/// width. Keys order tiles of a curve tile order (coordinates: tile coordinates) and cells inside
/// a tile of a curve cell order (coordinates: offsets from the tile's first cell).
pub fn curve_key(order: CellOrder, widths: &[u32], x: &[u64]) -> Option<u128> {
    let fits = widths.len() == x.len() && x.iter().zip(widths).all(|(&v, &w)| w >= 64 || v >> w == 0);
    if !fits || widths.len() > 32 || order.curve_bits(widths) > u64::from(crate::schema::MAX_CURVE_BITS) {
        return None;
    }
    Curve::new(order, widths).map(|c| c.key(x))
}

/// Skilling's transform ("Programming the Hilbert curve", AIP Conf. Proc. 707, 2004): the
/// Hilbert index of point `x` of `x.len()` coordinates of `bits` bits each: `AxesToTranspose`,
/// then the transposed bits interleaved from bit `bits - 1` down, first coordinate first. Keys
/// longer than 128 bits keep their last 128 (schemas never ask for them).
pub(crate) fn hilbert_index(x: &mut [u64], bits: u32) -> u128 {
    let n = x.len();
    if n == 0 || bits == 0 {
        return 0;
    }
    let m = 1u64 << (bits.min(64) - 1);
    // Inverse undo of excess work.
    let mut q = m;
    while q > 1 {
        let p = q - 1;
        for i in 0..n {
            if x[i] & q != 0 {
                x[0] ^= p;
            } else {
                let t = (x[0] ^ x[i]) & p;
                x[0] ^= t;
                x[i] ^= t;
            }
        }
        q >>= 1;
    }
    // Gray encode.
    for i in 1..n {
        x[i] ^= x[i - 1];
    }
    let mut t = 0u64;
    let mut q = m;
    while q > 1 {
        if x[n - 1] & q != 0 {
            t ^= q - 1;
        }
        q >>= 1;
    }
    for v in x.iter_mut() {
        *v ^= t;
    }
    let mut h = 0u128;
    for b in (0..bits.min(64)).rev() {
        for v in x.iter() {
            h = (h << 1) | u128::from((v >> b) & 1);
        }
    }
    h
}

/// Where each cell of a dense tile is stored under a curve cell order. Cells are numbered
/// row-major inside the tile (the engine's working layout); stored cell `k` is row-major cell
/// `to_logical[k]`, and row-major cell `i` is stored at `to_physical[i]`.
#[derive(Debug)]
pub(crate) struct TilePermutation {
    pub(crate) to_logical: Vec<u32>,
    pub(crate) to_physical: Vec<u32>,
}

impl TilePermutation {
    /// The permutation of a tile of `extents` cells under `curve` (widths from the extents).
    fn build(curve: &Curve, extents: &[u64]) -> Self {
        let n = extents.len();
        let total: u64 = extents.iter().product();
        let key = |i: u64| {
            let mut x = [0u64; 32];
            let mut rest = i;
            for d in (0..n).rev() {
                x[d] = rest % extents[d];
                rest /= extents[d];
            }
            // Tiles of curve orders hold at most 2^32 cells (a schema rule).
            (curve.key(&x[..n]), i as u32)
        };
        let keyed = sorted_keys(total, key);
        let to_logical: Vec<u32> = keyed.into_iter().map(|(_, i)| i).collect();
        let mut to_physical = vec![0u32; to_logical.len()];
        for (k, &i) in to_logical.iter().enumerate() {
            to_physical[i as usize] = k as u32;
        }
        Self { to_logical, to_physical }
    }

    /// Cells of `elem` bytes, row-major in `logical`, in stored (curve) order.
    pub(crate) fn row_major_to_stored(&self, elem: usize, logical: &[u8]) -> Vec<u8> {
        gather_cells(logical, elem, &self.to_logical)
    }

    /// Cells of `elem` bytes, in stored (curve) order in `stored`, back in row-major order.
    pub(crate) fn stored_to_row_major(&self, elem: usize, stored: &[u8]) -> Vec<u8> {
        gather_cells(stored, elem, &self.to_physical)
    }
}

/// `key(i)` for `i` in `0..total`, sorted (in parallel only when there are many: a hand-over to
/// the thread pool costs more than ranking a few tiles).
fn sorted_keys<T: Ord + Send>(total: u64, key: impl Fn(u64) -> T + Sync + Send) -> Vec<T> {
    const PARALLEL: u64 = 1 << 14;
    if total < PARALLEL {
        let mut v: Vec<T> = (0..total).map(key).collect();
        v.sort_unstable();
        return v;
    }
    let mut v: Vec<T> = (0..total).into_par_iter().map(key).collect();
    v.par_sort_unstable();
    v
}

/// The tiles of a tile range in curve order: their keys ascending, and each one's row-major
/// number inside the range.
#[derive(Debug)]
pub(crate) struct RankedTiles {
    keys: Vec<u128>,
    lins: Vec<u64>,
}

impl RankedTiles {
    /// The tiles of `trange` (absolute tile coordinates) ranked by `curve`.
    pub(crate) fn build(curve: &Curve, trange: &[[u64; 2]]) -> Self {
        let shape: Vec<u64> = trange.iter().map(|[lo, hi]| hi - lo + 1).collect();
        let total: u64 = shape.iter().product();
        let n = shape.len();
        let key = |i: u64| {
            let mut x = [0u64; 32];
            let mut rest = i;
            for d in (0..n).rev() {
                x[d] = trange[d][0] + rest % shape[d];
                rest /= shape[d];
            }
            (curve.key(&x[..n]), i)
        };
        let keyed = sorted_keys(total, key);
        let (keys, lins) = keyed.into_iter().unzip();
        Self { keys, lins }
    }

    /// Number of tiles.
    pub(crate) fn len(&self) -> u64 {
        self.keys.len() as u64
    }

    /// Position in curve order of the tile whose key is `key` (a tile of the range).
    pub(crate) fn rank(&self, key: u128) -> u64 {
        self.keys.partition_point(|&k| k < key) as u64
    }

    /// Row-major number inside the range of the tile at position `rank`.
    pub(crate) fn lin(&self, rank: u64) -> u64 {
        self.lins.get(rank as usize).copied().unwrap_or(0)
    }
}

/// A small process-wide cache of tables built from a key: the last `CAP` kept, fewer when
/// their cells (`weight`) pass `MAX_WEIGHT` (the newest is always kept).
struct Memo<K, V> {
    entries: Mutex<Vec<(K, Arc<V>)>>,
    weight: fn(&V) -> usize,
}

impl<K: PartialEq + Clone, V> Memo<K, V> {
    const CAP: usize = 16;
    const MAX_WEIGHT: usize = 1 << 22;

    const fn new(weight: fn(&V) -> usize) -> Self {
        Self { entries: Mutex::new(Vec::new()), weight }
    }

    fn get_or(&self, key: &K, build: impl FnOnce() -> V) -> Arc<V> {
        {
            let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((_, v)) = entries.iter().find(|(k, _)| k == key) {
                return v.clone();
            }
        }
        // Built outside the lock: other shapes need not wait.
        let v = Arc::new(build());
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.push((key.clone(), v.clone()));
        let mut total: usize = entries.iter().map(|e| (self.weight)(&e.1)).sum();
        while entries.len() > 1 && (entries.len() > Self::CAP || total > Self::MAX_WEIGHT) {
            total -= (self.weight)(&entries[0].1);
            entries.remove(0);
        }
        v
    }
}

static PERMUTATIONS: Memo<(Curve, Vec<u64>), TilePermutation> = Memo::new(|p| p.to_logical.len());
static RANKINGS: Memo<(Curve, Vec<[u64; 2]>), RankedTiles> = Memo::new(|r| r.keys.len());

/// The permutation of a dense tile of `extents` under `curve` (cached per curve and shape).
pub(crate) fn tile_permutation(curve: &Curve, extents: &[u64]) -> Arc<TilePermutation> {
    PERMUTATIONS.get_or(&(curve.clone(), extents.to_vec()), || TilePermutation::build(curve, extents))
}

/// The tiles of `trange` ranked by `curve`, cached per curve and range: for the ranges of
/// fragments, which every copy from a fragment's tile looks up.
pub(crate) fn ranked_tiles(curve: &Curve, trange: &[[u64; 2]]) -> Arc<RankedTiles> {
    RANKINGS.get_or(&(curve.clone(), trange.to_vec()), || RankedTiles::build(curve, trange))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::bit_width;
    use proptest::prelude::*;

    fn curve(order: CellOrder, shape: &[u64]) -> Curve {
        let widths: Vec<u32> = shape.iter().map(|&e| bit_width(e)).collect();
        Curve::new(order, &widths).unwrap()
    }

    /// Every point of the box `shape`, row-major.
    fn points(shape: &[u64]) -> Vec<Vec<u64>> {
        let total: u64 = shape.iter().product();
        (0..total)
            .map(|mut i| {
                let mut x = vec![0u64; shape.len()];
                for d in (0..shape.len()).rev() {
                    x[d] = i % shape[d];
                    i /= shape[d];
                }
                x
            })
            .collect()
    }

    proptest! {
        /// The points of an aligned cube of level `k` (side `2^min(k, e[d])`, `e` the level
        /// widths) have keys that differ in their low `sum(min(k, e[d]))` bits only, and fill
        /// that range when the cube lies inside the widths.
        #[test]
        fn aligned_cubes_are_key_ranges(widths in prop::collection::vec(0u32..4, 1..4), z in any::<bool>(),
                                        k in 0u32..4, at in prop::collection::vec(any::<u64>(), 3)) {
            let order = if z { CellOrder::Z } else { CellOrder::Hilbert };
            let c = Curve::new(order, &widths).unwrap();
            let e = c.level_widths();
            let side: Vec<u64> = e.iter().map(|&w| 1u64 << k.min(w)).collect();
            // A cube corner inside the padded range of each dimension.
            let corner: Vec<u64> =
                (0..widths.len()).map(|d| (at[d] % (1u64 << e[d].max(k.min(e[d])))) / side[d] * side[d]).collect();
            let shift: u32 = e.iter().map(|&w| k.min(w)).sum();
            let cube = points(&side);
            let keys: Vec<u128> =
                cube.iter().map(|p| c.key(&p.iter().zip(&corner).map(|(a, b)| a + b).collect::<Vec<_>>())).collect();
            let first = keys[0] >> shift;
            prop_assert!(keys.iter().all(|&key| key >> shift == first), "{:?} {:?} {:?}", e, corner, keys);
            let inside = (0..widths.len()).all(|d| corner[d] + side[d] <= 1u64 << widths[d]);
            if inside {
                let mut sorted = keys.clone();
                sorted.sort_unstable();
                sorted.dedup();
                prop_assert_eq!(sorted.len() as u128, 1u128 << shift);
            }
        }

        /// Keys of distinct points differ, fit their bits, and the tile permutation and tile
        /// ranking are bijections consistent with the keys.
        #[test]
        fn every_curve_is_a_bijection(shape in prop::collection::vec(1u64..9, 1..5), z in any::<bool>(),
                                      origin in prop::collection::vec(0u64..5, 4)) {
            let order = if z { CellOrder::Z } else { CellOrder::Hilbert };
            let c = curve(order, &shape);
            let widths: Vec<u32> = shape.iter().map(|&e| bit_width(e)).collect();
            let bits = order.curve_bits(&widths);
            let pts = points(&shape);
            let mut keys: Vec<u128> = pts.iter().map(|p| c.key(p)).collect();
            prop_assert!(keys.iter().all(|&k| bits >= 128 || k < 1u128 << bits));
            keys.sort_unstable();
            keys.dedup();
            prop_assert_eq!(keys.len(), pts.len());
            let perm = TilePermutation::build(&c, &shape);
            let mut seen = vec![false; pts.len()];
            for (k, &i) in perm.to_logical.iter().enumerate() {
                prop_assert!(!seen[i as usize]);
                seen[i as usize] = true;
                prop_assert_eq!(perm.to_physical[i as usize] as usize, k);
                if k > 0 {
                    prop_assert!(c.key(&pts[perm.to_logical[k - 1] as usize]) < c.key(&pts[i as usize]));
                }
            }
            // Cells of 3 bytes round-trip through the stored order.
            let logical: Vec<u8> = (0..pts.len() * 3).map(|b| b as u8).collect();
            prop_assert_eq!(perm.stored_to_row_major(3, &perm.row_major_to_stored(3, &logical)), logical.clone());
            // A range of tiles away from the origin: ranks are 0..count in key order.
            let trange: Vec<[u64; 2]> = shape.iter().zip(&origin).map(|(&e, &o)| [o, o + e - 1]).collect();
            let wide: Vec<u64> = trange.iter().map(|r| r[1] + 1).collect();
            let tc = curve(order, &wide);
            let ranked = RankedTiles::build(&tc, &trange);
            prop_assert_eq!(ranked.len(), pts.len() as u64);
            let mut ranks: Vec<u64> = pts.iter().map(|p| {
                let abs: Vec<u64> = p.iter().zip(&trange).map(|(x, r)| x + r[0]).collect();
                ranked.rank(tc.key(&abs))
            }).collect();
            for (i, &r) in ranks.iter().enumerate() {
                prop_assert_eq!(ranked.lin(r), i as u64);
            }
            ranks.sort_unstable();
            prop_assert_eq!(ranks, (0..pts.len() as u64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn z_order_interleaves_first_dimension_most_significant() {
        let c = curve(CellOrder::Z, &[4, 4]);
        // (x0, x1) = (1, 2): bits x0 = 01, x1 = 10 -> levels 1: (0, 1), 0: (1, 0) -> 0b0110.
        assert_eq!(c.key(&[1, 2]), 0b0110);
        // Unequal widths: x0 has 1 bit, x1 has 3; level 2 and 1 hold only x1's bits.
        let c = curve(CellOrder::Z, &[2, 8]);
        assert_eq!(c.key(&[1, 0b101]), 0b1011);
        // A dimension of extent 1 takes no bits.
        let c = curve(CellOrder::Z, &[4, 1, 4]);
        assert_eq!(c.key(&[1, 0, 2]), 0b0110);
    }

    #[test]
    fn hilbert_2d_visits_neighbours_in_the_usual_order() {
        let c = curve(CellOrder::Hilbert, &[8, 8]);
        let mut cells: Vec<(u128, Vec<u64>)> = points(&[8, 8]).into_iter().map(|p| (c.key(&p), p)).collect();
        cells.sort();
        for (i, c) in cells.iter().enumerate() {
            assert_eq!(c.0, i as u128, "a bijection onto 0..64");
        }
        for w in cells.windows(2) {
            let d = w[0].1[0].abs_diff(w[1].1[0]) + w[0].1[1].abs_diff(w[1].1[1]);
            assert_eq!(d, 1, "{w:?}");
        }
        // Skilling's orientation (docs/format.md §5.1): from the origin, first along the last
        // dimension; the curve ends at the far corner of the first dimension.
        let first: Vec<Vec<u64>> = cells[..4].iter().map(|c| c.1.clone()).collect();
        assert_eq!(first, vec![vec![0, 0], vec![0, 1], vec![1, 1], vec![1, 0]]);
        assert_eq!(cells[63].1, vec![7, 0]);
    }

    #[test]
    fn hilbert_3d_steps_to_neighbours() {
        let c = curve(CellOrder::Hilbert, &[4, 4, 4]);
        let mut cells: Vec<(u128, Vec<u64>)> = points(&[4, 4, 4]).into_iter().map(|p| (c.key(&p), p)).collect();
        cells.sort();
        for w in cells.windows(2) {
            let d: u64 = w[0].1.iter().zip(&w[1].1).map(|(a, b)| a.abs_diff(*b)).sum();
            assert_eq!(d, 1, "{w:?}");
        }
    }

    #[test]
    fn one_dimension_is_the_identity() {
        for order in [CellOrder::Z, CellOrder::Hilbert] {
            let c = curve(order, &[1, 100, 1]);
            assert!((0..100).all(|x| c.key(&[0, x, 0]) == u128::from(x)));
        }
    }

    #[test]
    fn wide_keys_use_all_128_bits() {
        let c = Curve::new(CellOrder::Z, &[64, 64]).unwrap();
        assert_eq!(c.key(&[u64::MAX, 0]), u128::MAX / 3 * 2);
        let h = Curve::new(CellOrder::Hilbert, &[64, 64]).unwrap();
        let corner = h.key(&[u64::MAX, 0]);
        assert!(corner > u128::MAX / 2, "{corner:x}");
    }

    #[test]
    fn caches_return_the_same_table() {
        let c = curve(CellOrder::Z, &[3, 5]);
        assert!(Arc::ptr_eq(&tile_permutation(&c, &[3, 5]), &tile_permutation(&c, &[3, 5])));
        assert!(Arc::ptr_eq(&ranked_tiles(&c, &[[0, 2], [1, 4]]), &ranked_tiles(&c, &[[0, 2], [1, 4]])));
    }
}
