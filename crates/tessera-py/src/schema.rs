//! Schemas: the engine's own schema model as Python classes. `ts.ArraySchema`, `ts.Dim`,
//! `ts.Attr` and the filters (`ts.Filter` and one subclass per engine filter) each wrap the
//! engine's type (`ArraySchema`, `Dimension`, `Attribute`, `Filter`); the engine validates them
//! (`ArraySchema::validate`, errors raise `SchemaError`). This file only converts: Python numbers,
//! names and numpy dtypes to the engine's types and back (the dtype mapping is documented in
//! `python/tessera/schema.py`).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use serde_json::Value;
use tessera::{
    ArraySchema, ArrayType, Attribute, CellOrder, CellValNum, Datatype, Dimension, Extent, Filter, FilterPipeline,
    SchemaError as EngineSchemaError, TimeUnit,
};

use crate::errors::{to_py, IntoPyResult};

// ---------------------------------------------------------------------------------------------
// Conversions shared by the classes

/// A `SchemaError` about dimension `dim`.
fn dim_err(dim: &str, detail: impl Into<String>) -> PyErr {
    to_py(EngineSchemaError::Dimension { dim: dim.into(), detail: detail.into() }.into())
}

/// A `SchemaError` about attribute `attr`.
fn attr_err(attr: &str, detail: impl Into<String>) -> PyErr {
    to_py(EngineSchemaError::Attribute { attr: attr.into(), detail: detail.into() }.into())
}

/// A `SchemaError` about the schema as a whole.
fn schema_err(detail: impl Into<String>) -> PyErr {
    to_py(EngineSchemaError::Invalid(detail.into()).into())
}

fn repr(x: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(x.repr()?.to_string())
}

fn numpy(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("numpy")
}

/// Whether `x` is a Python or numpy bool.
fn is_bool(x: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(x.is_instance_of::<PyBool>() || x.is_instance(&numpy(x.py())?.getattr("bool_")?)?)
}

/// Whether `x` is a Python or numpy integer (booleans excluded).
fn is_int(x: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(!is_bool(x)? && (x.is_instance_of::<PyInt>() || x.is_instance(&numpy(x.py())?.getattr("integer")?)?))
}

/// Whether `x` is a Python or numpy float.
fn is_float(x: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(x.is_instance_of::<PyFloat>() || x.is_instance(&numpy(x.py())?.getattr("floating")?)?)
}

/// A name: text that UTF-8 can encode. `what` is "dimension" or "attribute".
fn name_of(x: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let Ok(s) = x.cast::<PyString>() else {
        let ty = x.get_type().name()?;
        return Err(crate::errors::SchemaError::new_err(format!(
            "{what} name {} is not text (str) but {ty}",
            repr(x)?
        )));
    };
    if let Ok(t) = s.to_cow() {
        return Ok(t.into_owned());
    }
    // A lone surrogate: name it and its position, as every text argument of the package does.
    let start: usize = match s.call_method1("encode", ("utf-8",)) {
        Err(e) => e.value(x.py()).getattr("start")?.extract()?,
        Ok(_) => 0,
    };
    let ch = s.get_item(start)?;
    Err(crate::errors::SchemaError::new_err(format!(
        "{what} name: {} holds a lone surrogate ({} at character {start}), which UTF-8 cannot encode",
        repr(s.as_any())?,
        repr(&ch)?
    )))
}

/// The engine datatype of a numeric, bool or datetime64 numpy dtype (byte order ignored), if it
/// has one (datetime64 of the units D, h, m, s, ms, us, ns, one step each).
fn numeric_datatype(dt: &Bound<'_, PyAny>) -> PyResult<Option<Datatype>> {
    let kind: String = dt.getattr("kind")?.extract()?;
    let size: usize = dt.getattr("itemsize")?.extract()?;
    if kind == "M" {
        let (unit, count): (String, i64) = numpy(dt.py())?.call_method1("datetime_data", (dt,))?.extract()?;
        return Ok(TimeUnit::parse(&unit).filter(|_| count == 1).map(Datatype::Datetime64));
    }
    Ok(match (kind.as_str(), size) {
        ("b", 1) => Some(Datatype::Bool),
        ("i", 1) => Some(Datatype::Int8),
        ("i", 2) => Some(Datatype::Int16),
        ("i", 4) => Some(Datatype::Int32),
        ("i", 8) => Some(Datatype::Int64),
        ("u", 1) => Some(Datatype::UInt8),
        ("u", 2) => Some(Datatype::UInt16),
        ("u", 4) => Some(Datatype::UInt32),
        ("u", 8) => Some(Datatype::UInt64),
        ("f", 4) => Some(Datatype::Float32),
        ("f", 8) => Some(Datatype::Float64),
        _ => None,
    })
}

/// `numeric_datatype`, or a `SchemaError` from `err` naming the dtype.
fn datatype_of(dt: &Bound<'_, PyAny>, err: impl FnOnce(String) -> PyErr) -> PyResult<Datatype> {
    numeric_datatype(dt)?.ok_or_else(|| {
        err(format!("numpy dtype {} has no Tessera datatype", dt.str().map(|s| s.to_string()).unwrap_or_default()))
    })
}

/// The numpy dtype of one value of an engine datatype (little-endian; UTF-8 text as uint8).
fn numpy_dtype<'py>(py: Python<'py>, t: Datatype) -> PyResult<Bound<'py, PyAny>> {
    if let Some(unit) = t.time_unit() {
        return numpy(py)?.getattr("dtype")?.call1((format!("<M8[{}]", unit.code()),));
    }
    let code = match t {
        Datatype::Bool => "|b1",
        Datatype::Int8 => "<i1",
        Datatype::Int16 => "<i2",
        Datatype::Int32 => "<i4",
        Datatype::Int64 => "<i8",
        Datatype::UInt16 => "<u2",
        Datatype::UInt32 => "<u4",
        Datatype::UInt64 => "<u8",
        Datatype::Float32 => "<f4",
        Datatype::Float64 => "<f8",
        _ => "<u1",
    };
    numpy(py)?.getattr("dtype")?.call1((code,))
}

/// A JSON value as a Python object (objects become dicts, arrays lists).
fn json_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any()
            } else {
                n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any()
            }
        }
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            PyList::new(py, a.iter().map(|x| json_to_py(py, x)).collect::<PyResult<Vec<_>>>()?)?.into_any()
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// A Python object (dicts, lists, numbers, text) as JSON, through Python's `json` module.
fn py_to_json(x: &Bound<'_, PyAny>) -> PyResult<Value> {
    let text: String = x.py().import("json")?.call_method1("dumps", (x,))?.extract()?;
    serde_json::from_str(&text).map_err(|e| schema_err(format!("{}: {e}", repr(x).unwrap_or_default())))
}

/// An engine value serialized to JSON and handed to Python as dicts and lists.
fn to_py_json<'py, T: serde::Serialize>(py: Python<'py>, x: &T) -> PyResult<Bound<'py, PyAny>> {
    let v = serde_json::to_value(x).map_err(|e| schema_err(e.to_string()))?;
    json_to_py(py, &v)
}

fn hash_of(x: &impl std::fmt::Debug) -> u64 {
    let mut h = DefaultHasher::new();
    format!("{x:?}").hash(&mut h);
    h.finish()
}

// ---------------------------------------------------------------------------------------------
// Filters

/// Base class of the filters: each subclass wraps one engine `Filter`.
#[pyclass(module = "tessera", name = "Filter", subclass, frozen)]
pub(crate) struct PyFilter {
    pub(crate) inner: Filter,
}

#[pymethods]
impl PyFilter {
    /// The filter's name in the engine's JSON form (the class's `name`).
    #[classattr]
    fn name() -> &'static str {
        ""
    }

    /// The engine's JSON form, e.g. `{"name": "zstd", "level": 3}`.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_json(py, &self.inner)
    }

    /// The filter of an engine JSON object such as `{"name": "gzip", "level": 6}`.
    #[staticmethod]
    fn from_json<'py>(py: Python<'py>, d: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyFilter>> {
        let v = py_to_json(d)?;
        let f: Filter = serde_json::from_value(v)
            .map_err(|e| schema_err(format!("filter {}: {e}", repr(d).unwrap_or_default())))?;
        new_filter(py, f)
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyFilter>().is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __hash__(&self) -> u64 {
        hash_of(&self.inner)
    }

    fn __repr__(&self) -> String {
        filter_repr(&self.inner)
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let args = match slf.get().inner {
            Filter::Gzip { level } => PyTuple::new(py, [level.into_pyobject(py)?.into_any()])?,
            Filter::Zstd { level } => PyTuple::new(py, [level.into_pyobject(py)?.into_any()])?,
            _ => PyTuple::empty(py),
        };
        Ok((slf.get_type().into_any(), args))
    }
}

fn filter_repr(f: &Filter) -> String {
    let class = filter_class_name(f);
    match f {
        Filter::Gzip { level } => format!("{class}(level={level})"),
        Filter::Zstd { level } => format!("{class}(level={level})"),
        _ => format!("{class}()"),
    }
}

fn filter_class_name(f: &Filter) -> &'static str {
    match f {
        Filter::Gzip { .. } => "Gzip",
        Filter::Zstd { .. } => "Zstd",
        Filter::Lz4 => "Lz4",
        Filter::Rle => "Rle",
        Filter::Delta => "Delta",
        _ => "ByteShuffle",
    }
}

/// The Python object of an engine filter (an instance of its subclass).
fn new_filter(py: Python<'_>, f: Filter) -> PyResult<Bound<'_, PyFilter>> {
    let base = PyClassInitializer::from(PyFilter { inner: f });
    let obj = match f {
        Filter::Gzip { .. } => Bound::new(py, base.add_subclass(Gzip))?.into_any(),
        Filter::Zstd { .. } => Bound::new(py, base.add_subclass(Zstd))?.into_any(),
        Filter::Lz4 => Bound::new(py, base.add_subclass(Lz4))?.into_any(),
        Filter::Rle => Bound::new(py, base.add_subclass(Rle))?.into_any(),
        Filter::Delta => Bound::new(py, base.add_subclass(Delta))?.into_any(),
        _ => Bound::new(py, base.add_subclass(ByteShuffle))?.into_any(),
    };
    Ok(obj.cast_into::<PyFilter>()?)
}

/// A filter with a level: the engine checks the level's range (`SchemaError`).
fn leveled<T: TryFrom<i128>>(
    name: &'static str,
    level: &Bound<'_, PyAny>,
    make: impl FnOnce(T) -> Filter,
) -> PyResult<PyFilter> {
    let bad = |detail: String| to_py(tessera::FilterError::InvalidConfig { filter: name, detail }.into());
    if !is_int(level)? {
        return Err(bad(format!("level {} is not an integer", repr(level)?)));
    }
    let level = level.call_method0("__index__")?;
    let level = level
        .extract::<i128>()
        .ok()
        .and_then(|l| T::try_from(l).ok())
        .ok_or_else(|| bad(format!("level {} is out of range", repr(&level).unwrap_or_default())))?;
    let inner = make(level);
    inner.validate().py()?;
    Ok(PyFilter { inner })
}

/// The level argument, or the filter's default.
fn level_or<'py>(py: Python<'py>, level: Option<&Bound<'py, PyAny>>, default: i32) -> PyResult<Bound<'py, PyAny>> {
    match level {
        Some(l) => Ok(l.clone()),
        None => Ok(default.into_pyobject(py)?.into_any()),
    }
}

/// Deflate (zlib stream), level 0..9 (default 6), by libdeflate: classic zlib's ratios or better
/// at 2-6x its speed, and inflation 3-10x faster. The stream is standard: any zlib inflates it.
#[pyclass(module = "tessera", extends = PyFilter, frozen)]
pub(crate) struct Gzip;

#[pymethods]
impl Gzip {
    #[new]
    #[pyo3(signature = (level = None))]
    fn new(py: Python<'_>, level: Option<&Bound<'_, PyAny>>) -> PyResult<PyClassInitializer<Self>> {
        Ok(PyClassInitializer::from(leveled("gzip", &level_or(py, level, 6)?, |level| Filter::Gzip { level })?)
            .add_subclass(Gzip))
    }
    #[classattr]
    fn name() -> &'static str {
        "gzip"
    }
    /// The compression level.
    #[getter]
    fn level(slf: PyRef<'_, Self>) -> i64 {
        match slf.as_super().inner {
            Filter::Gzip { level } => i64::from(level),
            _ => 0,
        }
    }
}

/// Zstandard, level -7..22.
#[pyclass(module = "tessera", extends = PyFilter, frozen)]
pub(crate) struct Zstd;

#[pymethods]
impl Zstd {
    #[new]
    #[pyo3(signature = (level = None))]
    fn new(py: Python<'_>, level: Option<&Bound<'_, PyAny>>) -> PyResult<PyClassInitializer<Self>> {
        Ok(PyClassInitializer::from(leveled("zstd", &level_or(py, level, 3)?, |level| Filter::Zstd { level })?)
            .add_subclass(Zstd))
    }
    #[classattr]
    fn name() -> &'static str {
        "zstd"
    }
    /// The compression level.
    #[getter]
    fn level(slf: PyRef<'_, Self>) -> i64 {
        match slf.as_super().inner {
            Filter::Zstd { level } => i64::from(level),
            _ => 0,
        }
    }
}

macro_rules! plain_filter {
    ($ty:ident, $variant:expr, $name:literal, $doc:literal) => {
        #[doc = $doc]
        #[pyclass(module = "tessera", extends = PyFilter, frozen)]
        pub(crate) struct $ty;

        #[pymethods]
        impl $ty {
            #[new]
            fn new() -> PyClassInitializer<Self> {
                PyClassInitializer::from(PyFilter { inner: $variant }).add_subclass($ty)
            }
            #[classattr]
            fn name() -> &'static str {
                $name
            }
        }
    };
}

plain_filter!(Lz4, Filter::Lz4, "lz4", "LZ4 block compression.");
plain_filter!(Rle, Filter::Rle, "rle", "Run-length encoding of equal consecutive values.");
plain_filter!(Delta, Filter::Delta, "delta", "Differences of consecutive values.");
plain_filter!(
    ByteShuffle,
    Filter::ByteShuffle,
    "byteshuffle",
    "Byte transposition (all first bytes, then all second bytes, ...)."
);

/// The engine pipeline of a sequence of Python filters; anything else raises `err`.
fn pipeline(filters: &Bound<'_, PyAny>, err: impl Fn(String) -> PyErr, hint: &str) -> PyResult<FilterPipeline> {
    let mut out = Vec::new();
    for f in filters.try_iter()? {
        let f = f?;
        match f.cast::<PyFilter>() {
            Ok(pf) => out.push(pf.get().inner),
            Err(_) => return Err(err(format!("{} is not a filter (use {hint})", repr(&f)?))),
        }
    }
    Ok(FilterPipeline::new(out))
}

fn filters_tuple<'py>(py: Python<'py>, p: &FilterPipeline) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(py, p.filters().iter().map(|f| new_filter(py, *f)).collect::<PyResult<Vec<_>>>()?)
}

fn filters_repr(p: &FilterPipeline) -> String {
    format!("[{}]", p.filters().iter().map(filter_repr).collect::<Vec<_>>().join(", "))
}

/// The coordinate filters the engine gives dimensions of sparse arrays created without
/// `filters` (the engine's `default_coord_filters()`: delta, byte shuffle, then zstd level 3).
#[pyfunction]
fn default_coord_filters(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    filters_tuple(py, &tessera::default_coord_filters())
}

// ---------------------------------------------------------------------------------------------
// Dimensions

/// One dimension (the engine's `Dimension`): a name, an inclusive `domain` (lo, hi), a
/// space-tile extent `tile` and a coordinate `dtype`.
#[pyclass(module = "tessera", name = "Dim", frozen)]
pub(crate) struct PyDim {
    pub(crate) inner: Dimension,
    /// Made without `filters`: a sparse schema gives it the engine's default coordinate filters.
    default_filters: bool,
}

/// An integer domain bound or tile extent: an int, or a float holding a whole number.
/// `what` is "" for a domain bound, "tile " for the extent.
fn int_bound(x: &Bound<'_, PyAny>, what: &str, dim: &str) -> PyResult<i128> {
    let not_int = |extra: &str| dim_err(dim, format!("{what}{} is not an integer{extra}", repr(x).unwrap_or_default()));
    if is_bool(x)? {
        return Err(not_int(""));
    }
    if is_int(x)? {
        return x
            .call_method0("__index__")?
            .extract::<i128>()
            .map_err(|_| dim_err(dim, format!("{} does not fit in 128 bits", repr(x).unwrap_or_default())));
    }
    if is_float(x)? {
        let f: f64 = x.extract()?;
        if f.fract() == 0.0 && f.is_finite() && f.abs() < 1.7e38 {
            #[allow(clippy::cast_possible_truncation)]
            return Ok(f as i128);
        }
    }
    Err(not_int(" (float coordinates need dtype float32 or float64)"))
}

/// A bound or tile extent of a dimension of type `datetime64[unit]` (`unit` given) as a count of
/// the unit: an int as it is, a `np.datetime64` (or text numpy reads as one) for a bound, a
/// `np.timedelta64` for a tile extent, converted by numpy to the unit (only exactly; NaT becomes
/// `i64::MIN`, which the engine refuses as a bound). Other dimensions: [`int_bound`].
fn time_or_int_bound(x: &Bound<'_, PyAny>, unit: Option<TimeUnit>, what: &str, dim: &str) -> PyResult<i128> {
    let Some(unit) = unit else { return int_bound(x, what, dim) };
    let np = numpy(x.py())?;
    // np.timedelta64 is a numpy integer: tell it from plain counts first.
    let numpy_time = x.is_instance(&np.getattr("timedelta64")?)? || x.is_instance(&np.getattr("datetime64")?)?;
    if !numpy_time && is_int(x)? {
        return int_bound(x, what, dim);
    }
    let kind = if what.is_empty() { "datetime64" } else { "timedelta64" };
    let bad = |why: String| {
        dim_err(dim, format!("{what}{} is not a {kind} of unit {}: {why}", repr(x).unwrap_or_default(), unit.code()))
    };
    let conv = np.getattr(kind)?.call1((x,)).map_err(|e| bad(e.value(x.py()).to_string()))?;
    let exact = conv.call_method1("astype", (format!("{kind}[{}]", unit.code()),))?;
    if !exact.call_method1("__eq__", (&conv,))?.is_truthy()? && !np.call_method1("isnat", (&conv,))?.is_truthy()? {
        return Err(bad("finer than the unit".into()));
    }
    Ok(i128::from(exact.call_method1("astype", ("int64",))?.call_method0("item")?.extract::<i64>()?))
}

fn float_bound(x: &Bound<'_, PyAny>, what: &str, dim: &str) -> PyResult<f64> {
    if is_bool(x)? || !(is_int(x)? || is_float(x)?) {
        return Err(dim_err(dim, format!("{what}{} is not a number", repr(x)?)));
    }
    x.call_method0("__float__")?.extract()
}

#[pymethods]
impl PyDim {
    #[new]
    #[pyo3(signature = (name, domain, tile = None, dtype = None, filters = None))]
    fn new(
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        domain: &Bound<'_, PyAny>,
        tile: Option<&Bound<'_, PyAny>>,
        dtype: Option<&Bound<'_, PyAny>>,
        filters: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let name = name_of(name, "dimension")?;
        let np_dtype = numpy(py)?.getattr("dtype")?;
        let dt = match dtype {
            Some(d) => np_dtype.call1((d,))?,
            None => np_dtype.call1(("int64",))?,
        };
        let datatype = datatype_of(&dt, |m| dim_err(&name, m))?;
        let bounds: Vec<Bound<'_, PyAny>> = domain.try_iter()?.collect::<PyResult<_>>()?;
        let [lo, hi] = bounds.as_slice() else {
            return Err(dim_err(&name, format!("domain {} is not a pair (lo, hi)", repr(domain)?)));
        };
        let mut inner = if datatype.is_integer() {
            let unit = datatype.time_unit();
            let (lo, hi) = (time_or_int_bound(lo, unit, "", &name)?, time_or_int_bound(hi, unit, "", &name)?);
            let tile = match tile {
                None => None,
                Some(t) => {
                    let t = time_or_int_bound(t, unit, "tile ", &name)?;
                    Some(u64::try_from(t).map_err(|_| dim_err(&name, format!("tile extent {t} must be at least 1")))?)
                }
            };
            let mut d = Dimension::new(name.clone(), datatype, (lo, hi), 1);
            d.tile = tile.map(Extent::Int);
            d
        } else {
            let tile = tile.map(|t| float_bound(t, "tile ", &name)).transpose()?;
            Dimension::float(name.clone(), datatype, (float_bound(lo, "", &name)?, float_bound(hi, "", &name)?), tile)
        };
        if let Some(f) = filters {
            inner.filters = pipeline(f, |m| dim_err(&name, m), "ts.Zstd(), ts.Delta(), ...")?;
        }
        Ok(Self { inner, default_filters: filters.is_none() })
    }

    /// The name.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// Inclusive (lo, hi): ints, floats for float dimensions, `np.datetime64` for datetime64
    /// dimensions.
    #[getter]
    fn domain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        if let Some(unit) = self.inner.datatype.time_unit() {
            let (lo, hi) = self.inner.int_domain();
            let dt64 = numpy(py)?.getattr("datetime64")?;
            let (lo, hi) = (dt64.call1((lo as i64, unit.code()))?, dt64.call1((hi as i64, unit.code()))?);
            return PyTuple::new(py, [lo, hi]);
        }
        if self.inner.is_float() {
            self.inner.float_domain().into_pyobject(py)
        } else {
            self.inner.int_domain().into_pyobject(py)
        }
    }

    /// The space-tile extent (None: one tile spanning the domain).
    #[getter]
    fn tile<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self.inner.tile {
            None => py.None().into_bound(py),
            Some(Extent::Int(t)) if !self.inner.is_float() => t.into_pyobject(py)?.into_any(),
            Some(_) => self.inner.float_tile().unwrap_or(0.0).into_pyobject(py)?.into_any(),
        })
    }

    /// The coordinate type.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_dtype(py, self.inner.datatype)
    }

    /// Whether coordinates are floats.
    #[getter]
    fn is_float(&self) -> bool {
        self.inner.is_float()
    }

    /// Inclusive (lo, hi) as the engine stores them: ints (datetime64: counts of the unit),
    /// floats for float dimensions.
    #[getter]
    fn int_domain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        if self.inner.is_float() {
            self.inner.float_domain().into_pyobject(py)
        } else {
            self.inner.int_domain().into_pyobject(py)
        }
    }

    /// Number of coordinates in an integer domain (TypeError for float dimensions).
    #[getter]
    fn size(&self) -> PyResult<u128> {
        if self.inner.is_float() {
            return Err(PyTypeError::new_err(format!(
                "dimension {} has float coordinates: its domain has no size",
                self.inner.name
            )));
        }
        let (lo, hi) = self.inner.int_domain();
        Ok(u128::try_from(hi - lo + 1).unwrap_or(0))
    }

    /// The coordinate filters (sparse fragments).
    #[getter]
    fn filters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        filters_tuple(py, &self.inner.filters)
    }

    /// The engine's JSON form.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_json(py, &self.inner)
    }

    /// A dimension from the engine's JSON form.
    #[staticmethod]
    fn from_json(d: &Bound<'_, PyAny>) -> PyResult<Self> {
        let inner: Dimension = serde_json::from_value(py_to_json(d)?)
            .map_err(|e| schema_err(format!("dimension {}: {e}", repr(d).unwrap_or_default())))?;
        Ok(Self { inner, default_filters: false })
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyDim>().is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let extra = if self.inner.filters.is_empty() {
            String::new()
        } else {
            format!(", filters={}", filters_repr(&self.inner.filters))
        };
        Ok(format!(
            "Dim({}, domain={}, tile={}, dtype='{}'{extra})",
            repr(PyString::new(py, &self.inner.name).as_any())?,
            repr(self.domain(py)?.as_any())?,
            repr(&self.tile(py)?)?,
            self.inner.datatype.name()
        ))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let d = slf.get();
        let filters = if d.default_filters { py.None().into_bound(py) } else { d.filters(py)?.into_any() };
        let args = PyTuple::new(
            py,
            [
                PyString::new(py, &d.inner.name).into_any(),
                d.domain(py)?.into_any(),
                d.tile(py)?,
                PyString::new(py, d.inner.datatype.name()).into_any(),
                filters,
            ],
        )?;
        Ok((slf.get_type().into_any(), args))
    }
}

// ---------------------------------------------------------------------------------------------
// Attributes

/// What a cell holds, derived from the engine's (datatype, cell_val_num) alone.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Num,
    Multi,
    Complex,
    Str,
    Bytes,
    FixedBytes,
    Ragged,
}

impl Kind {
    fn of(a: &Attribute) -> Kind {
        match (a.datatype, a.cell_val_num) {
            (Datatype::Utf8, CellValNum::Var) => Kind::Str,
            (Datatype::Utf8, _) => Kind::FixedBytes,
            (Datatype::UInt8, CellValNum::Var) => Kind::Bytes,
            (_, CellValNum::Var) => Kind::Ragged,
            (Datatype::Float32 | Datatype::Float64, CellValNum::Fixed(2)) => Kind::Complex,
            (_, CellValNum::Fixed(1)) => Kind::Num,
            _ => Kind::Multi,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Num => "num",
            Kind::Multi => "multi",
            Kind::Complex => "complex",
            Kind::Str => "str",
            Kind::Bytes => "bytes",
            Kind::FixedBytes => "sbytes",
            Kind::Ragged => "ragged",
        }
    }
}

/// One attribute (the engine's `Attribute`).
#[pyclass(module = "tessera", name = "Attr", frozen)]
pub(crate) struct PyAttr {
    pub(crate) inner: Attribute,
}

/// (datatype, cell_val_num, whether the dtype was complex) of a user's dtype description.
fn engine_form(name: &str, dtype: &Bound<'_, PyAny>, var: bool, cvn: u32) -> PyResult<(Datatype, CellValNum, bool)> {
    let py = dtype.py();
    let text = dtype.extract::<String>().ok();
    let is_type = |t: &Bound<'_, PyType>| dtype.is(t);
    if is_type(&py.get_type::<PyString>()) || matches!(text.as_deref(), Some("str" | "U" | "unicode" | "utf8")) {
        return Ok((Datatype::Utf8, CellValNum::Var, false));
    }
    if is_type(&py.get_type::<PyBytes>()) || matches!(text.as_deref(), Some("bytes" | "S" | "blob")) {
        return Ok((Datatype::UInt8, CellValNum::Var, false));
    }
    let dt = match numpy(py)?.getattr("dtype")?.call1((dtype,)) {
        Ok(dt) => dt,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            return Err(attr_err(name, format!("{} is not a dtype ({})", repr(dtype)?, e.value(py).str()?)));
        }
        Err(e) => return Err(e),
    };
    let kind: String = dt.getattr("kind")?.extract()?;
    let size: u32 = dt.getattr("itemsize")?.extract()?;
    let what = |m: String| attr_err(name, m);
    match kind.as_str() {
        "U" => return Ok((Datatype::Utf8, CellValNum::Var, false)),
        "S" if size > 0 => return Ok((Datatype::Utf8, CellValNum::Fixed(size), false)),
        "S" => return Ok((Datatype::UInt8, CellValNum::Var, false)),
        _ => {}
    }
    let sub = dt.getattr("subdtype")?;
    if !sub.is_none() {
        let (base, shape): (Bound<'_, PyAny>, Vec<u64>) = sub.extract()?;
        let n = shape.iter().try_fold(1u64, |a, &b| a.checked_mul(b));
        let base_kind: String = base.getattr("kind")?.extract()?;
        if var || cvn != 1 || base_kind == "c" {
            return Err(what(format!("subarray dtype {} cannot be combined with var or cell_val_num", dt.str()?)));
        }
        let n = n
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| what(format!("subarray dtype {} has too many values", repr(&dt).unwrap_or_default())))?;
        return Ok((datatype_of(&base, what)?, CellValNum::Fixed(n), false));
    }
    match kind.as_str() {
        "c" => {
            if var || cvn != 1 {
                return Err(what("complex cells cannot be variable-length or multi-valued".into()));
            }
            let t = match size {
                8 => Datatype::Float32,
                16 => Datatype::Float64,
                _ => return Err(what(format!("numpy dtype {} has no Tessera datatype", dt.str()?))),
            };
            Ok((t, CellValNum::Fixed(2), true))
        }
        _ => {
            let t = datatype_of(&dt, what)?;
            if var {
                if cvn != 1 {
                    return Err(attr_err(name, format!("var=True and cell_val_num={cvn} contradict each other")));
                }
                return Ok((t, CellValNum::Var, false));
            }
            Ok((t, CellValNum::Fixed(cvn), false))
        }
    }
}

/// A number as JSON: NaN and infinities as the strings the engine's fill values use.
fn json_number(x: &Bound<'_, PyAny>) -> PyResult<Value> {
    let x = if x.hasattr("item")? && !x.is_instance_of::<PyInt>() && !x.is_instance_of::<PyFloat>() {
        x.call_method0("item")?
    } else {
        x.clone()
    };
    if x.is_instance_of::<PyFloat>() {
        let f: f64 = x.extract()?;
        return Ok(if f.is_nan() {
            "nan".into()
        } else if f.is_infinite() {
            if f > 0.0 { "inf" } else { "-inf" }.into()
        } else {
            f.into()
        });
    }
    py_to_json(&x)
}

/// The fill value given by the user, as the engine's JSON values of one cell.
fn fill_to_json(a: &Attribute, fill: &Bound<'_, PyAny>) -> PyResult<Vec<Value>> {
    let py = fill.py();
    match Kind::of(a) {
        Kind::Str | Kind::Bytes | Kind::FixedBytes => {
            let b: Vec<u8> = if let Ok(s) = fill.cast::<PyString>() {
                s.call_method1("encode", ("utf-8",))?.extract()?
            } else {
                py.get_type::<PyBytes>().call1((fill,))?.extract()?
            };
            Ok(b.into_iter().map(Value::from).collect())
        }
        Kind::Complex => {
            let c = py.import("builtins")?.getattr("complex")?.call1((fill,))?;
            Ok(vec![json_number(&c.getattr("real")?)?, json_number(&c.getattr("imag")?)?])
        }
        _ if a.datatype.time_unit().is_some() => {
            let unit = a.datatype.time_unit().map_or("ns", TimeUnit::code);
            let np = numpy(py)?;
            let t = if is_int(fill)? { fill.clone() } else { np.call_method1("datetime64", (fill, unit))? };
            let t = np.call_method1("asarray", (t,))?.call_method1("astype", (format!("<M8[{unit}]"),))?;
            let vals = np.call_method1("ravel", (t.call_method1("astype", ("int64",))?,))?.call_method0("tolist")?;
            vals.try_iter()?.map(|v| json_number(&v?)).collect::<PyResult<Vec<_>>>()
        }
        k => {
            let np = numpy(py)?;
            let vals = np.call_method1("ravel", (np.call_method1("asarray", (fill,))?,))?.call_method0("tolist")?;
            let mut out = vals.try_iter()?.map(|v| json_number(&v?)).collect::<PyResult<Vec<_>>>()?;
            if let (Kind::Multi, CellValNum::Fixed(n), [v]) = (k, a.cell_val_num, out.as_slice()) {
                out = vec![v.clone(); n as usize];
            }
            Ok(out)
        }
    }
}

/// The fill value as Python shows it (text, bytes, complex, a number or a list of numbers).
fn fill_from_json<'py>(py: Python<'py>, a: &Attribute, values: &[Value]) -> PyResult<Bound<'py, PyAny>> {
    let float = |v: &Value| -> f64 {
        match v.as_str() {
            Some("nan" | "NaN") => f64::NAN,
            Some("inf" | "Infinity") => f64::INFINITY,
            Some("-inf" | "-Infinity") => f64::NEG_INFINITY,
            _ => v.as_f64().unwrap_or(f64::NAN),
        }
    };
    let py_num = |v: &Value| -> PyResult<Bound<'py, PyAny>> {
        if v.is_string() || v.is_f64() {
            Ok(float(v).into_pyobject(py)?.into_any())
        } else {
            json_to_py(py, v)
        }
    };
    let bytes =
        || values.iter().map(|v| v.as_u64().and_then(|b| u8::try_from(b).ok()).unwrap_or(0)).collect::<Vec<u8>>();
    if let (Some(unit), [v]) = (a.datatype.time_unit(), values) {
        let count =
            a.datatype.encode_json(v).map_or(tessera::NAT, |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
        return numpy(py)?.getattr("datetime64")?.call1((count, unit.code()));
    }
    Ok(match Kind::of(a) {
        Kind::Str => PyString::new(py, &String::from_utf8_lossy(&bytes())).into_any(),
        Kind::Bytes | Kind::FixedBytes => PyBytes::new(py, &bytes()).into_any(),
        Kind::Complex => {
            let (re, im) = (values.first().map_or(f64::NAN, float), values.get(1).map_or(f64::NAN, float));
            py.import("builtins")?.getattr("complex")?.call1((re, im))?
        }
        Kind::Num if values.len() == 1 => py_num(&values[0])?,
        _ => PyList::new(py, values.iter().map(py_num).collect::<PyResult<Vec<_>>>()?)?.into_any(),
    })
}

impl PyAttr {
    fn kind_of(&self) -> Kind {
        Kind::of(&self.inner)
    }

    fn base_dtype_of<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        numpy_dtype(py, self.inner.datatype)
    }

    fn dtype_of<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let np_dtype = numpy(py)?.getattr("dtype")?;
        match (self.kind_of(), self.inner.cell_val_num) {
            (Kind::Str, _) => np_dtype.call1((py.get_type::<PyString>(),)),
            (Kind::Bytes, _) => np_dtype.call1((py.get_type::<PyBytes>(),)),
            (Kind::FixedBytes, CellValNum::Fixed(n)) => np_dtype.call1((format!("S{n}"),)),
            (Kind::Complex, _) => {
                np_dtype.call1((if self.inner.datatype == Datatype::Float32 { "<c8" } else { "<c16" },))
            }
            (Kind::Multi, CellValNum::Fixed(n)) => np_dtype.call1(((self.base_dtype_of(py)?, (n,)),)),
            _ => self.base_dtype_of(py),
        }
    }
}

#[pymethods]
impl PyAttr {
    #[new]
    #[pyo3(signature = (name, dtype, filters = None, nullable = None, var = None, fill = None, cell_val_num = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        name: &Bound<'_, PyAny>,
        dtype: &Bound<'_, PyAny>,
        filters: Option<&Bound<'_, PyAny>>,
        nullable: Option<&Bound<'_, PyAny>>,
        var: Option<&Bound<'_, PyAny>>,
        fill: Option<&Bound<'_, PyAny>>,
        cell_val_num: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let name = name_of(name, "attribute")?;
        let filters = match filters {
            Some(f) => pipeline(f, |m| attr_err(&name, m), "ts.Zstd(), ts.Gzip(), ...")?,
            None => FilterPipeline::default(),
        };
        let truthy = |x: Option<&Bound<'_, PyAny>>| x.map_or(Ok(false), |x| x.is_truthy());
        let cvn: i64 = match cell_val_num {
            Some(n) => n.call_method0("__index__").or_else(|_| n.call_method0("__int__"))?.extract()?,
            None => 1,
        };
        let cvn =
            u32::try_from(cvn).map_err(|_| attr_err(&name, format!("cell_val_num {cvn} is not in [1, 2^32 - 1]")))?;
        let (datatype, cell_val_num, complex_given) = engine_form(&name, dtype, truthy(var)?, cvn)?;
        if cell_val_num == CellValNum::Fixed(2) && !datatype.is_integer() && !complex_given {
            return Err(attr_err(
                &name,
                "two float values per cell are how complex numbers are stored; use dtype complex64/complex128 \
                 (or another cell_val_num)",
            ));
        }
        let mut inner = Attribute::new(name, datatype);
        inner.cell_val_num = cell_val_num;
        inner.nullable = truthy(nullable)?;
        inner.filters = filters;
        if let Some(f) = fill.filter(|f| !f.is_none()) {
            let py = f.py();
            let values = fill_to_json(&inner, f).map_err(|e| {
                if e.is_instance_of::<crate::errors::TesseraError>(py) {
                    return e;
                }
                let why = e.value(py).str().map(|s| s.to_string()).unwrap_or_default();
                attr_err(&inner.name, format!("fill {} is not a valid fill value ({why})", repr(f).unwrap_or_default()))
            })?;
            inner.fill = Some(values);
        }
        Ok(Self { inner })
    }

    /// The name.
    #[getter]
    fn name(&self) -> &str {
        &self.inner.name
    }

    /// The filters of its tiles.
    #[getter]
    fn filters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        filters_tuple(py, &self.inner.filters)
    }

    /// Whether cells carry a validity flag.
    #[getter]
    fn nullable(&self) -> bool {
        self.inner.nullable
    }

    /// What a cell holds: "num", "multi", "complex", "str", "bytes", "sbytes" or "ragged".
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind_of().name()
    }

    /// Whether cells have a variable number of values.
    #[getter]
    fn var(&self) -> bool {
        self.inner.is_var()
    }

    /// Values per cell (an int, or "var").
    #[getter]
    fn cell_val_num<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self.inner.cell_val_num {
            CellValNum::Fixed(n) => n.into_pyobject(py)?.into_any(),
            CellValNum::Var => PyString::new(py, "var").into_any(),
        })
    }

    /// The engine's datatype name ("int32", "float64", "utf8", ...).
    #[getter]
    fn engine_type(&self) -> &'static str {
        self.inner.datatype.name()
    }

    /// The numpy dtype of one stored value (little-endian).
    #[getter]
    fn base_dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.base_dtype_of(py)
    }

    /// The numpy dtype of a cell as read: e.g. int32, complex64, `(3,)f4`, `<U0` for strings,
    /// `S` for bytes, and the value dtype of ragged cells.
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.dtype_of(py)
    }

    /// The numpy dtype whose items are exactly one fixed-size cell (for viewing buffers).
    #[getter]
    fn cell_dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.kind_of() {
            Kind::Num | Kind::Complex | Kind::FixedBytes => self.dtype_of(py),
            _ => self.base_dtype_of(py),
        }
    }

    /// The fill value as given (None for the datatype's default).
    #[getter]
    fn fill<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match &self.inner.fill {
            None => Ok(py.None().into_bound(py)),
            Some(v) => fill_from_json(py, &self.inner, v),
        }
    }

    /// The engine's JSON form.
    fn to_json<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py_json(py, &self.inner)
    }

    /// An attribute from the engine's JSON form.
    #[staticmethod]
    fn from_json(d: &Bound<'_, PyAny>) -> PyResult<Self> {
        let inner: Attribute = serde_json::from_value(py_to_json(d)?)
            .map_err(|e| schema_err(format!("attribute {}: {e}", repr(d).unwrap_or_default())))?;
        Ok(Self { inner })
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PyAttr>().is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let k = self.kind_of();
        let dt = match k {
            Kind::Str => "str".to_owned(),
            Kind::Bytes => "bytes".to_owned(),
            _ => self.dtype_of(py)?.str()?.to_string(),
        };
        let mut parts = vec![
            repr(PyString::new(py, &self.inner.name).as_any())?,
            format!("dtype={}", repr(PyString::new(py, &dt).as_any())?),
        ];
        if k == Kind::Ragged {
            parts.push("var=True".into());
        }
        if self.inner.nullable {
            parts.push("nullable=True".into());
        }
        if !self.inner.filters.is_empty() {
            parts.push(format!("filters={}", filters_repr(&self.inner.filters)));
        }
        if self.inner.fill.is_some() {
            parts.push(format!("fill={}", repr(&self.fill(py)?)?));
        }
        Ok(format!("Attr({})", parts.join(", ")))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let from_json = slf.get_type().getattr("from_json")?;
        Ok((from_json, PyTuple::new(py, [slf.get().to_json(py)?])?))
    }
}

// ---------------------------------------------------------------------------------------------
// Array schemas

/// Dimensions, attributes, orders and (sparse arrays) capacity and duplicates: the engine's
/// `ArraySchema`, validated by the engine when made.
#[pyclass(module = "tessera", name = "ArraySchema", frozen)]
pub(crate) struct PySchema {
    pub(crate) inner: ArraySchema,
    /// The dimensions and attributes as Python objects, made once (the array's indexing code
    /// reads them often).
    dims: Py<PyTuple>,
    attrs: Py<PyTuple>,
    /// The engine's JSON form.
    json: String,
}

fn parse_order(o: &Bound<'_, PyAny>) -> PyResult<CellOrder> {
    let s: Option<String> = o.extract().ok();
    let canonical = match s.as_deref() {
        Some("C") => "row-major",
        Some("F") => "col-major",
        Some(x) => x,
        None => "",
    };
    serde_json::from_value(Value::from(canonical)).map_err(|_| {
        schema_err(format!("order {} is not row-major, col-major, hilbert or z", repr(o).unwrap_or_default()))
    })
}

fn order_name(o: CellOrder) -> String {
    serde_json::to_value(o).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The sparse data-tile capacity argument: an integer (or a float holding a whole number) in
/// `[0, 2^64 - 1]`; the engine checks the range it accepts.
fn capacity_arg(x: &Bound<'_, PyAny>) -> PyResult<u64> {
    let err = crate::errors::SchemaError::new_err;
    let value = if is_float(x)? && !is_bool(x)? {
        let f: f64 = x.extract()?;
        if !f.is_finite() || f.fract() != 0.0 {
            return Err(err(format!("capacity is a whole number, not {}", repr(x)?)));
        }
        py_int(x.py(), f)?
    } else if is_int(x)? {
        x.call_method0("__index__")?
    } else {
        return Err(err(format!("capacity is an integer, not {} {}", x.get_type().name()?, repr(x)?)));
    };
    value.extract::<u64>().map_err(|_| {
        err(format!(
            "capacity must be in [0, {}], not {}",
            u64::MAX,
            value.str().map(|s| s.to_string()).unwrap_or_default()
        ))
    })
}

fn py_int(py: Python<'_>, f: f64) -> PyResult<Bound<'_, PyAny>> {
    py.get_type::<PyInt>().call1((f,))
}

impl PySchema {
    /// The Python object of a validated engine schema.
    pub(crate) fn from_engine(py: Python<'_>, inner: ArraySchema) -> PyResult<Self> {
        let dims = inner
            .dims
            .iter()
            .map(|d| Bound::new(py, PyDim { inner: d.clone(), default_filters: false }))
            .collect::<PyResult<Vec<_>>>()?;
        let attrs =
            inner.attrs.iter().map(|a| Bound::new(py, PyAttr { inner: a.clone() })).collect::<PyResult<Vec<_>>>()?;
        let json = inner.to_json();
        Ok(Self { dims: PyTuple::new(py, dims)?.unbind(), attrs: PyTuple::new(py, attrs)?.unbind(), json, inner })
    }
}

#[pymethods]
impl PySchema {
    #[new]
    #[pyo3(signature = (dims, attrs, sparse = None, cell_order = None, tile_order = None, capacity = None, allows_duplicates = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        dims: &Bound<'_, PyAny>,
        attrs: &Bound<'_, PyAny>,
        sparse: Option<&Bound<'_, PyAny>>,
        cell_order: Option<&Bound<'_, PyAny>>,
        tile_order: Option<&Bound<'_, PyAny>>,
        capacity: Option<&Bound<'_, PyAny>>,
        allows_duplicates: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let truthy = |x: Option<&Bound<'_, PyAny>>| x.map_or(Ok(false), |x| x.is_truthy());
        let sparse = truthy(sparse)?;
        let mut engine_dims = Vec::new();
        for d in dims.try_iter()? {
            let d = d?;
            let Ok(pd) = d.cast::<PyDim>() else {
                return Err(crate::errors::SchemaError::new_err(format!("{} is not a ts.Dim", repr(&d)?)));
            };
            let pd = pd.get();
            let mut dim = pd.inner.clone();
            if sparse && pd.default_filters {
                // The engine's builder gives sparse dimensions without filters its default ones;
                // `filters=[]` (not the default) stores coordinates unfiltered.
                dim.filters = tessera::default_coord_filters();
            }
            engine_dims.push(dim);
        }
        let mut engine_attrs = Vec::new();
        for a in attrs.try_iter()? {
            let a = a?;
            let Ok(pa) = a.cast::<PyAttr>() else {
                return Err(crate::errors::SchemaError::new_err(format!("{} is not a ts.Attr", repr(&a)?)));
            };
            engine_attrs.push(pa.get().inner.clone());
        }
        let order = |o: Option<&Bound<'_, PyAny>>| o.map_or(Ok(CellOrder::RowMajor), parse_order);
        let mut inner = ArraySchema {
            version: tessera::SCHEMA_VERSION,
            array_type: if sparse { ArrayType::Sparse } else { ArrayType::Dense },
            dims: engine_dims,
            attrs: engine_attrs,
            cell_order: order(cell_order)?,
            tile_order: order(tile_order)?,
            capacity: capacity.map_or(Ok(10_000), capacity_arg)?,
            allows_duplicates: truthy(allows_duplicates)?,
        };
        inner.version = inner.lowest_version();
        inner.validate().py()?;
        Self::from_engine(py, inner)
    }

    /// The engine's JSON form (as stored in the array's `__schema` folder).
    fn to_json(&self) -> &str {
        &self.json
    }

    /// A schema from its JSON form (validated by the engine).
    #[staticmethod]
    fn from_json(py: Python<'_>, text: &str) -> PyResult<Self> {
        Self::from_engine(py, ArraySchema::from_json(text).py()?)
    }

    /// Whether the array is sparse.
    #[getter]
    fn sparse(&self) -> bool {
        self.inner.is_sparse()
    }

    /// The cell order: "row-major", "col-major" or "hilbert".
    #[getter]
    fn cell_order(&self) -> String {
        order_name(self.inner.cell_order)
    }

    /// The tile order: "row-major" or "col-major".
    #[getter]
    fn tile_order(&self) -> String {
        order_name(self.inner.tile_order)
    }

    /// Cells per data tile of sparse fragments.
    #[getter]
    fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// Whether a sparse array may hold several cells with equal coordinates.
    #[getter]
    fn allows_duplicates(&self) -> bool {
        self.inner.allows_duplicates
    }

    /// The dimensions, slowest-varying first in row-major order.
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        self.dims.bind(py).clone()
    }

    /// The attributes.
    #[getter]
    fn attrs<'py>(&self, py: Python<'py>) -> Bound<'py, PyTuple> {
        self.attrs.bind(py).clone()
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.ndim()
    }

    /// Number of coordinates per dimension (TypeError for float dimensions).
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let sizes = self.dims.bind(py).iter().map(|d| d.getattr("size")).collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, sizes)
    }

    /// Inclusive (lo, hi) per dimension (floats for float dimensions).
    #[getter]
    fn domain<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let ds = self.dims.bind(py).iter().map(|d| d.getattr("domain")).collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, ds)
    }

    /// The dimensions' names.
    #[getter]
    fn dim_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.dims.iter().map(|d| d.name.as_str()))
    }

    /// The attributes' names.
    #[getter]
    fn attr_names<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.attrs.iter().map(|a| a.name.as_str()))
    }

    /// The attribute called `name` (KeyError if none).
    fn attr<'py>(&self, py: Python<'py>, name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let i = name.extract::<String>().ok().and_then(|n| self.inner.attr_index(&n));
        match i {
            Some(i) => self.attrs.bind(py).get_item(i),
            None => Err(PyKeyError::new_err(name.clone().unbind())),
        }
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other.cast::<PySchema>().is_ok_and(|o| o.get().json == self.json)
    }

    fn __hash__(&self) -> u64 {
        let mut h = DefaultHasher::new();
        self.json.hash(&mut h);
        h.finish()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut lines = vec!["ArraySchema(".to_owned(), "  dims=[".to_owned()];
        for d in self.dims.bind(py).iter() {
            lines.push(format!("    {},", repr(&d)?));
        }
        lines.push("  ],".into());
        lines.push("  attrs=[".into());
        for a in self.attrs.bind(py).iter() {
            lines.push(format!("    {},", repr(&a)?));
        }
        lines.push("  ],".into());
        let title = |b: bool| if b { "True" } else { "False" };
        lines.push(
            format!(
                "  sparse={}, cell_order={:?}, tile_order={:?},",
                title(self.inner.is_sparse()),
                self.cell_order(),
                self.tile_order()
            )
            .replace('"', "'"),
        );
        if self.inner.is_sparse() {
            lines.push(format!(
                "  capacity={}, allows_duplicates={},",
                self.inner.capacity,
                title(self.inner.allows_duplicates)
            ));
        }
        lines.push(")".into());
        Ok(lines.join("\n"))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyTuple>)> {
        let py = slf.py();
        let from_json = slf.get_type().getattr("from_json")?;
        Ok((from_json, PyTuple::new(py, [slf.get().json.as_str()])?))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyFilter>()?;
    m.add_class::<Gzip>()?;
    m.add_class::<Zstd>()?;
    m.add_class::<Lz4>()?;
    m.add_class::<Rle>()?;
    m.add_class::<Delta>()?;
    m.add_class::<ByteShuffle>()?;
    m.add_class::<PyDim>()?;
    m.add_class::<PyAttr>()?;
    m.add_class::<PySchema>()?;
    m.add_function(wrap_pyfunction!(default_coord_filters, m)?)?;
    Ok(())
}
