//! The `--subarray` SPEC: comma-separated inclusive ranges, one per dimension, in domain
//! coordinates.
//!
//! Each item is `lo:hi` (`-5:5`, `1:3000`; floats such as `-12.5:47` on float dimensions), a
//! single coordinate `n` (same as `n:n`), `lo:` or `:hi` (open on one side: up to the domain's
//! bound), or `:` / empty (the whole domain of that dimension). Dimensions left off at the end
//! also mean their whole domain, so for a 2-D array `1:10` is `1:10,:`. `lo..hi` is the same as
//! `lo:hi`.
//!
//! On `datetime64` dimensions a bound is an integer count of the unit or an ISO 8601 time
//! (`2024-01-31`, `2024-01-31T23:59:59`), read by the engine's parser. A time's own colons are
//! told apart by where they stand: a `:` right after the hour (`T23:`) or the minutes
//! (`T23:59:`) and before exactly two digits (the minutes or seconds) belongs to the time; any
//! other `:` separates the bounds, so `2024-01-01T00:00:00:2024-01-31T23:59:59` and
//! `2024-01-01T00:2024-01-31T23` are ranges (as is what `tessera info` prints as a time
//! domain). `..` always separates, for what the rule does not read as meant (`T10..12`: from
//! 10 o'clock to the count 12).
//!
//! Parsing is separate from resolving against a schema so a bad SPEC is reported before any
//! array is touched; resolving gives the engine's [`DimRange`]s.

use anyhow::{anyhow, bail, Result};
use tessera::{display_datetime, parse_datetime, ArraySchema, DimRange, Dimension, TimeUnit};

/// A bound of a SPEC.
#[derive(Debug, Clone, PartialEq)]
enum Num {
    Int(i128),
    /// A finite float (written with a point or an exponent).
    Float(f64),
    /// Text that starts like a date (`2024-`): an ISO 8601 time, parsed once the dimension's
    /// unit is known.
    Time(String),
}

/// A parsed SPEC: per item its bounds, `None` standing for the domain's bound.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spec(Vec<(Option<Num>, Option<Num>)>);

/// Whether `text` starts like an ISO 8601 date: an optional sign, 4 or more digits, `-`.
fn starts_like_date(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let year = unsigned.bytes().take_while(u8::is_ascii_digit).count();
    year >= 4 && unsigned.as_bytes().get(year) == Some(&b'-')
}

/// Whether the `:` at byte `k` of `item` is inside a time of day: right after `Thh` or
/// `Thh:mm` (`T` or a space before the hour) and before a two-digit field (two digits, then no
/// digit: `:2024-` starts a date).
fn colon_in_time(item: &str, k: usize) -> bool {
    let (before, after) = (&item.as_bytes()[..k], &item.as_bytes()[k + 1..]);
    let two = |a: &u8, b: &u8| a.is_ascii_digit() && b.is_ascii_digit();
    let hour_ends = |b: &[u8]| matches!(b, [.., b'T' | b' ', h, h2] if two(h, h2));
    let minute_ends = |b: &[u8]| matches!(b, [rest @ .., b':', m, m2] if two(m, m2) && hour_ends(rest));
    let field_follows =
        matches!(after, [a, b, rest @ ..] if two(a, b) && !rest.first().is_some_and(u8::is_ascii_digit));
    (hour_ends(before) || minute_ends(before)) && field_follows
}

/// Splits a SPEC item into its two bounds (`None`: a single coordinate): at `..`, else at the
/// one `:` that is not inside a time of day.
pub(crate) fn split_range(item: &str) -> Result<Option<(&str, &str)>> {
    if let Some((a, b)) = item.split_once("..") {
        if b.contains("..") {
            bail!("{item:?} has more than one '..' (expected lo..hi)");
        }
        return Ok(Some((a, b)));
    }
    let mut seps = item.match_indices(':').map(|(k, _)| k).filter(|&k| !colon_in_time(item, k));
    match (seps.next(), seps.next()) {
        (Some(k), None) => Ok(Some((&item[..k], &item[k + 1..]))),
        (None, _) => Ok(None),
        (Some(_), Some(_)) => bail!(
            "{item:?} has more than one ':' (expected lo:hi; a ':' inside a time stands between two-digit hours, \
             minutes and seconds, e.g. 2024-01-01T00:00:00; lo..hi always separates)"
        ),
    }
}

impl Spec {
    /// Parses a SPEC such as `1:3000,1:12000`, `-5:5,:`, `7,10:`, (unless `ints`) `-12.5:47`, or
    /// `2024-01-01T00:00:00:2024-01-31T23:59:59` (times are checked by [`Spec::resolve`]).
    ///
    /// # Errors
    /// An item that is not `lo:hi`, `lo..hi`, `lo:`, `:hi`, `:`, `n` or empty, or a bound that
    /// is neither a number nor starts like a date; the message names the item.
    pub(crate) fn parse(spec: &str, ints: bool) -> Result<Self> {
        let num = |s: &str| -> Result<Option<Num>> {
            let s = s.trim();
            Ok(Some(match (s.parse::<i128>(), s.parse::<f64>()) {
                _ if s.is_empty() => return Ok(None),
                (Ok(v), _) => Num::Int(v),
                _ if starts_like_date(s) => Num::Time(s.to_string()),
                (_, Ok(v)) if v.is_finite() && !ints => Num::Float(v),
                _ if ints => bail!(
                    "{s:?} is not an integer or an ISO 8601 time (expected lo:hi, e.g. 1:100, -5:5 or \
                     2024-01-01:2024-01-31)"
                ),
                _ => bail!(
                    "{s:?} is not a finite number or an ISO 8601 time (expected lo:hi, e.g. 1:100, -12.5:47.25 or \
                     2024-01-01:2024-01-31)"
                ),
            }))
        };
        let item = |item: &str| match split_range(item)? {
            Some((a, b)) => Ok((num(a)?, num(b)?)),
            None => num(item).map(|v| (v.clone(), v)),
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
    /// More items than dimensions, a float bound on an integer dimension, a time on a dimension
    /// that is not `datetime64` or one the engine's parser refuses, a reversed range, or a range
    /// outside the domain (naming the dimension and its domain).
    pub(crate) fn resolve(&self, schema: &ArraySchema) -> Result<Vec<Option<DimRange>>> {
        let ndim = schema.dims.len();
        if self.0.len() > ndim {
            let (n, s) = (self.0.len(), crate::plural(ndim as u64));
            bail!("the subarray has {n} ranges but the array has {ndim} dimension{s}");
        }
        let check = |name: &str, rev: bool, out: bool, r: String, dom: String| match (rev, out) {
            (true, _) => Err(anyhow!("dimension {name}: range {r} is reversed (low > high)")),
            (_, true) => Err(anyhow!("dimension {name}: range {r} is outside the domain {dom}")),
            _ => Ok(()),
        };
        let not_a_time = |d: &Dimension, s: &str| {
            let (name, t) = (&d.name, d.datatype);
            anyhow!("dimension {name} has {t} coordinates; {s:?} is a time, which only datetime64 dimensions take")
        };
        let resolve_dim = |(i, d): (usize, &Dimension)| -> Result<Option<DimRange>> {
            let (lo, hi) = self.0.get(i).cloned().unwrap_or((None, None));
            if lo.is_none() && hi.is_none() {
                return Ok(None);
            }
            // By the datatype: a float dimension's domain may have been written as integers.
            if d.is_float() {
                let (dlo, dhi) = d.float_domain();
                #[allow(clippy::cast_precision_loss)]
                let f = |b: Option<Num>, dflt: f64| match b {
                    Some(Num::Int(v)) => Ok(v as f64),
                    Some(Num::Float(v)) => Ok(v),
                    Some(Num::Time(s)) => Err(not_a_time(d, &s)),
                    None => Ok(dflt),
                };
                let (lo, hi) = (f(lo, dlo)?, f(hi, dhi)?);
                check(&d.name, lo > hi, lo < dlo || hi > dhi, format!("{lo:?}:{hi:?}"), format!("{dlo:?}:{dhi:?}"))?;
                return Ok(Some(DimRange::Float(lo, hi)));
            }
            let (dlo, dhi) = d.int_domain();
            let int = |b: Option<Num>, dflt: i128| match b {
                Some(Num::Int(v)) => Ok(v),
                Some(Num::Float(v)) => {
                    bail!("dimension {} has {} coordinates; {v} is not an integer", d.name, d.datatype)
                }
                Some(Num::Time(s)) => match d.datatype.time_unit() {
                    Some(u) => parse_datetime(&s, u).map(i128::from).map_err(|e| anyhow!("dimension {}: {e}", d.name)),
                    None => Err(not_a_time(d, &s)),
                },
                None => Ok(dflt),
            };
            let (lo, hi) = (int(lo, dlo)?, int(hi, dhi)?);
            check(&d.name, lo > hi, lo < dlo || hi > dhi, int_range_str(d, lo, hi), int_range_str(d, dlo, dhi))?;
            Ok(Some(DimRange::Int(lo, hi)))
        };
        schema.dims.iter().enumerate().map(resolve_dim).collect()
    }

    /// Resolves the SPEC of a dense array: one inclusive range per dimension.
    ///
    /// # Errors
    /// As [`Spec::resolve`].
    pub(crate) fn resolve_dense(&self, schema: &ArraySchema) -> Result<Vec<(i128, i128)>> {
        let range = |(r, d): (Option<DimRange>, &Dimension)| match r {
            Some(DimRange::Int(a, b)) => (a, b),
            _ => d.int_domain(),
        };
        Ok(self.resolve(schema)?.into_iter().zip(&schema.dims).map(range).collect())
    }
}

/// An integer range of dimension `d` as `lo:hi`; on `datetime64` dimensions the ISO times, then
/// the counts of the unit (`2024-01-01:2024-01-31 (19723:19753)`): both are what `--subarray`
/// takes.
pub(crate) fn int_range_str(d: &Dimension, lo: i128, hi: i128) -> String {
    match d.datatype.time_unit() {
        Some(u) => format!("{}:{} ({lo}:{hi})", iso(u, lo), iso(u, hi)),
        None => format!("{lo}:{hi}"),
    }
}

/// A count `v` of time unit `u` as an ISO 8601 time (the count itself if past `i64`).
fn iso(u: TimeUnit, v: i128) -> String {
    i64::try_from(v).map_or_else(|_| v.to_string(), |v| display_datetime(v, u).to_string())
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

/// One dimension's range as a SPEC item: `-12.5:47.0`, or ISO 8601 times on `datetime64`
/// dimensions (`2024-01-02T00:2024-01-03T23`).
fn dim_range_str(d: &Dimension, r: &DimRange) -> String {
    match (d.datatype.time_unit(), *r) {
        (Some(u), DimRange::Int(a, b)) => format!("{}:{}", iso(u, a), iso(u, b)),
        _ => range_str(r),
    }
}

/// Ranges of `schema`'s dimensions as a SPEC, ready to paste into `--subarray`:
/// `-12.5:47.0,-0.5:100.0`, with ISO 8601 times on `datetime64` dimensions
/// (`2024-01-02T00:2024-01-03T23,1:10`).
pub(crate) fn coords_str(schema: &ArraySchema, r: &[DimRange]) -> String {
    schema.dims.iter().zip(r).map(|(d, r)| dim_range_str(d, r)).collect::<Vec<_>>().join(",")
}

/// Ranges of named dimensions as text: `x -12.5:47.0, t 2024-01-02T00:2024-01-03T23, y all`.
pub(crate) fn named_str(schema: &ArraySchema, ranges: &[Option<DimRange>]) -> String {
    let item = |(d, r): (&Dimension, &Option<DimRange>)| {
        format!("{} {}", d.name, r.as_ref().map_or_else(|| "all".into(), |r| dim_range_str(d, r)))
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

    #[test]
    fn time_specs_take_iso_bounds_and_counts() {
        let s = schema(
            ArrayType::Dense,
            vec![
                Dimension::new("t", Datatype::Datetime64(tessera::TimeUnit::Second), (0, 4_102_444_800), 86_400),
                // Every dimension has one type (an engine rule): x counts seconds 0..=100.
                Dimension::new("x", Datatype::Datetime64(tessera::TimeUnit::Second), (0, 100), 10),
            ],
        );
        let r = |spec: &str| Spec::parse(spec, true).and_then(|p| p.resolve(&s)).map_err(|e| format!("{e:#}"));
        let jan = Some(DimRange::Int(1_704_067_200, 1_706_745_599));
        for spec in [
            "2024-01-01T00:00:00:2024-01-31T23:59:59",
            "2024-01-01T00:00:00Z:2024-01-31T23:59:59Z",
            "2024-01-01:2024-01-31T23:59:59",
            "2024-01-01 00:00:2024-01-31 23:59:59",
            "2024-01-01..2024-01-31T23:59:59",
            "2024-01-01T00:00:00:1706745599",
            "1704067200:1706745599",
        ] {
            assert_eq!(r(spec).unwrap(), vec![jan, None], "{spec}");
        }
        let one = |v| Some(DimRange::Int(v, v));
        assert_eq!(r("2024-01-15T10:30,7").unwrap(), vec![one(1_705_314_600), one(7)]);
        assert_eq!(r("2024-01-15T10:30:05").unwrap(), vec![one(1_705_314_605), None]);
        assert_eq!(r("2024-01-15T10:").unwrap(), vec![Some(DimRange::Int(1_705_312_800, 4_102_444_800)), None]);
        assert_eq!(r(":1970-01-02").unwrap(), vec![Some(DimRange::Int(0, 86_400)), None]);
        // Messages name time ranges as times (what `--subarray` takes back).
        assert_eq!(
            named_str(&s, &r("2024-01-15T10:30,7").unwrap()),
            "t 2024-01-15T10:30:00:2024-01-15T10:30:00, x 1970-01-01T00:00:07:1970-01-01T00:00:07"
        );
        // What `tessera info` prints as the domain reads back as the domain.
        assert_eq!(
            r(crate::info::domain_str(&s.dims[0]).split(' ').next().unwrap()).unwrap()[0],
            Some(DimRange::Int(0, 4_102_444_800))
        );
        for (spec, msg) in [
            ("2024-02-30", "dimension t: \"2024-02-30\" is not an ISO 8601 date and time: no such date"),
            ("2024-01-01T00:00:00.5", "dimension t: \"2024-01-01T00:00:00.5\" is finer than the unit s"),
            (
                ":,1970-01-01T00:01:41",
                "dimension x: range 1970-01-01T00:01:41:1970-01-01T00:01:41 (101:101) is outside",
            ),
            ("2024-01-01T00:00:00:2024-01-02:5", "item 1: \"2024-01-01T00:00:00:2024-01-02:5\" has more than one ':'"),
            ("NaT", "\"NaT\" is not an integer or an ISO 8601 time"),
            ("1..2..3", "more than one '..'"),
            (
                "2024-01-15T10..12",
                "dimension t: range 2024-01-15T10:00:00:1970-01-01T00:00:12 (1705312800:12) is reversed",
            ),
            (
                "1969-12-31:1970-01-02",
                "dimension t: range 1969-12-31T00:00:00:1970-01-02T00:00:00 (-86400:86400) is outside the domain \
                 1970-01-01T00:00:00:2100-01-01T00:00:00 (0:4102444800)",
            ),
        ] {
            let e = r(spec).unwrap_err();
            assert!(e.contains(msg), "{spec}: {e}");
        }
        let floats = schema(ArrayType::Sparse, vec![Dimension::float("lat", Datatype::Float64, (-90.0, 90.0), None)]);
        let e = format!("{:#}", Spec::parse("2024-01-01:", false).unwrap().resolve(&floats).unwrap_err());
        assert!(e.contains("dimension lat has float64 coordinates; \"2024-01-01\" is a time"), "{e}");
        let ints = schema(ArrayType::Dense, vec![Dimension::new("x", Datatype::Int64, (0, 100), 10)]);
        let e = format!("{:#}", Spec::parse("1:2024-01-01", true).unwrap().resolve(&ints).unwrap_err());
        assert!(e.contains("dimension x has int64 coordinates; \"2024-01-01\" is a time"), "{e}");
    }
}
