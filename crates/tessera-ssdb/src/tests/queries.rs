//! Q1-Q9 on micro (dense start set: every query has an answer) against brute force written
//! from SSDB.md §4 without the crate's query code: full scans of the raw images array (Q1, Q3,
//! the Q8/Q9 windows), plain loops over every observation and group (Q4-Q9), a direct count per
//! window (Q6), the reference cooking (Q2), segment/segment crossings, a crossing-ray winding
//! number and triangles for the geometry.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tessera::{Array, Config as EngineConfig, Context, Layout, Mode, Subarray};

use super::reference;
use crate::generator::ATTRS;
use crate::params::{rand, Config, StartSet};
use crate::pipeline::{run, RunSpec, Step};
use crate::progress::Silent;
use crate::raw::{RawStore, IMAGES};
use crate::*;

const N: usize = 40;
const S: usize = 200;

/// The whole raw images array: per attribute, `N * S * S` values, `[t][y][x]`.
struct Raw {
    attrs: Vec<Vec<i32>>,
    llc: Vec<(i64, i64)>,
}

impl Raw {
    fn at(&self, a: usize, t: usize, y: usize, x: usize) -> i32 {
        self.attrs[a][(t * S + y) * S + x]
    }
}

fn load_raw(dir: &Path) -> Raw {
    let ctx = Context::new(EngineConfig::new()).unwrap();
    let a = Array::open(&ctx, dir.join(IMAGES), Mode::Read).unwrap();
    let r = a
        .read(
            &Subarray::from_ranges(&[(0, N as i128 - 1), (0, S as i128 - 1), (0, S as i128 - 1)]),
            &ATTRS,
            Layout::RowMajor,
        )
        .unwrap();
    let attrs = r
        .attrs
        .iter()
        .map(|c| c.data.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
        .collect();
    let llc = RawStore::open(&ctx, dir, Config::Micro).unwrap().llcs(0..N as u32).unwrap();
    Raw { attrs, llc }
}

fn sha_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn sorted_hash(mut keys: Vec<String>) -> String {
    keys.sort();
    sha_hex(keys.join("\n").as_bytes())
}

fn okey(t: i64, cx: i64, cy: i64, ps: i64) -> String {
    format!("{t},{cx},{cy},{ps}")
}

fn gkey(g: &Group) -> String {
    let mut k: Vec<String> = g.members.iter().map(|m| okey(m.t, m.cx.into(), m.cy.into(), m.pixel_sum)).collect();
    k.sort();
    k.join(";")
}

// ---- geometry, written apart from query::geometry ----

type P = (i64, i64);

fn orient(a: P, b: P, c: P) -> i128 {
    i128::from(b.0 - a.0) * i128::from(c.1 - a.1) - i128::from(b.1 - a.1) * i128::from(c.0 - a.0)
}

fn on_seg(a: P, b: P, p: P) -> bool {
    orient(a, b, p) == 0 && p.0 >= a.0.min(b.0) && p.0 <= a.0.max(b.0) && p.1 >= a.1.min(b.1) && p.1 <= a.1.max(b.1)
}

/// Closed segments a-b and c-d share a point.
fn segs_cross(a: P, b: P, c: P, d: P) -> bool {
    let (o1, o2, o3, o4) = (orient(a, b, c), orient(a, b, d), orient(c, d, a), orient(c, d, b));
    if o1.signum() * o2.signum() < 0 && o3.signum() * o4.signum() < 0 {
        return true;
    }
    on_seg(a, b, c) || on_seg(a, b, d) || on_seg(c, d, a) || on_seg(c, d, b)
}

fn in_box(p: P, b: [i64; 4]) -> bool {
    p.0 >= b[0] && p.0 <= b[2] && p.1 >= b[1] && p.1 <= b[3]
}

/// Closed segment meets the closed box: an end inside, or it crosses one of the box's sides.
fn seg_box(a: P, b: P, bx: [i64; 4]) -> bool {
    let c = [(bx[0], bx[1]), (bx[2], bx[1]), (bx[2], bx[3]), (bx[0], bx[3])];
    in_box(a, bx) || in_box(b, bx) || (0..4).any(|i| segs_cross(a, b, c[i], c[(i + 1) % 4]))
}

/// Winding number by a ray to +x: each edge crossing the line y = p.y upward (half-open in y)
/// at an x > p.x (compared as a rational) counts +1, downward -1.
fn winding(poly: &[P], p: P) -> i64 {
    let mut w = 0;
    for i in 0..poly.len() {
        let (a, b) = (poly[i], poly[(i + 1) % poly.len()]);
        let up = a.1 <= p.1 && b.1 > p.1;
        let down = b.1 <= p.1 && a.1 > p.1;
        if !(up || down) {
            continue;
        }
        // x at y = p.y: a.0 + (p.1 - a.1)(b.0 - a.0)/(b.1 - a.1); is it > p.0?
        let (num, den) = (
            i128::from(a.0 - p.0) * i128::from(b.1 - a.1) + i128::from(p.1 - a.1) * i128::from(b.0 - a.0),
            i128::from(b.1 - a.1),
        );
        if (num > 0 && den > 0) || (num < 0 && den < 0) {
            w += if up { 1 } else { -1 };
        }
    }
    w
}

/// Region (curve plus non-zero winding) meets the box.
fn region_box(poly: &[P], bx: [i64; 4]) -> bool {
    let n = poly.len();
    if n == 0 {
        return false;
    }
    poly.iter().any(|&p| in_box(p, bx))
        || (0..n).any(|i| seg_box(poly[i], poly[(i + 1) % n], bx))
        || [(bx[0], bx[1]), (bx[2], bx[1]), (bx[2], bx[3]), (bx[0], bx[3])].iter().any(|&c| winding(poly, c) != 0)
}

/// The convex hull of `pts` meets the box: some segment between two points meets it, or a box
/// corner lies in a triangle of three points.
fn hull_box(pts: &[P], bx: [i64; 4]) -> bool {
    let p: Vec<P> = pts.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
    for i in 0..p.len() {
        for j in i..p.len() {
            if seg_box(p[i], p[j], bx) {
                return true;
            }
        }
    }
    let c = (bx[0], bx[1]);
    for i in 0..p.len() {
        for j in i + 1..p.len() {
            for k in j + 1..p.len() {
                let (a, b, d) = (orient(p[i], p[j], c), orient(p[j], p[k], c), orient(p[k], p[i], c));
                let inside = (a >= 0 && b >= 0 && d >= 0) || (a <= 0 && b <= 0 && d <= 0);
                if inside && orient(p[i], p[j], p[k]) != 0 {
                    return true;
                }
            }
        }
    }
    false
}

// ---- the queries, brute force ----

fn cycle(q: i64, r: i64) -> i64 {
    (rand((100 * q + r) as i32) * 2.0).floor() as i64
}

fn poly_of(o: &Observation) -> Vec<P> {
    o.polygon.iter().map(|p| (i64::from(p[0]), i64::from(p[1]))).collect()
}

/// `round(num / den)` half away from zero, by comparing twice the remainder.
fn round_away(num: i128, den: i128) -> i128 {
    let q = num.div_euclid(den);
    let r = num.rem_euclid(den); // num = q den + r, 0 <= r < den
    if 2 * r > den || (2 * r == den && num > 0) {
        q + 1
    } else {
        q
    }
}

fn overlap(u: usize, i: usize) -> i128 {
    let lo = (10 * u).max(3 * i);
    let hi = (10 * u + 10).min(3 * i + 3);
    if hi > lo {
        (hi - lo) as i128
    } else {
        0
    }
}

/// Q3 of image t: the (11, n, n) output, little-endian bytes.
fn regrid(raw: &Raw, t: usize, m: usize) -> Vec<u8> {
    let n = (3 * m).div_ceil(10);
    let mut out = Vec::new();
    for (a, name) in ATTRS.iter().enumerate() {
        for v in 0..n {
            for u in 0..n {
                let (mut sum, mut wsum) = (0i128, 0i128);
                let (mut and, mut or) = (true, false);
                for y in (10 * v / 3).saturating_sub(1)..((10 * v + 10) / 3 + 1).min(m) {
                    for x in (10 * u / 3).saturating_sub(1)..((10 * u + 10) / 3 + 1).min(m) {
                        let w = overlap(u, x) * overlap(v, y);
                        if w == 0 {
                            continue;
                        }
                        let val = raw.at(a, t, y, x);
                        sum += w * i128::from(val);
                        wsum += w;
                        and &= val != 0;
                        or |= val != 0;
                    }
                }
                let r = match *name {
                    "valid" => i32::from(and),
                    "sat" => i32::from(or),
                    _ => i32::try_from(round_away(sum, wsum)).unwrap(),
                };
                out.extend_from_slice(&r.to_le_bytes());
            }
        }
    }
    out
}

fn window_output(raw: &Raw, groups: &[&Group], x: i64, y: i64, u: i64) -> Value {
    let mut members: BTreeMap<i64, (i64, i64, i64, i64)> = BTreeMap::new();
    for g in groups {
        for m in &g.members {
            members.insert(m.id, (m.t, m.cx.into(), m.cy.into(), m.pixel_sum));
        }
    }
    let mut owners: Vec<(i64, i64, i64, i64)> = members.into_values().collect();
    owners.sort();
    let s = S as i64;
    let mut bytes = Vec::new();
    let mut windows = 0;
    for &(t, cx, cy, ps) in &owners {
        for (ti, &(lx, ly)) in raw.llc.iter().enumerate() {
            let meets = lx < x + u && lx + s > x && ly < y + u && ly + s > y;
            if !meets {
                continue;
            }
            let (x0, x1) = ((cx - 50).max(lx), (cx + 50).min(lx + s));
            let (y0, y1) = ((cy - 50).max(ly), (cy + 50).min(ly + s));
            if x0 >= x1 || y0 >= y1 {
                continue;
            }
            windows += 1;
            for v in [t, cx, cy, ps, ti as i64, x0, y0, x1, y1] {
                bytes.extend_from_slice(&v.to_le_bytes());
            }
            for wy in y0..y1 {
                for wx in x0..x1 {
                    let p = raw.at(0, ti, (wy - ly) as usize, (wx - lx) as usize);
                    bytes.extend_from_slice(&p.to_le_bytes());
                }
            }
        }
    }
    json!({ "windows": windows, "pix_windows_sha256": sha_hex(&bytes) })
}

fn groups_json(groups: &[&Group]) -> Value {
    json!({ "count": groups.len(), "keys_sha256": sorted_hash(groups.iter().map(|g| gkey(g)).collect()) })
}

/// The brute-force answer of every query of one run.
fn brute_run(raw: &Raw, obs: &[Observation], groups: &[Group], r: i64, x: i64, y: i64) -> Value {
    let (m, u2, u3) = (200usize, 533i64, 53i64);
    let c: Vec<i64> = (1..=6).map(|q| cycle(q, r)).collect();
    // Q1
    let (mut sum, mut count) = (0i64, 0i64);
    for t in (20 * c[0] as usize)..(20 * c[0] as usize + 20) {
        for yy in 0..m {
            for xx in 0..m {
                sum += i64::from(raw.at(0, t, yy, xx));
                count += 1;
            }
        }
    }
    // Q2: the reference cooking of image 20·cycle at 900.
    let t2 = 20 * c[1] as usize;
    let pix: Vec<i32> = (0..m * m).map(|i| raw.at(0, t2, i / m, i % m)).collect();
    let (lx, ly) = raw.llc[t2];
    let q2 = reference::cook(&pix, m, m, 900, 50, 50);
    let q2_keys: Vec<String> = q2.iter().map(|o| okey(t2 as i64, o.cx + lx, o.cy + ly, o.pixel_sum)).collect();
    // Q3
    let mut shas = String::new();
    for t in (20 * c[2] as usize)..(20 * c[2] as usize + 20) {
        shas.push_str(&sha_hex(&regrid(raw, t, m)));
    }
    // Q4-Q6: every observation of the cycle.
    let slab2 = [x, y, x + u2 - 1, y + u2 - 1];
    let in_slab = |o: &Observation| in_box((o.cx.into(), o.cy.into()), slab2);
    let q4: Vec<&Observation> = obs.iter().filter(|o| o.cycle == c[3] && in_slab(o)).collect();
    let q5: Vec<&Observation> = obs.iter().filter(|o| o.cycle == c[4] && region_box(&poly_of(o), slab2)).collect();
    let centres: Vec<(i64, i64)> =
        obs.iter().filter(|o| o.cycle == c[5] && in_slab(o)).map(|o| (o.cx.into(), o.cy.into())).collect();
    let mut q6 = String::new();
    let mut q6_windows = 0;
    for a in x..=x + u2 - 100 {
        for b in y..=y + u2 - 100 {
            let n = centres.iter().filter(|&&(cx, cy)| cx >= a && cx < a + 100 && cy >= b && cy < b + 100).count();
            if n > 20 {
                q6.push_str(&format!("{a},{b},{n}\n"));
                q6_windows += 1;
            }
        }
    }
    // Q7: exact centres by floor division.
    let q7: Vec<&Group> = groups
        .iter()
        .filter(|g| {
            let n = g.members.len() as i64;
            let (sx, sy) = g.members.iter().fold((0i64, 0i64), |(a, b), m| (a + i64::from(m.cx), b + i64::from(m.cy)));
            in_box((sx.div_euclid(n), sy.div_euclid(n)), slab2)
        })
        .collect();
    // Q8: trajectories.
    let slab3 = [x, y, x + u3 - 1, y + u3 - 1];
    let q8: Vec<&Group> = groups
        .iter()
        .filter(|g| {
            let pts: Vec<P> = g.members.iter().map(|m| (i64::from(m.cx), i64::from(m.cy))).collect();
            if pts.len() == 1 {
                in_box(pts[0], slab3)
            } else {
                pts.windows(2).any(|w| seg_box(w[0], w[1], slab3))
            }
        })
        .collect();
    // Q9: polygon trajectories.
    let by_id: BTreeMap<i64, &Observation> = obs.iter().map(|o| (o.id, o)).collect();
    let q9: Vec<&Group> = groups
        .iter()
        .filter(|g| {
            let pb = g.polygon_bbox().map(i64::from);
            if !(pb[0] <= slab3[2] && pb[2] >= slab3[0] && pb[1] <= slab3[3] && pb[3] >= slab3[1]) {
                return false; // no vertex of any member can be near
            }
            let times: Vec<i64> = g.members.iter().map(|m| m.t).collect::<BTreeSet<_>>().into_iter().collect();
            let polys_at = |t: i64| -> Vec<Vec<P>> {
                g.members.iter().filter(|m| m.t == t).map(|m| poly_of(by_id[&m.id])).collect()
            };
            if times.len() == 1 {
                return polys_at(times[0]).iter().any(|p| region_box(p, slab3));
            }
            times.windows(2).any(|w| {
                let pts: Vec<P> = polys_at(w[0]).into_iter().chain(polys_at(w[1])).flatten().collect();
                hull_box(&pts, slab3)
            })
        })
        .collect();
    json!({
        "cycles": { "Q1": c[0], "Q2": c[1], "Q3": c[2], "Q4": c[3], "Q5": c[4], "Q6": c[5] },
        "Q1": { "sum": sum, "count": count },
        "Q2": { "count": q2.len(), "pixelSum": q2.iter().map(|o| o.pixel_sum).sum::<i64>(), "keys_sha256": sorted_hash(q2_keys) },
        "Q3": { "sha256_of_image_shas": sha_hex(shas.as_bytes()) },
        "Q4": { "count": q4.len(), "sum": q4.iter().map(|o| o.pixel_sum).sum::<i64>(), "keys_sha256": sorted_hash(q4.iter().map(|o| o.key()).collect()) },
        "Q5": { "count": q5.len(), "keys_sha256": sorted_hash(q5.iter().map(|o| o.key()).collect()) },
        "Q6": { "windows": q6_windows, "sha256": sha_hex(q6.as_bytes()) },
        "Q7": { "count": q7.len(), "singletons": q7.iter().filter(|g| g.members.len() == 1).count(), "keys_sha256": sorted_hash(q7.iter().map(|g| gkey(g)).collect()) },
        "Q8": { "groups": groups_json(&q8), "output": window_output(raw, &q8, x, y, u3) },
        "Q9": { "groups": groups_json(&q9), "output": window_output(raw, &q9, x, y, u3) },
    })
}

fn tiles() -> Option<PathBuf> {
    Some(
        crate::tiles::ensure_cached_with(&[PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python")])
            .expect("sky tiles"),
    )
}

/// Every query of every dense-set run on micro equals the brute force, every one has an answer
/// there, and the stored Q2/Q3 results are what the runs report.
#[test]
fn micro_queries_against_brute_force() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let spec = RunSpec {
        config: Config::Micro,
        dir: dir.clone(),
        steps: vec![Step::Load, Step::Cook, Step::Group, Step::Queries],
        starts: StartSet::ALL.to_vec(),
        engine: EngineConfig::new(),
        tiles: tiles(),
    };
    let report = run(&spec, &Silent).expect("micro run");
    for set in ["spec", "dense"] {
        assert_eq!(report["queries"][set]["runs"].as_array().map(Vec::len), Some(15), "{set}");
        for q in 1..=9 {
            assert!(report["seconds"]["queries"][set][format!("Q{q}")].as_f64().is_some_and(|v| v > 0.0));
        }
    }
    // The queries step alone, on one set: that set's results are replaced, the other's kept.
    let again = run(&RunSpec { steps: vec![Step::Queries], starts: vec![StartSet::Spec], ..spec }, &Silent)
        .expect("queries again");
    assert_eq!(again["queries"]["spec"], report["queries"]["spec"]);
    assert_eq!(again["queries"]["dense"], report["queries"]["dense"]);
    assert!(again["seconds"]["queries"]["dense"]["total"].is_number());
    assert!(dir.join("results/dense/q3_r14").exists() && dir.join("results/spec/q3_r14").exists());
    assert_eq!(again["F2"], report["F2"]);
    let raw = load_raw(&dir);
    let ctx = Context::new(EngineConfig::new()).unwrap();
    let obs = read_observations(&ctx, dir.join(OBSERVATIONS), &ObsBox::all()).unwrap();
    let groups = read_all_groups(&ctx, &dir).unwrap().groups;
    let points = StartSet::Dense.points(Config::Micro);
    for (r, got) in report["queries"]["dense"]["runs"].as_array().unwrap().iter().enumerate() {
        let (x, y) = points[r / 3];
        let want = brute_run(&raw, &obs, &groups, r as i64, x, y);
        assert_eq!(got["run"], json!(r));
        assert_eq!((got["X"].as_i64(), got["Y"].as_i64()), (Some(x), Some(y)));
        for k in ["cycles", "Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q9"] {
            assert_eq!(got[k], want[k], "run {r} {k}");
        }
        // Every query has an answer on the dense set.
        for (q, f) in [("Q2", "count"), ("Q4", "count"), ("Q5", "count"), ("Q6", "windows"), ("Q7", "count")] {
            assert!(got[q][f].as_u64() > Some(0), "run {r} {q} empty");
        }
        for q in ["Q8", "Q9"] {
            assert!(got[q]["groups"]["count"].as_u64() > Some(0), "run {r} {q} empty");
            assert!(got[q]["output"]["windows"].as_u64() > Some(0), "run {r} {q} no windows");
        }
        // Q8's windows in chunks of owners (budget 1 byte: one owner a chunk; 200 KB: a few)
        // hash as in one chunk.
        if r % 5 == 3 {
            let store = RawStore::open(&ctx, &dir, Config::Micro).unwrap();
            let images = store.images().unwrap();
            let slab = crate::query::geometry::IBox::slab(x, y, 53);
            let owners =
                crate::query::objects::window_owners(&crate::query::objects::q8_groups(&ctx, &dir, &slab).unwrap());
            assert!(owners.len() > 2);
            for budget in [1, 200_000] {
                let w =
                    crate::query::images::windows_within(&store, &images, Config::Micro, &owners, (x, y, 53), budget)
                        .unwrap();
                assert_eq!(serde_json::to_value(w).unwrap(), got["Q8"]["output"], "run {r} budget {budget}");
            }
        }
        // The stored results.
        let q2 = read_observations(&ctx, dir.join(format!("results/dense/q2_r{r:02}")), &ObsBox::all()).unwrap();
        assert_eq!(json!(observation_keys_sha256(&q2)), got["Q2"]["keys_sha256"]);
        let c3 = cycle(3, r as i64);
        let q3 = Array::open(&ctx, dir.join(format!("results/dense/q3_r{r:02}")), Mode::Read).unwrap();
        let t0 = 20 * c3 as i128;
        let res = q3.read(&Subarray::from_ranges(&[(t0, t0), (0, 59), (0, 59)]), &ATTRS, Layout::RowMajor).unwrap();
        let stored: Vec<u8> = res.attrs.iter().flat_map(|a| a.data.iter().copied()).collect();
        assert_eq!(stored, regrid(&raw, 20 * c3 as usize, 200), "run {r}: stored Q3 image");
    }
}

#[test]
fn brute_geometry_agrees_with_itself_on_known_cases() {
    // The test's own geometry on the cases of query::geometry's unit tests, so that a mistake
    // in either shows as a disagreement with a hand-worked answer.
    let sq = [(0, 0), (10, 0), (10, 10), (0, 10)];
    assert!(region_box(&sq, [4, 4, 5, 5]));
    assert!(region_box(&sq, [10, 10, 12, 12]));
    assert!(!region_box(&sq, [11, 0, 12, 10]));
    let ring = [(0, 0), (10, 0), (10, 10), (0, 10), (0, 0), (3, 3), (3, 7), (7, 7), (7, 3), (3, 3)];
    assert!(!region_box(&ring, [4, 4, 6, 6]));
    assert!(!seg_box((0, 20), (20, 21), [10, 0, 10, 20]));
    assert!(hull_box(&[(0, 0), (10, 0), (0, 10)], [2, 2, 3, 3]));
    assert!(!hull_box(&[(0, 0), (10, 0), (0, 10)], [6, 6, 9, 9]));
    assert_eq!(round_away(5, 2), 3);
    assert_eq!(round_away(-5, 2), -3);
    assert_eq!(round_away(-4, 3), -1);
}

fn pts() -> impl proptest::strategy::Strategy<Value = Vec<(i64, i64)>> {
    proptest::collection::vec((0i64..12, 0i64..12), 1..9)
}

fn boxes() -> impl proptest::strategy::Strategy<Value = [i64; 4]> {
    use proptest::strategy::Strategy;
    (-2i64..14, -2i64..14, 0i64..6, 0i64..6).prop_map(|(x, y, w, h)| [x, y, x + w, y + h])
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    /// The query's region test (separating axes, Sunday's winding number) against the test's
    /// (vertex in box, side crossings, ray winding number) on random small polygons, which are
    /// often self-touching, collinear or degenerate, and boxes that touch them.
    #[test]
    fn region_test_matches_brute_force(poly in pts(), bx in boxes()) {
        let q: Vec<[i64; 2]> = poly.iter().map(|p| [p.0, p.1]).collect();
        let b = crate::query::geometry::IBox { x0: bx[0], y0: bx[1], x1: bx[2], y1: bx[3] };
        proptest::prop_assert_eq!(crate::query::geometry::region_meets_box(&q, &b), region_box(&poly, bx));
        let hull = crate::query::geometry::convex_hull(&q);
        proptest::prop_assert_eq!(crate::query::geometry::region_meets_box(&hull, &b), hull_box(&poly, bx));
        proptest::prop_assert_eq!(
            crate::query::geometry::polyline_meets_box(&q, &b),
            if poly.len() == 1 { in_box(poly[0], bx) } else { poly.windows(2).any(|w| seg_box(w[0], w[1], bx)) }
        );
    }
}
