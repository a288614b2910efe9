//! Zstd filter: Zstandard compression (RFC 8878), levels -7..=22.
//!
//! Byte format of the stage output:
//!
//! | offset | size | content                                              |
//! |--------|------|------------------------------------------------------|
//! | 0      | 8    | `n`, the length of the stage input (u64 LE)          |
//! | 8      | rest | one or more complete Zstandard frames (RFC 8878)      |
//!
//! The frames decompress to exactly `n` bytes in total and nothing may follow them. The writer
//! emits a single frame with the content size in its header and no dictionary, as
//! `ZSTD_compress` does, so `zstd -d` or any Zstandard library decodes `stage[8..]`.
//!
//! Compression and decompression contexts are kept per thread and reused across tiles.

use std::cell::Cell;
use std::mem::MaybeUninit;

use ::zstd::bulk::Decompressor;

use super::{alloc_output, corrupt, read_len_header, with_len_header, FilterError, LEN_HEADER};

/// The filter's name in errors.
const NAME: &str = "zstd";
/// The lowest (fastest) accepted level.
pub(super) const MIN_LEVEL: i32 = -7;
/// The highest accepted level.
pub(super) const MAX_LEVEL: i32 = 22;

thread_local! {
    static COMPRESSOR: Cell<Option<Compressor>> = const { Cell::new(None) };
    static DECOMPRESSOR: Cell<Option<Decompressor<'static>>> = const { Cell::new(None) };
}

/// Compresses `data` at `level` (already validated).
pub(super) fn encode(data: &[u8], level: i32) -> Result<Vec<u8>, FilterError> {
    let bound = ::zstd::zstd_safe::compress_bound(data.len());
    let mut out = with_len_header(data.len(), LEN_HEADER.saturating_add(bound));
    let mut ctx = match COMPRESSOR.take() {
        Some(ctx) => ctx,
        None => Compressor::new().ok_or_else(|| failed(level, "no memory for a compression context".into()))?,
    };
    let result = ctx.compress(level, data, &mut out.spare_capacity_mut()[..bound]);
    COMPRESSOR.set(Some(ctx));
    let written = result.map_err(|e| failed(level, e))?;
    // SAFETY: `compress` wrote the first `written` bytes of the spare capacity (at most `bound`).
    #[allow(unsafe_code)]
    unsafe {
        out.set_len(LEN_HEADER + written)
    };
    Ok(out)
}

/// A compression at `level` that failed for reason `e`.
fn failed(level: i32, e: String) -> FilterError {
    FilterError::InvalidConfig { filter: NAME, detail: format!("compression at level {level} failed: {e}") }
}

/// A compression context of our own (the C library's, through `zstd-sys`), set to compress
/// without zstd's pre-splitter (`ZSTD_c_blockSplitterLevel` = 1): since zstd 1.5.7 the library
/// estimates, before it compresses each 128 KiB block, whether splitting it would pay; on our
/// tiles that took 11% of a zstd-3 write's profile (perf, the bench's dense array) and saved no
/// byte (stored sizes identical there, on AIS points and on a float random walk). The safe
/// wrappers do not expose that parameter. The output is an ordinary single frame with its
/// content size, as `ZSTD_compress` makes.
struct Compressor(std::ptr::NonNull<zstd_sys::ZSTD_CCtx>);

/// `ZSTD_c_blockSplitterLevel` (experimental parameter 20 of zstd 1.5.7): 1 turns the
/// pre-splitter off.
const BLOCK_SPLITTER_LEVEL: zstd_sys::ZSTD_cParameter = zstd_sys::ZSTD_cParameter::ZSTD_c_experimentalParam20;

// SAFETY: a zstd context is used by one thread at a time (it is moved, never shared).
#[allow(unsafe_code)]
unsafe impl Send for Compressor {}

#[allow(unsafe_code)]
impl Compressor {
    fn new() -> Option<Self> {
        // SAFETY: a plain allocation; null on failure.
        std::ptr::NonNull::new(unsafe { zstd_sys::ZSTD_createCCtx() }).map(Self)
    }

    /// Compresses `data` at `level` into `out` (of at least `compress_bound(data.len())`
    /// bytes): the bytes written.
    fn compress(&mut self, level: i32, data: &[u8], out: &mut [MaybeUninit<u8>]) -> Result<usize, String> {
        let ctx = self.0.as_ptr();
        let check = |code: usize| -> Result<usize, String> {
            // SAFETY: `ZSTD_isError` and `ZSTD_getErrorName` take any code; the name is a static
            // C string.
            if unsafe { zstd_sys::ZSTD_isError(code) } != 0 {
                let name = unsafe { std::ffi::CStr::from_ptr(zstd_sys::ZSTD_getErrorName(code)) };
                return Err(name.to_string_lossy().into_owned());
            }
            Ok(code)
        };
        // SAFETY: `ctx` is a live context owned by `self`; `data` and `out` are valid for their
        // lengths, and zstd writes at most `out.len()` bytes to `out`.
        unsafe {
            check(zstd_sys::ZSTD_CCtx_setParameter(ctx, zstd_sys::ZSTD_cParameter::ZSTD_c_compressionLevel, level))?;
            check(zstd_sys::ZSTD_CCtx_setParameter(ctx, BLOCK_SPLITTER_LEVEL, 1))?;
            check(zstd_sys::ZSTD_compress2(ctx, out.as_mut_ptr().cast(), out.len(), data.as_ptr().cast(), data.len()))
        }
    }
}

#[allow(unsafe_code)]
impl Drop for Compressor {
    fn drop(&mut self) {
        // SAFETY: the context was made by `ZSTD_createCCtx` and is freed once.
        unsafe { zstd_sys::ZSTD_freeCCtx(self.0.as_ptr()) };
    }
}

/// Decompresses `body` into `out` with this thread's decompression context: the bytes written.
fn decompress<C: ::zstd::zstd_safe::WriteBuf + ?Sized>(body: &[u8], out: &mut C) -> Result<usize, FilterError> {
    let mut ctx = match DECOMPRESSOR.take() {
        Some(ctx) => ctx,
        None => Decompressor::new().map_err(|e| corrupt(NAME, e.to_string()))?,
    };
    let result = ctx.decompress_to_buffer(body, out);
    DECOMPRESSOR.set(Some(ctx));
    result.map_err(|e| corrupt(NAME, e.to_string()))
}

/// Decompresses one stage, whose input was at most `max_len` bytes.
pub(super) fn decode(data: &[u8], max_len: usize) -> Result<Vec<u8>, FilterError> {
    let (len, body) = read_len_header(NAME, data, max_len)?;
    let mut out = alloc_output(NAME, len)?;
    let written = decompress(body, &mut out)?;
    if written != len || out.len() != len {
        return Err(corrupt(NAME, format!("frames hold {written} bytes, header says {len}")));
    }
    Ok(out)
}

/// Decompresses one stage whose input was exactly `out.len()` bytes straight into `out`, which
/// need not be initialized: on success every byte of `out` is written.
pub(super) fn decode_into(data: &[u8], out: &mut [MaybeUninit<u8>]) -> Result<(), FilterError> {
    let (len, body) = read_len_header(NAME, data, out.len())?;
    if len != out.len() {
        return Err(corrupt(NAME, format!("header says {len} bytes, expected {}", out.len())));
    }
    let written = decompress(body, &mut Unwritten { buf: out, filled: 0 })?;
    if written != len {
        return Err(corrupt(NAME, format!("frames hold {written} bytes, header says {len}")));
    }
    Ok(())
}

/// Memory zstd decompresses into without it being zeroed first: `buf`, of which the first
/// `filled` bytes are written.
struct Unwritten<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    filled: usize,
}

// SAFETY: `as_slice` covers only the first `filled` bytes, and zstd-safe sets `filled` (through
// `filled_until`) to the number of bytes the decoder wrote from `as_mut_ptr`, which is at most
// `capacity`, the length of `buf`.
#[allow(unsafe_code)]
unsafe impl ::zstd::zstd_safe::WriteBuf for Unwritten<'_> {
    fn as_slice(&self) -> &[u8] {
        // SAFETY: the first `filled` bytes of `buf` are initialized (see above).
        unsafe { std::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.filled) }
    }
    fn capacity(&self) -> usize {
        self.buf.len()
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr().cast::<u8>()
    }
    unsafe fn filled_until(&mut self, n: usize) {
        self.filled = n;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::{int32_grid, random, runs, LENGTHS};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn roundtrip_levels_and_lengths() {
        for level in [MIN_LEVEL, -1, 0, 1, 3, 9, 19] {
            for &len in LENGTHS {
                for data in [random(len, 3), runs(len, 8)] {
                    let enc = encode(&data, level).unwrap();
                    assert_eq!(decode(&enc, len).unwrap(), data, "level {level} len {len}");
                }
            }
        }
        let data = int32_grid(200_000);
        for level in [20, MAX_LEVEL] {
            assert_eq!(decode(&encode(&data, level).unwrap(), 200_000).unwrap(), data);
        }
    }

    #[test]
    fn format_is_len_header_then_frame() {
        let data = int32_grid(100_000);
        let enc = encode(&data, 3).unwrap();
        assert_eq!(enc[..8], 100_000u64.to_le_bytes());
        assert_eq!(enc[8..12], 0xFD2F_B528u32.to_le_bytes());
        assert_eq!(::zstd::bulk::decompress(&enc[8..], 100_000).unwrap(), data);
        assert!(enc.len() < data.len() / 4);
    }

    #[test]
    fn rejects_bad_input() {
        let data = random(10_000, 1);
        let enc = encode(&data, 3).unwrap();
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
    }

    proptest! {
        #[test]
        fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300), max in 0usize..1_000_000) {
            let _ = decode(&data, max);
        }

        #[test]
        fn roundtrip(data in proptest::collection::vec(0u8..4, 0..5000), level in MIN_LEVEL..=6) {
            let enc = encode(&data, level).unwrap();
            prop_assert_eq!(decode(&enc, data.len()).unwrap(), data);
        }
    }
}
