//! Copying a box of cells between two buffers that lay it out with different strides. Runs that
//! are contiguous on both sides (after merging dimensions that line up) move with one
//! `memcpy` each; only a true transpose falls back to element-by-element moves. Destinations may
//! be uninitialized (result columns are not zeroed first): copies and fills only write.

use crate::uninit::{write_bytes, OutBytes};

/// One number per dimension (a box's shape, a buffer's strides), inline for up to four
/// dimensions: a plan of many small copies (point reads) allocates nothing per copy.
pub(crate) type Dims = smallvec::SmallVec<[u64; 4]>;

/// Where a box's first cell sits in a buffer and how far apart its neighbours are, in elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Strided {
    /// Element offset of the box's first cell.
    pub offset: u64,
    /// Element stride per dimension.
    pub strides: Dims,
}

/// A dimension of the copy after sorting and merging: extent and the two strides.
#[derive(Clone, Copy)]
struct Axis {
    n: u64,
    s: u64,
    d: u64,
}

fn axes(shape: &[u64], src: &[u64], dst: &[u64]) -> Vec<Axis> {
    let mut ax: Vec<Axis> =
        (0..shape.len()).filter(|&i| shape[i] > 1).map(|i| Axis { n: shape[i], s: src[i], d: dst[i] }).collect();
    // Fastest destination dimension first.
    ax.sort_by_key(|a| (a.d, a.s));
    let mut merged: Vec<Axis> = Vec::with_capacity(ax.len());
    for a in ax {
        if let Some(last) = merged.last_mut() {
            if last.n * last.d == a.d && last.n * last.s == a.s {
                last.n *= a.n;
                continue;
            }
        }
        merged.push(a);
    }
    merged
}

/// Visits every combination of the outer axes (all but the first), passing the source and
/// destination element offsets of each.
fn for_each_outer(outer: &[Axis], s0: u64, d0: u64, mut f: impl FnMut(u64, u64)) {
    let total: u64 = outer.iter().map(|a| a.n).product();
    let mut idx = vec![0u64; outer.len()];
    let (mut so, mut dof) = (s0, d0);
    for _ in 0..total {
        f(so, dof);
        for (k, a) in outer.iter().enumerate() {
            idx[k] += 1;
            so += a.s;
            dof += a.d;
            if idx[k] < a.n {
                break;
            }
            idx[k] = 0;
            so -= a.s * a.n;
            dof -= a.d * a.n;
        }
    }
}

/// Copies the cells of a box of `shape` from `src` to `dst`; `elem` is the cell size in bytes.
/// The caller guarantees both layouts stay inside their buffers.
pub(crate) fn copy_strided(elem: usize, shape: &[u64], src: &[u8], s: &Strided, dst: OutBytes<'_>, d: &Strided) {
    if shape.contains(&0) {
        return;
    }
    let ax = axes(shape, &s.strides, &d.strides);
    let e = elem as u64;
    match ax.first() {
        None => {
            let (so, dof) = ((s.offset * e) as usize, (d.offset * e) as usize);
            write_bytes(&mut dst[dof..dof + elem], &src[so..so + elem]);
        }
        Some(a) if a.s == 1 && a.d == 1 => {
            let run = (a.n * e) as usize;
            for_each_outer(&ax[1..], s.offset, d.offset, |so, dof| {
                let (so, dof) = ((so * e) as usize, (dof * e) as usize);
                write_bytes(&mut dst[dof..dof + run], &src[so..so + run]);
            });
        }
        Some(&a) => match elem {
            1 => transpose::<1>(a, &ax[1..], src, s.offset, dst, d.offset),
            2 => transpose::<2>(a, &ax[1..], src, s.offset, dst, d.offset),
            4 => transpose::<4>(a, &ax[1..], src, s.offset, dst, d.offset),
            8 => transpose::<8>(a, &ax[1..], src, s.offset, dst, d.offset),
            16 => transpose::<16>(a, &ax[1..], src, s.offset, dst, d.offset),
            _ => for_each_outer(&ax[1..], s.offset, d.offset, |so, dof| {
                for i in 0..a.n {
                    let si = ((so + i * a.s) * e) as usize;
                    let di = ((dof + i * a.d) * e) as usize;
                    write_bytes(&mut dst[di..di + elem], &src[si..si + elem]);
                }
            }),
        },
    }
}

fn transpose<const N: usize>(a: Axis, outer: &[Axis], src: &[u8], s0: u64, dst: OutBytes<'_>, d0: u64) {
    for_each_outer(outer, s0, d0, |so, dof| {
        let (sstep, dstep) = (a.s as usize * N, a.d as usize * N);
        let (mut si, mut di) = (so as usize * N, dof as usize * N);
        for _ in 0..a.n {
            let v: [u8; N] = src[si..si + N].try_into().unwrap_or([0; N]);
            write_bytes(&mut dst[di..di + N], &v);
            si += sstep;
            di += dstep;
        }
    });
}

/// The contiguous runs of a box copied from `s` to `d`, as `(src_byte, dst_byte, len)` in
/// destination order, or `None` when the copy is a transpose (no run longer than one cell).
pub(crate) fn contiguous_runs(
    elem: usize,
    shape: &[u64],
    s: &Strided,
    d: &Strided,
) -> Option<Vec<(usize, usize, usize)>> {
    if shape.contains(&0) {
        return Some(Vec::new());
    }
    let ax = axes(shape, &s.strides, &d.strides);
    let e = elem as u64;
    let (run, outer) = match ax.first() {
        None => (1, &ax[..0]),
        Some(a) if a.s == 1 && a.d == 1 => (a.n, &ax[1..]),
        Some(_) => return None,
    };
    let mut out = Vec::new();
    for_each_outer(outer, s.offset, d.offset, |so, dof| {
        out.push(((so * e) as usize, (dof * e) as usize, (run * e) as usize));
    });
    Some(out)
}

/// Calls `f(src_index, dst_index)` for every cell of a box of `shape`, in destination order
/// (used for variable-length cells, whose bytes cannot be moved as strided runs).
pub(crate) fn for_each_cell_pair(shape: &[u64], s: &Strided, d: &Strided, mut f: impl FnMut(u64, u64)) {
    if shape.contains(&0) {
        return;
    }
    let ax = axes(shape, &s.strides, &d.strides);
    match ax.first() {
        None => f(s.offset, d.offset),
        Some(&a) => for_each_outer(&ax[1..], s.offset, d.offset, |so, dof| {
            for i in 0..a.n {
                f(so + i * a.s, dof + i * a.d);
            }
        }),
    }
}

/// Writes `value` (one cell's bytes) into every cell of a box of `shape` laid out as `d`.
pub(crate) fn fill_strided(value: &[u8], shape: &[u64], dst: OutBytes<'_>, d: &Strided) {
    if shape.contains(&0) {
        return;
    }
    let e = value.len() as u64;
    let ax = axes(shape, &d.strides, &d.strides);
    let (run_cells, outer) = match ax.first() {
        Some(a) if a.d == 1 => (a.n, &ax[1..]),
        _ => (1, &ax[..]),
    };
    let pattern: Vec<u8> = value.repeat(run_cells as usize);
    for_each_outer(outer, 0, d.offset, |_, dof| {
        let at = (dof * e) as usize;
        write_bytes(&mut dst[at..at + pattern.len()], &pattern);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::strides;
    use crate::schema::CellOrder;
    use crate::uninit::as_uninit;
    use proptest::prelude::*;

    /// Reference: moves cell by cell using explicit coordinates.
    fn naive(elem: usize, shape: &[u64], src: &[u8], s: &Strided, dst: &mut [u8], d: &Strided) {
        let total: u64 = shape.iter().product();
        let mut idx = vec![0u64; shape.len()];
        for _ in 0..total {
            let so = s.offset + idx.iter().zip(&s.strides).map(|(i, st)| i * st).sum::<u64>();
            let dof = d.offset + idx.iter().zip(&d.strides).map(|(i, st)| i * st).sum::<u64>();
            let (so, dof) = (so as usize * elem, dof as usize * elem);
            dst[dof..dof + elem].copy_from_slice(&src[so..so + elem]);
            for k in 0..shape.len() {
                idx[k] += 1;
                if idx[k] < shape[k] {
                    break;
                }
                idx[k] = 0;
            }
        }
    }

    proptest! {
        #[test]
        fn copy_matches_cell_by_cell(
            frame in prop::collection::vec(1u64..6, 1..4),
            lo_frac in prop::collection::vec(0u64..6, 4),
            elem in prop::sample::select(vec![1usize, 2, 3, 4, 8, 16]),
            src_col in any::<bool>(), dst_col in any::<bool>(),
        ) {
            let n = frame.len();
            let lo: Vec<u64> = (0..n).map(|i| lo_frac[i] % frame[i]).collect();
            let shape: Vec<u64> = (0..n).map(|i| frame[i] - lo[i]).collect();
            let ord = |c| if c { CellOrder::ColMajor } else { CellOrder::RowMajor };
            let sst = strides(&frame, ord(src_col));
            let dst_st = strides(&shape, ord(dst_col));
            let s = Strided { offset: lo.iter().zip(&sst).map(|(a, b)| a * b).sum(), strides: sst };
            let d = Strided { offset: 0, strides: dst_st };
            let total = frame.iter().product::<u64>() as usize * elem;
            let src: Vec<u8> = (0..total).map(|i| (i * 7 + 3) as u8).collect();
            let out_len = shape.iter().product::<u64>() as usize * elem;
            let mut a = vec![0u8; out_len];
            let mut b = vec![0u8; out_len];
            copy_strided(elem, &shape, &src, &s, as_uninit(&mut a), &d);
            naive(elem, &shape, &src, &s, &mut b, &d);
            prop_assert_eq!(a, b);
        }

        #[test]
        fn fill_sets_exactly_the_box(frame in prop::collection::vec(1u64..6, 1..4), col in any::<bool>()) {
            let order = if col { CellOrder::ColMajor } else { CellOrder::RowMajor };
            let st = strides(&frame, order);
            let shape: Vec<u64> = frame.iter().map(|&f| f.div_ceil(2)).collect();
            let d = Strided { offset: 0, strides: st.clone() };
            let total = frame.iter().product::<u64>() as usize;
            let mut buf = vec![0u8; total * 2];
            fill_strided(&[0xAB, 0xCD], &shape, as_uninit(&mut buf), &d);
            let filled = buf.chunks(2).filter(|c| c == &[0xAB, 0xCD]).count();
            prop_assert_eq!(filled as u64, shape.iter().product::<u64>());
        }
    }
}
