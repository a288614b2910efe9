//! Array schemas: datatypes, dimensions, attributes and the schema that ties them together, with
//! validation and the JSON form stored in `__schema/` (docs/format.md, "Schema").

mod array_schema;
mod attribute;
mod datatype;
mod dimension;
mod file;
mod time;

pub use crate::error::SchemaError;
#[cfg(test)]
pub(crate) use array_schema::bit_width;
pub(crate) use array_schema::MAX_CURVE_BITS;
pub use array_schema::{default_coord_filters, ArraySchema, ArraySchemaBuilder, ArrayType, CellOrder, SCHEMA_VERSION};
pub use attribute::{Attribute, CellValNum};
pub use datatype::{Datatype, TimeUnit, NAT};
pub use dimension::{Dimension, Domain, Extent};
pub use file::SCHEMA_DIR;
pub(crate) use file::{decode_schema_file, read_schema_file, SCHEMA_MAGIC};
pub use time::{display_datetime, format_datetime, parse_datetime};
