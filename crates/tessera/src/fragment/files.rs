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

/// Checks an unfiltered offsets tile (`a<i>.offs`, one u64 per cell) against the length of its
/// data tile, as docs/format.md §7 requires: whole u64 values, the first 0, each at least the one
/// before, the last at most `data_len`. Then every cell's `[offs[c], offs[c + 1])` (the last
/// cell's `[offs[C-1], data_len)`) lies inside the data tile, so no reader needs to check the
/// offsets of the cells it copies again. One pass, no allocation.
///
/// # Errors
/// What is wrong, naming the first bad cell.
pub(crate) fn check_var_offsets(offs: &[u8], data_len: u64) -> Result<(), String> {
    if !offs.len().is_multiple_of(8) {
        return Err(format!("offsets tile of {} bytes is not a whole number of u64 offsets", offs.len()));
    }
    let mut prev = 0u64;
    for (c, w) in offs.chunks_exact(8).enumerate() {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        let o = u64::from_le_bytes(b);
        if c == 0 && o != 0 {
            return Err(format!("offset of cell 0 is {o}, not 0"));
        }
        if o < prev {
            return Err(format!("offset of cell {c} ({o}) is before the offset of cell {} ({prev})", c - 1));
        }
        prev = o;
    }
    if prev > data_len {
        return Err(format!("offset {prev} of the last cell is past the end of the {data_len}-byte data tile"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_var_offsets;

    fn tile(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|o| o.to_le_bytes()).collect()
    }

    #[test]
    fn var_offsets_are_checked_cell_by_cell() {
        assert!(check_var_offsets(&[], 0).is_ok());
        assert!(check_var_offsets(&tile(&[0, 0, 3, 3, 7]), 7).is_ok());
        assert!(check_var_offsets(&tile(&[0, 0, 3, 3, 7]), 9).is_ok());
        for (offs, len, want) in [
            (tile(&[0, 5, 1, 6]), 8, "cell 2 (1) is before the offset of cell 1 (5)"),
            (tile(&[1, 2]), 8, "cell 0 is 1, not 0"),
            (tile(&[0, 2, 9]), 8, "offset 9 of the last cell is past the end of the 8-byte data tile"),
            (tile(&[0, u64::MAX, 6]), 8, "cell 2 (6) is before"),
            (vec![0; 7], 8, "not a whole number"),
        ] {
            let e = check_var_offsets(&offs, len).unwrap_err();
            assert!(e.contains(want), "{e}");
        }
    }
}
