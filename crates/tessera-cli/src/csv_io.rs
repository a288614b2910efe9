//! CSV files as tables of cells: a [`Source`] of text columns and a [`Sink`] of results.
//!
//! The first record is the header (column names, trimmed). Every record must have as many fields
//! as the header. Values are written as the shortest text that reads back to the same value
//! (`0.1`, `1e-7`, `NaN`, `inf`); an empty string is written `""` and a null as nothing, so the
//! two stay apart when read back.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};
use tessera::{AttrData, Datatype};

use crate::csv::{write_field, Reader, Record};
use crate::table::{
    f32_cell, f64_cell, int_cell, is_null, str_cell, Batch, ColumnSpec, Kind, Sink, Source, SrcColumn, SrcKind, Values,
};

/// A CSV file read in batches of rows.
pub(crate) struct CsvSource {
    path: PathBuf,
    reader: Reader<BufReader<File>>,
    columns: Vec<SrcColumn>,
    selected: Vec<usize>,
    rec: Record,
    rows_done: u64,
    file_len: u64,
}

impl CsvSource {
    /// Opens `path` and reads its header.
    ///
    /// # Errors
    /// A file that cannot be read, an empty file, or a header with empty or repeated names.
    pub(crate) fn open(path: &Path, delimiter: u8) -> Result<Self> {
        let shown = path.display();
        let file = File::open(path).with_context(|| format!("cannot open input {shown}"))?;
        let file_len = file.metadata().with_context(|| format!("cannot read {shown}"))?.len();
        let mut reader = Reader::new(BufReader::with_capacity(1 << 20, file), delimiter);
        let mut rec = Record::default();
        if !reader.read_record(&mut rec).with_context(|| format!("{shown}"))? {
            bail!("{shown} is empty: a CSV file needs a header row naming its columns");
        }
        let mut columns: Vec<SrcColumn> = Vec::new();
        for (i, name) in rec.fields().enumerate() {
            let name = name.trim().to_string();
            if name.is_empty() {
                bail!("{shown}: column {} of the header has no name", i + 1);
            }
            if columns.iter().any(|c| c.name == name) {
                bail!("{shown}: the header names column {name:?} twice");
            }
            columns.push(SrcColumn { name, kind: SrcKind::Text, type_name: "text".into() });
        }
        Ok(Self { path: path.to_path_buf(), reader, columns, selected: Vec::new(), rec, rows_done: 0, file_len })
    }
}

impl Source for CsvSource {
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
        let mut cols: Vec<Values> = self.selected.iter().map(|_| Values::text()).collect();
        let mut lines = Vec::new();
        while lines.len() < max_rows.max(1) {
            if !self.reader.read_record(&mut self.rec).with_context(|| format!("{}", self.path.display()))? {
                break;
            }
            if self.rec.len() != self.columns.len() {
                bail!(
                    "{}: line {} has {} field{}, the header has {}",
                    self.path.display(),
                    self.rec.line(),
                    self.rec.len(),
                    if self.rec.len() == 1 { "" } else { "s" },
                    self.columns.len()
                );
            }
            for (col, &c) in cols.iter_mut().zip(&self.selected) {
                if let Values::Text { text, ends, quoted } = col {
                    text.push_str(self.rec.field(c));
                    ends.push(text.len());
                    quoted.push(self.rec.is_quoted(c));
                }
            }
            lines.push(self.rec.line());
        }
        if lines.is_empty() {
            return Ok(None);
        }
        let rows = lines.len();
        let batch = Batch { first_row: self.rows_done, rows, lines: Some(lines), cols };
        self.rows_done += rows as u64;
        Ok(Some(batch))
    }

    fn progress(&self) -> (u64, u64) {
        (self.reader.bytes_read(), self.file_len)
    }
}

/// Writes results as CSV.
pub(crate) struct CsvSink {
    out: BufWriter<File>,
    specs: Vec<ColumnSpec>,
    delimiter: u8,
    line: Vec<u8>,
}

impl CsvSink {
    /// Starts a CSV file with a header naming the columns.
    ///
    /// # Errors
    /// A write failure.
    pub(crate) fn new(file: File, specs: &[ColumnSpec], delimiter: u8) -> Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        for (k, s) in specs.iter().enumerate() {
            if k > 0 {
                out.write_all(&[delimiter])?;
            }
            write_field(&mut out, s.name.as_bytes(), delimiter, false)?;
        }
        out.write_all(b"\n")?;
        Ok(Self { out, specs: specs.to_vec(), delimiter, line: Vec::with_capacity(256) })
    }
}

/// Appends cell `i` of `col` as CSV text.
fn write_cell(line: &mut Vec<u8>, spec: &ColumnSpec, col: &AttrData, i: usize, delimiter: u8) -> Result<()> {
    if is_null(col, i) {
        return Ok(());
    }
    match spec.kind {
        Kind::Int(t) => write!(line, "{}", int_cell(t, &col.data, i))?,
        Kind::Float(Datatype::Float32) => write!(line, "{:?}", f32_cell(&col.data, i))?,
        Kind::Float(_) => write!(line, "{:?}", f64_cell(&col.data, i))?,
        Kind::Str(_) => {
            let s = str_cell(spec, col, i).ok_or_else(|| anyhow!("column {}: cell {i} has no value", spec.name))?;
            write_field(line, s, delimiter, s.is_empty())?;
        }
    }
    Ok(())
}

impl Sink for CsvSink {
    fn write_batch(&mut self, cols: &[AttrData], cells: usize) -> Result<()> {
        for i in 0..cells {
            self.line.clear();
            for (k, (spec, col)) in self.specs.iter().zip(cols).enumerate() {
                if k > 0 {
                    self.line.push(self.delimiter);
                }
                write_cell(&mut self.line, spec, col, i, self.delimiter)?;
            }
            self.line.push(b'\n');
            self.out.write_all(&self.line)?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        let file = self.out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(())
    }
}
