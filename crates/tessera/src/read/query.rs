//! The read query: its subarray, attributes and layout, a cursor over the result cells, and the
//! three ways to take results: everything at once, batches within a byte budget, or the
//! caller's own buffers filled as far as they go (the read then resumes on the next submit).

use super::condition::{dense_selection, mask_failing, selected_copies};
use super::execute::{execute, finish_fixed, plan_covers, sink_buffers, sinks, zero_fixed, DataSink, Sink, FILL_BLOB};
use super::overlay::overlay;
use super::plan::{plan, ResultSpace};
use crate::condition::{Bound, Condition};
use crate::config::{memory_limit, Config};
use crate::error::{QueryError, Result};
use crate::geometry::layout_counter;
use crate::geometry::Layout;
use crate::geometry::Subarray;
use crate::input::AttrInput;
use crate::schema::{ArraySchema, Attribute};
use crate::snapshot::Snapshot;
use crate::stats::{self, Counter, Timer};
use crate::storage::Bytes;
use crate::uninit::as_uninit;

/// One attribute's cells of a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrData {
    /// Attribute name.
    pub name: String,
    /// Values, little-endian (variable-length: all cells' values concatenated).
    pub data: Vec<u8>,
    /// Variable-length attributes: starting byte offset of each cell in `data`.
    pub offsets: Option<Vec<u64>>,
    /// Nullable attributes: 1 valid, 0 null, per cell.
    pub validity: Option<Vec<u8>>,
}

/// Cells `[start, start + cells)` of a query's result, in the query's layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadResult {
    /// Position of the first cell in the whole result.
    pub start: u64,
    /// Number of cells.
    pub cells: u64,
    /// Per requested attribute, in request order.
    pub attrs: Vec<AttrData>,
}

impl AttrData {
    /// These cells as input of a write.
    pub fn as_input(&self) -> AttrInput<'_> {
        AttrInput {
            name: &self.name,
            data: &self.data,
            offsets: self.offsets.as_deref(),
            validity: self.validity.as_deref(),
        }
    }
}

impl ReadResult {
    /// The data of attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&AttrData> {
        self.attrs.iter().find(|a| a.name == name)
    }
}

/// A caller's buffers for one attribute.
#[derive(Debug)]
pub struct AttrBuffer<'a> {
    /// Values (fixed-size: `cells * cell_size` bytes are used).
    pub data: &'a mut [u8],
    /// Variable-length attributes: receives the starting byte offset of each cell.
    pub offsets: Option<&'a mut [u64]>,
    /// Nullable attributes: receives one validity byte per cell.
    pub validity: Option<&'a mut [u8]>,
}

/// What one submit produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadStatus {
    /// Whether the whole result has now been returned.
    pub complete: bool,
    /// Cells written into the buffers by this submit.
    pub cells: u64,
    /// Bytes of `data` used, per attribute.
    pub data_bytes: Vec<u64>,
}

/// A read of a subarray; see the module documentation.
#[derive(Debug)]
pub struct ReadQuery {
    array: Snapshot,
    attrs: Vec<usize>,
    space: ResultSpace,
    cursor: u64,
    /// The condition cells must pass to keep their values.
    condition: Option<Bound>,
}

impl ReadQuery {
    pub(crate) fn new(array: &Snapshot, subarray: &Subarray, attrs: &[&str], layout: Layout) -> Result<Self> {
        let schema = array.schema();
        let idx = resolve_attrs(schema, attrs)?;
        if layout == Layout::Unordered {
            return Err(QueryError::Layout("dense reads take layout row-major, col-major or global".into()).into());
        }
        let ranges = subarray.normalize(schema)?;
        if layout == Layout::Global && ranges.iter().any(|r| r.len() != 1) {
            return Err(QueryError::Layout("global layout needs exactly one range per dimension".into()).into());
        }
        let shape = result_shape(schema, &ranges)?;
        Ok(Self {
            array: array.clone(),
            attrs: idx,
            space: ResultSpace { layout, ranges, shape, points: None },
            cursor: 0,
            condition: None,
        })
    }

    /// A read of the cells at `points` (per dimension, each point's normalized coordinate), in
    /// the order given.
    pub(crate) fn points(array: &Snapshot, points: Vec<Vec<u64>>, attrs: &[&str]) -> Result<Self> {
        let idx = resolve_attrs(array.schema(), attrs)?;
        let n = points.first().map_or(0, Vec::len) as u64;
        let space = ResultSpace { layout: Layout::RowMajor, ranges: Vec::new(), shape: vec![n], points: Some(points) };
        Ok(Self { array: array.clone(), attrs: idx, space, cursor: 0, condition: None })
    }

    /// Applies `condition` to the cells not read yet: a cell whose merged value (the newest
    /// fragment's, after sparse updates and deletes) fails it reads as the attribute's fill
    /// value, and null for nullable attributes, as in TileDB; the result keeps its shape. Tiles
    /// none of whose result cells pass are not fetched for the attributes the condition does
    /// not read. Statistics count the cells evaluated and passed
    /// (`reader_condition_cells`, `reader_condition_passed`).
    ///
    /// # Errors
    /// The condition's errors against the schema ([`Condition::bind`]).
    pub fn with_condition(mut self, condition: &Condition) -> Result<Self> {
        self.condition = Some(condition.bind(self.array.schema())?);
        Ok(self)
    }

    /// Cells per dimension of the whole result (ranges of a dimension concatenated).
    pub fn shape(&self) -> &[u64] {
        &self.space.shape
    }

    /// Cells in the whole result.
    pub fn total_cells(&self) -> u64 {
        self.space.total()
    }

    /// Whether every cell has been returned.
    pub fn is_complete(&self) -> bool {
        self.cursor >= self.space.total()
    }

    /// The requested attribute names, in result order.
    pub fn attr_names(&self) -> Vec<&str> {
        self.attrs.iter().map(|&i| self.array.schema().attrs[i].name.as_str()).collect()
    }

    /// Reads every remaining cell into new buffers.
    ///
    /// # Errors
    /// Storage failures and corrupt tiles.
    pub fn read_all(&mut self) -> Result<ReadResult> {
        let (c0, c1) = (self.cursor, self.space.total());
        let r = self.read_interval(c0, c1)?;
        self.cursor = c1;
        Ok(r)
    }

    /// Reads the next batch of about `max_bytes` (at least one cell; whole slabs of the slowest
    /// dimension when at least one fits), or `None` when the result is exhausted.
    ///
    /// # Errors
    /// Storage failures and corrupt tiles.
    pub fn next_batch(&mut self, max_bytes: u64) -> Result<Option<ReadResult>> {
        if self.is_complete() {
            return Ok(None);
        }
        let per_cell = self.estimate_cell_bytes().max(1);
        let mut n = (max_bytes / per_cell).max(1);
        let slab = self.slab_cells();
        if n >= slab {
            n -= n % slab;
        }
        let c1 = self.cursor.saturating_add(n).min(self.space.total());
        let r = self.read_interval(self.cursor, c1)?;
        self.cursor = c1;
        Ok(Some(r))
    }

    /// Fills the caller's buffers (one per requested attribute, in request order) with the next
    /// cells, as many as fit in every buffer. Returns `complete: false` while cells remain; a
    /// submit that returns 0 cells needs larger buffers.
    ///
    /// # Errors
    /// A wrong number of buffers, missing offsets or validity buffers, storage failures and
    /// corrupt tiles.
    pub fn submit(&mut self, bufs: &mut [AttrBuffer<'_>]) -> Result<ReadStatus> {
        let schema = self.array.schema().clone();
        if bufs.len() != self.attrs.len() {
            return Err(QueryError::AttributeSet(format!(
                "{} buffers for {} attributes",
                bufs.len(),
                self.attrs.len()
            ))
            .into());
        }
        let mut fit = self.space.total() - self.cursor;
        for (&i, b) in self.attrs.iter().zip(bufs.iter()) {
            fit = fit.min(buffer_cells(&schema.attrs[i], b)?);
        }
        let mut status = ReadStatus { complete: self.is_complete(), cells: 0, data_bytes: vec![0; bufs.len()] };
        if fit == 0 {
            return Ok(status);
        }
        let (c0, c1) = (self.cursor, self.cursor + fit);
        let any_var = self.attrs.iter().any(|&i| schema.attrs[i].is_var());
        if !any_var {
            let mut sinks: Vec<Sink<'_>> = self
                .attrs
                .iter()
                .zip(bufs.iter_mut())
                .map(|(&i, b)| {
                    let cs = schema.attrs[i].cell_size();
                    Sink {
                        attr: i,
                        data: DataSink::Fixed(as_uninit(&mut b.data[..fit as usize * cs])),
                        validity: b.validity.as_deref_mut().map(|v| &mut v[..fit as usize]),
                    }
                })
                .collect();
            self.fill(c0, c1, &mut sinks)?;
            for (k, &i) in self.attrs.iter().enumerate() {
                status.data_bytes[k] = fit * schema.attrs[i].cell_size() as u64;
            }
            self.cursor = c1;
            status.cells = fit;
            status.complete = self.is_complete();
            return Ok(status);
        }
        // Variable-length values: read, then keep the longest prefix whose values fit.
        let r = self.read_interval(c0, c1)?;
        let n = copy_prefix(&r, bufs, &mut status.data_bytes);
        self.cursor = c0 + n;
        status.cells = n;
        status.complete = self.is_complete();
        Ok(status)
    }

    fn slab_cells(&self) -> u64 {
        let s = &self.space.shape;
        match self.space.layout {
            Layout::RowMajor => s[1..].iter().product(),
            Layout::ColMajor => s[..s.len() - 1].iter().product(),
            Layout::Global | Layout::Unordered => 1,
        }
    }

    fn estimate_cell_bytes(&self) -> u64 {
        let schema = self.array.schema();
        let mut total = 0u64;
        for &i in &self.attrs {
            let a = &schema.attrs[i];
            total += u64::from(a.nullable);
            if a.is_var() {
                // Average value bytes per stored cell over the fragments, plus the offset.
                let name = format!("a{i}.data");
                // Sizes come from fragment metadata: saturate rather than trust them to add up.
                let (bytes, cells) = self.array.fragments.iter().fold((0u64, 0u64), |acc, f| {
                    let b: u64 =
                        f.file(&name).map_or(0, |t| t.iter().fold(0u64, |s, e| s.saturating_add(e.unfiltered_size)));
                    let c = (f.tile_count() as u64).saturating_mul(self.array.grid.cells_per_tile());
                    (acc.0.saturating_add(b), acc.1.saturating_add(c))
                });
                total = total.saturating_add(8 + bytes.checked_div(cells).unwrap_or(8));
            } else {
                total += a.cell_size() as u64;
            }
        }
        total
    }

    fn fill(&self, c0: u64, c1: u64, sinks: &mut [Sink<'_>]) -> Result<()> {
        count_submit(self.space.layout);
        let _t = stats::timer(Timer::ReaderRead);
        let (copies, fills) = {
            let _p = stats::timer(Timer::ReaderPlan);
            plan(&self.space, &self.array.grid, &self.array.fragments, c0, c1)
        };
        // The sinks may be uninitialized: the plan must write every cell (it does; checked).
        if !plan_covers(&copies, &fills, c1 - c0) {
            zero_fixed(sinks);
        }
        let Some(bound) = &self.condition else {
            execute(&self.array, copies, &fills, sinks)?;
            return overlay(&self.array, &self.space, c0, c1, sinks);
        };
        let keep = dense_selection(&self.array, &self.space, (c0, c1), (&copies, &fills), bound)?;
        execute(&self.array, selected_copies(copies, &keep), &fills, sinks)?;
        overlay(&self.array, &self.space, c0, c1, sinks)?;
        mask_failing(&self.array.schema().attrs, &keep, sinks);
        Ok(())
    }

    fn read_interval(&self, c0: u64, c1: u64) -> Result<ReadResult> {
        let schema = self.array.schema();
        // Variable-length cells also hold a 24-byte reference until the values are assembled.
        let var_refs = 24 * self.attrs.iter().filter(|&&i| schema.attrs[i].is_var()).count() as u64;
        // A condition's attributes are read into buffers of their own first.
        let cond: u64 = self.condition.as_ref().map_or(0, |b| {
            b.attr_indices()
                .iter()
                .map(|&i| u64::from(schema.attrs[i].nullable) + schema.attrs[i].cell_size() as u64 + 24)
                .sum()
        });
        let per_cell = self.estimate_cell_bytes().saturating_add(var_refs).saturating_add(cond);
        let n = check_result_size(self.array.ctx.config(), c1 - c0, per_cell)?;
        let (mut fixed, mut valid) = sink_buffers(schema, &self.attrs, n);
        let mut sinks = sinks(schema, &self.attrs, n, &mut fixed, &mut valid);
        self.fill(c0, c1, &mut sinks)?;
        let vars: Vec<Option<(Vec<u64>, Vec<u8>)>> = sinks
            .into_iter()
            .map(|s| match s.data {
                DataSink::Var { refs, blobs } => Some(assemble_var(&refs, &blobs, &schema.attrs[s.attr].fill_bytes())),
                DataSink::Fixed(_) => None,
            })
            .collect();
        // SAFETY: `fill` returned without error, so every cell of the sinks was written (it
        // zeroes them first unless the plan covers every cell).
        #[allow(unsafe_code)]
        unsafe {
            finish_fixed(schema, &self.attrs, n, &mut fixed);
        }
        let attrs = self
            .attrs
            .iter()
            .zip(fixed.into_iter().zip(valid))
            .zip(vars)
            .map(|((&i, (f, v)), var)| {
                let a = &schema.attrs[i];
                let (offsets, data) = match var {
                    Some((o, d)) => (Some(o), d),
                    None => (None, f),
                };
                AttrData { name: a.name.clone(), data, offsets, validity: a.nullable.then_some(v) }
            })
            .collect();
        Ok(ReadResult { start: c0, cells: c1 - c0, attrs })
    }
}

/// Refuses, before anything is allocated, a read of `cells` cells of about `bytes_per_cell`
/// bytes into new buffers that would take more than `sm.read.max_result_bytes` (by default the
/// memory the system reports available); otherwise returns the cell count as a `usize`.
///
/// # Errors
/// `QueryError::ResultTooLarge`, saying the bytes needed and how to read in batches.
pub(crate) fn check_result_size(config: &Config, cells: u64, bytes_per_cell: u64) -> Result<usize> {
    let bytes_per_cell = bytes_per_cell.max(1);
    let needed = u128::from(cells) * u128::from(bytes_per_cell);
    match (memory_limit(config.max_result_bytes(), needed), usize::try_from(cells)) {
        (None, Ok(n)) => Ok(n),
        (limit, _) => {
            let (limit, limit_from) = limit.unwrap_or((isize::MAX as u64, "the address space"));
            Err(QueryError::ResultTooLarge { cells, bytes_per_cell, limit, limit_from }.into())
        }
    }
}

/// Cells per dimension of a result (each dimension's ranges concatenated), refusing results
/// whose cell count does not fit in a `u64` (positions in a result are `u64`).
fn result_shape(schema: &ArraySchema, ranges: &[Vec<[u64; 2]>]) -> Result<Vec<u64>> {
    let too_many = || {
        QueryError::BadSubarray(
            "the subarray holds 2^64 cells or more, more than a read can count: read it in parts".into(),
        )
    };
    let mut shape = Vec::with_capacity(ranges.len());
    let mut total = 1u64;
    for (rs, dim) in ranges.iter().zip(&schema.dims) {
        // Each range lies in the domain, so its length (at most 2^64 - 1) fits.
        let len = rs.iter().try_fold(0u64, |acc, [a, b]| acc.checked_add(b - a + 1)).ok_or_else(|| {
            QueryError::BadSubarray(format!(
                "dimension {}: the ranges hold 2^64 cells or more together, more than a read can count",
                dim.name
            ))
        })?;
        total = total.checked_mul(len).ok_or_else(too_many)?;
        shape.push(len);
    }
    Ok(shape)
}

/// Builds offsets and data of variable-length result cells from their references, copying runs
/// of cells that are adjacent in the same tile at once.
pub(super) fn assemble_var(refs: &[(u32, u64, u64)], blobs: &[Bytes], fill: &[u8]) -> (Vec<u64>, Vec<u8>) {
    let total: u64 = refs.iter().map(|r| r.2).sum();
    let mut data = Vec::with_capacity(total as usize);
    let mut offsets = Vec::with_capacity(refs.len());
    let mut run: Option<(u32, u64, u64)> = None;
    let flush = |run: &mut Option<(u32, u64, u64)>, data: &mut Vec<u8>| {
        if let Some((b, s, e)) = run.take() {
            data.extend_from_slice(&blobs[b as usize][s as usize..e as usize]);
        }
    };
    for &(b, s, len) in refs {
        offsets.push(data.len() as u64 + run.map_or(0, |r| r.2 - r.1));
        if b == FILL_BLOB {
            flush(&mut run, &mut data);
            data.extend_from_slice(fill);
            continue;
        }
        match &mut run {
            Some((rb, _, re)) if *rb == b && *re == s => *re += len,
            _ => {
                flush(&mut run, &mut data);
                run = Some((b, s, s + len));
            }
        }
    }
    flush(&mut run, &mut data);
    (offsets, data)
}

/// Counts one read submit and its layout.
pub(crate) fn count_submit(layout: Layout) {
    let _t = stats::timer(Timer::SmQuerySubmit);
    stats::add(Counter::SmQuerySubmitRead, 1);
    stats::add(layout_counter(layout), 1);
}

/// The indices of the attributes called `attrs` (all attributes when empty), in that order.
pub(crate) fn resolve_attrs(schema: &ArraySchema, attrs: &[&str]) -> Result<Vec<usize>> {
    if attrs.is_empty() {
        return Ok((0..schema.attrs.len()).collect());
    }
    let mut idx = Vec::with_capacity(attrs.len());
    for name in attrs {
        let i = schema.attr_index(name).ok_or_else(|| QueryError::UnknownAttribute {
            name: (*name).to_string(),
            known: schema.attrs.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", "),
        })?;
        if idx.contains(&i) {
            return Err(QueryError::AttributeSet(format!("attribute {name} is requested twice")).into());
        }
        idx.push(i);
    }
    Ok(idx)
}

/// How many cells the caller's buffer `b` of attribute `a` can take.
pub(crate) fn buffer_cells(a: &Attribute, b: &AttrBuffer<'_>) -> Result<u64> {
    let bad = |d: &str| QueryError::BadBuffer { attr: a.name.clone(), detail: d.to_string() };
    let mut fit = if a.is_var() {
        b.offsets.as_ref().ok_or_else(|| bad("needs an offsets buffer"))?.len() as u64
    } else {
        b.data.len() as u64 / a.cell_size() as u64
    };
    if a.nullable {
        fit = fit.min(b.validity.as_ref().ok_or_else(|| bad("needs a validity buffer"))?.len() as u64);
    }
    Ok(fit)
}

/// Copies the longest prefix of `r` whose variable-length values fit into `bufs` (one per column
/// of `r`, in order), recording the data bytes used per buffer; returns the cells copied.
pub(crate) fn copy_prefix(r: &ReadResult, bufs: &mut [AttrBuffer<'_>], data_bytes: &mut [u64]) -> u64 {
    let fit = r.cells;
    let mut n = fit;
    for (d, b) in r.attrs.iter().zip(bufs.iter()) {
        if let Some(offs) = &d.offsets {
            let cap = b.data.len() as u64;
            let fits =
                (0..offs.len()).take_while(|&j| offs.get(j + 1).copied().unwrap_or(d.data.len() as u64) <= cap).count();
            n = n.min(fits as u64);
        }
    }
    for ((k, d), b) in r.attrs.iter().enumerate().zip(bufs.iter_mut()) {
        let used = match &d.offsets {
            Some(offs) => {
                if let Some(o) = b.offsets.as_deref_mut() {
                    o[..n as usize].copy_from_slice(&offs[..n as usize]);
                }
                offs.get(n as usize).copied().unwrap_or(d.data.len() as u64)
            }
            None => n * (d.data.len() as u64).checked_div(fit).unwrap_or(0),
        };
        b.data[..used as usize].copy_from_slice(&d.data[..used as usize]);
        if let (Some(v), Some(src)) = (b.validity.as_deref_mut(), &d.validity) {
            v[..n as usize].copy_from_slice(&src[..n as usize]);
        }
        data_bytes[k] = used;
    }
    n
}
