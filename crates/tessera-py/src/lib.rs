//! `tessera._core`: the thin PyO3 binding of the Tessera engine. It translates types (numpy
//! buffers, ranges, the engine's schema classes) and errors, and holds no rule about the data;
//! the user-facing API is the pure-Python package `python/tessera`, which mirrors these files:
//!
//! | Rust               | Python                     |
//! |--------------------|----------------------------|
//! | `errors.rs`        | `tessera/errors.py`        |
//! | `config.rs`        | `tessera/config.py`        |
//! | `schema.rs`        | `tessera/schema.py`, `tessera/filters.py` (re-exports) |
//! | `array.rs`         | `tessera/array.py`         |
//! | `consolidation.rs` | `tessera/consolidation.py` |
//! | `stats.rs`         | `tessera/stats.py`         |

use pyo3::prelude::*;

/// Large result columns freed by numpy are kept for the next read (see
/// `tessera::RetainingAllocator`, which also tunes glibc to keep smaller freed blocks mapped);
/// `TESSERA_RETAINED_MEMORY` (bytes) sets the budget, 0 turns both off.
#[global_allocator]
static ALLOCATOR: tessera::RetainingAllocator = tessera::RetainingAllocator::new();

/// Bytes of freed large blocks kept for reuse now, and the most that may be kept.
#[pyfunction]
fn retained_memory() -> (usize, usize) {
    (ALLOCATOR.kept_bytes(), ALLOCATOR.budget())
}

/// Keeps at most `limit` bytes of freed large blocks (0: none), giving back what is over.
#[pyfunction]
fn set_retained_memory_limit(limit: usize) {
    ALLOCATOR.set_budget(limit);
}

/// Gives every kept block back to the system.
#[pyfunction]
fn release_memory() {
    ALLOCATOR.release();
}

mod array;
mod config;
mod consolidation;
mod errors;
mod group;
mod meta;
mod schema;
mod stats;

/// The extension module.
#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", tessera::FORMAT_VERSION)?;
    m.add("SCHEMA_VERSION", tessera::SCHEMA_VERSION)?;
    if let Some(limit) = std::env::var("TESSERA_RETAINED_MEMORY").ok().and_then(|v| v.trim().parse().ok()) {
        ALLOCATOR.set_budget(limit);
    }
    if ALLOCATOR.budget() > 0 {
        ALLOCATOR.tune_system_allocator();
    }
    m.add_function(wrap_pyfunction!(retained_memory, m)?)?;
    m.add_function(wrap_pyfunction!(set_retained_memory_limit, m)?)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    errors::register(m)?;
    config::register(m)?;
    schema::register(m)?;
    array::register(m)?;
    consolidation::register(m)?;
    group::register(m)?;
    stats::register(m)?;
    Ok(())
}
