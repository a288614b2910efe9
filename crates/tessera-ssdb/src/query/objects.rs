//! The queries on observations and groups (SSDB.md §4): Q4 (mean pixelSum), Q5 (polygons
//! meeting the slab), Q6 (dense windows of centres), Q7 (group centres), Q8 (trajectories) and
//! Q9 (polygon trajectories). Each reads one world box of the observations (one cycle) or of the
//! groups ([`read_groups_meeting`]: a superset of what can meet the box) and applies the exact
//! test of §4 to what comes back.
//!
//! Pushdown points, for when the engine has query conditions and aggregates: Q4 is a COUNT and
//! SUM(pixelSum) over the box read; Q5's bbox prefilter is a condition on `bbox` (`bbox[0] <=
//! x1 && bbox[2] >= x0 && ...`) in [`q5`]'s read; Q7's centre test is a condition on `sumCx`,
//! `sumCy` and the member count. Each is the one read call in its function.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use sha2::{Digest, Sha256};
use tessera::Context;

use super::geometry::{convex_hull, polyline_meets_box, region_meets_box, IBox, Pt};
use super::images::WindowOwner;
use super::{Q4Result, Q5Result, Q6Result, Q7Result};
use crate::keys::{groups_sha256, hex, key_of, observation_keys_sha256, sorted_keys_sha256};
use crate::{
    read_groups_meeting, read_observation_points, read_observations, Group, ObsBox, ObsPoint, Observation, OBSERVATIONS,
};

/// The observations of `cycle` whose centre lies in the closed box.
///
/// # Errors
/// Storage failures, stored data that does not decode.
fn cycle_centres_in(ctx: &Context, dir: &Path, cycle: i64, b: &IBox) -> Result<Vec<Observation>> {
    Ok(read_observations(ctx, dir.join(OBSERVATIONS), &ObsBox::cycle(cycle, (b.x0, b.x1), (b.y0, b.y1)))?)
}

/// The centres and key parts of the observations of `cycle` whose centre lies in the closed box.
///
/// # Errors
/// Storage failures, stored data that does not decode.
fn cycle_points_in(ctx: &Context, dir: &Path, cycle: i64, b: &IBox) -> Result<Vec<ObsPoint>> {
    Ok(read_observation_points(ctx, dir.join(OBSERVATIONS), &ObsBox::cycle(cycle, (b.x0, b.x1), (b.y0, b.y1)))?)
}

/// Q4: the observations of `cycle` with centre in the slab: count, Σ pixelSum, keys (read
/// without their polygons).
///
/// # Errors
/// Storage failures.
pub fn q4(ctx: &Context, dir: &Path, cycle: i64, slab: &IBox) -> Result<Q4Result> {
    let points = cycle_points_in(ctx, dir, cycle, slab)?;
    Ok(Q4Result {
        count: points.len() as u64,
        sum: points.iter().map(|o| o.pixel_sum).sum(),
        keys_sha256: sorted_keys_sha256(points.iter().map(|o| key_of(o.t, o.cx, o.cy, o.pixel_sum)).collect()),
    })
}

/// An observation's polygon as points.
fn polygon(o: &Observation) -> Vec<Pt> {
    o.polygon.iter().map(|p| [i64::from(p[0]), i64::from(p[1])]).collect()
}

/// Q5: the observations of `cycle` whose polygon region meets the slab. A kept object lies in
/// its bbox, which holds its centre and has sides <= D1, so the centre box widened by D1 - 1
/// finds every candidate; the bbox prefilter and the exact region test follow.
///
/// # Errors
/// Storage failures.
pub fn q5(ctx: &Context, dir: &Path, cycle: i64, slab: &IBox, d1: i64) -> Result<Q5Result> {
    let wide = IBox { x0: slab.x0 - (d1 - 1), y0: slab.y0 - (d1 - 1), x1: slab.x1 + (d1 - 1), y1: slab.y1 + (d1 - 1) };
    let mut obs = cycle_centres_in(ctx, dir, cycle, &wide)?;
    obs.retain(|o| {
        let b = o.bbox.map(i64::from);
        IBox { x0: b[0], y0: b[1], x1: b[2], y1: b[3] }.meets(slab) && region_meets_box(&polygon(o), slab)
    });
    Ok(Q5Result { count: obs.len() as u64, keys_sha256: observation_keys_sha256(&obs) })
}

/// Q6: the windows `[a, a+D4) x [b, b+D4)` inside the slab `[x, x+u)^2` holding more than D5
/// of the centres of `cycle`'s observations in the slab ([`dense_windows`]); lines
/// `"a,b,count\n"` sorted by (a, b).
///
/// # Errors
/// Storage failures.
pub fn q6(ctx: &Context, dir: &Path, cycle: i64, slab: &IBox, d4: i64, d5: i64) -> Result<Q6Result> {
    let obs = cycle_points_in(ctx, dir, cycle, slab)?;
    let u = usize::try_from(slab.x1 - slab.x0 + 1)?;
    let d = usize::try_from(d4)?;
    let points = obs
        .iter()
        .map(|o| Ok((usize::try_from(i64::from(o.cy) - slab.y0)?, usize::try_from(i64::from(o.cx) - slab.x0)?)))
        .collect::<Result<Vec<_>>>()?;
    let min = u32::try_from(d5.max(-1) + 1).unwrap_or(u32::MAX);
    let mut lines: Vec<(i64, i64, u32)> = dense_windows(points, u, d, min)
        .into_iter()
        .map(|(a, b, c)| (slab.x0 + a as i64, slab.y0 + b as i64, c))
        .collect();
    lines.sort_unstable();
    let mut sha = Sha256::new();
    for (a, b, c) in &lines {
        sha.update(format!("{a},{b},{c}\n").as_bytes());
    }
    Ok(Q6Result { windows: lines.len() as u64, sha256: hex(&sha.finalize()) })
}

/// The windows `[a, a+d) x [b, b+d)` inside `[0, u)^2` holding at least `min` of
/// `points` (local `(y, x)`, inside the square): `(a, b, count)`, in no particular order.
///
/// A sweep down the rows: the x of the points in the rows `[b, b+d)` are kept sorted as b
/// moves (each point enters and leaves once), and along a row of windows the count only changes
/// where a point enters (`a = x - d + 1`) or leaves (`a = x + 1`) the window, so each b costs
/// the points of its band, not u (prefix sums over the whole square cost u² however few
/// points there are: 10^8 for small's slab).
pub fn dense_windows(mut points: Vec<(usize, usize)>, u: usize, d: usize, min: u32) -> Vec<(usize, usize, u32)> {
    let mut out = Vec::new();
    if d == 0 || d > u {
        return out;
    }
    points.sort_unstable();
    let last = u - d; // the last a and b
    let mut band: Vec<usize> = Vec::new();
    let (mut entered, mut left) = (0, 0);
    for b in 0..=last {
        while entered < points.len() && points[entered].0 < b + d {
            let x = points[entered].1;
            band.insert(band.partition_point(|&v| v < x), x);
            entered += 1;
        }
        while left < points.len() && points[left].0 < b {
            let x = points[left].1;
            band.remove(band.partition_point(|&v| v < x));
            left += 1;
        }
        if band.len() < min as usize {
            continue;
        }
        // Only a window holding `min` consecutive x of the band can qualify: those of
        // band[i..i+min] fit in [a, a+d) for a in [band[i+min-1] + 1 - d, band[i]]. The ranges
        // come in increasing order; overlapping ones merge.
        let m = min.max(1) as usize;
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        if min == 0 {
            ranges.push((0, last));
        }
        for (lo_x, hi_x) in band.iter().zip(&band[m - 1..]) {
            if hi_x - lo_x < d {
                let (lo, hi) = ((hi_x + 1).saturating_sub(d), (*lo_x).min(last));
                match ranges.last_mut() {
                    Some(r) if lo <= r.1 + 1 => r.1 = r.1.max(hi),
                    _ if lo <= hi => ranges.push((lo, hi)),
                    _ => {}
                }
            }
        }
        // Within a range, count(a) = #{x: x < a + d} - #{x: x < a} changes only where a point
        // enters (a = x - d + 1) or leaves (a = x + 1).
        for (lo, hi) in ranges {
            let (mut i, mut j, mut a) = (band.partition_point(|&x| x < lo + d), band.partition_point(|&x| x < lo), lo);
            loop {
                while i < band.len() && band[i] < a + d {
                    i += 1;
                }
                while j < band.len() && band[j] < a {
                    j += 1;
                }
                let next_enter = band.get(i).map_or(usize::MAX, |&x| x + 1 - d);
                let next_leave = band.get(j).map_or(usize::MAX, |&x| x + 1);
                let next = next_enter.min(next_leave).min(hi + 1);
                let count = (i - j) as u32;
                if count >= min {
                    out.extend((a..next).map(|a| (a, b, count)));
                }
                if next > hi {
                    break;
                }
                a = next;
            }
        }
    }
    out
}

/// Q7: groups (singletons included) whose centre (mean of member centres) lies in the slab,
/// exactly: `x0·|g| <= Σ cx < (x1 + 1)·|g|`, likewise for y.
///
/// # Errors
/// Storage failures.
pub fn q7(ctx: &Context, dir: &Path, slab: &IBox) -> Result<Q7Result> {
    let mut groups = read_groups_meeting(ctx, dir, (slab.x0, slab.x1), (slab.y0, slab.y1))?;
    groups.retain(|g| {
        let n = i128::try_from(g.members.len()).unwrap_or(i128::MAX);
        let (sx, sy) = g.center_sums();
        let inside =
            |s: i64, lo: i64, hi: i64| i128::from(lo) * n <= i128::from(s) && i128::from(s) < i128::from(hi + 1) * n;
        inside(sx, slab.x0, slab.x1) && inside(sy, slab.y0, slab.y1)
    });
    Ok(Q7Result {
        count: groups.len() as u64,
        singletons: groups.iter().filter(|g| g.members.len() == 1).count() as u64,
        keys_sha256: groups_sha256(groups.iter().map(Group::key).collect()),
    })
}

/// Q8's selection: groups whose trajectory (member centres in (t, id) order; a point for one
/// member) meets the slab.
///
/// # Errors
/// Storage failures.
pub fn q8_groups(ctx: &Context, dir: &Path, slab: &IBox) -> Result<Vec<Group>> {
    let mut groups = read_groups_meeting(ctx, dir, (slab.x0, slab.x1), (slab.y0, slab.y1))?;
    groups.retain(|g| {
        let pts: Vec<Pt> = g.members.iter().map(|m| [i64::from(m.cx), i64::from(m.cy)]).collect();
        polyline_meets_box(&pts, slab)
    });
    Ok(groups)
}

/// Q9's selection: with t1 < t2 < ... the distinct member times of a group, the closed convex
/// hull of the polygon vertices of the members at tk and tk+1, for each k; a group with one
/// distinct time uses its members' polygons. Groups where one of them meets the slab (region
/// test as Q5). Candidates come from [`read_groups_meeting`]; a (tk, tk+1) pair whose members'
/// bbox union misses the slab is skipped; the polygons of the members still needed are read in
/// one box read of the observations (all times).
///
/// # Errors
/// Storage failures, a member not stored.
pub fn q9_groups(ctx: &Context, dir: &Path, slab: &IBox) -> Result<Vec<Group>> {
    let candidates = read_groups_meeting(ctx, dir, (slab.x0, slab.x1), (slab.y0, slab.y1))?;
    // Per candidate, the runs of members per distinct time, and the pieces to test: ranges of
    // member indices (one time's members for a single-time group, else two consecutive times).
    let mut pieces: Vec<(usize, std::ops::Range<usize>, bool)> = Vec::new(); // (group, members, hull)
    for (gi, g) in candidates.iter().enumerate() {
        let mut starts = vec![0];
        for (i, w) in g.members.windows(2).enumerate() {
            if w[1].t != w[0].t {
                starts.push(i + 1);
            }
        }
        starts.push(g.members.len());
        if starts.len() == 2 {
            pieces.push((gi, 0..g.members.len(), false));
        } else {
            for k in 0..starts.len() - 2 {
                pieces.push((gi, starts[k]..starts[k + 2], true));
            }
        }
    }
    let meets_bboxes = |g: &Group, r: &std::ops::Range<usize>| {
        g.members[r.clone()].iter().any(|m| {
            let b = m.bbox.map(i64::from);
            IBox { x0: b[0], y0: b[1], x1: b[2], y1: b[3] }.meets(slab)
        })
    };
    pieces.retain(|(gi, r, hull)| {
        let g = &candidates[*gi];
        if *hull {
            // The hull lies in the box of the members' bboxes.
            let ms = &g.members[r.clone()];
            let u = IBox {
                x0: ms.iter().map(|m| i64::from(m.bbox[0])).min().unwrap_or(0),
                y0: ms.iter().map(|m| i64::from(m.bbox[1])).min().unwrap_or(0),
                x1: ms.iter().map(|m| i64::from(m.bbox[2])).max().unwrap_or(-1),
                y1: ms.iter().map(|m| i64::from(m.bbox[3])).max().unwrap_or(-1),
            };
            u.meets(slab)
        } else {
            meets_bboxes(g, r)
        }
    });
    // Polygons of the members of the remaining pieces: one read of the box of their centres.
    let mut need: Vec<(i64, i64, i64)> = Vec::new(); // (id, cx, cy)
    for (gi, r, _) in &pieces {
        for m in &candidates[*gi].members[r.clone()] {
            need.push((m.id, m.cx.into(), m.cy.into()));
        }
    }
    let mut polygons: BTreeMap<i64, Vec<Pt>> = BTreeMap::new();
    if !need.is_empty() {
        let bx = (need.iter().map(|n| n.1).min().unwrap_or(0), need.iter().map(|n| n.1).max().unwrap_or(0));
        let by = (need.iter().map(|n| n.2).min().unwrap_or(0), need.iter().map(|n| n.2).max().unwrap_or(0));
        let all = ObsBox { cx: bx, cy: by, ..ObsBox::all() };
        let ids: std::collections::BTreeSet<i64> = need.iter().map(|n| n.0).collect();
        for o in read_observations(ctx, dir.join(OBSERVATIONS), &all)? {
            if ids.contains(&o.id) {
                polygons.insert(o.id, polygon(&o));
            }
        }
        if let Some(missing) = ids.iter().find(|id| !polygons.contains_key(id)) {
            anyhow::bail!("observation {missing} of a group is not in the observations array");
        }
    }
    let mut selected = vec![false; candidates.len()];
    for (gi, r, hull) in pieces {
        if selected[gi] {
            continue;
        }
        let ms = &candidates[gi].members[r];
        let hit = if hull {
            let pts: Vec<Pt> = ms.iter().flat_map(|m| polygons[&m.id].iter().copied()).collect();
            region_meets_box(&convex_hull(&pts), slab)
        } else {
            ms.iter().any(|m| region_meets_box(&polygons[&m.id], slab))
        };
        selected[gi] = hit;
    }
    Ok(candidates.into_iter().zip(selected).filter_map(|(g, s)| s.then_some(g)).collect())
}

/// The member observations of `groups`, each once, sorted by (t, cx, cy, pixelSum): the owners
/// of Q8/Q9's output windows.
pub fn window_owners(groups: &[Group]) -> Vec<WindowOwner> {
    let mut by_id: BTreeMap<i64, WindowOwner> = BTreeMap::new();
    for m in groups.iter().flat_map(|g| &g.members) {
        by_id.insert(m.id, WindowOwner { t: m.t, cx: m.cx.into(), cy: m.cy.into(), pixel_sum: m.pixel_sum });
    }
    let mut owners: Vec<WindowOwner> = by_id.into_values().collect();
    owners.sort_unstable();
    owners
}

#[cfg(test)]
mod tests {
    use super::dense_windows;
    use proptest::prelude::*;

    /// Every window, every point: the definition.
    fn brute(points: &[(usize, usize)], u: usize, d: usize, min: u32) -> Vec<(usize, usize, u32)> {
        let mut out = Vec::new();
        for b in 0..(u + 1).saturating_sub(d) {
            for a in 0..(u + 1).saturating_sub(d) {
                let c = points.iter().filter(|&&(y, x)| (b..b + d).contains(&y) && (a..a + d).contains(&x)).count();
                if d > 0 && c as u32 >= min {
                    out.push((a, b, c as u32));
                }
            }
        }
        out.sort_unstable();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// The sweep finds exactly the windows the definition does, with their counts, for
        /// clustered and repeated points, windows as wide as the square, and thresholds from 0.
        #[test]
        fn sweep_is_the_definition(
            u in 1usize..40,
            d in 0usize..12,
            min in 0u32..6,
            raw in proptest::collection::vec((0usize..1000, 0usize..1000), 0..80),
            cluster in any::<bool>(),
        ) {
            let span = if cluster { u.min(6) } else { u };
            let points: Vec<(usize, usize)> = raw.iter().map(|&(y, x)| (y % span, x % span)).collect();
            let mut got = dense_windows(points.clone(), u, d, min);
            got.sort_unstable();
            prop_assert_eq!(got, brute(&points, u, d, min));
        }
    }

    #[test]
    fn windows_at_the_edges_and_repeated_points() {
        // Three points on one cell in the corner: the one window of side 2 holding it at (0, 0).
        let p = vec![(0, 0), (0, 0), (0, 0), (4, 4)];
        let mut got = dense_windows(p, 5, 2, 3);
        got.sort_unstable();
        assert_eq!(got, vec![(0, 0, 3)]);
        // A window as wide as the square holds every point.
        assert_eq!(dense_windows(vec![(0, 0), (4, 4)], 5, 5, 2), vec![(0, 0, 2)]);
        assert!(dense_windows(vec![(0, 0)], 5, 6, 0).is_empty());
    }
}
