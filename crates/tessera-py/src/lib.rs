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
    errors::register(m)?;
    config::register(m)?;
    schema::register(m)?;
    array::register(m)?;
    consolidation::register(m)?;
    group::register(m)?;
    stats::register(m)?;
    Ok(())
}
