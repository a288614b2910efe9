//! Grouping F2 (SSDB.md §3), incremental: a [`Grouper`] is fed the observations image by image in
//! time order and matches each new observation against the images `t-20..t-1` only.
//!
//! Observation n (image t2) matches e (image t1) iff `1 <= t2 - t1 <= 20` and
//! `q·d² <= p·(t2 - t1)` on the integer centres, with `D3 = p/q` in lowest terms. For n, its
//! matches e are taken in id order: an e in groups contributes all its groups, an e in none
//! becomes a new group {e}; n then joins each collected group once. Groups change at once, so
//! later observations of the same image see them. At the end every observation in no group is
//! a singleton group; group ids are creation order, then singletons in id order.
//!
//! The last 20 images' observations are kept in a hashed grid of side
//! `g = max(1, floor(sqrt(20·p/q)))` (the largest match distance): a new observation looks at
//! the at most 3 x 3 cells its match disc meets, not at all pairs. Each cell lists its
//! observations in id order; an image leaving the window is removed from the cells it is in.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;

use serde::{Deserialize, Serialize};

use crate::keys::{group_key, key_of};
use crate::observation::Observation;

/// T: observations match images at most this many steps back.
pub const T_MATCH: i64 = 20;

/// D3 as an exact rational `p/q` in lowest terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct D3 {
    /// Numerator.
    pub p: u64,
    /// Denominator, at least 1.
    pub q: u64,
}

/// Bad grouping input. Nothing is changed when one of these is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GroupError {
    /// D3 given as `p/0` or an unparsable decimal.
    #[error("bad D3 {text:?}: {detail}")]
    BadD3 {
        /// What was given.
        text: String,
        /// What is wrong.
        detail: &'static str,
    },
    /// Images must come in increasing time order.
    #[error("image t = {t} comes after image t = {last}; images must be fed in increasing time order")]
    TimeOrder {
        /// The image fed.
        t: i64,
        /// The last image fed before.
        last: i64,
    },
    /// An observation of the wrong image, or ids not increasing.
    #[error("observation id {id} (t = {obs_t}) fed with image t = {t}: {detail}")]
    BadObservation {
        /// Its id.
        id: i64,
        /// Its time.
        obs_t: i64,
        /// The image being fed.
        t: i64,
        /// What is wrong.
        detail: &'static str,
    },
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

impl D3 {
    /// `p/q`, reduced to lowest terms.
    ///
    /// # Errors
    /// `q == 0`.
    pub fn new(p: u64, q: u64) -> Result<Self, GroupError> {
        if q == 0 {
            return Err(GroupError::BadD3 { text: format!("{p}/{q}"), detail: "the denominator is 0" });
        }
        let g = gcd(p, q).max(1);
        Ok(Self { p: p / g, q: q / g })
    }

    /// A non-negative decimal such as `"0.1"` (medium: 1/10), exactly.
    ///
    /// # Errors
    /// Not a plain decimal, or more than 18 digits.
    pub fn parse(text: &str) -> Result<Self, GroupError> {
        let bad = |detail| GroupError::BadD3 { text: text.to_string(), detail };
        let (int, frac) = text.split_once('.').unwrap_or((text, ""));
        if int.is_empty() && frac.is_empty() {
            return Err(bad("empty"));
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(bad("not a non-negative decimal number"));
        }
        if int.len() + frac.len() > 18 {
            return Err(bad("more than 18 digits"));
        }
        let digits = format!("{int}{frac}");
        let p: u64 = if digits.is_empty() { 0 } else { digits.parse().map_err(|_| bad("not a number"))? };
        let q = 10u64.pow(frac.len() as u32);
        Self::new(p, q)
    }

    /// The exact test `q·d² <= p·dt`.
    #[inline]
    pub fn matches(self, dx: i64, dy: i64, dt: i64) -> bool {
        let d2 = i128::from(dx) * i128::from(dx) + i128::from(dy) * i128::from(dy);
        i128::from(self.q) * d2 <= i128::from(self.p) * i128::from(dt)
    }

    /// The largest integer distance r with `r² <= p·dt/q`.
    fn radius(self, dt: i64) -> i64 {
        let bound = u128::from(self.p) * dt.max(0) as u128 / u128::from(self.q); // floor(p·dt/q)
        let mut r = (bound as f64).sqrt() as u128;
        while r * r > bound {
            r -= 1;
        }
        while (r + 1) * (r + 1) <= bound {
            r += 1;
        }
        i64::try_from(r).unwrap_or(i64::MAX / 4)
    }
}

/// What grouping keeps of an observation (and of a group member).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Observation id.
    pub id: i64,
    /// Image time.
    pub t: i64,
    /// Centre x (world).
    pub cx: i32,
    /// Centre y (world).
    pub cy: i32,
    /// pixelSum.
    pub pixel_sum: i64,
    /// The observation's bbox `[xmin, ymin, xmax, ymax]` (for the groups' polygon extent).
    pub bbox: [i32; 4],
}

impl Member {
    /// What grouping keeps of `o`.
    pub fn of(o: &Observation) -> Self {
        Self { id: o.id, t: o.t, cx: o.cx, cy: o.cy, pixel_sum: o.pixel_sum, bbox: o.bbox }
    }

    /// The observation's key `"t,cx,cy,pixelSum"`.
    pub fn key(&self) -> String {
        key_of(self.t, self.cx, self.cy, self.pixel_sum)
    }
}

/// A group: an id and its members ordered by (t, id), which is the trajectory's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// 1, 2, ...: creation order, then singletons in observation id order.
    pub id: i64,
    /// The members, by (t, id).
    pub members: Vec<Member>,
}

impl Group {
    /// The group's key: its member keys, sorted, joined with `;`.
    pub fn key(&self) -> String {
        group_key(self.members.iter().map(Member::key).collect())
    }

    /// `(Σ cx, Σ cy)`: the centre is this divided by the member count.
    pub fn center_sums(&self) -> (i64, i64) {
        self.members.iter().fold((0, 0), |(x, y), m| (x + i64::from(m.cx), y + i64::from(m.cy)))
    }

    /// The bounding box `[xmin, ymin, xmax, ymax]` of the member centres (the trajectory's).
    pub fn trajectory_bbox(&self) -> [i32; 4] {
        self.members.iter().fold([i32::MAX, i32::MAX, i32::MIN, i32::MIN], |b, m| {
            [b[0].min(m.cx), b[1].min(m.cy), b[2].max(m.cx), b[3].max(m.cy)]
        })
    }

    /// The union of the members' observation bboxes (holds all their polygons).
    pub fn polygon_bbox(&self) -> [i32; 4] {
        self.members.iter().fold([i32::MAX, i32::MAX, i32::MIN, i32::MIN], |b, m| {
            [b[0].min(m.bbox[0]), b[1].min(m.bbox[1]), b[2].max(m.bbox[2]), b[3].max(m.bbox[3])]
        })
    }
}

/// The result of a grouping: every group, singletons last.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupSet {
    /// Groups in id order (`groups[i].id == i + 1`).
    pub groups: Vec<Group>,
}

impl GroupSet {
    /// Member to groups: `(observation id, group ids ascending)` for every observation, by id.
    pub fn memberships(&self) -> Vec<(i64, Vec<i64>)> {
        let mut pairs: Vec<(i64, i64)> =
            self.groups.iter().flat_map(|g| g.members.iter().map(move |m| (m.id, g.id))).collect();
        pairs.sort_unstable();
        let mut out: Vec<(i64, Vec<i64>)> = Vec::new();
        for (o, g) in pairs {
            match out.last_mut() {
                Some((last, gs)) if *last == o => gs.push(g),
                _ => out.push((o, vec![g])),
            }
        }
        out
    }
}

/// A fast hasher for grid cells (the keys are not chosen by an adversary: they are centres).
#[derive(Default)]
struct CellHasher(u64);

impl std::hash::Hasher for CellHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(26) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type CellMap = HashMap<(i64, i64), Vec<u32>, BuildHasherDefault<CellHasher>>;

/// Incremental F2: feed images in time order with [`Grouper::push_image`], then
/// [`Grouper::finish`].
pub struct Grouper {
    d3: D3,
    grid: i64,
    /// The images in the window: `(t, index of its first observation)`.
    window: VecDeque<(i64, u32)>,
    /// Grid cell -> the window's observations in it, by index.
    cells: CellMap,
    /// Index of the first observation still in `cells`.
    window_start: u32,
    /// The largest match distance, `floor(sqrt(20·p/q))`.
    radius: i64,
    obs: Vec<Member>,
    /// Groups of each observation (indices into `groups`).
    obs_groups: Vec<Vec<u32>>,
    /// Members of each group (indices into `obs`), in join order = id order.
    groups: Vec<Vec<u32>>,
    last_t: Option<i64>,
}

impl Grouper {
    /// A grouper with the matching distance D3.
    pub fn new(d3: D3) -> Self {
        let grid = d3.radius(T_MATCH).max(1);
        Self {
            d3,
            grid,
            window: VecDeque::new(),
            cells: CellMap::default(),
            window_start: 0,
            radius: d3.radius(T_MATCH),
            obs: Vec::new(),
            obs_groups: Vec::new(),
            groups: Vec::new(),
            last_t: None,
        }
    }

    /// Observations fed so far.
    pub fn observations(&self) -> usize {
        self.obs.len()
    }

    /// Groups created so far (singletons not counted until [`Grouper::finish`]).
    pub fn groups_created(&self) -> usize {
        self.groups.len()
    }

    /// Groups the observations of image `t` (in id order, ids above all earlier ones).
    ///
    /// # Errors
    /// Images out of time order, observations of another image, ids not increasing; nothing is
    /// changed then.
    pub fn push_image(&mut self, t: i64, obs: &[Observation]) -> Result<(), GroupError> {
        if let Some(last) = self.last_t {
            if t <= last {
                return Err(GroupError::TimeOrder { t, last });
            }
        }
        let mut last_id = self.obs.last().map(|m| m.id);
        for o in obs {
            let bad = |detail| GroupError::BadObservation { id: o.id, obs_t: o.t, t, detail };
            if o.t != t {
                return Err(bad("its time is not the image's"));
            }
            if last_id.is_some_and(|l| o.id <= l) {
                return Err(bad("ids must increase in feeding order"));
            }
            last_id = Some(o.id);
        }
        if self.obs.len() + obs.len() >= u32::MAX as usize {
            return Err(GroupError::BadObservation {
                id: obs.first().map_or(0, |o| o.id),
                obs_t: t,
                t,
                detail: "more than 2^32 - 1 observations",
            });
        }
        self.last_t = Some(t);
        while self.window.front().is_some_and(|w| t - w.0 > T_MATCH) {
            self.window.pop_front();
            let end = self.window.front().map_or(self.obs.len() as u32, |w| w.1);
            self.forget_before(end);
        }
        let first = self.obs.len() as u32;
        let mut matches: Vec<u32> = Vec::new();
        let mut collected: Vec<u32> = Vec::new();
        for o in obs {
            let n = self.obs.len() as u32;
            self.obs.push(Member::of(o));
            self.obs_groups.push(Vec::new());
            self.find_matches(o, &mut matches);
            collected.clear();
            for &e in &matches {
                if self.obs_groups[e as usize].is_empty() {
                    let g = self.groups.len() as u32;
                    self.groups.push(vec![e]);
                    self.obs_groups[e as usize].push(g);
                    collected.push(g);
                } else {
                    collected.extend_from_slice(&self.obs_groups[e as usize]);
                }
            }
            // Join each collected group once (the order of joining changes no group: n is
            // appended to each).
            collected.sort_unstable();
            collected.dedup();
            for &g in &collected {
                self.groups[g as usize].push(n);
            }
            self.obs_groups[n as usize].extend_from_slice(&collected);
        }
        for i in first..self.obs.len() as u32 {
            let cell = self.cell_of(&self.obs[i as usize]);
            self.cells.entry(cell).or_default().push(i);
        }
        self.window.push_back((t, first));
        Ok(())
    }

    fn cell_of(&self, m: &Member) -> (i64, i64) {
        (i64::from(m.cy).div_euclid(self.grid), i64::from(m.cx).div_euclid(self.grid))
    }

    /// Removes the observations with index below `end` from the cells (they left the window).
    fn forget_before(&mut self, end: u32) {
        let start = self.window_start;
        for i in start..end {
            let cell = self.cell_of(&self.obs[i as usize]);
            if let Some(list) = self.cells.get_mut(&cell) {
                let k = list.partition_point(|&j| j < end);
                list.drain(..k);
                if list.is_empty() {
                    self.cells.remove(&cell);
                }
            }
        }
        self.window_start = end;
    }

    /// Groups observations of one or more images (as [`Grouper::push_image`] each image): `obs`
    /// sorted by time, then id, e.g. one cycle's.
    ///
    /// # Errors
    /// As [`Grouper::push_image`]; the images before the bad one are grouped.
    pub fn push_images(&mut self, obs: &[Observation]) -> Result<(), GroupError> {
        let mut i = 0;
        while i < obs.len() {
            let t = obs[i].t;
            let j = i + obs[i..].iter().take_while(|o| o.t == t).count();
            self.push_image(t, &obs[i..j])?;
            i = j;
        }
        Ok(())
    }

    /// The observations of the window matching `o`, in id order (= index order).
    fn find_matches(&self, o: &Observation, out: &mut Vec<u32>) {
        out.clear();
        let (g, r) = (self.grid, self.radius);
        let (cx, cy) = (i64::from(o.cx), i64::from(o.cy));
        let (gx0, gx1) = ((cx - r).div_euclid(g), (cx + r).div_euclid(g));
        for gy in (cy - r).div_euclid(g)..=(cy + r).div_euclid(g) {
            for gx in gx0..=gx1 {
                let Some(list) = self.cells.get(&(gy, gx)) else { continue };
                for &i in list {
                    let m = &self.obs[i as usize];
                    let dt = o.t - m.t;
                    if (1..=T_MATCH).contains(&dt) && self.d3.matches(i64::from(m.cx) - cx, i64::from(m.cy) - cy, dt) {
                        out.push(i);
                    }
                }
            }
        }
        out.sort_unstable();
    }

    /// All groups: the created ones in creation order, then a singleton for every observation in
    /// no group, in id order.
    pub fn finish(self) -> GroupSet {
        let mut groups: Vec<Group> = self
            .groups
            .iter()
            .map(|members| Group { id: 0, members: members.iter().map(|&i| self.obs[i as usize]).collect() })
            .collect();
        for (i, gs) in self.obs_groups.iter().enumerate() {
            if gs.is_empty() {
                groups.push(Group { id: 0, members: vec![self.obs[i]] });
            }
        }
        for (i, g) in groups.iter_mut().enumerate() {
            g.id = i as i64 + 1;
        }
        GroupSet { groups }
    }
}

/// Groups all `obs` (sorted by id, in time order) at once: [`Grouper`] fed image by image.
///
/// # Errors
/// As [`Grouper::push_image`].
pub fn group_all(obs: &[Observation], d3: D3) -> Result<GroupSet, GroupError> {
    let mut g = Grouper::new(d3);
    g.push_images(obs)?;
    Ok(g.finish())
}
