//! The tile cache: a thread-safe LRU cache of unfiltered tiles, bounded in bytes.
//!
//! A [`TileCache`] maps a [`TileKey`] (fragment name, file number within the fragment, tile
//! number) to the tile's unfiltered bytes ([`Bytes`], so a hit is a reference-count increment,
//! not a copy). Fragments are immutable, so an entry never goes stale while its fragment exists;
//! when a fragment is deleted (e.g. after consolidation) [`TileCache::invalidate_fragment`] drops
//! its entries.
//!
//! The bound is the sum of the cached values' lengths (`Bytes::len`); bookkeeping overhead is not
//! counted. A value that is a slice of a larger buffer keeps that whole buffer alive, so callers
//! should cache tiles that own their buffer. Inserting evicts least recently used entries until
//! the new value fits; a value larger than the whole capacity is not cached. Capacity 0 disables
//! the cache: every lookup misses and inserts do nothing, without taking the lock.
//!
//! Every lookup, insertion and eviction is counted in the instance's [`CacheStats`] and, when
//! statistics are enabled, in the global counters `cache_lru_read_hits`,
//! `cache_lru_read_misses`, `cache_lru_inserts` and `cache_lru_evictions` ([`crate::stats`]).
//!
//! Concurrency: one `Mutex` around an O(1) LRU (a hash map plus an index-linked list); the lock
//! is held only for the map and list updates, never while copying or freeing tile data.

mod lru;

#[cfg(test)]
mod tests;

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use self::lru::Lru;
use crate::stats::{self, Counter};
use crate::storage::Bytes;

/// Identifies a tile: the fragment's unique name, the file within the fragment (e.g. one per
/// attribute, or offsets and values of a var-sized attribute) and the tile's number in that file.
///
/// Keep one `Arc<str>` per fragment and clone it into keys: building a key from a `&str`
/// allocates.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TileKey {
    /// The fragment's unique name.
    pub fragment: Arc<str>,
    /// The file within the fragment.
    pub file: u32,
    /// The tile within the file.
    pub tile: u64,
}

impl TileKey {
    /// The key of tile `tile` of file `file` of fragment `fragment`.
    pub fn new(fragment: impl Into<Arc<str>>, file: u32, tile: u64) -> Self {
        Self { fragment: fragment.into(), file, tile }
    }
}

/// Counts of one cache's operations since it was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups that found the tile.
    pub hits: u64,
    /// Lookups that did not (every lookup when the cache is disabled).
    pub misses: u64,
    /// Values cached (new keys and replacements; not oversize values).
    pub inserts: u64,
    /// Entries dropped to make room (not replacements or invalidations).
    pub evictions: u64,
}

/// A thread-safe LRU cache of unfiltered tiles bounded in bytes (see the module doc).
pub struct TileCache {
    capacity: u64,
    lru: Mutex<Lru>,
    hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    evictions: AtomicU64,
}

impl TileCache {
    /// A cache holding at most `capacity_bytes` bytes of values; 0 disables it.
    pub fn new(capacity_bytes: u64) -> Self {
        Self {
            capacity: capacity_bytes,
            lru: Mutex::new(Lru::new()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The bound on the sum of the values' lengths.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// Whether the cache can hold anything (capacity > 0).
    pub fn is_enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Whether readers cache a tile of `len` bytes: one of at most a sixteenth of the capacity,
    /// so that one tile never evicts much of the cache. Larger unfiltered tiles are read straight
    /// into the result instead (the page cache keeps their bytes).
    pub fn admits(&self, len: u64) -> bool {
        self.is_enabled() && len <= self.capacity / 16
    }

    /// Whether the tile is cached, without counting a lookup or making it recent.
    pub fn contains(&self, key: &TileKey) -> bool {
        self.is_enabled() && self.lock().contains(key)
    }

    /// The tile's bytes if cached, making it the most recently used entry.
    pub fn get(&self, key: &TileKey) -> Option<Bytes> {
        let found = if self.is_enabled() { self.lock().get(key) } else { None };
        if found.is_some() {
            record(&self.hits, Counter::CacheLruReadHits, 1);
        } else {
            record(&self.misses, Counter::CacheLruReadMisses, 1);
        }
        found
    }

    /// [`TileCache::get`] of every key under one lock (a read over many fragments looks up
    /// thousands of small tiles).
    pub fn get_many<'a>(&self, keys: impl IntoIterator<Item = &'a TileKey>) -> Vec<Option<Bytes>> {
        let found: Vec<Option<Bytes>> = if self.is_enabled() {
            let mut lru = self.lock();
            keys.into_iter().map(|k| lru.get(k)).collect()
        } else {
            keys.into_iter().map(|_| None).collect()
        };
        let hits = found.iter().filter(|b| b.is_some()).count() as u64;
        if hits > 0 {
            record(&self.hits, Counter::CacheLruReadHits, hits);
        }
        if found.len() as u64 > hits {
            record(&self.misses, Counter::CacheLruReadMisses, found.len() as u64 - hits);
        }
        found
    }

    /// Caches `value` under `key` as the most recently used entry, replacing any previous value
    /// of `key` and evicting least recently used entries until the total fits the capacity.
    /// Returns whether the value was cached: a value longer than the capacity is not (and any
    /// previous value of `key` is dropped all the same); nothing is when the cache is disabled.
    pub fn insert(&self, key: TileKey, value: Bytes) -> bool {
        if !self.is_enabled() {
            return false;
        }
        let outcome = self.lock().insert(key, value, self.capacity);
        if outcome.inserted {
            record(&self.inserts, Counter::CacheLruInserts, 1);
        }
        if outcome.evictions > 0 {
            record(&self.evictions, Counter::CacheLruEvictions, outcome.evictions);
        }
        // `outcome.dropped` (evicted and replaced values) is freed here, outside the lock.
        outcome.inserted
    }

    /// Drops every entry of the fragment; returns how many there were. Scans the whole cache.
    pub fn invalidate_fragment(&self, fragment: &str) -> usize {
        if !self.is_enabled() {
            return 0;
        }
        let dropped = self.lock().invalidate_fragment(fragment);
        dropped.len()
    }

    /// Drops every entry.
    pub fn clear(&self) {
        let dropped = self.lock().clear();
        drop(dropped);
    }

    /// Entries cached.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of the cached values' lengths (at most [`Self::capacity`]).
    pub fn size_bytes(&self) -> u64 {
        self.lock().size()
    }

    /// This cache's operation counts (kept whether or not global statistics are enabled).
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            inserts: self.inserts.load(Relaxed),
            evictions: self.evictions.load(Relaxed),
        }
    }

    /// The LRU, even if a thread panicked while holding it (no operation leaves it inconsistent
    /// midway: none runs caller code or can panic under the lock).
    fn lock(&self) -> MutexGuard<'_, Lru> {
        self.lru.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keys from most to least recent.
    #[cfg(test)]
    fn keys_mru(&self) -> Vec<TileKey> {
        self.lock().keys_mru()
    }

    /// Asserts the LRU's invariants and the capacity bound.
    #[cfg(test)]
    fn check_invariants(&self) {
        let lru = self.lock();
        lru.check_invariants();
        assert!(lru.size() <= self.capacity, "{} bytes cached, capacity {}", lru.size(), self.capacity);
    }
}

impl Debug for TileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lru = self.lock();
        f.debug_struct("TileCache")
            .field("capacity", &self.capacity)
            .field("len", &lru.len())
            .field("size_bytes", &lru.size())
            .finish()
    }
}

/// Counts `n` in a cache's own counter and in the global statistics.
fn record(local: &AtomicU64, counter: Counter, n: u64) {
    local.fetch_add(n, Relaxed);
    stats::add(counter, n);
}
