//! Arrays: create, open (mode, timestamp, config), metadata (schema, non-empty domain,
//! fragments), whole reads, batched reads (`ReadQuery`) and dense writes. Read results hand the
//! engine's buffers to numpy without copying; writes lend numpy's buffers to the engine without
//! copying. The GIL is released around every engine call that does I/O or compute.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use tessera::{ArraySchema, AttrInput, Layout, Mode, ReadResult, Subarray};

use crate::config::context;
use crate::errors::{IntoPyResult, QueryError};

/// Ranges per dimension, inclusive, in domain coordinates.
type Ranges = Vec<Vec<(i128, i128)>>;

/// Creates an empty array at `uri` with the schema given in its JSON form.
#[pyfunction]
#[pyo3(signature = (uri, schema_json, config=None))]
fn create(py: Python<'_>, uri: &str, schema_json: &str, config: Option<HashMap<String, String>>) -> PyResult<()> {
    let ctx = context(config)?;
    let schema = ArraySchema::from_json(schema_json).py()?;
    py.detach(|| tessera::Array::create(&ctx, uri, &schema)).py()
}

fn parse_layout(s: &str) -> PyResult<Layout> {
    Layout::parse(s).ok_or_else(|| {
        QueryError::new_err(format!(
            "unknown layout {s:?} (use \"C\"/\"row-major\", \"F\"/\"col-major\" or \"G\"/\"global\")"
        ))
    })
}

/// One attribute's result as a tuple `(data: uint8[], offsets: uint64[] | None, validity: uint8[] | None)`,
/// keyed by attribute name in request order. The vectors move into numpy without a copy.
fn result_dict<'py>(py: Python<'py>, r: ReadResult) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for a in r.attrs {
        let data = PyArray1::from_vec(py, a.data).into_any();
        let offsets = a.offsets.map(|o| PyArray1::from_vec(py, o).into_any());
        let validity = a.validity.map(|v| PyArray1::from_vec(py, v).into_any());
        out.set_item(a.name, PyTuple::new(py, [Some(data), offsets, validity])?)?;
    }
    Ok(out)
}

/// An open array.
#[pyclass(frozen, module = "tessera._core", name = "Array")]
struct PyArrayHandle {
    inner: tessera::Array,
}

/// One attribute's buffers for a write: name, values as bytes, starting byte offsets of
/// variable-length cells, validity bytes.
#[derive(FromPyObject)]
struct WriteInput<'py>(
    String,
    PyReadonlyArray1<'py, u8>,
    Option<PyReadonlyArray1<'py, u64>>,
    Option<PyReadonlyArray1<'py, u8>>,
);

fn contiguous<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, attr: &str, what: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| QueryError::new_err(format!("attribute {attr}: the {what} buffer is not contiguous")))
}

#[pymethods]
impl PyArrayHandle {
    /// Opens the array at `uri` in mode "r" or "w", optionally as of `timestamp` (ms).
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
        let ctx = context(config)?;
        let inner = py.detach(|| tessera::Array::open_at(&ctx, uri, mode, timestamp)).py()?;
        Ok(Self { inner })
    }

    /// The array's location.
    #[getter]
    fn uri(&self) -> String {
        self.inner.uri().to_string_lossy().into_owned()
    }

    /// "r" or "w".
    #[getter]
    fn mode(&self) -> &'static str {
        match self.inner.mode() {
            Mode::Read => "r",
            Mode::Write => "w",
        }
    }

    /// The schema's JSON form.
    fn schema_json(&self) -> String {
        self.inner.schema().to_json()
    }

    /// Inclusive (lo, hi) per dimension of all written cells, or None.
    fn nonempty_domain(&self) -> Option<Vec<(i128, i128)>> {
        self.inner.nonempty_domain()
    }

    /// The fragments this array sees, oldest first, one dict each.
    fn fragments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let dims = &self.inner.schema().dims;
        let out = PyList::empty(py);
        for f in self.inner.fragments() {
            let d = PyDict::new(py);
            d.set_item("name", f.name.to_string())?;
            d.set_item("t0", f.name.t0)?;
            d.set_item("t1", f.name.t1)?;
            d.set_item("uuid", &f.name.uuid)?;
            d.set_item("version", f.name.version)?;
            d.set_item("dense", f.is_dense())?;
            d.set_item("cell_count", f.cell_count)?;
            d.set_item("tile_count", f.tile_count())?;
            d.set_item("stored_bytes", f.stored_bytes())?;
            d.set_item("unfiltered_bytes", f.unfiltered_bytes())?;
            // The engine keeps a dense fragment's domain normalized (coordinate - domain low);
            // a sparse fragment's holds ordinals, which the engine offers no public way to
            // convert, so it is reported as None.
            let dom: Option<Vec<(i128, i128)>> = f.is_dense().then(|| {
                f.domain.iter().zip(dims).map(|([lo, hi], dim)| (dim.denormalize(*lo), dim.denormalize(*hi))).collect()
            });
            d.set_item("nonempty_domain", dom)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Reads `attrs` (empty: all) over `ranges` in `layout` ("C", "F" or "G"). Returns the
    /// result's shape and a dict name → (data, offsets, validity).
    fn read<'py>(
        &self,
        py: Python<'py>,
        ranges: Ranges,
        attrs: Vec<String>,
        layout: &str,
    ) -> PyResult<(Vec<u64>, Bound<'py, PyDict>)> {
        let layout = parse_layout(layout)?;
        let sub = Subarray { ranges };
        let names: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let (shape, r) = py
            .detach(|| {
                let mut q = self.inner.read_query(&sub, &names, layout)?;
                let shape = q.shape().to_vec();
                q.read_all().map(|r| (shape, r))
            })
            .py()?;
        Ok((shape, result_dict(py, r)?))
    }

    /// A read to be taken in batches; see `ReadQuery`.
    fn read_query(&self, py: Python<'_>, ranges: Ranges, attrs: Vec<String>, layout: &str) -> PyResult<ReadQuery> {
        let layout = parse_layout(layout)?;
        let sub = Subarray { ranges };
        let names: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let q = py.detach(|| self.inner.read_query(&sub, &names, layout)).py()?;
        Ok(ReadQuery { inner: Mutex::new(q) })
    }

    /// Writes one range per dimension whose cells are in `layout` ("C" or "F"; "G" for global
    /// order) as one new fragment. `inputs`: one (name, data, offsets, validity) per attribute.
    /// Returns the fragment's name.
    fn write(&self, py: Python<'_>, ranges: Ranges, layout: &str, inputs: Vec<WriteInput<'_>>) -> PyResult<String> {
        let layout = parse_layout(layout)?;
        let sub = Subarray { ranges };
        let mut borrowed = Vec::with_capacity(inputs.len());
        for WriteInput(name, data, offsets, validity) in &inputs {
            borrowed.push(AttrInput {
                name,
                data: contiguous(data, name, "data")?,
                offsets: offsets.as_ref().map(|o| contiguous(o, name, "offsets")).transpose()?,
                validity: validity.as_ref().map(|v| contiguous(v, name, "validity")).transpose()?,
            });
        }
        let name = py.detach(|| self.inner.write(&sub, layout, &borrowed)).py()?;
        Ok(name.to_string())
    }
}

/// A read whose result is taken in batches (or all at once).
#[pyclass(frozen, module = "tessera._core")]
struct ReadQuery {
    inner: Mutex<tessera::ReadQuery>,
}

impl ReadQuery {
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut tessera::ReadQuery) -> R + Send) -> R {
        // The lock is taken without the GIL, so a thread waiting for it never blocks one that
        // needs the GIL back.
        py.detach(|| f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner)))
    }
}

#[pymethods]
impl ReadQuery {
    /// Cells per dimension of the whole result.
    #[getter]
    fn shape(&self, py: Python<'_>) -> Vec<u64> {
        self.with(py, |q| q.shape().to_vec())
    }

    /// Cells in the whole result.
    #[getter]
    fn total_cells(&self, py: Python<'_>) -> u64 {
        self.with(py, |q| q.total_cells())
    }

    /// The attribute names, in result order.
    #[getter]
    fn attr_names(&self, py: Python<'_>) -> Vec<String> {
        self.with(py, |q| q.attr_names().into_iter().map(str::to_string).collect())
    }

    /// Whether every cell has been returned.
    #[getter]
    fn is_complete(&self, py: Python<'_>) -> bool {
        self.with(py, |q| q.is_complete())
    }

    /// The next batch of about `max_bytes` as (start cell, cells, dict name → buffers), or None.
    fn next_batch<'py>(&self, py: Python<'py>, max_bytes: u64) -> PyResult<Option<(u64, u64, Bound<'py, PyDict>)>> {
        match self.with(py, |q| q.next_batch(max_bytes)).py()? {
            Some(r) => Ok(Some((r.start, r.cells, result_dict(py, r)?))),
            None => Ok(None),
        }
    }

    /// Every remaining cell as (start cell, cells, dict name → buffers).
    fn read_all<'py>(&self, py: Python<'py>) -> PyResult<(u64, u64, Bound<'py, PyDict>)> {
        let r = self.with(py, tessera::ReadQuery::read_all).py()?;
        Ok((r.start, r.cells, result_dict(py, r)?))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyArrayHandle>()?;
    m.add_class::<ReadQuery>()?;
    m.add_function(wrap_pyfunction!(create, m)?)?;
    Ok(())
}
