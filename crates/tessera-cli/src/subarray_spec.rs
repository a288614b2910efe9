//! The `--subarray` SPEC: comma-separated inclusive ranges, one per dimension, in domain
//! coordinates.
//!
//! Each item is `lo:hi` (`-5:5`, `1:3000`), a single coordinate `n` (same as `n:n`), `lo:` or
//! `:hi` (open on one side: up to the domain's bound), or `:` / empty (the whole domain of that
//! dimension). Dimensions left off at the end also mean their whole domain, so for a 2-D array
//! `1:10` is `1:10,:`. Parsing is separate from resolving against a schema so a bad SPEC is
//! reported before any array is touched.
//!
//! Sparse arrays take the same SPEC through [`SparseSpec`], whose bounds may also be floats
//! (`-12.5:47`) for float dimensions.

use anyhow::{bail, Result};
use tessera::{ArraySchema, DimRange};

/// One item of a SPEC; `None` bounds stand for the domain's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeSpec {
    /// Low bound, or the domain's low bound.
    pub lo: Option<i128>,
    /// High bound, or the domain's high bound.
    pub hi: Option<i128>,
}

/// A parsed SPEC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubarraySpec {
    /// The items, in dimension order (possibly fewer than the array's dimensions).
    pub ranges: Vec<RangeSpec>,
}

impl SubarraySpec {
    /// Parses a SPEC such as `1:3000,1:12000`, `-5:5,:` or `7,10:`.
    ///
    /// # Errors
    /// An item that is not `lo:hi`, `lo:`, `:hi`, `:`, `n` or empty, or a number that does not
    /// parse.
    pub fn parse(spec: &str) -> Result<Self> {
        let ranges = spec
            .split(',')
            .enumerate()
            .map(|(i, item)| {
                parse_item(item.trim()).map_err(|e| anyhow::anyhow!("subarray {spec:?}, item {}: {e}", i + 1))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { ranges })
    }

    /// Resolves the SPEC against `schema` into one inclusive range per dimension, checking that
    /// each lies inside the domain and is not reversed.
    ///
    /// # Errors
    /// More items than dimensions, a reversed range, or a range outside the domain (the message
    /// names the dimension and its domain).
    pub fn resolve(&self, schema: &ArraySchema) -> Result<Vec<(i128, i128)>> {
        let ndim = schema.dims.len();
        if self.ranges.len() > ndim {
            bail!("the subarray has {} ranges but the array has {ndim} dimension{}", self.ranges.len(), plural(ndim));
        }
        schema
            .dims
            .iter()
            .enumerate()
            .map(|(i, d)| {
                if d.is_float() {
                    bail!("dimension {} has {} coordinates; a SPEC takes integer ranges", d.name, d.datatype);
                }
                let r = self.ranges.get(i).copied().unwrap_or(RangeSpec { lo: None, hi: None });
                let (dlo, dhi) = d.int_domain();
                let (lo, hi) = (r.lo.unwrap_or(dlo), r.hi.unwrap_or(dhi));
                if lo > hi {
                    bail!("dimension {}: range {lo}:{hi} is reversed (low > high)", d.name);
                }
                if lo < dlo || hi > dhi {
                    bail!("dimension {}: range {lo}:{hi} is outside the domain {dlo}:{dhi}", d.name);
                }
                Ok((lo, hi))
            })
            .collect()
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

fn parse_item(item: &str) -> Result<RangeSpec> {
    let (lo, hi) = split_item(item, |s| match s.parse::<i128>() {
        Ok(v) => Ok(v),
        Err(_) => bail!("{s:?} is not an integer (expected lo:hi, e.g. 1:100 or -5:5)"),
    })?;
    Ok(RangeSpec { lo, hi })
}

/// Splits an item into its optional bounds, parsing each non-empty one with `num`.
fn split_item<T: Copy>(item: &str, num: impl Fn(&str) -> Result<T>) -> Result<(Option<T>, Option<T>)> {
    let one = |s: &str| -> Result<Option<T>> {
        let s = s.trim();
        if s.is_empty() {
            Ok(None)
        } else {
            num(s).map(Some)
        }
    };
    match item.split_once(':') {
        Some((a, b)) => {
            if b.contains(':') {
                bail!("{item:?} has more than one ':' (expected lo:hi)");
            }
            Ok((one(a)?, one(b)?))
        }
        None => {
            let v = one(item)?;
            Ok((v, v))
        }
    }
}

/// A bound of a sparse SPEC.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    /// An integer.
    Int(i128),
    /// A finite float (written with a point or an exponent).
    Float(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            #[allow(clippy::cast_precision_loss)]
            Num::Int(v) => v as f64,
            Num::Float(v) => v,
        }
    }
}

/// One item of a sparse SPEC; `None` bounds stand for the domain's bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SparseRangeSpec {
    /// Low bound, or the domain's low bound.
    pub lo: Option<Num>,
    /// High bound, or the domain's high bound.
    pub hi: Option<Num>,
}

/// A parsed SPEC for a sparse array: as [`SubarraySpec`], with float bounds allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct SparseSpec {
    /// The items, in dimension order (possibly fewer than the array's dimensions).
    pub ranges: Vec<SparseRangeSpec>,
}

impl SparseSpec {
    /// Parses a SPEC such as `-12.5:47,:` or `0:100,7`.
    ///
    /// # Errors
    /// An item of the wrong form or a bound that is not a finite number.
    pub fn parse(spec: &str) -> Result<Self> {
        let num = |s: &str| -> Result<Num> {
            if let Ok(v) = s.parse::<i128>() {
                return Ok(Num::Int(v));
            }
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(Num::Float(v)),
                _ => bail!("{s:?} is not a finite number (expected lo:hi, e.g. 1:100 or -12.5:47.25)"),
            }
        };
        let ranges = spec
            .split(',')
            .enumerate()
            .map(|(i, item)| {
                split_item(item.trim(), num)
                    .map(|(lo, hi)| SparseRangeSpec { lo, hi })
                    .map_err(|e| anyhow::anyhow!("subarray {spec:?}, item {}: {e}", i + 1))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { ranges })
    }

    /// Resolves the SPEC against `schema` into the engine's ranges: per dimension, one inclusive
    /// range, or none for the whole domain.
    ///
    /// # Errors
    /// More items than dimensions, a float bound on an integer dimension, a reversed range, or a
    /// range outside the domain.
    pub fn resolve(&self, schema: &ArraySchema) -> Result<Vec<Vec<DimRange>>> {
        let ndim = schema.dims.len();
        if self.ranges.len() > ndim {
            bail!("the subarray has {} ranges but the array has {ndim} dimension{}", self.ranges.len(), plural(ndim));
        }
        schema
            .dims
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let r = self.ranges.get(i).copied().unwrap_or(SparseRangeSpec { lo: None, hi: None });
                if r.lo.is_none() && r.hi.is_none() {
                    return Ok(Vec::new());
                }
                // By the datatype: a float dimension's domain may have been written as integers.
                if d.is_float() {
                    let (dlo, dhi) = d.float_domain();
                    let lo = r.lo.map_or(dlo, Num::as_f64);
                    let hi = r.hi.map_or(dhi, Num::as_f64);
                    if lo > hi {
                        bail!("dimension {}: range {lo:?}:{hi:?} is reversed (low > high)", d.name);
                    }
                    if lo < dlo || hi > dhi {
                        bail!("dimension {}: range {lo:?}:{hi:?} is outside the domain {dlo:?}:{dhi:?}", d.name);
                    }
                    Ok(vec![DimRange::Float(lo, hi)])
                } else {
                    let (dlo, dhi) = d.int_domain();
                    let int = |b: Option<Num>, default: i128| match b {
                        None => Ok(default),
                        Some(Num::Int(v)) => Ok(v),
                        Some(Num::Float(v)) => {
                            bail!("dimension {} has {} coordinates; {v} is not an integer", d.name, d.datatype)
                        }
                    };
                    let (lo, hi) = (int(r.lo, dlo)?, int(r.hi, dhi)?);
                    if lo > hi {
                        bail!("dimension {}: range {lo}:{hi} is reversed (low > high)", d.name);
                    }
                    if lo < dlo || hi > dhi {
                        bail!("dimension {}: range {lo}:{hi} is outside the domain {dlo}:{dhi}", d.name);
                    }
                    Ok(vec![DimRange::Int(lo, hi)])
                }
            })
            .collect()
    }
}

/// Sparse ranges as text: `x -12.5:47.0, y all`.
pub fn sparse_ranges_str(schema: &ArraySchema, ranges: &[Vec<DimRange>]) -> String {
    schema
        .dims
        .iter()
        .zip(ranges)
        .map(|(d, r)| match r.first() {
            None => format!("{} all", d.name),
            Some(DimRange::Int(a, b)) => format!("{} {a}:{b}", d.name),
            Some(DimRange::Float(a, b)) => format!("{} {a:?}:{b:?}", d.name),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tessera::{ArrayType, Attribute, Datatype, Dimension};

    fn schema() -> ArraySchema {
        ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("y", Datatype::Int32, (-10, 10), 5))
            .dim(Dimension::new("x", Datatype::Int32, (1, 100), 10))
            .attr(Attribute::new("a", Datatype::Float32))
            .build()
            .unwrap()
    }

    #[test]
    fn parses_and_resolves_every_form() {
        let s = schema();
        let cases: &[(&str, [(i128, i128); 2])] = &[
            ("-5:5,1:100", [(-5, 5), (1, 100)]),
            ("-10:-3,7", [(-10, -3), (7, 7)]),
            (":,:", [(-10, 10), (1, 100)]),
            (",", [(-10, 10), (1, 100)]),
            ("", [(-10, 10), (1, 100)]),
            ("0:", [(0, 10), (1, 100)]),
            (" :3 , 50: ", [(-10, 3), (50, 100)]),
            ("2:4", [(2, 4), (1, 100)]),
        ];
        for (spec, want) in cases {
            let got = SubarraySpec::parse(spec).unwrap().resolve(&s).unwrap();
            assert_eq!(got, want.to_vec(), "{spec}");
        }
    }

    #[test]
    fn sparse_specs_take_float_bounds() {
        let s = ArraySchema::builder(ArrayType::Sparse)
            .dim(Dimension::float("lat", Datatype::Float64, (-90.0, 90.0), None))
            .dim(Dimension::float("lon", Datatype::Float64, (-180.0, 180.0), None))
            .attr(Attribute::new("a", Datatype::Float32))
            .build()
            .unwrap();
        let got = SparseSpec::parse("-12.5:47,").unwrap().resolve(&s).unwrap();
        assert_eq!(got, vec![vec![DimRange::Float(-12.5, 47.0)], vec![]]);
        let got = SparseSpec::parse("1e1:,:-0.5").unwrap().resolve(&s).unwrap();
        assert_eq!(got, vec![vec![DimRange::Float(10.0, 90.0)], vec![DimRange::Float(-180.0, -0.5)]]);
        let got = SparseSpec::parse("3.25").unwrap().resolve(&s).unwrap();
        assert_eq!(got, vec![vec![DimRange::Float(3.25, 3.25)], vec![]]);
        for (spec, msg) in
            [("a:1", "\"a\" is not a finite number"), ("nan:1", "not a finite number"), ("1:2:3", "more than one")]
        {
            let e = format!("{:#}", SparseSpec::parse(spec).unwrap_err());
            assert!(e.contains(msg), "{spec}: {e}");
        }
        for (spec, msg) in [
            ("5:1", "range 5.0:1.0 is reversed"),
            ("-91:0", "outside the domain -90.0:90.0"),
            ("1,2,3", "3 ranges but the array has 2 dimensions"),
        ] {
            let e = format!("{:#}", SparseSpec::parse(spec).unwrap().resolve(&s).unwrap_err());
            assert!(e.contains(msg), "{spec}: {e}");
        }
        let ints = ArraySchema::builder(ArrayType::Sparse)
            .dim(Dimension::new("x", Datatype::Int64, (0, 100), 10))
            .attr(Attribute::new("a", Datatype::Float32))
            .build()
            .unwrap();
        assert_eq!(SparseSpec::parse("3:").unwrap().resolve(&ints).unwrap(), vec![vec![DimRange::Int(3, 100)]]);
        let e = format!("{:#}", SparseSpec::parse("1.5:3").unwrap().resolve(&ints).unwrap_err());
        assert!(e.contains("dimension x has int64 coordinates; 1.5 is not an integer"), "{e}");
    }

    #[test]
    fn errors_name_the_item_or_dimension() {
        let s = schema();
        for (spec, msg) in [("1:x", "\"x\" is not an integer"), ("1:2:3", "more than one ':'"), ("a", "item 1")] {
            let e = format!("{:#}", SubarraySpec::parse(spec).unwrap_err());
            assert!(e.contains(msg), "{spec}: {e}");
        }
        for (spec, msg) in [
            ("5:1", "dimension y: range 5:1 is reversed"),
            ("0:11", "dimension y: range 0:11 is outside the domain -10:10"),
            (":,0:5", "dimension x: range 0:5 is outside the domain 1:100"),
            ("1,2,3", "3 ranges but the array has 2 dimensions"),
        ] {
            let e = format!("{:#}", SubarraySpec::parse(spec).unwrap().resolve(&s).unwrap_err());
            assert!(e.contains(msg), "{spec}: {e}");
        }
    }
}
