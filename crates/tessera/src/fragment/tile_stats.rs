//! Per-tile summaries of attribute values (format version 6, docs/format.md §8.3): for a tile
//! and an attribute, the null count, the count of values that take part in sums and extremes
//! (non-null, not NaN, not NaT), their exact sum, and their smallest and largest value.
//! Computed by the writers from each tile's unfiltered cells in one vectorizable pass, stored in
//! the fragment metadata's `STAT` section, and used by aggregates (`crate::aggregate`) for tiles
//! a query covers whole with no other fragment over them, whose cells then need not be read.

use std::path::Path;

use crate::error::{Error, Result};
use crate::schema::{Attribute, CellValNum, Datatype, NAT};

/// How an attribute's values are summarized (the `kind` of its section entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SummaryKind {
    /// Signed integers, `bool` (0 and 1) and `datetime64` (NaT skipped): `i64` extremes.
    Signed = 1,
    /// Unsigned integers: `u64` extremes.
    Unsigned = 2,
    /// `float32` and `float64` (NaN skipped): `f64` sum and extremes.
    Float = 3,
    /// Text, variable-length and multi-value attributes: null counts only.
    Counts = 4,
}

impl SummaryKind {
    /// The kind of `attr`'s summaries.
    pub fn of(attr: &Attribute) -> Self {
        if attr.cell_val_num != CellValNum::Fixed(1) {
            return SummaryKind::Counts;
        }
        match attr.datatype.storage() {
            Datatype::Utf8 => SummaryKind::Counts,
            Datatype::Float32 | Datatype::Float64 => SummaryKind::Float,
            Datatype::UInt8 if attr.datatype == Datatype::Bool => SummaryKind::Signed,
            Datatype::UInt8 | Datatype::UInt16 | Datatype::UInt32 | Datatype::UInt64 => SummaryKind::Unsigned,
            _ => SummaryKind::Signed,
        }
    }

    fn from_u32(v: u32) -> Option<Self> {
        Some(match v {
            1 => SummaryKind::Signed,
            2 => SummaryKind::Unsigned,
            3 => SummaryKind::Float,
            4 => SummaryKind::Counts,
            _ => return None,
        })
    }
}

/// The sum and extremes of a tile's values (floats compare by their bits).
#[derive(Debug, Clone, Copy)]
pub enum Extremes {
    /// Integers (signed, unsigned, bool, datetime64): exact.
    Int {
        /// The exact sum.
        sum: i128,
        /// The smallest value (0 when there is none).
        min: i128,
        /// The largest value (0 when there is none).
        max: i128,
    },
    /// Floats, as `f64`.
    Float {
        /// The sum, added in `f64`.
        sum: f64,
        /// The smallest value (0 when there is none).
        min: f64,
        /// The largest value (0 when there is none).
        max: f64,
    },
    /// Not summarized (`SummaryKind::Counts`).
    None,
}

impl PartialEq for Extremes {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Extremes::Int { sum: a, min: b, max: c }, Extremes::Int { sum: x, min: y, max: z }) => {
                (a, b, c) == (x, y, z)
            }
            (Extremes::Float { sum: a, min: b, max: c }, Extremes::Float { sum: x, min: y, max: z }) => {
                [a, b, c].map(|v| v.to_bits()) == [x, y, z].map(|v| v.to_bits())
            }
            (Extremes::None, Extremes::None) => true,
            _ => false,
        }
    }
}

impl Eq for Extremes {}

/// One attribute's values in one tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileSummary {
    /// Null cells (0 for attributes that are not nullable).
    pub nulls: u64,
    /// Values that took part in `extremes`: non-null, not NaN, not NaT (`Counts`: 0).
    pub values: u64,
    /// Their sum and extremes.
    pub extremes: Extremes,
}

/// One attribute's summaries in a fragment: the tiles that have one, in increasing tile order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttrStats {
    /// The attribute's index in the schema.
    pub attr: u32,
    /// How its values are summarized.
    pub kind: SummaryKind,
    /// `(tile number, summary)`, tile numbers strictly increasing.
    pub tiles: Vec<(u64, TileSummary)>,
}

/// The per-tile summaries of a fragment (empty: none, as in fragments before version 6).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TileStats {
    /// Per attribute with summaries, in increasing attribute order.
    pub attrs: Vec<AttrStats>,
}

/// Tag of the statistics section of the metadata ("STAT", format version 6).
pub(crate) const STATS_TAG: &[u8; 4] = b"STAT";
/// Bytes of one tile record: tile, nulls, values, a 16-byte sum, two 8-byte extremes.
const RECORD: u64 = 8 + 8 + 8 + 16 + 8 + 8;

impl TileStats {
    /// The summary of attribute `attr` in tile `tile`, if the fragment has one.
    pub fn of(&self, attr: usize, tile: u64) -> Option<&TileSummary> {
        let a = self.attrs.iter().find(|a| a.attr as usize == attr)?;
        let at = a.tiles.binary_search_by_key(&tile, |t| t.0).ok()?;
        Some(&a.tiles[at].1)
    }

    /// Whether no tile has a summary.
    pub fn is_empty(&self) -> bool {
        self.attrs.iter().all(|a| a.tiles.is_empty())
    }

    /// Builds the stats from per-tile summaries `(tile, attr, kind, summary)` in any order.
    pub(crate) fn collect(mut rows: Vec<(u64, u32, SummaryKind, TileSummary)>) -> Self {
        rows.sort_by_key(|r| (r.1, r.0));
        let mut attrs: Vec<AttrStats> = Vec::new();
        for (tile, attr, kind, s) in rows {
            match attrs.last_mut() {
                Some(a) if a.attr == attr => {
                    if a.tiles.last().is_some_and(|t| t.0 == tile) {
                        continue;
                    }
                    a.tiles.push((tile, s));
                }
                _ => attrs.push(AttrStats { attr, kind, tiles: vec![(tile, s)] }),
            }
        }
        Self { attrs }
    }

    /// Appends the section (tag included) to `b`; nothing when empty.
    pub(crate) fn encode(&self, b: &mut Vec<u8>) {
        if self.is_empty() {
            return;
        }
        let attrs: Vec<&AttrStats> = self.attrs.iter().filter(|a| !a.tiles.is_empty()).collect();
        b.extend_from_slice(STATS_TAG);
        b.extend_from_slice(&(attrs.len() as u32).to_le_bytes());
        for a in attrs {
            b.extend_from_slice(&a.attr.to_le_bytes());
            b.extend_from_slice(&(a.kind as u32).to_le_bytes());
            b.extend_from_slice(&(a.tiles.len() as u64).to_le_bytes());
            for (tile, s) in &a.tiles {
                b.extend_from_slice(&tile.to_le_bytes());
                b.extend_from_slice(&s.nulls.to_le_bytes());
                b.extend_from_slice(&s.values.to_le_bytes());
                let (sum, min, max): ([u8; 16], [u8; 8], [u8; 8]) = match (a.kind, s.extremes) {
                    (SummaryKind::Signed, Extremes::Int { sum, min, max }) => {
                        (sum.to_le_bytes(), (min as i64).to_le_bytes(), (max as i64).to_le_bytes())
                    }
                    (SummaryKind::Unsigned, Extremes::Int { sum, min, max }) => {
                        (sum.to_le_bytes(), (min as u64).to_le_bytes(), (max as u64).to_le_bytes())
                    }
                    (SummaryKind::Float, Extremes::Float { sum, min, max }) => {
                        let mut s16 = [0u8; 16];
                        s16[..8].copy_from_slice(&sum.to_le_bytes());
                        (s16, min.to_le_bytes(), max.to_le_bytes())
                    }
                    _ => ([0; 16], [0; 8], [0; 8]),
                };
                b.extend_from_slice(&sum);
                b.extend_from_slice(&min);
                b.extend_from_slice(&max);
            }
        }
    }

    /// Parses the section after its tag from `b` (the rest of the payload from `*at`), for a
    /// fragment of `tiles` tiles whose tile `k` holds at most `cells(k)` cells; `path` names the
    /// file in errors.
    pub(crate) fn decode(
        b: &[u8],
        at: &mut usize,
        tiles: u64,
        cells: impl Fn(u64) -> u64,
        path: &Path,
    ) -> Result<Self> {
        let bad = |what: String| Error::corrupt(path, format!("tile statistics: {what}"));
        let take = |at: &mut usize, n: usize| -> Result<&[u8]> {
            let s = b.get(*at..*at + n).ok_or_else(|| Error::corrupt(path, "tile statistics end early"))?;
            *at += n;
            Ok(s)
        };
        let u32_of = |s: &[u8]| u32::from_le_bytes([s[0], s[1], s[2], s[3]]);
        let u64_of = |s: &[u8]| u64::from_le_bytes(s[..8].try_into().unwrap_or([0; 8]));
        let n = u32_of(take(at, 4)?);
        let mut attrs: Vec<AttrStats> = Vec::new();
        for _ in 0..n {
            let head = take(at, 16)?;
            let (attr, kind, count) = (u32_of(&head[..4]), u32_of(&head[4..8]), u64_of(&head[8..]));
            let kind = SummaryKind::from_u32(kind).ok_or_else(|| bad(format!("attribute {attr}: kind {kind}")))?;
            if attrs.last().is_some_and(|a| a.attr >= attr) {
                return Err(bad(format!("attribute {attr} out of order or repeated")));
            }
            if count > tiles || count.saturating_mul(RECORD) > (b.len() - *at) as u64 {
                return Err(bad(format!("attribute {attr}: {count} records for {tiles} tiles")));
            }
            let mut list = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let r = take(at, RECORD as usize)?;
                let (tile, nulls, values) = (u64_of(&r[..8]), u64_of(&r[8..16]), u64_of(&r[16..24]));
                let (sum, min, max) = (&r[24..40], &r[40..48], &r[48..56]);
                let in_order = list.last().is_none_or(|t: &(u64, TileSummary)| t.0 < tile);
                if tile >= tiles || !in_order || nulls.checked_add(values).is_none_or(|c| c > cells(tile)) {
                    return Err(bad(format!("attribute {attr}, tile {tile}: {nulls} nulls and {values} values")));
                }
                let extremes = match kind {
                    SummaryKind::Signed | SummaryKind::Unsigned => {
                        let sum = i128::from_le_bytes(sum.try_into().unwrap_or([0; 16]));
                        let (lo, hi) = (u64_of(min), u64_of(max));
                        let (min, max) = if kind == SummaryKind::Signed {
                            (i128::from(lo as i64), i128::from(hi as i64))
                        } else {
                            (i128::from(lo), i128::from(hi))
                        };
                        let span = |v: i128| i128::from(values) * v;
                        if values > 0 && (min > max || sum < span(min) || sum > span(max)) {
                            return Err(bad(format!(
                                "attribute {attr}, tile {tile}: sum {sum} outside [{min}, {max}]"
                            )));
                        }
                        Extremes::Int { sum, min, max }
                    }
                    SummaryKind::Float => {
                        let (sum, min, max) =
                            (f64::from_bits(u64_of(sum)), f64::from_bits(u64_of(min)), f64::from_bits(u64_of(max)));
                        if values > 0 && (min.is_nan() || max.is_nan() || min > max) {
                            return Err(bad(format!("attribute {attr}, tile {tile}: extremes {min} > {max}")));
                        }
                        Extremes::Float { sum, min, max }
                    }
                    SummaryKind::Counts => Extremes::None,
                };
                list.push((tile, TileSummary { nulls, values, extremes }));
            }
            attrs.push(AttrStats { attr, kind, tiles: list });
        }
        Ok(Self { attrs })
    }
}

/// Whether fragment writers summarize `attr` from its data file alone, chunk by chunk while
/// filtering it (attributes without nulls, of fixed-size cells); the others are summarized by
/// the writers from their validity (and data) buffers.
pub(crate) fn summarized_from_data(attr: &Attribute) -> bool {
    !attr.nullable && !attr.is_var()
}

/// Values per block of the integer sums: block sums of 32-bit halves fit in 64 bits.
const BLOCK: usize = 1 << 20;

/// The summary of one tile of `attr`: its fixed-size `data` (ignored for `Counts` kinds) and,
/// for nullable attributes, its `validity` bytes (1 valid); `cells` is the tile's cell count.
pub(crate) fn summarize(attr: &Attribute, data: &[u8], validity: Option<&[u8]>, cells: u64) -> TileSummary {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: `summarize_avx2` only requires AVX2, which the CPU has (checked just above).
        #[allow(unsafe_code)]
        return unsafe { summarize_avx2(attr, data, validity, cells) };
    }
    summarize_portable(attr, data, validity, cells)
}

/// [`summarize_portable`] compiled for AVX2 (8 lanes of 32-bit min, max and widening adds per
/// instruction, where the baseline x86-64 has neither 32-bit min nor max).
/// Unsafe only to call (STYLE.md §8: kept in this leaf module): a function compiled for a CPU
/// feature, called after checking the CPU has it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[allow(unsafe_code)]
unsafe fn summarize_avx2(attr: &Attribute, data: &[u8], validity: Option<&[u8]>, cells: u64) -> TileSummary {
    summarize_portable(attr, data, validity, cells)
}

#[inline(always)]
fn summarize_portable(attr: &Attribute, data: &[u8], validity: Option<&[u8]>, cells: u64) -> TileSummary {
    let nulls = validity.map_or(0, |v| v.iter().filter(|&&b| b == 0).count() as u64);
    let kind = SummaryKind::of(attr);
    let dt = attr.datatype;
    let (values, extremes) = match kind {
        SummaryKind::Counts => (0, Extremes::None),
        SummaryKind::Float => {
            let (n, sum, min, max) = match dt {
                Datatype::Float32 => floats::<4>(data, validity, |b| f32::from_le_bytes(b).into()),
                _ => floats::<8>(data, validity, f64::from_le_bytes),
            };
            (
                n,
                if n == 0 {
                    Extremes::Float { sum: 0.0, min: 0.0, max: 0.0 }
                } else {
                    Extremes::Float { sum, min, max }
                },
            )
        }
        SummaryKind::Signed | SummaryKind::Unsigned => {
            let (n, sum, min, max) = match dt.storage() {
                Datatype::Int8 => ints::<i8>(data, validity, None),
                Datatype::Int16 => ints::<i16>(data, validity, None),
                Datatype::Int32 => ints::<i32>(data, validity, None),
                Datatype::UInt8 => ints::<u8>(data, validity, None),
                Datatype::UInt16 => ints::<u16>(data, validity, None),
                Datatype::UInt32 => ints::<u32>(data, validity, None),
                Datatype::UInt64 => ints::<u64>(data, validity, None),
                _ => ints::<i64>(data, validity, dt.time_unit().map(|_| NAT)),
            };
            let (min, max) = if n == 0 { (0, 0) } else { (min, max) };
            (n, Extremes::Int { sum, min, max })
        }
    };
    debug_assert!(nulls + values <= cells);
    TileSummary { nulls, values, extremes }
}

impl TileSummary {
    /// The summary of the cells of `self` and `other` together (exact for integers).
    pub(crate) fn merge(self, other: TileSummary) -> TileSummary {
        let (a, b) = (self.values > 0, other.values > 0);
        // The extreme of the sides that have values.
        fn pick<T: Copy>(a: bool, b: bool, x: T, y: T, both: impl Fn(T, T) -> T) -> T {
            match (a, b) {
                (true, true) => both(x, y),
                (true, false) => x,
                _ => y,
            }
        }
        let extremes = match (self.extremes, other.extremes) {
            (Extremes::Int { sum: s, min: l, max: h }, Extremes::Int { sum: t, min: m, max: k }) => Extremes::Int {
                sum: s.saturating_add(t),
                min: pick(a, b, l, m, i128::min),
                max: pick(a, b, h, k, i128::max),
            },
            (Extremes::Float { sum: s, min: l, max: h }, Extremes::Float { sum: t, min: m, max: k }) => {
                Extremes::Float { sum: s + t, min: pick(a, b, l, m, f64::min), max: pick(a, b, h, k, f64::max) }
            }
            (e, _) => e,
        };
        TileSummary { nulls: self.nulls + other.nulls, values: self.values + other.values, extremes }
    }
}

/// The summary of the cells of `attr` that the cell runs `runs` (`(first cell, len)`) pick
/// out of the fixed-size `data` and `validity` buffers (empty slices when absent).
pub(crate) fn summarize_runs(
    attr: &Attribute,
    data: &[u8],
    validity: Option<&[u8]>,
    runs: impl Iterator<Item = (usize, usize)>,
) -> TileSummary {
    let cs = if SummaryKind::of(attr) == SummaryKind::Counts { 0 } else { attr.cell_size() };
    let mut out: Option<TileSummary> = None;
    for (at, len) in runs {
        let d = &data[at * cs..(at + len) * cs];
        let s = summarize(attr, d, validity.map(|v| &v[at..at + len]), len as u64);
        out = Some(out.map_or(s, |o| o.merge(s)));
    }
    out.unwrap_or_else(|| summarize(attr, &[], validity.map(|_| &[][..]), 0))
}

/// An integer type as stored: little-endian bytes, and its value split into two halves whose
/// sums over a block fit in `i64` (the value itself and 0 for types up to 32 bits).
trait IntValue: Copy + Ord + Into<i128> {
    const N: usize;
    const MIN: Self;
    const MAX: Self;
    fn read(b: &[u8]) -> Self;
    fn halves(self) -> (i64, i64);
}

macro_rules! int_value {
    ($($t:ty, $n:expr, $small:expr);*) => {$(
        impl IntValue for $t {
            const N: usize = $n;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            #[inline(always)]
            fn read(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
            #[inline(always)]
            #[allow(clippy::cast_possible_wrap, clippy::cast_lossless)]
            fn halves(self) -> (i64, i64) {
                if $small {
                    (self as i64, 0)
                } else {
                    // Low 32 bits (never negative) and the rest, shifted arithmetically.
                    ((self as i64) & 0xffff_ffff, (self as i128 >> 32) as i64)
                }
            }
        }
    )*};
}

int_value!(i8, 1, true; i16, 2, true; i32, 4, true; i64, 8, false;
           u8, 1, true; u16, 2, true; u32, 4, true; u64, 8, false);

/// Count, exact sum (halves summed per block of `BLOCK` values in `i64`), min and max of integer
/// values, skipping nulls and `skip` (NaT). The loop without nulls or skipped values has no
/// branch, so it vectorizes.
#[inline(always)]
fn ints<T: IntValue>(data: &[u8], validity: Option<&[u8]>, skip: Option<T>) -> (u64, i128, i128, i128) {
    let (mut n, mut sum, mut min, mut max) = (0u64, 0i128, T::MAX, T::MIN);
    for (b, block) in data.chunks(BLOCK * T::N).enumerate() {
        let (mut lo, mut hi, mut cnt) = (0i64, 0i64, 0u64);
        let values = block.chunks_exact(T::N).map(T::read);
        match (validity, skip) {
            (None, None) => {
                for v in values {
                    let (l, h) = v.halves();
                    lo += l;
                    hi += h;
                    min = min.min(v);
                    max = max.max(v);
                }
                cnt = (block.len() / T::N) as u64;
            }
            _ => {
                let valid = validity.map(|v| &v[b * BLOCK..(b * BLOCK + block.len() / T::N)]);
                for (j, v) in values.enumerate() {
                    let ok = valid.is_none_or(|m| m[j] != 0) && skip != Some(v);
                    let (l, h) = if ok { v.halves() } else { (0, 0) };
                    lo += l;
                    hi += h;
                    cnt += u64::from(ok);
                    min = if ok { min.min(v) } else { min };
                    max = if ok { max.max(v) } else { max };
                }
            }
        }
        sum += (i128::from(hi) << 32) + i128::from(lo);
        n += cnt;
    }
    (n, sum, min.into(), max.into())
}

/// Lanes of the float sum: independent partial sums (in a fixed order, so the result depends
/// only on the values) let the loop vectorize.
const LANES: usize = 8;

/// Count, sum, min and max of float values, skipping nulls and NaN.
#[inline(always)]
fn floats<const N: usize>(
    data: &[u8],
    validity: Option<&[u8]>,
    conv: impl Fn([u8; N]) -> f64 + Copy,
) -> (u64, f64, f64, f64) {
    let mut sums = [0f64; LANES];
    let (mut mins, mut maxs) = ([f64::INFINITY; LANES], [f64::NEG_INFINITY; LANES]);
    let mut counts = [0u64; LANES];
    let read = |b: &[u8]| {
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        conv(a)
    };
    let mut add = |lane: usize, v: f64, valid: bool| {
        let ok = valid && !v.is_nan();
        sums[lane] += if ok { v } else { 0.0 };
        mins[lane] = if ok && v < mins[lane] { v } else { mins[lane] };
        maxs[lane] = if ok && v > maxs[lane] { v } else { maxs[lane] };
        counts[lane] += u64::from(ok);
    };
    let groups = data.chunks_exact(N * LANES);
    let tail = groups.remainder();
    let whole = data.len() / N / LANES * LANES;
    match validity {
        None => {
            for g in groups {
                for lane in 0..LANES {
                    add(lane, read(&g[lane * N..lane * N + N]), true);
                }
            }
        }
        Some(valid) => {
            for (g, m) in groups.zip(valid.chunks_exact(LANES)) {
                for lane in 0..LANES {
                    add(lane, read(&g[lane * N..lane * N + N]), m[lane] != 0);
                }
            }
        }
    }
    for (lane, b) in tail.chunks_exact(N).enumerate() {
        add(lane, read(b), validity.is_none_or(|m| m[whole + lane] != 0));
    }
    let sum = sums.iter().sum();
    let min = mins.iter().copied().fold(f64::INFINITY, f64::min);
    let max = maxs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (counts.iter().sum(), sum, min, max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Attribute, TimeUnit};
    use proptest::prelude::*;

    fn attr(dt: Datatype, nullable: bool) -> Attribute {
        let mut a = Attribute::new("a", dt);
        a.nullable = nullable;
        a
    }

    fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }

    proptest! {
        /// Integer summaries equal a plain loop over the values, nulls skipped, sums exact.
        #[test]
        fn int64_summary_is_exact(v in proptest::collection::vec(any::<i64>(), 0..300), mask in any::<u64>()) {
            let valid: Vec<u8> = (0..v.len()).map(|i| u8::from((mask >> (i % 64)) & 1 == 1)).collect();
            let s = summarize(&attr(Datatype::Int64, true), &le(&v, i64::to_le_bytes), Some(&valid), v.len() as u64);
            let kept: Vec<i64> = v.iter().zip(&valid).filter(|(_, k)| **k == 1).map(|(x, _)| *x).collect();
            prop_assert_eq!(s.nulls, (v.len() - kept.len()) as u64);
            prop_assert_eq!(s.values, kept.len() as u64);
            let sum: i128 = kept.iter().map(|&x| i128::from(x)).sum();
            let (min, max) = (kept.iter().min().map_or(0, |&x| x.into()), kept.iter().max().map_or(0, |&x| x.into()));
            prop_assert_eq!(s.extremes, Extremes::Int { sum, min, max });
        }

        #[test]
        fn uint64_summary_is_exact(v in proptest::collection::vec(any::<u64>(), 0..300)) {
            let s = summarize(&attr(Datatype::UInt64, false), &le(&v, u64::to_le_bytes), None, v.len() as u64);
            let sum: i128 = v.iter().map(|&x| i128::from(x)).sum();
            let (min, max) = (v.iter().min().map_or(0, |&x| x.into()), v.iter().max().map_or(0, |&x| x.into()));
            prop_assert_eq!(s.extremes, Extremes::Int { sum, min, max });
            prop_assert_eq!(s.values, v.len() as u64);
        }

        /// Float summaries skip NaN; the sum is within rounding of the exact one.
        #[test]
        fn float_summary_skips_nan(v in proptest::collection::vec(prop_oneof![Just(f64::NAN), -1e6..1e6f64, Just(f64::INFINITY)], 0..100)) {
            let s = summarize(&attr(Datatype::Float64, false), &le(&v, f64::to_le_bytes), None, v.len() as u64);
            let kept: Vec<f64> = v.iter().copied().filter(|x| !x.is_nan()).collect();
            prop_assert_eq!(s.values, kept.len() as u64);
            let Extremes::Float { sum, min, max } = s.extremes else { panic!("not a float summary") };
            if kept.is_empty() {
                prop_assert_eq!((sum, min, max), (0.0, 0.0, 0.0));
            } else {
                let exact: f64 = kept.iter().sum();
                prop_assert!(sum == exact || (sum - exact).abs() <= 1e-6 * exact.abs().max(1.0), "{} {}", sum, exact);
                prop_assert_eq!(min, kept.iter().copied().fold(f64::INFINITY, f64::min));
                prop_assert_eq!(max, kept.iter().copied().fold(f64::NEG_INFINITY, f64::max));
            }
        }
    }

    /// Sums over several blocks of values stay exact at the types' extremes.
    #[test]
    fn sums_across_blocks_are_exact() {
        let n = 2 * BLOCK + 5;
        let big = vec![i64::MAX; n];
        let s = summarize(&attr(Datatype::Int64, false), &le(&big, i64::to_le_bytes), None, n as u64);
        assert_eq!(
            s.extremes,
            Extremes::Int { sum: i128::from(i64::MAX) * n as i128, min: i64::MAX.into(), max: i64::MAX.into() }
        );
        let small = vec![i64::MIN + 1; n];
        let s = summarize(&attr(Datatype::Int64, false), &le(&small, i64::to_le_bytes), None, n as u64);
        let Extremes::Int { sum, .. } = s.extremes else { panic!() };
        assert_eq!(sum, i128::from(i64::MIN + 1) * n as i128);
        let u = vec![u64::MAX; n];
        let s = summarize(&attr(Datatype::UInt64, false), &le(&u, u64::to_le_bytes), None, n as u64);
        let Extremes::Int { sum, .. } = s.extremes else { panic!() };
        assert_eq!(sum, i128::from(u64::MAX) * n as i128);
        let i = vec![i32::MIN; n];
        let valid: Vec<u8> = (0..n).map(|k| u8::from(k % 3 != 0)).collect();
        let s = summarize(&attr(Datatype::Int32, true), &le(&i, i32::to_le_bytes), Some(&valid), n as u64);
        let kept = valid.iter().filter(|&&v| v == 1).count();
        assert_eq!((s.nulls, s.values), ((n - kept) as u64, kept as u64));
        assert_eq!(
            s.extremes,
            Extremes::Int { sum: i128::from(i32::MIN) * kept as i128, min: i32::MIN.into(), max: i32::MIN.into() }
        );
    }

    #[test]
    fn times_skip_nat_and_small_types_widen() {
        let t = [5i64, NAT, -3];
        let s = summarize(&attr(Datatype::Datetime64(TimeUnit::Second), false), &le(&t, i64::to_le_bytes), None, 3);
        assert_eq!((s.values, s.extremes), (2, Extremes::Int { sum: 2, min: -3, max: 5 }));
        let b = [1u8, 0, 1, 1];
        let s = summarize(&attr(Datatype::Bool, false), &b, None, 4);
        assert_eq!(s.extremes, Extremes::Int { sum: 3, min: 0, max: 1 });
        let i = [-128i8, 127, -1];
        let s = summarize(&attr(Datatype::Int8, false), &le(&i, i8::to_le_bytes), None, 3);
        assert_eq!(s.extremes, Extremes::Int { sum: -2, min: -128, max: 127 });
        let u = [u32::MAX, 7];
        let s = summarize(&attr(Datatype::UInt32, false), &le(&u, u32::to_le_bytes), None, 2);
        assert_eq!(s.extremes, Extremes::Int { sum: i128::from(u32::MAX) + 7, min: 7, max: i128::from(u32::MAX) });
    }

    #[test]
    fn section_round_trips_and_rejects_inconsistent_records() {
        let int = |sum, min, max| TileSummary { nulls: 1, values: 3, extremes: Extremes::Int { sum, min, max } };
        let stats = TileStats::collect(vec![
            (2, 0, SummaryKind::Signed, int(-6, -5, 2)),
            (0, 0, SummaryKind::Signed, int(0, -1, 1)),
            (
                1,
                3,
                SummaryKind::Float,
                TileSummary { nulls: 0, values: 2, extremes: Extremes::Float { sum: 1.5, min: -1.0, max: 2.5 } },
            ),
            (1, 5, SummaryKind::Counts, TileSummary { nulls: 4, values: 0, extremes: Extremes::None }),
        ]);
        let mut b = Vec::new();
        stats.encode(&mut b);
        assert_eq!(&b[..4], STATS_TAG);
        let back = TileStats::decode(&b, &mut 4, 3, |_| 10, Path::new("m")).unwrap();
        assert_eq!(back, stats);
        assert_eq!(back.of(0, 2), Some(&int(-6, -5, 2)));
        assert_eq!(back.of(0, 1), None);
        for n in 4..b.len() {
            assert!(TileStats::decode(&b[..n], &mut 4, 3, |_| 10, Path::new("m")).is_err());
        }
        // More nulls and values than the tile has cells, or a tile past the end: corruption.
        let e = TileStats::decode(&b, &mut 4, 3, |_| 3, Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("1 nulls and 3 values"), "{e}");
        assert!(TileStats::decode(&b, &mut 4, 2, |_| 10, Path::new("m")).is_err());
        // A sum outside values * [min, max] is corruption.
        let bad = TileStats::collect(vec![(0, 0, SummaryKind::Signed, int(100, -1, 1))]);
        let mut b = Vec::new();
        bad.encode(&mut b);
        let e = TileStats::decode(&b, &mut 4, 3, |_| 10, Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("sum 100 outside [-1, 1]"), "{e}");
    }
}
