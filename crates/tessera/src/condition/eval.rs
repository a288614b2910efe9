//! Evaluating a bound condition over whole columns of cells into a selection (one `bool` per
//! cell): each comparison is one pass over a column of one type, combined pass by pass, so
//! nothing is allocated per cell.

use super::{CmpOp, Lit, Pred};
use crate::schema::{Attribute, Datatype, NAT};

/// The values of `n` cells of one attribute, as results hold them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Column<'a> {
    /// Fixed-size single-value cells, little-endian.
    Fixed {
        /// `n * size` bytes.
        data: &'a [u8],
        /// Nullable attributes: one byte per cell, 1 valid.
        validity: Option<&'a [u8]>,
    },
    /// Variable-length cells: cell `i` is `data[offsets[i]..offsets[i + 1]]` (the last ends at
    /// the end of `data`).
    Var {
        /// Every cell's values, concatenated.
        data: &'a [u8],
        /// Start of each cell in `data`.
        offsets: &'a [u64],
        /// Nullable attributes: one byte per cell, 1 valid.
        validity: Option<&'a [u8]>,
    },
}

impl Column<'_> {
    fn validity(&self) -> Option<&[u8]> {
        match self {
            Column::Fixed { validity, .. } | Column::Var { validity, .. } => *validity,
        }
    }
}

/// Evaluates `pred` on `n` cells whose attribute columns `cols` gives (attribute index,
/// column; every attribute `pred` reads must be there, attributes as in `schema_attrs`).
/// Returns whether each cell passes.
pub(crate) fn eval(pred: &Pred, n: usize, schema_attrs: &[Attribute], cols: &[(usize, Column<'_>)]) -> Vec<bool> {
    let mut out = vec![false; n];
    eval_into(pred, schema_attrs, cols, &mut out);
    out
}

fn column<'c, 'a>(cols: &'c [(usize, Column<'a>)], attr: usize) -> &'c Column<'a> {
    // The caller fetched every attribute the bound condition lists.
    &cols.iter().find(|c| c.0 == attr).expect("a column for each attribute of the condition").1
}

fn eval_into(pred: &Pred, attrs: &[Attribute], cols: &[(usize, Column<'_>)], out: &mut [bool]) {
    match pred {
        Pred::Cmp { attr, op, lit } => {
            let c = column(cols, *attr);
            compare(attrs[*attr].datatype, c, *op, lit, out);
            if let Some(v) = c.validity() {
                out.iter_mut().zip(v).for_each(|(o, &v)| *o &= v != 0);
            }
        }
        Pred::Null { attr, null } => {
            let valid = column(cols, *attr).validity().unwrap_or(&[]);
            out.iter_mut().zip(valid).for_each(|(o, &v)| *o = (v == 0) == *null);
        }
        Pred::And(parts) | Pred::Or(parts) => {
            let conj = matches!(pred, Pred::And(_));
            let Some((first, rest)) = parts.split_first() else {
                out.fill(conj);
                return;
            };
            eval_into(first, attrs, cols, out);
            let mut tmp = vec![false; out.len()];
            for p in rest {
                eval_into(p, attrs, cols, &mut tmp);
                if conj {
                    out.iter_mut().zip(&tmp).for_each(|(o, t)| *o &= *t);
                } else {
                    out.iter_mut().zip(&tmp).for_each(|(o, t)| *o |= *t);
                }
            }
        }
    }
}

/// `out[i] = value_i op lit` over a column of `t`.
fn compare(t: Datatype, c: &Column<'_>, op: CmpOp, lit: &Lit, out: &mut [bool]) {
    match (c, lit) {
        (Column::Var { data, offsets, .. }, Lit::Bytes(want)) => {
            let eq = op == CmpOp::Eq;
            for (i, o) in out.iter_mut().enumerate() {
                let s = offsets[i] as usize;
                let e = offsets.get(i + 1).map_or(data.len(), |&e| e as usize);
                *o = (data[s..e] == want[..]) == eq;
            }
        }
        (Column::Fixed { data, .. }, Lit::Int(v)) => {
            let v = *v;
            // The literal fits the type (checked when the condition was bound).
            if t.time_unit().is_some() {
                return cmp_values(data, |b| Time(i64::from_le_bytes(b)), op, Time(v as i64), out);
            }
            macro_rules! ints {
                ($($d:ident => $t:ty),*) => {
                    match t.storage() {
                        $(Datatype::$d => cmp_values(data, |b| <$t>::from_le_bytes(b), op, v as $t, out),)*
                        _ => unreachable!("integer literal on a non-integer attribute"),
                    }
                };
            }
            ints!(Int8 => i8, Int16 => i16, Int32 => i32, Int64 => i64, UInt8 => u8, UInt16 => u16,
                  UInt32 => u32, UInt64 => u64);
        }
        (Column::Fixed { data, .. }, Lit::Float(v)) => match t {
            Datatype::Float32 => cmp_values(data, |b| f64::from(f32::from_le_bytes(b)), op, *v, out),
            _ => cmp_values(data, f64::from_le_bytes, op, *v, out),
        },
        _ => unreachable!("literal kinds match their attributes (checked when bound)"),
    }
}

/// A datetime64 value that compares as its `i64` count, except NaT, which compares with nothing
/// (as NaN): every comparison with it is false.
#[derive(Debug, Clone, Copy)]
struct Time(i64);

impl PartialEq for Time {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0 && self.0 != NAT
    }
}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        (self.0 != NAT && other.0 != NAT).then(|| self.0.cmp(&other.0))
    }
}

/// `out[i] = decode(cell i) op v`: one pass, with the operator chosen outside the loop. NaN
/// values (floats) fail every operator, `!=` included (an unknown comparison).
// `x < v || x > v` is not `x != v` for NaN, which clippy's `double_comparisons` assumes.
#[allow(clippy::double_comparisons)]
fn cmp_values<T: PartialOrd + Copy, const W: usize>(
    data: &[u8],
    decode: impl Fn([u8; W]) -> T,
    op: CmpOp,
    v: T,
    out: &mut [bool],
) {
    let vals = data.chunks_exact(W).map(|c| decode(c.try_into().unwrap_or([0; W])));
    match op {
        CmpOp::Lt => set_each(out, vals, |x| x < v),
        CmpOp::Le => set_each(out, vals, |x| x <= v),
        CmpOp::Gt => set_each(out, vals, |x| x > v),
        CmpOp::Ge => set_each(out, vals, |x| x >= v),
        CmpOp::Eq => set_each(out, vals, |x| x == v),
        // `x < v || x > v` is false for NaN, unlike `x != v`.
        CmpOp::Ne => set_each(out, vals, |x| x < v || x > v),
    }
}

fn set_each<T>(out: &mut [bool], vals: impl Iterator<Item = T>, f: impl Fn(T) -> bool) {
    out.iter_mut().zip(vals).for_each(|(o, x)| *o = f(x));
}
