//! Sparse fragments in dense arrays (random updates). After the dense plan has filled a run of
//! result cells from the dense fragments, the cells of sparse fragments that fall inside the run
//! overwrite it wherever their fragment is newer than the dense fragment that provided the cell
//! and than every other sparse fragment holding the same cell. Only the R-tree's candidate tiles
//! are read, and only the winning cells' attribute values are copied.

use crate::fast_hash::FastMap;

use super::execute::{count_copied, fetch_tiles, DataSink, Sink, TileKey, FILL_BLOB};
use super::plan::ResultSpace;
use super::update_index::update_index;
use crate::array::Array;
use crate::error::{Error, Result};
use crate::fragment::{FileKind, FileSpec, FRAGMENTS_DIR};
use crate::geometry::{cells_in_box, ordinals_at, Rect};

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
fn fill_deleted(array: &Array, deleted: &[Hit], sinks: &mut [Sink<'_>]) {
    for s in sinks.iter_mut() {
        let fill = array.schema().attrs[s.attr].fill_bytes();
        match &mut s.data {
            DataSink::Fixed(buf) => {
                for h in deleted {
                    let at = h.dst as usize * fill.len();
                    buf[at..at + fill.len()].copy_from_slice(&fill);
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

/// Lays the sparse fragments' cells of result cells `[c0, c1)` over `sinks`.
pub(crate) fn overlay(array: &Array, space: &ResultSpace, c0: u64, c1: u64, sinks: &mut [Sink<'_>]) -> Result<()> {
    let frags = &array.fragments;
    if frags.iter().all(|f| f.is_dense()) {
        return Ok(());
    }
    let schema = array.schema();
    let nd = schema.ndim();
    let pieces = space.pieces(&array.grid, c0, c1);
    let specs = FileSpec::for_sparse(schema);
    let Some(bbox) = pieces
        .iter()
        .map(|(r, _)| r.clone())
        .reduce(|a, b| a.iter().zip(&b).map(|(x, y)| [x[0].min(y[0]), x[1].max(y[1])]).collect())
    else {
        return Ok(());
    };
    let meets = |m: &Rect, r: &Rect| m.iter().zip(r).all(|(a, b)| a[0] <= b[1] && b[0] <= a[1]);
    // Many pieces (point reads, many ranges): tiles are chosen by the pieces' bounding box.
    let overlaps = |m: &Rect| if pieces.len() > 16 { meets(m, &bbox) } else { pieces.iter().any(|(r, _)| meets(m, r)) };
    // Point reads look cells up by their coordinates instead of testing every point.
    let point_places: Option<FastMap<Vec<u64>, Vec<u64>>> =
        (pieces.len() > 16 && pieces.iter().all(|(r, _)| r.iter().all(|b| b[0] == b[1]))).then(|| {
            let mut m: FastMap<Vec<u64>, Vec<u64>> = FastMap::default();
            for (r, dst) in &pieces {
                m.entry(r.iter().map(|b| b[0]).collect()).or_default().push(dst.offset);
            }
            m
        });
    // Small fragments' cells come from the update index, the others' from their tiles.
    let index = update_index(array)?;
    let mut tiles: Vec<TileKey> = Vec::new();
    for (fi, f) in frags.iter().enumerate() {
        if let Some(sp) = f.sparse.as_ref().filter(|_| !index.as_ref().is_some_and(|ix| ix.covers(fi))) {
            tiles.extend(sp.rtree.search(&sp.mbrs, overlaps).into_iter().map(|t| (fi, t as u64)));
        }
    }
    // Every sparse cell inside the run (its coordinates in `hit_coords`, `nd` per hit).
    let mut hits: Vec<Hit> = Vec::new();
    let mut hit_coords: Vec<u64> = Vec::new();
    let place = |hits: &mut Vec<Hit>, hit_coords: &mut Vec<u64>, key: TileKey, c: u32, p: &[u64], at_index: u32| {
        let mut add = |at: u64| {
            hits.push(Hit { dst: at, frag: key.0, tile: key.1, cell: c, at: at_index });
            hit_coords.extend_from_slice(p);
        };
        if let Some(places) = &point_places {
            for &at in places.get(p).map_or(&[][..], Vec::as_slice) {
                add(at);
            }
            return;
        }
        for (rect, dst) in &pieces {
            if inside(p, rect) {
                // No break: with overlapping query ranges one cell has several result places.
                add(dst.offset + p.iter().zip(rect).zip(&dst.strides).map(|((x, r), s)| (x - r[0]) * s).sum::<u64>());
            }
        }
    };
    if let Some(ix) = &index {
        // Cells with equal coordinates are neighbours in the index: only the newest one of each
        // takes part, so the index's hits hold each result place once.
        let found = ix.cells_in_box(&bbox);
        let mut p = vec![0u64; nd];
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
            place(&mut hits, &mut hit_coords, (f as usize, u64::from(t)), c, &p, best as u32);
        }
    }
    let from_index = hits.len();
    let requests: Vec<(TileKey, usize)> = tiles.iter().flat_map(|&k| (0..nd).map(move |d| (k, d))).collect();
    let coords = fetch_tiles(array, &specs, &requests)?;
    let dims = &schema.dims;
    for &key in &tiles {
        let raw: Vec<&[u8]> = (0..nd).map(|d| coords.get(&(key, d)).map_or(&[][..], |b| &b[..])).collect();
        // Most cells of an update fragment lie outside the run: they are dropped on the stored
        // values, and only the rest become ordinals (which checks them against the domain).
        let near = cells_in_box(dims, &raw, &bbox);
        if near.is_empty() {
            continue;
        }
        let cols: Vec<Vec<u64>> = (0..nd)
            .map(|d| {
                ordinals_at(&dims[d], raw[d], &near).map_err(|b| {
                    Error::corrupt(
                        array.fragment_dir(key.0).join(&specs[d].name),
                        format!("tile {}: coordinate {} of cell {} {}", key.1, b.value, b.cell, b.why),
                    )
                })
            })
            .collect::<Result<_>>()?;
        let mut p = vec![0u64; nd];
        for (k, &c) in near.iter().enumerate() {
            for (x, col) in p.iter_mut().zip(&cols) {
                *x = col[k];
            }
            place(&mut hits, &mut hit_coords, key, c, &p, NOT_INDEXED);
        }
    }
    if hits.is_empty() {
        return Ok(());
    }
    // The newest sparse cell per result position (only cells found in tiles can repeat a place
    // the index's hits or each other hold), if newer than the dense fragment there.
    let mut chosen: Vec<u32> = (0..hits.len() as u32).collect();
    if hits.len() > from_index {
        let mut order: Vec<(u64, usize, u32)> =
            hits.iter().enumerate().map(|(i, h)| (h.dst, usize::MAX - h.frag, i as u32)).collect();
        order.sort_unstable();
        order.dedup_by_key(|o| o.0);
        chosen = order.into_iter().map(|o| o.2).collect();
    }
    // What the dense plan put there came from the newest dense fragment holding the cell or the
    // newest deleted rectangle covering it.
    // Only dense and delete fragments can provide a cell; there are usually few of them.
    let providers: Vec<usize> =
        (0..frags.len()).rev().filter(|&i| frags[i].is_dense() || frags[i].is_delete()).collect();
    let provider = |p: &[u64]| {
        providers
            .iter()
            .copied()
            .find(|&i| (frags[i].is_dense() && inside(p, &frags[i].domain)) || frags[i].rect_deletes(p))
    };
    let winners: Vec<Hit> = chosen
        .into_iter()
        .map(|i| i as usize)
        .filter(|&i| provider(&hit_coords[i * nd..i * nd + nd]).is_none_or(|f| hits[i].frag > f))
        .map(|i| hits[i])
        .collect();
    // Deleted points show the fill value.
    let (deleted, winners): (Vec<Hit>, Vec<Hit>) = winners.into_iter().partition(|h| frags[h.frag].is_delete());
    fill_deleted(array, &deleted, sinks);
    if winners.is_empty() {
        return Ok(());
    }
    // Attribute tiles of the winners whose values the update index does not hold.
    let values = |attr: usize| index.as_ref().and_then(|ix| ix.values_of(attr));
    let all_in_index = sinks.iter().all(|s| values(s.attr).is_some());
    let mut keys: Vec<TileKey> =
        winners.iter().filter(|h| h.at == NOT_INDEXED || !all_in_index).map(|h| (h.frag, h.tile)).collect();
    keys.sort_unstable();
    keys.dedup();
    let file_of = |attr: usize, kind: FileKind| specs.iter().position(|s| s.attr == attr && s.kind == kind);
    let mut requests = Vec::new();
    for s in sinks.iter() {
        for kind in [FileKind::Data, FileKind::Offsets, FileKind::Validity] {
            if let Some(f) = file_of(s.attr, kind) {
                requests.extend(keys.iter().map(|&k| (k, f)));
            }
        }
    }
    let tiles = fetch_tiles(array, &specs, &requests)?;
    for s in sinks.iter_mut() {
        let a = &schema.attrs[s.attr];
        let get = |k: TileKey, kind| file_of(s.attr, kind).and_then(|f| tiles.get(&(k, f)));
        let corrupt = |k: TileKey| {
            Error::corrupt(
                array.uri.join(FRAGMENTS_DIR).join(frags[k.0].name.to_string()),
                format!("tile {}: attribute {} tile missing or too short", k.1, a.name),
            )
        };
        let in_index = values(s.attr).filter(|_| all_in_index);
        match &mut s.data {
            DataSink::Fixed(buf) => {
                let cs = a.cell_size();
                for h in &winners {
                    let k = (h.frag, h.tile);
                    let (src, from) = match in_index.filter(|_| h.at != NOT_INDEXED) {
                        Some((data, _)) => (data, h.at as usize * cs),
                        None => (&get(k, FileKind::Data).ok_or_else(|| corrupt(k))?[..], h.cell as usize * cs),
                    };
                    let to = h.dst as usize * cs;
                    if from + cs > src.len() {
                        return Err(corrupt(k));
                    }
                    buf[to..to + cs].copy_from_slice(&src[from..from + cs]);
                }
                count_copied(false, (winners.len() * cs) as u64);
            }
            DataSink::Var { refs, blobs } => {
                let mut blob_of: FastMap<TileKey, u32> = FastMap::default();
                let mut copied = 0u64;
                for h in &winners {
                    let k = (h.frag, h.tile);
                    let data = get(k, FileKind::Data).ok_or_else(|| corrupt(k))?;
                    let offs = get(k, FileKind::Offsets).ok_or_else(|| corrupt(k))?;
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
            }
        }
        if let Some(v) = s.validity.as_deref_mut() {
            for h in &winners {
                let k = (h.frag, h.tile);
                let (src, at) = match in_index.and_then(|(_, valid)| valid).filter(|_| h.at != NOT_INDEXED) {
                    Some(valid) => (valid, h.at as usize),
                    None => (&get(k, FileKind::Validity).ok_or_else(|| corrupt(k))?[..], h.cell as usize),
                };
                v[h.dst as usize] = *src.get(at).ok_or_else(|| corrupt(k))?;
            }
        }
    }
    Ok(())
}
