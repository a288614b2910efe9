//! The types `bool` and `datetime64` against a reference map: random dense and sparse arrays
//! with `datetime64` dimensions (negative times, every cell and tile order), a `bool` attribute
//! and a nullable `datetime64[ms]` attribute holding NaT, written by overlapping fragments and
//! sometimes consolidated, then read over random boxes with random conditions (NaT passes no
//! comparison) and aggregated (NaT skipped, bool sums count true), compared with the newest
//! value of each cell. Plus the errors of bad values and hostile bytes on disk.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;

use crate::common::*;
use crate::tamper::replace_tile;
use tessera::*;

/// Coordinates are `(k - 8) * step` for `k` in `0..16`: negative and positive times.
const SIDE: i64 = 16;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Cell {
    flag: bool,
    /// `None` for null; NaT is `Some(NAT)`.
    t: Option<i64>,
}

const FILL: Cell = Cell { flag: false, t: None };

fn cell_of(seed: u64, r: i64, c: i64) -> Cell {
    let h = (seed ^ ((r as u64) << 8 | c as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    let t = match h % 7 {
        0 => None,
        1 => Some(NAT),
        k => Some((((h >> 8) % 41) as i64 - 20) * 1_000_000_000_000 + k as i64),
    };
    Cell { flag: (h >> 40) % 2 == 1, t }
}

/// A condition on the attributes, with its meaning in the reference.
#[derive(Debug, Clone)]
enum Cond {
    Time(CmpOp, i64),
    TimeBetween(i64, i64),
    Flag(bool, bool),
    TimeNull(bool),
}

impl Cond {
    fn condition(&self, unit: TimeUnit) -> Condition {
        match *self {
            // Alternately as ISO text and as a count of the unit.
            Cond::Time(op, v) if v.div_euclid(1_000_000_000_000) % 2 == 0 => {
                Condition::Cmp { attr: "t".into(), op, value: ConditionValue::Str(format_datetime(v, unit)) }
            }
            Cond::Time(op, v) => Condition::Cmp { attr: "t".into(), op, value: v.into() },
            Cond::TimeBetween(lo, hi) => Condition::attr("t").between(format_datetime(lo, unit), hi),
            Cond::Flag(eq, b) if eq => Condition::attr("flag").equal(b),
            Cond::Flag(_, b) => Condition::attr("flag").not_equal(b),
            Cond::TimeNull(null) => Condition::IsNull { attr: "t".into(), null },
        }
    }

    fn holds(&self, c: Cell) -> bool {
        let t = c.t.filter(|&t| t != NAT);
        match *self {
            Cond::Time(op, v) => t.is_some_and(|t| match op {
                CmpOp::Lt => t < v,
                CmpOp::Le => t <= v,
                CmpOp::Gt => t > v,
                CmpOp::Ge => t >= v,
                CmpOp::Eq => t == v,
                _ => t != v,
            }),
            Cond::TimeBetween(lo, hi) => t.is_some_and(|t| lo <= t && t <= hi),
            Cond::Flag(eq, b) => (c.flag == b) == eq,
            Cond::TimeNull(null) => c.t.is_none() == null,
        }
    }
}

fn cond_strategy() -> impl Strategy<Value = Cond> {
    let op = prop_oneof![
        Just(CmpOp::Lt),
        Just(CmpOp::Le),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
        Just(CmpOp::Eq),
        Just(CmpOp::Ne)
    ];
    let time = (-21i64..21).prop_map(|k| k * 1_000_000_000_000 + 2);
    prop_oneof![
        (op, time.clone()).prop_map(|(op, v)| Cond::Time(op, v)),
        (time.clone(), time).prop_map(|(a, b)| Cond::TimeBetween(a.min(b), a.max(b))),
        (any::<bool>(), any::<bool>()).prop_map(|(eq, b)| Cond::Flag(eq, b)),
        any::<bool>().prop_map(Cond::TimeNull),
    ]
}

#[derive(Debug, Clone)]
struct Case {
    sparse: bool,
    /// Coordinate step (units of the dimensions' type).
    step: i64,
    unit: TimeUnit,
    tiles: (u64, u64),
    orders: (CellOrder, CellOrder),
    capacity: u64,
    /// Dense rectangle (true) or points, rectangle in `0..SIDE`, seed.
    ops: Vec<(bool, [(i64, i64); 2], u64)>,
    consolidate: bool,
    queries: Vec<([(i64, i64); 2], Option<Cond>)>,
}

fn range() -> impl Strategy<Value = (i64, i64)> {
    (0..SIDE, 0..SIDE).prop_map(|(a, b)| (a.min(b), a.max(b)))
}

fn case_strategy() -> impl Strategy<Value = Case> {
    (
        any::<bool>(),
        // Large steps stay below 2^64 cells per space tile (the sparse in-tile strides are u64).
        prop_oneof![Just(1i64), Just(100_000_000)],
        prop_oneof![Just(TimeUnit::Second), Just(TimeUnit::Nano), Just(TimeUnit::Day)],
        (1u64..=6, 1u64..=6),
        (order_strategy(), order_strategy()),
        1u64..8,
        prop::collection::vec((any::<bool>(), [range(), range()], any::<u64>()), 1..5),
        any::<bool>(),
        prop::collection::vec(([range(), range()], prop::option::of(cond_strategy())), 1..4),
    )
        .prop_map(|(sparse, step, unit, tiles, orders, capacity, ops, consolidate, queries)| Case {
            sparse,
            // Dense arrays take unit steps: their domain is every coordinate.
            step: if sparse { step } else { 1 },
            unit,
            tiles,
            orders,
            capacity,
            ops,
            consolidate,
            queries,
        })
}

fn coord(c: &Case, k: i64) -> i64 {
    (k - SIDE / 2) * c.step
}

fn create(c: &Case, uri: &Path) -> Context {
    let ctx = mem_ctx();
    let (lo, hi) = (i128::from(coord(c, 0)), i128::from(coord(c, SIDE - 1)));
    let tile = |t: u64| if c.sparse { t * c.step as u64 } else { t };
    let time_dim = |name: &str, t: u64| Dimension::new(name, Datatype::Datetime64(c.unit), (lo, hi), tile(t));
    let schema = ArraySchema::builder(if c.sparse { ArrayType::Sparse } else { ArrayType::Dense })
        .dim(time_dim("r", c.tiles.0))
        .dim(time_dim("c", c.tiles.1))
        .attr(Attribute::new("flag", Datatype::Bool))
        .attr(Attribute { nullable: true, ..Attribute::new("t", Datatype::Datetime64(TimeUnit::Milli)) })
        .cell_order(c.orders.0)
        .tile_order(c.orders.1)
        .capacity(c.capacity)
        .build()
        .unwrap();
    assert_eq!(schema.version, 3);
    Array::create(&ctx, uri, &schema).unwrap();
    ctx
}

fn columns(cells: &[Cell]) -> (Vec<u8>, Vec<i64>, Vec<u8>) {
    let flags = cells.iter().map(|x| u8::from(x.flag)).collect();
    let times = cells.iter().map(|x| x.t.unwrap_or(7)).collect();
    let valid = cells.iter().map(|x| u8::from(x.t.is_some())).collect();
    (flags, times, valid)
}

fn write_all(c: &Case, ctx: &Context, uri: &Path) -> BTreeMap<(i64, i64), Cell> {
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    let mut model = BTreeMap::new();
    for &(rect, [(r0, r1), (c0, c1)], seed) in &c.ops {
        let keys: Vec<(i64, i64)> =
            (r0..=r1).flat_map(|r| (c0..=c1).map(move |k| (r, k))).filter(|&(r, k)| rect || (r + k) % 2 == 0).collect();
        if keys.is_empty() {
            continue;
        }
        let cells: Vec<Cell> = keys.iter().map(|&(r, k)| cell_of(seed, r, k)).collect();
        let (flags, times, valid) = columns(&cells);
        let attrs = [
            AttrInput::fixed("flag", &flags),
            AttrInput { name: "t", data: bytemuck::cast_slice(&times), offsets: None, validity: Some(&valid) },
        ];
        if rect && !c.sparse {
            let sub = Subarray::from_ranges(&[
                (coord(c, r0).into(), coord(c, r1).into()),
                (coord(c, c0).into(), coord(c, c1).into()),
            ]);
            w.write(&sub, Layout::RowMajor, &attrs).unwrap();
        } else {
            let rs: Vec<i64> = keys.iter().map(|k| coord(c, k.0)).collect();
            let cs: Vec<i64> = keys.iter().map(|k| coord(c, k.1)).collect();
            let coords = [
                CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
                CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
            ];
            w.write_sparse(&coords, &attrs).unwrap();
        }
        model.extend(keys.into_iter().zip(cells));
    }
    model
}

/// The reference aggregates: count, null count of `t`, min/max/mean of `t` (NaT skipped),
/// sum/mean/min/max of `flag`.
fn reference(cells: &[Cell]) -> Vec<AggregateValue> {
    let times: Vec<i128> = cells.iter().filter_map(|x| x.t).filter(|&t| t != NAT).map(i128::from).collect();
    let ext = |x: Option<&i128>| x.map_or(AggregateValue::Null, |v| AggregateValue::Int(*v));
    let trues = cells.iter().filter(|x| x.flag).count();
    let n = cells.len();
    vec![
        AggregateValue::Count(n as u64),
        AggregateValue::Count(cells.iter().filter(|x| x.t.is_none()).count() as u64),
        ext(times.iter().min()),
        ext(times.iter().max()),
        if times.is_empty() {
            AggregateValue::Null
        } else {
            AggregateValue::Int(times.iter().sum::<i128>().div_euclid(times.len() as i128))
        },
        AggregateValue::Int(trues as i128),
        if n == 0 { AggregateValue::Null } else { AggregateValue::Float(trues as f64 / n as f64) },
        if n == 0 { AggregateValue::Null } else { AggregateValue::Int(i128::from(cells.iter().all(|x| x.flag))) },
        if n == 0 { AggregateValue::Null } else { AggregateValue::Int(i128::from(cells.iter().any(|x| x.flag))) },
    ]
}

fn requests() -> Vec<AggregateRequest> {
    let r = AggregateRequest::new;
    vec![
        r("flag", AggregateOp::Count),
        r("t", AggregateOp::NullCount),
        r("t", AggregateOp::Min),
        r("t", AggregateOp::Max),
        r("t", AggregateOp::Mean),
        r("flag", AggregateOp::Sum),
        r("flag", AggregateOp::Mean),
        r("flag", AggregateOp::Min),
        r("flag", AggregateOp::Max),
    ]
}

/// The cells of a read result as (coordinates index, cell), sorted.
fn sparse_rows(c: &Case, res: &ReadResult) -> Vec<((i64, i64), Cell)> {
    let ints =
        |b: &[u8]| -> Vec<i64> { b.chunks_exact(8).map(|x| i64::from_le_bytes(x.try_into().unwrap())).collect() };
    let (rs, cs) = (ints(&res.attrs[0].data), ints(&res.attrs[1].data));
    let flags = &res.attrs[2].data;
    let times = ints(&res.attrs[3].data);
    let valid = res.attrs[3].validity.as_ref().unwrap();
    let key = |x: i64| x / c.step + SIDE / 2;
    let mut rows: Vec<((i64, i64), Cell)> = (0..rs.len())
        .map(|i| {
            assert!(flags[i] <= 1, "bool byte {}", flags[i]);
            ((key(rs[i]), key(cs[i])), Cell { flag: flags[i] == 1, t: (valid[i] == 1).then_some(times[i]) })
        })
        .collect();
    rows.sort_by_key(|r| r.0);
    rows
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn bool_and_datetime_equal_the_reference(c in case_strategy()) {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("arr");
        let ctx = create(&c, &uri);
        let model = write_all(&c, &ctx, &uri);
        if c.consolidate {
            consolidate(&ctx, &uri, &Selection::All).unwrap();
        }
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        for ([(r0, r1), (c0, c1)], cond) in &c.queries {
            let condition = cond.as_ref().map(|x| x.condition(TimeUnit::Milli));
            let box_cells: Vec<((i64, i64), Cell)> = (*r0..=*r1)
                .flat_map(|r| (*c0..=*c1).map(move |k| (r, k)))
                .filter_map(|k| match model.get(&k) {
                    Some(x) => Some((k, *x)),
                    None if c.sparse => None,
                    None => Some((k, FILL)),
                })
                .collect();
            let passing: Vec<((i64, i64), Cell)> =
                box_cells.iter().copied().filter(|(_, x)| cond.as_ref().is_none_or(|cd| cd.holds(*x))).collect();
            let ranges = [(coord(&c, *r0), coord(&c, *r1)), (coord(&c, *c0), coord(&c, *c1))];
            let dim_ranges: Vec<Vec<DimRange>> =
                ranges.iter().map(|&(lo, hi)| vec![DimRange::Int(lo.into(), hi.into())]).collect();
            if c.sparse {
                let mut q = match &condition {
                    Some(cd) => r.sparse_query_where(&dim_ranges, &[], Layout::RowMajor, cd).unwrap(),
                    None => r.sparse_query(&dim_ranges, &[], Layout::RowMajor).unwrap(),
                };
                prop_assert_eq!(sparse_rows(&c, &q.read_all().unwrap()), passing.clone());
            } else {
                let sub = Subarray::from_ranges(&ranges.map(|(lo, hi)| (lo.into(), hi.into())));
                let mut q = r.read_query(&sub, &[], Layout::RowMajor).unwrap();
                if let Some(cd) = &condition {
                    q = q.with_condition(cd).unwrap();
                }
                let res = q.read_all().unwrap();
                let times: Vec<i64> =
                    res.attrs[1].data.chunks_exact(8).map(|x| i64::from_le_bytes(x.try_into().unwrap())).collect();
                let valid = res.attrs[1].validity.as_ref().unwrap();
                let got: Vec<Cell> = (0..times.len())
                    .map(|i| Cell { flag: res.attrs[0].data[i] == 1, t: (valid[i] == 1).then_some(times[i]) })
                    .collect();
                let want: Vec<Cell> = box_cells
                    .iter()
                    .map(|(_, x)| if cond.as_ref().is_none_or(|cd| cd.holds(*x)) { *x } else { FILL })
                    .collect();
                prop_assert_eq!(got, want);
            }
            let cells: Vec<Cell> = passing.iter().map(|p| p.1).collect();
            let got = r.aggregate(&dim_ranges, condition.as_ref(), &requests()).unwrap();
            prop_assert_eq!(got, reference(&cells), "{:?}", cond);
        }
    }
}

/// A 1-D sparse array over `datetime64[s]` with a bool attribute, cells at -1 s and 1 s.
fn small_array(ctx: &Context, uri: &Path, filters: bool) -> FragmentName {
    let mut flag = Attribute::new("flag", Datatype::Bool);
    if filters {
        flag.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    }
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("t", Datatype::Datetime64(TimeUnit::Second), (-100, 100), 10))
        .attr(flag)
        .attr(Attribute::new("when", Datatype::Datetime64(TimeUnit::Day)))
        .build()
        .unwrap();
    Array::create(ctx, uri, &schema).unwrap();
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    let ts: [i64; 2] = [-1, 1];
    let when: [i64; 2] = [NAT, -3];
    w.write_sparse(
        &[CoordInput { name: "t", data: bytemuck::cast_slice(&ts) }],
        &[AttrInput::fixed("flag", &[1, 0]), AttrInput::fixed("when", bytemuck::cast_slice(&when))],
    )
    .unwrap()
}

#[test]
fn bad_values_are_refused_with_what_and_where() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = local_ctx();
    let uri = dir.path().join("a");
    small_array(&ctx, &uri, true);
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let before = Array::open(&ctx, &uri, Mode::Read).unwrap().fragments().len();
    let ts: [i64; 3] = [2, 3, 4];
    let when = [0i64; 3];
    let coords = [CoordInput { name: "t", data: bytemuck::cast_slice(&ts) }];
    let err = w
        .write_sparse(
            &coords,
            &[AttrInput::fixed("flag", &[0, 7, 1]), AttrInput::fixed("when", bytemuck::cast_slice(&when))],
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("flag") && err.contains("cell 1") && err.contains("byte 7"), "{err}");
    // NaT is not a coordinate: it lies outside every datetime domain.
    let nat = [NAT];
    let err = w
        .write_sparse(
            &[CoordInput { name: "t", data: bytemuck::cast_slice(&nat) }],
            &[AttrInput::fixed("flag", &[1]), AttrInput::fixed("when", bytemuck::cast_slice(&when[..1]))],
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside the domain"), "{err}");
    assert_eq!(Array::open(&ctx, &uri, Mode::Read).unwrap().fragments().len(), before);

    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let all = vec![vec![]];
    let err = r.aggregate(&all, None, &[AggregateRequest::new("when", AggregateOp::Sum)]).unwrap_err().to_string();
    assert!(err.contains("when") && err.contains("not a time"), "{err}");
    let bad = |text: &str| {
        let q = r.sparse_query_where(&all, &[], Layout::RowMajor, &Condition::parse(text).unwrap());
        match q {
            Ok(_) => panic!("{text}: the condition should be refused"),
            Err(e) => e.to_string(),
        }
    };
    assert!(bad("flag < true").contains("only == and !="));
    assert!(bad("flag == 2").contains("true, false, 1 or 0"));
    assert!(bad("when == 'NaT'").contains("NaT compares with nothing"));
    assert!(bad("when >= '2020-13-01'").contains("not an ISO 8601"));
    assert!(bad("when >= '2020-01-01T01'").contains("finer than the unit D"));
    // The ISO text, datetime64('...') and a count of days all work; NaT passes nothing.
    for text in ["when < '1970-01-01'", "when < datetime64('1970-01-01')", "when < 0", "not (when >= 0)"] {
        let res = r
            .sparse_query_where(&all, &[], Layout::RowMajor, &Condition::parse(text).unwrap())
            .unwrap()
            .read_all()
            .unwrap();
        assert_eq!(res.cells, 1, "{text}");
        assert_eq!(res.attrs[0].data, 1i64.to_le_bytes(), "{text}");
    }
    let got = r
        .aggregate(
            &all,
            None,
            &[AggregateRequest::new("when", AggregateOp::Min), AggregateRequest::new("flag", AggregateOp::Sum)],
        )
        .unwrap();
    assert_eq!(got, vec![AggregateValue::Int(-3), AggregateValue::Int(1)]);
}

/// A bool tile holding a byte other than 0 or 1 (checksums recomputed) is corruption naming the
/// file and the tile, never a value.
#[test]
fn bool_byte_seven_on_disk_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = local_ctx();
    let uri = dir.path().join("a");
    let name = small_array(&ctx, &uri, false);
    // Sparse fragment files: d0.data, then a0.data (flag).
    replace_tile(&uri, &name, "a0.data", 0, &[1, 7], 2);
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let e = r.sparse_query(&[vec![]], &["flag"], Layout::RowMajor).and_then(|mut q| q.read_all()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, Error::Corrupt { .. }), "{msg}");
    let stored = stored_file(&uri, &name, "a0.data").0;
    let stored = stored.file_name().unwrap().to_string_lossy();
    assert!(msg.contains(&*stored) && msg.contains("tile 0") && msg.contains("bool value 7"), "{msg}");
    // Unordered, the tile is decoded whole straight into the result column: checked there too.
    let e = r.sparse_query(&[vec![]], &["flag"], Layout::Unordered).and_then(|mut q| q.read_all()).unwrap_err();
    assert!(e.to_string().contains("bool value 7"), "{e}");
    // An aggregate covering the tile whole takes its summary from the (intact) metadata and
    // reads no cell; made to read the cells, it finds the corruption.
    let sum = [AggregateRequest::new("flag", AggregateOp::Sum)];
    assert!(r.aggregate(&[vec![]], None, &sum).is_ok());
    let mut config = Config::new();
    config.set("sm.aggregate.tile_stats", "false").unwrap();
    let r = Array::open(&Context::new(config).unwrap(), &uri, Mode::Read).unwrap();
    let e = r.aggregate(&[vec![]], None, &sum).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
}

/// Schemas of the new types are version 3; an old version naming them, or an unknown unit, is
/// refused with the name.
#[test]
fn schema_versions_and_unknown_units() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = local_ctx();
    let uri = dir.path().join("a");
    small_array(&ctx, &uri, false);
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let json = r.schema().to_json();
    assert!(
        json.contains("\"version\": 3") && json.contains("\"datetime64[s]\"") && json.contains("\"bool\""),
        "{json}"
    );
    let err = ArraySchema::from_json(&json.replace("datetime64[s]", "datetime64[fs]")).unwrap_err().to_string();
    assert!(err.contains("unknown datatype \"datetime64[fs]\""), "{err}");
    let err = ArraySchema::from_json(&json.replace("\"version\": 3", "\"version\": 2")).unwrap_err().to_string();
    assert!(err.contains("need schema version 3"), "{err}");
    // Old schemas keep their version.
    assert_eq!(schema_2d(4, 4, 2, 2).version, 1);
    let bool_dim = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("b", Datatype::Bool, (0, 1), 1))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap_err()
        .to_string();
    assert!(bool_dim.contains("type bool is not supported for dimensions"), "{bool_dim}");
    let nat_dim = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("t", Datatype::Datetime64(TimeUnit::Nano), (i64::MIN.into(), 0), 1 << 40))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap_err()
        .to_string();
    assert!(nat_dim.contains("NaT"), "{nat_dim}");
}

/// Fill values of the new types: false and NaT by default, or given (bool, ISO text).
#[test]
fn fill_values_of_new_types() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = mem_ctx();
    let uri = dir.path().join("a");
    let mut b = Attribute::new("b", Datatype::Bool);
    b.fill = Some(vec![serde_json::json!(true)]);
    let mut t = Attribute::new("t", Datatype::Datetime64(TimeUnit::Day));
    t.fill = Some(vec![serde_json::json!("2000-01-02")]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("d", Datatype::Datetime64(TimeUnit::Day), (-2, 1), 2))
        .attr(b)
        .attr(t)
        .attr(Attribute::new("b0", Datatype::Bool))
        .attr(Attribute::new("t0", Datatype::Datetime64(TimeUnit::Micro)))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let res = r.read(&Subarray::full(&schema), &[], Layout::RowMajor).unwrap();
    assert_eq!(res.attrs[0].data, vec![1; 4]);
    assert_eq!(res.attrs[1].data, 10_958i64.to_le_bytes().repeat(4));
    assert_eq!(res.attrs[2].data, vec![0; 4]);
    assert_eq!(res.attrs[3].data, NAT.to_le_bytes().repeat(4));
}
