//! `tessera read --where EXPR`: the engine's query conditions from the command line, on a
//! sparse array (only the passing cells reach the CSV) and a dense one (the others read as the
//! fill value), and a bad condition refused with its position; `tessera aggregate` with and
//! without a condition.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use clap::Parser;
use tessera::{
    Array, ArraySchema, ArrayType, AttrInput, Attribute, Config, Context, CoordInput, Datatype, Dimension, Layout,
    Mode, Subarray,
};
use tessera_cli::{run, Cli};

fn tessera(args: &[&str]) -> Result<String, String> {
    let cli = Cli::try_parse_from(std::iter::once("tessera").chain(args.iter().copied())).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    run(cli, &mut out).map_err(|e| format!("{e:#}"))?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn sparse_read_where_keeps_the_passing_cells_of_the_newest_write() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("s");
    let ctx = Context::new(Config::new()).unwrap();
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(Dimension::new("x", Datatype::Int64, (0, 99), 10))
        .attr(Attribute::new("pix", Datatype::Int32))
        .attr(Attribute::new("v0", Datatype::Float64))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let write = |xs: &[i64], pix: &[i32], v0: &[f64]| {
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let xs: Vec<u8> = xs.iter().flat_map(|v| v.to_le_bytes()).collect();
        let pix: Vec<u8> = pix.iter().flat_map(|v| v.to_le_bytes()).collect();
        let v0: Vec<u8> = v0.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.write_sparse(
            &[CoordInput { name: "x", data: &xs }],
            &[AttrInput::fixed("pix", &pix), AttrInput::fixed("v0", &v0)],
        )
        .unwrap();
    };
    write(&[1, 2, 3, 4], &[950, 100, 990, 5], &[0.0, -4.0, 1.0, -5.0]);
    // x = 3 is overwritten by a cell that fails: the older 990 must not show through.
    write(&[3], &[10], &[0.0]);
    let out = dir.path().join("o.csv");
    let (u, o) = (uri.display().to_string(), out.display().to_string());
    tessera(&["read", &u, "--output", &o, "--where", "pix >= 900 or v0 < -4.5"]).unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows, ["1,950,0.0", "4,5,-5.0"], "{text}");
    let e = tessera(&["read", &u, "--output", &o, "--where", "pix >= and"]).unwrap_err();
    assert!(e.contains("--where") && e.contains("at character 7"), "{e}");
    let e = tessera(&["read", &u, "--output", &o, "--where", "pix > 1e10"]).unwrap_err();
    assert!(e.contains("attribute pix") && e.contains("int32"), "{e}");
}

#[test]
fn dense_read_where_gives_failing_cells_the_fill_value() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("d");
    let ctx = Context::new(Config::new()).unwrap();
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (1, 6), 2))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let values: Vec<u8> = [1i32, 20, 3, 40, 5, 60].iter().flat_map(|v| v.to_le_bytes()).collect();
    Array::open(&ctx, &uri, Mode::Write)
        .unwrap()
        .write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", &values)])
        .unwrap();
    let out = dir.path().join("a.npy");
    let (u, o) = (uri.display().to_string(), out.display().to_string());
    tessera(&["read", &u, "--output", &o, "--where", "a >= 10"]).unwrap();
    let back: Vec<i32> = npyz::NpyFile::new(std::fs::File::open(&out).unwrap()).unwrap().into_vec().unwrap();
    assert_eq!(back, [i32::MIN, 20, i32::MIN, 40, i32::MIN, 60]);
}

/// `tessera aggregate`: engine aggregates over a subarray, with and without `--where`, one line
/// per request in the order given; a bad request is refused naming it.
#[test]
fn aggregate_prints_one_line_per_request() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("d");
    let ctx = Context::new(Config::new()).unwrap();
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, 99), 10))
        .attr(Attribute::new("pix", Datatype::Int32))
        .attr(Attribute::new("v0", Datatype::Float64))
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let pix: Vec<u8> = (0..100i32).flat_map(|v| v.to_le_bytes()).collect();
    let v0: Vec<u8> = (0..100).flat_map(|v| (f64::from(v) / 2.0).to_le_bytes()).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(
        &Subarray::from_ranges(&[(0, 99)]),
        Layout::RowMajor,
        &[AttrInput::fixed("pix", &pix), AttrInput::fixed("v0", &v0)],
    )
    .unwrap();
    let u = uri.display().to_string();
    // Cells 5..=94: tiles 1..=8 come from their summaries, the rest is read.
    let out =
        tessera(&["aggregate", &u, "--subarray", "5:94", "--agg", "pix:sum,pix:count,v0:max", "--agg", "v0:mean"]);
    let sum: i64 = (5..=94).sum();
    assert_eq!(out.unwrap(), format!("pix sum {sum}\npix count 90\nv0 max 47\nv0 mean 24.75\n"));
    let out = tessera(&["aggregate", &u, "--agg", "pix:min", "--where", "v0 >= 10"]).unwrap();
    assert_eq!(out, "pix min 20\n");
    let e = tessera(&["aggregate", &u, "--agg", "pix:median"]).unwrap_err();
    assert!(e.contains("unknown operation \"median\"") && e.contains("mean"), "{e}");
    let e = tessera(&["aggregate", &u, "--agg", "pix"]).unwrap_err();
    assert!(e.contains("expected ATTR:OP"), "{e}");
    let e = tessera(&["aggregate", &u, "--agg", "nope:sum"]).unwrap_err();
    assert!(e.contains("nope"), "{e}");
}
