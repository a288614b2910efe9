//! LZ4 filter: LZ4 block compression (the raw block format, no frame).
//!
//! Byte format of the stage output:
//!
//! | offset | size | content                                                  |
//! |--------|------|----------------------------------------------------------|
//! | 0      | 8    | `n`, the length of the stage input (u64 LE)              |
//! | 8      | rest | one LZ4 block (lz4's `Block_format.md`) decoding to `n` bytes |
//!
//! The block is a sequence of sequences (token, literal length extension, literals, 2-byte LE
//! match offset, match length extension), the last of which has literals only; it is what
//! `LZ4_compress_default` produces, so `LZ4_decompress_safe(stage + 8, dst, size - 8, n)` or
//! Python's `lz4.block.decompress(stage[8:], uncompressed_size=n)` decodes it.

use super::{alloc_output, corrupt, read_len_header, with_len_header, FilterError, LEN_HEADER};

/// The filter's name in errors.
const NAME: &str = "lz4";
/// An LZ4 block cannot expand data by more than this factor (255 match bytes per extra byte).
const MAX_RATIO: usize = 256;

/// Compresses `data`.
pub(super) fn encode(data: &[u8]) -> Vec<u8> {
    let bound = lz4_flex::block::get_maximum_output_size(data.len());
    let mut out = with_len_header(data.len(), LEN_HEADER.saturating_add(bound));
    out.resize(LEN_HEADER.saturating_add(bound), 0);
    let written = match out.get_mut(LEN_HEADER..) {
        Some(body) => lz4_flex::block::compress_into(data, body).ok(),
        None => None,
    };
    match written {
        Some(written) => out.truncate(LEN_HEADER + written),
        // Unreachable: the buffer has the documented maximum size. Fall back to the
        // allocating API rather than fail.
        None => {
            out.truncate(LEN_HEADER);
            out.extend_from_slice(&lz4_flex::block::compress(data));
        }
    }
    out
}

/// Decompresses one stage, whose input was at most `max_len` bytes.
pub(super) fn decode(data: &[u8], max_len: usize) -> Result<Vec<u8>, FilterError> {
    let (len, body) = read_len_header(NAME, data, max_len)?;
    if len > body.len().saturating_mul(MAX_RATIO).saturating_add(64) {
        return Err(corrupt(NAME, format!("{} bytes cannot decompress to {len}", body.len())));
    }
    let mut out = alloc_output(NAME, len)?;
    out.resize(len, 0);
    let written = lz4_flex::block::decompress_into(body, &mut out).map_err(|e| corrupt(NAME, e.to_string()))?;
    if written != len {
        return Err(corrupt(NAME, format!("block holds {written} bytes, header says {len}")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{int32_grid, random, runs, LENGTHS};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn roundtrip_lengths() {
        for &len in LENGTHS {
            for data in [random(len, 5), runs(len, 2), int32_grid(len)] {
                let enc = encode(&data);
                assert_eq!(decode(&enc, len).unwrap(), data, "len {len}");
            }
        }
    }

    #[test]
    fn format_is_len_header_then_block() {
        let data = int32_grid(100_000);
        let enc = encode(&data);
        assert_eq!(enc[..8], 100_000u64.to_le_bytes());
        assert_eq!(lz4_flex::block::decompress(&enc[8..], 100_000).unwrap(), data);
        assert!(enc.len() < data.len() / 2);
    }

    #[test]
    fn rejects_bad_input() {
        let data = int32_grid(10_000);
        let enc = encode(&data);
        for cut in [0, 7, 8, 9, 100, enc.len() - 1] {
            assert!(decode(&enc[..cut], 10_000).is_err(), "cut {cut}");
        }
        assert!(decode(&enc, 9_999).is_err());
        let mut wrong_len = enc.clone();
        wrong_len[..8].copy_from_slice(&9_999u64.to_le_bytes());
        assert!(decode(&wrong_len, 10_000).is_err());
        wrong_len[..8].copy_from_slice(&10_001u64.to_le_bytes());
        assert!(decode(&wrong_len, 20_000).is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300), max in 0usize..1_000_000) {
            let _ = decode(&data, max);
        }

        #[test]
        fn roundtrip(data in proptest::collection::vec(0u8..4, 0..5000)) {
            let enc = encode(&data);
            prop_assert_eq!(decode(&enc, data.len()).unwrap(), data);
        }
    }
}
