//! Tables of cells (one row per cell, one column per dimension and attribute) exchanged with
//! sparse arrays as CSV or Parquet files.
//!
//! A [`Source`] yields [`Batch`]es of rows whose columns are [`Values`] in the file's own form
//! (CSV text, or Parquet integers, floats and byte strings), read one [`Cell`] at a time.
//! [`append`] converts a column to the engine's little-endian form for a [`ColumnSpec`] (the
//! dimension or attribute the column feeds), checking each value exactly: integers must be
//! integers within the type's range, floats must fit the float type, coordinates must lie in the
//! domain, absent values need a nullable attribute. Errors name the row (and, for CSV, the line)
//! and the column. A [`Sink`] writes engine results (dimensions first, then attributes), and
//! [`Inference`] guesses column types for `tessera import`.

use std::path::Path;

use anyhow::{bail, Result};
use tessera::{ArraySchema, AttrData, Attribute, CellValNum, Datatype, Dimension};

/// What a column holds, as the CLI exchanges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// An integer type.
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
    /// For dimensions: the domain (integer bounds as floats too, for float dimensions).
    pub(crate) dim: Option<((i128, i128), (f64, f64))>,
}

impl ColumnSpec {
    /// The column of dimension `d`.
    pub(crate) fn of_dim(d: &Dimension) -> Self {
        // By the datatype, not the domain's JSON form: `[0, 10]` on a float dimension parses as
        // integers, and integer columns would store integer bits as float coordinates.
        let (kind, bounds) = if d.is_float() {
            (Kind::Float(d.datatype), ((0, 0), d.float_domain()))
        } else {
            (Kind::Int(d.datatype), (d.int_domain(), (0.0, 0.0)))
        };
        Self { name: d.name.clone(), kind, nullable: false, dim: Some(bounds) }
    }

    /// The column of attribute `a`.
    ///
    /// # Errors
    /// An attribute with several values per cell (other than fixed-length strings), which a
    /// column of one value per cell cannot hold.
    pub(crate) fn of_attr(a: &Attribute) -> Result<Self> {
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

    /// Whether variable-length (offsets).
    pub(crate) fn is_var(&self) -> bool {
        self.kind == Kind::Str(None)
    }

    /// Bytes per cell, for progress estimates (16 for strings).
    pub(crate) fn size_estimate(&self) -> u64 {
        match self.kind {
            Kind::Int(t) | Kind::Float(t) => t.size() as u64,
            Kind::Str(_) => 16,
        }
    }

    /// Cell `i` of engine results `col` of this column: `Null`, `Int`, `F32`, `F64` or `Bytes`.
    pub(crate) fn cell<'a>(&self, col: &'a AttrData, i: usize) -> Cell<'a> {
        if col.validity.as_ref().is_some_and(|v| v[i] == 0) {
            return Cell::Null;
        }
        let data = &col.data;
        match self.kind {
            Kind::Int(t) => {
                let s = t.size();
                let mut b = [0u8; 16];
                b[..s].copy_from_slice(&data[i * s..i * s + s]);
                if t.integer_bounds().is_some_and(|(lo, _)| lo < 0) && b[s - 1] & 0x80 != 0 {
                    b[s..].fill(0xff);
                }
                Cell::Int(i128::from_le_bytes(b))
            }
            Kind::Float(Datatype::Float32) => Cell::F32(f32::from_le_bytes([0, 1, 2, 3].map(|k| data[i * 4 + k]))),
            Kind::Float(_) => Cell::F64(f64::from_le_bytes([0, 1, 2, 3, 4, 5, 6, 7].map(|k| data[i * 8 + k]))),
            Kind::Str(_) => Cell::Bytes(&data[self.str_range(col, i)]),
        }
    }

    /// Where the bytes of cell `i` of a string column are in `col.data`.
    pub(crate) fn str_range(&self, col: &AttrData, i: usize) -> std::ops::Range<usize> {
        let len = col.data.len();
        let (start, end) = match (&col.offsets, self.kind) {
            (Some(o), _) => {
                let at = |x: u64| usize::try_from(x).unwrap_or(usize::MAX).min(len);
                (at(o[i]), o.get(i + 1).map_or(len, |&e| at(e)))
            }
            (None, Kind::Str(Some(n))) => ((i * n as usize).min(len), ((i + 1) * n as usize).min(len)),
            _ => (0, 0),
        };
        start..end.max(start)
    }
}

/// What a column feeds, for messages: "dimension x" or "attribute a".
pub(crate) struct Role<'a>(&'a ColumnSpec);

impl std::fmt::Display for Role<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", if self.0.dim.is_some() { "dimension" } else { "attribute" }, self.0.name)
    }
}

/// The columns of a schema's dimensions followed by those of `attrs` (indices into
/// `schema.attrs`).
///
/// # Errors
/// An attribute a column cannot hold.
pub(crate) fn specs_of(schema: &ArraySchema, attrs: &[usize]) -> Result<Vec<ColumnSpec>> {
    let mut out: Vec<ColumnSpec> = schema.dims.iter().map(ColumnSpec::of_dim).collect();
    for &i in attrs {
        out.push(ColumnSpec::of_attr(&schema.attrs[i])?);
    }
    Ok(out)
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

/// One value of a table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Cell<'a> {
    /// An absent value (Parquet null, engine null).
    Null,
    /// A CSV field and whether it was quoted; an unquoted empty field is an absent value.
    Text(&'a str, bool),
    /// An integer.
    Int(i128),
    /// A 32-bit float.
    F32(f32),
    /// A 64-bit float.
    F64(f64),
    /// A byte string (Parquet BYTE_ARRAY, engine strings).
    Bytes(&'a [u8]),
}

/// One column of a batch, in the source's form. Every variant holds one entry per row.
// Without Parquet only text columns exist.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) enum Values {
    /// CSV fields: the concatenated text, the end of each field in it, and whether each was
    /// quoted.
    Text { text: String, ends: Vec<usize>, quoted: Vec<bool> },
    /// Integers (`valid`: `None` when the column has no nulls).
    Int { vals: Vec<i128>, valid: Option<Vec<bool>> },
    /// 32-bit floats.
    F32 { vals: Vec<f32>, valid: Option<Vec<bool>> },
    /// 64-bit floats.
    F64 { vals: Vec<f64>, valid: Option<Vec<bool>> },
    /// Byte strings: the concatenated bytes and the end of each.
    Bytes { data: Vec<u8>, ends: Vec<usize>, valid: Option<Vec<bool>> },
}

impl Values {
    /// Empty text values.
    pub(crate) fn text() -> Self {
        Values::Text { text: String::new(), ends: Vec::new(), quoted: Vec::new() }
    }

    /// The value of row `i`.
    pub(crate) fn get(&self, i: usize) -> Cell<'_> {
        let start = |ends: &[usize]| if i == 0 { 0 } else { ends[i - 1] };
        let valid = |v: &Option<Vec<bool>>| v.as_ref().is_none_or(|v| v[i]);
        match self {
            Values::Text { text, ends, quoted } => Cell::Text(&text[start(ends)..ends[i]], quoted[i]),
            Values::Int { valid: v, .. }
            | Values::F32 { valid: v, .. }
            | Values::F64 { valid: v, .. }
            | Values::Bytes { valid: v, .. }
                if !valid(v) =>
            {
                Cell::Null
            }
            Values::Int { vals, .. } => Cell::Int(vals[i]),
            Values::F32 { vals, .. } => Cell::F32(vals[i]),
            Values::F64 { vals, .. } => Cell::F64(vals[i]),
            Values::Bytes { data, ends, .. } => Cell::Bytes(&data[start(ends)..ends[i]]),
        }
    }
}

/// Rows read from a file.
#[derive(Debug, Clone)]
pub(crate) struct Batch {
    /// Data rows before this batch.
    pub(crate) first_row: u64,
    /// Rows in the batch.
    pub(crate) rows: usize,
    /// CSV: the line each row starts on.
    pub(crate) lines: Option<Vec<u64>>,
    /// The selected columns (see [`Source::select`]).
    pub(crate) cols: Vec<Values>,
}

impl Batch {
    /// "row 5 (line 6)": where row `i` of the batch is in the file (rows count from 1).
    pub(crate) fn locate(&self, i: usize) -> String {
        let row = self.first_row + i as u64 + 1;
        match &self.lines {
            Some(l) => format!("row {row} (line {})", l[i]),
            None => format!("row {row}"),
        }
    }
}

/// The kind of values a source column holds.
// Without Parquet only text columns exist.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SrcKind {
    /// CSV text: parsed as whatever the target needs.
    Text,
    /// Integers (Parquet INT32/INT64, signed or not).
    Int,
    /// Floats (Parquet FLOAT/DOUBLE).
    Float,
    /// Byte strings (Parquet BYTE_ARRAY).
    Bytes,
    /// A type the CLI cannot read (Parquet BOOLEAN, INT96, DECIMAL, nested lists, ...).
    Unsupported,
}

/// A column of a source file.
#[derive(Debug, Clone)]
pub(crate) struct SrcColumn {
    /// Its name (the CSV header or the Parquet field name).
    pub(crate) name: String,
    /// What it holds.
    pub(crate) kind: SrcKind,
    /// Its type as the file names it, for messages (e.g. `DOUBLE`).
    pub(crate) type_name: String,
}

/// A file of rows.
pub(crate) trait Source {
    /// The file.
    fn path(&self) -> &Path;
    /// Its columns.
    fn columns(&self) -> &[SrcColumn];
    /// Chooses the columns (indices into [`Source::columns`]) batches hold, in that order.
    fn select(&mut self, cols: &[usize]);
    /// The next at most `max_rows` rows, or `None` at the end; errors name the line or row.
    fn next_batch(&mut self, max_rows: usize) -> Result<Option<Batch>>;
    /// Progress for a bar: (work done, total), in bytes of the file or an estimate.
    fn progress(&self) -> (u64, u64);
}

/// Writes engine results (dimension columns first, then attributes) to a file.
pub(crate) trait Sink {
    /// Writes one batch of `cells` cells: one [`AttrData`] per column spec, in order.
    fn write_batch(&mut self, cols: &[AttrData], cells: usize) -> Result<()>;
    /// Completes the file (footer, flush, sync).
    fn finish(self: Box<Self>) -> Result<()>;
}

/// Checks that source column `src` can feed `spec`.
///
/// # Errors
/// A type mismatch (floats into integers, numbers into strings, strings into numbers).
pub(crate) fn check_compatible(src: &SrcColumn, spec: &ColumnSpec) -> Result<()> {
    if src.kind == SrcKind::Unsupported {
        bail!(
            "column {} has Parquet type {}, which tessera cannot read (supported: INT32, INT64, FLOAT, DOUBLE, \
             BYTE_ARRAY strings)",
            src.name,
            src.type_name
        );
    }
    let ok = matches!(
        (&src.kind, spec.kind),
        (SrcKind::Text, _)
            | (SrcKind::Int, Kind::Int(_) | Kind::Float(_))
            | (SrcKind::Float, Kind::Float(_))
            | (SrcKind::Bytes, Kind::Str(_))
    );
    if !ok {
        let (name, ty, role, kind) = (&src.name, &src.type_name, spec.role(), spec.kind.describe());
        bail!("column {name} has type {ty}, which cannot hold {role} ({kind})");
    }
    Ok(())
}

/// Appends column `values` (of `rows` rows) converted for `spec` to `buf`.
///
/// # Errors
/// The first value that does not convert exactly: its row in the batch and what is wrong.
pub(crate) fn append(
    spec: &ColumnSpec,
    values: &Values,
    rows: usize,
    buf: &mut ColumnBuf,
) -> Result<(), (usize, String)> {
    let mut p = Pusher { spec, buf };
    (0..rows).try_for_each(|i| p.push(values.get(i)).map_err(|e| (i, e)))
}

/// Appends converted values of one spec to one buffer.
struct Pusher<'a> {
    spec: &'a ColumnSpec,
    buf: &'a mut ColumnBuf,
}

impl Pusher<'_> {
    fn push(&mut self, cell: Cell<'_>) -> Result<(), String> {
        let spec = self.spec;
        let role = spec.role();
        match (cell, self.spec.kind) {
            (Cell::Null, _) => self.null(),
            (Cell::Text(s, quoted), Kind::Str(_)) if s.is_empty() && !quoted => self.null(),
            (Cell::Text(s, _), Kind::Str(_)) => self.string(s),
            (Cell::Text(s, _), _) if s.trim().is_empty() => self.null(),
            (Cell::Text(s, _), Kind::Int(t)) => match s.trim().parse::<i128>() {
                Ok(v) => self.int(v, &s.trim()),
                Err(_) => Err(format!("{:?} is not an integer ({role} is {t})", s.trim())),
            },
            (Cell::Text(s, _), Kind::Float(t)) => {
                let s = s.trim();
                let bad = || format!("{s:?} is not a number ({role} is {t})");
                // An infinite result is an overflow unless the text spells an infinity.
                let overflow = |inf: bool| inf && !s.to_ascii_lowercase().contains("inf");
                if t == Datatype::Float32 {
                    let v = s.parse::<f32>().map_err(|_| bad())?;
                    if overflow(v.is_infinite()) {
                        return Err(format!("{s} is out of range for float32 ({role})"));
                    }
                    self.float(f64::from(v), Some(v), &s)
                } else {
                    let v = s.parse::<f64>().map_err(|_| bad())?;
                    if overflow(v.is_infinite()) {
                        return Err(format!("{s} is out of range for float64 ({role})"));
                    }
                    self.float(v, None, &s)
                }
            }
            (Cell::Int(v), _) => self.int(v, &v),
            (Cell::F32(x), _) => self.float(f64::from(x), Some(x), &x),
            (Cell::F64(x), _) => self.float(x, None, &x),
            (Cell::Bytes(b), _) => match std::str::from_utf8(b) {
                Ok(s) => self.string(s),
                Err(_) => Err(format!("{} is not valid UTF-8", String::from_utf8_lossy(b).escape_debug())),
            },
        }
    }

    fn valid(&mut self) {
        if self.spec.nullable {
            self.buf.validity.push(1);
        }
    }

    fn null(&mut self) -> Result<(), String> {
        if !self.spec.nullable {
            let spec = self.spec;
            let role = spec.role();
            return Err(match (self.spec.dim.is_some(), self.spec.kind) {
                (true, _) => format!("no value, but {role} needs a coordinate in every row"),
                (false, Kind::Str(_)) => {
                    format!("no value (null), but {role} is not nullable (write \"\" for an empty string)")
                }
                (false, _) => format!("no value (null), but {role} is not nullable"),
            });
        }
        self.buf.validity.push(0);
        match self.spec.kind {
            Kind::Str(None) => self.buf.offsets.push(self.buf.data.len() as u64),
            Kind::Str(Some(n)) => self.buf.data.resize(self.buf.data.len() + n as usize, 0),
            Kind::Int(t) | Kind::Float(t) => self.buf.data.resize(self.buf.data.len() + t.size(), 0),
        }
        Ok(())
    }

    /// An integer `v` (shown as `shown`).
    fn int(&mut self, v: i128, shown: &dyn std::fmt::Display) -> Result<(), String> {
        let spec = self.spec;
        let role = spec.role();
        match self.spec.kind {
            Kind::Int(t) => {
                let (lo, hi) = t.integer_bounds().unwrap_or((i128::MIN, i128::MAX));
                if v < lo || v > hi {
                    return Err(format!("{shown} is out of range for {t} ({role})"));
                }
                if let Some(((dlo, dhi), _)) = self.spec.dim {
                    if v < dlo || v > dhi {
                        return Err(format!("{shown} is outside the domain {dlo}:{dhi} of {role}"));
                    }
                }
                self.buf.data.extend_from_slice(&v.to_le_bytes()[..t.size()]);
                self.valid();
                Ok(())
            }
            Kind::Float(t) => {
                // Integers into floats (Parquet): only when exact.
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
    fn float(&mut self, v: f64, as_f32: Option<f32>, shown: &dyn std::fmt::Display) -> Result<(), String> {
        let spec = self.spec;
        let role = spec.role();
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
        if let Some((_, (lo, hi))) = self.spec.dim {
            let x = if t == Datatype::Float32 { f64::from(f32v) } else { v };
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
        self.valid();
        Ok(())
    }

    /// A string value.
    fn string(&mut self, s: &str) -> Result<(), String> {
        match self.spec.kind {
            Kind::Str(None) => self.buf.offsets.push(self.buf.data.len() as u64),
            Kind::Str(Some(n)) if s.len() != n as usize => {
                let (len, role) = (s.len(), self.spec.role());
                return Err(format!("{s:?} has {len} bytes, but {role} holds strings of exactly {n} bytes"));
            }
            Kind::Str(Some(_)) => {}
            _ => return Err(format!("{s:?} is a string, {} holds numbers", self.spec.role())),
        }
        self.buf.data.extend_from_slice(s.as_bytes());
        self.valid();
        Ok(())
    }
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
}

/// The inferred type of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Inferred {
    /// int64 (or uint64 for Parquet UINT_64 values beyond int64).
    Int(Datatype),
    /// float64.
    Float,
    /// utf8, variable length.
    Str,
}

impl Inference {
    /// The column's type: integers → int64, numbers → float64, anything else (or nothing) → utf8.
    pub(crate) fn inferred(&self) -> Inferred {
        if self.rows == self.nulls {
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

    /// Takes in one column of a batch.
    pub(crate) fn add(&mut self, values: &Values, batch: &Batch) {
        self.rows += batch.rows as u64;
        for i in 0..batch.rows {
            let null = match values.get(i) {
                Cell::Null => true,
                // Empty: absent for numbers; a quoted "" is an empty string.
                Cell::Text(s, quoted) if s.trim().is_empty() => {
                    if quoted {
                        self.text(|| batch.locate(i), s);
                    }
                    !quoted
                }
                Cell::Text(s, _) => {
                    match (s.trim().parse::<i64>(), s.trim().parse::<f64>()) {
                        (Ok(v), _) if !self.not_int => self.int(i128::from(v)),
                        (_, Ok(v)) if !self.not_float => {
                            self.not_int = true;
                            self.float(v);
                        }
                        _ => self.text(|| batch.locate(i), s),
                    }
                    false
                }
                Cell::Int(v) => {
                    self.int(v);
                    false
                }
                Cell::F32(x) => {
                    self.not_int = true;
                    self.float(f64::from(x));
                    false
                }
                Cell::F64(x) => {
                    self.not_int = true;
                    self.float(x);
                    false
                }
                Cell::Bytes(b) => {
                    self.text(|| batch.locate(i), &String::from_utf8_lossy(b));
                    false
                }
            };
            if null {
                self.nulls += 1;
                if self.first_null.is_none() {
                    self.first_null = Some(batch.locate(i));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn text(fields: &[(&str, bool)]) -> Values {
        let mut v = Values::text();
        if let Values::Text { text, ends, quoted } = &mut v {
            for (f, q) in fields {
                text.push_str(f);
                ends.push(text.len());
                quoted.push(*q);
            }
        }
        v
    }

    fn spec(kind: Kind, nullable: bool, dim: Option<((i128, i128), (f64, f64))>) -> ColumnSpec {
        ColumnSpec { name: "c".into(), kind, nullable, dim }
    }

    fn convert(s: &ColumnSpec, v: &Values, rows: usize) -> Result<ColumnBuf, String> {
        let mut b = ColumnBuf::default();
        append(s, v, rows, &mut b).map_err(|(row, e)| format!("row {row}: {e}"))?;
        Ok(b)
    }

    #[test]
    fn text_converts_exactly() {
        let i8s = spec(Kind::Int(Datatype::Int8), false, None);
        let b = convert(&i8s, &text(&[("-128", false), (" 127 ", false), ("+5", true)]), 3).unwrap();
        assert_eq!(b.data, vec![0x80, 0x7f, 5]);
        for (f, want) in [
            ("128", "row 0: 128 is out of range for int8 (attribute c)"),
            ("1.5", "row 0: \"1.5\" is not an integer (attribute c is int8)"),
            ("", "row 0: no value (null), but attribute c is not nullable"),
            ("1e2", "row 0: \"1e2\" is not an integer"),
        ] {
            let e = convert(&i8s, &text(&[(f, false)]), 1).unwrap_err();
            assert!(e.contains(want), "{f}: {e}");
        }
        let dim = spec(Kind::Int(Datatype::Int64), false, Some(((0, 10), (0.0, 0.0))));
        let e = convert(&dim, &text(&[("5", false), ("11", false)]), 2).unwrap_err();
        assert_eq!(e, "row 1: 11 is outside the domain 0:10 of dimension c");
        assert!(convert(&dim, &text(&[("", false)]), 1).unwrap_err().contains("dimension c needs a coordinate"));
        let f32s = spec(Kind::Float(Datatype::Float32), true, None);
        let b = convert(&f32s, &text(&[("0.1", false), ("", false), ("inf", false), ("nan", false)]), 4).unwrap();
        assert_eq!(
            (&b.data[..4], b.validity.as_slice(), b.data.len()),
            (&0.1f32.to_le_bytes()[..], &[1, 0, 1, 1][..], 16)
        );
        assert!(convert(&f32s, &text(&[("1e39", false)]), 1).unwrap_err().contains("out of range for float32"));
        assert!(convert(&f32s, &text(&[("x", false)]), 1).unwrap_err().contains("\"x\" is not a number"));
        let fdim = spec(Kind::Float(Datatype::Float64), false, Some(((0, 0), (-1.0, 1.0))));
        assert!(convert(&fdim, &text(&[("nan", false)]), 1).unwrap_err().contains("not a finite coordinate"));
        assert!(convert(&fdim, &text(&[("1.5", false)]), 1).unwrap_err().contains("outside the domain -1.0:1.0"));
        // Strings: unquoted empty is null, quoted empty is "".
        let s = spec(Kind::Str(None), true, None);
        let b = convert(&s, &text(&[("ab", false), ("", false), ("", true), ("c,d", true)]), 4).unwrap();
        assert_eq!(
            (b.data.as_slice(), b.offsets.as_slice(), b.validity.as_slice()),
            (&b"abc,d"[..], &[0, 2, 2, 2][..], &[1, 0, 1, 1][..])
        );
        let s = spec(Kind::Str(None), false, None);
        assert!(convert(&s, &text(&[("", false)]), 1).unwrap_err().contains("write \"\" for an empty string"));
        let fixed = spec(Kind::Str(Some(2)), false, None);
        assert!(convert(&fixed, &text(&[("abc", false)]), 1).unwrap_err().contains("exactly 2 bytes"));
    }

    #[test]
    fn typed_values_convert_exactly() {
        let u8s = spec(Kind::Int(Datatype::UInt8), false, None);
        let e = convert(&u8s, &Values::Int { vals: vec![-1], valid: None }, 1).unwrap_err();
        assert!(e.contains("-1 is out of range for uint8"), "{e}");
        let u64s = spec(Kind::Int(Datatype::UInt64), false, None);
        let b = convert(&u64s, &Values::Int { vals: vec![i128::from(u64::MAX)], valid: None }, 1).unwrap();
        assert_eq!(b.data, u64::MAX.to_le_bytes());
        let f64s = spec(Kind::Float(Datatype::Float64), true, None);
        let b = convert(&f64s, &Values::Int { vals: vec![3, 0], valid: Some(vec![true, false]) }, 2).unwrap();
        assert_eq!((&b.data[..8], b.validity.as_slice()), (&3.0f64.to_le_bytes()[..], &[1, 0][..]));
        let e = convert(&f64s, &Values::Int { vals: vec![(1 << 53) + 1], valid: None }, 1).unwrap_err();
        assert!(e.contains("cannot be represented exactly as float64"), "{e}");
        let f32s = spec(Kind::Float(Datatype::Float32), false, None);
        let e = convert(&f32s, &Values::F64 { vals: vec![1e300], valid: None }, 1).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let s = spec(Kind::Str(None), false, None);
        let e = convert(&s, &Values::Bytes { data: vec![0xff], ends: vec![1], valid: None }, 1).unwrap_err();
        assert!(e.contains("not valid UTF-8"), "{e}");
    }

    #[test]
    fn engine_cells_read_back() {
        let col = |data: Vec<u8>| AttrData { name: "c".into(), data, offsets: None, validity: None };
        let i16s = spec(Kind::Int(Datatype::Int16), false, None);
        assert_eq!(i16s.cell(&col([-2i16, 7].iter().flat_map(|v| v.to_le_bytes()).collect()), 0), Cell::Int(-2));
        let u32s = spec(Kind::Int(Datatype::UInt32), false, None);
        assert_eq!(u32s.cell(&col(u32::MAX.to_le_bytes().to_vec()), 0), Cell::Int(i128::from(u32::MAX)));
        let fixed = spec(Kind::Str(Some(2)), false, None);
        assert_eq!(fixed.cell(&col(b"abcd".to_vec()), 1), Cell::Bytes(b"cd"));
    }

    #[test]
    fn inference() {
        let infer = |v: Values, rows| {
            let b = Batch { first_row: 0, rows, lines: Some((2..2 + rows as u64).collect()), cols: vec![] };
            let mut inf = Inference::default();
            inf.add(&v, &b);
            inf
        };
        let i = infer(text(&[("3", false), ("", false), ("-7", false)]), 3);
        assert_eq!((i.inferred(), i.nulls, i.int_range), (Inferred::Int(Datatype::Int64), 1, Some((-7, 3))));
        let i = infer(text(&[("3", false), ("2.5", false), ("1e3", false)]), 3);
        assert_eq!((i.inferred(), i.float_range), (Inferred::Float, Some((2.5, 1000.0))));
        let i = infer(text(&[("3", false), ("x", false), ("", true)]), 3);
        assert_eq!((i.inferred(), i.first_text), (Inferred::Str, Some(("x".into(), "row 2 (line 3)".into()))));
        assert_eq!(infer(text(&[("", false)]), 1).inferred(), Inferred::Str);
        let i = infer(Values::Int { vals: vec![i128::from(u64::MAX)], valid: None }, 1);
        assert_eq!(i.inferred(), Inferred::Int(Datatype::UInt64));
    }
}
