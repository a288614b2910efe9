//! The hash maps of the engine's internal keys (tile keys, fragment and tile numbers, coordinate
//! tuples of sparse reads): `rustc-hash`'s FxHash, a multiply-rotate over machine words, several
//! times faster than the standard SipHash on these short keys. Not resistant to chosen keys;
//! every key it sees is made by the engine itself (fragment names, tile numbers, coordinates of
//! cells already written), never chosen by a remote party to collide.

/// A hash map with FxHash.
pub(crate) type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// A hash set with FxHash.
pub(crate) type FastSet<K> = rustc_hash::FxHashSet<K>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_keys_hash_equal_and_maps_work() {
        let mut m: FastMap<(usize, u64), u32> = FastMap::default();
        for i in 0..10_000u64 {
            m.insert((i as usize % 97, i), i as u32);
        }
        assert_eq!(m.len(), 10_000);
        assert!((0..10_000u64).all(|i| m[&(i as usize % 97, i)] == i as u32));
        let s: FastSet<String> = ["a", "b", "a"].iter().map(|x| x.to_string()).collect();
        assert_eq!(s.len(), 2);
    }
}
