//! RLE filter: run-length encoding of equal consecutive elements of width `w` (the stage's
//! element size), with literal packets so that data without runs barely grows.
//!
//! Byte format of the stage output, for an input of `n` bytes holding `m = n / w` whole elements
//! followed by `t = n % w` tail bytes:
//!
//! | part    | size     | content                                                   |
//! |---------|----------|-----------------------------------------------------------|
//! | header  | 8        | `n` (u64 LE)                                              |
//! | packets | variable | packets covering exactly the `m` elements, in order      |
//! | tail    | `t`      | the input's last `t` bytes, verbatim                      |
//!
//! Every packet starts with a control word `c` (u32 LE) holding a count `k = c >> 1` (at least 1):
//! - `c & 1 == 1`, run: followed by one element (`w` bytes), which is repeated `k` times;
//! - `c & 1 == 0`, literal: followed by `k` elements (`k * w` bytes) copied verbatim.
//!
//! The writer emits a run only when it is at least `1 + ceil(8 / w)` elements long (9 for bytes,
//! 5 for 2-byte, 3 for 4-byte and 2 for 8-byte elements), when replacing it by a 4 + `w` byte run
//! packet saves at least the 4-byte control word of the literal packet it interrupts, and
//! gathers everything else into literal packets of up to 2^31 - 1 elements. So data without runs
//! grows by only 12 bytes (the header and one control word), and no input grows by more than
//! 12 bytes plus 4 + `w` bytes per 2^31 - 1 elements. Readers accept any sequence of packets.

use super::{alloc_output, corrupt, read_len_header, FilterError, LEN_HEADER};

/// The filter's name in errors.
const NAME: &str = "rle";
/// Size of a packet's control word.
const CONTROL: usize = 4;
/// The largest element count of one packet.
const MAX_COUNT: usize = (u32::MAX >> 1) as usize;

/// Encodes `data` as runs and literals of `w`-byte elements (`w >= 1`).
pub(super) fn encode(data: &[u8], w: usize) -> Vec<u8> {
    let w = w.max(1);
    let whole = data.len() - data.len() % w;
    let (elems, tail) = data.split_at(whole);
    let mut out = Vec::with_capacity(data.len().saturating_add(LEN_HEADER + 2 * CONTROL));
    out.extend_from_slice(&(data.len() as u64).to_le_bytes());
    match w {
        1 => encode_elems(&Fixed::<1>(elems.as_chunks().0), &mut out),
        2 => encode_elems(&Fixed::<2>(elems.as_chunks().0), &mut out),
        4 => encode_elems(&Fixed::<4>(elems.as_chunks().0), &mut out),
        8 => encode_elems(&Fixed::<8>(elems.as_chunks().0), &mut out),
        _ => encode_elems(&Dynamic { data: elems, w }, &mut out),
    }
    out.extend_from_slice(tail);
    out
}

/// Decodes one stage of `w`-byte elements, whose input was at most `max_len` bytes.
pub(super) fn decode(data: &[u8], w: usize, max_len: usize) -> Result<Vec<u8>, FilterError> {
    let w = w.max(1);
    let (len, mut rest) = read_len_header(NAME, data, max_len)?;
    let whole = len - len % w;
    // Every packet takes at least 4 + w bytes and decodes to at most 2^31 - 1 elements.
    let max_whole = (rest.len() / (CONTROL + w)).saturating_mul(MAX_COUNT).saturating_mul(w);
    if whole > max_whole {
        return Err(corrupt(NAME, format!("{} bytes cannot decode to {len}", rest.len())));
    }
    let mut out = alloc_output(NAME, len)?;
    while out.len() < whole {
        let Some((control, after)) = rest.split_first_chunk::<CONTROL>() else {
            return Err(corrupt(NAME, "truncated packet header"));
        };
        let control = u32::from_le_bytes(*control);
        let count = (control >> 1) as usize;
        let remaining = (whole - out.len()) / w;
        if count == 0 || count > remaining {
            return Err(corrupt(NAME, format!("packet of {count} elements where {remaining} remain")));
        }
        let size = if control & 1 == 1 { w } else { count * w };
        let Some((payload, after)) = after.split_at_checked(size) else {
            return Err(corrupt(NAME, "truncated packet"));
        };
        if control & 1 == 1 {
            push_run(&mut out, payload, count);
        } else {
            out.extend_from_slice(payload);
        }
        rest = after;
    }
    if rest.len() != len - whole {
        return Err(corrupt(
            NAME,
            format!("{} bytes after the packets, expected {} tail bytes", rest.len(), len - whole),
        ));
    }
    out.extend_from_slice(rest);
    Ok(out)
}

/// Appends `count` copies of `elem`, doubling the copied range each step.
fn push_run(out: &mut Vec<u8>, elem: &[u8], count: usize) {
    if let [byte] = elem {
        out.resize(out.len() + count, *byte);
        return;
    }
    let start = out.len();
    let total = elem.len() * count;
    out.extend_from_slice(elem);
    while out.len() - start < total {
        let done = out.len() - start;
        out.extend_from_within(start..start + done.min(total - done));
    }
}

/// Random access to the whole elements of the input.
trait Elems {
    /// The element width in bytes.
    fn width(&self) -> usize;
    /// The number of elements.
    fn count(&self) -> usize;
    /// Whether elements `i` and `j` are equal (both in range).
    fn same(&self, i: usize, j: usize) -> bool;
    /// The bytes of elements `start..end`.
    fn bytes(&self, start: usize, end: usize) -> &[u8];
    /// The first `k >= from` whose element equals element `k + 1`, or the element count.
    fn next_repeat(&self, from: usize) -> usize {
        let n = self.count();
        (from..n.saturating_sub(1)).find(|&k| self.same(k, k + 1)).unwrap_or(n)
    }
    /// The first `j > k` whose element differs from element `k`, or the element count.
    fn run_end(&self, k: usize) -> usize {
        let n = self.count();
        (k + 1..n).find(|&j| !self.same(j, k)).unwrap_or(n)
    }
}

/// Elements of a width known at compile time.
struct Fixed<'a, const W: usize>(&'a [[u8; W]]);

impl<const W: usize> Elems for Fixed<'_, W> {
    fn width(&self) -> usize {
        W
    }
    fn count(&self) -> usize {
        self.0.len()
    }
    #[inline(always)]
    fn same(&self, i: usize, j: usize) -> bool {
        self.0.get(i) == self.0.get(j)
    }
    fn bytes(&self, start: usize, end: usize) -> &[u8] {
        self.0.get(start..end).unwrap_or_default().as_flattened()
    }
    fn next_repeat(&self, from: usize) -> usize {
        // Compare each element with its successor a group at a time, with a branch-free fold the
        // compiler vectorizes; only a group holding a match is searched element by element.
        const GROUP: usize = 32;
        let rest = self.0.get(from..).unwrap_or_default();
        let (Some(current), Some(next)) = (rest.get(..rest.len().saturating_sub(1)), rest.get(1..)) else {
            return self.0.len();
        };
        for (g, (a, b)) in current.chunks(GROUP).zip(next.chunks(GROUP)).enumerate() {
            if a.iter().zip(b).fold(false, |any, (x, y)| any | (x == y)) {
                let k = a.iter().zip(b).position(|(x, y)| x == y).unwrap_or(0);
                return from + g * GROUP + k;
            }
        }
        self.0.len()
    }
    fn run_end(&self, k: usize) -> usize {
        const GROUP: usize = 32;
        let Some((value, rest)) = self.0.get(k..).and_then(<[[u8; W]]>::split_first) else {
            return self.0.len();
        };
        for (g, group) in rest.chunks(GROUP).enumerate() {
            if group.iter().fold(false, |any, e| any | (e != value)) {
                let d = group.iter().position(|e| e != value).unwrap_or(0);
                return k + 1 + g * GROUP + d;
            }
        }
        self.0.len()
    }
}

/// Elements of any other width.
struct Dynamic<'a> {
    data: &'a [u8],
    w: usize,
}

impl Elems for Dynamic<'_> {
    fn width(&self) -> usize {
        self.w
    }
    fn count(&self) -> usize {
        self.data.len() / self.w
    }
    fn same(&self, i: usize, j: usize) -> bool {
        self.bytes(i, i + 1) == self.bytes(j, j + 1)
    }
    fn bytes(&self, start: usize, end: usize) -> &[u8] {
        self.data.get(start * self.w..end * self.w).unwrap_or_default()
    }
}

/// Appends the packets encoding all elements of `elems`.
fn encode_elems<E: Elems>(elems: &E, out: &mut Vec<u8>) {
    let w = elems.width();
    let min_run = 1 + 8usize.div_ceil(w);
    let n = elems.count();
    let mut literal_start = 0;
    let mut i = 0;
    while i < n {
        // Elements i..k have no equal neighbour, so k is where the next run (of 2 or more)
        // starts: element k - 1 differs from element k, either because k > i or because i is
        // 0 or the end of the previous run.
        let k = elems.next_repeat(i);
        if k >= n {
            break;
        }
        let j = elems.run_end(k);
        if j - k >= min_run {
            push_literals(elems, literal_start, k, out);
            let mut left = j - k;
            while left > 0 {
                let count = left.min(MAX_COUNT);
                out.extend_from_slice(&((count as u32) << 1 | 1).to_le_bytes());
                out.extend_from_slice(elems.bytes(k, k + 1));
                left -= count;
            }
            literal_start = j;
        }
        i = j;
    }
    push_literals(elems, literal_start, n, out);
}

/// Appends literal packets for elements `start..end`.
fn push_literals<E: Elems>(elems: &E, mut start: usize, end: usize, out: &mut Vec<u8>) {
    while start < end {
        let k = (end - start).min(MAX_COUNT);
        out.extend_from_slice(&((k as u32) << 1).to_le_bytes());
        out.extend_from_slice(elems.bytes(start, start + k));
        start += k;
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
                for data in [random(len, 11), runs(len, w), vec![0; len]] {
                    let enc = encode(&data, w);
                    assert!(enc.len() <= len + 12, "w {w} len {len}: {}", enc.len());
                    assert_eq!(decode(&enc, w, len).unwrap(), data, "w {w} len {len}");
                }
            }
        }
    }

    #[test]
    fn fast_scans_match_generic() {
        fn generic(data: &[u8], w: usize) -> Vec<u8> {
            let whole = data.len() - data.len() % w;
            let mut out = (data.len() as u64).to_le_bytes().to_vec();
            encode_elems(&Dynamic { data: &data[..whole], w }, &mut out);
            out.extend_from_slice(&data[whole..]);
            out
        }
        for w in [1, 2, 4, 8] {
            for len in [0, 1, 9, 63, 64, 65, 1000, 4099] {
                let mixed: Vec<u8> = random(len, 5).iter().map(|b| b % 2).collect();
                for data in [random(len, 1), runs(len, w), vec![3; len], mixed] {
                    assert_eq!(encode(&data, w), generic(&data, w), "w {w} len {len}");
                }
            }
        }
    }

    #[test]
    fn exact_format() {
        // Elements of 2 bytes: a literal of 2, a run of 6, then a 1-byte tail.
        let mut data = vec![1, 0, 2, 0];
        for _ in 0..6 {
            data.extend_from_slice(&[9, 9]);
        }
        data.push(0xEE);
        let enc = encode(&data, 2);
        let mut want = 17u64.to_le_bytes().to_vec();
        want.extend_from_slice(&(2u32 << 1).to_le_bytes());
        want.extend_from_slice(&[1, 0, 2, 0]);
        want.extend_from_slice(&(6u32 << 1 | 1).to_le_bytes());
        want.extend_from_slice(&[9, 9]);
        want.push(0xEE);
        assert_eq!(enc, want);
        // Short runs stay in the literal.
        let enc = encode(&[5, 5, 5, 6], 1);
        assert_eq!(enc[8..], [8, 0, 0, 0, 5, 5, 5, 6]);
    }

    #[test]
    fn compresses_runs_and_barely_grows_without() {
        let zeros = vec![0u8; 1 << 20];
        assert_eq!(encode(&zeros, 4).len(), 8 + 4 + 4);
        let data = int32_grid(1 << 20);
        assert_eq!(encode(&data, 4).len(), (1 << 20) + 12);
    }

    #[test]
    fn rejects_bad_input() {
        let data = runs(10_003, 4);
        let enc = encode(&data, 4);
        for cut in [0, 7, 8, 9, 12, 100, enc.len() - 1] {
            assert!(decode(&enc[..cut], 4, 10_003).is_err(), "cut {cut}");
        }
        let mut longer = enc.clone();
        longer.push(0);
        assert!(decode(&longer, 4, 10_003).is_err());
        assert!(decode(&enc, 4, 10_002).is_err());
        // A zero-count packet.
        let mut bad = 4u64.to_le_bytes().to_vec();
        bad.extend_from_slice(&[1, 0, 0, 0, 7, 7, 7, 7]);
        assert!(decode(&bad, 4, 4).is_err());
        // A run longer than the data.
        let mut bad = 4u64.to_le_bytes().to_vec();
        bad.extend_from_slice(&[5, 0, 0, 0, 7, 7, 7, 7]);
        assert!(decode(&bad, 4, 4).is_err());
        // A huge run from a few bytes is refused before allocating.
        let mut bad = (u64::MAX / 2).to_le_bytes().to_vec();
        bad.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0xFF, 7]);
        assert!(decode(&bad, 1, usize::MAX).is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            w in 1usize..10,
            max in 0usize..1_000_000,
        ) {
            let _ = decode(&data, w, max);
        }

        #[test]
        fn roundtrip(data in proptest::collection::vec(0u8..3, 0..3000), w in 1usize..17) {
            let enc = encode(&data, w);
            prop_assert!(enc.len() <= data.len() + 12);
            prop_assert_eq!(decode(&enc, w, data.len()).unwrap(), data);
        }
    }
}
