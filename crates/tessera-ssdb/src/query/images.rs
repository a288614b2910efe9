//! The queries on the raw images (SSDB.md §4): Q1 (mean pix of a cycle's slab), Q2 (F1' over an
//! image's slab, stored), Q3 (10:3 regridding of a cycle's slab, stored) and the raw-cell windows
//! Q8 and Q9 output. All read whole rectangles (subarray reads) of the `images` array: Q1 and Q3
//! a band of tile rows of the 20 images at a time, Q2 one image's slab, the windows one
//! rectangle per image holding all its windows.

use std::path::Path;
use std::sync::mpsc;

use anyhow::{Context as _, Result};
use rayon::prelude::*;
use sha2::{Digest, Sha256};
use tessera::{
    AggregateOp, AggregateRequest, AggregateValue, Array, ArraySchema, ArrayType, AttrBuffer, AttrInput, Attribute,
    CellOrder, Context, Datatype, DimRange, Dimension, Filter, FilterPipeline, Layout, Mode, Subarray,
};

use super::regrid::{axis_spans, band_rows, bands, output_len, regrid_band, Combine};
use super::{Q1Result, Q2Result, Q3Result, WindowsOut};
use crate::generator::ATTRS;
use crate::keys::{hex, observation_keys_sha256};
use crate::params::{Config, CYCLE};
use crate::raw::RawStore;
use crate::{assign_ids, cook_image_parallel, create_observations, write_observations, CookParams};

/// Little-endian bytes of int32 values, into `out` (reused).
fn le_into(values: &[i32], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(4 * values.len());
    for v in values {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

fn rect(t: (i64, i64), y: (i64, i64), x: (i64, i64)) -> Subarray {
    Subarray::from_ranges(&[
        (i128::from(t.0), i128::from(t.1)),
        (i128::from(y.0), i128::from(y.1)),
        (i128::from(x.0), i128::from(x.1)),
    ])
}

/// The side m of Q1-Q3's local slab `[0, U1)^2` clipped to the image.
pub fn local_slab(config: Config) -> i64 {
    config.slabs().0.min(config.side())
}

/// Q1: Σ pix and the cell count over the slab of the 20 images of `cycle`: one engine aggregate
/// (SUM) over the subarray, which takes the tiles the slab covers whole from the summaries the
/// load stored with them (docs/format.md §8.3) and reads the rest.
///
/// # Errors
/// Storage failures.
pub fn q1(images: &Array, config: Config, cycle: i64) -> Result<Q1Result> {
    let m = local_slab(config);
    let t0 = cycle * i64::from(CYCLE);
    let ranges = vec![
        vec![DimRange::Int(t0.into(), (t0 + i64::from(CYCLE) - 1).into())],
        vec![DimRange::Int(0, (m - 1).into())],
        vec![DimRange::Int(0, (m - 1).into())],
    ];
    let got = images.aggregate(&ranges, None, &[AggregateRequest::new("pix", AggregateOp::Sum)])?;
    let sum = match got.first() {
        Some(AggregateValue::Int(s)) => i64::try_from(*s)?,
        other => anyhow::bail!("Q1: the sum of pix came back as {other:?}"),
    };
    Ok(Q1Result { sum, count: i64::from(CYCLE) * m * m })
}

/// Q2: F1' (threshold 900, the drop rule of the configuration) over the slab of image
/// `20·cycle`; the observations (ids 1, 2, ... in raster order) are stored as a new
/// observations array at `out`.
///
/// # Errors
/// Storage failures, an existing array at `out`.
pub fn q2(ctx: &Context, store: &RawStore, images: &Array, config: Config, cycle: i64, out: &Path) -> Result<Q2Result> {
    let m = local_slab(config);
    let t = u32::try_from(cycle * i64::from(CYCLE))?;
    let pix = store.read_pix(images, t, (0, m - 1), (0, m - 1))?;
    let llc = store.llcs(t..t + 1)?[0];
    let o = config.objects();
    let mu = usize::try_from(m)?;
    let mut obs = cook_image_parallel(
        &pix,
        mu,
        mu,
        llc,
        i64::from(t),
        CookParams::f1_prime(u32::try_from(o.d1)?, u32::try_from(o.d2)?),
    )?;
    assign_ids(&mut obs, 1);
    create_observations(ctx, out).with_context(|| format!("creating {}", out.display()))?;
    write_observations(ctx, out, &obs)?;
    Ok(Q2Result {
        count: obs.len() as u64,
        pixel_sum: obs.iter().map(|o| o.pixel_sum).sum(),
        keys_sha256: observation_keys_sha256(&obs),
    })
}

/// The schema of a Q3 result array: dense, dimensions `t` (image, the whole run's range),
/// `v`, `u` (output row and column, `[0, n)`), one `n x n` tile per image, the 11 int32
/// attributes of the images array (byte shuffle + zstd 1).
///
/// # Errors
/// A schema the engine refuses (not expected).
pub fn q3_schema(config: Config, n: usize) -> Result<ArraySchema> {
    let n = i128::try_from(n)?;
    let mut b = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("t", Datatype::Int64, (0, i128::from(config.images()) - 1), 1))
        .dim(Dimension::new("v", Datatype::Int64, (0, n - 1), n.unsigned_abs() as u64))
        .dim(Dimension::new("u", Datatype::Int64, (0, n - 1), n.unsigned_abs() as u64))
        .cell_order(CellOrder::RowMajor)
        .tile_order(CellOrder::RowMajor);
    for name in ATTRS {
        let mut a = Attribute::new(name, Datatype::Int32);
        a.filters = FilterPipeline::new(vec![Filter::ByteShuffle, Filter::Zstd { level: 1 }]);
        b = b.attr(a);
    }
    Ok(b.build()?)
}

/// Q3: regrids the `m x m` slab of each image of `cycle` 10:3 to `n x n`, all 11 attributes;
/// stores the 20 results as one fragment of a new array at `out` ([`q3_schema`]) and returns
/// the sha256 of the concatenated per-image sha256s (hex) of the `(11, n, n)` little-endian
/// outputs.
///
/// Each image is read in bands of [`band_rows`] source rows (whole tile rows, whole output
/// rows), into the same buffers every band (the engine fills them in place), and the 11
/// attributes of a band are regridded in parallel. Memory: one band (`band x m x 44` bytes)
/// and one output image.
///
/// # Errors
/// Storage failures, an existing array at `out`.
pub fn q3(ctx: &Context, images: &Array, config: Config, cycle: i64, out: &Path) -> Result<Q3Result> {
    let m = usize::try_from(local_slab(config))?;
    let n = output_len(m);
    let spans = axis_spans(m);
    let bands = bands(&spans, m, band_rows(images.schema().dims[1].tile_extent()));
    Array::create(ctx, out, &q3_schema(config, n)?).with_context(|| format!("creating {}", out.display()))?;
    let result = Array::open(ctx, out, Mode::Write)?;
    let t0 = cycle * i64::from(CYCLE);
    let t1 = t0 + i64::from(CYCLE) - 1;
    let (nn, ml) = (i64::try_from(n)?, i64::try_from(m)?);
    let mut w = result.writer(&rect((t0, t1), (0, nn - 1), (0, nn - 1)), Layout::RowMajor)?;
    let mut planes: Vec<Vec<i32>> = vec![vec![0; n * n]; ATTRS.len()];
    let mut sources: Vec<Vec<i32>> = vec![Vec::new(); ATTRS.len()];
    // Image t's output is hashed on a thread of its own while image t + 1 is read and regridded;
    // the two sets of output bytes go back and forth between them.
    let (to_hasher, hash_queue) = mpsc::sync_channel::<Vec<Vec<u8>>>(1);
    let (give_back, returned) = mpsc::channel::<Vec<Vec<u8>>>();
    let shas = std::thread::scope(|scope| -> Result<String> {
        let hasher = scope.spawn(move || {
            let mut shas = String::with_capacity(64 * CYCLE as usize);
            for bytes in hash_queue {
                let mut sha = Sha256::new();
                for b in &bytes {
                    sha.update(b);
                }
                shas.push_str(&hex(&sha.finalize()));
                // The sender is gone only when q3 has stopped early.
                let _ = give_back.send(bytes);
            }
            shas
        });
        let mut spare: Vec<Vec<Vec<u8>>> = vec![vec![Vec::new(); ATTRS.len()]; 2];
        for t in t0..=t1 {
            for band in &bands {
                let (src0, src1) = (band.src.start, band.src.end);
                let cells = (src1 - src0) * m;
                let band_rect = rect((t, t), (i64::try_from(src0)?, i64::try_from(src1)? - 1), (0, ml - 1));
                let mut query = images.read_query(&band_rect, &ATTRS, Layout::RowMajor)?;
                let mut bufs: Vec<AttrBuffer<'_>> = sources
                    .iter_mut()
                    .map(|v| {
                        v.resize(cells, 0);
                        AttrBuffer { data: bytemuck::cast_slice_mut(&mut v[..cells]), offsets: None, validity: None }
                    })
                    .collect();
                let status = query.submit(&mut bufs)?;
                anyhow::ensure!(
                    status.complete && status.cells == cells as u64,
                    "Q3: image {t}, rows {src0}..{src1}: {} of {cells} cells read",
                    status.cells
                );
                if cfg!(target_endian = "big") {
                    // The engine wrote little-endian values into the buffers' bytes.
                    sources.iter_mut().for_each(|v| v.iter_mut().for_each(|x| *x = i32::from_le(*x)));
                }
                // The attributes on every core, each with its own scratch row.
                planes.par_iter_mut().zip(&sources).enumerate().for_each_init(Vec::new, |v, (a, (plane, src))| {
                    let how = match ATTRS[a] {
                        "valid" => Combine::And,
                        "sat" => Combine::Or,
                        _ => Combine::Mean,
                    };
                    let out_rows = &mut plane[band.out.start * n..band.out.end * n];
                    regrid_band(&src[..cells], m, &spans, &band.ys, how, v, out_rows);
                });
            }
            let mut bytes = match spare.pop() {
                Some(b) => b,
                None => returned.recv().context("Q3: the hashing thread stopped")?,
            };
            planes.par_iter().zip(&mut bytes).for_each(|(p, b)| le_into(p, b));
            let inputs: Vec<AttrInput<'_>> =
                ATTRS.iter().zip(&bytes).map(|(name, b)| AttrInput::fixed(name, b)).collect();
            w.submit_part(&rect((t, t), (0, nn - 1), (0, nn - 1)), &inputs)?;
            to_hasher.send(bytes).context("Q3: the hashing thread stopped")?;
        }
        drop(to_hasher);
        hasher.join().map_err(|_| anyhow::anyhow!("Q3: the hashing thread panicked"))
    })?;
    w.finish()?;
    Ok(Q3Result { sha256_of_image_shas: hex(&Sha256::digest(shas.as_bytes())) })
}

/// One member observation whose windows Q8/Q9 output: its key parts and centre.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct WindowOwner {
    /// Image time.
    pub t: i64,
    /// Centre x.
    pub cx: i64,
    /// Centre y.
    pub cy: i64,
    /// pixelSum.
    pub pixel_sum: i64,
}

/// Bytes of `pix` rectangles [`windows`] holds at once (one chunk of owners).
pub const WINDOW_READ_BUDGET: usize = 256 << 20;

/// Q8/Q9's output: for each owner (sorted by (t, cx, cy, pixelSum), each once) and each image
/// whose nominal extent `[lx, lx+S) x [ly, ly+S)` meets the slab `[x, x+u) x [y, y+u)` (time
/// order), the `pix` cells of the window `[cx - D6/2, cx + D6/2) x [cy - D6/2, cy + D6/2)`
/// clipped to the image, empty windows skipped: their count and the sha256 of the headers
/// (int64 LE t_obs, cx, cy, pixelSum, t_img, x0, y0, x1, y1) each followed by the window's pix
/// (int32 LE, row-major).
///
/// The owners go in chunks: a chunk grows while the rectangles holding its windows, one per
/// image, stay within [`WINDOW_READ_BUDGET`] bytes (at least one owner). Each image's rectangle
/// is read once per chunk, and the chunk's windows are hashed in owner order as slices of them.
///
/// # Errors
/// Storage failures.
pub fn windows(
    store: &RawStore,
    images: &Array,
    config: Config,
    owners: &[WindowOwner],
    slab: (i64, i64, i64),
) -> Result<WindowsOut> {
    windows_within(store, images, config, owners, slab, WINDOW_READ_BUDGET)
}

/// [`windows`] with a given budget (tests use small ones to force many chunks).
pub(crate) fn windows_within(
    store: &RawStore,
    images: &Array,
    config: Config,
    owners: &[WindowOwner],
    slab: (i64, i64, i64),
    budget: usize,
) -> Result<WindowsOut> {
    let (x, y, u) = slab;
    let s = config.side();
    let half = config.objects().d6 / 2;
    // The images meeting the slab, in time order: (t, lx, ly).
    let meeting: Vec<(i64, i64, i64)> = store
        .llcs(0..config.images())?
        .into_iter()
        .zip(0i64..)
        .filter(|&((lx, ly), _)| lx < x + u && x < lx + s && ly < y + u && y < ly + s)
        .map(|((lx, ly), t)| (t, lx, ly))
        .collect();
    let clip = |o: &WindowOwner, lx: i64, ly: i64| -> Option<[i64; 4]> {
        let (x0, x1) = ((o.cx - half).max(lx), (o.cx + half).min(lx + s));
        let (y0, y1) = ((o.cy - half).max(ly), (o.cy + half).min(ly + s));
        (x0 < x1 && y0 < y1).then_some([x0, y0, x1, y1])
    };
    let union = |r: Option<[i64; 4]>, w: [i64; 4]| match r {
        None => w,
        Some(r) => [r[0].min(w[0]), r[1].min(w[1]), r[2].max(w[2]), r[3].max(w[3])],
    };
    let area = |r: &Option<[i64; 4]>| r.map_or(0, |r| 4 * usize::try_from((r[2] - r[0]) * (r[3] - r[1])).unwrap_or(0));
    let mut sha = Sha256::new();
    let mut count = 0u64;
    let mut start = 0;
    while start < owners.len() {
        // Grow the chunk while its rectangles fit the budget.
        let mut rects: Vec<Option<[i64; 4]>> = vec![None; meeting.len()];
        let mut end = start;
        while end < owners.len() {
            let grown: Vec<Option<[i64; 4]>> = rects
                .iter()
                .zip(&meeting)
                .map(|(&r, &(_, lx, ly))| clip(&owners[end], lx, ly).map_or(r, |w| Some(union(r, w))))
                .collect();
            if end > start && grown.iter().map(area).sum::<usize>() > budget {
                break;
            }
            rects = grown;
            end += 1;
        }
        // One read per image of the chunk's rectangle (little-endian int32 bytes).
        let mut reads: Vec<Option<Vec<u8>>> = Vec::with_capacity(meeting.len());
        for (&(t, lx, ly), r) in meeting.iter().zip(&rects) {
            let Some([x0, y0, x1, y1]) = *r else {
                reads.push(None);
                continue;
            };
            let mut res = images.read(
                &rect((t, t), (y0 - ly, y1 - ly - 1), (x0 - lx, x1 - lx - 1)),
                &["pix"],
                Layout::RowMajor,
            )?;
            let pix = std::mem::take(&mut res.attrs[0].data);
            if pix.len() != area(r) {
                anyhow::bail!("image {t}: the read of [{x0}, {x1}) x [{y0}, {y1}) returned {} bytes", pix.len());
            }
            reads.push(Some(pix));
        }
        // Owner-major: each owner's windows in time order, as slices of the rectangles.
        for o in &owners[start..end] {
            for ((&(t, lx, ly), r), pix) in meeting.iter().zip(&rects).zip(&reads) {
                let (Some([x0, y0, x1, y1]), Some(rx), Some(pix)) = (clip(o, lx, ly), *r, pix) else { continue };
                for v in [o.t, o.cx, o.cy, o.pixel_sum, t, x0, y0, x1, y1] {
                    sha.update(v.to_le_bytes());
                }
                let row_bytes = 4 * usize::try_from(rx[2] - rx[0])?;
                let (c0, c1) = (4 * usize::try_from(x0 - rx[0])?, 4 * usize::try_from(x1 - rx[0])?);
                for row in usize::try_from(y0 - rx[1])?..usize::try_from(y1 - rx[1])? {
                    sha.update(&pix[row * row_bytes + c0..row * row_bytes + c1]);
                }
                count += 1;
            }
        }
        start = end;
    }
    Ok(WindowsOut { windows: count, pix_windows_sha256: hex(&sha.finalize()) })
}
