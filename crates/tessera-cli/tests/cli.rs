//! End-to-end tests of the `tessera` command: commands run in-process on a temporary folder
//! (create → write → read → compare bytes, info, errors that must change nothing on disk), plus
//! one run of the built binary.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use npyz::{DType, NpyHeader, Order, WriteOptions, WriterBuilder};
use tessera_cli::{run, Cli};

/// Runs `tessera ARGS...` in-process; returns stdout, or the error message as `{:#}` prints it.
fn tessera(args: &[&str]) -> Result<String, String> {
    let cli = Cli::try_parse_from(std::iter::once("tessera").chain(args.iter().copied())).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    run(cli, &mut out).map_err(|e| format!("{e:#}"))?;
    Ok(String::from_utf8(out).unwrap())
}

fn ok(args: &[&str]) -> String {
    tessera(args).unwrap_or_else(|e| panic!("tessera {args:?} failed: {e}"))
}

fn err(args: &[&str]) -> String {
    match tessera(args) {
        Ok(out) => panic!("tessera {args:?} should fail but printed {out}"),
        Err(e) => e,
    }
}

/// The bytes of a `.npy` header.
fn header(descr: &str, shape: &[u64], fortran: bool) -> Vec<u8> {
    let order = if fortran { Order::Fortran } else { Order::C };
    let options = WriteOptions::new_header_only().dtype(DType::parse(&format!("'{descr}'")).unwrap());
    options.shape(shape).order(order).writer(Vec::new()).write_header_only().unwrap()
}

fn save(path: &Path, descr: &str, shape: &[u64], fortran: bool, data: &[u8]) {
    std::fs::write(path, [header(descr, shape, fortran), data.to_vec()].concat()).unwrap();
}

/// A `.npy` file read back: its dtype, shape, order and data section.
struct Npy {
    descr: String,
    shape: Vec<u64>,
    fortran: bool,
    data: Vec<u8>,
}

fn load(path: &Path) -> Npy {
    let mut file = File::open(path).unwrap();
    let h = NpyHeader::from_reader(&mut file).unwrap();
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut file, &mut data).unwrap();
    Npy {
        descr: h.dtype().descr().trim_matches('\'').into(),
        shape: h.shape().to_vec(),
        fortran: h.order() == Order::Fortran,
        data,
    }
}

/// Text with every run of spaces made one (tables pad their columns).
fn squash(text: &str) -> String {
    text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect::<Vec<_>>().join("\n")
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// Every file under `dir` with its contents.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.insert(p.clone(), Vec::new());
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }
    fn p(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    /// Creates array `name` from a schema JSON.
    fn create(&self, name: &str, schema: &str) -> String {
        let s = self.path(&format!("{name}.json"));
        std::fs::write(&s, schema).unwrap();
        ok(&["create", &self.p(name), "--schema", &s.display().to_string()])
    }
}

/// rows -5..=24 (tile 7), cols 1..=40 (tile 9), int32 `a` compressed with zstd.
const GRID: &str = r#"{"version": 1, "array_type": "dense",
  "dims": [{"name": "r", "type": "int64", "domain": [-5, 24], "tile": 7},
           {"name": "c", "type": "int64", "domain": [1, 40], "tile": 9}],
  "attrs": [{"name": "a", "type": "int32", "filters": [{"name": "zstd", "level": 3}]}],
  "cell_order": "row-major", "tile_order": "row-major"}"#;

fn grid_value(r: i64, c: i64) -> i32 {
    (r * 1000 + c) as i32
}

/// Cells of rows `rs` × cols `cs` in C order (or Fortran order).
fn grid_cells(rs: std::ops::RangeInclusive<i64>, cs: std::ops::RangeInclusive<i64>, fortran: bool) -> Vec<i32> {
    if fortran {
        cs.flat_map(|c| rs.clone().map(move |r| grid_value(r, c))).collect()
    } else {
        rs.flat_map(|r| cs.clone().map(move |c| grid_value(r, c))).collect()
    }
}

#[test]
fn create_write_read_compare_in_both_orders() {
    let f = Fixture::new();
    let out = f.create("g", GRID);
    assert!(out.contains("created array") && out.contains("2 dimensions, 1 attribute"), "{out}");
    let g = f.p("g");
    // The whole domain from a C-order file (no --subarray: the whole domain).
    save(&f.path("all.npy"), "<i4", &[30, 40], false, &le(&grid_cells(-5..=24, 1..=40, false), i32::to_le_bytes));
    let out = ok(&["write", &g, "--input", &f.p("all.npy")]);
    assert!(out.contains("wrote 1200 cells") && out.contains("-5:24,1:40"), "{out}");
    // Overwrite a block from a Fortran-order file with negated values.
    let block: Vec<i32> = grid_cells(-3..=2, 5..=20, true).iter().map(|v| -v).collect();
    save(&f.path("block.npy"), "<i4", &[6, 16], true, &le(&block, i32::to_le_bytes));
    ok(&["write", &g, "--subarray", "-3:2,5:20", "--input", &format!("a={}", f.p("block.npy"))]);
    let model = |r: i64, c: i64| {
        if (-3..=2).contains(&r) && (5..=20).contains(&c) {
            -grid_value(r, c)
        } else {
            grid_value(r, c)
        }
    };

    for (layout, fortran) in [("row-major", false), ("col-major", true)] {
        let out = ok(&["read", &g, "--subarray", "-5:3,4:22", "--output", &f.p("o.npy"), "--layout", layout]);
        assert!(out.contains("shape (9, 19)"), "{out}");
        let back = load(&f.path("o.npy"));
        assert_eq!(back.shape, vec![9, 19]);
        assert_eq!(back.fortran, fortran);
        let want: Vec<i32> = if fortran {
            (4..=22).flat_map(|c| (-5..=3).map(move |r| model(r, c))).collect()
        } else {
            (-5..=3).flat_map(|r| (4..=22).map(move |c| model(r, c))).collect()
        };
        assert_eq!(back.data, le(&want, i32::to_le_bytes), "{layout}");
    }
    // Default subarray: the non-empty domain; global layout gives one axis of cells.
    ok(&["read", &g, "--output", &f.p("all_back.npy")]);
    assert_eq!(load(&f.path("all_back.npy")).shape, vec![30, 40]);
    ok(&["read", &g, "--subarray", "1:1", "--output", &f.p("glob.npy"), "--layout", "global"]);
    let glob = load(&f.path("glob.npy"));
    assert_eq!(glob.shape, vec![40]);
    // No temporary files are left behind.
    assert!(snapshot(f.dir.path()).keys().all(|p| !p.display().to_string().ends_with(".tmp")));
}

#[test]
fn info_shows_schema_fragments_and_ratio() {
    let f = Fixture::new();
    f.create("g", GRID);
    let g = f.p("g");
    let empty = ok(&["info", &g]);
    assert!(empty.contains("fragments: 0") && empty.contains("nothing written"), "{empty}");
    // Two writes: a compressible one and a second, smaller one.
    save(&f.path("all.npy"), "<i4", &[30, 40], false, &le(&[7i32; 1200], i32::to_le_bytes));
    ok(&["write", &g, "--input", &f.p("all.npy")]);
    save(&f.path("row.npy"), "<i4", &[1, 40], false, &le(&[1i32; 40], i32::to_le_bytes));
    ok(&["write", &g, "--subarray", "0,:", "--input", &f.p("row.npy")]);
    // Tables: dimensions (name type domain tile filters), attributes (name type cell_val_num
    // nullable filters fill), fragments (name kind written cells non-empty-domain tiles ...).
    let text = squash(&ok(&["info", &g]));
    for want in [
        "dimensions: 2",
        "r int64 -5:24 7 (5 tiles)",
        "a int32 1 no zstd(level 3) default",
        "cell order row-major, tile order row-major",
        "non-empty domain: -5:24,1:40",
        "fragments: 2 (oldest first)",
        " 1200 -5:24,1:40 25 ",
        " 40 0:0,1:40 5 ",
        "compression ratio: ",
        "size on disk: ",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let json: serde_json::Value = serde_json::from_str(&ok(&["info", &g, "--json"])).unwrap();
    let frags = json["fragments"].as_array().unwrap();
    assert_eq!(frags.len(), 2);
    assert_eq!(frags[0]["cell_count"], 1200);
    assert_eq!(frags[1]["nonempty_domain"], serde_json::json!([[0, 0], [1, 40]]));
    assert!(frags[0]["t1"].as_u64().unwrap() <= frags[1]["t0"].as_u64().unwrap());
    let (stored, unfiltered) = (json["stored_bytes"].as_u64().unwrap(), json["unfiltered_bytes"].as_u64().unwrap());
    // Tiles are padded to whole tiles: 25 tiles of 63 int32 cells, and 5 of the second write.
    assert_eq!(unfiltered, (25 + 5) * 63 * 4);
    assert!(stored < unfiltered);
    let ratio = json["compression_ratio"].as_f64().unwrap();
    assert!((ratio - unfiltered as f64 / stored as f64).abs() < 1e-9);
    assert!(json["size_on_disk"].as_u64().unwrap() > stored);
    assert_eq!(json["schema"]["dims"][0]["domain"], serde_json::json!([-5, 24]));
    assert_eq!(json["nonempty_domain"], serde_json::json!([[-5, 24], [1, 40]]));
}

#[test]
fn multi_value_string_and_bool_attributes() {
    let f = Fixture::new();
    f.create(
        "m",
        r#"{"version": 1, "array_type": "dense",
            "dims": [{"name": "x", "type": "int8", "domain": [0, 9], "tile": 4},
                     {"name": "y", "type": "int8", "domain": [-2, 2], "tile": 5}],
            "attrs": [{"name": "z", "type": "float32", "cell_val_num": 2},
                      {"name": "w", "type": "float64", "cell_val_num": 2},
                      {"name": "rgb", "type": "uint16", "cell_val_num": 3},
                      {"name": "code", "type": "utf8", "cell_val_num": 4},
                      {"name": "flag", "type": "uint8"}],
            "cell_order": "col-major", "tile_order": "row-major"}"#,
    );
    let m = f.p("m");
    let n = 3 * 5;
    let z: Vec<f32> = (0..2 * n).map(|i| i as f32 * 0.5).collect();
    let w: Vec<f64> = (0..2 * n).map(|i| -(i as f64)).collect();
    let rgb: Vec<u16> = (0..3 * n).map(|i| i as u16 * 3).collect();
    let code: Vec<u8> = (0..n).flat_map(|i| format!("c{i:03}").into_bytes()).collect();
    let flag: Vec<u8> = (0..n).map(|i| (i % 2) as u8).collect();
    save(&f.path("z.npy"), "<c8", &[3, 5], false, &le(&z, f32::to_le_bytes));
    save(&f.path("w.npy"), "<f8", &[3, 5, 2], false, &le(&w, f64::to_le_bytes));
    save(&f.path("rgb.npy"), "<u2", &[3, 5, 3], false, &le(&rgb, u16::to_le_bytes));
    save(&f.path("code.npy"), "|S4", &[3, 5], false, &code);
    save(&f.path("flag.npy"), "|b1", &[3, 5], false, &flag);
    let input = |a: &str| format!("{a}={}", f.p(&format!("{a}.npy")));
    ok(&["write", &m, "--subarray", "2:4,:", "--input", &input("z"), &input("w"), &input("rgb"), &input("code")]
        .into_iter()
        .chain(["--input", &input("flag")])
        .collect::<Vec<_>>());
    let out_of = |a: &str| format!("{a}={}", f.p(&format!("{a}_out.npy")));
    ok(&["read", &m, "--output", &out_of("z"), &out_of("w"), &out_of("rgb"), &out_of("code"), &out_of("flag")]);
    let check = |a: &str, descr: &str, shape: &[u64], data: &[u8]| {
        let back = load(&f.path(&format!("{a}_out.npy")));
        assert_eq!(back.descr, descr, "{a}");
        assert_eq!(back.shape, shape, "{a}");
        assert_eq!(back.data, data, "{a}");
    };
    check("z", "<c8", &[3, 5], &le(&z, f32::to_le_bytes));
    check("w", "<c16", &[3, 5], &le(&w, f64::to_le_bytes));
    check("rgb", "<u2", &[3, 5, 3], &le(&rgb, u16::to_le_bytes));
    check("code", "|S4", &[3, 5], &code);
    check("flag", "|u1", &[3, 5], &flag);
    // A multi-value attribute cannot go to a Fortran-order file.
    let e = err(&["read", &m, "--output", &out_of("rgb"), "--layout", "col-major"]);
    assert!(e.contains("use --layout row-major"), "{e}");
}

/// January 2024 hour by hour (t, datetime64[h], 473352 = 2024-01-01T00 in hours) by x 1..=10
/// (also datetime64[h], as every dimension has one type; given as counts): a bool attribute and
/// times of two units.
const HOURS: &str = r#"{"version": 3, "array_type": "dense",
  "dims": [{"name": "t", "type": "datetime64[h]", "domain": [473352, 474095], "tile": 24},
           {"name": "x", "type": "datetime64[h]", "domain": [1, 10], "tile": 5}],
  "attrs": [{"name": "flag", "type": "bool"},
            {"name": "at", "type": "datetime64[s]", "filters": [{"name": "zstd", "level": 1}]},
            {"name": "day", "type": "datetime64[D]"}],
  "cell_order": "row-major", "tile_order": "row-major"}"#;

/// bool and datetime64 attributes go through `.npy` as `|b1` and `<M8[unit]` (NaT included) and
/// come back the same, over subarrays of a datetime64 dimension given as ISO 8601 times (either
/// separator) or counts of the unit.
#[test]
fn bool_and_datetime_npy_round_trip_over_iso_subarrays() {
    let f = Fixture::new();
    f.create("h", HOURS);
    let h = f.p("h");
    // 2024-01-02T00 .. 2024-01-03T23: 48 hours (473376..=473423) by 10.
    let n = 48 * 10;
    let flag: Vec<u8> = (0..n).map(|i| u8::from(i % 3 == 0)).collect();
    let nat = i64::MIN;
    let at: Vec<i64> = (0..n as i64).map(|i| if i % 7 == 3 { nat } else { 1_704_153_600 + i * 61 - 5_000 }).collect();
    let day: Vec<i64> = (0..n as i64).map(|i| if i % 11 == 5 { nat } else { 19_724 + i - 240 }).collect();
    save(&f.path("flag.npy"), "|b1", &[48, 10], false, &flag);
    save(&f.path("at.npy"), "<M8[s]", &[48, 10], false, &le(&at, i64::to_le_bytes));
    save(&f.path("day.npy"), "<M8[D]", &[48, 10], false, &le(&day, i64::to_le_bytes));
    let input = |a: &str| format!("{a}={}", f.p(&format!("{a}.npy")));
    let out = ok(&[
        "write",
        &h,
        "--subarray",
        "2024-01-02T00:2024-01-03T23,:",
        "--input",
        &input("flag"),
        &input("at"),
        &input("day"),
    ]);
    assert!(out.contains("wrote 480 cells"), "{out}");
    let output = |a: &str| format!("{a}={}", f.p(&format!("{a}_out.npy")));
    let check = |a: &str, descr: &str, data: &[u8]| {
        let back = load(&f.path(&format!("{a}_out.npy")));
        assert_eq!((back.descr.as_str(), back.shape.as_slice()), (descr, [48u64, 10].as_slice()), "{a}");
        assert!(back.data == data, "{a}: the cells differ");
    };
    for spec in ["2024-01-02T00:2024-01-03T23", "2024-01-02..2024-01-03T23:00:00Z,1:10", "473376:473423"] {
        ok(&["read", &h, "--subarray", spec, "--output", &output("flag"), &output("at"), &output("day")]);
        check("flag", "|b1", &flag);
        check("at", "<M8[s]", &le(&at, i64::to_le_bytes));
        check("day", "<M8[D]", &le(&day, i64::to_le_bytes));
    }
    // One hour, given as a time with minutes: row 2024-01-03T05 (the 30th of the write).
    ok(&["read", &h, "--subarray", "2024-01-03T05:00,4:6", "--output", &output("at")]);
    let back = load(&f.path("at_out.npy"));
    assert_eq!((back.descr.as_str(), back.shape.as_slice()), ("<M8[s]", [1u64, 3].as_slice()));
    assert_eq!(back.data, le(&at[29 * 10 + 3..29 * 10 + 6], i64::to_le_bytes));
    // info prints the time domain as ISO text and counts; the ISO text is a --subarray, and so
    // is the non-empty domain, in ISO text too.
    let info = ok(&["info", &h]);
    assert!(info.contains("2024-01-01T00:2024-01-31T23 (473352:474095)"), "{info}");
    let written = "2024-01-02T00:2024-01-03T23,1970-01-01T01:1970-01-01T10";
    assert!(info.contains(&format!("non-empty domain: {written}\n")), "{info}");
    ok(&["read", &h, "--subarray", written, "--output", &output("flag")]);
    assert_eq!(load(&f.path("flag_out.npy")).shape, vec![48, 10]);
    ok(&["read", &h, "--subarray", "2024-01-01T00:2024-01-31T23", "--output", &output("flag")]);
    assert_eq!(load(&f.path("flag_out.npy")).shape, vec![744, 10]);
    // A delete over ISO bounds: those cells read as the fill values (false, NaT) afterwards.
    let out = ok(&["delete", &h, "--subarray", "2024-01-03T04:00:00:2024-01-03T05,4"]);
    assert!(out.contains("deleted t 2024-01-03T04:2024-01-03T05, x 1970-01-01T04:1970-01-01T04"), "{out}");
    ok(&["read", &h, "--subarray", "2024-01-03T03..2024-01-03T06,4", "--output", &output("flag"), &output("at")]);
    let rows = [27usize, 28, 29, 30].map(|r| r * 10 + 3);
    let (flag_back, at_back) = (load(&f.path("flag_out.npy")).data, load(&f.path("at_out.npy")).data);
    assert_eq!(flag_back, [flag[rows[0]], 0, 0, flag[rows[3]]]);
    assert_eq!(at_back, le(&[at[rows[0]], nat, nat, at[rows[3]]], i64::to_le_bytes));
}

/// Bad ISO bounds and dtypes of another unit or kind are refused, naming the dimension or file
/// and the text, and change nothing on disk.
#[test]
fn bad_times_and_units_are_refused() {
    let f = Fixture::new();
    f.create("h", HOURS);
    f.create("g", GRID);
    let h = f.p("h");
    save(&f.path("flag.npy"), "|b1", &[2, 10], false, &[1; 20]);
    save(&f.path("at.npy"), "<M8[s]", &[2, 10], false, &[0; 160]);
    save(&f.path("day.npy"), "<M8[D]", &[2, 10], false, &[0; 160]);
    save(&f.path("at_ms.npy"), "<M8[ms]", &[2, 10], false, &[0; 160]);
    save(&f.path("at_i8.npy"), "<i8", &[2, 10], false, &[0; 160]);
    save(&f.path("flag_u1.npy"), "|u1", &[2, 10], false, &[1; 20]);
    save(&f.path("flag_2.npy"), "|b1", &[2, 10], false, &[2; 20]);
    let input = |a: &str, file: &str| format!("{a}={}", f.p(file));
    let write = |spec: &str, flag: &str, at: &str| -> Vec<String> {
        ["write", &h, "--subarray", spec, "--input", &input("flag", flag), &input("at", at), &input("day", "day.npy")]
            .map(String::from)
            .to_vec()
    };
    let two = "2024-01-05T10:2024-01-05T11";
    ok(&write(two, "flag.npy", "at.npy").iter().map(String::as_str).collect::<Vec<_>>());
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            write("2024-02-30T00:2024-03-01T00", "flag.npy", "at.npy"),
            "dimension t: \"2024-02-30T00\" is not an ISO 8601 date and time: no such date",
        ),
        (
            write("2024-01-05T10:30,:", "flag.npy", "at.npy"),
            "dimension t: \"2024-01-05T10:30\" is finer than the unit h",
        ),
        (write("2024-01-05T1O:2024-01-05T11", "flag.npy", "at.npy"), "\"2024-01-05T1O\" is not an ISO 8601 date"),
        (
            ["read", &f.p("g"), "--subarray", "2024-01-01", "--output", &input("a", "o.npy")]
                .map(String::from)
                .to_vec(),
            "dimension r has int64 coordinates; \"2024-01-01\" is a time, which only datetime64 dimensions take",
        ),
        (
            write("2024-02-01T00:2024-02-01T01", "flag.npy", "at.npy"),
            "dimension t: range 2024-02-01T00:2024-02-01T01 (474096:474097) is outside the domain \
             2024-01-01T00:2024-01-31T23 (473352:474095)",
        ),
        (
            write(two, "flag.npy", "at_ms.npy"),
            "at_ms.npy: dtype datetime64[ms] (<M8[ms]) has unit ms but attribute at is datetime64[s]; no implicit \
             conversion is done (convert with arr.astype('<M8[s]'))",
        ),
        (
            write(two, "flag.npy", "at_i8.npy"),
            "at_i8.npy: dtype int64 (<i8) does not match attribute at (datetime64[s]), which needs datetime64[s] \
             (<M8[s])",
        ),
        (
            write(two, "flag_u1.npy", "at.npy"),
            "flag_u1.npy: dtype uint8 (|u1) does not match attribute flag (bool), which needs bool (|b1)",
        ),
        (write(two, "flag_2.npy", "at.npy"), "flag"),
        (
            ["read", &h, "--subarray", "2024-01-05T10:2024-01-05", "--output", &input("at", "o.npy")]
                .map(String::from)
                .to_vec(),
            "dimension t: range 2024-01-05T10:2024-01-05T00 (473458:473448) is reversed",
        ),
        (
            ["delete", &h, "--subarray", "2024-13-01"].map(String::from).to_vec(),
            "dimension t: \"2024-13-01\" is not an ISO 8601 date and time: no such date",
        ),
    ];
    for (args, msg) in cases {
        let before = snapshot(f.dir.path());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let e = err(&args);
        assert!(e.contains(msg), "tessera {args:?}: {e:?} should contain {msg:?}");
        assert!(snapshot(f.dir.path()) == before, "tessera {args:?} changed files");
    }
}

#[test]
fn errors_are_clear_and_change_nothing_on_disk() {
    let f = Fixture::new();
    f.create("g", GRID);
    f.create(
        "v",
        r#"{"version": 1, "array_type": "dense",
            "dims": [{"name": "x", "type": "int32", "domain": [1, 10], "tile": 5}],
            "attrs": [{"name": "s", "type": "utf8", "cell_val_num": "var"},
                      {"name": "n", "type": "int32", "nullable": true}],
            "cell_order": "row-major", "tile_order": "row-major"}"#,
    );
    let (g, v) = (f.p("g"), f.p("v"));
    save(&f.path("ok.npy"), "<i4", &[2, 3], false, &le(&[1i32, 2, 3, 4, 5, 6], i32::to_le_bytes));
    ok(&["write", &g, "--subarray", "1:2,1:3", "--input", &f.p("ok.npy")]);
    save(&f.path("f8.npy"), "<f8", &[2, 3], false, &[0; 48]);
    save(&f.path("i4_10.npy"), "<i4", &[10], false, &[0; 40]);
    let big_endian = {
        let mut b = header("<i4", &[2, 3], false);
        let at = b.windows(3).position(|w| w == b"<i4").unwrap();
        b[at] = b'>';
        b.extend_from_slice(&[0; 24]);
        b
    };
    std::fs::write(f.path("be.npy"), big_endian).unwrap();
    let mut truncated = std::fs::read(f.path("ok.npy")).unwrap();
    truncated.truncate(truncated.len() - 4);
    std::fs::write(f.path("short.npy"), truncated).unwrap();
    std::fs::write(f.path("text.npy"), "not numpy").unwrap();
    std::fs::write(
        f.path("bad_schema.json"),
        GRID.replace("\"x\"", "\"q\"").replace("\"r\"", "\"x\"").replace("\"tile\": 7", "\"tile\": 50"),
    )
    .unwrap();
    let ok_npy = f.p("ok.npy");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["write", &g, "--subarray", "1:2,1:x", "--input", &ok_npy], "item 2: \"x\" is not an integer"),
        (vec!["write", &g, "--subarray", "1:2,1:3,1:1", "--input", &ok_npy], "3 ranges but the array has 2 dimensions"),
        (vec!["write", &g, "--subarray", "3:1,1:3", "--input", &ok_npy], "dimension r: range 3:1 is reversed"),
        (
            vec!["write", &g, "--subarray", "1:2,40:42", "--input", &ok_npy],
            "dimension c: range 40:42 is outside the domain 1:40",
        ),
        (
            vec!["write", &g, "--subarray", "1:2,1:3", "--input", &f.p("f8.npy")],
            "f8.npy: dtype float64 (<f8) does not match attribute a (int32)",
        ),
        (
            vec!["write", &g, "--subarray", "1:3,1:2", "--input", &ok_npy],
            "ok.npy: shape (2, 3) does not match the subarray 1:3,1:2, which needs shape (3, 2)",
        ),
        (vec!["write", &g, "--subarray", "1:2,1:3", "--input", &f.p("be.npy")], "big-endian"),
        (
            vec!["write", &g, "--subarray", "1:2,1:3", "--input", &f.p("short.npy")],
            "short.npy: the data section has 20 bytes",
        ),
        (vec!["write", &g, "--subarray", "1:2,1:3", "--input", &f.p("text.npy")], "not a valid .npy file"),
        (vec!["write", &g, "--subarray", "1:2,1:3", "--input", &f.p("missing.npy")], "cannot open input"),
        (
            vec!["write", &g, "--subarray", "1:2,1:3", "--input", &format!("b={ok_npy}")],
            "no attribute \"b\" (it has: a)",
        ),
        (vec!["write", &f.p("nope"), "--input", &ok_npy], "cannot open array"),
        (vec!["write", &v, "--input", &f.p("i4_10.npy")], "attribute s is variable-length"),
        (vec!["read", &v, "--subarray", "1:10", "--output", &format!("s={}", f.p("s.npy"))], "Python API"),
        (vec!["read", &v, "--subarray", "1:10", "--output", &format!("n={}", f.p("n.npy"))], "nullable"),
        (vec!["read", &v, "--output", &format!("n={}", f.p("n.npy"))], "nullable"),
        (vec!["read", &f.p("nope"), "--output", &f.p("o.npy")], "does not exist"),
        (vec!["read", &g, "--subarray", "-9:0", "--output", &f.p("o.npy")], "outside the domain -5:24"),
        (vec!["read", &g, "--output", &f.p("no_dir/o.npy")], "cannot create"),
        (
            vec!["read", &g, "--output", &format!("a={}", f.p("o.npy")), &format!("a={}", f.p("p.npy"))],
            "more than once",
        ),
        (vec!["info", &f.p("nope")], "does not exist"),
        (vec!["read", &g, "--output", &f.p("o.csv")], "is dense and exchanges .npy files"),
        (vec!["write", &g, "--input", &format!("a={}", f.p("in.parquet"))], "is dense and exchanges .npy files"),
        (vec!["read", &g, "--output", &f.p("o.npy"), "--attrs", "a"], "--attrs applies to sparse arrays"),
        (vec!["read", &g, "--output", &f.p("o.npy"), "--layout", "unordered"], "--layout unordered applies to sparse"),
        (vec!["write", &g, "--input", &ok_npy, "--sorted"], "--sorted applies to sparse arrays"),
        (vec!["info", &ok_npy], "is not a Tessera array"),
        (vec!["create", &g, "--schema", &f.p("g.json")], "already exists"),
        (vec!["create", &f.p("new"), "--schema", &f.p("text.npy")], "invalid schema in"),
        (vec!["create", &f.p("new"), "--schema", &f.p("bad_schema.json")], "dimension x: tile extent 50 exceeds"),
        (vec!["create", &f.p("new"), "--schema", &f.p("nope.json")], "cannot read schema file"),
        (vec!["--config", "sm.bogus=1", "info", &g], "unknown key"),
    ]
    .into_iter()
    .map(|(a, m)| (a.into_iter().map(String::from).collect(), m))
    .collect();
    for (args, msg) in cases {
        let before = snapshot(f.dir.path());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let e = err(&args);
        assert!(e.contains(msg), "tessera {args:?}: {e:?} should contain {msg:?}");
        assert_eq!(snapshot(f.dir.path()).keys().collect::<Vec<_>>(), before.keys().collect::<Vec<_>>(), "{args:?}");
        assert!(snapshot(f.dir.path()) == before, "tessera {args:?} changed files");
    }
}

#[test]
fn empty_arrays_read_fill_values_only_when_asked() {
    let f = Fixture::new();
    f.create("g", GRID);
    let g = f.p("g");
    let e = err(&["read", &g, "--output", &f.p("o.npy")]);
    assert!(e.contains("is empty (nothing written yet); give --subarray"), "{e}");
    ok(&["--config", "sm.compute_concurrency=1", "read", &g, "--subarray", "-5:-4,:2", "--output", &f.p("o.npy")]);
    let back = load(&f.path("o.npy"));
    assert_eq!(back.shape, vec![2, 2]);
    assert_eq!(back.data, le(&[i32::MIN; 4], i32::to_le_bytes));
}

#[test]
fn schema_example_creates_an_array() {
    let f = Fixture::new();
    let example = ok(&["schema-example"]);
    std::fs::write(f.path("s.json"), &example).unwrap();
    ok(&["create", &f.p("t"), "--schema", &f.p("s.json")]);
    let info = ok(&["info", &f.p("t")]);
    assert!(info.contains("temperature  float32") && info.contains("byteshuffle -> zstd(level 3)"), "{info}");
}

#[test]
fn the_binary_runs_end_to_end() {
    let f = Fixture::new();
    let bin = env!("CARGO_BIN_EXE_tessera");
    let run = |args: &[&str]| Command::new(bin).args(args).output().unwrap();
    let help = run(&["create", "--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("\"cell_val_num\": 1,"));
    std::fs::write(f.path("g.json"), GRID).unwrap();
    let o = run(&["create", &f.p("g"), "--schema", &f.p("g.json")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cells = grid_cells(-5..=-1, 1..=40, false);
    save(&f.path("in.npy"), "<i4", &[5, 40], false, &le(&cells, i32::to_le_bytes));
    // A negative range right after --subarray must not be taken for an option.
    let o = run(&["write", &f.p("g"), "--subarray", "-5:-1", "--input", &f.p("in.npy")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "no progress bar when stderr is not a terminal");
    let o = run(&["read", &f.p("g"), "--output", &format!("a={}", f.p("out.npy"))]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(load(&f.path("out.npy")).data, le(&cells, i32::to_le_bytes));
    let o = run(&["info", &f.p("g"), "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(json["fragments"][0]["cell_count"], 200);
    // Errors: exit code 1, `error: ...` on stderr naming the array.
    let o = run(&["read", &f.p("missing"), "--output", &f.p("x.npy")]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.starts_with("error: cannot open array ") && stderr.contains("missing"), "{stderr}");
    assert!(o.stdout.is_empty());
}

#[test]
fn sparse_arrays_are_described_and_refuse_npy() {
    let f = Fixture::new();
    f.create(
        "s",
        r#"{"version": 1, "array_type": "sparse",
            "dims": [{"name": "lat", "type": "float64", "domain": [-90.0, 90.0], "tile": 10.0},
                     {"name": "lon", "type": "float64", "domain": [-180.0, 180.0]}],
            "attrs": [{"name": "t", "type": "float32"}],
            "cell_order": "row-major", "tile_order": "row-major", "capacity": 2}"#,
    );
    let s = f.p("s");
    // Write cells through the engine.
    let ctx = tessera::Context::new(tessera::Config::new()).unwrap();
    let w = tessera::Array::open(&ctx, f.path("s"), tessera::Mode::Write).unwrap();
    let (lat, lon) = (le(&[-12.5f64, 3.25, 47.0], f64::to_le_bytes), le(&[100.0f64, -0.5, 7.75], f64::to_le_bytes));
    let t = le(&[1.0f32, 2.0, 3.0], f32::to_le_bytes);
    w.write_sparse(
        &[tessera::CoordInput { name: "lat", data: &lat }, tessera::CoordInput { name: "lon", data: &lon }],
        &[tessera::AttrInput::fixed("t", &t)],
    )
    .unwrap();
    let text = squash(&ok(&["info", &s]));
    for want in [
        "array ",
        "(sparse)",
        "lat float64 -90.0:90.0 10.0 (19 tiles)",
        "lon float64 -180.0:180.0 none",
        "capacity 2 cells per data tile, duplicates not allowed",
        "non-empty domain: -12.5:47.0,-0.5:100.0",
        " 3 -12.5:47.0,-0.5:100.0 ",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let json: serde_json::Value = serde_json::from_str(&ok(&["info", &s, "--json"])).unwrap();
    assert_eq!(json["nonempty_domain"], serde_json::json!([[-12.5, 47.0], [-0.5, 100.0]]));
    assert_eq!(json["fragments"][0]["kind"], "sparse");
    let before = snapshot(f.dir.path());
    save(&f.path("t.npy"), "<f4", &[3], false, &t);
    let before_npy = snapshot(f.dir.path());
    assert_ne!(before, before_npy);
    for args in [vec!["write", &s, "--input", &f.p("t.npy")], vec!["read", &s, "--output", &f.p("o.npy")]] {
        let e = err(&args);
        assert!(e.contains("is sparse") && e.contains(".csv or .parquet") && e.contains("not"), "{e}");
        assert!(snapshot(f.dir.path()) == before_npy);
    }
}

/// A `.npy` file made by hand: `header_text` (the dict), padded, then `data`.
fn raw_npy(header_text: &str, data: &[u8]) -> Vec<u8> {
    let mut text = header_text.to_string();
    while !(10 + text.len() + 1).is_multiple_of(64) {
        text.push(' ');
    }
    text.push('\n');
    let len = u16::try_from(text.len()).unwrap().to_le_bytes();
    [&b"\x93NUMPY\x01\x00"[..], &len, text.as_bytes(), data].concat()
}

/// Sizes in a `.npy` header are checked before anything uses them: a shape whose element count
/// overflows 64 bits (which made `npyz` panic under overflow checks), a shape far larger than
/// the file's data, and a header length past the end of the file are refused, naming the file.
#[test]
fn hostile_npy_headers_are_refused() {
    let f = Fixture::new();
    f.create("g", GRID);
    let g = f.p("g");
    let cases = [
        (
            "overflow.npy",
            raw_npy("{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", &[0; 8]),
            "overflow.npy: not a valid .npy file: shape (4294967296, 4294967296, 2) has more elements than the 8 bytes",
        ),
        (
            "zero.npy",
            raw_npy("{'descr': '<i4', 'fortran_order': True, 'shape': (0, 4294967296, 4294967296), }", &[]),
            "zero.npy: not a valid .npy file: shape (0, 4294967296, 4294967296) has more elements",
        ),
        (
            "huge.npy",
            raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (1099511627776, 1), }", &[0; 16]),
            "huge.npy: not a valid .npy file: shape (1099511627776, 1) has more elements than the 16 bytes",
        ),
    ];
    let mut long_header = raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", &[]);
    long_header[8..10].copy_from_slice(&u16::MAX.to_le_bytes());
    std::fs::write(f.path("long.npy"), long_header).unwrap();
    let before = snapshot(&f.path("g"));
    for (name, bytes, want) in cases.iter().map(|(n, b, w)| (*n, Some(b), *w)).chain([(
        "long.npy",
        None,
        "long.npy: not a valid .npy file: the header (65535 bytes) runs past the end of the file",
    )]) {
        if let Some(b) = bytes {
            std::fs::write(f.path(name), b).unwrap();
        }
        let e = err(&["write", &g, "--subarray", "1:2,1:3", "--input", &f.p(name)]);
        assert!(e.contains(want), "{name}: {e}");
    }
    assert!(snapshot(&f.path("g")) == before, "a refused write changed the array");
    // The same header with a sane shape is accepted.
    std::fs::write(
        f.path("fine.npy"),
        raw_npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }", &le(&[1i32; 6], i32::to_le_bytes)),
    )
    .unwrap();
    ok(&["write", &g, "--subarray", "1:2,1:3", "--input", &f.p("fine.npy")]);
}

/// `tessera advise`: a log of column beams on the grid (rows -5..24 x cols 1..40) recommends
/// tiles long along the rows, prints the expected gain, and `--apply` writes the same cells in
/// that layout; a bad log line is an error naming the line, leaving nothing behind.
#[test]
fn advise_recommends_and_applies_a_layout() {
    let f = Fixture::new();
    f.create("g", GRID);
    let g = f.p("g");
    save(&f.path("all.npy"), "<i4", &[30, 40], false, &le(&grid_cells(-5..=24, 1..=40, false), i32::to_le_bytes));
    ok(&["write", &g, "--input", &f.p("all.npy")]);
    let log: String = (1..=40).map(|c| format!("{{\"ranges\": [null, [{c}, {c}]]}}\n")).collect();
    std::fs::write(f.path("q.jsonl"), log).unwrap();
    let out = ok(&["advise", &g, "--log", &f.p("q.jsonl"), "--min-tile-bytes", "16", "--apply", &f.p("h")]);
    assert!(out.contains("(current)") && out.contains("recommended: tile 30 x ") && out.contains("wrote"), "{out}");
    ok(&["read", &f.p("h"), "--output", &f.p("h.npy")]);
    assert_eq!(load(&f.path("h.npy")).data, le(&grid_cells(-5..=24, 1..=40, false), i32::to_le_bytes));
    std::fs::write(f.path("bad.jsonl"), "{}\n{\"ranges\": [[0, 99], null]}\n").unwrap();
    let before = snapshot(f.dir.path());
    let e = err(&["advise", &g, "--log", &f.p("bad.jsonl"), "--apply", &f.p("k")]);
    assert!(e.contains("bad.jsonl line 2") && e.contains("outside"), "{e}");
    assert_eq!(before, snapshot(f.dir.path()));
}
