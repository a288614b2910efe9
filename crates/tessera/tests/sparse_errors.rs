//! Bad sparse input: each gets a clear error naming the problem and writes nothing.

use tessera::*;

use crate::common::*;

fn tree(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if p.is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn bad_sparse_writes_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("s");
    let ctx = local_ctx();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::float("x", Datatype::Float64, (0.0, 10.0), Some(5.0)))
        .dim(Dimension::float("y", Datatype::Float64, (-1.0, 1.0), None))
        .attr(Attribute::new("a", Datatype::Int32))
        .capacity(2)
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let before = tree(&uri);
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let a3 = [1i32, 2, 3];
    let write = |x: &[f64], y: &[f64], a: &[i32]| {
        let (xs, ys) = (f64s(x), f64s(y));
        w.write_sparse(
            &[CoordInput { name: "x", data: &xs }, CoordInput { name: "y", data: &ys }],
            &[AttrInput::fixed("a", i32_bytes(a))],
        )
        .unwrap_err()
        .to_string()
    };
    let e = write(&[1.0, 11.0, 2.0], &[0.0, 0.0, 0.0], &a3);
    assert!(e.contains("dimension x: coordinate 11 of cell 1 is outside the domain [0, 10]"), "{e}");
    let e = write(&[1.0, 2.0, f64::NAN], &[0.0, 0.0, 0.0], &a3);
    assert!(e.contains("NaN") && e.contains("cell 2") && e.contains("finite"), "{e}");
    let e = write(&[1.0, 2.0, 3.0], &[0.0, f64::INFINITY, 0.0], &a3);
    assert!(e.contains("inf") && e.contains("cell 1"), "{e}");
    let e = write(&[1.0, 2.0, 3.0], &[0.0, 0.5], &a3);
    assert!(e.contains("equal lengths"), "{e}");
    let e = write(&[1.0, 2.0, 1.0], &[0.5, 0.5, 0.5], &a3);
    assert!(e.contains("duplicate coordinates (1, 0.5)") && e.contains("cells 0 and 2"), "{e}");
    let e = write(&[1.0, 2.0, 3.0], &[0.0, 0.0, 0.0], &[1, 2]);
    assert!(e.contains("attribute a"), "{e}");
    let xs = f64s(&[1.0]);
    let e =
        w.write_sparse(&[CoordInput { name: "x", data: &xs }], &[AttrInput::fixed("a", i32_bytes(&[1]))]).unwrap_err();
    assert!(e.to_string().contains("coordinates of dimension y are missing"), "{e}");
    let e =
        w.write_sparse(&[CoordInput { name: "z", data: &xs }], &[AttrInput::fixed("a", i32_bytes(&[1]))]).unwrap_err();
    assert!(e.to_string().contains("unknown dimension \"z\""), "{e}");
    // Global order declared but not respected (x = 7 is in the second space tile).
    let mut g = w.sparse_writer(Layout::Global).unwrap();
    let (xs, ys) = (f64s(&[7.0, 1.0]), f64s(&[0.0, 0.0]));
    let e = g
        .submit(
            &[CoordInput { name: "x", data: &xs }, CoordInput { name: "y", data: &ys }],
            &[AttrInput::fixed("a", i32_bytes(&[1, 2]))],
        )
        .unwrap_err();
    assert!(e.to_string().contains("not in global order"), "{e}");
    drop(g);
    // An unordered writer takes one submit.
    let mut u = w.sparse_writer(Layout::Unordered).unwrap();
    let (xs, ys) = (f64s(&[7.0]), f64s(&[0.0]));
    let cs = [CoordInput { name: "x", data: &xs }, CoordInput { name: "y", data: &ys }];
    u.submit(&cs, &[AttrInput::fixed("a", i32_bytes(&[1]))]).unwrap();
    let e = u.submit(&cs, &[AttrInput::fixed("a", i32_bytes(&[1]))]).unwrap_err();
    assert!(e.to_string().contains("one submit"), "{e}");
    drop(u);
    assert_eq!(tree(&uri), before, "a rejected sparse write changed the array folder");
    // Dense-only and sparse-only calls are told apart.
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    // A read range outside the domain is an error, as for dense arrays.
    let e = r.sparse_query(&[vec![DimRange::Float(-1.0, 2.0)], vec![]], &[], Layout::Global).unwrap_err();
    assert!(matches!(e, Error::Query(QueryError::OutOfDomain { .. })), "{e}");
    assert!(e.to_string().contains("range [-1, 2] is outside the domain [0, 10]"), "{e}");
    assert!(r.read_query(&Subarray::from_ranges(&[(0, 1), (0, 1)]), &[], Layout::RowMajor).is_err());
}

#[test]
fn sparse_results_come_back_in_batches() {
    let ctx = mem_ctx();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(dim("x", 0, 999, 100))
        .attr(Attribute::new("a", Datatype::Int32))
        .capacity(7)
        .build()
        .unwrap();
    Array::create(&ctx, "/s", &schema).unwrap();
    let xs: Vec<i64> = (0..500).map(|i| (i * 37) % 1000).collect();
    let a: Vec<i32> = xs.iter().map(|&x| x as i32 * 2).collect();
    let w = Array::open(&ctx, "/s", Mode::Write).unwrap();
    w.write_sparse(
        &[CoordInput { name: "x", data: bytemuck::cast_slice(&xs) }],
        &[AttrInput::fixed("a", i32_bytes(&a))],
    )
    .unwrap();
    let r = Array::open(&ctx, "/s", Mode::Read).unwrap();
    let mut q = r.sparse_query(&[vec![DimRange::Int(100, 599)]], &["a"], Layout::Global).unwrap();
    let mut seen = Vec::new();
    while let Some(b) = q.next_batch(100).unwrap() {
        let x: &[i64] = bytemuck::cast_slice(&b.attrs[0].data);
        let v = as_i32(&b.attrs[1].data);
        for (x, v) in x.iter().zip(v) {
            assert_eq!(v, *x as i32 * 2);
            seen.push(*x);
        }
    }
    let mut expect: Vec<i64> = xs.iter().copied().filter(|x| (100..=599).contains(x)).collect();
    expect.sort();
    assert_eq!(seen, expect, "global order of a 1-D array is ascending x");
}

#[test]
fn sparse_results_fill_small_buffers_and_resume() {
    let ctx = mem_ctx();
    let mut s = Attribute::new("s", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    let schema = ArraySchema::builder(ArrayType::Sparse).dim(dim("x", 0, 99, 10)).attr(s).capacity(4).build().unwrap();
    Array::create(&ctx, "/s", &schema).unwrap();
    let xs: Vec<i64> = (0..30).map(|i| (i * 7) % 100).collect();
    let words: Vec<String> = xs.iter().map(|x| "w".repeat(1 + (*x as usize % 5))).collect();
    let (mut data, mut offs) = (Vec::new(), Vec::new());
    for w in &words {
        offs.push(data.len() as u64);
        data.extend_from_slice(w.as_bytes());
    }
    let w = Array::open(&ctx, "/s", Mode::Write).unwrap();
    w.write_sparse(
        &[CoordInput { name: "x", data: bytemuck::cast_slice(&xs) }],
        &[AttrInput { name: "s", data: &data, offsets: Some(&offs), validity: None }],
    )
    .unwrap();
    let r = Array::open(&ctx, "/s", Mode::Read).unwrap();
    let mut q = r.sparse_query(&[vec![]], &[], Layout::RowMajor).unwrap();
    let (mut xb, mut sb, mut ob) = (vec![0u8; 8 * 4], vec![0u8; 9], vec![0u64; 4]);
    let mut got: Vec<(i64, String)> = Vec::new();
    loop {
        let st = {
            let mut bufs = [
                AttrBuffer { data: &mut xb, offsets: None, validity: None },
                AttrBuffer { data: &mut sb, offsets: Some(&mut ob), validity: None },
            ];
            q.submit(&mut bufs).unwrap()
        };
        assert!(st.cells > 0 || st.complete, "buffers hold at least one cell here");
        for k in 0..st.cells as usize {
            let x = i64::from_le_bytes(xb[8 * k..8 * k + 8].try_into().unwrap());
            let end = if k + 1 < st.cells as usize { ob[k + 1] } else { st.data_bytes[1] } as usize;
            got.push((x, String::from_utf8(sb[ob[k] as usize..end].to_vec()).unwrap()));
        }
        if st.complete {
            break;
        }
    }
    let mut expect: Vec<(i64, String)> = xs.iter().copied().zip(words).collect();
    expect.sort();
    assert_eq!(got, expect);
}
