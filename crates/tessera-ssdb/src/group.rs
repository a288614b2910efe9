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
//! Only the window is held: an observation older than `t - 20` can join or found no group, and
//! a group whose newest member is older than that can gain none, so feeding image `t` closes
//! them (see [`Closed`]); the caller stores and forgets them.
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

/// What a [`Grouper`] has closed: groups that can gain no member any more (their newest member
/// is more than [`T_MATCH`] images old) and observations that can join or found no group any
/// more. Taken with [`Grouper::take_closed`], e.g. once a cycle, to be stored and forgotten.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Closed {
    /// Closed groups with their final ids (creation order), in closing order.
    pub groups: Vec<Group>,
    /// `(observation id, ascending group ids)` of closed observations that are in created groups.
    pub memberships: Vec<(i64, Vec<i64>)>,
    /// Closed observations in no group, in id order: the singletons. Their group ids are only
    /// known at the end: [`Grouper::groups_created`] + their rank among all singletons.
    pub singletons: Vec<Member>,
}

impl Closed {
    /// Whether nothing was closed.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.memberships.is_empty() && self.singletons.is_empty()
    }
}

/// A group that can still gain members.
struct OpenGroup {
    members: Vec<Member>,
}

/// Incremental F2: feed images in time order with [`Grouper::push_image`], take what is closed
/// with [`Grouper::take_closed`] as it goes, and end with [`Grouper::close_all`] (or
/// [`Grouper::finish`] for everything as one [`GroupSet`]).
///
/// Memory is bounded by the window: the observations of the last 20 images and the groups with
/// a member there; older ones are moved to the [`Closed`] outbox as soon as an image makes them
/// unreachable.
pub struct Grouper {
    d3: D3,
    grid: i64,
    /// The images in the window: `(t, index of its first observation)`.
    window: VecDeque<(i64, u32)>,
    /// Grid cell -> the window's observations in it, by index.
    cells: CellMap,
    /// The largest match distance, `floor(sqrt(20·p/q))`.
    radius: i64,
    /// Index of `obs[0]`: observations are numbered 0, 1, ... in feeding order.
    obs_base: u32,
    /// The window's observations.
    obs: VecDeque<Member>,
    /// Groups of each window observation (group indices = creation order), ascending.
    obs_groups: VecDeque<Vec<u32>>,
    /// The open groups by index; their members in join order = id order.
    groups: HashMap<u32, OpenGroup, BuildHasherDefault<CellHasher>>,
    /// Groups created so far.
    created: u32,
    last_id: Option<i64>,
    last_t: Option<i64>,
    closed: Closed,
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
            radius: d3.radius(T_MATCH),
            obs_base: 0,
            obs: VecDeque::new(),
            obs_groups: VecDeque::new(),
            groups: HashMap::default(),
            created: 0,
            last_id: None,
            last_t: None,
            closed: Closed::default(),
        }
    }

    /// Observations fed so far.
    pub fn observations(&self) -> usize {
        self.obs_base as usize + self.obs.len()
    }

    /// Groups created so far (singletons not counted).
    pub fn groups_created(&self) -> usize {
        self.created as usize
    }

    /// Observations held: those of the images in the window.
    pub fn window_observations(&self) -> usize {
        self.obs.len()
    }

    /// Groups held open: those with a member in the window.
    pub fn open_groups(&self) -> usize {
        self.groups.len()
    }

    /// Groups the observations of image `t` (in id order, ids above all earlier ones). Closes
    /// what image `t` can no longer reach: observations and groups older than `t - 20`.
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
        let mut last_id = self.last_id;
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
        if self.observations() + obs.len() >= u32::MAX as usize {
            return Err(GroupError::BadObservation {
                id: obs.first().map_or(0, |o| o.id),
                obs_t: t,
                t,
                detail: "more than 2^32 - 1 observations",
            });
        }
        self.last_t = Some(t);
        self.last_id = last_id;
        while self.window.front().is_some_and(|w| t - w.0 > T_MATCH) {
            self.window.pop_front();
            let end = self.window.front().map_or(self.end_index(), |w| w.1);
            self.close_before(end);
        }
        self.close_groups(|newest| t - newest > T_MATCH);
        let first = self.end_index();
        let mut matches: Vec<u32> = Vec::new();
        let mut collected: Vec<u32> = Vec::new();
        for o in obs {
            let n = self.end_index();
            let member = Member::of(o);
            self.obs.push_back(member);
            self.obs_groups.push_back(Vec::new());
            self.find_matches(o, &mut matches);
            collected.clear();
            for &e in &matches {
                let e = (e - self.obs_base) as usize;
                if self.obs_groups[e].is_empty() {
                    let g = self.created;
                    self.created += 1;
                    self.groups.insert(g, OpenGroup { members: vec![self.obs[e]] });
                    self.obs_groups[e].push(g);
                    collected.push(g);
                } else {
                    collected.extend_from_slice(&self.obs_groups[e]);
                }
            }
            // Join each collected group once (the order of joining changes no group: n is
            // appended to each).
            collected.sort_unstable();
            collected.dedup();
            for g in &collected {
                if let Some(open) = self.groups.get_mut(g) {
                    open.members.push(member);
                }
            }
            let i = (n - self.obs_base) as usize;
            self.obs_groups[i].extend_from_slice(&collected);
        }
        for i in first..self.end_index() {
            let cell = self.cell_of(&self.obs[(i - self.obs_base) as usize]);
            self.cells.entry(cell).or_default().push(i);
        }
        self.window.push_back((t, first));
        Ok(())
    }

    /// The index the next observation gets.
    fn end_index(&self) -> u32 {
        self.obs_base + self.obs.len() as u32
    }

    fn cell_of(&self, m: &Member) -> (i64, i64) {
        (i64::from(m.cy).div_euclid(self.grid), i64::from(m.cx).div_euclid(self.grid))
    }

    /// Closes the observations with index below `end` (they left the window): out of the cells,
    /// into the outbox as memberships or singletons.
    fn close_before(&mut self, end: u32) {
        while self.obs_base < end {
            let (Some(m), Some(gs)) = (self.obs.pop_front(), self.obs_groups.pop_front()) else { break };
            let cell = self.cell_of(&m);
            if let Some(list) = self.cells.get_mut(&cell) {
                let k = list.partition_point(|&j| j < end);
                list.drain(..k);
                if list.is_empty() {
                    self.cells.remove(&cell);
                }
            }
            if gs.is_empty() {
                self.closed.singletons.push(m);
            } else {
                self.closed.memberships.push((m.id, gs.iter().map(|&g| i64::from(g) + 1).collect()));
            }
            self.obs_base += 1;
        }
    }

    /// Closes the open groups whose newest member's time satisfies `done`, in creation order.
    fn close_groups(&mut self, done: impl Fn(i64) -> bool) {
        let mut ids: Vec<u32> =
            self.groups.iter().filter(|(_, g)| g.members.last().is_none_or(|m| done(m.t))).map(|(&g, _)| g).collect();
        ids.sort_unstable();
        for g in ids {
            if let Some(open) = self.groups.remove(&g) {
                self.closed.groups.push(Group { id: i64::from(g) + 1, members: open.members });
            }
        }
    }

    /// Closes everything (no more images come).
    pub fn close_all(&mut self) {
        self.window.clear();
        self.close_before(self.end_index());
        self.close_groups(|_| true);
    }

    /// What was closed since the last call.
    pub fn take_closed(&mut self) -> Closed {
        std::mem::take(&mut self.closed)
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
                    let m = &self.obs[(i - self.obs_base) as usize];
                    let dt = o.t - m.t;
                    if (1..=T_MATCH).contains(&dt) && self.d3.matches(i64::from(m.cx) - cx, i64::from(m.cy) - cy, dt) {
                        out.push(i);
                    }
                }
            }
        }
        out.sort_unstable();
    }

    /// All groups not taken with [`Grouper::take_closed`]: the created ones in creation order,
    /// then a singleton for every observation in no group, in id order, with ids following the
    /// created groups'.
    pub fn finish(mut self) -> GroupSet {
        self.close_all();
        let closed = self.take_closed();
        let mut groups = closed.groups;
        groups.sort_unstable_by_key(|g| g.id);
        let created = i64::from(self.created);
        groups.extend(
            closed
                .singletons
                .into_iter()
                .enumerate()
                .map(|(i, m)| Group { id: created + i as i64 + 1, members: vec![m] }),
        );
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
