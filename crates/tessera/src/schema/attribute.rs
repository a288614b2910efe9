//! An attribute: a named value per cell, of fixed or variable length, optionally nullable, with
//! its own filter pipeline and fill value for cells never written.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{Datatype, SchemaError};
use crate::filter::FilterPipeline;

/// How many values one cell holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CellValNum {
    /// A fixed number of values (1 for scalars, 2 for complex numbers, ...).
    Fixed(u32),
    /// A variable number of values (strings, ragged arrays).
    Var,
}

impl Serialize for CellValNum {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            CellValNum::Fixed(n) => s.serialize_u32(*n),
            CellValNum::Var => s.serialize_str("var"),
        }
    }
}

impl<'de> Deserialize<'de> for CellValNum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        if v.as_str() == Some("var") {
            return Ok(CellValNum::Var);
        }
        v.as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .map(CellValNum::Fixed)
            .ok_or_else(|| serde::de::Error::custom("cell_val_num must be a positive integer or \"var\""))
    }
}

/// One attribute of an array.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Attribute {
    /// Name, unique among the dimensions and attributes of the schema.
    pub name: String,
    /// Type of each value.
    #[serde(rename = "type")]
    pub datatype: Datatype,
    /// Values per cell.
    #[serde(default = "one")]
    pub cell_val_num: CellValNum,
    /// Whether cells carry a validity flag (null when 0).
    #[serde(default)]
    pub nullable: bool,
    /// Filters applied to every tile of this attribute.
    #[serde(default)]
    pub filters: FilterPipeline,
    /// Fill value of one cell as JSON values (one per value of the cell); `None` for the type's
    /// default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fill: Option<Vec<serde_json::Value>>,
}

fn one() -> CellValNum {
    CellValNum::Fixed(1)
}

impl Attribute {
    /// A scalar, non-nullable, unfiltered attribute.
    pub fn new(name: impl Into<String>, datatype: Datatype) -> Self {
        Self {
            name: name.into(),
            datatype,
            cell_val_num: CellValNum::Fixed(1),
            nullable: false,
            filters: FilterPipeline::default(),
            fill: None,
        }
    }

    /// Whether cells have a variable number of values.
    pub fn is_var(&self) -> bool {
        self.cell_val_num == CellValNum::Var
    }

    /// Bytes of one cell of a fixed-size attribute (for var attributes: one value).
    pub fn cell_size(&self) -> usize {
        match self.cell_val_num {
            CellValNum::Fixed(n) => self.datatype.size() * n as usize,
            CellValNum::Var => self.datatype.size(),
        }
    }

    /// The bytes of the fill value of one cell (for var attributes: the fill cell's values).
    pub fn fill_bytes(&self) -> Vec<u8> {
        match &self.fill {
            Some(values) => values.iter().flat_map(|v| self.datatype.encode_json(v).unwrap_or_default()).collect(),
            None => match self.cell_val_num {
                CellValNum::Fixed(n) => self.datatype.default_fill().repeat(n as usize),
                CellValNum::Var => Vec::new(),
            },
        }
    }

    /// Checks the cell size, fill value and filters.
    ///
    /// # Errors
    /// `SchemaError::Attribute` saying what is wrong.
    pub fn validate(&self) -> Result<(), SchemaError> {
        let err = |detail: String| SchemaError::Attribute { attr: self.name.clone(), detail };
        if self.name.is_empty() {
            return Err(SchemaError::Invalid("an attribute has an empty name".into()));
        }
        if self.cell_val_num == CellValNum::Fixed(0) {
            return Err(err("cell_val_num must be at least 1".into()));
        }
        if let CellValNum::Fixed(n) = self.cell_val_num {
            if n > 1 << 20 {
                return Err(err(format!("cell_val_num {n} is larger than 2^20")));
            }
        }
        if let Some(values) = &self.fill {
            if let CellValNum::Fixed(n) = self.cell_val_num {
                if values.len() != n as usize {
                    return Err(err(format!("fill has {} values, a cell has {n}", values.len())));
                }
            }
            for v in values {
                if self.datatype.encode_json(v).is_none() {
                    return Err(err(format!("fill value {v} is not a valid {}", self.datatype)));
                }
            }
        }
        self.filters.validate().map_err(|e| err(e.to_string()))
    }
}
