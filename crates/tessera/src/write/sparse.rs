//! Sparse writes. Cells arrive as one coordinate column per dimension plus attribute buffers,
//! either in any order (one submit; the engine sorts them in parallel into global order) or
//! already in global order (several submits may build one fragment; out-of-order input is an
//! error). Everything is validated before a byte is written: coordinates in the domain and
//! finite, columns of equal length, no duplicate coordinates unless the schema allows them. On
//! a dense array (random updates) a coordinate given twice takes the value given last, as numpy
//! assignment does; the fragment holds it once.
//! Sorted cells are cut into data tiles of `capacity` cells, each with its MBR and first and last
//! coordinates; tiles are built and filtered in parallel; `finish` adds the R-tree and commits.

use rayon::prelude::*;

use super::{FragmentWriter, UnfilteredTile};
use crate::error::{QueryError, Result};
use crate::fragment::{
    summarize, summarized_from_data, FileKind, FileSpec, FragmentMetadata, FragmentName, RTree, SparseIndex,
    SummaryKind, TileSummary, FANOUT,
};
use crate::geometry::Layout;
use crate::geometry::{bounding_box, ordinals, sort_permutation, value_text, KeysCome, OrderKeys, Rect};
use crate::input::{validate, AttrInput, CoordInput};
use crate::schema::ArraySchema;
use crate::snapshot::{shared_lock, Snapshot};
use crate::stats::{self, Timer};

/// Cells borrowed from a submit (or from the owned leftover of earlier ones), in schema order.
struct Cells<'a> {
    n: usize,
    ords: Vec<&'a [u64]>,
    coords: Vec<&'a [u8]>,
    attrs: Vec<AttrInput<'a>>,
}

/// Owned copy of cells that did not fill a tile yet (global-order writes).
#[derive(Debug, Default)]
struct Leftover {
    n: usize,
    ords: Vec<Vec<u64>>,
    coords: Vec<Vec<u8>>,
    data: Vec<Vec<u8>>,
    offsets: Vec<Option<Vec<u64>>>,
    validity: Vec<Option<Vec<u8>>>,
}

impl Leftover {
    fn view<'a>(&'a self, schema: &'a ArraySchema) -> Cells<'a> {
        Cells {
            n: self.n,
            ords: self.ords.iter().map(Vec::as_slice).collect(),
            coords: self.coords.iter().map(Vec::as_slice).collect(),
            attrs: schema
                .attrs
                .iter()
                .enumerate()
                .map(|(i, a)| AttrInput {
                    name: &a.name,
                    data: self.data.get(i).map_or(&[][..], Vec::as_slice),
                    offsets: self.offsets.get(i).and_then(|o| o.as_deref()),
                    validity: self.validity.get(i).and_then(|v| v.as_deref()),
                })
                .collect(),
        }
    }
}

/// Which cells of a source go into a tile.
#[derive(Clone, Copy)]
enum Pick<'a> {
    Range(usize, usize),
    Perm(&'a [u32]),
}

impl Pick<'_> {
    fn len(&self) -> usize {
        match self {
            Pick::Range(a, b) => b - a,
            Pick::Perm(p) => p.len(),
        }
    }
    fn first(&self) -> Option<usize> {
        match *self {
            Pick::Range(a, b) => (a < b).then_some(a),
            Pick::Perm(p) => p.first().map(|&i| i as usize),
        }
    }
    fn last(&self) -> Option<usize> {
        match *self {
            Pick::Range(a, b) => (a < b).then(|| b - 1),
            Pick::Perm(p) => p.last().map(|&i| i as usize),
        }
    }
    fn for_each(&self, mut f: impl FnMut(usize)) {
        match *self {
            Pick::Range(a, b) => (a..b).for_each(f),
            Pick::Perm(p) => p.iter().for_each(|&i| f(i as usize)),
        }
    }
}

/// A data tile's entry in the sparse index.
struct TileMeta {
    cells: u64,
    mbr: Rect,
    first: Vec<u64>,
    last: Vec<u64>,
}

/// Writes one sparse fragment; see the module documentation.
#[derive(Debug)]
pub struct SparseWriter {
    snap: Snapshot,
    layout: Layout,
    specs: Vec<FileSpec>,
    keys: OrderKeys,
    frag: Option<FragmentWriter>,
    index: SparseIndex,
    leftover: Leftover,
    last_key: Option<Vec<u64>>,
    cells: u64,
    submits: u64,
    poisoned: bool,
    /// Delete writers: the deleted rectangles (ordinals); the submitted points are deleted too.
    deletes: Option<Vec<Rect>>,
    /// Consolidation: the domain of an empty output (all input cells deleted), which is
    /// committed anyway so that it supersedes its inputs.
    empty_domain: Option<Rect>,
    /// Shared lock on the array held until the fragment is committed or dropped, so vacuum
    /// never takes an unfinished fragment for a crashed writer's remains.
    _lock: Option<std::sync::Arc<crate::storage::LockGuard>>,
}

impl SparseWriter {
    /// A writer of a new fragment called `name` whose cells arrive in `layout`.
    pub(crate) fn named(snap: &Snapshot, layout: Layout, name: FragmentName) -> Result<Self> {
        let schema = snap.schema();
        if !matches!(layout, Layout::Unordered | Layout::Global) {
            return Err(QueryError::Layout(format!(
                "a sparse write takes layout unordered or global, not {}",
                layout.name()
            ))
            .into());
        }
        let specs = FileSpec::for_sparse(schema);
        let mut frag = FragmentWriter::new(&snap.ctx, snap.uri.clone(), name, specs.clone(), Vec::new(), 0);
        frag.summarize_files(snap.schema());
        let lock = shared_lock(&snap.ctx, &snap.uri, true)?;
        Ok(Self {
            _lock: lock,
            keys: OrderKeys::new(schema),
            snap: snap.clone(),
            layout,
            specs,
            frag: Some(frag),
            index: SparseIndex::default(),
            leftover: Leftover::default(),
            last_key: None,
            cells: 0,
            submits: 0,
            poisoned: false,
            deletes: None,
            empty_domain: None,
        })
    }

    /// A writer of a delete fragment: `rects` (ordinal rectangles) and the points submitted
    /// (coordinates only; repeated points are merged) are deleted.
    pub(crate) fn for_deletes(snap: &Snapshot, rects: Vec<Rect>, name: FragmentName) -> Result<Self> {
        let mut w = Self::named(snap, Layout::Unordered, name)?;
        let specs = FileSpec::for_deletes(snap.schema());
        let name = w.frag.as_ref().map(|f| f.name().clone()).unwrap_or_else(|| FragmentName::new(0));
        w.frag = Some(FragmentWriter::new(&snap.ctx, snap.uri.clone(), name, specs.clone(), Vec::new(), 0));
        w.specs = specs;
        w.deletes = Some(rects);
        Ok(w)
    }

    /// Makes the fragment a consolidation's output replacing `inputs` (see
    /// `FragmentWriter::set_replaces`).
    pub(crate) fn set_replaces(&mut self, inputs: Vec<crate::commit::Placed>) {
        if let Some(f) = self.frag.as_mut() {
            f.set_replaces(inputs);
        }
    }

    /// Lets `finish` commit a fragment without cells, with non-empty domain `domain`.
    pub(crate) fn allow_empty(&mut self, domain: Rect) {
        self.empty_domain = Some(domain);
    }

    /// The name the fragment will be committed under.
    pub fn fragment_name(&self) -> Option<&FragmentName> {
        self.frag.as_ref().map(FragmentWriter::name)
    }

    /// Submits cells: `coords` holds one column per dimension, `attrs` every attribute.
    ///
    /// # Errors
    /// Bad input (nothing of this submit is written then): a coordinate outside the domain or
    /// not finite (naming the first such cell), columns of different lengths, duplicates when
    /// the schema does not allow them, cells out of global order (global layout), a second submit
    /// of an unordered write. Storage failures.
    pub fn submit(&mut self, coords: &[CoordInput<'_>], attrs: &[AttrInput<'_>]) -> Result<()> {
        super::dense::count_write_submit(self.layout);
        let _t = stats::timer(Timer::WriterWrite);
        let schema = self.snap.schema.clone();
        let (cols, n) = coord_columns(&schema, coords)?;
        self.check_submit(n)?;
        let attrs = if self.deletes.is_some() {
            if !attrs.is_empty() {
                return Err(QueryError::AttributeSet("a delete takes coordinates only".into()).into());
            }
            Vec::new()
        } else {
            validate(&schema, attrs, Some(n as u64))?.0
        };
        let ords: Vec<Vec<u64>> = self.snap.ctx.install(|| ordinals_of(&schema, &cols))?;
        let prepare = stats::timer(Timer::WriterPrepareTiles);
        let keys = self.snap.ctx.install(|| self.keys.keys(&ords));
        let w = self.keys.width();
        let (mut perm, mut packed) = match self.layout {
            Layout::Unordered => {
                let order = self.snap.ctx.install(|| sort_permutation(&keys, w, KeysCome::Shuffled));
                (Some(order.perm), order.packed)
            }
            _ => (None, None),
        };
        // Updates of a dense array assign like numpy: a coordinate given twice takes its last
        // value, so each fragment holds a coordinate once (reads and the update index rely on
        // it). Deleting a cell twice is deleting it once.
        let last_wins = !schema.is_sparse() || self.deletes.is_some();
        if last_wins {
            perm = keep_last(&keys, w, n, perm, packed.as_mut())?;
        }
        let n = perm.as_ref().map_or(n, Vec::len);
        // Duplicates and order, before anything is written. Sparse arrays refuse duplicates
        // unless the schema allows them; dense updates have none left within a submit, and
        // refuse a cell that repeats the previous submit's last.
        let strict = !schema.allows_duplicates || last_wins;
        let sorted = SortedKeys { keys: &keys, w, perm: perm.as_deref(), packed: packed.as_deref(), n };
        sorted
            .check_order(self.last_key.as_deref(), strict)
            .map_err(|(j, i, dup)| order_error(&schema, &ords, j, i, dup))?;
        drop(prepare);
        if self.layout == Layout::Unordered {
            // The one submit of an unordered write: the fragment's size is known now.
            let coords: u64 = schema.dims.iter().map(|d| d.datatype.size() as u64).sum();
            let values: u64 = attrs
                .iter()
                .map(|a| {
                    let extra = a.offsets.map_or(0, |o| 8 * o.len()) + a.validity.map_or(0, <[u8]>::len);
                    (a.data.len() + extra) as u64
                })
                .sum();
            let bytes = (n as u64).saturating_mul(coords).saturating_add(values);
            if let Some(f) = self.frag.as_mut() {
                f.pack_if_small(bytes);
            }
        }
        let cells = Cells { n, ords: ords.iter().map(Vec::as_slice).collect(), coords: cols, attrs };
        let result = self.append(&schema, &cells, perm.as_deref());
        if result.is_err() {
            self.poisoned = true;
        }
        result?;
        if n > 0 {
            self.last_key = Some(sorted.key(n - 1).to_vec());
        }
        self.cells += n as u64;
        self.submits += 1;
        Ok(())
    }

    /// Whether a submit of `n` cells may run: the writer is live, an unordered write takes one
    /// submit of at most `u32::MAX` cells.
    fn check_submit(&self, n: usize) -> Result<()> {
        if self.poisoned || self.frag.is_none() {
            return Err(QueryError::WriteState("the writer failed or finished; start a new write".into()).into());
        }
        if self.layout == Layout::Unordered && self.submits > 0 {
            return Err(QueryError::WriteState(
                "an unordered sparse write takes one submit (one fragment per write); start a new writer".into(),
            )
            .into());
        }
        if self.layout == Layout::Unordered && n > u32::MAX as usize {
            return Err(QueryError::WriteState(format!(
                "an unordered write holds at most {} cells ({n} given): write in global order over several submits",
                u32::MAX
            ))
            .into());
        }
        Ok(())
    }

    /// Builds and writes the full tiles of leftover + `cells`, keeping the rest as leftover.
    fn append(&mut self, schema: &ArraySchema, cells: &Cells<'_>, perm: Option<&[u32]>) -> Result<()> {
        let cap = schema.capacity as usize;
        let whole = |a: usize, b: usize| match perm {
            Some(p) => Pick::Perm(&p[a..b]),
            None => Pick::Range(a, b),
        };
        let mut tiles: Vec<Vec<(bool, Pick<'_>)>> = Vec::new(); // (from leftover?, pick)
        let mut pos = 0usize;
        let carried = self.leftover.n;
        if carried > 0 {
            let take = (cap - carried).min(cells.n);
            if carried + take < cap {
                // Still not a full tile: everything becomes leftover below.
                pos = 0;
            } else {
                tiles.push(vec![(true, Pick::Range(0, carried)), (false, whole(0, take))]);
                pos = take;
            }
        }
        if !(carried > 0 && tiles.is_empty()) {
            while cells.n - pos >= cap {
                tiles.push(vec![(false, whole(pos, pos + cap))]);
                pos += cap;
            }
        }
        let left = self.leftover.view(schema);
        let first_index = self.index.tile_cells.len() as u64;
        let threads = self.snap.ctx.compute_threads().max(1);
        let summarize = self.frag.as_ref().is_some_and(FragmentWriter::summarizes);
        for (b, batch) in tiles.chunks(4 * threads).enumerate() {
            let built: Vec<(UnfilteredTile, TileMeta, Vec<Summary>)> = self.snap.ctx.install(|| {
                batch
                    .par_iter()
                    .enumerate()
                    .map(|(k, parts)| {
                        let srcs: Vec<(&Cells<'_>, Pick<'_>)> =
                            parts.iter().map(|(l, p)| (if *l { &left } else { cells }, *p)).collect();
                        let (t, m) = build_tile(schema, &self.specs, &srcs, first_index + (b * 4 * threads + k) as u64);
                        let sums =
                            if summarize { tile_summaries(schema, &self.specs, &t, m.cells) } else { Vec::new() };
                        (t, m, sums)
                    })
                    .collect()
            });
            let mut ready = Vec::with_capacity(built.len());
            let frag = self.frag.as_mut().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
            for (t, m, sums) in built {
                self.index.tile_cells.push(m.cells);
                self.index.mbrs.push(m.mbr);
                self.index.first.push(m.first);
                self.index.last.push(m.last);
                frag.add_summaries(sums);
                ready.push(t);
            }
            self.snap.ctx.install(|| frag.write_tiles(ready))?;
        }
        // The rest becomes the new leftover.
        let consumed_left = !tiles.is_empty() && carried > 0;
        let mut next = Leftover::default();
        let keep_old = carried > 0 && !consumed_left;
        let rest = whole(pos, cells.n);
        let parts: Vec<(&Cells<'_>, Pick<'_>)> =
            if keep_old { vec![(&left, Pick::Range(0, carried)), (cells, rest)] } else { vec![(cells, rest)] };
        if parts.iter().map(|p| p.1.len()).sum::<usize>() > 0 {
            next = gather_leftover(schema, &parts);
        }
        drop(left);
        self.leftover = next;
        Ok(())
    }

    /// Writes the last partial tile, the R-tree, and commits the fragment.
    ///
    /// # Errors
    /// No cells written, or a storage failure.
    pub fn finish(mut self) -> Result<FragmentMetadata> {
        if self.poisoned {
            return Err(QueryError::WriteState("the writer failed; nothing is committed".into()).into());
        }
        if self.cells == 0 && self.deletes.as_ref().is_none_or(Vec::is_empty) && self.empty_domain.is_none() {
            return Err(QueryError::WriteState("a sparse write needs at least one cell".into()).into());
        }
        let schema = self.snap.schema.clone();
        if self.leftover.n > 0 {
            let left = std::mem::take(&mut self.leftover);
            let view = left.view(&schema);
            let (t, m) = build_tile(
                &schema,
                &self.specs,
                &[(&view, Pick::Range(0, left.n))],
                self.index.tile_cells.len() as u64,
            );
            self.index.tile_cells.push(m.cells);
            self.index.mbrs.push(m.mbr);
            self.index.first.push(m.first);
            self.index.last.push(m.last);
            let frag = self.frag.as_mut().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
            if frag.summarizes() {
                frag.add_summaries(tile_summaries(&schema, &self.specs, &t, m.cells));
            }
            self.snap.ctx.install(|| frag.write_tiles(vec![t]))?;
        }
        let rects = self.deletes.take();
        let domain = bounding_box(self.index.mbrs.iter().chain(rects.iter().flatten()))
            .or_else(|| self.empty_domain.clone())
            .unwrap_or_default();
        self.index.rtree = RTree::build(&self.index.mbrs, FANOUT);
        let mut frag = self.frag.take().ok_or_else(|| QueryError::WriteState("writer finished".into()))?;
        frag.set_domain(domain);
        let index = std::mem::take(&mut self.index);
        frag.finish(self.cells, Some(index), rects)
    }
}

/// The ordinals of checked coordinate columns, naming the first bad cell.
fn ordinals_of(schema: &ArraySchema, cols: &[&[u8]]) -> Result<Vec<Vec<u64>>> {
    schema
        .dims
        .par_iter()
        .zip(cols)
        .map(|(d, c)| {
            ordinals(d, c).map_err(|b| {
                let why = if b.why == "is outside the domain" {
                    let dom = match d.domain {
                        crate::schema::Domain::Int(lo, hi) => format!("[{lo}, {hi}]"),
                        crate::schema::Domain::Float(lo, hi) => format!("[{lo}, {hi}]"),
                    };
                    format!("{} {dom}", b.why)
                } else {
                    b.why.to_string()
                };
                QueryError::Coordinate { dim: d.name.clone(), cell: b.cell as u64, value: b.value, why }.into()
            })
        })
        .collect::<Result<Vec<_>>>()
}

/// The permutation that keeps, of cells with equal keys (`w` words per cell), the one given
/// last: `perm` (the stable sort of an unordered write, with its `packed` keys when they fit
/// 128 bits, deduplicated alike) deduplicated, or for a global-order submit (`perm` `None`,
/// equal keys adjacent) the cells to keep, `None` when none repeats.
fn keep_last(
    keys: &[u64],
    w: usize,
    n: usize,
    perm: Option<Vec<u32>>,
    packed: Option<&mut Vec<u128>>,
) -> Result<Option<Vec<u32>>> {
    let same = |a: u32, b: u32| keys[a as usize * w..a as usize * w + w] == keys[b as usize * w..b as usize * w + w];
    let mut perm = perm;
    if perm.is_none() && (1..n).any(|k| same(k as u32 - 1, k as u32)) {
        let Ok(m) = u32::try_from(n) else {
            return Err(QueryError::WriteState(format!(
                "a global-order submit of {n} cells repeats coordinates: give each cell once, or submit at most {} \
                 cells at a time",
                u32::MAX
            ))
            .into());
        };
        perm = Some((0..m).collect());
    }
    if let Some(p) = perm.as_mut() {
        // The sort is stable, so of equal coordinates the last given comes last: keep it.
        keep_last_of_runs(p, packed, |p, pk, k| match pk {
            Some(pk) => pk[k] == pk[k + 1],
            None => same(p[k], p[k + 1]),
        });
    }
    Ok(perm)
}

/// Compacts `perm` (and `packed`, its keys in the same order, when given) to the last entry of
/// each run of equal keys; `equal(perm, packed, k)`: entries `k` and `k + 1` have equal keys
/// (entries from `k` on are still as given when it is asked).
fn keep_last_of_runs(
    perm: &mut Vec<u32>,
    mut packed: Option<&mut Vec<u128>>,
    equal: impl Fn(&[u32], Option<&[u128]>, usize) -> bool,
) {
    let mut kept = 0;
    for k in 0..perm.len() {
        if k + 1 < perm.len() && equal(perm, packed.as_deref().map(Vec::as_slice), k) {
            continue;
        }
        perm[kept] = perm[k];
        if let Some(pk) = packed.as_deref_mut() {
            pk[kept] = pk[k];
        }
        kept += 1;
    }
    perm.truncate(kept);
    if let Some(pk) = packed {
        pk.truncate(kept);
    }
}

/// A submit's keys in the order its cells are written (`perm`, or as given).
struct SortedKeys<'a> {
    keys: &'a [u64],
    w: usize,
    perm: Option<&'a [u32]>,
    /// The keys packed in one integer each, in the written order (when the sort packed them).
    packed: Option<&'a [u128]>,
    n: usize,
}

impl SortedKeys<'_> {
    /// The cell written `k`-th.
    fn pos(&self, k: usize) -> usize {
        self.perm.map_or(k, |p| p[k] as usize)
    }

    /// The key of the cell written `k`-th.
    fn key(&self, k: usize) -> &[u64] {
        let i = self.pos(k);
        &self.keys[i * self.w..i * self.w + self.w]
    }

    /// Checks that the keys ascend (strictly when `strict`) from `last` (the previous submit's
    /// last key) on. On failure: (cell, the cell before it if in this submit, equal keys).
    fn check_order(&self, last: Option<&[u64]>, strict: bool) -> std::result::Result<(), (usize, Option<usize>, bool)> {
        if let (Some(prev), true) = (last, self.n > 0) {
            let first = self.key(0);
            if first < prev || (strict && first == prev) {
                return Err((self.pos(0), None, first == prev));
            }
        }
        let bad = match self.packed {
            // Packed keys order as the key words do: one sequential pass.
            Some(p) => (1..self.n).find(|&k| p[k] < p[k - 1] || (strict && p[k] == p[k - 1])),
            None => (1..self.n).find(|&k| {
                let (a, b) = (self.key(k - 1), self.key(k));
                b < a || (strict && a == b)
            }),
        };
        match bad {
            Some(k) => Err((self.pos(k), Some(self.pos(k - 1)), self.key(k) == self.key(k - 1))),
            None => Ok(()),
        }
    }
}

/// Checks coordinate inputs (every dimension once, whole values, equal lengths) and returns
/// their ordinals.
///
/// # Errors
/// As [`SparseWriter::submit`] for coordinates.
pub(crate) fn coord_ordinals(schema: &ArraySchema, coords: &[CoordInput<'_>]) -> Result<Vec<Vec<u64>>> {
    let (cols, _) = coord_columns(schema, coords)?;
    ordinals_of(schema, &cols)
}

/// Checks the coordinate inputs: every dimension once, whole values, equal lengths.
fn coord_columns<'a>(schema: &ArraySchema, coords: &[CoordInput<'a>]) -> Result<(Vec<&'a [u8]>, usize)> {
    let mut cols: Vec<Option<&'a [u8]>> = vec![None; schema.ndim()];
    for c in coords {
        let Some(k) = schema.dim_index(c.name) else {
            return Err(QueryError::BadSubarray(format!(
                "unknown dimension {:?} (the array has: {})",
                c.name,
                schema.dims.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
            ))
            .into());
        };
        if cols[k].is_some() {
            return Err(QueryError::AttributeSet(format!("dimension {} is given twice", c.name)).into());
        }
        let s = schema.dims[k].datatype.size();
        if c.data.len() % s != 0 {
            return Err(QueryError::CoordBuffer {
                dim: c.name.to_string(),
                detail: format!("{} bytes is not a whole number of {} values", c.data.len(), schema.dims[k].datatype),
            }
            .into());
        }
        cols[k] = Some(c.data);
    }
    let mut out = Vec::with_capacity(cols.len());
    let mut n = None;
    for (k, c) in cols.into_iter().enumerate() {
        let d = &schema.dims[k];
        let Some(c) = c else {
            return Err(QueryError::AttributeSet(format!("coordinates of dimension {} are missing", d.name)).into());
        };
        let len = c.len() / d.datatype.size();
        match n {
            None => n = Some(len),
            Some(m) if m != len => {
                return Err(QueryError::CoordBuffer {
                    dim: d.name.clone(),
                    detail: format!(
                        "{len} coordinates, but dimension {} has {m}: columns must have equal lengths",
                        schema.dims[0].name
                    ),
                }
                .into());
            }
            _ => {}
        }
        out.push(c);
    }
    Ok((out, n.unwrap_or(0)))
}

fn order_error(schema: &ArraySchema, ords: &[Vec<u64>], cell: usize, prev: Option<usize>, dup: bool) -> crate::Error {
    let text = |i: usize| {
        let v: Vec<String> = schema.dims.iter().zip(ords).map(|(d, o)| value_text(d, o[i])).collect();
        format!("({})", v.join(", "))
    };
    let detail = match (dup, prev) {
        (true, Some(p)) => format!("duplicate coordinates {} at cells {p} and {cell}", text(cell)),
        (true, None) => format!("cell {cell} repeats the coordinates {} of the previous submit", text(cell)),
        (false, Some(p)) => {
            format!("cells are not in global order: cell {cell} {} comes after cell {p} {}", text(cell), text(p))
        }
        (false, None) => format!("cell {cell} {} comes before the last cell of the previous submit", text(cell)),
    };
    let detail = match (dup, schema.is_sparse()) {
        (true, true) => format!("{detail} (the schema does not allow duplicates)"),
        (true, false) => format!("{detail}: a global-order write gives each cell once across its submits"),
        (false, _) => detail,
    };
    QueryError::WriteState(detail).into()
}

/// Gathers `size`-byte values at the picked positions.
fn gather(src: &[u8], size: usize, pick: Pick<'_>, out: &mut Vec<u8>) {
    fn fixed<const N: usize>(src: &[u8], pick: Pick<'_>, out: &mut Vec<u8>) {
        pick.for_each(|i| {
            let v: [u8; N] = src[i * N..i * N + N].try_into().unwrap_or([0; N]);
            out.extend_from_slice(&v);
        });
    }
    match pick {
        Pick::Range(a, b) => out.extend_from_slice(&src[a * size..b * size]),
        _ => match size {
            1 => fixed::<1>(src, pick, out),
            2 => fixed::<2>(src, pick, out),
            4 => fixed::<4>(src, pick, out),
            8 => fixed::<8>(src, pick, out),
            16 => fixed::<16>(src, pick, out),
            _ => pick.for_each(|i| out.extend_from_slice(&src[i * size..(i + 1) * size])),
        },
    }
}

/// Gathers variable-length cells: appends their values to `data` and their starting offsets
/// (relative to `data`'s start) to `offs`.
fn gather_var(inp: &AttrInput<'_>, pick: Pick<'_>, data: &mut Vec<u8>, offs: &mut Vec<u64>) {
    let o = inp.offsets.unwrap_or(&[]);
    let len = inp.data.len() as u64;
    let end = |i: usize| o.get(i + 1).copied().unwrap_or(len);
    match pick {
        Pick::Range(a, b) if a < b => {
            let base = data.len() as u64;
            offs.extend(o[a..b].iter().map(|&x| x - o[a] + base));
            data.extend_from_slice(&inp.data[o[a] as usize..end(b - 1) as usize]);
        }
        _ => pick.for_each(|i| {
            offs.push(data.len() as u64);
            data.extend_from_slice(&inp.data[o[i] as usize..end(i) as usize]);
        }),
    }
}

/// Builds one data tile from the picked cells of its sources, in order.
/// A tile summary row: tile, attribute, kind, summary.
type Summary = (u64, u32, SummaryKind, TileSummary);

/// The summaries of the nullable and variable-length attributes of a built tile of `cells` cells
/// (none for a delete fragment's tiles, which hold only coordinates).
fn tile_summaries(schema: &ArraySchema, specs: &[FileSpec], t: &UnfilteredTile, cells: u64) -> Vec<Summary> {
    let file = |i: usize, kind: FileKind| specs.iter().position(|s| s.kind == kind && s.attr == i);
    let mut out = Vec::with_capacity(schema.attrs.len());
    for (i, a) in schema.attrs.iter().enumerate() {
        // The fragment writer summarizes the others while filtering their data files.
        let Some(data) = file(i, FileKind::Data).filter(|_| !summarized_from_data(a)) else { continue };
        let d = if a.is_var() { &[][..] } else { &t.buffers[data][..] };
        let v = file(i, FileKind::Validity).map(|f| &t.buffers[f][..]);
        out.push((t.index, i as u32, SummaryKind::of(a), summarize(a, d, v, cells)));
    }
    out
}

fn build_tile(
    schema: &ArraySchema,
    specs: &[FileSpec],
    srcs: &[(&Cells<'_>, Pick<'_>)],
    index: u64,
) -> (UnfilteredTile, TileMeta) {
    let n: usize = srcs.iter().map(|s| s.1.len()).sum();
    let nd = schema.ndim();
    let mut mbr: Rect = vec![[u64::MAX, 0]; nd];
    for (c, p) in srcs {
        for (d, r) in mbr.iter_mut().enumerate() {
            p.for_each(|i| {
                let o = c.ords[d][i];
                r[0] = r[0].min(o);
                r[1] = r[1].max(o);
            });
        }
    }
    let point = |(c, i): (&Cells<'_>, usize)| (0..nd).map(|d| c.ords[d][i]).collect::<Vec<u64>>();
    let first = srcs.iter().find_map(|(c, p)| p.first().map(|i| (*c, i))).map(point).unwrap_or_default();
    let last = srcs.iter().rev().find_map(|(c, p)| p.last().map(|i| (*c, i))).map(point).unwrap_or_default();
    let mut var_offs: Vec<Option<Vec<u8>>> = vec![None; schema.attrs.len()];
    let mut buffers: Vec<Vec<u8>> = specs
        .iter()
        .map(|s| match s.kind {
            FileKind::Coords => {
                let size = s.elem_size;
                let mut out = Vec::with_capacity(n * size);
                for (c, p) in srcs {
                    gather(c.coords[s.attr], size, *p, &mut out);
                }
                out
            }
            FileKind::Data if schema.attrs[s.attr].is_var() => {
                let mut data = Vec::new();
                let mut offs = Vec::with_capacity(n);
                for (c, p) in srcs {
                    gather_var(&c.attrs[s.attr], *p, &mut data, &mut offs);
                }
                var_offs[s.attr] = Some(offs.iter().flat_map(|o| o.to_le_bytes()).collect());
                data
            }
            FileKind::Data => {
                let size = schema.attrs[s.attr].cell_size();
                let mut out = Vec::with_capacity(n * size);
                for (c, p) in srcs {
                    gather(c.attrs[s.attr].data, size, *p, &mut out);
                }
                out
            }
            FileKind::Validity => {
                let mut out = Vec::with_capacity(n);
                for (c, p) in srcs {
                    gather(c.attrs[s.attr].validity.unwrap_or(&[]), 1, *p, &mut out);
                }
                out
            }
            FileKind::Offsets => Vec::new(),
        })
        .collect();
    for (f, s) in specs.iter().enumerate() {
        if s.kind == FileKind::Offsets {
            buffers[f] = var_offs[s.attr].take().unwrap_or_default();
        }
    }
    let skip = vec![false; specs.len()];
    (UnfilteredTile { index, buffers, skip, summarize: true }, TileMeta { cells: n as u64, mbr, first, last })
}

/// Copies the picked cells into an owned leftover.
fn gather_leftover(schema: &ArraySchema, parts: &[(&Cells<'_>, Pick<'_>)]) -> Leftover {
    let nd = schema.ndim();
    let na = schema.attrs.len();
    let mut l = Leftover {
        n: parts.iter().map(|p| p.1.len()).sum(),
        ords: vec![Vec::new(); nd],
        coords: vec![Vec::new(); nd],
        data: vec![Vec::new(); na],
        offsets: (0..na).map(|i| schema.attrs[i].is_var().then(Vec::new)).collect(),
        validity: (0..na).map(|i| schema.attrs[i].nullable.then(Vec::new)).collect(),
    };
    for (c, p) in parts {
        for d in 0..nd {
            p.for_each(|i| l.ords[d].push(c.ords[d][i]));
            gather(c.coords[d], schema.dims[d].datatype.size(), *p, &mut l.coords[d]);
        }
        for (i, a) in schema.attrs.iter().enumerate().filter(|_| c.attrs.len() == schema.attrs.len()) {
            if let Some(offs) = l.offsets[i].as_mut() {
                gather_var(&c.attrs[i], *p, &mut l.data[i], offs);
            } else {
                gather(c.attrs[i].data, a.cell_size(), *p, &mut l.data[i]);
            }
            if let Some(v) = l.validity[i].as_mut() {
                gather(c.attrs[i].validity.unwrap_or(&[]), 1, *p, v);
            }
        }
    }
    l
}
