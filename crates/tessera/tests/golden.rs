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
