//! Groups: create, open (mode, timestamp, config), members, metadata, vacuum of replaced
//! metadata files, and `object_kind` (array, group or neither at a location). The GIL is released
//! around every engine call that does I/O.

use std::collections::HashMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tessera::{MetaValue, Mode};

use crate::config::context;
use crate::errors::IntoPyResult;
use crate::meta::{meta_items, parse_changes, MetaChange, MetaItem};

/// Creates an empty group at `uri`.
#[pyfunction]
#[pyo3(signature = (uri, config=None))]
fn group_create(py: Python<'_>, uri: &str, config: Option<HashMap<String, String>>) -> PyResult<()> {
    let (_, ctx) = context(config)?;
    py.detach(|| tessera::Group::create(&ctx, uri)).py()
}

/// "array", "group" or None: what is at `uri`.
#[pyfunction]
#[pyo3(signature = (uri, config=None))]
fn object_kind(py: Python<'_>, uri: &str, config: Option<HashMap<String, String>>) -> PyResult<Option<&'static str>> {
    let (_, ctx) = context(config)?;
    Ok(py.detach(|| tessera::object_kind(&ctx, uri)).py()?.map(tessera::ObjectKind::name))
}

/// Deletes the group's metadata files a consolidation replaced; returns their names.
#[pyfunction]
#[pyo3(signature = (uri, config=None))]
fn group_vacuum(py: Python<'_>, uri: &str, config: Option<HashMap<String, String>>) -> PyResult<Vec<String>> {
    let (_, ctx) = context(config)?;
    py.detach(|| tessera::Group::vacuum(&ctx, uri)).py()
}

/// An open group.
#[pyclass(frozen, module = "tessera._core", name = "Group")]
pub struct Group {
    inner: tessera::Group,
    uri: String,
}

#[pymethods]
impl Group {
    /// Opens the group at `uri` in mode "r" or "w" (`timestamp`: read, metadata as of then;
    /// write, the timestamp of the metadata written).
    #[staticmethod]
    #[pyo3(signature = (uri, mode="r", timestamp=None, config=None))]
    fn open(
        py: Python<'_>,
        uri: &str,
        mode: &str,
        timestamp: Option<u64>,
        config: Option<HashMap<String, String>>,
    ) -> PyResult<Self> {
        let mode = match mode {
            "r" => Mode::Read,
            "w" => Mode::Write,
            other => return Err(PyValueError::new_err(format!("mode must be \"r\" or \"w\", not {other:?}"))),
        };
        let (_, ctx) = context(config)?;
        let inner = py.detach(|| tessera::Group::open(&ctx, uri, mode, timestamp)).py()?;
        let uri = inner.uri().to_string_lossy().into_owned();
        Ok(Self { inner, uri })
    }

    #[getter]
    fn uri(&self) -> &str {
        &self.uri
    }

    /// The members: (name, "array" or "group"), sorted by name.
    fn members(&self, py: Python<'_>) -> PyResult<Vec<(String, &'static str)>> {
        let m = py.detach(|| self.inner.members()).py()?;
        Ok(m.into_iter().map(|(n, k)| (n, k.name())).collect())
    }

    /// The location of member `name` (a plain name, checked).
    fn member_uri(&self, name: &str) -> PyResult<String> {
        Ok(self.inner.member_uri(name).py()?.to_string_lossy().into_owned())
    }

    /// The metadata as of the open timestamp, sorted by key.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Vec<MetaItem<'py>>> {
        let m = py.detach(|| self.inner.metadata()).py()?;
        Ok(meta_items(py, m))
    }

    /// Writes metadata puts and deletes as one atomic file.
    fn write_metadata(&self, py: Python<'_>, changes: Vec<MetaChange>) -> PyResult<()> {
        let parsed = parse_changes(changes)?;
        let borrowed: Vec<(&str, Option<MetaValue>)> = parsed.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        py.detach(|| self.inner.write_metadata(&borrowed)).py()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Group>()?;
    m.add_function(wrap_pyfunction!(group_create, m)?)?;
    m.add_function(wrap_pyfunction!(object_kind, m)?)?;
    m.add_function(wrap_pyfunction!(group_vacuum, m)?)?;
    Ok(())
}
