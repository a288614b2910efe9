//! Cooking F1 / F1' (SSDB.md §2): the objects of one image, as [`Observation`]s.
//!
//! One raster pass (rows `y` outer, `x` inner) finds the horizontal runs of qualifying cells
//! (`pix >= th`) and labels them with a union-find: a run touching runs of the previous row
//! through an 8-neighbour joins the lowest of their labels and merges the others into it, so the
//! labels end as the 8-connected components, and the lowest label of a component is the one of
//! its first cell in raster order. Each label accumulates its object's sums in exact integers
//! (`i128`), its bounding box, its first cell and its leftmost cell (the trace's start). Runs are
//! kept (one small record per run, in raster order); there is no per-cell label image.
//!
//! Per component, after the pass: the drop rule's box test, the centre, the Moore-neighbour trace
//! of the outer boundary (stopped as soon as it has more than D2 vertices: the object is then
//! dropped whatever the rest of the trace), and `avgDist` from a second walk over the runs.
//!
//! [`cook_image_parallel`] cooks row chunks with an overlap of D1 rows on each side and keeps the
//! objects whose centre row is in the chunk's core; by the drop rule this equals the sequential
//! pass (see SSDB.md §2 and `docs/ssdb.md`, "Cooking").

use rayon::prelude::*;

use crate::observation::{cycle_of, Observation};

/// Threshold of F1.
pub const TH_F1: i32 = 1000;
/// Threshold of F1' (recooking).
pub const TH_F1_PRIME: i32 = 900;

/// Parameters of one cooking: the threshold and the drop rule's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookParams {
    /// A cell qualifies if `pix >= th`; at least 1.
    pub th: i32,
    /// Largest kept bounding-box side, in cells.
    pub d1: u32,
    /// Largest kept polygon, in vertices.
    pub d2: u32,
}

impl CookParams {
    /// F1 (threshold 1000) with the drop rule's D1, D2.
    pub fn f1(d1: u32, d2: u32) -> Self {
        Self { th: TH_F1, d1, d2 }
    }

    /// F1' (threshold 900) with the drop rule's D1, D2.
    pub fn f1_prime(d1: u32, d2: u32) -> Self {
        Self { th: TH_F1_PRIME, d1, d2 }
    }
}

/// Why an image cannot be cooked. Nothing is cooked when one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CookError {
    /// The pixel buffer does not hold `width * height` values.
    #[error("pix holds {got} values, the image of {width} x {height} cells needs {expected}")]
    BufferSize {
        /// Values given.
        got: usize,
        /// `width * height` (saturated).
        expected: usize,
        /// Image width.
        width: usize,
        /// Image height.
        height: usize,
    },
    /// The threshold is below 1: a qualifying cell could have `pix <= 0`, and `Σ v` could be 0.
    #[error("threshold th = {th} must be at least 1 (the centre divides by the sum of pix)")]
    Threshold {
        /// The threshold given.
        th: i32,
    },
    /// The image does not fit int32 world coordinates, or has too many cells for the labels.
    #[error("image of {width} x {height} cells at origin ({x}, {y}): {detail}")]
    ImageTooLarge {
        /// Image width.
        width: usize,
        /// Image height.
        height: usize,
        /// Origin x.
        x: i64,
        /// Origin y.
        y: i64,
        /// What does not fit.
        detail: &'static str,
    },
    /// `core_rows` of a chunked cooking is 0.
    #[error("chunks must have at least one core row")]
    EmptyChunk,
}

/// The 8 directions `d = 0..7` of the trace, `(dx, dy)`, clockwise with y pointing down.
pub const DIRECTIONS: [(i32, i32); 8] = [(0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1)];

/// Cooks one image (SSDB.md §2) in one sequential raster pass.
///
/// `pix` holds `height` rows of `width` cells (local `(x, y)` at `y * width + x`); `origin` is the
/// image's nominal lower-left corner (world = origin + local); `t` its time. The kept observations
/// come back in raster order of each object's first cell, with `id = 0` (number them with
/// [`crate::assign_ids`]).
///
/// # Errors
/// A buffer of the wrong size, `th < 1`, or an image whose world coordinates do not fit int32.
pub fn cook_image(
    pix: &[i32],
    width: usize,
    height: usize,
    origin: (i64, i64),
    t: i64,
    params: CookParams,
) -> Result<Vec<Observation>, CookError> {
    check(pix, width, height, origin, params)?;
    let region = Region { pix, width, y0: 0, y1: height, th: params.th };
    let found = cook_region(&region, &Target { core: 0..height, origin, t, params });
    Ok(found.into_iter().map(|f| f.obs).collect())
}

/// Cooks one image as [`cook_image`] does, in parallel over row chunks (rayon): each chunk's core
/// rows are cooked with `d1` rows of overlap on each side and keep the objects whose centre row
/// is in the core. Equal to [`cook_image`].
///
/// # Errors
/// As [`cook_image`].
pub fn cook_image_parallel(
    pix: &[i32],
    width: usize,
    height: usize,
    origin: (i64, i64),
    t: i64,
    params: CookParams,
) -> Result<Vec<Observation>, CookError> {
    let threads = rayon::current_num_threads().max(1);
    // Cores of at least 8 D1 rows keep the re-scanned overlap under a quarter; about four
    // chunks per thread balance the load.
    let core = (params.d1 as usize).saturating_mul(8).max(height.div_ceil(4 * threads)).max(64);
    cook_image_chunked(pix, width, height, origin, t, params, core)
}

/// [`cook_image_parallel`] with chunks of `core_rows` core rows (the last one may be shorter).
///
/// # Errors
/// As [`cook_image`], and `core_rows == 0`.
pub fn cook_image_chunked(
    pix: &[i32],
    width: usize,
    height: usize,
    origin: (i64, i64),
    t: i64,
    params: CookParams,
    core_rows: usize,
) -> Result<Vec<Observation>, CookError> {
    check(pix, width, height, origin, params)?;
    if core_rows == 0 {
        return Err(CookError::EmptyChunk);
    }
    let d1 = params.d1 as usize;
    let chunks = height.div_ceil(core_rows);
    let mut found: Vec<Found> = (0..chunks)
        .into_par_iter()
        .flat_map_iter(|k| {
            let c0 = k * core_rows;
            let c1 = (c0 + core_rows).min(height);
            let region =
                Region { pix, width, y0: c0.saturating_sub(d1), y1: c1.saturating_add(d1).min(height), th: params.th };
            cook_region(&region, &Target { core: c0..c1, origin, t, params })
        })
        .collect();
    found.sort_unstable_by_key(|f| f.first);
    Ok(found.into_iter().map(|f| f.obs).collect())
}

fn check(pix: &[i32], width: usize, height: usize, origin: (i64, i64), params: CookParams) -> Result<(), CookError> {
    let too_large = |detail| Err(CookError::ImageTooLarge { width, height, x: origin.0, y: origin.1, detail });
    let cells = width.checked_mul(height);
    if cells != Some(pix.len()) {
        return Err(CookError::BufferSize { got: pix.len(), expected: cells.unwrap_or(usize::MAX), width, height });
    }
    if params.th < 1 {
        return Err(CookError::Threshold { th: params.th });
    }
    // Local coordinates and run labels are u32, and Σ v over fewer than 2^32 cells of at most
    // i32::MAX fits i64.
    if u32::try_from(pix.len()).is_err() {
        return too_large("more than 2^32 - 1 cells");
    }
    let world_fits = |o: i64, n: usize| {
        i32::try_from(o).is_ok()
            && i64::try_from(n).ok().and_then(|n| o.checked_add(n)).is_some_and(|e| i32::try_from(e - 1).is_ok())
    };
    if !world_fits(origin.0, width) || !world_fits(origin.1, height) {
        return too_large("world coordinates do not fit int32");
    }
    Ok(())
}

/// The rows `[y0, y1)` of an image that one cooking sees; cells outside are not in any object.
struct Region<'a> {
    pix: &'a [i32],
    width: usize,
    y0: usize,
    y1: usize,
    th: i32,
}

impl Region<'_> {
    #[inline]
    fn inside(&self, x: i64, y: i64) -> bool {
        x >= 0
            && y >= self.y0 as i64
            && (x as usize) < self.width
            && (y as usize) < self.y1
            && self.pix[y as usize * self.width + x as usize] >= self.th
    }

    fn row(&self, y: usize) -> &[i32] {
        &self.pix[y * self.width..(y + 1) * self.width]
    }
}

/// A horizontal run of qualifying cells `[x0, x1]` of row `y`, with a label of its object.
#[derive(Debug, Clone, Copy)]
struct Run {
    y: u32,
    x0: u32,
    x1: u32,
    label: u32,
}

/// What a label accumulates; valid at roots after merging.
#[derive(Debug, Clone, Copy)]
struct Acc {
    sum_v: i128,
    sum_vx: i128,
    sum_vy: i128,
    xmin: u32,
    ymin: u32,
    xmax: u32,
    ymax: u32,
    /// First cell in raster order, `(y, x)`.
    first: (u32, u32),
    /// Smallest x, then smallest y: `(x, y)`; the trace's start.
    left: (u32, u32),
}

impl Acc {
    fn merge(&mut self, o: &Acc) {
        self.sum_v += o.sum_v;
        self.sum_vx += o.sum_vx;
        self.sum_vy += o.sum_vy;
        self.xmin = self.xmin.min(o.xmin);
        self.ymin = self.ymin.min(o.ymin);
        self.xmax = self.xmax.max(o.xmax);
        self.ymax = self.ymax.max(o.ymax);
        self.first = self.first.min(o.first);
        self.left = self.left.min(o.left);
    }
}

/// Union-find over labels; the root of a set is its lowest label.
struct Labels {
    parent: Vec<u32>,
    acc: Vec<Acc>,
}

impl Labels {
    fn find(&mut self, mut l: u32) -> u32 {
        while self.parent[l as usize] != l {
            let p = self.parent[l as usize];
            self.parent[l as usize] = self.parent[p as usize];
            l = p;
        }
        l
    }

    /// Merges the sets of `a` and `b` (roots) into the lower one; returns it.
    fn union(&mut self, a: u32, b: u32) -> u32 {
        if a == b {
            return a;
        }
        let (lo, hi) = if a < b { (a, b) } else { (b, a) };
        self.parent[hi as usize] = lo;
        let h = self.acc[hi as usize];
        self.acc[lo as usize].merge(&h);
        lo
    }
}

/// What one cooking of a region produces: the kept objects' centre rows `core` (local), the
/// image's nominal corner and time, the parameters.
struct Target {
    core: std::ops::Range<usize>,
    origin: (i64, i64),
    t: i64,
    params: CookParams,
}

/// An observation with its first cell `(y, x)` (local), the order of ids.
struct Found {
    first: (u32, u32),
    obs: Observation,
}

/// The first `x >= from` with `row[x] >= th`, or `row.len()`. Skips background 16 cells at a
/// time with a branch-free test the compiler vectorises.
#[inline]
fn next_qualifying(row: &[i32], from: usize, th: i32) -> usize {
    const LANES: usize = 16;
    let mut x = from;
    while x + LANES <= row.len() {
        let any = row[x..x + LANES].iter().fold(false, |a, &p| a | (p >= th));
        if any {
            break;
        }
        x += LANES;
    }
    while x < row.len() && row[x] < th {
        x += 1;
    }
    x
}

/// Cooks the rows of `region`, keeping the objects whose local centre row is in `target.core`.
fn cook_region(region: &Region<'_>, target: &Target) -> Vec<Found> {
    let th = region.th;
    let mut runs: Vec<Run> = Vec::new();
    let mut labels = Labels { parent: Vec::new(), acc: Vec::new() };
    let mut prev = 0..0; // the previous row's runs in `runs`
    for y in region.y0..region.y1 {
        let row = region.row(y);
        let start = runs.len();
        let mut j = prev.start; // first previous run that may touch the current one
        let mut x = next_qualifying(row, 0, th);
        while x < row.len() {
            let a = x;
            let (mut sv, mut svx) = (0i128, 0i128);
            while x < row.len() && row[x] >= th {
                let v = i128::from(row[x]);
                sv += v;
                svx += v * x as i128;
                x += 1;
            }
            let b = x - 1;
            let (a32, b32, y32) = (a as u32, b as u32, y as u32);
            // Previous-row runs touching [a-1, b+1] (8-connectivity).
            while j < prev.end && (runs[j].x1 as usize) + 1 < a {
                j += 1;
            }
            let mut label: Option<u32> = None;
            let mut k = j;
            while k < prev.end && (runs[k].x0 as usize) <= b + 1 {
                let r = labels.find(runs[k].label);
                label = Some(match label {
                    None => r,
                    Some(l) => labels.union(l, r),
                });
                k += 1;
            }
            let acc = Acc {
                sum_v: sv,
                sum_vx: svx,
                sum_vy: sv * y as i128,
                xmin: a32,
                ymin: y32,
                xmax: b32,
                ymax: y32,
                first: (y32, a32),
                left: (a32, y32),
            };
            let label = match label {
                Some(l) => {
                    labels.acc[l as usize].merge(&acc);
                    l
                }
                None => {
                    let l = labels.parent.len() as u32;
                    labels.parent.push(l);
                    labels.acc.push(acc);
                    l
                }
            };
            runs.push(Run { y: y32, x0: a32, x1: b32, label });
            x = next_qualifying(row, x, th);
        }
        prev = start..runs.len();
    }
    finish(region, &runs, &mut labels, target)
}

/// Applies the drop rule to every component, traces and measures the kept ones.
fn finish(region: &Region<'_>, runs: &[Run], labels: &mut Labels, target: &Target) -> Vec<Found> {
    let Target { core, origin, t, params: p } = target;
    let (origin, t) = (*origin, *t);
    let d1 = u64::from(p.d1);
    let mut found: Vec<Found> = Vec::new();
    // Output index + 1 of each kept root label; 0: not kept.
    let mut kept = vec![0u32; labels.parent.len()];
    let mut centroids: Vec<(f64, f64)> = Vec::new();
    for l in 0..labels.parent.len() as u32 {
        if labels.parent[l as usize] != l {
            continue;
        }
        let a = labels.acc[l as usize];
        if u64::from(a.xmax - a.xmin) + 1 > d1 || u64::from(a.ymax - a.ymin) + 1 > d1 {
            continue;
        }
        // Σ v > 0 (th >= 1) and coordinates >= 0: integer division is the floor.
        let cx = a.sum_vx / a.sum_v;
        let cy = a.sum_vy / a.sum_v;
        if !core.contains(&(cy as usize)) {
            continue;
        }
        let Some(polygon) = moore_trace(region, a.left, p.d2 as usize) else {
            continue;
        };
        let wx = |x: i64| (origin.0 + x) as i32; // fits: checked on entry
        let wy = |y: i64| (origin.1 + y) as i32;
        let sum_v = a.sum_v as i64; // < 2^32 cells of at most i32::MAX: fits (checked on entry)
        found.push(Found {
            first: a.first,
            obs: Observation {
                id: 0,
                t,
                cycle: cycle_of(t),
                cx: wx(cx as i64),
                cy: wy(cy as i64),
                pixel_sum: sum_v,
                avg_dist: 0.0,
                bbox: [wx(a.xmin.into()), wy(a.ymin.into()), wx(a.xmax.into()), wy(a.ymax.into())],
                polygon: polygon.iter().map(|&(x, y)| [wx(x.into()), wy(y.into())]).collect(),
            },
        });
        centroids.push((a.sum_vx as f64 / a.sum_v as f64, a.sum_vy as f64 / a.sum_v as f64));
        kept[l as usize] = found.len() as u32;
    }
    if found.is_empty() {
        return found;
    }
    // avgDist: Σ v·|(x,y) - centroid| in raster order of the cells.
    let mut dist = vec![0f64; found.len()];
    for r in runs {
        let root = labels.find(r.label);
        let i = kept[root as usize];
        if i == 0 {
            continue;
        }
        let (mx, my) = centroids[i as usize - 1];
        let row = region.row(r.y as usize);
        let dy = f64::from(r.y) - my;
        let mut s = dist[i as usize - 1];
        for x in r.x0..=r.x1 {
            let dx = f64::from(x) - mx;
            s += f64::from(row[x as usize]) * (dx * dx + dy * dy).sqrt();
        }
        dist[i as usize - 1] = s;
    }
    for (f, d) in found.iter_mut().zip(dist) {
        f.obs.avg_dist = d / f.obs.pixel_sum as f64;
    }
    found
}

/// The Moore-neighbour trace of the object holding `start` (its cell with the smallest x, then
/// the smallest y), as local `(x, y)` cells; `None` once it has more than `cap` vertices.
fn moore_trace(region: &Region<'_>, start: (u32, u32), cap: usize) -> Option<Vec<(u32, u32)>> {
    let s0 = (i64::from(start.0), i64::from(start.1));
    // From a cell entered by a step in direction d, the first object cell among e, e+1, ..., e+7
    // with e = d-1 (even d) or d-2 (odd d).
    let step = |c: (i64, i64), d: usize| -> Option<(usize, (i64, i64))> {
        let e = if d.is_multiple_of(2) { d + 7 } else { d + 6 };
        (0..8).map(|i| (e + i) % 8).find_map(|dir| {
            let (dx, dy) = DIRECTIONS[dir];
            let n = (c.0 + i64::from(dx), c.1 + i64::from(dy));
            region.inside(n.0, n.1).then_some((dir, n))
        })
    };
    let cell = |c: (i64, i64)| (c.0 as u32, c.1 as u32);
    let mut b = vec![start];
    if b.len() > cap {
        return None;
    }
    let Some((first_dir, c1)) = step(s0, 7) else {
        return Some(b); // a 1-cell object
    };
    let (mut d, mut c) = (first_dir, c1);
    // A trace of an object visits each (cell, direction) state at most once before it stops;
    // the bound only guards callers that pass a start cell that is not an object's leftmost.
    let limit = 8 * region.width * (region.y1 - region.y0) + 16;
    for _ in 0..limit {
        if c == s0 && step(s0, d).is_some_and(|(nd, _)| nd == first_dir) {
            return Some(b);
        }
        b.push(cell(c));
        if b.len() > cap {
            return None;
        }
        // `c` was entered from an object cell, so a next step exists.
        let (nd, n) = step(c, d)?;
        d = nd;
        c = n;
    }
    None
}

/// The Moore-neighbour trace (SSDB.md §2) of the 8-connected object of the `width`-wide image
/// `pix` (cells with `pix >= th`) whose leftmost-then-topmost cell is `start = (x, y)` (local);
/// `None` once the trace has more than `cap` vertices, or when `start` is not a qualifying cell
/// of the image. For tests and calibration (vertex counts before the drop rule).
pub fn trace_object(pix: &[i32], width: usize, th: i32, start: (u32, u32), cap: usize) -> Option<Vec<(u32, u32)>> {
    let height = pix.len().checked_div(width).unwrap_or(0);
    let region = Region { pix, width, y0: 0, y1: height, th };
    if !region.inside(i64::from(start.0), i64::from(start.1)) {
        return None;
    }
    moore_trace(&region, start, cap)
}
