//! A small reader and writer of NumPy `.npy` files (format versions 1.0, 2.0 and 3.0).
//!
//! A file is the magic `\x93NUMPY`, a major and minor version byte, the header length (`u16`
//! little-endian in 1.0, `u32` in 2.0 and 3.0), then the header: a Python dict literal such as
//! `{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }` padded with spaces and ended by
//! a newline so the data starts at a multiple of 64 bytes. The data follows, C or Fortran order.
//! Reference: <https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>.
//!
//! Supported element types are the little-endian (or byte-order-free) integers, floats and
//! complex numbers (`|i1 <i2 <i4 <i8 |u1 <u2 <u4 <u8 <f4 <f8 <c8 <c16`), booleans `|b1` (one
//! byte, handled as `uint8`) and fixed-length byte strings `|S<n>`. Big-endian files and other
//! types (objects, structured records, unicode strings, float16) are refused with a message
//! saying how to convert them.

use std::fmt;
use std::io::{Read, Write};

/// The 6-byte magic string every `.npy` file starts with.
pub const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Headers (magic to newline) are padded to a multiple of this, as NumPy does.
const ALIGN: usize = 64;

/// Errors of `.npy` parsing and writing.
#[derive(Debug)]
#[non_exhaustive]
pub enum NpyError {
    /// The bytes are not a valid `.npy` header.
    Format(String),
    /// A valid file whose dtype or layout this tool cannot handle.
    Unsupported(String),
    /// Reading or writing failed.
    Io(std::io::Error),
}

impl fmt::Display for NpyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NpyError::Format(s) => write!(f, "not a valid .npy file: {s}"),
            NpyError::Unsupported(s) => f.write_str(s),
            NpyError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for NpyError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NpyError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for NpyError {
    fn from(e: std::io::Error) -> Self {
        NpyError::Io(e)
    }
}

fn format_err(s: impl Into<String>) -> NpyError {
    NpyError::Format(s.into())
}

/// The kind of one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Signed integer (`i`).
    Int,
    /// Unsigned integer (`u`).
    UInt,
    /// IEEE float (`f`).
    Float,
    /// Complex: two IEEE floats, real then imaginary (`c`).
    Complex,
    /// Boolean, one byte 0 or 1 (`b`).
    Bool,
    /// Fixed-length byte string (`S`).
    Bytes,
}

/// An element type: its kind and size in bytes. Always little-endian (or byte-order free).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dtype {
    /// What one element is.
    pub kind: Kind,
    /// Bytes per element.
    pub size: usize,
}

impl Dtype {
    /// A dtype, if the combination is one this module supports.
    pub fn new(kind: Kind, size: usize) -> Option<Self> {
        let ok = match kind {
            Kind::Int | Kind::UInt => matches!(size, 1 | 2 | 4 | 8),
            Kind::Float => matches!(size, 4 | 8),
            Kind::Complex => matches!(size, 8 | 16),
            Kind::Bool => size == 1,
            Kind::Bytes => size >= 1,
        };
        ok.then_some(Self { kind, size })
    }

    /// The NumPy `descr` string, e.g. `<f8`, `|u1`, `|S5`.
    pub fn descr(&self) -> String {
        let order = if self.size == 1 || self.kind == Kind::Bytes { '|' } else { '<' };
        let k = match self.kind {
            Kind::Int => 'i',
            Kind::UInt => 'u',
            Kind::Float => 'f',
            Kind::Complex => 'c',
            Kind::Bool => 'b',
            Kind::Bytes => 'S',
        };
        format!("{order}{k}{}", self.size)
    }

    /// A familiar name: `int32`, `float64`, `complex64`, `bool`, `S5`.
    pub fn name(&self) -> String {
        let bits = self.size * 8;
        match self.kind {
            Kind::Int => format!("int{bits}"),
            Kind::UInt => format!("uint{bits}"),
            Kind::Float => format!("float{bits}"),
            Kind::Complex => format!("complex{bits}"),
            Kind::Bool => "bool".to_string(),
            Kind::Bytes => format!("S{}", self.size),
        }
    }

    /// Parses a `descr` string; refuses big-endian and unsupported types with a clear message.
    ///
    /// # Errors
    /// `NpyError::Unsupported` naming the dtype and what to do instead.
    pub fn parse(descr: &str) -> Result<Self, NpyError> {
        let unsupported = |why: &str| NpyError::Unsupported(format!("dtype {descr:?} is not supported: {why}"));
        let mut chars = descr.chars();
        let (order, rest) = match chars.next() {
            Some(c @ ('<' | '>' | '|' | '=')) => (c, chars.as_str()),
            _ => ('|', descr),
        };
        let mut rc = rest.chars();
        let kc = rc.next().ok_or_else(|| unsupported("empty type"))?;
        let digits = rc.as_str();
        let kind = match kc {
            'i' => Kind::Int,
            'u' => Kind::UInt,
            'f' => Kind::Float,
            'c' => Kind::Complex,
            'b' => Kind::Bool,
            'S' => Kind::Bytes,
            'U' => return Err(unsupported("unicode strings; store bytes (astype('S')) or use the Python API")),
            'O' => return Err(unsupported("Python objects cannot be stored")),
            _ => return Err(unsupported("only integers, float32/64, complex64/128, bool and bytes are")),
        };
        let size: usize = digits.parse().map_err(|_| unsupported("expected a type letter followed by a byte size"))?;
        let single = size == 1 || kind == Kind::Bytes;
        if order == '>' && !single {
            return Err(NpyError::Unsupported(format!(
                "dtype {descr:?} is big-endian; only little-endian data is supported \
                 (convert with arr.astype('<{kc}{size}'))"
            )));
        }
        if order == '=' && !single {
            return Err(unsupported("native byte order '=' is ambiguous in a file; save as '<'"));
        }
        Dtype::new(kind, size).ok_or_else(|| unsupported("this size is not supported for this kind"))
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.descr())
    }
}

/// The header of an `.npy` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Element type.
    pub dtype: Dtype,
    /// Whether the data is in Fortran (column-major) order rather than C (row-major) order.
    pub fortran_order: bool,
    /// Elements per axis.
    pub shape: Vec<u64>,
}

impl Header {
    /// Number of elements (1 for a 0-d array).
    pub fn elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |acc, &n| acc.checked_mul(n))
    }

    /// Bytes of the data section.
    pub fn data_len(&self) -> Option<u64> {
        self.elements()?.checked_mul(self.dtype.size as u64)
    }

    /// The header bytes: magic, version, length and the padded dict. Uses version 1.0 unless the
    /// dict needs more than 65535 bytes (then 2.0).
    pub fn encode(&self) -> Vec<u8> {
        let dims: Vec<String> = self.shape.iter().map(u64::to_string).collect();
        let shape = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        let dict = format!(
            "{{'descr': '{}', 'fortran_order': {}, 'shape': {shape}, }}",
            self.dtype.descr(),
            if self.fortran_order { "True" } else { "False" }
        );
        let build = |len_bytes: usize, major: u8| -> Option<Vec<u8>> {
            let prefix = MAGIC.len() + 2 + len_bytes;
            let total = (prefix + dict.len() + 1).div_ceil(ALIGN) * ALIGN;
            let hlen = total - prefix;
            let mut out = Vec::with_capacity(total);
            out.extend_from_slice(MAGIC);
            out.extend_from_slice(&[major, 0]);
            if len_bytes == 2 {
                out.extend_from_slice(&u16::try_from(hlen).ok()?.to_le_bytes());
            } else {
                out.extend_from_slice(&u32::try_from(hlen).ok()?.to_le_bytes());
            }
            out.extend_from_slice(dict.as_bytes());
            out.resize(total - 1, b' ');
            out.push(b'\n');
            Some(out)
        };
        // A dict longer than u32::MAX would need a shape of hundreds of millions of axes.
        build(2, 1).or_else(|| build(4, 2)).unwrap_or_default()
    }

    /// Parses the header at the start of `bytes`; returns it and the offset of the data.
    ///
    /// # Errors
    /// `NpyError::Format` for a malformed header, `Unsupported` for a dtype this module refuses.
    pub fn decode(bytes: &[u8]) -> Result<(Self, usize), NpyError> {
        if bytes.len() < MAGIC.len() + 2 || &bytes[..MAGIC.len()] != MAGIC {
            return Err(format_err("the file does not start with the .npy magic \\x93NUMPY"));
        }
        let (major, minor) = (bytes[6], bytes[7]);
        let (len_bytes, utf8) = match major {
            1 => (2, false),
            2 => (4, false),
            3 => (4, true),
            _ => return Err(NpyError::Unsupported(format!(".npy format version {major}.{minor} is not supported"))),
        };
        let start = 8 + len_bytes;
        if bytes.len() < start {
            return Err(format_err("the file ends inside the header length"));
        }
        let hlen = if len_bytes == 2 {
            usize::from(u16::from_le_bytes([bytes[8], bytes[9]]))
        } else {
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize
        };
        let end = start.checked_add(hlen).filter(|&e| e <= bytes.len()).ok_or_else(|| {
            format_err(format!("the header claims {hlen} bytes but the file has {}", bytes.len() - start))
        })?;
        let raw = &bytes[start..end];
        let text = if utf8 {
            std::str::from_utf8(raw).map_err(|_| format_err("the header is not UTF-8"))?
        } else {
            if !raw.is_ascii() {
                return Err(format_err("a version 1.0/2.0 header must be ASCII (latin-1 headers are not supported)"));
            }
            std::str::from_utf8(raw).map_err(|_| format_err("the header is not ASCII"))?
        };
        Ok((parse_dict(text)?, end))
    }

    /// Reads a header from `r`, leaving it positioned at the start of the data; returns the
    /// header and the offset of the data in the file.
    ///
    /// # Errors
    /// As [`Header::decode`], plus read failures.
    pub fn read_from(r: &mut impl Read) -> Result<(Self, u64), NpyError> {
        let mut pre = [0u8; 12];
        read_exact_or(r, &mut pre[..10], "the file is too short to be .npy")?;
        if &pre[..6] != MAGIC {
            return Err(format_err("the file does not start with the .npy magic \\x93NUMPY"));
        }
        let mut buf = pre[..10].to_vec();
        let hlen = match pre[6] {
            1 => usize::from(u16::from_le_bytes([pre[8], pre[9]])),
            2 | 3 => {
                read_exact_or(r, &mut pre[10..12], "the file ends inside the header length")?;
                buf.extend_from_slice(&pre[10..12]);
                u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize
            }
            v => return Err(NpyError::Unsupported(format!(".npy format version {v}.{} is not supported", pre[7]))),
        };
        if hlen > 1 << 24 {
            return Err(format_err(format!("header length {hlen} is implausibly large")));
        }
        let at = buf.len();
        buf.resize(at + hlen, 0);
        read_exact_or(r, &mut buf[at..], "the file ends inside the header")?;
        let (header, end) = Self::decode(&buf)?;
        Ok((header, end as u64))
    }
}

fn read_exact_or(r: &mut impl Read, buf: &mut [u8], msg: &str) -> Result<(), NpyError> {
    r.read_exact(buf)
        .map_err(|e| if e.kind() == std::io::ErrorKind::UnexpectedEof { format_err(msg) } else { e.into() })
}

/// An array read from a `.npy` file: its header and its whole data section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyArray {
    /// The header.
    pub header: Header,
    /// The data section, exactly `header.data_len()` bytes.
    pub data: Vec<u8>,
}

/// Reads a whole `.npy` stream: the header, then the data into one buffer.
///
/// # Errors
/// A malformed or unsupported header, a data section shorter or longer than the shape says, or
/// a read failure.
pub fn read(r: &mut impl Read) -> Result<NpyArray, NpyError> {
    let (header, _) = Header::read_from(r)?;
    let len = header.data_len().and_then(|n| usize::try_from(n).ok()).ok_or_else(|| {
        format_err(format!("shape {} holds more bytes than this machine can address", shape_str(&header.shape)))
    })?;
    let data = read_data(r, len)?;
    Ok(NpyArray { header, data })
}

/// Reads exactly `len` bytes of data and checks that nothing follows them.
pub fn read_data(r: &mut impl Read, len: usize) -> Result<Vec<u8>, NpyError> {
    let mut data = Vec::new();
    data.try_reserve_exact(len)
        .map_err(|_| NpyError::Unsupported(format!("cannot allocate {len} bytes for the data section")))?;
    let got = r.by_ref().take(len as u64).read_to_end(&mut data)?;
    if got < len {
        return Err(format_err(format!("the data section is truncated: {got} of {len} bytes")));
    }
    let mut extra = [0u8; 1];
    if r.read(&mut extra)? != 0 {
        return Err(format_err(format!("the file has bytes after the {len} bytes of data its shape needs")));
    }
    Ok(data)
}

/// Writes a header followed by `data` (which must hold `header.data_len()` bytes).
///
/// # Errors
/// A length mismatch or a write failure.
pub fn write(w: &mut impl Write, header: &Header, data: &[u8]) -> Result<(), NpyError> {
    if header.data_len() != Some(data.len() as u64) {
        return Err(format_err(format!(
            "{} bytes of data for shape {} of {}",
            data.len(),
            shape_str(&header.shape),
            header.dtype.name()
        )));
    }
    w.write_all(&header.encode())?;
    w.write_all(data)?;
    Ok(())
}

/// A shape as Python prints it: `(3, 4)`, `(5,)`, `()`.
pub fn shape_str(shape: &[u64]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// A value of the Python literal subset used by `.npy` headers.
#[derive(Debug, Clone, PartialEq)]
enum Py {
    Str(String),
    Int(u64),
    Bool(bool),
    None,
    Seq(Vec<Py>),
    Dict(Vec<(Py, Py)>),
}

/// Parses the header dict and extracts `descr`, `fortran_order` and `shape`.
fn parse_dict(text: &str) -> Result<Header, NpyError> {
    let mut p = Parser { s: text.as_bytes(), at: 0 };
    let v = p.value()?;
    p.ws();
    if p.at != p.s.len() {
        return Err(format_err(format!("unexpected text after the header dict at byte {}", p.at)));
    }
    let Py::Dict(items) = v else {
        return Err(format_err("the header is not a dict"));
    };
    let get = |key: &str| items.iter().find(|(k, _)| *k == Py::Str(key.to_string())).map(|(_, v)| v);
    if items.len() != 3 {
        return Err(format_err("the header dict must have exactly the keys descr, fortran_order and shape"));
    }
    let dtype = match get("descr") {
        Some(Py::Str(d)) => Dtype::parse(d)?,
        Some(Py::Seq(_)) => {
            return Err(NpyError::Unsupported(
                "structured (record) dtypes are not supported; save one array per field".into(),
            ))
        }
        _ => return Err(format_err("'descr' is missing or not a string")),
    };
    let fortran_order = match get("fortran_order") {
        Some(Py::Bool(b)) => *b,
        _ => return Err(format_err("'fortran_order' is missing or not True/False")),
    };
    let shape = match get("shape") {
        Some(Py::Seq(dims)) => dims
            .iter()
            .map(|d| match d {
                Py::Int(n) => Ok(*n),
                _ => Err(format_err("'shape' must hold non-negative integers")),
            })
            .collect::<Result<Vec<u64>, _>>()?,
        _ => return Err(format_err("'shape' is missing or not a tuple")),
    };
    Ok(Header { dtype, fortran_order, shape })
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.at < self.s.len() && self.s[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.at).copied()
    }

    fn err(&self, what: &str) -> NpyError {
        format_err(format!("header dict: {what} at byte {}", self.at))
    }

    fn value(&mut self) -> Result<Py, NpyError> {
        match self.peek() {
            Some(b'{') => {
                self.at += 1;
                let items = self.items(b'}', true)?;
                Ok(Py::Dict(items))
            }
            Some(b'(') => {
                self.at += 1;
                Ok(Py::Seq(self.items(b')', false)?.into_iter().map(|(v, _)| v).collect()))
            }
            Some(b'[') => {
                self.at += 1;
                Ok(Py::Seq(self.items(b']', false)?.into_iter().map(|(v, _)| v).collect()))
            }
            Some(q @ (b'\'' | b'"')) => {
                self.at += 1;
                let start = self.at;
                while self.at < self.s.len() && self.s[self.at] != q {
                    if self.s[self.at] == b'\\' {
                        return Err(self.err("escapes in strings are not supported"));
                    }
                    self.at += 1;
                }
                if self.at >= self.s.len() {
                    return Err(self.err("unterminated string"));
                }
                let text = String::from_utf8_lossy(&self.s[start..self.at]).into_owned();
                self.at += 1;
                Ok(Py::Str(text))
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.at;
                while self.at < self.s.len() && self.s[self.at].is_ascii_digit() {
                    self.at += 1;
                }
                // Python 2 era writers may append L to long integers.
                let digits = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
                if self.s.get(self.at) == Some(&b'L') {
                    self.at += 1;
                }
                digits.parse().map(Py::Int).map_err(|_| self.err("integer too large"))
            }
            Some(c) if c.is_ascii_alphabetic() => {
                let start = self.at;
                while self.at < self.s.len() && (self.s[self.at].is_ascii_alphanumeric() || self.s[self.at] == b'_') {
                    self.at += 1;
                }
                match &self.s[start..self.at] {
                    b"True" => Ok(Py::Bool(true)),
                    b"False" => Ok(Py::Bool(false)),
                    b"None" => Ok(Py::None),
                    _ => Err(self.err("unknown name")),
                }
            }
            Some(b'-') => Err(self.err("negative numbers are not valid here")),
            _ => Err(self.err("expected a value")),
        }
    }

    /// Comma-separated items up to `close` (a trailing comma allowed); `pairs`: `key: value`.
    fn items(&mut self, close: u8, pairs: bool) -> Result<Vec<(Py, Py)>, NpyError> {
        let mut out = Vec::new();
        loop {
            if self.peek() == Some(close) {
                self.at += 1;
                return Ok(out);
            }
            let k = self.value()?;
            let v = if pairs {
                if self.peek() != Some(b':') {
                    return Err(self.err("expected ':'"));
                }
                self.at += 1;
                self.value()?
            } else {
                Py::None
            };
            out.push((k, v));
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(c) if c == close => {}
                _ => return Err(self.err("expected ',' or a closing bracket")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A version 1.0 file as NumPy writes it for `np.save(f, np.arange(6, dtype='<i4').reshape(2, 3))`.
    fn numpy_v1_file() -> Vec<u8> {
        let dict = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
        let mut h = dict.to_string();
        while !(10 + h.len() + 1).is_multiple_of(64) {
            h.push(' ');
        }
        h.push('\n');
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        for i in 0..6i32 {
            b.extend_from_slice(&i.to_le_bytes());
        }
        b
    }

    #[test]
    fn reads_a_hand_made_v1_file() {
        let b = numpy_v1_file();
        assert_eq!(b.len(), 128 + 24);
        let a = read(&mut b.as_slice()).unwrap();
        assert_eq!(a.header.dtype, Dtype::new(Kind::Int, 4).unwrap());
        assert!(!a.header.fortran_order);
        assert_eq!(a.header.shape, vec![2, 3]);
        let v: Vec<i32> = a.data.chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(v, vec![0, 1, 2, 3, 4, 5]);
        // Our encoder produces the same bytes as NumPy's.
        assert_eq!(a.header.encode(), b[..128].to_vec());
    }

    #[test]
    fn reads_v2_and_v3_headers_and_odd_spacing() {
        for (major, dict) in [
            (2u8, "{'descr': '<f8', 'fortran_order': True, 'shape': (4, 1), }"),
            (3u8, "{\"shape\":(4,1),\"fortran_order\":True,\"descr\":\"<f8\"}"),
            (2u8, "{ 'fortran_order' : True , 'shape' : ( 4 , 1 ) , 'descr' : '<f8' }"),
        ] {
            let mut b = b"\x93NUMPY".to_vec();
            b.extend_from_slice(&[major, 0]);
            let h = format!("{dict}\n");
            b.extend_from_slice(&(h.len() as u32).to_le_bytes());
            b.extend_from_slice(h.as_bytes());
            for x in [1.0f64, 2.0, 3.0, 0.0] {
                b.extend_from_slice(&x.to_le_bytes());
            }
            let a = read(&mut b.as_slice()).unwrap();
            assert_eq!(a.header.shape, vec![4, 1], "{dict}");
            assert!(a.header.fortran_order);
            assert_eq!(a.header.dtype.descr(), "<f8");
            assert_eq!(a.data.len(), 32);
        }
    }

    #[test]
    fn every_supported_descr_round_trips() {
        for d in ["|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f4", "<f8", "<c8", "<c16", "|b1", "|S7"] {
            let t = Dtype::parse(d).unwrap();
            assert_eq!(t.descr(), d);
        }
        // Byte-order marks on one-byte types are irrelevant.
        assert_eq!(Dtype::parse("<u1").unwrap().descr(), "|u1");
        assert_eq!(Dtype::parse(">i1").unwrap().descr(), "|i1");
    }

    #[test]
    fn refuses_big_endian_and_unsupported_types_clearly() {
        let e = Dtype::parse(">i4").unwrap_err().to_string();
        assert!(e.contains("big-endian") && e.contains("astype('<i4')"), "{e}");
        for (d, msg) in [("<f2", "not supported"), ("<U5", "unicode"), ("|O", "objects"), ("<M8", "not supported")] {
            let e = Dtype::parse(d).unwrap_err().to_string();
            assert!(e.contains(msg), "{d}: {e}");
        }
    }

    #[test]
    fn refuses_malformed_headers() {
        let good = numpy_v1_file();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"NUMPY\x01\x00 0123456789".to_vec(), "magic"),
            (good[..9].to_vec(), "too short"),
            (good[..40].to_vec(), "ends inside the header"),
            (good[..140].to_vec(), "truncated"),
            ([good.clone(), vec![0]].concat(), "bytes after"),
            (
                {
                    let mut b = good.clone();
                    b[6] = 4;
                    b
                },
                "version 4.0",
            ),
        ];
        for (bytes, msg) in cases {
            let e = read(&mut bytes.as_slice()).unwrap_err().to_string();
            assert!(e.contains(msg), "{msg}: {e}");
        }
        for (dict, msg) in [
            ("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }", "structured"),
            ("{'descr': '<i4', 'fortran_order': False, }", "exactly the keys"),
            ("{'descr': '<i4', 'fortran_order': 0, 'shape': (2,), }", "fortran_order"),
            ("{'descr': '<i4', 'fortran_order': False, 'shape': (-2,), }", "negative"),
            ("{'descr': '<i4', 'fortran_order': False, 'shape': (2,) ", "expected"),
            ("['descr']", "not a dict"),
        ] {
            let e = parse_dict(dict).unwrap_err().to_string();
            assert!(e.contains(msg), "{dict}: {e}");
        }
    }

    #[test]
    fn write_then_read_round_trips_every_shape() {
        for (shape, fortran) in [(vec![], false), (vec![5], false), (vec![3, 0], true), (vec![2, 3, 4], true)] {
            let header = Header { dtype: Dtype::parse("<c8").unwrap(), fortran_order: fortran, shape: shape.clone() };
            let n = header.data_len().unwrap() as usize;
            let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
            let mut buf = Vec::new();
            write(&mut buf, &header, &data).unwrap();
            assert_eq!(header.encode().len() % 64, 0);
            let back = read(&mut buf.as_slice()).unwrap();
            assert_eq!(back.header, header);
            assert_eq!(back.data, data);
        }
        let h = Header { dtype: Dtype::parse("<i2").unwrap(), fortran_order: false, shape: vec![3] };
        assert!(write(&mut Vec::new(), &h, &[0u8; 5]).is_err());
        assert_eq!(shape_str(&[5]), "(5,)");
        assert_eq!(shape_str(&[]), "()");
    }

    #[test]
    fn long_headers_use_version_2() {
        let h = Header { dtype: Dtype::parse("|u1").unwrap(), fortran_order: false, shape: vec![1; 30_000] };
        let b = h.encode();
        assert_eq!(b[6], 2);
        assert_eq!(b.len() % 64, 0);
        assert_eq!(Header::decode(&b).unwrap().0, h);
    }

    /// If NumPy is installed, check that it reads our files and we read its files.
    #[test]
    fn cross_check_with_numpy_when_available() {
        use std::process::Command;
        let ok = Command::new("python3").args(["-c", "import numpy"]).output().map(|o| o.status.success());
        if !matches!(ok, Ok(true)) {
            eprintln!("numpy not available; skipping the cross-check");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let ours = dir.path().join("ours.npy");
        let theirs = dir.path().join("theirs.npy");
        let h = Header { dtype: Dtype::parse("<i8").unwrap(), fortran_order: true, shape: vec![2, 3] };
        let vals: Vec<i64> = vec![0, 3, 1, 4, 2, 5];
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut f = std::fs::File::create(&ours).unwrap();
        write(&mut f, &h, &bytes).unwrap();
        drop(f);
        let script = format!(
            "import numpy as np\na = np.load({:?})\nassert a.tolist() == [[0, 1, 2], [3, 4, 5]], a\n\
             np.save({:?}, np.asfortranarray(np.arange(6, dtype='<f4').reshape(2, 3)))",
            ours.display().to_string(),
            theirs.display().to_string()
        );
        let out = Command::new("python3").args(["-c", &script]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let a = read(&mut std::fs::File::open(&theirs).unwrap()).unwrap();
        assert!(a.header.fortran_order);
        assert_eq!(a.header.shape, vec![2, 3]);
        let f: Vec<f32> = a.data.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(f, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
    }
}
