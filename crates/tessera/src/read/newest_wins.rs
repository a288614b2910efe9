//! Which cell wins where fragments hold the same coordinates: the newest fragment's. For
//! results in global order, the fragments' sorted streams are merged with the largest one
//! (`merge_with_largest`); for unordered results, older duplicates are dropped without sorting
//! (`newest_unordered`), in parallel hash partitions when the cells are many.

use rayon::prelude::*;

use super::sparse::CellRef;
use crate::fast_hash::{FastMap, FastSet};
use crate::geometry::OrderKeys;

/// The ranges `[a, b)` of `refs` that hold one fragment's cells each (cells come grouped by
/// fragment).
fn fragment_groups(refs: &[CellRef]) -> Vec<(usize, usize)> {
    // A binary search per group: a large fragment's cells are not visited one by one.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    let mut a = 0;
    while a < refs.len() {
        let f = refs[a].0;
        let b = a + refs[a..].partition_point(|r| r.0 == f);
        groups.push((a, b));
        a = b;
    }
    groups
}

/// The cells `refs` (grouped by fragment, each group in global order) in global order, newest
/// fragment first among equal keys (`packed`: one order-preserving key per cell, each below
/// `1 << width`). The largest fragment's cells are already sorted: only the others are sorted,
/// then the two sequences are merged in one linear pass (a consolidation of one large and many
/// small fragments costs a sort of the small ones, not of everything).
pub(super) fn merge_with_largest(refs: &[CellRef], packed: &[u128], width: u32) -> Vec<u32> {
    let groups = fragment_groups(refs);
    let largest = groups.iter().copied().max_by_key(|g| g.1 - g.0).unwrap_or((0, 0));
    let newest = refs.iter().map(|r| r.0).max().unwrap_or(0);
    let (fragment_bits, index_bits) = (bits_for(u64::from(newest)), bits_for(refs.len() as u64));
    if width + fragment_bits + index_bits <= 128 {
        // Key, then fragment (newest first), then position packed in one u128: half the memory
        // of a tuple and one comparison per step.
        let shift = fragment_bits + index_bits;
        let item = |i: usize| (packed[i] << shift) | (u128::from(newest - refs[i].0) << index_bits) | i as u128;
        let mask = (1u128 << index_bits) - 1;
        return merge_runs(refs.len(), largest, item, |x| (x & mask) as u32);
    }
    let item = |i: usize| (packed[i], u32::MAX - refs[i].0, i as u32);
    merge_runs(refs.len(), largest, item, |t| t.2)
}

/// Bits needed to write every number up to `max`.
fn bits_for(max: u64) -> u32 {
    64 - max.leading_zeros()
}

/// Positions `0..n` ordered by `item` (distinct for distinct positions), where the positions
/// `largest` are already in order: the others are sorted and merged with them.
fn merge_runs<T: Ord + Copy + Send>(
    n: usize,
    (la, lb): (usize, usize),
    item: impl Fn(usize) -> T + Sync,
    position: impl Fn(T) -> u32,
) -> Vec<u32> {
    let mut rest: Vec<T> = (0..la).chain(lb..n).map(&item).collect();
    // The others come as sorted runs too (one per fragment): a merge sort finds and merges them
    // (perf of a consolidation of 10 + 100 overlapping fragments: the sort 8.5% of the CPU as a
    // quicksort, 3% as a merge sort), at the cost of a scratch copy of `rest` while it runs.
    rest.par_sort();
    let mut out = Vec::with_capacity(n);
    let (mut i, mut j) = (la, 0);
    while i < lb && j < rest.len() {
        if item(i) < rest[j] {
            out.push(i as u32);
            i += 1;
        } else {
            out.push(position(rest[j]));
            j += 1;
        }
    }
    out.extend((i..lb).map(|k| k as u32));
    out.extend(rest[j..].iter().map(|&t| position(t)));
    out
}

/// Unordered results without duplicates, no deletions: of the cells `refs` (grouped by
/// fragment, oldest first; ordinals `ords`, `nd` per cell) keeps, per coordinates, the newest
/// fragment's, with a hash set of newer fragments' coordinates. When one fragment holds most
/// cells (a large load under small updates), its cells are never put in a hash set: the others
/// are reduced among themselves, then the largest fragment's cells are looked up in a map of
/// theirs, or, when they are few, each of theirs is searched among the largest fragment's cells
/// (which are in global order) by binary search on order keys. No sort: the cells keep their
/// order. Returns whether each cell is kept.
pub(super) fn newest_unordered(refs: &[CellRef], ords: &[u64], nd: usize, order: &OrderKeys) -> Vec<bool> {
    debug_assert!(refs.windows(2).all(|w| w[0].0 <= w[1].0), "cells grouped by fragment, oldest first");
    let groups = fragment_groups(refs);
    let Some(largest) = (0..groups.len()).max_by_key(|&g| groups[g].1 - groups[g].0) else {
        return vec![true; refs.len()];
    };
    let at = |i: usize| &ords[i * nd..i * nd + nd];
    let mut keep = vec![true; refs.len()];
    let (la, lb) = groups[largest];
    // No fragment dominates (e.g. ten loads of similar size): all take part in the hash set.
    let dominant = (lb - la) >= 3 * (refs.len() - (lb - la));
    let hashed: Vec<(usize, usize)> =
        groups.iter().enumerate().filter(|&(g, _)| !dominant || g != largest).map(|(_, &r)| r).collect();
    // Up to two dimensions the coordinates are one u128 (cheap to hash and compare).
    match nd {
        1 => drop_older_packed(&hashed, &mut keep, |i| [ords[i], 0]),
        2 => drop_older_packed(&hashed, &mut keep, |i| [ords[2 * i], ords[2 * i + 1]]),
        _ => drop_older(&hashed, &mut keep, at),
    }
    if !dominant {
        return keep;
    }
    // Then against the largest fragment: whichever of the two cells is older goes. When the
    // others are many enough, the largest's cells are looked up in a map of theirs (one cheap
    // probe per cell); otherwise each of theirs is searched among the largest's by order key.
    let others = keep[..la].iter().chain(&keep[lb..]).filter(|k| **k).count();
    let log = (usize::BITS - (lb - la).leading_zeros()) as usize;
    if lb - la < others * log * 16 {
        match nd {
            1 => against_largest(refs, (ords, nd), (la, lb), &mut keep, |i| u128::from(ords[i])),
            2 => against_largest(refs, (ords, nd), (la, lb), &mut keep, |i| {
                u128::from(ords[2 * i]) << 64 | u128::from(ords[2 * i + 1])
            }),
            _ => against_largest(refs, (ords, nd), (la, lb), &mut keep, at),
        }
        return keep;
    }
    let w = order.width();
    let (mut probe, mut key) = (vec![0u64; w], vec![0u64; w]);
    for i in (0..la).chain(lb..refs.len()) {
        if !keep[i] {
            continue;
        }
        order.key(at(i), &mut key);
        let (mut lo, mut hi) = (la, lb);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            order.key(at(mid), &mut probe);
            if probe < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo < lb && at(lo) == at(i) {
            if refs[i].0 > refs[lo].0 {
                keep[lo] = false;
            } else {
                keep[i] = false;
            }
        }
    }
    keep
}

/// Clears `keep` for the older of every two cells with the same coordinates (`key`; ordinals
/// `ords`, `nd` per cell) of which one lies in the largest fragment's cells `[la, lb)` and the
/// other is a kept cell outside it.
fn against_largest<K: std::hash::Hash + Eq>(
    refs: &[CellRef],
    (ords, nd): (&[u64], usize),
    (la, lb): (usize, usize),
    keep: &mut [bool],
    key: impl Fn(usize) -> K,
) {
    let others: FastMap<K, usize> = (0..la).chain(lb..refs.len()).filter(|&i| keep[i]).map(|i| (key(i), i)).collect();
    if others.is_empty() {
        return;
    }
    // A bitmap of the others' coordinates (64 bits per cell, a multiplicative hash whose top
    // bits pick the bit) turns away most of the largest fragment's cells in one cheap pass.
    let bits = (others.len() * 64).next_power_of_two().max(64);
    let shift = 64 - bits.trailing_zeros();
    let slot = |o: &[u64]| {
        let h = o.iter().fold(0u64, |h, &x| (h.rotate_left(29) ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        (h >> shift) as usize
    };
    let mut filter = vec![0u64; bits / 64];
    for &i in others.values() {
        let b = slot(&ords[i * nd..i * nd + nd]);
        filter[b / 64] |= 1 << (b % 64);
    }
    let mut check = |k: usize, b: usize| {
        if filter[b / 64] & (1 << (b % 64)) == 0 {
            return;
        }
        let i = la + k;
        if let Some(&j) = others.get(&key(i)) {
            if refs[j].0 > refs[i].0 {
                keep[i] = false;
            } else {
                keep[j] = false;
            }
        }
    };
    let part = &ords[la * nd..lb * nd];
    match bytemuck::try_cast_slice::<u64, [u64; 2]>(part).ok().filter(|_| nd == 2) {
        // Two dimensions (the common case): the same hash with the loop unrolled.
        Some(pairs) => pairs.iter().enumerate().for_each(|(k, o)| check(k, slot(o))),
        None => part.chunks_exact(nd.max(1)).enumerate().for_each(|(k, o)| check(k, slot(o))),
    }
}

/// Clears `keep` for every cell whose coordinates (`key`) a newer group also holds; groups are
/// fragments' cells, oldest first.
fn drop_older<K: std::hash::Hash + Eq>(groups: &[(usize, usize)], keep: &mut [bool], key: impl Fn(usize) -> K) {
    let stored: usize = groups.iter().skip(1).map(|g| g.1 - g.0).sum();
    let mut seen: FastSet<K> = FastSet::default();
    seen.reserve(stored);
    for (k, &(a, b)) in groups.iter().enumerate().rev() {
        if !seen.is_empty() {
            for (i, kp) in keep[a..b].iter_mut().enumerate() {
                *kp = !seen.contains(&key(a + i));
            }
        }
        if k > 0 {
            seen.extend((a..b).map(&key));
        }
    }
}

/// Cells from which [`drop_older_packed`] splits its work into hash partitions; below, one
/// table of all of them stays in cache.
const PARTITION_FROM: usize = 1 << 15;

/// Cells per hash partition aimed at: a table of twice as many 8-byte slots (128 KiB) stays in
/// the L2 cache.
const PARTITION_CELLS: usize = 1 << 13;

/// Cells per piece of a group that one task sorts by partition.
const PIECE_CELLS: usize = 1 << 16;

/// [`drop_older`] for coordinates of one or two dimensions (`key`: two words). A table of a
/// million cells misses the cache on almost every probe, so many cells are first split by hash
/// into partitions of a few thousand (each group cut in pieces, each piece sorted by partition
/// with a counting sort), then each partition is reduced, newest cell first, with a small
/// open-addressing table that stays in cache. Pieces and partitions run on the compute pool of
/// the caller.
fn drop_older_packed(groups: &[(usize, usize)], keep: &mut [bool], key: impl Fn(usize) -> [u64; 2] + Sync) {
    let n: usize = groups.iter().map(|g| g.1 - g.0).sum();
    if keep.len() >= u32::MAX as usize {
        return drop_older(groups, keep, key);
    }
    let bits = if n < PARTITION_FROM { 0 } else { (n / PARTITION_CELLS).next_power_of_two().trailing_zeros().min(12) };
    for i in drop_older_partitioned(groups, &key, bits) {
        keep[i as usize] = false;
    }
}

/// One cell in a hash partition: the low half of its coordinates' hash, its index. The
/// coordinates themselves are looked up only when two hashes are equal.
#[derive(Clone, Copy, Default)]
struct Entry {
    hash: u32,
    idx: u32,
}

/// The cells of `groups` (ranges of cell indices, oldest group first) that a newer group also
/// holds, split into `2^bits` hash partitions. Cell indices fit in u32.
fn drop_older_partitioned(groups: &[(usize, usize)], key: &(impl Fn(usize) -> [u64; 2] + Sync), bits: u32) -> Vec<u32> {
    let parts = 1usize << bits;
    let part_of = |h: u64| if bits == 0 { 0 } else { (h >> (64 - bits)) as usize };
    let pieces: Vec<(usize, usize)> = groups
        .iter()
        .flat_map(|&(a, b)| (a..b).step_by(PIECE_CELLS).map(move |s| (s, (s + PIECE_CELLS).min(b))))
        .collect();
    // Each piece's cells sorted by partition (stable: ascending indices within one), and where
    // each partition starts in it.
    let sorted: Vec<(Vec<Entry>, Vec<u32>)> = pieces
        .par_iter()
        .map(|&(a, b)| {
            let hashes: Vec<u64> = (a..b).map(|i| mix(key(i))).collect();
            let mut starts = vec![0u32; parts + 1];
            for &h in &hashes {
                starts[part_of(h) + 1] += 1;
            }
            for p in 0..parts {
                starts[p + 1] += starts[p];
            }
            let mut at = starts.clone();
            let mut out = vec![Entry::default(); b - a];
            for (k, &h) in hashes.iter().enumerate() {
                let p = part_of(h);
                out[at[p] as usize] = Entry { hash: h as u32, idx: (a + k) as u32 };
                at[p] += 1;
            }
            (out, starts)
        })
        .collect();
    let dropped: Vec<Vec<u32>> = (0..parts)
        .into_par_iter()
        .map_init(SeenTable::default, |table, p| {
            let span = |s: &[u32]| s[p] as usize..s[p + 1] as usize;
            table.reset(sorted.iter().map(|(_, s)| span(s).len()).sum());
            let mut out = Vec::new();
            // Newest cell first (pieces and their cells in descending index order); `g`: the
            // group of the current cell, found by walking down as the indices fall.
            let mut g = groups.len().saturating_sub(1);
            for (entries, starts) in sorted.iter().rev() {
                for e in entries[span(starts)].iter().rev() {
                    if let Some(newer) = table.first_or_insert(e, key) {
                        while groups[g].0 > e.idx as usize {
                            g -= 1;
                        }
                        // A cell of the same group keeps its twin (duplicates within one
                        // fragment are the schema's business, as in `drop_older`).
                        if newer as usize >= groups[g].1 {
                            out.push(e.idx);
                        }
                    }
                }
            }
            out
        })
        .collect();
    dropped.concat()
}

/// A 64-bit hash of two words: two folded 128-bit multiplications (each mixes every input bit
/// into both halves of the product).
fn mix([lo, hi]: [u64; 2]) -> u64 {
    let fold = |a: u64, b: u64| {
        let m = u128::from(a) * u128::from(b);
        (m as u64) ^ ((m >> 64) as u64)
    };
    fold(fold(lo ^ 0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344) ^ hi, 0xA409_3822_299F_31D0)
}

/// An open-addressing table (linear probing) of cells by coordinates, keeping the first cell
/// inserted per coordinates.
#[derive(Default)]
struct SeenTable {
    slots: Vec<Entry>,
    mask: usize,
}

impl SeenTable {
    /// Empties the table and sizes it for `len` cells (at most half full).
    fn reset(&mut self, len: usize) {
        let cap = (2 * len).next_power_of_two().max(8);
        self.slots.clear();
        self.slots.resize(cap, Entry { idx: u32::MAX, ..Entry::default() });
        self.mask = cap - 1;
    }

    /// The index of the cell already in the table with `e`'s coordinates (`key` of an index),
    /// or `None` after inserting `e`.
    fn first_or_insert(&mut self, e: &Entry, key: impl Fn(usize) -> [u64; 2]) -> Option<u32> {
        let mut s = e.hash as usize & self.mask;
        loop {
            let slot = &mut self.slots[s];
            if slot.idx == u32::MAX {
                *slot = *e;
                return None;
            }
            if slot.hash == e.hash && key(slot.idx as usize) == key(e.idx as usize) {
                return Some(slot.idx);
            }
            s = (s + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Coordinates whose hashes collide (as chosen coordinates could make them) are told apart
    /// by the coordinates themselves: a collision costs a probe, never a dropped cell.
    #[test]
    fn equal_hashes_of_different_coordinates_are_different_cells() {
        let keys = [[1u64, 2], [3, 4], [1, 2]];
        let key = |i: usize| keys[i];
        let mut table = SeenTable::default();
        table.reset(3);
        let same = |idx: u32| Entry { hash: 7, idx };
        assert_eq!(table.first_or_insert(&same(0), key), None);
        assert_eq!(table.first_or_insert(&same(1), key), None);
        assert_eq!(table.first_or_insert(&same(2), key), Some(0));
    }

    proptest! {
        /// The merge with the largest fragment orders cells exactly as one sort of all of them,
        /// whether key, fragment and position fit one u128 or not.
        #[test]
        fn merge_with_largest_equals_a_full_sort(groups in proptest::collection::vec(
            proptest::collection::vec(0u128..50, 0..40), 0..6)) {
            let mut refs: Vec<CellRef> = Vec::new();
            let mut packed: Vec<u128> = Vec::new();
            for (f, g) in groups.iter().enumerate() {
                let mut g = g.clone();
                g.sort_unstable();
                for (c, k) in g.into_iter().enumerate() {
                    refs.push((f as u32, 0, c as u32));
                    packed.push(k);
                }
            }
            let mut all: Vec<(u128, u32, u32)> =
                (0..refs.len()).map(|i| (packed[i], u32::MAX - refs[i].0, i as u32)).collect();
            all.sort_unstable();
            let want: Vec<u32> = all.into_iter().map(|t| t.2).collect();
            // Width 6 (keys under 64): key, fragment and position packed in one u128; width 128:
            // the tuples.
            prop_assert_eq!(merge_with_largest(&refs, &packed, 6), want.clone());
            prop_assert_eq!(merge_with_largest(&refs, &packed, 128), want);
        }

        /// Dropping older duplicates without sorting keeps exactly each coordinate's newest cell
        /// (a dict of coordinates, newest written last, is the reference).
        #[test]
        fn newest_unordered_keeps_each_coordinates_newest_cell(groups in proptest::collection::vec(
            proptest::collection::btree_set((0u64..12, 0u64..12), 0..60), 1..6)) {
            use crate::schema::{ArraySchema, ArrayType, Attribute, Datatype, Dimension};
            let schema = ArraySchema::builder(ArrayType::Sparse)
                .dim(Dimension::new("x", Datatype::Int64, (0, 11), 4))
                .dim(Dimension::new("y", Datatype::Int64, (0, 11), 4))
                .attr(Attribute::new("a", Datatype::Int32))
                .build()
                .unwrap();
            let order = OrderKeys::new(&schema);
            let (mut refs, mut ords): (Vec<CellRef>, Vec<u64>) = (Vec::new(), Vec::new());
            let mut want: std::collections::BTreeMap<(u64, u64), u32> = Default::default();
            for (f, g) in groups.iter().enumerate() {
                // Each fragment's cells in global order.
                let mut cells: Vec<(Vec<u64>, (u64, u64))> = g.iter().map(|&(x, y)| {
                    let mut k = vec![0; order.width()];
                    order.key(&[x, y], &mut k);
                    (k, (x, y))
                }).collect();
                cells.sort();
                for (c, (_, (x, y))) in cells.into_iter().enumerate() {
                    refs.push((f as u32, 0, c as u32));
                    ords.extend([x, y]);
                    want.insert((x, y), f as u32);
                }
            }
            let got = newest_unordered(&refs, &ords, 2, &order);
            let mut got: Vec<((u64, u64), u32)> = (0..refs.len())
                .filter(|&i| got[i])
                .map(|i| ((ords[2 * i], ords[2 * i + 1]), refs[i].0))
                .collect();
            got.sort();
            prop_assert_eq!(got, want.into_iter().collect::<Vec<_>>());
        }

        /// The partitioned reduction drops exactly the cells the one-table `drop_older` drops,
        /// at any partition count, with repeats inside a group and groups left out between.
        #[test]
        fn partitioned_drop_equals_one_table(
            groups in proptest::collection::vec(proptest::collection::vec((0u64..20, 0u64..3), 0..300), 1..7),
            gap in 0usize..3,
            bits in 0u32..5,
        ) {
            let mut keys: Vec<[u64; 2]> = Vec::new();
            let mut ranges = Vec::new();
            for g in &groups {
                keys.extend(std::iter::repeat_n([u64::MAX, 0], gap));
                let a = keys.len();
                keys.extend(g.iter().map(|&(x, y)| [x, y]));
                ranges.push((a, keys.len()));
            }
            let mut want = vec![true; keys.len()];
            drop_older(&ranges, &mut want, |i| keys[i]);
            let mut got = vec![true; keys.len()];
            for i in drop_older_partitioned(&ranges, &|i| keys[i], bits) {
                got[i as usize] = false;
            }
            prop_assert_eq!(got, want);
        }
    }
}
