//! Metadata as the binding passes it, for arrays and groups alike: entries out as (key, datatype
//! name or None for raw bytes, bytes), changes in as (key, (datatype name or None, bytes)) puts
//! and (key, None) deletes.

use std::collections::BTreeMap;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tessera::{Datatype, MetaValue};

/// A metadata entry as the binding returns it: key, datatype name (None: raw bytes), bytes.
pub(crate) type MetaItem<'py> = (String, Option<&'static str>, Bound<'py, PyBytes>);

/// A metadata change as the binding takes it: key and (datatype name or None, bytes), or None
/// for a delete.
pub(crate) type MetaChange = (String, Option<(Option<String>, Vec<u8>)>);

/// The entries of a metadata map, sorted by key.
pub(crate) fn meta_items(py: Python<'_>, m: BTreeMap<String, MetaValue>) -> Vec<MetaItem<'_>> {
    m.into_iter().map(|(k, v)| (k, v.datatype.map(Datatype::name), PyBytes::new(py, &v.data))).collect()
}

/// The engine's form of `changes` (unknown datatype names are a ValueError naming the key).
pub(crate) fn parse_changes(changes: Vec<MetaChange>) -> PyResult<Vec<(String, Option<MetaValue>)>> {
    let mut parsed = Vec::with_capacity(changes.len());
    for (key, value) in changes {
        let value = match value {
            None => None,
            Some((dtype, data)) => {
                let datatype =
                    match dtype {
                        None => None,
                        Some(d) => Some(Datatype::parse(&d).ok_or_else(|| {
                            PyValueError::new_err(format!("metadata {key:?}: unknown datatype {d:?}"))
                        })?),
                    };
                Some(MetaValue { datatype, data })
            }
        };
        parsed.push((key, value));
    }
    Ok(parsed)
}
