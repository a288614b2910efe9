//! A dimension: a name, a coordinate type, an inclusive domain, an optional space-tile extent
//! and the filters of its coordinate column (sparse fragments).
//!
//! Inside the engine every integer coordinate is *normalized*: `coordinate - domain.lo` as `u64`,
//! so the geometry code works on zero-based unsigned grids whatever the dimension's type. Float
//! coordinates are compared through an order-preserving map to `u64` ("ordinals", see
//! `geometry::coords` and docs/format.md).

use serde::{Deserialize, Serialize};

use super::datatype::NAT;
use super::{Datatype, SchemaError};
use crate::filter::FilterPipeline;

/// An inclusive domain. In JSON, `[lo, hi]`: integers make an integer domain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Domain {
    /// Integer bounds (integer dimensions).
    Int(i128, i128),
    /// Floating-point bounds (float dimensions).
    Float(f64, f64),
}

impl<'de> Deserialize<'de> for Domain {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v: [serde_json::Number; 2] = Deserialize::deserialize(d)?;
        let int = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
        if let (Some(lo), Some(hi)) = (int(&v[0]), int(&v[1])) {
            return Ok(Domain::Int(lo, hi));
        }
        match (v[0].as_f64(), v[1].as_f64()) {
            (Some(lo), Some(hi)) => Ok(Domain::Float(lo, hi)),
            _ => Err(serde::de::Error::custom("a domain is [lo, hi] of two numbers")),
        }
    }
}

/// A space-tile extent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Extent {
    /// Cells per tile along an integer dimension.
    Int(u64),
    /// Width of a tile along a float dimension.
    Float(f64),
}

/// One dimension of an array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dimension {
    /// Name, unique among the dimensions and attributes of the schema.
    pub name: String,
    /// Coordinate type.
    #[serde(rename = "type")]
    pub datatype: Datatype,
    /// Inclusive domain.
    pub domain: Domain,
    /// Space-tile extent (required for dense arrays; for sparse arrays, absent means one tile
    /// spanning the domain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tile: Option<Extent>,
    /// Filters of the coordinate column in sparse fragments.
    #[serde(default, skip_serializing_if = "FilterPipeline::is_empty")]
    pub filters: FilterPipeline,
}

impl Dimension {
    /// An integer dimension with a tile extent (as dense arrays need).
    pub fn new(name: impl Into<String>, datatype: Datatype, domain: (i128, i128), tile: u64) -> Self {
        Self {
            name: name.into(),
            datatype,
            domain: Domain::Int(domain.0, domain.1),
            tile: Some(Extent::Int(tile)),
            filters: FilterPipeline::default(),
        }
    }

    /// A float dimension, with an optional tile width.
    pub fn float(name: impl Into<String>, datatype: Datatype, domain: (f64, f64), tile: Option<f64>) -> Self {
        Self {
            name: name.into(),
            datatype,
            domain: Domain::Float(domain.0, domain.1),
            tile: tile.map(Extent::Float),
            filters: FilterPipeline::default(),
        }
    }

    /// Sets the coordinate filters.
    pub fn with_filters(mut self, filters: FilterPipeline) -> Self {
        self.filters = filters;
        self
    }

    /// Whether coordinates are floats.
    pub fn is_float(&self) -> bool {
        !self.datatype.is_integer()
    }

    /// The integer domain (integer dimensions; float dimensions give `(0, 0)`).
    pub fn int_domain(&self) -> (i128, i128) {
        match self.domain {
            Domain::Int(lo, hi) => (lo, hi),
            Domain::Float(..) => (0, 0),
        }
    }

    /// The float domain (integer domains converted).
    pub fn float_domain(&self) -> (f64, f64) {
        match self.domain {
            Domain::Int(lo, hi) => (lo as f64, hi as f64),
            Domain::Float(lo, hi) => (lo, hi),
        }
    }

    /// Number of coordinates in an integer domain.
    pub fn domain_size(&self) -> u64 {
        let (lo, hi) = self.int_domain();
        // validate() guarantees the domain size fits in u64.
        u64::try_from(hi - lo + 1).unwrap_or(u64::MAX)
    }

    /// The integer tile extent (the whole domain when none is set).
    pub fn tile_extent(&self) -> u64 {
        match self.tile {
            Some(Extent::Int(t)) => t,
            _ => self.domain_size(),
        }
    }

    /// Number of space tiles along an integer dimension.
    pub fn tile_count(&self) -> u64 {
        self.domain_size().div_ceil(self.tile_extent())
    }

    /// Converts an integer coordinate to its normalized form, if it lies in the domain.
    pub fn normalize(&self, x: i128) -> Option<u64> {
        let (lo, hi) = self.int_domain();
        if x < lo || x > hi {
            return None;
        }
        u64::try_from(x - lo).ok()
    }

    /// Converts a normalized coordinate back to the dimension's coordinate.
    pub fn denormalize(&self, x: u64) -> i128 {
        self.int_domain().0 + i128::from(x)
    }

    /// The float tile width (float dimensions), if any.
    pub fn float_tile(&self) -> Option<f64> {
        match self.tile {
            Some(Extent::Float(t)) => Some(t),
            Some(Extent::Int(t)) => Some(t as f64),
            None => None,
        }
    }

    /// Number of space tiles along this dimension (float dimensions: `ceil(width / tile)`, at
    /// least 1).
    pub fn tile_count_any(&self) -> f64 {
        if self.is_float() {
            let (lo, hi) = self.float_domain();
            self.float_tile().map_or(1.0, |t| ((hi - lo) / t).floor() + 1.0)
        } else {
            self.tile_count() as f64
        }
    }

    /// Checks the type, domain and tile extent.
    ///
    /// # Errors
    /// `SchemaError::Dimension` saying what is wrong.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let err = |detail: String| SchemaError::Dimension { dim: self.name.clone(), detail };
        if self.name.is_empty() {
            return Err(SchemaError::Invalid("a dimension has an empty name".into()));
        }
        if matches!(self.datatype, Datatype::Utf8 | Datatype::Bool) {
            return Err(err(format!("type {} is not supported for dimensions", self.datatype)));
        }
        if self.is_float() {
            let (lo, hi) = self.float_domain();
            if !lo.is_finite() || !hi.is_finite() {
                return Err(err(format!("domain [{lo}, {hi}] must be finite")));
            }
            if lo > hi {
                return Err(err(format!("domain [{lo}, {hi}] is reversed")));
            }
            if self.datatype == Datatype::Float32 && (lo < f64::from(f32::MIN) || hi > f64::from(f32::MAX)) {
                return Err(err(format!("domain [{lo}, {hi}] does not fit type float32")));
            }
            if let Some(t) = self.float_tile() {
                if !(t.is_finite() && t > 0.0) {
                    return Err(err(format!("tile extent {t} must be positive and finite")));
                }
            }
            return self.filters.validate().map_err(|e| err(e.to_string()));
        }
        let Domain::Int(lo, hi) = self.domain else {
            return Err(err(format!("integer type {} needs an integer domain", self.datatype)));
        };
        let Some((tlo, thi)) = self.datatype.integer_bounds() else {
            return Err(err(format!("type {} is not supported for dimensions", self.datatype)));
        };
        if lo > hi {
            return Err(err(format!("domain [{lo}, {hi}] is reversed")));
        }
        if lo < tlo || hi > thi {
            return Err(err(format!("domain [{lo}, {hi}] does not fit type {}", self.datatype)));
        }
        if self.datatype.time_unit().is_some() && lo == i128::from(NAT) {
            return Err(err(format!("domain [{lo}, {hi}] holds NaT ({NAT}), which is not a time")));
        }
        if hi - lo >= i128::from(u64::MAX) {
            return Err(err(format!("domain [{lo}, {hi}] has more than 2^64 - 1 coordinates")));
        }
        match self.tile {
            Some(Extent::Float(_)) => return Err(err("an integer dimension needs an integer tile extent".into())),
            Some(Extent::Int(0)) => return Err(err("tile extent must be at least 1".into())),
            Some(Extent::Int(t)) if t > self.domain_size() => {
                return Err(err(format!("tile extent {t} exceeds the domain size {}", self.domain_size())));
            }
            _ => {}
        }
        self.filters.validate().map_err(|e| err(e.to_string()))
    }
}
