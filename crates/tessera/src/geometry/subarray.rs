//! Subarrays: the ranges of domain coordinates a query reads or writes, checked against the
//! schema and converted to normalized coordinates.

use crate::error::QueryError;
use crate::geometry::coords::{float_ordinal, ordinal_float, ordinal_range};
use crate::schema::ArraySchema;

/// One or more inclusive ranges per dimension, in domain coordinates. A read returns the cells of
/// the cross product of the ranges, each dimension's ranges concatenated in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subarray {
    /// Ranges per dimension.
    pub ranges: Vec<Vec<(i128, i128)>>,
}

impl Subarray {
    /// One range per dimension.
    pub fn from_ranges(r: &[(i128, i128)]) -> Self {
        Self { ranges: r.iter().map(|&x| vec![x]).collect() }
    }

    /// The whole domain.
    pub fn full(schema: &ArraySchema) -> Self {
        Self { ranges: schema.dims.iter().map(|d| vec![d.int_domain()]).collect() }
    }

    /// The subarray of a dense read given ranges as a sparse read takes them: integer bounds,
    /// or float bounds of which an integer dimension takes the integers inside (`(1.5, 3)` is
    /// `(2, 3)`), so that both kinds of arrays read the same cells for the same bounds. An empty
    /// list is the whole dimension.
    ///
    /// # Errors
    /// As `ordinal_ranges`: a wrong dimension count, NaN bounds, a reversed range or one
    /// outside the domain; and a range holding no integer (a dense result has a place for every
    /// coordinate of its ranges, so it cannot leave a dimension empty), or a float dimension.
    pub fn from_dim_ranges(schema: &ArraySchema, ranges: &[Vec<DimRange>]) -> Result<Self, QueryError> {
        if let Some(d) = schema.dims.iter().find(|d| d.is_float()) {
            return Err(QueryError::BadSubarray(format!("dimension {} has float coordinates", d.name)));
        }
        let ords = ordinal_ranges(schema, ranges)?;
        let mut out = Vec::with_capacity(ords.len());
        for ((dim, rs), os) in schema.dims.iter().zip(ranges).zip(ords) {
            if os.len() < rs.len() {
                // `ordinal_ranges` drops exactly the ranges without an integer inside.
                let empty = rs.iter().find_map(|r| match *r {
                    DimRange::Float(lo, hi) if ordinal_range(dim, lo, hi, None).is_none() => Some((lo, hi)),
                    _ => None,
                });
                let (lo, hi) = empty.unwrap_or((f64::NAN, f64::NAN));
                return Err(QueryError::BadSubarray(format!(
                    "dimension {}: range [{lo}, {hi}] holds no integer coordinate",
                    dim.name
                )));
            }
            out.push(os.into_iter().map(|[a, b]| (dim.denormalize(a), dim.denormalize(b))).collect());
        }
        Ok(Self { ranges: out })
    }

    /// Checks every range against the domain and returns the normalized ranges.
    ///
    /// # Errors
    /// `QueryError` for a wrong dimension count, an empty dimension, a reversed range or one
    /// outside the domain.
    pub fn normalize(&self, schema: &ArraySchema) -> Result<Vec<Vec<[u64; 2]>>, QueryError> {
        if self.ranges.len() != schema.ndim() {
            return Err(QueryError::BadSubarray(format!(
                "{} dimensions given, the array has {}",
                self.ranges.len(),
                schema.ndim()
            )));
        }
        self.ranges
            .iter()
            .zip(&schema.dims)
            .map(|(rs, dim)| {
                if rs.is_empty() {
                    return Err(QueryError::BadSubarray(format!("dimension {} has no range", dim.name)));
                }
                rs.iter()
                    .map(|&(lo, hi)| {
                        if lo > hi {
                            return Err(QueryError::Reversed {
                                dim: dim.name.clone(),
                                lo: lo.to_string(),
                                hi: hi.to_string(),
                            });
                        }
                        match (dim.normalize(lo), dim.normalize(hi)) {
                            (Some(a), Some(b)) => Ok([a, b]),
                            _ => Err(QueryError::OutOfDomain {
                                dim: dim.name.clone(),
                                lo: lo.to_string(),
                                hi: hi.to_string(),
                                dom_lo: dim.int_domain().0.to_string(),
                                dom_hi: dim.int_domain().1.to_string(),
                            }),
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// An inclusive range on one dimension of a sparse array.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DimRange {
    /// Integer bounds (integer dimensions).
    Int(i128, i128),
    /// Float bounds (any dimension: integer dimensions take the integers inside).
    Float(f64, f64),
}

impl DimRange {
    /// The range of dimension `dim` between two ordinals (normalized integers, or float
    /// ordinals).
    pub(crate) fn from_ordinals(dim: &crate::schema::Dimension, lo: u64, hi: u64) -> Self {
        if dim.is_float() {
            DimRange::Float(ordinal_float(lo), ordinal_float(hi))
        } else {
            DimRange::Int(dim.denormalize(lo), dim.denormalize(hi))
        }
    }
}

/// Checks sparse ranges (one list per dimension; an empty list means the whole domain) and
/// converts them to inclusive ordinal ranges. Integer dimensions given float bounds take the
/// integers inside; a range that misses every coordinate becomes no range.
///
/// # Errors
/// A wrong dimension count, NaN bounds, a reversed range or one outside the domain.
pub(crate) fn ordinal_ranges(schema: &ArraySchema, ranges: &[Vec<DimRange>]) -> Result<Vec<Vec<[u64; 2]>>, QueryError> {
    if ranges.len() != schema.ndim() {
        return Err(QueryError::BadSubarray(format!(
            "{} dimensions given, the array has {}",
            ranges.len(),
            schema.ndim()
        )));
    }
    let mut oranges: Vec<Vec<[u64; 2]>> = Vec::with_capacity(schema.ndim());
    for (d, rs) in schema.dims.iter().zip(ranges) {
        if rs.is_empty() {
            let whole = if d.is_float() {
                let (lo, hi) = d.float_domain();
                [float_ordinal(lo), float_ordinal(hi)]
            } else {
                [0, d.domain_size() - 1]
            };
            oranges.push(vec![whole]);
            continue;
        }
        let mut v = Vec::new();
        for r in rs {
            let (lo, hi, int) = match *r {
                DimRange::Int(a, b) => (a as f64, b as f64, Some((a, b))),
                DimRange::Float(a, b) => (a, b, None),
            };
            if lo.is_nan() || hi.is_nan() {
                return Err(QueryError::BadSubarray(format!("dimension {}: a range bound is NaN", d.name)));
            }
            let reversed = match *r {
                DimRange::Int(a, b) => a > b,
                DimRange::Float(a, b) => a > b,
            };
            let text = |f: f64, i: Option<i128>| i.map_or_else(|| f.to_string(), |i| i.to_string());
            let (lt, ht) = (text(lo, int.map(|x| x.0)), text(hi, int.map(|x| x.1)));
            if reversed {
                return Err(QueryError::Reversed { dim: d.name.clone(), lo: lt, hi: ht });
            }
            // As for dense reads, a range must lie inside the domain.
            let outside = if d.is_float() {
                let (dlo, dhi) = d.float_domain();
                lo < dlo || hi > dhi
            } else {
                let (dlo, dhi) = d.int_domain();
                match int {
                    Some((a, b)) => a < dlo || b > dhi,
                    None => lo < dlo as f64 || hi > dhi as f64,
                }
            };
            if outside {
                let (dlo, dhi) = if d.is_float() {
                    let (a, b) = d.float_domain();
                    (a.to_string(), b.to_string())
                } else {
                    let (a, b) = d.int_domain();
                    (a.to_string(), b.to_string())
                };
                return Err(QueryError::OutOfDomain { dim: d.name.clone(), lo: lt, hi: ht, dom_lo: dlo, dom_hi: dhi });
            }
            if let Some(o) = ordinal_range(d, lo, hi, int) {
                v.push(o);
            }
        }
        oranges.push(v);
    }
    Ok(oranges)
}
