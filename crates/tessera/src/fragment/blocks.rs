//! Block checksums of unfiltered tiles (format version 2). A tile stored without filters and
//! longer than two blocks is checksummed per block of `2^BLOCK_LOG2` bytes (the last block may
//! be shorter), so a read that needs a few cells of a large tile reads and verifies only the
//! blocks holding them. The tile's own checksum is then the xxh3-64 of its block checksums
//! (little-endian, in order): a whole-tile read verifies every block and that one value, and
//! the writer hashes each byte once.

use xxhash_rust::xxh3::{xxh3_64, Xxh3};

/// Blocks are `2^BLOCK_LOG2` bytes: 16 KiB.
pub(crate) const BLOCK_LOG2: u32 = 14;

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

/// The tile checksum of a tile with block checksums `sums`.
pub(crate) fn checksum_of_sums(sums: &[u64]) -> u64 {
    let bytes: Vec<u8> = sums.iter().flat_map(|s| s.to_le_bytes()).collect();
    xxh3_64(&bytes)
}

/// Checks a whole tile against its checksum (and its block checksums when it has them);
/// `Err((stored, computed))` when they differ.
pub(crate) fn verify_tile(bytes: &[u8], checksum: u64, sums: Option<&[u64]>, log2: u32) -> Result<(), (u64, u64)> {
    let computed = match sums {
        Some(want) => {
            let got = block_sums(&[bytes], log2);
            let c = checksum_of_sums(&got);
            if got != want {
                // Report the first block that differs, as the tile-level values would hide it.
                let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
                return Err((want.get(i).copied().unwrap_or(0), got.get(i).copied().unwrap_or(0)));
            }
            c
        }
        None => xxh3_64(bytes),
    };
    if computed == checksum {
        Ok(())
    } else {
        Err((checksum, computed))
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

    #[test]
    fn verify_finds_a_flipped_byte_and_its_block() {
        let mut data: Vec<u8> = (0..10_000u32).map(|i| (i % 256) as u8).collect();
        let sums = block_sums(&[&data], 10);
        let sum = checksum_of_sums(&sums);
        assert_eq!(verify_tile(&data, sum, Some(&sums), 10), Ok(()));
        data[5000] ^= 1;
        let (stored, computed) = verify_tile(&data, sum, Some(&sums), 10).unwrap_err();
        assert_eq!(stored, sums[4]);
        assert_ne!(computed, stored);
        // Without block checksums the tile checksum is the hash of the bytes.
        assert!(verify_tile(&data, xxh3_64(&data), None, 10).is_ok());
        assert!(wants_blocks(2049, 10) && !wants_blocks(2048, 10));
    }
}
