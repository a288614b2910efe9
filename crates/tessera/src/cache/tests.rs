//! Tests of the tile cache: LRU order, the byte bound, oversize values, invalidation, threads,
//! statistics, and a property test against a Vec-based reference LRU.

use proptest::prelude::*;

use super::*;
use crate::stats::with_stats_lock;

fn key(fragment: &str, file: u32, tile: u64) -> TileKey {
    TileKey::new(fragment, file, tile)
}

fn val(len: usize, tag: u8) -> Bytes {
    Bytes::from_vec(vec![tag; len])
}

fn k(tile: u64) -> TileKey {
    key("f", 0, tile)
}

fn tiles(keys: &[TileKey]) -> Vec<u64> {
    keys.iter().map(|k| k.tile).collect()
}

#[test]
fn hits_misses_and_eviction_order() {
    let c = TileCache::new(100);
    assert!(c.is_enabled());
    assert!(c.insert(k(1), val(30, 1)));
    assert!(c.insert(k(2), val(30, 2)));
    assert!(c.insert(k(3), val(30, 3)));
    assert_eq!(tiles(&c.keys_mru()), [3, 2, 1]);
    assert_eq!((c.len(), c.size_bytes()), (3, 90));

    assert_eq!(c.get(&k(1)), Some(val(30, 1)));
    assert_eq!(tiles(&c.keys_mru()), [1, 3, 2], "a hit moves the entry to the front");
    assert_eq!(c.get(&k(9)), None);

    assert!(c.insert(k(4), val(30, 4)));
    assert_eq!(tiles(&c.keys_mru()), [4, 1, 3], "the least recent (2) is evicted");
    assert_eq!(c.get(&k(2)), None);
    assert_eq!(c.size_bytes(), 90);

    // A 70-byte value needs two evictions: 3 then 1.
    assert!(c.insert(k(5), val(70, 5)));
    assert_eq!(tiles(&c.keys_mru()), [5, 4]);
    assert_eq!(c.size_bytes(), 100, "exactly full is allowed");
    assert_eq!(c.stats(), CacheStats { hits: 1, misses: 2, inserts: 5, evictions: 3 });
    c.check_invariants();
}

#[test]
fn get_many_is_get_of_each_key_in_turn() {
    let c = TileCache::new(100);
    for t in 1..=3 {
        assert!(c.insert(k(t), val(10, t as u8)));
    }
    let got = c.get_many(&[k(2), k(9), k(1), k(2)]);
    assert_eq!(got, vec![Some(val(10, 2)), None, Some(val(10, 1)), Some(val(10, 2))]);
    assert_eq!(tiles(&c.keys_mru()), [2, 1, 3], "hits become recent in lookup order");
    assert_eq!(c.stats(), CacheStats { hits: 3, misses: 1, inserts: 3, evictions: 0 });
    let off = TileCache::new(0);
    assert_eq!(off.get_many(&[k(1), k(2)]), vec![None, None]);
    assert_eq!(off.stats().misses, 2);
}

#[test]
fn keys_differ_by_fragment_file_and_tile() {
    let c = TileCache::new(1000);
    c.insert(key("a", 0, 0), val(1, 1));
    c.insert(key("a", 1, 0), val(1, 2));
    c.insert(key("a", 0, 1), val(1, 3));
    c.insert(key("b", 0, 0), val(1, 4));
    assert_eq!(c.len(), 4);
    assert_eq!(c.get(&key("a", 1, 0)), Some(val(1, 2)));
    assert_eq!(c.get(&key("b", 0, 0)), Some(val(1, 4)));
    assert_eq!(c.get(&key("b", 1, 0)), None);
}

#[test]
fn replacing_a_key_updates_size_without_evicting() {
    let c = TileCache::new(100);
    c.insert(k(1), val(40, 1));
    c.insert(k(2), val(40, 2));
    assert!(c.insert(k(1), val(60, 9)));
    assert_eq!(tiles(&c.keys_mru()), [1, 2]);
    assert_eq!(c.size_bytes(), 100);
    assert_eq!(c.get(&k(1)), Some(val(60, 9)));
    assert_eq!(c.stats().evictions, 0);
    // Replacing with a value that no longer fits next to the others evicts them.
    assert!(c.insert(k(1), val(80, 8)));
    assert_eq!(tiles(&c.keys_mru()), [1]);
    assert_eq!(c.stats().evictions, 1);
    c.check_invariants();
}

#[test]
fn byte_bound_is_respected() {
    let c = TileCache::new(1000);
    let mut x = 12345u64;
    for i in 0..5000u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let len = (x >> 33) as usize % 300;
        c.insert(k(i % 97), val(len, i as u8));
        assert!(c.size_bytes() <= 1000);
        if i % 500 == 0 {
            c.check_invariants();
        }
    }
    c.check_invariants();
}

#[test]
fn oversize_values_are_not_cached() {
    let c = TileCache::new(100);
    c.insert(k(1), val(50, 1));
    c.insert(k(2), val(50, 2));
    assert!(!c.insert(k(3), val(101, 3)));
    assert_eq!(tiles(&c.keys_mru()), [2, 1], "nothing was evicted for it");
    assert_eq!(c.get(&k(3)), None);
    // An oversize value for a cached key drops the old value (never serve a superseded one).
    assert!(!c.insert(k(1), val(500, 9)));
    assert_eq!(c.get(&k(1)), None);
    assert_eq!((c.len(), c.size_bytes()), (1, 50));
    // A value of exactly the capacity evicts everything else.
    assert!(c.insert(k(4), val(100, 4)));
    assert_eq!(tiles(&c.keys_mru()), [4]);
    assert_eq!(c.stats(), CacheStats { hits: 0, misses: 2, inserts: 3, evictions: 1 });
    c.check_invariants();
}

#[test]
fn zero_length_values_are_cached() {
    let c = TileCache::new(10);
    assert!(c.insert(k(1), Bytes::default()));
    assert!(c.insert(k(2), val(10, 2)));
    assert_eq!(c.len(), 2);
    assert_eq!(c.get(&k(1)), Some(Bytes::default()));
}

#[test]
fn capacity_zero_disables_the_cache() {
    let c = TileCache::new(0);
    assert!(!c.is_enabled());
    assert!(!c.insert(k(1), Bytes::default()));
    assert!(!c.insert(k(2), val(5, 2)));
    assert_eq!(c.get(&k(1)), None);
    assert_eq!(c.get(&k(2)), None);
    assert_eq!((c.len(), c.size_bytes(), c.capacity()), (0, 0, 0));
    assert!(c.is_empty());
    assert_eq!(c.invalidate_fragment("f"), 0);
    assert_eq!(c.stats(), CacheStats { hits: 0, misses: 2, inserts: 0, evictions: 0 });
}

#[test]
fn invalidate_fragment_drops_only_its_entries() {
    let c = TileCache::new(1000);
    for t in 0..4 {
        c.insert(key("a", 0, t), val(10, 1));
        c.insert(key("b", 1, t), val(20, 2));
    }
    c.insert(key("ab", 0, 0), val(5, 3));
    assert_eq!(c.invalidate_fragment("a"), 4);
    assert_eq!(c.invalidate_fragment("a"), 0);
    assert_eq!(c.invalidate_fragment("zzz"), 0);
    assert_eq!((c.len(), c.size_bytes()), (5, 85));
    assert!(c.keys_mru().iter().all(|k| &*k.fragment != "a"));
    assert_eq!(c.get(&key("a", 0, 1)), None);
    assert_eq!(c.get(&key("b", 1, 1)), Some(val(20, 2)));
    assert_eq!(c.stats().evictions, 0, "invalidation is not eviction");
    c.check_invariants();
    // Freed slots are reused.
    c.insert(key("c", 0, 0), val(1, 4));
    c.check_invariants();
    c.clear();
    assert!(c.is_empty());
    assert_eq!(c.size_bytes(), 0);
    c.check_invariants();
}

#[test]
fn hits_share_the_buffer() {
    let c = TileCache::new(100);
    let v = val(10, 7);
    c.insert(k(1), v.clone());
    let got = c.get(&k(1)).unwrap();
    assert_eq!(got.as_ptr(), v.as_ptr(), "a hit is not a copy");
}

#[test]
fn concurrent_use_from_threads() {
    let c = TileCache::new(5000);
    const THREADS: u64 = 8;
    const OPS: u64 = 5000;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let c = &c;
            s.spawn(move || {
                let mut x = t + 1;
                for i in 0..OPS {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let r = x >> 33;
                    let key = key(["a", "b", "c"][(r % 3) as usize], (r % 2) as u32, (r >> 8) % 64);
                    match r % 10 {
                        0..=5 => {
                            if let Some(v) = c.get(&key) {
                                // Every value of a key is filled with its tile number.
                                assert!(v.iter().all(|&b| u64::from(b) == key.tile));
                            }
                        }
                        6..=8 => {
                            c.insert(key.clone(), Bytes::from_vec(vec![key.tile as u8; ((r >> 16) % 400) as usize]));
                        }
                        _ => {
                            if i % 50 == 0 {
                                c.invalidate_fragment(&key.fragment);
                            }
                        }
                    }
                }
            });
        }
    });
    c.check_invariants();
    let st = c.stats();
    assert!(st.hits > 0 && st.misses > 0 && st.inserts > 0 && st.evictions > 0, "{st:?}");
    // Every get counted exactly once.
    let mut gets = 0;
    for t in 0..THREADS {
        let mut x = t + 1;
        for _ in 0..OPS {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            gets += u64::from((x >> 33) % 10 <= 5);
        }
    }
    assert_eq!(st.hits + st.misses, gets);
}

#[test]
fn records_global_statistics_only_when_enabled() {
    with_stats_lock(|| {
        let global = || {
            let s = stats::snapshot();
            [
                Counter::CacheLruReadHits,
                Counter::CacheLruReadMisses,
                Counter::CacheLruInserts,
                Counter::CacheLruEvictions,
            ]
            .map(|c| s.counter(c))
        };
        // Off: nothing recorded (no test enables statistics outside the lock, so this is exact).
        let c = TileCache::new(10);
        c.insert(k(1), val(10, 1));
        c.insert(k(2), val(10, 2));
        c.get(&k(2));
        c.get(&k(1));
        assert_eq!(global(), [0; 4]);
        assert_eq!(c.stats(), CacheStats { hits: 1, misses: 1, inserts: 2, evictions: 1 });

        // On: recorded. Other tests may use caches concurrently while statistics are on, so the
        // global values are lower bounds; the instance's own counts (incremented by the same
        // `record` calls) are exact.
        stats::enable();
        let c = TileCache::new(10);
        c.insert(k(1), val(10, 1));
        c.insert(k(2), val(10, 2));
        c.get(&k(2));
        c.get(&k(1));
        c.get(&k(3));
        TileCache::new(0).get(&k(1));
        let [hits, misses, inserts, evictions] = global();
        assert!(hits >= 1 && misses >= 3 && inserts >= 2 && evictions >= 1, "{:?}", global());
        assert_eq!(c.stats(), CacheStats { hits: 1, misses: 2, inserts: 2, evictions: 1 });
    });
}

// ---- property test against a reference model ----

/// A Vec-based LRU with the cache's documented semantics, most recent first.
#[derive(Debug)]
struct Model {
    capacity: u64,
    entries: Vec<(TileKey, Vec<u8>)>,
    stats: CacheStats,
}

impl Model {
    fn size(&self) -> u64 {
        self.entries.iter().map(|(_, v)| v.len() as u64).sum()
    }

    fn take(&mut self, key: &TileKey) -> Option<Vec<u8>> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        Some(self.entries.remove(i).1)
    }

    fn get(&mut self, key: &TileKey) -> Option<Vec<u8>> {
        match self.take(key) {
            Some(v) => {
                self.entries.insert(0, (key.clone(), v.clone()));
                self.stats.hits += 1;
                Some(v)
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    fn insert(&mut self, key: TileKey, value: Vec<u8>) -> bool {
        if self.capacity == 0 {
            return false;
        }
        self.take(&key);
        let len = value.len() as u64;
        if len > self.capacity {
            return false;
        }
        while self.size() + len > self.capacity {
            self.entries.pop();
            self.stats.evictions += 1;
        }
        self.entries.insert(0, (key, value));
        self.stats.inserts += 1;
        true
    }

    fn invalidate(&mut self, fragment: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(|(k, _)| &*k.fragment != fragment);
        before - self.entries.len()
    }
}

#[derive(Debug, Clone)]
enum Op {
    Get(TileKey),
    Insert(TileKey, usize),
    Invalidate(&'static str),
}

const FRAGMENTS: [&str; 3] = ["f0", "f1", "f2"];

fn key_strategy() -> impl Strategy<Value = TileKey> {
    (0..FRAGMENTS.len(), 0u32..2, 0u64..4).prop_map(|(f, file, tile)| key(FRAGMENTS[f], file, tile))
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => key_strategy().prop_map(Op::Get),
        4 => (key_strategy(), 0usize..70).prop_map(|(k, len)| Op::Insert(k, len)),
        1 => (0..FRAGMENTS.len()).prop_map(|f| Op::Invalidate(FRAGMENTS[f])),
    ]
}

proptest! {
    #[test]
    fn matches_reference_lru(
        capacity in prop_oneof![1 => Just(0u64), 8 => 1u64..200],
        ops in proptest::collection::vec(op_strategy(), 0..120),
    ) {
        let cache = TileCache::new(capacity);
        let mut model = Model { capacity, entries: Vec::new(), stats: CacheStats::default() };
        for (n, op) in ops.into_iter().enumerate() {
            match op {
                Op::Get(k) => {
                    let got = cache.get(&k).map(Bytes::into_vec);
                    prop_assert_eq!(got, model.get(&k), "get {:?}", k);
                }
                Op::Insert(k, len) => {
                    let value = vec![n as u8; len];
                    let cached = cache.insert(k.clone(), Bytes::from_vec(value.clone()));
                    prop_assert_eq!(cached, model.insert(k, value));
                }
                Op::Invalidate(f) => prop_assert_eq!(cache.invalidate_fragment(f), model.invalidate(f)),
            }
            cache.check_invariants();
            let keys: Vec<TileKey> = model.entries.iter().map(|(k, _)| k.clone()).collect();
            prop_assert_eq!(cache.keys_mru(), keys);
            prop_assert_eq!(cache.len(), model.entries.len());
            prop_assert_eq!(cache.size_bytes(), model.size());
            prop_assert_eq!(cache.stats(), model.stats);
        }
    }
}
