//! Gzip filter: Deflate compression (RFC 1951) in a zlib stream (RFC 1950), levels 0..=9.
//!
//! Byte format of the stage output:
//!
//! | offset | size | content                                                         |
//! |--------|------|-----------------------------------------------------------------|
//! | 0      | 8    | `n`, the length of the stage input (u64 LE)                     |
//! | 8      | rest | one complete zlib stream (2-byte header, deflate data, Adler-32) |
//!
//! The stream decompresses to exactly `n` bytes and nothing may follow it. It is what zlib's
//! `compress2` produces, so `zlib.decompress(stage[8:])` in Python decodes it.
//!
//! Streams are decoded by libdeflate, for whole buffers: in one call into a buffer of the
//! header's size (3-10x faster than zlib). They are encoded in one call by one of two encoders
//! (`DeflateEncoder`, the writer's choice; the stream format is the same):
//! - libdeflate at the stage's level (every level): classic zlib's ratios or better; on noisy
//!   integers 2.7x at 48-51 MB/s (a 10 MB tile at level 6), where classic zlib makes 2.3x at
//!   10 MB/s and zlib-rs's lazy matcher 2.7x at 32-38 MB/s;
//! - zlib-rs's lazy matcher (`deflate_slow`, its levels 7-9) at levels 6-9: on integers whose
//!   rows restate each other (the benchmark's grid, rows shifted by one cell) 1.3-1.6x faster
//!   than libdeflate (250 against 160-190 MB/s at level 6, 144x against 147x). zlib-rs's own
//!   levels up to 6 use faster strategies that store such grids up to 7x larger (18x), so a
//!   level-6 stage runs its level 7.

use std::mem::MaybeUninit;

use super::{alloc_output, corrupt, read_len_header, with_len_header, DeflateEncoder, Filter, FilterError, LEN_HEADER};

/// The filter's name in errors.
const NAME: &str = "gzip";
/// The highest compression level.
pub(super) const MAX_LEVEL: u32 = 9;
/// Deflate cannot expand data by more than this factor (a 258-byte match in 2 bits is 1032:1).
const MAX_RATIO: usize = 1032;

/// The levels at which a gzip stage may be run by zlib-rs's lazy matcher
/// ([`DeflateEncoder::ZlibLazy`]).
pub(crate) const LAZY_LEVELS: std::ops::RangeInclusive<u32> = 6..=MAX_LEVEL;

/// zlib-rs's lowest level that runs its lazy matcher (`deflate_slow`).
const ZLIB_LAZY_MIN: u32 = 7;

/// Compresses `data` at `level` (already validated to be in 0..=9) with this thread's
/// compressor of that level: libdeflate's, or zlib-rs's lazy matcher when `deflate` says so and
/// the level is one of [`LAZY_LEVELS`].
pub(super) fn encode(data: &[u8], level: u32, deflate: DeflateEncoder) -> Result<Vec<u8>, FilterError> {
    if deflate == DeflateEncoder::ZlibLazy && LAZY_LEVELS.contains(&level) {
        return encode_zlib_lazy(data, level.max(ZLIB_LAZY_MIN));
    }
    let level = level.min(MAX_LEVEL) as usize;
    DEFLATERS.with(|cs| {
        let mut cs = cs.borrow_mut();
        let c = match cs.get_mut(level) {
            Some(Some(c)) => c.0,
            Some(slot) => slot.insert(Deflater::new(level)?).0,
            None => return Err(compress_failed(&format!("level {level}"))),
        };
        // SAFETY: `c` is this thread's live compressor of `level`.
        #[allow(unsafe_code)]
        let bound = unsafe { libdeflate_sys::libdeflate_zlib_compress_bound(c, data.len()) };
        let mut out = with_len_header(data.len(), LEN_HEADER.saturating_add(bound));
        let spare = out.spare_capacity_mut();
        // SAFETY: the input pointer and length describe `data`; the output pointer and length
        // `bound` bytes of `out`'s spare capacity (at least that much was reserved), which
        // libdeflate writes at most; it returns how many it wrote (0: they did not fit).
        #[allow(unsafe_code)]
        let n = unsafe {
            libdeflate_sys::libdeflate_zlib_compress(
                c,
                data.as_ptr().cast(),
                data.len(),
                spare.as_mut_ptr().cast(),
                bound.min(spare.len()),
            )
        };
        if n == 0 {
            return Err(compress_failed(&"the stream did not fit its bound"));
        }
        // SAFETY: libdeflate wrote `n` bytes after the header.
        #[allow(unsafe_code)]
        unsafe {
            out.set_len(LEN_HEADER + n);
        }
        Ok(out)
    })
}

/// Compresses `data` with this thread's zlib-rs compressor of `level` (7..=9: its lazy matcher).
fn encode_zlib_lazy(data: &[u8], level: u32) -> Result<Vec<u8>, FilterError> {
    // Deflate stores what it cannot compress in blocks of at most 65,535 bytes with 5 bytes of
    // header each: far inside the filter's bound (`Filter::max_encoded_len`), which readers hold
    // stored tiles to.
    let bound = Filter::Gzip { level }.max_encoded_len(data.len());
    let mut out = with_len_header(data.len(), LEN_HEADER.saturating_add(bound));
    ZLIB_DEFLATERS.with(|cs| {
        let mut cs = cs.borrow_mut();
        let slot = cs.get_mut(level as usize).ok_or_else(|| compress_failed(&format!("level {level}")))?;
        let c = slot.get_or_insert_with(|| flate2::Compress::new(flate2::Compression::new(level), true));
        c.reset();
        match c.compress_vec(data, &mut out, flate2::FlushCompress::Finish) {
            Ok(flate2::Status::StreamEnd) if c.total_in() == data.len() as u64 => Ok(()),
            Ok(_) => Err(compress_failed(&"the stream did not fit its bound")),
            Err(e) => Err(compress_failed(&e)),
        }
    })?;
    Ok(out)
}

thread_local! {
    /// zlib-rs compressors by level, made on first use (only levels `ZLIB_LAZY_MIN..`).
    static ZLIB_DEFLATERS: std::cell::RefCell<[Option<flate2::Compress>; MAX_LEVEL as usize + 1]> =
        const { std::cell::RefCell::new([const { None }; MAX_LEVEL as usize + 1]) };
}

/// One thread's libdeflate compressor of one level.
struct Deflater(*mut libdeflate_sys::libdeflate_compressor);

impl Deflater {
    fn new(level: usize) -> Result<Self, FilterError> {
        let l = std::os::raw::c_int::try_from(level).map_err(|_| compress_failed(&format!("level {level}")))?;
        // SAFETY: allocates a compressor of a level libdeflate takes (0..=12); null when out of
        // memory.
        #[allow(unsafe_code)]
        let c = unsafe { libdeflate_sys::libdeflate_alloc_compressor(l) };
        if c.is_null() {
            return Err(compress_failed(&"no memory for a compressor"));
        }
        Ok(Self(c))
    }
}

impl Drop for Deflater {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `libdeflate_alloc_compressor` and is freed once, here.
        #[allow(unsafe_code)]
        unsafe {
            libdeflate_sys::libdeflate_free_compressor(self.0);
        }
    }
}

thread_local! {
    /// Compressors by level, made on first use.
    static DEFLATERS: std::cell::RefCell<[Option<Deflater>; MAX_LEVEL as usize + 1]> =
        const { std::cell::RefCell::new([const { None }; MAX_LEVEL as usize + 1]) };
}

/// Decompresses one stage, whose input was at most `max_len` bytes.
pub(super) fn decode(data: &[u8], max_len: usize) -> Result<Vec<u8>, FilterError> {
    let (len, body) = read_len_header(NAME, data, max_len)?;
    check_ratio(len, body)?;
    let mut out = alloc_output(NAME, len)?;
    inflate(body, &mut out.spare_capacity_mut()[..len])?;
    // SAFETY: `inflate` succeeded, so it wrote all `len` bytes (the capacity reserved above).
    #[allow(unsafe_code)]
    unsafe {
        out.set_len(len);
    }
    Ok(out)
}

/// Decompresses `data` as [`decode`] does, straight into `out`, which must be exactly the
/// decoded length (no buffer of its own, no copy).
pub(super) fn decode_into(data: &[u8], out: &mut [MaybeUninit<u8>]) -> Result<(), FilterError> {
    let (len, body) = read_len_header(NAME, data, out.len())?;
    if len != out.len() {
        return Err(corrupt(NAME, format!("header says {len} bytes, expected {}", out.len())));
    }
    check_ratio(len, body)?;
    inflate(body, out)
}

/// Refuses a header whose length `body` cannot inflate to (before anything is allocated).
fn check_ratio(len: usize, body: &[u8]) -> Result<(), FilterError> {
    if len > body.len().saturating_mul(MAX_RATIO).saturating_add(64) {
        return Err(corrupt(NAME, format!("{} bytes cannot inflate to {len}", body.len())));
    }
    Ok(())
}

/// Inflates the zlib stream `body` into all of `out`: exactly `out.len()` bytes, nothing after
/// the stream's end, the Adler-32 checked; on success every byte of `out` is written. With
/// libdeflate: a decoder of whole buffers of known size (ours always are: the header gives it),
/// 3-10x zlib's inflate on tiles of the benchmark's grid, decoding straight into `out`.
fn inflate(body: &[u8], out: &mut [MaybeUninit<u8>]) -> Result<(), FilterError> {
    use libdeflate_sys::{
        libdeflate_result_LIBDEFLATE_INSUFFICIENT_SPACE as TOO_LONG,
        libdeflate_result_LIBDEFLATE_SHORT_OUTPUT as TOO_SHORT, libdeflate_result_LIBDEFLATE_SUCCESS as SUCCESS,
    };
    let len = out.len();
    let mut consumed = 0usize;
    let result = INFLATER.with(|d| {
        let d = d.0.ok_or_else(|| corrupt(NAME, "no memory for a decompressor"))?;
        // SAFETY: `d` is this thread's live decompressor; the input pointer and length describe
        // `body`, the output pointer and length `out` (memory we hold exclusively; libdeflate
        // writes at most `len` bytes there and reads none of it); a null `actual_out_nbytes_ret`
        // asks for exactly `len` bytes (anything else is an error, not a shorter success).
        #[allow(unsafe_code)]
        Ok(unsafe {
            libdeflate_sys::libdeflate_zlib_decompress_ex(
                d,
                body.as_ptr().cast(),
                body.len(),
                out.as_mut_ptr().cast(),
                len,
                &raw mut consumed,
                std::ptr::null_mut(),
            )
        })
    })?;
    match result {
        SUCCESS if consumed == body.len() => Ok(()),
        SUCCESS => Err(corrupt(NAME, "bytes after the end of the stream")),
        TOO_SHORT => Err(corrupt(NAME, format!("stream holds fewer bytes than the header's {len}"))),
        TOO_LONG => Err(corrupt(NAME, format!("stream longer than {len} bytes"))),
        _ => Err(corrupt(NAME, "invalid zlib stream (damaged deflate data or Adler-32)")),
    }
}

/// One thread's libdeflate decompressor (none if its allocation failed).
struct Inflater(Option<*mut libdeflate_sys::libdeflate_decompressor>);

impl Inflater {
    fn new() -> Self {
        // SAFETY: allocates a decompressor; a null pointer (no memory) is kept as `None`.
        #[allow(unsafe_code)]
        let d = unsafe { libdeflate_sys::libdeflate_alloc_decompressor() };
        Self((!d.is_null()).then_some(d))
    }
}

impl Drop for Inflater {
    fn drop(&mut self) {
        if let Some(d) = self.0 {
            // SAFETY: `d` came from `libdeflate_alloc_decompressor` and is freed once, here.
            #[allow(unsafe_code)]
            unsafe {
                libdeflate_sys::libdeflate_free_decompressor(d);
            }
        }
    }
}

thread_local! {
    static INFLATER: Inflater = Inflater::new();
}

fn compress_failed(e: &dyn std::fmt::Display) -> FilterError {
    FilterError::InvalidConfig { filter: NAME, detail: format!("compression failed: {e}") }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{int32_grid, random, runs, LENGTHS};
    use super::*;
    use flate2::{Decompress, FlushDecompress};
    use proptest::prelude::*;

    const LIB: DeflateEncoder = DeflateEncoder::Libdeflate;

    /// The compression the levels reach on the benchmark's dense data (a tile of
    /// `i % 13000 + j` int32 cells, each row the last one shifted by a cell): libdeflate finds
    /// the row-long matches from level 1 on, and so does zlib-rs's lazy matcher (zlib-rs at its
    /// own level 6, a faster strategy, reached 18x where classic zlib reaches 144x).
    #[test]
    fn levels_compress_the_benchmark_tile() {
        let mut v: Vec<u8> = Vec::new();
        for i in 2500i32..2500 + 250 {
            for j in 1000..2000 {
                v.extend_from_slice(&(i % 13000 + j).to_le_bytes());
            }
        }
        for (level, at_least) in [(1, 50), (6, 100), (9, 100)] {
            for deflate in [LIB, DeflateEncoder::ZlibLazy] {
                let out = encode(&v, level, deflate).unwrap();
                let ratio = v.len() / out.len();
                assert!(ratio >= at_least, "level {level} {deflate:?}: {} -> {} bytes", v.len(), out.len());
                assert_eq!(decode(&out, v.len()).unwrap(), v);
            }
        }
    }

    /// `decode_into` gives what `decode` gives, and refuses what it refuses: damaged streams,
    /// streams shorter or longer than the header says, bytes after the end.
    #[test]
    fn decode_into_agrees_with_decode() {
        let into = |enc: &[u8], len: usize| -> Result<Vec<u8>, FilterError> {
            let mut out = vec![MaybeUninit::new(7u8); len];
            decode_into(enc, &mut out)?;
            Ok(out.iter().map(|b| unsafe_free_read(*b)).collect())
        };
        for &len in LENGTHS {
            for data in [random(len, 3), runs(len, 5)] {
                let enc = encode(&data, 6, LIB).unwrap();
                assert_eq!(into(&enc, len).unwrap(), data, "len {len}");
                let mut bad = enc.clone();
                let n = bad.len();
                bad[n / 2 + 4] ^= 0x10;
                assert_eq!(into(&bad, len).is_ok(), decode(&bad, len).is_ok(), "flipped, len {len}");
                let mut longer = enc.clone();
                longer.push(0);
                assert!(into(&longer, len).is_err());
                assert!(into(&enc[..n - 1], len).is_err());
                if len > 0 {
                    // A header claiming one byte more (or less) than the stream holds.
                    for claim in [len + 1, len - 1] {
                        let mut h = enc.clone();
                        h[..8].copy_from_slice(&(claim as u64).to_le_bytes());
                        assert!(into(&h, claim).is_err(), "claim {claim} of {len}");
                    }
                }
            }
        }
    }

    /// The stream's Adler-32 is checked: a stream whose deflate data is intact but whose
    /// checksum is not decodes to an error, not to the (right) bytes.
    #[test]
    fn a_wrong_adler32_is_refused() {
        let data = int32_grid(50_000);
        let mut enc = encode(&data, 6, LIB).unwrap();
        let n = enc.len();
        enc[n - 1] ^= 1;
        let e = decode(&enc, data.len()).unwrap_err().to_string();
        assert!(e.contains("Adler-32"), "{e}");
    }

    /// A byte of a decoded buffer, every byte of which the test wrote.
    fn unsafe_free_read(b: MaybeUninit<u8>) -> u8 {
        // SAFETY: the test's buffers start fully initialized (with 7s).
        #[allow(unsafe_code)]
        unsafe {
            b.assume_init()
        }
    }

    #[test]
    fn roundtrip_all_levels_and_lengths() {
        for level in 0..=MAX_LEVEL {
            for &len in LENGTHS {
                for data in [random(len, 7), runs(len, 4), int32_grid(len)] {
                    for deflate in [LIB, DeflateEncoder::ZlibLazy] {
                        let enc = encode(&data, level, deflate).unwrap();
                        assert_eq!(decode(&enc, len).unwrap(), data, "level {level} len {len} {deflate:?}");
                    }
                }
            }
        }
    }

    /// zlib-rs's lazy matcher writes the same format: a length header, then a zlib stream that
    /// zlib itself and our libdeflate decoder read, at every level it serves (6-9, where its
    /// bytes differ from libdeflate's); below level 6 the stage keeps libdeflate.
    #[test]
    fn the_zlib_lazy_encoder_writes_the_same_format() {
        let data = int32_grid(300_000);
        for level in 0..=MAX_LEVEL {
            let (lib, lazy) =
                (encode(&data, level, LIB).unwrap(), encode(&data, level, DeflateEncoder::ZlibLazy).unwrap());
            assert_eq!(lazy[..8], 300_000u64.to_le_bytes());
            let mut plain = Vec::with_capacity(data.len());
            let mut z = Decompress::new(true);
            let status = z.decompress_vec(&lazy[8..], &mut plain, FlushDecompress::Finish).unwrap();
            assert_eq!((status, z.total_in()), (flate2::Status::StreamEnd, lazy.len() as u64 - 8), "level {level}");
            assert_eq!(plain, data, "level {level}");
            assert_eq!(decode(&lazy, data.len()).unwrap(), data, "level {level}");
            assert_eq!(lib == lazy, !LAZY_LEVELS.contains(&level), "level {level}");
            if LAZY_LEVELS.contains(&level) {
                assert!(lazy.len() * 50 < data.len(), "level {level}: {} bytes", lazy.len());
            }
        }
    }

    #[test]
    fn format_is_len_header_then_zlib() {
        let data = int32_grid(100_000);
        let enc = encode(&data, 6, LIB).unwrap();
        assert_eq!(enc[..8], 100_000u64.to_le_bytes());
        // zlib header: CM=8 (deflate), header checksum.
        assert_eq!(enc[8] & 0x0F, 8);
        assert_eq!((u16::from(enc[8]) << 8 | u16::from(enc[9])) % 31, 0);
        let mut plain = Vec::with_capacity(data.len());
        let mut z = Decompress::new(true);
        z.decompress_vec(&enc[8..], &mut plain, FlushDecompress::Finish).unwrap();
        assert_eq!(plain, data);
        assert!(enc.len() < data.len() / 2);
    }

    #[test]
    fn rejects_bad_input() {
        let data = random(10_000, 1);
        let enc = encode(&data, 6, LIB).unwrap();
        for cut in [0, 7, 8, 9, 100, enc.len() - 1] {
            assert!(decode(&enc[..cut], 10_000).is_err(), "cut {cut}");
        }
        let mut longer = enc.clone();
        longer.push(0);
        assert!(decode(&longer, 10_000).is_err());
        assert!(decode(&enc, 9_999).is_err());
        let mut wrong_len = enc.clone();
        wrong_len[..8].copy_from_slice(&9_999u64.to_le_bytes());
        assert!(decode(&wrong_len, 10_000).is_err());
        wrong_len[..8].copy_from_slice(&10_001u64.to_le_bytes());
        assert!(decode(&wrong_len, 20_000).is_err());
        let mut flipped = enc;
        flipped[500] ^= 0x55;
        assert!(decode(&flipped, 10_000).is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300), max in 0usize..1_000_000) {
            let _ = decode(&data, max);
        }

        #[test]
        fn roundtrip(data in proptest::collection::vec(0u8..4, 0..5000), level in 0u32..=9) {
            for deflate in [LIB, DeflateEncoder::ZlibLazy] {
                let enc = encode(&data, level, deflate).unwrap();
                prop_assert_eq!(&decode(&enc, data.len()).unwrap(), &data);
            }
        }
    }
}
