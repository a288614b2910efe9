//! The crate-wide `Error`: every module's error enum collected in one place, each variant saying
//! what was wrong and where (array, fragment, attribute, tile, cell).

use std::path::PathBuf;

use crate::filter::FilterError;
use crate::schema::SchemaError;
use crate::storage::StorageError;

/// Result alias for the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

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
    /// An array location that is not a local path: a `scheme://` URI other than `file://`
    /// (object storage is not supported yet), or a malformed `file://` URI.
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
    #[error("corrupt data in {path}: {detail}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// What is wrong, naming the tile or field.
        detail: String,
    },
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

impl Error {
    pub(crate) fn corrupt(path: impl Into<PathBuf>, detail: impl Into<String>) -> Self {
        Error::Corrupt { path: path.into(), detail: detail.into() }
    }
}
