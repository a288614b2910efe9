//! The update index of small fragments (`sm.read.update_index_size`): reads with it equal reads
//! without it, on dense arrays (updates and deleted points laid over the dense data) and on
//! sparse arrays, for boxes, several ranges, points and every layout; and it is built by the
//! first read only.

use std::collections::BTreeMap;

use tessera::*;

use crate::common::*;

/// The whole index (`"all"`), a small one that takes only the newest fragments (the others are
/// read from their tiles in the same reads), or none.
fn ctx_with_index(index: &str) -> Context {
    let mut config = Config::new();
    let size = match index {
        "all" => "134217728",
        "some" => "6000",
        _ => "0",
    };
    config.set("sm.read.update_index_size", size).unwrap();
    config.set("sm.read.update_index_min_fragments", "1").unwrap();
    Context::new(config).unwrap()
}

fn coords<'a>(rs: &'a [i64], cs: &'a [i64]) -> [CoordInput<'a>; 2] {
    [CoordInput { name: "r", data: bytemuck::cast_slice(rs) }, CoordInput { name: "c", data: bytemuck::cast_slice(cs) }]
}

/// 30 update fragments (and two point deletions) over a dense 60 x 60 array with a plain and a
/// nullable attribute: every read equals the reference map, with and without the index.
#[test]
fn dense_reads_with_the_index_equal_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = ctx_with_index("all");
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, 60, 16))
        .dim(dim("c", 1, 60, 16))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(Attribute { nullable: true, ..Attribute::new("b", Datatype::Int16) })
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    // b is a's last three digits, null where a is a multiple of 3.
    let b_of = |a: &[i32]| -> (Vec<i16>, Vec<u8>) {
        (a.iter().map(|v| (v % 1000) as i16).collect(), a.iter().map(|v| u8::from(v % 3 != 0)).collect())
    };
    let base: Vec<i32> = (0..3600).collect();
    let (b, valid) = b_of(&base);
    w.write(
        &Subarray::full(&schema),
        Layout::RowMajor,
        &[
            AttrInput::fixed("a", i32_bytes(&base)),
            AttrInput { name: "b", data: bytemuck::cast_slice(&b), offsets: None, validity: Some(&valid) },
        ],
    )
    .unwrap();
    let mut model: BTreeMap<(i64, i64), i32> = (0..3600).map(|k| ((1 + k / 60, 1 + k % 60), k as i32)).collect();
    let mut rng = 7u64;
    let mut next = |m: u64| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) % m
    };
    for f in 0..32 {
        let mut cells: BTreeMap<(i64, i64), i32> = BTreeMap::new();
        for j in 0..40 {
            cells.insert((1 + next(60) as i64, 1 + next(60) as i64), -(f * 100 + j));
        }
        let (rs, cs): (Vec<i64>, Vec<i64>) = cells.keys().copied().unzip();
        if f % 15 == 14 {
            w.delete_cells(&coords(&rs, &cs)).unwrap();
            for k in cells.keys() {
                model.insert(*k, i32::MIN); // the fill value
            }
            continue;
        }
        let vals: Vec<i32> = cells.values().copied().collect();
        let (b, valid) = b_of(&vals);
        w.write_sparse(
            &coords(&rs, &cs),
            &[
                AttrInput::fixed("a", i32_bytes(&vals)),
                AttrInput { name: "b", data: bytemuck::cast_slice(&b), offsets: None, validity: Some(&valid) },
            ],
        )
        .unwrap();
        model.extend(cells);
    }
    let fill = i32::from_le_bytes(schema.attrs[0].fill_bytes().try_into().unwrap());
    for index in ["all", "some", "none"] {
        let r = Array::open(&ctx_with_index(index), &uri, Mode::Read).unwrap();
        for (r0, r1, c0, c1) in [(1, 60, 1, 60), (5, 20, 30, 59), (17, 17, 1, 60), (33, 48, 2, 2)] {
            for layout in [Layout::RowMajor, Layout::ColMajor, Layout::Global] {
                let res = r.read(&Subarray::from_ranges(&[(r0, r1), (c0, c1)]), &["a", "b"], layout).unwrap();
                let got = as_i32(&res.attrs[0].data);
                let b: &[i16] = bytemuck::cast_slice(&res.attrs[1].data);
                let bv = res.attrs[1].validity.as_ref().unwrap();
                for (k, &a) in got.iter().enumerate() {
                    // Deleted cells read null.
                    let valid = a != fill && a % 3 != 0;
                    assert_eq!(bv[k], u8::from(valid), "validity of {a}, index {index}");
                    if valid {
                        assert_eq!(b[k], (a % 1000) as i16, "b of {a}, index {index}");
                    }
                }
                let mut want: Vec<((i64, i64), i32)> = model
                    .iter()
                    .filter(|((x, y), _)| (r0..=r1).contains(&i128::from(*x)) && (c0..=c1).contains(&i128::from(*y)))
                    .map(|(k, v)| (*k, if *v == i32::MIN { fill } else { *v }))
                    .collect();
                if layout == Layout::RowMajor {
                    assert_eq!(got, want.iter().map(|x| x.1).collect::<Vec<_>>(), "index {index}");
                } else {
                    // Same multiset of values (the order is the layout's).
                    let mut g = got.clone();
                    g.sort_unstable();
                    want.sort_by_key(|x| x.1);
                    assert_eq!(g, want.iter().map(|x| x.1).collect::<Vec<_>>(), "index {index} {layout:?}");
                }
            }
        }
        // Points, including updated and deleted ones.
        let pts: Vec<(i64, i64)> = model.keys().step_by(37).copied().collect();
        let (rs, cs): (Vec<i64>, Vec<i64>) = pts.iter().copied().unzip();
        let res = r.read_points(&coords(&rs, &cs), &["a"]).unwrap();
        let want: Vec<i32> = pts.iter().map(|p| model[p]).map(|v| if v == i32::MIN { fill } else { v }).collect();
        assert_eq!(as_i32(&res.attrs[0].data), want, "points, index {index}");
    }
}

/// 40 small fragments over a sparse array (new points and updates of old ones), a fixed-size
/// attribute, a nullable one and a var-sized one: unordered and ordered reads of boxes and of
/// several ranges return the newest cells with and without the index, whether the values come
/// from the index (fixed-size attributes only) or from the tiles (with the var-sized one).
#[test]
fn sparse_reads_with_the_index_equal_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = ctx_with_index("all");
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(dim("r", 0, 999, 100))
        .dim(dim("c", 0, 999, 250))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(Attribute { nullable: true, ..Attribute::new("b", Datatype::Float64) })
        .attr(Attribute { cell_val_num: CellValNum::Var, ..Attribute::new("s", Datatype::UInt8) })
        .capacity(64)
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let mut model: BTreeMap<(i64, i64), i32> = BTreeMap::new();
    let mut rng = 11u64;
    let mut next = |m: u64| {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (rng >> 33) % m
    };
    for f in 0..41 {
        let n = if f == 0 { 5000 } else { 60 };
        let mut cells: BTreeMap<(i64, i64), i32> = BTreeMap::new();
        for j in 0..n {
            // Half of each small fragment updates existing points.
            let p = if f > 0 && j % 2 == 0 {
                *model.keys().nth(next(model.len() as u64) as usize).unwrap()
            } else {
                (next(1000) as i64, next(1000) as i64)
            };
            cells.insert(p, f * 10_000 + j);
        }
        let (rs, cs): (Vec<i64>, Vec<i64>) = cells.keys().copied().unzip();
        let vals: Vec<i32> = cells.values().copied().collect();
        let b: Vec<f64> = vals.iter().map(|&v| f64::from(v) / 4.0).collect();
        let valid: Vec<u8> = vals.iter().map(|&v| u8::from(v % 3 != 0)).collect();
        let text: String = vals.iter().map(|v| format!("v{v}")).collect();
        let mut offs = Vec::new();
        let mut at = 0u64;
        for v in &vals {
            offs.push(at);
            at += format!("v{v}").len() as u64;
        }
        w.write_sparse(
            &coords(&rs, &cs),
            &[
                AttrInput::fixed("a", i32_bytes(&vals)),
                AttrInput { name: "b", data: bytemuck::cast_slice(&b), offsets: None, validity: Some(&valid) },
                AttrInput { name: "s", data: text.as_bytes(), offsets: Some(&offs), validity: None },
            ],
        )
        .unwrap();
        model.extend(cells);
    }
    for index in ["all", "some", "none"] {
        let r = Array::open(&ctx_with_index(index), &uri, Mode::Read).unwrap();
        let queries: Vec<Vec<Vec<DimRange>>> = vec![
            vec![vec![DimRange::Int(100, 399)], vec![DimRange::Int(200, 260)]],
            vec![vec![DimRange::Int(0, 999)], vec![DimRange::Int(0, 999)]],
            vec![
                vec![DimRange::Int(10, 50), DimRange::Int(700, 720)],
                vec![DimRange::Int(0, 499), DimRange::Int(900, 950)],
            ],
            vec![vec![DimRange::Int(512, 512)], vec![]],
        ];
        for q in &queries {
            let inside = |x: i64, rs: &[DimRange]| {
                rs.is_empty()
                    || rs.iter().any(|d| matches!(d, DimRange::Int(a, b) if *a <= i128::from(x) && i128::from(x) <= *b))
            };
            let want: Vec<(i64, i64, i32)> = model
                .iter()
                .filter(|((x, y), _)| inside(*x, &q[0]) && inside(*y, &q[1]))
                .map(|((x, y), v)| (*x, *y, *v))
                .collect();
            for (layout, attrs) in [
                (Layout::Unordered, vec!["a", "b"]),
                (Layout::Unordered, vec!["b", "s", "a"]),
                (Layout::Global, vec!["a", "b"]),
                (Layout::RowMajor, vec!["a", "b"]),
            ] {
                let res = r.sparse_query(q, &attrs, layout).unwrap().read_all().unwrap();
                let col = |name: &str| res.attrs.iter().find(|x| x.name == name).unwrap();
                let xs: &[i64] = bytemuck::cast_slice(&res.attrs[0].data);
                let ys: &[i64] = bytemuck::cast_slice(&res.attrs[1].data);
                let vs = as_i32(&col("a").data);
                let b: &[f64] = bytemuck::cast_slice(&col("b").data);
                let bv = col("b").validity.as_ref().unwrap();
                for k in 0..vs.len() {
                    assert_eq!(bv[k], u8::from(vs[k] % 3 != 0), "validity of cell {k}, index {index}");
                    assert_eq!(b[k], f64::from(vs[k]) / 4.0, "b of cell {k}, index {index}");
                }
                if attrs.contains(&"s") {
                    let s = col("s");
                    let offs = s.offsets.as_ref().unwrap();
                    for k in 0..vs.len() {
                        let end = offs.get(k + 1).map_or(s.data.len(), |&e| e as usize);
                        assert_eq!(&s.data[offs[k] as usize..end], format!("v{}", vs[k]).as_bytes());
                    }
                }
                let mut got: Vec<(i64, i64, i32)> = (0..vs.len()).map(|k| (xs[k], ys[k], vs[k])).collect();
                if layout == Layout::RowMajor {
                    assert_eq!(got, want, "index {index}");
                }
                got.sort_unstable();
                assert_eq!(got, want, "index {index} {layout:?} {q:?}");
            }
        }
    }
}
