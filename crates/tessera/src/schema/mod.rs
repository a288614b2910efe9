//! Array schemas: datatypes, dimensions, attributes and the schema that ties them together, with
//! validation and the JSON form stored in `__schema/` (docs/format.md, "Schema").

mod array_schema;
mod attribute;
mod datatype;
mod dimension;
mod file;

pub use array_schema::{default_coord_filters, ArraySchema, ArraySchemaBuilder, ArrayType, CellOrder, SCHEMA_VERSION};
pub use attribute::{Attribute, CellValNum};
pub use datatype::Datatype;
pub use dimension::{Dimension, Domain, Extent};
pub(crate) use file::{decode_schema_file, read_schema_file, SCHEMA_MAGIC};

/// Errors of schema construction and validation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A problem with one dimension.
    #[error("dimension {dim}: {detail}")]
    Dimension {
        /// Dimension name.
        dim: String,
        /// What is wrong.
        detail: String,
    },
    /// A problem with one attribute.
    #[error("attribute {attr}: {detail}")]
    Attribute {
        /// Attribute name.
        attr: String,
        /// What is wrong.
        detail: String,
    },
    /// A problem with the schema as a whole.
    #[error("schema: {0}")]
    Invalid(String),
    /// The JSON text could not be parsed.
    #[error("schema JSON: {0}")]
    Json(String),
}
