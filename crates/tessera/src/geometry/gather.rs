//! Moving fixed-size cells into a new order: `out[k] = src[from[k]]` for cells of `row`
//! elements, copied as whole typed cells (one move per cell, not a loop over its bytes), in
//! parallel chunks on the current thread pool.

use rayon::prelude::*;

/// Cells per parallel task: a hand-over to the pool costs more than moving a few thousand.
const CHUNK: usize = 4096;

/// `out[k] = src[from[k]]` for cells of `row` elements of `src` (the cell `from[k]` is elements
/// `from[k] * row ..` of it). A cell `src` does not hold stays `T::default()`: callers index
/// cells they counted, so only a corrupt count can cause it, and it must not panic.
pub(crate) fn gather_cells<T: Copy + Default + Send + Sync>(src: &[T], row: usize, from: &[u32]) -> Vec<T> {
    match row {
        1 => typed::<T, 1>(src, from),
        2 => typed::<T, 2>(src, from),
        3 => typed::<T, 3>(src, from),
        4 => typed::<T, 4>(src, from),
        8 => typed::<T, 8>(src, from),
        16 => typed::<T, 16>(src, from),
        _ => {
            let row = row.max(1);
            let mut out = vec![T::default(); from.len() * row];
            out.par_chunks_mut(row * CHUNK).zip(from.par_chunks(CHUNK)).for_each(|(o, f)| {
                for (cell, &i) in o.chunks_exact_mut(row).zip(f) {
                    let at = i as usize * row;
                    if let Some(s) = src.get(at..at + row) {
                        cell.copy_from_slice(s);
                    }
                }
            });
            out
        }
    }
}

/// [`gather_cells`] for cells of `N` elements.
fn typed<T: Copy + Default + Send + Sync, const N: usize>(src: &[T], from: &[u32]) -> Vec<T> {
    let (cells, _) = src.as_chunks::<N>();
    let mut out = vec![[T::default(); N]; from.len()];
    out.par_chunks_mut(CHUNK).zip(from.par_chunks(CHUNK)).for_each(|(o, f)| {
        for (cell, &i) in o.iter_mut().zip(f) {
            if let Some(s) = cells.get(i as usize) {
                *cell = *s;
            }
        }
    });
    out.into_flattened()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_of_every_width_land_where_from_says() {
        for row in [1usize, 2, 3, 4, 5, 8, 16] {
            let cells = 10_000usize;
            let src: Vec<u64> = (0..(cells * row) as u64).collect();
            let from: Vec<u32> = (0..cells as u32).rev().step_by(3).collect();
            let out = gather_cells(&src, row, &from);
            let want: Vec<u64> = from.iter().flat_map(|&i| src[i as usize * row..][..row].iter().copied()).collect();
            assert_eq!(out, want, "row {row}");
        }
    }

    #[test]
    fn a_cell_out_of_range_stays_default() {
        assert_eq!(gather_cells(&[7u8, 8, 9, 10], 2, &[1, 5, 0]), vec![9, 10, 0, 0, 7, 8]);
        assert_eq!(gather_cells(&[7u8, 8, 9], 3, &[1]), vec![0, 0, 0]);
        assert_eq!(gather_cells(&[1u32, 2, 3, 4, 5], 5, &[0, 1]), vec![1, 2, 3, 4, 5, 0, 0, 0, 0, 0]);
    }
}
