//! The context of array operations: configuration, the storage backend (wrapped so statistics
//! see every I/O), the tile cache, and the thread pool that filters and unfilters tiles. Cheap to
//! clone; shared by every array and query opened with it.

use std::sync::Arc;

use crate::cache::TileCache;
use crate::config::Config;
use crate::error::{ArrayError, Result};
use crate::storage::{InstrumentedStorage, LocalStorage, Storage};

/// Configuration, storage and compute threads.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    storage: Arc<dyn Storage>,
    cache: TileCache,
    pool: rayon::ThreadPool,
    io_pool: rayon::ThreadPool,
}

impl Context {
    /// A context over local files.
    ///
    /// # Errors
    /// The thread pool cannot be started.
    pub fn new(config: Config) -> Result<Self> {
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(config.read_mode()));
        Self::with_storage(config, storage)
    }

    /// A context over the given storage backend.
    ///
    /// # Errors
    /// The thread pool cannot be started.
    pub fn with_storage(config: Config, storage: Arc<dyn Storage>) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.compute_concurrency())
            .thread_name(|i| format!("tessera-compute-{i}"))
            .build()
            .map_err(|e| ArrayError::Config { key: "sm.compute_concurrency".into(), detail: e.to_string() })?;
        let io_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.io_concurrency())
            .thread_name(|i| format!("tessera-io-{i}"))
            .build()
            .map_err(|e| ArrayError::Config { key: "sm.io_concurrency".into(), detail: e.to_string() })?;
        let storage: Arc<dyn Storage> = Arc::new(InstrumentedStorage::new(storage));
        let cache = TileCache::new(config.tile_cache_size());
        Ok(Self { inner: Arc::new(Inner { config, storage, cache, pool, io_pool }) })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.inner.storage
    }

    /// The cache of unfiltered tiles shared by every query of this context.
    pub fn tile_cache(&self) -> &TileCache {
        &self.inner.cache
    }

    /// Runs `f` on the I/O pool (`sm.io_concurrency` threads): parallel iterators inside it
    /// issue that many reads at once.
    pub fn install_io<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.inner.io_pool.install(f)
    }

    /// Runs `f` on the compute pool (parallel iterators inside it use the pool's threads).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.inner.pool.install(f)
    }
}
