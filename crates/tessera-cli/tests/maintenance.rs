//! `tessera fragments`, `consolidate`, `vacuum` and `delete`, in-process on a temporary folder.
#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

use clap::Parser;
use npyz::WriterBuilder;
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

fn write_npy(path: &std::path::Path, rows: u64, cols: u64, value: i32) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = npyz::WriteOptions::new().default_dtype().shape(&[rows, cols]).writer(file).begin_nd().unwrap();
    w.extend((0..rows * cols).map(|_| value)).unwrap();
    w.finish().unwrap();
}

fn read_values(dir: &std::path::Path, uri: &str) -> Vec<i32> {
    let out = dir.join("out.npy");
    let _ = std::fs::remove_file(&out);
    ok(&["read", uri, "--subarray", "1:4,1:6", "--output", out.to_str().unwrap()]);
    npyz::NpyFile::new(std::fs::File::open(&out).unwrap()).unwrap().into_vec().unwrap()
}

/// Creates the dense array `dir/a` with dimensions `dims` (JSON) and one int32 attribute `a`;
/// returns its path.
fn create_dense(dir: &std::path::Path, dims: &str) -> String {
    let uri = dir.join("a").to_str().unwrap().to_owned();
    let schema = dir.join("s.json");
    let json = format!(
        r#"{{"array_type":"dense","dims":{dims},"attrs":[{{"name":"a","type":"int32"}}],
            "cell_order":"row-major","tile_order":"row-major"}}"#
    );
    std::fs::write(&schema, json).unwrap();
    ok(&["create", &uri, "--schema", schema.to_str().unwrap()]);
    uri
}

#[test]
fn fragments_consolidate_vacuum_delete() {
    let dir = tempfile::tempdir().unwrap();
    let uri = &create_dense(
        dir.path(),
        r#"[{"name":"r","type":"int64","domain":[1,4],"tile":2},{"name":"c","type":"int64","domain":[1,6],"tile":3}]"#,
    );
    let (full, part) = (dir.path().join("full.npy"), dir.path().join("part.npy"));
    write_npy(&full, 4, 6, 1);
    write_npy(&part, 2, 2, 2);
    ok(&["write", uri, "--subarray", "1:4,1:6", "--input", full.to_str().unwrap()]);
    ok(&["write", uri, "--subarray", "2:3,2:3", "--input", part.to_str().unwrap()]);
    let out = ok(&["delete", uri, "--subarray", "4:4,:"]);
    assert!(out.contains("deleted"), "{out}");
    let listing = ok(&["fragments", uri]);
    assert!(listing.starts_with("3 fragment(s)") && listing.contains("delete"), "{listing}");
    let before = read_values(dir.path(), uri);
    assert_eq!(&before[6..12], &[1, 2, 2, 1, 1, 1]);
    assert!(before[18..24].iter().all(|&v| v == i32::MIN), "deleted row reads as fill: {before:?}");
    let out = ok(&["consolidate", uri, "--vacuum"]);
    assert!(out.contains("consolidated into") && out.contains("removed 3 superseded"), "{out}");
    assert!(ok(&["fragments", uri]).starts_with("1 fragment(s)"));
    assert_eq!(read_values(dir.path(), uri), before, "consolidation changed what reads return");
    let json: serde_json::Value = serde_json::from_str(&ok(&["fragments", uri, "--json"])).unwrap();
    assert_eq!(json[0]["kind"], "dense");
    let e = tessera(&["consolidate", uri, "--timestamp", "5", "--fragment", "x"]).unwrap_err();
    assert!(e.contains("at most one of"), "{e}");
    assert!(ok(&["consolidate", uri]).contains("nothing to consolidate"));
    assert!(ok(&["vacuum", uri]).contains("removed 0 superseded"));
}

#[test]
fn meta_sets_lists_and_deletes_keys() {
    let dir = tempfile::tempdir().unwrap();
    let uri = &create_dense(dir.path(), r#"[{"name":"r","type":"int64","domain":[1,4],"tile":2}]"#);
    ok(&["meta", uri, "--set", "units=K", "--set", "scale=0.5", "--set", "n=-3"]);
    ok(&["meta", uri, "--set", "axis=1,2,3", "--type", "int16"]);
    let json: serde_json::Value = serde_json::from_str(&ok(&["meta", uri, "--json"])).unwrap();
    assert_eq!(json, serde_json::json!({"units": "K", "scale": 0.5, "n": -3, "axis": [1, 2, 3]}));
    let text = ok(&["meta", uri]);
    assert!(text.contains("axis (int16): [1,2,3]") && text.contains("units (utf8): \"K\""), "{text}");
    ok(&["meta", uri, "--delete", "units"]);
    let json: serde_json::Value = serde_json::from_str(&ok(&["meta", uri, "--json"])).unwrap();
    assert!(json.get("units").is_none(), "{json}");
    // Bad input: a value of the wrong type, a missing '=', an empty key; nothing is written.
    for bad in [&["--set", "x=abc", "--type", "int32"][..], &["--set", "novalue"], &["--set", "=1"]] {
        let mut args = vec!["meta", uri];
        args.extend_from_slice(bad);
        assert!(tessera(&args).is_err(), "{bad:?}");
    }
    let json: serde_json::Value = serde_json::from_str(&ok(&["meta", uri, "--json"])).unwrap();
    assert_eq!(json.as_object().unwrap().len(), 3, "{json}");
}
