//! A small RFC 4180 CSV reader and writer.
//!
//! Records end at LF or CRLF; fields are separated by a one-byte delimiter (`,` by default);
//! a field may be enclosed in double quotes, inside which delimiters, CR and LF are data and a
//! doubled quote `""` stands for one quote. The reader is strict about quotes: a quote inside an
//! unquoted field, anything but a delimiter or the end of the line after a closing quote, and a
//! quoted field still open at the end of the input are errors naming the line. It remembers
//! whether each field was quoted, so callers can tell an empty string (`""`) from an absent
//! value (nothing between two delimiters). Blank lines are skipped, a UTF-8 byte order mark at
//! the start is ignored, and every record must be valid UTF-8.
//!
//! The writer quotes a field only when it has to (it contains the delimiter, a quote, CR or LF)
//! or when asked to (empty strings, so they read back as strings and not as absent values), and
//! ends records with LF.

use std::fmt;
use std::io::{self, BufRead, Write};

/// A CSV syntax error.
#[derive(Debug)]
pub enum CsvError {
    /// Bad quoting, invalid UTF-8, ...: what is wrong, at which line (1-based).
    Syntax {
        /// Line where the problem is (for an unterminated quote: where the field starts).
        line: u64,
        /// What is wrong.
        detail: String,
    },
    /// The input could not be read.
    Io(io::Error),
}

impl fmt::Display for CsvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CsvError::Syntax { line, detail } => write!(f, "line {line}: {detail}"),
            CsvError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for CsvError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CsvError::Io(e) => Some(e),
            CsvError::Syntax { .. } => None,
        }
    }
}

impl From<io::Error> for CsvError {
    fn from(e: io::Error) -> Self {
        CsvError::Io(e)
    }
}

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
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.text[start..self.ends[i]]
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

/// Where the parser is inside a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a field.
    Start,
    /// Inside an unquoted field.
    Unquoted,
    /// Inside a quoted field.
    Quoted,
    /// Just after a quote inside a quoted field: a closing quote or the first of `""`.
    QuoteInQuoted,
}

/// Reads records from a buffered input.
#[derive(Debug)]
pub struct Reader<R> {
    input: R,
    delimiter: u8,
    /// Lines read so far.
    line: u64,
    /// Bytes read so far.
    bytes: u64,
    line_buf: Vec<u8>,
    at_start: bool,
}

impl<R: BufRead> Reader<R> {
    /// A reader of `input` with fields separated by `delimiter` (which must not be `"`, CR or
    /// LF).
    pub fn new(input: R, delimiter: u8) -> Self {
        Self { input, delimiter, line: 0, bytes: 0, line_buf: Vec::new(), at_start: true }
    }

    /// Bytes consumed so far.
    pub fn bytes_read(&self) -> u64 {
        self.bytes
    }

    /// Reads the next record into `rec`; `false` at the end of the input.
    ///
    /// # Errors
    /// Bad quoting, invalid UTF-8 or a read failure.
    pub fn read_record(&mut self, rec: &mut Record) -> Result<bool, CsvError> {
        let mut bytes = std::mem::take(&mut rec.text).into_bytes();
        bytes.clear();
        rec.ends.clear();
        rec.quoted.clear();
        let mut state = State::Start;
        let mut quote_line = 0;
        loop {
            self.line_buf.clear();
            let n = self.input.read_until(b'\n', &mut self.line_buf)?;
            self.bytes += n as u64;
            if n == 0 {
                // End of input.
                return match state {
                    State::Quoted => Err(CsvError::Syntax {
                        line: quote_line,
                        detail: "a quoted field is not closed (missing '\"') before the end of the file".into(),
                    }),
                    State::Start if rec.ends.is_empty() => Ok(false),
                    _ => {
                        rec.ends.push(bytes.len());
                        rec.quoted.push(state == State::QuoteInQuoted);
                        self.finish(rec, bytes)?;
                        Ok(true)
                    }
                };
            }
            self.line += 1;
            let mut line: &[u8] = &self.line_buf;
            if self.at_start {
                self.at_start = false;
                if let Some(rest) = line.strip_prefix(b"\xEF\xBB\xBF") {
                    line = rest;
                }
            }
            if state == State::Start && rec.ends.is_empty() {
                rec.line = self.line;
                if line == b"\n" || line == b"\r\n" {
                    continue; // a blank line
                }
            }
            let mut i = 0;
            while i < line.len() {
                let c = line[i];
                let at_eol = c == b'\n' || (c == b'\r' && line.get(i + 1) == Some(&b'\n'));
                match state {
                    State::Start | State::Unquoted | State::QuoteInQuoted if at_eol => {
                        rec.ends.push(bytes.len());
                        rec.quoted.push(state == State::QuoteInQuoted);
                        self.finish(rec, bytes)?;
                        return Ok(true);
                    }
                    State::Start if c == b'"' => {
                        state = State::Quoted;
                        quote_line = self.line;
                    }
                    State::Start | State::Unquoted | State::QuoteInQuoted if c == self.delimiter => {
                        rec.ends.push(bytes.len());
                        rec.quoted.push(state == State::QuoteInQuoted);
                        state = State::Start;
                    }
                    State::Start | State::Unquoted => {
                        if c == b'"' {
                            return Err(CsvError::Syntax {
                                line: self.line,
                                detail: format!(
                                    "field {} has a quote inside an unquoted value (quote the whole field and \
                                     double the quote: \"a\"\"b\")",
                                    rec.ends.len() + 1
                                ),
                            });
                        }
                        bytes.push(c);
                        state = State::Unquoted;
                    }
                    State::Quoted => {
                        if c == b'"' {
                            state = State::QuoteInQuoted;
                        } else {
                            bytes.push(c);
                        }
                    }
                    State::QuoteInQuoted => {
                        if c == b'"' {
                            bytes.push(b'"');
                            state = State::Quoted;
                        } else {
                            return Err(CsvError::Syntax {
                                line: self.line,
                                detail: format!(
                                    "field {} has {:?} after its closing quote (expected the delimiter or the end \
                                     of the line)",
                                    rec.ends.len() + 1,
                                    char::from(c)
                                ),
                            });
                        }
                    }
                }
                i += 1;
            }
            // The line ended without a newline (end of input) or inside a quoted field: go on.
        }
    }

    fn finish(&self, rec: &mut Record, bytes: Vec<u8>) -> Result<(), CsvError> {
        match String::from_utf8(bytes) {
            Ok(s) => {
                rec.text = s;
                Ok(())
            }
            Err(e) => Err(CsvError::Syntax {
                line: rec.line,
                detail: format!(
                    "the record is not valid UTF-8 (at byte {} of its fields)",
                    e.utf8_error().valid_up_to()
                ),
            }),
        }
    }
}

/// Whether a field must be quoted.
fn needs_quotes(field: &[u8], delimiter: u8) -> bool {
    field.iter().any(|&c| c == delimiter || c == b'"' || c == b'\n' || c == b'\r')
}

/// Appends `field` to `out`, quoted if it must be or if `force` (empty strings).
pub fn write_field(out: &mut impl Write, field: &[u8], delimiter: u8, force: bool) -> io::Result<()> {
    if force || needs_quotes(field, delimiter) {
        out.write_all(b"\"")?;
        let mut rest = field;
        while let Some(p) = rest.iter().position(|&c| c == b'"') {
            out.write_all(&rest[..=p])?;
            out.write_all(b"\"")?;
            rest = &rest[p + 1..];
        }
        out.write_all(rest)?;
        out.write_all(b"\"")
    } else {
        out.write_all(field)
    }
}

/// Parses a `--delimiter` value: one ASCII character, or `\t` / `tab`.
///
/// # Errors
/// Anything else, or `"`, CR or LF.
pub fn parse_delimiter(s: &str) -> Result<u8, String> {
    let d = match s {
        "\\t" | "tab" | "\t" => b'\t',
        _ if s.len() == 1 && s.is_ascii() => s.as_bytes()[0],
        _ => return Err(format!("--delimiter {s:?}: expected one ASCII character (or \\t / tab)")),
    };
    if matches!(d, b'"' | b'\r' | b'\n') {
        return Err(format!("--delimiter {s:?}: a quote or line break cannot separate fields"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Records as (line, fields as (text, quoted)).
    type Parsed = Vec<(u64, Vec<(String, bool)>)>;

    fn parse(text: &str) -> Result<Parsed, String> {
        let mut r = Reader::new(text.as_bytes(), b',');
        let mut rec = Record::default();
        let mut out = Vec::new();
        while r.read_record(&mut rec).map_err(|e| e.to_string())? {
            out.push((rec.line(), (0..rec.len()).map(|i| (rec.field(i).to_string(), rec.is_quoted(i))).collect()));
        }
        Ok(out)
    }

    fn fields(text: &str) -> Vec<Vec<String>> {
        parse(text).unwrap().into_iter().map(|(_, f)| f.into_iter().map(|x| x.0).collect()).collect()
    }

    #[test]
    fn rfc4180_records() {
        assert_eq!(fields("a,b,c\n1,2,3\n"), vec![vec!["a", "b", "c"], vec!["1", "2", "3"]]);
        // CRLF, no final newline, empty fields.
        assert_eq!(fields("a,b\r\n,\r\nx,"), vec![vec!["a", "b"], vec!["", ""], vec!["x", ""]]);
        // Quotes: embedded delimiter, doubled quote, embedded CRLF and LF.
        assert_eq!(
            fields("\"a,b\",\"say \"\"hi\"\"\",\"l1\r\nl2\nl3\"\n"),
            vec![vec!["a,b", "say \"hi\"", "l1\r\nl2\nl3"]]
        );
        // Blank lines are skipped; a BOM is dropped; lines are counted with embedded newlines.
        let p = parse("\u{feff}h\n\n\"x\ny\"\n\r\nz\n").unwrap();
        assert_eq!(p[0].1[0].0, "h");
        assert_eq!((p[1].0, p[1].1[0].0.as_str()), (3, "x\ny"));
        assert_eq!((p[2].0, p[2].1[0].0.as_str()), (6, "z"));
        // Quoted flags distinguish "" from nothing.
        let p = parse("\"\",,\"q\"\n").unwrap();
        assert_eq!(p[0].1, vec![("".into(), true), ("".into(), false), ("q".into(), true)]);
        // A line of one quoted empty field is a record, not a blank line.
        assert_eq!(fields("\"\"\n"), vec![vec![""]]);
        // Other delimiters.
        let mut r = Reader::new("a\tb,c\n".as_bytes(), b'\t');
        let mut rec = Record::default();
        assert!(r.read_record(&mut rec).unwrap());
        assert_eq!(rec.fields().collect::<Vec<_>>(), vec!["a", "b,c"]);
        assert!(!r.read_record(&mut rec).unwrap());
    }

    #[test]
    fn malformed_quotes_name_the_line() {
        for (text, want) in [
            ("a\n\"open\n\nmore", "line 2: a quoted field is not closed"),
            ("a,b\n1,x\"y\n", "line 2: field 2 has a quote inside an unquoted value"),
            ("a\n\"x\"y\n", "line 2: field 1 has 'y' after its closing quote"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let e = parse("a\n\u{0}\u{ff}\n").map(|_| ());
        assert!(e.is_ok());
        let bad = [b'a', b'\n', 0xff, b'\n'];
        let mut r = Reader::new(&bad[..], b',');
        let mut rec = Record::default();
        assert!(r.read_record(&mut rec).unwrap());
        let e = r.read_record(&mut rec).unwrap_err().to_string();
        assert!(e.contains("line 2: the record is not valid UTF-8"), "{e}");
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
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("plain,\"\",\"a,b\",\"q\"\"uote\""), "{text}");
        let back = parse(&text).unwrap();
        assert_eq!(back.len(), 1);
        let got: Vec<&str> = back[0].1.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(got, values);
        assert!(back[0].1[1].1, "the empty string is quoted");
    }

    #[test]
    fn delimiters() {
        assert_eq!(parse_delimiter(";"), Ok(b';'));
        assert_eq!(parse_delimiter("\\t"), Ok(b'\t'));
        assert_eq!(parse_delimiter("tab"), Ok(b'\t'));
        assert!(parse_delimiter("\"").is_err());
        assert!(parse_delimiter(",,").is_err());
    }
}
