//! Sparse fragments in dense arrays (random updates). After the dense plan has filled a run of
//! result cells from the dense fragments, the cells of sparse fragments that fall inside the run
//! overwrite it wherever their fragment is newer than the dense fragment that provided the cell
//! and than every other sparse fragment holding the same cell. Only the R-tree's candidate tiles
//! are read, and only the winning cells' attribute values are copied.

use crate::fast_hash::FastMap;

use super::execute::{count_copied, DataSink, Sink, FILL_BLOB};
use super::plan::ResultSpace;
use crate::error::{Error, Result};
use crate::fragment::{FileKind, FileSpec};
use crate::geometry::{cells_in_box, meet, ordinals_at, Rect, Strided};
use crate::snapshot::{fetch_tiles, Snapshot, TileKey, Tiles, UpdateIndex};
use crate::storage::Bytes;
use crate::uninit::{write_bytes, OutBytes};

/// One sparse cell that lands in the result: result position, fragment, tile, cell, and its
/// place in the update index ([`NOT_INDEXED`] when it was found in its tile).
#[derive(Clone, Copy)]
struct Hit {
    dst: u64,
    frag: usize,
    tile: u64,
    cell: u32,
    at: u32,
}

/// [`Hit::at`] of cells not found through the update index.
const NOT_INDEXED: u32 = u32::MAX;

fn inside(p: &[u64], r: &[[u64; 2]]) -> bool {
    p.iter().zip(r).all(|(x, b)| b[0] <= *x && *x <= b[1])
}

/// Writes the fill value (and null) at the result places of deleted points.
fn fill_deleted(array: &Snapshot, deleted: &[Hit], sinks: &mut [Sink<'_>]) {
    for s in sinks.iter_mut() {
        let fill = array.schema().attrs[s.attr].fill_bytes();
        match &mut s.data {
            DataSink::Fixed(buf) => {
                for h in deleted {
                    let at = h.dst as usize * fill.len();
                    write_bytes(&mut buf[at..at + fill.len()], &fill);
                }
            }
            DataSink::Var { refs, .. } => {
                for h in deleted {
                    refs[h.dst as usize] = (FILL_BLOB, 0, fill.len() as u64);
                }
            }
        }
        if let Some(v) = s.validity.as_deref_mut() {
            for h in deleted {
                v[h.dst as usize] = 0;
            }
        }
    }
}

/// The result places of a run of result cells: the boxes (pieces) the run is made of, with
/// their places in the result buffers.
struct RunPlaces {
    pieces: Vec<(Rect, Strided)>,
    /// The pieces' bounding box.
    bbox: Rect,
    /// Point reads (many one-cell pieces): the result places of each point, looked up by its
    /// coordinates instead of testing every piece.
    points: Option<FastMap<Vec<u64>, Vec<u64>>>,
}

impl RunPlaces {
    fn new(pieces: Vec<(Rect, Strided)>) -> Option<Self> {
        let bbox = pieces
            .iter()
            .map(|(r, _)| r.clone())
            .reduce(|a, b| a.iter().zip(&b).map(|(x, y)| [x[0].min(y[0]), x[1].max(y[1])]).collect())?;
        let points = (pieces.len() > 16 && pieces.iter().all(|(r, _)| r.iter().all(|b| b[0] == b[1]))).then(|| {
            let mut m: FastMap<Vec<u64>, Vec<u64>> = FastMap::default();
            for (r, dst) in &pieces {
                m.entry(r.iter().map(|b| b[0]).collect()).or_default().push(dst.offset);
            }
            m
        });
        Some(Self { pieces, bbox, points })
    }

    /// Whether a tile with MBR `m` may hold cells of the run. With many pieces (point reads,
    /// many ranges) tiles are chosen by the pieces' bounding box.
    fn overlaps(&self, m: &Rect) -> bool {
        if self.pieces.len() > 16 {
            meet(m, &self.bbox)
        } else {
            self.pieces.iter().any(|(r, _)| meet(m, r))
        }
    }

    /// Calls `add` with every result place of the cell at `p` (several with overlapping ranges).
    fn places_of(&self, p: &[u64], mut add: impl FnMut(u64)) {
        if let Some(points) = &self.points {
            for &at in points.get(p).map_or(&[][..], Vec::as_slice) {
                add(at);
            }
            return;
        }
        for (rect, dst) in &self.pieces {
            if inside(p, rect) {
                add(dst.offset + p.iter().zip(rect).zip(&dst.strides).map(|((x, r), s)| (x - r[0]) * s).sum::<u64>());
            }
        }
    }
}

/// The sparse cells found in a run: one hit per result place, with the cell's coordinates
/// (`nd` per hit).
#[derive(Default)]
struct Hits {
    hits: Vec<Hit>,
    coords: Vec<u64>,
}

impl Hits {
    fn add(&mut self, places: &RunPlaces, key: TileKey, cell: u32, p: &[u64], at: u32) {
        places.places_of(p, |dst| {
            self.hits.push(Hit { dst, frag: key.0, tile: key.1, cell, at });
            self.coords.extend_from_slice(p);
        });
    }
}

/// Lays the sparse fragments' cells of result cells `[c0, c1)` over `sinks`: planning (which
/// sparse cells land in the run, and which of them win) then copying the winners' values.
pub(crate) fn overlay(array: &Snapshot, space: &ResultSpace, c0: u64, c1: u64, sinks: &mut [Sink<'_>]) -> Result<()> {
    if array.fragments.iter().all(|f| f.is_dense()) {
        return Ok(());
    }
    let Some(places) = RunPlaces::new(space.pieces(&array.grid, c0, c1)) else {
        return Ok(());
    };
    // Small fragments' cells come from the update index, the others' from their tiles.
    let index = array.update_index()?;
    let mut hits = Hits::default();
    if let Some(ix) = &index {
        hits_from_index(ix, &places, &mut hits);
    }
    let from_index = hits.hits.len();
    hits_from_tiles(array, index.as_deref(), &places, &mut hits)?;
    if hits.hits.is_empty() {
        return Ok(());
    }
    let winners = choose_winners(array, &hits, from_index);
    // Deleted points show the fill value.
    let (deleted, winners): (Vec<Hit>, Vec<Hit>) =
        winners.into_iter().partition(|h| array.fragments[h.frag].is_delete());
    fill_deleted(array, &deleted, sinks);
    if winners.is_empty() {
        return Ok(());
    }
    copy_winners(array, index.as_deref(), &winners, sinks)
}

/// The update index's cells in the run. Cells with equal coordinates are neighbours in the
/// index: only the newest one of each takes part, so these hits hold each result place once.
fn hits_from_index(ix: &UpdateIndex, places: &RunPlaces, hits: &mut Hits) {
    let found = ix.cells_in_box(&places.bbox);
    let mut p = vec![0u64; ix.ndim()];
    let mut k = 0;
    while k < found.len() {
        let mut best = found[k];
        let mut j = k + 1;
        while j < found.len() && ix.same_cell(found[j], found[k]) {
            if ix.place(found[j]).0 > ix.place(best).0 {
                best = found[j];
            }
            j += 1;
        }
        k = j;
        let (f, t, c) = ix.place(best);
        for (d, x) in p.iter_mut().enumerate() {
            *x = ix.ordinal(best, d);
        }
        hits.add(places, (f as usize, u64::from(t)), c, &p, best as u32);
    }
}

/// The cells in the run of the sparse fragments the update index does not cover, from the
/// coordinate tiles their R-trees choose.
fn hits_from_tiles(array: &Snapshot, index: Option<&UpdateIndex>, places: &RunPlaces, hits: &mut Hits) -> Result<()> {
    let schema = array.schema();
    let nd = schema.ndim();
    let specs = FileSpec::for_sparse(schema);
    let mut tiles: Vec<TileKey> = Vec::new();
    for (fi, f) in array.fragments.iter().enumerate() {
        if let Some(sp) = f.sparse.as_ref().filter(|_| !index.is_some_and(|ix| ix.covers(fi))) {
            tiles.extend(sp.rtree.search(&sp.mbrs, |m| places.overlaps(m)).into_iter().map(|t| (fi, t as u64)));
        }
    }
    let requests: Vec<(TileKey, usize)> = tiles.iter().flat_map(|&k| (0..nd).map(move |d| (k, d))).collect();
    let coords = fetch_tiles(array, &specs, &requests)?;
    let dims = &schema.dims;
    for &key in &tiles {
        let raw: Vec<&[u8]> = (0..nd).map(|d| coords.get(&(key, d)).map_or(&[][..], |b| &b[..])).collect();
        // Most cells of an update fragment lie outside the run: they are dropped on the stored
        // values, and only the rest become ordinals (which checks them against the domain).
        let near = cells_in_box(dims, &raw, &places.bbox);
        if near.is_empty() {
            continue;
        }
        let cols: Vec<Vec<u64>> = (0..nd)
            .map(|d| {
                ordinals_at(&dims[d], raw[d], &near).map_err(|b| {
                    Error::corrupt_tile(
                        array.fragment_dir(key.0).join(&specs[d].name),
                        key.1,
                        format!("coordinate {} of cell {} {}", b.value, b.cell, b.why),
                    )
                })
            })
            .collect::<Result<_>>()?;
        let mut p = vec![0u64; nd];
        for (k, &c) in near.iter().enumerate() {
            for (x, col) in p.iter_mut().zip(&cols) {
                *x = col[k];
            }
            hits.add(places, key, c, &p, NOT_INDEXED);
        }
    }
    Ok(())
}

/// The newest sparse cell per result place (only cells found in tiles can repeat a place the
/// index's hits or each other hold), kept if newer than what the dense plan put there: the
/// newest dense fragment holding the cell or the newest deleted rectangle covering it.
fn choose_winners(array: &Snapshot, hits: &Hits, from_index: usize) -> Vec<Hit> {
    let (frags, nd) = (&array.fragments, array.schema().ndim());
    let mut chosen: Vec<u32> = (0..hits.hits.len() as u32).collect();
    if hits.hits.len() > from_index {
        let mut order: Vec<(u64, usize, u32)> =
            hits.hits.iter().enumerate().map(|(i, h)| (h.dst, usize::MAX - h.frag, i as u32)).collect();
        order.sort_unstable();
        order.dedup_by_key(|o| o.0);
        chosen = order.into_iter().map(|o| o.2).collect();
    }
    // Only dense and delete fragments can provide a cell; there are usually few of them.
    let providers: Vec<usize> =
        (0..frags.len()).rev().filter(|&i| frags[i].is_dense() || frags[i].is_delete()).collect();
    let provider = |p: &[u64]| {
        providers
            .iter()
            .copied()
            .find(|&i| (frags[i].is_dense() && inside(p, &frags[i].domain)) || frags[i].rect_deletes(p))
    };
    chosen
        .into_iter()
        .map(|i| i as usize)
        .filter(|&i| provider(&hits.coords[i * nd..i * nd + nd]).is_none_or(|f| hits.hits[i].frag > f))
        .map(|i| hits.hits[i])
        .collect()
}

/// The winners' tiles a read needs: fixed-size values from the update index where it holds
/// them all, everything else from the attribute tiles.
struct WinnerTiles<'a> {
    specs: Vec<FileSpec>,
    tiles: Tiles,
    index: Option<&'a UpdateIndex>,
    all_in_index: bool,
}

impl WinnerTiles<'_> {
    fn file_of(&self, attr: usize, kind: FileKind) -> Option<usize> {
        self.specs.iter().position(|s| s.attr == attr && s.kind == kind)
    }

    /// The tile of `kind` of attribute `attr` in tile `k`.
    fn get(&self, k: TileKey, attr: usize, kind: FileKind) -> Option<&Bytes> {
        self.file_of(attr, kind).and_then(|f| self.tiles.get(&(k, f)))
    }

    /// Attribute `attr`'s values and validity in the update index, if every sink's are there.
    fn in_index(&self, attr: usize) -> Option<(&[u8], Option<&[u8]>)> {
        self.index.filter(|_| self.all_in_index).and_then(|ix| ix.values_of(attr))
    }
}

/// Copies the winners' values into `sinks`.
fn copy_winners(array: &Snapshot, index: Option<&UpdateIndex>, winners: &[Hit], sinks: &mut [Sink<'_>]) -> Result<()> {
    let specs = FileSpec::for_sparse(array.schema());
    let all_in_index = sinks.iter().all(|s| index.and_then(|ix| ix.values_of(s.attr)).is_some());
    let mut keys: Vec<TileKey> =
        winners.iter().filter(|h| h.at == NOT_INDEXED || !all_in_index).map(|h| (h.frag, h.tile)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut src = WinnerTiles { specs, tiles: FastMap::default(), index, all_in_index };
    let mut requests = Vec::new();
    for s in sinks.iter() {
        for kind in [FileKind::Data, FileKind::Offsets, FileKind::Validity] {
            if let Some(f) = src.file_of(s.attr, kind) {
                requests.extend(keys.iter().map(|&k| (k, f)));
            }
        }
    }
    src.tiles = fetch_tiles(array, &src.specs, &requests)?;
    for s in sinks.iter_mut() {
        let name = &array.schema().attrs[s.attr].name;
        let corrupt = |k: TileKey| {
            Error::corrupt_tile(array.fragment_dir(k.0), k.1, format!("attribute {name} tile missing or too short"))
        };
        match &mut s.data {
            DataSink::Fixed(buf) => copy_fixed(array, &src, s.attr, winners, buf, corrupt)?,
            DataSink::Var { refs, blobs } => copy_var(&src, s.attr, winners, refs, blobs, corrupt)?,
        }
        if let Some(v) = s.validity.as_deref_mut() {
            for h in winners {
                let k = (h.frag, h.tile);
                let (valid, at) = match src.in_index(s.attr).and_then(|(_, v)| v).filter(|_| h.at != NOT_INDEXED) {
                    Some(valid) => (valid, h.at as usize),
                    None => (&src.get(k, s.attr, FileKind::Validity).ok_or_else(|| corrupt(k))?[..], h.cell as usize),
                };
                v[h.dst as usize] = *valid.get(at).ok_or_else(|| corrupt(k))?;
            }
        }
    }
    Ok(())
}

/// Copies the winners' fixed-size values of attribute `attr` into `buf`.
fn copy_fixed(
    array: &Snapshot,
    src: &WinnerTiles<'_>,
    attr: usize,
    winners: &[Hit],
    buf: OutBytes<'_>,
    corrupt: impl Fn(TileKey) -> Error,
) -> Result<()> {
    let cs = array.schema().attrs[attr].cell_size();
    for h in winners {
        let k = (h.frag, h.tile);
        let (data, from) = match src.in_index(attr).filter(|_| h.at != NOT_INDEXED) {
            Some((data, _)) => (data, h.at as usize * cs),
            None => (&src.get(k, attr, FileKind::Data).ok_or_else(|| corrupt(k))?[..], h.cell as usize * cs),
        };
        let to = h.dst as usize * cs;
        if from + cs > data.len() {
            return Err(corrupt(k));
        }
        write_bytes(&mut buf[to..to + cs], &data[from..from + cs]);
    }
    count_copied(false, (winners.len() * cs) as u64);
    Ok(())
}

/// Points the winners' result cells of variable-length attribute `attr` at their values in
/// the tiles (kept in `blobs`).
fn copy_var(
    src: &WinnerTiles<'_>,
    attr: usize,
    winners: &[Hit],
    refs: &mut [(u32, u64, u64)],
    blobs: &mut Vec<Bytes>,
    corrupt: impl Fn(TileKey) -> Error,
) -> Result<()> {
    let mut blob_of: FastMap<TileKey, u32> = FastMap::default();
    let mut copied = 0u64;
    for h in winners {
        let k = (h.frag, h.tile);
        let data = src.get(k, attr, FileKind::Data).ok_or_else(|| corrupt(k))?;
        let offs = src.get(k, attr, FileKind::Offsets).ok_or_else(|| corrupt(k))?;
        let blob = *blob_of.entry(k).or_insert_with(|| {
            blobs.push(data.clone());
            (blobs.len() - 1) as u32
        });
        let at = |c: usize| -> Option<u64> {
            offs.get(c * 8..c * 8 + 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
        };
        let c = h.cell as usize;
        let start = at(c).ok_or_else(|| corrupt(k))?;
        let end = at(c + 1).unwrap_or(data.len() as u64);
        if start > end || end > data.len() as u64 {
            return Err(corrupt(k));
        }
        refs[h.dst as usize] = (blob, start, end - start);
        copied += end - start + 8;
    }
    count_copied(true, copied);
    Ok(())
}
