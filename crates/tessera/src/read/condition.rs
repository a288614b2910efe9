//! Query conditions in reads (`condition/` parses, binds and evaluates them). A condition is
//! evaluated on each result cell's merged value: after the merge in which the newest fragment
//! wins and after deletes (sparse reads), or after the dense plan and the overlay of sparse
//! updates (dense reads). So an older fragment's cell never shows through a newer cell that
//! fails the condition.
//!
//! - Sparse reads: the condition's attributes are gathered for the result cells, in chunks
//!   within `sm.memory_budget`, and evaluated into a selection; the cells that fail are dropped
//!   before any other attribute is read, so tiles none of whose cells pass are never fetched for
//!   the other attributes.
//! - Dense reads: the condition's attributes are read for the run of result cells first and
//!   evaluated; copies from tiles none of whose result cells pass are dropped from the plan
//!   (their tiles are not fetched for the other attributes), and every cell that fails reads as
//!   the fill value (null for nullable attributes), as TileDB does.

use super::execute::{execute, finish_fixed, plan_covers, sink_buffers, sinks, zero_fixed, DataSink, Sink, FILL_BLOB};
use super::overlay::overlay;
use super::plan::{CopyOp, FillOp, ResultSpace};
use super::query::assemble_var;
use super::sparse::{retain_marked, SparseReadQuery};
use crate::condition::{eval, Bound, Column};
use crate::error::Result;
use crate::geometry::{for_each_cell_pair, Strided};
use crate::schema::Attribute;
use crate::snapshot::Snapshot;
use crate::stats::{self, Counter};
use crate::uninit::write_bytes;

/// Bytes a result cell of attribute `a` takes while a condition is evaluated (values, offset,
/// validity; 16 for variable-length values).
fn cell_bytes(a: &Attribute) -> u64 {
    u64::from(a.nullable) + if a.is_var() { 24 } else { a.cell_size() as u64 }
}

impl SparseReadQuery {
    /// Drops the result cells that fail `bound`, evaluating it chunk by chunk.
    pub(super) fn apply_condition(&mut self, bound: &Bound) -> Result<()> {
        let schema = self.array.schema().clone();
        let per_cell: u64 = bound.attr_indices().iter().map(|&i| cell_bytes(&schema.attrs[i])).sum();
        let chunk = (self.array.ctx.config().memory_budget() / per_cell.max(1)).clamp(1, 1 << 24) as usize;
        let mut keep = Vec::with_capacity(self.cells.len());
        for part in self.cells.chunks(chunk) {
            let cols = self.gather(part, bound.attr_indices())?;
            let columns: Vec<(usize, Column<'_>)> = bound
                .attr_indices()
                .iter()
                .zip(&cols)
                .map(|(&i, d)| (i, column_of(&d.data, d.offsets.as_deref(), d.validity.as_deref())))
                .collect();
            keep.extend(eval(&bound.pred, part.len(), &schema.attrs, &columns));
        }
        count(keep.len(), &keep);
        retain_marked(&mut self.cells, &mut self.ords, schema.ndim(), &keep);
        Ok(())
    }
}

fn column_of<'a>(data: &'a [u8], offsets: Option<&'a [u64]>, validity: Option<&'a [u8]>) -> Column<'a> {
    match offsets {
        Some(offsets) => Column::Var { data, offsets, validity },
        None => Column::Fixed { data, validity },
    }
}

/// Counts the cells a condition was evaluated on and those that passed.
fn count(cells: usize, keep: &[bool]) {
    stats::add(Counter::ReaderConditionCells, cells as u64);
    stats::add(Counter::ReaderConditionPassed, keep.iter().filter(|k| **k).count() as u64);
}

/// Evaluates `bound` on result cells `[c0, c1)` of a dense read (plan `copies`, `fills`):
/// reads the condition's attributes into temporary buffers (the same plan, then the overlay of
/// sparse updates), and returns whether each cell passes.
pub(super) fn dense_selection(
    array: &Snapshot,
    space: &ResultSpace,
    (c0, c1): (u64, u64),
    (copies, fills): (&[CopyOp], &[FillOp]),
    bound: &Bound,
) -> Result<Vec<bool>> {
    let schema = array.schema();
    let n = (c1 - c0) as usize;
    let attrs = bound.attr_indices();
    let (mut fixed, mut valid) = sink_buffers(schema, attrs, n);
    let mut sinks = sinks(schema, attrs, n, &mut fixed, &mut valid);
    if !plan_covers(copies, fills, n as u64) {
        zero_fixed(&mut sinks);
    }
    execute(array, copies.to_vec(), fills, &mut sinks)?;
    overlay(array, space, c0, c1, &mut sinks)?;
    let vars: Vec<Option<(Vec<u64>, Vec<u8>)>> = sinks
        .into_iter()
        .map(|s| match s.data {
            DataSink::Var { refs, blobs } => Some(assemble_var(&refs, &blobs, &schema.attrs[s.attr].fill_bytes())),
            DataSink::Fixed(_) => None,
        })
        .collect();
    // SAFETY: the plan covers every cell (or the sinks were zeroed) and executed without error.
    #[allow(unsafe_code)]
    unsafe {
        finish_fixed(schema, attrs, n, &mut fixed);
    }
    let columns: Vec<(usize, Column<'_>)> = attrs
        .iter()
        .enumerate()
        .map(|(k, &i)| {
            let v = schema.attrs[i].nullable.then_some(&valid[k][..]);
            (
                i,
                match &vars[k] {
                    Some((o, d)) => column_of(d, Some(o), v),
                    None => column_of(&fixed[k], None, v),
                },
            )
        })
        .collect();
    let keep = eval(&bound.pred, n, &schema.attrs, &columns);
    count(n, &keep);
    Ok(keep)
}

/// The copies that carry at least one cell that passes (`keep`, per result cell of the run):
/// the others' tiles need not be fetched for the other attributes.
pub(super) fn selected_copies(copies: Vec<CopyOp>, keep: &[bool]) -> Vec<CopyOp> {
    let before = copies.len();
    let kept: Vec<CopyOp> = copies.into_iter().filter(|op| any_selected(&op.shape, &op.dst, keep)).collect();
    stats::add(Counter::ReaderConditionCopiesSkipped, (before - kept.len()) as u64);
    kept
}

fn any_selected(shape: &[u64], dst: &Strided, keep: &[bool]) -> bool {
    let mut any = false;
    for_each_cell_pair(shape, dst, dst, |_, d| any |= keep[d as usize]);
    any
}

/// Gives every cell that fails (`keep` false) the fill value, and null.
pub(super) fn mask_failing(schema_attrs: &[Attribute], keep: &[bool], sinks: &mut [Sink<'_>]) {
    for s in sinks.iter_mut() {
        let a = &schema_attrs[s.attr];
        let fill = a.fill_bytes();
        match &mut s.data {
            DataSink::Fixed(buf) => {
                let cs = a.cell_size();
                for (cell, k) in buf.chunks_exact_mut(cs).zip(keep) {
                    if !k {
                        write_bytes(cell, &fill);
                    }
                }
            }
            DataSink::Var { refs, .. } => {
                for (r, k) in refs.iter_mut().zip(keep) {
                    if !k {
                        *r = (FILL_BLOB, 0, fill.len() as u64);
                    }
                }
            }
        }
        if let Some(v) = s.validity.as_deref_mut() {
            v.iter_mut().zip(keep).filter(|(_, k)| !**k).for_each(|(v, _)| *v = 0);
        }
    }
}
