//! Arrow record batches ⇄ the engine's columns: the one place where table data changes form.
//!
//! Sparse cells travel as Arrow arrays, one per dimension and attribute (CSV files as nullable
//! `Utf8` columns of field text, Parquet files through the `parquet` crate's Arrow reader and
//! writer), and meet the engine here:
//! - [`to_engine`] turns one Arrow column into the little-endian bytes (plus offsets and
//!   validity) of a [`tessera::AttrInput`]/[`tessera::CoordInput`] for a [`ColumnSpec`] (the
//!   dimension or attribute it feeds). Every value is checked exactly: integers within the
//!   type's range, integers into float types only when exact, floats within float32, coordinates
//!   inside the domain, strings of a fixed-length attribute of exactly its length, nulls only for
//!   nullable attributes; text (CSV) is parsed (`bool`: `true`/`false`/`1`/`0`; `datetime64`:
//!   ISO 8601 by the engine's parser). `bool` takes Arrow `Boolean`; `datetime64[unit]` takes
//!   `Timestamp` of any unit, `Date32` and `Date64`, converted to the unit only when exact. An
//!   array of exactly an integer or float spec's type moves as one copy of its value buffer; other
//!   columns are read value by value ([`values`]: one [`Value`] per row, whatever the Arrow type)
//!   and each value is checked and appended. The first bad value is returned with its row.
//! - [`to_arrow`] turns an engine result column ([`AttrData`]) into an Arrow array of the
//!   matching type ([`arrow_type`]), moving its buffers (copied only when misaligned): `bool` as
//!   `Boolean`, `datetime64` as `Date32` (unit D) or `Timestamp` (ms, us, ns; s, m and h as
//!   milliseconds, exactly) with NaT as null, as pandas and pyarrow write NaT (and a null of a
//!   date or timestamp column is read back as NaT into a `datetime64` attribute that is not
//!   nullable); for CSV, as ISO text with NaT as `NaT`.
//! - [`Inference`] learns the type and range of a column for `tessera import`; the CSV writer
//!   formats [`values`] too.
//!
//! Arrow buffers are in the host's byte order and the engine's are little-endian, so the CLI
//! builds only on little-endian targets.

use std::fmt::Display;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{make_array, Array, ArrayRef, BooleanArray, PrimitiveArray, StringArray};
use arrow_buffer::{ArrowNativeType, BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
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

    /// "dimension x" or "attribute a" (formatted only when displayed: errors only).
    pub(crate) fn role(&self) -> Role<'_> {
        Role(self)
    }

    /// Bytes per cell, for progress estimates (16 for strings).
    pub(crate) fn size_estimate(&self) -> u64 {
        match self.kind {
            Kind::Int(t) | Kind::Float(t) => t.size() as u64,
            Kind::Str(_) => 16,
        }
    }
}

/// What a column feeds, for messages: "dimension x" or "attribute a".
pub(crate) struct Role<'a>(&'a ColumnSpec);

impl Display for Role<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", if self.0.dim.is_some() { "dimension" } else { "attribute" }, self.0.name)
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

/// How a file column can feed the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SrcKind {
    /// CSV text: parsed as whatever the target needs.
    Text,
    /// Integers (also times of day and durations, as their integers).
    Int,
    /// Dates and timestamps: points in time, or their integers for integer attributes.
    Time,
    /// Booleans.
    Bool,
    /// Floats.
    Float,
    /// Strings or byte strings.
    Bytes,
    /// A type tessera cannot read (decimals, nested types, ...).
    Unsupported,
}

/// What a column of Arrow type `t` holds (`text`: a CSV column, parsed).
pub(crate) fn src_kind(t: &DataType, text: bool) -> SrcKind {
    use DataType as D;
    match t {
        D::Utf8 if text => SrcKind::Text,
        D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => SrcKind::Int,
        D::Time32(_) | D::Time64(_) | D::Duration(_) => SrcKind::Int,
        D::Date32 | D::Date64 | D::Timestamp(..) => SrcKind::Time,
        D::Boolean => SrcKind::Bool,
        D::Float32 | D::Float64 => SrcKind::Float,
        D::Utf8 | D::LargeUtf8 | D::Binary | D::LargeBinary => SrcKind::Bytes,
        _ => SrcKind::Unsupported,
    }
}

/// Checks that a column of kind `src` (named `name`, of type `type_name` in the file) can feed
/// `spec`: no floats into integers, numbers into strings or strings into numbers; booleans only
/// into `bool`, `bool` only from booleans (or text), `datetime64` only from dates and timestamps
/// (or text: plain integers have no unit).
pub(crate) fn check_compatible(src: SrcKind, name: &str, type_name: &str, spec: &ColumnSpec) -> Result<()> {
    let ok = match (src, spec.kind) {
        (SrcKind::Text, _) | (SrcKind::Int | SrcKind::Time, Kind::Float(_)) => true,
        (SrcKind::Float, k) => matches!(k, Kind::Float(_)),
        (SrcKind::Bytes, k) => matches!(k, Kind::Str(_)),
        (SrcKind::Bool, k) => k == Kind::Int(Datatype::Bool),
        (SrcKind::Int, Kind::Int(t)) => !t.needs_v3(),
        (SrcKind::Time, Kind::Int(t)) => t != Datatype::Bool,
        _ => false,
    };
    if src == SrcKind::Unsupported {
        bail!(
            "column {name} has Parquet type {type_name}, which tessera cannot read (supported: BOOLEAN, INT32, INT64, \
             FLOAT, DOUBLE, BYTE_ARRAY strings, DATE, TIMESTAMP)"
        );
    }
    if !ok {
        let hint = match spec.kind {
            Kind::Int(Datatype::Bool) => " (bool takes BOOLEAN columns)",
            Kind::Int(Datatype::Datetime64(_)) => " (datetime64 takes TIMESTAMP and DATE columns)",
            _ => "",
        };
        let (role, kind) = (spec.role(), spec.kind.describe());
        bail!("column {name} has type {type_name}, which cannot hold {role} ({kind}){hint}");
    }
    Ok(())
}

/// A bad value: its row in the batch and what is wrong.
pub(crate) type RowError = (usize, String);

/// One value of a file column, as the conversions read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    /// Null (an absent value).
    Null,
    /// An integer; of a date, time, timestamp or duration column, a count of its unit.
    Int(i128),
    /// A float, with its float32 value when the column holds float32.
    Float(f64, Option<f32>),
    /// A boolean.
    Bool(bool),
    /// A string: CSV field text (parsed for numbers) or a Parquet string.
    Str(&'a str),
    /// A byte string (checked to be UTF-8 where a string is needed).
    Bytes(&'a [u8]),
}

/// Reads the values of a column by row.
pub(crate) type Values<'a> = Box<dyn Fn(usize) -> Value<'a> + 'a>;

/// The values of column `a` (of a type [`src_kind`] supports), row by row.
///
/// # Errors
/// An Arrow type tessera cannot read.
pub(crate) fn values(a: &dyn Array) -> Result<Values<'_>, String> {
    use DataType as D;
    // A reader of the rows of a typed array, and of an integer array.
    macro_rules! rows {
        ($typed:expr, $v:ident => $e:expr) => {{
            let typed = $typed;
            Box::new(move |i| {
                if typed.is_null(i) {
                    Value::Null
                } else {
                    let $v = typed.value(i);
                    $e
                }
            })
        }};
    }
    macro_rules! ints {
        ($a:expr, $t:ty) => {
            rows!($a.as_primitive::<$t>().clone(), v => Value::Int(v.into()))
        };
    }
    let values: Values<'_> = match a.data_type() {
        D::Int8 => ints!(a, Int8Type),
        D::Int16 => ints!(a, Int16Type),
        D::Int32 => ints!(a, Int32Type),
        D::Int64 => ints!(a, Int64Type),
        D::UInt8 => ints!(a, UInt8Type),
        D::UInt16 => ints!(a, UInt16Type),
        D::UInt32 => ints!(a, UInt32Type),
        D::UInt64 => ints!(a, UInt64Type),
        D::Date32 | D::Time32(_) => ints!(reinterpret(a, D::Int32)?, Int32Type),
        D::Date64 | D::Time64(_) | D::Timestamp(..) | D::Duration(_) => ints!(reinterpret(a, D::Int64)?, Int64Type),
        D::Float32 => rows!(a.as_primitive::<Float32Type>().clone(), v => Value::Float(v.into(), Some(v))),
        D::Float64 => rows!(a.as_primitive::<Float64Type>().clone(), v => Value::Float(v, None)),
        D::Boolean => rows!(a.as_boolean().clone(), v => Value::Bool(v)),
        D::Utf8 => rows!(a.as_string::<i32>(), v => Value::Str(v)),
        D::LargeUtf8 => rows!(a.as_string::<i64>(), v => Value::Str(v)),
        D::Binary => rows!(a.as_binary::<i32>(), v => Value::Bytes(v)),
        D::LargeBinary => rows!(a.as_binary::<i64>(), v => Value::Bytes(v)),
        t => return Err(format!("internal error: Arrow type {t} reached the conversion")),
    };
    Ok(values)
}

/// Appends column `a` converted for `spec` to `buf` (see the module documentation).
///
/// # Errors
/// The first value that does not convert exactly.
pub(crate) fn to_engine(spec: &ColumnSpec, a: &dyn Array, buf: &mut ColumnBuf) -> Result<(), RowError> {
    let t = a.data_type();
    let plain = match spec.kind {
        Kind::Int(d) => d.time_unit().is_none() && d != Datatype::Bool,
        Kind::Float(_) => true,
        Kind::Str(_) => false,
    };
    let values = values(a).map_err(|e| (0, e))?;
    let inside = |i| match (values(i), spec.dim) {
        (Value::Int(v), Some(((lo, hi), _))) => (lo..=hi).contains(&v),
        (Value::Float(x, _), Some((_, (lo, hi)))) => x.is_finite() && lo <= x && x <= hi,
        _ => false,
    };
    // A column of exactly the spec's type (or strings for variable-length ones) moves as one
    // copy (null slots hold placeholders) once a dimension's coordinates are known to be inside
    // the domain; the value-by-value path below reports the first bad value.
    let strings = a.as_string_opt::<i32>().filter(|_| spec.kind == Kind::Str(None));
    let same_type = plain && arrow_type(spec, false) == *t && (spec.dim.is_none() || (0..a.len()).all(inside));
    if (spec.nullable || a.null_count() == 0) && (strings.is_some() || same_type) {
        if let Some(s) = strings {
            let (o, base) = (s.value_offsets(), buf.data.len() as u64);
            let (first, last) = (o[0].as_usize(), o[s.len()].as_usize());
            buf.offsets.extend(o[..s.len()].iter().map(|x| base + (x.as_usize() - first) as u64));
            buf.data.extend_from_slice(&s.values()[first..last]);
        } else {
            let (data, size) = (a.to_data(), t.primitive_width().unwrap_or(1));
            buf.data.extend_from_slice(&data.buffers()[0].as_slice()[data.offset() * size..][..data.len() * size]);
        }
        if spec.nullable {
            buf.validity.extend((0..a.len()).map(|i| u8::from(a.is_valid(i))));
        }
        return Ok(());
    }
    // A null of a date or timestamp column is NaT in a datetime64 attribute that is not nullable:
    // Parquet has no NaT, and pandas, pyarrow and `tessera read` write NaT as null.
    let nat_for_null = !spec.nullable
        && spec.dim.is_none()
        && matches!(spec.kind, Kind::Int(Datatype::Datetime64(_)))
        && matches!(t, DataType::Timestamp(..) | DataType::Date32 | DataType::Date64);
    let mut p = Pusher { spec, buf, time: time_unit_of(t), nat_for_null };
    (0..a.len()).try_for_each(|i| p.push(values(i)).map_err(|e| (i, e)))
}

/// Appends converted values of one spec to one buffer.
struct Pusher<'a> {
    spec: &'a ColumnSpec,
    buf: &'a mut ColumnBuf,
    /// The unit of a date or timestamp column's integers.
    time: Option<TimeUnit>,
    /// Whether a null is NaT (see [`to_engine`]).
    nat_for_null: bool,
}

impl Pusher<'_> {
    /// Bytes per fixed-size cell (0 for variable-length strings).
    fn size(&self) -> usize {
        match self.spec.kind {
            Kind::Int(t) | Kind::Float(t) => t.size(),
            Kind::Str(n) => n.unwrap_or(0) as usize,
        }
    }

    /// Appends one value.
    fn push(&mut self, v: Value<'_>) -> Result<(), String> {
        let role = self.spec.role();
        if self.spec.kind == Kind::Str(None) {
            self.buf.offsets.push(self.buf.data.len() as u64);
        }
        // Blank text is absent for numbers; a quoted "" is an empty string.
        let blank = matches!(v, Value::Str(s) if s.trim().is_empty() && !matches!(self.spec.kind, Kind::Str(_)));
        if v == Value::Null || blank {
            if self.nat_for_null {
                self.buf.data.extend_from_slice(&NAT.to_le_bytes());
                return Ok(());
            }
            self.null()?;
            self.buf.validity.push(0);
            return Ok(());
        }
        if self.spec.nullable {
            self.buf.validity.push(1);
        }
        match (v, self.spec.kind) {
            (Value::Int(x), _) => self.int(x, &x),
            (Value::Float(x, Some(f)), _) => self.float(x, Some(f), &f),
            (Value::Float(x, None), _) => self.float(x, None, &x),
            (Value::Bool(b), Kind::Int(Datatype::Bool)) => self.int(b.into(), &b),
            (Value::Bool(b), _) => Err(format!("{b} is a boolean; {role} is {}", self.spec.kind.describe())),
            (Value::Str(s), Kind::Str(_)) => self.string(s),
            (Value::Str(s), _) => self.text(s.trim()),
            (Value::Bytes(b), _) => match std::str::from_utf8(b) {
                Ok(s) if matches!(self.spec.kind, Kind::Str(_)) => self.string(s),
                Ok(_) => Err(format!("{role} holds numbers, not strings")),
                Err(_) => Err(format!("{} is not valid UTF-8", String::from_utf8_lossy(b).escape_debug())),
            },
            (Value::Null, _) => Ok(()),
        }
    }

    /// A string into a string attribute (of exactly its length if fixed).
    fn string(&mut self, s: &str) -> Result<(), String> {
        match self.spec.kind {
            Kind::Str(Some(n)) if s.len() != n as usize => {
                let (len, role) = (s.len(), self.spec.role());
                Err(format!("{s:?} has {len} bytes, but {role} holds strings of exactly {n} bytes"))
            }
            _ => {
                self.buf.data.extend_from_slice(s.as_bytes());
                Ok(())
            }
        }
    }

    /// One CSV field's text (trimmed, not blank), parsed as the spec's type.
    fn text(&mut self, s: &str) -> Result<(), String> {
        let role = self.spec.role();
        match self.spec.kind {
            Kind::Int(Datatype::Bool) => match s {
                "1" => self.int(1, &s),
                "0" => self.int(0, &s),
                _ if s.eq_ignore_ascii_case("true") => self.int(1, &s),
                _ if s.eq_ignore_ascii_case("false") => self.int(0, &s),
                _ => Err(format!("{s:?} is not a bool ({role} takes true, false, 1 or 0)")),
            },
            Kind::Int(t @ Datatype::Datetime64(u)) => match parse_datetime(s, u) {
                Ok(v) => self.int(v.into(), &s),
                Err(e) => Err(format!("{e} ({role} is {t})")),
            },
            Kind::Int(t) => match s.parse::<i128>() {
                Ok(v) => self.int(v, &s),
                Err(_) => Err(format!("{s:?} is not an integer ({role} is {t})")),
            },
            Kind::Float(t) => {
                let bad = || format!("{s:?} is not a number ({role} is {t})");
                let (v, as_f32) = if t == Datatype::Float32 {
                    let v = s.parse::<f32>().map_err(|_| bad())?;
                    (f64::from(v), Some(v))
                } else {
                    (s.parse::<f64>().map_err(|_| bad())?, None)
                };
                // An infinite result is an overflow unless the text spells an infinity.
                if v.is_infinite() && !s.to_ascii_lowercase().contains("inf") {
                    return Err(format!("{s} is out of range for {t} ({role})"));
                }
                self.float(v, as_f32, &s)
            }
            Kind::Str(_) => self.string(s),
        }
    }

    /// An absent value: an error unless nullable; else placeholder bytes.
    fn null(&mut self) -> Result<(), String> {
        let role = self.spec.role();
        if !self.spec.nullable {
            return Err(match (self.spec.dim.is_some(), self.spec.kind) {
                (true, _) => format!("no value, but {role} needs a coordinate in every row"),
                (false, Kind::Str(_)) => {
                    format!("no value (null), but {role} is not nullable (write \"\" for an empty string)")
                }
                (false, Kind::Int(Datatype::Datetime64(_))) => format!(
                    "no value (null), but {role} is not nullable (in CSV, write NaT for not-a-time; a null of a \
                     Parquet date or timestamp column is NaT)"
                ),
                (false, _) => format!("no value (null), but {role} is not nullable"),
            });
        }
        let size = self.size();
        self.buf.data.resize(self.buf.data.len() + size, 0);
        Ok(())
    }

    /// An integer `v` (shown as `shown`); into `datetime64` from a date or timestamp column, a
    /// count of the column's unit.
    fn int(&mut self, v: i128, shown: &dyn Display) -> Result<(), String> {
        let role = self.spec.role();
        match self.spec.kind {
            Kind::Int(t) => {
                let v = match (t.time_unit(), self.time) {
                    (Some(to), Some(from)) => rescale(v, from, to).map_err(|e| format!("{e} ({role})"))?,
                    _ => v,
                };
                let (lo, hi) = t.integer_bounds().unwrap_or((i128::MIN, i128::MAX));
                if v < lo || v > hi {
                    return Err(format!("{shown} is out of range for {t} ({role})"));
                }
                if let Some(((dlo, dhi), _)) = self.spec.dim {
                    if v < dlo || v > dhi {
                        let (v, dlo, dhi) = (show(t, v), show(t, dlo), show(t, dhi));
                        return Err(format!("{v} is outside the domain {dlo}:{dhi} of {role}"));
                    }
                }
                self.buf.data.extend_from_slice(&v.to_le_bytes()[..t.size()]);
                Ok(())
            }
            Kind::Float(t) => {
                // Integers into floats: only when exact.
                #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
                let (f, exact) = if t == Datatype::Float32 {
                    let f = v as f32;
                    (f64::from(f), f.is_finite() && f as i128 == v)
                } else {
                    let f = v as f64;
                    (f, f as i128 == v)
                };
                if !exact {
                    return Err(format!("{shown} cannot be represented exactly as {t} ({role})"));
                }
                #[allow(clippy::cast_possible_truncation)]
                self.float(f, (t == Datatype::Float32).then_some(f as f32), shown)
            }
            Kind::Str(_) => Err(format!("{shown} is a number, {role} holds strings")),
        }
    }

    /// A float `v`; `as_f32`: its float32 value when the source already had one.
    fn float(&mut self, v: f64, as_f32: Option<f32>, shown: &dyn Display) -> Result<(), String> {
        let role = self.spec.role();
        let t = match self.spec.kind {
            Kind::Float(t) => t,
            Kind::Str(_) => return Err(format!("{shown} is a number, {role} holds strings")),
            k => return Err(format!("{shown} is not an integer ({role} is {})", k.describe())),
        };
        #[allow(clippy::cast_possible_truncation)]
        let f32v = as_f32.unwrap_or(v as f32);
        if t == Datatype::Float32 && f32v.is_infinite() && v.is_finite() {
            return Err(format!("{shown} is out of range for float32 ({role})"));
        }
        let x = if t == Datatype::Float32 { f64::from(f32v) } else { v };
        if let Some((_, (lo, hi))) = self.spec.dim {
            if !x.is_finite() {
                return Err(format!("{shown} is not a finite coordinate ({role})"));
            }
            if x < lo || x > hi {
                return Err(format!("{shown} is outside the domain {lo:?}:{hi:?} of {role}"));
            }
        }
        if t == Datatype::Float32 {
            self.buf.data.extend_from_slice(&f32v.to_le_bytes());
        } else {
            self.buf.data.extend_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
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
            let len = data.len();
            let too_big = || anyhow!("{what}: more than 2 GiB of strings in one batch");
            let offsets: Vec<i32> = match (n, &col.offsets) {
                (None, Some(o)) if o.len() == cells => o
                    .iter()
                    .chain(std::iter::once(&(len as u64)))
                    .map(|&x| i32::try_from(x).map_err(|_| too_big()))
                    .collect::<Result<_>>()?,
                (Some(n), None) if cells.checked_mul(n as usize) == Some(len) => {
                    (0..=cells).map(|i| i32::try_from(i * n as usize).map_err(|_| too_big())).collect::<Result<_>>()?
                }
                _ => bail!("{what}: the engine's string buffers do not match {cells} cells"),
            };
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
    /// Rows seen, and absent values (empty CSV fields, Parquet nulls) among them.
    pub(crate) rows: u64,
    pub(crate) nulls: u64,
    /// Whether a present value is not an integer, or not a number.
    not_int: bool,
    not_float: bool,
    /// Integers beyond int64 (Parquet UINT_64 above 2^63 - 1).
    big_unsigned: bool,
    /// Smallest and largest integer, and number (NaN ignored), seen.
    pub(crate) int_range: Option<(i128, i128)>,
    pub(crate) float_range: Option<(f64, f64)>,
    /// Whether a NaN or infinity was seen.
    pub(crate) non_finite: bool,
    /// The first value that is not a number with its row, and the row of the first absent value.
    pub(crate) first_text: Option<(String, String)>,
    pub(crate) first_null: Option<String>,
    /// `bool` for a Boolean column, `datetime64[unit]` for a date or timestamp column (its
    /// integers, in `int_range`, count the unit).
    typed: Option<Datatype>,
}

/// The inferred type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inferred {
    /// int64 (or uint64 for Parquet UINT_64 values beyond int64), or the `bool` or
    /// `datetime64` of a Boolean, date or timestamp column.
    Int(Datatype),
    /// float64.
    Float,
    /// utf8, variable length.
    Str,
}

impl Inference {
    /// The column's type: Boolean → bool, dates and timestamps → datetime64 of their unit,
    /// integers → int64, numbers → float64, anything else (or nothing) → utf8.
    pub(crate) fn inferred(&self) -> Inferred {
        if let Some(t) = self.typed {
            Inferred::Int(t)
        } else if self.rows == self.nulls {
            Inferred::Str
        } else if !self.not_int {
            Inferred::Int(if self.big_unsigned { Datatype::UInt64 } else { Datatype::Int64 })
        } else if !self.not_float {
            Inferred::Float
        } else {
            Inferred::Str
        }
    }

    fn int(&mut self, v: i128) {
        self.big_unsigned |= v > i128::from(i64::MAX);
        self.int_range = Some(self.int_range.map_or((v, v), |(a, b)| (a.min(v), b.max(v))));
        #[allow(clippy::cast_precision_loss)]
        self.float(v as f64);
    }

    fn float(&mut self, v: f64) {
        if !v.is_finite() {
            self.non_finite = true;
            return;
        }
        self.float_range = Some(self.float_range.map_or((v, v), |(a, b)| (a.min(v), b.max(v))));
    }

    fn text(&mut self, at: impl FnOnce() -> String, s: &str) {
        self.not_int = true;
        self.not_float = true;
        if self.first_text.is_none() {
            self.first_text = Some((s.to_string(), at()));
        }
    }

    /// Takes in column `a` of a batch (`text`: CSV text); `locate` names row `i` of the batch.
    pub(crate) fn add(&mut self, a: &dyn Array, text: bool, locate: &dyn Fn(usize) -> String) {
        self.rows += a.len() as u64;
        if *a.data_type() == DataType::Boolean {
            self.typed = Some(Datatype::Bool);
        } else if let Some(u) = time_unit_of(a.data_type()) {
            self.typed = Some(Datatype::Datetime64(u));
        }
        let Ok(values) = values(a) else { return self.text(|| locate(0), "(unsupported)") };
        for i in 0..a.len() {
            match values(i) {
                Value::Null => self.null_at(locate, i),
                Value::Int(v) => self.int(v),
                Value::Float(v, _) => {
                    self.not_int = true;
                    self.float(v);
                }
                Value::Bool(_) => {}
                Value::Str(s) if text => match (s.trim().parse::<i64>(), s.trim().parse::<f64>()) {
                    // Blank: absent for numbers; a quoted "" is an empty string.
                    _ if s.trim().is_empty() && !s.is_empty() => self.null_at(locate, i),
                    (Ok(v), _) if !self.not_int => self.int(i128::from(v)),
                    (_, Ok(v)) if !self.not_float => {
                        self.not_int = true;
                        self.float(v);
                    }
                    _ => self.text(|| locate(i), s),
                },
                Value::Str(s) => self.text(|| locate(i), s),
                Value::Bytes(_) => self.text(|| locate(i), "(bytes)"),
            }
        }
    }

    fn null_at(&mut self, locate: &dyn Fn(usize) -> String, i: usize) {
        self.nulls += 1;
        if self.first_null.is_none() {
            self.first_null = Some(locate(i));
        }
    }
}

/// A date, time, timestamp or duration column as the integers of type `t` it stores (the same
/// buffers).
fn reinterpret(a: &dyn Array, t: DataType) -> Result<ArrayRef, String> {
    let data = a.to_data().into_builder().data_type(t).build();
    data.map(make_array).map_err(|e| format!("cannot read {} values as integers: {e}", a.data_type()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use arrow_array::{BinaryArray, Float64Array, Int16Array, Int64Array, UInt32Array, UInt64Array};

    use super::*;

    /// CSV fields as (text, quoted): an unquoted empty field is null.
    fn text(fields: &[(&str, bool)]) -> StringArray {
        fields.iter().map(|&(f, q)| (q || !f.is_empty()).then_some(f)).collect()
    }

    fn spec(kind: Kind, nullable: bool, dim: Option<((i128, i128), (f64, f64))>) -> ColumnSpec {
        ColumnSpec { name: "c".into(), kind, nullable, dim }
    }

    fn convert(s: &ColumnSpec, a: &dyn Array) -> Result<ColumnBuf, String> {
        let mut b = ColumnBuf::default();
        to_engine(s, a, &mut b).map_err(|(row, e)| format!("row {row}: {e}"))?;
        Ok(b)
    }

    #[test]
    fn text_converts_exactly() {
        let i8s = spec(Kind::Int(Datatype::Int8), false, None);
        let b = convert(&i8s, &text(&[("-128", false), (" 127 ", false), ("+5", true)])).unwrap();
        assert_eq!(b.data, vec![0x80, 0x7f, 5]);
        for (f, want) in [
            ("128", "row 0: 128 is out of range for int8 (attribute c)"),
            ("1.5", "row 0: \"1.5\" is not an integer (attribute c is int8)"),
            ("", "row 0: no value (null), but attribute c is not nullable"),
            ("1e2", "row 0: \"1e2\" is not an integer"),
        ] {
            let e = convert(&i8s, &text(&[(f, false)])).unwrap_err();
            assert!(e.contains(want), "{f}: {e}");
        }
        let dim = spec(Kind::Int(Datatype::Int64), false, Some(((0, 10), (0.0, 0.0))));
        let e = convert(&dim, &text(&[("5", false), ("11", false)])).unwrap_err();
        assert_eq!(e, "row 1: 11 is outside the domain 0:10 of dimension c");
        assert!(convert(&dim, &text(&[("", false)])).unwrap_err().contains("dimension c needs a coordinate"));
        let f32s = spec(Kind::Float(Datatype::Float32), true, None);
        let b = convert(&f32s, &text(&[("0.1", false), ("", false), ("inf", false), ("nan", false)])).unwrap();
        assert_eq!(
            (&b.data[..4], b.validity.as_slice(), b.data.len()),
            (&0.1f32.to_le_bytes()[..], &[1, 0, 1, 1][..], 16)
        );
        assert!(convert(&f32s, &text(&[("1e39", false)])).unwrap_err().contains("out of range for float32"));
        assert!(convert(&f32s, &text(&[("x", false)])).unwrap_err().contains("\"x\" is not a number"));
        let fdim = spec(Kind::Float(Datatype::Float64), false, Some(((0, 0), (-1.0, 1.0))));
        assert!(convert(&fdim, &text(&[("nan", false)])).unwrap_err().contains("not a finite coordinate"));
        assert!(convert(&fdim, &text(&[("1.5", false)])).unwrap_err().contains("outside the domain -1.0:1.0"));
        // Strings: unquoted empty is null, quoted empty is "".
        let s = spec(Kind::Str(None), true, None);
        let b = convert(&s, &text(&[("ab", false), ("", false), ("", true), ("c,d", true)])).unwrap();
        assert_eq!(
            (b.data.as_slice(), b.offsets.as_slice(), b.validity.as_slice()),
            (&b"abc,d"[..], &[0, 2, 2, 2][..], &[1, 0, 1, 1][..])
        );
        let s = spec(Kind::Str(None), false, None);
        assert!(convert(&s, &text(&[("", false)])).unwrap_err().contains("write \"\" for an empty string"));
        let fixed = spec(Kind::Str(Some(2)), false, None);
        assert!(convert(&fixed, &text(&[("abc", false)])).unwrap_err().contains("exactly 2 bytes"));
    }

    #[test]
    fn typed_values_convert_exactly() {
        let u8s = spec(Kind::Int(Datatype::UInt8), false, None);
        let e = convert(&u8s, &Int64Array::from(vec![-1])).unwrap_err();
        assert!(e.contains("-1 is out of range for uint8"), "{e}");
        let u64s = spec(Kind::Int(Datatype::UInt64), false, None);
        let b = convert(&u64s, &UInt64Array::from(vec![u64::MAX])).unwrap();
        assert_eq!(b.data, u64::MAX.to_le_bytes());
        let f64s = spec(Kind::Float(Datatype::Float64), true, None);
        let b = convert(&f64s, &Int64Array::from(vec![Some(3), None])).unwrap();
        assert_eq!((&b.data[..8], b.validity.as_slice(), b.data.len()), (&3.0f64.to_le_bytes()[..], &[1, 0][..], 16));
        let e = convert(&f64s, &Int64Array::from(vec![(1 << 53) + 1])).unwrap_err();
        assert!(e.contains("cannot be represented exactly as float64"), "{e}");
        let f32s = spec(Kind::Float(Datatype::Float32), false, None);
        let e = convert(&f32s, &Float64Array::from(vec![1e300])).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let s = spec(Kind::Str(None), false, None);
        let e = convert(&s, &BinaryArray::from(vec![&b"ok"[..], &[0xff]])).unwrap_err();
        assert!(e.starts_with("row 1: ") && e.contains("not valid UTF-8"), "{e}");
        // A same-typed column moves whole, still checked against the domain.
        let dim = spec(Kind::Int(Datatype::Int16), false, Some(((-5, 5), (0.0, 0.0))));
        assert_eq!(convert(&dim, &Int16Array::from(vec![-5, 5])).unwrap().data, [0xfb, 0xff, 5, 0]);
        let e = convert(&dim, &Int16Array::from(vec![1, 6])).unwrap_err();
        assert_eq!(e, "row 1: 6 is outside the domain -5:5 of dimension c");
        let e = convert(&dim, &Int16Array::from(vec![Some(1), None])).unwrap_err();
        assert!(e.starts_with("row 1: no value"), "{e}");
        let fdim = spec(Kind::Float(Datatype::Float64), false, Some(((0, 0), (-1.0, 1.0))));
        assert_eq!(convert(&fdim, &Float64Array::from(vec![0.5])).unwrap().data, 0.5f64.to_le_bytes());
        let e = convert(&fdim, &Float64Array::from(vec![0.5, 1.5])).unwrap_err();
        assert_eq!(e, "row 1: 1.5 is outside the domain -1.0:1.0 of dimension c");
        let e = convert(&fdim, &Float64Array::from(vec![f64::NAN])).unwrap_err();
        assert!(e.contains("row 0: NaN is not a finite coordinate"), "{e}");
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
    fn bools_and_times_convert_exactly() {
        use arrow_array::{Date32Array, TimestampNanosecondArray, TimestampSecondArray};
        let flag = spec(Kind::Int(Datatype::Bool), false, None);
        let b = convert(&flag, &text(&[("true", false), (" FALSE", false), ("1", false), ("0", false)])).unwrap();
        assert_eq!(b.data, [1, 0, 1, 0]);
        let e = convert(&flag, &text(&[("yes", false)])).unwrap_err();
        assert!(e.contains("\"yes\" is not a bool (attribute c takes true, false, 1 or 0)"), "{e}");
        assert_eq!(convert(&flag, &BooleanArray::from(vec![true, false])).unwrap().data, [1, 0]);
        let ms = Kind::Int(Datatype::Datetime64(TimeUnit::Milli));
        let t = spec(ms, true, None);
        let b = convert(&t, &text(&[("1970-01-01T00:00:01.5", false), ("NaT", false), ("", false)])).unwrap();
        assert_eq!(
            (b.data[..8].to_vec(), &b.data[8..16], b.validity),
            (1500i64.to_le_bytes().to_vec(), &NAT.to_le_bytes()[..], vec![1, 1, 0])
        );
        let e = convert(&t, &text(&[("2020-01-01T00:00:00.0001", false)])).unwrap_err();
        assert!(e.contains("finer than the unit ms (attribute c is datetime64[ms])"), "{e}");
        // Timestamps of any unit and dates, exactly; a dimension's domain shown as times.
        let ns = TimestampNanosecondArray::from(vec![Some(2_000_000), None, Some(-1_000_000)]);
        let b = convert(&t, &ns).unwrap();
        assert_eq!((&b.data[..8], &b.data[16..]), (&2i64.to_le_bytes()[..], &(-1i64).to_le_bytes()[..]));
        let e = convert(&t, &TimestampNanosecondArray::from(vec![0, 1_500_000])).unwrap_err();
        assert_eq!(e, "row 1: 1970-01-01T00:00:00.001500000 (1500000 ns) is finer than datetime64[ms] (attribute c)");
        let e = convert(&t, &TimestampSecondArray::from(vec![i64::MAX / 10])).unwrap_err();
        assert!(e.contains("is outside the range of datetime64[ms]"), "{e}");
        let dim = spec(ms, false, Some(((0, 86_400_000), (0.0, 0.0))));
        assert_eq!(convert(&dim, &Date32Array::from(vec![1])).unwrap().data, 86_400_000i64.to_le_bytes());
        let e = convert(&dim, &Date32Array::from(vec![2])).unwrap_err();
        assert!(e.contains("1970-01-03T00:00:00.000 is outside the domain 1970-01-01T00:00:00.000:1970-01-02"), "{e}");
        // Plain integers have no unit; booleans go only into bool.
        assert!(check_compatible(SrcKind::Int, "x", "INT64", &t)
            .unwrap_err()
            .to_string()
            .contains("TIMESTAMP and DATE"));
        assert!(check_compatible(SrcKind::Bool, "x", "BOOLEAN", &t).is_err());
        assert!(check_compatible(SrcKind::Time, "x", "INT64 (TIMESTAMP)", &flag).is_err());
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
        let infer = |a: &dyn Array, text: bool| {
            let mut inf = Inference::default();
            inf.add(a, text, &|i| format!("row {} (line {})", i + 1, i + 2));
            inf
        };
        let i = infer(&text(&[("3", false), ("", false), ("-7", false)]), true);
        assert_eq!((i.inferred(), i.nulls, i.int_range), (Inferred::Int(Datatype::Int64), 1, Some((-7, 3))));
        let i = infer(&text(&[("3", false), ("2.5", false), ("1e3", false)]), true);
        assert_eq!((i.inferred(), i.float_range), (Inferred::Float, Some((2.5, 1000.0))));
        let i = infer(&text(&[("3", false), ("x", false), ("", true)]), true);
        assert_eq!((i.inferred(), i.first_text), (Inferred::Str, Some(("x".into(), "row 2 (line 3)".into()))));
        assert_eq!(infer(&text(&[("", false)]), true).inferred(), Inferred::Str);
        let i = infer(&UInt64Array::from(vec![u64::MAX]), false);
        assert_eq!(i.inferred(), Inferred::Int(Datatype::UInt64));
        let i = infer(&text(&[("a", false)]), false);
        assert_eq!((i.inferred(), i.first_text), (Inferred::Str, Some(("a".into(), "row 1 (line 2)".into()))));
    }
}
