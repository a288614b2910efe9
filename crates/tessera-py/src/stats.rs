//! Statistics: the engine's process-wide registry of counters and timers (`tessera::stats`).
//! Each function is one call into the engine; none does I/O, so the GIL is kept.

use pyo3::prelude::*;

/// Turns recording on for the whole process.
#[pyfunction]
fn stats_enable() {
    tessera::stats::enable();
}

/// Turns recording off (values are kept).
#[pyfunction]
fn stats_disable() {
    tessera::stats::disable();
}

/// Whether recording is on.
#[pyfunction]
fn stats_is_enabled() -> bool {
    tessera::stats::is_enabled()
}

/// Sets every counter and timer to zero.
#[pyfunction]
fn stats_reset() {
    tessera::stats::reset();
}

/// The text report.
#[pyfunction]
fn stats_dump() -> String {
    tessera::stats::dump()
}

/// The report as JSON text: `{"summary": {...}, "timers": {...}, "counters": {...}}`.
#[pyfunction]
fn stats_json() -> String {
    tessera::stats::json()
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stats_enable, m)?)?;
    m.add_function(wrap_pyfunction!(stats_disable, m)?)?;
    m.add_function(wrap_pyfunction!(stats_is_enabled, m)?)?;
    m.add_function(wrap_pyfunction!(stats_reset, m)?)?;
    m.add_function(wrap_pyfunction!(stats_dump, m)?)?;
    m.add_function(wrap_pyfunction!(stats_json, m)?)?;
    Ok(())
}
