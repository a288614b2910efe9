//! Bad input: each gets a clear error and changes nothing on disk.

use std::path::Path;

use tessera::*;

use crate::common::*;

fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in walk(dir) {
        out.push(e.strip_prefix(dir).unwrap().display().to_string());
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        v.push(p.clone());
        if p.is_dir() {
            v.extend(walk(&p));
        }
    }
    v
}

fn setup() -> (tempfile::TempDir, std::path::PathBuf, Context, ArraySchema) {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("arr");
    let ctx = local_ctx();
    let schema = schema_2d(10, 10, 5, 5);
    Array::create(&ctx, &uri, &schema).unwrap();
    (dir, uri, ctx, schema)
}

#[test]
fn bad_writes_are_rejected_and_leave_nothing() {
    let (_d, uri, ctx, _schema) = setup();
    let before = tree(&uri);
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let v4 = vec![0i32; 4];
    let cases: Vec<(Subarray, Vec<AttrInput<'_>>, &str)> = vec![
        (Subarray::from_ranges(&[(0, 1), (1, 2)]), vec![AttrInput::fixed("a", i32_bytes(&v4))], "outside the domain"),
        (Subarray::from_ranges(&[(1, 2), (10, 11)]), vec![AttrInput::fixed("a", i32_bytes(&v4))], "outside the domain"),
        (Subarray::from_ranges(&[(2, 1), (1, 2)]), vec![AttrInput::fixed("a", i32_bytes(&v4))], "reversed"),
        (Subarray::from_ranges(&[(1, 2)]), vec![AttrInput::fixed("a", i32_bytes(&v4))], "the array has 2"),
        (Subarray::from_ranges(&[(1, 2), (1, 3)]), vec![AttrInput::fixed("a", i32_bytes(&v4))], "expected 24"),
        (Subarray::from_ranges(&[(1, 2), (1, 2)]), vec![AttrInput::fixed("b", i32_bytes(&v4))], "unknown attribute"),
        (Subarray::from_ranges(&[(1, 2), (1, 2)]), vec![], "missing: a"),
        (
            Subarray::from_ranges(&[(1, 2), (1, 2)]),
            vec![AttrInput::fixed("a", i32_bytes(&v4)), AttrInput::fixed("a", i32_bytes(&v4))],
            "twice",
        ),
        (
            Subarray::from_ranges(&[(1, 2), (1, 2)]),
            vec![AttrInput { name: "a", data: i32_bytes(&v4), offsets: None, validity: Some(&[1, 1, 1, 1]) }],
            "non-nullable",
        ),
    ];
    for (sub, inputs, msg) in cases {
        let e = w.write(&sub, Layout::RowMajor, &inputs).unwrap_err().to_string();
        assert!(e.contains(msg), "{e:?} should mention {msg:?}");
    }
    assert_eq!(tree(&uri), before, "a rejected write changed the array folder");
    // Reading in write mode, writing in read mode.
    let e = w.read(&Subarray::from_ranges(&[(1, 2), (1, 2)]), &["a"], Layout::RowMajor).unwrap_err();
    assert!(matches!(e, Error::Query(QueryError::WrongMode { .. })), "{e}");
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let e =
        r.write(&Subarray::from_ranges(&[(1, 2), (1, 2)]), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&v4))]);
    assert!(matches!(e, Err(Error::Query(QueryError::WrongMode { .. }))));
    let e = r.read(&Subarray::from_ranges(&[(1, 2), (1, 2)]), &["nope"], Layout::RowMajor).unwrap_err();
    assert!(e.to_string().contains("unknown attribute \"nope\""), "{e}");
    assert_eq!(tree(&uri), before);
}

#[test]
fn incomplete_writes_commit_nothing() {
    let (_d, uri, ctx, _schema) = setup();
    let before = tree(&uri);
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let mut wr = w.writer(&Subarray::from_ranges(&[(1, 10), (1, 10)]), Layout::Global).unwrap();
    wr.submit(&[AttrInput::fixed("a", i32_bytes(&[1; 30]))]).unwrap();
    let e = wr.finish().unwrap_err();
    assert!(e.to_string().contains("30 of 100"), "{e}");
    assert_eq!(tree(&uri), before, "an abandoned write left files");
    let mut wr = w.writer(&Subarray::from_ranges(&[(1, 10), (1, 10)]), Layout::Global).unwrap();
    let e = wr.submit(&[AttrInput::fixed("a", i32_bytes(&[1; 101]))]).unwrap_err();
    assert!(e.to_string().contains("passes the end"), "{e}");
}

#[test]
fn opening_what_is_not_an_array() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = local_ctx();
    let e = Array::open(&ctx, dir.path().join("missing"), Mode::Read).unwrap_err();
    assert!(matches!(e, Error::Array(ArrayError::NotFound { .. })), "{e}");
    std::fs::create_dir(dir.path().join("plain")).unwrap();
    let e = Array::open(&ctx, dir.path().join("plain"), Mode::Read).unwrap_err();
    assert!(matches!(e, Error::Array(ArrayError::NotAnArray { .. })), "{e}");
    std::fs::write(dir.path().join("file"), b"x").unwrap();
    let e = Array::open(&ctx, dir.path().join("file"), Mode::Read).unwrap_err();
    assert!(matches!(e, Error::Array(ArrayError::NotAnArray { .. })), "{e}");
    let schema = schema_2d(4, 4, 2, 2);
    Array::create(&ctx, dir.path().join("x"), &schema).unwrap();
    let e = Array::create(&ctx, dir.path().join("x"), &schema).unwrap_err();
    assert!(matches!(e, Error::Array(ArrayError::AlreadyExists { .. })), "{e}");
}
