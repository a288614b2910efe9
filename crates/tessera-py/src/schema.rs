//! Schemas cross the binding as the engine's JSON form; this file validates and normalizes it.

use pyo3::prelude::*;
use tessera::{ArraySchema, ArrayType, Attribute, Datatype, Dimension};

use crate::errors::IntoPyResult;

/// Parses and validates a schema's JSON form and returns the engine's canonical JSON of it.
#[pyfunction]
fn check_schema(json: &str) -> PyResult<String> {
    Ok(ArraySchema::from_json(json).py()?.to_json())
}

/// The JSON of a one-dimension sparse schema built by the engine's builder, whose dimension
/// carries the engine's default coordinate filters (`default_coord_filters`): the JSON path
/// (`ArraySchema::from_json`) applies no defaults, so the Python layer fills them in from this.
#[pyfunction]
fn default_sparse_schema_json() -> PyResult<String> {
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("d", Datatype::Int64, (0, 0), 1))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .py()?;
    Ok(schema.to_json())
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_schema, m)?)?;
    m.add_function(wrap_pyfunction!(default_sparse_schema_json, m)?)?;
    Ok(())
}
