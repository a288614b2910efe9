//! The `--subarray` SPEC: comma-separated inclusive ranges, one per dimension, in domain
//! coordinates.
//!
//! Each item is `lo:hi` (`-5:5`, `1:3000`), a single coordinate `n` (same as `n:n`), `lo:` or
//! `:hi` (open on one side: up to the domain's bound), or `:` / empty (the whole domain of that
//! dimension). Dimensions left off at the end also mean their whole domain, so for a 2-D array
//! `1:10` is `1:10,:`. Parsing is separate from resolving against a schema so a bad SPEC is
//! reported before any array is touched.

use anyhow::{bail, Result};
use tessera::ArraySchema;

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
    let num = |s: &str| -> Result<Option<i128>> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(None);
        }
        match s.parse::<i128>() {
            Ok(v) => Ok(Some(v)),
            Err(_) => bail!("{s:?} is not an integer (expected lo:hi, e.g. 1:100 or -5:5)"),
        }
    };
    match item.split_once(':') {
        Some((a, b)) => {
            if b.contains(':') {
                bail!("{item:?} has more than one ':' (expected lo:hi)");
            }
            Ok(RangeSpec { lo: num(a)?, hi: num(b)? })
        }
        None => {
            let v = num(item)?;
            Ok(RangeSpec { lo: v, hi: v })
        }
    }
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
