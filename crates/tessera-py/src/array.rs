//! Arrays: create, open (mode, timestamp, config), close, metadata (schema, non-empty domain,
//! fragments), whole reads, batched reads (`ReadQuery`, `SparseQuery`), dense writes, sparse
//! writes and deletions (by coordinates or by ranges). Read results hand the engine's buffers to numpy without copying; writes lend numpy's
//! buffers to the engine without copying. The GIL is released around every engine call that does
//! I/O or compute.
//!
//! An array open for reading holds the array's lock shared (vacuum waits for it); `close` drops
//! the engine array at once, so the lock is released without waiting for Python's garbage
//! collector. A batched read (`ReadQuery`, `SparseQuery`) holds the lock until it is dropped.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use numpy::{PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyIndexError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use tessera::{ArraySchema, AttrInput, CoordInput, DimRange, Layout, MetaValue, Mode, ReadResult, Subarray};

use crate::config::context;
use crate::errors::{IntoPyResult, QueryError};
use crate::meta::{meta_items, parse_changes, MetaChange, MetaItem};

/// Ranges per dimension, inclusive, in domain coordinates.
type Ranges = Vec<Vec<(i128, i128)>>;

/// A range bound of a sparse read: an integer (integer dimensions) or a float.
#[derive(FromPyObject, Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// Inclusive ranges per dimension of a sparse read or a delete (an empty list: the whole domain).
type SparseRanges = Vec<Vec<(Num, Num)>>;

fn dim_ranges(ranges: SparseRanges) -> Vec<Vec<DimRange>> {
    ranges
        .into_iter()
        .map(|rs| {
            rs.into_iter()
                .map(|(lo, hi)| match (lo, hi) {
                    (Num::Int(a), Num::Int(b)) => DimRange::Int(a, b),
                    (a, b) => DimRange::Float(a.as_f64(), b.as_f64()),
                })
                .collect()
        })
        .collect()
}

/// One dimension's inclusive (lo, hi) as a Python tuple of ints or floats.
fn range_tuple<'py>(py: Python<'py>, r: &DimRange) -> PyResult<Bound<'py, PyTuple>> {
    match *r {
        DimRange::Int(lo, hi) => (lo, hi).into_pyobject(py),
        DimRange::Float(lo, hi) => (lo, hi).into_pyobject(py),
    }
}

fn range_list<'py>(py: Python<'py>, rs: &[DimRange]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for r in rs {
        out.append(range_tuple(py, r)?)?;
    }
    Ok(out)
}

/// Creates an empty array at `uri` with the schema given in its JSON form.
#[pyfunction]
#[pyo3(signature = (uri, schema_json, config=None))]
fn create(py: Python<'_>, uri: &str, schema_json: &str, config: Option<HashMap<String, String>>) -> PyResult<()> {
    let (_, ctx) = context(config)?;
    let schema = ArraySchema::from_json(schema_json).py()?;
    py.detach(|| tessera::Array::create(&ctx, uri, &schema)).py()
}

fn parse_layout(s: &str) -> PyResult<Layout> {
    Layout::parse(s).ok_or_else(|| {
        QueryError::new_err(format!(
            "unknown layout {s:?} (use \"C\"/\"row-major\", \"F\"/\"col-major\", \"G\"/\"global\" or \
             \"U\"/\"unordered\")"
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

/// One fragment's description as a dict (the fields of Python's `FragmentInfo`).
pub(crate) fn fragment_dict<'py>(
    py: Python<'py>,
    f: &tessera::FragmentMetadata,
    schema: &ArraySchema,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", f.name.to_string())?;
    d.set_item("t0", f.name.t0)?;
    d.set_item("t1", f.name.t1)?;
    d.set_item("uuid", &f.name.uuid)?;
    d.set_item("version", f.name.version)?;
    d.set_item("kind", f.kind().name())?;
    d.set_item("dense", f.is_dense())?;
    d.set_item("cell_count", f.cell_count)?;
    d.set_item("tile_count", f.tile_count())?;
    d.set_item("stored_bytes", f.stored_bytes())?;
    d.set_item("unfiltered_bytes", f.unfiltered_bytes())?;
    d.set_item("packed", f.packed)?;
    d.set_item("nonempty_domain", range_list(py, &f.nonempty_domain(schema))?)?;
    Ok(d)
}

/// An open array.
#[pyclass(frozen, module = "tessera._core", name = "Array")]
struct PyArrayHandle {
    /// The engine array; `None` once closed.
    inner: Mutex<Option<tessera::Array>>,
    /// The array's location (for messages after `close`).
    uri: String,
    /// Which shared context it uses (see `config::context`).
    context_id: usize,
}

impl PyArrayHandle {
    /// The engine array (a cheap clone sharing its fragments and its lock), or `QueryError`
    /// once closed.
    fn array(&self) -> PyResult<tessera::Array> {
        self.inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| QueryError::new_err(format!("array {} is closed", self.uri)))
    }
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

/// One dimension's coordinates for a sparse write: name, values as bytes.
#[derive(FromPyObject)]
struct CoordWriteInput<'py>(String, PyReadonlyArray1<'py, u8>);

fn contiguous<'a, T: numpy::Element>(a: &'a PyReadonlyArray1<'_, T>, attr: &str, what: &str) -> PyResult<&'a [T]> {
    a.as_slice().map_err(|_| QueryError::new_err(format!("attribute {attr}: the {what} buffer is not contiguous")))
}

/// Borrows the coordinate buffers of a sparse write or a delete.
fn borrow_coords<'a>(coords: &'a [CoordWriteInput<'_>]) -> PyResult<Vec<CoordInput<'a>>> {
    let mut cols = Vec::with_capacity(coords.len());
    for CoordWriteInput(name, data) in coords {
        let data = data
            .as_slice()
            .map_err(|_| QueryError::new_err(format!("dimension {name}: the coordinate buffer is not contiguous")))?;
        cols.push(CoordInput { name, data });
    }
    Ok(cols)
}

/// Borrows the attribute buffers of a write.
fn borrow_inputs<'a>(inputs: &'a [WriteInput<'_>]) -> PyResult<Vec<AttrInput<'a>>> {
    let mut borrowed = Vec::with_capacity(inputs.len());
    for WriteInput(name, data, offsets, validity) in inputs {
        borrowed.push(AttrInput {
            name,
            data: contiguous(data, name, "data")?,
            offsets: offsets.as_ref().map(|o| contiguous(o, name, "offsets")).transpose()?,
            validity: validity.as_ref().map(|v| contiguous(v, name, "validity")).transpose()?,
        });
    }
    Ok(borrowed)
}

#[pymethods]
impl PyArrayHandle {
    /// Opens the array at `uri` in mode "r" or "w". Reads: optionally as of `timestamp` (ms), and
    /// optionally seeing only the fragments written from `start` on (ms, inclusive). Writes:
    /// `timestamp` names every fragment written (t0 = t1 = timestamp).
    #[staticmethod]
    #[pyo3(signature = (uri, mode="r", timestamp=None, config=None, start=None))]
    fn open(
        py: Python<'_>,
        uri: &str,
        mode: &str,
        timestamp: Option<u64>,
        config: Option<HashMap<String, String>>,
        start: Option<u64>,
    ) -> PyResult<Self> {
        let mode = match mode {
            "r" => Mode::Read,
            "w" => Mode::Write,
            other => return Err(PyValueError::new_err(format!("mode must be \"r\" or \"w\", not {other:?}"))),
        };
        if start.is_some() && mode == Mode::Write {
            return Err(PyValueError::new_err("a start timestamp only applies to reads (mode \"r\")"));
        }
        let (context_id, ctx) = context(config)?;
        let (t0, t1) = (start.unwrap_or(0), timestamp.unwrap_or(u64::MAX));
        let inner = py
            .detach(|| match mode {
                // Write mode: `timestamp` names the fragments written.
                Mode::Write => tessera::Array::open_at(&ctx, uri, mode, timestamp),
                Mode::Read => tessera::Array::open_between(&ctx, uri, mode, t0, t1),
            })
            .py()?;
        let uri = inner.uri().to_string_lossy().into_owned();
        Ok(Self { inner: Mutex::new(Some(inner)), uri, context_id })
    }

    /// Drops the engine array, releasing its lock (idempotent). Batched reads started from it
    /// keep their own reference until they are dropped.
    fn close(&self) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner).take();
        drop(inner);
    }

    /// Whether `close` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    /// Identifies the shared engine context (equal for arrays opened with equal configurations).
    #[getter]
    fn context_id(&self) -> usize {
        self.context_id
    }

    /// Whether the array is sparse.
    #[getter]
    fn sparse(&self) -> PyResult<bool> {
        Ok(self.array()?.schema().is_sparse())
    }

    /// The array's location.
    #[getter]
    fn uri(&self) -> String {
        self.uri.clone()
    }

    /// "r" or "w".
    #[getter]
    fn mode(&self) -> PyResult<&'static str> {
        Ok(match self.array()?.mode() {
            Mode::Read => "r",
            Mode::Write => "w",
        })
    }

    /// The schema's JSON form.
    fn schema_json(&self) -> PyResult<String> {
        Ok(self.array()?.schema().to_json())
    }

    /// Inclusive (lo, hi) per dimension of all written cells (ints, or floats for float
    /// dimensions), or None.
    fn nonempty_domain<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        self.array()?.nonempty_domain_ranges().map(|rs| range_list(py, &rs)).transpose()
    }

    /// The fragments this array sees, oldest first, one dict each.
    fn fragments<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let array = self.array()?;
        let out = PyList::empty(py);
        for f in array.fragments() {
            out.append(fragment_dict(py, f, array.schema())?)?;
        }
        Ok(out)
    }

    /// Where the cells of the fragments this array sees lie along dimension `dim`: one entry
    /// per data tile (per fragment for dense fragments): its lowest and highest coordinate along
    /// `dim` (as floats) and its cell count, as three arrays.
    #[allow(clippy::type_complexity)]
    fn cell_spans<'py>(
        &self,
        py: Python<'py>,
        dim: usize,
    ) -> PyResult<(Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<f64>>, Bound<'py, PyArray1<u64>>)> {
        let array = self.array()?;
        if dim >= array.schema().dims.len() {
            return Err(PyIndexError::new_err(format!(
                "dimension {dim} of an array with {} dimensions",
                array.schema().dims.len()
            )));
        }
        let (mut lo, mut hi, mut cells) = (Vec::new(), Vec::new(), Vec::new());
        for f in array.fragments() {
            for (r, n) in f.cell_spans(array.schema(), dim) {
                let (a, b) = match r {
                    DimRange::Int(a, b) => (a as f64, b as f64),
                    DimRange::Float(a, b) => (a, b),
                };
                lo.push(a);
                hi.push(b);
                cells.push(n);
            }
        }
        Ok((PyArray1::from_vec(py, lo), PyArray1::from_vec(py, hi), PyArray1::from_vec(py, cells)))
    }

    /// The array's metadata as of its open timestamp: (key, datatype name or None for raw
    /// bytes, the values' little-endian bytes), sorted by key.
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Vec<MetaItem<'py>>> {
        let array = self.array()?;
        let m = py.detach(|| array.metadata()).py()?;
        Ok(meta_items(py, m))
    }

    /// Writes metadata puts (key, (datatype name or None for raw bytes, bytes)) and deletes
    /// (key, None) as one atomic file.
    fn write_metadata(&self, py: Python<'_>, changes: Vec<MetaChange>) -> PyResult<()> {
        let array = self.array()?;
        let parsed = parse_changes(changes)?;
        let borrowed: Vec<(&str, Option<MetaValue>)> = parsed.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        py.detach(|| array.write_metadata(&borrowed)).py()
    }

    /// Reads `attrs` (empty: all) over `ranges` in `layout` ("C", "F" or "G"). Returns the
    /// result's shape and a dict name → (data, offsets, validity). Bounds are ints, or floats
    /// of which a dimension takes the integers inside (as for sparse reads); an empty list is
    /// the whole dimension. `condition`: the text of a query condition; cells whose value fails
    /// it read as the fill value (and null).
    #[pyo3(signature = (ranges, attrs, layout, condition=None))]
    fn read<'py>(
        &self,
        py: Python<'py>,
        ranges: SparseRanges,
        attrs: Vec<String>,
        layout: &str,
        condition: Option<&str>,
    ) -> PyResult<(Vec<u64>, Bound<'py, PyDict>)> {
        let layout = parse_layout(layout)?;
        let ranges = dim_ranges(ranges);
        let names: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let array = self.array()?;
        let (shape, r) = py
            .detach(|| {
                let sub = Subarray::from_dim_ranges(array.schema(), &ranges)?;
                let mut q = dense_query(&array, &sub, &names, layout, condition)?;
                let shape = q.shape().to_vec();
                q.read_all().map(|r| (shape, r))
            })
            .py()?;
        Ok((shape, result_dict(py, r)?))
    }

    /// A read to be taken in batches; see `ReadQuery`. `ranges` and `condition` as for `read`.
    #[pyo3(signature = (ranges, attrs, layout, condition=None))]
    fn read_query(
        &self,
        py: Python<'_>,
        ranges: SparseRanges,
        attrs: Vec<String>,
        layout: &str,
        condition: Option<&str>,
    ) -> PyResult<ReadQuery> {
        let layout = parse_layout(layout)?;
        let ranges = dim_ranges(ranges);
        let names: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let array = self.array()?;
        let q = py
            .detach(|| {
                let sub = Subarray::from_dim_ranges(array.schema(), &ranges)?;
                dense_query(&array, &sub, &names, layout, condition)
            })
            .py()?;
        Ok(ReadQuery { inner: Mutex::new(q) })
    }

    /// Writes one range per dimension whose cells are in `layout` ("C" or "F"; "G" for global
    /// order) as one new fragment. `inputs`: one (name, data, offsets, validity) per attribute.
    /// Returns the fragment's name.
    fn write(&self, py: Python<'_>, ranges: Ranges, layout: &str, inputs: Vec<WriteInput<'_>>) -> PyResult<String> {
        let layout = parse_layout(layout)?;
        let sub = Subarray { ranges };
        let borrowed = borrow_inputs(&inputs)?;
        let array = self.array()?;
        let name = py.detach(|| array.write(&sub, layout, &borrowed)).py()?;
        Ok(name.to_string())
    }

    /// Writes cells with explicit coordinates as one new sparse fragment. `coords`: one
    /// (dimension name, values as bytes) per dimension; `layout`: "U" (any order; the engine
    /// sorts) or "G" (already in global order). Returns the fragment's name.
    fn write_sparse(
        &self,
        py: Python<'_>,
        coords: Vec<CoordWriteInput<'_>>,
        layout: &str,
        inputs: Vec<WriteInput<'_>>,
    ) -> PyResult<String> {
        let layout = parse_layout(layout)?;
        let cols = borrow_coords(&coords)?;
        let borrowed = borrow_inputs(&inputs)?;
        let array = self.array()?;
        let name = py
            .detach(|| {
                let mut w = array.sparse_writer(layout)?;
                w.submit(&cols, &borrowed)?;
                w.finish().map(|m| m.name)
            })
            .py()?;
        Ok(name.to_string())
    }

    /// Deletes the cells at the coordinates given (one (dimension name, values as bytes) per
    /// dimension; repeated points are fine) as one new delete fragment. Returns its name.
    fn delete_cells(&self, py: Python<'_>, coords: Vec<CoordWriteInput<'_>>) -> PyResult<String> {
        let cols = borrow_coords(&coords)?;
        let array = self.array()?;
        let name = py.detach(|| array.delete_cells(&cols)).py()?;
        Ok(name.to_string())
    }

    /// Reads the cells of a dense array at the coordinates given (one (dimension name, values as
    /// bytes) per dimension), in that order. Returns a dict name → (data, offsets, validity).
    fn read_points<'py>(
        &self,
        py: Python<'py>,
        coords: Vec<CoordWriteInput<'_>>,
        attrs: Vec<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let cols = borrow_coords(&coords)?;
        let names: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let array = self.array()?;
        let r = py.detach(|| array.read_points(&cols, &names)).py()?;
        result_dict(py, r)
    }

    /// Deletes every cell in the cross product of `ranges` (per dimension its inclusive (lo, hi)
    /// ranges, ints or floats; an empty list is the whole dimension) as one new delete fragment.
    /// Returns its name.
    fn delete_ranges(&self, py: Python<'_>, ranges: SparseRanges) -> PyResult<String> {
        let ranges = dim_ranges(ranges);
        let array = self.array()?;
        let name = py.detach(|| array.delete_ranges(&ranges)).py()?;
        Ok(name.to_string())
    }

    /// Reads a sparse array: `ranges` holds per dimension its inclusive (lo, hi) ranges (ints
    /// or floats; an empty list is the whole domain); `attrs` (empty: all) in `layout` ("C",
    /// "F", "G" or "U"). Returns a dict name → (data, offsets, validity): the dimension
    /// columns first, then the attributes. `condition`: the text of a query condition; only
    /// the cells whose value passes it come back.
    #[pyo3(signature = (ranges, attrs, layout, condition=None))]
    fn sparse_read<'py>(
        &self,
        py: Python<'py>,
        ranges: SparseRanges,
        attrs: Vec<String>,
        layout: &str,
        condition: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let layout = parse_layout(layout)?;
        let ranges = dim_ranges(ranges);
        let names: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let array = self.array()?;
        let r = py.detach(|| sparse_query(&array, &ranges, &names, layout, condition)?.read_all()).py()?;
        result_dict(py, r)
    }

    /// A sparse read to be taken in batches; see `SparseQuery`. `condition` as for
    /// `sparse_read`.
    #[pyo3(signature = (ranges, attrs, layout, condition=None))]
    fn sparse_query(
        &self,
        py: Python<'_>,
        ranges: SparseRanges,
        attrs: Vec<String>,
        layout: &str,
        condition: Option<&str>,
    ) -> PyResult<SparseQuery> {
        let layout = parse_layout(layout)?;
        let ranges = dim_ranges(ranges);
        let names: Vec<&str> = attrs.iter().map(String::as_str).collect();
        let array = self.array()?;
        let q = py.detach(|| sparse_query(&array, &ranges, &names, layout, condition)).py()?;
        Ok(SparseQuery { inner: Mutex::new(q) })
    }

    /// Aggregates computed in the engine over `ranges` (per dimension, inclusive; an empty list
    /// is the whole dimension): one per (attribute, operation name) of `requests`, in order,
    /// over the cells that pass `condition` (text) if given. Returns a list of ints, floats and
    /// None (the min, max or mean of no value). The GIL is released while they are computed.
    #[pyo3(signature = (ranges, requests, condition=None))]
    fn aggregate<'py>(
        &self,
        py: Python<'py>,
        ranges: SparseRanges,
        requests: Vec<(String, String)>,
        condition: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let ranges = dim_ranges(ranges);
        let reqs = requests
            .into_iter()
            .map(|(attr, op)| match tessera::AggregateOp::parse(&op) {
                Some(op) => Ok(tessera::AggregateRequest::new(attr, op)),
                None => {
                    let known: Vec<&str> = tessera::AggregateOp::ALL.iter().map(|o| o.name()).collect();
                    Err(QueryError::new_err(format!(
                        "aggregate of attribute {attr}: unknown operation {op:?} (known: {})",
                        known.join(", ")
                    )))
                }
            })
            .collect::<PyResult<Vec<_>>>()?;
        let array = self.array()?;
        let values = py
            .detach(|| {
                let cond = condition.map(tessera::Condition::parse).transpose()?;
                array.aggregate(&ranges, cond.as_ref(), &reqs)
            })
            .py()?;
        let out = PyList::empty(py);
        for v in values {
            match v {
                tessera::AggregateValue::Count(c) => out.append(c)?,
                tessera::AggregateValue::Int(i) => out.append(i)?,
                tessera::AggregateValue::Float(f) => out.append(f)?,
                _ => out.append(py.None())?,
            }
        }
        Ok(out)
    }
}

/// A dense read query, with the condition `condition` (text) if given.
fn dense_query(
    array: &tessera::Array,
    sub: &Subarray,
    names: &[&str],
    layout: Layout,
    condition: Option<&str>,
) -> tessera::Result<tessera::ReadQuery> {
    let q = array.read_query(sub, names, layout)?;
    match condition {
        Some(text) => q.with_condition(&tessera::Condition::parse(text)?),
        None => Ok(q),
    }
}

/// A sparse read query, with the condition `condition` (text) if given.
fn sparse_query(
    array: &tessera::Array,
    ranges: &[Vec<DimRange>],
    names: &[&str],
    layout: Layout,
    condition: Option<&str>,
) -> tessera::Result<tessera::SparseReadQuery> {
    match condition {
        Some(text) => array.sparse_query_where(ranges, names, layout, &tessera::Condition::parse(text)?),
        None => array.sparse_query(ranges, names, layout),
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

/// A read of a sparse array whose result is taken in batches (or all at once). Every result
/// holds the dimension columns first, then the attributes.
#[pyclass(frozen, module = "tessera._core")]
struct SparseQuery {
    inner: Mutex<tessera::SparseReadQuery>,
}

impl SparseQuery {
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut tessera::SparseReadQuery) -> R + Send) -> R {
        py.detach(|| f(&mut self.inner.lock().unwrap_or_else(PoisonError::into_inner)))
    }
}

#[pymethods]
impl SparseQuery {
    /// Cells in the whole result.
    #[getter]
    fn total_cells(&self, py: Python<'_>) -> u64 {
        self.with(py, |q| q.total_cells())
    }

    /// Whether every cell has been returned.
    #[getter]
    fn is_complete(&self, py: Python<'_>) -> bool {
        self.with(py, |q| q.is_complete())
    }

    /// The next batch of about `max_bytes` (at least one cell) as (start cell, cells, dict
    /// name → buffers), or None when done.
    fn next_batch<'py>(&self, py: Python<'py>, max_bytes: u64) -> PyResult<Option<(u64, u64, Bound<'py, PyDict>)>> {
        match self.with(py, |q| q.next_batch(max_bytes)).py()? {
            Some(r) => Ok(Some((r.start, r.cells, result_dict(py, r)?))),
            None => Ok(None),
        }
    }

    /// Every remaining cell as (start cell, cells, dict name → buffers).
    fn read_all<'py>(&self, py: Python<'py>) -> PyResult<(u64, u64, Bound<'py, PyDict>)> {
        let r = self.with(py, tessera::SparseReadQuery::read_all).py()?;
        Ok((r.start, r.cells, result_dict(py, r)?))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyArrayHandle>()?;
    m.add_class::<ReadQuery>()?;
    m.add_class::<SparseQuery>()?;
    m.add_function(wrap_pyfunction!(create, m)?)?;
    Ok(())
}
