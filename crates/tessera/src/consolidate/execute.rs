//! Consolidating: the chosen fragments are read in global order, batch by batch within
//! `sm.consolidation.buffer_size` bytes, and written as one new fragment whose timestamp range
//! covers them, so readers opened afterwards ignore the inputs while readers opened before keep
//! their snapshot. A dense output holds the array's state over the inputs' bounding box as of
//! the last input (older fragments' cells included, so nothing they showed is hidden by fill);
//! a sparse output holds the merged cells of the inputs. The output's commit record lists the
//! inputs with their positions: it is committed only if they are still consecutive visible
//! fragments then (another consolidation may have replaced them first), readers that see it
//! ignore them, and [`vacuum`](super::vacuum()) deletes them. The output takes the last input's
//! place in fragment order, so a fragment committed while the consolidation ran stays newer.
//!
//! Reading and writing overlap: a second thread reads the next batch while the current one is
//! filtered and written, each batch half the buffer size, so at most the buffer size of cells is
//! held at once. The reads take tiles the tile cache holds but put none in it: every input tile
//! is read once, and the inputs are about to be replaced.

use std::path::Path;
use std::sync::Arc;

use super::bands::{parts, Part};
use super::plan::{plan, ConsolidationPlan, Selection};
use crate::commit::Placed;
use crate::context::Context;
use crate::error::Result;
use crate::fragment::{FragmentMetadata, FragmentName};
use crate::geometry::{bounding_box, DimRange, Layout, OrderKeys, Subarray};
use crate::input::{AttrInput, CoordInput};
use crate::read::{result_cell_bytes, AttrData, ReadQuery, SparseReadQuery};
use crate::snapshot::{CarriedTiles, Snapshot, TileKey};
use crate::stats::{self, Counter, Timer};
use crate::write::{DenseWriter, SparseWriter};

/// Consolidates the fragments `sel` chooses of the array at `uri`; returns the new fragment's
/// metadata, or `None` when fewer than two fragments were chosen.
///
/// # Errors
/// A selection that is not consecutive, unknown fragment names, storage failures, corrupt tiles.
/// On error nothing is committed.
pub fn consolidate(ctx: &Context, uri: impl AsRef<Path>, sel: &Selection) -> Result<Option<FragmentMetadata>> {
    let _t = stats::timer(Timer::ConsolidatorConsolidate);
    let uri = &ctx.resolve_uri(uri.as_ref())?;
    // The snapshot holds the lock while the inputs are read, so vacuum does not delete them.
    let snap = Snapshot::load(ctx, uri.clone(), 0, u64::MAX, true)?;
    let schema = snap.schema.clone();
    let Some(p) = plan(&snap.fragments, !schema.is_sparse(), sel)? else {
        return Ok(None);
    };
    let name = FragmentName::covering(p.timestamps.0, p.timestamps.1);
    let budget = ctx.config().consolidation_buffer_size();
    let replaces: Vec<_> = p.inputs.iter().map(|&i| snap.placed(i)).collect();
    let out = Output { snap: &snap, plan: &p, name, replaces, budget };
    let meta = if p.dense_output { consolidate_dense(out)? } else { consolidate_sparse(out)? };
    stats::add(Counter::ConsolidatorNumFragmentsConsolidated, p.inputs.len() as u64);
    Ok(Some(meta))
}

/// What a consolidation writes: the output fragment `name` of `snap`, replacing `replaces`,
/// as `plan` says, holding about `budget` bytes of cells at once.
struct Output<'a> {
    snap: &'a Snapshot,
    plan: &'a ConsolidationPlan,
    name: FragmentName,
    replaces: Vec<Placed>,
    budget: u64,
}

/// A dense output: the array's state over the inputs' bounding box as of the last input, read
/// in global order batch by batch.
fn consolidate_dense(out: Output<'_>) -> Result<FragmentMetadata> {
    let Output { snap, plan: p, name, replaces, budget } = out;
    let schema = &snap.schema;
    let last = *p.inputs.last().unwrap_or(&0);
    // Bounding box of the inputs (normalized coordinates and dense ordinals coincide).
    let bbox = bounding_box(p.inputs.iter().map(|&i| &snap.fragments[i].domain)).unwrap_or_default();
    let sub = Subarray::from_ranges(
        &bbox.iter().zip(&schema.dims).map(|(r, d)| (d.denormalize(r[0]), d.denormalize(r[1]))).collect::<Vec<_>>(),
    );
    let before = snap.with_fragments(&(0..=last).collect::<Vec<_>>()).without_update_index().without_tile_caching();
    let mut q = ReadQuery::new(&before, &sub, &[], Layout::Global)?;
    let mut w = DenseWriter::named(snap, &sub, Layout::Global, name)?;
    w.set_replaces(replaces);
    pipelined(
        || q.next_batch(budget / 2),
        |b| {
            let inputs: Vec<AttrInput<'_>> = b.attrs.iter().map(AttrData::as_input).collect();
            w.submit(&inputs)
        },
    )?;
    w.finish()
}

/// A sparse output: the inputs' merged cells, read band by band of the global order.
fn consolidate_sparse(out: Output<'_>) -> Result<FragmentMetadata> {
    let Output { snap, plan: p, name, replaces, budget } = out;
    let schema = &snap.schema;
    let carried = Arc::new(CarriedTiles::new(budget / 4));
    let view = snap.with_fragments(&p.inputs).without_tile_caching().with_carried_tiles(carried.clone());
    let nd = schema.ndim();
    let bbox = bounding_box(view.fragments.iter().map(|f| &f.domain)).unwrap_or_default();
    // The global order cut into bands of a fraction of the buffer each (`bands.rs`), each
    // band's boxes read by a query of their own; the whole array in one query when it cannot
    // be cut.
    let cell_bytes = result_cell_bytes(schema, &(0..schema.attrs.len()).collect::<Vec<_>>());
    let target = (budget / BANDS_PER_BUFFER) / (cell_bytes + plan_bytes(schema)).max(1);
    // Small fragments' cells come from the update index, built once for every band.
    let index = view.update_index()?;
    let indexed = |f: usize| index.as_ref().is_some_and(|ix| ix.covers(f));
    let parts = match parts(&OrderKeys::new(schema), &view.fragments, &bbox, target, indexed) {
        Some(parts) => parts,
        None => vec![Part { rect: Vec::new(), shared_with_next: Vec::new() }],
    };
    stats::add(Counter::ConsolidatorBands, parts.len() as u64);
    let mut parts = parts.into_iter();
    let mut shared_with_this: Vec<TileKey> = Vec::new();
    let mut q: Option<SparseReadQuery> = None;
    let mut w = SparseWriter::named(snap, Layout::Global, name)?;
    w.set_replaces(replaces);
    w.allow_empty(bbox);
    pipelined(
        || loop {
            if let Some(b) = q.as_mut().map(|q| q.next_batch(budget / 2)).transpose()?.flatten() {
                return Ok(Some(b));
            }
            let Some(part) = parts.next() else { return Ok(None) };
            // Tiles this part shares with the last stay, as do those it shares with the next.
            carried.keep_only(shared_with_this.iter().chain(&part.shared_with_next).copied());
            shared_with_this = part.shared_with_next;
            let ranges: Vec<Vec<DimRange>> = match part.rect.as_slice() {
                [] => vec![Vec::new(); nd],
                rect => {
                    rect.iter().zip(&schema.dims).map(|(r, d)| vec![DimRange::from_ordinals(d, r[0], r[1])]).collect()
                }
            };
            q = Some(SparseReadQuery::new(&view, &ranges, &[], Layout::Global, None)?);
        },
        |b| {
            let coords: Vec<CoordInput<'_>> =
                b.attrs[..nd].iter().map(|a| CoordInput { name: &a.name, data: &a.data }).collect();
            let attrs: Vec<AttrInput<'_>> = b.attrs[nd..].iter().map(AttrData::as_input).collect();
            w.submit(&coords, &attrs)
        },
    )?;
    w.finish()
}

/// Bands of the global order per buffer: a band's plan and its batch in flight, with the next
/// band's being read, fit the buffer with room to spare.
const BANDS_PER_BUFFER: u64 = 8;

/// Bytes per cell a read's plan holds (cell references, ordinals, order keys, merge order):
/// an estimate for sizing bands.
fn plan_bytes(schema: &crate::schema::ArraySchema) -> u64 {
    56 + 24 * schema.ndim() as u64
}

/// Calls `produce` on a second thread until it returns `None`, handing each batch to `consume`
/// on this one: producing batch k+1 overlaps consuming batch k, and the producer waits with one
/// finished batch until the consumer takes it (at most two batches exist at once). The first
/// error of either side stops both and is returned; a panic on either side is resumed here.
fn pipelined<B: Send>(
    mut produce: impl FnMut() -> Result<Option<B>> + Send,
    mut consume: impl FnMut(B) -> Result<()>,
) -> Result<()> {
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<B>>(0);
        let producer = s.spawn(move || loop {
            let next = produce().transpose();
            let stop = !matches!(next, Some(Ok(_)));
            // A failed send means the consumer stopped: nothing more is wanted.
            if next.is_none_or(|b| tx.send(b).is_err()) || stop {
                break;
            }
        });
        let mut result = Ok(());
        for b in &rx {
            if let Err(e) = b.and_then(&mut consume) {
                result = Err(e);
                break;
            }
        }
        drop(rx);
        if let Err(panic) = producer.join() {
            std::panic::resume_unwind(panic);
        }
        result
    })
}

#[cfg(test)]
mod tests {
    use super::pipelined;
    use crate::error::{Error, QueryError};

    fn err(what: &str) -> Error {
        QueryError::BadSubarray(what.into()).into()
    }

    #[test]
    fn pipelined_hands_over_every_batch_in_order() {
        let mut next = 0..100u32;
        let mut got = Vec::new();
        pipelined(
            || Ok(next.next()),
            |b| {
                got.push(b);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn pipelined_stops_at_the_first_error_of_either_side() {
        let mut next = 0..100u32;
        let mut got = Vec::new();
        let e = pipelined(
            || if next.start == 7 { Err(err("read")) } else { Ok(next.next()) },
            |b| {
                got.push(b);
                Ok(())
            },
        );
        assert!(e.unwrap_err().to_string().contains("read"));
        assert_eq!(got, (0..7).collect::<Vec<_>>());
        // A failing consumer stops the producer (it would otherwise run through all 10^9).
        let mut next = 0..1_000_000_000u32;
        let e = pipelined(|| Ok(next.next()), |b| if b == 3 { Err(err("write")) } else { Ok(()) });
        assert!(e.unwrap_err().to_string().contains("write"));
    }

    #[test]
    #[should_panic(expected = "producer panicked")]
    fn pipelined_resumes_a_producer_panic() {
        let _ = pipelined(|| -> crate::error::Result<Option<u32>> { panic!("producer panicked") }, |_| Ok(()));
    }
}
