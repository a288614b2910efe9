//! The `--subarray` SPEC: comma-separated inclusive ranges, one per dimension, in domain
//! coordinates.
//!
//! Each item is `lo:hi` (`-5:5`, `1:3000`; floats such as `-12.5:47` on float dimensions), a
//! single coordinate `n` (same as `n:n`), `lo:` or `:hi` (open on one side: up to the domain's
//! bound), or `:` / empty (the whole domain of that dimension). Dimensions left off at the end
//! also mean their whole domain, so for a 2-D array `1:10` is `1:10,:`. Parsing is separate from
//! resolving against a schema so a bad SPEC is reported before any array is touched; resolving
//! gives the engine's [`DimRange`]s.

use anyhow::{anyhow, bail, Result};
use tessera::{ArraySchema, DimRange};

/// A bound of a SPEC.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Num {
    Int(i128),
    /// A finite float (written with a point or an exponent).
    Float(f64),
}

/// A parsed SPEC: per item its bounds, `None` standing for the domain's bound.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spec(Vec<(Option<Num>, Option<Num>)>);

impl Spec {
    /// Parses a SPEC such as `1:3000,1:12000`, `-5:5,:`, `7,10:` or (unless `ints`) `-12.5:47`.
    ///
    /// # Errors
    /// An item that is not `lo:hi`, `lo:`, `:hi`, `:`, `n` or empty, or a bound that does not
    /// parse; the message names the item.
    pub(crate) fn parse(spec: &str, ints: bool) -> Result<Self> {
        let num = |s: &str| -> Result<Option<Num>> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            if let Ok(v) = s.parse::<i128>() {
                return Ok(Some(Num::Int(v)));
            }
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() && !ints => Ok(Some(Num::Float(v))),
                _ if ints => bail!("{s:?} is not an integer (expected lo:hi, e.g. 1:100 or -5:5)"),
                _ => bail!("{s:?} is not a finite number (expected lo:hi, e.g. 1:100 or -12.5:47.25)"),
            }
        };
        let item = |item: &str| -> Result<(Option<Num>, Option<Num>)> {
            match item.split_once(':') {
                Some((_, b)) if b.contains(':') => bail!("{item:?} has more than one ':' (expected lo:hi)"),
                Some((a, b)) => Ok((num(a)?, num(b)?)),
                None => num(item).map(|v| (v, v)),
            }
        };
        let items = spec
            .split(',')
            .enumerate()
            .map(|(i, s)| item(s.trim()).map_err(|e| anyhow!("subarray {spec:?}, item {}: {e}", i + 1)));
        Ok(Self(items.collect::<Result<_>>()?))
    }

    /// Resolves the SPEC against `schema`: per dimension, the inclusive range, or `None` for
    /// the whole domain.
    ///
    /// # Errors
    /// More items than dimensions, a float bound on an integer dimension, a reversed range, or a
    /// range outside the domain (naming the dimension and its domain).
    pub(crate) fn resolve(&self, schema: &ArraySchema) -> Result<Vec<Option<DimRange>>> {
        let ndim = schema.dims.len();
        if self.0.len() > ndim {
            bail!(
                "the subarray has {} ranges but the array has {ndim} dimension{}",
                self.0.len(),
                crate::plural(ndim as u64)
            );
        }
        let check = |name: &str, rev: bool, out: bool, r: String, dom: String| -> Result<()> {
            if rev {
                bail!("dimension {name}: range {r} is reversed (low > high)");
            }
            if out {
                bail!("dimension {name}: range {r} is outside the domain {dom}");
            }
            Ok(())
        };
        let resolve_dim = |(i, d): (usize, &tessera::Dimension)| -> Result<Option<DimRange>> {
            let (lo, hi) = self.0.get(i).copied().unwrap_or((None, None));
            if lo.is_none() && hi.is_none() {
                return Ok(None);
            }
            // By the datatype: a float dimension's domain may have been written as integers.
            if d.is_float() {
                let (dlo, dhi) = d.float_domain();
                #[allow(clippy::cast_precision_loss)]
                let f = |b: Option<Num>, dflt: f64| match b {
                    Some(Num::Int(v)) => v as f64,
                    Some(Num::Float(v)) => v,
                    None => dflt,
                };
                let (lo, hi) = (f(lo, dlo), f(hi, dhi));
                check(&d.name, lo > hi, lo < dlo || hi > dhi, format!("{lo:?}:{hi:?}"), format!("{dlo:?}:{dhi:?}"))?;
                return Ok(Some(DimRange::Float(lo, hi)));
            }
            let (dlo, dhi) = d.int_domain();
            let int = |b: Option<Num>, dflt: i128| match b {
                Some(Num::Int(v)) => Ok(v),
                Some(Num::Float(v)) => {
                    bail!("dimension {} has {} coordinates; {v} is not an integer", d.name, d.datatype)
                }
                None => Ok(dflt),
            };
            let (lo, hi) = (int(lo, dlo)?, int(hi, dhi)?);
            check(&d.name, lo > hi, lo < dlo || hi > dhi, format!("{lo}:{hi}"), format!("{dlo}:{dhi}"))?;
            Ok(Some(DimRange::Int(lo, hi)))
        };
        schema.dims.iter().enumerate().map(resolve_dim).collect()
    }

    /// Resolves the SPEC of a dense array: one inclusive range per dimension.
    ///
    /// # Errors
    /// As [`Spec::resolve`].
    pub(crate) fn resolve_dense(&self, schema: &ArraySchema) -> Result<Vec<(i128, i128)>> {
        let ranges = self.resolve(schema)?;
        Ok(ranges
            .iter()
            .zip(&schema.dims)
            .map(|(r, d)| match r {
                Some(DimRange::Int(a, b)) => (*a, *b),
                _ => d.int_domain(),
            })
            .collect())
    }
}

/// Dense ranges as a SPEC (`1:30,1:40`), ready to paste into `--subarray`.
pub(crate) fn spec_str(r: &[(i128, i128)]) -> String {
    r.iter().map(|(a, b)| format!("{a}:{b}")).collect::<Vec<_>>().join(",")
}

/// A range as text: `1:30`, or `-12.5:47.0` for floats.
pub(crate) fn range_str(r: &DimRange) -> String {
    match *r {
        DimRange::Int(a, b) => format!("{a}:{b}"),
        DimRange::Float(a, b) => format!("{a:?}:{b:?}"),
    }
}

/// Ranges as a SPEC: `-12.5:47.0,-0.5:100.0`.
pub(crate) fn coords_str(r: &[DimRange]) -> String {
    r.iter().map(range_str).collect::<Vec<_>>().join(",")
}

/// Ranges of named dimensions as text: `x -12.5:47.0, y all`.
pub(crate) fn named_str(schema: &ArraySchema, ranges: &[Option<DimRange>]) -> String {
    let item = |(d, r): (&tessera::Dimension, &Option<DimRange>)| {
        format!("{} {}", d.name, r.as_ref().map_or_else(|| "all".into(), range_str))
    };
    schema.dims.iter().zip(ranges).map(item).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tessera::{ArrayType, Attribute, Datatype, Dimension};

    fn schema(kind: ArrayType, dims: Vec<Dimension>) -> ArraySchema {
        let b = dims.into_iter().fold(ArraySchema::builder(kind), tessera::ArraySchemaBuilder::dim);
        b.attr(Attribute::new("a", Datatype::Float32)).build().unwrap()
    }

    #[test]
    fn dense_specs_take_every_form() {
        let s = schema(
            ArrayType::Dense,
            vec![
                Dimension::new("y", Datatype::Int32, (-10, 10), 5),
                Dimension::new("x", Datatype::Int32, (1, 100), 10),
            ],
        );
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
            assert_eq!(Spec::parse(spec, true).unwrap().resolve_dense(&s).unwrap(), want.to_vec(), "{spec}");
        }
        for (spec, msg) in [("1:x", "\"x\" is not an integer"), ("1:2:3", "more than one ':'"), ("1.5", "item 1")] {
            let e = format!("{:#}", Spec::parse(spec, true).unwrap_err());
            assert!(e.contains(msg), "{spec}: {e}");
        }
        for (spec, msg) in [
            ("5:1", "dimension y: range 5:1 is reversed"),
            ("0:11", "dimension y: range 0:11 is outside the domain -10:10"),
            (":,0:5", "dimension x: range 0:5 is outside the domain 1:100"),
            ("1,2,3", "3 ranges but the array has 2 dimensions"),
        ] {
            let e = format!("{:#}", Spec::parse(spec, true).unwrap().resolve(&s).unwrap_err());
            assert!(e.contains(msg), "{spec}: {e}");
        }
    }

    #[test]
    fn sparse_specs_take_float_bounds() {
        let s = schema(
            ArrayType::Sparse,
            vec![
                Dimension::float("lat", Datatype::Float64, (-90.0, 90.0), None),
                Dimension::float("lon", Datatype::Float64, (-180.0, 180.0), None),
            ],
        );
        let r = |spec: &str| Spec::parse(spec, false).unwrap().resolve(&s);
        assert_eq!(r("-12.5:47,").unwrap(), vec![Some(DimRange::Float(-12.5, 47.0)), None]);
        assert_eq!(
            r("1e1:,:-0.5").unwrap(),
            vec![Some(DimRange::Float(10.0, 90.0)), Some(DimRange::Float(-180.0, -0.5))]
        );
        assert_eq!(named_str(&s, &r("3.25").unwrap()), "lat 3.25:3.25, lon all");
        for (spec, msg) in [("a:1", "\"a\" is not a finite number"), ("nan:1", "not a finite number")] {
            assert!(format!("{:#}", Spec::parse(spec, false).unwrap_err()).contains(msg), "{spec}");
        }
        for (spec, msg) in [("5:1", "range 5.0:1.0 is reversed"), ("-91:0", "outside the domain -90.0:90.0")] {
            assert!(format!("{:#}", r(spec).unwrap_err()).contains(msg), "{spec}");
        }
        let ints = schema(ArrayType::Sparse, vec![Dimension::new("x", Datatype::Int64, (0, 100), 10)]);
        let e = format!("{:#}", Spec::parse("1.5:3", false).unwrap().resolve(&ints).unwrap_err());
        assert!(e.contains("dimension x has int64 coordinates; 1.5 is not an integer"), "{e}");
    }
}
