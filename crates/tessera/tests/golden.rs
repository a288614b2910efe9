//! Golden data: arrays written by each format version, committed under `testdata/v<N>/`, must
//! read back exactly. `cargo test -p tessera --test main golden::generate -- --ignored` writes
//! them anew (only when a format version is added).

use std::path::PathBuf;

use tessera::*;

use crate::common::*;

fn v1_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v1/dense")
}

fn v1_schema() -> ArraySchema {
    let mut a = Attribute::new("a", Datatype::Int32);
    a.filters = FilterPipeline::new(vec![Filter::Delta, Filter::Zstd { level: 3 }]);
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    s.nullable = true;
    s.filters = FilterPipeline::new(vec![Filter::Gzip { level: 6 }]);
    let mut z = Attribute::new("z", Datatype::Float64);
    z.cell_val_num = CellValNum::Fixed(2);
    z.filters = FilterPipeline::new(vec![Filter::ByteShuffle, Filter::Lz4]);
    ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", -3, 16, 8))
        .dim(dim("c", 1, 30, 7))
        .attr(a)
        .attr(s)
        .attr(z)
        .cell_order(CellOrder::ColMajor)
        .build()
        .unwrap()
}

/// The value of every cell after both writes: (a, s, z) or None where never written.
fn expected(r: i128, c: i128) -> Option<(i32, Option<String>, [f64; 2])> {
    let second = (0..=9).contains(&r) && (10..=25).contains(&c);
    let first = r <= 12;
    let k = if second {
        2
    } else if first {
        1
    } else {
        return None;
    };
    let a = (k * 100_000 + r * 100 + c) as i32;
    let s = ((r + c) % 3 != 0).then(|| format!("v{k}-{r}-{c}-ü"));
    Some((a, s, [r as f64 * 0.5, c as f64 * -0.25 * k as f64]))
}

fn write_box(ctx: &Context, uri: &PathBuf, rows: (i128, i128), cols: (i128, i128)) {
    let (mut a, mut data, mut offs, mut valid, mut z) = (vec![], vec![], vec![], vec![], vec![]);
    for r in rows.0..=rows.1 {
        for c in cols.0..=cols.1 {
            let (va, vs, vz) = expected(r, c).unwrap();
            a.push(va);
            offs.push(data.len() as u64);
            valid.push(u8::from(vs.is_some()));
            data.extend_from_slice(vs.unwrap_or_default().as_bytes());
            z.extend_from_slice(&vz);
        }
    }
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write(
        &Subarray::from_ranges(&[rows, cols]),
        Layout::RowMajor,
        &[
            AttrInput::fixed("a", i32_bytes(&a)),
            AttrInput { name: "s", data: &data, offsets: Some(&offs), validity: Some(&valid) },
            AttrInput::fixed("z", bytemuck::cast_slice(&z)),
        ],
    )
    .unwrap();
}

#[test]
#[ignore = "writes testdata/v1 anew; run by hand when adding a format version"]
fn generate() {
    let ctx = local_ctx();
    let uri = v1_dir();
    let _ = std::fs::remove_dir_all(&uri);
    std::fs::create_dir_all(uri.parent().unwrap()).unwrap();
    Array::create(&ctx, &uri, &v1_schema()).unwrap();
    write_box(&ctx, &uri, (-3, 12), (1, 30));
    write_box(&ctx, &uri, (0, 9), (10, 25));
}

#[test]
fn v1_reads_back_exactly() {
    let ctx = local_ctx();
    let r = Array::open(&ctx, v1_dir(), Mode::Read).unwrap();
    assert_eq!(r.schema(), &v1_schema());
    assert_eq!(r.fragments().len(), 2);
    let res = r.read(&Subarray::full(r.schema()), &[], Layout::RowMajor).unwrap();
    let (a, s, z) = (&res.attrs[0], &res.attrs[1], &res.attrs[2]);
    let a = as_i32(&a.data);
    let z: &[f64] = bytemuck::cast_slice(&z.data);
    let offs = s.offsets.as_ref().unwrap();
    let valid = s.validity.as_ref().unwrap();
    let mut k = 0;
    for row in -3..=16 {
        for col in 1..=30 {
            let end = offs.get(k + 1).copied().unwrap_or(s.data.len() as u64) as usize;
            let text = std::str::from_utf8(&s.data[offs[k] as usize..end]).unwrap();
            match expected(row, col) {
                Some((ea, es, ez)) => {
                    assert_eq!(a[k], ea, "a at ({row}, {col})");
                    assert_eq!(valid[k] == 1, es.is_some());
                    assert_eq!(text, es.unwrap_or_default());
                    assert_eq!(&z[2 * k..2 * k + 2], &ez);
                }
                None => {
                    assert_eq!(a[k], i32::MIN);
                    assert_eq!((valid[k], text), (0, ""));
                    assert!(z[2 * k].is_nan());
                }
            }
            k += 1;
        }
    }
}

fn sparse_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v1").join(name)
}

/// The coordinate filters the golden sparse arrays were written with: the builder's default of
/// the time (delta, zstd level 3), pinned so that a later default does not change them.
fn golden_coord_filters() -> FilterPipeline {
    FilterPipeline::new(vec![Filter::Delta, Filter::Zstd { level: 3 }])
}

fn sparse_schemas() -> Vec<(&'static str, ArraySchema)> {
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    s.nullable = true;
    let ints = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (-1000, 1000), 100).with_filters(golden_coord_filters()))
        .dim(Dimension::new("y", Datatype::Int64, (0, 99), 10).with_filters(golden_coord_filters()))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(s)
        .capacity(7)
        .build()
        .unwrap();
    let mut floats = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::float("lon", Datatype::Float64, (-180.0, 180.0), None).with_filters(golden_coord_filters()))
        .dim(Dimension::float("lat", Datatype::Float64, (-90.0, 90.0), None).with_filters(golden_coord_filters()))
        .attr(Attribute::new("a", Datatype::Int32))
        .cell_order(CellOrder::Hilbert)
        .capacity(5)
        .allows_duplicates(true)
        .build()
        .unwrap();
    // Written as schema version 1, whose sparse Hilbert order is one curve over the whole domain
    // (builders now write version 2, docs/format.md §10).
    floats.version = 1;
    vec![("sparse_int", ints), ("sparse_hilbert", floats)]
}

/// Cell k of write w of the golden sparse arrays: coordinates (as f64) and values.
fn sparse_cell(float: bool, w: i64, k: i64) -> ([f64; 2], i32, Option<String>) {
    let c = if float {
        [((k * 37 + w * 11) % 360 - 180) as f64 + 0.25, ((k * 13) % 180 - 90) as f64 * 0.5]
    } else {
        [((k * 37 + w * 101) % 2001 - 1000) as f64, ((k * 7) % 100) as f64]
    };
    let s = (k % 3 != 0).then(|| format!("w{w}k{k}é"));
    (c, (w * 1000 + k) as i32, s)
}

fn sparse_write(ctx: &Context, uri: &PathBuf, float: bool, w: i64, n: i64) {
    let cells: Vec<_> = (0..n).map(|k| sparse_cell(float, w, k)).collect();
    let col = |d: usize| -> Vec<u8> {
        cells.iter().flat_map(|c| if float { c.0[d].to_le_bytes() } else { (c.0[d] as i64).to_le_bytes() }).collect()
    };
    let (xs, ys) = (col(0), col(1));
    let names: Vec<String> = if float { vec!["lon".into(), "lat".into()] } else { vec!["x".into(), "y".into()] };
    let a: Vec<i32> = cells.iter().map(|c| c.1).collect();
    let (mut data, mut offs, mut valid) = (Vec::new(), Vec::new(), Vec::new());
    for c in &cells {
        offs.push(data.len() as u64);
        valid.push(u8::from(c.2.is_some()));
        data.extend_from_slice(c.2.clone().unwrap_or_default().as_bytes());
    }
    let arr = Array::open(ctx, uri, Mode::Write).unwrap();
    let mut attrs = vec![AttrInput::fixed("a", i32_bytes(&a))];
    if !float {
        attrs.push(AttrInput { name: "s", data: &data, offsets: Some(&offs), validity: Some(&valid) });
    }
    arr.write_sparse(&[CoordInput { name: &names[0], data: &xs }, CoordInput { name: &names[1], data: &ys }], &attrs)
        .unwrap();
}

#[test]
#[ignore = "writes testdata/v1 anew; run by hand when adding a format version"]
fn generate_sparse() {
    let ctx = local_ctx();
    for (name, schema) in sparse_schemas() {
        let uri = sparse_dir(name);
        let _ = std::fs::remove_dir_all(&uri);
        Array::create(&ctx, &uri, &schema).unwrap();
        let float = name == "sparse_hilbert";
        sparse_write(&ctx, &uri, float, 1, 40);
        sparse_write(&ctx, &uri, float, 2, 25);
    }
}

#[test]
fn sparse_v1_reads_back_exactly() {
    for (name, schema) in sparse_schemas() {
        sparse_reads_back(&sparse_dir(name), name, &schema);
    }
}

/// The golden sparse array `name` at `uri` (`sparse_write` 1 of 40 cells, then 2 of 25) holds
/// exactly its cells.
fn sparse_reads_back(uri: &PathBuf, name: &str, schema: &ArraySchema) {
    let ctx = local_ctx();
    {
        let float = name == "sparse_hilbert";
        let r = Array::open(&ctx, uri, Mode::Read).unwrap();
        assert_eq!(r.schema(), schema);
        // The reference: later writes win unless duplicates are allowed.
        let mut expect: Vec<(Vec<u64>, i32, Option<String>)> = Vec::new();
        for (w, n) in [(1, 40), (2, 25)] {
            for k in 0..n {
                let (c, a, s) = sparse_cell(float, w, k);
                let key = vec![c[0].to_bits(), c[1].to_bits()];
                if !schema.allows_duplicates {
                    expect.retain(|e| e.0 != key);
                }
                expect.push((key, a, if float { None } else { s }));
            }
        }
        let mut q = r.sparse_query(&[vec![], vec![]], &[], Layout::Unordered).unwrap();
        let res = q.read_all().unwrap();
        let col = |d: usize| -> Vec<f64> {
            res.attrs[d]
                .data
                .chunks_exact(8)
                .map(|b| {
                    let b: [u8; 8] = b.try_into().unwrap();
                    if float {
                        f64::from_le_bytes(b)
                    } else {
                        i64::from_le_bytes(b) as f64
                    }
                })
                .collect()
        };
        let (xs, ys) = (col(0), col(1));
        let a = as_i32(&res.attrs[2].data);
        let mut got: Vec<(Vec<u64>, i32, Option<String>)> = (0..a.len())
            .map(|k| {
                let s = (!float).then(|| {
                    let sd = &res.attrs[3];
                    let o = sd.offsets.as_ref().unwrap();
                    let end = o.get(k + 1).copied().unwrap_or(sd.data.len() as u64) as usize;
                    let text = String::from_utf8(sd.data[o[k] as usize..end].to_vec()).unwrap();
                    (sd.validity.as_ref().unwrap()[k] == 1).then_some(text)
                });
                (vec![xs[k].to_bits(), ys[k].to_bits()], a[k], s.flatten())
            })
            .collect();
        got.sort();
        expect.sort();
        assert_eq!(got, expect, "{name}");
    }
}

// -- version 2: block checksums of large unfiltered tiles ------------------------------------

fn v2_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v2/blocks")
}

/// 200 x 300 int32 cells in tiles of 100 x 150 (60,000 bytes: four 16 KiB blocks), no filters.
fn v2_schema() -> ArraySchema {
    ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, 200, 100))
        .dim(dim("c", 1, 300, 150))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap()
}

/// The updates of the second fragment: (r, c, value).
fn v2_updates() -> Vec<(i64, i64, i32)> {
    (0..40).map(|k: i64| (1 + (k * 37) % 200, 1 + (k * 53) % 300, -1 - k as i32)).collect()
}

fn v2_expected(r: i64, c: i64) -> i32 {
    v2_updates().iter().rev().find(|u| (u.0, u.1) == (r, c)).map_or((r * 1000 + c) as i32, |u| u.2)
}

fn v2_write(ctx: &Context, uri: &PathBuf) {
    Array::create(ctx, uri, &v2_schema()).unwrap();
    let vals: Vec<i32> = (1..=200i64).flat_map(|r| (1..=300i64).map(move |c| (r * 1000 + c) as i32)).collect();
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&v2_schema()), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    let u = v2_updates();
    let (rs, cs): (Vec<i64>, Vec<i64>) = u.iter().map(|x| (x.0, x.1)).unzip();
    let vs: Vec<i32> = u.iter().map(|x| x.2).collect();
    w.write_sparse(
        &[
            CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
            CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
        ],
        &[AttrInput::fixed("a", i32_bytes(&vs))],
    )
    .unwrap();
}

#[test]
#[ignore = "writes testdata/v2 anew; run by hand when adding a format version"]
fn generate_v2() {
    let uri = v2_dir();
    let _ = std::fs::remove_dir_all(&uri);
    std::fs::create_dir_all(uri.parent().unwrap()).unwrap();
    v2_write(&local_ctx(), &uri);
}

/// Point reads of `pts` in a fresh context (nothing cached), as i32.
fn points(uri: &std::path::Path, pts: &[(i64, i64)]) -> Result<Vec<i32>> {
    let mut c = Config::new();
    c.set("sm.tile_cache_size", "0").unwrap();
    points_rc(&Context::new(c).unwrap(), uri, pts)
}

#[test]
fn v2_reads_back_exactly() {
    let uri = v2_dir();
    let r = Array::open(&local_ctx(), &uri, Mode::Read).unwrap();
    assert_eq!(r.schema(), &v2_schema());
    assert_eq!(r.fragments().len(), 2);
    // The dense fragment's tiles have block checksums: 60,000 bytes in 4 blocks.
    assert_eq!(r.fragments()[0].blocks.of(0, 0).map(<[u64]>::len), Some(4));
    let res = r.read(&Subarray::full(r.schema()), &["a"], Layout::RowMajor).unwrap();
    let a = as_i32(&res.attrs[0].data);
    let want: Vec<i32> = (1..=200).flat_map(|r| (1..=300).map(move |c| v2_expected(r, c))).collect();
    assert_eq!(a, &want[..]);
    // Point reads go through the blocks they need only.
    let pts: Vec<(i64, i64)> = (0..500).map(|k: i64| (1 + (k * 7919) % 200, 1 + (k * 104_729) % 300)).collect();
    let got = points(&uri, &pts).unwrap();
    assert_eq!(got, pts.iter().map(|&(r, c)| v2_expected(r, c)).collect::<Vec<_>>());
    // One point at a time: one block of one tile each.
    for &(r, c) in pts.iter().take(25) {
        assert_eq!(points(&uri, &[(r, c)]).unwrap(), vec![v2_expected(r, c)]);
    }
}

#[test]
fn a_flipped_byte_fails_exactly_the_reads_of_its_block() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    v2_write(&local_ctx(), &uri);
    let frag = std::fs::read_dir(uri.join("__fragments")).unwrap().map(|e| e.unwrap().path()).min().unwrap();
    // Byte 40,000 of tile 0 is cell 10,000 (row 67, column 101), in block 9 of this version's
    // 4 KiB blocks (block 2 of 16 KiB ones).
    let log2 = Array::open(&local_ctx(), &uri, Mode::Read).unwrap().fragments()[0].blocks.log2;
    let block = 40_000 >> log2;
    flip_stored(&uri, &fragment_name_of(&frag), "a0.data", 40_000, 0x10);
    // A cell of block 0 of the same tile still reads; the cell in block 2 is corruption.
    assert_eq!(points(&uri, &[(1, 1)]).unwrap(), vec![v2_expected(1, 1)]);
    let e = points(&uri, &[(67, 101)]).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains(&format!("block {block}:")), "{e}");
    // A read of the whole tile verifies every block.
    let r = Array::open(&local_ctx(), &uri, Mode::Read).unwrap();
    let e = r.read(&Subarray::from_ranges(&[(1, 100), (1, 150)]), &["a"], Layout::RowMajor).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("checksum mismatch"), "{e}");
}

// -- version 3: the commit log --------------------------------------------------------------

fn v3_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v3/log")
}

/// The v2 array's two fragments, consolidated (a consolidation record), then a third write over
/// rows 1-10 (a write record after it).
fn v3_write(ctx: &Context, uri: &PathBuf) {
    v2_write(ctx, uri);
    consolidate(ctx, uri, &Selection::All).unwrap().unwrap();
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write(
        &Subarray::from_ranges(&[(1, 10), (1, 300)]),
        Layout::RowMajor,
        &[AttrInput::fixed("a", i32_bytes(&[7; 3000]))],
    )
    .unwrap();
}

fn v3_expected(r: i64, c: i64) -> i32 {
    if r <= 10 {
        7
    } else {
        v2_expected(r, c)
    }
}

#[test]
#[ignore = "writes testdata/v3 anew; run by hand when adding a format version"]
fn generate_v3() {
    let uri = v3_dir();
    let _ = std::fs::remove_dir_all(&uri);
    std::fs::create_dir_all(uri.parent().unwrap()).unwrap();
    v3_write(&local_ctx(), &uri);
}

fn read_v2_shape(uri: &PathBuf) -> Vec<i32> {
    let r = Array::open(&local_ctx(), uri, Mode::Read).unwrap();
    as_i32(&r.read(&Subarray::full(&v2_schema()), &["a"], Layout::RowMajor).unwrap().attrs[0].data).to_vec()
}

#[test]
fn v3_reads_back_exactly() {
    let uri = v3_dir();
    let r = Array::open(&local_ctx(), &uri, Mode::Read).unwrap();
    // Three records: two writes, the consolidation of both; then the third write.
    let commits = std::fs::read_dir(uri.join(COMMITS_DIR)).unwrap().count();
    assert_eq!(commits, 4);
    assert_eq!(r.fragments().len(), 2);
    let want: Vec<i32> = (1..=200).flat_map(|r| (1..=300).map(move |c| v3_expected(r, c))).collect();
    assert_eq!(read_v2_shape(&uri), want);
}

/// An array of format 2 (commit files `.ok`) keeps reading while the engine of format 3 writes,
/// consolidates and vacuums it: vacuum's checkpoint then replaces the `.ok` files.
#[test]
fn a_v2_array_takes_v3_commits_and_vacuum_converts_it() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    copy_dir(&v2_dir(), &uri);
    let ctx = local_ctx();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(
        &Subarray::from_ranges(&[(1, 10), (1, 300)]),
        Layout::RowMajor,
        &[AttrInput::fixed("a", i32_bytes(&[7; 3000]))],
    )
    .unwrap();
    let want: Vec<i32> = (1..=200).flat_map(|r| (1..=300).map(move |c| v3_expected(r, c))).collect();
    assert_eq!(read_v2_shape(&uri), want);
    // A consolidation of the two legacy fragments and the new one.
    consolidate(&ctx, &uri, &Selection::All).unwrap().unwrap();
    assert_eq!(read_v2_shape(&uri), want);
    vacuum(&ctx, &uri).unwrap();
    assert_eq!(read_v2_shape(&uri), want);
    let commits: Vec<String> = std::fs::read_dir(uri.join(COMMITS_DIR))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(commits.len() == 1 && commits[0].ends_with(".commit"), "{commits:?}");
    assert_eq!(std::fs::read_dir(uri.join("__fragments")).unwrap().count(), 1);
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

// -- schema version 2: Z and Hilbert orders (docs/format.md §5.1) ----------------------------

fn orders_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v3").join(name)
}

/// Dense, 6 x 8 cells in tiles of 3 x 4 (a 2 x 2 grid of tiles): Z order inside a tile, Hilbert
/// order of the tiles; unfiltered, so the files show the stored order.
fn orders_dense_schema() -> ArraySchema {
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    s.nullable = true;
    ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, 6, 3))
        .dim(dim("c", 1, 8, 4))
        .attr(Attribute::new("a", Datatype::Int32))
        .attr(s)
        .cell_order(CellOrder::Z)
        .tile_order(CellOrder::Hilbert)
        .build()
        .unwrap()
}

/// Sparse, 16 x 16 in tiles of 4 x 4: Z order of the tiles, Hilbert order inside a tile.
fn orders_sparse_schema() -> ArraySchema {
    ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, 15), 4).with_filters(golden_coord_filters()))
        .dim(Dimension::new("y", Datatype::Int64, (0, 15), 4).with_filters(golden_coord_filters()))
        .attr(Attribute::new("a", Datatype::Int32))
        .cell_order(CellOrder::Hilbert)
        .tile_order(CellOrder::Z)
        .capacity(4)
        .build()
        .unwrap()
}

fn orders_cell(r: i64, c: i64) -> (i32, Option<String>) {
    ((r * 100 + c) as i32, ((r + c) % 4 != 0).then(|| format!("{r}.{c}")))
}

fn orders_points() -> Vec<(i64, i64)> {
    (0..30).map(|k| ((k * 7) % 16, (k * 11 + k / 16) % 16)).collect()
}

#[test]
#[ignore = "writes testdata/v3/orders_* anew; run by hand when the orders' format changes"]
fn generate_orders() {
    let ctx = local_ctx();
    let uri = orders_dir("orders_dense");
    let _ = std::fs::remove_dir_all(&uri);
    Array::create(&ctx, &uri, &orders_dense_schema()).unwrap();
    let (mut a, mut data, mut offs, mut valid) = (vec![], vec![], vec![], vec![]);
    for r in 1..=6 {
        for c in 1..=8 {
            let (va, vs) = orders_cell(r, c);
            a.push(va);
            offs.push(data.len() as u64);
            valid.push(u8::from(vs.is_some()));
            data.extend_from_slice(vs.unwrap_or_default().as_bytes());
        }
    }
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let attrs = [
        AttrInput::fixed("a", i32_bytes(&a)),
        AttrInput { name: "s", data: &data, offsets: Some(&offs), validity: Some(&valid) },
    ];
    w.write(&Subarray::from_ranges(&[(1, 6), (1, 8)]), Layout::RowMajor, &attrs).unwrap();
    let uri = orders_dir("orders_sparse");
    let _ = std::fs::remove_dir_all(&uri);
    Array::create(&ctx, &uri, &orders_sparse_schema()).unwrap();
    let pts = orders_points();
    let xs: Vec<u8> = pts.iter().flat_map(|p| p.0.to_le_bytes()).collect();
    let ys: Vec<u8> = pts.iter().flat_map(|p| p.1.to_le_bytes()).collect();
    let a: Vec<i32> = pts.iter().map(|p| orders_cell(p.0, p.1).0).collect();
    let arr = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let coords = [CoordInput { name: "x", data: &xs }, CoordInput { name: "y", data: &ys }];
    arr.write_sparse(&coords, &[AttrInput::fixed("a", i32_bytes(&a))]).unwrap();
}

/// The unfiltered bytes of every tile of file `file` of the array's only fragment, in tile order.
fn stored_tiles(r: &Array, file: &str) -> Vec<Vec<u8>> {
    let [frag] = r.fragments() else { panic!("one fragment expected") };
    let path = r.uri().join("__fragments").join(frag.name.to_string()).join(file);
    let bytes = std::fs::read(path).unwrap();
    let (_, tiles) = frag.files.iter().find(|f| f.0 == file).unwrap();
    tiles.iter().map(|t| bytes[t.offset as usize..(t.offset + t.stored_size) as usize].to_vec()).collect()
}

/// Z order by hand (docs/format.md §5.1): bits interleaved from the top, first dimension first.
fn z_by_hand(x: u64, y: u64, bits: u32) -> u64 {
    (0..bits).rev().fold(0, |k, b| (k << 2) | ((x >> b) & 1) << 1 | ((y >> b) & 1))
}

#[test]
fn orders_dense_reads_back_and_stores_tiles_and_cells_along_the_curves() {
    let r = Array::open(&local_ctx(), orders_dir("orders_dense"), Mode::Read).unwrap();
    assert_eq!(r.schema(), &orders_dense_schema());
    assert_eq!(r.schema().version, 2);
    let res = r.read(&Subarray::full(r.schema()), &[], Layout::RowMajor).unwrap();
    let a = as_i32(&res.attrs[0].data);
    let want: Vec<i32> = (1..=6).flat_map(|r| (1..=8).map(move |c| orders_cell(r, c).0)).collect();
    assert_eq!(a, want);
    // Hilbert over the 2 x 2 tile grid from the origin, first along the last dimension; inside a
    // tile the offsets (o_r in 0..3, o_c in 0..4), 2 bits each, sorted by their Z key.
    let tile_order = [(0, 0), (0, 1), (1, 1), (1, 0)];
    let mut in_tile: Vec<(u64, u64)> = (0..3).flat_map(|o| (0..4).map(move |p| (o, p))).collect();
    in_tile.sort_by_key(|&(o, p)| z_by_hand(o, p, 2));
    let stored = stored_tiles(&r, "a0.data");
    let texts = stored_tiles(&r, "a1.data");
    for (k, &(tr, tc)) in tile_order.iter().enumerate() {
        let cells: Vec<(i64, i64)> =
            in_tile.iter().map(|&(o, p)| (1 + 3 * tr + o as i64, 1 + 4 * tc + p as i64)).collect();
        let want: Vec<i32> = cells.iter().map(|&(r, c)| orders_cell(r, c).0).collect();
        assert_eq!(as_i32(&stored[k]), want, "tile {k}");
        let text: String = cells.iter().filter_map(|&(r, c)| orders_cell(r, c).1).collect();
        assert_eq!(String::from_utf8(texts[k].clone()).unwrap(), text, "tile {k}");
    }
}

#[test]
fn orders_sparse_reads_back_in_global_order() {
    let r = Array::open(&local_ctx(), orders_dir("orders_sparse"), Mode::Read).unwrap();
    assert_eq!(r.schema(), &orders_sparse_schema());
    let mut pts = orders_points();
    pts.sort_unstable();
    pts.dedup();
    // Tiles (x / 4, y / 4) in Z order (2 bits each), then cells by the Hilbert key of their
    // offsets in the tile.
    pts.sort_by_key(|&(x, y)| {
        let (x, y) = (x as u64, y as u64);
        (z_by_hand(x / 4, y / 4, 2), curve_key(CellOrder::Hilbert, &[2, 2], &[x % 4, y % 4]).unwrap())
    });
    // The global layout returns the cells as the fragment stores them.
    let res = r.sparse_query(&[vec![], vec![]], &[], Layout::Global).unwrap().read_all().unwrap();
    let col = |d: usize| -> Vec<i64> {
        res.attrs[d].data.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
    };
    let got: Vec<(i64, i64)> = col(0).into_iter().zip(col(1)).collect();
    assert_eq!(got, pts);
    let a = as_i32(&res.attrs[2].data);
    assert_eq!(a, pts.iter().map(|&(x, y)| orders_cell(x, y).0).collect::<Vec<_>>());
}

// -- version 6: tile statistics (docs/format.md §8.3) ----------------------------------------

fn v6_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v6").join(name)
}

/// A dense array of 4 x 6 cells in tiles of 2 x 3 (int64 `a`, nullable float64 `f`), written
/// whole, and a sparse one (int64 `x`, capacity 3) with 7 cells of nullable int32 `v`.
fn v6_write(ctx: &Context, dense: &PathBuf, sparse: &PathBuf) {
    let f = Attribute { nullable: true, ..Attribute::new("f", Datatype::Float64) };
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 0, 3, 2))
        .dim(dim("c", 0, 5, 3))
        .attr(Attribute::new("a", Datatype::Int64))
        .attr(f)
        .build()
        .unwrap();
    Array::create(ctx, dense, &schema).unwrap();
    let a: Vec<i64> = (0..24).map(|i| i * i - 100).collect();
    let fv: Vec<f64> = (0..24).map(|i| if i % 5 == 0 { f64::NAN } else { f64::from(i) / 4.0 }).collect();
    let valid: Vec<u8> = (0..24).map(|i| u8::from(i % 7 != 3)).collect();
    let w = Array::open(ctx, dense, Mode::Write).unwrap();
    w.write(
        &Subarray::full(&schema),
        Layout::RowMajor,
        &[
            AttrInput::fixed("a", bytemuck::cast_slice(&a)),
            AttrInput { name: "f", data: bytemuck::cast_slice(&fv), offsets: None, validity: Some(&valid) },
        ],
    )
    .unwrap();
    let v = Attribute { nullable: true, ..Attribute::new("v", Datatype::Int32) };
    let schema = ArraySchema::builder(ArrayType::Sparse).dim(dim("x", 0, 99, 10)).attr(v).capacity(3).build().unwrap();
    Array::create(ctx, sparse, &schema).unwrap();
    let xs: Vec<i64> = vec![3, 10, 11, 40, 41, 42, 90];
    let vs: Vec<i32> = vec![-5, 7, i32::MAX, 0, -1, 9, 12];
    let valid: Vec<u8> = vec![1, 1, 1, 0, 1, 1, 1];
    let w = Array::open(ctx, sparse, Mode::Write).unwrap();
    w.write_sparse(
        &[CoordInput { name: "x", data: bytemuck::cast_slice(&xs) }],
        &[AttrInput { name: "v", data: bytemuck::cast_slice(&vs), offsets: None, validity: Some(&valid) }],
    )
    .unwrap();
}

#[test]
#[ignore = "writes testdata/v6 anew; run by hand when adding a format version"]
fn generate_v6() {
    let (dense, sparse) = (v6_dir("stats_dense"), v6_dir("stats_sparse"));
    let _ = std::fs::remove_dir_all(&dense);
    let _ = std::fs::remove_dir_all(&sparse);
    std::fs::create_dir_all(dense.parent().unwrap()).unwrap();
    v6_write(&local_ctx(), &dense, &sparse);
}

/// The summaries of the committed v6 arrays decode to exactly what their cells say, and the
/// aggregates that take them agree with those that read every cell.
#[test]
fn v6_tile_statistics_read_back_exactly() {
    let r = Array::open(&local_ctx(), v6_dir("stats_dense"), Mode::Read).unwrap();
    let stats = &r.fragments()[0].stats;
    // Tile 0 is rows 0-1, columns 0-2: cells 0, 1, 2, 6, 7, 8.
    let a0 = stats.of(0, 0).unwrap();
    let cells = [0i64, 1, 2, 6, 7, 8];
    let sum: i128 = cells.iter().map(|&i| i128::from(i * i - 100)).sum();
    assert_eq!((a0.nulls, a0.values, a0.extremes), (0, 6, Extremes::Int { sum, min: -100, max: -36 }));
    // f: cell 0 is NaN, cell 3 null (not in tile 0); 1, 2, 6, 7, 8 are i / 4.
    let f0 = stats.of(1, 0).unwrap();
    assert_eq!((f0.nulls, f0.values, f0.extremes), (0, 5, Extremes::Float { sum: 6.0, min: 0.25, max: 2.0 }));
    let all = vec![vec![], vec![]];
    let reqs: Vec<AggregateRequest> = ["count", "null_count", "sum", "min", "max", "mean"]
        .iter()
        .flat_map(|op| ["a", "f"].map(|a| AggregateRequest::new(a, AggregateOp::parse(op).unwrap())))
        .collect();
    let mut off = Config::new();
    off.set("sm.aggregate.tile_stats", "false").unwrap();
    let cells_only = Array::open(&Context::new(off.clone()).unwrap(), v6_dir("stats_dense"), Mode::Read).unwrap();
    assert_eq!(r.aggregate(&all, None, &reqs).unwrap(), cells_only.aggregate(&all, None, &reqs).unwrap());
    let s = Array::open(&local_ctx(), v6_dir("stats_sparse"), Mode::Read).unwrap();
    // Data tiles of 3 cells: [3, 10, 11], [40 (null), 41, 42], [90].
    let v1 = s.fragments()[0].stats.of(0, 1).unwrap();
    assert_eq!((v1.nulls, v1.values, v1.extremes), (1, 2, Extremes::Int { sum: 8, min: -1, max: 9 }));
    let v0 = s.fragments()[0].stats.of(0, 0).unwrap();
    assert_eq!(v0.extremes, Extremes::Int { sum: i128::from(i32::MAX) + 2, min: -5, max: i128::from(i32::MAX) });
    let reqs: Vec<AggregateRequest> = AggregateOp::ALL.iter().map(|&op| AggregateRequest::new("v", op)).collect();
    let cells_only = Array::open(&Context::new(off).unwrap(), v6_dir("stats_sparse"), Mode::Read).unwrap();
    for ranges in [vec![vec![]], vec![vec![DimRange::Int(0, 50)]], vec![vec![DimRange::Int(5, 95)]]] {
        assert_eq!(s.aggregate(&ranges, None, &reqs).unwrap(), cells_only.aggregate(&ranges, None, &reqs).unwrap());
    }
}

// -- version 7: packed fragments (docs/format.md §8.4) ----------------------------------------

fn v7_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v7").join(name)
}

/// The sparse integer array of version 1 written anew: its first write packed (the default for
/// a write this small), its second not (`sm.write.pack_bytes` 0); and the dense array of version
/// 6 (fixed-size attributes), packed.
fn v7_write(sparse: &PathBuf, dense: &PathBuf) {
    let (name, schema) = sparse_schemas().remove(0);
    assert_eq!(name, "sparse_int");
    let ctx = local_ctx();
    Array::create(&ctx, sparse, &schema).unwrap();
    sparse_write(&ctx, sparse, false, 1, 40);
    let mut config = Config::new();
    config.set("sm.write.pack_bytes", "0").unwrap();
    sparse_write(&Context::new(config).unwrap(), sparse, false, 2, 25);
    let scratch = tempfile::tempdir().unwrap();
    v6_write(&ctx, dense, &scratch.path().join("sparse"));
}

#[test]
#[ignore = "writes testdata/v7 anew; run by hand when adding a format version"]
fn generate_v7() {
    let (sparse, dense) = (v7_dir("packed_sparse"), v7_dir("packed_dense"));
    let _ = std::fs::remove_dir_all(&sparse);
    let _ = std::fs::remove_dir_all(&dense);
    std::fs::create_dir_all(sparse.parent().unwrap()).unwrap();
    v7_write(&sparse, &dense);
}

/// The files in the folder of fragment `frag` of the array at `uri`, sorted.
fn fragment_files(uri: &std::path::Path, frag: &FragmentMetadata) -> Vec<String> {
    let dir = uri.join(FRAGMENTS_DIR).join(frag.name.to_string());
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

/// The committed v7 arrays read back exactly; packed fragments hold one data file and record
/// the flag, the unpacked one a file per entry; a flipped byte in a packed tile fails the read
/// naming `packed.data`.
#[test]
fn v7_packed_fragments_read_back_exactly() {
    let (sparse, dense) = (v7_dir("packed_sparse"), v7_dir("packed_dense"));
    sparse_reads_back(&sparse, "sparse_int", &sparse_schemas()[0].1);
    let r = Array::open(&local_ctx(), &sparse, Mode::Read).unwrap();
    let frags = r.fragments();
    assert_eq!(frags.iter().map(|f| f.packed).collect::<Vec<_>>(), [true, false]);
    assert_eq!(fragment_files(&sparse, &frags[0]), [METADATA_FILE, PACKED_FILE]);
    assert_eq!(
        fragment_files(&sparse, &frags[1]),
        [METADATA_FILE, "a0.data", "a1.data", "a1.offs", "a1.valid", "d0.data", "d1.data"]
    );
    // The dense array: the cells of version 6's, from one packed fragment.
    let d = Array::open(&local_ctx(), &dense, Mode::Read).unwrap();
    assert!(d.fragments()[0].packed);
    assert_eq!(fragment_files(&dense, &d.fragments()[0]), [METADATA_FILE, PACKED_FILE]);
    let q = d.read(&Subarray::full(d.schema()), &["a"], Layout::RowMajor).unwrap();
    let want: Vec<i64> = (0..24).map(|i| i * i - 100).collect();
    assert_eq!(bytemuck::cast_slice::<u8, i64>(&q.attrs[0].data), &want[..]);
    // Every tile of the packed sparse fragment is verified where it lies in packed.data.
    let scratch = tempfile::tempdir().unwrap();
    let copy = scratch.path().join("a");
    copy_dir(&sparse, &copy);
    let entry = frags[0].file("a0.data").unwrap()[1];
    let packed = copy.join(FRAGMENTS_DIR).join(frags[0].name.to_string()).join(PACKED_FILE);
    let mut bytes = std::fs::read(&packed).unwrap();
    bytes[(entry.offset + entry.stored_size / 2) as usize] ^= 0x10;
    std::fs::write(&packed, &bytes).unwrap();
    let r = Array::open(&local_ctx(), &copy, Mode::Read).unwrap();
    let e = r.sparse_query(&[vec![], vec![]], &["a"], Layout::Unordered).unwrap().read_all().unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains(PACKED_FILE), "{e}");
}

// -- version 8: commit records carry fragment metadata (docs/format.md §4.1) ------------------

fn v8_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v8/record_copies")
}

/// The sparse integer array of version 1 written anew (two writes), then consolidated: two
/// write records and a consolidation record, each with a copy of its fragment's metadata.
fn v8_write(uri: &PathBuf) {
    let (name, schema) = sparse_schemas().remove(0);
    assert_eq!(name, "sparse_int");
    let ctx = local_ctx();
    Array::create(&ctx, uri, &schema).unwrap();
    sparse_write(&ctx, uri, false, 1, 40);
    sparse_write(&ctx, uri, false, 2, 25);
    consolidate(&ctx, uri, &Selection::All).unwrap();
}

#[test]
#[ignore = "writes testdata/v8 anew; run by hand when adding a format version"]
fn generate_v8() {
    let uri = v8_dir();
    let _ = std::fs::remove_dir_all(&uri);
    std::fs::create_dir_all(uri.parent().unwrap()).unwrap();
    v8_write(&uri);
}

/// The committed v8 array reads back exactly, and still does with every fragment's own metadata
/// file removed: each record (JSON, a zero byte, the metadata file's bytes) is what the reader
/// uses.
#[test]
fn v8_records_carry_fragment_metadata() {
    let uri = v8_dir();
    let schema = sparse_schemas().remove(0).1;
    sparse_reads_back(&uri, "sparse_int", &schema);
    let mut records: Vec<PathBuf> =
        std::fs::read_dir(uri.join(COMMITS_DIR)).unwrap().map(|e| e.unwrap().path()).collect();
    records.sort();
    assert_eq!(records.len(), 3);
    for r in &records {
        let bytes = std::fs::read(r).unwrap();
        let zero = bytes.iter().position(|&b| b == 0).unwrap();
        assert!(bytes[..zero].starts_with(b"{\"kind\":"), "{}", r.display());
        assert_eq!(&bytes[zero + 1..zero + 9], b"TSRAFRAG", "a metadata file's magic after the zero byte");
        assert_eq!(&bytes[bytes.len() - 28..bytes.len() - 20], b"TSRAFMDF", "and its footer before the record's");
    }
    let scratch = tempfile::tempdir().unwrap();
    let copy = scratch.path().join("a");
    copy_dir(&uri, &copy);
    for frag in std::fs::read_dir(copy.join(FRAGMENTS_DIR)).unwrap() {
        std::fs::remove_file(frag.unwrap().path().join(METADATA_FILE)).unwrap();
    }
    sparse_reads_back(&copy, "sparse_int", &schema);
}

// -- version 9: block checksums kept apart (docs/format.md §8.1) ------------------------------

fn v9_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/v9/blocks_apart")
}

/// Version 2's array written anew with no block checksum kept inline
/// (`sm.write.inline_block_checksums` 0) and no fragment packed: the dense fragment's four
/// 60,000-byte tiles keep their 15 checksums each in `__block_checksums`.
fn v9_write(uri: &PathBuf) {
    let mut config = Config::new();
    config.set("sm.write.inline_block_checksums", "0").unwrap();
    config.set("sm.write.pack_bytes", "0").unwrap();
    v2_write(&Context::new(config).unwrap(), uri);
}

#[test]
#[ignore = "writes testdata/v9 anew; run by hand when adding a format version"]
fn generate_v9() {
    let uri = v9_dir();
    let _ = std::fs::remove_dir_all(&uri);
    std::fs::create_dir_all(uri.parent().unwrap()).unwrap();
    v9_write(&uri);
}

/// The committed v9 array reads back exactly, whole and by points; its dense fragment holds the
/// block checksum file, which reads of part of a tile check (a flipped byte in tile 1's
/// checksums fails a point of tile 1, not one of tile 0 nor a whole read).
#[test]
fn v9_block_checksums_apart_read_back_exactly() {
    let uri = v9_dir();
    let r = Array::open(&local_ctx(), &uri, Mode::Read).unwrap();
    let frag = &r.fragments()[0];
    assert!(frag.blocks.is_apart());
    assert_eq!((frag.blocks.count(0, 1), frag.blocks.log2), (Some(15), 12));
    assert_eq!(fragment_files(&uri, frag), [BLOCK_SUMS_FILE, METADATA_FILE, "a0.data"]);
    let res = r.read(&Subarray::full(r.schema()), &["a"], Layout::RowMajor).unwrap();
    let want: Vec<i32> = (1..=200).flat_map(|r| (1..=300).map(move |c| v2_expected(r, c))).collect();
    assert_eq!(as_i32(&res.attrs[0].data), &want[..]);
    let pts: Vec<(i64, i64)> = (0..500).map(|k: i64| (1 + (k * 7919) % 200, 1 + (k * 104_729) % 300)).collect();
    assert_eq!(points(&uri, &pts).unwrap(), pts.iter().map(|&(r, c)| v2_expected(r, c)).collect::<Vec<_>>());
    let scratch = tempfile::tempdir().unwrap();
    let copy = scratch.path().join("a");
    copy_dir(&uri, &copy);
    let sums = copy.join(FRAGMENTS_DIR).join(frag.name.to_string()).join(BLOCK_SUMS_FILE);
    let mut bytes = std::fs::read(&sums).unwrap();
    bytes[(15 + 2) * 8] ^= 1;
    std::fs::write(&sums, &bytes).unwrap();
    // Tile 1 is rows 1-100, columns 151-300.
    let e = points(&copy, &[(5, 200)]).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains(BLOCK_SUMS_FILE), "{e}");
    assert_eq!(points(&copy, &[(5, 100)]).unwrap(), vec![v2_expected(5, 100)]);
    let r = Array::open(&local_ctx(), &copy, Mode::Read).unwrap();
    assert_eq!(as_i32(&r.read(&Subarray::full(r.schema()), &["a"], Layout::RowMajor).unwrap().attrs[0].data), want);
}
