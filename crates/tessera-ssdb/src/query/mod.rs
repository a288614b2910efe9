//! SS-DB's queries Q1-Q9 on the Tessera store (SSDB.md §4, §5; `docs/ssdb.md`, "Queries"):
//! 15 runs per query (`r = 3i + j`: start point i = 0..4, repetition j = 0..2) for each start
//! set, cold between runs (every file of the store evicted from the OS page cache, a fresh
//! engine `Context` and a fresh open of every array), results as §5's `queries.<set>.runs`.
//!
//! - [`images`]: Q1, Q2, Q3 and Q8/Q9's raw-cell windows (reads of the `images` array).
//! - [`objects`]: Q4-Q9's selections (reads of the `observations` and `groups` arrays).
//! - [`geometry`]: exact integer boxes, segments, polygon regions, hulls.
//! - [`regrid`]: Q3's separable integer weights.
//! - [`cold`]: the page-cache eviction.
//!
//! Q2 stores its observations as `results/<set>/q2_rNN` (an observations array) and Q3 its
//! regridded images as `results/<set>/q3_rNN` (a dense `(t, v, u)` array of the 11 attributes).

pub mod cold;
pub mod geometry;
pub mod images;
pub mod objects;
pub mod regrid;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use serde::Serialize;
use serde_json::{json, Map, Value};
use tessera::{Config as EngineConfig, Context};

use crate::params::{rand, Config, StartSet};
use crate::progress::Progress;
use crate::raw::RawStore;
use geometry::IBox;

/// The folder of the stored query results inside a store.
pub const RESULTS_DIR: &str = "results";
/// Runs per query and start set.
pub const RUNS: u32 = 15;

/// Q1's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Q1Result {
    /// Σ pix.
    pub sum: i64,
    /// Cells.
    pub count: i64,
}

/// Q2's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Q2Result {
    /// Observations.
    pub count: u64,
    /// Σ pixelSum.
    #[serde(rename = "pixelSum")]
    pub pixel_sum: i64,
    /// Sorted-key hash of the observations.
    pub keys_sha256: String,
}

/// Q3's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Q3Result {
    /// sha256 of the per-image output sha256s (hex, time order).
    pub sha256_of_image_shas: String,
}

/// Q4's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Q4Result {
    /// Observations.
    pub count: u64,
    /// Σ pixelSum.
    pub sum: i64,
    /// Sorted-key hash.
    pub keys_sha256: String,
}

/// Q5's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Q5Result {
    /// Observations.
    pub count: u64,
    /// Sorted-key hash.
    pub keys_sha256: String,
}

/// Q6's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Q6Result {
    /// Windows over the threshold.
    pub windows: u64,
    /// sha256 of their lines `"a,b,count\n"` sorted by (a, b).
    pub sha256: String,
}

/// Q7's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Q7Result {
    /// Groups.
    pub count: u64,
    /// Of them, one-member groups.
    pub singletons: u64,
    /// Hash of the group keys.
    pub keys_sha256: String,
}

/// The groups Q8/Q9 select.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupsOut {
    /// Groups.
    pub count: u64,
    /// Hash of the group keys.
    pub keys_sha256: String,
}

/// The windows Q8/Q9 output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WindowsOut {
    /// Non-empty windows.
    pub windows: u64,
    /// sha256 of the headers and pix of the windows.
    pub pix_windows_sha256: String,
}

/// Q8's or Q9's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TrajectoryResult {
    /// The selected groups.
    pub groups: GroupsOut,
    /// Their output.
    pub output: WindowsOut,
}

/// The parameters of one run: §4's `r`, the start point and Q1-Q6's cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunParams {
    /// `r = 3i + j`.
    pub run: u32,
    /// Start point x (world).
    pub x: i64,
    /// Start point y (world).
    pub y: i64,
    /// Cycles of Q1..Q6.
    pub cycles: [i64; 6],
}

/// The cycle of run `r` of query `Qq` (q = 1..6): `floor(rand(100·q + r) · n_cycles)`.
pub fn query_cycle(q: u32, r: u32, n_cycles: u32) -> i64 {
    let seed = i32::try_from(100 * q + r).unwrap_or(i32::MAX);
    // rand < 1, so the product is below n_cycles and its floor fits.
    (rand(seed) * f64::from(n_cycles)).floor() as i64
}

/// The 15 runs of `set` on `config`, in order r.
pub fn runs(config: Config, set: StartSet) -> Vec<RunParams> {
    let points = set.points(config);
    (0..RUNS)
        .map(|r| {
            let (x, y) = points[(r / 3) as usize];
            let cycles = [1, 2, 3, 4, 5, 6].map(|q| query_cycle(q, r, config.cycles()));
            RunParams { run: r, x, y, cycles }
        })
        .collect()
}

/// One query's answer, as the report's JSON.
fn answer<T: Serialize>(v: T) -> Result<Value> {
    Ok(serde_json::to_value(v)?)
}

/// Runs query `q` (1..=9) of run `p` on a freshly opened store; `results` is the start set's
/// folder for Q2's and Q3's arrays.
///
/// # Errors
/// Storage failures.
pub fn run_query(ctx: &Context, dir: &Path, config: Config, q: u32, p: &RunParams, results: &Path) -> Result<Value> {
    let (_, u2, u3) = config.slabs();
    let o = config.objects();
    let c = |q: usize| p.cycles[q - 1];
    match q {
        1..=3 => {
            let store = RawStore::open(ctx, dir, config)?;
            let images = store.images()?;
            match q {
                1 => answer(images::q1(&images, config, c(1))?),
                2 => {
                    answer(images::q2(ctx, &store, &images, config, c(2), &results.join(format!("q2_r{:02}", p.run)))?)
                }
                _ => answer(images::q3(ctx, &images, config, c(3), &results.join(format!("q3_r{:02}", p.run)))?),
            }
        }
        4 => answer(objects::q4(ctx, dir, c(4), &IBox::slab(p.x, p.y, u2))?),
        5 => answer(objects::q5(ctx, dir, c(5), &IBox::slab(p.x, p.y, u2), o.d1)?),
        6 => answer(objects::q6(ctx, dir, c(6), &IBox::slab(p.x, p.y, u2), o.d4, o.d5)?),
        7 => answer(objects::q7(ctx, dir, &IBox::slab(p.x, p.y, u2))?),
        _ => {
            let slab = IBox::slab(p.x, p.y, u3);
            let groups =
                if q == 8 { objects::q8_groups(ctx, dir, &slab)? } else { objects::q9_groups(ctx, dir, &slab)? };
            let store = RawStore::open(ctx, dir, config)?;
            let images = store.images()?;
            let owners = objects::window_owners(&groups);
            let output = images::windows(&store, &images, config, &owners, (p.x, p.y, u3))?;
            answer(TrajectoryResult {
                groups: GroupsOut {
                    count: groups.len() as u64,
                    keys_sha256: crate::keys::groups_sha256(groups.iter().map(crate::Group::key).collect()),
                },
                output,
            })
        }
    }
}

/// Runs Q1-Q9 15 times each for every set in `sets`, cold between runs; returns
/// `(queries, seconds)`: §5's `queries` section (`<set>.runs`) and the per-query totals
/// (`<set>.Q1..Q9` and `<set>.total`, seconds). The stored results of an earlier run of a
/// set (`DIR/results/<set>`) are removed first.
///
/// # Errors
/// Storage failures, a store without images, observations or groups.
pub fn run_all(
    dir: &Path,
    config: Config,
    engine: &EngineConfig,
    sets: &[StartSet],
    progress: &dyn Progress,
) -> Result<(Value, Value)> {
    let results_root = dir.join(RESULTS_DIR);
    let mut queries = Map::new();
    let mut seconds = Map::new();
    for &set in sets {
        let results: PathBuf = results_root.join(set.name());
        if results.exists() {
            std::fs::remove_dir_all(&results).with_context(|| format!("removing {}", results.display()))?;
        }
        std::fs::create_dir_all(&results).with_context(|| format!("creating {}", results.display()))?;
        let mut totals = [Duration::ZERO; 9];
        let mut out_runs = Vec::new();
        progress.begin(&format!("queries {}", set.name()), u64::from(RUNS) * 9);
        for p in runs(config, set) {
            let mut run = Map::new();
            run.insert("run".into(), json!(p.run));
            run.insert("X".into(), json!(p.x));
            run.insert("Y".into(), json!(p.y));
            let cycles: Map<String, Value> = (1..=6).map(|q| (format!("Q{q}"), json!(p.cycles[q - 1]))).collect();
            run.insert("cycles".into(), Value::Object(cycles));
            for q in 1..=9u32 {
                cold::evict_dir(dir).with_context(|| format!("evicting {} from the page cache", dir.display()))?;
                let ctx = Context::new(engine.clone())?;
                let start = Instant::now();
                let v = run_query(&ctx, dir, config, q, &p, &results)
                    .with_context(|| format!("Q{q}, start set {}, run {}", set.name(), p.run))?;
                totals[q as usize - 1] += start.elapsed();
                drop(ctx);
                run.insert(format!("Q{q}"), v);
                progress.advance(1);
            }
            out_runs.push(Value::Object(run));
        }
        progress.end();
        queries.insert(set.name().into(), json!({ "runs": out_runs }));
        let mut s: Map<String, Value> =
            totals.iter().enumerate().map(|(i, d)| (format!("Q{}", i + 1), json!(d.as_secs_f64()))).collect();
        s.insert("total".into(), json!(totals.iter().sum::<Duration>().as_secs_f64()));
        seconds.insert(set.name().into(), Value::Object(s));
    }
    Ok((Value::Object(queries), Value::Object(seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cycles_and_runs_follow_section_4() {
        // rand(100q + r) * n_cycles, floored; r = 3i + j takes start point i.
        for q in 1..=6 {
            for r in 0..RUNS {
                let c = query_cycle(q, r, 8);
                assert_eq!(c, (rand((100 * q + r) as i32) * 8.0).floor() as i64);
                assert!((0..8).contains(&c));
            }
        }
        let rs = runs(Config::Micro, StartSet::Spec);
        assert_eq!(rs.len(), 15);
        assert_eq!((rs[0].x, rs[0].y), (500_080, 500_080));
        assert_eq!((rs[5].x, rs[5].y), (500_107, 499_760));
        assert_eq!((rs[14].x, rs[14].y), (500_107, 499_813));
        assert!(rs.iter().all(|p| p.cycles.iter().all(|&c| c == 0 || c == 1)));
    }
}
