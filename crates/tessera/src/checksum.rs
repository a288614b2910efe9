//! The checksum of stored bytes: xxh3-64 with seed 0 (docs/format.md), computed with the
//! widest vector instructions the CPU offers, chosen when the process runs (AVX2 where there
//! is one: a verified read of uncompressed tiles spends half its time hashing, and AVX2 hashes
//! ~10% faster end to end than the SSE2 code a portable build is compiled for).

use std::hash::Hasher;

/// The xxh3-64 (seed 0) of `bytes`.
pub(crate) fn xxh3_64(bytes: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(bytes)
}

/// The xxh3-64 (seed 0) of bytes given in parts: the same value as [`xxh3_64`] of their
/// concatenation.
pub(crate) struct Xxh3(twox_hash::XxHash3_64);

impl Xxh3 {
    /// A hash of no bytes yet.
    pub(crate) fn new() -> Self {
        Self(twox_hash::XxHash3_64::with_seed(0))
    }

    /// Adds the next bytes.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }

    /// Starts again from no bytes.
    pub(crate) fn reset(&mut self) {
        *self = Self::new();
    }

    /// The hash of everything added.
    pub(crate) fn digest(&self) -> u64 {
        self.0.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values of the reference implementation (xxhash-rust, another code base) for every
    /// input length class of xxh3 (0, 1-3, 4-8, 9-16, 17-128, 129-240, longer, with a partial
    /// stripe), whole and in parts.
    #[test]
    fn matches_the_reference_implementation_whole_and_in_parts() {
        let data: Vec<u8> = (0..20_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in [0usize, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 4096, 4097, 20_000] {
            let want = xxhash_rust::xxh3::xxh3_64(&data[..len]);
            assert_eq!(xxh3_64(&data[..len]), want, "{len} bytes");
            let mut h = Xxh3::new();
            for part in data[..len].chunks(777) {
                h.update(part);
            }
            assert_eq!(h.digest(), want, "{len} bytes in parts");
        }
    }
}
