//! Subarrays: the ranges of domain coordinates a query reads or writes, checked against the
//! schema and converted to normalized coordinates.

use crate::error::QueryError;
use crate::geometry::coords::ordinal_float;
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
