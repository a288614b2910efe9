//! Tile filters: the per-attribute pipeline that turns an unfiltered tile into the bytes stored on
//! disk (compression, byte shuffling, delta and run-length encoding) and back.
//! See docs/format.md, section "Filtered tiles".
//!
//! A pipeline is an ordered list of [`Filter`]s. Writing applies them first to last, each stage
//! consuming the previous stage's output; reading undoes them last to first. Every stage is
//! decodable by itself: the stages whose decoder needs the length of their input (the three
//! compressors and RLE) start their output with that length as a `u64` little-endian; delta and
//! byte shuffle preserve the length exactly. All integers are little-endian.
//!
//! Each stage sees an element width: the pipeline's `elem_size` for the first stage, then the
//! width produced by the previous stage. Compressors and RLE produce a byte stream (width 1);
//! delta and byte shuffle keep the width they were given. Data whose length is not a multiple
//! of the width has its trailing `len % width` bytes carried through unchanged.

mod byteshuffle;
mod delta;
mod gzip;
mod lz4;
mod rle;
mod zstd;

use std::mem::MaybeUninit;

use serde::{Deserialize, Serialize};

use crate::stats::{self, Timer};

/// One stage of a filter pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "lowercase")]
#[non_exhaustive]
pub enum Filter {
    /// Deflate in a zlib stream (RFC 1950, as produced by zlib's `compress2`), level 0..=9.
    Gzip {
        /// Compression level, 0..=9.
        level: u32,
    },
    /// Zstandard, level -7..=22.
    Zstd {
        /// Compression level.
        level: i32,
    },
    /// LZ4 block compression.
    Lz4,
    /// Run-length encoding of equal consecutive elements.
    Rle,
    /// Differences of consecutive elements (wrapping integer arithmetic on the element's bits).
    Delta,
    /// Byte transposition: all first bytes of the elements, then all second bytes, ...
    #[serde(rename = "byteshuffle")]
    ByteShuffle,
}

impl Filter {
    /// The filter's name, as used in its serialized form and in errors.
    pub fn name(&self) -> &'static str {
        match self {
            Filter::Gzip { .. } => "gzip",
            Filter::Zstd { .. } => "zstd",
            Filter::Lz4 => "lz4",
            Filter::Rle => "rle",
            Filter::Delta => "delta",
            Filter::ByteShuffle => "byteshuffle",
        }
    }

    /// Checks the filter's parameters.
    ///
    /// # Errors
    /// `InvalidConfig` when a compression level is out of range.
    pub fn validate(&self) -> Result<(), FilterError> {
        match *self {
            Filter::Gzip { level } if level > gzip::MAX_LEVEL => Err(FilterError::InvalidConfig {
                filter: self.name(),
                detail: format!("level {level} is outside 0..={}", gzip::MAX_LEVEL),
            }),
            Filter::Zstd { level } if !(zstd::MIN_LEVEL..=zstd::MAX_LEVEL).contains(&level) => {
                Err(FilterError::InvalidConfig {
                    filter: self.name(),
                    detail: format!("level {level} is outside {}..={}", zstd::MIN_LEVEL, zstd::MAX_LEVEL),
                })
            }
            _ => Ok(()),
        }
    }

    /// The element width the next stage sees when this filter is given elements of `elem_size`
    /// bytes: 1 after a compressor or RLE (a byte stream), unchanged after delta or byte shuffle.
    pub fn output_elem_size(&self, elem_size: usize) -> usize {
        match self {
            Filter::Delta | Filter::ByteShuffle => elem_size,
            Filter::Gzip { .. } | Filter::Zstd { .. } | Filter::Lz4 | Filter::Rle => 1,
        }
    }

    /// The largest output this filter's encoder produces for an input of `len` bytes (a generous
    /// bound; the decoder rejects stages claiming to decode to more than the bound of the stage
    /// before them, which caps the memory a corrupt length header can make it allocate).
    pub fn max_encoded_len(&self, len: usize) -> usize {
        match self {
            Filter::Delta | Filter::ByteShuffle => len,
            Filter::Gzip { .. } | Filter::Zstd { .. } | Filter::Lz4 | Filter::Rle => {
                len.saturating_add(len / 16).saturating_add(1024)
            }
        }
    }

    /// The statistics timers of this filter's encoder and decoder.
    fn timers(&self) -> (Timer, Timer) {
        match self {
            Filter::Gzip { .. } => (Timer::CompressorGzipCompress, Timer::CompressorGzipDecompress),
            Filter::Zstd { .. } => (Timer::CompressorZstdCompress, Timer::CompressorZstdDecompress),
            Filter::Lz4 => (Timer::CompressorLz4Compress, Timer::CompressorLz4Decompress),
            Filter::Rle => (Timer::CompressorRleCompress, Timer::CompressorRleDecompress),
            Filter::Delta => (Timer::FilterDeltaEncode, Timer::FilterDeltaDecode),
            Filter::ByteShuffle => (Timer::FilterByteshuffleEncode, Timer::FilterByteshuffleDecode),
        }
    }

    /// Applies this filter to one buffer (a gzip stage with `deflate`).
    fn encode(&self, data: Vec<u8>, elem_size: usize, deflate: DeflateEncoder) -> Result<Vec<u8>, FilterError> {
        let _t = stats::timer(self.timers().0);
        match *self {
            Filter::Gzip { level } => gzip::encode(&data, level, deflate),
            Filter::Zstd { level } => zstd::encode(&data, level),
            Filter::Lz4 => Ok(lz4::encode(&data)),
            Filter::Rle => Ok(rle::encode(&data, elem_size)),
            Filter::Delta => Ok(delta::encode(data, elem_size)),
            Filter::ByteShuffle => Ok(byteshuffle::encode(data, elem_size)),
        }
    }

    /// Reverses [`Filter::encode`]; the result is at most `max_len` bytes long.
    fn decode(&self, data: Vec<u8>, elem_size: usize, max_len: usize) -> Result<Vec<u8>, FilterError> {
        let _t = stats::timer(self.timers().1);
        match *self {
            Filter::Gzip { .. } => gzip::decode(&data, max_len),
            Filter::Zstd { .. } => zstd::decode(&data, max_len),
            Filter::Lz4 => lz4::decode(&data, max_len),
            Filter::Rle => rle::decode(&data, elem_size, max_len),
            Filter::Delta | Filter::ByteShuffle if data.len() > max_len => {
                Err(corrupt(self.name(), format!("{} bytes, more than the {max_len} expected", data.len())))
            }
            Filter::Delta => Ok(delta::decode(data, elem_size)),
            Filter::ByteShuffle => Ok(byteshuffle::decode(data, elem_size)),
        }
    }
}

/// Errors of the filter pipeline.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// A filter's parameters are invalid (e.g. a compression level out of range).
    #[error("invalid filter {filter}: {detail}")]
    InvalidConfig {
        /// The filter's name.
        filter: &'static str,
        /// What is wrong.
        detail: String,
    },
    /// Filtered bytes could not be decoded.
    #[error("cannot decode {filter} data: {detail}")]
    Corrupt {
        /// The filter's name.
        filter: &'static str,
        /// What is wrong.
        detail: String,
    },
}

/// An ordered list of filters applied to every tile of an attribute (first to last when writing,
/// last to first when reading).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FilterPipeline {
    filters: Vec<Filter>,
    /// The deflate encoder of gzip stages (a writer's choice, not part of the pipeline: every
    /// encoder writes the same format).
    #[serde(skip)]
    deflate: DeflateEncoder,
}

/// Pipelines are equal when their filters are: the deflate encoder is how a writer runs them.
impl PartialEq for FilterPipeline {
    fn eq(&self, other: &Self) -> bool {
        self.filters == other.filters
    }
}

impl Eq for FilterPipeline {}

/// The encoder behind a gzip stage at levels [`gzip::LAZY_LEVELS`]: both write a standard zlib
/// stream, and readers decode either with libdeflate. Which is faster depends on the data (on
/// integers whose rows restate each other zlib's lazy matcher is 1.3-1.6x faster; on noisy
/// data libdeflate is 1.3-1.5x faster), so writers choose per file from a sample
/// (`sm.write.deflate_encoder`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum DeflateEncoder {
    /// libdeflate at the stage's level (every level).
    #[default]
    Libdeflate,
    /// zlib-rs's lazy matcher (`deflate_slow`, zlib-rs's levels 7-9) at the stage's level, at
    /// least 7: zlib-rs's levels up to 6 use faster strategies that store such grids up to 7x
    /// larger. Stages below level 6 keep libdeflate.
    ZlibLazy,
}

/// The encoder to keep, given the time and stored bytes of a sample filtered by libdeflate and
/// by zlib-rs's lazy matcher: zlib when it is at least 10% faster and stores at most 10% more
/// (the tolerance of the automatic chunk size: the writer trades little ratio for speed), else
/// libdeflate.
pub(crate) fn prefer_deflate(
    libdeflate: (std::time::Duration, usize),
    zlib: (std::time::Duration, usize),
) -> DeflateEncoder {
    let faster = zlib.0.as_nanos() * 10 <= libdeflate.0.as_nanos() * 9;
    let about_as_small = zlib.1 as u128 * 10 <= libdeflate.1 as u128 * 11;
    if faster && about_as_small {
        DeflateEncoder::ZlibLazy
    } else {
        DeflateEncoder::Libdeflate
    }
}

impl FilterPipeline {
    /// A pipeline of the given filters.
    pub fn new(filters: Vec<Filter>) -> Self {
        Self { filters, deflate: DeflateEncoder::default() }
    }

    /// This pipeline with its gzip stages (at levels [`gzip::LAZY_LEVELS`]) run by `deflate`.
    pub(crate) fn with_deflate(&self, deflate: DeflateEncoder) -> Self {
        Self { filters: self.filters.clone(), deflate }
    }

    /// Whether the deflate encoder matters: a gzip stage at a level zlib-rs's lazy matcher
    /// serves.
    pub(crate) fn has_deflate_choice(&self) -> bool {
        self.filters.iter().any(|f| matches!(f, Filter::Gzip { level } if gzip::LAZY_LEVELS.contains(level)))
    }

    /// The deflate encoder that filters `sample` (values of `elem_size` bytes) faster with this
    /// pipeline, by [`prefer_deflate`]: each filters it twice, interleaved, and its faster run
    /// counts (4 MiB take 15-120 ms a run). One run each made the choice flip between writes of
    /// the same data where zlib-rs is 20% faster: the first run also brings the sample into
    /// cache, and a run can lose its core for a while.
    ///
    /// # Errors
    /// A filter failure.
    pub(crate) fn faster_deflate(&self, sample: &[u8], elem_size: usize) -> Result<DeflateEncoder, FilterError> {
        let encoders = [DeflateEncoder::ZlibLazy, DeflateEncoder::Libdeflate];
        let mut runs = [(std::time::Duration::MAX, 0usize); 2];
        for _ in 0..2 {
            for (run, e) in runs.iter_mut().zip(encoders) {
                let pipeline = self.with_deflate(e);
                let start = std::time::Instant::now();
                let stored = pipeline.encode_slice(sample, elem_size)?.len();
                *run = (run.0.min(start.elapsed()), stored);
            }
        }
        Ok(prefer_deflate(runs[1], runs[0]))
    }
    /// The filters, in write order.
    pub fn filters(&self) -> &[Filter] {
        &self.filters
    }
    /// Whether the pipeline stores tiles unchanged.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }
    /// Checks every filter's parameters.
    ///
    /// # Errors
    /// `InvalidConfig` naming the first bad filter.
    pub fn validate(&self) -> Result<(), FilterError> {
        self.filters.iter().try_for_each(Filter::validate)
    }
    /// The largest stored (filtered) size a tile of `len` unfiltered bytes can have: the bound
    /// of docs/format.md §9.8 after the last filter. A tile index entry claiming more is corrupt,
    /// and readers check it before reading the stored bytes.
    pub fn max_filtered_len(&self, len: u64) -> u64 {
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let bound = self.filters.iter().fold(len, |b, f| f.max_encoded_len(b));
        u64::try_from(bound).unwrap_or(u64::MAX)
    }
    /// Filters one tile. `elem_size` is the width in bytes of one value (1, 2, 4 or 8).
    ///
    /// # Errors
    /// A compressor failure.
    pub fn encode(&self, data: Vec<u8>, elem_size: usize) -> Result<Vec<u8>, FilterError> {
        if self.filters.is_empty() {
            return Ok(data);
        }
        let _t = stats::timer(Timer::FilterPipelineRunForward);
        self.validate()?;
        check_elem_size(elem_size)?;
        let mut width = elem_size;
        let mut buf = data;
        for filter in &self.filters {
            buf = filter.encode(buf, width, self.deflate)?;
            width = filter.output_elem_size(width);
        }
        Ok(buf)
    }
    /// [`FilterPipeline::encode`] of borrowed bytes: a pipeline whose only filter is a
    /// compressor reads `data` in place instead of copying it first.
    ///
    /// # Errors
    /// A compressor failure.
    pub fn encode_slice(&self, data: &[u8], elem_size: usize) -> Result<Vec<u8>, FilterError> {
        match self.filters.as_slice() {
            [only @ (Filter::Zstd { level: _ } | Filter::Lz4 | Filter::Gzip { level: _ })] => {
                let _t = stats::timer(Timer::FilterPipelineRunForward);
                self.validate()?;
                check_elem_size(elem_size)?;
                let _f = stats::timer(only.timers().0);
                match *only {
                    Filter::Zstd { level } => zstd::encode(data, level),
                    Filter::Gzip { level } => gzip::encode(data, level, self.deflate),
                    _ => Ok(lz4::encode(data)),
                }
            }
            _ => self.encode(data.to_vec(), elem_size),
        }
    }
    /// [`FilterPipeline::decode`] into `out`, which need not be initialized and receives exactly
    /// `out.len()` unfiltered bytes: a pipeline whose only filter is zstd decompresses straight
    /// into `out` (no buffer, no copy, no zeroing); delta and byte shuffle stages before a last
    /// zstd (the default coordinate filters, `[byteshuffle, zstd]`, ...) decompress into one
    /// buffer, and their first stage writes its output straight into `out`; any other pipeline
    /// decodes into a buffer and copies it.
    ///
    /// # Errors
    /// As [`FilterPipeline::decode`]; `out` may then be partly written.
    pub fn decode_into(&self, data: &[u8], elem_size: usize, out: &mut [MaybeUninit<u8>]) -> Result<(), FilterError> {
        match self.filters.as_slice() {
            [only @ Filter::Zstd { .. }] => {
                let _t = stats::timer(Timer::FilterPipelineRunReverse);
                check_elem_size(elem_size)?;
                let _f = stats::timer(only.timers().1);
                return zstd::decode_into(data, out);
            }
            [only @ Filter::Gzip { .. }] => {
                let _t = stats::timer(Timer::FilterPipelineRunReverse);
                check_elem_size(elem_size)?;
                let _f = stats::timer(only.timers().1);
                return gzip::decode_into(data, out);
            }
            [first @ (Filter::Delta | Filter::ByteShuffle), middle @ .., last @ Filter::Zstd { .. }]
                if middle.iter().all(|f| matches!(f, Filter::Delta | Filter::ByteShuffle)) =>
            {
                let _t = stats::timer(Timer::FilterPipelineRunReverse);
                check_elem_size(elem_size)?;
                // Delta and byte shuffle keep both the length and the element width, so every
                // stage's input is `out.len()` bytes of `elem_size`-byte elements.
                let mut buf = {
                    let _f = stats::timer(last.timers().1);
                    zstd::decode(data, out.len())?
                };
                if buf.len() != out.len() {
                    return Err(corrupt(last.name(), format!("decoded {} bytes, expected {}", buf.len(), out.len())));
                }
                if let (Filter::Delta, [shuffle @ Filter::ByteShuffle]) = (first, middle) {
                    // Both stages in one pass, when the element width allows.
                    let _f = stats::timer(shuffle.timers().1);
                    if byteshuffle::decode_delta_into(&buf, elem_size, out) {
                        return Ok(());
                    }
                }
                for f in middle.iter().rev() {
                    buf = f.decode(buf, elem_size, out.len())?;
                }
                let _f = stats::timer(first.timers().1);
                match first {
                    Filter::Delta => delta::decode_into(&buf, elem_size, out),
                    _ => byteshuffle::decode_into(&buf, elem_size, out),
                }
                return Ok(());
            }
            _ => {}
        }
        let plain = self.decode(data.to_vec(), elem_size, out.len())?;
        for (dst, &b) in out.iter_mut().zip(&plain) {
            dst.write(b);
        }
        Ok(())
    }
    /// Reverses `encode`. `expected_len` is the unfiltered length recorded in the tile index.
    ///
    /// # Errors
    /// `Corrupt` when the bytes cannot be decoded or do not decode to `expected_len` bytes.
    pub fn decode(&self, data: Vec<u8>, elem_size: usize, expected_len: usize) -> Result<Vec<u8>, FilterError> {
        let _t = stats::timer(Timer::FilterPipelineRunReverse);
        let Some(first) = self.filters.first() else {
            return if data.len() == expected_len {
                Ok(data)
            } else {
                Err(corrupt("pipeline", format!("unfiltered tile has {} bytes, expected {expected_len}", data.len())))
            };
        };
        check_elem_size(elem_size)?;
        // Element width and largest legitimate decoded length of every stage, in write order.
        let mut stages = Vec::with_capacity(self.filters.len());
        let (mut width, mut bound) = (elem_size, expected_len);
        for filter in &self.filters {
            stages.push((width, bound));
            width = filter.output_elem_size(width);
            bound = filter.max_encoded_len(bound);
        }
        let mut buf = data;
        for (filter, &(width, bound)) in self.filters.iter().zip(&stages).rev() {
            buf = filter.decode(buf, width, bound)?;
        }
        if buf.len() != expected_len {
            return Err(corrupt(first.name(), format!("decoded {} bytes, expected {expected_len}", buf.len())));
        }
        Ok(buf)
    }
}

/// Rejects element widths no filter can work with.
fn check_elem_size(elem_size: usize) -> Result<(), FilterError> {
    if elem_size == 0 {
        return Err(FilterError::InvalidConfig {
            filter: "pipeline",
            detail: "element size must be at least 1 byte".to_owned(),
        });
    }
    Ok(())
}

/// A `Corrupt` error.
fn corrupt(filter: &'static str, detail: impl Into<String>) -> FilterError {
    FilterError::Corrupt { filter, detail: detail.into() }
}

/// Size of the length header of the stages that have one.
const LEN_HEADER: usize = 8;

/// Writes the length header (`len` as u64 LE) into a fresh buffer of the given capacity.
fn with_len_header(len: usize, capacity: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(capacity.max(LEN_HEADER));
    out.extend_from_slice(&(len as u64).to_le_bytes());
    out
}

/// Splits a stage's length header from its body, checking the length is at most `max_len`.
fn read_len_header<'a>(filter: &'static str, data: &'a [u8], max_len: usize) -> Result<(usize, &'a [u8]), FilterError> {
    let Some((head, body)) = data.split_first_chunk::<LEN_HEADER>() else {
        return Err(corrupt(filter, format!("{} bytes, too short for the length header", data.len())));
    };
    let len = u64::from_le_bytes(*head);
    match usize::try_from(len) {
        Ok(len) if len <= max_len => Ok((len, body)),
        _ => Err(corrupt(filter, format!("length header {len} exceeds the expected {max_len}"))),
    }
}

/// An empty buffer able to hold `len` bytes, or `Corrupt` when that cannot be allocated.
fn alloc_output(filter: &'static str, len: usize) -> Result<Vec<u8>, FilterError> {
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|e| corrupt(filter, format!("cannot allocate {len} bytes: {e}")))?;
    Ok(out)
}

/// Random test data shared by the filters' tests.
#[cfg(test)]
pub(crate) mod testdata {
    /// Deterministic pseudo-random bytes (xorshift), `len` of them.
    pub(crate) fn random(len: usize, seed: u64) -> Vec<u8> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    /// Bytes with long runs of equal elements of width `w` (and a partial tail element).
    pub(crate) fn runs(len: usize, w: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        let mut elem = 0usize;
        while out.len() < len {
            let value = ((elem / 37) as u64).wrapping_mul(0x0101_0101_0101_0101).wrapping_add(7);
            for b in value.to_le_bytes().iter().cycle().take(w) {
                if out.len() < len {
                    out.push(*b);
                }
            }
            elem += 1;
        }
        out
    }

    /// int32 values `i % 1000 + j` over a 2-D tile, little-endian.
    pub(crate) fn int32_grid(len: usize) -> Vec<u8> {
        let n = len / 4;
        let cols = 1000usize;
        let mut out = Vec::with_capacity(len);
        for k in 0..n {
            let (i, j) = (k / cols, k % cols);
            out.extend_from_slice(&((i % 1000 + j) as i32).to_le_bytes());
        }
        out.resize(len, 0xAB);
        out
    }

    /// Interesting lengths: empty, shorter than an element, odd, around block boundaries.
    pub(crate) const LENGTHS: &[usize] =
        &[0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1001, 4096, 65_537, 100_003];

    /// The element widths the filters are exercised with.
    pub(crate) const WIDTHS: &[usize] = &[1, 2, 3, 4, 8, 16];
}

#[cfg(test)]
mod tests {
    use super::testdata::{int32_grid, random, runs, LENGTHS};
    use super::*;
    use proptest::prelude::*;

    /// Pipelines that differ only in their deflate encoder are equal and serialize alike: the
    /// encoder is how a writer runs a pipeline, not part of the schema.
    #[test]
    fn the_deflate_encoder_is_not_part_of_the_pipeline() {
        let p = FilterPipeline::new(vec![Filter::ByteShuffle, Filter::Gzip { level: 6 }]);
        let lazy = p.with_deflate(DeflateEncoder::ZlibLazy);
        assert_eq!(p, lazy);
        assert_eq!(serde_json::to_string(&p).unwrap(), serde_json::to_string(&lazy).unwrap());
        let back: FilterPipeline = serde_json::from_str(&serde_json::to_string(&lazy).unwrap()).unwrap();
        assert_eq!(back.deflate, DeflateEncoder::Libdeflate);
        assert!(p.has_deflate_choice());
        for no_choice in [vec![Filter::Gzip { level: 5 }], vec![Filter::Zstd { level: 3 }], vec![]] {
            assert!(!FilterPipeline::new(no_choice).has_deflate_choice());
        }
        let data = testdata::int32_grid(200_000);
        let (a, b) = (p.encode(data.clone(), 4).unwrap(), lazy.encode_slice(&data, 4).unwrap());
        assert_ne!(a, b, "the encoder reaches the gzip stage");
        assert_eq!(p.decode(b, 4, data.len()).unwrap(), data);
    }

    /// zlib-rs's lazy matcher is kept only when it is at least 10% faster and stores at most
    /// 10% more than libdeflate.
    #[test]
    fn zlib_is_preferred_only_when_faster_by_a_tenth_and_about_as_small() {
        let ms = std::time::Duration::from_millis;
        let lib = (ms(100), 1000);
        for (zlib, want) in [
            ((ms(90), 1100), DeflateEncoder::ZlibLazy),
            ((ms(50), 900), DeflateEncoder::ZlibLazy),
            ((ms(91), 1000), DeflateEncoder::Libdeflate),
            ((ms(50), 1101), DeflateEncoder::Libdeflate),
            ((ms(150), 900), DeflateEncoder::Libdeflate),
        ] {
            assert_eq!(prefer_deflate(lib, zlib), want, "{zlib:?}");
        }
    }

    fn all_filters() -> Vec<Filter> {
        vec![
            Filter::Gzip { level: 6 },
            Filter::Zstd { level: 3 },
            Filter::Lz4,
            Filter::Rle,
            Filter::Delta,
            Filter::ByteShuffle,
        ]
    }

    fn roundtrip(p: &FilterPipeline, data: &[u8], w: usize) {
        let enc = p.encode(data.to_vec(), w).unwrap();
        let dec = p.decode(enc, w, data.len()).unwrap();
        assert_eq!(dec, data, "pipeline {p:?} width {w} len {}", data.len());
    }

    #[test]
    fn empty_pipeline_returns_input_unchanged() {
        let p = FilterPipeline::default();
        assert!(p.is_empty());
        let data = random(1000, 1);
        let ptr = data.as_ptr();
        let enc = p.encode(data, 4).unwrap();
        assert_eq!(enc.as_ptr(), ptr);
        let dec = p.decode(enc, 4, 1000).unwrap();
        assert_eq!(dec.as_ptr(), ptr);
        assert!(matches!(p.decode(vec![1, 2, 3], 4, 4), Err(FilterError::Corrupt { .. })));
    }

    #[test]
    fn each_filter_alone_roundtrips() {
        for f in all_filters() {
            let p = FilterPipeline::new(vec![f]);
            for &w in &[1, 2, 4, 8] {
                for &len in LENGTHS {
                    roundtrip(&p, &random(len, len as u64), w);
                    roundtrip(&p, &runs(len, w), w);
                }
            }
        }
    }

    #[test]
    fn typical_pipelines_roundtrip() {
        let data = int32_grid(1 << 20);
        for filters in [
            vec![Filter::Delta, Filter::ByteShuffle, Filter::Zstd { level: 3 }],
            vec![Filter::ByteShuffle, Filter::Lz4],
            vec![Filter::Delta, Filter::Rle, Filter::Gzip { level: 1 }],
            vec![Filter::Zstd { level: 1 }, Filter::ByteShuffle, Filter::Rle],
            vec![Filter::Rle, Filter::Rle, Filter::Rle],
            vec![Filter::Lz4, Filter::Lz4, Filter::Zstd { level: -7 }],
            vec![Filter::Gzip { level: 0 }, Filter::Gzip { level: 9 }],
        ] {
            let p = FilterPipeline::new(filters);
            roundtrip(&p, &data, 4);
            roundtrip(&p, &data[..data.len() - 3], 4);
            roundtrip(&p, &[], 4);
        }
    }

    #[test]
    fn compression_actually_compresses() {
        let data = int32_grid(1 << 20);
        let p = FilterPipeline::new(vec![Filter::ByteShuffle, Filter::Zstd { level: 3 }]);
        let enc = p.encode(data.clone(), 4).unwrap();
        assert!(enc.len() < data.len() / 4, "{}", enc.len());
    }

    #[test]
    fn wrong_expected_len_is_corrupt() {
        let data = random(1000, 9);
        for f in all_filters() {
            let p = FilterPipeline::new(vec![f]);
            let enc = p.encode(data.clone(), 4).unwrap();
            for expected in [0, 999, 1001] {
                assert!(
                    matches!(p.decode(enc.clone(), 4, expected), Err(FilterError::Corrupt { .. })),
                    "{f:?} {expected}"
                );
            }
        }
    }

    /// The borrowed-slice paths the chunked tiles use give exactly what `encode`/`decode` give,
    /// and refuse a wrong output size or cut input like `decode` does.
    #[test]
    #[allow(unsafe_code)]
    fn slice_paths_match_the_owned_paths() {
        let data = int32_grid(70_000);
        let mut pipelines: Vec<Vec<Filter>> = all_filters().into_iter().map(|f| vec![f]).collect();
        pipelines.push(vec![]);
        for pre in [
            &[Filter::Delta][..],
            &[Filter::ByteShuffle],
            &[Filter::Delta, Filter::ByteShuffle],
            &[Filter::ByteShuffle, Filter::Delta],
        ] {
            pipelines.push([pre, &[Filter::Zstd { level: 3 }]].concat());
        }
        // Element widths with and without a typed path, lengths with and without a partial
        // last element.
        let cases = [
            (4, data.clone()),
            (8, data.clone()),
            (2, data[..69_999].to_vec()),
            (1, data[..999].to_vec()),
            (3, data[..69_998].to_vec()),
        ];
        for (filters, (w, data)) in pipelines.into_iter().flat_map(|p| cases.clone().map(|c| (p.clone(), c))) {
            let p = FilterPipeline::new(filters);
            let enc = p.encode_slice(&data, w).unwrap();
            assert_eq!(enc, p.encode(data.clone(), w).unwrap(), "{p:?}");
            let mut out = vec![MaybeUninit::new(0xEEu8); data.len()];
            p.decode_into(&enc, w, &mut out).unwrap();
            // SAFETY: every byte was initialized when `out` was made.
            let got: Vec<u8> = out.iter().map(|b| unsafe { b.assume_init() }).collect();
            assert_eq!(got, data, "{p:?} width {w}");
            for wrong in [data.len() - 1, data.len() + 1] {
                let mut other = vec![MaybeUninit::new(0u8); wrong];
                assert!(p.decode_into(&enc, w, &mut other).is_err(), "{p:?} into {wrong}");
            }
            for cut in [0, 9, enc.len() / 2, enc.len() - 1] {
                assert!(p.decode_into(&enc[..cut], w, &mut out).is_err(), "{p:?} cut at {cut}");
            }
        }
    }

    #[test]
    fn truncated_input_is_corrupt() {
        let data = random(5000, 3);
        for f in all_filters() {
            let p = FilterPipeline::new(vec![f, Filter::Zstd { level: 1 }]);
            let enc = p.encode(data.clone(), 4).unwrap();
            for cut in [0, 1, 7, 8, 9, enc.len() / 2, enc.len() - 1] {
                assert!(p.decode(enc[..cut].to_vec(), 4, 5000).is_err(), "{f:?} {cut}");
            }
            // Truncating the single-stage output is also detected.
            let p = FilterPipeline::new(vec![f]);
            let enc = p.encode(data.clone(), 4).unwrap();
            for cut in [0, 1, 7, 8, 9, enc.len() / 2, enc.len() - 1] {
                assert!(p.decode(enc[..cut].to_vec(), 4, 5000).is_err(), "{f:?} {cut}");
            }
        }
    }

    #[test]
    fn huge_expected_len_does_not_allocate() {
        for f in all_filters() {
            let p = FilterPipeline::new(vec![f]);
            let enc = p.encode(random(100, 2), 1).unwrap();
            assert!(p.decode(enc, 1, usize::MAX).is_err());
            let mut bogus = u64::MAX.to_le_bytes().to_vec();
            bogus.extend_from_slice(&[0; 16]);
            assert!(p.decode(bogus.clone(), 1, usize::MAX).is_err());
            assert!(p.decode(bogus, 1, 1 << 40).is_err());
        }
    }

    #[test]
    fn validate_rejects_bad_levels() {
        for f in [
            Filter::Gzip { level: 10 },
            Filter::Gzip { level: u32::MAX },
            Filter::Zstd { level: -8 },
            Filter::Zstd { level: 23 },
            Filter::Zstd { level: i32::MIN },
        ] {
            let p = FilterPipeline::new(vec![Filter::Delta, f]);
            match p.validate() {
                Err(FilterError::InvalidConfig { filter, .. }) => assert_eq!(filter, f.name()),
                other => panic!("{f:?}: {other:?}"),
            }
            assert!(matches!(p.encode(vec![1, 2, 3], 1), Err(FilterError::InvalidConfig { .. })));
        }
        for level in 0..=9 {
            assert!(Filter::Gzip { level }.validate().is_ok());
        }
        for level in -7..=22 {
            assert!(Filter::Zstd { level }.validate().is_ok());
        }
        assert!(FilterPipeline::default().validate().is_ok());
    }

    #[test]
    fn zero_elem_size_is_rejected() {
        let p = FilterPipeline::new(vec![Filter::Delta]);
        assert!(matches!(p.encode(vec![1, 2], 0), Err(FilterError::InvalidConfig { .. })));
        assert!(p.decode(vec![1, 2], 0, 2).is_err());
    }

    #[test]
    fn serde_json_representation() {
        let cases = [
            (Filter::Zstd { level: 3 }, r#"{"name":"zstd","level":3}"#),
            (Filter::Gzip { level: 6 }, r#"{"name":"gzip","level":6}"#),
            (Filter::Lz4, r#"{"name":"lz4"}"#),
            (Filter::Rle, r#"{"name":"rle"}"#),
            (Filter::Delta, r#"{"name":"delta"}"#),
            (Filter::ByteShuffle, r#"{"name":"byteshuffle"}"#),
        ];
        for (f, json) in cases {
            assert_eq!(serde_json::to_string(&f).unwrap(), json);
            assert_eq!(serde_json::from_str::<Filter>(json).unwrap(), f);
            assert!(json.starts_with(&format!(r#"{{"name":"{}""#, f.name())));
        }
        let p = FilterPipeline::new(vec![Filter::Delta, Filter::Zstd { level: -1 }]);
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, r#"[{"name":"delta"},{"name":"zstd","level":-1}]"#);
        assert_eq!(serde_json::from_str::<FilterPipeline>(&json).unwrap(), p);
        assert!(serde_json::from_str::<Filter>(r#"{"name":"snappy"}"#).is_err());
    }

    /// Single-thread throughput on a 10 MB int32 tile of `i % 1000 + j`. Run with
    /// `cargo test --release -p tessera filter::tests::throughput -- --ignored --nocapture`.
    #[test]
    #[ignore = "timing, run in release mode"]
    fn throughput() {
        let data = int32_grid(10_000_000);
        let mb = data.len() as f64 / 1e6;
        for filters in [
            vec![Filter::Gzip { level: 6 }],
            vec![Filter::Zstd { level: 3 }],
            vec![Filter::Lz4],
            vec![Filter::Rle],
            vec![Filter::Delta],
            vec![Filter::ByteShuffle],
            vec![Filter::ByteShuffle, Filter::Zstd { level: 3 }],
        ] {
            let p = FilterPipeline::new(filters);
            let (mut enc_best, mut dec_best, mut ratio) = (f64::MAX, f64::MAX, 0.0);
            for _ in 0..5 {
                let input = data.clone();
                let t = std::time::Instant::now();
                let enc = p.encode(input, 4).unwrap();
                enc_best = enc_best.min(t.elapsed().as_secs_f64());
                ratio = enc.len() as f64 / data.len() as f64;
                let t = std::time::Instant::now();
                let dec = p.decode(enc, 4, data.len()).unwrap();
                dec_best = dec_best.min(t.elapsed().as_secs_f64());
                assert_eq!(dec.len(), data.len());
            }
            println!(
                "{:<50} ratio {ratio:.4}  encode {:>6.0} MB/s  decode {:>6.0} MB/s",
                serde_json::to_string(&p).unwrap(),
                mb / enc_best,
                mb / dec_best
            );
        }
    }

    fn any_filter() -> impl Strategy<Value = Filter> {
        prop_oneof![
            (0u32..=9).prop_map(|level| Filter::Gzip { level }),
            (-7i32..=5).prop_map(|level| Filter::Zstd { level }),
            Just(Filter::Lz4),
            Just(Filter::Rle),
            Just(Filter::Delta),
            Just(Filter::ByteShuffle),
        ]
    }

    fn any_data() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..3000),
            // Few distinct values, so runs and repeats are common.
            proptest::collection::vec(0u8..3, 0..3000),
            (0usize..5000, 1usize..9).prop_map(|(len, w)| runs(len, w)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_pipelines_roundtrip(
            filters in proptest::collection::vec(any_filter(), 0..5),
            data in any_data(),
            w in prop_oneof![Just(1usize), Just(2), Just(4), Just(8), 1usize..17],
        ) {
            let p = FilterPipeline::new(filters);
            let enc = p.encode(data.clone(), w).unwrap();
            let dec = p.decode(enc, w, data.len()).unwrap();
            prop_assert_eq!(dec, data);
        }

        #[test]
        fn random_bytes_never_panic(
            filters in proptest::collection::vec(any_filter(), 1..4),
            data in proptest::collection::vec(any::<u8>(), 0..200),
            w in prop_oneof![Just(1usize), Just(2), Just(4), Just(8)],
            expected in 0usize..100_000,
        ) {
            let p = FilterPipeline::new(filters);
            if let Ok(out) = p.decode(data, w, expected) {
                prop_assert_eq!(out.len(), expected);
            }
        }

        #[test]
        fn corrupted_encodings_never_panic(
            filters in proptest::collection::vec(any_filter(), 1..4),
            data in any_data(),
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            cut in any::<usize>(),
        ) {
            let p = FilterPipeline::new(filters);
            let mut enc = p.encode(data.clone(), 4).unwrap();
            if !enc.is_empty() {
                for (pos, x) in flips {
                    let len = enc.len();
                    enc[pos % len] ^= x;
                }
                let keep = cut % (enc.len() + 1);
                enc.truncate(keep);
            }
            if let Ok(out) = p.decode(enc, 4, data.len()) {
                prop_assert_eq!(out.len(), data.len());
            }
        }
    }
}
