//! Tiles carried from one read of a snapshot to the next, for a sequence of reads that walks
//! the array in parts (a sparse consolidation reads one band of the global order at a time,
//! `consolidate/bands.rs`): a tile whose cells lie in two consecutive parts is fetched and
//! unfiltered once. The sequence names, before each part, the tiles that part shares with the
//! next; fetched tiles are kept only if named, others are dropped, and the bytes kept are
//! bounded (past the bound a tile is simply fetched again). Private to the sequence's snapshot:
//! the context's tile cache is not touched.

use std::sync::Mutex;

use super::tiles::TileKey;
use crate::fast_hash::{FastMap, FastSet};
use crate::storage::Bytes;

#[derive(Debug, Default)]
struct Held {
    /// Tiles that may be kept: those the current part shares with the previous or the next.
    wanted: FastSet<TileKey>,
    /// Tiles kept, per (tile, file).
    tiles: FastMap<(TileKey, usize), Bytes>,
    bytes: u64,
}

/// Tiles handed from one part of a sequence of reads to the next (see the module doc).
#[derive(Debug)]
pub(crate) struct CarriedTiles {
    held: Mutex<Held>,
    /// Bytes kept at most.
    limit: u64,
}

impl CarriedTiles {
    /// Carries at most `limit` bytes of tiles.
    pub(crate) fn new(limit: u64) -> Self {
        Self { held: Mutex::new(Held::default()), limit }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// From now on keeps only tiles of `wanted` (all files of each); drops the others held.
    pub(crate) fn keep_only(&self, wanted: impl IntoIterator<Item = TileKey>) {
        let mut h = self.lock();
        h.wanted = wanted.into_iter().collect();
        let Held { wanted, tiles, bytes } = &mut *h;
        tiles.retain(|(key, _), b| {
            let keep = wanted.contains(key);
            if !keep {
                *bytes -= b.len() as u64;
            }
            keep
        });
    }

    /// The tile `(key, file)` if it is held.
    pub(crate) fn get(&self, key: TileKey, file: usize) -> Option<Bytes> {
        self.lock().tiles.get(&(key, file)).cloned()
    }

    /// Offers a fetched tile: kept if wanted and within the limit.
    pub(crate) fn offer(&self, key: TileKey, file: usize, tile: &Bytes) {
        let mut h = self.lock();
        let len = tile.len() as u64;
        if !h.wanted.contains(&key) || h.bytes.saturating_add(len) > self.limit || h.tiles.contains_key(&(key, file)) {
            return;
        }
        h.bytes += len;
        h.tiles.insert((key, file), tile.clone());
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> u64 {
        self.lock().bytes
    }
}

#[cfg(test)]
mod tests {
    use super::CarriedTiles;
    use crate::storage::Bytes;

    #[test]
    fn keeps_what_is_wanted_within_the_limit() {
        let c = CarriedTiles::new(10);
        let t = |n: usize| Bytes::from_vec(vec![7; n]);
        c.offer((0, 1), 0, &t(4));
        assert!(c.get((0, 1), 0).is_none(), "nothing is wanted yet");
        c.keep_only([(0, 1), (0, 2)]);
        c.offer((0, 1), 0, &t(4));
        c.offer((0, 1), 1, &t(4));
        c.offer((0, 2), 0, &t(4));
        assert_eq!(c.bytes(), 8, "the third tile would pass the limit");
        assert!(c.get((0, 2), 0).is_none());
        assert_eq!(c.get((0, 1), 1).map(|b| b.len()), Some(4));
        c.keep_only([(0, 2)]);
        assert_eq!(c.bytes(), 0);
        assert!(c.get((0, 1), 0).is_none());
    }
}
