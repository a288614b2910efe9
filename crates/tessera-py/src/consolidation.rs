//! Consolidation and vacuum: `consolidate` merges consecutive fragments into one,
//! `plan_consolidation` tells which fragments a selection would merge, and `vacuum` deletes the
//! fragments consolidations superseded (waiting for the array's lock). Selections arrive as at
//! most one of: fragment names, an inclusive timestamp range, or a size-tiered policy
//! (ratio, minimum number of fragments); none means every fragment. The GIL is released while
//! the engine works (vacuum may wait for other threads to close their arrays).

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use tessera::{Error, Mode, Selection};

use crate::array::fragment_dict;
use crate::config::context;
use crate::errors::to_py;

/// The engine's selection from the binding's arguments (at most one given).
fn selection(
    names: Option<Vec<String>>,
    timestamps: Option<(u64, u64)>,
    size_tiered: Option<(f64, usize)>,
) -> PyResult<Selection> {
    match (names, timestamps, size_tiered) {
        (None, None, None) => Ok(Selection::All),
        (Some(n), None, None) => Ok(Selection::Names(n)),
        (None, Some((t0, t1)), None) => Ok(Selection::Timestamps(t0, t1)),
        (None, None, Some((ratio, min_fragments))) => Ok(Selection::SizeTiered { ratio, min_fragments }),
        _ => Err(PyValueError::new_err("give at most one of names, timestamps and size_tiered")),
    }
}

/// Consolidates the selected fragments of the array at `uri`; returns the new fragment as a
/// dict (the fields of `FragmentInfo`), or None when fewer than two fragments were selected.
#[pyfunction]
#[pyo3(signature = (uri, names=None, timestamps=None, size_tiered=None, config=None))]
fn consolidate<'py>(
    py: Python<'py>,
    uri: &str,
    names: Option<Vec<String>>,
    timestamps: Option<(u64, u64)>,
    size_tiered: Option<(f64, usize)>,
    config: Option<HashMap<String, String>>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let sel = selection(names, timestamps, size_tiered)?;
    let (_, ctx) = context(config)?;
    let (schema, meta) = py
        .detach(|| {
            // Opening for writing reads the schema and takes no lock.
            let schema = tessera::Array::open(&ctx, uri, Mode::Write)?.schema().clone();
            tessera::consolidate(&ctx, uri, &sel).map(|m| (schema, m))
        })
        .map_err(to_py)?;
    meta.map(|m| fragment_dict(py, &m, &schema)).transpose()
}

/// Consolidates the metadata files of the array at `uri` into one; returns how many it
/// replaced (0: fewer than two).
#[pyfunction]
#[pyo3(signature = (uri, config=None))]
fn consolidate_metadata(py: Python<'_>, uri: &str, config: Option<HashMap<String, String>>) -> PyResult<usize> {
    let (_, ctx) = context(config)?;
    py.detach(|| tessera::consolidate_metadata(&ctx, uri)).map_err(to_py)
}

/// Writes one file holding every visible fragment's metadata (faster opens); returns how many.
#[pyfunction]
#[pyo3(signature = (uri, config=None))]
fn consolidate_fragment_metadata(
    py: Python<'_>,
    uri: &str,
    config: Option<HashMap<String, String>>,
) -> PyResult<usize> {
    let (_, ctx) = context(config)?;
    py.detach(|| tessera::consolidate_fragment_metadata(&ctx, uri)).map_err(to_py)
}

/// The fragments a consolidation of the same selection would merge (dicts, oldest first;
/// empty when fewer than two), as the array is now. Nothing is written.
#[pyfunction]
#[pyo3(signature = (uri, names=None, timestamps=None, size_tiered=None, config=None))]
fn plan_consolidation<'py>(
    py: Python<'py>,
    uri: &str,
    names: Option<Vec<String>>,
    timestamps: Option<(u64, u64)>,
    size_tiered: Option<(f64, usize)>,
    config: Option<HashMap<String, String>>,
) -> PyResult<Bound<'py, PyList>> {
    let sel = selection(names, timestamps, size_tiered)?;
    let (_, ctx) = context(config)?;
    let (array, plan) = py
        .detach(|| {
            let array = tessera::Array::open(&ctx, uri, Mode::Read)?;
            let plan = tessera::plan_consolidation(array.fragments(), !array.schema().is_sparse(), &sel)?;
            Ok::<_, Error>((array, plan))
        })
        .map_err(to_py)?;
    let out = PyList::empty(py);
    for i in plan.map(|p| p.inputs).unwrap_or_default() {
        out.append(fragment_dict(py, &array.fragments()[i], array.schema())?)?;
    }
    drop(array);
    Ok(out)
}

/// Vacuums the array at `uri` (waiting up to `sm.vacuum.lock_timeout_ms` for every reader and
/// writer, this process's included); returns (removed superseded fragments, removed folders of
/// uncommitted fragments).
#[pyfunction]
#[pyo3(signature = (uri, config=None))]
fn vacuum(
    py: Python<'_>,
    uri: &str,
    config: Option<HashMap<String, String>>,
) -> PyResult<(Vec<String>, Vec<String>, Vec<String>)> {
    let (_, ctx) = context(config)?;
    let report = py.detach(|| tessera::vacuum(&ctx, uri)).map_err(to_py)?;
    Ok((report.removed, report.uncommitted, report.deferred))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(consolidate_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(consolidate_fragment_metadata, m)?)?;
    m.add_function(wrap_pyfunction!(consolidate, m)?)?;
    m.add_function(wrap_pyfunction!(plan_consolidation, m)?)?;
    m.add_function(wrap_pyfunction!(vacuum, m)?)?;
    Ok(())
}
