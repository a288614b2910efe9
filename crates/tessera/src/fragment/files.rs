//! The files of a fragment: for attribute `i`, `a<i>.data` (cell values), `a<i>.offs` (starting
//! offsets of variable-length cells, u64) and `a<i>.valid` (one validity byte per cell); sparse
//! fragments first hold `d<k>.data`, the coordinates of dimension `k`.

use crate::filter::FilterPipeline;
use crate::schema::ArraySchema;

/// What a fragment file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// Values (fixed-size cells, or the concatenated values of variable-length cells).
    Data,
    /// Starting offset of each variable-length cell within its data tile, u64.
    Offsets,
    /// One byte per cell: 1 valid, 0 null.
    Validity,
    /// Coordinates of one dimension (sparse fragments; `FileSpec::attr` is the dimension index).
    Coords,
}

/// One file of a fragment.
#[derive(Debug, Clone)]
pub(crate) struct FileSpec {
    /// File name inside the fragment folder.
    pub name: String,
    /// Attribute index.
    pub attr: usize,
    /// Content.
    pub kind: FileKind,
    /// Bytes per value, as the filters see it.
    pub elem_size: usize,
    /// Filters of the tiles in this file.
    pub filters: FilterPipeline,
}

impl FileSpec {
    /// The files of a sparse fragment of `schema`: the coordinate files `d<k>.data` in dimension
    /// order, then the attribute files as in [`FileSpec::for_schema`].
    pub(crate) fn for_sparse(schema: &ArraySchema) -> Vec<FileSpec> {
        let mut out: Vec<FileSpec> = schema
            .dims
            .iter()
            .enumerate()
            .map(|(k, d)| FileSpec {
                name: format!("d{k}.data"),
                attr: k,
                kind: FileKind::Coords,
                elem_size: d.datatype.size(),
                filters: d.filters.clone(),
            })
            .collect();
        out.extend(Self::for_schema(schema));
        out
    }

    /// The files of a delete fragment: the coordinate files of its deleted points.
    pub(crate) fn for_deletes(schema: &ArraySchema) -> Vec<FileSpec> {
        let mut v = Self::for_sparse(schema);
        v.truncate(schema.ndim());
        v
    }

    /// The files of a dense fragment of `schema`, in their fixed order: per attribute data,
    /// offsets (variable-length only), validity (nullable only).
    pub(crate) fn for_schema(schema: &ArraySchema) -> Vec<FileSpec> {
        let mut out = Vec::new();
        for (i, a) in schema.attrs.iter().enumerate() {
            out.push(FileSpec {
                name: format!("a{i}.data"),
                attr: i,
                kind: FileKind::Data,
                elem_size: a.datatype.size(),
                filters: a.filters.clone(),
            });
            if a.is_var() {
                out.push(FileSpec {
                    name: format!("a{i}.offs"),
                    attr: i,
                    kind: FileKind::Offsets,
                    elem_size: 8,
                    filters: a.filters.clone(),
                });
            }
            if a.nullable {
                out.push(FileSpec {
                    name: format!("a{i}.valid"),
                    attr: i,
                    kind: FileKind::Validity,
                    elem_size: 1,
                    filters: a.filters.clone(),
                });
            }
        }
        out
    }
}
