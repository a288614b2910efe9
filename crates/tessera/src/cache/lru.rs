//! The LRU structure behind [`super::TileCache`]: a `HashMap` from key to slot index plus a doubly
//! linked list threaded through a slot vector (indices, not pointers), most recent at the head.
//! Lookup, move-to-front, insertion and eviction are O(1) (amortized, for the map); invalidating a
//! fragment scans the map. Freed slots are reused through a free list. Not synchronized: the cache
//! wraps it in a mutex.

use super::TileKey;
use crate::fast_hash::FastMap;
use crate::storage::Bytes;

/// "No slot" in the links.
const NIL: usize = usize::MAX;

/// A list node; `entry` is `None` while the slot is on the free list.
#[derive(Debug)]
struct Slot {
    prev: usize,
    next: usize,
    entry: Option<(TileKey, Bytes)>,
}

/// What an insertion did.
#[derive(Debug, Default)]
pub(super) struct InsertOutcome {
    /// Whether the value is now cached.
    pub(super) inserted: bool,
    /// Entries evicted to make room.
    pub(super) evictions: u64,
    /// Values no longer cached (evicted or replaced), to be dropped outside the lock.
    pub(super) dropped: Vec<Bytes>,
}

/// A byte-weighted LRU map from [`TileKey`] to [`Bytes`].
#[derive(Debug)]
pub(super) struct Lru {
    map: FastMap<TileKey, usize>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Most recently used.
    head: usize,
    /// Least recently used.
    tail: usize,
    /// Sum of the cached values' lengths.
    size: u64,
}

impl Lru {
    /// An empty LRU.
    pub(super) fn new() -> Self {
        Self { map: FastMap::default(), slots: Vec::new(), free: Vec::new(), head: NIL, tail: NIL, size: 0 }
    }

    /// Whether `key` is cached (the order is left alone).
    pub(super) fn contains(&self, key: &TileKey) -> bool {
        self.map.contains_key(key)
    }

    /// Entries cached.
    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    /// Sum of the cached values' lengths.
    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// The value of `key`, made most recent.
    pub(super) fn get(&mut self, key: &TileKey) -> Option<Bytes> {
        let i = *self.map.get(key)?;
        if self.head != i {
            self.unlink(i);
            self.push_front(i);
        }
        self.slots[i].entry.as_ref().map(|(_, v)| v.clone())
    }

    /// Caches `value` under `key` as most recent, replacing any previous value of `key` and
    /// evicting least recent entries until the total fits in `capacity`. A value longer than
    /// `capacity` is not cached (and a previous value of `key` is dropped all the same).
    pub(super) fn insert(&mut self, key: TileKey, value: Bytes, capacity: u64) -> InsertOutcome {
        let mut out = InsertOutcome::default();
        if let Some(&i) = self.map.get(&key) {
            out.dropped.extend(self.remove_slot(i));
        }
        let len = value.len() as u64;
        if len > capacity {
            out.dropped.push(value);
            return out;
        }
        while self.size + len > capacity && self.tail != NIL {
            out.dropped.extend(self.remove_slot(self.tail));
            out.evictions += 1;
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot { prev: NIL, next: NIL, entry: None });
                self.slots.len() - 1
            }
        };
        self.slots[i].entry = Some((key.clone(), value));
        self.map.insert(key, i);
        self.push_front(i);
        self.size += len;
        out.inserted = true;
        out
    }

    /// Removes every entry of the fragment; returns their values.
    pub(super) fn invalidate_fragment(&mut self, fragment: &str) -> Vec<Bytes> {
        let doomed: Vec<usize> = self.map.iter().filter(|(k, _)| &*k.fragment == fragment).map(|(_, &i)| i).collect();
        doomed.into_iter().filter_map(|i| self.remove_slot(i)).collect()
    }

    /// Removes everything; returns the values.
    pub(super) fn clear(&mut self) -> Vec<Bytes> {
        let values = self.slots.drain(..).filter_map(|s| s.entry.map(|(_, v)| v)).collect();
        *self = Self::new();
        values
    }

    /// Unlinks slot `i`, frees it and returns its value.
    fn remove_slot(&mut self, i: usize) -> Option<Bytes> {
        self.unlink(i);
        let (key, value) = self.slots[i].entry.take()?;
        self.free.push(i);
        self.map.remove(&key);
        self.size -= value.len() as u64;
        Some(value)
    }

    /// Takes slot `i` out of the list.
    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.slots[i].prev, self.slots[i].next);
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next].prev = prev;
        }
        self.slots[i].prev = NIL;
        self.slots[i].next = NIL;
    }

    /// Puts the unlinked slot `i` at the head.
    fn push_front(&mut self, i: usize) {
        self.slots[i].prev = NIL;
        self.slots[i].next = self.head;
        if self.head == NIL {
            self.tail = i;
        } else {
            self.slots[self.head].prev = i;
        }
        self.head = i;
    }

    /// Keys from most to least recent.
    #[cfg(test)]
    pub(super) fn keys_mru(&self) -> Vec<TileKey> {
        let mut keys = Vec::new();
        let mut i = self.head;
        while i != NIL {
            keys.extend(self.slots[i].entry.as_ref().map(|(k, _)| k.clone()));
            i = self.slots[i].next;
        }
        keys
    }

    /// Asserts the structure's invariants.
    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        let (mut i, mut prev, mut n, mut size) = (self.head, NIL, 0usize, 0u64);
        while i != NIL {
            let s = &self.slots[i];
            assert_eq!(s.prev, prev, "back link");
            let (k, v) = s.entry.as_ref().expect("listed slot has an entry");
            assert_eq!(self.map.get(k), Some(&i), "map points at the slot");
            size += v.len() as u64;
            n += 1;
            prev = i;
            i = s.next;
        }
        assert_eq!(self.tail, prev, "tail");
        assert_eq!(n, self.map.len(), "list and map agree");
        assert_eq!(size, self.size, "size");
        assert_eq!(n + self.free.len(), self.slots.len(), "every slot is listed or free");
        assert!(self.free.iter().all(|&f| self.slots[f].entry.is_none()), "free slots are empty");
    }
}
