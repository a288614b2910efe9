//! The checksummed footer that ends every schema and fragment-metadata file (docs/format.md,
//! "Footer"): `[u32 format version][u64 xxh3-64 of every byte before it][8-byte magic]` (the
//! checksum covers the payload and the version).

use std::path::Path;

use crate::checksum::xxh3_64;
use crate::error::{checksum_mismatch, Error, Result};

/// The on-disk format version written by this build.
pub const FORMAT_VERSION: u32 = 9;

const FOOTER_LEN: usize = 20;

/// Appends the footer to `payload`.
pub(crate) fn seal(mut payload: Vec<u8>, magic: &[u8; 8]) -> Vec<u8> {
    payload.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    let sum = xxh3_64(&payload);
    payload.extend_from_slice(&sum.to_le_bytes());
    payload.extend_from_slice(magic);
    payload
}

/// Checks the footer of `bytes` and returns the payload before it.
pub(crate) fn unseal<'a>(bytes: &'a [u8], magic: &[u8; 8], path: &Path) -> Result<&'a [u8]> {
    if bytes.len() < FOOTER_LEN {
        return Err(Error::corrupt(path, format!("file is {} bytes, shorter than its footer", bytes.len())));
    }
    let (payload, footer) = bytes.split_at(bytes.len() - FOOTER_LEN);
    if &footer[12..20] != magic {
        return Err(Error::corrupt(path, "footer magic is wrong (not a Tessera file or truncated)"));
    }
    let version = u32::from_le_bytes([footer[0], footer[1], footer[2], footer[3]]);
    if version > FORMAT_VERSION {
        return Err(Error::corrupt(
            path,
            format!("format version {version} is newer than this build reads ({FORMAT_VERSION})"),
        ));
    }
    let mut sum = [0u8; 8];
    sum.copy_from_slice(&footer[4..12]);
    let stored = u64::from_le_bytes(sum);
    let actual = xxh3_64(&bytes[..bytes.len() - FOOTER_LEN + 4]);
    if stored != actual {
        return Err(Error::corrupt(path, checksum_mismatch(stored, actual)));
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flipped_bit_is_detected() {
        let sealed = seal(b"hello tessera".to_vec(), b"TSRATEST");
        assert_eq!(unseal(&sealed, b"TSRATEST", Path::new("f")).unwrap(), b"hello tessera");
        for i in 0..sealed.len() * 8 {
            let mut bad = sealed.clone();
            bad[i / 8] ^= 1 << (i % 8);
            assert!(unseal(&bad, b"TSRATEST", Path::new("f")).is_err(), "bit {i}");
        }
        assert!(unseal(&sealed[..10], b"TSRATEST", Path::new("f")).is_err());
    }
}
