//! Raw image storage (`docs/ssdb.md`, "Raw images storage"): all images of a run in one dense
//! 3-D array `images` with dimensions (t, y, x) in local image coordinates and the 11 int32
//! attributes of SSDB.md section 1, plus the 1-D array `images_llc` (t -> nominal lower-left
//! corner `llc_x`, `llc_y` in world coordinates; local cell (x, y) of image t is world
//! (llc_x + x, llc_y + y)).
//!
//! Space tiles are (1, tile_y, tile_x): one image per tile, so a cycle's slab (Q1, Q3), an
//! image's slab (cooking, Q2) and a window (Q8, Q9) read only the tiles they meet. Cells are
//! row-major inside a tile (x fastest), the order the generator produces and cooking scans. The
//! tile shape and filters were chosen by measurement (`examples/raw_layout.rs`, numbers in
//! docs/ssdb.md). Each load cycle writes one fragment holding its 20 images, streamed one band
//! of `tile_y` rows at a time, so memory is bounded by a band whatever the configuration.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use tessera::{
    Array, ArraySchema, ArrayType, AttrInput, Attribute, CellOrder, Context, Datatype, Dimension, Domain, Filter,
    FilterPipeline, Layout, Mode, Subarray,
};

use crate::generator::{Band, Generator, ATTRS};
use crate::params::{nominal_llc, Config, CYCLE};

/// Name of the images array inside a run's store.
pub const IMAGES: &str = "images";
/// Name of the lower-left-corner array inside a run's store.
pub const IMAGES_LLC: &str = "images_llc";

/// Filters of one raw attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// No filter.
    None,
    /// LZ4.
    Lz4,
    /// Byte shuffle, then LZ4.
    ShuffleLz4,
    /// Byte shuffle, then zstd at the level given.
    ShuffleZstd(i32),
    /// zstd at the level given.
    Zstd(i32),
}

impl Codec {
    /// The filter pipeline.
    pub fn pipeline(self) -> FilterPipeline {
        FilterPipeline::new(match self {
            Codec::None => vec![],
            Codec::Lz4 => vec![Filter::Lz4],
            Codec::ShuffleLz4 => vec![Filter::ByteShuffle, Filter::Lz4],
            Codec::ShuffleZstd(level) => vec![Filter::ByteShuffle, Filter::Zstd { level }],
            Codec::Zstd(level) => vec![Filter::Zstd { level }],
        })
    }
}

/// The physical layout of the images array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawLayout {
    /// Rows per space tile wanted; the divisor of the image side nearest to it is used.
    pub tile_y: i64,
    /// Columns per space tile wanted; the divisor of the image side nearest to it is used.
    pub tile_x: i64,
    /// Filters per attribute, in [`ATTRS`] order.
    pub codecs: [Codec; 11],
}

impl RawLayout {
    /// The layout the pipeline uses (see docs/ssdb.md for the measurements behind it): tiles of
    /// about 250 x 250 cells (250 KB per attribute tile; 200 x 200 for S = 200 and 1600), byte
    /// shuffle + zstd level 1 on every attribute.
    pub fn chosen() -> Self {
        Self { tile_y: 250, tile_x: 250, codecs: [Codec::ShuffleZstd(1); 11] }
    }

    /// The tile extents for images of side `s`: divisors of `s`, so no tile is padded.
    pub fn extents(&self, s: i64) -> (i64, i64) {
        (nearest_divisor(s, self.tile_y), nearest_divisor(s, self.tile_x))
    }
}

/// The divisor of `s` (> 0) nearest to `want`, the smaller one on a tie.
fn nearest_divisor(s: i64, want: i64) -> i64 {
    (1..=s).filter(|d| s % d == 0).min_by_key(|d| ((d - want).abs(), *d)).unwrap_or(s)
}

/// The schema of the images array of `config`.
///
/// # Errors
/// A schema the engine refuses (not expected for the configurations of section 6).
pub fn images_schema(config: Config, layout: &RawLayout) -> Result<ArraySchema> {
    let s = config.side();
    let (ty, tx) = layout.extents(s);
    let n = i128::from(config.images());
    let mut b = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("t", Datatype::Int64, (0, n - 1), 1))
        .dim(Dimension::new("y", Datatype::Int64, (0, i128::from(s) - 1), ty.unsigned_abs()))
        .dim(Dimension::new("x", Datatype::Int64, (0, i128::from(s) - 1), tx.unsigned_abs()))
        .cell_order(CellOrder::RowMajor)
        .tile_order(CellOrder::RowMajor);
    for (name, codec) in ATTRS.iter().zip(layout.codecs) {
        let mut a = Attribute::new(*name, Datatype::Int32);
        a.filters = codec.pipeline();
        b = b.attr(a);
    }
    Ok(b.build()?)
}

/// The schema of the lower-left-corner array of `config`.
///
/// # Errors
/// As [`images_schema`].
pub fn llc_schema(config: Config) -> Result<ArraySchema> {
    let n = config.images();
    Ok(ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("t", Datatype::Int64, (0, i128::from(n) - 1), u64::from(CYCLE.min(n))))
        .attr(Attribute::new("llc_x", Datatype::Int64))
        .attr(Attribute::new("llc_y", Datatype::Int64))
        .build()?)
}

/// The raw images of one run's store.
#[derive(Debug)]
pub struct RawStore {
    ctx: Context,
    dir: PathBuf,
    config: Config,
}

impl RawStore {
    /// Creates the arrays in `dir` (which must not hold them yet).
    ///
    /// # Errors
    /// The arrays exist already or cannot be created.
    pub fn create(ctx: &Context, dir: &Path, config: Config, layout: &RawLayout) -> Result<Self> {
        let images = dir.join(IMAGES);
        if images.exists() {
            bail!("{} exists already: load into a new folder", images.display());
        }
        Array::create(ctx, &images, &images_schema(config, layout)?)
            .with_context(|| format!("creating {}", images.display()))?;
        let llc = dir.join(IMAGES_LLC);
        Array::create(ctx, &llc, &llc_schema(config)?).with_context(|| format!("creating {}", llc.display()))?;
        Ok(Self { ctx: ctx.clone(), dir: dir.to_path_buf(), config })
    }

    /// Opens the arrays of a store loaded before, checking they are `config`'s.
    ///
    /// # Errors
    /// Missing arrays, or arrays of another configuration.
    pub fn open(ctx: &Context, dir: &Path, config: Config) -> Result<Self> {
        let images = dir.join(IMAGES);
        let a = Array::open(ctx, &images, Mode::Read)
            .with_context(|| format!("opening {} (run the load step first)", images.display()))?;
        let dims: Vec<Domain> = a.schema().dims.iter().map(|d| d.domain).collect();
        let (n, s) = (i128::from(config.images()), i128::from(config.side()));
        let want = [Domain::Int(0, n - 1), Domain::Int(0, s - 1), Domain::Int(0, s - 1)];
        if dims != want {
            bail!("{}: domain {dims:?} is not that of configuration {config} ({want:?})", images.display());
        }
        Ok(Self { ctx: ctx.clone(), dir: dir.to_path_buf(), config })
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Generates images `ts` (consecutive, one cycle) and writes them as one fragment, a band
    /// of rows at a time; records their nominal corners. `progress` is called after each band
    /// with the cells written. Returns the time spent generating (the rest is storing).
    ///
    /// # Errors
    /// Storage failures.
    pub fn load(&self, generator: &Generator, ts: std::ops::Range<u32>, progress: &dyn Fn(u64)) -> Result<Duration> {
        let mut generating = Duration::ZERO;
        if ts.is_empty() {
            return Ok(generating);
        }
        let s = self.config.side();
        let images = Array::open(&self.ctx, self.dir.join(IMAGES), Mode::Write)?;
        let band_rows = i64::try_from(images.schema().dims[1].tile_extent())?;
        let whole = Subarray::from_ranges(&[
            (i128::from(ts.start), i128::from(ts.end) - 1),
            (0, i128::from(s) - 1),
            (0, i128::from(s) - 1),
        ]);
        // One fragment per call (a cycle): tiles are flushed as soon as their band is in.
        let mut w = images.writer(&whole, Layout::RowMajor)?;
        let mut band = Band::new(usize::try_from(s)?);
        for t in ts.clone() {
            let mut y0 = 0;
            while y0 < s {
                let rows = band_rows.min(s - y0);
                let start = Instant::now();
                generator.fill(t, y0, usize::try_from(rows)?, &mut band);
                generating += start.elapsed();
                let part = Subarray::from_ranges(&[
                    (i128::from(t), i128::from(t)),
                    (i128::from(y0), i128::from(y0 + rows) - 1),
                    (0, i128::from(s) - 1),
                ]);
                let inputs: Vec<AttrInput<'_>> = ATTRS
                    .iter()
                    .zip(&band.attrs)
                    .map(|(name, v)| AttrInput::fixed(name, bytemuck::cast_slice(v)))
                    .collect();
                w.submit_part(&part, &inputs)?;
                progress((rows * s).unsigned_abs());
                y0 += rows;
            }
        }
        w.finish()?;
        let llc = Array::open(&self.ctx, self.dir.join(IMAGES_LLC), Mode::Write)?;
        let (xs, ys): (Vec<i64>, Vec<i64>) = ts.clone().map(|t| nominal_llc(self.config, t)).unzip();
        llc.write(
            &Subarray::from_ranges(&[(i128::from(ts.start), i128::from(ts.end) - 1)]),
            Layout::RowMajor,
            &[
                AttrInput::fixed("llc_x", bytemuck::cast_slice(&xs)),
                AttrInput::fixed("llc_y", bytemuck::cast_slice(&ys)),
            ],
        )?;
        Ok(generating)
    }

    /// The `pix` values of the local rectangle `[y0, y1] x [x0, x1]` of image `t`, row-major.
    ///
    /// # Errors
    /// Storage failures, or an image not loaded.
    pub fn read_pix(&self, images: &Array, t: u32, (y0, y1): (i64, i64), (x0, x1): (i64, i64)) -> Result<Vec<i32>> {
        let sub = Subarray::from_ranges(&[
            (i128::from(t), i128::from(t)),
            (i128::from(y0), i128::from(y1)),
            (i128::from(x0), i128::from(x1)),
        ]);
        let r = images.read(&sub, &["pix"], Layout::RowMajor)?;
        let data = &r.attrs[0].data;
        Ok(data.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
    }

    /// The images array, open for reading.
    ///
    /// # Errors
    /// Storage failures.
    pub fn images(&self) -> Result<Array> {
        Ok(Array::open(&self.ctx, self.dir.join(IMAGES), Mode::Read)?)
    }

    /// Nominal corners of images `ts` as recorded by the load.
    ///
    /// # Errors
    /// Storage failures.
    pub fn llcs(&self, ts: std::ops::Range<u32>) -> Result<Vec<(i64, i64)>> {
        let a = Array::open(&self.ctx, self.dir.join(IMAGES_LLC), Mode::Read)?;
        let r = a.read(
            &Subarray::from_ranges(&[(i128::from(ts.start), i128::from(ts.end) - 1)]),
            &["llc_x", "llc_y"],
            Layout::RowMajor,
        )?;
        let col = |i: usize| -> Vec<i64> {
            r.attrs[i].data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8]))).collect()
        };
        Ok(col(0).into_iter().zip(col(1)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_divide_every_configurations_side() {
        let l = RawLayout::chosen();
        let got: Vec<(i64, i64)> = Config::ALL.iter().map(|c| l.extents(c.side())).collect();
        assert_eq!(got, [(200, 200), (250, 250), (200, 200), (250, 250), (250, 250), (250, 250)]);
        assert_eq!(nearest_divisor(7, 3), 1);
        assert_eq!(nearest_divisor(12, 5), 4);
    }
}
