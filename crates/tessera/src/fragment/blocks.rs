//! Block checksums of unfiltered tiles (format version 2). A tile stored without filters and
//! longer than two blocks is checksummed per block of `2^BLOCK_LOG2` bytes (the last block may
//! be shorter), so a read that needs a few cells of a large tile reads and verifies only the
//! blocks holding them. The tile's own checksum is then the xxh3-64 of its block checksums
//! (little-endian, in order): a whole-tile read verifies every block and that one value, and
//! the writer hashes each byte once.

use crate::checksum::{xxh3_64, Xxh3};

/// Blocks are `2^BLOCK_LOG2` bytes: 4 KiB, the page size, so that a point read reads and hashes
/// one page (16 KiB until 2026-11-29: a random 1K-point read of a 1 GB array took 2x as long).
/// Readers take any block size the metadata gives (`b` of format §8.1).
pub const BLOCK_LOG2: u32 = 12;

/// Whether a tile of `len` stored bytes of an unfiltered file gets block checksums.
pub(crate) fn wants_blocks(len: u64, log2: u32) -> bool {
    len > 2u64 << log2
}

/// The checksums of the blocks of a tile given as consecutive parts (block boundaries need not
/// fall on part boundaries).
pub(crate) fn block_sums(parts: &[&[u8]], log2: u32) -> Vec<u64> {
    let block = 1usize << log2;
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut sums = Vec::with_capacity(total.div_ceil(block));
    let mut h = Xxh3::new();
    let mut filled = 0usize;
    for p in parts {
        let mut p: &[u8] = p;
        while !p.is_empty() {
            // Whole blocks inside the part hash in one call.
            if filled == 0 && p.len() >= block {
                let whole = p.len() / block * block;
                sums.extend(p[..whole].chunks_exact(block).map(xxh3_64));
                p = &p[whole..];
                continue;
            }
            let take = (block - filled).min(p.len());
            h.update(&p[..take]);
            filled += take;
            p = &p[take..];
            if filled == block {
                sums.push(h.digest());
                h.reset();
                filled = 0;
            }
        }
    }
    if filled > 0 {
        sums.push(h.digest());
    }
    sums
}

/// Bytes from which [`block_sums_parallel`] hashes a tile's blocks on several threads.
const PARALLEL_SUMS: usize = 2 << 20;

/// The block checksums of one buffer, as [`block_sums`] gives them; a buffer of more than
/// [`PARALLEL_SUMS`] bytes is hashed in pieces of whole blocks on the current thread pool.
pub(crate) fn block_sums_parallel(bytes: &[u8], log2: u32) -> Vec<u64> {
    use rayon::prelude::*;
    if bytes.len() <= PARALLEL_SUMS {
        return block_sums(&[bytes], log2);
    }
    let block = 1usize << log2;
    let piece = (PARALLEL_SUMS / 2 / block).max(1) * block;
    bytes.par_chunks(piece).flat_map_iter(|p| p.chunks(block).map(xxh3_64)).collect()
}

/// The tile checksum of a tile with block checksums `sums`.
pub(crate) fn checksum_of_sums(sums: &[u64]) -> u64 {
    let bytes: Vec<u8> = sums.iter().flat_map(|s| s.to_le_bytes()).collect();
    xxh3_64(&bytes)
}

/// Checks a whole tile against its checksum: of its bytes, or, for a tile with block checksums
/// (`blocks`, their size's log2), of the block checksums computed from its bytes (the stored
/// ones are not needed: the tile checksum covers them); `Err((stored, computed))` when they
/// differ.
pub(crate) fn verify_tile(bytes: &[u8], checksum: u64, blocks: Option<u32>) -> Result<(), (u64, u64)> {
    let computed = match blocks {
        Some(log2) => checksum_of_sums(&block_sums_parallel(bytes, log2)),
        None => xxh3_64(bytes),
    };
    if computed == checksum {
        Ok(())
    } else {
        Err((checksum, computed))
    }
}

/// Hashes the blocks of `bytes` (a tile's part starting on a block boundary) into `out`, one
/// checksum per block; parts hashed this way, in any order, give the tile's block checksums.
pub(crate) fn hash_blocks(bytes: &[u8], out: &mut [u64], log2: u32) {
    debug_assert_eq!(bytes.len().div_ceil(1 << log2), out.len());
    out.iter_mut().zip(bytes.chunks(1 << log2)).for_each(|(o, b)| *o = xxh3_64(b));
}

/// Checks a tile's block checksums `sums` against its tile checksum.
pub(crate) fn verify_sums(sums: &[u64], checksum: u64) -> Result<(), (u64, u64)> {
    let c = checksum_of_sums(sums);
    if c == checksum {
        Ok(())
    } else {
        Err((checksum, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Block checksums do not depend on how the tile is cut into parts.
        #[test]
        fn block_sums_ignore_part_boundaries(len in 0usize..5000, cuts in proptest::collection::vec(0usize..5000, 0..6)) {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(len)).collect();
            cuts.sort_unstable();
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut at = 0;
            for c in cuts.into_iter().chain([len]) {
                parts.push(&data[at..c]);
                at = c;
            }
            let want: Vec<u64> = data.chunks(256).map(xxh3_64).collect();
            prop_assert_eq!(block_sums(&parts, 8), want);
        }
    }

    /// The parallel block sums of a large buffer are the serial ones, whatever its length (a
    /// last block shorter than the others included), and pieces verify as the whole tile does.
    #[test]
    fn parallel_sums_and_pieces_agree_with_the_whole() {
        for len in [PARALLEL_SUMS + 1, 3 * PARALLEL_SUMS + 777, 5 << 20] {
            let data: Vec<u8> = (0..len).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
            let sums = block_sums(&[&data], 14);
            assert_eq!(block_sums_parallel(&data, 14), sums, "{len} bytes");
            let tile = checksum_of_sums(&sums);
            assert_eq!(verify_sums(&sums, tile), Ok(()));
            assert!(verify_sums(&sums[1..], tile).is_err());
            let piece = 2 << 20;
            let mut hashed = vec![0; sums.len()];
            for (p, out) in data.chunks(piece).zip(hashed.chunks_mut(piece >> 14)).rev() {
                hash_blocks(p, out, 14);
            }
            assert_eq!(hashed, sums);
            assert_eq!(verify_tile(&data, tile, Some(14)), Ok(()));
            let mut bad = data.clone();
            bad[len - 1] ^= 1;
            let (stored, computed) = verify_tile(&bad, tile, Some(14)).unwrap_err();
            assert_eq!(stored, tile);
            assert_ne!(stored, computed);
        }
    }

    #[test]
    fn verify_finds_a_flipped_byte() {
        let mut data: Vec<u8> = (0..10_000u32).map(|i| (i % 256) as u8).collect();
        let sums = block_sums(&[&data], 10);
        let sum = checksum_of_sums(&sums);
        assert_eq!(verify_tile(&data, sum, Some(10)), Ok(()));
        // The block size is part of the checksum.
        assert!(verify_tile(&data, sum, Some(11)).is_err());
        data[5000] ^= 1;
        let (stored, computed) = verify_tile(&data, sum, Some(10)).unwrap_err();
        assert_eq!(stored, sum);
        assert_ne!(computed, stored);
        // Without block checksums the tile checksum is the hash of the bytes.
        assert!(verify_tile(&data, xxh3_64(&data), None).is_ok());
        assert!(wants_blocks(2049, 10) && !wants_blocks(2048, 10));
    }
}
