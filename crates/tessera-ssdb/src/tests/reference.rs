//! Straightforward implementations of SSDB.md §2 and §3, written from the text without sharing
//! code with the crate: a BFS over 8-neighbours per component, sums over each component's cell
//! list, a Moore trace over a set of the component's cells, and grouping by testing every pair.

use std::collections::{HashMap, HashSet, VecDeque};

/// One component, local coordinates, before the drop rule.
#[derive(Debug, Clone)]
pub(crate) struct RefObject {
    pub cells: Vec<(usize, usize)>, // (x, y)
    pub pixel_sum: i64,
    pub cx: i64,
    pub cy: i64,
    pub avg_dist: f64,
    pub bbox: [i64; 4],
    pub polygon: Vec<(i64, i64)>,
}

/// All 8-connected components of cells with `pix >= th`, in raster order of their first cell.
pub(crate) fn components(pix: &[i32], w: usize, h: usize, th: i32) -> Vec<RefObject> {
    let mut seen = vec![false; w * h];
    let mut out = Vec::new();
    for y in 0..h {
        for x in 0..w {
            if seen[y * w + x] || pix[y * w + x] < th {
                continue;
            }
            let mut cells = Vec::new();
            let mut queue = VecDeque::from([(x, y)]);
            seen[y * w + x] = true;
            while let Some((cx, cy)) = queue.pop_front() {
                cells.push((cx, cy));
                for dy in -1i64..=1 {
                    for dx in -1i64..=1 {
                        let (nx, ny) = (cx as i64 + dx, cy as i64 + dy);
                        if nx < 0 || ny < 0 || nx >= w as i64 || ny >= h as i64 {
                            continue;
                        }
                        let i = ny as usize * w + nx as usize;
                        if !seen[i] && pix[i] >= th {
                            seen[i] = true;
                            queue.push_back((nx as usize, ny as usize));
                        }
                    }
                }
            }
            out.push(measure(cells, pix, w));
        }
    }
    out
}

fn measure(mut cells: Vec<(usize, usize)>, pix: &[i32], w: usize) -> RefObject {
    cells.sort_by_key(|&(x, y)| (y, x));
    let v = |&(x, y): &(usize, usize)| i128::from(pix[y * w + x]);
    let s: i128 = cells.iter().map(v).sum();
    let sx: i128 = cells.iter().map(|c| v(c) * c.0 as i128).sum();
    let sy: i128 = cells.iter().map(|c| v(c) * c.1 as i128).sum();
    let (mx, my) = (sx as f64 / s as f64, sy as f64 / s as f64);
    let dist: f64 =
        cells.iter().map(|c| v(c) as f64 * ((c.0 as f64 - mx).powi(2) + (c.1 as f64 - my).powi(2)).sqrt()).sum();
    let xs = cells.iter().map(|c| c.0 as i64);
    let ys = cells.iter().map(|c| c.1 as i64);
    let bbox = [xs.clone().min().unwrap(), ys.clone().min().unwrap(), xs.max().unwrap(), ys.max().unwrap()];
    let set: HashSet<(i64, i64)> = cells.iter().map(|&(x, y)| (x as i64, y as i64)).collect();
    let polygon = moore(&set);
    RefObject {
        pixel_sum: s as i64,
        cx: (sx / s) as i64,
        cy: (sy / s) as i64,
        avg_dist: dist / s as f64,
        bbox,
        polygon,
        cells,
    }
}

/// The Moore-neighbour trace of SSDB.md §2 over a set of cells.
pub(crate) fn moore(set: &HashSet<(i64, i64)>) -> Vec<(i64, i64)> {
    const D: [(i64, i64); 8] = [(0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1)];
    let s0 = *set.iter().min().unwrap(); // smallest x, then smallest y
    let next = |c: (i64, i64), d: usize| -> Option<(usize, (i64, i64))> {
        let e = if d.is_multiple_of(2) { (d + 8 - 1) % 8 } else { (d + 8 - 2) % 8 };
        for i in 0..8 {
            let dir = (e + i) % 8;
            let n = (c.0 + D[dir].0, c.1 + D[dir].1);
            if set.contains(&n) {
                return Some((dir, n));
            }
        }
        None
    };
    let mut b = vec![s0];
    let Some((d_first, c1)) = next(s0, 7) else { return b };
    let (mut d, mut c) = (d_first, c1);
    for _ in 0..100 * set.len() + 100 {
        if c == s0 && next(c, d).unwrap().0 == d_first {
            return b;
        }
        b.push(c);
        let (nd, n) = next(c, d).unwrap();
        d = nd;
        c = n;
    }
    panic!("the trace did not stop");
}

/// The components kept by the drop rule.
pub(crate) fn cook(pix: &[i32], w: usize, h: usize, th: i32, d1: u32, d2: u32) -> Vec<RefObject> {
    components(pix, w, h, th)
        .into_iter()
        .filter(|o| {
            o.polygon.len() <= d2 as usize
                && o.bbox[2] - o.bbox[0] < i64::from(d1)
                && o.bbox[3] - o.bbox[1] < i64::from(d1)
        })
        .collect()
}

/// An observation for grouping: (id, t, cx, cy, pixelSum).
pub(crate) type RefObs = (i64, i64, i64, i64, i64);

/// F2 by testing every earlier observation: returns the groups as sorted member-id lists, in
/// creation order, then singletons.
pub(crate) fn group(obs: &[RefObs], p: i64, q: i64) -> Vec<Vec<i64>> {
    let mut groups: Vec<Vec<i64>> = Vec::new();
    let mut of: HashMap<i64, Vec<usize>> = HashMap::new();
    let mut sorted = obs.to_vec();
    sorted.sort_by_key(|o| (o.1, o.0));
    for n in &sorted {
        let mut collected: Vec<usize> = Vec::new();
        for e in &sorted {
            let dt = n.1 - e.1;
            let d2 = (n.2 - e.2).pow(2) + (n.3 - e.3).pow(2);
            if !(1..=20).contains(&dt) || q * d2 > p * dt {
                continue;
            }
            match of.get(&e.0) {
                Some(gs) if !gs.is_empty() => collected.extend(gs.iter().copied()),
                _ => {
                    groups.push(vec![e.0]);
                    of.entry(e.0).or_default().push(groups.len() - 1);
                    collected.push(groups.len() - 1);
                }
            }
        }
        let mut joined = HashSet::new();
        for g in collected {
            if joined.insert(g) {
                groups[g].push(n.0);
                of.entry(n.0).or_default().push(g);
            }
        }
    }
    for o in &sorted {
        if of.get(&o.0).is_none_or(|g| g.is_empty()) {
            groups.push(vec![o.0]);
        }
    }
    for g in &mut groups {
        g.sort_unstable();
    }
    groups
}
