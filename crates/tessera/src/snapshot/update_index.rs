//! The update index of an open array: one sorted, in-memory index of the cells of all its small
//! sparse fragments (random updates of dense arrays, a few new or changed points of sparse
//! arrays, deleted points). Such a fragment's data tile spans the whole domain, so without the
//! index every read tests every small fragment: an R-tree probe, its coordinate tiles and a scan
//! of all its cells, which makes a read over a thousand update fragments several times slower
//! than over one. The index holds the global-order keys of all those cells in one array, so a read
//! finds the cells of its box with two binary searches per space tile the box meets, however
//! many fragments there are.
//!
//! It also holds the cells' values of every fixed-size attribute in the same order, so reads take
//! the values of the cells they found from the index instead of one cell from each of hundreds
//! of small tiles (var-sized attributes are still read from the tiles).
//!
//! The index is built by the first read that needs it (for a sparse array, after the first
//! `sm.read.update_index_after_reads` reads, which read the small fragments' tiles themselves:
//! a read that builds the index spends more than one without it) and lives as long as the open
//! array (a view of some of its fragments builds its own; consolidation reads without one). It takes
//! fragments of at most [`SMALL_TILES`] data tiles and [`SMALL_CELLS`] cells, newest first,
//! while the index fits in `sm.read.update_index_size` bytes (keys, places and fixed-size
//! values), and is built only when at least `sm.read.update_index_min_fragments` fragments
//! qualify; other fragments are read as before. Arrays in Hilbert order (whose keys are not
//! tile-major) have none.

use rayon::prelude::*;

use super::{fetch_tiles, Snapshot, TileKey, Tiles};
use crate::error::{Error, Result};
use crate::fragment::{FileKind, FileSpec};
use crate::geometry::{gather_cells, ordinals, sort_permutation, KeysCome, OrderKeys};
use crate::stats::{self, Counter, Timer};

/// The most cells a fragment may hold to be indexed.
pub(crate) const SMALL_CELLS: u64 = 1 << 16;

/// The most data tiles a fragment may have to be indexed: a fragment of many tiles has small
/// MBRs, which its R-tree prunes well on its own.
pub(crate) const SMALL_TILES: usize = 4;

/// Where a cell is stored: fragment, data tile, cell in the tile.
pub(crate) type Place = (u32, u32, u32);

/// The cells of an array's small sparse fragments in global order.
#[derive(Debug)]
pub(crate) struct UpdateIndex {
    order: OrderKeys,
    /// Key words per cell (`order.width()`).
    w: usize,
    /// Global-order keys, `w` words per cell, sorted.
    keys: Vec<u64>,
    /// Per cell, where it is stored: fragment, data tile, cell in the tile.
    refs: Vec<Place>,
    /// Per fragment of the array, whether its cells are here.
    indexed: Vec<bool>,
    /// Per dimension, the key word that holds its ordinal.
    word_of: Vec<usize>,
    /// Per attribute, the cells' values in index order (fixed-size attributes; `None` for
    /// var-sized ones), and their validity bytes (nullable ones).
    values: Vec<Option<Column>>,
}

/// One fixed-size attribute's values in index order, and their validity bytes if nullable.
type Column = (Vec<u8>, Option<Vec<u8>>);

impl UpdateIndex {
    /// The fragments the index of `array` takes, oldest first: none when too few qualify (or
    /// the cell order is Hilbert, or the budget is 0). Known from the fragments' metadata
    /// alone, so a read can leave them out before the index is built.
    pub(crate) fn fragments(array: &Snapshot) -> Vec<usize> {
        let order = OrderKeys::new(array.schema());
        if order.lead_dim().is_none() {
            return Vec::new();
        }
        let chosen = Self::choose(array, &order);
        if chosen.len() < array.ctx.config().update_index_min_fragments() {
            return Vec::new();
        }
        chosen
    }

    /// Builds the index of `array`'s fragments `chosen` (as [`fragments`](Self::fragments)
    /// gives them), or `None` when there are none.
    pub(crate) fn build(array: &Snapshot, chosen: &[usize]) -> Result<Option<Self>> {
        let schema = array.schema();
        let order = OrderKeys::new(schema);
        let Some(lead) = order.lead_dim().filter(|_| !chosen.is_empty()) else { return Ok(None) };
        let _t = stats::timer(Timer::ReaderBuildUpdateIndex);
        let nd = schema.ndim();
        let specs = FileSpec::for_sparse(schema);
        let frags = &array.fragments;
        let tiles_of = |fi: usize| frags[fi].sparse.as_ref().map_or(0, |s| s.tile_cells.len());
        let tile_keys: Vec<TileKey> =
            chosen.iter().flat_map(|&fi| (0..tiles_of(fi)).map(move |t| (fi, t as u64))).collect();
        // Coordinates and values in one fetch: one round of parallel reads, not two in turn.
        let mut requests: Vec<(TileKey, usize)> =
            tile_keys.iter().flat_map(|&k| (0..nd).map(move |d| (k, d))).collect();
        for f in Self::value_files(array, &specs) {
            requests.extend(tile_keys.iter().filter(|k| !frags[k.0].is_delete()).map(|&k| (k, f)));
        }
        let tiles = fetch_tiles(array, &specs, &requests)?;
        let (keys, refs) = Self::cell_keys(array, &order, &specs, &tile_keys, &tiles)?;
        let w = order.width();
        let perm = array.ctx.install(|| sort_permutation(&keys, w, KeysCome::InRuns)).perm;
        let (sorted_keys, sorted_refs) =
            array.ctx.install(|| rayon::join(|| gather_cells(&keys, w, &perm), || gather_cells(&refs, 1, &perm)));
        let values = Self::values(array, &specs, &tile_keys, &refs, &perm, &tiles)?;
        let mut indexed = vec![false; frags.len()];
        for &fi in chosen {
            indexed[fi] = true;
        }
        // Key words after the first hold the ordinals in cell order (the lead dimension first).
        let word_of: Vec<usize> = (0..nd).map(|d| if lead == 0 { 1 + d } else { nd - d }).collect();
        stats::add(Counter::ReaderUpdateIndexCells, perm.len() as u64);
        Ok(Some(Self { order, w, keys: sorted_keys, refs: sorted_refs, indexed, word_of, values }))
    }

    /// The fragments the index takes, oldest first: small ones, newest first while the index
    /// fits its budget (key words, place, fixed-size values and validity per cell).
    fn choose(array: &Snapshot, order: &OrderKeys) -> Vec<usize> {
        let schema = array.schema();
        let budget = array.ctx.config().update_index_size();
        let per_cell = (order.width() * 8 + 12) as u64
            + schema
                .attrs
                .iter()
                .filter(|a| !a.is_var())
                .map(|a| a.cell_size() as u64 + u64::from(a.nullable))
                .sum::<u64>();
        let mut chosen: Vec<usize> = Vec::new();
        let mut total = 0u64;
        for (fi, f) in array.fragments.iter().enumerate().rev() {
            let tiles = f.sparse.as_ref().map_or(usize::MAX, |s| s.tile_cells.len());
            if tiles > SMALL_TILES || f.cell_count > SMALL_CELLS || (total + f.cell_count) * per_cell > budget {
                continue;
            }
            total += f.cell_count;
            chosen.push(fi);
        }
        chosen.reverse();
        chosen
    }

    /// The global-order keys (`order.width()` words per cell) and places of every cell of the
    /// tiles `tile_keys`, in tile order; tiles are read and keyed in parallel.
    fn cell_keys(
        array: &Snapshot,
        order: &OrderKeys,
        specs: &[FileSpec],
        tile_keys: &[TileKey],
        tiles: &Tiles,
    ) -> Result<(Vec<u64>, Vec<Place>)> {
        let schema = array.schema();
        let (nd, w) = (schema.ndim(), order.width());
        let parts: Vec<(Vec<u64>, Vec<Place>)> = array.ctx.install(|| {
            tile_keys
                .par_iter()
                .map(|&k| {
                    let cols: Vec<Vec<u64>> = (0..nd)
                        .map(|d| {
                            let raw = tiles.get(&(k, d)).map_or(&[][..], |b| &b[..]);
                            ordinals(&schema.dims[d], raw).map_err(|b| {
                                Error::corrupt_tile(
                                    array.fragment_dir(k.0).join(&specs[d].name),
                                    k.1,
                                    format!("coordinate {} of cell {} {}", b.value, b.cell, b.why),
                                )
                            })
                        })
                        .collect::<Result<_>>()?;
                    let n = cols.iter().map(Vec::len).min().unwrap_or(0);
                    let mut keys = vec![0u64; n * w];
                    let mut ords = vec![0u64; nd];
                    for (c, out) in keys.chunks_exact_mut(w).enumerate() {
                        for (o, col) in ords.iter_mut().zip(&cols) {
                            *o = col[c];
                        }
                        order.key(&ords, out);
                    }
                    let refs = (0..n as u32).map(|c| (k.0 as u32, k.1 as u32, c)).collect();
                    Ok((keys, refs))
                })
                .collect::<Result<_>>()
        })?;
        let cells: usize = parts.iter().map(|p| p.1.len()).sum();
        let mut keys = Vec::with_capacity(cells * w);
        let mut refs = Vec::with_capacity(cells);
        for (k, r) in parts {
            keys.extend(k);
            refs.extend(r);
        }
        Ok((keys, refs))
    }

    /// The files (indices into `specs`) of the values the index holds: data and validity of
    /// every fixed-size attribute.
    fn value_files(array: &Snapshot, specs: &[FileSpec]) -> Vec<usize> {
        let attrs = &array.schema().attrs;
        (0..specs.len())
            .filter(|&f| {
                let s = &specs[f];
                matches!(s.kind, FileKind::Data | FileKind::Validity) && attrs.get(s.attr).is_some_and(|a| !a.is_var())
            })
            .collect()
    }

    /// The fixed-size attributes' values (and validity) of the cells `refs` (in tile order, as
    /// `tile_keys` lists the tiles) rearranged in index order `perm`, from `tiles` (which hold
    /// the [`value_files`](Self::value_files) of the tiles). Delete fragments have no values:
    /// theirs are zeros (reads never return deleted cells).
    fn values(
        array: &Snapshot,
        specs: &[FileSpec],
        tile_keys: &[TileKey],
        refs: &[Place],
        perm: &[u32],
        tiles: &Tiles,
    ) -> Result<Vec<Option<Column>>> {
        let schema = array.schema();
        let frags = &array.fragments;
        let file_of = |attr: usize, kind: FileKind| specs.iter().position(|s| s.attr == attr && s.kind == kind);
        let cells_of = |k: TileKey| frags[k.0].sparse.as_ref().map_or(0, |s| s.tile_cells[k.1 as usize]) as usize;
        // One column of `size`-byte values per file, tile after tile, then in index order.
        let column = |f: Option<usize>, size: usize| -> Result<Option<Vec<u8>>> {
            let Some(f) = f else { return Ok(None) };
            let mut all = Vec::with_capacity(refs.len() * size);
            for &k in tile_keys {
                let n = cells_of(k) * size;
                if frags[k.0].is_delete() {
                    all.resize(all.len() + n, 0);
                    continue;
                }
                match tiles.get(&(k, f)) {
                    Some(t) if t.len() == n => all.extend_from_slice(t),
                    _ => {
                        return Err(Error::corrupt_tile(
                            array.fragment_dir(k.0).join(&specs[f].name),
                            k.1,
                            format!("{} bytes where {n} are expected", tiles.get(&(k, f)).map_or(0, |t| t.len())),
                        ))
                    }
                }
            }
            Ok(Some(gather_cells(&all, size, perm)))
        };
        array.ctx.install(|| {
            (0..schema.attrs.len())
                .into_par_iter()
                .map(|a| {
                    let attr = &schema.attrs[a];
                    if attr.is_var() {
                        return Ok(None);
                    }
                    let data = column(file_of(a, FileKind::Data), attr.cell_size())?.unwrap_or_default();
                    let valid = column(file_of(a, FileKind::Validity), 1)?;
                    Ok(Some((data, valid)))
                })
                .collect()
        })
    }

    /// The values of fixed-size attribute `attr` in index order, and their validity bytes for a
    /// nullable one; `None` for a var-sized attribute.
    pub(crate) fn values_of(&self, attr: usize) -> Option<(&[u8], Option<&[u8]>)> {
        self.values.get(attr)?.as_ref().map(|(d, v)| (&d[..], v.as_deref()))
    }

    /// Whether fragment `fi`'s cells are in the index (reads then skip the fragment).
    pub(crate) fn covers(&self, fi: usize) -> bool {
        self.indexed.get(fi).copied().unwrap_or(false)
    }

    /// The cells in the index.
    pub(crate) fn len(&self) -> usize {
        self.refs.len()
    }

    /// Where cell `i` of the index is stored: fragment, tile, cell.
    pub(crate) fn place(&self, i: usize) -> Place {
        self.refs[i]
    }

    /// Whether cells `a` and `b` of the index have the same coordinates.
    pub(crate) fn same_cell(&self, a: usize, b: usize) -> bool {
        self.keys[a * self.w..a * self.w + self.w] == self.keys[b * self.w..b * self.w + self.w]
    }

    /// The number of dimensions of the indexed cells.
    pub(crate) fn ndim(&self) -> usize {
        self.word_of.len()
    }

    /// The ordinal of cell `i` of the index on dimension `d`.
    pub(crate) fn ordinal(&self, i: usize, d: usize) -> u64 {
        self.keys[i * self.w + self.word_of[d]]
    }

    /// The cells (indices into the index, in global order) whose ordinals lie inside `bbox`.
    pub(crate) fn cells_in_box(&self, bbox: &[[u64; 2]]) -> Vec<usize> {
        let n = self.len();
        let inside = |i: usize| bbox.iter().enumerate().all(|(d, b)| (b[0]..=b[1]).contains(&self.ordinal(i, d)));
        let tiles: Vec<[u64; 2]> = bbox
            .iter()
            .enumerate()
            .map(|(d, b)| [self.order.tile_coord(d, b[0]), self.order.tile_coord(d, b[1])])
            .collect();
        let count = tiles.iter().fold(1u64, |a, t| a.saturating_mul(t[1] - t[0] + 1));
        // A box over very many space tiles: one scan is cheaper than the searches.
        let probes = count.saturating_mul(2 * u64::from(usize::BITS - n.leading_zeros() + 1));
        if probes.saturating_mul(4) > n as u64 {
            return (0..n).filter(|&i| inside(i)).collect();
        }
        let mut tids: Vec<u64> = Vec::with_capacity(count as usize);
        let mut tc: Vec<u64> = tiles.iter().map(|t| t[0]).collect();
        'tiles: loop {
            tids.push(self.order.tile_id(|d| tc[d]));
            for d in (0..tc.len()).rev() {
                if tc[d] < tiles[d][1] {
                    tc[d] += 1;
                    continue 'tiles;
                }
                tc[d] = tiles[d][0];
            }
            break;
        }
        tids.sort_unstable();
        // The first two key words: space tile, then the lead dimension's ordinal.
        let head = |i: usize| (self.keys[i * self.w], self.keys[i * self.w + 1]);
        let lead = self.word_of.iter().position(|&wd| wd == 1).unwrap_or(0);
        let (llo, lhi) = (bbox[lead][0], bbox[lead][1]);
        let mut out = Vec::new();
        let mut from = 0usize;
        for t in tids {
            let a = partition(from, n, |i| head(i) < (t, llo));
            let b = partition(a, n, |i| head(i) <= (t, lhi));
            out.extend((a..b).filter(|&i| inside(i)));
            from = b;
        }
        out
    }
}

/// The first index in `[lo, hi)` at which `before` turns false (`before` holds on a prefix).
fn partition(mut lo: usize, mut hi: usize, before: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::*;

    /// A view of some of an open array's fragments does not reuse the array's index (which
    /// numbers the array's fragments, not the view's).
    #[test]
    fn a_view_of_some_fragments_builds_its_own_index() {
        let mut config = Config::new();
        config.set("sm.read.update_index_min_fragments", "1").unwrap();
        let ctx = Context::with_storage(config, Arc::new(MemoryStorage::new())).unwrap();
        let schema = ArraySchema::builder(ArrayType::Sparse)
            .dim(Dimension::new("x", Datatype::Int64, (0, 99), 10))
            .dim(Dimension::new("y", Datatype::Int64, (0, 99), 10))
            .attr(Attribute::new("a", Datatype::Int32))
            .build()
            .unwrap();
        Array::create(&ctx, "/v", &schema).unwrap();
        let w = Array::open(&ctx, "/v", Mode::Write).unwrap();
        for f in 0..4i64 {
            let xs: Vec<i64> = (0..5).map(|k| f * 20 + k).collect();
            let ys: Vec<i64> = (0..5).map(|k| 99 - f * 20 - k).collect();
            let vals = vec![f as i32; 5];
            w.write_sparse(
                &[
                    CoordInput { name: "x", data: bytemuck::cast_slice(&xs) },
                    CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
                ],
                &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))],
            )
            .unwrap();
        }
        let values = |r: &Array| {
            let res = r.sparse_query(&[vec![], vec![]], &[], Layout::Global).unwrap().read_all().unwrap();
            bytemuck::cast_slice::<u8, i32>(&res.attrs[2].data).to_vec()
        };
        let r = Array::open(&ctx, "/v", Mode::Read).unwrap();
        assert_eq!(values(&r).len(), 20);
        let view = r.with_fragments(&[0, 1]);
        assert_eq!(values(&view), [vec![0; 5], vec![1; 5]].concat());
    }
}
