//! Schemas cross the binding as the engine's JSON form; this file validates and normalizes it.

use pyo3::prelude::*;
use tessera::ArraySchema;

use crate::errors::IntoPyResult;

/// Parses and validates a schema's JSON form and returns the engine's canonical JSON of it.
#[pyfunction]
fn check_schema(json: &str) -> PyResult<String> {
    Ok(ArraySchema::from_json(json).py()?.to_json())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_schema, m)?)?;
    Ok(())
}
