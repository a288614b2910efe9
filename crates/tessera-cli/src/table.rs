//! Tables of cells (one row per cell, one column per dimension and attribute) exchanged with
//! sparse arrays as CSV or Parquet files.
//!
//! A [`Source`] yields [`Batch`]es of rows whose columns are [`Values`] in the file's own form
//! (CSV text, or Parquet integers, floats and byte strings). [`append`] converts one column of a
//! batch to the engine's little-endian form for a [`ColumnSpec`] (the dimension or attribute the
//! column feeds), checking each value exactly: integers must be integers within the type's range,
//! floats must fit the float type, coordinates must lie in the domain, absent values need a
//! nullable attribute. Errors name the row (and, for CSV, the line) and the column.
//!
//! The other direction, a [`Sink`] writes the columns of engine results (dimensions first, then
//! attributes) as CSV or Parquet. [`Inference`] guesses column types for `tessera import`.

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
    /// Bytes of one non-null cell of a fixed-size kind (0 for variable-length strings).
    fn cell_size(self) -> usize {
        match self {
            Kind::Int(t) | Kind::Float(t) => t.size(),
            Kind::Str(Some(n)) => n as usize,
            Kind::Str(None) => 0,
        }
    }

    /// The schema type name, e.g. `int32` or `utf8 (3 bytes)`.
    pub(crate) fn describe(self) -> String {
        match self {
            Kind::Int(t) | Kind::Float(t) => t.name().to_string(),
            Kind::Str(None) => "utf8".into(),
            Kind::Str(Some(n)) => format!("utf8 of {n} bytes"),
        }
    }
}

/// The domain of a dimension column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Bounds {
    /// Inclusive integer bounds.
    Int(i128, i128),
    /// Inclusive float bounds.
    Float(f64, f64),
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
    /// For dimensions: the domain.
    pub(crate) dim: Option<Bounds>,
}

impl ColumnSpec {
    /// The column of dimension `d`.
    pub(crate) fn of_dim(d: &Dimension) -> Self {
        // By the datatype, not the domain's JSON form: `[0, 10]` on a float dimension parses as
        // integers, and integer columns would store integer bits as float coordinates.
        let (kind, bounds) = if d.is_float() {
            let (lo, hi) = d.float_domain();
            (Kind::Float(d.datatype), Bounds::Float(lo, hi))
        } else {
            let (lo, hi) = d.int_domain();
            (Kind::Int(d.datatype), Bounds::Int(lo, hi))
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
                let n = match n {
                    CellValNum::Var => "a variable number of".to_string(),
                    CellValNum::Fixed(n) => n.to_string(),
                };
                bail!(
                    "attribute {} holds {n} {t} values per cell; CSV and Parquet columns hold one value per cell \
                     (use the Python API)",
                    a.name
                )
            }
        };
        Ok(Self { name: a.name.clone(), kind, nullable: a.nullable, dim: None })
    }

    /// "dimension x" or "attribute a".
    pub(crate) fn role(&self) -> String {
        if self.dim.is_some() {
            format!("dimension {}", self.name)
        } else {
            format!("attribute {}", self.name)
        }
    }

    /// Whether variable-length (offsets).
    pub(crate) fn is_var(&self) -> bool {
        self.kind == Kind::Str(None)
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

/// One column of a batch, in the source's form. Every variant holds one entry per row.
// Without Parquet only text columns exist.
#[cfg_attr(not(feature = "parquet"), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) enum Values {
    /// CSV fields: the concatenated text, the end of each field in it, and whether each was
    /// quoted. An unquoted empty field is an absent value.
    Text { text: String, ends: Vec<usize>, quoted: Vec<bool> },
    /// Signed integers (`valid`: `None` when the column has no nulls).
    Int { vals: Vec<i64>, valid: Option<Vec<bool>> },
    /// Unsigned 64-bit integers.
    UInt { vals: Vec<u64>, valid: Option<Vec<bool>> },
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
    /// Integers (Parquet INT32/INT64); `unsigned64`: UINT_64 values (as [`Values::UInt`]).
    Int { unsigned64: bool },
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
    /// The next at most `max_rows` rows, or `None` at the end.
    ///
    /// # Errors
    /// A malformed file (naming the line or row) or a read failure.
    fn next_batch(&mut self, max_rows: usize) -> Result<Option<Batch>>;
    /// Progress for a bar: (work done, total), in bytes of the file or an estimate.
    fn progress(&self) -> (u64, u64);
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
            | (SrcKind::Int { .. }, Kind::Int(_) | Kind::Float(_))
            | (SrcKind::Float, Kind::Float(_))
            | (SrcKind::Bytes, Kind::Str(_))
    );
    if !ok {
        bail!(
            "column {} has type {}, which cannot hold {} ({})",
            src.name,
            src.type_name,
            spec.role(),
            spec.kind.describe()
        );
    }
    Ok(())
}

/// A problem with one value: which row of the batch, and what.
#[derive(Debug)]
pub(crate) struct CellError {
    /// Row within the batch.
    pub(crate) row: usize,
    /// What is wrong with the value.
    pub(crate) detail: String,
}

/// Appends column `values` (of `rows` rows) converted for `spec` to `buf`.
///
/// # Errors
/// The first value that does not convert exactly.
pub(crate) fn append(spec: &ColumnSpec, values: &Values, rows: usize, buf: &mut ColumnBuf) -> Result<(), CellError> {
    let mut p = Pusher { spec, buf };
    let at = |row: usize| move |detail: String| CellError { row, detail };
    let valid = |v: &Option<Vec<bool>>, i: usize| v.as_ref().is_none_or(|v| v[i]);
    match values {
        Values::Text { text, ends, quoted } => {
            let mut start = 0;
            for i in 0..rows {
                let field = &text[start..ends[i]];
                start = ends[i];
                p.text(field, quoted[i]).map_err(at(i))?;
            }
        }
        Values::Int { vals, valid: v } => {
            for (i, &x) in vals.iter().enumerate().take(rows) {
                if valid(v, i) { p.int(i128::from(x), &x) } else { p.null() }.map_err(at(i))?;
            }
        }
        Values::UInt { vals, valid: v } => {
            for (i, &x) in vals.iter().enumerate().take(rows) {
                if valid(v, i) { p.int(i128::from(x), &x) } else { p.null() }.map_err(at(i))?;
            }
        }
        Values::F32 { vals, valid: v } => {
            for (i, &x) in vals.iter().enumerate().take(rows) {
                if valid(v, i) { p.float(f64::from(x), Some(x), &x) } else { p.null() }.map_err(at(i))?;
            }
        }
        Values::F64 { vals, valid: v } => {
            for (i, &x) in vals.iter().enumerate().take(rows) {
                if valid(v, i) { p.float(x, None, &x) } else { p.null() }.map_err(at(i))?;
            }
        }
        Values::Bytes { data, ends, valid: v } => {
            let mut start = 0;
            for i in 0..rows {
                let b = &data[start..ends[i]];
                start = ends[i];
                if valid(v, i) {
                    match std::str::from_utf8(b) {
                        Ok(s) => p.string(s),
                        Err(_) => Err(format!("{} is not valid UTF-8", String::from_utf8_lossy(b).escape_debug())),
                    }
                } else {
                    p.null()
                }
                .map_err(at(i))?;
            }
        }
    }
    Ok(())
}

/// Appends converted values of one spec to one buffer.
struct Pusher<'a> {
    spec: &'a ColumnSpec,
    buf: &'a mut ColumnBuf,
}

/// Whether a float's text spells an infinity (so an infinite result is not an overflow).
fn spells_infinity(t: &str) -> bool {
    t.to_ascii_lowercase().contains("inf")
}

impl Pusher<'_> {
    fn valid(&mut self) {
        if self.spec.nullable {
            self.buf.validity.push(1);
        }
    }

    fn null(&mut self) -> Result<(), String> {
        if !self.spec.nullable {
            return Err(match (self.spec.dim.is_some(), self.spec.kind) {
                (true, _) => format!("no value, but {} needs a coordinate in every row", self.spec.role()),
                (false, Kind::Str(_)) => format!(
                    "no value (null), but {} is not nullable (write \"\" for an empty string)",
                    self.spec.role()
                ),
                (false, _) => format!("no value (null), but {} is not nullable", self.spec.role()),
            });
        }
        self.buf.validity.push(0);
        match self.spec.kind {
            Kind::Str(None) => self.buf.offsets.push(self.buf.data.len() as u64),
            k => self.buf.data.resize(self.buf.data.len() + k.cell_size(), 0),
        }
        Ok(())
    }

    /// A CSV field.
    fn text(&mut self, field: &str, quoted: bool) -> Result<(), String> {
        match self.spec.kind {
            Kind::Str(_) => {
                if field.is_empty() && !quoted {
                    self.null()
                } else {
                    self.string(field)
                }
            }
            Kind::Int(t) => {
                let s = field.trim();
                if s.is_empty() {
                    return self.null();
                }
                match s.parse::<i128>() {
                    Ok(v) => self.int(v, &s),
                    Err(_) => Err(format!("{s:?} is not an integer ({} is {t})", self.spec.role())),
                }
            }
            Kind::Float(t) => {
                let s = field.trim();
                if s.is_empty() {
                    return self.null();
                }
                let bad = || format!("{s:?} is not a number ({} is {t})", self.spec.role());
                if t == Datatype::Float32 {
                    let v = s.parse::<f32>().map_err(|_| bad())?;
                    if v.is_infinite() && !spells_infinity(s) {
                        return Err(format!("{s} is out of range for float32 ({})", self.spec.role()));
                    }
                    self.float(f64::from(v), Some(v), &s)
                } else {
                    let v = s.parse::<f64>().map_err(|_| bad())?;
                    if v.is_infinite() && !spells_infinity(s) {
                        return Err(format!("{s} is out of range for float64 ({})", self.spec.role()));
                    }
                    self.float(v, None, &s)
                }
            }
        }
    }

    /// An integer `v` (shown as `shown`).
    fn int(&mut self, v: i128, shown: &dyn std::fmt::Display) -> Result<(), String> {
        match self.spec.kind {
            Kind::Int(t) => {
                let (lo, hi) = t.integer_bounds().unwrap_or((i128::MIN, i128::MAX));
                if v < lo || v > hi {
                    return Err(format!("{shown} is out of range for {t} ({})", self.spec.role()));
                }
                if let Some(Bounds::Int(dlo, dhi)) = self.spec.dim {
                    if v < dlo || v > dhi {
                        return Err(format!("{shown} is outside the domain {dlo}:{dhi} of {}", self.spec.role()));
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
                    return Err(format!("{shown} cannot be represented exactly as {t} ({})", self.spec.role()));
                }
                #[allow(clippy::cast_possible_truncation)]
                self.float(f, (t == Datatype::Float32).then_some(f as f32), shown)
            }
            Kind::Str(_) => Err(format!("{shown} is a number, {} holds strings", self.spec.role())),
        }
    }

    /// A float `v`; `as_f32`: its float32 value when the source already had one.
    fn float(&mut self, v: f64, as_f32: Option<f32>, shown: &dyn std::fmt::Display) -> Result<(), String> {
        let Kind::Float(t) = self.spec.kind else {
            return Err(format!("{shown} is not an integer ({} is {})", self.spec.role(), self.spec.kind.describe()));
        };
        #[allow(clippy::cast_possible_truncation)]
        let f32v = as_f32.unwrap_or(v as f32);
        if t == Datatype::Float32 && f32v.is_infinite() && v.is_finite() {
            return Err(format!("{shown} is out of range for float32 ({})", self.spec.role()));
        }
        if let Some(Bounds::Float(lo, hi)) = self.spec.dim {
            let x = if t == Datatype::Float32 { f64::from(f32v) } else { v };
            if !x.is_finite() {
                return Err(format!("{shown} is not a finite coordinate ({})", self.spec.role()));
            }
            if x < lo || x > hi {
                return Err(format!("{shown} is outside the domain {lo:?}:{hi:?} of {}", self.spec.role()));
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
            Kind::Str(None) => {
                self.buf.offsets.push(self.buf.data.len() as u64);
                self.buf.data.extend_from_slice(s.as_bytes());
            }
            Kind::Str(Some(n)) => {
                if s.len() != n as usize {
                    return Err(format!(
                        "{s:?} has {} bytes, but {} holds strings of exactly {n} bytes",
                        s.len(),
                        self.spec.role()
                    ));
                }
                self.buf.data.extend_from_slice(s.as_bytes());
            }
            _ => return Err(format!("{s:?} is a string, {} holds numbers", self.spec.role())),
        }
        self.valid();
        Ok(())
    }
}

/// What `tessera import` learns about a column by reading it all.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Inference {
    /// Rows seen.
    pub(crate) rows: u64,
    /// Absent values (empty CSV fields, Parquet nulls) seen.
    pub(crate) nulls: u64,
    /// Every present value is an integer.
    pub(crate) all_int: bool,
    /// Every present value is a number.
    pub(crate) all_float: bool,
    /// Integers beyond int64 (Parquet UINT_64 above 2^63 - 1).
    pub(crate) big_unsigned: bool,
    /// Smallest and largest integer seen.
    pub(crate) int_range: Option<(i128, i128)>,
    /// Smallest and largest number seen (NaN ignored).
    pub(crate) float_range: Option<(f64, f64)>,
    /// Whether a NaN or infinity was seen.
    pub(crate) non_finite: bool,
    /// The first value that is not a number, with its row, for messages.
    pub(crate) first_text: Option<(String, String)>,
    /// Where the first absent value is, for messages.
    pub(crate) first_null: Option<String>,
}

impl Default for Inference {
    fn default() -> Self {
        Self {
            rows: 0,
            nulls: 0,
            all_int: true,
            all_float: true,
            big_unsigned: false,
            int_range: None,
            float_range: None,
            non_finite: false,
            first_text: None,
            first_null: None,
        }
    }
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
    /// Whether any value is present.
    pub(crate) fn present(&self) -> u64 {
        self.rows - self.nulls
    }

    /// The column's type: integers → int64, numbers → float64, anything else (or nothing) → utf8.
    pub(crate) fn inferred(&self) -> Inferred {
        if self.present() == 0 {
            Inferred::Str
        } else if self.all_int {
            Inferred::Int(if self.big_unsigned { Datatype::UInt64 } else { Datatype::Int64 })
        } else if self.all_float {
            Inferred::Float
        } else {
            Inferred::Str
        }
    }

    fn int(&mut self, v: i128) {
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

    fn null(&mut self, where_: impl FnOnce() -> String) {
        self.nulls += 1;
        if self.first_null.is_none() {
            self.first_null = Some(where_());
        }
    }

    fn text(&mut self, where_: impl FnOnce() -> String, s: &str) {
        self.all_int = false;
        self.all_float = false;
        if self.first_text.is_none() {
            self.first_text = Some((s.to_string(), where_()));
        }
    }

    /// Takes in one column of a batch.
    pub(crate) fn add(&mut self, values: &Values, batch: &Batch) {
        let rows = batch.rows;
        self.rows += rows as u64;
        let valid = |v: &Option<Vec<bool>>, i: usize| v.as_ref().is_none_or(|v| v[i]);
        match values {
            Values::Text { text, ends, quoted } => {
                let mut start = 0;
                for i in 0..rows {
                    let field = &text[start..ends[i]];
                    start = ends[i];
                    let s = field.trim();
                    if s.is_empty() {
                        // Empty: absent for numbers; a quoted "" is an empty string.
                        if quoted[i] {
                            self.text(|| batch.locate(i), field);
                        } else {
                            self.null(|| batch.locate(i));
                        }
                        continue;
                    }
                    if self.all_int {
                        if let Ok(v) = s.parse::<i64>() {
                            self.int(i128::from(v));
                            continue;
                        }
                        self.all_int = false;
                    }
                    if self.all_float {
                        if let Ok(v) = s.parse::<f64>() {
                            self.float(v);
                            continue;
                        }
                    }
                    self.text(|| batch.locate(i), field);
                }
            }
            Values::Int { vals, valid: v } => {
                for (i, &x) in vals.iter().enumerate().take(rows) {
                    if valid(v, i) {
                        self.int(i128::from(x));
                    } else {
                        self.null(|| batch.locate(i));
                    }
                }
            }
            Values::UInt { vals, valid: v } => {
                for (i, &x) in vals.iter().enumerate().take(rows) {
                    if valid(v, i) {
                        self.big_unsigned |= i64::try_from(x).is_err();
                        self.int(i128::from(x));
                    } else {
                        self.null(|| batch.locate(i));
                    }
                }
            }
            Values::F32 { vals, valid: v } => {
                self.all_int = false;
                for (i, &x) in vals.iter().enumerate().take(rows) {
                    if valid(v, i) {
                        self.float(f64::from(x));
                    } else {
                        self.null(|| batch.locate(i));
                    }
                }
            }
            Values::F64 { vals, valid: v } => {
                self.all_int = false;
                for (i, &x) in vals.iter().enumerate().take(rows) {
                    if valid(v, i) {
                        self.float(x);
                    } else {
                        self.null(|| batch.locate(i));
                    }
                }
            }
            Values::Bytes { data, ends, valid: v } => {
                let mut start = 0;
                for i in 0..rows {
                    let b = &data[start..ends[i]];
                    start = ends[i];
                    if valid(v, i) {
                        self.text(|| batch.locate(i), &String::from_utf8_lossy(b));
                    } else {
                        self.null(|| batch.locate(i));
                    }
                }
            }
        }
    }
}

/// Writes engine results (dimension columns first, then attributes) to a file.
pub(crate) trait Sink {
    /// Writes one batch of `cells` cells: one [`AttrData`] per column spec, in order.
    ///
    /// # Errors
    /// A write failure.
    fn write_batch(&mut self, cols: &[AttrData], cells: usize) -> Result<()>;
    /// Completes the file (footer, flush, sync).
    ///
    /// # Errors
    /// A write failure.
    fn finish(self: Box<Self>) -> Result<()>;
}

/// Where the bytes of cell `i` of a string column are in its data (`None` when null).
pub(crate) fn str_range(spec: &ColumnSpec, col: &AttrData, i: usize) -> Option<std::ops::Range<usize>> {
    if is_null(col, i) {
        return None;
    }
    let len = col.data.len();
    match (&col.offsets, spec.kind) {
        (Some(o), _) => {
            let at = |x: u64| usize::try_from(x).unwrap_or(usize::MAX).min(len);
            let start = at(o[i]);
            let end = o.get(i + 1).map_or(len, |&e| at(e));
            Some(start..end.max(start))
        }
        (None, Kind::Str(Some(n))) => {
            let n = n as usize;
            Some(i * n..i * n + n)
        }
        _ => None,
    }
}

/// The bytes of cell `i` of a string column (`None` when null).
pub(crate) fn str_cell<'a>(spec: &ColumnSpec, col: &'a AttrData, i: usize) -> Option<&'a [u8]> {
    str_range(spec, col, i).map(|r| &col.data[r])
}

/// Whether cell `i` of `col` is null.
pub(crate) fn is_null(col: &AttrData, i: usize) -> bool {
    col.validity.as_ref().is_some_and(|v| v[i] == 0)
}

/// The little-endian value of cell `i` of a fixed-size numeric column, widened.
pub(crate) fn int_cell(t: Datatype, data: &[u8], i: usize) -> i128 {
    let s = t.size();
    let b = &data[i * s..i * s + s];
    match t {
        Datatype::Int8 => i128::from(i8::from_le_bytes([b[0]])),
        Datatype::Int16 => i128::from(i16::from_le_bytes([b[0], b[1]])),
        Datatype::Int32 => i128::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Datatype::Int64 => i128::from(i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
        Datatype::UInt8 => i128::from(b[0]),
        Datatype::UInt16 => i128::from(u16::from_le_bytes([b[0], b[1]])),
        Datatype::UInt32 => i128::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => i128::from(u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
    }
}

/// The value of cell `i` of a float32 column.
pub(crate) fn f32_cell(data: &[u8], i: usize) -> f32 {
    f32::from_le_bytes([data[i * 4], data[i * 4 + 1], data[i * 4 + 2], data[i * 4 + 3]])
}

/// The value of cell `i` of a float64 column.
pub(crate) fn f64_cell(data: &[u8], i: usize) -> f64 {
    f64::from_le_bytes(data[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn text(fields: &[(&str, bool)]) -> Values {
        let mut t = String::new();
        let mut ends = Vec::new();
        let mut quoted = Vec::new();
        for (f, q) in fields {
            t.push_str(f);
            ends.push(t.len());
            quoted.push(*q);
        }
        Values::Text { text: t, ends, quoted }
    }

    fn spec(kind: Kind, nullable: bool, dim: Option<Bounds>) -> ColumnSpec {
        ColumnSpec { name: "c".into(), kind, nullable, dim }
    }

    fn convert(s: &ColumnSpec, v: &Values) -> Result<ColumnBuf, String> {
        let rows = match v {
            Values::Text { ends, .. } => ends.len(),
            Values::Int { vals, .. } => vals.len(),
            Values::UInt { vals, .. } => vals.len(),
            Values::F32 { vals, .. } => vals.len(),
            Values::F64 { vals, .. } => vals.len(),
            Values::Bytes { ends, .. } => ends.len(),
        };
        let mut b = ColumnBuf::default();
        append(s, v, rows, &mut b).map_err(|e| format!("row {}: {}", e.row, e.detail))?;
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
        let dim = spec(Kind::Int(Datatype::Int64), false, Some(Bounds::Int(0, 10)));
        let e = convert(&dim, &text(&[("5", false), ("11", false)])).unwrap_err();
        assert_eq!(e, "row 1: 11 is outside the domain 0:10 of dimension c");
        let e = convert(&dim, &text(&[("", false)])).unwrap_err();
        assert!(e.contains("dimension c needs a coordinate"), "{e}");
        let f32s = spec(Kind::Float(Datatype::Float32), true, None);
        let b = convert(&f32s, &text(&[("0.1", false), ("", false), ("inf", false), ("nan", false)])).unwrap();
        assert_eq!(&b.data[..4], &0.1f32.to_le_bytes());
        assert_eq!(b.validity, vec![1, 0, 1, 1]);
        assert_eq!(b.data.len(), 16);
        assert!(convert(&f32s, &text(&[("1e39", false)])).unwrap_err().contains("out of range for float32"));
        assert!(convert(&f32s, &text(&[("x", false)])).unwrap_err().contains("\"x\" is not a number"));
        let fdim = spec(Kind::Float(Datatype::Float64), false, Some(Bounds::Float(-1.0, 1.0)));
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
        assert!(convert(&u8s, &Values::Int { vals: vec![-1], valid: None })
            .unwrap_err()
            .contains("-1 is out of range for uint8"));
        let u64s = spec(Kind::Int(Datatype::UInt64), false, None);
        let b = convert(&u64s, &Values::UInt { vals: vec![u64::MAX], valid: None }).unwrap();
        assert_eq!(b.data, u64::MAX.to_le_bytes());
        let f64s = spec(Kind::Float(Datatype::Float64), true, None);
        let b = convert(&f64s, &Values::Int { vals: vec![3, 0], valid: Some(vec![true, false]) }).unwrap();
        assert_eq!(&b.data[..8], &3.0f64.to_le_bytes());
        assert_eq!(b.validity, vec![1, 0]);
        let e = convert(&f64s, &Values::Int { vals: vec![(1 << 53) + 1], valid: None }).unwrap_err();
        assert!(e.contains("cannot be represented exactly as float64"), "{e}");
        let f32s = spec(Kind::Float(Datatype::Float32), false, None);
        assert!(convert(&f32s, &Values::F64 { vals: vec![1e300], valid: None }).unwrap_err().contains("out of range"));
        let s = spec(Kind::Str(None), false, None);
        let e = convert(&s, &Values::Bytes { data: vec![0xff], ends: vec![1], valid: None }).unwrap_err();
        assert!(e.contains("not valid UTF-8"), "{e}");
    }

    #[test]
    fn inference() {
        let batch = |v: Values, rows| {
            let b = Batch { first_row: 0, rows, lines: Some((2..2 + rows as u64).collect()), cols: vec![] };
            let mut inf = Inference::default();
            inf.add(&v, &b);
            inf
        };
        let i = batch(text(&[("3", false), ("", false), ("-7", false)]), 3);
        assert_eq!(i.inferred(), Inferred::Int(Datatype::Int64));
        assert_eq!((i.nulls, i.int_range), (1, Some((-7, 3))));
        let i = batch(text(&[("3", false), ("2.5", false), ("1e3", false)]), 3);
        assert_eq!(i.inferred(), Inferred::Float);
        assert_eq!(i.float_range, Some((2.5, 1000.0)));
        let i = batch(text(&[("3", false), ("x", false), ("", true)]), 3);
        assert_eq!(i.inferred(), Inferred::Str);
        assert_eq!(i.first_text, Some(("x".into(), "row 2 (line 3)".into())));
        let i = batch(text(&[("", false)]), 1);
        assert_eq!(i.inferred(), Inferred::Str);
        let i = batch(Values::UInt { vals: vec![u64::MAX], valid: None }, 1);
        assert_eq!(i.inferred(), Inferred::Int(Datatype::UInt64));
    }
}
