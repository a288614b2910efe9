//! The run procedure of SSDB.md section 5: per cycle, load 20 generated images, cook them (F1)
//! and group the new observations (F2); then F1' over all images for verification; the timings
//! and summaries go to `DIR/report.json`.
//!
//! Then, with step `queries`, Q1-Q9 15 times each per start set, cold between runs
//! ([`crate::query`]).
//!
//! Steps can be run separately (`load`, then `cook,group`, then `queries` on the same folder);
//! the report of an earlier run in the folder is kept and the sections of this run replace its
//! own.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Map, Value};
use tessera::{Config as EngineConfig, Context};

use crate::generator::Generator;
use crate::params::{Config, StartSet, CYCLE, W};
use crate::progress::Progress;
use crate::query::run_all as run_queries;
use crate::raw::{RawLayout, RawStore, IMAGES};
use crate::tiles::{SkyTiles, FILE_SHA256};
use crate::{
    assign_ids, cook_image_parallel, create_groups, create_observations, read_observations, write_observations,
    CookParams, F1Accumulator, GroupWriter, Grouper, KeySorter, ObsBox, Observation, D3, GROUPS, OBSERVATIONS,
};

/// The folder inside the store where a run spills the sorted key runs and the singletons
/// (removed at the end of the run).
pub const SPILL_DIR: &str = "spill.tmp";

/// One step of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// Generate and store the raw images.
    Load,
    /// Cook them (F1; F1' for verification).
    Cook,
    /// Group the observations (F2).
    Group,
    /// Q1-Q9, 15 runs each per start set.
    Queries,
}

impl Step {
    /// Every step, in run order.
    pub const ALL: [Step; 4] = [Step::Load, Step::Cook, Step::Group, Step::Queries];

    /// The step's name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Step::Load => "load",
            Step::Cook => "cook",
            Step::Group => "group",
            Step::Queries => "queries",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Step {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Step::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| format!("unknown step {s:?}: expected load, cook, group or queries"))
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunSpec {
    /// The configuration.
    pub config: Config,
    /// The store's folder (created if missing); the report goes to `dir/report.json`.
    pub dir: PathBuf,
    /// The steps.
    pub steps: Vec<Step>,
    /// The query start sets.
    pub starts: Vec<StartSet>,
    /// The engine's configuration.
    pub engine: EngineConfig,
    /// The sky tiles file; `None` for the cache (made there when missing).
    pub tiles: Option<PathBuf>,
}

/// Runs `spec`; returns the report written to `dir/report.json`.
///
/// # Errors
/// A load into a folder that holds images already, a cook or group step without images, a
/// queries step without observations or groups, sky tiles that are not the canonical ones,
/// storage failures. A refused run changes nothing on disk.
pub fn run(spec: &RunSpec, progress: &dyn Progress) -> Result<Value> {
    let has = |s| spec.steps.contains(&s);
    let config = spec.config;
    let dir = &spec.dir;
    if has(Step::Load) && dir.join(IMAGES).exists() {
        bail!("{} holds images already: load into a new folder, or leave out step load", dir.display());
    }
    if !has(Step::Load) && !dir.join(IMAGES).exists() {
        bail!("{} holds no images: run step load first", dir.display());
    }
    if has(Step::Group) && !has(Step::Cook) && !dir.join(OBSERVATIONS).exists() {
        bail!("{} holds no observations: run step cook first (or with group)", dir.display());
    }
    if has(Step::Cook) && dir.join(OBSERVATIONS).exists() {
        bail!("{} holds observations already: cook into a new folder (load there first)", dir.display());
    }
    if has(Step::Group) && dir.join(GROUPS).exists() {
        bail!("{} holds groups already: group into a new folder", dir.display());
    }
    if has(Step::Queries) && !has(Step::Group) && !dir.join(GROUPS).exists() {
        bail!("{} holds no groups: run steps cook and group first (or with queries)", dir.display());
    }
    let tiles = SkyTiles::open(spec.tiles.as_deref())?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let ctx = Context::new(spec.engine.clone())?;
    let store = if has(Step::Load) {
        RawStore::create(&ctx, dir, config, &RawLayout::chosen())?
    } else {
        RawStore::open(&ctx, dir, config)?
    };
    let generator = has(Step::Load).then(|| Generator::new(config, tiles));
    let observations = dir.join(OBSERVATIONS);
    if has(Step::Cook) {
        create_observations(&ctx, &observations)?;
    }
    let spill = dir.join(SPILL_DIR);
    // Declared before the sorters and the writer, so dropped after them (they remove their
    // files, also on errors): then the folder is empty and goes too.
    let _spill_guard = EmptyDirGuard(spill.clone());
    let mut writer = None;
    if has(Step::Group) {
        create_groups(&ctx, dir)?;
        writer = Some(GroupWriter::new(&ctx, dir, spill.join("groups")));
    }

    let mut t_load = Duration::ZERO;
    let mut t_generate = Duration::ZERO;
    let mut t_cook = Duration::ZERO;
    let mut t_group = Duration::ZERO;
    let mut t_prime = Duration::ZERO;
    let mut cycles = Vec::new();
    let mut f1 = F1Accumulator::new(KeySorter::spilling(spill.join("F1")));
    let mut f1p = F1Accumulator::new(KeySorter::spilling(spill.join("F1prime")));
    let mut grouper = Grouper::new(d3(config)?);
    let mut next_id = 1;
    let objects = config.objects();
    let (d1, d2) = (u32::try_from(objects.d1)?, u32::try_from(objects.d2)?);
    let s = usize::try_from(config.side())?;

    for c in 0..config.cycles() {
        let ts = c * CYCLE..(c + 1) * CYCLE;
        let mut cycle = Map::new();
        cycle.insert("cycle".into(), json!(c));
        if let Some(g) = &generator {
            progress.begin(&format!("load {c}"), u64::from(CYCLE) * (s * s) as u64);
            let start = Instant::now();
            let generating = store.load(g, ts.clone(), &|n| progress.advance(n))?;
            progress.end();
            let load = start.elapsed().saturating_sub(generating);
            t_load += load;
            t_generate += generating;
            cycle.insert("load".into(), json!(load.as_secs_f64()));
            cycle.insert("generate".into(), json!(generating.as_secs_f64()));
        }
        if has(Step::Cook) {
            progress.begin(&format!("cook {c}"), u64::from(CYCLE));
            let images = store.images()?;
            let llcs = store.llcs(ts.clone())?;
            // The cycle's observations in id order, and where each image's start.
            let mut cooked: Vec<Observation> = Vec::new();
            let mut starts = Vec::with_capacity(CYCLE as usize + 1);
            let mut cook = Duration::ZERO;
            for (t, &llc) in ts.clone().zip(&llcs) {
                let start = Instant::now();
                let pix = store.read_pix(&images, t, (0, config.side() - 1), (0, config.side() - 1))?;
                let mut obs = cook_image_parallel(&pix, s, s, llc, i64::from(t), CookParams::f1(d1, d2))?;
                next_id = assign_ids(&mut obs, next_id);
                starts.push(cooked.len());
                cooked.append(&mut obs);
                cook += start.elapsed();
                let start = Instant::now();
                let prime = cook_image_parallel(&pix, s, s, llc, i64::from(t), CookParams::f1_prime(d1, d2))?;
                t_prime += start.elapsed();
                f1p.add(&prime);
                progress.advance(1);
            }
            starts.push(cooked.len());
            let start = Instant::now();
            write_observations(&ctx, &observations, &cooked)?;
            cook += start.elapsed();
            f1.add(&cooked);
            f1.spill()?;
            f1p.spill()?;
            progress.end();
            t_cook += cook;
            cycle.insert("cook".into(), json!(cook.as_secs_f64()));
            if has(Step::Group) {
                let start = Instant::now();
                for (t, w) in ts.clone().zip(starts.windows(2)) {
                    grouper.push_image(i64::from(t), &cooked[w[0]..w[1]])?;
                }
                if let Some(w) = writer.as_mut() {
                    w.write(grouper.take_closed())?;
                }
                let group = start.elapsed();
                t_group += group;
                cycle.insert("group".into(), json!(group.as_secs_f64()));
            }
        } else if has(Step::Group) {
            // Grouping a store cooked by an earlier run: the cycle's stored observations, read
            // back (the time includes the read).
            let start = Instant::now();
            let obs = read_observations(&ctx, &observations, &ObsBox::cycle(i64::from(c), (0, W - 1), (0, W - 1)))?;
            for t in ts.clone() {
                let t = i64::from(t);
                let lo = obs.partition_point(|o| o.t < t);
                let hi = obs.partition_point(|o| o.t <= t);
                grouper.push_image(t, &obs[lo..hi])?;
            }
            if let Some(w) = writer.as_mut() {
                w.write(grouper.take_closed())?;
            }
            let group = start.elapsed();
            t_group += group;
            cycle.insert("group".into(), json!(group.as_secs_f64()));
        }
        cycles.push(Value::Object(cycle));
    }

    let mut report = read_report(dir)?;
    report.insert("config".into(), json!(config.name()));
    report.insert("data".into(), json!({ "tileData_sha256": FILE_SHA256 }));
    let mut seconds = match report.remove("seconds") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if has(Step::Load) {
        seconds.insert("load".into(), json!(t_load.as_secs_f64()));
        seconds.insert("generate".into(), json!(t_generate.as_secs_f64()));
    }
    if has(Step::Cook) {
        seconds.insert("cook".into(), json!(t_cook.as_secs_f64()));
        seconds.insert("F1prime".into(), json!(t_prime.as_secs_f64()));
        let spilled = |e| anyhow::Error::from(e).context(format!("spill folder {}", spill.display()));
        report.insert("F1".into(), serde_json::to_value(f1.finish().map_err(spilled)?)?);
        report.insert("F1prime".into(), serde_json::to_value(f1p.finish().map_err(spilled)?)?);
    }
    if let Some(mut w) = writer {
        let start = Instant::now();
        grouper.close_all();
        w.write(grouper.take_closed())?;
        let f2 = w.finish(grouper.groups_created() as u64)?;
        t_group += start.elapsed();
        seconds.insert("group".into(), json!(t_group.as_secs_f64()));
        report.insert("F2".into(), serde_json::to_value(f2)?);
    }
    let total: f64 = ["load", "cook", "group"].iter().filter_map(|k| seconds.get(*k).and_then(Value::as_f64)).sum();
    seconds.insert("total".into(), json!(total));
    if has(Step::Load) || has(Step::Cook) || has(Step::Group) {
        seconds.insert("cycles".into(), Value::Array(cycles));
    }
    if has(Step::Queries) {
        drop(store);
        let (queries, q_seconds) = run_queries(dir, config, &spec.engine, &spec.starts, progress)?;
        // Per start set: a set run now replaces its earlier results, other sets' stay.
        merge_sets(&mut report, queries);
        merge_sets(&mut seconds, q_seconds);
    }
    report.insert("seconds".into(), Value::Object(seconds));
    report.insert("storage".into(), storage_stats(config, dir));
    report.insert("memory".into(), json!({ "peak_rss_bytes": peak_rss() }));
    let report = Value::Object(report);
    let path = dir.join("report.json");
    let text = serde_json::to_string_pretty(&report)?;
    let tmp = dir.join("report.json.tmp");
    std::fs::write(&tmp, text + "\n").with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(report)
}

/// Puts the start sets of `new` (an object) into `map["queries"]`, keeping the other sets there.
fn merge_sets(map: &mut Map<String, Value>, new: Value) {
    let mut merged = match map.remove("queries") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if let Value::Object(m) = new {
        merged.extend(m);
    }
    map.insert("queries".into(), Value::Object(merged));
}

/// Removes its folder when dropped, if empty.
struct EmptyDirGuard(PathBuf);

impl Drop for EmptyDirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// D3 of `config`'s object parameters, as the grouper takes it.
fn d3(config: Config) -> Result<D3> {
    let r = config.objects().d3;
    Ok(D3::new(u64::try_from(r.p)?, u64::try_from(r.q)?)?)
}

/// The report of an earlier run in `dir`, or an empty one.
fn read_report(dir: &Path) -> Result<Map<String, Value>> {
    let path = dir.join("report.json");
    match std::fs::read(&path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => bail!("{}: not a JSON object", path.display()),
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// Bytes of the images array on disk against its raw size.
fn storage_stats(config: Config, dir: &Path) -> Value {
    let bytes = dir_bytes(&dir.join(IMAGES));
    let raw = config.raw_bytes();
    json!({
        "images_bytes": bytes,
        "images_raw_bytes": raw,
        "images_compression_ratio": if bytes > 0 { raw as f64 / bytes as f64 } else { 0.0 },
        "store_bytes": dir_bytes(dir),
    })
}

/// Bytes of the files under `p`.
pub fn dir_bytes(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else { return 0 };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// The process's peak resident memory (VmHWM of /proc/self/status), 0 where unknown.
pub fn peak_rss() -> u64 {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return 0 };
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress::Silent;

    fn spec(dir: &Path, steps: &[Step]) -> RunSpec {
        let tiles = Some(
            crate::tiles::ensure_cached_with(&[
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python")
            ])
            .expect("sky tiles"),
        );
        RunSpec {
            config: Config::Micro,
            dir: dir.to_path_buf(),
            steps: steps.to_vec(),
            starts: StartSet::ALL.to_vec(),
            engine: EngineConfig::new(),
            tiles,
        }
    }

    /// Micro end to end: the report's structure and internal consistency, the steps run
    /// separately giving the same summaries, and the refusals that leave the folder unchanged.
    #[test]
    fn micro_end_to_end() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("store");
        let all = [Step::Load, Step::Cook, Step::Group];
        let r = run(&spec(&dir, &all), &Silent).expect("micro run");
        assert_eq!(r["config"], "micro");
        assert_eq!(r["data"]["tileData_sha256"], FILE_SHA256);
        for k in ["load", "generate", "cook", "group", "F1prime", "total"] {
            assert!(r["seconds"][k].as_f64().is_some_and(|v| v >= 0.0), "seconds.{k}");
        }
        assert_eq!(r["seconds"]["cycles"].as_array().map(Vec::len), Some(2));
        for f in ["F1", "F1prime"] {
            let s = &r[f];
            let count = s["count"].as_u64().expect("count");
            assert!(count > 100, "{f} count {count}");
            // Each observation has a polygon of 1..=D2 vertices and pixelSum >= threshold.
            let vertices = s["vertices"].as_u64().expect("vertices");
            assert!(vertices >= count && vertices <= count * 50, "{f} vertices {vertices}");
            assert!(s["pixelSum"].as_u64().expect("pixelSum") >= count * 900);
            assert_eq!(s["observation_keys_sha256"].as_str().map(str::len), Some(64));
        }
        // F1' (threshold 900) finds at least as many cells above threshold; on micro more objects.
        assert!(r["F1prime"]["count"].as_u64() > r["F1"]["count"].as_u64());
        let f2 = &r["F2"];
        let groups = f2["groups"].as_u64().expect("groups");
        assert_eq!(groups, f2["multi_member_groups"].as_u64().expect("multi") + f2["singletons"].as_u64().expect("s"));
        // Micro's second half re-observes the first half's positions: many multi-member groups.
        assert!(f2["multi_member_groups"].as_u64().expect("multi") * 2 > groups / 2);
        assert!(groups <= r["F1"]["count"].as_u64().expect("count"));
        let written: Value =
            serde_json::from_slice(&std::fs::read(dir.join("report.json")).expect("report")).expect("json");
        for k in ["config", "data", "F1", "F1prime", "F2"] {
            assert_eq!(written[k], r[k], "report.json {k}");
        }
        let ratio = r["storage"]["images_compression_ratio"].as_f64().expect("ratio");
        assert!(ratio > 2.0, "compression ratio {ratio}");

        check_stored(&dir, &r);

        // Loading, then cooking and grouping in a second run give the same summaries.
        let apart = tmp.path().join("apart");
        let loaded = run(&spec(&apart, &[Step::Load]), &Silent).expect("load");
        assert!(loaded.get("F1").is_none() && loaded["seconds"].get("cook").is_none());
        let cooked = run(&spec(&apart, &[Step::Cook]), &Silent).expect("cook");
        assert!(cooked.get("F2").is_none());
        let again = run(&spec(&apart, &[Step::Group]), &Silent).expect("group");
        for f in ["F1", "F1prime", "F2"] {
            assert_eq!(again[f], r[f], "{f}");
        }
        check_stored(&apart, &again);
        // The load's seconds are kept from the first run.
        assert_eq!(again["seconds"]["load"], loaded["seconds"]["load"]);

        // Refusals leave the folder as it was.
        let before = dir_listing(&dir);
        let e = run(&spec(&dir, &all), &Silent).expect_err("second load");
        assert!(e.to_string().contains("holds images already"), "{e}");
        let e = run(&spec(&dir, &[Step::Cook]), &Silent).expect_err("second cook");
        assert!(e.to_string().contains("holds observations already"), "{e}");
        let e = run(&spec(&dir, &[Step::Group]), &Silent).expect_err("second group");
        assert!(e.to_string().contains("holds groups already"), "{e}");
        assert_eq!(dir_listing(&dir), before);
        let e = run(&spec(&tmp.path().join("empty"), &[Step::Cook]), &Silent).expect_err("no images");
        assert!(e.to_string().contains("run step load first"), "{e}");
        let loaded_only = tmp.path().join("loaded");
        run(&spec(&loaded_only, &[Step::Load]), &Silent).expect("load");
        let before = dir_listing(&loaded_only);
        let e = run(&spec(&loaded_only, &[Step::Group]), &Silent).expect_err("group before cook");
        assert!(e.to_string().contains("run step cook first"), "{e}");
        assert_eq!(dir_listing(&loaded_only), before);
        let e = run(&spec(&loaded_only, &[Step::Queries]), &Silent).expect_err("queries before group");
        assert!(e.to_string().contains("holds no groups"), "{e}");
        assert_eq!(dir_listing(&loaded_only), before);
        assert!(!tmp.path().join("empty").exists());
    }

    /// The stored observations and groups are those the report summarises: F1 counts the stored
    /// observations, F2 the stored groups, every observation is in a group, every member is an
    /// observation, and the memberships array agrees with the groups.
    fn check_stored(dir: &Path, r: &Value) {
        let ctx = Context::new(EngineConfig::new()).expect("context");
        let obs = crate::read_observations(&ctx, dir.join(OBSERVATIONS), &crate::ObsBox::all()).expect("observations");
        assert_eq!(serde_json::to_value(crate::F1Summary::of(&obs)).expect("json"), r["F1"]);
        let ids: Vec<i64> = obs.iter().map(|o| o.id).collect();
        assert_eq!(ids, (1..=obs.len() as i64).collect::<Vec<_>>(), "ids 1, 2, ... in time order");
        assert!(obs.windows(2).all(|w| w[0].t <= w[1].t));
        let groups = crate::read_all_groups(&ctx, dir).expect("groups");
        assert_eq!(serde_json::to_value(crate::F2Summary::of(&groups)).expect("json"), r["F2"]);
        // The spilled key runs and singletons are gone.
        assert!(!dir.join(SPILL_DIR).exists(), "spill folder left");
        let mut in_groups = vec![Vec::new(); obs.len() + 1];
        for g in &groups.groups {
            for m in &g.members {
                let o = &obs[usize::try_from(m.id - 1).expect("id")];
                assert_eq!(m.key(), o.key(), "member {} of group {}", m.id, g.id);
                in_groups[usize::try_from(m.id).expect("id")].push(g.id);
            }
        }
        assert!(in_groups[1..].iter().all(|g| !g.is_empty()), "an observation in no group");
        let stored = crate::read_memberships(&ctx, dir, &ids).expect("memberships");
        assert_eq!(stored.len(), obs.len());
        for (id, mut gs) in stored {
            gs.sort_unstable();
            let mut want = in_groups[usize::try_from(id).expect("id")].clone();
            want.sort_unstable();
            assert_eq!(gs, want, "memberships of {id}");
        }
    }

    fn dir_listing(p: &Path) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![p.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
                let m = e.metadata().expect("metadata");
                if m.is_dir() {
                    stack.push(e.path());
                } else {
                    out.push((e.path(), m.len()));
                }
            }
        }
        out.sort();
        out
    }
}
