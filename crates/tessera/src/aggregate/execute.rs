//! Computing aggregates: the read streamed in batches within `sm.memory_budget`, the condition
//! evaluated on each batch's merged cells, each batch aggregated chunk by chunk in parallel on
//! the compute pool, and the partials merged in order (so float sums do not depend on the
//! scheduling).

use rayon::prelude::*;

use super::from_stats::{self, Rest};
use super::partial::{accumulate, Cells, Partial};
use super::{resolve, AggregateOp, AggregateRequest, AggregateValue, Resolved};
use crate::condition::{eval, Bound, Column, Condition};
use crate::error::Result;
use crate::fast_hash::FastSet;
use crate::geometry::{DimRange, Layout, Subarray};
use crate::read::{AttrData, ReadQuery, ReadResult, SparseReadQuery};
use crate::snapshot::{Snapshot, TileKey};
use crate::stats::{self, Counter};

/// Cells of a batch aggregated by one task.
const CHUNK: usize = 1 << 16;

/// Where batches come from.
enum Source {
    Dense(Box<ReadQuery>),
    Sparse(Box<SparseReadQuery>),
}

impl Source {
    /// The read of `attrs` over `ranges`, leaving out the sparse tiles `skip`.
    fn new(
        array: &Snapshot,
        ranges: &[Vec<DimRange>],
        attrs: &[&str],
        skip: Option<&FastSet<TileKey>>,
    ) -> Result<Self> {
        let schema = array.schema();
        if schema.is_sparse() {
            let q = SparseReadQuery::skipping(array, ranges, attrs, Layout::Unordered, None, skip)?;
            return Ok(Source::Sparse(Box::new(q)));
        }
        let sub = Subarray::from_dim_ranges(schema, ranges)?;
        // The global order reads whole tiles in turn; it needs one range per dimension.
        let layout = if sub.ranges.iter().all(|r| r.len() == 1) { Layout::Global } else { Layout::RowMajor };
        Ok(Source::Dense(Box::new(ReadQuery::new(array, &sub, attrs, layout)?)))
    }

    fn next_batch(&mut self, max_bytes: u64) -> Result<Option<ReadResult>> {
        match self {
            Source::Dense(q) => q.next_batch(max_bytes),
            Source::Sparse(q) => q.next_batch(max_bytes),
        }
    }
}

/// Computes `requests` over the cells of `ranges` (per dimension; an empty list is the whole
/// dimension) that pass `condition`; see the module documentation of `aggregate`.
pub(crate) fn aggregate(
    array: &Snapshot,
    ranges: &[Vec<DimRange>],
    condition: Option<&Condition>,
    requests: &[AggregateRequest],
) -> Result<Vec<AggregateValue>> {
    let schema = array.schema();
    let reqs = resolve(schema, requests)?;
    let bound = condition.map(|c| c.bind(schema)).transpose()?;
    let mut attrs: Vec<usize> = Vec::new();
    for i in reqs.iter().map(|r| r.attr).chain(bound.as_ref().map_or(&[][..], Bound::attr_indices).iter().copied()) {
        if !attrs.contains(&i) {
            attrs.push(i);
        }
    }
    let names: Vec<&str> = attrs.iter().map(|&i| schema.attrs[i].name.as_str()).collect();
    let budget = array.ctx.config().memory_budget();
    let mut totals: Vec<Partial> = reqs.iter().map(Partial::empty).collect();
    // Tiles answered from their stored summaries, and what is left to read.
    let use_stats = condition.is_none() && array.ctx.config().aggregate_tile_stats();
    let plan = if use_stats { from_stats::plan(array, ranges, &reqs)? } else { None };
    let (boxes, skip) = match plan {
        None => (vec![ranges.to_vec()], None),
        Some(p) => {
            for ((total, part), r) in totals.iter_mut().zip(p.partials).zip(&reqs) {
                total.merge(part, r.op, &schema.attrs[r.attr].name)?;
            }
            match p.rest {
                Rest::Boxes(b) => (b, None),
                Rest::Skip(s) => (vec![ranges.to_vec()], Some(s)),
            }
        }
    };
    for ranges in &boxes {
        let mut source = Source::new(array, ranges, &names, skip.as_ref())?;
        stream(array, &mut source, budget, bound.as_ref(), &reqs, &mut totals)?;
    }
    Ok(reqs
        .iter()
        .zip(totals)
        .map(|(r, p)| match r.op {
            AggregateOp::Mean if r.datatype.time_unit().is_some() => p.time_mean(),
            AggregateOp::Mean => p.mean(),
            _ => p.finish(),
        })
        .collect())
}

/// Aggregates every batch of `source` into `totals`.
fn stream(
    array: &Snapshot,
    source: &mut Source,
    budget: u64,
    bound: Option<&Bound>,
    reqs: &[Resolved],
    totals: &mut [Partial],
) -> Result<()> {
    let schema = array.schema();
    while let Some(batch) = source.next_batch(budget)? {
        let keep = bound.map(|b| selection(array, b, &batch));
        let n = usize::try_from(batch.cells).unwrap_or(usize::MAX);
        let cols: Vec<&AttrData> = reqs.iter().map(|r| column(&batch, &schema.attrs[r.attr].name)).collect();
        let parts = array.ctx.install(|| batch_partials(reqs, &cols, keep.as_deref(), n));
        for part in parts {
            for ((total, p), r) in totals.iter_mut().zip(part).zip(reqs) {
                total.merge(p, r.op, &schema.attrs[r.attr].name)?;
            }
        }
        let aggregated = keep.as_ref().map_or(n, |k| k.iter().filter(|k| **k).count());
        stats::add(Counter::ReaderAggregateCells, aggregated as u64);
        stats::add(Counter::ReaderAggregateBatches, 1);
    }
    Ok(())
}

/// The column of attribute `name` in `batch` (the read was asked for it).
fn column<'a>(batch: &'a ReadResult, name: &str) -> &'a AttrData {
    batch.attr(name).expect("the read returns every attribute it was asked for")
}

/// The partials of every request over each chunk of a batch of `n` cells, in chunk order.
fn batch_partials(reqs: &[Resolved], cols: &[&AttrData], keep: Option<&[bool]>, n: usize) -> Vec<Vec<Partial>> {
    let chunks = n.div_ceil(CHUNK);
    (0..chunks)
        .into_par_iter()
        .map(|c| {
            let range = c * CHUNK..((c + 1) * CHUNK).min(n);
            reqs.iter()
                .zip(cols)
                .map(|(r, d)| {
                    let data = if d.offsets.is_some() { &[][..] } else { &d.data[..] };
                    let cells = Cells { data, validity: d.validity.as_deref(), keep };
                    accumulate(r, &cells, range.clone())
                })
                .collect()
        })
        .collect()
}

/// Whether each cell of `batch` passes `bound`, evaluated on the merged values as reads do.
fn selection(array: &Snapshot, bound: &Bound, batch: &ReadResult) -> Vec<bool> {
    let schema = array.schema();
    let columns: Vec<(usize, Column<'_>)> = bound
        .attr_indices()
        .iter()
        .map(|&i| {
            let d = column(batch, &schema.attrs[i].name);
            let validity = d.validity.as_deref();
            let c = match &d.offsets {
                Some(offsets) => Column::Var { data: &d.data, offsets, validity },
                None => Column::Fixed { data: &d.data, validity },
            };
            (i, c)
        })
        .collect();
    let n = usize::try_from(batch.cells).unwrap_or(usize::MAX);
    let keep = eval(&bound.pred, n, &schema.attrs, &columns);
    stats::add(Counter::ReaderConditionCells, n as u64);
    stats::add(Counter::ReaderConditionPassed, keep.iter().filter(|k| **k).count() as u64);
    keep
}
