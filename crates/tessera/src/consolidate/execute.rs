//! Consolidating: the chosen fragments are read in global order, batch by batch within
//! `sm.consolidation.buffer_size` bytes, and written as one new fragment whose timestamp range
//! covers them, so readers opened afterwards ignore the inputs while readers opened before keep
//! their snapshot. A dense output holds the array's state over the inputs' bounding box as of
//! the last input (older fragments' cells included, so nothing they showed is hidden by fill);
//! a sparse output holds the merged cells of the inputs. A `__commits/<output>.vac` file,
//! written before the output is committed, lists the inputs: once the output is committed,
//! readers that see it ignore them, and [`vacuum`](super::vacuum) deletes them.

use std::path::Path;

use super::plan::{plan, Selection};
use crate::array::{Array, Mode};
use crate::context::Context;
use crate::error::Result;
use crate::fragment::{FragmentMetadata, FragmentName, COMMITS_DIR};
use crate::geometry::{bounding_box, Subarray};
use crate::read::{AttrData, Layout, ReadQuery, SparseReadQuery};
use crate::stats::{self, Counter, Timer};
use crate::write::{AttrInput, CoordInput, DenseWriter, SparseWriter};

/// Consolidates the fragments `sel` chooses of the array at `uri`; returns the new fragment's
/// metadata, or `None` when fewer than two fragments were chosen.
///
/// # Errors
/// A selection that is not consecutive, unknown fragment names, storage failures, corrupt tiles.
/// On error nothing is committed.
pub fn consolidate(ctx: &Context, uri: impl AsRef<Path>, sel: &Selection) -> Result<Option<FragmentMetadata>> {
    let _t = stats::timer(Timer::ConsolidatorConsolidate);
    let uri = uri.as_ref();
    let array = Array::open(ctx, uri, Mode::Read)?;
    let schema = array.schema().clone();
    let Some(p) = plan(array.fragments(), !schema.is_sparse(), sel)? else {
        return Ok(None);
    };
    let name = FragmentName::covering(p.timestamps.0, p.timestamps.1);
    let mut writable = array.clone();
    writable.mode = Mode::Write;
    let budget = ctx.config().consolidation_buffer_size();
    let last = *p.inputs.last().unwrap_or(&0);
    let meta = if p.dense_output {
        // Bounding box of the inputs (normalized coordinates and dense ordinals coincide).
        let bbox = bounding_box(p.inputs.iter().map(|&i| &array.fragments()[i].domain)).unwrap_or_default();
        let sub = Subarray::from_ranges(
            &bbox.iter().zip(&schema.dims).map(|(r, d)| (d.denormalize(r[0]), d.denormalize(r[1]))).collect::<Vec<_>>(),
        );
        let snapshot = array.with_fragments(&(0..=last).collect::<Vec<_>>());
        let mut q = ReadQuery::new(&snapshot, &sub, &[], Layout::Global)?;
        let mut w = DenseWriter::named(&writable, &sub, Layout::Global, Some(name.clone()))?;
        while let Some(b) = q.next_batch(budget)? {
            let inputs: Vec<AttrInput<'_>> = b.attrs.iter().map(AttrData::as_input).collect();
            w.submit(&inputs)?;
        }
        record_inputs(ctx, uri, &name, &array, &p.inputs)?;
        w.finish()?
    } else {
        let view = array.with_fragments(&p.inputs);
        let nd = schema.ndim();
        let all: Vec<Vec<crate::geometry::DimRange>> = vec![Vec::new(); nd];
        let mut q = SparseReadQuery::new(&view, &all, &[], Layout::Global)?;
        let mut w = SparseWriter::named(&writable, Layout::Global, Some(name.clone()))?;
        w.allow_empty(bounding_box(view.fragments().iter().map(|f| &f.domain)).unwrap_or_default());
        while let Some(b) = q.next_batch(budget)? {
            let coords: Vec<CoordInput<'_>> =
                b.attrs[..nd].iter().map(|a| CoordInput { name: &a.name, data: &a.data }).collect();
            let attrs: Vec<AttrInput<'_>> = b.attrs[nd..].iter().map(AttrData::as_input).collect();
            w.submit(&coords, &attrs)?;
        }
        record_inputs(ctx, uri, &name, &array, &p.inputs)?;
        w.finish()?
    };
    stats::add(Counter::ConsolidatorNumFragmentsConsolidated, p.inputs.len() as u64);
    Ok(Some(meta))
}

/// Writes `__commits/<output>.vac`, the list of fragments the output supersedes, before the
/// output is committed: readers honour the list only once the output's commit file exists, so
/// they never see the output and its inputs at once.
fn record_inputs(ctx: &Context, uri: &Path, name: &FragmentName, array: &Array, inputs: &[usize]) -> Result<()> {
    let list: String = inputs.iter().map(|&i| format!("{}\n", array.fragments()[i].name)).collect();
    ctx.storage().write_atomic(&uri.join(COMMITS_DIR).join(format!("{name}.vac")), list.as_bytes())?;
    Ok(())
}
