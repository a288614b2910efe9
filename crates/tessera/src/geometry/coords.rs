//! Coordinates of sparse cells. A coordinate column holds one value per cell in the dimension's
//! type. Inside the engine each value becomes an *ordinal*, a `u64` that orders like the value:
//! `x - domain.lo` for integers, and for floats the IEEE bits mapped so that unsigned order is
//! numeric order (`b = bits(x as f64)`: `!b` when the sign is set, else `b | 1 << 63`; -0.0 is
//! stored as +0.0). Ordinals give the global order of cells (space tiles in tile order, then the
//! cell order, or a Hilbert curve) and the MBRs of data tiles (docs/format.md, "Sparse
//! fragments").

use rayon::prelude::*;

use crate::schema::{ArraySchema, CellOrder, Datatype, Dimension};

/// Why a coordinate is not accepted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct BadCoord {
    /// Cell index in the column.
    pub cell: usize,
    /// The value as text.
    pub value: String,
    /// What is wrong.
    pub why: &'static str,
}

/// Maps a float to its order-preserving ordinal.
pub(crate) fn float_ordinal(x: f64) -> u64 {
    let x = if x == 0.0 { 0.0 } else { x };
    let b = x.to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | (1 << 63)
    }
}

/// Inverse of [`float_ordinal`].
pub(crate) fn ordinal_float(o: u64) -> f64 {
    if o >> 63 == 1 {
        f64::from_bits(o & !(1 << 63))
    } else {
        f64::from_bits(!o)
    }
}

/// Reads value `i` of a little-endian column of `dt` as f64 (floats) or i128 (integers).
fn int_at(dt: Datatype, col: &[u8], i: usize) -> i128 {
    let s = dt.size();
    let b = &col[i * s..i * s + s];
    match dt {
        Datatype::Int8 => i128::from(b[0] as i8),
        Datatype::Int16 => i128::from(i16::from_le_bytes([b[0], b[1]])),
        Datatype::Int32 => i128::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        Datatype::Int64 => i128::from(i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
        Datatype::UInt8 => i128::from(b[0]),
        Datatype::UInt16 => i128::from(u16::from_le_bytes([b[0], b[1]])),
        Datatype::UInt32 => i128::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        _ => i128::from(u64::from_le_bytes(b.try_into().unwrap_or([0; 8]))),
    }
}

fn float_at(dt: Datatype, col: &[u8], i: usize) -> f64 {
    if dt == Datatype::Float32 {
        f64::from(f32::from_le_bytes([col[4 * i], col[4 * i + 1], col[4 * i + 2], col[4 * i + 3]]))
    } else {
        f64::from_le_bytes(col[8 * i..8 * i + 8].try_into().unwrap_or([0; 8]))
    }
}

/// The ordinals of a coordinate column, checking every value lies in the domain (and is a finite
/// number, for floats). The column holds `len / size` values.
pub(crate) fn ordinals(dim: &Dimension, col: &[u8]) -> Result<Vec<u64>, BadCoord> {
    let n = col.len() / dim.datatype.size();
    let chunk = 1 << 16;
    let parts: Vec<Result<Vec<u64>, BadCoord>> = (0..n.div_ceil(chunk))
        .into_par_iter()
        .map(|c| {
            let (a, b) = (c * chunk, ((c + 1) * chunk).min(n));
            let mut out = Vec::with_capacity(b - a);
            if dim.is_float() {
                let (lo, hi) = dim.float_domain();
                for i in a..b {
                    let x = float_at(dim.datatype, col, i);
                    if !x.is_finite() {
                        return Err(BadCoord { cell: i, value: x.to_string(), why: "is not a finite number" });
                    }
                    if x < lo || x > hi {
                        return Err(BadCoord { cell: i, value: x.to_string(), why: "is outside the domain" });
                    }
                    out.push(float_ordinal(x));
                }
            } else {
                let (lo, hi) = dim.int_domain();
                for i in a..b {
                    let x = int_at(dim.datatype, col, i);
                    if x < lo || x > hi {
                        return Err(BadCoord { cell: i, value: x.to_string(), why: "is outside the domain" });
                    }
                    out.push((x - lo) as u64);
                }
            }
            Ok(out)
        })
        .collect();
    let mut all = Vec::with_capacity(n);
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

/// Converts an inclusive query range on a dimension to an inclusive ordinal range, clamped to
/// the domain; `None` if the range misses the domain.
pub(crate) fn ordinal_range(dim: &Dimension, lo: f64, hi: f64, int: Option<(i128, i128)>) -> Option<[u64; 2]> {
    if dim.is_float() {
        let (dlo, dhi) = dim.float_domain();
        let (a, b) = (lo.max(dlo), hi.min(dhi));
        (a <= b).then(|| [float_ordinal(a), float_ordinal(b)])
    } else {
        let (dlo, dhi) = dim.int_domain();
        let (a, b) = int.unwrap_or((lo.ceil() as i128, hi.floor() as i128));
        let (a, b) = (a.max(dlo), b.min(dhi));
        (a <= b).then(|| [(a - dlo) as u64, (b - dlo) as u64])
    }
}

/// The value of ordinal `o` as text (for error messages and listings).
pub(crate) fn value_text(dim: &Dimension, o: u64) -> String {
    if dim.is_float() {
        ordinal_float(o).to_string()
    } else {
        (dim.int_domain().0 + i128::from(o)).to_string()
    }
}

/// How one dimension is cut into space tiles: integer extent, or float (lo, width); tile count.
type Tiling = (Option<u64>, Option<(f64, f64)>, u64);

/// Computes global-order keys: `width()` u64 words per cell, compared lexicographically.
#[derive(Clone)]
pub(crate) struct OrderKeys {
    ndim: usize,
    cell_order: CellOrder,
    tile_order: CellOrder,
    /// Per dimension: (integer tile extent in ordinal units, float (lo, width), tiles along it).
    tiling: Vec<Tiling>,
    /// Per dimension, Hilbert grid scaling: (float domain (lo, width) or integer size).
    hilbert_bits: u32,
    dims: Vec<Dimension>,
}

impl std::fmt::Debug for OrderKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OrderKeys({:?}, {:?})", self.cell_order, self.tile_order)
    }
}

impl OrderKeys {
    pub(crate) fn new(schema: &ArraySchema) -> Self {
        let n = schema.ndim();
        let tiling = schema
            .dims
            .iter()
            .map(|d| {
                if d.is_float() {
                    let (lo, hi) = d.float_domain();
                    match d.float_tile() {
                        Some(w) => (None, Some((lo, w)), ((hi - lo) / w).floor() as u64 + 1),
                        None => (None, None, 1),
                    }
                } else {
                    (Some(d.tile_extent()), None, d.tile_count())
                }
            })
            .collect();
        Self {
            ndim: n,
            cell_order: schema.cell_order,
            tile_order: schema.tile_order,
            tiling,
            hilbert_bits: (64 / n as u32).clamp(1, 32),
            dims: schema.dims.clone(),
        }
    }

    /// Key words per cell.
    pub(crate) fn width(&self) -> usize {
        self.ndim + 1
    }

    /// The key of one cell given its ordinals.
    pub(crate) fn key(&self, ords: &[u64], out: &mut [u64]) {
        let n = self.ndim;
        if self.cell_order == CellOrder::Hilbert {
            let mut x = [0u32; 64];
            for d in 0..n {
                x[d] = self.hilbert_coord(d, ords[d]);
            }
            out[0] = hilbert_index(&mut x[..n], self.hilbert_bits);
            out[1..=n].copy_from_slice(&ords[..n]);
            return;
        }
        // Tile id in tile order.
        let mut tid = 0u64;
        let dims: Vec<usize> = match self.tile_order {
            CellOrder::ColMajor => (0..n).rev().collect(),
            _ => (0..n).collect(),
        };
        for &d in &dims {
            let (ext, fl, count) = self.tiling[d];
            let t = match (ext, fl) {
                (Some(e), _) => ords[d] / e,
                (None, Some((lo, w))) => ((ordinal_float(ords[d]) - lo) / w).floor().max(0.0) as u64,
                _ => 0,
            };
            tid = tid.wrapping_mul(count).wrapping_add(t.min(count.saturating_sub(1)));
        }
        out[0] = tid;
        match self.cell_order {
            CellOrder::ColMajor => {
                for (k, d) in (0..n).rev().enumerate() {
                    out[1 + k] = ords[d];
                }
            }
            _ => out[1..=n].copy_from_slice(&ords[..n]),
        }
    }

    fn hilbert_coord(&self, d: usize, o: u64) -> u32 {
        let bits = self.hilbert_bits;
        let max = (1u64 << bits) - 1;
        let dim = &self.dims[d];
        if dim.is_float() {
            let (lo, hi) = dim.float_domain();
            let w = hi - lo;
            let f = if w > 0.0 { (ordinal_float(o) - lo) / w } else { 0.0 };
            (f * max as f64).round().clamp(0.0, max as f64) as u32
        } else {
            let size = dim.domain_size();
            // Scale [0, size) onto [0, 2^bits).
            ((u128::from(o) * u128::from(max + 1) / u128::from(size)) as u64).min(max) as u32
        }
    }

    /// Keys of all cells, from per-dimension ordinal columns.
    pub(crate) fn keys(&self, cols: &[Vec<u64>]) -> Vec<u64> {
        let n = cols.first().map_or(0, Vec::len);
        let w = self.width();
        let mut keys = vec![0u64; n * w];
        keys.par_chunks_mut(w * 4096).enumerate().for_each(|(c, chunk)| {
            let mut ords = vec![0u64; self.ndim];
            for (k, out) in chunk.chunks_mut(w).enumerate() {
                let i = c * 4096 + k;
                for d in 0..self.ndim {
                    ords[d] = cols[d][i];
                }
                self.key(&ords, out);
            }
        });
        keys
    }
}

/// Packs keys of `w` words into one `u128` each, preserving their lexicographic order, when the
/// bit widths the words actually use add up to at most 128 (as for two or three integer
/// dimensions of moderate domains); `None` otherwise.
pub(crate) fn pack_keys(keys: &[u64], w: usize) -> Option<Vec<u128>> {
    if w == 0 {
        return None;
    }
    let mut bits = vec![0u32; w];
    for k in keys.chunks_exact(w) {
        for (b, &x) in bits.iter_mut().zip(k) {
            *b = (*b).max(64 - x.leading_zeros());
        }
    }
    if bits.iter().sum::<u32>() > 128 {
        return None;
    }
    Some(
        keys.par_chunks_exact(w)
            .map(|k| {
                k.iter().zip(&bits).fold(0u128, |acc, (&x, &b)| if b == 0 { acc } else { (acc << b) | u128::from(x) })
            })
            .collect(),
    )
}

/// The permutation that sorts cells by their keys (`w` words each), stable for equal keys. The
/// caller keeps the cell count within `u32::MAX` (the sparse writer refuses larger unordered
/// writes).
pub(crate) fn sort_permutation(keys: &[u64], w: usize) -> Vec<u32> {
    let n = keys.len() / w.max(1);
    if let Some(packed) = pack_keys(keys, w) {
        // Plain (key, index) pairs sort several times faster than indices compared through the
        // key slices; the index makes the order stable.
        let mut items: Vec<(u128, u32)> = packed.into_iter().zip(0..n as u32).collect();
        items.par_sort_unstable();
        return items.into_iter().map(|(_, i)| i).collect();
    }
    let mut perm: Vec<u32> = (0..n as u32).collect();
    perm.par_sort_by(|&a, &b| {
        let (a, b) = (a as usize * w, b as usize * w);
        keys[a..a + w].cmp(&keys[b..b + w])
    });
    perm
}

/// Skilling's transform ("Programming the Hilbert curve", 2004): the Hilbert index of a point of
/// `x.len()` coordinates of `bits` bits each (`x.len() * bits <= 64`).
pub(crate) fn hilbert_index(x: &mut [u32], bits: u32) -> u64 {
    let n = x.len();
    if n == 0 || bits == 0 {
        return 0;
    }
    let m = 1u32 << (bits - 1);
    let mut q = m;
    while q > 1 {
        let p = q - 1;
        for i in 0..n {
            if x[i] & q != 0 {
                x[0] ^= p;
            } else {
                let t = (x[0] ^ x[i]) & p;
                x[0] ^= t;
                x[i] ^= t;
            }
        }
        q >>= 1;
    }
    for i in 1..n {
        x[i] ^= x[i - 1];
    }
    let mut t = 0u32;
    let mut q = m;
    while q > 1 {
        if x[n - 1] & q != 0 {
            t ^= q - 1;
        }
        q >>= 1;
    }
    for v in x.iter_mut() {
        *v ^= t;
    }
    let mut h = 0u64;
    for b in (0..bits).rev() {
        for v in x.iter() {
            h = (h << 1) | u64::from((v >> b) & 1);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn float_ordinals_preserve_order(a in any::<f64>(), b in any::<f64>()) {
            prop_assume!(a.is_finite() && b.is_finite());
            let (oa, ob) = (float_ordinal(a), float_ordinal(b));
            prop_assert_eq!(a.partial_cmp(&b).unwrap(), if a == b { std::cmp::Ordering::Equal } else { oa.cmp(&ob) });
            prop_assert_eq!(ordinal_float(oa), if a == 0.0 { 0.0 } else { a });
        }
    }

    #[test]
    fn hilbert_2d_order_visits_neighbours() {
        // On a 2^k grid consecutive Hilbert indices are always adjacent cells.
        let bits = 3;
        let side = 1u32 << bits;
        let mut cells: Vec<(u64, u32, u32)> = Vec::new();
        for a in 0..side {
            for b in 0..side {
                cells.push((hilbert_index(&mut [a, b], bits), a, b));
            }
        }
        cells.sort();
        for (i, c) in cells.iter().enumerate() {
            assert_eq!(c.0, i as u64, "a bijection onto 0..side^2");
        }
        for w in cells.windows(2) {
            let d = w[0].1.abs_diff(w[1].1) + w[0].2.abs_diff(w[1].2);
            assert_eq!(d, 1, "{w:?}");
        }
    }
}
