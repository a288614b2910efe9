//! Arrays: creating one on storage, opening it for reading (schema plus the metadata of every
//! committed fragment, loaded once and shared by all queries) or for writing, and the entry
//! points of queries.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

use crate::commit::{read_log, resolve, Placed, Position, COMMITS_DIR, GATE_FILE, LOCK_FILE};
use crate::context::Context;
use crate::error::{ArrayError, Error, QueryError, Result};
use crate::footer::seal;
use crate::fragment::{now_ms, FragmentMetadata, FragmentName, FRAGMENTS_DIR, METADATA_FILE};
use crate::geometry::{bounding_box, DimRange};
use crate::geometry::{Subarray, TileGrid};
use crate::read::{Layout, ReadQuery, ReadResult, SparseReadQuery};
use crate::schema::ArraySchema;
use crate::schema::SCHEMA_MAGIC;
use crate::stats::{self, Counter, Timer};
use crate::storage::{LockGuard, StorageError};
use crate::write::{AttrInput, CoordInput, DenseWriter, SparseWriter};

/// The most rectangles one `delete_ranges` call may delete (the cross product of its ranges).
pub const MAX_DELETE_RECTS: u64 = 1 << 20;

/// Folder holding the schema files.
pub const SCHEMA_DIR: &str = "__schema";
/// Folder reserved for array metadata (key-value).
pub const META_DIR: &str = "__meta";

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

/// An open array.
#[derive(Debug, Clone)]
pub struct Array {
    pub(crate) ctx: Context,
    pub(crate) uri: PathBuf,
    pub(crate) mode: Mode,
    pub(crate) schema: Arc<ArraySchema>,
    pub(crate) grid: Arc<TileGrid>,
    pub(crate) fragments: Arc<Vec<FragmentMetadata>>,
    /// The fragments' positions in fragment order (as the commit log gives them), one per
    /// fragment: consolidation records them.
    pub(crate) positions: Arc<Vec<Position>>,
    /// The fragments' folders (`uri/__fragments/name`) and names, built once per open: reads
    /// use them for every tile.
    pub(crate) fragment_dirs: Arc<Vec<(PathBuf, Arc<str>)>>,
    /// The index of the small fragments' cells, built by the first read that needs it
    /// (`read/update_index.rs`).
    pub(crate) update_index: Arc<OnceLock<Option<Arc<crate::read::UpdateIndex>>>>,
    /// Shared lock on `__lock` held while this array (or a clone) is open for reading.
    pub(crate) _lock: Option<Arc<LockGuard>>,
    /// Write mode opened with a timestamp ([`Array::open_at`]): the timestamp every fragment
    /// this array writes is named with (`t0 = t1`), instead of a fresh one.
    pub(crate) write_timestamp: Option<u64>,
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
        if storage.is_file(uri) {
            return Err(ArrayError::AlreadyExists { path: uri.to_path_buf() }.into());
        }
        if storage.is_dir(uri) && !storage.list_dir(uri)?.is_empty() {
            return Err(ArrayError::AlreadyExists { path: uri.to_path_buf() }.into());
        }
        for dir in [FRAGMENTS_DIR, COMMITS_DIR, META_DIR, SCHEMA_DIR] {
            storage.create_dir_all(&uri.join(dir))?;
        }
        storage.write_atomic(&uri.join(LOCK_FILE), b"")?;
        storage.write_atomic(&uri.join(GATE_FILE), b"")?;
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
        let storage = ctx.storage().clone();
        if !storage.is_dir(&uri) {
            if storage.is_file(&uri) {
                return Err(ArrayError::NotAnArray { path: uri }.into());
            }
            return Err(ArrayError::NotFound { path: uri }.into());
        }
        let schema = Arc::new(load_schema(ctx, &uri)?);
        // Readers hold the lock shared so vacuum never deletes what they read.
        let lock = Self::shared_lock(ctx, &uri, mode == Mode::Read)?;
        let grid = Arc::new(TileGrid::new(&schema));
        // Writers need no fragments: their commits are ordered after everything committed.
        let placed = if mode == Mode::Read { visible(ctx, &uri, start, end)? } else { Vec::new() };
        let positions = placed.iter().map(|p| p.position.clone()).collect();
        let fragments = ctx.install(|| {
            placed.into_par_iter().map(|p| load_fragment(ctx, &uri, p.name, &schema)).collect::<Result<Vec<_>>>()
        })?;
        let fragment_dirs = fragment_dirs(&uri, &fragments);
        Ok(Self {
            ctx: ctx.clone(),
            uri,
            mode,
            schema,
            grid,
            fragments: Arc::new(fragments),
            positions: Arc::new(positions),
            fragment_dirs,
            update_index: Arc::default(),
            _lock: lock,
            write_timestamp: None,
        })
    }

    /// The array's location.
    pub fn uri(&self) -> &Path {
        &self.uri
    }

    /// The mode it was opened in.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The schema.
    pub fn schema(&self) -> &ArraySchema {
        &self.schema
    }

    /// The context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// The fragments this array sees, oldest first (empty in write mode).
    pub fn fragments(&self) -> &[FragmentMetadata] {
        &self.fragments
    }

    /// The bounding box of all written cells in domain coordinates of integer dimensions, or
    /// `None` if nothing was written (see [`Array::nonempty_domain_ranges`] for float dimensions).
    pub fn nonempty_domain(&self) -> Option<Vec<(i128, i128)>> {
        let acc = bounding_box(self.fragments.iter().filter(|f| !f.is_delete()).map(|f| &f.domain))?;
        Some(acc.iter().zip(&self.schema.dims).map(|([lo, hi], d)| (d.denormalize(*lo), d.denormalize(*hi))).collect())
    }

    /// The bounding box of all written cells, per dimension in the dimension's own numbers
    /// (floats for float dimensions), or `None` if nothing was written.
    pub fn nonempty_domain_ranges(&self) -> Option<Vec<DimRange>> {
        let acc = bounding_box(self.fragments.iter().filter(|f| !f.is_delete()).map(|f| &f.domain))?;
        Some(acc.iter().zip(&self.schema.dims).map(|([lo, hi], d)| DimRange::from_ordinals(d, *lo, *hi)).collect())
    }

    /// A shared lock on the array's lock file, if it has one (arrays created by this version do)
    /// and `want`.
    pub(crate) fn shared_lock(ctx: &Context, uri: &Path, want: bool) -> Result<Option<Arc<LockGuard>>> {
        let path = uri.join(LOCK_FILE);
        if !want || !ctx.storage().is_file(&path) {
            return Ok(None);
        }
        let timeout = std::time::Duration::from_millis(ctx.config().vacuum_lock_timeout_ms());
        Ok(Some(Arc::new(crate::commit::lock_shared(ctx.storage().as_ref(), uri, timeout)?)))
    }

    /// This array seeing only the fragments `keep` (indices into [`Array::fragments`], in
    /// order), in read mode: the snapshot consolidation reads.
    pub(crate) fn with_fragments(&self, keep: &[usize]) -> Array {
        let mut a = self.clone();
        a.mode = Mode::Read;
        a.fragments = Arc::new(keep.iter().map(|&i| self.fragments[i].clone()).collect());
        a.positions = Arc::new(keep.iter().map(|&i| self.positions[i].clone()).collect());
        a.fragment_dirs = Arc::new(keep.iter().map(|&i| self.fragment_dirs[i].clone()).collect());
        // The update index numbers fragments: the view builds its own.
        a.update_index = Arc::default();
        a
    }

    /// This array without an update index: for a few large reads (consolidation), which would
    /// spend more on building the index than it saves them.
    pub(crate) fn without_update_index(mut self) -> Array {
        self.update_index = Arc::new(OnceLock::from(None));
        self
    }

    /// Fragment `frag` (an index into [`Array::fragments`]) and its position in fragment order.
    pub(crate) fn placed(&self, frag: usize) -> Placed {
        Placed { name: self.fragments[frag].name.clone(), position: self.positions[frag].clone() }
    }

    /// The folder of fragment `frag` (an index into [`Array::fragments`]).
    pub(crate) fn fragment_dir(&self, frag: usize) -> &Path {
        &self.fragment_dirs[frag].0
    }

    /// The name of fragment `frag` as shared text (tile-cache keys).
    pub(crate) fn fragment_key(&self, frag: usize) -> Arc<str> {
        Arc::clone(&self.fragment_dirs[frag].1)
    }

    pub(crate) fn require(&self, mode: Mode, op: &'static str) -> Result<()> {
        if self.mode != mode {
            return Err(QueryError::WrongMode {
                uri: self.uri.display().to_string(),
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
        if self.schema.is_sparse() {
            return Err(QueryError::Layout("a sparse array takes sparse writes (sparse_writer)".into()).into());
        }
        DenseWriter::new(self, subarray, layout)
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
        SparseWriter::new(self, layout)
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
        if self.schema.is_sparse() {
            return Err(QueryError::Layout("read_points reads dense arrays; use sparse_query".into()).into());
        }
        let cols = self.ctx.install(|| crate::write::coord_ordinals(&self.schema, coords))?;
        let n = cols.first().map_or(0, Vec::len);
        let points: Vec<Vec<u64>> = (0..n).map(|i| cols.iter().map(|c| c[i]).collect()).collect();
        ReadQuery::points(self, points, attrs)?.read_all()
    }

    /// Deletes the cells at the given coordinates (one column per dimension): writes a delete
    /// fragment; reads no longer return those cells from older fragments (dense arrays give them
    /// the fill value and null), and consolidation drops them.
    ///
    /// # Errors
    /// Wrong mode, coordinates outside the domain or not finite, columns of different lengths.
    pub fn delete_cells(&self, coords: &[CoordInput<'_>]) -> Result<FragmentName> {
        self.require(Mode::Write, "delete")?;
        let mut w = SparseWriter::for_deletes(self, Vec::new())?;
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
        let per_dim = crate::geometry::ordinal_ranges(&self.schema, ranges)?;
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
        let w = SparseWriter::for_deletes(self, rects)?;
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
        if !self.schema.is_sparse() {
            return Err(QueryError::Layout("sparse_query reads sparse arrays; use read_query".into()).into());
        }
        SparseReadQuery::new(self, ranges, attrs, layout)
    }

    /// A read of `attrs` over `subarray` with results in `layout`; see [`ReadQuery`].
    ///
    /// # Errors
    /// Wrong mode, unknown attributes, a bad subarray.
    pub fn read_query(&self, subarray: &Subarray, attrs: &[&str], layout: Layout) -> Result<ReadQuery> {
        self.require(Mode::Read, "read")?;
        if self.schema.is_sparse() {
            return Err(QueryError::Layout("read_query reads dense arrays; use sparse_query".into()).into());
        }
        ReadQuery::new(self, subarray, attrs, layout)
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

/// The fragments visible as of `end` that were written since `start` (`start <= t0`,
/// `t1 <= end`), oldest first in fragment order, as the commit log says.
fn visible(ctx: &Context, uri: &Path, start: u64, end: u64) -> Result<Vec<Placed>> {
    let storage = ctx.storage().as_ref();
    let log = ctx.install(|| read_log(storage, uri))?;
    let mut placed = resolve(&log, &uri.join(COMMITS_DIR), end)?.live;
    placed.retain(|p| p.name.t0 >= start);
    Ok(placed)
}

fn load_schema(ctx: &Context, uri: &Path) -> Result<ArraySchema> {
    let storage = ctx.storage();
    let dir = uri.join(SCHEMA_DIR);
    let names = match storage.list_dir(&dir) {
        Ok(n) => n,
        Err(StorageError::NotFound { .. }) => return Err(ArrayError::NotAnArray { path: uri.to_path_buf() }.into()),
        Err(e) => return Err(e.into()),
    };
    // The newest schema: names are __<ms>_<uuid>; order by the number, then the uuid.
    let newest = names
        .iter()
        .filter_map(|n| {
            let rest = n.strip_prefix("__")?;
            let (t, id) = rest.split_once('_')?;
            Some((t.parse::<u64>().ok()?, id.to_string(), n))
        })
        .max();
    let Some((_, _, name)) = newest else {
        return Err(ArrayError::NotAnArray { path: uri.to_path_buf() }.into());
    };
    crate::schema::read_schema_file(storage.as_ref(), &dir.join(name), &ctx.config().limits())
}

fn load_fragment(ctx: &Context, uri: &Path, name: FragmentName, schema: &ArraySchema) -> Result<FragmentMetadata> {
    let path = uri.join(FRAGMENTS_DIR).join(name.to_string()).join(METADATA_FILE);
    let bytes = match ctx.storage().read_all(&path) {
        Ok(b) => b,
        Err(StorageError::NotFound { .. }) => {
            return Err(Error::corrupt(&path, "fragment is committed but its metadata is missing"))
        }
        Err(e) => return Err(e.into()),
    };
    stats::add(Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    let meta = FragmentMetadata::decode(&bytes, name, &path)?;
    // Cross-check against the schema so later stages can index without fear.
    let bad = |d: &str| Err(Error::corrupt(&path, d.to_string()));
    if meta.domain.len() != schema.ndim() {
        return bad("non-empty domain has the wrong number of dimensions");
    }
    let (specs, tiles) = match &meta.sparse {
        None => {
            if schema.is_sparse() {
                return bad("a dense fragment in a sparse array");
            }
            if meta.domain.iter().zip(&schema.dims).any(|(r, d)| r[1] >= d.domain_size()) {
                return bad("non-empty domain does not fit the array's domain");
            }
            let grid = TileGrid::new(schema);
            let tiles = grid.tile_range(&meta.domain).iter().map(|[a, b]| b - a + 1).product::<u64>();
            (crate::fragment::FileSpec::for_schema(schema), tiles)
        }
        Some(sp) => {
            let k = sp.tile_cells.len();
            if sp.mbrs.len() != k || sp.first.len() != k || sp.last.len() != k {
                return bad("sparse tile index lists differ in length");
            }
            if sp.tile_cells.iter().sum::<u64>() != meta.cell_count || sp.tile_cells.contains(&0) {
                return bad("tile cell counts do not add up to the cell count");
            }
            let nd = schema.ndim();
            if sp.mbrs.iter().any(|m| m.len() != nd) || sp.first.iter().chain(&sp.last).any(|p| p.len() != nd) {
                return bad("an MBR or bounding coordinate has the wrong number of dimensions");
            }
            let specs = if meta.is_delete() {
                crate::fragment::FileSpec::for_deletes(schema)
            } else {
                crate::fragment::FileSpec::for_sparse(schema)
            };
            (specs, k as u64)
        }
    };
    if meta.files.len() != specs.len()
        || specs.iter().zip(&meta.files).any(|(s, f)| s.name != f.0 || f.1.len() as u64 != tiles)
    {
        return bad("file list or tile count does not match the schema");
    }
    Ok(meta)
}

/// The folder and name of every fragment.
fn fragment_dirs(uri: &Path, fragments: &[FragmentMetadata]) -> Arc<Vec<(PathBuf, Arc<str>)>> {
    let base = uri.join(FRAGMENTS_DIR);
    Arc::new(
        fragments
            .iter()
            .map(|f| {
                let name = f.name.to_string();
                (base.join(&name), Arc::from(name))
            })
            .collect(),
    )
}
