//! The TileDB paper's Figure 12 for the sparse AIS-like array (issue 4), the sparse twin of
//! benches/fragments.rs: N AIS-like points written as one fragment, then 10, 100 and 1000 sparse
//! fragments of 1,000 cells each (half updates of existing points with new values, half new
//! points); the mean time of random box reads after each step and after consolidation + vacuum;
//! consolidation time beside the initial load time.
//!
//! The data follows bench/ais.py (the peer suite's AIS-like generator): int64 dims x in
//! [0, 360e6) and y in [0, 180e6) (millionths of a degree), space tiles 10M x 10M, data tiles of
//! 10,000 cells, seven int64 attributes (sog, cog, heading, rot, status, voyage_id, mmsi);
//! points from a mixture of Zipf-weighted Gaussian harbours (45%), random-walk coastlines /
//! shipping lanes (35%) and the open ocean (20%), coordinates distinct. The schema does not allow
//! duplicates, so the newest fragment wins. No filters (like the dense bench and the suite's
//! `tessera` engine); `--zstd` gives attributes zstd-3 and coordinates delta + zstd-3 (`tessera+z`).
//!
//! Reads: `--reads` fixed square boxes, each centred on a random base point and sized (binary
//! search) to hold about 10K base points, so most lie in harbours and along coasts as the data
//! does; all attributes, unordered layout; the same boxes at every step. Before the timed pass
//! of every step, an untimed pass checks every box against a reference kept by the bench (the
//! base points of the box with every later update applied, newest last); after consolidation
//! the results must also equal, as sets of cells with all their values, those read before it,
//! and the consolidated reads are paired with reads of the same cells written at once as one
//! fragment of a fresh array.
//!
//! `cargo bench -p tessera --bench fragments_sparse -- [--points N] [--reads N] [--passes P]
//! [--zstd] [--config key=value]...` (default 10,000,000 points, 100 reads timed 4 times each,
//! the first read after each step's open timed apart, as it builds the update index; the engine's default
//! configuration; the header prints the tile cache size, which decides whether the warm reads of
//! the many small fragments' tiles touch storage at all, e.g. `--config sm.tile_cache_size=0`).
//! `FRAGMENT_STEPS=10,100` chooses the steps; `FRAGMENT_KEEP=1` stops before consolidation and
//! keeps the array for profiling.
#![allow(missing_docs, clippy::unwrap_used, clippy::panic)]

use std::collections::{HashMap, HashSet};
use std::f64::consts::TAU;
use std::time::{Duration, Instant};

use tessera::*;

const X_MAX: i64 = 360_000_000; // exclusive
const Y_MAX: i64 = 180_000_000;
const DEG: f64 = 1e6;
const ATTRS: [&str; 7] = ["sog", "cog", "heading", "rot", "status", "voyage_id", "mmsi"];
const PER_FRAGMENT: usize = 1000;
const BOX_POINTS: usize = 10_000;
const N_SHIPS: i64 = 60_000;

/// x, y and the seven attributes of one cell.
type Row = [i64; 9];
type Cells = HashMap<(i64, i64), [i64; 7]>;
/// Inclusive box: x0, x1, y0, y1.
type BoxXY = (i64, i64, i64, i64);
/// A point of the generator, in coordinate units.
type Pt = (f64, f64);

mod common;
use common::Rng;

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Index of the bucket of `u` in [0, 1) given cumulative weights.
fn pick(cum: &[f64], u: f64) -> usize {
    let total = cum[cum.len() - 1];
    cum.partition_point(|&c| c <= u * total).min(cum.len() - 1)
}

/// The AIS-like point generator of bench/ais.py: harbours on coastlines, coastlines, ocean.
struct Ais {
    harbours: Vec<(f64, f64)>,
    harbour_cum: Vec<f64>,
    harbour_sigma: Vec<f64>,
    /// Coastline segments: start, end, perpendicular spread.
    segs: Vec<(Pt, Pt, f64)>,
    seg_cum: Vec<f64>,
}

impl Ais {
    fn new(rng: &mut Rng) -> Self {
        let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
        for _ in 0..60 {
            let m = 20 + rng.below(60) as usize;
            let mut p = (rng.uniform(5.0, 355.0) * DEG, rng.uniform(10.0, 170.0) * DEG);
            let mut heading = rng.uniform(0.0, TAU);
            let mut line = vec![p];
            for _ in 0..m {
                heading += 0.35 * rng.normal();
                let step = rng.uniform(0.5, 3.0) * DEG;
                p = (p.0 + heading.cos() * step, p.1 + heading.sin() * step);
                line.push((p.0.clamp(0.0, (X_MAX - 1) as f64), p.1.clamp(0.0, (Y_MAX - 1) as f64)));
            }
            lines.push(line);
        }
        let (mut segs, mut seg_cum, mut total) = (Vec::new(), Vec::new(), 0.0);
        for line in &lines {
            let sigma = (rng.uniform(0.02f64.ln(), 0.3f64.ln())).exp() * DEG;
            for w in line.windows(2) {
                total += (w[1].0 - w[0].0).hypot(w[1].1 - w[0].1);
                segs.push((w[0], w[1], sigma));
                seg_cum.push(total);
            }
        }
        // 300 harbours on coastline vertices, Zipf-weighted, the first one the busiest (~15%).
        let harbours: Vec<(f64, f64)> = (0..300)
            .map(|_| {
                let l = &lines[rng.below(lines.len() as u64) as usize];
                l[rng.below(l.len() as u64) as usize]
            })
            .collect();
        let mut w: Vec<f64> = (1..=300).map(|k| 1.0 / f64::from(k).powf(1.1)).collect();
        w[0] *= 1.6;
        let harbour_cum = w
            .iter()
            .scan(0.0, |s, &x| {
                *s += x;
                Some(*s)
            })
            .collect();
        let mut harbour_sigma: Vec<f64> =
            (0..300).map(|_| rng.uniform(0.005f64.ln(), 0.1f64.ln()).exp() * DEG).collect();
        harbour_sigma[0] = 0.1 * DEG;
        Self { harbours, harbour_cum, harbour_sigma, segs, seg_cum }
    }

    /// A point inside the domain and whether it lies in a harbour.
    fn point(&self, rng: &mut Rng) -> (i64, i64, bool) {
        loop {
            let u = rng.unit();
            let (x, y) = if u < 0.45 {
                let k = pick(&self.harbour_cum, rng.unit());
                let (c, s) = (self.harbours[k], self.harbour_sigma[k]);
                (c.0 + rng.normal() * s, c.1 + rng.normal() * s)
            } else if u < 0.80 {
                let (a, b, sigma) = self.segs[pick(&self.seg_cum, rng.unit())];
                let (dx, dy) = (b.0 - a.0, b.1 - a.1);
                let len = dx.hypot(dy).max(1.0);
                let (t, off) = (rng.unit(), rng.normal() * sigma);
                (a.0 + t * dx - off * dy / len, a.1 + t * dy + off * dx / len)
            } else {
                (rng.unit() * X_MAX as f64, rng.unit() * Y_MAX as f64)
            };
            let (x, y) = (x.round() as i64, y.round() as i64);
            if (0..X_MAX).contains(&x) && (0..Y_MAX).contains(&y) {
                return (x, y, u < 0.45);
            }
        }
    }
}

/// Plausible attribute values (as in bench/ais.py): slow and moored in harbours, under way at sea.
fn ais_attrs(rng: &mut Rng, harbour: bool) -> [i64; 7] {
    let sog = if harbour { (8.0 * rng.normal()).abs() } else { 140.0 + 40.0 * rng.normal() }.clamp(0.0, 1022.0);
    let cog = rng.below(3600) as i64;
    let heading = if rng.unit() < 0.1 { 511 } else { (cog / 10 + rng.below(7) as i64 - 3).rem_euclid(360) };
    let rot = if rng.unit() < 0.7 { 0 } else { (20.0 * rng.normal()).clamp(-127.0, 127.0) as i64 };
    let status = match (harbour, rng.unit()) {
        (false, u) if u < 0.9 => 0,
        (false, _) => 8,
        (true, u) if u < 0.6 => 5,
        (true, _) => 1,
    };
    let zipf = ((1.0 - rng.unit()).powf(-1.0 / 0.3)).min(N_SHIPS as f64) as i64; // P(k) ~ k^-1.3
    let ship = (zipf - 1 + rng.below(N_SHIPS as u64) as i64 / 4) % N_SHIPS;
    let voyage = ship * 64 + rng.below(10) as i64 * 4 + rng.below(4) as i64;
    [sog as i64, cog, heading, rot, status, voyage, 200_000_000 + (ship * 9_587) % 575_000_000]
}

/// The attributes of a base point: a function of its coordinates, so the reference needs no copy.
fn base_attrs(x: i64, y: i64, harbour: bool) -> [i64; 7] {
    let mut rng = Rng(splitmix((x as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F) ^ y as u64) | 1);
    ais_attrs(&mut rng, harbour)
}

/// Base points as sorted keys ((x * Y_MAX + y) << 1 | harbour): sorted by (x, y).
fn pack(x: i64, y: i64, harbour: bool) -> u64 {
    (((x * Y_MAX + y) as u64) << 1) | u64::from(harbour)
}

fn unpack(k: u64) -> (i64, i64, bool) {
    let xy = (k >> 1) as i64;
    (xy / Y_MAX, xy % Y_MAX, k & 1 == 1)
}

fn is_base(keys: &[u64], x: i64, y: i64) -> bool {
    let xy = (x * Y_MAX + y) as u64;
    keys.binary_search_by_key(&xy, |k| k >> 1).is_ok()
}

/// `n` distinct AIS-like points, sorted.
fn base_points(gen: &Ais, rng: &mut Rng, n: usize) -> Vec<u64> {
    let mut keys: Vec<u64> = Vec::with_capacity(n + n / 16 + 1000);
    while keys.len() < n {
        let want = (n - keys.len()) * 103 / 100 + 1000;
        keys.extend((0..want).map(|_| {
            let (x, y, h) = gen.point(rng);
            pack(x, y, h)
        }));
        keys.sort_unstable();
        keys.dedup_by_key(|k| *k >> 1);
    }
    // Exactly n: drop the excess at random positions.
    let mut drop = vec![false; keys.len()];
    let mut excess = keys.len() - n;
    while excess > 0 {
        let i = rng.below(keys.len() as u64) as usize;
        if !drop[i] {
            drop[i] = true;
            excess -= 1;
        }
    }
    let mut i = 0;
    keys.retain(|_| {
        i += 1;
        !drop[i - 1]
    });
    keys
}

/// The square box centred at (cx, cy) with the smallest half-width holding at least `target`
/// base points (clipped to the domain).
fn box_for(keys: &[u64], cx: i64, cy: i64, target: usize) -> BoxXY {
    let bx = |h: i64| ((cx - h).max(0), (cx + h).min(X_MAX - 1), (cy - h).max(0), (cy + h).min(Y_MAX - 1));
    let count = |h: i64| {
        let b = bx(h);
        let lo = keys.partition_point(|&k| (k >> 1) < (b.0 * Y_MAX) as u64);
        let hi = keys.partition_point(|&k| (k >> 1) < ((b.1 + 1) * Y_MAX) as u64);
        keys[lo..hi].iter().filter(|&&k| (b.2..=b.3).contains(&(unpack(k).1))).count()
    };
    let mut hi = 1000;
    while hi < X_MAX && count(hi) < target {
        hi *= 2;
    }
    let mut lo = hi / 2;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if count(mid) >= target {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    bx(hi)
}

fn inside(b: &BoxXY, x: i64, y: i64) -> bool {
    (b.0..=b.1).contains(&x) && (b.2..=b.3).contains(&y)
}

fn arg(name: &str, default: usize) -> usize {
    let v: Vec<String> = std::env::args().collect();
    v.iter().position(|a| a == name).and_then(|i| v.get(i + 1)).and_then(|s| s.parse().ok()).unwrap_or(default)
}

fn ranges(b: &BoxXY) -> Vec<Vec<DimRange>> {
    vec![vec![DimRange::Int(i128::from(b.0), i128::from(b.1))], vec![DimRange::Int(i128::from(b.2), i128::from(b.3))]]
}

fn query(r: &Array, ranges: &[Vec<DimRange>]) -> ReadResult {
    r.sparse_query(ranges, &[], Layout::Unordered).unwrap().read_all().unwrap()
}

/// One step's reads, each alternating with the same read of the one-fragment snapshot `base`
/// (which goes first alternates too), so that the ratio compares like with like on a busy
/// machine: mean ms of `now` and its ratio to the mean of `base`, median ms of `now` and the
/// median of the pairs' ratios, mean cells of `now` and of `base`.
fn paired_reads(base: &Array, now: &Array, boxes: &[Vec<Vec<DimRange>>], per_pass: usize) -> [f64; 6] {
    let (mut tb, mut tn, mut cb, mut cn) = (Vec::new(), Vec::new(), 0u64, 0u64);
    let one = |r: &Array, b: &Vec<Vec<DimRange>>, ts: &mut Vec<f64>| -> u64 {
        let t = Instant::now();
        let res = query(r, b);
        ts.push(t.elapsed().as_secs_f64() * 1e3);
        res.cells
    };
    for (k, b) in boxes.iter().enumerate() {
        // Which goes first alternates between neighbours and between passes (`per_pass` reads
        // each), so that every read is first in half of its passes: the second read of a read
        // finds it in the CPU caches, and reads differ in cost.
        if (k + k / per_pass.max(1)).is_multiple_of(2) {
            cb += one(base, b, &mut tb);
            cn += one(now, b, &mut tn);
        } else {
            cn += one(now, b, &mut tn);
            cb += one(base, b, &mut tb);
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let (mb, mn) = (mean(&tb), mean(&tn));
    // The median of the pairs' own ratios: robust to a few slow reads on either side.
    let mut ratios: Vec<f64> = tn.iter().zip(&tb).map(|(n, b)| n / b).collect();
    let (dn, rd) = (median(&mut tn), median(&mut ratios));
    let n = boxes.len() as f64;
    [mn, mn / mb, dn, rd, cn as f64 / n, cb as f64 / n]
}

/// Prints one step's line.
fn report(label: &str, p: [f64; 6], extra: &str) {
    let [mn, rm, dn, rd, cn, cb] = p;
    println!(
        "{label:<17} {mn:>8.3} ms per read ({rm:.2}x), median {dn:.3} ms (median ratio {rd:.2}x)   [{cn:.0} cells per read, \
         {cb:.0} in one fragment{extra}]"
    );
}

/// A result as rows, sorted (a set of cells with all their values).
fn rows(res: &ReadResult) -> Vec<Row> {
    let names: Vec<&str> = res.attrs.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, [&["x", "y"][..], &ATTRS[..]].concat(), "result columns");
    let cols: Vec<Vec<i64>> = res
        .attrs
        .iter()
        .map(|a| a.data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect())
        .collect();
    assert!(cols.iter().all(|c| c.len() == res.cells as usize), "column lengths");
    let mut out: Vec<Row> = (0..res.cells as usize).map(|i| std::array::from_fn(|c| cols[c][i])).collect();
    out.sort_unstable();
    out
}

fn sorted(cells: &Cells) -> Vec<Row> {
    let mut out: Vec<Row> = cells
        .iter()
        .map(|(&(x, y), v)| {
            let mut r = [x, y, 0, 0, 0, 0, 0, 0, 0];
            r[2..].copy_from_slice(v);
            r
        })
        .collect();
    out.sort_unstable();
    out
}

fn same(what: &str, b: usize, got: &[Row], want: &[Row]) {
    if got == want {
        return;
    }
    let g: HashSet<&Row> = got.iter().collect();
    let w: HashSet<&Row> = want.iter().collect();
    let extra: Vec<_> = g.difference(&w).take(3).collect();
    let missing: Vec<_> = w.difference(&g).take(3).collect();
    panic!(
        "WRONG RESULT ({what}), box {b}: {} cells, expected {}; e.g. unexpected {extra:?}, missing {missing:?}",
        got.len(),
        want.len()
    );
}

/// Reads every box (untimed) and checks it against the reference; returns the results.
fn check(r: &Array, boxes: &[Vec<Vec<DimRange>>], refs: &[Cells]) -> Vec<Vec<Row>> {
    boxes
        .iter()
        .zip(refs)
        .enumerate()
        .map(|(b, (rg, want))| {
            let got = rows(&query(r, rg));
            same("against the reference", b, &got, &sorted(want));
            got
        })
        .collect()
}

fn main() {
    let (n, nreads) = (arg("--points", 10_000_000), arg("--reads", 100));
    let passes = arg("--passes", 4).max(1);
    let zstd = std::env::args().any(|a| a == "--zstd");
    let dir = std::env::temp_dir().join("tessera-bench-fragments-sparse");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let uri = dir.join("a");
    let mut config = Config::new();
    for w in std::env::args().collect::<Vec<_>>().windows(2).filter(|w| w[0] == "--config") {
        let (k, v) = w[1].split_once('=').unwrap_or_else(|| panic!("--config {}: expected key=value", w[1]));
        config.set(k, v).unwrap();
    }
    let ctx = Context::new(config).unwrap();
    let pipeline = |f: Vec<Filter>| if zstd { FilterPipeline::new(f) } else { FilterPipeline::new(vec![]) };
    let mut b = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, i128::from(X_MAX) - 1), 10_000_000))
        .dim(Dimension::new("y", Datatype::Int64, (0, i128::from(Y_MAX) - 1), 10_000_000))
        .capacity(10_000)
        .allows_duplicates(false);
    for name in ATTRS {
        let mut a = Attribute::new(name, Datatype::Int64);
        a.filters = pipeline(vec![Filter::Zstd { level: 3 }]);
        b = b.attr(a);
    }
    let mut schema = b.build().unwrap();
    for d in &mut schema.dims {
        d.filters = pipeline(vec![Filter::Delta, Filter::Zstd { level: 3 }]);
    }
    Array::create(&ctx, &uri, &schema).unwrap();

    // The base data: one write of n points in random order.
    let mut rng = Rng(20_160_901);
    let t = Instant::now();
    let gen = Ais::new(&mut rng);
    let keys = base_points(&gen, &mut rng, n);
    let mut order: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let (mut xs, mut ys) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut cols: Vec<Vec<i64>> = (0..7).map(|_| Vec::with_capacity(n)).collect();
    for &i in &order {
        let (x, y, h) = unpack(keys[i as usize]);
        xs.push(x);
        ys.push(y);
        for (c, v) in cols.iter_mut().zip(base_attrs(x, y, h)) {
            c.push(v);
        }
    }
    drop(order);
    let generated = t.elapsed();
    let inputs: Vec<AttrInput<'_>> =
        ATTRS.iter().zip(&cols).map(|(nm, v)| AttrInput::fixed(nm, bytemuck::cast_slice(v))).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let t = Instant::now();
    w.write_sparse(
        &[
            CoordInput { name: "x", data: bytemuck::cast_slice(&xs) },
            CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
        ],
        &inputs,
    )
    .unwrap();
    let load = t.elapsed();
    drop(inputs);
    drop((cols, xs, ys, w));

    // The boxes, centred on random base points, and their reference cells.
    let t = Instant::now();
    let mut boxes: Vec<BoxXY> = Vec::with_capacity(nreads);
    let mut refs: Vec<Cells> = Vec::with_capacity(nreads);
    for _ in 0..nreads {
        let (cx, cy, _) = unpack(keys[rng.below(n as u64) as usize]);
        let b = box_for(&keys, cx, cy, BOX_POINTS);
        let lo = keys.partition_point(|&k| (k >> 1) < (b.0 * Y_MAX) as u64);
        let hi = keys.partition_point(|&k| (k >> 1) < ((b.1 + 1) * Y_MAX) as u64);
        let cells: Cells = keys[lo..hi]
            .iter()
            .map(|&k| unpack(k))
            .filter(|&(x, y, _)| inside(&b, x, y))
            .map(|(x, y, h)| ((x, y), base_attrs(x, y, h)))
            .collect();
        boxes.push(b);
        refs.push(cells);
    }
    let picked = t.elapsed();
    let mut sides: Vec<f64> = boxes.iter().map(|b| (b.1 - b.0 + 1) as f64 / DEG).collect();
    sides.sort_by(f64::total_cmp);
    let base_cells = refs.iter().map(HashMap::len).sum::<usize>() as f64 / nreads as f64;
    let qs: Vec<Vec<Vec<DimRange>>> = boxes.iter().map(ranges).collect();

    println!(
        "# fragments_sparse: {n} AIS-like points (bench/ais.py's mixture), int64 x, y + 7 int64 attributes, {}, \
         data tiles of 10,000 cells, no duplicates (newest wins); tile cache {} bytes; generated in {:.1} s",
        if zstd { "attributes zstd-3, coordinates delta + zstd-3" } else { "no filters" },
        ctx.config().get("sm.tile_cache_size").unwrap_or("?"),
        generated.as_secs_f64()
    );
    println!(
        "# {nreads} reads per step: fixed square boxes centred on random base points, each holding ~{BOX_POINTS} \
         base points (mean {base_cells:.0}; side {:.4} / {:.4} / {:.4} deg min / median / max; chosen in {:.1} s), \
         all attributes, unordered; every box checked against the bench's reference before each timed pass",
        sides[0],
        sides[sides.len() / 2],
        sides[sides.len() - 1],
        picked.as_secs_f64()
    );
    println!(
        "# each added fragment: {PER_FRAGMENT} cells = {} updates of random existing base points (new values) + {} \
         new AIS-like points (none on an existing point)",
        PER_FRAGMENT / 2,
        PER_FRAGMENT - PER_FRAGMENT / 2
    );
    println!("initial load (one sparse fragment, {n} points): {:.3} s", load.as_secs_f64());
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 1);
    let mut before = check(&r, &qs, &refs); // also warms the page cache
                                            // The one-fragment snapshot every step is compared with (time travel to the load).
    let snapshot = Array::open_at(&ctx, &uri, Mode::Read, Some(r.fragments()[0].name.t1)).unwrap();
    // Every box is read `passes` times (in turn), so one slow read weighs less.
    let timed: Vec<_> = (0..passes).flat_map(|_| qs.iter().cloned()).collect();
    report("    1 fragments:", paired_reads(&snapshot, &r, &timed, qs.len()), "");
    drop(r);

    let mut written = 0;
    let (mut updates, mut inserted) = (0usize, HashSet::new());
    let steps: Vec<usize> = match std::env::var("FRAGMENT_STEPS") {
        Ok(v) => v.split(',').filter_map(|x| x.parse().ok()).collect(),
        Err(_) => vec![10, 100, 1000],
    };
    for &target in &steps {
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let mut writes = Duration::ZERO;
        while written < target {
            let mut seen = HashSet::with_capacity(PER_FRAGMENT);
            let mut cells: Vec<Row> = Vec::with_capacity(PER_FRAGMENT);
            while cells.len() < PER_FRAGMENT / 2 {
                let (x, y, h) = unpack(keys[rng.below(n as u64) as usize]);
                if seen.insert((x, y)) {
                    let mut v = ais_attrs(&mut rng, h);
                    v[5] = -1 - written as i64; // voyage_id: the fragment's mark
                    cells.push([x, y, v[0], v[1], v[2], v[3], v[4], v[5], v[6]]);
                }
            }
            updates += cells.len();
            while cells.len() < PER_FRAGMENT {
                let (x, y, h) = gen.point(&mut rng);
                if !is_base(&keys, x, y) && !inserted.contains(&(x, y)) && seen.insert((x, y)) {
                    inserted.insert((x, y));
                    let mut v = ais_attrs(&mut rng, h);
                    v[5] = -1 - written as i64;
                    cells.push([x, y, v[0], v[1], v[2], v[3], v[4], v[5], v[6]]);
                }
            }
            // Newest last: the reference keeps each coordinate's latest values.
            for c in &cells {
                for (b, cells) in boxes.iter().zip(refs.iter_mut()) {
                    if inside(b, c[0], c[1]) {
                        cells.insert((c[0], c[1]), c[2..].try_into().unwrap());
                    }
                }
            }
            let col = |k: usize| -> Vec<i64> { cells.iter().map(|c| c[k]).collect() };
            let (xs, ys) = (col(0), col(1));
            let vals: Vec<Vec<i64>> = (2..9).map(col).collect();
            let inputs: Vec<AttrInput<'_>> =
                ATTRS.iter().zip(&vals).map(|(nm, v)| AttrInput::fixed(nm, bytemuck::cast_slice(v))).collect();
            let t = Instant::now();
            w.write_sparse(
                &[
                    CoordInput { name: "x", data: bytemuck::cast_slice(&xs) },
                    CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
                ],
                &inputs,
            )
            .unwrap();
            writes += t.elapsed();
            written += 1;
        }
        drop(w);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        assert_eq!(r.fragments().len(), 1 + target);
        let t = Instant::now();
        std::hint::black_box(query(&r, &qs[0]));
        let first = t.elapsed();
        before = check(&r, &qs, &refs);
        assert_eq!(snapshot.fragments().len(), 1);
        report(
            &format!("{:>5} fragments:", 1 + target),
            paired_reads(&snapshot, &r, &timed, qs.len()),
            &format!(
                "; {target} fragments of {PER_FRAGMENT} cells written in {:.2} s; first read after opening {:.1} ms",
                writes.as_secs_f64(),
                first.as_secs_f64() * 1e3
            ),
        );
    }
    // Vacuum waits for readers: the snapshot closes here.
    drop(snapshot);
    let changed = refs.iter().map(|c| c.values().filter(|v| v[5] < 0).count()).sum::<usize>();
    println!(
        "# checked: all {nreads} boxes equal the reference at every step; written {updates} updates + {} new points; \
         {changed} cells of the boxes' results come from the added fragments",
        inserted.len()
    );
    if std::env::var_os("FRAGMENT_KEEP").is_some() {
        println!("kept {} (FRAGMENT_KEEP)", uri.display());
        return;
    }
    let t = Instant::now();
    consolidate(&ctx, &uri, &Selection::All).unwrap();
    let cons = t.elapsed();
    vacuum(&ctx, &uri).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 1);
    let after = check(&r, &qs, &refs);
    for (b, (got, want)) in after.iter().zip(&before).enumerate() {
        same("after consolidation against before it", b, got, want);
    }
    // Paired with the same cells written at once as one fragment of a fresh array (the load's
    // snapshot would hold fewer cells).
    let copy = dir.join("copy");
    Array::create(&ctx, &copy, &schema).unwrap();
    let all = r.sparse_query(&[vec![], vec![]], &[], Layout::Global).unwrap().read_all().unwrap();
    let coords: Vec<CoordInput<'_>> =
        all.attrs[..2].iter().map(|a| CoordInput { name: &a.name, data: &a.data }).collect();
    let values: Vec<AttrInput<'_>> = all.attrs[2..].iter().map(|a| AttrInput::fixed(&a.name, &a.data)).collect();
    // Timed: a load of the same cells just after the consolidation (the disk's speed drifts).
    let t = Instant::now();
    let mut w = Array::open(&ctx, &copy, Mode::Write).unwrap().sparse_writer(Layout::Global).unwrap();
    w.submit(&coords, &values).unwrap();
    w.finish().unwrap();
    let reload = t.elapsed();
    drop(all);
    let one = Array::open(&ctx, &copy, Mode::Read).unwrap();
    assert_eq!(one.fragments().len(), 1);
    check(&one, &qs, &refs);
    report(
        "consolidated:",
        paired_reads(&one, &r, &timed, qs.len()),
        "; same cells and values as before consolidation and as the reference in all boxes; \
         paired with the same cells written at once",
    );
    println!(
        "consolidation of {} fragments: {:.3} s ({:.2}x the initial load; {:.2}x a global-order write of the same \
         cells just after it, {:.3} s)",
        1 + written,
        cons.as_secs_f64(),
        cons.as_secs_f64() / load.as_secs_f64(),
        cons.as_secs_f64() / reload.as_secs_f64(),
        reload.as_secs_f64()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
