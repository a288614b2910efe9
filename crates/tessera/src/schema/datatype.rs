//! Datatypes of dimension coordinates and attribute values.
//!
//! Every datatype has a *storage type* ([`Datatype::storage`]), the plain number type its bytes
//! hold: `bool` is stored as `uint8` (0 or 1), `datetime64[unit]` as `int64` (a count of units
//! since 1970-01-01T00:00, NaT = `i64::MIN` as in numpy). Code that only moves or orders values
//! (coordinates, tiling, MBRs, filters) dispatches on the storage type; conditions and
//! aggregates add the rules of the logical type (NaT passes no comparison, bool sums count true).

use serde::{Deserialize, Serialize};

/// The unit of a `datetime64` value: one step of its `i64` count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeUnit {
    /// Days.
    Day,
    /// Hours.
    Hour,
    /// Minutes.
    Minute,
    /// Seconds.
    Second,
    /// Milliseconds.
    Milli,
    /// Microseconds.
    Micro,
    /// Nanoseconds.
    Nano,
}

impl TimeUnit {
    /// Every unit, coarsest first.
    pub const ALL: [TimeUnit; 7] = [
        TimeUnit::Day,
        TimeUnit::Hour,
        TimeUnit::Minute,
        TimeUnit::Second,
        TimeUnit::Milli,
        TimeUnit::Micro,
        TimeUnit::Nano,
    ];

    /// The numpy code of the unit ("D", "h", "m", "s", "ms", "us", "ns").
    pub fn code(self) -> &'static str {
        match self {
            TimeUnit::Day => "D",
            TimeUnit::Hour => "h",
            TimeUnit::Minute => "m",
            TimeUnit::Second => "s",
            TimeUnit::Milli => "ms",
            TimeUnit::Micro => "us",
            TimeUnit::Nano => "ns",
        }
    }

    /// Parses a code of [`TimeUnit::code`].
    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|u| u.code() == code)
    }

    /// Nanoseconds in one unit.
    pub fn nanos(self) -> i64 {
        match self {
            TimeUnit::Day => 86_400_000_000_000,
            TimeUnit::Hour => 3_600_000_000_000,
            TimeUnit::Minute => 60_000_000_000,
            TimeUnit::Second => 1_000_000_000,
            TimeUnit::Milli => 1_000_000,
            TimeUnit::Micro => 1_000,
            TimeUnit::Nano => 1,
        }
    }
}

/// The `datetime64` value "not a time" (numpy's NaT): the smallest `i64`.
pub const NAT: i64 = i64::MIN;

/// The type of one value. In schemas it is written by its [`Datatype::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Datatype {
    /// Signed 8-bit integer.
    Int8,
    /// Signed 16-bit integer.
    Int16,
    /// Signed 32-bit integer.
    Int32,
    /// Signed 64-bit integer.
    Int64,
    /// Unsigned 8-bit integer.
    UInt8,
    /// Unsigned 16-bit integer.
    UInt16,
    /// Unsigned 32-bit integer.
    UInt32,
    /// Unsigned 64-bit integer.
    UInt64,
    /// IEEE 754 single precision.
    Float32,
    /// IEEE 754 double precision.
    Float64,
    /// UTF-8 text, one byte per value (use with variable-length cells for strings).
    Utf8,
    /// A boolean, stored as one byte: 0 false, 1 true (any other byte is rejected on write and
    /// reported as corruption on read).
    Bool,
    /// A point in time: a little-endian `i64` count of `unit` since 1970-01-01T00:00 (UTC, no
    /// leap seconds, as numpy); [`NAT`] is "not a time".
    Datetime64(TimeUnit),
}

impl Datatype {
    /// Every datatype, in a fixed order.
    pub const ALL: [Datatype; 19] = [
        Datatype::Int8,
        Datatype::Int16,
        Datatype::Int32,
        Datatype::Int64,
        Datatype::UInt8,
        Datatype::UInt16,
        Datatype::UInt32,
        Datatype::UInt64,
        Datatype::Float32,
        Datatype::Float64,
        Datatype::Utf8,
        Datatype::Bool,
        Datatype::Datetime64(TimeUnit::Day),
        Datatype::Datetime64(TimeUnit::Hour),
        Datatype::Datetime64(TimeUnit::Minute),
        Datatype::Datetime64(TimeUnit::Second),
        Datatype::Datetime64(TimeUnit::Milli),
        Datatype::Datetime64(TimeUnit::Micro),
        Datatype::Datetime64(TimeUnit::Nano),
    ];

    /// The plain number type whose bytes this type's values are: `uint8` for `bool`, `int64`
    /// for `datetime64`, the type itself otherwise.
    pub fn storage(self) -> Datatype {
        match self {
            Datatype::Bool => Datatype::UInt8,
            Datatype::Datetime64(_) => Datatype::Int64,
            other => other,
        }
    }

    /// Whether this is one of the types added in schema version 3 (`bool`, `datetime64`).
    pub fn needs_v3(self) -> bool {
        matches!(self, Datatype::Bool | Datatype::Datetime64(_))
    }

    /// The unit of a `datetime64` type.
    pub fn time_unit(self) -> Option<TimeUnit> {
        match self {
            Datatype::Datetime64(u) => Some(u),
            _ => None,
        }
    }

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self.storage() {
            Datatype::Int8 | Datatype::UInt8 | Datatype::Utf8 => 1,
            Datatype::Int16 | Datatype::UInt16 => 2,
            Datatype::Int32 | Datatype::UInt32 | Datatype::Float32 => 4,
            _ => 8,
        }
    }

    /// The name used in schemas ("int32", "float64", "utf8", "bool", "datetime64\[ns\]").
    pub fn name(self) -> &'static str {
        match self {
            Datatype::Int8 => "int8",
            Datatype::Int16 => "int16",
            Datatype::Int32 => "int32",
            Datatype::Int64 => "int64",
            Datatype::UInt8 => "uint8",
            Datatype::UInt16 => "uint16",
            Datatype::UInt32 => "uint32",
            Datatype::UInt64 => "uint64",
            Datatype::Float32 => "float32",
            Datatype::Float64 => "float64",
            Datatype::Utf8 => "utf8",
            Datatype::Bool => "bool",
            Datatype::Datetime64(u) => match u {
                TimeUnit::Day => "datetime64[D]",
                TimeUnit::Hour => "datetime64[h]",
                TimeUnit::Minute => "datetime64[m]",
                TimeUnit::Second => "datetime64[s]",
                TimeUnit::Milli => "datetime64[ms]",
                TimeUnit::Micro => "datetime64[us]",
                TimeUnit::Nano => "datetime64[ns]",
            },
        }
    }

    /// Parses a name as produced by [`Datatype::name`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Whether values are stored as integers (`bool` and `datetime64` included).
    pub fn is_integer(self) -> bool {
        !matches!(self, Datatype::Float32 | Datatype::Float64 | Datatype::Utf8)
    }

    /// The smallest and largest value of an integer type (`bool`: 0 and 1; `datetime64`: the
    /// `i64` range, NaT included).
    pub fn integer_bounds(self) -> Option<(i128, i128)> {
        if self == Datatype::Bool {
            return Some((0, 1));
        }
        Some(match self.storage() {
            Datatype::Int8 => (i8::MIN.into(), i8::MAX.into()),
            Datatype::Int16 => (i16::MIN.into(), i16::MAX.into()),
            Datatype::Int32 => (i32::MIN.into(), i32::MAX.into()),
            Datatype::Int64 => (i64::MIN.into(), i64::MAX.into()),
            Datatype::UInt8 => (0, u8::MAX.into()),
            Datatype::UInt16 => (0, u16::MAX.into()),
            Datatype::UInt32 => (0, u32::MAX.into()),
            Datatype::UInt64 => (0, u64::MAX.into()),
            _ => return None,
        })
    }

    /// The default fill value of one value of this type, little-endian: the minimum of signed
    /// integers, the maximum of unsigned ones, NaN for floats, 0 for UTF-8 (as TileDB does),
    /// false for bool, NaT for datetime64.
    pub fn default_fill(self) -> Vec<u8> {
        if self == Datatype::Bool {
            return vec![0];
        }
        match self.storage() {
            Datatype::Int8 => i8::MIN.to_le_bytes().to_vec(),
            Datatype::Int16 => i16::MIN.to_le_bytes().to_vec(),
            Datatype::Int32 => i32::MIN.to_le_bytes().to_vec(),
            Datatype::Int64 => i64::MIN.to_le_bytes().to_vec(),
            Datatype::UInt8 => u8::MAX.to_le_bytes().to_vec(),
            Datatype::UInt16 => u16::MAX.to_le_bytes().to_vec(),
            Datatype::UInt32 => u32::MAX.to_le_bytes().to_vec(),
            Datatype::UInt64 => u64::MAX.to_le_bytes().to_vec(),
            Datatype::Float32 => f32::NAN.to_le_bytes().to_vec(),
            Datatype::Float64 => f64::NAN.to_le_bytes().to_vec(),
            _ => vec![0],
        }
    }

    /// Encodes one JSON number (or, for UTF-8, a one-character string or number) as this type;
    /// `bool` also takes `true`/`false`, `datetime64` also an ISO 8601 string or `"NaT"`.
    pub fn encode_json(self, v: &serde_json::Value) -> Option<Vec<u8>> {
        match (self, v) {
            (Datatype::Bool, serde_json::Value::Bool(b)) => return Some(vec![u8::from(*b)]),
            (Datatype::Datetime64(unit), serde_json::Value::String(s)) => {
                return super::time::parse_datetime(s, unit).ok().map(|v| v.to_le_bytes().to_vec());
            }
            _ => {}
        }
        if let Some((lo, hi)) = self.integer_bounds() {
            let x: i128 = if let Some(i) = v.as_i64() { i.into() } else { v.as_u64()?.into() };
            if x < lo || x > hi {
                return None;
            }
            // Two's complement little-endian, truncated to the width: exact for in-range values.
            return Some(x.to_le_bytes()[..self.size()].to_vec());
        }
        match self {
            Datatype::Float32 => {
                #[allow(clippy::cast_possible_truncation)]
                let f = json_f64(v)? as f32;
                Some(f.to_le_bytes().to_vec())
            }
            Datatype::Float64 => Some(json_f64(v)?.to_le_bytes().to_vec()),
            _ => {
                let x = v.as_u64()?;
                u8::try_from(x).ok().map(|b| vec![b])
            }
        }
    }

    /// Decodes one value of this type to JSON (NaN, infinities and NaT become strings, bool
    /// values `true`/`false`).
    pub fn decode_json(self, b: &[u8]) -> serde_json::Value {
        let mut w = [0u8; 8];
        w[..b.len().min(8)].copy_from_slice(&b[..b.len().min(8)]);
        let u = u64::from_le_bytes(w);
        match self {
            Datatype::Bool => (u != 0).into(),
            Datatype::Datetime64(_) if u as i64 == NAT => "NaT".into(),
            Datatype::Datetime64(_) => (u as i64).into(),
            Datatype::Int8 => (i64::from(u as u8 as i8)).into(),
            Datatype::Int16 => (i64::from(u as u16 as i16)).into(),
            Datatype::Int32 => (i64::from(u as u32 as i32)).into(),
            Datatype::Int64 => (u as i64).into(),
            Datatype::UInt8 | Datatype::UInt16 | Datatype::UInt32 | Datatype::UInt64 | Datatype::Utf8 => u.into(),
            Datatype::Float32 => float_json(f64::from(f32::from_bits(u as u32))),
            Datatype::Float64 => float_json(f64::from_bits(u)),
        }
    }
}

fn json_f64(v: &serde_json::Value) -> Option<f64> {
    if let Some(f) = v.as_f64() {
        return Some(f);
    }
    match v.as_str()? {
        "nan" | "NaN" => Some(f64::NAN),
        "inf" | "Infinity" => Some(f64::INFINITY),
        "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

fn float_json(f: f64) -> serde_json::Value {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        f.into()
    }
}

impl Serialize for Datatype {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Datatype {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
        Datatype::parse(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown datatype {name:?} (known: {})",
                Datatype::ALL.map(Datatype::name).join(", ")
            ))
        })
    }
}

impl std::fmt::Display for Datatype {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Datatype::ALL {
            assert_eq!(Datatype::parse(d.name()), Some(d));
            assert_eq!(d.default_fill().len(), d.size());
        }
        assert_eq!(Datatype::parse("int128"), None);
        assert_eq!(Datatype::parse("datetime64[fs]"), None);
        assert_eq!(Datatype::parse("datetime64"), None);
    }

    #[test]
    fn serde_names_are_the_schema_names() {
        for d in Datatype::ALL {
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{}\"", d.name()));
            assert_eq!(serde_json::from_str::<Datatype>(&json).unwrap(), d);
        }
        let err = serde_json::from_str::<Datatype>("\"datetime64[ps]\"").unwrap_err().to_string();
        assert!(err.contains("unknown datatype \"datetime64[ps]\""), "{err}");
    }

    #[test]
    fn new_types_store_as_plain_numbers() {
        assert_eq!(Datatype::Bool.storage(), Datatype::UInt8);
        assert_eq!(Datatype::Bool.size(), 1);
        assert_eq!(Datatype::Bool.default_fill(), vec![0]);
        assert_eq!(Datatype::Bool.encode_json(&serde_json::json!(true)), Some(vec![1]));
        assert_eq!(Datatype::Bool.encode_json(&serde_json::json!(2)), None);
        assert_eq!(Datatype::Bool.decode_json(&[1]), serde_json::json!(true));
        for u in TimeUnit::ALL {
            let d = Datatype::Datetime64(u);
            assert_eq!((d.storage(), d.size()), (Datatype::Int64, 8));
            assert_eq!(d.default_fill(), NAT.to_le_bytes());
            assert_eq!(d.encode_json(&serde_json::json!("NaT")), Some(NAT.to_le_bytes().to_vec()));
            assert_eq!(d.decode_json(&NAT.to_le_bytes()), serde_json::json!("NaT"));
            assert_eq!(d.decode_json(&(-5i64).to_le_bytes()), serde_json::json!(-5));
            assert_eq!(d.encode_json(&serde_json::json!("1970-01-01")), Some(vec![0; 8]));
            assert_eq!(d.encode_json(&serde_json::json!("1970-13-01")), None);
            assert_eq!(TimeUnit::parse(u.code()), Some(u));
        }
    }

    #[test]
    fn json_values_round_trip() {
        for d in Datatype::ALL.into_iter().filter(|&d| d != Datatype::Bool) {
            let v = serde_json::json!(7);
            let b = d.encode_json(&v).unwrap();
            assert_eq!(b.len(), d.size());
            assert_eq!(d.decode_json(&b).as_f64(), Some(7.0), "{d}");
        }
        assert!(Datatype::Int8.encode_json(&serde_json::json!(128)).is_none());
        assert!(Datatype::UInt8.encode_json(&serde_json::json!(-1)).is_none());
        let b = Datatype::Int16.encode_json(&serde_json::json!(-2)).unwrap();
        assert_eq!(b, (-2i16).to_le_bytes());
        let nan = Datatype::Float64.encode_json(&serde_json::json!("nan")).unwrap();
        assert!(f64::from_le_bytes(nan.try_into().unwrap()).is_nan());
    }
}
