//! The crate-wide `Error`: every module's error enum collected in one place, each variant saying
//! what was wrong and carrying where as fields (array, fragment, file, tile, attribute, dimension,
//! cell), which [`Error::context`] gathers for callers (the Python exceptions' attributes).

use std::path::PathBuf;

use crate::filter::FilterError;
use crate::paths::{COMMITS_DIR, FRAGMENTS_DIR, META_DIR, SCHEMA_DIR};
use crate::storage::StorageError;

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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

/// Errors of queries: the caller asked for something the array cannot do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// A subarray range lies (partly) outside the dimension's domain.
    #[error("dimension {dim}: range [{lo}, {hi}] is outside the domain [{dom_lo}, {dom_hi}]")]
    OutOfDomain {
        /// Dimension name.
        dim: String,
        /// Requested low bound (as text: integer or float).
        lo: String,
        /// Requested high bound.
        hi: String,
        /// Domain low bound.
        dom_lo: String,
        /// Domain high bound.
        dom_hi: String,
    },
    /// A range whose low bound exceeds its high bound.
    #[error("dimension {dim}: range [{lo}, {hi}] is reversed (low > high)")]
    Reversed {
        /// Dimension name.
        dim: String,
        /// Low bound (as text).
        lo: String,
        /// High bound.
        hi: String,
    },
    /// Malformed coordinate columns (lengths, partial values).
    #[error("dimension {dim}: {detail}")]
    CoordBuffer {
        /// Dimension name.
        dim: String,
        /// What is wrong.
        detail: String,
    },
    /// A cell's coordinate outside the domain or not a finite number (sparse writes).
    #[error("dimension {dim}: coordinate {value} of cell {cell} {why}")]
    Coordinate {
        /// Dimension name.
        dim: String,
        /// Index of the first offending cell in the write.
        cell: u64,
        /// The coordinate as text.
        value: String,
        /// What is wrong ("is outside the domain [lo, hi]", "is not a finite number").
        why: String,
    },
    /// The subarray has the wrong number of dimensions or no range on a dimension.
    #[error("subarray: {0}")]
    BadSubarray(String),
    /// An attribute name the schema does not have.
    #[error("unknown attribute {name:?} (the array has: {known})")]
    UnknownAttribute {
        /// The requested name.
        name: String,
        /// The schema's attribute names.
        known: String,
    },
    /// A buffer whose size does not match the number of cells written.
    #[error("attribute {attr}: {what} holds {got} {unit}, expected {expected}")]
    BufferSize {
        /// Attribute name.
        attr: String,
        /// Which buffer ("data", "offsets", "validity").
        what: &'static str,
        /// Its size.
        got: u64,
        /// The size the subarray needs.
        expected: u64,
        /// "bytes" or "values".
        unit: &'static str,
    },
    /// Malformed buffer contents (offsets not increasing, invalid UTF-8, validity not 0/1, ...).
    #[error("attribute {attr}: {detail}")]
    BadBuffer {
        /// Attribute name.
        attr: String,
        /// What is wrong.
        detail: String,
    },
    /// An attribute listed twice or missing from a write.
    #[error("{0}")]
    AttributeSet(String),
    /// The operation needs another open mode.
    #[error("array {uri} is open for {mode}; {op} needs mode {needed}")]
    WrongMode {
        /// Array location.
        uri: String,
        /// Current mode.
        mode: &'static str,
        /// The operation attempted.
        op: &'static str,
        /// The mode it needs.
        needed: &'static str,
    },
    /// A fragment name that is not among the fragments the array shows.
    #[error("no fragment called {0} is visible (it may have been consolidated into another)")]
    UnknownFragment(String),
    /// A layout the operation does not support.
    #[error("{0}")]
    Layout(String),
    /// A write that did not cover its whole subarray, or a submit after finalize.
    #[error("{0}")]
    WriteState(String),
    /// A timestamp the operation cannot take (a write timestamp too large to order after).
    #[error("array {uri}: timestamp {timestamp}: {detail}")]
    Timestamp {
        /// Array location.
        uri: String,
        /// The timestamp given (ms since the epoch).
        timestamp: u64,
        /// What is wrong.
        detail: String,
    },
    /// A read into new buffers whose result would not fit in memory, refused before allocating.
    #[error(
        "the result of {cells} cells ({bytes_per_cell} bytes each) needs {}, more than the {} allowed by {limit_from}: \
         read it in batches (Python: A.iter_batches(...); Rust: ReadQuery::next_batch or submit with your own \
         buffers) or read a smaller subarray",
        human_bytes(u128::from(*cells) * u128::from(*bytes_per_cell)),
        human_bytes(u128::from(*limit))
    )]
    ResultTooLarge {
        /// Cells in the result.
        cells: u64,
        /// Bytes per cell of the requested attributes (variable-length values estimated).
        bytes_per_cell: u64,
        /// The most a read may allocate.
        limit: u64,
        /// Where the limit comes from (the config key, "the memory the system reports available",
        /// "the address space").
        limit_from: &'static str,
    },
    /// A query condition whose text does not parse.
    #[error("condition {expr:?}: at character {at}: {detail}")]
    ConditionSyntax {
        /// The condition's text.
        expr: String,
        /// The 0-based character (byte) position where parsing failed.
        at: usize,
        /// What was expected or wrong.
        detail: String,
    },
    /// A query condition the schema cannot evaluate (a literal the attribute's type cannot
    /// represent, an operator the attribute does not support, `is null` on a non-nullable one).
    #[error("condition on attribute {attr}: {detail}")]
    Condition {
        /// The attribute.
        attr: String,
        /// What is wrong.
        detail: String,
    },
    /// An aggregate the attribute cannot take (the sum of strings, ...) or whose result does
    /// not fit (an integer sum beyond the range of `i128`).
    #[error("aggregate {op} of attribute {attr}: {detail}")]
    Aggregate {
        /// The attribute.
        attr: String,
        /// The aggregate's name ("sum", "mean", ...).
        op: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// A datatype other than the attribute's.
    #[error("attribute {attr}: buffer type {got} does not match the attribute type {expected}")]
    Datatype {
        /// Attribute name.
        attr: String,
        /// The caller's type.
        got: String,
        /// The attribute's type.
        expected: String,
    },
}

/// Errors of the array as a whole (existence, locations).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ArrayError {
    /// No array at the path.
    #[error("{path} does not exist")]
    NotFound {
        /// The path.
        path: PathBuf,
    },
    /// A folder that is not a Tessera array.
    #[error("{path} is not a Tessera array (no __schema folder with a schema)")]
    NotAnArray {
        /// The path.
        path: PathBuf,
    },
    /// A folder that is not a Tessera group.
    #[error("{path} is not a Tessera group (no __group file)")]
    NotAGroup {
        /// The path.
        path: PathBuf,
    },
    /// Creating an array where something already exists.
    #[error("{path} already exists and is not empty")]
    AlreadyExists {
        /// The path.
        path: PathBuf,
    },
    /// The array stayed locked by readers or writers longer than the wait allowed.
    #[error("{path} is in use by readers or writers (waited {waited_ms} ms for them to finish)")]
    Busy {
        /// The array.
        path: PathBuf,
        /// How long the wait lasted.
        waited_ms: u64,
    },
    /// A consolidation whose inputs another consolidation replaced first: nothing was committed.
    #[error("{path}: consolidation into {fragment} was not committed: {detail}")]
    ConsolidationConflict {
        /// The array.
        path: PathBuf,
        /// The fragment that would have been the output.
        fragment: String,
        /// What happened.
        detail: String,
    },
    /// A write (or consolidation) on storage without locks that took longer than half of
    /// `sm.vacuum.grace_ms` from starting its fragment to committing it: a vacuum may have
    /// deleted the fragment's files meanwhile, so it was not committed.
    #[error(
        "{path}: fragment {fragment} was not committed: writing it took {elapsed_ms} ms, more than half of sm.vacuum.grace_ms ({grace_ms} ms) on storage without locks; write less at a time or raise sm.vacuum.grace_ms"
    )]
    CommitTooLate {
        /// The array.
        path: PathBuf,
        /// The fragment.
        fragment: String,
        /// From the start of the fragment to its commit.
        elapsed_ms: u64,
        /// `sm.vacuum.grace_ms`.
        grace_ms: u64,
    },
    /// An array location that is not a local path, a `file://` URI or an `s3://` URI (another
    /// `scheme://`), or a malformed `file://` or `s3://` URI.
    #[error("{uri}: {detail}")]
    UnsupportedUri {
        /// The location given.
        uri: String,
        /// What is wrong.
        detail: String,
    },
    /// Something needs more than a configured limit allows (a tile larger than
    /// `sm.limits.tile_bytes` or `sm.memory_budget`, a schema with too many attributes, ...):
    /// refused before allocating it.
    #[error("{what} needs {needed}, more than {key} = {limit} allows")]
    Limit {
        /// The configuration key of the limit.
        key: &'static str,
        /// What needs it: the tile (with its file), the schema, the write.
        what: String,
        /// What it needs (bytes or a count, as the key says).
        needed: u64,
        /// The limit.
        limit: u64,
    },
    /// A configuration key or value that is not understood.
    #[error("config {key}: {detail}")]
    Config {
        /// The key.
        key: String,
        /// What is wrong.
        detail: String,
    },
}

/// Every error of the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An invalid schema.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A bad query (subarray, buffers, attributes, mode).
    #[error(transparent)]
    Query(#[from] QueryError),
    /// Array-level problem (missing, not an array, exists).
    #[error(transparent)]
    Array(#[from] ArrayError),
    /// A storage failure.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A filter configuration error.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// Bytes on disk that are not what they must be: never returned as data.
    #[error("corrupt data in {}: {}{detail}", path.display(), tile.map(|t| format!("tile {t}: ")).unwrap_or_default())]
    Corrupt {
        /// The damaged file (or folder).
        path: PathBuf,
        /// The tile of the file, when the damage is in one.
        tile: Option<u64>,
        /// What is wrong, naming the field.
        detail: String,
    },
}

/// Where an error happened, as far as it is known: the fields of [`Error::context`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ErrorContext {
    /// The array's location.
    pub array: Option<PathBuf>,
    /// The fragment's name.
    pub fragment: Option<String>,
    /// The file (or folder) involved.
    pub file: Option<PathBuf>,
    /// The tile of that file.
    pub tile: Option<u64>,
    /// The attribute.
    pub attribute: Option<String>,
    /// The dimension.
    pub dimension: Option<String>,
    /// The cell (its index in the caller's buffers).
    pub cell: Option<u64>,
}

impl ErrorContext {
    /// The context of a path inside an array: the array is the folder holding `__fragments`,
    /// `__commits` or `__schema` (the path itself when it holds none), the fragment the folder
    /// after `__fragments`.
    fn of_path(path: &std::path::Path, is_array: bool) -> Self {
        let parts: Vec<_> = path.components().collect();
        let marker = parts.iter().position(|c| {
            let c = c.as_os_str();
            c == FRAGMENTS_DIR || c == COMMITS_DIR || c == SCHEMA_DIR || c == META_DIR
        });
        let array = match marker {
            Some(i) => Some(parts[..i].iter().collect::<PathBuf>()),
            None if is_array => Some(path.to_path_buf()),
            None => None,
        };
        let fragment = marker
            .filter(|&i| parts[i].as_os_str() == FRAGMENTS_DIR)
            .and_then(|i| parts.get(i + 1))
            .map(|c| c.as_os_str().to_string_lossy().into_owned());
        let file = (!is_array).then(|| path.to_path_buf());
        Self { array, fragment, file, ..Self::default() }
    }
}

/// A byte count for messages: exact, with a binary-prefixed size for large ones.
fn human_bytes(b: u128) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if b < 1024 {
        return format!("{b} bytes");
    }
    let mut v = b as f64;
    let mut unit = "bytes";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{b} bytes ({v:.1} {unit})")
}

/// The detail of every checksum failure: what the file says and what its bytes hash to.
pub(crate) fn checksum_mismatch(stored: u64, computed: u64) -> String {
    format!("checksum mismatch (stored {stored:016x}, computed {computed:016x})")
}

impl Error {
    pub(crate) fn corrupt(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Corrupt { path: path.into(), tile: None, detail: detail.into() }
    }

    /// Corrupt data in tile `tile` of the file at `path`.
    pub(crate) fn corrupt_tile(path: impl Into<PathBuf>, tile: u64, detail: impl Into<String>) -> Self {
        Error::Corrupt { path: path.into(), tile: Some(tile), detail: detail.into() }
    }

    /// A tile of the file at `path` whose checksum, `(stored, computed)`, does not match.
    pub(crate) fn tile_checksum(path: impl Into<PathBuf>, tile: u64, (stored, computed): (u64, u64)) -> Self {
        Error::corrupt_tile(path, tile, checksum_mismatch(stored, computed))
    }

    /// Checksum block `block` of a tile whose checksum, `(stored, computed)`, does not match.
    pub(crate) fn block_checksum(
        path: impl Into<PathBuf>,
        tile: u64,
        block: usize,
        (stored, computed): (u64, u64),
    ) -> Self {
        Error::corrupt_tile(path, tile, format!("block {block}: {}", checksum_mismatch(stored, computed)))
    }

    /// Where the error happened: array, fragment, file, tile, attribute, dimension, cell, as far
    /// as the error knows them.
    pub fn context(&self) -> ErrorContext {
        let named = |attribute: Option<&str>, dimension: Option<&str>| ErrorContext {
            attribute: attribute.map(str::to_owned),
            dimension: dimension.map(str::to_owned),
            ..ErrorContext::default()
        };
        match self {
            Error::Corrupt { path, tile, .. } => ErrorContext { tile: *tile, ..ErrorContext::of_path(path, false) },
            Error::Storage(e) => e.path().map(|p| ErrorContext::of_path(p, false)).unwrap_or_default(),
            Error::Array(e) => match e {
                ArrayError::NotFound { path }
                | ArrayError::NotAnArray { path }
                | ArrayError::NotAGroup { path }
                | ArrayError::AlreadyExists { path }
                | ArrayError::Busy { path, .. } => ErrorContext::of_path(path, true),
                ArrayError::ConsolidationConflict { path, fragment, .. }
                | ArrayError::CommitTooLate { path, fragment, .. } => {
                    ErrorContext { fragment: Some(fragment.clone()), ..ErrorContext::of_path(path, true) }
                }
                _ => ErrorContext::default(),
            },
            Error::Query(e) => match e {
                QueryError::OutOfDomain { dim, .. }
                | QueryError::Reversed { dim, .. }
                | QueryError::CoordBuffer { dim, .. } => named(None, Some(dim)),
                QueryError::Coordinate { dim, cell, .. } => {
                    ErrorContext { cell: Some(*cell), ..named(None, Some(dim)) }
                }
                QueryError::UnknownAttribute { name, .. } => named(Some(name), None),
                QueryError::BufferSize { attr, .. }
                | QueryError::BadBuffer { attr, .. }
                | QueryError::Datatype { attr, .. }
                | QueryError::Condition { attr, .. }
                | QueryError::Aggregate { attr, .. } => named(Some(attr), None),
                QueryError::WrongMode { uri, .. } | QueryError::Timestamp { uri, .. } => {
                    ErrorContext { array: Some(PathBuf::from(uri)), ..ErrorContext::default() }
                }
                QueryError::UnknownFragment(name) => {
                    ErrorContext { fragment: Some(name.clone()), ..ErrorContext::default() }
                }
                _ => ErrorContext::default(),
            },
            Error::Schema(e) => match e {
                SchemaError::Dimension { dim, .. } => named(None, Some(dim)),
                SchemaError::Attribute { attr, .. } => named(Some(attr), None),
                _ => ErrorContext::default(),
            },
            Error::Filter(_) => ErrorContext::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_tiles_name_array_fragment_file_and_tile() {
        let e = Error::corrupt_tile("/data/img/__fragments/__1_2_abc/a0.tdb", 7, "checksum mismatch");
        assert_eq!(e.to_string(), "corrupt data in /data/img/__fragments/__1_2_abc/a0.tdb: tile 7: checksum mismatch");
        let c = e.context();
        assert_eq!(c.array.as_deref(), Some(std::path::Path::new("/data/img")));
        assert_eq!(c.fragment.as_deref(), Some("__1_2_abc"));
        assert_eq!(c.file.as_deref(), Some(std::path::Path::new("/data/img/__fragments/__1_2_abc/a0.tdb")));
        assert_eq!(c.tile, Some(7));
        let log = Error::corrupt("/data/img/__commits/00000000000000000003.commit", "bad magic").context();
        assert_eq!(
            (log.array.as_deref(), log.fragment, log.tile),
            (Some(std::path::Path::new("/data/img")), None, None)
        );
    }

    #[test]
    fn query_and_array_errors_carry_their_fields() {
        let e: Error =
            QueryError::Coordinate { dim: "x".into(), cell: 12, value: "5".into(), why: "is out".into() }.into();
        assert_eq!((e.context().dimension.as_deref(), e.context().cell), (Some("x"), Some(12)));
        let e: Error =
            QueryError::BufferSize { attr: "a".into(), what: "data", got: 1, expected: 4, unit: "bytes" }.into();
        assert_eq!(e.context().attribute.as_deref(), Some("a"));
        let e: Error = ArrayError::NotAnArray { path: "/x/y".into() }.into();
        assert_eq!(e.context().array.as_deref(), Some(std::path::Path::new("/x/y")));
        assert_eq!(e.context().file, None);
        let e: Error = StorageError::NotFound { path: "/x/y/__schema/__1_a".into() }.into();
        assert_eq!(e.context().array.as_deref(), Some(std::path::Path::new("/x/y")));
    }
}
