//! Configuration: checking a dict of string keys and values with the engine's `Config`, and one
//! shared engine `Context` (with its compute thread pool and its tile cache, sized by
//! `sm.tile_cache_size`) per distinct configuration. Two configurations are the same when every
//! key has the same value, defaults included: `{}` and `{"vfs.read_mode": "pread"}` share one.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use pyo3::prelude::*;
use tessera::{Config, Context};

use crate::errors::IntoPyResult;

/// Contexts (with their id, the order of creation) by the value of every key of their
/// configuration, in `CONFIG_KEYS` order.
type ContextCache = Mutex<HashMap<Vec<(String, String)>, (usize, Context)>>;

static CONTEXTS: OnceLock<ContextCache> = OnceLock::new();

/// Builds an engine `Config` from Python's key-value pairs.
pub(crate) fn make_config(items: Option<HashMap<String, String>>) -> PyResult<Config> {
    let mut config = Config::new();
    let mut items: Vec<(String, String)> = items.unwrap_or_default().into_iter().collect();
    items.sort();
    for (k, v) in &items {
        config.set(k, v).py()?;
    }
    Ok(config)
}

/// The shared context of a configuration and its id, created on first use.
pub(crate) fn context(items: Option<HashMap<String, String>>) -> PyResult<(usize, Context)> {
    let config = make_config(items)?;
    let key: Vec<(String, String)> =
        tessera::CONFIG_KEYS.iter().map(|k| (k.0.to_string(), config.get(k.0).unwrap_or(k.1).to_string())).collect();
    let cache = CONTEXTS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((id, ctx)) = map.get(&key) {
        return Ok((*id, ctx.clone()));
    }
    let ctx = Context::new(config).py()?;
    let id = map.len();
    map.insert(key, (id, ctx.clone()));
    Ok((id, ctx))
}

/// Checks `items` and returns the value of every known key (defaults filled in).
#[pyfunction]
#[pyo3(signature = (items=None))]
fn check_config(items: Option<HashMap<String, String>>) -> PyResult<Vec<(String, String)>> {
    let config = make_config(items)?;
    Ok(tessera::CONFIG_KEYS.iter().map(|k| (k.0.to_string(), config.get(k.0).unwrap_or(k.1).to_string())).collect())
}

/// Every key the engine understands: (key, default, description).
#[pyfunction]
fn config_keys() -> Vec<(&'static str, &'static str, &'static str)> {
    tessera::CONFIG_KEYS.to_vec()
}

/// Number of distinct shared contexts created so far (for tests).
#[pyfunction]
fn context_count() -> usize {
    CONTEXTS.get().map_or(0, |c| c.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len())
}

/// Empties the tile cache of every shared context of this process (as a new process would
/// find it): to measure cold reads, or to give the memory back. Returns the bytes dropped.
#[pyfunction]
fn drop_caches() -> u64 {
    let Some(cache) = CONTEXTS.get() else { return 0 };
    let map = cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    map.values()
        .map(|(_, ctx)| {
            let bytes = ctx.tile_cache().size_bytes();
            ctx.tile_cache().clear();
            bytes
        })
        .sum()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(drop_caches, m)?)?;
    m.add_function(wrap_pyfunction!(check_config, m)?)?;
    m.add_function(wrap_pyfunction!(config_keys, m)?)?;
    m.add_function(wrap_pyfunction!(context_count, m)?)?;
    Ok(())
}
