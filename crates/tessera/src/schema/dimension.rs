//! A dimension: a name, an integer coordinate type, an inclusive domain and a space-tile extent.
//!
//! Inside the engine every coordinate is *normalized*: `coordinate - domain.0` as `u64`, so the
//! geometry code works on zero-based unsigned grids whatever the dimension's type.

use serde::{Deserialize, Serialize};

use super::{Datatype, SchemaError};

/// One dimension of an array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dimension {
    /// Name, unique among the dimensions and attributes of the schema.
    pub name: String,
    /// Coordinate type (integers only for now).
    #[serde(rename = "type")]
    pub datatype: Datatype,
    /// Inclusive domain `[lo, hi]`.
    pub domain: (i128, i128),
    /// Space-tile extent along this dimension, in cells.
    pub tile: u64,
}

impl Dimension {
    /// A dimension; call [`Dimension::validate`] (the schema builder does) before use.
    pub fn new(name: impl Into<String>, datatype: Datatype, domain: (i128, i128), tile: u64) -> Self {
        Self { name: name.into(), datatype, domain, tile }
    }

    /// Number of coordinates in the domain.
    pub fn domain_size(&self) -> u64 {
        // validate() guarantees the domain size fits in u64.
        u64::try_from(self.domain.1 - self.domain.0 + 1).unwrap_or(u64::MAX)
    }

    /// Number of space tiles along this dimension.
    pub fn tile_count(&self) -> u64 {
        self.domain_size().div_ceil(self.tile)
    }

    /// Converts a coordinate to its normalized form, if it lies in the domain.
    pub fn normalize(&self, x: i128) -> Option<u64> {
        if x < self.domain.0 || x > self.domain.1 {
            return None;
        }
        u64::try_from(x - self.domain.0).ok()
    }

    /// Converts a normalized coordinate back to the dimension's coordinate.
    pub fn denormalize(&self, x: u64) -> i128 {
        self.domain.0 + i128::from(x)
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
        let Some((tlo, thi)) = self.datatype.integer_bounds() else {
            return Err(err(format!("type {} is not supported for dimensions (use an integer type)", self.datatype)));
        };
        let (lo, hi) = self.domain;
        if lo > hi {
            return Err(err(format!("domain [{lo}, {hi}] is reversed")));
        }
        if lo < tlo || hi > thi {
            return Err(err(format!("domain [{lo}, {hi}] does not fit type {}", self.datatype)));
        }
        if hi - lo >= i128::from(u64::MAX) {
            return Err(err(format!("domain [{lo}, {hi}] has more than 2^64 - 1 coordinates")));
        }
        if self.tile == 0 {
            return Err(err("tile extent must be at least 1".into()));
        }
        if self.tile > self.domain_size() {
            return Err(err(format!("tile extent {} exceeds the domain size {}", self.tile, self.domain_size())));
        }
        Ok(())
    }
}
