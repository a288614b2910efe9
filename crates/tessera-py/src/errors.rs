//! The exception hierarchy: `TesseraError` and one subclass per kind of engine failure. Every
//! engine `Error` variant maps to exactly one class; the message is the engine's own text and
//! the error's context (`Error::context`) becomes the exception's attributes.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use tessera::{ArrayError as EngineArrayError, Error, FilterError, QueryError as EngineQueryError};

create_exception!(tessera, TesseraError, PyException, "Base class of every Tessera error.");
create_exception!(tessera, SchemaError, TesseraError, "An invalid schema (dimensions, attributes, filters).");
create_exception!(
    tessera,
    DomainError,
    TesseraError,
    "A subarray outside the domain, reversed, or with the wrong number of dimensions."
);
create_exception!(
    tessera,
    QueryError,
    TesseraError,
    "A bad query: buffer size or type, unknown attribute, wrong mode, layout, write state."
);
create_exception!(
    tessera,
    ArrayError,
    TesseraError,
    "No array at the path, not an array, already exists, or in use (see ArrayBusyError)."
);
create_exception!(
    tessera,
    ArrayBusyError,
    ArrayError,
    "The array's lock stayed held by readers or writers longer than `sm.vacuum.lock_timeout_ms` \
     (vacuum waiting for them, or a reader or writer waiting for a vacuum)."
);
create_exception!(
    tessera,
    ConsolidationConflictError,
    ArrayError,
    "A consolidation was not committed: another one replaced the same fragments first."
);
create_exception!(tessera, ConfigError, TesseraError, "An unknown configuration key or a bad value.");
create_exception!(tessera, CorruptionError, TesseraError, "Bytes on disk are wrong (the message names file and tile).");
create_exception!(tessera, StorageError, TesseraError, "An I/O failure of the storage layer.");

/// The attributes of every Tessera exception that say where the error happened.
const CONTEXT_FIELDS: [&str; 7] = ["array", "fragment", "file", "tile", "attribute", "dimension", "cell"];

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Every Tessera exception has the context attributes, `None` unless the error sets them
    // (exceptions raised by the Python package itself, such as ArgumentError, included).
    let base = py.get_type::<TesseraError>();
    for field in CONTEXT_FIELDS {
        base.setattr(field, py.None())?;
    }
    m.add("TesseraError", base)?;
    m.add("SchemaError", py.get_type::<SchemaError>())?;
    m.add("DomainError", py.get_type::<DomainError>())?;
    m.add("QueryError", py.get_type::<QueryError>())?;
    m.add("ArrayError", py.get_type::<ArrayError>())?;
    m.add("ArrayBusyError", py.get_type::<ArrayBusyError>())?;
    m.add("ConsolidationConflictError", py.get_type::<ConsolidationConflictError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("StorageError", py.get_type::<StorageError>())?;
    Ok(())
}

/// The Python exception of an engine error, with the error's context as attributes: `array`,
/// `fragment`, `file` (paths as `str`), `tile`, `cell` (`int`), `attribute`, `dimension` (`str`),
/// each `None` when the error does not know it.
pub(crate) fn to_py(e: Error) -> PyErr {
    let context = e.context();
    let err = exception_of(e);
    Python::attach(|py| {
        let value = err.value(py);
        let path = |p: Option<std::path::PathBuf>| p.map(|p| p.display().to_string());
        // Setting attributes on a fresh exception object cannot fail short of memory
        // exhaustion; the exception is returned either way.
        let _ = value.setattr("array", path(context.array));
        let _ = value.setattr("fragment", context.fragment);
        let _ = value.setattr("file", path(context.file));
        let _ = value.setattr("tile", context.tile);
        let _ = value.setattr("attribute", context.attribute);
        let _ = value.setattr("dimension", context.dimension);
        let _ = value.setattr("cell", context.cell);
    });
    err
}

/// The exception class of an engine error, with the engine's message.
fn exception_of(e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Schema(_) => SchemaError::new_err(msg),
        Error::Filter(FilterError::Corrupt { .. }) | Error::Corrupt { .. } => CorruptionError::new_err(msg),
        Error::Filter(_) => SchemaError::new_err(msg),
        Error::Query(
            EngineQueryError::OutOfDomain { .. }
            | EngineQueryError::Reversed { .. }
            | EngineQueryError::Coordinate { .. }
            | EngineQueryError::BadSubarray(_),
        ) => DomainError::new_err(msg),
        Error::Query(_) => QueryError::new_err(msg),
        Error::Array(EngineArrayError::Config { .. }) => ConfigError::new_err(msg),
        Error::Array(EngineArrayError::Busy { .. }) => ArrayBusyError::new_err(msg),
        Error::Array(EngineArrayError::ConsolidationConflict { .. }) => ConsolidationConflictError::new_err(msg),
        Error::Array(_) => ArrayError::new_err(msg),
        Error::Storage(_) => StorageError::new_err(msg),
        // `Error` is non-exhaustive: a variant added later is still a TesseraError.
        _ => TesseraError::new_err(msg),
    }
}

/// Converts engine results with `?`.
pub(crate) trait IntoPyResult<T> {
    /// The result with its error translated by [`to_py`].
    fn py(self) -> PyResult<T>;
}

impl<T, E: Into<Error>> IntoPyResult<T> for Result<T, E> {
    fn py(self) -> PyResult<T> {
        self.map_err(|e| to_py(e.into()))
    }
}
