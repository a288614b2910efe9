//! Byte-shuffle filter: transposes the bytes of the elements so that bytes of equal
//! significance are stored together, which helps the compressors after it.
//!
//! For an input of `n` bytes holding `m = n / w` whole elements of `w` bytes, the output has the
//! same length `n` and no header:
//!
//! - output byte `b * m + i` = input byte `i * w + b`, for element `i < m` and byte `b < w`
//!   (all byte-0s of the elements, then all byte-1s, ...);
//! - the trailing `n % w` bytes are copied unchanged after the `m * w` transposed bytes.
//!
//! With `w = 1` (e.g. after a compressor) the filter is the identity. Decoding is the inverse
//! transpose.

use std::mem::MaybeUninit;

use crate::uninit::assume_written;

/// Elements per cache block: the transpose works through the tile one block at a time so that
/// the block's source stays in the L1 cache while each of its `w` planes is written.
const BLOCK: usize = 2048;

/// Shuffles `data`, elements of `w` bytes.
pub(super) fn encode(data: Vec<u8>, w: usize) -> Vec<u8> {
    if w <= 1 || data.len() < 2 * w {
        return data;
    }
    let mut out = vec![0u8; data.len()];
    let whole = data.len() - data.len() % w;
    let (src, tail) = data.split_at(whole);
    let (dst, dst_tail) = out.split_at_mut(whole);
    // The typed extractors shift a little-endian word rather than index bytes, which lets the
    // compiler vectorize the transpose with baseline SSE2/NEON instructions.
    match w {
        2 => shuffle_fixed::<2>(src, dst, |e, b| (u16::from_le_bytes(*e) >> (8 * b)) as u8),
        4 => shuffle_fixed::<4>(src, dst, |e, b| (u32::from_le_bytes(*e) >> (8 * b)) as u8),
        8 => shuffle8(src.as_chunks::<8>().0, dst),
        _ => shuffle_any(src, dst, w),
    }
    dst_tail.copy_from_slice(tail);
    out
}

/// Reverses [`encode`], into a buffer that is not zeroed first (every byte is written).
#[allow(unsafe_code)]
pub(super) fn decode(data: Vec<u8>, w: usize) -> Vec<u8> {
    if w <= 1 || data.len() < 2 * w {
        return data;
    }
    let mut out = Vec::with_capacity(data.len());
    decode_into(&data, w, &mut out.spare_capacity_mut()[..data.len()]);
    // SAFETY: `decode_into` wrote each of the first `data.len()` bytes (`unshuffle_into` writes
    // every byte of an output as long as its input), within the capacity reserved above.
    unsafe { out.set_len(data.len()) };
    out
}

/// Reverses [`encode`] of `src` straight into `out`, of the same length, which need not be
/// initialized: every byte of `out` is written.
pub(super) fn decode_into(src: &[u8], w: usize, out: &mut [MaybeUninit<u8>]) {
    unshuffle_into(src, w, out);
}

/// Reverses a delta stage and then this one (the writer ran delta, then byte shuffle: the
/// default coordinate filters) of `src` straight into `out`, of the same length, for 8-byte
/// elements that fill `src` exactly: each block of elements is put together from its planes in
/// a buffer that stays in the L1 cache, then summed into `out`, so that no second tile-sized
/// buffer is made and read again. `false`, with nothing written, for other widths and lengths.
pub(super) fn decode_delta_into(src: &[u8], w: usize, out: &mut [MaybeUninit<u8>]) -> bool {
    if w != 8 || !src.len().is_multiple_of(8) || src.len() < 16 || out.len() != src.len() {
        return false;
    }
    let m = src.len() / 8;
    let planes: [&[u8]; 8] = std::array::from_fn(|b| &src[b * m..(b + 1) * m]);
    let (outs, _) = out.as_chunks_mut::<8>();
    let mut block = [[MaybeUninit::<u8>::uninit(); 8]; BLOCK];
    let mut acc = 0u64;
    for (k, chunk) in outs.chunks_mut(BLOCK).enumerate() {
        let first = k * BLOCK;
        let vals = &mut block[..chunk.len()];
        unshuffle8(&planes, first, vals);
        // SAFETY: `unshuffle8` wrote every byte of `vals`.
        #[allow(unsafe_code)]
        let vals = unsafe { assume_written(vals.as_flattened()) }.as_chunks::<8>().0;
        for (o, &v) in chunk.iter_mut().zip(vals) {
            acc = acc.wrapping_add(u64::from_le_bytes(v));
            *o = acc.to_le_bytes().map(MaybeUninit::new);
        }
    }
    true
}

/// Puts together 8-byte elements `first..first + dst.len()` from the 8 `planes` into `dst`:
/// groups of 16 elements with SSE2 (x86-64's baseline: three rounds of unpacks transpose 8
/// planes of 16 bytes, 8-10x faster than assembling each element), the rest one by one.
fn unshuffle8(planes: &[&[u8]; 8], first: usize, dst: &mut [[MaybeUninit<u8>; 8]]) {
    let done = unshuffle8_simd(planes, first, dst);
    for (i, e) in dst.iter_mut().enumerate().skip(done) {
        let p = |b: usize| planes[b][first + i];
        *e = [p(0), p(1), p(2), p(3), p(4), p(5), p(6), p(7)].map(MaybeUninit::new);
    }
}

/// The SSE2 part of [`unshuffle8`]: as many whole groups of 16 elements as `dst` holds; returns
/// how many elements it wrote (those first).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn unshuffle8_simd(planes: &[&[u8]; 8], first: usize, dst: &mut [[MaybeUninit<u8>; 8]]) -> usize {
    use std::arch::x86_64::{
        __m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi16, _mm_unpackhi_epi32, _mm_unpackhi_epi8,
        _mm_unpacklo_epi16, _mm_unpacklo_epi32, _mm_unpacklo_epi8,
    };
    let n = dst.len() / 16 * 16;
    assert!(planes.iter().all(|p| p.len() >= first + n), "planes shorter than the elements asked for");
    for g in (0..n).step_by(16) {
        // SAFETY: SSE2 is part of the x86-64 baseline. Each plane holds bytes `first + g ..
        // first + g + 16` (checked above: `g + 16 <= n`), and `dst` holds elements `g .. g + 16`,
        // 128 bytes; the loads and stores are unaligned ones, within those bounds.
        unsafe {
            let ld = |b: usize| _mm_loadu_si128(planes[b].as_ptr().add(first + g).cast::<__m128i>());
            let (p0, p1, p2, p3, p4, p5, p6, p7) = (ld(0), ld(1), ld(2), ld(3), ld(4), ld(5), ld(6), ld(7));
            // Bytes of planes 0-1, 2-3, 4-5, 6-7 side by side: elements 0-7 (lo) and 8-15 (hi).
            let (a0, a1) = (_mm_unpacklo_epi8(p0, p1), _mm_unpackhi_epi8(p0, p1));
            let (b0, b1) = (_mm_unpacklo_epi8(p2, p3), _mm_unpackhi_epi8(p2, p3));
            let (c0, c1) = (_mm_unpacklo_epi8(p4, p5), _mm_unpackhi_epi8(p4, p5));
            let (d0, d1) = (_mm_unpacklo_epi8(p6, p7), _mm_unpackhi_epi8(p6, p7));
            // Bytes 0-3 and 4-7 of each element: elements 0-3, 4-7, 8-11, 12-15.
            let lo = [
                _mm_unpacklo_epi16(a0, b0),
                _mm_unpackhi_epi16(a0, b0),
                _mm_unpacklo_epi16(a1, b1),
                _mm_unpackhi_epi16(a1, b1),
            ];
            let hi = [
                _mm_unpacklo_epi16(c0, d0),
                _mm_unpackhi_epi16(c0, d0),
                _mm_unpacklo_epi16(c1, d1),
                _mm_unpackhi_epi16(c1, d1),
            ];
            let out = dst.as_mut_ptr().add(g).cast::<__m128i>();
            for q in 0..4 {
                // Whole elements, two per register.
                _mm_storeu_si128(out.add(2 * q), _mm_unpacklo_epi32(lo[q], hi[q]));
                _mm_storeu_si128(out.add(2 * q + 1), _mm_unpackhi_epi32(lo[q], hi[q]));
            }
        }
    }
    n
}

/// The portable build has no vector part: [`unshuffle8`] assembles every element.
#[cfg(not(target_arch = "x86_64"))]
fn unshuffle8_simd(_: &[&[u8]; 8], _: usize, _: &mut [[MaybeUninit<u8>; 8]]) -> usize {
    0
}

/// The inverse transpose of `src` into `out` (same length), which need not be initialized.
fn unshuffle_into(src: &[u8], w: usize, out: &mut [MaybeUninit<u8>]) {
    let whole = if w <= 1 || src.len() < 2 * w { 0 } else { src.len() - src.len() % w };
    let (src, tail) = src.split_at(whole);
    let (dst, dst_tail) = out.split_at_mut(whole.min(out.len()));
    let put = MaybeUninit::new;
    match w {
        _ if whole == 0 => {}
        2 => unshuffle_fixed::<2, _>(src, dst, |p, i| [p[0][i], p[1][i]].map(put)),
        4 => unshuffle_fixed::<4, _>(src, dst, |p, i| [p[0][i], p[1][i], p[2][i], p[3][i]].map(put)),
        8 => {
            let m = whole / 8;
            let planes: [&[u8]; 8] = std::array::from_fn(|b| &src[b * m..(b + 1) * m]);
            unshuffle8(&planes, 0, dst.as_chunks_mut::<8>().0);
        }
        _ => unshuffle_any(src, dst, w, put),
    }
    for (d, &v) in dst_tail.iter_mut().zip(tail) {
        *d = put(v);
    }
}

/// Transposes 8-byte elements `src` into 8 planes in `dst` (same length): groups of 16 elements
/// with SSE2 (four rounds of byte unpacks, nearly 4x faster than taking each byte on its own), the
/// rest one by one.
fn shuffle8(src: &[[u8; 8]], dst: &mut [u8]) {
    let m = src.len();
    if m == 0 {
        return;
    }
    let done = shuffle8_simd(src, dst);
    for (b, plane) in dst.chunks_exact_mut(m).enumerate() {
        for (o, e) in plane[done..].iter_mut().zip(&src[done..]) {
            *o = e[b];
        }
    }
}

/// The SSE2 part of [`shuffle8`]: as many whole groups of 16 elements as `src` holds; returns
/// how many elements it transposed (those first).
///
/// Sixteen elements are 8 registers of two elements each: register `k` holds byte `b` of
/// element `e` (`e` = `e3 e2 e1 e0` in bits) when `k = e3 e2 e1`, at byte `e0 b2 b1 b0`. A round
/// `r'[2k] = unpacklo(r[k], r[k + 4])`, `r'[2k + 1] = unpackhi(r[k], r[k + 4])` moves the top
/// bit of the register number into the bottom of the byte position, and the top bit of the byte
/// position into the bottom of the register number; after four rounds register `b` holds byte
/// `b` of elements 0 to 15, in order: a plane's 16 bytes.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn shuffle8_simd(src: &[[u8; 8]], dst: &mut [u8]) -> usize {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_storeu_si128, _mm_unpackhi_epi8, _mm_unpacklo_epi8};
    let m = src.len();
    let n = m / 16 * 16;
    assert_eq!(dst.len(), m * 8, "planes of another length than the elements");
    #[inline(always)]
    fn round(r: [__m128i; 8]) -> [__m128i; 8] {
        // SAFETY: SSE2 is part of the x86-64 baseline; unpacks touch registers only.
        unsafe {
            [
                _mm_unpacklo_epi8(r[0], r[4]),
                _mm_unpackhi_epi8(r[0], r[4]),
                _mm_unpacklo_epi8(r[1], r[5]),
                _mm_unpackhi_epi8(r[1], r[5]),
                _mm_unpacklo_epi8(r[2], r[6]),
                _mm_unpackhi_epi8(r[2], r[6]),
                _mm_unpacklo_epi8(r[3], r[7]),
                _mm_unpackhi_epi8(r[3], r[7]),
            ]
        }
    }
    for g in (0..n).step_by(16) {
        // SAFETY: SSE2 is part of the x86-64 baseline. `src` holds elements `g .. g + 16` (128
        // bytes, `g + 16 <= n <= m`) and each plane `b * m ..` of `dst` bytes `g .. g + 16`;
        // the loads and stores are unaligned ones, within those bounds.
        unsafe {
            let at = src.as_ptr().add(g).cast::<u8>();
            let ld = |k: usize| _mm_loadu_si128(at.add(16 * k).cast::<__m128i>());
            let r = [ld(0), ld(1), ld(2), ld(3), ld(4), ld(5), ld(6), ld(7)];
            let planes = round(round(round(round(r))));
            let out = dst.as_mut_ptr().add(g);
            for (b, p) in planes.into_iter().enumerate() {
                _mm_storeu_si128(out.add(b * m).cast::<__m128i>(), p);
            }
        }
    }
    n
}

#[cfg(not(target_arch = "x86_64"))]
fn shuffle8_simd(_: &[[u8; 8]], _: &mut [u8]) -> usize {
    0
}

/// Transposes `src` (whole `W`-byte elements) into `W` planes in `dst` (same length), one cache
/// block of elements at a time; `byte(e, b)` is byte `b` of element `e`.
fn shuffle_fixed<const W: usize>(src: &[u8], dst: &mut [u8], byte: impl Fn(&[u8; W], usize) -> u8) {
    let (elems, _) = src.as_chunks::<W>();
    let m = elems.len();
    for (block_index, block) in elems.chunks(BLOCK).enumerate() {
        let first = block_index * BLOCK;
        for (b, plane) in dst.chunks_exact_mut(m).enumerate() {
            let plane = &mut plane[first..first + block.len()];
            for (o, e) in plane.iter_mut().zip(block) {
                *o = byte(e, b);
            }
        }
    }
}

/// Reverses [`shuffle_fixed`] in one pass reading the `W` planes of `src` side by side;
/// `assemble(planes, i)` is element `i`.
fn unshuffle_fixed<const W: usize, T>(src: &[u8], dst: &mut [T], assemble: impl Fn(&[&[u8]; W], usize) -> [T; W]) {
    let (elems, _) = dst.as_chunks_mut::<W>();
    let m = elems.len();
    let planes: [&[u8]; W] = std::array::from_fn(|b| &src[b * m..(b + 1) * m]);
    for (i, e) in elems.iter_mut().enumerate() {
        *e = assemble(&planes, i);
    }
}

/// [`shuffle_fixed`] for any width.
fn shuffle_any(src: &[u8], dst: &mut [u8], w: usize) {
    let m = src.len() / w;
    for (b, plane) in dst.chunks_exact_mut(m).enumerate() {
        for (o, e) in plane.iter_mut().zip(src.chunks_exact(w)) {
            *o = e[b];
        }
    }
}

/// [`unshuffle_fixed`] for any width.
fn unshuffle_any<T>(src: &[u8], dst: &mut [T], w: usize, put: impl Fn(u8) -> T) {
    let m = dst.len() / w;
    for (b, plane) in src.chunks_exact(m).enumerate() {
        for (e, &v) in dst.chunks_exact_mut(w).zip(plane) {
            e[b] = put(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{random, runs, LENGTHS, WIDTHS};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn roundtrip_widths_and_lengths() {
        for &w in WIDTHS {
            for &len in LENGTHS {
                for data in [random(len, 17), runs(len, w)] {
                    let enc = encode(data.clone(), w);
                    assert_eq!(enc.len(), len);
                    assert_eq!(decode(enc, w), data, "w {w} len {len}");
                }
            }
        }
    }

    #[test]
    fn exact_layout() {
        let data = vec![0x10, 0x11, 0x12, 0x13, 0x20, 0x21, 0x22, 0x23, 0x30, 0x31, 0x32, 0x33, 0xEE];
        let enc = encode(data.clone(), 4);
        assert_eq!(enc, [0x10, 0x20, 0x30, 0x11, 0x21, 0x31, 0x12, 0x22, 0x32, 0x13, 0x23, 0x33, 0xEE]);
        assert_eq!(decode(enc, 4), data);
        assert_eq!(encode(data.clone(), 1), data);
    }

    #[test]
    fn blocked_paths_match_generic() {
        for (w, len) in [(2, 2 * BLOCK * 3 + 5), (4, 4 * BLOCK + 7), (8, 8 * BLOCK * 2 + 8 * 3 + 1)] {
            let data = random(len, w as u64);
            let whole = len - len % w;
            let mut generic = vec![0; whole];
            shuffle_any(&data[..whole], &mut generic, w);
            let enc = encode(data.clone(), w);
            assert_eq!(enc[..whole], generic);
            let mut back = vec![0; whole];
            unshuffle_any(&generic, &mut back, w, |b| b);
            assert_eq!(back, data[..whole]);
            assert_eq!(decode(enc, w), data);
        }
    }

    /// The vector transpose of 8-byte elements (groups of 16) and the one-by-one rest give
    /// element `i` from byte `i` of each plane, from any first element and for any count.
    #[test]
    fn eight_byte_elements_from_planes_at_any_start_and_count() {
        let planes_data: Vec<Vec<u8>> = (0..8).map(|b| random(200, b)).collect();
        let planes: [&[u8]; 8] = std::array::from_fn(|b| &planes_data[b][..]);
        for first in [0usize, 1, 5, 16, 37] {
            for count in (0..=48).chain([160]) {
                let mut dst = vec![[MaybeUninit::new(0xAAu8); 8]; count];
                unshuffle8(&planes, first, &mut dst);
                for (i, e) in dst.iter().enumerate() {
                    // SAFETY: every byte was initialized at creation.
                    #[allow(unsafe_code)]
                    let got: Vec<u8> = e.iter().map(|b| unsafe { b.assume_init() }).collect();
                    let want: Vec<u8> = (0..8).map(|b| planes[b][first + i]).collect();
                    assert_eq!(got, want, "first {first} count {count} element {i}");
                }
            }
        }
    }

    /// The vector transpose of 8-byte elements (groups of 16) and the one-by-one rest put byte
    /// `b` of element `i` at byte `i` of plane `b`, for any count of elements.
    #[test]
    fn eight_byte_elements_into_planes_at_any_count() {
        for count in (0..=50).chain([160, 1000, 1013]) {
            let data = random(8 * count, count as u64);
            let mut dst = vec![0xAAu8; 8 * count];
            shuffle8(data.as_chunks::<8>().0, &mut dst);
            let mut want = vec![0u8; 8 * count];
            for (i, e) in data.chunks_exact(8).enumerate() {
                for (b, &v) in e.iter().enumerate() {
                    want[b * count + i] = v;
                }
            }
            assert_eq!(dst, want, "count {count}");
        }
    }

    proptest! {
        #[test]
        fn roundtrip(data in proptest::collection::vec(any::<u8>(), 0..3000), w in 1usize..20) {
            prop_assert_eq!(decode(encode(data.clone(), w), w), data);
        }
    }
}
