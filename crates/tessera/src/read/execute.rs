//! Executing a read plan: the tiles the copies need are fetched with adjacent byte ranges of a
//! file coalesced into one request, requests run in parallel, each tile's checksum is verified,
//! tiles are unfiltered in parallel (unfiltered tiles are used in place, with no copy), and the
//! copies move whole contiguous runs. Tiles are processed in batches bounded by
//! `sm.memory_budget`.

use std::path::PathBuf;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use super::plan::{CopyOp, FillOp};
use crate::array::Array;
use crate::cache::TileKey as CacheKey;
use crate::config::{check_limit, Limits};
use crate::error::{Error, Result};
use crate::fast_hash::FastMap;
use crate::fragment::{check_var_offsets, verify_tile, FileKind, FileSpec};
use crate::geometry::{contiguous_runs, copy_strided, fill_strided, for_each_cell_pair, Strided};
use crate::stats::{self, Counter, Timer};
use crate::storage::{Bytes, StorageError};

/// Marks a variable-length result cell that takes the fill value.
pub(crate) const FILL_BLOB: u32 = u32::MAX;

/// Where one attribute's result cells go.
pub(crate) enum DataSink<'a> {
    /// Fixed-size cells, written in place.
    Fixed(&'a mut [u8]),
    /// Variable-length cells: per result cell a (blob, start, len) reference into kept tiles.
    Var { refs: Vec<(u32, u64, u64)>, blobs: Vec<Bytes> },
}

/// One attribute's destination.
pub(crate) struct Sink<'a> {
    pub attr: usize,
    pub data: DataSink<'a>,
    pub validity: Option<&'a mut [u8]>,
}

/// (fragment index, tile index).
pub(crate) type TileKey = (usize, u64);

/// Runs `copies` and `fills` into `sinks`.
pub(crate) fn execute(array: &Array, copies: Vec<CopyOp>, fills: &[FillOp], sinks: &mut [Sink<'_>]) -> Result<()> {
    let schema = array.schema();
    for s in sinks.iter_mut() {
        let a = &schema.attrs[s.attr];
        let fill = a.fill_bytes();
        for op in fills {
            match &mut s.data {
                DataSink::Fixed(buf) => fill_strided(&fill, &op.shape, buf, &op.dst),
                DataSink::Var { refs, .. } => for_each_cell_pair(&op.shape, &op.dst, &op.dst, |_, d| {
                    refs[d as usize] = (FILL_BLOB, 0, fill.len() as u64);
                }),
            }
            if let Some(v) = s.validity.as_deref_mut() {
                fill_strided(&[0], &op.shape, v, &op.dst);
            }
        }
    }
    if copies.is_empty() {
        return Ok(());
    }
    let specs = FileSpec::for_schema(schema);
    let wanted: Vec<usize> = (0..specs.len()).filter(|&f| sinks.iter().any(|s| s.attr == specs[f].attr)).collect();
    let mut by_tile: FastMap<TileKey, Vec<CopyOp>> = FastMap::default();
    for op in copies {
        by_tile.entry((op.frag, op.tile)).or_default().push(op);
    }
    let mut keys: Vec<TileKey> = by_tile.keys().copied().collect();
    // Fragment by fragment, tiles in file order: neighbours coalesce.
    keys.sort_unstable();
    let budget = array.ctx.config().memory_budget();
    let mut batch: Vec<TileKey> = Vec::new();
    let mut batch_bytes = 0u64;
    for key in keys {
        let bytes = tile_read_bytes(array, &specs, &wanted, key, &by_tile[&key]);
        // The budget holds for every tile, the first of a batch included: a read that needs a
        // larger tile is refused rather than allowed past it.
        check_limit(
            "sm.memory_budget",
            || format!("tile {} of fragment {} (the read's attributes)", key.1, array.fragments[key.0].name),
            bytes,
            budget,
        )?;
        if !batch.is_empty() && batch_bytes.saturating_add(bytes) > budget {
            run_batch(array, &specs, &wanted, &std::mem::take(&mut batch), &by_tile, sinks)?;
            batch_bytes = 0;
        }
        batch.push(key);
        batch_bytes = batch_bytes.saturating_add(bytes);
    }
    run_batch(array, &specs, &wanted, &batch, &by_tile, sinks)
}

/// The bytes a batch holds for tile `key` (copies `ops`) of the files `wanted`: the unfiltered
/// size of each file's tile, or only the blocks read of a tile read in part.
fn tile_read_bytes(array: &Array, specs: &[FileSpec], wanted: &[usize], key: TileKey, ops: &[CopyOp]) -> u64 {
    let frag = &array.fragments[key.0];
    wanted
        .iter()
        .map(|&f| match partial_blocks(array, specs, key, f, ops) {
            Some(runs) => runs.iter().map(|(a, b)| (b - a) << frag.blocks.log2).sum(),
            None => frag.files[f].1[key.1 as usize].unfiltered_size,
        })
        .fold(0u64, u64::saturating_add)
}

struct Request {
    key: TileKey,
    file: usize,
    offset: u64,
    len: u64,
}

fn file_path(array: &Array, frag: usize, file: &str) -> PathBuf {
    array.fragment_dir(frag).join(file)
}

fn run_batch(
    array: &Array,
    specs: &[FileSpec],
    wanted: &[usize],
    batch: &[TileKey],
    by_tile: &FastMap<TileKey, Vec<CopyOp>>,
    sinks: &mut [Sink<'_>],
) -> Result<()> {
    let schema = array.schema();
    let cells_per_tile = array.grid.cells_per_tile();
    let file_of = |attr: usize, kind: FileKind| specs.iter().position(|s| s.attr == attr && s.kind == kind);
    // Direct reads: an unfiltered fixed-size data tile whose only copy is one contiguous run of
    // the whole tile goes from storage straight into the result (no intermediate buffer).
    let mut direct: Vec<(usize, TileKey, usize, usize)> = Vec::new();
    // Tiles the tile cache takes go through it instead.
    for (si, s) in sinks.iter().enumerate() {
        let (DataSink::Fixed(_), Some(fd)) = (&s.data, file_of(s.attr, FileKind::Data)) else { continue };
        let cs = schema.attrs[s.attr].cell_size();
        if !specs[fd].filters.is_empty() || array.ctx.tile_cache().admits(cells_per_tile * cs as u64) {
            continue;
        }
        for &key in batch {
            if let [op] = by_tile[&key].as_slice() {
                if let Some(runs) = contiguous_runs(cs, &op.shape, &op.src, &op.dst) {
                    if let [(0, dst, len)] = runs.as_slice() {
                        if *len as u64 == cells_per_tile * cs as u64 {
                            direct.push((si, key, fd, *dst));
                        }
                    }
                }
            }
        }
    }
    let is_direct = |key: TileKey, f: usize| direct.iter().any(|d| d.1 == key && d.2 == f);
    read_direct(array, specs, &direct, sinks)?;
    let mut requests = Vec::new();
    for &key in batch {
        for &f in wanted {
            if !is_direct(key, f) {
                requests.push((key, f));
            }
        }
    }
    // Unfiltered tiles with block checksums of which the copies need a few blocks: only those
    // blocks are read and verified.
    let (mut partial, mut whole) = (Vec::new(), Vec::new());
    for (key, f) in requests {
        match partial_blocks(array, specs, key, f, &by_tile[&key]) {
            Some(runs) => partial.push(((key, f), runs)),
            None => whole.push((key, f)),
        }
    }
    let tiles = fetch_tiles(array, specs, &whole)?;
    let parts = fetch_blocks(array, specs, &partial)?;
    for s in sinks.iter_mut() {
        let a = &schema.attrs[s.attr];
        let (fd, fo, fv) =
            (file_of(s.attr, FileKind::Data), file_of(s.attr, FileKind::Offsets), file_of(s.attr, FileKind::Validity));
        for &key in batch {
            let ops = &by_tile[&key];
            let get = |f: Option<usize>| f.and_then(|f| tiles.get(&(key, f)));
            let path = || file_path(array, key.0, &format!("a{}", s.attr));
            match &mut s.data {
                DataSink::Fixed(_) if fd.is_some_and(|f| is_direct(key, f)) => {}
                DataSink::Fixed(buf) if fd.is_some_and(|f| parts.contains_key(&(key, f))) => {
                    // Each copy lies inside one run of blocks read (the runs were made from the
                    // copies' byte spans): copy from that run, its first cell shifted.
                    let runs = fd.and_then(|f| parts.get(&(key, f))).map_or(&[][..], Vec::as_slice);
                    let cs = a.cell_size() as u64;
                    let _t = stats::timer(Timer::ReaderCopyFixedCells);
                    for op in ops {
                        let first = op.src.offset * cs;
                        let k = runs.partition_point(|r| r.0 <= first).saturating_sub(1);
                        let (start, bytes) =
                            runs.get(k).ok_or_else(|| Error::corrupt(path(), "data blocks missing"))?;
                        let src = Strided { offset: op.src.offset - start / cs, strides: op.src.strides.clone() };
                        copy_strided(cs as usize, &op.shape, bytes, &src, buf, &op.dst);
                        count_copied(false, op.shape.iter().product::<u64>() * cs);
                    }
                }
                DataSink::Fixed(buf) => {
                    let src = get(fd).ok_or_else(|| Error::corrupt(path(), "data tile missing"))?;
                    let _t = stats::timer(Timer::ReaderCopyFixedCells);
                    for op in ops {
                        copy_strided(a.cell_size(), &op.shape, src, &op.src, buf, &op.dst);
                        count_copied(false, op.shape.iter().product::<u64>() * a.cell_size() as u64);
                    }
                }
                DataSink::Var { refs, blobs } => {
                    let data = get(fd).ok_or_else(|| Error::corrupt(path(), "data tile missing"))?;
                    let offs = get(fo).ok_or_else(|| Error::corrupt(path(), "offsets tile missing"))?;
                    let blob = blobs.len() as u32;
                    blobs.push(data.clone());
                    let dlen = data.len() as u64;
                    let off_at = |c: u64| -> u64 {
                        let i = c as usize * 8;
                        let mut w = [0u8; 8];
                        w.copy_from_slice(&offs[i..i + 8]);
                        u64::from_le_bytes(w)
                    };
                    let mut bad = None;
                    let mut copied = 0u64;
                    let _t = stats::timer(Timer::ReaderCopyVarCells);
                    for op in ops {
                        for_each_cell_pair(&op.shape, &op.src, &op.dst, |sc, d| {
                            let start = off_at(sc);
                            let end = if sc + 1 < cells_per_tile { off_at(sc + 1) } else { dlen };
                            if start > end || end > dlen {
                                bad = Some(sc);
                                return;
                            }
                            refs[d as usize] = (blob, start, end - start);
                            copied += end - start + 8;
                        });
                    }
                    count_copied(true, copied);
                    if let Some(c) = bad {
                        return Err(Error::corrupt(
                            file_path(array, key.0, &specs[fo.unwrap_or(0)].name),
                            format!("tile {}: offset of cell {c} is out of order or past the data", key.1),
                        ));
                    }
                }
            }
            if let Some(v) = s.validity.as_deref_mut() {
                let src = get(fv).ok_or_else(|| Error::corrupt(path(), "validity tile missing"))?;
                for op in ops {
                    copy_strided(1, &op.shape, src, &op.src, v, &op.dst);
                    count_copied(false, op.shape.iter().product::<u64>());
                }
            }
        }
    }
    Ok(())
}

/// Cells in tile `tile` of fragment `frag`.
pub(crate) fn tile_cells(array: &Array, frag: usize, tile: u64) -> u64 {
    match &array.fragments[frag].sparse {
        Some(sp) => sp.tile_cells.get(tile as usize).copied().unwrap_or(0),
        None => array.grid.cells_per_tile(),
    }
}

/// Fetches tiles `(tile, file)`: byte ranges of a file closer than `vfs.coalesce_gap` are read as
/// one request, requests run in parallel, every tile's checksum and sizes are verified and tiles
/// are unfiltered in parallel (unfiltered tiles are used in place).
pub(crate) fn fetch_tiles(
    array: &Array,
    specs: &[FileSpec],
    requests: &[(TileKey, usize)],
) -> Result<FastMap<(TileKey, usize), Bytes>> {
    let schema = array.schema();
    let config = array.ctx.config();
    let storage = array.ctx.storage().clone();
    let cache = array.ctx.tile_cache();
    let _t = stats::timer(Timer::ReaderFetchTiles);
    // Tiles the cache holds cost no I/O and no unfiltering.
    let mut found: FastMap<(TileKey, usize), Bytes> = FastMap::default();
    let mut missing: Vec<(TileKey, usize)> = Vec::with_capacity(requests.len());
    let cached = if cache.is_enabled() {
        let keys: Vec<_> = requests.iter().map(|&(key, f)| cache_key(array, key, f)).collect();
        cache.get_many(&keys)
    } else {
        Vec::new()
    };
    let (mut touched, mut hits) = (0, 0);
    found.reserve(requests.len());
    for (i, &(key, f)) in requests.iter().enumerate() {
        let data = specs[f].kind == FileKind::Data;
        touched += u64::from(data);
        match cached.get(i).cloned().flatten() {
            Some(b) => {
                hits += u64::from(data);
                found.insert((key, f), b);
            }
            None => missing.push((key, f)),
        }
    }
    stats::add(Counter::ReaderNumAttrTilesTouched, touched);
    stats::add(Counter::ReaderAttrTileCacheHits, hits);
    if missing.is_empty() {
        // All cached: no hand-over to the I/O and compute pools (a thread wake-up each).
        return Ok(found);
    }
    // Requests grouped per file, in offset order; every tile's recorded sizes are checked
    // before a byte is read or allocated.
    let limits = config.limits();
    let mut per_file: FastMap<(usize, usize), Vec<Request>> = FastMap::default();
    for &(key, f) in &missing {
        check_entry(array, specs, key, f, &limits)?;
        let e = array.fragments[key.0].files[f].1[key.1 as usize];
        per_file.entry((key.0, f)).or_default().push(Request { key, file: f, offset: e.offset, len: e.stored_size });
    }
    // Coalesce neighbours into reads: (frag, file, start, end, requests).
    let (gap, max) = (config.coalesce_gap(), config.coalesce_max());
    let mut reads: Vec<(usize, usize, u64, u64, Vec<Request>)> = Vec::new();
    let mut groups: Vec<_> = per_file.into_iter().collect();
    groups.sort_unstable_by_key(|g| g.0);
    for ((frag, f), mut reqs) in groups {
        reqs.sort_unstable_by_key(|r| r.offset);
        for r in reqs {
            let end = r.offset + r.len;
            if let Some(last) = reads.last_mut() {
                if last.0 == frag
                    && last.1 == f
                    && r.offset >= last.3
                    && r.offset - last.3 <= gap
                    && end - last.2 <= max
                {
                    last.3 = end;
                    last.4.push(r);
                    continue;
                }
            }
            reads.push((frag, f, r.offset, end, vec![r]));
        }
    }
    // Reads on the I/O pool, checksums and unfiltering on the compute pool.
    let fetched: Vec<(usize, usize, u64, Bytes, Vec<Request>)> = array.ctx.install_io(|| {
        reads
            .into_par_iter()
            .map(|(frag, f, start, end, reqs)| {
                let path = file_path(array, frag, &specs[f].name);
                let bytes = storage.read_immutable(&path, start, end - start).map_err(|e| match e {
                    StorageError::OutOfBounds { .. } | StorageError::NotFound { .. } => {
                        Error::corrupt(&path, e.to_string())
                    }
                    e => e.into(),
                })?;
                Ok((frag, f, start, bytes, reqs))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    let tiles: Vec<((TileKey, usize), Bytes)> = array.ctx.install(|| {
        fetched
            .into_par_iter()
            .map(|(frag, f, start, bytes, reqs)| {
                let path = file_path(array, frag, &specs[f].name);
                reqs.into_par_iter()
                    .map(|r| {
                        let raw = bytes.slice((r.offset - start) as usize, r.len as usize);
                        let entry = array.fragments[frag].files[f].1[r.key.1 as usize];
                        let tile_err = |d: String| Error::corrupt(&path, format!("tile {}: {d}", r.key.1));
                        let blocks = &array.fragments[frag].blocks;
                        verify_tile(&raw, entry.checksum, blocks.of(f, r.key.1), blocks.log2).map_err(
                            |(stored, sum)| {
                                tile_err(format!("checksum mismatch (stored {stored:016x}, computed {sum:016x})"))
                            },
                        )?;
                        let spec = &specs[f];
                        let tile = if spec.filters.is_empty() {
                            if raw.len() as u64 != entry.unfiltered_size {
                                return Err(tile_err("stored size differs from unfiltered size".into()));
                            }
                            raw
                        } else {
                            let _u = stats::timer(Timer::ReaderUnfilterTiles);
                            let out = spec
                                .filters
                                .decode(raw.into_vec(), spec.elem_size, entry.unfiltered_size as usize)
                                .map_err(|e| tile_err(e.to_string()))?;
                            Bytes::from_vec(out)
                        };
                        if spec.kind == FileKind::Offsets {
                            // Checked once here (cached tiles were checked when fetched): every
                            // reader then slices data tiles by these offsets without checks.
                            let data_len = specs
                                .iter()
                                .position(|s| s.attr == spec.attr && s.kind == FileKind::Data)
                                .map(|d| array.fragments[frag].files[d].1[r.key.1 as usize].unfiltered_size);
                            let data_len = data_len.ok_or_else(|| tile_err("no data file".into()))?;
                            check_var_offsets(&tile, data_len).map_err(tile_err)?;
                        }
                        count_fetched(schema, spec, entry.stored_size, entry.unfiltered_size);
                        Ok(((r.key, r.file), tile))
                    })
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<Vec<_>>>>()
            .map(|v| v.into_iter().flatten().collect())
    })?;
    for ((key, f), b) in tiles {
        if cache.admits(b.len() as u64) {
            cache.insert(cache_key(array, key, f), b.clone());
        }
        found.insert((key, f), b);
    }
    Ok(found)
}

/// Checks the tile index entry of tile `key` of file `f` before anything is read: the unfiltered
/// size is what the schema implies (fixed-size cells, offsets, validity, coordinates) and within
/// `sm.limits.tile_bytes` (variable-length data, whose size only the limit bounds), and the stored
/// size is no more than the filters can produce from it. Decoding then allocates at most the
/// recorded unfiltered size (each filter stops beyond it), so no tile can make a read allocate
/// more than the limit, whatever its bytes.
fn check_entry(array: &Array, specs: &[FileSpec], key: TileKey, f: usize, limits: &Limits) -> Result<()> {
    let spec = &specs[f];
    let schema = array.schema();
    let entry = array.fragments[key.0].files[f].1[key.1 as usize];
    let path = || file_path(array, key.0, &spec.name);
    let cells = tile_cells(array, key.0, key.1);
    let times = |size: u64| cells.checked_mul(size);
    let expected = match spec.kind {
        FileKind::Data if schema.attrs[spec.attr].is_var() => None,
        FileKind::Data => Some(times(schema.attrs[spec.attr].cell_size() as u64)),
        FileKind::Offsets => Some(times(8)),
        FileKind::Validity => Some(Some(cells)),
        FileKind::Coords => Some(times(spec.elem_size as u64)),
    };
    if let Some(x) = expected.filter(|&x| x != Some(entry.unfiltered_size)) {
        let x = x.map_or_else(|| "more than 2^64".to_owned(), |x| x.to_string());
        return Err(Error::corrupt(
            path(),
            format!("tile {}: unfiltered size {} where {x} is expected", key.1, entry.unfiltered_size),
        ));
    }
    check_limit(
        "sm.limits.tile_bytes",
        || format!("tile {} of {}", key.1, path().display()),
        entry.unfiltered_size,
        limits.tile_bytes,
    )?;
    let max_stored = spec.filters.max_filtered_len(entry.unfiltered_size);
    if entry.stored_size > max_stored {
        return Err(Error::corrupt(
            path(),
            format!(
                "tile {}: stored size {} is more than the filters can make of {} bytes ({max_stored})",
                key.1, entry.stored_size, entry.unfiltered_size
            ),
        ));
    }
    Ok(())
}

/// The tile-cache key of tile `key` of file `f`.
fn cache_key(array: &Array, key: TileKey, f: usize) -> CacheKey {
    CacheKey::new(array.fragment_key(key.0), f as u32, key.1)
}

/// Counts a tile fetched from storage (`stored` bytes read, `unfiltered` after unfiltering).
fn count_fetched(schema: &crate::schema::ArraySchema, spec: &FileSpec, stored: u64, unfiltered: u64) {
    stats::add(Counter::ReaderNumTileBytesRead, stored);
    stats::add(Counter::ReaderNumBytesAfterFiltering, unfiltered);
    let var = matches!(spec.kind, FileKind::Offsets)
        || (spec.kind == FileKind::Data && schema.attrs.get(spec.attr).is_some_and(|a| a.is_var()));
    let c = if var { Counter::ReaderNumVarCellBytesRead } else { Counter::ReaderNumFixedCellBytesRead };
    stats::add(c, unfiltered);
}

/// Counts bytes copied from tiles into results.
pub(crate) fn count_copied(var: bool, bytes: u64) {
    let c = if var { Counter::ReaderNumVarCellBytesCopied } else { Counter::ReaderNumFixedCellBytesCopied };
    stats::add(c, bytes);
}

/// The runs of blocks read of one tile: (first byte in the tile, bytes).
type BlockRuns = Vec<(u64, Vec<u8>)>;

/// A tile of a file read in part: (tile, file) and the block ranges `[a, b)` to read.
type PartialTile = ((TileKey, usize), Vec<(u64, u64)>);

/// The block ranges `[a, b)` of tile `key` of file `f` that the copies `ops` read, when reading
/// only them pays: an unfiltered fixed-size data file, a tile with block checksums that the tile
/// cache does not hold, and at most half of its blocks needed.
fn partial_blocks(
    array: &Array,
    specs: &[FileSpec],
    key: TileKey,
    f: usize,
    ops: &[CopyOp],
) -> Option<Vec<(u64, u64)>> {
    let spec = &specs[f];
    let attr = &array.schema().attrs[spec.attr];
    if spec.kind != FileKind::Data || !spec.filters.is_empty() || attr.is_var() {
        return None;
    }
    let frag = &array.fragments[key.0];
    let sums = frag.blocks.of(f, key.1)?;
    let cache = array.ctx.tile_cache();
    if cache.admits(frag.files[f].1[key.1 as usize].stored_size) && cache.contains(&cache_key(array, key, f)) {
        return None;
    }
    let (cs, log2) = (attr.cell_size() as u64, frag.blocks.log2);
    if cs == 0 || !(1u64 << log2).is_multiple_of(cs) {
        return None; // runs must start on a cell boundary
    }
    // A tile whose sizes are not what its cells imply is read whole, which reports it.
    let entry = frag.files[f].1[key.1 as usize];
    let expected = tile_cells(array, key.0, key.1) * cs;
    if entry.stored_size != expected || entry.unfiltered_size != expected {
        return None;
    }
    let mut spans: Vec<(u64, u64)> = ops
        .iter()
        .map(|op| {
            let last: u64 = op.shape.iter().zip(&op.src.strides).map(|(n, s)| n.saturating_sub(1) * s).sum();
            let (first, end) = (op.src.offset * cs, (op.src.offset + last + 1) * cs);
            (first >> log2, (end - 1) >> log2)
        })
        .collect();
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b + 1),
            _ => out.push((a, b + 1)),
        }
    }
    let needed: u64 = out.iter().map(|(a, b)| b - a).sum();
    (needed * 2 <= sums.len() as u64).then_some(out)
}

/// Reads the blocks `runs` of each tile `(tile, file)` of `partial`, verifies each block's
/// checksum, and returns per tile its runs as (first byte in the tile, bytes). Such tiles are
/// not cached.
fn fetch_blocks(
    array: &Array,
    specs: &[FileSpec],
    partial: &[PartialTile],
) -> Result<FastMap<(TileKey, usize), BlockRuns>> {
    if partial.is_empty() {
        return Ok(FastMap::default());
    }
    let storage = array.ctx.storage().clone();
    let _t = stats::timer(Timer::ReaderFetchTiles);
    let tiles: Vec<((TileKey, usize), BlockRuns)> = array.ctx.install_io(|| {
        partial
            .par_iter()
            .map(|((key, f), runs)| {
                let (key, f) = (*key, *f);
                let frag = &array.fragments[key.0];
                let entry = frag.files[f].1[key.1 as usize];
                let path = file_path(array, key.0, &specs[f].name);
                let (sums, log2) = (frag.blocks.of(f, key.1).unwrap_or(&[]), frag.blocks.log2);
                let mut out = Vec::with_capacity(runs.len());
                let mut read = 0u64;
                for &(a, b) in runs {
                    let start = a << log2;
                    let end = (b << log2).min(entry.stored_size);
                    let mut run = vec![0u8; (end - start) as usize];
                    let dst = &mut run[..];
                    storage.read_immutable_into(&path, entry.offset + start, dst).map_err(|e| match e {
                        StorageError::OutOfBounds { .. } | StorageError::NotFound { .. } => {
                            Error::corrupt(&path, e.to_string())
                        }
                        e => e.into(),
                    })?;
                    for (i, block) in dst.chunks(1 << log2).enumerate() {
                        let k = a as usize + i;
                        let sum = xxh3_64(block);
                        let want = sums.get(k).copied().unwrap_or(!sum);
                        if sum != want {
                            return Err(Error::corrupt(
                                &path,
                                format!(
                                    "tile {}, block {k}: checksum mismatch (stored {want:016x}, computed {sum:016x})",
                                    key.1
                                ),
                            ));
                        }
                    }
                    read += end - start;
                    out.push((start, run));
                }
                stats::add(Counter::ReaderNumAttrTilesTouched, 1);
                count_fetched(array.schema(), &specs[f], read, read);
                Ok(((key, f), out))
            })
            .collect::<Result<Vec<_>>>()
    })?;
    Ok(tiles.into_iter().collect())
}

/// Reads the direct tiles `(sink, tile, file, destination byte)` into their sinks' buffers, in
/// parallel, verifying each tile's checksum in place.
fn read_direct(
    array: &Array,
    specs: &[FileSpec],
    direct: &[(usize, TileKey, usize, usize)],
    sinks: &mut [Sink<'_>],
) -> Result<()> {
    if direct.is_empty() {
        return Ok(());
    }
    let storage = array.ctx.storage();
    let mut jobs: Vec<(&mut [u8], TileKey, usize)> = Vec::new();
    for (si, s) in sinks.iter_mut().enumerate() {
        let DataSink::Fixed(buf) = &mut s.data else { continue };
        let mut mine: Vec<(usize, TileKey, usize)> =
            direct.iter().filter(|d| d.0 == si).map(|d| (d.3, d.1, d.2)).collect();
        mine.sort_unstable_by_key(|m| m.0);
        let mut rest: &mut [u8] = buf;
        let mut consumed = 0usize;
        for (dst, key, f) in mine {
            let len = array.fragments[key.0].files[f].1[key.1 as usize].stored_size as usize;
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(dst - consumed);
            let (slot, tail) = tail.split_at_mut(len.min(tail.len()));
            consumed = dst + slot.len();
            jobs.push((slot, key, f));
            rest = tail;
        }
    }
    array.ctx.install_io(|| {
        jobs.into_par_iter().try_for_each(|(slot, key, f)| {
            let path = file_path(array, key.0, &specs[f].name);
            let entry = array.fragments[key.0].files[f].1[key.1 as usize];
            let tile_err = |d: String| Error::corrupt(&path, format!("tile {}: {d}", key.1));
            if entry.stored_size != slot.len() as u64 || entry.unfiltered_size != entry.stored_size {
                return Err(tile_err(format!("stored size {} where {} is expected", entry.stored_size, slot.len())));
            }
            storage.read_immutable_into(&path, entry.offset, slot).map_err(|e| match e {
                StorageError::OutOfBounds { .. } | StorageError::NotFound { .. } => {
                    Error::corrupt(&path, e.to_string())
                }
                e => e.into(),
            })?;
            let blocks = &array.fragments[key.0].blocks;
            verify_tile(slot, entry.checksum, blocks.of(f, key.1), blocks.log2).map_err(|(stored, sum)| {
                tile_err(format!("checksum mismatch (stored {stored:016x}, computed {sum:016x})"))
            })?;
            stats::add(Counter::ReaderNumAttrTilesTouched, 1);
            count_fetched(array.schema(), &specs[f], entry.stored_size, entry.unfiltered_size);
            count_copied(false, entry.stored_size);
            Ok(())
        })
    })
}
