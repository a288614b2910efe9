//! CSV files as tables of cells: a strict record reader over `csv-core`, a field writer, and the
//! [`Source`] and [`Sink`] of sparse reads and writes, which exchange Arrow record batches.
//!
//! `csv-core` splits the input into fields (RFC 4180: LF or CRLF records, a one-byte delimiter,
//! quoted fields in which delimiters and line breaks are data and `""` is one quote; blank lines
//! and a UTF-8 byte order mark are skipped). It accepts any input; on top of it [`Reader`] looks
//! at each field's raw bytes to be strict and to tell an empty string (`""`) from an absent value
//! (nothing between two delimiters): a quote inside an unquoted field, anything but the delimiter
//! or the end of the line after a closing quote, and a quoted field still open at the end of the
//! input are errors naming the line, and every record must be valid UTF-8.
//!
//! The first record is the header (column names, trimmed); every record must have as many fields
//! as the header. Values are written as the shortest text that reads back to the same value
//! (`0.1`, `1e-7`, `NaN`, `inf`); an empty string is written `""` and a null as nothing.
//!
//! `arrow-csv` is not used because it cannot keep this contract: it reads `""` and an absent value
//! alike, accepts malformed quoting, names records rather than lines in errors, and writes
//! floats in another form (`1.0e300` for `1e300`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use std::sync::Arc;

use anyhow::{anyhow, bail, Context as _, Result};
use arrow_array::builder::StringBuilder;
use arrow_array::{ArrayRef, RecordBatch};
use csv_core::ReadRecordResult;

use crate::arrow::{values, SrcKind, Value};
use crate::sparse::{Batch, Sink, Source, SrcColumn};

/// One record: its fields' text (unescaped), which were quoted, and the line it starts on.
#[derive(Debug, Default, Clone)]
pub struct Record {
    text: String,
    ends: Vec<usize>,
    quoted: Vec<bool>,
    line: u64,
}

impl Record {
    /// Number of fields.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether the record has no fields.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The text of field `i` (quotes removed, `""` turned into `"`).
    pub fn field(&self, i: usize) -> &str {
        &self.text[if i == 0 { 0 } else { self.ends[i - 1] }..self.ends[i]]
    }

    /// Whether field `i` was enclosed in quotes.
    pub fn is_quoted(&self, i: usize) -> bool {
        self.quoted[i]
    }

    /// The (1-based) line the record starts on.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The fields as strings.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        (0..self.len()).map(|i| self.field(i))
    }
}

/// Reads records from a buffered input, strictly (see the module documentation).
#[derive(Debug)]
pub struct Reader<R> {
    input: R,
    core: csv_core::Reader,
    delimiter: u8,
    /// Lines started so far (1-based line of the next byte).
    line: u64,
    /// Bytes read so far.
    bytes: u64,
    /// The raw bytes of the record being read, its unescaped fields and their ends.
    raw: Vec<u8>,
    out: Vec<u8>,
    ends: Vec<usize>,
    /// Splits a record with quotes into fields again.
    fields: csv_core::Reader,
}

impl<R: BufRead> Reader<R> {
    /// A reader of `input` with fields separated by `delimiter` (which must not be `"`, CR or
    /// LF).
    pub fn new(input: R, delimiter: u8) -> Self {
        let core = csv_core::ReaderBuilder::new().delimiter(delimiter).build();
        let fields = csv_core::ReaderBuilder::new().delimiter(delimiter).build();
        Self {
            input,
            core,
            delimiter,
            line: 1,
            bytes: 0,
            raw: Vec::new(),
            out: vec![0; 256],
            ends: vec![0; 16],
            fields,
        }
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Reads the next record into `rec`; `false` at the end of the input.
    ///
    /// # Errors
    /// Bad quoting or invalid UTF-8 (`line N: ...`), or a read failure.
    pub fn read_record(&mut self, rec: &mut Record) -> io::Result<bool> {
        let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidData, msg);
        let (first, mut used, mut nends) = (self.bytes == 0, 0, 0);
        self.raw.clear();
        loop {
            let input = self.input.fill_buf()?;
            if used == self.out.len() {
                self.out.resize(self.out.len() * 2, 0);
            }
            if nends == self.ends.len() {
                self.ends.resize(self.ends.len() * 2, 0);
            }
            let (res, nin, nout, nend) = self.core.read_record(input, &mut self.out[used..], &mut self.ends[nends..]);
            self.raw.extend_from_slice(&input[..nin]);
            self.input.consume(nin);
            self.bytes += nin as u64;
            (used, nends) = (used + nout, nends + nend);
            match res {
                ReadRecordResult::End => return Ok(false),
                ReadRecordResult::Record => break,
                _ => {}
            }
        }
        let raw = &self.raw;
        // Blank lines and the LF of a CRLF come before a record's first field.
        let lead = raw.iter().take_while(|&&c| c == b'\r' || c == b'\n').count();
        rec.line = self.line + raw[..lead].iter().filter(|&&c| c == b'\n').count() as u64;
        self.line += raw.iter().filter(|&&c| c == b'\n').count() as u64;
        rec.ends.clear();
        rec.ends.extend_from_slice(&self.ends[..nends]);
        rec.quoted.clear();
        if raw[lead..].contains(&b'"') {
            // Split the record's raw bytes into fields again, to check their quotes.
            let fields = &mut self.fields;
            fields.reset();
            let mut at = lead + if first && raw[lead..].starts_with(b"\xEF\xBB\xBF") { 3 } else { 0 };
            let mut scratch = vec![0; raw.len()];
            for n in 1..=nends {
                let (_, nin, _) = fields.read_field(&raw[at..], &mut scratch);
                let line = rec.line + raw[lead..at].iter().filter(|&&c| c == b'\n').count() as u64;
                let quoted = check_quotes(&raw[at..at + nin], self.delimiter, n)
                    .map_err(|e| invalid(format!("line {line}: {e}")))?;
                rec.quoted.push(quoted);
                at += nin;
            }
        } else {
            rec.quoted.resize(nends, false);
        }
        let text = std::str::from_utf8(&self.out[..used]).map_err(|e| {
            let at = e.valid_up_to();
            invalid(format!("line {}: the record is not valid UTF-8 (at byte {at} of its fields)", rec.line))
        })?;
        rec.text.clear();
        rec.text.push_str(text);
        Ok(true)
    }
}

/// Checks the quotes of field number `n` from its raw bytes (a delimiter or line end may
/// follow); returns whether it was quoted.
fn check_quotes(raw: &[u8], delimiter: u8, n: usize) -> Result<bool, String> {
    let body = match raw.strip_suffix(&[delimiter]) {
        Some(b) => b,
        None => &raw[..raw.len() - raw.iter().rev().take_while(|&&c| c == b'\r' || c == b'\n').count()],
    };
    let Some(inner) = body.strip_prefix(b"\"") else {
        if body.contains(&b'"') {
            return Err(format!(
                "field {n} has a quote inside an unquoted value (quote the whole field and double the quote: \"a\"\"b\")"
            ));
        }
        return Ok(false);
    };
    let mut i = 0;
    while i < inner.len() {
        if inner[i] == b'"' {
            match inner.get(i + 1) {
                None => return Ok(true),
                Some(b'"') => i += 1,
                Some(&c) => {
                    return Err(format!(
                        "field {n} has {:?} after its closing quote (expected the delimiter or the end of the line)",
                        char::from(c)
                    ))
                }
            }
        }
        i += 1;
    }
    // A quoted field's line break ends it only when it is closed: an unclosed one ran to the end.
    Err("a quoted field is not closed (missing '\"') before the end of the file".into())
}

/// Appends `field` to `out`, quoted if it must be (it holds the delimiter, a quote, CR or LF) or
/// if `force` (empty strings, so they read back as strings and not as absent values).
///
/// # Errors
/// A write failure.
pub fn write_field(out: &mut impl Write, field: &[u8], delimiter: u8, force: bool) -> io::Result<()> {
    if !force && !field.iter().any(|&c| c == delimiter || c == b'"' || c == b'\n' || c == b'\r') {
        return out.write_all(field);
    }
    out.write_all(b"\"")?;
    for part in field.split_inclusive(|&c| c == b'"') {
        out.write_all(part)?;
        if part.ends_with(b"\"") {
            out.write_all(b"\"")?;
        }
    }
    out.write_all(b"\"")
}

/// Parses a `--delimiter` value: one ASCII character, or `\t` / `tab`.
///
/// # Errors
/// Anything else, or `"`, CR or LF.
pub fn parse_delimiter(s: &str) -> Result<u8> {
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

/// A CSV file read in batches of rows: one nullable `Utf8` column per selected column, null for
/// an absent value (nothing between two delimiters) and `""` for a quoted empty string.
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
        let mut cols: Vec<StringBuilder> = self.selected.iter().map(|_| StringBuilder::new()).collect();
        let mut lines = Vec::new();
        while lines.len() < max_rows.max(1) {
            if !self.reader.read_record(&mut self.rec).with_context(|| format!("{}", self.path.display()))? {
                break;
            }
            let (n, want) = (self.rec.len(), self.columns.len());
            if n != want {
                let line = self.rec.line();
                bail!(
                    "{}: line {line} has {n} field{}, the header has {want}",
                    self.path.display(),
                    crate::plural(n as u64)
                );
            }
            for (col, &c) in cols.iter_mut().zip(&self.selected) {
                let field = self.rec.field(c);
                if field.is_empty() && !self.rec.is_quoted(c) {
                    col.append_null();
                } else {
                    col.append_value(field);
                }
            }
            lines.push(self.rec.line());
        }
        if lines.is_empty() {
            return Ok(None);
        }
        let cols = cols.iter_mut().map(|c| Arc::new(c.finish()) as ArrayRef).collect();
        let batch = Batch { first_row: self.rows_done, rows: lines.len(), lines: Some(lines), cols, text: true };
        self.rows_done += batch.rows as u64;
        Ok(Some(batch))
    }

    fn progress(&self) -> (u64, u64) {
        (self.reader.bytes_read(), self.file_len)
    }
}

/// Writes results as CSV: integers in decimal, floats as the shortest text that reads back
/// exactly, bools as `true`/`false`, strings quoted when needed (always when empty), nulls as
/// nothing (times come as ISO text strings).
pub(crate) struct CsvSink {
    out: BufWriter<File>,
    delimiter: u8,
}

impl CsvSink {
    /// Starts a CSV file with a header naming the columns.
    ///
    /// # Errors
    /// A write failure.
    pub(crate) fn new(file: File, names: &[&str], delimiter: u8) -> Result<Self> {
        let mut out = BufWriter::with_capacity(1 << 20, file);
        for (k, name) in names.iter().enumerate() {
            if k > 0 {
                out.write_all(&[delimiter])?;
            }
            write_field(&mut out, name.as_bytes(), delimiter, false)?;
        }
        out.write_all(b"\n")?;
        Ok(Self { out, delimiter })
    }
}

impl Sink for CsvSink {
    fn write_batch(&mut self, batch: &RecordBatch) -> Result<()> {
        let cols = batch.columns().iter().map(|a| values(a.as_ref())).collect::<Result<Vec<_>, _>>();
        let (cols, out, d) = (cols.map_err(|e| anyhow!("{e}"))?, &mut self.out, self.delimiter);
        for i in 0..batch.num_rows() {
            for (k, value) in cols.iter().enumerate() {
                if k > 0 {
                    out.write_all(&[d])?;
                }
                match value(i) {
                    Value::Null => {}
                    Value::Int(v) => out.write_all(itoa::Buffer::new().format(v).as_bytes())?,
                    Value::Float(_, Some(v)) => write!(out, "{v:?}")?,
                    Value::Float(v, None) => write!(out, "{v:?}")?,
                    Value::Bool(v) => out.write_all(if v { b"true" } else { b"false" })?,
                    Value::Str(s) => write_field(out, s.as_bytes(), d, s.is_empty())?,
                    Value::Bytes(s) => write_field(out, s, d, s.is_empty())?,
                }
            }
            out.write_all(b"\n")?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<()> {
        self.out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Records as (line, fields as (text, quoted)).
    type Parsed = Vec<(u64, Vec<(String, bool)>)>;

    fn parse(text: &[u8]) -> Result<Parsed, String> {
        let mut r = Reader::new(text, b',');
        let mut rec = Record::default();
        let mut out = Vec::new();
        while r.read_record(&mut rec).map_err(|e| e.to_string())? {
            out.push((rec.line(), (0..rec.len()).map(|i| (rec.field(i).to_string(), rec.is_quoted(i))).collect()));
        }
        Ok(out)
    }

    fn fields(text: &str) -> Vec<Vec<String>> {
        parse(text.as_bytes()).unwrap().into_iter().map(|(_, f)| f.into_iter().map(|x| x.0).collect()).collect()
    }

    #[test]
    fn rfc4180_records() {
        assert_eq!(fields("a,b,c\n1,2,3\n"), vec![vec!["a", "b", "c"], vec!["1", "2", "3"]]);
        // CRLF, no final newline, empty fields.
        assert_eq!(fields("a,b\r\n,\r\nx,"), vec![vec!["a", "b"], vec!["", ""], vec!["x", ""]]);
        // Quotes: embedded delimiter, doubled quote, embedded CRLF and LF.
        let quoted = "\"a,b\",\"say \"\"hi\"\"\",\"l1\r\nl2\nl3\"\n";
        assert_eq!(fields(quoted), vec![vec!["a,b", "say \"hi\"", "l1\r\nl2\nl3"]]);
        // Blank lines are skipped; a BOM is dropped; lines are counted with embedded newlines.
        let p = parse("\u{feff}h\n\n\"x\ny\"\n\r\nz\n".as_bytes()).unwrap();
        assert_eq!(p[0].1[0].0, "h");
        assert_eq!((p[1].0, p[1].1[0].0.as_str()), (3, "x\ny"));
        assert_eq!((p[2].0, p[2].1[0].0.as_str()), (6, "z"));
        // Quoted flags distinguish "" from nothing; a line of one quoted empty field is a record.
        let p = parse(b"\"\",,\"q\"\n").unwrap();
        assert_eq!(p[0].1, vec![("".into(), true), ("".into(), false), ("q".into(), true)]);
        assert_eq!(fields("\"\"\n"), vec![vec![""]]);
        let mut r = Reader::new("a\tb,c\n".as_bytes(), b'\t');
        let mut rec = Record::default();
        assert!(r.read_record(&mut rec).unwrap());
        assert_eq!(rec.fields().collect::<Vec<_>>(), vec!["a", "b,c"]);
        assert!(!r.read_record(&mut rec).unwrap());
        // Fields longer than the initial output buffer.
        let long = "y".repeat(10_000);
        assert_eq!(fields(&format!("{long},\"{long}\"\n")), vec![vec![long.clone(), long]]);
    }

    #[test]
    fn malformed_input_names_the_line() {
        for (text, want) in [
            (&b"a\n\"open\n\nmore"[..], "line 2: a quoted field is not closed"),
            (b"a,b\n1,x\"y\n", "line 2: field 2 has a quote inside an unquoted value"),
            (b"a\n\"x\"y\n", "line 2: field 1 has 'y' after its closing quote"),
            (b"a\n\xff\n", "line 2: the record is not valid UTF-8"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn written_fields_read_back() {
        let values = ["plain", "", "a,b", "q\"uote", "two\nlines", "cr\r\nlf", " spaced "];
        let mut out = Vec::new();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_field(&mut out, v.as_bytes(), b',', v.is_empty()).unwrap();
        }
        out.push(b'\n');
        assert!(out.starts_with(b"plain,\"\",\"a,b\",\"q\"\"uote\""));
        let back = parse(&out).unwrap();
        assert_eq!(back[0].1.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), values);
        assert!(back[0].1[1].1, "the empty string is quoted");
        assert_eq!(parse_delimiter("\\t").unwrap(), b'\t');
        assert!(parse_delimiter("\"").is_err() && parse_delimiter(",,").is_err());
    }
}
