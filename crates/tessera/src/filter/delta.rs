//! Delta filter: replaces every element by its difference from the previous element.
//!
//! Elements are the stage input's `m = n / w` consecutive `w`-byte groups, each read as an
//! unsigned little-endian integer of `w * 8` bits (for any `w`; the engine uses 1, 2, 4 and 8).
//! The output has the same length `n` as the input and no header:
//!
//! - output element 0 = input element 0;
//! - output element `i` = (input element `i` - input element `i - 1`) mod 2^(8w), for `i >= 1`,
//!   written as `w` bytes little-endian;
//! - the trailing `n % w` bytes are copied unchanged.
//!
//! Decoding is the running sum mod 2^(8w). Because the arithmetic is on the bits, it is lossless
//! for signed and unsigned integers and for floating-point bit patterns alike. Both directions
//! work in place on the tile's buffer (decoding may also write into another one).

use std::mem::MaybeUninit;

/// Delta-encodes `data` in place, elements of `w` bytes.
pub(super) fn encode(mut data: Vec<u8>, w: usize) -> Vec<u8> {
    match w {
        0 | 1 => encode_u8(&mut data),
        2 => encode_u16(&mut data),
        4 => encode_u32(&mut data),
        8 => encode_u64(&mut data),
        _ => encode_wide(&mut data, w),
    }
    data
}

/// Reverses [`encode`] in place.
pub(super) fn decode(mut data: Vec<u8>, w: usize) -> Vec<u8> {
    match w {
        0 | 1 => decode_u8(&mut data),
        2 => decode_u16(&mut data),
        4 => decode_u32(&mut data),
        8 => decode_u64(&mut data),
        _ => decode_wide(&mut data, w),
    }
    data
}

/// Reverses [`encode`] of `src` into `out`, of the same length, which need not be initialized:
/// every byte of `out` is written.
pub(super) fn decode_into(src: &[u8], w: usize, out: &mut [MaybeUninit<u8>]) {
    match w {
        0 | 1 => decode_into_u8(src, out),
        2 => decode_into_u16(src, out),
        4 => decode_into_u32(src, out),
        8 => decode_into_u64(src, out),
        _ => {
            let plain = decode(src.to_vec(), w);
            for (d, &v) in out.iter_mut().zip(&plain) {
                d.write(v);
            }
        }
    }
}

/// The running sum of `src`'s elements of type `$t` written to `out` (trailing bytes copied).
macro_rules! delta_into {
    ($name:ident, $t:ty) => {
        fn $name(src: &[u8], out: &mut [MaybeUninit<u8>]) {
            let (elems, tail) = src.as_chunks::<{ size_of::<$t>() }>();
            let (outs, out_tail) = out.as_chunks_mut::<{ size_of::<$t>() }>();
            let mut acc: $t = 0;
            for (o, e) in outs.iter_mut().zip(elems) {
                acc = acc.wrapping_add(<$t>::from_le_bytes(*e));
                *o = acc.to_le_bytes().map(MaybeUninit::new);
            }
            for (d, &v) in out_tail.iter_mut().zip(tail) {
                d.write(v);
            }
        }
    };
}

delta_into!(decode_into_u8, u8);
delta_into!(decode_into_u16, u16);
delta_into!(decode_into_u32, u32);
delta_into!(decode_into_u64, u64);

macro_rules! delta_word {
    ($encode:ident, $decode:ident, $t:ty) => {
        fn $encode(data: &mut [u8]) {
            let (elems, _tail) = data.as_chunks_mut::<{ size_of::<$t>() }>();
            let mut prev: $t = 0;
            for e in elems {
                let cur = <$t>::from_le_bytes(*e);
                *e = cur.wrapping_sub(prev).to_le_bytes();
                prev = cur;
            }
        }

        fn $decode(data: &mut [u8]) {
            let (elems, _tail) = data.as_chunks_mut::<{ size_of::<$t>() }>();
            let mut acc: $t = 0;
            for e in elems {
                acc = acc.wrapping_add(<$t>::from_le_bytes(*e));
                *e = acc.to_le_bytes();
            }
        }
    };
}

delta_word!(encode_u16, decode_u16, u16);
delta_word!(encode_u32, decode_u32, u32);
delta_word!(encode_u64, decode_u64, u64);

fn encode_u8(data: &mut [u8]) {
    let mut prev = 0u8;
    for b in data {
        let cur = *b;
        *b = cur.wrapping_sub(prev);
        prev = cur;
    }
}

fn decode_u8(data: &mut [u8]) {
    let mut acc = 0u8;
    for b in data {
        acc = acc.wrapping_add(*b);
        *b = acc;
    }
}

/// Elements of any width: multi-byte subtraction with borrow, last element first so that the
/// previous element is still the original.
fn encode_wide(data: &mut [u8], w: usize) {
    let whole = data.len() - data.len() % w;
    let mut end = whole;
    while end >= 2 * w {
        let (before, cur) = data[..end].split_at_mut(end - w);
        let prev = &before[end - 2 * w..];
        let mut borrow = false;
        for (c, &p) in cur.iter_mut().zip(prev) {
            let (d, b1) = c.overflowing_sub(p);
            let (d, b2) = d.overflowing_sub(u8::from(borrow));
            *c = d;
            borrow = b1 | b2;
        }
        end -= w;
    }
}

/// Reverses [`encode_wide`]: multi-byte addition with carry, first element first.
fn decode_wide(data: &mut [u8], w: usize) {
    let whole = data.len() - data.len() % w;
    let mut start = w;
    while start + w <= whole {
        let (before, rest) = data.split_at_mut(start);
        let prev = &before[start - w..];
        let mut carry = false;
        for (c, &p) in rest[..w].iter_mut().zip(prev) {
            let (s, c1) = c.overflowing_add(p);
            let (s, c2) = s.overflowing_add(u8::from(carry));
            *c = s;
            carry = c1 | c2;
        }
        start += w;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{int32_grid, random, runs, LENGTHS, WIDTHS};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn roundtrip_widths_and_lengths() {
        for &w in WIDTHS {
            for &len in LENGTHS {
                for data in [random(len, 13), runs(len, w)] {
                    let enc = encode(data.clone(), w);
                    assert_eq!(enc.len(), len);
                    assert_eq!(decode(enc, w), data, "w {w} len {len}");
                }
            }
        }
    }

    #[test]
    fn exact_values() {
        let values: [i32; 4] = [5, 3, -1, i32::MIN];
        let mut data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        data.extend_from_slice(&[0xAA, 0xBB]);
        let enc = encode(data.clone(), 4);
        let diffs: Vec<i32> = enc[..16].chunks_exact(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(diffs, [5, -2, -4, i32::MIN.wrapping_sub(-1)]);
        assert_eq!(enc[16..], [0xAA, 0xBB]);
        assert_eq!(decode(enc, 4), data);
    }

    #[test]
    fn wide_matches_native_widths() {
        // The generic path gives the same bytes as the typed ones.
        for (w, len) in [(2, 1001), (4, 4003), (8, 8005)] {
            let data = random(len, w as u64);
            let mut wide = data.clone();
            encode_wide(&mut wide, w);
            assert_eq!(wide, encode(data.clone(), w));
            decode_wide(&mut wide, w);
            assert_eq!(wide, data);
        }
    }

    #[test]
    fn floats_roundtrip_bitwise() {
        let values = [1.5f64, -0.0, f64::NAN, f64::INFINITY, 1e-300, -7.25];
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(decode(encode(data.clone(), 8), 8), data);
        let grid = int32_grid(40_000);
        assert_eq!(decode(encode(grid.clone(), 4), 4), grid);
    }

    proptest! {
        #[test]
        fn roundtrip(data in proptest::collection::vec(any::<u8>(), 0..2000), w in 1usize..20) {
            prop_assert_eq!(decode(encode(data.clone(), w), w), data);
        }
    }
}
