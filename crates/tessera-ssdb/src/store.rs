//! Observations, groups and memberships in Tessera arrays (`docs/ssdb.md`, "Observations and
//! groups storage").
//!
//! - `observations` (sparse): int32 dimensions `t` (tile 20: one cycle), `cy`, `cx` (world
//!   centre, tiles of 1000); attributes `id`, `pixelSum` (int64), `avgDist` (float64), `bbox` (4 x int32),
//!   `polygon` (var-length int32, `x0 y0 x1 y1 ...`). Duplicates are allowed: two objects of one
//!   image can share a centre (an object inside another's hole). A cycle and a world box prune
//!   to the space tiles they meet; since a kept object lies within D1 of its centre, boxes of
//!   polygons are found by widening the centre range by D1 - 1.
//! - `groups` (sparse): dimensions `gy`, `gx` = the lower-left corner of the group's trajectory
//!   box (the box of its member centres), tiles of 1000; attributes `gid`, `sumCx`, `sumCy`
//!   (int64; the centre is these over the member count), `tbox` (trajectory box), `pbox` (union of
//!   the members' bboxes: holds all their polygons), `members` (var-length int64, 9 values per
//!   member in (t, id) order: t, id, cx, cy, pixelSum, bbox). A group is read whole from here:
//!   Q7-Q9 never scan the observations.
//! - `groups_meta` (dense, one cell): how far a group's `pbox` reaches right of / above and left
//!   of / below its key corner, so a query box turns into a key range, and counts.
//! - `memberships` (sparse): dimension `id` (observation); attribute `groups` (var-length int64,
//!   ascending group ids).

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use tessera::{
    Array, ArraySchema, ArrayType, AttrInput, Attribute, CellOrder, CellValNum, Context, CoordInput, Datatype,
    DimRange, Dimension, Filter, FilterPipeline, Layout, Mode, ReadResult, Subarray,
};

use crate::group::{Closed, Group, GroupSet, Member};
use crate::keys::{F2Summary, KeySorter};
use crate::observation::{cycle_of, Observation, IMAGES_PER_CYCLE};

/// Largest world coordinate the arrays hold (W = 10^6 fits; 2^20 - 1 keeps tile counts small).
pub const WORLD_MAX: i32 = (1 << 20) - 1;
/// Largest image time the arrays hold.
pub const TIME_MAX: i64 = (1 << 20) - 1;
/// Space-tile side of the world dimensions.
pub const WORLD_TILE: u64 = 1000;
/// Cells per data tile of the sparse arrays.
pub const CAPACITY: u64 = 4096;
/// Values stored per group member in `members`.
pub const MEMBER_VALUES: usize = 9;
/// Largest observation id.
pub const ID_MAX: i64 = (1 << 48) - 1;

/// Suggested name of the observations array inside a store directory.
pub const OBSERVATIONS: &str = "observations";
/// Name of the groups array.
pub const GROUPS: &str = "groups";
/// Name of the groups' one-cell summary array.
pub const GROUPS_META: &str = "groups_meta";
/// Name of the memberships array.
pub const MEMBERSHIPS: &str = "memberships";

/// A storage failure or stored data that does not decode.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The engine failed.
    #[error(transparent)]
    Tessera(#[from] tessera::Error),
    /// A value does not fit the arrays' domains.
    #[error("{what} = {value} is outside the stored domain [{lo}, {hi}]")]
    OutOfDomain {
        /// Which value.
        what: &'static str,
        /// The value.
        value: i64,
        /// Lowest allowed.
        lo: i64,
        /// Highest allowed.
        hi: i64,
    },
    /// Stored data that does not decode.
    #[error("array {array}: {detail}")]
    Corrupt {
        /// The array.
        array: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A spill file (groups or keys kept on disk while grouping) failed.
    #[error("spill folder {path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, StoreError>;

fn zstd() -> FilterPipeline {
    FilterPipeline::new(vec![Filter::ByteShuffle, Filter::Zstd { level: 3 }])
}

fn attr(name: &str, dt: Datatype, vals: CellValNum, filters: FilterPipeline) -> Attribute {
    let mut a = Attribute::new(name, dt);
    a.cell_val_num = vals;
    a.filters = filters;
    a
}

fn world_dim(name: &str) -> Dimension {
    Dimension::new(name, Datatype::Int32, (0, i128::from(WORLD_MAX)), WORLD_TILE)
}

/// The schema of an observations array.
///
/// # Errors
/// None in practice (the schema is fixed); engine validation errors are passed on.
pub fn observations_schema() -> Result<ArraySchema> {
    Ok(ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("t", Datatype::Int32, (0, i128::from(TIME_MAX)), IMAGES_PER_CYCLE as u64))
        .dim(world_dim("cy"))
        .dim(world_dim("cx"))
        .attr(attr(
            "id",
            Datatype::Int64,
            CellValNum::Fixed(1),
            FilterPipeline::new(vec![Filter::Delta, Filter::Zstd { level: 3 }]),
        ))
        .attr(attr("pixelSum", Datatype::Int64, CellValNum::Fixed(1), zstd()))
        .attr(attr("avgDist", Datatype::Float64, CellValNum::Fixed(1), zstd()))
        .attr(attr("bbox", Datatype::Int32, CellValNum::Fixed(4), zstd()))
        .attr(attr("polygon", Datatype::Int32, CellValNum::Var, zstd()))
        .cell_order(CellOrder::RowMajor)
        .tile_order(CellOrder::RowMajor)
        .capacity(CAPACITY)
        .allows_duplicates(true)
        .build()
        .map_err(tessera::Error::from)?)
}

/// Creates an empty observations array at `uri`.
///
/// # Errors
/// Storage failures, or an array already there.
pub fn create_observations(ctx: &Context, uri: impl AsRef<Path>) -> Result<()> {
    Array::create(ctx, uri, &observations_schema()?)?;
    Ok(())
}

fn in_domain(what: &'static str, value: i64, lo: i64, hi: i64) -> Result<()> {
    if value < lo || value > hi {
        return Err(StoreError::OutOfDomain { what, value, lo, hi });
    }
    Ok(())
}

/// Writes `obs` (e.g. one cycle's) as one fragment of the observations array at `uri`.
///
/// # Errors
/// Observations outside the domains (nothing is written then), storage failures.
pub fn write_observations(ctx: &Context, uri: impl AsRef<Path>, obs: &[Observation]) -> Result<()> {
    if obs.is_empty() {
        return Ok(());
    }
    let n = obs.len();
    let (mut t, mut cy, mut cx) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut id, mut ps, mut ad) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let mut bbox: Vec<i32> = Vec::with_capacity(4 * n);
    let mut poly: Vec<i32> = Vec::new();
    let mut offs: Vec<u64> = Vec::with_capacity(n);
    let w = i64::from(WORLD_MAX);
    for o in obs {
        in_domain("t", o.t, 0, TIME_MAX)?;
        in_domain("cx", o.cx.into(), 0, w)?;
        in_domain("cy", o.cy.into(), 0, w)?;
        in_domain("id", o.id, 1, ID_MAX)?;
        t.push(o.t as i32); // in the domain: fits
        cy.push(o.cy);
        cx.push(o.cx);
        id.push(o.id);
        ps.push(o.pixel_sum);
        ad.push(o.avg_dist);
        bbox.extend_from_slice(&o.bbox);
        offs.push(4 * poly.len() as u64);
        poly.extend(o.polygon.iter().flatten());
    }
    let (t, cy, cx, id, ps, ad, bbox, poly) =
        (le(&t), le(&cy), le(&cx), le(&id), le(&ps), le(&ad), le(&bbox), le(&poly));
    let a = Array::open(ctx, uri, Mode::Write)?;
    a.write_sparse(
        &[
            CoordInput { name: "t", data: &t },
            CoordInput { name: "cy", data: &cy },
            CoordInput { name: "cx", data: &cx },
        ],
        &[
            AttrInput::fixed("id", &id),
            AttrInput::fixed("pixelSum", &ps),
            AttrInput::fixed("avgDist", &ad),
            AttrInput::fixed("bbox", &bbox),
            AttrInput { name: "polygon", data: &poly, offsets: Some(&offs), validity: None },
        ],
    )?;
    Ok(())
}

/// Little-endian bytes of plain numbers.
fn le<T: ToLe>(v: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(std::mem::size_of_val(v));
    for x in v {
        x.put_le(&mut out);
    }
    out
}

/// Numbers written and read little-endian, whatever the host.
trait ToLe: Sized + Copy {
    const SIZE: usize;
    fn put_le(self, out: &mut Vec<u8>);
    fn get_le(b: &[u8]) -> Self;
}

macro_rules! to_le {
    ($($t:ty),*) => {$(
        impl ToLe for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get_le(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(b);
                <$t>::from_le_bytes(a)
            }
        }
    )*};
}
to_le!(i32, i64, f64);

/// A world box and a time range: inclusive bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObsBox {
    /// Times `[t0, t1]`.
    pub t: (i64, i64),
    /// Centre x `[x0, x1]`.
    pub cx: (i64, i64),
    /// Centre y `[y0, y1]`.
    pub cy: (i64, i64),
}

impl ObsBox {
    /// Every observation of `cycle` whose centre is in `[x0, x1] x [y0, y1]`.
    pub fn cycle(cycle: i64, cx: (i64, i64), cy: (i64, i64)) -> Self {
        let t0 = cycle.saturating_mul(IMAGES_PER_CYCLE);
        Self { t: (t0, t0.saturating_add(IMAGES_PER_CYCLE - 1)), cx, cy }
    }

    /// Everything.
    pub fn all() -> Self {
        Self { t: (0, TIME_MAX), cx: (0, WORLD_MAX.into()), cy: (0, WORLD_MAX.into()) }
    }
}

/// Clamps `[lo, hi]` to `[dlo, dhi]`; `None` when nothing is left.
fn clamp(r: (i64, i64), dlo: i64, dhi: i64) -> Option<DimRange> {
    let (lo, hi) = (r.0.max(dlo), r.1.min(dhi));
    (lo <= hi).then_some(DimRange::Int(lo.into(), hi.into()))
}

/// The observations whose (t, centre) is in `b`, sorted by id.
///
/// # Errors
/// Storage failures, corrupt tiles, stored values that do not decode.
pub fn read_observations(ctx: &Context, uri: impl AsRef<Path>, b: &ObsBox) -> Result<Vec<Observation>> {
    let uri = uri.as_ref();
    match read_box(ctx, uri, b, &[])? {
        Some(r) => decode_observations(uri, &r),
        None => Ok(Vec::new()),
    }
}

/// Attributes `attrs` (all when empty) of the observations in `b`; `None` when `b` misses the
/// domain.
fn read_box(ctx: &Context, uri: &Path, b: &ObsBox, attrs: &[&str]) -> Result<Option<ReadResult>> {
    let w = i64::from(WORLD_MAX);
    let (Some(t), Some(cy), Some(cx)) = (clamp(b.t, 0, TIME_MAX), clamp(b.cy, 0, w), clamp(b.cx, 0, w)) else {
        return Ok(None);
    };
    let a = Array::open(ctx, uri, Mode::Read)?;
    Ok(Some(a.sparse_query(&[vec![t], vec![cy], vec![cx]], attrs, Layout::Unordered)?.read_all()?))
}

/// An observation's centre and key parts, without its polygon, bbox and the rest: what Q4 and
/// Q6 need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObsPoint {
    /// Image time.
    pub t: i64,
    /// Centre x.
    pub cx: i32,
    /// Centre y.
    pub cy: i32,
    /// pixelSum.
    pub pixel_sum: i64,
}

/// The centres and key parts of the observations whose (t, centre) is in `b`, in no particular
/// order: the coordinates and `pixelSum` only (the polygons, most of an observation's bytes,
/// are not read).
///
/// # Errors
/// Storage failures, corrupt tiles, stored values that do not decode.
pub fn read_observation_points(ctx: &Context, uri: impl AsRef<Path>, b: &ObsBox) -> Result<Vec<ObsPoint>> {
    let uri = uri.as_ref();
    let Some(r) = read_box(ctx, uri, b, &["pixelSum"])? else {
        return Ok(Vec::new());
    };
    let (t, cy, cx) =
        (fixed::<i32>(uri, &r, "t", 1)?, fixed::<i32>(uri, &r, "cy", 1)?, fixed::<i32>(uri, &r, "cx", 1)?);
    let ps: Vec<i64> = fixed(uri, &r, "pixelSum", 1)?;
    Ok((0..t.len()).map(|i| ObsPoint { t: i64::from(t[i]), cx: cx[i], cy: cy[i], pixel_sum: ps[i] }).collect())
}

/// The stored observations of `members` (e.g. a group's, for their polygons: Q9), in the order
/// given: one point read of (t, cy, cx) each on one open array, matched by id. A member not
/// stored is an error.
///
/// # Errors
/// Storage failures, corrupt tiles, a member that is not in the array.
pub fn read_member_observations(ctx: &Context, uri: impl AsRef<Path>, members: &[Member]) -> Result<Vec<Observation>> {
    let uri = uri.as_ref();
    let a = Array::open(ctx, uri, Mode::Read)?;
    let mut out = Vec::with_capacity(members.len());
    for m in members {
        let point = |v: i64| vec![DimRange::Int(v.into(), v.into())];
        let found = if (0..=TIME_MAX).contains(&m.t) && m.cx >= 0 && m.cy >= 0 && m.cx <= WORLD_MAX && m.cy <= WORLD_MAX
        {
            let r = a
                .sparse_query(&[point(m.t), point(m.cy.into()), point(m.cx.into())], &[], Layout::Unordered)?
                .read_all()?;
            decode_observations(uri, &r)?.into_iter().find(|o| o.id == m.id)
        } else {
            None
        };
        let Some(o) = found else {
            return Err(corrupt(uri, format!("observation {} ({}) is not stored", m.id, m.key())));
        };
        out.push(o);
    }
    Ok(out)
}

fn column<'a>(uri: &Path, r: &'a ReadResult, name: &str) -> Result<&'a tessera::AttrData> {
    r.attr(name).ok_or_else(|| corrupt(uri, format!("the result has no column {name}")))
}

fn corrupt(uri: &Path, detail: String) -> StoreError {
    StoreError::Corrupt { array: uri.to_path_buf(), detail }
}

/// A fixed-size column as numbers, `per` values per cell, checked against the cell count.
fn fixed<T: ToLe>(uri: &Path, r: &ReadResult, name: &str, per: usize) -> Result<Vec<T>> {
    let c = column(uri, r, name)?;
    let cells = usize::try_from(r.cells).map_err(|_| corrupt(uri, "too many cells".into()))?;
    if c.data.len() != cells * per * T::SIZE {
        return Err(corrupt(uri, format!("column {name} holds {} bytes for {cells} cells", c.data.len())));
    }
    Ok(c.data.chunks_exact(T::SIZE).map(T::get_le).collect())
}

/// A var-length column: the values, and each cell's value range.
/// A var-length column's values and each cell's range of them.
type VarColumn<T> = (Vec<T>, Vec<(usize, usize)>);

fn var<T: ToLe>(uri: &Path, r: &ReadResult, name: &str) -> Result<VarColumn<T>> {
    let c = column(uri, r, name)?;
    let offs = c.offsets.as_ref().ok_or_else(|| corrupt(uri, format!("column {name} has no offsets")))?;
    if offs.len() as u64 != r.cells || c.data.len() % T::SIZE != 0 {
        return Err(corrupt(uri, format!("column {name}: {} offsets for {} cells", offs.len(), r.cells)));
    }
    let vals: Vec<T> = c.data.chunks_exact(T::SIZE).map(T::get_le).collect();
    let mut ranges = Vec::with_capacity(offs.len());
    for (i, &o) in offs.iter().enumerate() {
        let end = offs.get(i + 1).copied().unwrap_or(c.data.len() as u64);
        if o > end || end > c.data.len() as u64 || o % T::SIZE as u64 != 0 || end % T::SIZE as u64 != 0 {
            return Err(corrupt(uri, format!("column {name}: bad offsets at cell {i}")));
        }
        ranges.push((o as usize / T::SIZE, end as usize / T::SIZE));
    }
    Ok((vals, ranges))
}

fn decode_observations(uri: &Path, r: &ReadResult) -> Result<Vec<Observation>> {
    let t: Vec<i64> = fixed::<i32>(uri, r, "t", 1)?.into_iter().map(i64::from).collect();
    let cy: Vec<i32> = fixed(uri, r, "cy", 1)?;
    let cx: Vec<i32> = fixed(uri, r, "cx", 1)?;
    let id: Vec<i64> = fixed(uri, r, "id", 1)?;
    let ps: Vec<i64> = fixed(uri, r, "pixelSum", 1)?;
    let ad: Vec<f64> = fixed(uri, r, "avgDist", 1)?;
    let bbox: Vec<i32> = fixed(uri, r, "bbox", 4)?;
    let (poly, ranges) = var::<i32>(uri, r, "polygon")?;
    let mut out = Vec::with_capacity(t.len());
    for i in 0..t.len() {
        let (p0, p1) = ranges[i];
        if (p1 - p0) % 2 != 0 {
            return Err(corrupt(uri, format!("polygon of observation {} has an odd number of values", id[i])));
        }
        out.push(Observation {
            id: id[i],
            t: t[i],
            cycle: cycle_of(t[i]),
            cx: cx[i],
            cy: cy[i],
            pixel_sum: ps[i],
            avg_dist: ad[i],
            bbox: [bbox[4 * i], bbox[4 * i + 1], bbox[4 * i + 2], bbox[4 * i + 3]],
            polygon: poly[p0..p1].chunks_exact(2).map(|p| [p[0], p[1]]).collect(),
        });
    }
    out.sort_by_key(|o| o.id);
    Ok(out)
}

/// The groups' reach around their key corner `(gx, gy)` = the trajectory box's lower-left:
/// every member bbox lies in `[gx - back_x, gx + span_x] x [gy - back_y, gy + span_y]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupsMeta {
    /// `max(pbox.xmax - gx)`.
    pub span_x: i64,
    /// `max(pbox.ymax - gy)`.
    pub span_y: i64,
    /// `max(gx - pbox.xmin)`.
    pub back_x: i64,
    /// `max(gy - pbox.ymin)`.
    pub back_y: i64,
    /// Number of groups.
    pub groups: i64,
    /// Number of singleton groups.
    pub singletons: i64,
}

const META_FIELDS: [&str; 6] = ["span_x", "span_y", "back_x", "back_y", "groups", "singletons"];

/// Creates the `groups`, `groups_meta` and `memberships` arrays in directory `dir` (which must
/// exist).
///
/// # Errors
/// Storage failures, or arrays already there.
pub fn create_groups(ctx: &Context, dir: impl AsRef<Path>) -> Result<()> {
    let dir = dir.as_ref();
    let groups = ArraySchema::builder(ArrayType::Sparse)
        .dim(world_dim("gy"))
        .dim(world_dim("gx"))
        .attr(attr("gid", Datatype::Int64, CellValNum::Fixed(1), zstd()))
        .attr(attr("sumCx", Datatype::Int64, CellValNum::Fixed(1), zstd()))
        .attr(attr("sumCy", Datatype::Int64, CellValNum::Fixed(1), zstd()))
        .attr(attr("tbox", Datatype::Int32, CellValNum::Fixed(4), zstd()))
        .attr(attr("pbox", Datatype::Int32, CellValNum::Fixed(4), zstd()))
        .attr(attr("members", Datatype::Int64, CellValNum::Var, zstd()))
        .capacity(CAPACITY)
        .allows_duplicates(true)
        .build()
        .map_err(tessera::Error::from)?;
    Array::create(ctx, dir.join(GROUPS), &groups)?;
    let mut meta = ArraySchema::builder(ArrayType::Dense).dim(Dimension::new("k", Datatype::Int64, (0, 0), 1));
    for f in META_FIELDS {
        meta = meta.attr(Attribute::new(f, Datatype::Int64));
    }
    Array::create(ctx, dir.join(GROUPS_META), &meta.build().map_err(tessera::Error::from)?)?;
    let memberships = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("id", Datatype::Int64, (1, i128::from(ID_MAX)), 1 << 16))
        .attr(attr("groups", Datatype::Int64, CellValNum::Var, zstd()))
        .capacity(CAPACITY)
        .build()
        .map_err(tessera::Error::from)?;
    Array::create(ctx, dir.join(MEMBERSHIPS), &memberships)?;
    Ok(())
}

/// Writes a finished grouping into the arrays of `dir` ([`create_groups`]): the groups, their
/// summary cell and the memberships.
///
/// # Errors
/// Values outside the domains (nothing written then), storage failures.
pub fn write_groups(ctx: &Context, dir: impl AsRef<Path>, set: &GroupSet) -> Result<()> {
    let dir = dir.as_ref();
    let mut meta = GroupsMeta::default();
    write_group_batch(ctx, dir, &set.groups, &set.memberships(), &mut meta)?;
    write_groups_meta(ctx, dir, &meta)
}

/// Writes some groups and memberships into the arrays of `dir` as one fragment each (nothing if
/// there are none) and widens `meta` by them; [`write_groups_meta`] stores `meta` at the end.
///
/// # Errors
/// Values outside the domains (nothing written then), storage failures.
pub fn write_group_batch(
    ctx: &Context,
    dir: &Path,
    groups: &[Group],
    memberships: &[(i64, Vec<i64>)],
    meta: &mut GroupsMeta,
) -> Result<()> {
    let n = groups.len();
    let (mut gy, mut gx, mut gid) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut sx, mut sy) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut tbox, mut pbox): (Vec<i32>, Vec<i32>) = (Vec::with_capacity(4 * n), Vec::with_capacity(4 * n));
    let mut members: Vec<i64> = Vec::new();
    let mut offs: Vec<u64> = Vec::with_capacity(n);
    let mut m2 = *meta;
    for g in groups {
        if g.members.is_empty() {
            return Err(StoreError::OutOfDomain { what: "members of group", value: g.id, lo: 1, hi: i64::MAX });
        }
        in_domain("gid", g.id, 1, ID_MAX)?;
        let tb = g.trajectory_bbox();
        let pb = g.polygon_bbox();
        in_domain("group corner x", tb[0].into(), 0, WORLD_MAX.into())?;
        in_domain("group corner y", tb[1].into(), 0, WORLD_MAX.into())?;
        let (x, y) = (i64::from(tb[0]), i64::from(tb[1]));
        m2.span_x = m2.span_x.max(i64::from(pb[2]) - x);
        m2.span_y = m2.span_y.max(i64::from(pb[3]) - y);
        m2.back_x = m2.back_x.max(x - i64::from(pb[0]));
        m2.back_y = m2.back_y.max(y - i64::from(pb[1]));
        m2.singletons += i64::from(g.members.len() == 1);
        gy.push(tb[1]);
        gx.push(tb[0]);
        gid.push(g.id);
        let (a, b) = g.center_sums();
        sx.push(a);
        sy.push(b);
        tbox.extend_from_slice(&tb);
        pbox.extend_from_slice(&pb);
        offs.push(8 * members.len() as u64);
        for m in &g.members {
            members.extend([m.t, m.id, m.cx.into(), m.cy.into(), m.pixel_sum]);
            members.extend(m.bbox.map(i64::from));
        }
    }
    m2.groups += n as i64;
    let mut mid: Vec<i64> = Vec::with_capacity(memberships.len());
    let mut mg: Vec<i64> = Vec::new();
    let mut moffs: Vec<u64> = Vec::with_capacity(memberships.len());
    for (o, gs) in memberships {
        in_domain("observation id", *o, 1, ID_MAX)?;
        mid.push(*o);
        moffs.push(8 * mg.len() as u64);
        mg.extend_from_slice(gs);
    }
    if n > 0 {
        let (gy, gx, gid, sx, sy, tbox, pbox, members) =
            (le(&gy), le(&gx), le(&gid), le(&sx), le(&sy), le(&tbox), le(&pbox), le(&members));
        let a = Array::open(ctx, dir.join(GROUPS), Mode::Write)?;
        a.write_sparse(
            &[CoordInput { name: "gy", data: &gy }, CoordInput { name: "gx", data: &gx }],
            &[
                AttrInput::fixed("gid", &gid),
                AttrInput::fixed("sumCx", &sx),
                AttrInput::fixed("sumCy", &sy),
                AttrInput::fixed("tbox", &tbox),
                AttrInput::fixed("pbox", &pbox),
                AttrInput { name: "members", data: &members, offsets: Some(&offs), validity: None },
            ],
        )?;
    }
    if !mid.is_empty() {
        let (mid, mg) = (le(&mid), le(&mg));
        let a = Array::open(ctx, dir.join(MEMBERSHIPS), Mode::Write)?;
        a.write_sparse(
            &[CoordInput { name: "id", data: &mid }],
            &[AttrInput { name: "groups", data: &mg, offsets: Some(&moffs), validity: None }],
        )?;
    }
    *meta = m2;
    Ok(())
}

/// Stores the groups' summary cell.
///
/// # Errors
/// Storage failures.
pub fn write_groups_meta(ctx: &Context, dir: &Path, meta: &GroupsMeta) -> Result<()> {
    let vals = [meta.span_x, meta.span_y, meta.back_x, meta.back_y, meta.groups, meta.singletons].map(|v| le(&[v]));
    let inputs: Vec<AttrInput<'_>> = META_FIELDS.iter().zip(&vals).map(|(f, v)| AttrInput::fixed(f, v)).collect();
    let a = Array::open(ctx, dir.join(GROUPS_META), Mode::Write)?;
    a.write(&Subarray::from_ranges(&[(0, 0)]), Layout::RowMajor, &inputs)?;
    Ok(())
}

/// Singletons read back per batch at the end.
const SINGLETON_BATCH: usize = 1 << 16;
/// Members (plus memberships) collected before they are written as one fragment: bounds the
/// writer's memory (a few MB) and keeps the fragments few (tiny's whole grouping is one).
const FLUSH_ITEMS: usize = 1 << 16;

/// Stores a grouping as the [`Grouper`](crate::Grouper) closes it, in bounded memory: [`Closed`]
/// batches are collected and written to the arrays (one fragment each) whenever they reach
/// `FLUSH_ITEMS` members (created groups have their final ids), their group keys going to a
/// [`KeySorter`]; singletons, whose ids are only known at the end, are spilled to a file in `tmp`
/// and written by [`GroupWriter::finish`] in batches. Returns the F2 summary.
pub struct GroupWriter<'a> {
    ctx: &'a Context,
    dir: PathBuf,
    meta: GroupsMeta,
    keys: KeySorter,
    pending: Closed,
    pending_items: usize,
    flush_items: usize,
    singles_path: PathBuf,
    singles: Option<BufWriter<File>>,
    singletons: u64,
}

impl<'a> GroupWriter<'a> {
    /// A writer into the arrays of `dir` ([`create_groups`]) keeping its spill files in `tmp`
    /// (its own folder, removed when empty at the end).
    pub fn new(ctx: &'a Context, dir: impl AsRef<Path>, tmp: impl AsRef<Path>) -> Self {
        let tmp = tmp.as_ref();
        Self {
            ctx,
            dir: dir.as_ref().to_path_buf(),
            meta: GroupsMeta::default(),
            keys: KeySorter::spilling(tmp.join("group-keys")),
            pending: Closed::default(),
            pending_items: 0,
            flush_items: FLUSH_ITEMS,
            singles_path: tmp.join("singletons"),
            singles: None,
            singletons: 0,
        }
    }

    /// Writes a fragment every `n` members instead of [`FLUSH_ITEMS`] (tests).
    #[cfg(test)]
    pub(crate) fn with_flush_items(mut self, n: usize) -> Self {
        self.flush_items = n;
        self
    }

    /// Takes the groups and memberships of `closed` (stored once enough are collected), spills
    /// its singletons.
    ///
    /// # Errors
    /// Values outside the domains, storage and file system failures.
    pub fn write(&mut self, closed: Closed) -> Result<()> {
        let Closed { groups, memberships, singletons } = closed;
        self.stage(groups, memberships)?;
        if !singletons.is_empty() {
            if self.singles.is_none() {
                if let Some(parent) = self.singles_path.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| self.io(e))?;
                }
                let f = File::create(&self.singles_path).map_err(|e| self.io(e))?;
                self.singles = Some(BufWriter::new(f));
            }
            let mut bytes = Vec::with_capacity(singletons.len() * 8 * MEMBER_VALUES);
            for m in &singletons {
                for v in member_values(m) {
                    bytes.extend_from_slice(&v.to_le_bytes());
                }
            }
            if let Some(w) = self.singles.as_mut() {
                let written = w.write_all(&bytes);
                written.map_err(|e| StoreError::Io { path: self.singles_path.clone(), source: e })?;
            }
            self.singletons += singletons.len() as u64;
        }
        Ok(())
    }

    /// Collects groups and memberships; writes them once there are enough.
    fn stage(&mut self, groups: Vec<Group>, memberships: Vec<(i64, Vec<i64>)>) -> Result<()> {
        self.pending_items += groups.iter().map(|g| g.members.len()).sum::<usize>() + memberships.len();
        self.pending.groups.extend(groups);
        self.pending.memberships.extend(memberships);
        if self.pending_items >= self.flush_items {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the collected groups and memberships as one fragment each.
    fn flush(&mut self) -> Result<()> {
        let Closed { groups, memberships, .. } = std::mem::take(&mut self.pending);
        self.pending_items = 0;
        write_group_batch(self.ctx, &self.dir, &groups, &memberships, &mut self.meta)?;
        for g in &groups {
            self.keys.push(g.key().as_bytes());
        }
        self.keys.spill().map_err(|e| self.io(e))
    }

    fn io(&self, source: std::io::Error) -> StoreError {
        StoreError::Io { path: self.singles_path.parent().unwrap_or(&self.singles_path).to_path_buf(), source }
    }

    /// Writes what is collected, the spilled singletons (ids `created + 1, ...` in observation
    /// id order) and the summary cell; the F2 summary of everything written.
    ///
    /// # Errors
    /// Storage and file system failures, a spill file that does not read back.
    pub fn finish(mut self, created: u64) -> Result<F2Summary> {
        if let Some(w) = self.singles.take() {
            w.into_inner().map_err(|e| self.io(e.into_error()))?;
            let f = File::open(&self.singles_path).map_err(|e| self.io(e))?;
            let mut r = BufReader::new(f);
            let mut next = i64::try_from(created).map_err(|_| corrupt(&self.singles_path, "group count".into()))?;
            let mut left = self.singletons;
            let mut record = [0u8; 8 * MEMBER_VALUES];
            while left > 0 {
                let take = left.min(SINGLETON_BATCH as u64) as usize;
                let mut groups = Vec::with_capacity(take);
                let mut memberships = Vec::with_capacity(take);
                for _ in 0..take {
                    r.read_exact(&mut record).map_err(|e| self.io(e))?;
                    let v: Vec<i64> = record.chunks_exact(8).map(i64::get_le).collect();
                    let m = member_of(&self.singles_path, &v)?;
                    next += 1;
                    memberships.push((m.id, vec![next]));
                    groups.push(Group { id: next, members: vec![m] });
                }
                self.stage(groups, memberships)?;
                left -= take as u64;
            }
        }
        self.flush()?;
        write_groups_meta(self.ctx, &self.dir, &self.meta)?;
        let _ = std::fs::remove_file(&self.singles_path);
        let groups = u64::try_from(self.meta.groups).unwrap_or(0);
        let singletons = u64::try_from(self.meta.singletons).unwrap_or(0);
        let keys = std::mem::replace(&mut self.keys, KeySorter::in_memory());
        let groups_sha256 = keys.finish().map_err(|e| self.io(e))?;
        Ok(F2Summary { groups, multi_member_groups: groups - singletons, singletons, groups_sha256 })
    }
}

impl Drop for GroupWriter<'_> {
    fn drop(&mut self) {
        self.singles = None;
        drop(std::mem::replace(&mut self.keys, KeySorter::in_memory()));
        let _ = std::fs::remove_file(&self.singles_path);
        if let Some(parent) = self.singles_path.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// The [`MEMBER_VALUES`] stored values of a member.
fn member_values(m: &Member) -> [i64; MEMBER_VALUES] {
    [
        m.t,
        m.id,
        m.cx.into(),
        m.cy.into(),
        m.pixel_sum,
        m.bbox[0].into(),
        m.bbox[1].into(),
        m.bbox[2].into(),
        m.bbox[3].into(),
    ]
}

/// The member of [`MEMBER_VALUES`] stored values.
fn member_of(uri: &Path, m: &[i64]) -> Result<Member> {
    let i32_of = |v: i64| i32::try_from(v).map_err(|_| corrupt(uri, format!("member {}: value {v}", m[1])));
    Ok(Member {
        t: m[0],
        id: m[1],
        cx: i32_of(m[2])?,
        cy: i32_of(m[3])?,
        pixel_sum: m[4],
        bbox: [i32_of(m[5])?, i32_of(m[6])?, i32_of(m[7])?, i32_of(m[8])?],
    })
}

/// The groups' summary cell.
///
/// # Errors
/// Storage failures, corrupt tiles.
pub fn read_groups_meta(ctx: &Context, dir: impl AsRef<Path>) -> Result<GroupsMeta> {
    let uri = dir.as_ref().join(GROUPS_META);
    let a = Array::open(ctx, &uri, Mode::Read)?;
    let r = a.read(&Subarray::from_ranges(&[(0, 0)]), &META_FIELDS, Layout::RowMajor)?;
    let mut v = [0i64; 6];
    for (slot, f) in v.iter_mut().zip(META_FIELDS) {
        *slot = fixed::<i64>(&uri, &r, f, 1)?[0];
    }
    Ok(GroupsMeta { span_x: v[0], span_y: v[1], back_x: v[2], back_y: v[3], groups: v[4], singletons: v[5] })
}

/// Every group some member bbox of which may meet the world box `[x0, x1] x [y0, y1]`
/// (inclusive): all groups whose members' bboxes' union (`Group::polygon_bbox`) meets it, and so
/// every group whose centre or trajectory meets it. Sorted by group id. Read through the key
/// range widened by [`GroupsMeta`], then filtered exactly on the union box.
///
/// # Errors
/// Storage failures, corrupt tiles, stored values that do not decode.
pub fn read_groups_meeting(ctx: &Context, dir: impl AsRef<Path>, x: (i64, i64), y: (i64, i64)) -> Result<Vec<Group>> {
    let dir = dir.as_ref();
    let meta = read_groups_meta(ctx, dir)?;
    if meta.groups == 0 {
        return Ok(Vec::new());
    }
    let w = i64::from(WORLD_MAX);
    let kx = clamp((x.0.saturating_sub(meta.span_x), x.1.saturating_add(meta.back_x)), 0, w);
    let ky = clamp((y.0.saturating_sub(meta.span_y), y.1.saturating_add(meta.back_y)), 0, w);
    let (Some(kx), Some(ky)) = (kx, ky) else {
        return Ok(Vec::new());
    };
    let uri = dir.join(GROUPS);
    let a = Array::open(ctx, &uri, Mode::Read)?;
    let r = a.sparse_query(&[vec![ky], vec![kx]], &[], Layout::Unordered)?.read_all()?;
    let mut groups = decode_groups(&uri, &r)?;
    groups.retain(|g| {
        let p = g.polygon_bbox().map(i64::from);
        p[0] <= x.1 && p[2] >= x.0 && p[1] <= y.1 && p[3] >= y.0
    });
    Ok(groups)
}

/// Every stored group, sorted by id.
///
/// # Errors
/// As [`read_groups_meeting`].
pub fn read_all_groups(ctx: &Context, dir: impl AsRef<Path>) -> Result<GroupSet> {
    let uri = dir.as_ref().join(GROUPS);
    let a = Array::open(ctx, &uri, Mode::Read)?;
    let r = a.sparse_query(&[vec![], vec![]], &[], Layout::Unordered)?.read_all()?;
    Ok(GroupSet { groups: decode_groups(&uri, &r)? })
}

fn decode_groups(uri: &Path, r: &ReadResult) -> Result<Vec<Group>> {
    let gid: Vec<i64> = fixed(uri, r, "gid", 1)?;
    let (vals, ranges) = var::<i64>(uri, r, "members")?;
    let mut out = Vec::with_capacity(gid.len());
    for (i, &(a, b)) in ranges.iter().enumerate() {
        if b == a || (b - a) % MEMBER_VALUES != 0 {
            return Err(corrupt(uri, format!("group {}: {} member values", gid[i], b - a)));
        }
        let mut members = Vec::with_capacity((b - a) / MEMBER_VALUES);
        for m in vals[a..b].chunks_exact(MEMBER_VALUES) {
            members.push(member_of(uri, m)?);
        }
        out.push(Group { id: gid[i], members });
    }
    out.sort_by_key(|g| g.id);
    Ok(out)
}

/// The groups of each observation in `ids` that is in some group: `(id, ascending group ids)`,
/// sorted by id.
///
/// # Errors
/// Storage failures, corrupt tiles, stored values that do not decode.
pub fn read_memberships(ctx: &Context, dir: impl AsRef<Path>, ids: &[i64]) -> Result<Vec<(i64, Vec<i64>)>> {
    let uri = dir.as_ref().join(MEMBERSHIPS);
    let ranges: Vec<DimRange> =
        ids.iter().filter(|&&i| (1..=ID_MAX).contains(&i)).map(|&i| DimRange::Int(i.into(), i.into())).collect();
    if ranges.is_empty() {
        return Ok(Vec::new());
    }
    let a = Array::open(ctx, &uri, Mode::Read)?;
    let r = a.sparse_query(&[ranges], &[], Layout::RowMajor)?.read_all()?;
    let id: Vec<i64> = fixed(&uri, &r, "id", 1)?;
    let (vals, ranges) = var::<i64>(&uri, &r, "groups")?;
    let mut out: Vec<(i64, Vec<i64>)> =
        id.into_iter().zip(ranges).map(|(o, (a, b))| (o, vals[a..b].to_vec())).collect();
    out.sort_by_key(|m| m.0);
    Ok(out)
}
