//! Aggregates (count, sum, min, max, mean, null counts) of attributes over a subarray, computed
//! in the engine on the same merged cells a read returns: the newest fragment's value of each
//! cell, after sparse updates and deletes; on dense arrays, cells never written hold the fill
//! value (null for nullable attributes) and count as cells with that value, as reads return
//! them. A query condition selects the cells exactly as in reads (`condition/`, evaluated on
//! the merged values).
//!
//! Semantics:
//! - `Count` counts cells (null or not); `CountValid` counts non-null values; `NullCount`
//!   counts nulls (0 for attributes that are not nullable).
//! - `Sum`, `Min`, `Max`, `Mean` skip nulls and, on float attributes, NaN (as numpy's
//!   `nansum`, `nanmin`, `nanmax`, `nanmean`); infinities take part. They need a numeric
//!   attribute with one value per cell. Integer sums are exact (`i128`; a sum beyond it is an
//!   error naming the attribute, never a wrapped value); float sums add in `f64`. The sum of no
//!   value is 0; the min, max and mean of no value are [`AggregateValue::Null`]. `Mean` is an
//!   `f64` (an integer mean divides the exact sum).
//! - `bool` attributes count as 0 and 1 (numpy's rules): `Sum` counts the true values, `Mean`
//!   is their fraction, `Min`/`Max` are 0 or 1.
//! - `datetime64` attributes skip NaT as NaN is skipped; `Min`, `Max` and `Mean` are
//!   [`AggregateValue::Int`] counts of the attribute's unit (`Mean` exact, rounded down);
//!   `Sum` of times is an error.
//!
//! How (`execute.rs`): the read streams the result in batches within `sm.memory_budget`
//! (dense arrays through `ReadQuery`, sparse ones through `SparseReadQuery`); each batch is
//! cut into chunks aggregated in parallel on the context's compute pool into mergeable
//! [`Partial`](partial::Partial)s (`partial.rs`, pure, no allocation per cell), which are merged
//! in order. Without a condition, tiles the query covers whole and no other fragment overlaps
//! are first taken from the summaries stored with their fragments (`from_stats.rs`, format
//! version 6, `sm.aggregate.tile_stats`) and left out of the streamed read. Float sums then add
//! per-tile sums: equal up to rounding to the sum of the cells in any other order.

mod execute;
mod from_stats;
mod partial;

pub(crate) use execute::aggregate;

use crate::error::{QueryError, Result};
use crate::schema::{ArraySchema, CellValNum, Datatype};

/// What to compute over an attribute's cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AggregateOp {
    /// Cells, null or not.
    Count,
    /// Non-null cells.
    CountValid,
    /// Null cells.
    NullCount,
    /// The sum of the non-null, non-NaN values.
    Sum,
    /// The smallest non-null, non-NaN value.
    Min,
    /// The largest non-null, non-NaN value.
    Max,
    /// The mean of the non-null, non-NaN values, as `f64`.
    Mean,
}

impl AggregateOp {
    /// Every operation, in a fixed order.
    pub const ALL: [AggregateOp; 7] = [
        AggregateOp::Count,
        AggregateOp::CountValid,
        AggregateOp::NullCount,
        AggregateOp::Sum,
        AggregateOp::Min,
        AggregateOp::Max,
        AggregateOp::Mean,
    ];

    /// The operation's name ("count", "count_valid", "null_count", "sum", "min", "max", "mean").
    pub fn name(self) -> &'static str {
        match self {
            AggregateOp::Count => "count",
            AggregateOp::CountValid => "count_valid",
            AggregateOp::NullCount => "null_count",
            AggregateOp::Sum => "sum",
            AggregateOp::Min => "min",
            AggregateOp::Max => "max",
            AggregateOp::Mean => "mean",
        }
    }

    /// Parses a name as produced by [`AggregateOp::name`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == name)
    }

    /// Whether the operation reads values (and so needs a numeric single-value attribute).
    fn reads_values(self) -> bool {
        matches!(self, AggregateOp::Sum | AggregateOp::Min | AggregateOp::Max | AggregateOp::Mean)
    }
}

/// One aggregate to compute: `op` over attribute `attr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AggregateRequest {
    /// Attribute name.
    pub attr: String,
    /// The operation.
    pub op: AggregateOp,
}

impl AggregateRequest {
    /// `op` over `attr`.
    pub fn new(attr: impl Into<String>, op: AggregateOp) -> Self {
        Self { attr: attr.into(), op }
    }
}

/// The result of one aggregate.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum AggregateValue {
    /// `Count`, `CountValid`, `NullCount`.
    Count(u64),
    /// `Sum`, `Min`, `Max` of an integer attribute (exact).
    Int(i128),
    /// `Sum`, `Min`, `Max` of a float attribute, and every `Mean`.
    Float(f64),
    /// `Min`, `Max`, `Mean` over no value.
    Null,
}

/// A request checked against the schema.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Resolved {
    /// Attribute index.
    pub(crate) attr: usize,
    pub(crate) op: AggregateOp,
    pub(crate) datatype: Datatype,
}

/// Checks `requests` against `schema`: known attributes, and numeric single-value attributes
/// for the operations that read values.
fn resolve(schema: &ArraySchema, requests: &[AggregateRequest]) -> Result<Vec<Resolved>> {
    if requests.is_empty() {
        return Err(QueryError::AttributeSet("an aggregate query needs at least one aggregate".into()).into());
    }
    requests
        .iter()
        .map(|r| {
            let attr = schema.attr_index(&r.attr).ok_or_else(|| QueryError::UnknownAttribute {
                name: r.attr.clone(),
                known: schema.attrs.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", "),
            })?;
            let a = &schema.attrs[attr];
            let bad = |detail: String| QueryError::Aggregate { attr: a.name.clone(), op: r.op.name(), detail };
            if r.op.reads_values() {
                if a.datatype == Datatype::Utf8 {
                    return Err(bad(
                        "the attribute holds text (utf8); only count, count_valid and null_count apply".into()
                    )
                    .into());
                }
                if r.op == AggregateOp::Sum && a.datatype.time_unit().is_some() {
                    return Err(bad(format!(
                        "a sum of {} values is not a time; min, max, mean and the counts apply",
                        a.datatype
                    ))
                    .into());
                }
                if a.cell_val_num != CellValNum::Fixed(1) {
                    return Err(bad(
                        "the attribute has several values per cell; only count, count_valid and null_count apply"
                            .into(),
                    )
                    .into());
                }
            }
            Ok(Resolved { attr, op: r.op, datatype: a.datatype })
        })
        .collect()
}

#[cfg(test)]
mod tests;
