//! The schema file (docs/format.md, "Schema"): the schema's JSON sealed by the footer, read within
//! the limits `sm.limits.schema_bytes` and `sm.limits.attributes` so that no schema file, however
//! large or crafted, makes opening an array allocate or work without bound.

use std::path::Path;

use super::ArraySchema;
use crate::config::{check_limit, Limits};
use crate::error::{ArrayError, Error, Result};
use crate::footer::unseal;
use crate::stats::{self, Counter};
use crate::storage::Storage;

pub use crate::paths::SCHEMA_DIR;

/// The footer magic of schema files.
pub(crate) const SCHEMA_MAGIC: &[u8; 8] = b"TSRASCHM";

/// Reads and decodes the schema file at `path`: its size is checked against
/// `sm.limits.schema_bytes` before it is read.
///
/// # Errors
/// Storage failures, `ArrayError::Limit` for a file or schema beyond the limits, `Corrupt` for a
/// file that is not a valid schema.
pub(crate) fn read_schema_file(storage: &dyn Storage, path: &Path, limits: &Limits) -> Result<ArraySchema> {
    let what = || format!("schema file {}", path.display());
    let bytes = match storage.read_all_within(path, limits.schema_bytes)? {
        Ok(bytes) => bytes,
        Err(size) => {
            let (key, limit) = ("sm.limits.schema_bytes", limits.schema_bytes);
            return Err(ArrayError::Limit { key, what: what(), needed: size, limit }.into());
        }
    };
    stats::add(Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    decode_schema_file(&bytes, path, limits)
}

/// Decodes the bytes of a schema file (`path` names it in errors) within `limits`.
///
/// # Errors
/// `ArrayError::Limit` for bytes or attributes beyond the limits, `Corrupt` for anything that is
/// not a sealed, valid schema.
pub(crate) fn decode_schema_file(bytes: &[u8], path: &Path, limits: &Limits) -> Result<ArraySchema> {
    let what = || format!("schema file {}", path.display());
    check_limit("sm.limits.schema_bytes", what, bytes.len() as u64, limits.schema_bytes)?;
    let payload = unseal(bytes, SCHEMA_MAGIC, path)?;
    let text = std::str::from_utf8(payload).map_err(|_| Error::corrupt(path, "schema is not UTF-8"))?;
    let schema = ArraySchema::from_json(text).map_err(|e| Error::corrupt(path, e.to_string()))?;
    check_limit("sm.limits.attributes", what, schema.attrs.len() as u64, limits.attributes)?;
    Ok(schema)
}
