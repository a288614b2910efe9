//! Parquet files as tables of cells, through the `parquet` crate's column API (no Arrow).
//!
//! Reading takes flat columns of physical type INT32 and INT64 (plain integers, including the
//! unsigned INTEGER/UINT_* annotations and dates, times and timestamps as their stored integers),
//! FLOAT, DOUBLE and BYTE_ARRAY (strings), required or optional (a null is an absent value). Other
//! types (BOOLEAN, INT96, FIXED_LEN_BYTE_ARRAY, DECIMAL) are reported when a column of that type is
//! needed. Batches never span row groups.
//!
//! Writing maps integer types to INT32/INT64 with their INTEGER(bits, signed) annotation, floats to
//! FLOAT/DOUBLE and strings to BYTE_ARRAY (STRING); nullable attributes become optional columns.
//! Each batch of results is one row group; pages are zstd-compressed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _, Result};
use parquet::basic::{Compression, ConvertedType, LogicalType, Repetition, Type as Physical, ZstdLevel};
use parquet::column::reader::{ColumnReader, ColumnReaderImpl};
use parquet::column::writer::ColumnWriter;
use parquet::data_type::{ByteArray, ByteArrayType, DataType, DoubleType, FloatType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::{ColumnDescriptor, Type};
use tessera::{AttrData, Datatype};

use crate::table::{Batch, Cell, ColumnSpec, Kind, Sink, Source, SrcColumn, SrcKind, Values};

/// How a Parquet column's values are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phys {
    I32 { unsigned: bool },
    I64 { unsigned: bool },
    F32,
    F64,
    Bytes,
    Unsupported,
}

/// The kind and the description of a column from its descriptor.
fn classify(d: &ColumnDescriptor) -> (Phys, String) {
    let logical = d.logical_type_ref();
    let conv = d.converted_type();
    let decimal = matches!(logical, Some(LogicalType::Decimal(_))) || conv == ConvertedType::DECIMAL;
    let unsigned = match logical {
        Some(LogicalType::Integer(t)) => !t.is_signed,
        _ => matches!(
            conv,
            ConvertedType::UINT_8 | ConvertedType::UINT_16 | ConvertedType::UINT_32 | ConvertedType::UINT_64
        ),
    };
    let phys = d.physical_type();
    let note = match (logical, conv) {
        (Some(LogicalType::Integer(t)), _) => format!(" ({}INT{})", if t.is_signed { "" } else { "U" }, t.bit_width),
        (Some(l), _) => format!(" ({l:?})"),
        (None, ConvertedType::NONE) => String::new(),
        (None, c) => format!(" ({c})"),
    };
    let kind = match phys {
        _ if decimal => Phys::Unsupported,
        _ if d.max_rep_level() > 0 => Phys::Unsupported,
        Physical::INT32 => Phys::I32 { unsigned },
        Physical::INT64 => Phys::I64 { unsigned },
        Physical::FLOAT => Phys::F32,
        Physical::DOUBLE => Phys::F64,
        Physical::BYTE_ARRAY => Phys::Bytes,
        _ => Phys::Unsupported,
    };
    let repeated = if d.max_rep_level() > 0 { ", repeated" } else { "" };
    (kind, format!("{phys}{note}{repeated}"))
}

/// A Parquet file read in batches of rows.
pub(crate) struct ParquetSource {
    path: PathBuf,
    reader: SerializedFileReader<File>,
    columns: Vec<SrcColumn>,
    phys: Vec<Phys>,
    max_def: Vec<i16>,
    selected: Vec<usize>,
    /// The next row group to open.
    next_rg: usize,
    /// Readers of the selected columns in the open row group.
    readers: Vec<ColumnReader>,
    /// Rows left in the open row group.
    rg_left: u64,
    rows_done: u64,
    total_rows: u64,
    file_len: u64,
}

impl ParquetSource {
    /// Opens `path` and reads its footer.
    ///
    /// # Errors
    /// A file that cannot be opened or is not Parquet.
    pub(crate) fn open(path: &Path) -> Result<Self> {
        let shown = path.display();
        let file = File::open(path).with_context(|| format!("cannot open input {shown}"))?;
        let file_len = file.metadata().with_context(|| format!("cannot read {shown}"))?.len();
        let reader =
            SerializedFileReader::new(file).with_context(|| format!("{shown} is not a readable Parquet file"))?;
        let meta = reader.metadata();
        let schema = meta.file_metadata().schema_descr();
        let mut columns = Vec::new();
        let mut phys = Vec::new();
        let mut max_def = Vec::new();
        for d in schema.columns() {
            let (p, type_name) = classify(d);
            let kind = match p {
                Phys::I32 { .. } | Phys::I64 { .. } => SrcKind::Int,
                Phys::F32 | Phys::F64 => SrcKind::Float,
                Phys::Bytes => SrcKind::Bytes,
                Phys::Unsupported => SrcKind::Unsupported,
            };
            columns.push(SrcColumn { name: d.path().string(), kind, type_name });
            phys.push(p);
            max_def.push(d.max_def_level());
        }
        let total_rows = u64::try_from(meta.file_metadata().num_rows()).unwrap_or(0);
        Ok(Self {
            path: path.to_path_buf(),
            reader,
            columns,
            phys,
            max_def,
            selected: Vec::new(),
            next_rg: 0,
            readers: Vec::new(),
            rg_left: 0,
            rows_done: 0,
            total_rows,
            file_len,
        })
    }

    fn read_column(&mut self, k: usize, n: usize) -> Result<Values> {
        let c = self.selected[k];
        let max_def = self.max_def[c];
        let name = &self.columns[c].name;
        let ctx = || format!("{}: cannot read column {name}", self.path.display());
        let reader = &mut self.readers[k];
        let values = match (self.phys[c], reader) {
            (Phys::I32 { unsigned }, ColumnReader::Int32ColumnReader(r)) => {
                let (v, valid) = read_n::<Int32Type>(r, n, max_def).with_context(ctx)?;
                let vals = v.into_iter().map(|x| if unsigned { x.cast_unsigned().into() } else { x.into() }).collect();
                Values::Int { vals, valid }
            }
            (Phys::I64 { unsigned }, ColumnReader::Int64ColumnReader(r)) => {
                let (v, valid) = read_n::<Int64Type>(r, n, max_def).with_context(ctx)?;
                let vals = v.into_iter().map(|x| if unsigned { x.cast_unsigned().into() } else { x.into() }).collect();
                Values::Int { vals, valid }
            }
            (Phys::F32, ColumnReader::FloatColumnReader(r)) => {
                let (vals, valid) = read_n::<FloatType>(r, n, max_def).with_context(ctx)?;
                Values::F32 { vals, valid }
            }
            (Phys::F64, ColumnReader::DoubleColumnReader(r)) => {
                let (vals, valid) = read_n::<DoubleType>(r, n, max_def).with_context(ctx)?;
                Values::F64 { vals, valid }
            }
            (Phys::Bytes, ColumnReader::ByteArrayColumnReader(r)) => {
                let (v, valid) = read_n::<ByteArrayType>(r, n, max_def).with_context(ctx)?;
                let mut data = Vec::new();
                let mut ends = Vec::with_capacity(v.len());
                for (i, b) in v.iter().enumerate() {
                    // Null rows hold an unset ByteArray, whose data() panics.
                    if valid.as_ref().is_none_or(|ok| ok[i]) {
                        data.extend_from_slice(b.data());
                    }
                    ends.push(data.len());
                }
                Values::Bytes { data, ends, valid }
            }
            _ => bail!(
                "{}: column {name} has type {}, which tessera cannot read",
                self.path.display(),
                self.columns[c].type_name
            ),
        };
        Ok(values)
    }
}

/// One value per row (a default where null) and, when some are null, which rows are valid.
type Column<T> = (Vec<T>, Option<Vec<bool>>);

/// Reads `n` rows of a column.
fn read_n<T: DataType>(r: &mut ColumnReaderImpl<T>, n: usize, max_def: i16) -> Result<Column<T::T>> {
    let mut defs: Vec<i16> = Vec::with_capacity(if max_def > 0 { n } else { 0 });
    let mut vals: Vec<T::T> = Vec::with_capacity(n);
    let mut got = 0;
    while got < n {
        let (records, _, _) = r.read_records(n - got, Some(&mut defs), None, &mut vals)?;
        if records == 0 {
            bail!("the column chunk ended after {got} of {n} rows");
        }
        got += records;
    }
    if max_def == 0 || defs.iter().all(|&d| d == max_def) {
        return Ok((vals, None));
    }
    // Spread the non-null values over their rows.
    let valid: Vec<bool> = defs.iter().map(|&d| d == max_def).collect();
    let mut out = Vec::with_capacity(n);
    let mut it = vals.into_iter();
    for &v in &valid {
        out.push(if v {
            it.next().ok_or_else(|| anyhow!("fewer values than definition levels"))?
        } else {
            T::T::default()
        });
    }
    Ok((out, Some(valid)))
}

impl Source for ParquetSource {
    fn path(&self) -> &Path {
        &self.path
    }

    fn columns(&self) -> &[SrcColumn] {
        &self.columns
    }

    fn select(&mut self, cols: &[usize]) {
        self.selected = cols.to_vec();
    }

    fn next_batch(&mut self, max_rows: usize) -> Result<Option<Batch>> {
        while self.rg_left == 0 {
            if self.next_rg >= self.reader.num_row_groups() {
                return Ok(None);
            }
            let rg = self
                .reader
                .get_row_group(self.next_rg)
                .with_context(|| format!("{}: cannot read row group {}", self.path.display(), self.next_rg))?;
            self.rg_left = u64::try_from(rg.metadata().num_rows()).unwrap_or(0);
            self.readers = self
                .selected
                .iter()
                .map(|&c| rg.get_column_reader(c))
                .collect::<parquet::errors::Result<Vec<_>>>()
                .map_err(|e| {
                    let hint = if e.to_string().contains("Disabled feature") {
                        " (this build reads Parquet pages compressed with snappy, gzip, lz4 or zstd, not brotli \
                         or lzo)"
                    } else {
                        ""
                    };
                    anyhow!("{}: cannot read row group {}: {e}{hint}", self.path.display(), self.next_rg)
                })?;
            self.next_rg += 1;
        }
        let n = usize::try_from(self.rg_left).unwrap_or(usize::MAX).min(max_rows.max(1));
        let mut cols = Vec::with_capacity(self.selected.len());
        for k in 0..self.selected.len() {
            cols.push(self.read_column(k, n)?);
        }
        let batch = Batch { first_row: self.rows_done, rows: n, lines: None, cols };
        self.rg_left -= n as u64;
        self.rows_done += n as u64;
        Ok(Some(batch))
    }

    fn progress(&self) -> (u64, u64) {
        let done = if self.total_rows == 0 {
            0
        } else {
            (u128::from(self.file_len) * u128::from(self.rows_done) / u128::from(self.total_rows)) as u64
        };
        (done, self.file_len)
    }
}

/// The Parquet field of a column.
fn field_of(spec: &ColumnSpec) -> Result<Type> {
    let (phys, logical) = match spec.kind {
        Kind::Int(t) => {
            let signed = matches!(t, Datatype::Int8 | Datatype::Int16 | Datatype::Int32 | Datatype::Int64);
            let bits = i8::try_from(8 * t.size()).unwrap_or(64);
            let phys = if t.size() == 8 { Physical::INT64 } else { Physical::INT32 };
            (phys, Some(LogicalType::integer(bits, signed)))
        }
        Kind::Float(Datatype::Float32) => (Physical::FLOAT, None),
        Kind::Float(_) => (Physical::DOUBLE, None),
        Kind::Str(_) => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
    };
    let repetition = if spec.nullable { Repetition::OPTIONAL } else { Repetition::REQUIRED };
    Type::primitive_type_builder(&spec.name, phys)
        .with_repetition(repetition)
        .with_logical_type(logical)
        .build()
        .with_context(|| format!("cannot describe column {} in Parquet", spec.name))
}

/// Writes result batches as row groups of a Parquet file.
pub(crate) struct ParquetSink {
    writer: SerializedFileWriter<File>,
    specs: Vec<ColumnSpec>,
}

impl ParquetSink {
    /// Starts a Parquet file with one column per spec.
    ///
    /// # Errors
    /// A column that cannot be described, or a write failure.
    pub(crate) fn new(file: File, specs: &[ColumnSpec]) -> Result<Self> {
        let fields = specs.iter().map(|s| field_of(s).map(Arc::new)).collect::<Result<Vec<_>>>()?;
        let schema = Type::group_type_builder("schema")
            .with_fields(fields)
            .build()
            .context("cannot build the Parquet schema")?;
        let level = ZstdLevel::try_new(3).context("zstd level")?;
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(level))
            .set_created_by(format!("tessera {}", env!("CARGO_PKG_VERSION")))
            .build();
        let writer = SerializedFileWriter::new(file, Arc::new(schema), Arc::new(props))?;
        Ok(Self { writer, specs: specs.to_vec() })
    }
}

impl Sink for ParquetSink {
    fn write_batch(&mut self, cols: &[AttrData], cells: usize) -> Result<()> {
        let mut rg = self.writer.next_row_group()?;
        for (spec, col) in self.specs.iter().zip(cols) {
            let mut cw = rg.next_column()?.ok_or_else(|| anyhow!("the Parquet schema has too few columns"))?;
            let valid = |i: &usize| col.validity.as_ref().is_none_or(|v| v[*i] != 0);
            let defs: Option<Vec<i16>> = spec.nullable.then(|| (0..cells).map(|i| i16::from(valid(&i))).collect());
            let defs = defs.as_deref();
            let rows = (0..cells).filter(valid);
            let int = |i: usize| if let Cell::Int(x) = spec.cell(col, i) { x } else { 0 };
            // Integers as their i32/i64 bit patterns (UINT32 above 2^31 - 1 wraps, as Parquet stores it).
            #[allow(clippy::cast_possible_truncation)]
            match cw.untyped() {
                ColumnWriter::Int32ColumnWriter(w) => {
                    w.write_batch(&rows.map(|i| int(i) as i32).collect::<Vec<_>>(), defs, None)?;
                }
                ColumnWriter::Int64ColumnWriter(w) => {
                    w.write_batch(&rows.map(|i| int(i) as i64).collect::<Vec<_>>(), defs, None)?;
                }
                ColumnWriter::FloatColumnWriter(w) => {
                    let v = rows.map(|i| if let Cell::F32(x) = spec.cell(col, i) { x } else { 0.0 });
                    w.write_batch(&v.collect::<Vec<_>>(), defs, None)?;
                }
                ColumnWriter::DoubleColumnWriter(w) => {
                    let v = rows.map(|i| if let Cell::F64(x) = spec.cell(col, i) { x } else { 0.0 });
                    w.write_batch(&v.collect::<Vec<_>>(), defs, None)?;
                }
                ColumnWriter::ByteArrayColumnWriter(w) => {
                    // One copy of the column, sliced per cell.
                    let all = bytes::Bytes::copy_from_slice(&col.data);
                    let v: Vec<ByteArray> = rows.map(|i| ByteArray::from(all.slice(spec.str_range(col, i)))).collect();
                    w.write_batch(&v, defs, None)?;
                }
                _ => bail!("column {}: internal error: Parquet writer type mismatch", spec.name),
            }
            cw.close()?;
        }
        rg.close()?;
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let file = self.writer.into_inner()?;
        file.sync_all()?;
        Ok(())
    }
}
