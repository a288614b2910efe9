//! The array schema: dimensions, attributes, orders, and the rules that make them a valid array.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use super::{Attribute, Dimension, SchemaError};

/// Newest version of the schema JSON this build reads and writes. A schema is written with the
/// lowest version that expresses it: 1, 2 when it uses a curve order (Z, or Hilbert as a tile
/// order or in a dense array), 3 when a dimension or attribute has type `bool` or `datetime64`.
/// In version 1, Hilbert cell order in sparse arrays keeps its first definition (one curve over
/// the whole domain; docs/format.md, "Global order").
pub const SCHEMA_VERSION: u32 = 3;

/// Most bits a curve key may take (docs/format.md §5.1).
pub(crate) const MAX_CURVE_BITS: u32 = 128;

/// Largest number of cells in one space tile of a dense array with a curve cell order (its
/// permutation holds a `u32` per cell).
const MAX_CURVE_TILE_CELLS: u64 = 1 << 32;

/// Largest number of cells in one space tile (keeps one tile of one attribute addressable).
const MAX_TILE_CELLS: u64 = 1 << 34;

/// Dense arrays store every cell of the domain; sparse arrays store explicit coordinates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrayType {
    /// Every cell exists; fragments are hyper-rectangles stored tile by tile.
    Dense,
    /// Only written cells exist; fragments store coordinates.
    Sparse,
}

/// An order of cells inside a tile or of tiles across the domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CellOrder {
    /// The last dimension varies fastest (C order).
    RowMajor,
    /// The first dimension varies fastest (Fortran order).
    ColMajor,
    /// Along an N-dimensional Hilbert curve (docs/format.md §5.1).
    Hilbert,
    /// Along a Z (Morton) curve: coordinate bits interleaved (docs/format.md §5.1).
    Z,
}

impl CellOrder {
    /// Whether the order follows a space-filling curve (Hilbert or Z).
    pub fn is_curve(self) -> bool {
        matches!(self, CellOrder::Hilbert | CellOrder::Z)
    }

    /// The name in the schema JSON: "row-major", "col-major", "hilbert" or "z".
    pub fn name(self) -> &'static str {
        match self {
            CellOrder::RowMajor => "row-major",
            CellOrder::ColMajor => "col-major",
            CellOrder::Hilbert => "hilbert",
            CellOrder::Z => "z",
        }
    }

    /// Parses a name of [`CellOrder::name`] (also "C" for row-major and "F" for col-major).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "row-major" | "C" => Some(CellOrder::RowMajor),
            "col-major" | "F" => Some(CellOrder::ColMajor),
            "hilbert" => Some(CellOrder::Hilbert),
            "z" | "Z" | "morton" => Some(CellOrder::Z),
            _ => None,
        }
    }

    /// Bits of a key of this curve order over coordinates of `widths` bits (docs/format.md
    /// §5.1): Z takes their sum, Hilbert the largest width times the number of dimensions of
    /// non-zero width; 0 for row- and col-major.
    pub fn curve_bits(self, widths: &[u32]) -> u64 {
        let active = widths.iter().filter(|&&w| w > 0).count() as u64;
        match self {
            CellOrder::Z => widths.iter().map(|&w| u64::from(w)).sum(),
            CellOrder::Hilbert => active * u64::from(widths.iter().copied().max().unwrap_or(0)),
            CellOrder::RowMajor | CellOrder::ColMajor => 0,
        }
    }
}

/// Bits needed to number `count` things `0..count` (0 for one thing).
pub(crate) fn bit_width(count: u64) -> u32 {
    64 - count.saturating_sub(1).leading_zeros()
}

/// A validated array schema.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArraySchema {
    /// Format version of this schema (1 when absent from the JSON).
    #[serde(default = "schema_version")]
    pub version: u32,
    /// Dense or sparse.
    pub array_type: ArrayType,
    /// The dimensions, slowest-varying first in row-major order.
    pub dims: Vec<Dimension>,
    /// The attributes.
    pub attrs: Vec<Attribute>,
    /// Order of cells inside a space tile.
    pub cell_order: CellOrder,
    /// Order of the space tiles.
    pub tile_order: CellOrder,
    /// Cells per data tile of sparse fragments.
    #[serde(default = "default_capacity")]
    pub capacity: u64,
    /// Whether a sparse array may hold several cells with equal coordinates.
    #[serde(default)]
    pub allows_duplicates: bool,
}

/// The coordinate filters sparse dimensions get by default: delta, byte shuffle, zstd level 3.
///
/// In global order consecutive coordinates are close, so their deltas are small integers whose
/// high bytes are zero; the shuffle gathers those zero bytes into long runs, which zstd stores
/// as a few long matches instead of one short match per coordinate. Decoding is then several
/// times cheaper than with delta and zstd alone (and the tiles smaller): on the 10M AIS points
/// of `bench/dask_bench.py`, see docs/benchmarks.md ("Dask"). For elements of one byte (and
/// variable-sized string coordinates) the shuffle is the identity.
pub fn default_coord_filters() -> crate::filter::FilterPipeline {
    use crate::filter::Filter;
    crate::filter::FilterPipeline::new(vec![Filter::Delta, Filter::ByteShuffle, Filter::Zstd { level: 3 }])
}

/// The version of a schema JSON without one (docs/format.md §3).
fn schema_version() -> u32 {
    1
}

fn default_capacity() -> u64 {
    10_000
}

impl ArraySchema {
    /// Starts a schema of the given type.
    pub fn builder(array_type: ArrayType) -> ArraySchemaBuilder {
        ArraySchemaBuilder {
            schema: ArraySchema {
                version: SCHEMA_VERSION,
                array_type,
                dims: Vec::new(),
                attrs: Vec::new(),
                cell_order: CellOrder::RowMajor,
                tile_order: CellOrder::RowMajor,
                capacity: default_capacity(),
                allows_duplicates: false,
            },
        }
    }

    /// Parses and validates the JSON form.
    ///
    /// # Errors
    /// `SchemaError::Json` for malformed JSON, other variants for an invalid schema.
    pub fn from_json(text: &str) -> Result<Self, SchemaError> {
        let schema: ArraySchema = serde_json::from_str(text).map_err(|e| SchemaError::Json(e.to_string()))?;
        schema.validate()?;
        Ok(schema)
    }

    /// The JSON form (pretty-printed).
    pub fn to_json(&self) -> String {
        // Serializing plain data with string keys cannot fail.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Index of the attribute called `name`.
    pub fn attr_index(&self, name: &str) -> Option<usize> {
        self.attrs.iter().position(|a| a.name == name)
    }

    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.dims.len()
    }

    /// Cells in one space tile (integer dimensions).
    pub fn cells_per_tile(&self) -> u64 {
        self.dims.iter().map(Dimension::tile_extent).product()
    }

    /// Whether the array is sparse.
    pub fn is_sparse(&self) -> bool {
        self.array_type == ArrayType::Sparse
    }

    /// Index of the dimension called `name`.
    pub fn dim_index(&self, name: &str) -> Option<usize> {
        self.dims.iter().position(|d| d.name == name)
    }

    /// Whether the schema needs version 2 (a curve order other than version 1's sparse Hilbert
    /// cell order).
    pub fn needs_v2(&self) -> bool {
        self.tile_order.is_curve()
            || self.cell_order == CellOrder::Z
            || (self.cell_order == CellOrder::Hilbert && self.array_type == ArrayType::Dense)
    }

    /// Whether the schema needs version 3 (a `bool` or `datetime64` dimension or attribute).
    pub fn needs_v3(&self) -> bool {
        self.dims.iter().any(|d| d.datatype.needs_v3()) || self.attrs.iter().any(|a| a.datatype.needs_v3())
    }

    /// The lowest schema version that expresses this schema as meant today: 1, 2 for curve
    /// orders (Hilbert cell order included: version 1's sparse Hilbert order is the old one), 3
    /// for the types `bool` and `datetime64`. New schemas take it, so older readers open whatever
    /// they can read correctly.
    pub fn lowest_version(&self) -> u32 {
        if self.needs_v3() {
            3
        } else if self.needs_v2() || self.cell_order == CellOrder::Hilbert {
            2
        } else {
            1
        }
    }

    /// Whether the cell order is version 1's sparse Hilbert order: one curve over the whole
    /// domain, tiles ignored (docs/format.md §10, "Global order").
    pub fn legacy_hilbert(&self) -> bool {
        self.version < 2 && self.cell_order == CellOrder::Hilbert
    }

    /// Number of space tiles along each dimension as the global order counts them: integer
    /// dimensions `ceil(size / tile)`, float dimensions with a tile width
    /// `floor((hi - lo) / tile) + 1`, others 1 (docs/format.md §10).
    pub fn order_tile_counts(&self) -> Vec<u64> {
        self.dims
            .iter()
            .map(|d| {
                if d.is_float() {
                    let (lo, hi) = d.float_domain();
                    d.float_tile().map_or(1, |w| ((hi - lo) / w).floor() as u64 + 1)
                } else {
                    d.tile_count()
                }
            })
            .collect()
    }

    /// Bit width of each dimension's coordinate in tile-order curve keys: enough for its tile
    /// coordinates (docs/format.md §5.1).
    pub fn tile_curve_widths(&self) -> Vec<u32> {
        self.order_tile_counts().into_iter().map(bit_width).collect()
    }

    /// Bit width of each dimension's coordinate in cell-order curve keys: enough for a cell's
    /// offset inside its space tile (integer dimensions: the tile extent, the domain size when
    /// absent); 32 for float dimensions (docs/format.md §5.1, §10).
    pub fn cell_curve_widths(&self) -> Vec<u32> {
        self.dims.iter().map(|d| if d.is_float() { 32 } else { bit_width(d.tile_extent()) }).collect()
    }

    /// Checks the rules on orders: the version that defines them, and curve keys of at most
    /// [`MAX_CURVE_BITS`] bits.
    fn validate_orders(&self) -> Result<(), SchemaError> {
        if self.version < 2 && self.needs_v2() {
            return Err(SchemaError::Invalid(format!(
                "cell order {:?} with tile order {:?} in a {} array needs schema version 2 (\"version\": 2)",
                self.cell_order.name(),
                self.tile_order.name(),
                if self.is_sparse() { "sparse" } else { "dense" }
            )));
        }
        if self.legacy_hilbert() {
            return Ok(());
        }
        let checks = [
            ("tile", self.tile_order, self.tile_curve_widths(), "fewer space tiles (larger tile extents)"),
            ("cell", self.cell_order, self.cell_curve_widths(), "smaller tile extents"),
        ];
        for (what, order, widths, fix) in checks {
            let bits = order.curve_bits(&widths);
            if bits > u64::from(MAX_CURVE_BITS) {
                return Err(SchemaError::Invalid(format!(
                    "the {what} order {:?} needs keys of {bits} bits here, more than {MAX_CURVE_BITS}: use {fix}, \
                     fewer dimensions, or another order",
                    order.name()
                )));
            }
        }
        if !self.is_sparse() && self.cell_order.is_curve() && self.cells_per_tile() > MAX_CURVE_TILE_CELLS {
            return Err(SchemaError::Invalid(format!(
                "cell order {:?} takes space tiles of at most 2^32 cells (product of the tile extents)",
                self.cell_order.name()
            )));
        }
        Ok(())
    }

    /// Checks every rule of a valid schema.
    ///
    /// # Errors
    /// The first violated rule.
    pub fn validate(&self) -> Result<(), SchemaError> {
        if self.version > SCHEMA_VERSION {
            return Err(SchemaError::Invalid(format!(
                "schema version {} is newer than this build supports ({SCHEMA_VERSION})",
                self.version
            )));
        }
        if self.version < 3 && self.needs_v3() {
            return Err(SchemaError::Invalid(
                "the types bool and datetime64 need schema version 3 (\"version\": 3)".into(),
            ));
        }
        if self.dims.is_empty() {
            return Err(SchemaError::Invalid("an array needs at least one dimension".into()));
        }
        if self.dims.len() > 32 {
            return Err(SchemaError::Invalid("an array has at most 32 dimensions".into()));
        }
        if self.attrs.is_empty() {
            return Err(SchemaError::Invalid("an array needs at least one attribute".into()));
        }
        let mut names = HashSet::new();
        for name in self.dims.iter().map(|d| &d.name).chain(self.attrs.iter().map(|a| &a.name)) {
            if !names.insert(name.as_str()) {
                return Err(SchemaError::Invalid(format!("name {name:?} is used twice")));
            }
        }
        let t0 = self.dims[0].datatype;
        for d in &self.dims {
            d.validate()?;
            if d.datatype != t0 {
                return Err(SchemaError::Dimension {
                    dim: d.name.clone(),
                    detail: format!("type {} differs from the first dimension's {t0}", d.datatype),
                });
            }
        }
        for a in &self.attrs {
            a.validate()?;
        }
        let tiles: f64 = self.dims.iter().map(Dimension::tile_count_any).product();
        if tiles >= 2f64.powi(64) {
            return Err(SchemaError::Invalid("the domain holds 2^64 or more space tiles".into()));
        }
        match self.array_type {
            ArrayType::Dense => {
                for d in &self.dims {
                    let bad = |detail: &str| SchemaError::Dimension { dim: d.name.clone(), detail: detail.into() };
                    if d.is_float() {
                        return Err(bad("dense arrays need integer dimensions"));
                    }
                    if d.tile.is_none() {
                        return Err(bad("dense arrays need a tile extent on every dimension"));
                    }
                }
                if self.allows_duplicates {
                    // A dense cell holds one value: a newer write replaces it.
                    return Err(SchemaError::Invalid("duplicates are for sparse arrays".into()));
                }
                let mut cells: u64 = 1;
                for d in &self.dims {
                    cells = cells.checked_mul(d.tile_extent()).filter(|&c| c <= MAX_TILE_CELLS).ok_or_else(|| {
                        SchemaError::Invalid(
                            "a space tile holds more than 2^34 cells (product of the tile extents)".into(),
                        )
                    })?;
                }
            }
            ArrayType::Sparse => {
                if self.capacity == 0 {
                    return Err(SchemaError::Invalid("capacity must be at least 1".into()));
                }
                if self.capacity > 1 << 32 {
                    return Err(SchemaError::Invalid("capacity must be at most 2^32".into()));
                }
            }
        }
        // After the tile-count and tile-size rules, which bound what the curve widths take.
        self.validate_orders()
    }
}

/// Builds and validates an [`ArraySchema`].
#[derive(Debug, Clone)]
pub struct ArraySchemaBuilder {
    schema: ArraySchema,
}

impl ArraySchemaBuilder {
    /// Adds a dimension.
    pub fn dim(mut self, d: Dimension) -> Self {
        self.schema.dims.push(d);
        self
    }
    /// Adds an attribute.
    pub fn attr(mut self, a: Attribute) -> Self {
        self.schema.attrs.push(a);
        self
    }
    /// Sets the cell order.
    pub fn cell_order(mut self, o: CellOrder) -> Self {
        self.schema.cell_order = o;
        self
    }
    /// Sets the tile order.
    pub fn tile_order(mut self, o: CellOrder) -> Self {
        self.schema.tile_order = o;
        self
    }
    /// Sets the sparse data-tile capacity.
    pub fn capacity(mut self, c: u64) -> Self {
        self.schema.capacity = c;
        self
    }
    /// Sets whether a sparse array may hold several cells with equal coordinates.
    pub fn allows_duplicates(mut self, yes: bool) -> Self {
        self.schema.allows_duplicates = yes;
        self
    }

    /// Validates and returns the schema. Dimensions of a sparse array without coordinate filters
    /// get the default `[delta, byteshuffle, zstd(3)]` ([`default_coord_filters`]).
    ///
    /// # Errors
    /// The first violated rule.
    pub fn build(mut self) -> Result<ArraySchema, SchemaError> {
        self.schema.version = self.schema.lowest_version();
        if self.schema.array_type == ArrayType::Sparse {
            for d in &mut self.schema.dims {
                if d.filters.is_empty() {
                    d.filters = default_coord_filters();
                }
            }
        }
        self.schema.validate()?;
        Ok(self.schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{CellValNum, Datatype};

    fn dim(name: &str, lo: i128, hi: i128, tile: u64) -> Dimension {
        Dimension::new(name, Datatype::Int64, (lo, hi), tile)
    }

    #[test]
    fn valid_schema_round_trips_through_json() {
        let mut s = Attribute::new("s", Datatype::Utf8);
        s.cell_val_num = CellValNum::Var;
        s.nullable = true;
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(dim("r", 1, 100, 10))
            .dim(dim("c", -5, 5, 3))
            .attr(Attribute::new("a", Datatype::Int32))
            .attr(s)
            .cell_order(CellOrder::ColMajor)
            .build()
            .unwrap();
        let back = ArraySchema::from_json(&schema.to_json()).unwrap();
        assert_eq!(back, schema);
        assert_eq!(schema.cells_per_tile(), 30);
        assert_eq!(schema.dims[1].tile_count(), 4);
    }

    #[test]
    fn invalid_schemas_are_rejected_with_reasons() {
        let a = || Attribute::new("a", Datatype::Int32);
        let cases: Vec<(ArraySchemaBuilder, &str)> = vec![
            (ArraySchema::builder(ArrayType::Dense).attr(a()), "at least one dimension"),
            (ArraySchema::builder(ArrayType::Dense).dim(dim("r", 1, 10, 2)), "at least one attribute"),
            (ArraySchema::builder(ArrayType::Dense).dim(dim("r", 5, 1, 2)).attr(a()), "reversed"),
            (ArraySchema::builder(ArrayType::Dense).dim(dim("r", 1, 10, 0)).attr(a()), "at least 1"),
            (ArraySchema::builder(ArrayType::Dense).dim(dim("r", 1, 10, 11)).attr(a()), "exceeds"),
            (ArraySchema::builder(ArrayType::Dense).dim(dim("a", 1, 10, 2)).attr(a()), "used twice"),
            (
                ArraySchema::builder(ArrayType::Dense).dim(Dimension::new("r", Datatype::Int8, (0, 200), 2)).attr(a()),
                "does not fit",
            ),
            (
                ArraySchema::builder(ArrayType::Dense)
                    .dim(Dimension::new("r", Datatype::Float64, (0, 200), 2))
                    .attr(a()),
                "dense arrays need integer dimensions",
            ),
            (
                ArraySchema::builder(ArrayType::Dense).dim(dim("r", 1, 10, 2)).attr(a()).allows_duplicates(true),
                "duplicates are for sparse arrays",
            ),
        ];
        for (b, msg) in cases {
            let e = b.build().unwrap_err().to_string();
            assert!(e.contains(msg), "{e:?} should contain {msg:?}");
        }
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(dim("r", 1, 10, 5))
            .attr(Attribute::new("a", Datatype::Int32))
            .build()
            .unwrap();
        let text = schema.to_json().replace("\"tile\": 5", "\"tile\": 5, \"tiel\": 5");
        let e = ArraySchema::from_json(&text).unwrap_err().to_string();
        assert!(e.contains("tiel"), "{e}");
    }

    #[test]
    fn curve_orders_take_version_2_and_keys_of_at_most_128_bits() {
        let a = || Attribute::new("a", Datatype::Int32);
        let dense = |co, to| {
            ArraySchema::builder(ArrayType::Dense)
                .dim(dim("r", 1, 100, 10))
                .dim(dim("c", 1, 30, 7))
                .attr(a())
                .cell_order(co)
                .tile_order(to)
        };
        // Row- and col-major stay version 1 (older readers open them); curves need 2.
        assert_eq!(dense(CellOrder::ColMajor, CellOrder::RowMajor).build().unwrap().version, 1);
        for (co, to) in [(CellOrder::Z, CellOrder::RowMajor), (CellOrder::RowMajor, CellOrder::Hilbert)] {
            let s = dense(co, to).build().unwrap();
            assert_eq!((s.version, s.cell_order, s.tile_order), (2, co, to));
            let back = ArraySchema::from_json(&s.to_json()).unwrap();
            assert_eq!(back, s);
            // A version-1 JSON with a curve order is refused, naming the version it needs.
            let v1 = s.to_json().replace("\"version\": 2", "\"version\": 1");
            let e = ArraySchema::from_json(&v1).unwrap_err().to_string();
            assert!(e.contains("needs schema version 2"), "{e}");
        }
        // Without a version the JSON is version 1: a sparse Hilbert order keeps its first meaning.
        let sparse = ArraySchema::builder(ArrayType::Sparse)
            .dim(dim("x", 0, 99, 10))
            .attr(a())
            .cell_order(CellOrder::Hilbert)
            .build()
            .unwrap();
        assert_eq!(sparse.version, 2);
        let text = sparse.to_json().replace("\"version\": 2,", "");
        let old = ArraySchema::from_json(&text).unwrap();
        assert!(old.version == 1 && old.legacy_hilbert() && !sparse.legacy_hilbert());
        // Three dimensions of 2^62 coordinates: Z keys of 3 * 62 bits, Hilbert keys of 3 * 62.
        for o in [CellOrder::Z, CellOrder::Hilbert] {
            let mut b = ArraySchema::builder(ArrayType::Sparse).attr(a()).cell_order(o);
            for n in ["x", "y", "z"] {
                let mut d = dim(n, 0, (1 << 62) - 1, 1);
                d.tile = None;
                b = b.dim(d);
            }
            let e = b.build().unwrap_err().to_string();
            assert!(e.contains("needs keys of 186 bits here, more than 128"), "{e}");
        }
        // Hilbert tile order: 3 dimensions of which the widest needs 60 bits: 180 bits.
        let e = ArraySchema::builder(ArrayType::Dense)
            .dim(dim("x", 0, (1 << 60) - 1, 1))
            .dim(dim("y", 0, 1, 1))
            .dim(dim("z", 0, 1, 1))
            .attr(a())
            .tile_order(CellOrder::Hilbert)
            .build()
            .unwrap_err()
            .to_string();
        assert!(e.contains("tile order \"hilbert\" needs keys of 180 bits"), "{e}");
        assert_eq!(CellOrder::Z.curve_bits(&[3, 0, 5]), 8);
        assert_eq!(CellOrder::Hilbert.curve_bits(&[3, 0, 5]), 10);
        assert_eq!((bit_width(1), bit_width(2), bit_width(3), bit_width(4), bit_width(5)), (0, 1, 2, 2, 3));
        for o in [CellOrder::RowMajor, CellOrder::ColMajor, CellOrder::Z, CellOrder::Hilbert] {
            assert_eq!(CellOrder::parse(o.name()), Some(o));
        }
    }

    #[test]
    fn bad_json_is_a_json_error() {
        assert!(matches!(ArraySchema::from_json("{"), Err(SchemaError::Json(_))));
        assert!(matches!(ArraySchema::from_json("{}"), Err(SchemaError::Json(_))));
    }
}
