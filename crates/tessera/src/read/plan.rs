//! Read planning (pure): which cells of which tile of which fragment go where in the result.
//!
//! A run of result cells `[c0, c1)` is split into boxes of the result's index space; each box is
//! mapped to domain coordinates, cut by space tiles, and each piece is resolved against the
//! fragments from newest to oldest: the part a fragment's non-empty domain covers is copied from
//! it and subtracted, so every result cell is copied exactly once, from the newest fragment that
//! holds it, and a fragment whose cells are all hidden by newer ones is never read. Cells no
//! fragment holds get the fill value. Sparse fragments of dense arrays (random updates) are laid
//! over the result afterwards (`overlay.rs`).

use crate::fast_hash::FastMap;
use crate::fragment::FragmentMetadata;
use crate::geometry::Layout;
use crate::geometry::{cells, intersect, split_interval, strides, subtract, Dims, Rect, Strided, TileGrid};
use crate::schema::CellOrder;

/// Copy a box from one tile of one fragment into the result.
#[derive(Debug, Clone)]
pub(crate) struct CopyOp {
    pub frag: usize,
    pub tile: u64,
    pub shape: Dims,
    pub src: Strided,
    pub dst: Strided,
}

/// Fill a box of the result with the fill value.
#[derive(Debug, Clone)]
pub(crate) struct FillOp {
    pub shape: Dims,
    pub dst: Strided,
}

/// The result space of a query.
#[derive(Debug, Clone)]
pub(crate) struct ResultSpace {
    pub layout: Layout,
    /// Normalized ranges per dimension.
    pub ranges: Vec<Vec<[u64; 2]>>,
    /// Cells per dimension (sum of range lengths).
    pub shape: Vec<u64>,
    /// Point reads: per dimension, the normalized coordinate of each result cell (then
    /// `ranges` and `shape` are unused).
    pub points: Option<Vec<Vec<u64>>>,
}

impl ResultSpace {
    pub(crate) fn total(&self) -> u64 {
        match &self.points {
            Some(p) => p.first().map_or(0, Vec::len) as u64,
            None => self.shape.iter().product(),
        }
    }

    /// Splits result cells `[c0, c1)` into domain boxes with their place in a buffer that holds
    /// exactly those cells.
    pub(crate) fn pieces(&self, grid: &TileGrid, c0: u64, c1: u64) -> Vec<(Rect, Strided)> {
        if let Some(cols) = &self.points {
            // Each point is a one-cell box at its own place in the result.
            return (c0..c1)
                .map(|i| {
                    let rect = cols.iter().map(|c| [c[i as usize], c[i as usize]]).collect();
                    (rect, Strided { offset: i - c0, strides: Dims::from_elem(0, cols.len()) })
                })
                .collect();
        }
        let mut out = Vec::new();
        match self.layout {
            Layout::RowMajor | Layout::ColMajor => {
                let order = if self.layout == Layout::RowMajor { CellOrder::RowMajor } else { CellOrder::ColMajor };
                let st = strides(&self.shape, order);
                for ibox in split_interval(&self.shape, order, c0, c1) {
                    // Per dimension: (coordinate range, index of its first cell) pieces.
                    let per_dim: Vec<Vec<([u64; 2], u64)>> =
                        ibox.iter().zip(&self.ranges).map(|(ir, rs)| map_index_range(*ir, rs)).collect();
                    for_each_combination(&per_dim, |combo| {
                        let rect: Rect = combo.iter().map(|(r, _)| *r).collect();
                        let lin: u64 = combo.iter().zip(&st).map(|((_, i), s)| i * s).sum();
                        out.push((rect, Strided { offset: lin - c0, strides: st.clone() }));
                    });
                }
            }
            Layout::Global | Layout::Unordered => {
                let rect: Rect = self.ranges.iter().map(|r| r[0]).collect();
                let mut before = 0u64;
                for tc in grid.tiles_in(&grid.tile_range(&rect)) {
                    if before >= c1 {
                        break;
                    }
                    let Some(i) = intersect(&rect, &grid.tile_rect(&tc)) else { continue };
                    let nt = cells(&i);
                    if before + nt > c0 {
                        let (a, b) = (c0.max(before) - before, c1.min(before + nt) - before);
                        let shape: Vec<u64> = i.iter().map(|[x, y]| y - x + 1).collect();
                        let st = strides(&shape, grid.cell_order);
                        for bx in split_interval(&shape, grid.cell_order, a, b) {
                            let lo: u64 = bx.iter().zip(&st).map(|(r, s)| r[0] * s).sum();
                            let abs: Rect = bx.iter().zip(&i).map(|(r, o)| [r[0] + o[0], r[1] + o[0]]).collect();
                            out.push((abs, Strided { offset: before + lo - c0, strides: st.clone() }));
                        }
                    }
                    before += nt;
                }
            }
        }
        out
    }
}

/// Maps an inclusive index range of a dimension's concatenated ranges to coordinate pieces.
fn map_index_range(ir: [u64; 2], ranges: &[[u64; 2]]) -> Vec<([u64; 2], u64)> {
    let mut out = Vec::new();
    let mut start = 0u64;
    for r in ranges {
        let len = r[1] - r[0] + 1;
        let (lo, hi) = (ir[0].max(start), ir[1].min(start + len - 1));
        if lo <= hi {
            out.push(([r[0] + (lo - start), r[0] + (hi - start)], lo));
        }
        start += len;
        if start > ir[1] {
            break;
        }
    }
    out
}

fn for_each_combination<T: Copy>(per_dim: &[Vec<T>], mut f: impl FnMut(&[T])) {
    let n = per_dim.len();
    if per_dim.iter().any(Vec::is_empty) {
        return;
    }
    let mut idx = vec![0usize; n];
    let mut cur: Vec<T> = per_dim.iter().map(|v| v[0]).collect();
    loop {
        f(&cur);
        let mut d = n;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < per_dim[d].len() {
                cur[d] = per_dim[d][idx[d]];
                break;
            }
            idx[d] = 0;
            cur[d] = per_dim[d][0];
        }
    }
}

/// Plans the copies and fills that produce result cells `[c0, c1)`.
pub(crate) fn plan(
    space: &ResultSpace,
    grid: &TileGrid,
    fragments: &[FragmentMetadata],
    c0: u64,
    c1: u64,
) -> (Vec<CopyOp>, Vec<FillOp>) {
    if let Some(cols) = &space.points {
        return plan_points(cols, grid, fragments, c0, c1);
    }
    let mut ops = TilePlan { grid, fragments, copies: Vec::new(), fills: Vec::new() };
    let franges: Vec<Rect> = fragments.iter().map(|f| grid.tile_range(&f.domain)).collect();
    for (rect, dst) in space.pieces(grid, c0, c1) {
        for tc in grid.tiles_in(&grid.tile_range(&rect)) {
            let t = grid.tile_rect(&tc);
            let Some(q) = intersect(&rect, &t) else { continue };
            let piece = Piece { rect: &rect, dst: &dst, tile: &t, tc: &tc };
            ops.plan_tile(&piece, q, &franges);
        }
    }
    (ops.copies, ops.fills)
}

/// Plans point reads, result cells `[c0, c1)` (`cols`: per dimension, each point's normalized
/// coordinate): as `plan` of one-cell boxes, without their rectangle arithmetic. A point is
/// copied from the newest dense fragment whose domain holds it, unless a newer delete rectangle
/// holds it (fill value); a point no fragment holds takes the fill value. Copies are of one
/// cell, one dimension, grouped by tile (in result order within a tile), so that the executor
/// takes each tile's copies as they are.
fn plan_points(
    cols: &[Vec<u64>],
    grid: &TileGrid,
    fragments: &[FragmentMetadata],
    c0: u64,
    c1: u64,
) -> (Vec<CopyOp>, Vec<FillOp>) {
    let nd = cols.len();
    let franges: Vec<Rect> = fragments.iter().map(|f| grid.tile_range(&f.domain)).collect();
    // Tile strides of each fragment's tile range (row- or column-major tile orders).
    let fstrides: Vec<Dims> = franges
        .iter()
        .map(|r| strides(&r.iter().map(|[lo, hi]| hi - lo + 1).collect::<Vec<_>>(), grid.tile_order))
        .collect();
    let holds = |r: &Rect, p: &[u64]| r.iter().zip(p).all(|(b, x)| b[0] <= *x && *x <= b[1]);
    let one = |offset: u64| Strided { offset, strides: smallvec::smallvec![1] };
    // Each copied point's (group, tile, cell in the tile, result cell); groups are tiles in the
    // order first met.
    let mut found: Vec<(u32, u64, u64, u64)> = Vec::with_capacity((c1 - c0) as usize);
    let mut groups: FastMap<(usize, u64), u32> = FastMap::default();
    let mut group_keys: Vec<(usize, u64)> = Vec::new();
    let mut fills = Vec::new();
    let (mut p, mut tc, mut lo) = (vec![0u64; nd], vec![0u64; nd], vec![0u64; nd]);
    for i in c0..c1 {
        for d in 0..nd {
            p[d] = cols[d][i as usize];
            tc[d] = p[d] / grid.extents[d];
            lo[d] = tc[d] * grid.extents[d];
        }
        let mut from = None;
        for (fi, f) in fragments.iter().enumerate().rev() {
            if let Some(rects) = &f.deletes {
                if rects.iter().any(|r| holds(r, &p)) {
                    break;
                }
            } else if f.is_dense() && holds(&f.domain, &p) {
                from = Some(fi);
                break;
            }
        }
        let Some(fi) = from else {
            fills.push(FillOp { shape: smallvec::smallvec![1], dst: one(i - c0) });
            continue;
        };
        let tile = if grid.tile_curve.is_some() {
            grid.tile_index(&franges[fi], &tc)
        } else {
            tc.iter().zip(&franges[fi]).zip(&fstrides[fi]).map(|((t, r), s)| (t - r[0]) * s).sum()
        };
        let g = *groups.entry((fi, tile)).or_insert_with(|| {
            group_keys.push((fi, tile));
            (group_keys.len() - 1) as u32
        });
        found.push((g, tile, grid.cell_offset(&lo, &p), i - c0));
    }
    // Counting sort by group: each group's copies in one run, in result order.
    let mut starts = vec![0usize; group_keys.len() + 1];
    for f in &found {
        starts[f.0 as usize + 1] += 1;
    }
    for g in 0..group_keys.len() {
        starts[g + 1] += starts[g];
    }
    let mut order = vec![0u32; found.len()];
    for (k, f) in found.iter().enumerate() {
        let at = &mut starts[f.0 as usize];
        order[*at] = k as u32;
        *at += 1;
    }
    let copies = order
        .iter()
        .map(|&k| {
            let (g, tile, src, dst) = found[k as usize];
            let frag = group_keys[g as usize].0;
            CopyOp { frag, tile, shape: smallvec::smallvec![1], src: one(src), dst: one(dst) }
        })
        .collect();
    (copies, fills)
}

/// The part of one result piece inside one space tile.
struct Piece<'a> {
    /// The piece's box and its place in the result.
    rect: &'a Rect,
    dst: &'a Strided,
    /// The space tile's box and coordinates.
    tile: &'a Rect,
    tc: &'a [u64],
}

impl Piece<'_> {
    /// The result place of box `b` (inside the piece).
    fn at(&self, b: &Rect) -> Strided {
        Strided {
            offset: self.dst.offset
                + b.iter().zip(self.rect).zip(&self.dst.strides).map(|((x, r), s)| (x[0] - r[0]) * s).sum::<u64>(),
            strides: self.dst.strides.clone(),
        }
    }
}

fn shape_of(b: &Rect) -> Dims {
    b.iter().map(|[x, y]| y - x + 1).collect()
}

/// The copies and fills planned so far.
struct TilePlan<'a> {
    grid: &'a TileGrid,
    fragments: &'a [FragmentMetadata],
    copies: Vec<CopyOp>,
    fills: Vec<FillOp>,
}

impl TilePlan<'_> {
    /// Plans box `q` of a piece inside one space tile: fragments newest first each take what
    /// is still uncovered of it (deleted rectangles fill), the rest takes the fill value.
    fn plan_tile(&mut self, piece: &Piece<'_>, q: Rect, franges: &[Rect]) {
        let mut uncovered = vec![q];
        for (fi, f) in self.fragments.iter().enumerate().rev() {
            if uncovered.is_empty() {
                break;
            }
            if let Some(rects) = &f.deletes {
                // Deleted rectangles show the fill value (deleted points: see overlay).
                uncovered = self.fill_deleted(piece, uncovered, rects);
            } else if f.is_dense() {
                // Sparse fragments (random updates) are laid over the result afterwards.
                uncovered = self.copy_from(piece, uncovered, fi, &franges[fi]);
            }
        }
        for u in uncovered {
            self.fills.push(FillOp { shape: shape_of(&u), dst: piece.at(&u) });
        }
    }

    /// Fills the parts of `uncovered` inside the deleted rectangles `rects`; returns the rest.
    fn fill_deleted(&mut self, piece: &Piece<'_>, uncovered: Vec<Rect>, rects: &[Rect]) -> Vec<Rect> {
        let mut next = Vec::with_capacity(uncovered.len());
        for u in uncovered {
            let mut parts = vec![u];
            for r in rects {
                let mut rest = Vec::with_capacity(parts.len());
                for p in parts {
                    match intersect(&p, r) {
                        Some(i) => {
                            self.fills.push(FillOp { shape: shape_of(&i), dst: piece.at(&i) });
                            rest.extend(subtract(&p, r));
                        }
                        None => rest.push(p),
                    }
                }
                parts = rest;
            }
            next.extend(parts);
        }
        next
    }

    /// Copies the parts of `uncovered` that dense fragment `fi` (tile range `frange`) holds;
    /// returns the rest.
    fn copy_from(&mut self, piece: &Piece<'_>, uncovered: Vec<Rect>, fi: usize, frange: &Rect) -> Vec<Rect> {
        let (grid, domain) = (self.grid, &self.fragments[fi].domain);
        let mut next = Vec::with_capacity(uncovered.len());
        for u in uncovered {
            match intersect(&u, domain) {
                Some(i) => {
                    let first: Vec<u64> = i.iter().map(|r| r[0]).collect();
                    let tile_first: Vec<u64> = piece.tile.iter().map(|r| r[0]).collect();
                    self.copies.push(CopyOp {
                        frag: fi,
                        tile: grid.tile_index(frange, piece.tc),
                        shape: shape_of(&i),
                        src: Strided {
                            offset: grid.cell_offset(&tile_first, &first),
                            strides: grid.cell_strides.clone(),
                        },
                        dst: piece.at(&i),
                    });
                    next.extend(subtract(&u, domain));
                }
                None => next.push(u),
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_ranges_map_to_coordinates() {
        let ranges = [[10, 12], [20, 20], [30, 33]];
        assert_eq!(map_index_range([0, 7], &ranges), vec![([10, 12], 0), ([20, 20], 3), ([30, 33], 4)]);
        assert_eq!(map_index_range([2, 4], &ranges), vec![([12, 12], 2), ([20, 20], 3), ([30, 30], 4)]);
        assert_eq!(map_index_range([5, 6], &ranges), vec![([31, 32], 5)]);
    }
}
