//! Snapshots: the committed state of an array at a timestamp — its schema, the metadata of
//! every fragment it sees in fragment order (as the commit log resolves it), their folders, and
//! the update index built from them on first use. Reads, writes and consolidation take a
//! snapshot; `Array` is a thin facade over one. Loading a snapshot reads the schema, the commit
//! log and every fragment's metadata once; nothing in it changes afterwards.
//!
//! Also here, because every reader of a snapshot needs them: fetching its fragments' tiles
//! (`tiles`), the tiles a sequence of reads hands on (`carried`) and the update index of its
//! small fragments (`update_index`).

mod carried;
pub(crate) mod fragment_meta;
mod tiles;
mod update_index;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;

pub(crate) use carried::CarriedTiles;
pub(crate) use tiles::{
    block_sums, cache_key, count_fetched, fetch_tiles, fetch_tiles_into, file_path, storage_err, tile_cells, TileKey,
    Tiles,
};
pub(crate) use update_index::UpdateIndex;

use crate::commit::{lock_shared, read_log, resolve, Placed, Position, Scope, COMMITS_DIR, LOCK_FILE};
use crate::context::Context;
use crate::error::{ArrayError, Error, Result};
use crate::fragment::{FileSpec, FragmentMetadata, FragmentName, FRAGMENTS_DIR, METADATA_FILE};
use crate::geometry::TileGrid;
use crate::schema::{ArraySchema, SCHEMA_DIR};
use crate::stats::{self, Counter};
use crate::storage::{join_requests, Bytes, LockGuard, StorageError};

/// The committed state of an array at a timestamp. Cloning is cheap (shared parts).
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) ctx: Context,
    pub(crate) uri: PathBuf,
    pub(crate) schema: Arc<ArraySchema>,
    pub(crate) grid: Arc<TileGrid>,
    /// The fragments seen, oldest first in fragment order.
    pub(crate) fragments: Arc<Vec<FragmentMetadata>>,
    /// The fragments' positions in fragment order (as the commit log gives them), one per
    /// fragment: consolidation records them.
    pub(crate) positions: Arc<Vec<Position>>,
    /// The fragments' folders (`uri/__fragments/name`) and names, built once: reads use them for
    /// every tile.
    fragment_dirs: Arc<Vec<(PathBuf, Arc<str>)>>,
    /// The index of the small fragments' cells, built by the first read that needs it.
    update_index: Arc<OnceLock<Option<Arc<UpdateIndex>>>>,
    /// Sparse reads that asked whether to use the update index before it was built: the first
    /// `sm.read.update_index_after_reads` read without it.
    index_asks: Arc<AtomicU64>,
    /// Whether tiles read through this snapshot go into the context's tile cache.
    pub(crate) fills_tile_cache: bool,
    /// Tiles handed from one read of this snapshot to the next (a consolidation's bands).
    pub(crate) carried: Option<Arc<CarriedTiles>>,
    /// Shared lock on `__lock`, held while the snapshot (or a clone, or a query reading it)
    /// lives, so vacuum never deletes a file it reads.
    _lock: Option<Arc<LockGuard>>,
}

impl Snapshot {
    /// The state of the array at `uri` (a resolved location) seeing the fragments written
    /// between `start` and `end` (`start <= t0`, `t1 <= end`), holding the array's lock shared
    /// from before the commit log is read; or no fragment and no lock when `fragments` is false
    /// (writers: their commits are ordered after everything committed, and each writer holds
    /// the lock itself until it commits).
    ///
    /// On object stores the schema, the commit log and the list of consolidated metadata files
    /// are read at the same time: each is a request whose round trip would otherwise add up.
    pub(crate) fn load(ctx: &Context, uri: PathBuf, start: u64, end: u64, fragments: bool) -> Result<Self> {
        // The lock is waited for on this thread: a pool thread waiting at vacuum's gate could
        // leave vacuum no thread to finish with.
        let lock = shared_lock(ctx, &uri, fragments)?;
        let (schema, committed) = join_requests(
            ctx.storage().as_ref(),
            &uri,
            || load_schema(ctx, &uri),
            || committed_state(ctx, &uri, start, end, fragments),
        );
        // A folder that is not an array fails both: the schema's error says why.
        let schema = Arc::new(schema?);
        let Committed { placed, listing, mut embedded } = committed?;
        let grid = Arc::new(TileGrid::new(&schema));
        let positions = placed.iter().map(|p| p.position.clone()).collect();
        // Metadata copies in commit records come first, then consolidated files, then the
        // fragments' own files.
        let wanted: Vec<String> =
            placed.iter().filter(|p| !embedded.contains_key(&p.name)).map(|p| p.name.to_string()).collect();
        let copies =
            if wanted.is_empty() { None } else { Some(fragment_meta::read_listed(ctx, &uri, listing, Some(&wanted))?) };
        let sources: Vec<(FragmentName, Option<(PathBuf, Bytes)>)> =
            placed.into_iter().map(|p| (p.name.clone(), embedded.remove(&p.name))).collect();
        let metadata = ctx.install_for(&uri, || {
            sources
                .into_par_iter()
                .map(|(name, copy)| match copy {
                    // The error names the record and the fragment.
                    Some((record, bytes)) => decode_checked(&bytes, &record.join(name.to_string()), name, &schema),
                    None => load_fragment(ctx, &uri, name, &schema, copies.as_ref()),
                })
                .collect::<Result<Vec<_>>>()
        })?;
        let fragment_dirs = fragment_dirs(&uri, &metadata);
        Ok(Self {
            ctx: ctx.clone(),
            uri,
            schema,
            grid,
            fragments: Arc::new(metadata),
            positions: Arc::new(positions),
            fragment_dirs,
            update_index: Arc::default(),
            index_asks: Arc::default(),
            fills_tile_cache: true,
            carried: None,
            _lock: lock,
        })
    }

    /// The schema.
    pub(crate) fn schema(&self) -> &ArraySchema {
        &self.schema
    }

    /// This snapshot seeing only the fragments `keep` (indices into its fragments, in order):
    /// what consolidation reads.
    pub(crate) fn with_fragments(&self, keep: &[usize]) -> Snapshot {
        let mut s = self.clone();
        s.fragments = Arc::new(keep.iter().map(|&i| self.fragments[i].clone()).collect());
        s.positions = Arc::new(keep.iter().map(|&i| self.positions[i].clone()).collect());
        s.fragment_dirs = Arc::new(keep.iter().map(|&i| self.fragment_dirs[i].clone()).collect());
        // The update index numbers fragments: the view builds its own.
        s.update_index = Arc::default();
        s.index_asks = Arc::default();
        s
    }

    /// This snapshot without an update index: for a few large reads (a dense consolidation),
    /// which would spend more on building the index than it saves them.
    pub(crate) fn without_update_index(mut self) -> Snapshot {
        self.update_index = Arc::new(OnceLock::from(None));
        self
    }

    /// This snapshot with reads that leave the tile cache as it is (they still use the tiles it
    /// holds): for reads of every tile once (consolidation), which would push the tiles other
    /// reads use out of the cache for tiles about to be replaced, and keep those alive (in
    /// mmap mode, their deleted files' space) until evicted.
    pub(crate) fn without_tile_caching(mut self) -> Snapshot {
        self.fills_tile_cache = false;
        self
    }

    /// This snapshot with reads that take tiles from `carried` and offer it the tiles they
    /// fetch (see [`CarriedTiles`]).
    pub(crate) fn with_carried_tiles(mut self, carried: Arc<CarriedTiles>) -> Snapshot {
        self.carried = Some(carried);
        self
    }

    /// The update index of this snapshot's small fragments, built on first use (`None` when too
    /// few fragments qualify or the snapshot was made without one).
    pub(crate) fn update_index(&self) -> Result<Option<Arc<UpdateIndex>>> {
        if let Some(ix) = self.update_index.get() {
            return Ok(ix.clone());
        }
        let built = UpdateIndex::build(self, &UpdateIndex::fragments(self))?.map(Arc::new);
        // Two reads may build it at once: the first stored wins, both results are equal.
        Ok(self.update_index.get_or_init(|| built).clone())
    }

    /// Per fragment, whether a sparse read takes its cells from the update index, known before
    /// the index is built (the read leaves those fragments out and builds the index meanwhile).
    /// None while the index is not built and fewer than `sm.read.update_index_after_reads`
    /// reads have asked: those read the small fragments' tiles themselves.
    pub(crate) fn update_index_covers(&self) -> Vec<bool> {
        let mut covers = vec![false; self.fragments.len()];
        match self.update_index.get() {
            Some(ix) => {
                for (fi, c) in covers.iter_mut().enumerate() {
                    *c = ix.as_ref().is_some_and(|ix| ix.covers(fi));
                }
            }
            None if self.index_asks.fetch_add(1, Ordering::Relaxed) < self.ctx.config().update_index_after_reads() => {}
            None => {
                for fi in UpdateIndex::fragments(self) {
                    covers[fi] = true;
                }
            }
        }
        covers
    }

    /// Fragment `frag` (an index into the fragments) and its position in fragment order.
    pub(crate) fn placed(&self, frag: usize) -> Placed {
        Placed { name: self.fragments[frag].name.clone(), position: self.positions[frag].clone() }
    }

    /// The folder of fragment `frag`.
    pub(crate) fn fragment_dir(&self, frag: usize) -> &Path {
        &self.fragment_dirs[frag].0
    }

    /// The name of fragment `frag` as shared text (tile-cache keys).
    pub(crate) fn fragment_key(&self, frag: usize) -> Arc<str> {
        Arc::clone(&self.fragment_dirs[frag].1)
    }
}

/// A shared lock on the array's lock file, if it has one (arrays created by this version do)
/// and `want`: readers hold it while open and writers until they commit, so vacuum (which takes
/// it exclusively) never deletes what they use.
pub(crate) fn shared_lock(ctx: &Context, uri: &Path, want: bool) -> Result<Option<Arc<LockGuard>>> {
    let path = uri.join(LOCK_FILE);
    // Storage without locks (object stores) protects readers by vacuum's grace period instead.
    if !want || ctx.storage().lock_free_grace(uri).is_some() || !ctx.storage().is_file(&path) {
        return Ok(None);
    }
    let timeout = std::time::Duration::from_millis(ctx.config().vacuum_lock_timeout_ms());
    Ok(Some(Arc::new(lock_shared(ctx.storage().as_ref(), uri, timeout)?)))
}

/// What the commit log and the folder of consolidated metadata files say about an array.
#[derive(Default)]
struct Committed {
    /// The visible fragments, oldest first in fragment order.
    placed: Vec<Placed>,
    /// The names of the consolidated metadata files.
    listing: Vec<String>,
    /// Copies of fragment metadata in the commit records read: fragment -> record path, copy.
    embedded: HashMap<FragmentName, (PathBuf, Bytes)>,
}

/// The visible fragments (none unless `fragments`) and the names of the consolidated metadata
/// files, read at the same time on object stores.
fn committed_state(ctx: &Context, uri: &Path, start: u64, end: u64, fragments: bool) -> Result<Committed> {
    if !fragments {
        return Ok(Committed::default());
    }
    let (visible, listing) =
        join_requests(ctx.storage().as_ref(), uri, || visible(ctx, uri, start, end), || fragment_meta::list(ctx, uri));
    let (placed, embedded) = visible?;
    Ok(Committed { placed, listing: listing?, embedded })
}

/// The fragments visible as of `end` that were written since `start` (`start <= t0`,
/// `t1 <= end`), oldest first in fragment order, as the commit log says; and the copies of
/// fragment metadata the records read carry.
type Visible = (Vec<Placed>, HashMap<FragmentName, (PathBuf, Bytes)>);

fn visible(ctx: &Context, uri: &Path, start: u64, end: u64) -> Result<Visible> {
    let storage = ctx.storage().as_ref();
    let interval = ctx.config().checkpoint_interval();
    let log = ctx.install_for(uri, || read_log(storage, uri, Scope::Latest { interval }))?;
    let mut placed = resolve(&log, &uri.join(COMMITS_DIR), end)?.live;
    placed.retain(|p| p.name.t0 >= start);
    Ok((placed, log.embedded))
}

/// The newest schema file of the array at `uri`.
fn load_schema(ctx: &Context, uri: &Path) -> Result<ArraySchema> {
    let storage = ctx.storage();
    let dir = uri.join(SCHEMA_DIR);
    // The listing comes first and the folder is looked at only when it fails: an open that
    // succeeds costs no request to ask whether the array's folder exists (on object stores a
    // HEAD of its marker).
    let names = match storage.list_dir(&dir) {
        Ok(n) => n,
        Err(e) => {
            let path = uri.to_path_buf();
            return Err(if storage.is_file(uri) {
                ArrayError::NotAnArray { path }.into()
            } else if !storage.is_dir(uri) {
                ArrayError::NotFound { path }.into()
            } else if matches!(e, StorageError::NotFound { .. }) {
                ArrayError::NotAnArray { path }.into()
            } else {
                e.into()
            });
        }
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

/// The metadata of committed fragment `name` (its copy in the consolidated file `copies` when
/// that has one, else its own file), cross-checked against the schema so later stages can index
/// it without fear.
fn load_fragment(
    ctx: &Context,
    uri: &Path,
    name: FragmentName,
    schema: &ArraySchema,
    copies: Option<&fragment_meta::Copies>,
) -> Result<FragmentMetadata> {
    let text = name.to_string();
    if let Some((file, copy)) = copies.and_then(|c| c.get(&text)) {
        // The error names the consolidated file and the fragment.
        return decode_checked(copy, &file.join(&text), name, schema);
    }
    let path = uri.join(FRAGMENTS_DIR).join(text).join(METADATA_FILE);
    let bytes = match ctx.storage().read_all(&path) {
        Ok(b) => b,
        Err(StorageError::NotFound { .. }) => {
            return Err(Error::corrupt(&path, "fragment is committed but its metadata is missing"))
        }
        Err(e) => return Err(e.into()),
    };
    stats::add(Counter::ReaderNumMetadataBytesRead, bytes.len() as u64);
    decode_checked(&bytes, &path, name, schema)
}

/// Fragment `name`'s metadata decoded from `bytes` (its file, or a copy of it at `path`) and
/// cross-checked against the schema; errors name `path`.
fn decode_checked(bytes: &[u8], path: &Path, name: FragmentName, schema: &ArraySchema) -> Result<FragmentMetadata> {
    let meta = FragmentMetadata::decode(bytes, name, path)?;
    check_against_schema(&meta, schema).map_err(|d| Error::corrupt(path, d))?;
    Ok(meta)
}

/// Whether fragment metadata fits the schema: dimensions, domain, tile index lists, files.
fn check_against_schema(meta: &FragmentMetadata, schema: &ArraySchema) -> std::result::Result<(), &'static str> {
    if meta.domain.len() != schema.ndim() {
        return Err("non-empty domain has the wrong number of dimensions");
    }
    let (specs, tiles) = match &meta.sparse {
        None => {
            if schema.is_sparse() {
                return Err("a dense fragment in a sparse array");
            }
            if meta.domain.iter().zip(&schema.dims).any(|(r, d)| r[1] >= d.domain_size()) {
                return Err("non-empty domain does not fit the array's domain");
            }
            let grid = TileGrid::new(schema);
            let tiles = grid.tile_range(&meta.domain).iter().map(|[a, b]| b - a + 1).product::<u64>();
            (FileSpec::for_schema(schema), tiles)
        }
        Some(sp) => {
            let k = sp.tile_cells.len();
            if sp.mbrs.len() != k || sp.first.len() != k || sp.last.len() != k {
                return Err("sparse tile index lists differ in length");
            }
            if sp.tile_cells.iter().sum::<u64>() != meta.cell_count || sp.tile_cells.contains(&0) {
                return Err("tile cell counts do not add up to the cell count");
            }
            let nd = schema.ndim();
            if sp.mbrs.iter().any(|m| m.len() != nd) || sp.first.iter().chain(&sp.last).any(|p| p.len() != nd) {
                return Err("an MBR or bounding coordinate has the wrong number of dimensions");
            }
            let specs = if meta.is_delete() { FileSpec::for_deletes(schema) } else { FileSpec::for_sparse(schema) };
            (specs, k as u64)
        }
    };
    if meta.files.len() != specs.len()
        || specs.iter().zip(&meta.files).any(|(s, f)| s.name != f.0 || f.1.len() as u64 != tiles)
    {
        return Err("file list or tile count does not match the schema");
    }
    Ok(())
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
