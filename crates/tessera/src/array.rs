//! Arrays: the public facade. Creating one on storage, opening it (a snapshot of its committed
//! state for reading, loaded once and shared by all queries; its schema for writing), and the
//! entry points of reads, writes and deletes, which check the open mode and hand the snapshot
//! to `read` and `write`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::aggregate::{AggregateRequest, AggregateValue};
use crate::commit::{COMMITS_DIR, GATE_FILE, LOCK_FILE};
use crate::condition::Condition;
use crate::context::Context;
use crate::error::{ArrayError, QueryError, Result};
use crate::footer::seal;
use crate::fragment::{next_timestamp, now_ms, FragmentMetadata, FragmentName, FRAGMENTS_DIR};
use crate::geometry::{bounding_box, DimRange, Layout, Subarray, TileGrid};
use crate::input::{AttrInput, CoordInput};
use crate::meta::{read_meta, write_meta, MetaValue};
use crate::read::{ReadQuery, ReadResult, SparseReadQuery};
use crate::schema::{ArraySchema, SCHEMA_DIR, SCHEMA_MAGIC};
use crate::snapshot::Snapshot;
use crate::stats::{self, Counter, Timer};
use crate::storage::{join_requests, requests, StorageError, StorageJob};
use crate::write::{DenseWriter, SparseWriter};

/// The most rectangles one `delete_ranges` call may delete (the cross product of its ranges).
pub const MAX_DELETE_RECTS: u64 = 1 << 20;

pub use crate::paths::META_DIR;

/// How an array is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Queries read.
    Read,
    /// Queries write new fragments.
    Write,
}

impl Mode {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }
}

/// An open array: a facade over the snapshot it reads (or, open for writing, the schema its
/// writes follow), its open mode and the lock it holds.
#[derive(Debug, Clone)]
pub struct Array {
    pub(crate) snap: Snapshot,
    pub(crate) mode: Mode,
    /// Write mode opened with a timestamp ([`Array::open_at`]): the timestamp every fragment
    /// this array writes is named with (`t0 = t1`), instead of a fresh one.
    write_timestamp: Option<u64>,
    /// Read mode: the timestamp the array is opened at (metadata entries after it are not seen).
    end: u64,
}

/// The largest timestamp an array can be opened for writing at: fragments must stay orderable
/// after it (consolidation names its output `t1 + 1` and later steps), so the top half of the
/// `u64` range is refused.
pub const MAX_WRITE_TIMESTAMP: u64 = (1 << 63) - 1;

impl Array {
    /// Creates an empty array with `schema` at `uri`.
    ///
    /// # Errors
    /// An invalid schema, a location that is not local ([`Context::resolve_uri`]), an existing
    /// non-empty folder, or a storage failure. On error nothing that looks like an array is left
    /// behind.
    pub fn create(ctx: &Context, uri: impl AsRef<Path>, schema: &ArraySchema) -> Result<()> {
        schema.validate()?;
        let uri = &ctx.resolve_uri(uri.as_ref())?;
        // An array must open and take writes under the limits it is created with: refuse a
        // schema beyond them now (naming the key to raise), not at its first open or write.
        let bytes = seal(schema.to_json().into_bytes(), SCHEMA_MAGIC);
        let limits = ctx.config().limits();
        crate::schema::decode_schema_file(&bytes, &uri.join(SCHEMA_DIR), &limits)?;
        let tile_cells = if schema.is_sparse() { schema.capacity } else { TileGrid::new(schema).cells_per_tile() };
        crate::write::check_tile_sizes(schema, tile_cells, limits.tile_bytes)?;
        let storage = ctx.storage();
        // On object stores each step's calls are requests sent at the same time, so that their
        // round trips overlap. First: is there a file, or a folder with entries?
        let (is_file, listed) = join_requests(storage.as_ref(), uri, || storage.is_file(uri), || storage.list_dir(uri));
        let occupied = match listed {
            Ok(names) => !names.is_empty(),
            Err(StorageError::NotFound { .. }) => false,
            Err(_) if is_file => true,
            Err(e) => return Err(e.into()),
        };
        if is_file || occupied {
            return Err(ArrayError::AlreadyExists { path: uri.to_path_buf() }.into());
        }
        // The folders (the array's own too: on object stores its marker answers an open's
        // first question, is there a folder?, with one HEAD), then the lock files in them; on
        // object stores, where a file needs no folder, all at once.
        let dirs = [PathBuf::new(), FRAGMENTS_DIR.into(), COMMITS_DIR.into(), META_DIR.into(), SCHEMA_DIR.into()];
        let mut jobs: Vec<StorageJob<'_>> = dirs
            .into_iter()
            .map(|d| Box::new(move || storage.create_dir_all(&uri.join(d))) as StorageJob<'_>)
            .collect();
        if !storage.remote(uri) {
            requests(storage.as_ref(), uri, std::mem::take(&mut jobs))?;
        }
        for f in [LOCK_FILE, GATE_FILE] {
            jobs.push(Box::new(move || storage.write_atomic(&uri.join(f), b"")));
        }
        requests(storage.as_ref(), uri, jobs)?;
        let name = format!("__{}_{}", now_ms(), uuid::Uuid::new_v4().simple());
        stats::add(Counter::WriterNumMetadataBytesWritten, bytes.len() as u64);
        // The schema file is written last: a folder without it is not an array.
        storage.write_atomic(&uri.join(SCHEMA_DIR).join(name), &bytes)?;
        if let Some(parent) = uri.parent().filter(|p| !p.as_os_str().is_empty()) {
            storage.sync_dir(parent)?;
        }
        storage.sync_dir(uri)?;
        Ok(())
    }

    /// Opens the array at `uri`, seeing every committed fragment.
    ///
    /// # Errors
    /// A location that is not local ([`Context::resolve_uri`]), a missing path, a folder that is
    /// not an array, a corrupt schema or fragment metadata.
    pub fn open(ctx: &Context, uri: impl AsRef<Path>, mode: Mode) -> Result<Self> {
        Self::open_at(ctx, uri, mode, None)
    }

    /// Opens the array at `uri` as of `timestamp` (milliseconds since the epoch). Read mode: only
    /// fragments whose end timestamp is at most `timestamp` are seen. Write mode: every fragment
    /// written through this array (and its clones) is named with `timestamp` (`t0 = t1 =
    /// timestamp`) instead of a fresh one, so reads as of an earlier time do not see it. The
    /// timestamp chooses what time travel sees, not which fragment wins a cell: fragments are
    /// ordered by commit, so such a write wins over every fragment committed before it.
    ///
    /// # Errors
    /// As [`Array::open`]; in write mode, a timestamp above [`MAX_WRITE_TIMESTAMP`]
    /// (`QueryError::Timestamp`).
    pub fn open_at(ctx: &Context, uri: impl AsRef<Path>, mode: Mode, timestamp: Option<u64>) -> Result<Self> {
        let uri = &ctx.resolve_uri(uri.as_ref())?;
        if mode == Mode::Write {
            if let Some(t) = timestamp.filter(|&t| t > MAX_WRITE_TIMESTAMP) {
                return Err(QueryError::Timestamp {
                    uri: uri.display().to_string(),
                    timestamp: t,
                    detail: format!("a write timestamp is at most {MAX_WRITE_TIMESTAMP} (2^63 - 1 ms)"),
                }
                .into());
            }
            let mut a = Self::open_between(ctx, uri, mode, 0, u64::MAX)?;
            a.write_timestamp = timestamp;
            return Ok(a);
        }
        Self::open_between(ctx, uri, mode, 0, timestamp.unwrap_or(u64::MAX))
    }

    /// Opens the array at `uri` seeing only the fragments written between `start` and `end`
    /// (inclusive, milliseconds since the epoch): those with `start <= t0` and `t1 <= end`.
    ///
    /// # Errors
    /// As [`Array::open`].
    pub fn open_between(ctx: &Context, uri: impl AsRef<Path>, mode: Mode, start: u64, end: u64) -> Result<Self> {
        let uri = ctx.resolve_uri(uri.as_ref())?;
        let _t =
            stats::timer(if mode == Mode::Read { Timer::SmArrayOpenForReads } else { Timer::SmArrayOpenForWrites });
        // Readers' snapshots hold the lock shared, so vacuum never deletes what they read.
        // Writers need no fragments: their commits are ordered after everything committed.
        let snap = Snapshot::load(ctx, uri, start, end, mode == Mode::Read)?;
        Ok(Self { snap, mode, write_timestamp: None, end })
    }

    /// The array's location.
    pub fn uri(&self) -> &Path {
        &self.snap.uri
    }

    /// The mode it was opened in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The schema.
    pub fn schema(&self) -> &ArraySchema {
        &self.snap.schema
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.snap.ctx
    }

    /// The fragments this array sees, oldest first (empty in write mode).
    pub fn fragments(&self) -> &[FragmentMetadata] {
        &self.snap.fragments
    }

    /// The array's metadata as of the timestamp it was opened at: key-value pairs, each the
    /// value put last (by timestamp) and not deleted since.
    ///
    /// # Errors
    /// Wrong mode (read mode only), storage failures, corrupt metadata files.
    pub fn metadata(&self) -> Result<BTreeMap<String, MetaValue>> {
        self.require(Mode::Read, "read metadata")?;
        read_meta(&self.snap.ctx, &self.snap.uri, self.end)
    }

    /// Writes metadata: puts (`Some`) and deletes (`None`) of keys, as one file committed
    /// atomically at the array's write timestamp (or now).
    ///
    /// # Errors
    /// Wrong mode (write mode only), an empty key or one over
    /// [`MAX_META_KEY_BYTES`](crate::MAX_META_KEY_BYTES) bytes, a value that is not whole values
    /// of its type or not UTF-8 text, more than half of
    /// [`MAX_META_FILE_BYTES`](crate::MAX_META_FILE_BYTES) of values, storage failures. Nothing
    /// is written on error.
    pub fn write_metadata(&self, changes: &[(&str, Option<MetaValue>)]) -> Result<()> {
        self.require(Mode::Write, "write metadata")?;
        write_meta(&self.snap.ctx, &self.snap.uri, self.write_timestamp, changes)
    }

    /// The bounding box of all written cells in domain coordinates of integer dimensions, or
    /// `None` if nothing was written (see [`Array::nonempty_domain_ranges`] for float dimensions).
    pub fn nonempty_domain(&self) -> Option<Vec<(i128, i128)>> {
        let acc = bounding_box(self.snap.fragments.iter().filter(|f| !f.is_delete()).map(|f| &f.domain))?;
        Some(
            acc.iter()
                .zip(&self.snap.schema.dims)
                .map(|([lo, hi], d)| (d.denormalize(*lo), d.denormalize(*hi)))
                .collect(),
        )
    }

    /// The bounding box of all written cells, per dimension in the dimension's own numbers
    /// (floats for float dimensions), or `None` if nothing was written.
    pub fn nonempty_domain_ranges(&self) -> Option<Vec<DimRange>> {
        let acc = bounding_box(self.snap.fragments.iter().filter(|f| !f.is_delete()).map(|f| &f.domain))?;
        Some(acc.iter().zip(&self.snap.schema.dims).map(|([lo, hi], d)| DimRange::from_ordinals(d, *lo, *hi)).collect())
    }

    /// This array seeing only the fragments `keep` (indices into [`Array::fragments`], in
    /// order), in read mode.
    #[cfg(test)]
    pub(crate) fn with_fragments(&self, keep: &[usize]) -> Array {
        let mut a = self.clone();
        a.mode = Mode::Read;
        a.snap = self.snap.with_fragments(keep);
        a
    }

    /// The name of the next fragment this array writes: the timestamp it was opened at, or a
    /// fresh one.
    fn new_fragment_name(&self) -> FragmentName {
        FragmentName::new(self.write_timestamp.unwrap_or_else(|| next_timestamp(&self.snap.uri)))
    }

    pub(crate) fn require(&self, mode: Mode, op: &'static str) -> Result<()> {
        if self.mode != mode {
            return Err(QueryError::WrongMode {
                uri: self.snap.uri.display().to_string(),
                mode: self.mode.name(),
                op,
                needed: mode.name(),
            }
            .into());
        }
        Ok(())
    }

    /// Starts a dense write of `subarray` (one range per dimension) whose cells arrive in
    /// `layout`; see [`DenseWriter`].
    ///
    /// # Errors
    /// Wrong mode, or a subarray outside the domain.
    pub fn writer(&self, subarray: &Subarray, layout: Layout) -> Result<DenseWriter> {
        self.require(Mode::Write, "write")?;
        if self.snap.schema.is_sparse() {
            return Err(QueryError::Layout("a sparse array takes sparse writes (sparse_writer)".into()).into());
        }
        DenseWriter::named(&self.snap, subarray, layout, self.new_fragment_name())
    }

    /// Writes `subarray` in one submit and commits it as a new fragment.
    ///
    /// # Errors
    /// As [`DenseWriter::submit`] and [`DenseWriter::finish`]; nothing is committed on error.
    pub fn write(&self, subarray: &Subarray, layout: Layout, inputs: &[AttrInput<'_>]) -> Result<FragmentName> {
        let mut w = self.writer(subarray, layout)?;
        w.submit(inputs)?;
        Ok(w.finish()?.name)
    }

    /// Starts a sparse write whose cells arrive unordered (one submit) or in global order
    /// (several submits); see [`SparseWriter`]. On a dense array this writes random updates as a
    /// sparse fragment; reads lay its cells over the dense fragments it is newer than.
    ///
    /// # Errors
    /// Wrong mode, or a layout other than unordered or global.
    pub fn sparse_writer(&self, layout: Layout) -> Result<SparseWriter> {
        self.require(Mode::Write, "write")?;
        SparseWriter::named(&self.snap, layout, self.new_fragment_name())
    }

    /// Writes cells given in any order as one new sparse fragment.
    ///
    /// # Errors
    /// As [`SparseWriter::submit`] and [`SparseWriter::finish`]; nothing is committed on error.
    pub fn write_sparse(&self, coords: &[CoordInput<'_>], attrs: &[AttrInput<'_>]) -> Result<FragmentName> {
        let mut w = self.sparse_writer(Layout::Unordered)?;
        w.submit(coords, attrs)?;
        Ok(w.finish()?.name)
    }

    /// Reads the cells at the given coordinates (one column per dimension) of a dense array, in
    /// the order given: random element reads. Each tile holding some of the points is read once.
    ///
    /// # Errors
    /// Wrong mode, a sparse array, coordinates outside the domain, columns of different lengths,
    /// unknown attributes, storage failures, corrupt tiles.
    pub fn read_points(&self, coords: &[CoordInput<'_>], attrs: &[&str]) -> Result<ReadResult> {
        self.require(Mode::Read, "read")?;
        if self.snap.schema.is_sparse() {
            return Err(QueryError::Layout("read_points reads dense arrays; use sparse_query".into()).into());
        }
        let cols = self.snap.ctx.install(|| crate::write::coord_ordinals(&self.snap.schema, coords))?;
        ReadQuery::points(&self.snap, cols, attrs)?.read_all()
    }

    /// Deletes the cells at the given coordinates (one column per dimension): writes a delete
    /// fragment; reads no longer return those cells from older fragments (dense arrays give them
    /// the fill value and null), and consolidation drops them.
    ///
    /// # Errors
    /// Wrong mode, coordinates outside the domain or not finite, columns of different lengths.
    pub fn delete_cells(&self, coords: &[CoordInput<'_>]) -> Result<FragmentName> {
        self.require(Mode::Write, "delete")?;
        let mut w = SparseWriter::for_deletes(&self.snap, Vec::new(), self.new_fragment_name())?;
        w.submit(coords, &[])?;
        Ok(w.finish()?.name)
    }

    /// Deletes every cell in the cross product of `ranges` (per dimension its inclusive ranges;
    /// an empty list: the whole dimension).
    ///
    /// # Errors
    /// Wrong mode, bad ranges (reversed, outside the domain), ranges that select no cell, or
    /// more than [`MAX_DELETE_RECTS`] rectangles.
    pub fn delete_ranges(&self, ranges: &[Vec<DimRange>]) -> Result<FragmentName> {
        self.require(Mode::Write, "delete")?;
        let per_dim = crate::geometry::ordinal_ranges(&self.snap.schema, ranges)?;
        // The rectangles are the cross product of the dimensions' ranges: bound it before
        // building it (each rectangle is kept in the delete fragment's metadata).
        let count = per_dim.iter().try_fold(1u64, |n, rs| n.checked_mul(rs.len() as u64));
        if count.is_none_or(|n| n > MAX_DELETE_RECTS) {
            let sizes: Vec<String> = per_dim.iter().map(|rs| rs.len().to_string()).collect();
            return Err(QueryError::BadSubarray(format!(
                "the ranges ({} per dimension) make more than {MAX_DELETE_RECTS} rectangles to delete: \
                 delete in several calls, or with fewer, wider ranges",
                sizes.join(" x ")
            ))
            .into());
        }
        let mut rects: Vec<crate::geometry::Rect> = vec![Vec::new()];
        for rs in &per_dim {
            rects = rects.iter().flat_map(|r| rs.iter().map(move |x| [r.clone(), vec![*x]].concat())).collect();
        }
        if rects.is_empty() {
            return Err(QueryError::BadSubarray("the ranges select no cell".into()).into());
        }
        let w = SparseWriter::for_deletes(&self.snap, rects, self.new_fragment_name())?;
        Ok(w.finish()?.name)
    }

    /// A read of a sparse array: `ranges` holds per dimension its inclusive ranges (an empty
    /// list: the whole domain); results hold the dimension columns first, then `attrs` (all when
    /// empty), in `layout`.
    ///
    /// # Errors
    /// Wrong mode, a dense array, unknown attributes, bad ranges, storage failures, corrupt tiles.
    pub fn sparse_query(&self, ranges: &[Vec<DimRange>], attrs: &[&str], layout: Layout) -> Result<SparseReadQuery> {
        self.require(Mode::Read, "read")?;
        if !self.snap.schema.is_sparse() {
            return Err(QueryError::Layout("sparse_query reads sparse arrays; use read_query".into()).into());
        }
        SparseReadQuery::new(&self.snap, ranges, attrs, layout, None)
    }

    /// A sparse read returning only the cells whose merged value (the newest fragment's cell,
    /// after deletes) passes `condition`; otherwise as [`Array::sparse_query`]. The condition's
    /// attributes are read first; the others only for the cells that pass.
    ///
    /// # Errors
    /// As [`Array::sparse_query`], the condition's errors against the schema
    /// ([`Condition::bind`]), storage failures and corrupt tiles.
    pub fn sparse_query_where(
        &self,
        ranges: &[Vec<DimRange>],
        attrs: &[&str],
        layout: Layout,
        condition: &Condition,
    ) -> Result<SparseReadQuery> {
        self.require(Mode::Read, "read")?;
        if !self.snap.schema.is_sparse() {
            return Err(QueryError::Layout("sparse_query_where reads sparse arrays; use read_query".into()).into());
        }
        SparseReadQuery::new(&self.snap, ranges, attrs, layout, Some(condition))
    }

    /// A read of `attrs` over `subarray` with results in `layout`; see [`ReadQuery`].
    ///
    /// # Errors
    /// Wrong mode, unknown attributes, a bad subarray.
    pub fn read_query(&self, subarray: &Subarray, attrs: &[&str], layout: Layout) -> Result<ReadQuery> {
        self.require(Mode::Read, "read")?;
        if self.snap.schema.is_sparse() {
            return Err(QueryError::Layout("read_query reads dense arrays; use sparse_query".into()).into());
        }
        ReadQuery::new(&self.snap, subarray, attrs, layout)
    }

    /// Computes aggregates over the cells of `ranges` (per dimension, inclusive; an empty list
    /// is the whole dimension) that pass `condition`, in the engine: one value per request, in
    /// request order. The cells are the ones a read returns (the newest fragment's value, after
    /// updates and deletes; on dense arrays, never-written cells hold the fill value), read in
    /// batches within `sm.memory_budget` and aggregated in parallel on the compute pool.
    /// Several ranges of a dimension of a dense array are concatenated as in reads (a cell in
    /// two overlapping ranges counts twice); a sparse array's cells count once.
    /// Nulls, and NaN on float attributes, are left out of sums, minima, maxima and means;
    /// see [`crate::AggregateOp`] and [`AggregateValue`].
    ///
    /// # Errors
    /// Wrong mode, no request, unknown attributes, an operation the attribute's type cannot
    /// take (`QueryError::Aggregate`: the sum of text, ...), an integer sum beyond `i128`, the
    /// condition's errors ([`Condition::bind`]), bad ranges, storage failures, corrupt tiles.
    pub fn aggregate(
        &self,
        ranges: &[Vec<DimRange>],
        condition: Option<&Condition>,
        requests: &[AggregateRequest],
    ) -> Result<Vec<AggregateValue>> {
        self.require(Mode::Read, "aggregate")?;
        crate::aggregate::aggregate(&self.snap, ranges, condition, requests)
    }

    /// Reads `attrs` over `subarray` into new buffers.
    ///
    /// # Errors
    /// As [`Array::read_query`], plus storage failures and corrupt tiles.
    pub fn read(&self, subarray: &Subarray, attrs: &[&str], layout: Layout) -> Result<ReadResult> {
        let mut q = self.read_query(subarray, attrs, layout)?;
        q.read_all()
    }
}
