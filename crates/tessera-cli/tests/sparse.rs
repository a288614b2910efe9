//! Sparse arrays through the `tessera` command: CSV and Parquet round trips, `tessera import`,
//! bad inputs that must leave the array folder unchanged, float-dimension SPECs, and `--stats`.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]
// Parquet files are built and checked here with the `parquet` crate.
#![cfg(feature = "parquet")]

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use clap::Parser;
use parquet::data_type::{ByteArray, ByteArrayType, DoubleType, FloatType, Int32Type, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use tessera_cli::{run, Cli};

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
        self.path(name).display().to_string()
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn create(&self, name: &str, schema: &str) {
        let s = self.path(&format!("{name}.json"));
        std::fs::write(&s, schema).unwrap();
        ok(&["create", &self.p(name), "--schema", &s.display().to_string()]);
    }
    fn write(&self, name: &str, text: &str) -> String {
        std::fs::write(self.path(name), text).unwrap();
        self.p(name)
    }
}

/// A CSV cell: `None` for an empty field (null), else the text.
type Row = Vec<Option<String>>;

/// The header and rows of a CSV file.
fn read_csv(path: &Path) -> (Vec<String>, Vec<Row>) {
    let mut r = csv::Reader::from_path(path).unwrap();
    let header = r.headers().unwrap().iter().map(String::from).collect();
    let rows = r.records().map(|rec| rec.unwrap().iter().map(|f| (!f.is_empty()).then(|| f.to_string())).collect());
    (header, rows.collect())
}

/// x int32 [-100, 100] tile 10, y int32 [0, 1000] tile 100; every kind of attribute a column holds.
const EVENTS: &str = r#"{"version": 1, "array_type": "sparse",
  "dims": [{"name": "x", "type": "int32", "domain": [-100, 100], "tile": 10},
           {"name": "y", "type": "int32", "domain": [0, 1000], "tile": 100}],
  "attrs": [{"name": "a", "type": "float32", "filters": [{"name": "zstd", "level": 1}]},
            {"name": "b", "type": "int16", "nullable": true},
            {"name": "s", "type": "utf8", "cell_val_num": "var", "nullable": true},
            {"name": "code", "type": "utf8", "cell_val_num": 2},
            {"name": "u", "type": "uint64"}],
  "cell_order": "row-major", "tile_order": "row-major", "capacity": 3}"#;

const EVENT_COLS: [&str; 7] = ["x", "y", "a", "b", "s", "code", "u"];

/// Row `i` of the events data, in EVENT_COLS order (`None`: null).
fn event(i: i64) -> Row {
    let x = (i * 37) % 201 - 100;
    let y = (i * 113) % 1001;
    let a = format!("{:?}", i as f32 * 0.1 - 1.0);
    let b = (i % 4 != 0).then(|| (i * 100 - 2000).to_string());
    let s = match i % 5 {
        1 => None,
        2 => Some(" spaced ".into()),
        3 => Some(format!("a, \"quoted\" {i}\nsecond line")),
        4 => Some(format!("ünïcode {i}")),
        _ => Some(format!("plain{i}")),
    };
    let code = format!("{:02}", i % 100);
    let u = (u64::MAX - i as u64).to_string();
    vec![Some(x.to_string()), Some(y.to_string()), Some(a), b, s, Some(code), Some(u)]
}

/// Writes rows as CSV with columns `order` (indices into EVENT_COLS).
fn events_csv(rows: &[Row], order: &[usize]) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(order.iter().map(|&c| EVENT_COLS[c])).unwrap();
    for r in rows {
        w.write_record(order.iter().map(|&c| r[c].as_deref().unwrap_or(""))).unwrap();
    }
    String::from_utf8(w.into_inner().unwrap()).unwrap()
}

/// (tile index along x, tile index along y, x, y).
type Key = (i64, i64, i64, i64);

fn coords(r: &Row) -> (i64, i64) {
    (r[0].as_ref().unwrap().parse().unwrap(), r[1].as_ref().unwrap().parse().unwrap())
}

#[test]
fn csv_round_trip_in_every_layout() {
    let f = Fixture::new();
    f.create("ev", EVENTS);
    let ev = f.p("ev");
    let rows: Vec<Row> = (0..40).map(event).collect();
    // Columns in another order than the schema's; rows in no particular order.
    let input = f.write("in.csv", &events_csv(&rows, &[4, 6, 0, 5, 2, 1, 3]));
    let out = ok(&["write", &ev, "--input", &input]);
    assert!(out.contains("wrote 40 cells from") && out.contains("as fragment __"), "{out}");
    let want: BTreeSet<Row> = rows.iter().cloned().collect();
    let tile_key = |r: &Row| {
        let (x, y) = coords(r);
        ((x + 100) / 10, y / 100, x, y)
    };
    for layout in ["row-major", "col-major", "global", "unordered"] {
        let o = f.path(&format!("{layout}.csv"));
        let printed = ok(&["read", &ev, "--output", &o.display().to_string(), "--layout", layout]);
        assert!(printed.contains("40 cells") && printed.contains("columns x, y, a, b, s, code, u"), "{printed}");
        let (header, got) = read_csv(&o);
        assert_eq!(header, EVENT_COLS);
        assert_eq!(got.iter().cloned().collect::<BTreeSet<_>>(), want, "{layout}");
        let keys: Vec<Key> = got.iter().map(tile_key).collect();
        let sorted_by = |k: &dyn Fn(&Key) -> Key| keys.windows(2).all(|w| k(&w[0]) < k(&w[1]));
        match layout {
            "row-major" => assert!(sorted_by(&|k| (k.2, k.3, 0, 0)), "row-major output not sorted by (x, y)"),
            "col-major" => assert!(sorted_by(&|k| (k.3, k.2, 0, 0)), "col-major output not sorted by (y, x)"),
            "global" => assert!(sorted_by(&|k| *k), "global output not in tile order"),
            _ => {}
        }
    }
    // --attrs and a subarray: only those columns, only those cells.
    let o = f.p("part.csv");
    ok(&["read", &ev, "--subarray", "-50:50,:500", "--attrs", "s,u", "--output", &o]);
    let (header, got) = read_csv(Path::new(&o));
    assert_eq!(header, ["x", "y", "s", "u"]);
    let want: BTreeSet<Row> = rows
        .iter()
        .filter(|r| {
            let (x, y) = coords(r);
            (-50..=50).contains(&x) && y <= 500
        })
        .map(|r| vec![r[0].clone(), r[1].clone(), r[4].clone(), r[6].clone()])
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), want);
    // A tab-separated file reads and writes with the other delimiter.
    let tsv = f.p("all.tsv");
    ok(&["read", &ev, "--output", &tsv]);
    assert!(std::fs::read_to_string(&tsv).unwrap().starts_with("x\ty\ta\tb\ts\tcode\tu\n"));
    f.create("ev2", EVENTS);
    ok(&["write", &f.p("ev2"), "--input", &tsv]);
    ok(&["read", &f.p("ev2"), "--output", &f.p("ev2.csv"), "--layout", "global"]);
    assert_eq!(std::fs::read(f.path("ev2.csv")).unwrap(), std::fs::read(f.path("global.csv")).unwrap());
    // No temporary files are left behind.
    assert!(snapshot(f.dir.path()).keys().all(|p| !p.display().to_string().ends_with(".tmp")));
}

#[test]
fn parquet_round_trip_and_foreign_parquet_files() {
    let f = Fixture::new();
    f.create("ev", EVENTS);
    let rows: Vec<Row> = (0..40).map(event).collect();
    ok(&["write", &f.p("ev"), "--input", &f.write("in.csv", &events_csv(&rows, &[0, 1, 2, 3, 4, 5, 6]))]);
    ok(&["read", &f.p("ev"), "--output", &f.p("ev.parquet"), "--layout", "global"]);
    // The Parquet file's schema: types, signedness and optional (nullable) columns.
    let reader = parquet::file::reader::SerializedFileReader::new(File::open(f.path("ev.parquet")).unwrap()).unwrap();
    let schema = parquet::file::reader::FileReader::metadata(&reader).file_metadata().schema_descr_ptr();
    let fields: Vec<String> =
        schema.columns().iter().map(|c| format!("{} {} {}", c.name(), c.physical_type(), c.max_def_level())).collect();
    assert_eq!(
        fields,
        ["x INT32 0", "y INT32 0", "a FLOAT 0", "b INT32 1", "s BYTE_ARRAY 1", "code BYTE_ARRAY 0", "u INT64 0"]
    );
    // Parquet → a new array → CSV equals the first array's CSV.
    f.create("ev2", EVENTS);
    let out = ok(&["write", &f.p("ev2"), "--input", &f.p("ev.parquet")]);
    assert!(out.contains("wrote 40 cells"), "{out}");
    ok(&["read", &f.p("ev"), "--output", &f.p("a.csv"), "--layout", "global"]);
    ok(&["read", &f.p("ev2"), "--output", &f.p("b.csv"), "--layout", "global"]);
    assert_eq!(std::fs::read(f.path("a.csv")).unwrap(), std::fs::read(f.path("b.csv")).unwrap());

    // A file written by another Parquet writer: two row groups, INT32/INT64/FLOAT/DOUBLE/UTF8,
    // optional columns with nulls, an unsigned INT32; integers go into a float attribute.
    f.create(
        "other",
        r#"{"version": 1, "array_type": "sparse",
            "dims": [{"name": "i", "type": "int64", "domain": [0, 99]}],
            "attrs": [{"name": "f", "type": "float32", "nullable": true},
                      {"name": "d", "type": "float64"},
                      {"name": "s", "type": "utf8", "cell_val_num": "var", "nullable": true},
                      {"name": "w", "type": "uint32"},
                      {"name": "n", "type": "float64"}],
            "cell_order": "row-major", "tile_order": "row-major"}"#,
    );
    let msg = "message m { REQUIRED INT64 i; OPTIONAL FLOAT f; REQUIRED DOUBLE d; OPTIONAL BYTE_ARRAY s (UTF8);
                           REQUIRED INT32 w (UINT_32); REQUIRED INT32 n; OPTIONAL BOOLEAN unused; }";
    let path = f.path("foreign.parquet");
    let mut w = SerializedFileWriter::new(
        File::create(&path).unwrap(),
        Arc::new(parse_message_type(msg).unwrap()),
        Arc::new(WriterProperties::builder().build()),
    )
    .unwrap();
    for group in 0..2i64 {
        let ids: Vec<i64> = (0..5).map(|k| 90 - group * 10 - k).collect();
        let mut rg = w.next_row_group().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<Int64Type>().write_batch(&ids, None, None).unwrap();
        c.close().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<FloatType>().write_batch(&[0.5, 1.5], Some(&[1, 0, 0, 1, 0]), None).unwrap();
        c.close().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<DoubleType>().write_batch(&[1e300, -0.0, 0.1, f64::NAN, 2.0], None, None).unwrap();
        c.close().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        let strs: Vec<ByteArray> = ["", "zwei", "drei"].iter().map(|s| ByteArray::from(*s)).collect();
        c.typed::<ByteArrayType>().write_batch(&strs, Some(&[1, 0, 1, 1, 0]), None).unwrap();
        c.close().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<Int32Type>().write_batch(&[-1, 0, 1, 2, i32::MIN], None, None).unwrap();
        c.close().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        c.typed::<Int32Type>().write_batch(&[7, -7, 0, i32::MAX, 3], None, None).unwrap();
        c.close().unwrap();
        let mut c = rg.next_column().unwrap().unwrap();
        if let parquet::column::writer::ColumnWriter::BoolColumnWriter(b) = c.untyped() {
            b.write_batch(&[true], Some(&[0, 0, 1, 0, 0]), None).unwrap();
        }
        c.close().unwrap();
        rg.close().unwrap();
    }
    w.close().unwrap();
    let e = err(&["write", &f.p("other"), "--input", &f.p("foreign.parquet")]);
    assert!(e.contains("column unused matches no dimension or attribute") && e.contains("--ignore-extra"), "{e}");
    ok(&["write", &f.p("other"), "--input", &f.p("foreign.parquet"), "--ignore-extra"]);
    ok(&["read", &f.p("other"), "--output", &f.p("other.csv")]);
    let (header, got) = read_csv(&f.path("other.csv"));
    assert_eq!(header, ["i", "f", "d", "s", "w", "n"]);
    let s = |x: &str| Some(x.to_string());
    let want_group = |g: i64| -> Vec<Row> {
        let i = |k: i64| s(&(90 - g * 10 - k).to_string());
        vec![
            vec![i(4), None, s("2.0"), None, s("2147483648"), s("3.0")],
            vec![i(3), s("1.5"), s("NaN"), s("drei"), s("2"), s("2147483647.0")],
            vec![i(2), None, s("0.1"), s("zwei"), s("1"), s("0.0")],
            vec![i(1), None, s("-0.0"), None, s("0"), s("-7.0")],
            vec![i(0), s("0.5"), s("1e300"), None, s("4294967295"), s("7.0")],
        ]
    };
    let want: Vec<Row> = want_group(1).into_iter().chain(want_group(0)).collect();
    assert_eq!(got, want);
}

#[test]
fn import_infers_the_schema() {
    let f = Fixture::new();
    let csv = f.write(
        "pts.csv",
        "id,lon,lat,name,temp,count,note\n\
         1,10,-5,alpha,20.5,3,x\n\
         2,20,15,\"beta, two\",-1,,\n\
         3,30,25,gamma,1e-3,7,\"\"\n\
         4,-40,35,,NaN,1,y\n",
    );
    let out = ok(&["import", &csv, &f.p("pts"), "--dims", "lon,lat", "--attrs", "name,temp,count,note"]);
    for want in [
        "imported 4 cells from",
        "dimension lon: int64, domain -40:30, no tile extent",
        "dimension lat: int64, domain -5:35",
        "attribute name: utf8 (variable length), nullable",
        "attribute temp: float64\n",
        "attribute count: int64, nullable",
        "attribute note: utf8 (variable length), nullable",
        "1 fragment (__",
        "stored",
        "on disk",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", &f.p("pts"), "--json"])).unwrap();
    assert_eq!(info["schema"]["array_type"], "sparse");
    assert_eq!(info["fragments"].as_array().unwrap().len(), 1);
    let attrs = info["schema"]["attrs"].as_array().unwrap();
    assert_eq!(
        attrs.iter().map(|a| a["name"].as_str().unwrap()).collect::<Vec<_>>(),
        ["name", "temp", "count", "note"]
    );
    assert!(attrs.iter().all(|a| a.get("filters").is_none_or(|f| f.as_array().unwrap().is_empty())));
    ok(&["read", &f.p("pts"), "--output", &f.p("back.csv"), "--layout", "row-major"]);
    let (header, rows) = read_csv(&f.path("back.csv"));
    assert_eq!(header, ["lon", "lat", "name", "temp", "count", "note"]);
    let s = |x: &str| Some(x.to_string());
    assert_eq!(
        rows,
        vec![
            vec![s("-40"), s("35"), None, s("NaN"), s("1"), s("y")],
            vec![s("10"), s("-5"), s("alpha"), s("20.5"), s("3"), s("x")],
            vec![s("20"), s("15"), s("beta, two"), s("-1.0"), None, None],
            vec![s("30"), s("25"), s("gamma"), s("0.001"), s("7"), None],
        ]
    );

    // Options: domain, tiles, capacity, Hilbert order, zstd, duplicates; mixed dimension types.
    let csv = f.write("mixed.csv", "t,v,w\n1,0.5,a\n1,0.5,b\n3,2.25,c\n");
    let out = ok(&[
        "import",
        &csv,
        &f.p("mixed"),
        "--dims",
        "t,v",
        "--domain",
        "t=-10:10,v=-1e3:1e3",
        "--tile",
        "t=2.5",
        "--capacity",
        "2",
        "--cell-order",
        "hilbert",
        "--tile-order",
        "z",
        "--zstd",
        "7",
        "--allows-duplicates",
    ]);
    assert!(out.contains("note: t holds integers but is float64"), "{out}");
    assert!(out.contains("dimension t: float64, domain -10.0:10.0, tile 2.5"), "{out}");
    assert!(out.contains("cell order hilbert, tile order z, capacity 2, duplicates allowed"), "{out}");
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", &f.p("mixed"), "--json"])).unwrap();
    assert_eq!((&info["schema"]["cell_order"], &info["schema"]["tile_order"]), (&"hilbert".into(), &"z".into()));
    assert_eq!(info["schema"]["version"], 2);
    assert_eq!(info["schema"]["dims"][1]["domain"], serde_json::json!([-1000.0, 1000.0]));
    assert_eq!(info["schema"]["attrs"][0]["filters"], serde_json::json!([{"name": "zstd", "level": 7}]));
    assert_eq!(
        info["schema"]["dims"][0]["filters"],
        serde_json::json!([{"name": "delta"}, {"name": "byteshuffle"}, {"name": "zstd", "level": 7}])
    );
    assert_eq!(info["fragments"][0]["cell_count"], 3);

    // Parquet import: types from the column types; a file written by `tessera read`.
    ok(&["read", &f.p("pts"), "--output", &f.p("pts.parquet")]);
    let out = ok(&["import", &f.p("pts.parquet"), &f.p("pts2"), "--dims", "lat,lon", "--cell-order", "col-major"]);
    assert!(
        out.contains("dimension lat: int64, domain -5:35") && out.contains("attribute count: int64, nullable"),
        "{out}"
    );
    ok(&["read", &f.p("pts2"), "--output", &f.p("back2.csv"), "--attrs", "temp", "--layout", "col-major"]);
    let (_, rows2) = read_csv(&f.path("back2.csv"));
    assert_eq!(rows2.len(), 4);
    // col-major: the first dimension (lat) varies fastest, so rows go by lon.
    assert_eq!(rows2[0], vec![s("35"), s("-40"), s("NaN")]);
    assert_eq!(rows2[1], vec![s("-5"), s("10"), s("20.5")]);
}

/// Every bad input is reported (naming the row and column, or the line) and changes nothing.
#[test]
fn bad_inputs_change_nothing() {
    let f = Fixture::new();
    f.create("ev", EVENTS);
    let ev = f.p("ev");
    let good: Vec<Row> = (0..6).map(event).collect();
    let all: Vec<usize> = (0..7).collect();
    ok(&["write", &ev, "--input", &f.write("good.csv", &events_csv(&good, &all))]);
    let with = |i: usize, col: usize, v: Option<&str>| {
        let mut rows = good.clone();
        rows[i][col] = v.map(String::from);
        events_csv(&rows, &all)
    };
    let header = "x,y,a,b,s,code,u\n";
    let first = events_csv(&good[..1], &all);
    let first_row = first.lines().nth(1).unwrap().to_string();
    let mut cases: Vec<(String, &str)> = vec![
        (
            f.write("nonint.csv", &with(2, 0, Some("1.5"))),
            "nonint.csv: Parser error: Error while parsing value '1.5' as type 'Int32' for column 0 at line 3.",
        ),
        (
            f.write("word.csv", &with(1, 3, Some("ten"))),
            "word.csv: Parser error: Error while parsing value 'ten' as type 'Int16' for column 3 at line 2.",
        ),
        (
            f.write("range.csv", &with(4, 3, Some("40000"))),
            "range.csv: Parser error: Error while parsing value '40000' as type 'Int16' for column 3 at line 5.",
        ),
        (
            f.write("domain.csv", &with(0, 1, Some("1001"))),
            "row 1, column y: 1001 is outside the domain 0:1000 of dimension y",
        ),
        (f.write("nullnn.csv", &with(3, 2, None)), "row 4, column a: no value (null), but attribute a is not nullable"),
        (f.write("nulldim.csv", &with(3, 0, None)), "column x: no value, but dimension x needs a coordinate"),
        // An empty field of a string attribute that is not nullable is the empty string.
        (
            f.write("nullstr.csv", &with(5, 5, None)),
            "column code: \"\" has 0 bytes, but attribute code holds strings of exactly 2 bytes",
        ),
        (
            f.write("fixed.csv", &with(5, 5, Some("abc"))),
            "column code: \"abc\" has 3 bytes, but attribute code holds strings of exactly 2 bytes",
        ),
        (f.write("float.csv", &with(1, 2, Some("1e39"))), "column a: 1e39 is out of range for float32"),
        (
            f.write("missing.csv", &events_csv(&good, &[0, 1, 2, 3, 4, 5])),
            "missing.csv: no column for attribute u of array",
        ),
        (
            f.write("nodims.csv", &events_csv(&good, &[2, 3, 4, 5, 6])),
            "no column for dimension x, dimension y of array",
        ),
        (
            f.write("extra.csv", &format!("x,y,a,b,s,code,u,extra\n{first_row},1\n")),
            "extra.csv: column extra matches no dimension or attribute of array",
        ),
        (
            f.write("open.csv", &format!("{header}{first_row}\n1,2,3.0,4,\"never closed,xy,5\n")),
            "open.csv: Io error: unbalanced quotes: a quoted field is not closed",
        ),
        (
            f.write("fields.csv", &format!("{header}{first_row}\n1,2,3\n")),
            "fields.csv: Csv error: incorrect number of fields for line 3, expected 7 got 3",
        ),
        (
            f.write("dup.csv", &events_csv(&[good[0].clone(), good[1].clone(), good[0].clone()], &all)),
            "duplicate coordinates (-100, 0) at cells 0 and 2",
        ),
        (f.write("empty.csv", header), "empty.csv has no data rows"),
        (f.write("nothing.csv", ""), "nothing.csv is empty: a CSV file needs a header row"),
        (f.write("unsorted.csv", &events_csv(&[good[1].clone(), good[0].clone()], &all)), "not in global order"),
        (f.write("data.json", "{}"), "unknown file type"),
        (f.write("data.npy", "x"), "is sparse: write it from a .csv or .parquet file"),
        (f.p("absent.csv"), "cannot open input"),
    ];
    // Parquet: a null in a non-nullable attribute, floats for an integer dimension.
    let pq = |name: &str, msg: &str, write: &dyn Fn(&mut SerializedFileWriter<File>)| {
        let mut w = SerializedFileWriter::new(
            File::create(f.path(name)).unwrap(),
            Arc::new(parse_message_type(msg).unwrap()),
            Arc::new(WriterProperties::builder().build()),
        )
        .unwrap();
        write(&mut w);
        w.close().unwrap();
        f.p(name)
    };
    let events_parquet = |name: &str, x_type: &str, a_nulls: bool| {
        let msg = format!(
            "message m {{ REQUIRED {x_type} x; REQUIRED INT32 y; OPTIONAL FLOAT a; OPTIONAL INT32 b; OPTIONAL BYTE_ARRAY s (UTF8);
                         REQUIRED BYTE_ARRAY code (UTF8); REQUIRED INT64 u (UINT_64); }}"
        );
        pq(name, &msg, &|w| {
            let mut rg = w.next_row_group().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            if x_type == "DOUBLE" {
                c.typed::<DoubleType>().write_batch(&[1.0, 2.0], None, None).unwrap();
            } else {
                c.typed::<Int32Type>().write_batch(&[1, 2], None, None).unwrap();
            }
            c.close().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<Int32Type>().write_batch(&[5, 6], None, None).unwrap();
            c.close().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            let defs: &[i16] = if a_nulls { &[1, 0] } else { &[1, 1] };
            c.typed::<FloatType>()
                .write_batch(&[1.0, 2.0][..defs.iter().filter(|&&d| d == 1).count()], Some(defs), None)
                .unwrap();
            c.close().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<Int32Type>().write_batch(&[], Some(&[0, 0]), None).unwrap();
            c.close().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<ByteArrayType>().write_batch(&[], Some(&[0, 0]), None).unwrap();
            c.close().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<ByteArrayType>()
                .write_batch(&[ByteArray::from("ab"), ByteArray::from("cd")], None, None)
                .unwrap();
            c.close().unwrap();
            let mut c = rg.next_column().unwrap().unwrap();
            c.typed::<Int64Type>().write_batch(&[-1, 5], None, None).unwrap();
            c.close().unwrap();
            rg.close().unwrap();
        })
    };
    cases.push((
        events_parquet("null.parquet", "INT32", true),
        "null.parquet: row 2, column a: no value (null), but attribute a is not nullable",
    ));
    cases.push((
        events_parquet("float_x.parquet", "DOUBLE", false),
        "column x has type DOUBLE, which cannot hold dimension x (int32)",
    ));
    std::fs::write(f.path("junk.parquet"), "not parquet at all").unwrap();
    cases.push((f.p("junk.parquet"), "junk.parquet is not a readable Parquet file"));
    // A good Parquet file is accepted (and checked last so the cases above see the first state).
    let good_parquet = events_parquet("good.parquet", "INT32", false);

    let array_dir = f.path("ev");
    for (input, msg) in cases {
        let before = snapshot(&array_dir);
        let sorted = input.ends_with("unsorted.csv");
        let mut args = vec!["write", ev.as_str(), "--input", input.as_str()];
        if sorted {
            args.push("--sorted");
        }
        let e = err(&args);
        assert!(e.contains(msg), "tessera {args:?}:\n{e}\nshould contain\n{msg}");
        assert!(snapshot(&array_dir) == before, "tessera {args:?} changed the array folder");
    }
    // Flags that do not fit.
    for (args, msg) in [
        (vec!["write", &ev, "--input", &f.p("good.csv"), "--subarray", "1:2,1:2"], "--subarray is for dense writes"),
        (vec!["write", &ev, "--input", &f.p("good.csv"), &f.p("good.csv")], "give one --input file"),
        (vec!["write", &ev, "--input", &good_parquet, "--delimiter", ";"], "--delimiter applies to CSV files"),
        (vec!["write", &ev, "--input", &f.p("good.csv"), "--delimiter", "ab"], "expected one ASCII character"),
        (vec!["read", &ev, "--output", &f.p("o.csv"), "--attrs", "nope"], "has no attribute \"nope\""),
        (
            vec!["read", &ev, "--output", &f.p("o.csv"), "--subarray", "1.5:3"],
            "dimension x has int32 coordinates; 1.5 is not an integer",
        ),
        (vec!["read", &ev, "--output", &f.p("o.csv"), "--subarray", "3:1"], "range 3:1 is reversed"),
        (vec!["read", &ev, "--output", &f.p("o.npy")], "read it into a .csv or .parquet file"),
        (vec!["read", &ev, "--output", &f.p("no_dir/o.csv")], "cannot create"),
    ] {
        let before = snapshot(f.dir.path());
        let e = err(&args);
        assert!(e.contains(msg), "tessera {args:?}:\n{e}\nshould contain\n{msg}");
        assert!(snapshot(f.dir.path()) == before, "tessera {args:?} changed files");
    }
    // The same data, fixed, goes in; --ignore-extra skips the extra column.
    ok(&["write", &ev, "--input", &f.p("extra.csv"), "--ignore-extra"]);
    ok(&["write", &ev, "--input", &good_parquet]);
    ok(&[
        "write",
        &ev,
        "--input",
        &f.write("sorted.csv", &events_csv(&[good[0].clone(), good[1].clone()], &all)),
        "--sorted",
    ]);
    let info: serde_json::Value = serde_json::from_str(&ok(&["info", &ev, "--json"])).unwrap();
    let counts: Vec<u64> =
        info["fragments"].as_array().unwrap().iter().map(|f| f["cell_count"].as_u64().unwrap()).collect();
    assert_eq!(counts, [6, 1, 2, 2]);
}

#[test]
fn failed_imports_leave_no_array() {
    let f = Fixture::new();
    let dup = f.write("dup.csv", "x,y,v\n1,1,a\n2,2,b\n1,1,c\n");
    let text_dim = f.write("text.csv", "x,y,v\n1,1,a\n2,oops,b\n");
    let null_dim = f.write("null.csv", "x,y,v\n1,1,a\n2,,b\n");
    let nan_dim = f.write("nan.csv", "x,y,v\n1,1,a\n2,nan,b\n");
    std::fs::create_dir(f.path("full")).unwrap();
    std::fs::write(f.path("full/file"), "x").unwrap();
    std::fs::create_dir(f.path("empty_dir")).unwrap();
    let (a, empty_dir, full) = (f.p("a"), f.p("empty_dir"), f.p("full"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["import", &dup, &a, "--dims", "x,y"], "duplicate coordinates (1, 1) at cells 0 and 2"),
        (vec!["import", &dup, &empty_dir, "--dims", "x,y"], "duplicate coordinates"),
        (vec!["import", &text_dim, &a, "--dims", "x,y"], "column y holds text; a dimension needs numbers"),
        (vec!["import", &null_dim, &a, "--dims", "x,y"], "column y has 1 empty value (first at row 2)"),
        (vec!["import", &nan_dim, &a, "--dims", "x,y"], "column y holds NaN or infinite values"),
        (vec!["import", &dup, &full, "--dims", "x,y"], "it already exists"),
        (vec!["import", &dup, &a, "--dims", "x,q"], "no column \"q\" for --dims"),
        (vec!["import", &dup, &a, "--dims", "x,y,v"], "needs at least one attribute"),
        (vec!["import", &dup, &a, "--dims", "x", "--attrs", "x"], "both as a dimension and as an attribute"),
        (vec!["import", &dup, &a, "--dims", "x,y", "--tile", "z=3"], "\"z\" is not one of the dimensions"),
        (vec!["import", &dup, &a, "--dims", "x,y", "--tile", "x=0"], "--tile x=0: expected a positive integer"),
        (vec!["import", &dup, &a, "--dims", "x,y", "--domain", "x=5"], "--domain x=5: expected LO:HI"),
        (vec!["import", &dup, &a, "--dims", "x,y", "--domain", "x=2:5"], "1 is outside the domain 2:5 of dimension x"),
        (vec!["import", &dup, &a, "--dims", "x,y", "--zstd", "99"], "--zstd 99"),
    ];
    for (args, msg) in cases {
        let before = snapshot(f.dir.path());
        let e = err(&args);
        assert!(e.contains(msg), "tessera {args:?}:\n{e}\nshould contain\n{msg}");
        assert!(snapshot(f.dir.path()) == before, "tessera {args:?} changed files");
    }
    // With duplicates allowed the same file imports (into the empty folder too).
    let out = ok(&["import", &dup, &f.p("empty_dir"), "--dims", "x,y", "--allows-duplicates"]);
    assert!(out.contains("imported 3 cells"), "{out}");
}

#[test]
fn float_dimension_specs() {
    let f = Fixture::new();
    f.create(
        "geo",
        r#"{"version": 1, "array_type": "sparse",
            "dims": [{"name": "lat", "type": "float64", "domain": [-90.0, 90.0], "tile": 10.0},
                     {"name": "lon", "type": "float64", "domain": [-180.0, 180.0]}],
            "attrs": [{"name": "t", "type": "float32"}],
            "cell_order": "hilbert", "tile_order": "row-major", "capacity": 4}"#,
    );
    let mut text = String::from("lat,lon,t\n");
    let mut pts = Vec::new();
    for i in 0..60 {
        let lat = -88.5 + 3.0 * f64::from(i);
        let lon = -179.75 + 6.0 * f64::from((i * 7) % 60);
        pts.push((lat, lon));
        text.push_str(&format!("{lat},{lon},{i}\n"));
    }
    ok(&["write", &f.p("geo"), "--input", &f.write("geo.csv", &text)]);
    for (spec, lat_r, lon_r) in [
        ("-12.5:47,:", (-12.5, 47.0), (-180.0, 180.0)),
        ("-12.5:47.0,-0.5:100.25", (-12.5, 47.0), (-0.5, 100.25)),
        ("0:30,", (0.0, 30.0), (-180.0, 180.0)),
        (":-80.5,10:", (-90.0, -80.5), (10.0, 180.0)),
        ("-2.5", (-2.5, -2.5), (-180.0, 180.0)),
        ("1.5:1.75", (1.5, 1.75), (-180.0, 180.0)),
    ] {
        let out = f.p("o.csv");
        ok(&["read", &f.p("geo"), "--subarray", spec, "--output", &out]);
        let (_, rows) = read_csv(Path::new(&out));
        let got: BTreeSet<(String, String)> =
            rows.iter().map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap())).collect();
        let want: BTreeSet<(String, String)> = pts
            .iter()
            .filter(|(a, b)| lat_r.0 <= *a && *a <= lat_r.1 && lon_r.0 <= *b && *b <= lon_r.1)
            .map(|(a, b)| (format!("{a:?}"), format!("{b:?}")))
            .collect();
        assert_eq!(got, want, "{spec}");
        // Row-major output is sorted by (lat, lon).
        let keys: Vec<(f64, f64)> = rows
            .iter()
            .map(|r| (r[0].as_ref().unwrap().parse().unwrap(), r[1].as_ref().unwrap().parse().unwrap()))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{spec}");
    }
    let e = err(&["read", &f.p("geo"), "--subarray", "1:x", "--output", &f.p("o.csv")]);
    assert!(e.contains("\"x\" is not a finite number"), "{e}");
    let e = err(&["read", &f.p("geo"), "--subarray", "-91:0", "--output", &f.p("o.csv")]);
    assert!(e.contains("dimension lat: range -91.0:0.0 is outside the domain -90.0:90.0"), "{e}");
    let e = err(&["read", &f.p("geo"), "--subarray", "10:-10", "--output", &f.p("o.csv")]);
    assert!(e.contains("dimension lat: range 10.0:-10.0 is reversed"), "{e}");
    // A NaN coordinate is refused with its row.
    let e = err(&["write", &f.p("geo"), "--input", &f.write("nan.csv", "lat,lon,t\n1,2,3\nNaN,1,2\n")]);
    assert!(e.contains("row 2, column lat: NaN is not a finite coordinate"), "{e}");
}

/// A float dimension whose domain and tile the JSON gives as integers (`[0, 10]`, `5`) is a float
/// dimension all the same: integer CSV coordinates are converted (not stored as integer bits),
/// and `info` prints float bounds. Delete fragments are labelled "delete".
#[test]
fn float_dimension_with_integer_json_domain_and_delete_fragments() {
    let f = Fixture::new();
    f.create(
        "fi",
        r#"{"version": 1, "array_type": "sparse",
            "dims": [{"name": "x", "type": "float64", "domain": [0, 10], "tile": 5}],
            "attrs": [{"name": "a", "type": "int32"}],
            "cell_order": "row-major", "tile_order": "row-major", "capacity": 100}"#,
    );
    ok(&[
        "write",
        &f.p("fi"),
        "--input",
        &f.write(
            "i.csv",
            "x,a
1,3
7.5,4
",
        ),
    ]);
    let out = f.p("o.csv");
    ok(&["read", &f.p("fi"), "--subarray", "0.5:8", "--output", &out]);
    let (_, rows) = read_csv(Path::new(&out));
    let got: Vec<(String, String)> = rows.iter().map(|r| (r[0].clone().unwrap(), r[1].clone().unwrap())).collect();
    assert_eq!(got, [("1.0".to_string(), "3".to_string()), ("7.5".to_string(), "4".to_string())]);
    let e = err(&[
        "write",
        &f.p("fi"),
        "--input",
        &f.write(
            "o.csv",
            "x,a
11,3
",
        ),
    ]);
    assert!(e.contains("11") && e.contains("outside the domain"), "{e}");
    ok(&["delete", &f.p("fi"), "--subarray", "7:8"]);
    let info = ok(&["info", &f.p("fi")]);
    // The dimension table: name type domain tile filters; the fragment table: name kind ...
    assert!(
        info.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["x", "float64", "0.0:10.0", "5.0", "(3", "tiles)"]),
        "{info}"
    );
    assert!(info.contains("non-empty domain: 1.0:7.5"), "{info}");
    let kinds: Vec<&str> =
        info.lines().filter(|l| l.starts_with("  __")).map(|l| l.split_whitespace().nth(1).unwrap()).collect();
    assert_eq!(kinds, ["sparse", "delete"], "{info}");
    let json: serde_json::Value = serde_json::from_str(&ok(&["info", &f.p("fi"), "--json"])).unwrap();
    let kinds: Vec<&str> = json["fragments"].as_array().unwrap().iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["sparse", "delete"]);
    assert_eq!(json["fragments"][0]["nonempty_domain"], serde_json::json!([[1.0, 7.5]]));
}

#[test]
fn stats_are_printed_only_when_asked() {
    let f = Fixture::new();
    let bin = env!("CARGO_BIN_EXE_tessera");
    let run = |args: &[&str]| Command::new(bin).args(args).output().unwrap();
    let csv = f.write("p.csv", "x,y,v\n1,1,0.5\n2,3,1.5\n");
    let o = run(&["import", &csv, &f.p("p"), "--dims", "x,y", "--stats"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("Write query submits: 1"), "{stderr}");
    let o = run(&["read", &f.p("p"), "--output", &f.p("o.csv"), "--stats"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("Read query submits:") && stderr.contains("Summary:"), "{stderr}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("2 cells"));
    let o = run(&["read", &f.p("p"), "--output", &f.p("o.csv")]);
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "without --stats nothing is printed to stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    // --stats-json writes JSON and prints nothing; also before the subcommand.
    let o = run(&["--stats-json", &f.p("s.json"), "write", &f.p("p"), "--input", &f.write("q.csv", "x,y,v\n2,1,1\n")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty());
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(f.path("s.json")).unwrap()).unwrap();
    assert!(json["summary"].is_object() && json["counters"].is_object(), "{json}");
    // Statistics are printed for a failing command too, after which comes the error.
    let o = run(&["read", &f.p("p"), "--output", &f.p("o.csv"), "--attrs", "nope", "--stats"]);
    assert_eq!(o.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("Read query submits:") && stderr.contains("error: --attrs"), "{stderr}");
}

/// A sparse array of `bool` and `datetime64` columns: t datetime64[ms] (2000-01-01 to 2100-01-01,
/// one tile a day), flag bool, day datetime64[D], seen datetime64[s] (nullable).
const TIMES: &str = r#"{"version": 3, "array_type": "sparse",
  "dims": [{"name": "t", "type": "datetime64[ms]", "domain": [946684800000, 4102444800000], "tile": 86400000}],
  "attrs": [{"name": "flag", "type": "bool"}, {"name": "day", "type": "datetime64[D]"},
            {"name": "seen", "type": "datetime64[s]", "nullable": true}],
  "cell_order": "row-major", "tile_order": "row-major", "capacity": 2}"#;

/// Writes `batch` as a Parquet file with the `parquet` crate's Arrow writer.
fn arrow_parquet(f: &Fixture, name: &str, cols: Vec<(&str, arrow_array::ArrayRef)>) -> String {
    let batch = arrow_array::RecordBatch::try_from_iter(cols).unwrap();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(File::create(f.path(name)).unwrap(), batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    f.p(name)
}

/// bool and datetime64 columns: CSV takes true/false/1/0 and ISO 8601 text and writes
/// true/false, ISO text at the unit's precision and NaT; Parquet holds BOOLEAN, TIMESTAMP and
/// DATE columns, NaT as null; everything reads back the same.
#[test]
fn bool_and_datetime_round_trip_csv_and_parquet() {
    let f = Fixture::new();
    f.create("tm", TIMES);
    let input = "t,flag,day,seen\n\
                 2020-01-01T00:00:00.001Z,TRUE,2020-02-29,2020-01-01 12:30:05\n\
                 2000-01-01,0,1969-12-31,NaT\n\
                 2099-12-31T23:59:59.999,false,+10000-01-01,\n\
                 2020-01-01 00:00,1,NaT,1970-01-01T00:00:00\n";
    ok(&["write", &f.p("tm"), "--input", &f.write("in.csv", input)]);
    ok(&["read", &f.p("tm"), "--output", &f.p("a.csv")]);
    let want = "t,flag,day,seen\n\
                2000-01-01T00:00:00.000,false,1969-12-31,NaT\n\
                2020-01-01T00:00:00.000,true,NaT,1970-01-01T00:00:00\n\
                2020-01-01T00:00:00.001,true,2020-02-29,2020-01-01T12:30:05\n\
                2099-12-31T23:59:59.999,false,+10000-01-01,\n";
    assert_eq!(std::fs::read_to_string(f.path("a.csv")).unwrap(), want);
    let out = ok(&["info", &f.p("tm")]);
    assert!(out.contains("2000-01-01T00:00:00.000:2100-01-01T00:00:00.000 (946684800000:4102444800000)"), "{out}");

    // Parquet: TIMESTAMP(MILLIS) for ms and s, DATE for D, BOOLEAN; NaT as null, so day (which
    // holds a NaT) and seen are optional columns; t and flag are required.
    ok(&["read", &f.p("tm"), "--output", &f.p("a.parquet")]);
    let reader = parquet::file::reader::SerializedFileReader::new(File::open(f.path("a.parquet")).unwrap()).unwrap();
    let schema = parquet::file::reader::FileReader::metadata(&reader).file_metadata().schema_descr_ptr();
    let fields: Vec<String> = (schema.columns().iter())
        .map(|c| format!("{} {} {:?} {}", c.name(), c.physical_type(), c.logical_type_ref(), c.max_def_level()))
        .collect();
    let ts = "Some(Timestamp(TimestampType { is_adjusted_to_u_t_c: false, unit: MILLIS }))";
    assert_eq!(
        fields,
        [
            format!("t INT64 {ts} 0"),
            "flag BOOLEAN None 0".into(),
            "day INT32 Some(Date) 1".into(),
            format!("seen INT64 {ts} 1"),
        ]
    );
    // Back in: the null of day (not nullable) is NaT again; the NaT of seen (nullable) came back
    // null, as pandas reads it.
    f.create("tm2", TIMES);
    ok(&["write", &f.p("tm2"), "--input", &f.p("a.parquet")]);
    ok(&["read", &f.p("tm2"), "--output", &f.p("b.csv")]);
    assert_eq!(std::fs::read_to_string(f.path("b.csv")).unwrap(), want.replace(",NaT\n", ",\n"));
    // A null coordinate is still refused, naming the row; nothing is written.
    let t: arrow_array::ArrayRef =
        Arc::new(arrow_array::TimestampMillisecondArray::from(vec![Some(946_684_800_000), None]));
    let (flag, day): (arrow_array::ArrayRef, arrow_array::ArrayRef) = (
        Arc::new(arrow_array::BooleanArray::from(vec![true, false])),
        Arc::new(arrow_array::Date32Array::from(vec![Some(1), None])),
    );
    let seen: arrow_array::ArrayRef = Arc::new(arrow_array::TimestampMillisecondArray::from(vec![Some(0), None]));
    let bad = arrow_parquet(&f, "null_t.parquet", vec![("t", t), ("flag", flag), ("day", day), ("seen", seen)]);
    let before = snapshot(f.dir.path());
    let e = err(&["write", &f.p("tm2"), "--input", &bad]);
    assert!(e.contains("null_t.parquet: row 2, column t: no value, but dimension t needs a coordinate"), "{e}");
    assert_eq!(before, snapshot(f.dir.path()));
}

/// Parquet files of other writers: timestamps of any unit (and time zone) and dates go into
/// datetime64 exactly; a value finer than the unit, beyond its range, plain integers, booleans
/// into times and bad CSV text are refused naming the file, row and column, changing nothing.
/// `tessera import` makes datetime64 and bool columns of them.
#[test]
fn foreign_times_convert_exactly_or_are_refused() {
    use arrow_array::{
        ArrayRef, BooleanArray, Date32Array, Int64Array, TimestampNanosecondArray, TimestampSecondArray,
    };
    let f = Fixture::new();
    f.create("tm", TIMES);
    let day_ns = 86_400_000_000_000i64;
    let t_ns = |v: Vec<i64>| -> ArrayRef { Arc::new(TimestampNanosecondArray::from(v).with_timezone("+01:00")) };
    let (flag, day): (ArrayRef, ArrayRef) =
        (Arc::new(BooleanArray::from(vec![true, false])), Arc::new(Date32Array::from(vec![18_262, -1])));
    let seen: ArrayRef = Arc::new(TimestampSecondArray::from(vec![None, Some(60)]));
    let good = arrow_parquet(
        &f,
        "good.parquet",
        vec![
            ("t", t_ns(vec![11_000 * day_ns, 11_000 * day_ns + 1_000_000])),
            ("flag", flag.clone()),
            ("day", day.clone()),
            ("seen", seen.clone()),
        ],
    );
    ok(&["write", &f.p("tm"), "--input", &good]);
    ok(&["read", &f.p("tm"), "--output", &f.p("good.csv")]);
    assert_eq!(
        std::fs::read_to_string(f.path("good.csv")).unwrap(),
        "t,flag,day,seen\n2000-02-13T00:00:00.000,true,2020-01-01,\n2000-02-13T00:00:00.001,false,1969-12-31,1970-01-01T00:01:00\n"
    );
    let before = snapshot(f.dir.path());
    let with_t = |name: &str, t: ArrayRef| {
        arrow_parquet(&f, name, vec![("t", t), ("flag", flag.clone()), ("day", day.clone()), ("seen", seen.clone())])
    };
    let ints: ArrayRef = Arc::new(Int64Array::from(vec![0, 1]));
    let cases = [
        (
            with_t("fine.parquet", t_ns(vec![11_000 * day_ns, 11_000 * day_ns + 1_500_000])),
            "fine.parquet: row 2, column t: 2000-02-13T00:00:00.001500000 (950400000001500000 ns) is finer than \
             datetime64[ms] (dimension t)",
        ),
        (
            with_t("far.parquet", Arc::new(TimestampSecondArray::from(vec![i64::MAX / 100, 0]))),
            "far.parquet: row 1, column t: ",
        ),
        (with_t("early.parquet", t_ns(vec![0, 1_000_000])), "row 1, column t: 1970-01-01T00:00:00.000 is outside the domain 2000-01-01T00:00:00.000:2100-01-01T00:00:00.000 of dimension t"),
        (with_t("ints.parquet", ints), "column t has type INT64, which cannot hold dimension t (datetime64[ms]) (datetime64 takes TIMESTAMP and DATE columns)"),
        (f.write("bad_day.csv", "t,flag,day,seen\n2000-01-01,true,2021-02-29,\n"), "bad_day.csv: row 1, column day: \"2021-02-29\" is not an ISO 8601 date and time: no such date (attribute day is datetime64[D])"),
        (f.write("bad_flag.csv", "t,flag,day,seen\n2000-01-01,true,2021-02-28,\n2000-01-02,maybe,2021-02-28,\n"), "bad_flag.csv: row 2, column flag: \"maybe\" is not a bool (attribute flag takes true, false, 1 or 0)"),
        (f.write("yes_flag.csv", "t,flag,day,seen\n2000-01-01,TRUE,2021-02-28,\n2000-01-02,yes,2021-02-28,\n"), "yes_flag.csv: row 2, column flag: \"yes\" is not a bool"),
        (f.write("tr_flag.csv", "t,flag,day,seen\n2000-01-01, 0 ,2021-02-28,\n2000-01-02,tr,2021-02-28,\n"), "tr_flag.csv: row 2, column flag: \"tr\" is not a bool"),
        (f.write("fine.csv", "t,flag,day,seen\n2000-01-01,true,2021-02-28T12,\n"), "fine.csv: row 1, column day: \"2021-02-28T12\" is finer than the unit D"),
        (f.write("null.csv", "t,flag,day,seen\n2000-01-01,true,,\n"), "null.csv: row 1, column day: no value (null), but attribute day is not nullable (in CSV, write NaT"),
    ];
    let before_cases = snapshot(f.dir.path());
    for (file, want) in &cases {
        let e = err(&["write", &f.p("tm"), "--input", file]);
        assert!(e.contains(want), "{file}: {e}");
    }
    assert_eq!(before_cases, snapshot(f.dir.path()));
    assert!(before.len() < before_cases.len());
    // far: 2^63/100 s is about 2.9e9 years, beyond datetime64[ms].
    assert!(err(&["write", &f.p("tm"), "--input", &cases[1].0]).contains("outside the range of datetime64[ms]"));

    // import: timestamps become datetime64 of their unit, dates datetime64[D], booleans bool;
    // --domain takes ISO times.
    let out = ok(&[
        "import",
        &good,
        &f.p("imp"),
        "--dims",
        "t",
        "--domain",
        "t=2000-01-01T00:00:2001-01-01",
        "--tile",
        "t=86400000000000",
    ]);
    for line in [
        "dimension t: datetime64[ns], domain 2000-01-01T00:00:00.000000000:2001-01-01T00:00:00.000000000",
        "attribute flag: bool\n",
        "attribute day: datetime64[D]\n",
        "attribute seen: datetime64[s], nullable",
    ] {
        assert!(out.contains(line), "{line}: {out}");
    }
    ok(&["read", &f.p("imp"), "--output", &f.p("imp.csv")]);
    assert_eq!(
        std::fs::read_to_string(f.path("imp.csv")).unwrap(),
        "t,flag,day,seen\n2000-02-13T00:00:00.000000000,true,2020-01-01,\n2000-02-13T00:00:00.001000000,false,1969-12-31,1970-01-01T00:01:00\n"
    );
    // --domain splits as --subarray does: `..` too, and a time's own colons stay in the time.
    let out = ok(&["import", &good, &f.p("imp3"), "--dims", "t", "--domain", "t=2000-02-13T00:00:00..2000-02-14"]);
    assert!(out.contains("domain 2000-02-13T00:00:00.000000000:2000-02-14T00:00:00.000000000"), "{out}");
    let e = err(&["import", &good, &f.p("imp2"), "--dims", "flag"]);
    assert!(e.contains("column flag holds booleans; a dimension needs numbers"), "{e}");
    let e = err(&["import", &good, &f.p("imp2"), "--dims", "t,day"]);
    assert!(e.contains("the dimensions would be t datetime64[ns], day datetime64[D], but all dimensions"), "{e}");
}

/// `--subarray` takes ISO 8601 times (and counts of the unit) on a datetime64 dimension of a
/// sparse array, for reads and deletes.
#[test]
fn iso_subarrays_on_a_sparse_time_dimension() {
    let f = Fixture::new();
    f.create("tm", TIMES);
    let tm = f.p("tm");
    let rows = [
        "2020-01-01T00:00:00.000,true,2020-01-01,",
        "2020-01-01T10:30:00.000,false,2020-01-01,",
        "2020-01-01T10:30:00.001,true,2020-01-01,",
        "2020-01-02T00:00:00.000,false,2020-01-02,",
    ];
    let csv = |rows: &[&str]| format!("t,flag,day,seen\n{}", rows.iter().map(|r| format!("{r}\n")).collect::<String>());
    ok(&["write", &tm, "--input", &f.write("in.csv", &csv(&rows))]);
    let read = |spec: &str| {
        ok(&["read", &tm, "--subarray", spec, "--output", &f.p("out.csv")]);
        std::fs::read_to_string(f.path("out.csv")).unwrap()
    };
    assert_eq!(read("2020-01-01T10:30:2020-01-01T23:59:59.999"), csv(&rows[1..3]));
    assert_eq!(read("2020-01-01T10:30:00.001"), csv(&rows[2..3]));
    assert_eq!(read("2020-01-01..1577872800000"), csv(&rows[..1]));
    assert_eq!(read("2020-01-01T10:30:00:"), csv(&rows[1..]));
    let out = ok(&["delete", &tm, "--subarray", "2020-01-01T10:30:00:2020-01-01T10:30:00.001"]);
    assert!(out.contains("deleted t 2020-01-01T10:30:00.000:2020-01-01T10:30:00.001"), "{out}");
    assert_eq!(read(":2100-01-01"), csv(&[rows[0], rows[3]]));
    let e = err(&["read", &tm, "--subarray", "2020-01-01T10:30:00.0001", "--output", &f.p("out.csv")]);
    assert!(e.contains("dimension t: \"2020-01-01T10:30:00.0001\" is finer than the unit ms"), "{e}");
}

/// CSV cannot tell an empty string from a missing value: in a string attribute that is not
/// nullable, an empty field is the empty string, so such cells go out to CSV and back in
/// unchanged (`tessera read` writes them as empty fields).
#[test]
fn empty_strings_of_an_attribute_that_is_not_nullable_round_trip_through_csv() {
    let f = Fixture::new();
    let schema = r#"{"version": 1, "array_type": "sparse",
      "dims": [{"name": "x", "type": "int32", "domain": [0, 100], "tile": 10}],
      "attrs": [{"name": "name", "type": "utf8", "cell_val_num": "var"}],
      "cell_order": "row-major", "tile_order": "row-major", "capacity": 4}"#;
    f.create("names", schema);
    let input = f.write("in.csv", "x,name\n1,\n2,two\n3,\"\"\n4, \n");
    ok(&["write", &f.p("names"), "--input", &input]);
    let out = f.p("out.csv");
    ok(&["read", &f.p("names"), "--output", &out]);
    let (header, rows) = read_csv(Path::new(&out));
    assert_eq!(header, ["x", "name"]);
    let s = |v: &str| Some(v.to_string());
    assert_eq!(rows, vec![vec![s("1"), None], vec![s("2"), s("two")], vec![s("3"), None], vec![s("4"), s(" ")]]);
    f.create("again", schema);
    ok(&["write", &f.p("again"), "--input", &out]);
    let back = f.p("back.csv");
    ok(&["read", &f.p("again"), "--output", &back]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&back).unwrap());
}
