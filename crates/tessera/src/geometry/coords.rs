//! Coordinates of sparse cells. A coordinate column holds one value per cell in the dimension's
//! type. Inside the engine each value becomes an *ordinal*, a `u64` that orders like the value:
//! `x - domain.lo` for integers, and for floats the IEEE bits mapped so that unsigned order is
//! numeric order (`b = bits(x as f64)`: `!b` when the sign is set, else `b | 1 << 63`; -0.0 is
//! stored as +0.0). Ordinals give the global order of cells (space tiles in tile order, then the
//! cell order; either may be a Z or Hilbert curve, whose keys `order.rs` computes) and the MBRs
//! of data tiles (docs/format.md, "Sparse fragments").

use rayon::prelude::*;

use super::order::{hilbert_index, Curve};
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

/// Expands `$m!(T)` with `T` the Rust type of integer datatype `$dt`'s storage type (`datetime64`
/// is `i64`), and `$other` for any other datatype: the one dispatch from a coordinate's datatype
/// to typed code.
macro_rules! by_int_type {
    ($dt:expr, $m:ident, $other:expr) => {
        match $dt.storage() {
            Datatype::Int8 => $m!(i8),
            Datatype::Int16 => $m!(i16),
            Datatype::Int32 => $m!(i32),
            Datatype::Int64 => $m!(i64),
            Datatype::UInt8 => $m!(u8),
            Datatype::UInt16 => $m!(u16),
            Datatype::UInt32 => $m!(u32),
            Datatype::UInt64 => $m!(u64),
            _ => $other,
        }
    };
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

/// Ordinals of integer cells `x - lo`, one loop per datatype without branches, so the compiler
/// vectorises it; the first value outside `[lo, hi]` is reported.
macro_rules! int_ordinals {
    ($t:ty, $col:expr, $lo:expr, $hi:expr, $base:expr, $out:expr) => {{
        const S: usize = std::mem::size_of::<$t>();
        // The domain lies within the datatype's range (a schema rule).
        let (lo, hi) = (<$t>::try_from($lo).unwrap_or(<$t>::MIN), <$t>::try_from($hi).unwrap_or(<$t>::MAX));
        let mut bad = false;
        $out.extend($col.chunks_exact(S).map(|c| {
            let x = <$t>::from_le_bytes(c.try_into().unwrap_or([0; S]));
            bad |= (x < lo) | (x > hi);
            // Two's-complement difference: x - lo as an unsigned number.
            (x as i128 - lo as i128) as u64
        }));
        if bad {
            let cell = $col.chunks_exact(S).position(|c| {
                let x = <$t>::from_le_bytes(c.try_into().unwrap_or([0; S]));
                x < lo || x > hi
            });
            let cell = cell.unwrap_or(0);
            let x = <$t>::from_le_bytes($col[cell * S..cell * S + S].try_into().unwrap_or([0; S]));
            return Err(BadCoord { cell: $base + cell, value: x.to_string(), why: "is outside the domain" });
        }
    }};
}

/// Ordinals of float cells, checking they are finite numbers inside `[lo, hi]`.
macro_rules! float_ordinals {
    ($t:ty, $col:expr, $lo:expr, $hi:expr, $base:expr, $out:expr) => {{
        const S: usize = std::mem::size_of::<$t>();
        let (lo, hi) = ($lo, $hi);
        let mut bad = false;
        $out.extend($col.chunks_exact(S).map(|c| {
            let x = f64::from(<$t>::from_le_bytes(c.try_into().unwrap_or([0; S])));
            // NaN fails both comparisons; infinities lie outside every finite domain.
            bad |= !((x >= lo) & (x <= hi)) | !x.is_finite();
            float_ordinal(x)
        }));
        if bad {
            for (cell, c) in $col.chunks_exact(S).enumerate() {
                let x = f64::from(<$t>::from_le_bytes(c.try_into().unwrap_or([0; S])));
                if !x.is_finite() {
                    return Err(BadCoord { cell: $base + cell, value: x.to_string(), why: "is not a finite number" });
                }
                if x < lo || x > hi {
                    return Err(BadCoord { cell: $base + cell, value: x.to_string(), why: "is outside the domain" });
                }
            }
        }
    }};
}

/// Appends the ordinals of the coordinate column `col` (cells numbered from `base` in errors).
fn ordinals_chunk(dim: &Dimension, col: &[u8], base: usize, out: &mut Vec<u64>) -> Result<(), BadCoord> {
    if dim.is_float() {
        let (lo, hi) = dim.float_domain();
        match dim.datatype {
            Datatype::Float32 => float_ordinals!(f32, col, lo, hi, base, out),
            _ => float_ordinals!(f64, col, lo, hi, base, out),
        }
    } else {
        let (lo, hi) = dim.int_domain();
        macro_rules! int {
            ($t:ty) => {
                int_ordinals!($t, col, lo, hi, base, out)
            };
        }
        by_int_type!(dim.datatype, int, int!(u64))
    }
    Ok(())
}

/// The ordinals of a coordinate column, checking every value lies in the domain (and is a finite
/// number, for floats). The column holds `len / size` values. Long columns are converted in
/// parallel chunks.
pub(crate) fn ordinals(dim: &Dimension, col: &[u8]) -> Result<Vec<u64>, BadCoord> {
    let size = dim.datatype.size();
    let n = col.len() / size;
    let col = &col[..n * size];
    let chunk = 1 << 16;
    let mut all = Vec::with_capacity(n);
    if n <= chunk {
        ordinals_chunk(dim, col, 0, &mut all)?;
        return Ok(all);
    }
    let parts: Vec<Result<Vec<u64>, BadCoord>> = col
        .par_chunks(chunk * size)
        .enumerate()
        .map(|(c, part)| {
            let mut out = Vec::with_capacity(chunk);
            ordinals_chunk(dim, part, c * chunk, &mut out)?;
            Ok(out)
        })
        .collect();
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

/// Checks that every value of the coordinate column `col` of dimension `dim` lies in the
/// ordinal range `range` (a tile's bounding box), reporting the first that does not, and
/// writes float zeros as `+0.0`: the column then holds what [`ordinal_values`] of its
/// [`ordinals`] holds, without them being made.
pub(crate) fn check_in_range(dim: &Dimension, col: &mut [u8], range: [u64; 2]) -> Result<(), BadCoord> {
    let outside = "is outside its tile's bounding box";
    macro_rules! check {
        ($t:ty, $lo:expr, $hi:expr, $fix:expr) => {{
            const S: usize = std::mem::size_of::<$t>();
            let (lo, hi): ($t, $t) = ($lo, $hi);
            let mut bad = false;
            for c in col.chunks_exact_mut(S) {
                let x = <$t>::from_le_bytes((&*c).try_into().unwrap_or([0; S]));
                // NaN fails both comparisons.
                bad |= !((x >= lo) & (x <= hi));
                $fix(x, c);
            }
            if bad {
                let at = |i: usize| <$t>::from_le_bytes(col[i * S..i * S + S].try_into().unwrap_or([0; S]));
                let cell = (0..col.len() / S).find(|&i| !(at(i) >= lo && at(i) <= hi)).unwrap_or(0);
                return Err(BadCoord { cell, value: at(cell).to_string(), why: outside });
            }
        }};
    }
    if dim.is_float() {
        let (lo, hi) = (ordinal_float(range[0]), ordinal_float(range[1]));
        match dim.datatype {
            // An f32 bound converts to f32 exactly: it is the ordinal of a stored f32.
            Datatype::Float32 => check!(f32, lo as f32, hi as f32, |x: f32, c: &mut [u8]| if x == 0.0 {
                c.copy_from_slice(&0f32.to_le_bytes());
            }),
            _ => check!(f64, lo, hi, |x: f64, c: &mut [u8]| if x == 0.0 {
                c.copy_from_slice(&0f64.to_le_bytes());
            }),
        }
    } else {
        let dlo = dim.int_domain().0;
        let (lo, hi) = (dlo + i128::from(range[0]), dlo + i128::from(range[1]));
        macro_rules! int {
            ($t:ty) => {{
                let (Ok(lo), Ok(hi)) = (<$t>::try_from(lo), <$t>::try_from(hi)) else {
                    return Err(BadCoord { cell: 0, value: lo.to_string(), why: outside });
                };
                check!($t, lo, hi, |_, _| ())
            }};
        }
        by_int_type!(dim.datatype, int, int!(u64))
    }
    Ok(())
}

/// The stored values of dimension `dim` (the inverse of [`ordinals`]: one value per cell in
/// the dimension's type, little-endian) of cells whose ordinals lie interleaved in `ords`, `nd`
/// per cell, this dimension's at `d`. Walked as whole cells: a `step_by` iterator over `ords`
/// costs the copy several times over.
pub(crate) fn ordinal_values(dim: &Dimension, ords: &[u64], d: usize, nd: usize) -> Vec<u8> {
    let nd = nd.max(1);
    let cells = ords.chunks_exact(nd);
    let mut out = vec![0u8; cells.len() * dim.datatype.size()];
    let lo = dim.int_domain().0;
    macro_rules! put {
        ($t:ty, $value:expr) => {{
            const S: usize = std::mem::size_of::<$t>();
            let value = $value;
            for (c, cell) in out.chunks_exact_mut(S).zip(cells) {
                c.copy_from_slice(&value(cell[d]).to_le_bytes());
            }
        }};
    }
    macro_rules! int {
        ($t:ty) => {{
            // The value `lo + o` lies in the type's range, so the sum modulo the type's width
            // (wrapping, in the type itself: no i128 per cell) is the value.
            let base = lo as $t;
            put!($t, |o: u64| base.wrapping_add(o as $t))
        }};
    }
    by_int_type!(
        dim.datatype,
        int,
        match dim.datatype {
            // An f32 converts to f64 and back exactly.
            Datatype::Float32 => put!(f32, |o: u64| ordinal_float(o) as f32),
            _ => put!(f64, ordinal_float),
        }
    );
    out
}

/// The ordinals of cells `idx` of coordinate column `col` (errors name the cell's index in the
/// column).
pub(crate) fn ordinals_at(dim: &Dimension, col: &[u8], idx: &[u32]) -> Result<Vec<u64>, BadCoord> {
    // One fixed-size copy per cell (a call to memcpy each, with the size known only at run time).
    fn pick<const S: usize>(col: &[u8], idx: &[u32]) -> Vec<u8> {
        let mut out = Vec::with_capacity(idx.len() * S);
        for &c in idx {
            let at = c as usize * S;
            if let Some(v) = col.get(at..at + S).and_then(|b| <&[u8; S]>::try_from(b).ok()) {
                out.extend_from_slice(v);
            }
        }
        out
    }
    let picked = match dim.datatype.size() {
        1 => pick::<1>(col, idx),
        2 => pick::<2>(col, idx),
        4 => pick::<4>(col, idx),
        _ => pick::<8>(col, idx),
    };
    ordinals(dim, &picked).map_err(|b| BadCoord { cell: idx.get(b.cell).map_or(b.cell, |&c| c as usize), ..b })
}

/// Keeps in `keep` (cell indices, ascending) the cells of column `col` whose value lies in the
/// typed inclusive range `[lo, hi]`; with `scan` every cell of the column is tested, otherwise
/// only the cells already in `keep`.
macro_rules! keep_in_range {
    ($t:ty, $col:expr, $lo:expr, $hi:expr, $scan:expr, $keep:expr) => {{
        const S: usize = std::mem::size_of::<$t>();
        let (lo, hi): ($t, $t) = ($lo, $hi);
        let at = |i: usize| <$t>::from_le_bytes($col[i * S..i * S + S].try_into().unwrap_or([0; S]));
        // An aligned column is read as values (little-endian hosts: the bytes are the values).
        let typed = if cfg!(target_endian = "little") { bytemuck::try_cast_slice::<u8, $t>($col).ok() } else { None };
        if let (true, Some(vals)) = ($scan, typed) {
            // Tested first with a loop the compiler vectorises: most tiles of small fragments
            // hold no cell in the box and need nothing more.
            if !vals.iter().fold(false, |a, &x| a | ((lo <= x) & (x <= hi))) {
                $keep.clear();
                return $keep;
            }
            $keep.clear();
            $keep.extend(vals.iter().enumerate().filter(|&(_, &x)| lo <= x && x <= hi).map(|(i, _)| i as u32));
        } else if $scan {
            let inside = |c: &[u8]| {
                let x = <$t>::from_le_bytes(c.try_into().unwrap_or([0; S]));
                (lo <= x) & (x <= hi)
            };
            if !$col.chunks_exact(S).fold(false, |a, c| a | inside(c)) {
                $keep.clear();
                return $keep;
            }
            // Branch-free: every index is written, the count advances only for kept cells.
            let n = $col.len() / S;
            $keep.clear();
            $keep.resize(n + 1, 0);
            let mut k = 0usize;
            for (i, c) in $col.chunks_exact(S).enumerate() {
                let x = <$t>::from_le_bytes(c.try_into().unwrap_or([0; S]));
                $keep[k] = i as u32;
                k += usize::from((lo <= x) & (x <= hi));
            }
            $keep.truncate(k);
        } else {
            $keep.retain(|&i| {
                let x = at(i as usize);
                lo <= x && x <= hi
            });
        }
    }};
}

/// Two dimensions whose columns are aligned values (the common case): one branch-free pass over
/// both columns. `None` when that does not apply.
fn cells_in_box_2d(dims: &[Dimension], cols: &[&[u8]], bbox: &[[u64; 2]]) -> Option<Vec<u32>> {
    fn scan<T: bytemuck::Pod + PartialOrd>(x: &[u8], y: &[u8], bx: (T, T), by: (T, T)) -> Option<Vec<u32>> {
        let (x, y) = (bytemuck::try_cast_slice::<u8, T>(x).ok()?, bytemuck::try_cast_slice::<u8, T>(y).ok()?);
        let n = x.len().min(y.len());
        let inside = |a: T, b: T| (bx.0 <= a) & (a <= bx.1) & (by.0 <= b) & (b <= by.1);
        let mut keep = vec![0u32; n + 1];
        let mut k = 0usize;
        for (i, (&a, &b)) in x.iter().zip(y).enumerate() {
            keep[k] = i as u32;
            k += usize::from(inside(a, b));
        }
        keep.truncate(k);
        Some(keep)
    }
    let ([d0, d1], [c0, c1], [b0, b1]) = (dims, cols, bbox) else { return None };
    if cfg!(target_endian = "big") || d0.datatype != d1.datatype {
        return None;
    }
    if d0.is_float() {
        let f = |b: &[u64; 2]| (ordinal_float(b[0]), ordinal_float(b[1]));
        return match d0.datatype {
            Datatype::Float64 => scan::<f64>(c0, c1, f(b0), f(b1)),
            _ => None,
        };
    }
    let int = |d: &Dimension, b: &[u64; 2]| (d.int_domain().0 + i128::from(b[0]), d.int_domain().0 + i128::from(b[1]));
    let ((l0, h0), (l1, h1)) = (int(d0, b0), int(d1, b1));
    macro_rules! typed {
        ($t:ty) => {{
            let cv = |v: i128| <$t>::try_from(v).ok();
            scan::<$t>(c0, c1, (cv(l0)?, cv(h0)?), (cv(l1)?, cv(h1)?))
        }};
    }
    by_int_type!(d0.datatype, typed, None)
}

/// The cells (indices, ascending) of coordinate columns `cols` (one per dimension of `dims`)
/// whose ordinals lie inside `bbox`, compared on the stored values without converting every cell
/// to an ordinal. Values outside the domain never lie inside a box of the domain.
pub(crate) fn cells_in_box(dims: &[Dimension], cols: &[&[u8]], bbox: &[[u64; 2]]) -> Vec<u32> {
    if let Some(keep) = cells_in_box_2d(dims, cols, bbox) {
        return keep;
    }
    let mut keep: Vec<u32> = Vec::new();
    for (d, ((dim, col), b)) in dims.iter().zip(cols).zip(bbox).enumerate() {
        let scan = d == 0;
        if !scan && keep.is_empty() {
            break;
        }
        if dim.is_float() {
            let (lo, hi) = (ordinal_float(b[0]), ordinal_float(b[1]));
            match dim.datatype {
                // An f32 converts to f64 exactly, so the test is done in f64.
                Datatype::Float32 => {
                    let at =
                        |i: usize| f64::from(f32::from_le_bytes(col[i * 4..i * 4 + 4].try_into().unwrap_or([0; 4])));
                    if scan {
                        keep = (0..col.len() / 4).filter(|&i| lo <= at(i) && at(i) <= hi).map(|i| i as u32).collect();
                    } else {
                        keep.retain(|&i| lo <= at(i as usize) && at(i as usize) <= hi);
                    }
                }
                _ => keep_in_range!(f64, col, lo, hi, scan, keep),
            }
        } else {
            let dlo = dim.int_domain().0;
            let (lo, hi) = (dlo + i128::from(b[0]), dlo + i128::from(b[1]));
            macro_rules! int {
                ($t:ty) => {{
                    let (Ok(lo), Ok(hi)) = (<$t>::try_from(lo), <$t>::try_from(hi)) else { return Vec::new() };
                    keep_in_range!($t, col, lo, hi, scan, keep)
                }};
            }
            by_int_type!(dim.datatype, int, int!(u64))
        }
    }
    keep
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

/// Computes global-order keys: `width()` u64 words per cell, compared lexicographically:
/// the tile part (the tile id, or a tile-order curve key in two words), then the cell part
/// (the ordinals in the cell order, or a cell-order curve key in two words and the ordinals
/// row-major to break ties). Version 1's sparse Hilbert order has its own key: the Hilbert index
/// over the whole domain, then the ordinals.
#[derive(Clone)]
pub(crate) struct OrderKeys {
    ndim: usize,
    cell_order: CellOrder,
    tile_order: CellOrder,
    /// Per dimension: (integer tile extent in ordinal units, float (lo, width), tiles along it).
    tiling: Vec<Tiling>,
    /// Bits per dimension of version 1's Hilbert order.
    hilbert_bits: u32,
    dims: Vec<Dimension>,
    /// Version 1's sparse Hilbert order.
    legacy: bool,
    tile_curve: Option<Curve>,
    cell_curve: Option<Curve>,
}

impl std::fmt::Debug for OrderKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OrderKeys({:?}, {:?})", self.cell_order, self.tile_order)
    }
}

impl OrderKeys {
    pub(crate) fn new(schema: &ArraySchema) -> Self {
        let n = schema.ndim();
        let counts = schema.order_tile_counts();
        let tiling = schema
            .dims
            .iter()
            .zip(counts)
            .map(|(d, count)| {
                if d.is_float() {
                    let (lo, _) = d.float_domain();
                    (None, d.float_tile().map(|w| (lo, w)), count)
                } else {
                    (Some(d.tile_extent()), None, count)
                }
            })
            .collect();
        let legacy = schema.legacy_hilbert();
        Self {
            ndim: n,
            cell_order: schema.cell_order,
            tile_order: schema.tile_order,
            tiling,
            hilbert_bits: (64 / n as u32).clamp(1, 32),
            dims: schema.dims.clone(),
            legacy,
            tile_curve: Curve::new(schema.tile_order, &schema.tile_curve_widths()),
            cell_curve: if legacy { None } else { Curve::new(schema.cell_order, &schema.cell_curve_widths()) },
        }
    }

    /// Key words per cell.
    pub(crate) fn width(&self) -> usize {
        if self.legacy {
            return self.ndim + 1;
        }
        let tile = if self.tile_curve.is_some() { 2 } else { 1 };
        let cell = if self.cell_curve.is_some() { 2 + self.ndim } else { self.ndim };
        tile + cell
    }

    /// The key of one cell given its ordinals.
    pub(crate) fn key(&self, ords: &[u64], out: &mut [u64]) {
        let n = self.ndim;
        if self.legacy {
            let mut x = [0u64; 64];
            for d in 0..n {
                x[d] = u64::from(self.hilbert_coord(d, ords[d]));
            }
            // n * bits <= 64: the index fits the low word.
            out[0] = hilbert_index(&mut x[..n], self.hilbert_bits) as u64;
            out[1..=n].copy_from_slice(&ords[..n]);
            return;
        }
        let mut at = 1;
        match &self.tile_curve {
            Some(c) => {
                let mut tc = [0u64; 64];
                for d in 0..n {
                    tc[d] = self.tile_coord(d, ords[d]);
                }
                split_key(c.key(&tc[..n]), &mut out[..2]);
                at = 2;
            }
            None => out[0] = self.tile_id(|d| self.tile_coord(d, ords[d])),
        }
        let out = &mut out[at..];
        match (&self.cell_curve, self.cell_order) {
            (Some(c), _) => {
                let mut x = [0u64; 64];
                for d in 0..n {
                    x[d] = self.in_tile(d, ords[d]);
                }
                split_key(c.key(&x[..n]), &mut out[..2]);
                out[2..2 + n].copy_from_slice(&ords[..n]);
            }
            (None, CellOrder::ColMajor) => {
                for (k, d) in (0..n).rev().enumerate() {
                    out[k] = ords[d];
                }
            }
            (None, _) => out[..n].copy_from_slice(&ords[..n]),
        }
    }

    /// The coordinate of ordinal `o` inside its space tile along dimension `d`, as cell-order
    /// curves take it: the offset from the tile's first ordinal (integers), or the position in
    /// the tile's width scaled to 32 bits (floats).
    fn in_tile(&self, d: usize, o: u64) -> u64 {
        let t = self.tile_coord(d, o);
        match self.tiling[d] {
            (Some(e), _, _) => o - t * e,
            (None, fl, _) => {
                let (dlo, dhi) = self.dims[d].float_domain();
                let (lo, w) = match fl {
                    Some((lo, w)) => (lo + t as f64 * w, w),
                    None => (dlo, dhi - dlo),
                };
                let f = if w > 0.0 { (ordinal_float(o) - lo) / w } else { 0.0 };
                let top = (1u64 << 32) as f64;
                (f * top).floor().clamp(0.0, top - 1.0) as u64
            }
        }
    }

    /// The space tile along dimension `d` that holds ordinal `o` (clamped to the last tile).
    pub(crate) fn tile_coord(&self, d: usize, o: u64) -> u64 {
        let (ext, fl, count) = self.tiling[d];
        let t = match (ext, fl) {
            (Some(e), _) => o / e.max(1),
            (None, Some((lo, w))) => ((ordinal_float(o) - lo) / w).floor().max(0.0) as u64,
            _ => 0,
        };
        t.min(count.saturating_sub(1))
    }

    /// The id in tile order of the space tile whose coordinate along dimension `d` is `tc(d)`
    /// (row- or col-major tile orders).
    pub(crate) fn tile_id(&self, tc: impl Fn(usize) -> u64) -> u64 {
        let n = self.ndim;
        let col_major = self.tile_order == CellOrder::ColMajor;
        let mut tid = 0u64;
        for k in 0..n {
            let d = if col_major { n - 1 - k } else { k };
            tid = tid.wrapping_mul(self.tiling[d].2).wrapping_add(tc(d));
        }
        tid
    }

    /// The dimensions in the order of their weight in tile ids, the slowest first, when a row-
    /// or col-major tile order orders the space tiles (the first key word is the tile id);
    /// `None` under a curve tile order or version 1's Hilbert order.
    pub(crate) fn tile_significance(&self) -> Option<Vec<usize>> {
        if self.legacy || self.tile_curve.is_some() {
            return None;
        }
        let n = self.ndim;
        Some(if self.tile_order == CellOrder::ColMajor { (0..n).rev().collect() } else { (0..n).collect() })
    }

    /// The curve that orders space tiles (their coordinates), under a curve tile order.
    pub(crate) fn tile_curve(&self) -> Option<&Curve> {
        self.tile_curve.as_ref().filter(|_| !self.legacy)
    }

    /// The dimension that varies slowest inside a space tile (the second key word), or `None`
    /// when a curve orders tiles or cells (then keys are not the tile id and the ordinals).
    pub(crate) fn lead_dim(&self) -> Option<usize> {
        if self.legacy || self.tile_curve.is_some() || self.cell_curve.is_some() {
            return None;
        }
        match self.cell_order {
            CellOrder::ColMajor => Some(self.ndim - 1),
            _ => Some(0),
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
/// dimensions of moderate domains), with the number of low bits the packed keys use (every key
/// is below `1 << width`); `None` otherwise.
pub(crate) fn pack_keys_with_width(keys: &[u64], w: usize) -> Option<(Vec<u128>, u32)> {
    if w == 0 {
        return None;
    }
    let mut bits = vec![0u32; w];
    for k in keys.chunks_exact(w) {
        for (b, &x) in bits.iter_mut().zip(k) {
            *b = (*b).max(64 - x.leading_zeros());
        }
    }
    let width = bits.iter().sum::<u32>();
    if width > 128 {
        return None;
    }
    let packed = keys
        .par_chunks_exact(w)
        .map(|k| k.iter().zip(&bits).fold(0u128, |acc, (&x, &b)| if b == 0 { acc } else { (acc << b) | u128::from(x) }))
        .collect();
    Some((packed, width))
}

/// A `u128` key as two words, high first.
fn split_key(k: u128, out: &mut [u64]) {
    out[0] = (k >> 64) as u64;
    out[1] = k as u64;
}

/// Cells in ascending key order.
pub(crate) struct KeyOrder {
    /// The cells in key order, stable: of equal keys, the one given first comes first.
    pub perm: Vec<u32>,
    /// When the keys pack into 128 bits ([`pack_keys_with_width`]): the packed keys in
    /// `perm`'s order, so that equal and ascending keys can be checked without going back to
    /// the key words.
    pub packed: Option<Vec<u128>>,
}

/// How the keys given to [`sort_permutation`] come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeysCome {
    /// In no particular order (an unordered write): a quicksort is fastest.
    Shuffled,
    /// In long sorted runs (the cells of many fragments, each in global order): a merge sort,
    /// which finds the runs, is fastest (a quicksort measured 1.5-2x slower on 100 fragments of
    /// 1,000 cells).
    InRuns,
}

/// The permutation that sorts cells by their keys (`w` words each), stable for equal keys. The
/// caller keeps the cell count within `u32::MAX` (the sparse writer refuses larger unordered
/// writes).
pub(crate) fn sort_permutation(keys: &[u64], w: usize, come: KeysCome) -> KeyOrder {
    let n = keys.len() / w.max(1);
    let Some((packed, width)) = pack_keys_with_width(keys, w) else {
        let mut perm: Vec<u32> = (0..n as u32).collect();
        perm.par_sort_by(|&a, &b| {
            let (a, b) = (a as usize * w, b as usize * w);
            keys[a..a + w].cmp(&keys[b..b + w])
        });
        return KeyOrder { perm, packed: None };
    };
    // Key and index in one integer: plain integers sort several times faster than (key, index)
    // pairs (half the bytes for a u128 against a pair), and the index in the low bits makes the
    // order stable whichever sort runs.
    let index_bits = u64::BITS - (n.saturating_sub(1) as u64).leading_zeros();
    if width + index_bits <= u64::BITS {
        let mask = (1u64 << index_bits) - 1;
        let mut items: Vec<u64> =
            packed.par_iter().enumerate().map(|(i, &k)| ((k as u64) << index_bits) | i as u64).collect();
        sort_items(&mut items, come);
        let perm = items.par_iter().map(|&v| (v & mask) as u32).collect();
        let packed = items.par_iter().map(|&v| u128::from(v >> index_bits)).collect();
        return KeyOrder { perm, packed: Some(packed) };
    }
    if width + index_bits <= u128::BITS {
        let mask = (1u128 << index_bits) - 1;
        let mut items: Vec<u128> =
            packed.into_par_iter().enumerate().map(|(i, k)| (k << index_bits) | i as u128).collect();
        sort_items(&mut items, come);
        let perm = items.par_iter().map(|&v| (v & mask) as u32).collect();
        let packed = items.par_iter().map(|&v| v >> index_bits).collect();
        return KeyOrder { perm, packed: Some(packed) };
    }
    // (key, index) pairs sort several times faster than indices compared through the key
    // slices; the index makes the order stable.
    let mut items: Vec<(u128, u32)> = packed.into_par_iter().zip(0..n as u32).collect();
    sort_items(&mut items, come);
    let (packed, perm) = items.into_par_iter().unzip();
    KeyOrder { perm, packed: Some(packed) }
}

/// Sorts distinct `items` as they come best (see [`KeysCome`]), in parallel.
fn sort_items<T: Ord + Send>(items: &mut [T], come: KeysCome) {
    match come {
        KeysCome::Shuffled => items.par_sort_unstable(),
        KeysCome::InRuns => items.par_sort(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A dimension of `dt` over a domain chosen from `lo`/`span`, and column bytes for `vals`
    /// (values outside the type wrap, which puts some outside the domain).
    fn dim_and_col(dt: Datatype, lo: i64, span: u16, vals: &[i64]) -> (Dimension, Vec<u8>) {
        let dim = if matches!(dt, Datatype::Float32 | Datatype::Float64) {
            Dimension::float("d", dt, (lo as f64, lo as f64 + f64::from(span)), None)
        } else {
            let (tlo, thi) = match dt {
                Datatype::Int8 => (-128, 127),
                Datatype::UInt8 => (0, 255),
                Datatype::Int16 => (-32768, 32767),
                Datatype::UInt16 => (0, 65535),
                Datatype::UInt32 | Datatype::UInt64 => (0, 1 << 30),
                _ => (-1 << 30, 1 << 30),
            };
            let a = i128::from(lo).clamp(tlo, thi);
            Dimension::new("d", dt, (a, (a + i128::from(span)).min(thi)), 1)
        };
        let mut col = Vec::new();
        for &v in vals {
            match dt {
                Datatype::Int8 => col.extend((v as i8).to_le_bytes()),
                Datatype::UInt8 => col.extend((v as u8).to_le_bytes()),
                Datatype::Int16 => col.extend((v as i16).to_le_bytes()),
                Datatype::UInt16 => col.extend((v as u16).to_le_bytes()),
                Datatype::Int32 => col.extend((v as i32).to_le_bytes()),
                Datatype::UInt32 => col.extend((v as u32).to_le_bytes()),
                Datatype::Int64 => col.extend(v.to_le_bytes()),
                Datatype::UInt64 => col.extend((v as u64).to_le_bytes()),
                Datatype::Float32 => col.extend((v as f32 + 0.5).to_le_bytes()),
                _ => col.extend((v as f64 - 0.25).to_le_bytes()),
            }
        }
        (dim, col)
    }

    /// Scalar reference: the ordinal of one value, or why it is refused.
    fn ordinal_ref(dim: &Dimension, col: &[u8], i: usize) -> Option<u64> {
        let s = dim.datatype.size();
        let b = &col[i * s..i * s + s];
        let v: f64 = match dim.datatype {
            Datatype::Int8 => f64::from(b[0] as i8),
            Datatype::UInt8 => f64::from(b[0]),
            Datatype::Int16 => f64::from(i16::from_le_bytes([b[0], b[1]])),
            Datatype::UInt16 => f64::from(u16::from_le_bytes([b[0], b[1]])),
            Datatype::Int32 => f64::from(i32::from_le_bytes(b.try_into().unwrap())),
            Datatype::UInt32 => f64::from(u32::from_le_bytes(b.try_into().unwrap())),
            Datatype::Int64 => i64::from_le_bytes(b.try_into().unwrap()) as f64,
            Datatype::UInt64 => u64::from_le_bytes(b.try_into().unwrap()) as f64,
            Datatype::Float32 => f64::from(f32::from_le_bytes(b.try_into().unwrap())),
            _ => f64::from_le_bytes(b.try_into().unwrap()),
        };
        let (lo, hi) = dim.float_domain();
        if !(lo <= v && v <= hi) {
            return None;
        }
        Some(if dim.is_float() { float_ordinal(v) } else { (v as i128 - dim.int_domain().0) as u64 })
    }

    const TYPES: [Datatype; 10] = [
        Datatype::Int8,
        Datatype::UInt8,
        Datatype::Int16,
        Datatype::UInt16,
        Datatype::Int32,
        Datatype::UInt32,
        Datatype::Int64,
        Datatype::UInt64,
        Datatype::Float32,
        Datatype::Float64,
    ];

    proptest! {
        /// `ordinals` equals the scalar reference, and reports the first refused cell.
        #[test]
        fn ordinals_match_the_scalar_reference(t in 0..10usize, lo in -300i64..300, span in 0u16..600,
                                               vals in proptest::collection::vec(-400i64..1000, 0..200)) {
            let (dim, col) = dim_and_col(TYPES[t], lo, span, &vals);
            let want: Vec<Option<u64>> = (0..vals.len()).map(|i| ordinal_ref(&dim, &col, i)).collect();
            match ordinals(&dim, &col) {
                Ok(got) => prop_assert_eq!(got.into_iter().map(Some).collect::<Vec<_>>(), want),
                Err(b) => {
                    prop_assert_eq!(want.iter().position(Option::is_none), Some(b.cell));
                    prop_assert_eq!(b.why, "is outside the domain");
                }
            }
        }

        /// `ordinal_values` gives back the stored values of every accepted column.
        #[test]
        fn ordinal_values_invert_ordinals(t in 0..10usize, lo in -300i64..300, span in 0u16..600,
                                          vals in proptest::collection::vec(-400i64..1000, 0..200)) {
            // Values inside the domain (floats are stored with a fraction added: one step in).
            let (dim, _) = dim_and_col(TYPES[t], lo, span, &[]);
            let (dlo, dhi) = dim.float_domain();
            let f = i64::from(dim.is_float());
            let (a, b) = (dlo.ceil() as i64 + f, dhi.floor() as i64 - f);
            prop_assume!(a <= b);
            let vals: Vec<i64> = vals.iter().map(|v| a + v.rem_euclid(b - a + 1)).collect();
            let (dim, col) = dim_and_col(TYPES[t], lo, span, &vals);
            let ords = ordinals(&dim, &col).map_err(|e| TestCaseError::fail(format!("{e:?}")))?;
            prop_assert_eq!(ordinal_values(&dim, &ords, 0, 1), col);
        }

        /// `cells_in_box` keeps exactly the cells whose reference ordinals lie in the box.
        #[test]
        fn cells_in_box_matches_the_ordinals(t in 0..10usize, u in 0..10usize, same in any::<bool>(), lo in -300i64..300, span in 0u16..600,
                                             vals in proptest::collection::vec((-400i64..1000, -400i64..1000), 0..200),
                                             b in (0u64..700, 0u64..700, 0u64..700, 0u64..700)) {
            let (xs, ys): (Vec<i64>, Vec<i64>) = vals.iter().copied().unzip();
            // Half the cases give both dimensions one type (a schema rule; the two-column path).
            let u = if same { t } else { u };
            let (d0, c0) = dim_and_col(TYPES[t], lo, span, &xs);
            let (d1, c1) = dim_and_col(TYPES[u], -lo, span / 2, &ys);
            // A box of ordinals inside each domain (floats: around the domain's ordinals).
            let in_dom = |d: &Dimension, a: u64, z: u64| -> [u64; 2] {
                let (a, z) = (a.min(z), a.max(z));
                if d.is_float() {
                    let (flo, fhi) = d.float_domain();
                    [float_ordinal((flo + a as f64 / 2.0).min(fhi)), float_ordinal((flo + z as f64 / 2.0).min(fhi))]
                } else {
                    let size = (d.int_domain().1 - d.int_domain().0) as u64;
                    [a.min(size), z.min(size)]
                }
            };
            let bbox = [in_dom(&d0, b.0, b.1), in_dom(&d1, b.2, b.3)];
            let want: Vec<u32> = (0..vals.len())
                .filter(|&i| {
                    [(&d0, &c0), (&d1, &c1)].iter().zip(&bbox).all(|((d, c), r)| {
                        ordinal_ref(d, c, i).is_some_and(|o| r[0] <= o && o <= r[1])
                    })
                })
                .map(|i| i as u32)
                .collect();
            let dims = [d0.clone(), d1.clone()];
            prop_assert_eq!(cells_in_box(&dims, &[&c0, &c1], &bbox), want.clone());
            // Columns that do not start on a value boundary take the byte-wise path.
            let shifted = |c: &[u8]| { let mut v = vec![0u8]; v.extend_from_slice(c); v };
            let (s0, s1) = (shifted(&c0), shifted(&c1));
            prop_assert_eq!(cells_in_box(&dims, &[&s0[1..], &s1[1..]], &bbox), want);
        }
    }

    #[test]
    fn two_aligned_columns_take_one_pass_with_inclusive_bounds() {
        for dt in [Datatype::Int64, Datatype::Int32, Datatype::UInt16, Datatype::Float64] {
            let dims = if dt == Datatype::Float64 {
                [0, 1].map(|_| Dimension::float("d", dt, (0.0, 99.0), None))
            } else {
                [0, 1].map(|_| Dimension::new("d", dt, (0, 99), 10))
            };
            let col: Vec<u8> = (0..100i64)
                .flat_map(|v| match dt {
                    Datatype::Int64 => v.to_le_bytes().to_vec(),
                    Datatype::Int32 => (v as i32).to_le_bytes().to_vec(),
                    Datatype::UInt16 => (v as u16).to_le_bytes().to_vec(),
                    _ => (v as f64).to_le_bytes().to_vec(),
                })
                .collect();
            // Values 10..=20 on the first dimension, 15..=30 on the second: cells 15..=20.
            let ord = |d: &Dimension, v: i64| {
                ordinals(d, &col[v as usize * dt.size()..(v as usize + 1) * dt.size()]).unwrap()[0]
            };
            let bbox = [[ord(&dims[0], 10), ord(&dims[0], 20)], [ord(&dims[1], 15), ord(&dims[1], 30)]];
            let got = cells_in_box_2d(&dims, &[&col, &col], &bbox);
            assert_eq!(got, Some((15..=20).collect::<Vec<u32>>()), "{dt:?}");
            assert_eq!(cells_in_box(&dims, &[&col, &col], &bbox), (15..=20).collect::<Vec<u32>>());
        }
    }

    #[test]
    fn ordinals_refuse_nan_and_infinity() {
        let dim = Dimension::float("d", Datatype::Float64, (-1.0, 1.0), None);
        for (v, why) in [
            (f64::NAN, "is not a finite number"),
            (f64::INFINITY, "is not a finite number"),
            (2.0, "is outside the domain"),
        ] {
            let col: Vec<u8> = [0.5f64, v].iter().flat_map(|x| x.to_le_bytes()).collect();
            let e = ordinals(&dim, &col).unwrap_err();
            assert_eq!((e.cell, e.why), (1, why));
        }
        // -0.0 and +0.0 are one coordinate.
        let col: Vec<u8> = [-0.0f64, 0.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let o = ordinals(&dim, &col).unwrap();
        assert_eq!(o[0], o[1]);
    }

    /// Each dimension's values come out of cells' interleaved ordinals, in every integer width
    /// (a negative domain start wraps back into the type) and for floats.
    #[test]
    fn interleaved_ordinals_give_each_dimension_its_values() {
        let x = Dimension::new("x", Datatype::Int8, (-128, 127), 16);
        let y = Dimension::new("y", Datatype::UInt64, (5, u64::MAX as i128), 16);
        let z = Dimension::float("z", Datatype::Float32, (-2.0, 2.0), None);
        let xs: Vec<u8> = [-128i8, 0, 127].iter().flat_map(|v| v.to_le_bytes()).collect();
        let ys: Vec<u8> = [5u64, u64::MAX, 77].iter().flat_map(|v| v.to_le_bytes()).collect();
        let zs: Vec<u8> = [-1.5f32, 0.25, 2.0].iter().flat_map(|v| v.to_le_bytes()).collect();
        let cols = [(&x, &xs), (&y, &ys), (&z, &zs)];
        let ords: Vec<Vec<u64>> = cols.iter().map(|(d, c)| ordinals(d, c).unwrap()).collect();
        let interleaved: Vec<u64> = (0..3).flat_map(|i| ords.iter().map(move |o| o[i])).collect();
        for (k, (d, c)) in cols.iter().enumerate() {
            assert_eq!(&ordinal_values(d, &interleaved, k, 3), *c, "dimension {k}");
        }
    }

    /// A whole tile's coordinates are checked against its bounding box instead of being made
    /// into ordinals: the same column as the ordinal round trip gives, or the first cell
    /// outside.
    #[test]
    fn columns_check_against_a_range_as_the_ordinal_round_trip() {
        let int = Dimension::new("d", Datatype::Int32, (-50, 50), 10);
        let col: Vec<u8> = [-3i32, 7, 5].iter().flat_map(|x| x.to_le_bytes()).collect();
        let o = ordinals(&int, &col).unwrap();
        let mut c = col.clone();
        assert!(check_in_range(&int, &mut c, [o[0], o[1]]).is_ok());
        assert_eq!(c, ordinal_values(&int, &o, 0, 1));
        let e = check_in_range(&int, &mut c, [o[0], o[2]]).unwrap_err();
        assert_eq!((e.cell, e.value.as_str()), (1, "7"));
        let float = Dimension::float("d", Datatype::Float64, (-1.0, 1.0), None);
        let col: Vec<u8> = [-0.0f64, 0.5, f64::NAN].iter().flat_map(|x| x.to_le_bytes()).collect();
        let o = ordinals(&float, &col[..16]).unwrap();
        let mut c = col[..16].to_vec();
        assert!(check_in_range(&float, &mut c, [o[0], o[1]]).is_ok());
        assert_eq!(c, ordinal_values(&float, &o, 0, 1), "-0.0 comes back as +0.0");
        let mut c = col.clone();
        assert_eq!(check_in_range(&float, &mut c, [o[0], o[1]]).unwrap_err().cell, 2);
    }

    proptest! {
        #[test]
        fn float_ordinals_preserve_order(a in any::<f64>(), b in any::<f64>()) {
            prop_assume!(a.is_finite() && b.is_finite());
            let (oa, ob) = (float_ordinal(a), float_ordinal(b));
            prop_assert_eq!(a.partial_cmp(&b).unwrap(), if a == b { std::cmp::Ordering::Equal } else { oa.cmp(&ob) });
            prop_assert_eq!(ordinal_float(oa), if a == 0.0 { 0.0 } else { a });
        }
    }

    proptest! {
        /// The permutation is the stable sort of the keys, whichever way they are sorted (one
        /// word or a u128 with the index, (u128, index) pairs, the key words; a quicksort or a
        /// merge sort), and the packed keys come in its order, comparing as the key words do.
        #[test]
        fn sort_permutation_is_the_stable_sort(w in 1usize..4, shift in prop_oneof![Just(0u32), Just(20), Just(45), Just(63)],
                                               raw in proptest::collection::vec(0u64..6, 0..300), runs in any::<bool>()) {
            let n = raw.len() / w;
            let keys: Vec<u64> = raw[..n * w].iter().map(|&x| x << shift | x).collect();
            let mut want: Vec<u32> = (0..n as u32).collect();
            want.sort_by(|&a, &b| keys[a as usize * w..][..w].cmp(&keys[b as usize * w..][..w]));
            let got = sort_permutation(&keys, w, if runs { KeysCome::InRuns } else { KeysCome::Shuffled });
            prop_assert_eq!(&got.perm, &want);
            if let Some(p) = got.packed {
                prop_assert_eq!(p.len(), n);
                for k in 1..n {
                    let (a, b) = (&keys[want[k - 1] as usize * w..][..w], &keys[want[k] as usize * w..][..w]);
                    prop_assert_eq!(p[k - 1].cmp(&p[k]), a.cmp(b));
                }
            } else {
                let bits: u32 = (0..w).map(|j| keys.iter().skip(j).step_by(w).map(|x| 64 - x.leading_zeros()).max().unwrap_or(0)).sum();
                prop_assert!(bits > 128, "keys of {} bits did not pack", bits);
            }
        }
    }
}
