//! Fetching the tiles of a snapshot's fragments: the tile cache first; then byte ranges of a
//! file closer than `vfs.coalesce_gap` are read as one request, requests run in parallel on the
//! I/O pool, every tile's index entry is checked before a byte is read, its checksum verified
//! and the tile unfiltered on the compute pool (unfiltered tiles are used in place, no copy).
//! Fixed-size and validity tiles of dense fragments stored in a curve cell order are moved back
//! to row-major order here, once per fetch (cached tiles are row-major); their offsets tiles
//! stay in stored order (readers map cells through the permutation).

use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::Snapshot;
use crate::cache::TileKey as CacheKey;
use crate::config::{check_limit, Limits};
use crate::error::{checksum_mismatch, Error, Result};
use crate::fast_hash::FastMap;
use crate::fragment::{
    check_var_offsets, max_chunked_len, stored_offsets, verify_tile, ChunkedTile, FileKind, FileSpec, BLOCK_SUMS_FILE,
};
use crate::schema::Datatype;
use crate::stats::{self, Counter, Timer};
use crate::storage::{Bytes, StorageError};
use crate::uninit::{assume_written, write_bytes, OutBytes};

/// (fragment index, tile index).
pub(crate) type TileKey = (usize, u64);

/// Fetched tiles by (tile, file).
pub(crate) type Tiles = FastMap<(TileKey, usize), Bytes>;

struct Request {
    key: TileKey,
    file: usize,
    offset: u64,
    len: u64,
}

/// The path of the stored file holding the tiles of fragment `frag`'s file entry `file` (the
/// packed file of a packed fragment).
pub(crate) fn file_path(array: &Snapshot, frag: usize, file: &str) -> PathBuf {
    array.fragment_dir(frag).join(array.fragments[frag].stored_file(file))
}

/// Cells in tile `tile` of fragment `frag`.
pub(crate) fn tile_cells(array: &Snapshot, frag: usize, tile: u64) -> u64 {
    match &array.fragments[frag].sparse {
        Some(sp) => sp.tile_cells.get(tile as usize).copied().unwrap_or(0),
        None => array.grid.cells_per_tile(),
    }
}

/// Fetches tiles `(tile, file)`: byte ranges of a file closer than `vfs.coalesce_gap` are read as
/// one request, requests run in parallel, every tile's checksum and sizes are verified and tiles
/// are unfiltered in parallel (unfiltered tiles are used in place).
pub(crate) fn fetch_tiles(array: &Snapshot, specs: &[FileSpec], requests: &[(TileKey, usize)]) -> Result<Tiles> {
    let _t = stats::timer(Timer::ReaderFetchTiles);
    // Tiles the cache holds cost no I/O and no unfiltering.
    let (mut found, missing) = from_cache(array, specs, requests);
    if missing.is_empty() {
        // All cached: no hand-over to the I/O and compute pools (a thread wake-up each).
        return Ok(found);
    }
    // Reads on the I/O pool, checksums and unfiltering on the compute pool: each read's tiles
    // are unfiltered as soon as it completes, while the other reads are in flight (a cold read
    // of many compressed tiles waited for all its reads before decompressing any).
    let tiles: Vec<((TileKey, usize), Bytes)> = read_coalesced(array, specs, &missing, |read, bytes| {
        read.requests
            .into_par_iter()
            .map(|r| {
                let raw = bytes.slice((r.offset - read.start) as usize, r.len as usize);
                Ok(((r.key, r.file), unfilter(array, specs, &r, raw)?))
            })
            .collect::<Result<Vec<_>>>()
    })?
    .into_iter()
    .flatten()
    .collect();
    let cache = array.ctx.tile_cache();
    for ((key, f), b) in tiles {
        if array.fills_tile_cache && cache.admits(b.len() as u64) {
            cache.insert(cache_key(array, key, f), b.clone());
        }
        if let Some(carried) = &array.carried {
            carried.offer(key, f, &b);
        }
        found.insert((key, f), b);
    }
    Ok(found)
}

/// Fetches tiles `(tile, file)` of sparse fragments straight into the caller's buffers, one
/// per request, each the tile's unfiltered size: a tile the cache holds is copied from it; the
/// others are read as `fetch_tiles` reads them, then verified and unfiltered into their buffer
/// in parallel (a chunked tile chunk by chunk), with no tile buffer. Those are not cached: the
/// result holds the one copy of their bytes, and a large read does not push the cache's tiles
/// out for tiles it will not read again.
pub(crate) fn fetch_tiles_into(
    array: &Snapshot,
    specs: &[FileSpec],
    jobs: Vec<((TileKey, usize), OutBytes<'_>)>,
) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let _t = stats::timer(Timer::ReaderFetchTiles);
    let requests: Vec<(TileKey, usize)> = jobs.iter().map(|j| j.0).collect();
    let (found, missing) = from_cache(array, specs, &requests);
    let mut dsts: FastMap<(TileKey, usize), &mut [MaybeUninit<u8>]> = FastMap::default();
    for (req, dst) in jobs {
        match found.get(&req) {
            Some(tile) if tile.len() == dst.len() => write_bytes(dst, tile),
            Some(tile) => return Err(size_err(array, specs, req, tile.len() as u64, dst.len())),
            None => {
                dsts.insert(req, dst);
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    // Each read's tiles are unfiltered into their buffers as soon as it completes (as in
    // `fetch_tiles`); the buffers are handed out under a lock, once each.
    let dsts = std::sync::Mutex::new(dsts);
    read_coalesced(array, specs, &missing, |read, bytes| {
        let mut work: Vec<(Request, Bytes, &mut [MaybeUninit<u8>])> = Vec::with_capacity(read.requests.len());
        {
            let mut dsts = dsts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for r in read.requests {
                let raw = bytes.slice((r.offset - read.start) as usize, r.len as usize);
                let dst = dsts.remove(&(r.key, r.file)).ok_or_else(|| {
                    Error::corrupt_tile(file_path(array, r.key.0, &specs[r.file].name), r.key.1, "requested twice")
                })?;
                work.push((r, raw, dst));
            }
        }
        work.into_par_iter().try_for_each(|(r, raw, dst)| unfilter_into(array, specs, &r, &raw, dst))
    })?;
    Ok(())
}

/// A tile whose unfiltered size is not the `want` bytes its buffer holds.
fn size_err(array: &Snapshot, specs: &[FileSpec], (key, f): (TileKey, usize), got: u64, want: usize) -> Error {
    let what = format!("unfiltered size {got} where {want} is expected");
    Error::corrupt_tile(file_path(array, key.0, &specs[f].name), key.1, what)
}

/// Reads `missing` (coalesced, see [`coalesce`]) on the I/O pool and hands each read and its
/// bytes to `then` as soon as it is read, as a task of the compute pool (so parallel iterators
/// in `then` run there), while the other reads go on; the results in no particular order.
/// (`then` does not run on the I/O thread: an I/O thread calling into the compute pool takes up,
/// while it waits, the next read of its own pool, which calls in again, one stack frame deeper
/// per read: a read of 1,000 fragments overflowed the I/O thread's stack.)
fn read_coalesced<T: Send>(
    array: &Snapshot,
    specs: &[FileSpec],
    missing: &[(TileKey, usize)],
    then: impl Fn(Read, Bytes) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let reads = coalesce(array, specs, missing)?;
    let storage = array.ctx.storage().clone();
    let done = std::sync::Mutex::new(Vec::with_capacity(reads.len()));
    let (then, done_ref) = (&then, &done);
    // A compute thread waits for the I/O pool, running the spawned tasks meanwhile; the scope
    // ends when they have all run.
    array.ctx.install(|| {
        rayon::scope(|s| {
            array.ctx.install_io_for(&array.uri, || {
                reads.into_par_iter().try_for_each(|read| -> Result<()> {
                    let path = file_path(array, read.frag, &specs[read.file].name);
                    let bytes = storage
                        .read_immutable(&path, read.start, read.end - read.start)
                        .map_err(|e| storage_err(&path, e))?;
                    s.spawn(move |_| {
                        let out = then(read, bytes);
                        done_ref.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(out);
                    });
                    Ok(())
                })
            })
        })
    })?;
    done.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).into_iter().collect()
}

/// A storage error of a read of an immutable file: a missing file or range is corruption.
pub(crate) fn storage_err(path: &Path, e: StorageError) -> Error {
    match e {
        StorageError::OutOfBounds { .. } | StorageError::NotFound { .. } => Error::corrupt(path, e.to_string()),
        e => e.into(),
    }
}

/// The stored block checksums of tile `key.1` of file `f` (docs/format.md §8.1), for a read of
/// part of the tile: inline in the fragment's metadata, or read from its `BLOCK_SUMS_FILE` the
/// first time a read of this snapshot needs them, then verified against the tile checksum.
pub(crate) fn block_sums(array: &Snapshot, key: TileKey, f: usize) -> Result<Option<&[u64]>> {
    let frag = &array.fragments[key.0];
    let Some(entry) = frag.files.get(f).and_then(|(_, tiles)| tiles.get(usize::try_from(key.1).ok()?)) else {
        return Ok(None);
    };
    let path = array.fragment_dir(key.0).join(BLOCK_SUMS_FILE);
    let storage = array.ctx.storage();
    frag.blocks.sums((f, key.1), entry, &path, |offset, len| {
        stats::add(Counter::ReaderNumMetadataBytesRead, len);
        storage.read_immutable(&path, offset, len).map_err(|e| storage_err(&path, e))
    })
}

/// Tile `r` of a sparse fragment from its stored bytes `raw` into `dst`: as [`unfilter`] does
/// (checksums, sizes, bool values), with no buffer of its own.
fn unfilter_into(
    array: &Snapshot,
    specs: &[FileSpec],
    r: &Request,
    raw: &[u8],
    dst: &mut [MaybeUninit<u8>],
) -> Result<()> {
    let (frag, f) = (r.key.0, r.file);
    let fragment = &array.fragments[frag];
    let entry = fragment.files[f].1[r.key.1 as usize];
    let tile_err = |d: String| Error::corrupt_tile(file_path(array, frag, &specs[f].name), r.key.1, d);
    let spec = &specs[f];
    if entry.unfiltered_size != dst.len() as u64 {
        return Err(size_err(array, specs, (r.key, f), entry.unfiltered_size, dst.len()));
    }
    if let Some(chunks) = fragment.chunks.of(f, r.key.1) {
        if spec.filters.is_empty() {
            return Err(tile_err("chunks recorded for a file without filters".into()));
        }
        if stored_offsets(&chunks.list).and_then(|s| s.last().copied()) != Some(raw.len() as u64) {
            return Err(tile_err(format!("chunks do not make the {} stored bytes", raw.len())));
        }
        let _u = stats::timer(Timer::ReaderUnfilterTiles);
        let tile = ChunkedTile::of(spec, entry.unfiltered_size, chunks);
        tile.decode_scattered(&[(0, raw)], vec![(0, dst)]).map_err(|(j, d)| tile_err(format!("chunk {j}: {d}")))?;
    } else {
        let blocks = &fragment.blocks;
        let blocked = blocks.count(f, r.key.1).map(|_| blocks.log2);
        verify_tile(raw, entry.checksum, blocked).map_err(|(stored, sum)| tile_err(checksum_mismatch(stored, sum)))?;
        if spec.filters.is_empty() {
            if raw.len() != dst.len() {
                return Err(tile_err("stored size differs from unfiltered size".into()));
            }
            write_bytes(dst, raw);
        } else {
            let _u = stats::timer(Timer::ReaderUnfilterTiles);
            spec.filters.decode_into(raw, spec.elem_size, dst).map_err(|e| tile_err(e.to_string()))?;
        }
    }
    if spec.kind == FileKind::Data && array.schema().attrs.get(spec.attr).is_some_and(|a| a.datatype == Datatype::Bool)
    {
        // SAFETY: every byte of `dst` is written: a copy of its length, or a decode, which on
        // success writes exactly `dst.len()` bytes (`decode_into`, `decode_scattered`).
        #[allow(unsafe_code)]
        let dst = unsafe { assume_written(dst) };
        if let Some(i) = dst.iter().position(|&b| b > 1) {
            return Err(tile_err(format!("bool value {} at byte {i} (must be 0 or 1)", dst[i])));
        }
    }
    count_fetched(array.schema(), spec, entry.stored_size, entry.unfiltered_size);
    Ok(())
}

/// The requested tiles the tile cache (or the snapshot's carried tiles) holds, and the requests
/// it does not.
fn from_cache(array: &Snapshot, specs: &[FileSpec], requests: &[(TileKey, usize)]) -> (Tiles, Vec<(TileKey, usize)>) {
    let cache = array.ctx.tile_cache();
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
        match cached.get(i).cloned().flatten().or_else(|| array.carried.as_ref()?.get(key, f)) {
            Some(b) => {
                hits += u64::from(data);
                found.insert((key, f), b);
            }
            None => missing.push((key, f)),
        }
    }
    stats::add(Counter::ReaderNumAttrTilesTouched, touched);
    stats::add(Counter::ReaderAttrTileCacheHits, hits);
    (found, missing)
}

/// One read from storage: bytes `[start, end)` of file `file` of fragment `frag`, holding the
/// tiles `requests`.
struct Read {
    frag: usize,
    file: usize,
    start: u64,
    end: u64,
    requests: Vec<Request>,
}

/// The reads that fetch tiles `missing`: requests grouped per stored file in offset order,
/// neighbours closer than `vfs.coalesce_gap` merged up to `vfs.coalesce_max` bytes. Every tile's
/// recorded sizes are checked before a byte is read or allocated.
fn coalesce(array: &Snapshot, specs: &[FileSpec], missing: &[(TileKey, usize)]) -> Result<Vec<Read>> {
    let config = array.ctx.config();
    let limits = config.limits();
    // Requests grouped by the file that stores them: a packed fragment stores all its files in
    // one, whose tiles coalesce across attributes (a small fragment is then one read, not one
    // per attribute).
    let stored = |frag: usize, f: usize| if array.fragments[frag].packed { 0 } else { f };
    let mut per_file: FastMap<(usize, usize), Vec<Request>> = FastMap::default();
    for &(key, f) in missing {
        check_entry(array, specs, key, f, &limits)?;
        let e = array.fragments[key.0].files[f].1[key.1 as usize];
        per_file.entry((key.0, stored(key.0, f))).or_default().push(Request {
            key,
            file: f,
            offset: e.offset,
            len: e.stored_size,
        });
    }
    let (gap, max) = (config.coalesce_gap(), config.coalesce_max());
    let mut reads: Vec<Read> = Vec::new();
    let mut groups: Vec<_> = per_file.into_iter().collect();
    groups.sort_unstable_by_key(|g| g.0);
    for ((frag, _), mut reqs) in groups {
        reqs.sort_unstable_by_key(|r| r.offset);
        let first = reads.len();
        for r in reqs {
            let end = r.offset + r.len;
            let in_group = reads.len() > first;
            if let Some(last) = reads.last_mut().filter(|_| in_group) {
                if r.offset >= last.end && r.offset - last.end <= gap && end - last.start <= max {
                    last.end = end;
                    last.requests.push(r);
                    continue;
                }
            }
            reads.push(Read { frag, file: r.file, start: r.offset, end, requests: vec![r] });
        }
    }
    Ok(reads)
}

/// Tile `r` from its stored bytes `raw`: checksum verified, unfiltered, sizes checked, and for
/// an offsets tile the offsets checked against its data tile.
fn unfilter(array: &Snapshot, specs: &[FileSpec], r: &Request, raw: Bytes) -> Result<Bytes> {
    let (frag, f) = (r.key.0, r.file);
    let fragment = &array.fragments[frag];
    let entry = fragment.files[f].1[r.key.1 as usize];
    let tile_err = |d: String| Error::corrupt_tile(file_path(array, frag, &specs[f].name), r.key.1, d);
    let spec = &specs[f];
    let tile = if let Some(chunks) = fragment.chunks.of(f, r.key.1) {
        // Chunks carry their own checksums: each is verified as it is decoded, in parallel.
        if spec.filters.is_empty() {
            return Err(tile_err("chunks recorded for a file without filters".into()));
        }
        let _u = stats::timer(Timer::ReaderUnfilterTiles);
        let tile = ChunkedTile::of(spec, entry.unfiltered_size, chunks);
        let out = tile.decode(0..chunks.list.len(), &raw).map_err(|(j, d)| tile_err(format!("chunk {j}: {d}")))?;
        Bytes::from_vec(out)
    } else {
        let blocks = &fragment.blocks;
        let blocked = blocks.count(f, r.key.1).map(|_| blocks.log2);
        verify_tile(&raw, entry.checksum, blocked).map_err(|(stored, sum)| tile_err(checksum_mismatch(stored, sum)))?;
        if spec.filters.is_empty() {
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
        }
    };
    let tile = to_row_major(array, spec, fragment.sparse.is_none(), tile);
    if spec.kind == FileKind::Data && array.schema().attrs.get(spec.attr).is_some_and(|a| a.datatype == Datatype::Bool)
    {
        if let Some(i) = tile.iter().position(|&b| b > 1) {
            return Err(tile_err(format!("bool value {} at byte {i} (must be 0 or 1)", tile[i])));
        }
    }
    if spec.kind == FileKind::Offsets {
        // Checked once here (cached tiles were checked when fetched): every reader then slices
        // data tiles by these offsets without checks.
        let data_len = specs
            .iter()
            .position(|s| s.attr == spec.attr && s.kind == FileKind::Data)
            .map(|d| fragment.files[d].1[r.key.1 as usize].unfiltered_size);
        let data_len = data_len.ok_or_else(|| tile_err("no data file".into()))?;
        check_var_offsets(&tile, data_len).map_err(tile_err)?;
    }
    count_fetched(array.schema(), spec, entry.stored_size, entry.unfiltered_size);
    Ok(tile)
}

/// A dense fragment's fixed-size data or validity tile in row-major order: as stored, or moved
/// back from the cell order's curve.
fn to_row_major(array: &Snapshot, spec: &FileSpec, dense: bool, tile: Bytes) -> Bytes {
    if !dense || array.grid.cell_curve.is_none() {
        return tile;
    }
    let Some(attr) = array.schema().attrs.get(spec.attr) else { return tile };
    let elem = match spec.kind {
        FileKind::Data if !attr.is_var() => attr.cell_size(),
        FileKind::Validity => 1,
        _ => return tile,
    };
    match array.grid.permutation() {
        Some(p) => {
            let _t = stats::timer(Timer::ReaderUnfilterTiles);
            Bytes::from_vec(p.stored_to_row_major(elem, &tile))
        }
        _ => tile,
    }
}

/// Checks the tile index entry of tile `key` of file `f` before anything is read: the unfiltered
/// size is what the schema implies (fixed-size cells, offsets, validity, coordinates) and within
/// `sm.limits.tile_bytes` (variable-length data, whose size only the limit bounds), and the stored
/// size is no more than the filters can produce from it. Decoding then allocates at most the
/// recorded unfiltered size (each filter stops beyond it), so no tile can make a read allocate
/// more than the limit, whatever its bytes.
fn check_entry(array: &Snapshot, specs: &[FileSpec], key: TileKey, f: usize, limits: &Limits) -> Result<()> {
    let spec = &specs[f];
    let schema = array.schema();
    let entry = array.fragments[key.0].files[f].1[key.1 as usize];
    let path = || file_path(array, key.0, &spec.name);
    if entry.offset.checked_add(entry.stored_size).is_none() {
        let what = format!("offset {} + stored size {} past 2^64", entry.offset, entry.stored_size);
        return Err(Error::corrupt_tile(path(), key.1, what));
    }
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
        return Err(Error::corrupt_tile(
            path(),
            key.1,
            format!("unfiltered size {} where {x} is expected", entry.unfiltered_size),
        ));
    }
    check_limit(
        "sm.limits.tile_bytes",
        || format!("tile {} of {}", key.1, path().display()),
        entry.unfiltered_size,
        limits.tile_bytes,
    )?;
    let fragment = &array.fragments[key.0];
    let max_stored = match fragment.chunks.of(f, key.1) {
        Some(c) => max_chunked_len(&spec.filters, entry.unfiltered_size, c.log2),
        None => spec.filters.max_filtered_len(entry.unfiltered_size),
    };
    if entry.stored_size > max_stored {
        return Err(Error::corrupt_tile(
            path(),
            key.1,
            format!(
                "stored size {} is more than the filters can make of {} bytes ({max_stored})",
                entry.stored_size, entry.unfiltered_size
            ),
        ));
    }
    Ok(())
}

/// The tile-cache key of tile `key` of file `f`.
pub(crate) fn cache_key(array: &Snapshot, key: TileKey, f: usize) -> CacheKey {
    CacheKey::new(array.fragment_key(key.0), f as u32, key.1)
}

/// Counts a tile fetched from storage (`stored` bytes read, `unfiltered` after unfiltering).
pub(crate) fn count_fetched(schema: &crate::schema::ArraySchema, spec: &FileSpec, stored: u64, unfiltered: u64) {
    stats::add(Counter::ReaderNumTileBytesRead, stored);
    stats::add(Counter::ReaderNumBytesAfterFiltering, unfiltered);
    let var = matches!(spec.kind, FileKind::Offsets)
        || (spec.kind == FileKind::Data && schema.attrs.get(spec.attr).is_some_and(|a| a.is_var()));
    let c = if var { Counter::ReaderNumVarCellBytesRead } else { Counter::ReaderNumFixedCellBytesRead };
    stats::add(c, unfiltered);
}
