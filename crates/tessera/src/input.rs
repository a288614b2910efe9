//! The buffers a caller hands to a write (attribute values, coordinates), and their validation
//! against the schema. Validation
//! happens before anything is written, so bad input changes nothing on disk.

use crate::error::{QueryError, Result};
use crate::schema::{ArraySchema, Attribute, Datatype};

/// The cells of one attribute for a write.
#[derive(Debug, Clone, Copy)]
pub struct AttrInput<'a> {
    /// Attribute name.
    pub name: &'a str,
    /// Values, little-endian: `cells * cell_size` bytes for fixed-size attributes, the
    /// concatenated values of all cells for variable-length ones.
    pub data: &'a [u8],
    /// Variable-length attributes: the starting byte offset of each cell in `data`.
    pub offsets: Option<&'a [u64]>,
    /// Nullable attributes: one byte per cell, 1 valid, 0 null.
    pub validity: Option<&'a [u8]>,
}

impl<'a> AttrInput<'a> {
    /// Input of a fixed-size, non-nullable attribute.
    pub fn fixed(name: &'a str, data: &'a [u8]) -> Self {
        Self { name, data, offsets: None, validity: None }
    }
}

/// The coordinates of one dimension for a sparse write: values of the dimension's type,
/// little-endian.
#[derive(Debug, Clone, Copy)]
pub struct CoordInput<'a> {
    /// Dimension name.
    pub name: &'a str,
    /// One value per cell.
    pub data: &'a [u8],
}

/// Checks `inputs` against the schema for a write of `cells` cells (`None`: infer the count
/// from the buffers, for global-order chunks). Returns the inputs in schema order and the count.
pub(crate) fn validate<'a>(
    schema: &ArraySchema,
    inputs: &[AttrInput<'a>],
    cells: Option<u64>,
) -> Result<(Vec<AttrInput<'a>>, u64)> {
    let mut ordered: Vec<Option<AttrInput<'a>>> = vec![None; schema.attrs.len()];
    for inp in inputs {
        let Some(i) = schema.attr_index(inp.name) else {
            return Err(QueryError::UnknownAttribute {
                name: inp.name.to_string(),
                known: schema.attrs.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", "),
            }
            .into());
        };
        if ordered[i].is_some() {
            return Err(QueryError::AttributeSet(format!("attribute {} is given twice", inp.name)).into());
        }
        ordered[i] = Some(*inp);
    }
    let missing: Vec<&str> =
        schema.attrs.iter().zip(&ordered).filter(|(_, o)| o.is_none()).map(|(a, _)| a.name.as_str()).collect();
    if !missing.is_empty() {
        return Err(QueryError::AttributeSet(format!(
            "a write must give every attribute; missing: {}",
            missing.join(", ")
        ))
        .into());
    }
    let ordered: Vec<AttrInput<'a>> = ordered.into_iter().flatten().collect();
    let cells = match cells {
        Some(c) => c,
        None => {
            let (a, inp) = (&schema.attrs[0], &ordered[0]);
            match inp.offsets {
                Some(o) if a.is_var() => o.len() as u64,
                _ => inp.data.len() as u64 / a.cell_size() as u64,
            }
        }
    };
    for (a, inp) in schema.attrs.iter().zip(&ordered) {
        check_one(a, inp, cells)?;
    }
    Ok((ordered, cells))
}

fn check_one(a: &Attribute, inp: &AttrInput<'_>, cells: u64) -> Result<()> {
    let size = |what, got: u64, expected: u64, unit| QueryError::BufferSize {
        attr: a.name.clone(),
        what,
        got,
        expected,
        unit,
    };
    let bad = |detail: String| QueryError::BadBuffer { attr: a.name.clone(), detail };
    if a.is_var() {
        let Some(offs) = inp.offsets else {
            return Err(bad("variable-length attribute needs offsets".into()).into());
        };
        if offs.len() as u64 != cells {
            return Err(size("offsets", offs.len() as u64, cells, "values").into());
        }
        let vsize = a.datatype.size() as u64;
        if !(inp.data.len() as u64).is_multiple_of(vsize) {
            return Err(bad(format!("data length {} is not a multiple of {vsize}", inp.data.len())).into());
        }
        if let Some(&first) = offs.first() {
            if first != 0 {
                return Err(bad(format!("first offset is {first}, must be 0")).into());
            }
        }
        let len = inp.data.len() as u64;
        for (i, w) in offs.windows(2).enumerate() {
            if w[1] < w[0] {
                return Err(bad(format!("offsets decrease at cell {}", i + 1)).into());
            }
        }
        if let Some(&last) = offs.last() {
            if last > len {
                return Err(bad(format!("last offset {last} is past the data ({len} bytes)")).into());
            }
        }
        if let Some(i) = offs.iter().position(|o| o % vsize != 0) {
            return Err(bad(format!("offset of cell {i} is not a multiple of {vsize}")).into());
        }
        if a.datatype == Datatype::Utf8 {
            for (i, o) in offs.iter().enumerate() {
                let end = offs.get(i + 1).copied().unwrap_or(len);
                if std::str::from_utf8(&inp.data[*o as usize..end as usize]).is_err() {
                    return Err(bad(format!("cell {i} is not valid UTF-8")).into());
                }
            }
        }
    } else {
        if inp.offsets.is_some() {
            return Err(bad("offsets given for a fixed-size attribute".into()).into());
        }
        // Saturating: no buffer holds u64::MAX bytes, so a count too large never matches.
        let expected = cells.saturating_mul(a.cell_size() as u64);
        if inp.data.len() as u64 != expected {
            return Err(size("data", inp.data.len() as u64, expected, "bytes").into());
        }
    }
    if a.datatype == Datatype::Bool {
        if let Some(i) = inp.data.iter().position(|&b| b > 1) {
            let (cell, byte) = (i as u64 / a.cell_size() as u64, inp.data[i]);
            return Err(bad(format!("bool value of cell {cell} is the byte {byte}, must be 0 or 1")).into());
        }
    }
    match (a.nullable, inp.validity) {
        (true, None) => return Err(bad("nullable attribute needs validity".into()).into()),
        (false, Some(_)) => return Err(bad("validity given for a non-nullable attribute".into()).into()),
        (true, Some(v)) => {
            if v.len() as u64 != cells {
                return Err(size("validity", v.len() as u64, cells, "values").into());
            }
            if let Some(i) = v.iter().position(|&b| b > 1) {
                return Err(bad(format!("validity of cell {i} is {}, must be 0 or 1", v[i])).into());
            }
        }
        (false, None) => {}
    }
    Ok(())
}
