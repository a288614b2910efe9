//! Arrow record batches ⇄ the engine's columns: the one place where table data changes form.
//!
//! Sparse cells travel as Arrow arrays, one per dimension and attribute (read from and written
//! to CSV and Parquet files by `table`), and meet the engine here:
//! - [`to_engine`] turns one Arrow column into the little-endian bytes (plus offsets and
//!   validity) of a [`tessera::AttrInput`]/[`tessera::CoordInput`] for a [`ColumnSpec`] (the
//!   dimension or attribute it feeds). Numbers, booleans and strings are cast to the spec's Arrow
//!   type by `arrow-cast`, and what the cast does not check is checked here: no value lost
//!   (integers within the type's range, valid UTF-8, text that is a bool), integers into floats
//!   only when exact, float64 into float32 only within its range, strings of a fixed-length
//!   attribute of exactly its length, coordinates inside the domain, nulls only for nullable
//!   attributes. `datetime64[unit]` takes `Timestamp` of any unit, `Date32` and `Date64`,
//!   converted to the unit only when exact, or text (CSV) read by the engine's ISO 8601 parser.
//!   The first bad value is returned with its row.
//! - [`to_arrow`] turns an engine result column ([`AttrData`]) into an Arrow array of the
//!   matching type ([`arrow_type`]), moving its buffers (copied only when misaligned): `bool` as
//!   `Boolean`, `datetime64` as `Date32` (unit D) or `Timestamp` (ms, us, ns; s, m and h as
//!   milliseconds, exactly) with NaT as null, as pandas and pyarrow write NaT (and a null of a
//!   date or timestamp column is read back as NaT into a `datetime64` attribute that is not
//!   nullable); for CSV, as ISO text with NaT as `NaT`.
//! - [`Inference`] learns the type, nulls and range of a column for `tessera import`.
//!
//! Arrow buffers are in the host's byte order and the engine's are little-endian, so the CLI
//! builds only on little-endian targets.

use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int64Type, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType,
};
use arrow_array::{make_array, Array, ArrayRef, BooleanArray, Int64Array, PrimitiveArray, StringArray};
use arrow_buffer::{ArrowNativeType, BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow_cast::cast;
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_data::ArrayData;
use arrow_schema::{DataType, Field, TimeUnit as ArrowUnit};
use tessera::{
    display_datetime, parse_datetime, ArraySchema, AttrData, Attribute, CellValNum, Datatype, Dimension, TimeUnit, NAT,
};

#[cfg(target_endian = "big")]
compile_error!("tessera-cli moves Arrow (host-order) buffers as the engine's little-endian bytes");

/// What a column holds, as the CLI exchanges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A type stored as integers: an integer type, `bool` (0 or 1) or `datetime64` (a count of
    /// its unit).
    Int(Datatype),
    /// `float32` or `float64`.
    Float(Datatype),
    /// UTF-8 strings: of any length (`None`) or of exactly n bytes.
    Str(Option<u32>),
}

impl Kind {
    /// The schema type name, e.g. `int32` or `utf8 of 3 bytes`.
    fn describe(self) -> String {
        match self {
            Kind::Int(t) | Kind::Float(t) => t.name().to_string(),
            Kind::Str(None) => "utf8".into(),
            Kind::Str(Some(n)) => format!("utf8 of {n} bytes"),
        }
    }
}

/// A dimension or attribute, as a table column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ColumnSpec {
    /// The dimension's or attribute's name (the column's name).
    pub(crate) name: String,
    /// Its values.
    pub(crate) kind: Kind,
    /// Whether cells may be null (nullable attributes).
    pub(crate) nullable: bool,
    /// For dimensions: the domain (integer bounds, or float bounds for float dimensions).
    pub(crate) dim: Option<((i128, i128), (f64, f64))>,
}

impl ColumnSpec {
    /// The column of dimension `d`.
    fn of_dim(d: &Dimension) -> Self {
        // By the datatype, not the domain's JSON form: `[0, 10]` on a float dimension parses as
        // integers, and integer columns would store integer bits as float coordinates.
        let (kind, bounds) = if d.is_float() {
            (Kind::Float(d.datatype), ((0, 0), d.float_domain()))
        } else {
            (Kind::Int(d.datatype), (d.int_domain(), (0.0, 0.0)))
        };
        Self { name: d.name.clone(), kind, nullable: false, dim: Some(bounds) }
    }

    /// The column of attribute `a`; refuses attributes with several values per cell (other than
    /// fixed-length strings), which a column of one value per cell cannot hold.
    fn of_attr(a: &Attribute) -> Result<Self> {
        let kind = match (a.datatype, a.cell_val_num) {
            (Datatype::Utf8, CellValNum::Var) => Kind::Str(None),
            (Datatype::Utf8, CellValNum::Fixed(n)) => Kind::Str(Some(n)),
            (t, CellValNum::Fixed(1)) if t.is_integer() => Kind::Int(t),
            (t, CellValNum::Fixed(1)) => Kind::Float(t),
            (t, n) => {
                let n = if let CellValNum::Fixed(n) = n { n.to_string() } else { "a variable number of".into() };
                bail!(
                    "attribute {} holds {n} {t} values per cell; CSV and Parquet columns hold one value per cell (use \
                     the Python API)",
                    a.name
                )
            }
        };
        Ok(Self { name: a.name.clone(), kind, nullable: a.nullable, dim: None })
    }

    /// What the column feeds, for messages: "dimension x" or "attribute a".
    pub(crate) fn role(&self) -> String {
        format!("{} {}", if self.dim.is_some() { "dimension" } else { "attribute" }, self.name)
    }

    /// Bytes per cell, for progress estimates (16 for strings).
    pub(crate) fn size_estimate(&self) -> u64 {
        match self.kind {
            Kind::Int(t) | Kind::Float(t) => t.size() as u64,
            Kind::Str(_) => 16,
        }
    }
}

/// The columns of a schema's dimensions followed by those of `attrs` (indices into
/// `schema.attrs`); refuses an attribute a column cannot hold.
pub(crate) fn specs_of(schema: &ArraySchema, attrs: &[usize]) -> Result<Vec<ColumnSpec>> {
    let mut out: Vec<ColumnSpec> = schema.dims.iter().map(ColumnSpec::of_dim).collect();
    for &i in attrs {
        out.push(ColumnSpec::of_attr(&schema.attrs[i])?);
    }
    Ok(out)
}

/// The Arrow type of a column: the integer or float type itself, `Utf8` for strings, `Boolean`
/// for `bool`, `Date32` or `Timestamp` for `datetime64` (`Utf8` of ISO text when `text`: CSV).
pub(crate) fn arrow_type(spec: &ColumnSpec, text: bool) -> DataType {
    match spec.kind {
        Kind::Int(Datatype::Bool) => DataType::Boolean,
        Kind::Int(Datatype::Datetime64(_)) if text => DataType::Utf8,
        Kind::Int(Datatype::Datetime64(TimeUnit::Day)) => DataType::Date32,
        Kind::Int(Datatype::Datetime64(u)) => DataType::Timestamp(arrow_unit(u).0, None),
        Kind::Int(Datatype::Int8) => DataType::Int8,
        Kind::Int(Datatype::Int16) => DataType::Int16,
        Kind::Int(Datatype::Int32) => DataType::Int32,
        Kind::Int(Datatype::UInt8) => DataType::UInt8,
        Kind::Int(Datatype::UInt16) => DataType::UInt16,
        Kind::Int(Datatype::UInt32) => DataType::UInt32,
        Kind::Int(Datatype::UInt64) => DataType::UInt64,
        Kind::Int(_) => DataType::Int64,
        Kind::Float(Datatype::Float32) => DataType::Float32,
        Kind::Float(_) => DataType::Float64,
        Kind::Str(_) => DataType::Utf8,
    }
}

/// The Arrow unit a `datetime64` unit finer than a day is exported in, and how many of it make
/// one of `u`: seconds, minutes and hours as milliseconds, since Parquet has no coarser
/// timestamps (the `parquet` crate writes Arrow seconds as plain INT64; pyarrow coerces them to
/// milliseconds too).
fn arrow_unit(u: TimeUnit) -> (ArrowUnit, i64) {
    match u {
        TimeUnit::Micro => (ArrowUnit::Microsecond, 1),
        TimeUnit::Nano => (ArrowUnit::Nanosecond, 1),
        _ => (ArrowUnit::Millisecond, u.nanos() / 1_000_000),
    }
}

/// The field of a column in an exported file (`text`: CSV). A `datetime64` attribute's field is
/// nullable in Arrow form whatever the schema says: NaT is written as null.
pub(crate) fn field_of(spec: &ColumnSpec, text: bool) -> Field {
    let nat = !text && spec.dim.is_none() && matches!(spec.kind, Kind::Int(Datatype::Datetime64(_)));
    Field::new(&spec.name, arrow_type(spec, text), spec.nullable || nat)
}

/// The unit of a date or timestamp column's integers (`Date64` counts milliseconds).
fn time_unit_of(t: &DataType) -> Option<TimeUnit> {
    Some(match t {
        DataType::Date32 => TimeUnit::Day,
        DataType::Date64 | DataType::Timestamp(ArrowUnit::Millisecond, _) => TimeUnit::Milli,
        DataType::Timestamp(ArrowUnit::Second, _) => TimeUnit::Second,
        DataType::Timestamp(ArrowUnit::Microsecond, _) => TimeUnit::Micro,
        DataType::Timestamp(ArrowUnit::Nanosecond, _) => TimeUnit::Nano,
        _ => return None,
    })
}

/// The cells of one column in the engine's form.
#[derive(Debug, Default, Clone)]
pub(crate) struct ColumnBuf {
    /// Values, little-endian (all cells' bytes concatenated for strings).
    pub(crate) data: Vec<u8>,
    /// Variable-length strings: the start of each cell in `data`.
    pub(crate) offsets: Vec<u64>,
    /// Nullable attributes: 1 valid, 0 null.
    pub(crate) validity: Vec<u8>,
}

impl ColumnBuf {
    /// Empties the buffer, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.offsets.clear();
        self.validity.clear();
    }
}

/// The Arrow type `arrow-csv` parses a CSV column of `spec` as: the spec's own type, except
/// float32 as `Float64` (checked into range here) and `bool` and `datetime64` as text (cast
/// here: `arrow-csv` takes only true and false, and truncates times finer than the unit).
pub(crate) fn csv_type(spec: &ColumnSpec) -> DataType {
    match spec.kind {
        Kind::Float(_) => DataType::Float64,
        Kind::Int(Datatype::Bool | Datatype::Datetime64(_)) => DataType::Utf8,
        _ => arrow_type(spec, false),
    }
}

/// Whether columns of Arrow type `t` can be read: numbers, booleans, strings, dates, times and
/// durations (as their integers), and all-null columns.
pub(crate) fn readable(t: &DataType) -> bool {
    use DataType as D;
    t.is_integer() || t.is_floating() || t.is_temporal() || matches!(t, D::Boolean | D::Null) || is_text(t)
}

fn is_text(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary)
}

/// Checks that a column of Arrow type `t` (named `name`, of type `type_name` in the file) can
/// feed `spec`: no floats into integers, numbers into strings or strings into numbers; booleans
/// only into `bool`, `bool` only from booleans, `datetime64` only from dates and timestamps
/// (plain integers have no unit).
pub(crate) fn check_compatible(t: &DataType, name: &str, type_name: &str, spec: &ColumnSpec) -> Result<()> {
    use DataType as D;
    if !readable(t) {
        bail!(
            "column {name} has Parquet type {type_name}, which tessera cannot read (supported: BOOLEAN, INT32, INT64, \
             FLOAT, DOUBLE, BYTE_ARRAY strings, DATE, TIMESTAMP)"
        );
    }
    let time = matches!(t, D::Date32 | D::Date64 | D::Timestamp(..));
    let (ok, hint) = match spec.kind {
        Kind::Int(Datatype::Bool) => (*t == D::Boolean, " (bool takes BOOLEAN columns)"),
        Kind::Int(Datatype::Datetime64(_)) => (time, " (datetime64 takes TIMESTAMP and DATE columns)"),
        Kind::Int(_) => (t.is_integer() || t.is_temporal(), ""),
        Kind::Float(_) => (t.is_integer() || t.is_floating(), ""),
        Kind::Str(_) => (is_text(t), ""),
    };
    if !ok && *t != D::Null {
        let (role, kind) = (spec.role(), spec.kind.describe());
        bail!("column {name} has type {type_name}, which cannot hold {role} ({kind}){hint}");
    }
    Ok(())
}

/// A bad value: its row in the batch and what is wrong.
pub(crate) type RowError = (usize, String);

/// The first row `i` of `a` for which `bad(i)`.
fn first(a: &dyn Array, bad: impl Fn(usize) -> bool) -> Option<usize> {
    (0..a.len()).find(|&i| bad(i))
}

/// Value `i` of `a` for messages (text quoted).
fn value(a: &dyn Array, i: usize) -> String {
    let v = ArrayFormatter::try_new(a, &FormatOptions::default()).map(|f| f.value(i).to_string());
    let v = v.unwrap_or_else(|_| format!("the value of type {}", a.data_type()));
    if matches!(a.data_type(), DataType::Utf8 | DataType::LargeUtf8) {
        format!("{v:?}")
    } else {
        v
    }
}

/// `a` cast to type `t` (values the cast cannot carry become null).
fn cast_to(a: &dyn Array, t: &DataType) -> Result<ArrayRef, RowError> {
    cast(a, t).map_err(|e| (0, format!("cannot convert {} to {t}: {e}", a.data_type())))
}

/// Appends column `a` converted for `spec` to `buf` (see the module documentation).
///
/// # Errors
/// The first value that does not convert exactly.
pub(crate) fn to_engine(spec: &ColumnSpec, a: &dyn Array, buf: &mut ColumnBuf) -> Result<(), RowError> {
    let role = spec.role();
    let c = match spec.kind {
        Kind::Int(Datatype::Datetime64(u)) => counts(spec, a, u)?,
        _ => cast_exactly(spec, a)?,
    };
    if let Some(i) = (!spec.nullable).then(|| first(&c, |i| c.is_null(i))).flatten() {
        return Err((i, null_error(spec)));
    }
    match (spec.dim, spec.kind) {
        (Some((_, (lo, hi))), Kind::Float(_)) => {
            let f = cast_to(&c, &DataType::Float64)?;
            let f = f.as_primitive::<Float64Type>();
            if let Some(i) = first(f, |i| !f.value(i).is_finite()) {
                return Err((i, format!("{:?} is not a finite coordinate ({role})", f.value(i))));
            }
            if let Some(i) = first(f, |i| !(lo..=hi).contains(&f.value(i))) {
                return Err((i, format!("{:?} is outside the domain {lo:?}:{hi:?} of {role}", f.value(i))));
            }
        }
        (Some(((lo, hi), _)), Kind::Int(t)) => {
            let d = cast_to(&c, &DataType::Decimal128(38, 0))?;
            let d = d.as_primitive::<Decimal128Type>();
            if let Some(i) = first(d, |i| !(lo..=hi).contains(&d.value(i))) {
                let (v, lo, hi) = (show(t, d.value(i)), show(t, lo), show(t, hi));
                return Err((i, format!("{v} is outside the domain {lo}:{hi} of {role}")));
            }
        }
        _ => {}
    }
    let n = c.len();
    if let Some(s) = c.as_string_opt::<i32>() {
        if let Kind::Str(Some(w)) = spec.kind {
            for i in 0..n {
                match s.is_valid(i) {
                    true => buf.data.extend_from_slice(s.value(i).as_bytes()),
                    false => buf.data.resize(buf.data.len() + w as usize, 0),
                }
            }
        } else {
            let (o, base) = (s.value_offsets(), buf.data.len() as u64);
            let (start, end) = (o[0].as_usize(), o[n].as_usize());
            buf.offsets.extend(o[..n].iter().map(|x| base + (x.as_usize() - start) as u64));
            buf.data.extend_from_slice(&s.values()[start..end]);
        }
    } else if let Some(b) = c.as_boolean_opt() {
        buf.data.extend(b.values().iter().map(u8::from));
    } else {
        let (data, size) = (c.to_data(), c.data_type().primitive_width().unwrap_or(1));
        buf.data.extend_from_slice(&data.buffers()[0].as_slice()[data.offset() * size..][..n * size]);
    }
    if spec.nullable {
        buf.validity.extend((0..n).map(|i| u8::from(c.is_valid(i))));
    }
    Ok(())
}

/// What a null in a column of `spec` that is not nullable is.
fn null_error(spec: &ColumnSpec) -> String {
    let role = spec.role();
    match (spec.dim.is_some(), spec.kind) {
        (true, _) => format!("no value, but {role} needs a coordinate in every row"),
        (false, Kind::Int(Datatype::Datetime64(_))) => format!(
            "no value (null), but {role} is not nullable (in CSV, write NaT for not-a-time; a null of a Parquet date \
             or timestamp column is NaT)"
        ),
        (false, _) => format!("no value (null), but {role} is not nullable"),
    }
}

/// A CSV column `a` for `spec`, its empty fields (which CSV readers give as nulls) as empty
/// strings when `spec` is a string attribute that is not nullable: CSV cannot tell an empty
/// string from a missing value, and such an attribute has no missing values.
pub(crate) fn csv_empty_strings(spec: &ColumnSpec, a: &ArrayRef) -> ArrayRef {
    match (spec.kind, spec.nullable || spec.dim.is_some(), a.as_string_opt::<i32>()) {
        (Kind::Str(_), false, Some(s)) if s.null_count() > 0 => {
            Arc::new(s.iter().map(|v| Some(v.unwrap_or(""))).collect::<StringArray>())
        }
        _ => Arc::clone(a),
    }
}

/// The bool `v` is as CSV files write them: `true` or `false` (any case) or `1` or `0`, spaces
/// around allowed; `None` for anything else. Casting text to bool would also take `yes`, `on`,
/// `t`, even `tr`.
fn bool_of_text(v: &str) -> Option<bool> {
    match v.trim() {
        "1" => Some(true),
        "0" => Some(false),
        v if v.eq_ignore_ascii_case("true") => Some(true),
        v if v.eq_ignore_ascii_case("false") => Some(false),
        _ => None,
    }
}

/// Column `a` cast to the Arrow type of a number, bool or string spec, checked (see the module
/// documentation).
fn cast_exactly(spec: &ColumnSpec, a: &dyn Array) -> Result<ArrayRef, RowError> {
    let (role, kind, from) = (spec.role(), spec.kind.describe(), a.data_type());
    if let (Kind::Int(Datatype::Bool), Some(s)) = (spec.kind, a.as_string_opt::<i32>()) {
        let parse = |(i, v): (usize, Option<&str>)| {
            v.map(|v| {
                bool_of_text(v).ok_or_else(|| (i, format!("{v:?} is not a bool ({role} takes true, false, 1 or 0)")))
            })
            .transpose()
        };
        return Ok(Arc::new(s.iter().enumerate().map(parse).collect::<Result<BooleanArray, _>>()?));
    }
    let c = cast_to(a, &arrow_type(spec, false))?;
    if let Some(i) = first(a, |i| a.is_valid(i) && c.is_null(i)) {
        return Err((i, format!("{} is not a valid {kind} value ({role})", value(a, i))));
    }
    if from.is_integer() && c.data_type().is_floating() {
        // Exact when the float converts back to the same integer.
        let back = cast_to(&c, from)?;
        if a.to_data() != back.to_data() {
            if let Some(i) = first(a, |i| a.slice(i, 1).to_data() != back.slice(i, 1).to_data()) {
                return Err((i, format!("{} cannot be represented exactly as {kind} ({role})", value(a, i))));
            }
        }
    }
    if let (Some(x), Some(y)) = (a.as_primitive_opt::<Float64Type>(), c.as_primitive_opt::<Float32Type>()) {
        if let Some(i) = first(a, |i| x.value(i).is_finite() && y.value(i).is_infinite()) {
            return Err((i, format!("{:?} is out of range for float32 ({role})", x.value(i))));
        }
    }
    if let (Some(s), Kind::Str(Some(n))) = (c.as_string_opt::<i32>(), spec.kind) {
        if let Some(i) = first(s, |i| s.is_valid(i) && s.value(i).len() != n as usize) {
            let (v, len) = (s.value(i), s.value(i).len());
            return Err((i, format!("{v:?} has {len} bytes, but {role} holds strings of exactly {n} bytes")));
        }
    }
    Ok(c)
}

/// A column for `datetime64[to]` spec `spec` as its counts of `to`: text parsed by the engine,
/// dates and timestamps rescaled exactly, their nulls NaT in an attribute that is not nullable
/// (Parquet has no NaT, and pandas, pyarrow and `tessera read` write NaT as null).
fn counts(spec: &ColumnSpec, a: &dyn Array, to: TimeUnit) -> Result<ArrayRef, RowError> {
    let role = spec.role();
    if let Some(s) = a.as_string_opt::<i32>() {
        let parse = |(i, v): (usize, Option<&str>)| {
            v.map(|v| {
                parse_datetime(v.trim(), to).map_err(|e| (i, format!("{e} ({role} is datetime64[{}])", to.code())))
            })
            .transpose()
        };
        return Ok(Arc::new(s.iter().enumerate().map(parse).collect::<Result<Int64Array, _>>()?));
    }
    // An all-null (`Null`) column has no unit: nothing to rescale.
    let from = time_unit_of(a.data_type()).or((*a.data_type() == DataType::Null).then_some(to));
    let from = from.ok_or_else(|| (0, format!("{} is not a time", a.data_type())))?;
    let ints = cast_to(a, &DataType::Int64)?;
    let nat_for_null = !spec.nullable && spec.dim.is_none();
    let rescaled = |(i, v): (usize, Option<i64>)| match v {
        Some(v) => rescale(v.into(), from, to).map(|v| Some(v as i64)).map_err(|e| (i, format!("{e} ({role})"))),
        None => Ok(nat_for_null.then_some(NAT)),
    };
    Ok(Arc::new(ints.as_primitive::<Int64Type>().iter().enumerate().map(rescaled).collect::<Result<Int64Array, _>>()?))
}

/// `v` counts of `from` as a count of `to`, exactly (not NaT).
fn rescale(v: i128, from: TimeUnit, to: TimeUnit) -> Result<i128, String> {
    // |v| < 2^64 and a unit is < 2^47 ns: no overflow.
    let (ns, step) = (v * i128::from(from.nanos()), i128::from(to.nanos()));
    let shown = || match i64::try_from(v) {
        Ok(x) if x != NAT => format!("{} ({} {})", display_datetime(x, from), v, from.code()),
        _ => format!("{v} {}", from.code()),
    };
    if ns % step != 0 {
        return Err(format!("{} is finer than datetime64[{}]", shown(), to.code()));
    }
    match i64::try_from(ns / step) {
        Ok(x) if x != NAT => Ok(x.into()),
        _ => Err(format!("{} is outside the range of datetime64[{}]", shown(), to.code())),
    }
}

/// A value of type `t` for messages: ISO text for `datetime64`.
fn show(t: Datatype, v: i128) -> String {
    match (t.time_unit(), i64::try_from(v)) {
        (Some(u), Ok(x)) => display_datetime(x, u).to_string(),
        _ => v.to_string(),
    }
}

/// Engine cells of a fixed-size type as an Arrow array of type `t` (the buffer moved, or copied
/// when its allocation is not aligned for `t`).
fn fixed(t: DataType, data: Vec<u8>, cells: usize, nulls: Option<NullBuffer>, what: &str) -> Result<ArrayRef> {
    let size = t.primitive_width().unwrap_or(1);
    if cells.checked_mul(size) != Some(data.len()) {
        bail!("{what}: the engine returned {} bytes for {cells} cells of {size} bytes", data.len());
    }
    let data = ArrayData::builder(t).len(cells).nulls(nulls).add_buffer(Buffer::from_vec(data));
    let data = data.align_buffers(true).build();
    Ok(make_array(data.map_err(|e| anyhow!("{what}: {e}"))?))
}

/// Engine result column `col` of `cells` cells as an Arrow array of [`arrow_type`]`(spec, text)`.
///
/// # Errors
/// Buffers that do not match the cell count (corrupt results), string columns of more than
/// 2 GiB in one batch, or times outside the range of the Arrow type.
pub(crate) fn to_arrow(spec: &ColumnSpec, col: AttrData, cells: usize, text: bool) -> Result<ArrayRef> {
    let what = format!("column {}", spec.name);
    let nulls = match &col.validity {
        Some(v) if v.len() != cells => bail!("{what}: {} validity bytes for {cells} cells", v.len()),
        Some(v) => Some(NullBuffer::new(BooleanBuffer::collect_bool(cells, |i| v[i] != 0))),
        None => None,
    };
    let data = col.data;
    match spec.kind {
        Kind::Int(Datatype::Bool) => {
            if data.len() != cells {
                bail!("{what}: the engine returned {} bytes for {cells} bool cells", data.len());
            }
            Ok(Arc::new(BooleanArray::new(BooleanBuffer::collect_bool(cells, |i| data[i] != 0), nulls)))
        }
        Kind::Int(Datatype::Datetime64(u)) => {
            let v = fixed(DataType::Int64, data, cells, None, &what)?.as_primitive::<Int64Type>().values().clone();
            times(u, v, nulls, text, &what)
        }
        Kind::Int(_) | Kind::Float(_) => fixed(arrow_type(spec, false), data, cells, nulls, &what),
        Kind::Str(n) => {
            let len = data.len() as u64;
            let starts: Box<dyn Iterator<Item = u64>> = match (n, &col.offsets) {
                (None, Some(o)) if o.len() == cells => Box::new(o.iter().copied().chain([len])),
                (Some(n), None) if (cells as u64).checked_mul(n.into()) == Some(len) => {
                    Box::new((0..=cells as u64).map(move |i| i * u64::from(n)))
                }
                _ => bail!("{what}: the engine's string buffers do not match {cells} cells"),
            };
            let too_big = |_| anyhow!("{what}: more than 2 GiB of strings in one batch");
            let offsets: Vec<i32> = starts.map(|x| i32::try_from(x).map_err(too_big)).collect::<Result<_>>()?;
            if offsets.windows(2).any(|w| w[0] > w[1]) {
                bail!("{what}: the engine returned decreasing string offsets");
            }
            let offsets = OffsetBuffer::new(ScalarBuffer::from(offsets));
            let array = StringArray::try_new(offsets, Buffer::from_vec(data), nulls)
                .map_err(|e| anyhow!("{what}: the engine returned invalid strings: {e}"))?;
            Ok(Arc::new(array))
        }
    }
}

/// A `datetime64[u]` column as ISO text (`text`: NaT as `NaT`) or as an Arrow `Date32` (unit D)
/// or `Timestamp` (of [`arrow_unit`]), NaT as null.
fn times(u: TimeUnit, v: ScalarBuffer<i64>, nulls: Option<NullBuffer>, text: bool, what: &str) -> Result<ArrayRef> {
    use std::fmt::Write as _;
    if text {
        let mut b = StringBuilder::with_capacity(v.len(), v.len() * 24);
        for (i, &x) in v.iter().enumerate() {
            if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                b.append_null();
            } else {
                write!(b, "{}", display_datetime(x, u))?;
                b.append_value("");
            }
        }
        return Ok(Arc::new(b.finish()));
    }
    let nulls = if v.contains(&NAT) {
        NullBuffer::union(nulls.as_ref(), Some(&BooleanBuffer::collect_bool(v.len(), |i| v[i] != NAT).into()))
    } else {
        nulls
    };
    let valid = |i: usize| nulls.as_ref().is_none_or(|n| n.is_valid(i));
    let too_far = |x: i64, to: &str| anyhow!("{what}: {} is outside the range of Arrow's {to}", display_datetime(x, u));
    if u == TimeUnit::Day {
        let day = |i: usize| if valid(i) { i32::try_from(v[i]).map_err(|_| too_far(v[i], "date32")) } else { Ok(0) };
        return Ok(Arc::new(PrimitiveArray::<Date32Type>::new((0..v.len()).map(day).collect::<Result<_>>()?, nulls)));
    }
    let (unit, factor) = arrow_unit(u);
    let v = if factor == 1 {
        v
    } else {
        let scale = |i: usize| match valid(i) {
            true => v[i].checked_mul(factor).ok_or_else(|| too_far(v[i], "timestamp[ms]")),
            false => Ok(0),
        };
        (0..v.len()).map(scale).collect::<Result<_>>()?
    };
    Ok(match unit {
        ArrowUnit::Microsecond => Arc::new(PrimitiveArray::<TimestampMicrosecondType>::new(v, nulls)),
        ArrowUnit::Nanosecond => Arc::new(PrimitiveArray::<TimestampNanosecondType>::new(v, nulls)),
        _ => Arc::new(PrimitiveArray::<TimestampMillisecondType>::new(v, nulls)),
    })
}

/// What `tessera import` learns about a column by reading it all.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Inference {
    /// The column's Arrow type.
    pub(crate) arrow: Option<DataType>,
    /// Rows seen, absent values (empty CSV fields, Parquet nulls) among them and the first one
    /// (counting rows from 1).
    pub(crate) rows: u64,
    pub(crate) nulls: u64,
    pub(crate) first_null: Option<u64>,
    /// Smallest and largest integer (of integer, date and timestamp columns), and number (NaN
    /// ignored), seen.
    pub(crate) int_range: Option<(i128, i128)>,
    pub(crate) float_range: Option<(f64, f64)>,
    /// Whether a NaN or infinity was seen.
    pub(crate) non_finite: bool,
}

/// The inferred type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inferred {
    /// int64 (or uint64 for values beyond int64), or the `bool` or `datetime64` of a Boolean,
    /// date or timestamp column.
    Int(Datatype),
    /// float64.
    Float,
    /// utf8, variable length.
    Str,
}

impl Inference {
    /// The column's type: Boolean → bool, dates and timestamps → datetime64 of their unit,
    /// integers → int64 (uint64 beyond int64), floats → float64, anything else → utf8.
    pub(crate) fn inferred(&self) -> Inferred {
        let t = self.arrow.as_ref().unwrap_or(&DataType::Null);
        match time_unit_of(t) {
            Some(u) => Inferred::Int(Datatype::Datetime64(u)),
            None if *t == DataType::Boolean => Inferred::Int(Datatype::Bool),
            None if t.is_integer() && self.int_range.is_some_and(|r| r.1 > i128::from(i64::MAX)) => {
                Inferred::Int(Datatype::UInt64)
            }
            None if t.is_integer() => Inferred::Int(Datatype::Int64),
            None if t.is_floating() => Inferred::Float,
            None => Inferred::Str,
        }
    }

    /// Takes in the next rows of the column.
    ///
    /// # Errors
    /// A column of a type `arrow-cast` cannot convert (internal errors).
    pub(crate) fn add(&mut self, a: &dyn Array) -> Result<()> {
        let nulls = a.logical_nulls();
        if let (None, Some(n)) = (self.first_null, &nulls) {
            self.first_null = n.iter().position(|valid| !valid).map(|i| self.rows + i as u64 + 1);
        }
        self.arrow = Some(a.data_type().clone());
        self.rows += a.len() as u64;
        self.nulls += nulls.map_or(0, |n| n.null_count() as u64);
        let err = |e: RowError| anyhow!("{}", e.1);
        let t = a.data_type();
        if t.is_integer() || time_unit_of(t).is_some() {
            // Integers as i128 (times through their int64 counts).
            let ints = if t.is_integer() { a.slice(0, a.len()) } else { cast_to(a, &DataType::Int64).map_err(err)? };
            let ints = cast_to(&ints, &DataType::Decimal128(38, 0)).map_err(err)?;
            for v in ints.as_primitive::<Decimal128Type>().iter().flatten() {
                self.int_range = Some(self.int_range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
            }
        }
        if t.is_integer() || t.is_floating() {
            for v in cast_to(a, &DataType::Float64).map_err(err)?.as_primitive::<Float64Type>().iter().flatten() {
                self.non_finite |= !v.is_finite();
                if v.is_finite() {
                    self.float_range = Some(self.float_range.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use arrow_array::types::Int16Type;
    use arrow_array::{
        BinaryArray, Date32Array, Float64Array, Int16Array, Int64Array, TimestampNanosecondArray, TimestampSecondArray,
        UInt32Array, UInt64Array,
    };

    use super::*;

    fn spec(kind: Kind, nullable: bool, dim: Option<((i128, i128), (f64, f64))>) -> ColumnSpec {
        ColumnSpec { name: "c".into(), kind, nullable, dim }
    }

    fn convert(s: &ColumnSpec, a: &dyn Array) -> Result<ColumnBuf, String> {
        let mut b = ColumnBuf::default();
        to_engine(s, a, &mut b).map_err(|(row, e)| format!("row {row}: {e}"))?;
        Ok(b)
    }

    #[test]
    fn values_convert_exactly() {
        let u8s = spec(Kind::Int(Datatype::UInt8), false, None);
        let e = convert(&u8s, &Int64Array::from(vec![3, -1])).unwrap_err();
        assert_eq!(e, "row 1: -1 is not a valid uint8 value (attribute c)");
        let u64s = spec(Kind::Int(Datatype::UInt64), false, None);
        assert_eq!(convert(&u64s, &UInt64Array::from(vec![u64::MAX])).unwrap().data, u64::MAX.to_le_bytes());
        let f64s = spec(Kind::Float(Datatype::Float64), true, None);
        let b = convert(&f64s, &Int64Array::from(vec![Some(3), None])).unwrap();
        assert_eq!((&b.data[..8], b.validity.as_slice(), b.data.len()), (&3.0f64.to_le_bytes()[..], &[1, 0][..], 16));
        let e = convert(&f64s, &Int64Array::from(vec![1, (1 << 53) + 1])).unwrap_err();
        assert!(e.starts_with("row 1: 9007199254740993 cannot be represented exactly as float64"), "{e}");
        let f32s = spec(Kind::Float(Datatype::Float32), false, None);
        assert_eq!(convert(&f32s, &Float64Array::from(vec![0.1])).unwrap().data, 0.1f32.to_le_bytes());
        let e = convert(&f32s, &Float64Array::from(vec![f64::INFINITY, 1e300])).unwrap_err();
        assert!(e.starts_with("row 1: ") && e.contains("is out of range for float32"), "{e}");
        let e = convert(&f32s, &Float64Array::from(vec![Some(1.0), None])).unwrap_err();
        assert_eq!(e, "row 1: no value (null), but attribute c is not nullable");
        let s = spec(Kind::Str(None), true, None);
        let b = convert(&s, &StringArray::from(vec![Some("ab"), None, Some("c")])).unwrap();
        assert_eq!(
            (b.data.as_slice(), b.offsets.as_slice(), b.validity.as_slice()),
            (&b"abc"[..], &[0, 2, 2][..], &[1, 0, 1][..])
        );
        let e = convert(&s, &BinaryArray::from(vec![&b"ok"[..], &[0xff]])).unwrap_err();
        assert!(e.starts_with("row 1: ") && e.contains("is not a valid utf8 value"), "{e}");
        let fixed = spec(Kind::Str(Some(2)), true, None);
        let b = convert(&fixed, &StringArray::from(vec![None, Some("ab")])).unwrap();
        assert_eq!(b.data, b"\0\0ab");
        let e = convert(&fixed, &StringArray::from(vec!["abc"])).unwrap_err();
        assert!(e.contains("\"abc\" has 3 bytes, but attribute c holds strings of exactly 2 bytes"), "{e}");
        let flag = spec(Kind::Int(Datatype::Bool), false, None);
        assert_eq!(convert(&flag, &StringArray::from(vec!["true", "0", "FALSE", "1"])).unwrap().data, [1, 0, 0, 1]);
        for bad in ["maybe", "yes", "on", "t", "tr", "fals", ""] {
            let e = convert(&flag, &StringArray::from(vec!["true", bad])).unwrap_err();
            assert!(e.starts_with("row 1: ") && e.contains(&format!("{bad:?} is not a bool")), "{bad}: {e}");
        }
        assert_eq!(convert(&flag, &StringArray::from(vec![" TRUE ", " 0"])).unwrap().data, [1, 0]);
        assert_eq!(convert(&flag, &BooleanArray::from(vec![true, false])).unwrap().data, [1, 0]);
    }

    #[test]
    fn coordinates_stay_inside_the_domain() {
        let dim = spec(Kind::Int(Datatype::Int16), false, Some(((-5, 5), (0.0, 0.0))));
        assert_eq!(convert(&dim, &Int16Array::from(vec![-5, 5])).unwrap().data, [0xfb, 0xff, 5, 0]);
        let e = convert(&dim, &Int16Array::from(vec![1, 6])).unwrap_err();
        assert_eq!(e, "row 1: 6 is outside the domain -5:5 of dimension c");
        let e = convert(&dim, &Int16Array::from(vec![Some(1), None])).unwrap_err();
        assert_eq!(e, "row 1: no value, but dimension c needs a coordinate in every row");
        let fdim = spec(Kind::Float(Datatype::Float64), false, Some(((0, 0), (-1.0, 1.0))));
        assert_eq!(convert(&fdim, &Int64Array::from(vec![1])).unwrap().data, 1f64.to_le_bytes());
        let e = convert(&fdim, &Float64Array::from(vec![0.5, 1.5])).unwrap_err();
        assert_eq!(e, "row 1: 1.5 is outside the domain -1.0:1.0 of dimension c");
        let e = convert(&fdim, &Float64Array::from(vec![f64::NAN])).unwrap_err();
        assert_eq!(e, "row 0: NaN is not a finite coordinate (dimension c)");
    }

    #[test]
    fn times_convert_exactly() {
        let ms = Kind::Int(Datatype::Datetime64(TimeUnit::Milli));
        let t = spec(ms, true, None);
        let text = StringArray::from(vec![Some("1970-01-01T00:00:01.5"), Some("NaT"), None]);
        let b = convert(&t, &text).unwrap();
        assert_eq!(
            (b.data[..8].to_vec(), &b.data[8..16], b.validity),
            (1500i64.to_le_bytes().to_vec(), &NAT.to_le_bytes()[..], vec![1, 1, 0])
        );
        let e = convert(&t, &StringArray::from(vec!["2020-01-01T00:00:00.0001"])).unwrap_err();
        assert!(e.contains("finer than the unit ms (attribute c is datetime64[ms])"), "{e}");
        let ns = TimestampNanosecondArray::from(vec![Some(2_000_000), None, Some(-1_000_000)]);
        let b = convert(&t, &ns).unwrap();
        assert_eq!((&b.data[..8], &b.data[16..]), (&2i64.to_le_bytes()[..], &(-1i64).to_le_bytes()[..]));
        let b = convert(&spec(ms, false, None), &ns).unwrap();
        assert_eq!(&b.data[8..16], NAT.to_le_bytes(), "a null is NaT in an attribute that is not nullable");
        let b = convert(&t, &arrow_array::NullArray::new(2)).unwrap();
        assert_eq!((b.data.len(), b.validity), (16, vec![0, 0]), "an all-null column");
        let e = convert(&t, &TimestampNanosecondArray::from(vec![0, 1_500_000])).unwrap_err();
        assert_eq!(e, "row 1: 1970-01-01T00:00:00.001500000 (1500000 ns) is finer than datetime64[ms] (attribute c)");
        let e = convert(&t, &TimestampSecondArray::from(vec![i64::MAX / 10])).unwrap_err();
        assert!(e.contains("is outside the range of datetime64[ms]"), "{e}");
        let dim = spec(ms, false, Some(((0, 86_400_000), (0.0, 0.0))));
        assert_eq!(convert(&dim, &Date32Array::from(vec![1])).unwrap().data, 86_400_000i64.to_le_bytes());
        let e = convert(&dim, &Date32Array::from(vec![2])).unwrap_err();
        assert!(e.contains("1970-01-03T00:00:00.000 is outside the domain 1970-01-01T00:00:00.000:1970-01-02"), "{e}");
        let e = convert(&dim, &Date32Array::from(vec![Some(1), None])).unwrap_err();
        assert!(e.starts_with("row 1: no value, but dimension c needs a coordinate"), "{e}");
        // Plain integers have no unit; booleans go only into bool.
        let e = check_compatible(&DataType::Int64, "x", "INT64", &t).unwrap_err().to_string();
        assert!(e.contains("TIMESTAMP and DATE"), "{e}");
        assert!(check_compatible(&DataType::Boolean, "x", "BOOLEAN", &t).is_err());
        let flag = spec(Kind::Int(Datatype::Bool), false, None);
        assert!(check_compatible(&DataType::Date32, "x", "INT32 (DATE)", &flag).is_err());
        assert!(check_compatible(&DataType::Float64, "x", "DOUBLE", &spec(Kind::Int(Datatype::Int64), false, None))
            .is_err());
    }

    #[test]
    fn engine_columns_become_arrow_arrays() {
        let col = |data: Vec<u8>, offsets, validity| AttrData { name: "c".into(), data, offsets, validity };
        let i16s = spec(Kind::Int(Datatype::Int16), true, None);
        let a = to_arrow(
            &i16s,
            col([-2i16, 7].iter().flat_map(|v| v.to_le_bytes()).collect(), None, Some(vec![1, 0])),
            2,
            false,
        )
        .unwrap();
        assert_eq!(a.as_primitive::<Int16Type>().iter().collect::<Vec<_>>(), [Some(-2), None]);
        let u32s = spec(Kind::Int(Datatype::UInt32), false, None);
        let a = to_arrow(&u32s, col(u32::MAX.to_le_bytes().to_vec(), None, None), 1, false).unwrap();
        assert_eq!(a.as_any().downcast_ref::<UInt32Array>().unwrap().value(0), u32::MAX);
        assert!(to_arrow(&u32s, col(vec![0; 3], None, None), 1, false).is_err(), "short data");
        let fixed = spec(Kind::Str(Some(2)), false, None);
        let a = to_arrow(&fixed, col(b"abcd".to_vec(), None, None), 2, false).unwrap();
        assert_eq!(a.as_string::<i32>().value(1), "cd");
        let var = spec(Kind::Str(None), true, None);
        let a = to_arrow(&var, col(b"abc".to_vec(), Some(vec![0, 1, 1]), Some(vec![1, 0, 1])), 3, false).unwrap();
        assert_eq!(a.as_string::<i32>().iter().collect::<Vec<_>>(), [Some("a"), None, Some("bc")]);
        assert!(to_arrow(&var, col(b"abc".to_vec(), Some(vec![0, 2, 1]), None), 3, false).is_err(), "decreasing");
        assert!(to_arrow(&var, col(vec![0xff], Some(vec![0]), None), 1, false).is_err(), "not UTF-8");
    }

    #[test]
    fn times_become_arrow_dates_timestamps_or_text() {
        let col = |v: &[i64], validity| AttrData {
            name: "c".into(),
            data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            offsets: None,
            validity,
        };
        let hours = spec(Kind::Int(Datatype::Datetime64(TimeUnit::Hour)), true, None);
        let a = to_arrow(&hours, col(&[1, NAT, 2], Some(vec![1, 1, 0])), 3, false).unwrap();
        assert_eq!(a.data_type(), &DataType::Timestamp(ArrowUnit::Millisecond, None));
        let v = a.as_primitive::<TimestampMillisecondType>();
        assert_eq!(v.iter().collect::<Vec<_>>(), [Some(3_600_000), None, None], "NaT and null are null");
        let a = to_arrow(&hours, col(&[1, NAT, 2], Some(vec![1, 1, 0])), 3, true).unwrap();
        assert_eq!(a.as_string::<i32>().iter().collect::<Vec<_>>(), [Some("1970-01-01T01"), Some("NaT"), None]);
        let e = to_arrow(&hours, col(&[i64::MAX / 1000], None), 1, false).unwrap_err().to_string();
        assert!(e.contains("outside the range of Arrow's timestamp[ms]"), "{e}");
        let days = spec(Kind::Int(Datatype::Datetime64(TimeUnit::Day)), false, None);
        let a = to_arrow(&days, col(&[-1, NAT], None), 2, false).unwrap();
        assert_eq!(a.as_primitive::<Date32Type>().iter().collect::<Vec<_>>(), [Some(-1), None]);
        assert!(to_arrow(&days, col(&[1 << 40], None), 1, false).is_err(), "beyond date32");
        let flag = spec(Kind::Int(Datatype::Bool), false, None);
        let a =
            to_arrow(&flag, AttrData { name: "c".into(), data: vec![1, 0], offsets: None, validity: None }, 2, false);
        assert_eq!(a.unwrap().as_boolean().iter().collect::<Vec<_>>(), [Some(true), Some(false)]);
    }

    #[test]
    fn inference() {
        let infer = |cols: &[&dyn Array]| {
            let mut inf = Inference::default();
            cols.iter().for_each(|a| inf.add(*a).unwrap());
            inf
        };
        let i = infer(&[&Int64Array::from(vec![Some(3), None]), &Int64Array::from(vec![-7])]);
        assert_eq!(
            (i.inferred(), i.nulls, i.first_null, i.int_range),
            (Inferred::Int(Datatype::Int64), 1, Some(2), Some((-7, 3)))
        );
        let i = infer(&[&Float64Array::from(vec![2.5, f64::NAN, 1e3])]);
        assert_eq!((i.inferred(), i.float_range, i.non_finite), (Inferred::Float, Some((2.5, 1000.0)), true));
        assert_eq!(infer(&[&UInt64Array::from(vec![u64::MAX])]).inferred(), Inferred::Int(Datatype::UInt64));
        assert_eq!(infer(&[&UInt32Array::from(vec![1])]).inferred(), Inferred::Int(Datatype::Int64));
        assert_eq!(infer(&[&arrow_array::NullArray::new(2)]).inferred(), Inferred::Str);
        let i = infer(&[&TimestampSecondArray::from(vec![60])]);
        assert_eq!(
            (i.inferred(), i.int_range),
            (Inferred::Int(Datatype::Datetime64(TimeUnit::Second)), Some((60, 60)))
        );
    }
}
