//! Datatypes of dimension coordinates and attribute values.

use serde::{Deserialize, Serialize};

/// The type of one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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
}

impl Datatype {
    /// Every datatype, in a fixed order.
    pub const ALL: [Datatype; 11] = [
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
    ];

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            Datatype::Int8 | Datatype::UInt8 | Datatype::Utf8 => 1,
            Datatype::Int16 | Datatype::UInt16 => 2,
            Datatype::Int32 | Datatype::UInt32 | Datatype::Float32 => 4,
            Datatype::Int64 | Datatype::UInt64 | Datatype::Float64 => 8,
        }
    }

    /// The lower-case name used in schemas ("int32", "float64", "utf8").
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
        }
    }

    /// Parses a name as produced by [`Datatype::name`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    /// Whether this is an integer type.
    pub fn is_integer(self) -> bool {
        !matches!(self, Datatype::Float32 | Datatype::Float64 | Datatype::Utf8)
    }

    /// The smallest and largest value of an integer type.
    pub fn integer_bounds(self) -> Option<(i128, i128)> {
        Some(match self {
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
    /// integers, the maximum of unsigned ones, NaN for floats, 0 for UTF-8 (as TileDB does).
    pub fn default_fill(self) -> Vec<u8> {
        match self {
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
            Datatype::Utf8 => vec![0],
        }
    }

    /// Encodes one JSON number (or, for UTF-8, a one-character string or number) as this type.
    pub fn encode_json(self, v: &serde_json::Value) -> Option<Vec<u8>> {
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

    /// Decodes one value of this type to JSON (NaN and infinities become strings).
    pub fn decode_json(self, b: &[u8]) -> serde_json::Value {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        let u = u64::from_le_bytes(w);
        match self {
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
    }

    #[test]
    fn json_values_round_trip() {
        for d in Datatype::ALL {
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
