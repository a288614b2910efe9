//! Partial aggregates: the state of one aggregate over some cells, computed from a column of
//! result cells (one chunk of a batch) and merged with the partials of other chunks. Pure and
//! without allocation per cell: one pass over the chunk's bytes per aggregate.

use std::ops::Range;

use super::{AggregateOp, AggregateValue, Resolved};
use crate::error::{QueryError, Result};
use crate::schema::{Datatype, NAT};

/// The state of one aggregate over some cells.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Partial {
    /// Cells counted (`Count`, `CountValid`, `NullCount`).
    Count(u64),
    /// The exact sum of `n` integer values (`Sum`, `Mean`).
    IntSum { sum: i128, n: u64 },
    /// The sum of `n` float values (`Sum`, `Mean`).
    FloatSum { sum: f64, n: u64 },
    /// The extreme integer value so far (`Min`, `Max`).
    IntExt(Option<i128>),
    /// The extreme float value so far (`Min`, `Max`).
    FloatExt(Option<f64>),
}

/// One attribute's values for a range of result cells.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cells<'a> {
    /// Fixed-size values, little-endian (empty for variable-length attributes).
    pub(crate) data: &'a [u8],
    /// Nullable attributes: one byte per cell, 1 valid.
    pub(crate) validity: Option<&'a [u8]>,
    /// The condition's selection, one per cell (`None`: every cell).
    pub(crate) keep: Option<&'a [bool]>,
}

impl Cells<'_> {
    fn selected(&self, i: usize) -> bool {
        self.keep.is_none_or(|k| k[i])
    }

    fn valid(&self, i: usize) -> bool {
        self.validity.is_none_or(|v| v[i] != 0)
    }
}

impl Partial {
    /// The state of `r` over no cell.
    pub(crate) fn empty(r: &Resolved) -> Self {
        let float = !r.datatype.is_integer();
        match (r.op, float) {
            (AggregateOp::Count | AggregateOp::CountValid | AggregateOp::NullCount, _) => Partial::Count(0),
            (AggregateOp::Sum | AggregateOp::Mean, false) => Partial::IntSum { sum: 0, n: 0 },
            (AggregateOp::Sum | AggregateOp::Mean, true) => Partial::FloatSum { sum: 0.0, n: 0 },
            (AggregateOp::Min | AggregateOp::Max, false) => Partial::IntExt(None),
            (AggregateOp::Min | AggregateOp::Max, true) => Partial::FloatExt(None),
        }
    }

    /// Merges `other` (a partial of the same aggregate over other cells) into `self`.
    ///
    /// # Errors
    /// An integer sum beyond `i128`, naming the attribute `attr`.
    pub(crate) fn merge(&mut self, other: Partial, op: AggregateOp, attr: &str) -> Result<()> {
        let is_min = op == AggregateOp::Min;
        match (self, other) {
            (Partial::Count(a), Partial::Count(b)) => *a += b,
            (Partial::IntSum { sum, n }, Partial::IntSum { sum: s, n: m }) => {
                *sum = sum.checked_add(s).ok_or_else(|| QueryError::Aggregate {
                    attr: attr.to_string(),
                    op: op.name(),
                    detail: "the sum exceeds the range of a 128-bit integer".into(),
                })?;
                *n += m;
            }
            (Partial::FloatSum { sum, n }, Partial::FloatSum { sum: s, n: m }) => {
                *sum += s;
                *n += m;
            }
            (Partial::IntExt(a), Partial::IntExt(b)) => *a = extreme(*a, b, is_min, |x, y| x < y),
            (Partial::FloatExt(a), Partial::FloatExt(b)) => *a = extreme(*a, b, is_min, |x, y| x < y),
            _ => unreachable!("partials of one aggregate have one kind"),
        }
        Ok(())
    }

    /// The aggregate's value.
    pub(crate) fn finish(self) -> AggregateValue {
        match self {
            Partial::Count(c) => AggregateValue::Count(c),
            Partial::IntSum { sum, .. } => AggregateValue::Int(sum),
            Partial::FloatSum { sum, .. } => AggregateValue::Float(sum),
            Partial::IntExt(v) => v.map_or(AggregateValue::Null, AggregateValue::Int),
            Partial::FloatExt(v) => v.map_or(AggregateValue::Null, AggregateValue::Float),
        }
    }

    /// The mean of a sum partial of datetime64 values: a count of their unit, rounded down
    /// (exact, where an `f64` would lose nanoseconds).
    pub(crate) fn time_mean(self) -> AggregateValue {
        match self {
            // n > 0, and the mean of i64 values lies in the i64 range.
            Partial::IntSum { sum, n } if n > 0 => AggregateValue::Int(sum.div_euclid(i128::from(n))),
            _ => AggregateValue::Null,
        }
    }

    /// The mean of a sum partial.
    pub(crate) fn mean(self) -> AggregateValue {
        #[allow(clippy::cast_precision_loss)] // A mean is an f64 by definition.
        match self {
            Partial::IntSum { n: 0, .. } | Partial::FloatSum { n: 0, .. } => AggregateValue::Null,
            Partial::IntSum { sum, n } => AggregateValue::Float(sum as f64 / n as f64),
            Partial::FloatSum { sum, n } => AggregateValue::Float(sum / n as f64),
            other => other.finish(),
        }
    }
}

fn extreme<T: Copy>(a: Option<T>, b: Option<T>, is_min: bool, less: impl Fn(T, T) -> bool) -> Option<T> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if less(y, x) == is_min { y } else { x }),
        (x, None) => x,
        (None, y) => y,
    }
}

/// The partial of `r` over cells `range` of `cells`.
pub(crate) fn accumulate(r: &Resolved, cells: &Cells<'_>, range: Range<usize>) -> Partial {
    let mut p = Partial::empty(r);
    match (&mut p, r.op) {
        (Partial::Count(c), AggregateOp::Count) => {
            *c = cells.keep.map_or(range.len(), |k| k[range].iter().filter(|k| **k).count()) as u64;
        }
        (Partial::Count(c), AggregateOp::CountValid) => {
            *c = range.filter(|&i| cells.selected(i) && cells.valid(i)).count() as u64;
        }
        (Partial::Count(c), _) => *c = range.filter(|&i| cells.selected(i) && !cells.valid(i)).count() as u64,
        (Partial::IntSum { sum, n }, _) => int_values(r.datatype, cells, range, |v| {
            // A chunk holds at most 2^32 values below 2^64: the sum fits in i128.
            *sum += v;
            *n += 1;
        }),
        (Partial::FloatSum { sum, n }, _) => float_values(r.datatype, cells, range, |v| {
            *sum += v;
            *n += 1;
        }),
        (Partial::IntExt(e), AggregateOp::Min) => {
            let mut m = i128::MAX;
            int_values(r.datatype, cells, range, |v| m = m.min(v));
            *e = (m != i128::MAX).then_some(m);
        }
        (Partial::IntExt(e), _) => {
            let mut m = i128::MIN;
            int_values(r.datatype, cells, range, |v| m = m.max(v));
            *e = (m != i128::MIN).then_some(m);
        }
        (Partial::FloatExt(e), op) => {
            // NaN never reaches here; the extremes start at the infinities and a flag says
            // whether any value was seen (an infinity may be the answer).
            let is_min = op == AggregateOp::Min;
            let (mut m, mut any) = (if is_min { f64::INFINITY } else { f64::NEG_INFINITY }, false);
            float_values(r.datatype, cells, range, |v| {
                m = if is_min { m.min(v) } else { m.max(v) };
                any = true;
            });
            *e = any.then_some(m);
        }
    }
    p
}

/// Calls `f` with each selected non-null value of an integer attribute in `range` (bool: 0 or
/// 1; datetime64: the count of its unit, NaT skipped as NaN is).
fn int_values(dt: Datatype, cells: &Cells<'_>, range: Range<usize>, mut f: impl FnMut(i128)) {
    if dt.time_unit().is_some() {
        let g = |v: i64| {
            if v != NAT {
                f(v.into());
            }
        };
        return each::<8, _>(cells, range, i64::from_le_bytes, g);
    }
    match dt.storage() {
        Datatype::Int8 => each::<1, _>(cells, range, |b| i8::from_le_bytes(b).into(), f),
        Datatype::Int16 => each::<2, _>(cells, range, |b| i16::from_le_bytes(b).into(), f),
        Datatype::Int32 => each::<4, _>(cells, range, |b| i32::from_le_bytes(b).into(), f),
        Datatype::Int64 => each::<8, _>(cells, range, |b| i64::from_le_bytes(b).into(), f),
        Datatype::UInt8 => each::<1, _>(cells, range, |b| u8::from_le_bytes(b).into(), f),
        Datatype::UInt16 => each::<2, _>(cells, range, |b| u16::from_le_bytes(b).into(), f),
        Datatype::UInt32 => each::<4, _>(cells, range, |b| u32::from_le_bytes(b).into(), f),
        Datatype::UInt64 => each::<8, _>(cells, range, |b| u64::from_le_bytes(b).into(), f),
        // `resolve` lets only integer attributes reach here.
        _ => {}
    }
}

/// Calls `f` with each selected non-null, non-NaN value of a float attribute in `range`.
fn float_values(dt: Datatype, cells: &Cells<'_>, range: Range<usize>, mut f: impl FnMut(f64)) {
    let mut g = |v: f64| {
        if !v.is_nan() {
            f(v);
        }
    };
    match dt {
        Datatype::Float32 => each::<4, _>(cells, range, |b| f32::from_le_bytes(b).into(), &mut g),
        Datatype::Float64 => each::<8, _>(cells, range, f64::from_le_bytes, &mut g),
        // `resolve` lets only float attributes reach here.
        _ => {}
    }
}

fn each<const N: usize, T>(cells: &Cells<'_>, range: Range<usize>, conv: impl Fn([u8; N]) -> T, mut f: impl FnMut(T)) {
    let data = &cells.data[range.start * N..range.end * N];
    let read = |b: &[u8]| {
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        conv(a)
    };
    if cells.keep.is_none() && cells.validity.is_none() {
        // Every cell counts: one tight pass.
        data.chunks_exact(N).for_each(|b| f(read(b)));
        return;
    }
    for (i, b) in range.zip(data.chunks_exact(N)) {
        if cells.selected(i) && cells.valid(i) {
            f(read(b));
        }
    }
}
