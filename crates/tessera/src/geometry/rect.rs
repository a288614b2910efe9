//! Inclusive hyper-rectangles over normalized coordinates, and orders of their cells.

use crate::schema::CellOrder;

/// An inclusive hyper-rectangle: `[lo, hi]` per dimension.
pub(crate) type Rect = Vec<[u64; 2]>;

/// Number of cells in `r`, a rectangle known to hold fewer than 2^64 (a piece of a result, of a
/// tile, or of a checked subarray).
pub(crate) fn cells(r: &[[u64; 2]]) -> u64 {
    r.iter().map(|[lo, hi]| hi - lo + 1).product()
}

/// Number of cells in `r`, or `None` when that is 2^64 or more. Each side holds at most
/// 2^64 - 1 cells (normalized coordinates stop at 2^64 - 2).
pub(crate) fn checked_cells(r: &[[u64; 2]]) -> Option<u64> {
    r.iter().try_fold(1u64, |acc, [lo, hi]| acc.checked_mul((hi - lo).checked_add(1)?))
}

/// Whether two rectangles share a cell.
pub(crate) fn meet(a: &[[u64; 2]], b: &[[u64; 2]]) -> bool {
    a.iter().zip(b).all(|(x, y)| x[0] <= y[1] && y[0] <= x[1])
}

/// Whether every cell of `a` is in `b`.
pub(crate) fn within(a: &[[u64; 2]], b: &[[u64; 2]]) -> bool {
    a.iter().zip(b).all(|(x, y)| y[0] <= x[0] && x[1] <= y[1])
}

/// The intersection of two rectangles, if not empty.
pub(crate) fn intersect(a: &[[u64; 2]], b: &[[u64; 2]]) -> Option<Rect> {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let lo = x[0].max(y[0]);
            let hi = x[1].min(y[1]);
            (lo <= hi).then_some([lo, hi])
        })
        .collect()
}

/// The smallest rectangle holding every rectangle of `rects`, or `None` if there is none.
pub(crate) fn bounding_box<'a>(mut rects: impl Iterator<Item = &'a Rect>) -> Option<Rect> {
    let mut acc = rects.next()?.clone();
    for r in rects {
        for (a, b) in acc.iter_mut().zip(r) {
            a[0] = a[0].min(b[0]);
            a[1] = a[1].max(b[1]);
        }
    }
    Some(acc)
}

/// `a` minus `b` as at most `2 * ndim` disjoint rectangles.
pub(crate) fn subtract(a: &[[u64; 2]], b: &[[u64; 2]]) -> Vec<Rect> {
    let Some(inner) = intersect(a, b) else {
        return vec![a.to_vec()];
    };
    let mut out = Vec::new();
    let mut rest = a.to_vec();
    for d in 0..a.len() {
        if rest[d][0] < inner[d][0] {
            let mut piece = rest.clone();
            piece[d] = [rest[d][0], inner[d][0] - 1];
            out.push(piece);
        }
        if rest[d][1] > inner[d][1] {
            let mut piece = rest.clone();
            piece[d] = [inner[d][1] + 1, rest[d][1]];
            out.push(piece);
        }
        rest[d] = inner[d];
    }
    out
}

/// Element strides of a box of `shape` whose cells are laid out in `order`. Curve orders give
/// row-major strides: inside the engine a tile's cells are row-major, and only stored tiles
/// follow the curve (`order.rs`). The running product saturates: a sparse space tile may hold
/// more than 2^64 cells (its strides are never used to address cells), while dense tiles hold at
/// most 2^34 cells and every other box is a result or a tile range, both bounded below 2^64.
pub(crate) fn strides(shape: &[u64], order: CellOrder) -> super::Dims {
    let n = shape.len();
    let mut s = super::Dims::from_elem(0, n);
    let mut acc = 1u64;
    match order {
        CellOrder::RowMajor | CellOrder::Hilbert | CellOrder::Z => {
            for d in (0..n).rev() {
                s[d] = acc;
                acc = acc.saturating_mul(shape[d]);
            }
        }
        CellOrder::ColMajor => {
            for d in 0..n {
                s[d] = acc;
                acc = acc.saturating_mul(shape[d]);
            }
        }
    }
    s
}

/// Splits the cells `[c0, c1)` of a box of `shape` (enumerated in `order`) into at most
/// `2 * ndim - 1` sub-boxes, returned as rectangles relative to the box, in enumeration order
/// (curve orders enumerate row-major, as [`strides`]).
pub(crate) fn split_interval(shape: &[u64], order: CellOrder, c0: u64, c1: u64) -> Vec<Rect> {
    let n = shape.len();
    // Dimensions from slowest to fastest.
    let dims: Vec<usize> = match order {
        CellOrder::RowMajor | CellOrder::Hilbert | CellOrder::Z => (0..n).collect(),
        CellOrder::ColMajor => (0..n).rev().collect(),
    };
    let mut out = Vec::new();
    if c0 >= c1 {
        return out;
    }
    let mut prefix = vec![[0u64, 0u64]; n];
    split_rec(shape, &dims, 0, &mut prefix, c0, c1, &mut out);
    out
}

fn split_rec(shape: &[u64], dims: &[usize], k: usize, prefix: &mut Rect, c0: u64, c1: u64, out: &mut Vec<Rect>) {
    let full: u64 = dims[k..].iter().map(|&d| shape[d]).product();
    let whole = |prefix: &Rect, from: usize| {
        let mut r = prefix.clone();
        for &d in &dims[from..] {
            r[d] = [0, shape[d] - 1];
        }
        r
    };
    if c0 == 0 && c1 == full {
        out.push(whole(prefix, k));
        return;
    }
    let d = dims[k];
    let inner = full / shape[d];
    let i0 = c0 / inner;
    let i1 = (c1 - 1) / inner;
    if i0 == i1 {
        prefix[d] = [i0, i0];
        split_rec(shape, dims, k + 1, prefix, c0 - i0 * inner, c1 - i0 * inner, out);
        return;
    }
    let mut start = i0;
    if !c0.is_multiple_of(inner) {
        prefix[d] = [i0, i0];
        split_rec(shape, dims, k + 1, prefix, c0 % inner, inner, out);
        start = i0 + 1;
    }
    let end = if !c1.is_multiple_of(inner) { i1 } else { i1 + 1 };
    if start < end {
        prefix[d] = [start, end - 1];
        out.push(whole(prefix, k + 1));
    }
    if !c1.is_multiple_of(inner) {
        prefix[d] = [i1, i1];
        split_rec(shape, dims, k + 1, prefix, 0, c1 - i1 * inner, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enumerate(shape: &[u64], order: CellOrder) -> Vec<Vec<u64>> {
        // All coordinates in order, by brute force.
        let n = shape.len();
        let total = shape.iter().product::<u64>();
        let st = strides(shape, order);
        let mut v = vec![vec![0u64; n]; total as usize];
        let mut idx = vec![0u64; n];
        for _ in 0..total {
            let lin: u64 = idx.iter().zip(&st).map(|(i, s)| i * s).sum();
            v[lin as usize] = idx.clone();
            for d in (0..n).rev() {
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
        v
    }

    proptest! {
        #[test]
        fn split_interval_covers_exactly_the_run(
            shape in prop::collection::vec(1u64..5, 1..4),
            a in 0u64..200, b in 0u64..200, col in any::<bool>()
        ) {
            let order = if col { CellOrder::ColMajor } else { CellOrder::RowMajor };
            let total = shape.iter().product::<u64>();
            let (c0, c1) = (a.min(b) % (total + 1), a.max(b) % (total + 1));
            let (c0, c1) = (c0.min(c1), c0.max(c1));
            let boxes = split_interval(&shape, order, c0, c1);
            prop_assert!(boxes.len() <= 2 * shape.len());
            let all = enumerate(&shape, order);
            let mut got = Vec::new();
            for b in &boxes {
                // cells of each box in order must be consecutive in the enumeration
                for c in enumerate(&b.iter().map(|r| r[1] - r[0] + 1).collect::<Vec<_>>(), order) {
                    got.push(c.iter().zip(b).map(|(x, r)| x + r[0]).collect::<Vec<_>>());
                }
            }
            prop_assert_eq!(got, all[c0 as usize..c1 as usize].to_vec());
        }

        #[test]
        fn subtract_partitions(a in prop::collection::vec((0u64..6, 0u64..6), 1..4),
                               b in prop::collection::vec((0u64..6, 0u64..6), 1..4)) {
            let n = a.len().min(b.len());
            let ra: Rect = a[..n].iter().map(|&(x, y)| [x.min(y), x.max(y)]).collect();
            let rb: Rect = b[..n].iter().map(|&(x, y)| [x.min(y), x.max(y)]).collect();
            let parts = subtract(&ra, &rb);
            let inter = intersect(&ra, &rb).map_or(0, |r| cells(&r));
            prop_assert_eq!(parts.iter().map(|p| cells(p)).sum::<u64>() + inter, cells(&ra));
            for (i, p) in parts.iter().enumerate() {
                prop_assert!(intersect(p, &rb).is_none());
                let inside = intersect(p, &ra);
                prop_assert_eq!(inside.as_ref(), Some(p));
                for q in &parts[i + 1..] {
                    prop_assert!(intersect(p, q).is_none());
                }
            }
        }
    }
}
