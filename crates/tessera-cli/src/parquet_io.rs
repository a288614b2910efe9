//! Parquet files as tables of cells, through the `parquet` crate's Arrow reader and writer: the
//! [`Source`] and [`Sink`] of sparse reads and writes.
//!
//! Reading projects the selected top-level columns and yields Arrow record batches (Parquet's
//! logical types decide the Arrow types: `INT32 (UINT_32)` comes as `UInt32`, `INT32 (DATE)` as
//! `Date32`, ...). Writing makes one row group per result batch, zstd-compressed; nullable
//! attributes are optional columns, the others required.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context as _, Result};
use arrow_array::RecordBatch;
use arrow_schema::Schema;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::arrow::src_kind;
use crate::sparse::{Batch, Sink, Source, SrcColumn};

/// A Parquet file read in batches of rows.
pub(crate) struct ParquetSource {
    path: PathBuf,
    /// The opened file, until [`Source::next_batch`] builds `reader` from it.
    builder: Option<ParquetRecordBatchReaderBuilder<File>>,
    reader: Option<ParquetRecordBatchReader>,
    columns: Vec<SrcColumn>,
    selected: Vec<usize>,
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
        let builder = ParquetRecordBatchReaderBuilder::try_new(file)
            .with_context(|| format!("{shown} is not a readable Parquet file"))?;
        let leaves = builder.parquet_schema();
        let columns = (builder.schema().fields().iter())
            .map(|f| {
                // The Parquet type of a top-level primitive column, e.g. `INT32 (UINT_32)`.
                let leaf = leaves.columns().iter().find(|c| c.path().parts() == [f.name().as_str()]);
                let type_name = leaf.map_or_else(
                    || format!("{} (nested)", f.data_type()),
                    |c| match c.converted_type() {
                        parquet::basic::ConvertedType::NONE => c.physical_type().to_string(),
                        t => format!("{} ({t})", c.physical_type()),
                    },
                );
                SrcColumn { name: f.name().clone(), kind: src_kind(f.data_type(), false), type_name }
            })
            .collect();
        let total_rows = u64::try_from(builder.metadata().file_metadata().num_rows()).unwrap_or(0);
        let (builder, reader) = (Some(builder), None);
        Ok(Self {
            path: path.to_path_buf(),
            builder,
            reader,
            columns,
            selected: Vec::new(),
            rows_done: 0,
            total_rows,
            file_len,
        })
    }
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
        let shown = self.path.display();
        if let Some(b) = self.builder.take() {
            let mask = ProjectionMask::roots(b.parquet_schema(), self.selected.iter().copied());
            let r = b.with_projection(mask).with_batch_size(max_rows.max(1)).build();
            self.reader = Some(r.with_context(|| format!("cannot read {shown}"))?);
        }
        let Some(batch) = self.reader.as_mut().and_then(Iterator::next) else { return Ok(None) };
        let batch = batch.map_err(|e| {
            let hint = if e.to_string().contains("Disabled feature") {
                " (this build reads Parquet pages compressed with snappy, gzip, lz4 or zstd, not brotli or lzo)"
            } else {
                ""
            };
            anyhow!("{shown}: cannot read rows after row {}: {e}{hint}", self.rows_done)
        })?;
        // The projection keeps the file's column order: put the columns in the selected order.
        let cols = (self.selected.iter())
            .map(|&c| batch.column_by_name(&self.columns[c].name).cloned())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| anyhow!("{shown}: a selected column is missing from the rows read"))?;
        let out = Batch { first_row: self.rows_done, rows: batch.num_rows(), lines: None, cols, text: false };
        self.rows_done += out.rows as u64;
        Ok(Some(out))
    }

    fn progress(&self) -> (u64, u64) {
        let done = u128::from(self.file_len) * u128::from(self.rows_done) / u128::from(self.total_rows.max(1));
        (u64::try_from(done).unwrap_or(self.file_len), self.file_len)
    }
}

/// Writes result batches as row groups of a Parquet file.
pub(crate) struct ParquetSink(ArrowWriter<File>);

impl ParquetSink {
    /// Starts a Parquet file with the columns of `schema`.
    ///
    /// # Errors
    /// A column that cannot be described, or a write failure.
    pub(crate) fn new(file: File, schema: Arc<Schema>) -> Result<Self> {
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).context("zstd level")?))
            .set_created_by(format!("tessera {}", env!("CARGO_PKG_VERSION")))
            .build();
        Ok(Self(ArrowWriter::try_new(file, schema, Some(props))?))
    }
}

impl Sink for ParquetSink {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        self.0.write(batch)?;
        Ok(self.0.flush()?)
    }

    fn finish(self: Box<Self>) -> Result<()> {
        self.0.into_inner()?.sync_all()?;
        Ok(())
    }
}
