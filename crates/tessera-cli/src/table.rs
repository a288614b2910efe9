//! Files of cells (one row per cell, one column per dimension and attribute) as Arrow record
//! batches: CSV through `arrow-csv`'s reader and writer, Parquet through the `parquet` crate's.
//!
//! A CSV file's first record names its columns; `arrow-csv` parses each column read as the type
//! asked for (see `arrow::csv_type`), an empty field being null, and reports a value it cannot
//! parse or a record with another number of fields than the header with its line and column.
//! A Parquet file's logical types decide its Arrow types (`INT32 (UINT_32)` comes as `UInt32`,
//! `INT32 (DATE)` as `Date32`, ...). Written CSV files have a header; Parquet files get one row
//! group per result batch, zstd-compressed, nullable attributes as optional columns.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _, Result};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, FieldRef, Schema, SchemaRef};
use indicatif::ProgressBar;

/// The exchange formats: CSV with a delimiter, or Parquet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Csv(u8),
    #[cfg(feature = "parquet")]
    Parquet,
}

impl Format {
    /// The format of `path` by its extension (`.csv`, `.tsv`, `.txt`, `.parquet`, `.pq`); `npy`
    /// is what to say about `.npy` files (which are for dense arrays).
    pub(crate) fn of(path: &Path, delimiter: Option<&str>, npy: Option<&str>) -> Result<Self> {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        let delimiter = delimiter.map(parse_delimiter).transpose()?;
        match ext.as_deref() {
            Some("csv" | "txt") => Ok(Format::Csv(delimiter.unwrap_or(b','))),
            Some("tsv" | "tab") => Ok(Format::Csv(delimiter.unwrap_or(b'\t'))),
            Some("parquet" | "pq" | "parq") if delimiter.is_some() => {
                bail!("--delimiter applies to CSV files, not to {}", path.display())
            }
            #[cfg(feature = "parquet")]
            Some("parquet" | "pq" | "parq") => Ok(Format::Parquet),
            #[cfg(not(feature = "parquet"))]
            Some("parquet" | "pq" | "parq") => bail!(
                "{}: this tessera was built without Parquet support (cargo feature \"parquet\"); use CSV",
                path.display()
            ),
            Some("npy") if npy.is_some() => bail!("{}", npy.unwrap_or_default()),
            _ => bail!(
                "{}: unknown file type; sparse arrays are exchanged as .csv (or .tsv) and .parquet files",
                path.display()
            ),
        }
    }
}

/// Parses a `--delimiter` value: one ASCII character, or `\t` / `tab`.
///
/// # Errors
/// Anything else, or `"`, CR or LF.
pub(crate) fn parse_delimiter(s: &str) -> Result<u8> {
    let d = match s {
        "\\t" | "tab" | "\t" => b'\t',
        _ if s.len() == 1 && s.is_ascii() => s.as_bytes()[0],
        _ => bail!("--delimiter {s:?}: expected one ASCII character (or \\t / tab)"),
    };
    if matches!(d, b'"' | b'\r' | b'\n') {
        bail!("--delimiter {s:?}: a quote or line break cannot separate fields");
    }
    Ok(d)
}

/// A column of a file.
#[derive(Debug, Clone)]
pub(crate) struct Column {
    /// Its name (the CSV header or the Parquet field name).
    pub(crate) name: String,
    /// Its Arrow type (CSV: as inferred by [`columns`], else `Null`: untyped until read as asked).
    pub(crate) data_type: DataType,
    /// Its type as the file names it, for messages (e.g. `DOUBLE`; `text` in CSV).
    pub(crate) type_name: String,
}

impl Column {
    /// The column of Arrow field `f`, named `name`.
    fn new(name: &str, f: &Field, type_name: String) -> Self {
        Self { name: name.into(), data_type: f.data_type().clone(), type_name }
    }
}

fn open(path: &Path) -> Result<File> {
    File::open(path).with_context(|| format!("cannot open input {}", path.display()))
}

/// The columns of the file at `path`; with `infer` the types of a CSV file's columns are
/// inferred by `arrow-csv` from all its rows (`Int64`, `Float64`, `Boolean`, `Date32`,
/// `Timestamp`, else `Utf8`; `Null` when every field is empty).
///
/// # Errors
/// A file that cannot be read, a CSV file without header, or repeated column names.
pub(crate) fn columns(path: &Path, format: Format, infer: bool) -> Result<Vec<Column>> {
    let shown = path.display();
    let columns: Vec<Column> = match format {
        Format::Csv(d) => {
            let csv = arrow_csv::reader::Format::default().with_header(true).with_delimiter(d);
            let (schema, _) =
                csv.infer_schema(open(path)?, (!infer).then_some(0)).with_context(|| format!("{shown}"))?;
            if schema.fields().is_empty() {
                bail!("{shown} is empty: a CSV file needs a header row naming its columns");
            }
            let column = |f: &FieldRef| Column::new(f.name().trim(), f, "text".into());
            schema.fields().iter().map(column).collect()
        }
        #[cfg(feature = "parquet")]
        Format::Parquet => {
            use parquet::basic::ConvertedType;
            let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(open(path)?)
                .with_context(|| format!("{shown} is not a readable Parquet file"))?;
            let leaves = b.parquet_schema().columns();
            let type_name = |name: &str| {
                // The Parquet type of a top-level primitive column, e.g. `INT32 (UINT_32)`.
                leaves.iter().find(|c| c.path().parts() == [name]).map(|c| match c.converted_type() {
                    ConvertedType::NONE => c.physical_type().to_string(),
                    t => format!("{} ({t})", c.physical_type()),
                })
            };
            let column = |f: &FieldRef| {
                Column::new(f.name(), f, type_name(f.name()).unwrap_or_else(|| format!("{} (nested)", f.data_type())))
            };
            b.schema().fields().iter().map(column).collect()
        }
    };
    if let Some((_, c)) = columns.iter().enumerate().find(|(k, c)| columns[..*k].iter().any(|o| o.name == c.name)) {
        bail!("{shown}: the header names column {:?} twice", c.name);
    }
    Ok(columns)
}

/// A CSV source that fails at its end when it held an odd number of `"`: a quoted field left
/// open, which `arrow-csv` would otherwise read to the end of the file as one value, silently
/// swallowing the rows after it (or a stray quote, which a strict reader refuses too).
struct BalancedQuotes<R> {
    inner: R,
    odd: bool,
}

impl<R: std::io::Read> std::io::Read for BalancedQuotes<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && self.odd && !buf.is_empty() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "unbalanced quotes: a quoted field is not closed (or a '\"' stands alone)",
            ));
        }
        self.odd ^= buf[..n].iter().filter(|&&b| b == b'"').count() % 2 == 1;
        Ok(n)
    }
}

/// Batches of rows.
pub(crate) type Batches = Box<dyn Iterator<Item = Result<Vec<ArrayRef>>>>;

/// Reads the columns `picked` of the file at `path` (indices into its `columns`, with the Arrow
/// type to parse a CSV column as) in batches of at most `rows` rows, the columns in that order;
/// `bar` follows the bytes read.
///
/// # Errors
/// A file that cannot be read; the batches report values `arrow-csv` cannot parse (naming the
/// line and column) and unreadable Parquet pages.
pub(crate) fn batches(
    path: &Path,
    format: Format,
    columns: &[Column],
    picked: &[(usize, DataType)],
    rows: usize,
    bar: &ProgressBar,
) -> Result<Batches> {
    let shown = path.display().to_string();
    let names: Vec<String> = picked.iter().map(|(c, _)| columns[*c].name.clone()).collect();
    let indices = picked.iter().map(|(c, _)| *c);
    let reader: Box<dyn Iterator<Item = Result<RecordBatch>>> = match format {
        Format::Csv(d) => {
            let types = |k| picked.iter().find(|(c, _)| *c == k).map_or(DataType::Utf8, |(_, t)| t.clone());
            let fields: Vec<Field> =
                columns.iter().enumerate().map(|(k, c)| Field::new(&c.name, types(k), true)).collect();
            let reader = arrow_csv::ReaderBuilder::new(Arc::new(Schema::new(fields)))
                .with_header(true)
                .with_delimiter(d)
                .with_batch_size(rows.max(1))
                .with_projection(indices.collect())
                .build(BalancedQuotes { inner: bar.wrap_read(open(path)?), odd: false })?;
            let shown = shown.clone();
            Box::new(reader.map(move |b| b.with_context(|| shown.clone())))
        }
        #[cfg(feature = "parquet")]
        Format::Parquet => {
            let b = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(open(path)?)?;
            let (len, total) = (bar.length().unwrap_or(0), b.metadata().file_metadata().num_rows().max(1) as u64);
            let mask = parquet::arrow::ProjectionMask::roots(b.parquet_schema(), indices);
            let reader = b.with_projection(mask).with_batch_size(rows.max(1)).build()?;
            let (bar, shown, mut done) = (bar.clone(), shown.clone(), 0u64);
            Box::new(reader.map(move |b| {
                let b = b.map_err(|e| {
                    let hint = if e.to_string().contains("Disabled feature") {
                        " (this build reads Parquet pages compressed with snappy, gzip, lz4 or zstd, not brotli or lzo)"
                    } else {
                        ""
                    };
                    anyhow!("{shown}: cannot read rows after row {done}: {e}{hint}")
                })?;
                done += b.num_rows() as u64;
                bar.set_position(len * done / total);
                Ok(b)
            }))
        }
    };
    // Put the columns in the order asked (a Parquet projection keeps the file's order).
    Ok(Box::new(reader.map(move |b| {
        let b = b?;
        let cols = names.iter().map(|n| b.column_by_name(n).cloned());
        cols.collect::<Option<Vec<_>>>()
            .ok_or_else(|| anyhow!("{shown}: a selected column is missing from the rows read"))
    })))
}

/// Writes record batches (dimension columns first, then attributes) to a file.
pub(crate) enum Sink {
    Csv(arrow_csv::Writer<BufWriter<File>>),
    #[cfg(feature = "parquet")]
    Parquet(parquet::arrow::ArrowWriter<File>),
}

impl Sink {
    /// Starts a file of `format` with the columns of `schema` (a CSV file with its header).
    ///
    /// # Errors
    /// A column that cannot be described, or a write failure.
    pub(crate) fn new(file: File, format: Format, schema: &SchemaRef) -> Result<Self> {
        match format {
            Format::Csv(d) => {
                let out = BufWriter::with_capacity(1 << 20, file);
                let mut w = arrow_csv::WriterBuilder::new().with_header(true).with_delimiter(d).build(out);
                w.write(&RecordBatch::new_empty(schema.clone()))?;
                Ok(Sink::Csv(w))
            }
            #[cfg(feature = "parquet")]
            Format::Parquet => {
                use parquet::basic::{Compression, ZstdLevel};
                let props = parquet::file::properties::WriterProperties::builder()
                    .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).context("zstd level")?))
                    .set_created_by(format!("tessera {}", env!("CARGO_PKG_VERSION")))
                    .build();
                Ok(Sink::Parquet(parquet::arrow::ArrowWriter::try_new(file, schema.clone(), Some(props))?))
            }
        }
    }

    /// Writes one batch.
    ///
    /// # Errors
    /// A write failure.
    pub(crate) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match self {
            Sink::Csv(w) => w.write(batch)?,
            #[cfg(feature = "parquet")]
            Sink::Parquet(w) => {
                w.write(batch)?;
                w.flush()?;
            }
        }
        Ok(())
    }

    /// Completes the file (footer, flush, sync).
    ///
    /// # Errors
    /// A write failure.
    pub(crate) fn finish(self) -> Result<()> {
        let file = match self {
            Sink::Csv(w) => w.into_inner().into_inner().map_err(|e| e.into_error())?,
            #[cfg(feature = "parquet")]
            Sink::Parquet(w) => w.into_inner()?,
        };
        Ok(file.sync_all()?)
    }
}
