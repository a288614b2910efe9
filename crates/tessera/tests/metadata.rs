//! Array metadata against a reference: puts and deletes at chosen timestamps, read back at every
//! timestamp (time travel), before and after metadata consolidation and vacuum, from concurrent
//! writers; damaged files are corruption, bad input writes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use tessera::*;

fn ctx() -> Context {
    Context::with_storage(Config::new(), Arc::new(MemoryStorage::new())).unwrap()
}

fn make(ctx: &Context, uri: &str) {
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::Int64, (0, 9), 5))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(ctx, uri, &schema).unwrap();
}

fn int(v: i64) -> MetaValue {
    MetaValue { datatype: Some(Datatype::Int64), data: v.to_le_bytes().to_vec() }
}

fn read_at(ctx: &Context, uri: &str, t: u64) -> BTreeMap<String, MetaValue> {
    Array::open_at(ctx, uri, Mode::Read, Some(t)).unwrap().metadata().unwrap()
}

/// (timestamp, key index, value or delete), one write each.
fn ops() -> impl Strategy<Value = Vec<(u64, usize, Option<i64>)>> {
    prop::collection::vec((1u64..40, 0usize..4, prop::option::weighted(0.75, any::<i64>())), 1..25)
}

/// The reference: entries of timestamp at most `t` applied in (timestamp, write order) order.
fn reference(ops: &[(u64, usize, Option<i64>)], t: u64) -> BTreeMap<String, MetaValue> {
    let mut sorted: Vec<(usize, &(u64, usize, Option<i64>))> = ops.iter().enumerate().collect();
    sorted.sort_by_key(|(i, o)| (o.0, *i));
    let mut m = BTreeMap::new();
    for (_, (ts, k, v)) in sorted {
        if *ts <= t {
            match v {
                Some(v) => m.insert(format!("k{k}"), int(*v)),
                None => m.remove(&format!("k{k}")),
            };
        }
    }
    m
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn metadata_follows_time_travel_consolidation_and_vacuum(ops in ops()) {
        let ctx = ctx();
        make(&ctx, "/m");
        // Equal timestamps: the write order decides only through the file name (a uuid), so the
        // reference needs distinct timestamps per key; make them distinct.
        let mut seen = std::collections::HashSet::new();
        let ops: Vec<_> = ops.into_iter().filter(|o| seen.insert(o.0)).collect();
        for (t, k, v) in &ops {
            let w = Array::open_at(&ctx, "/m", Mode::Write, Some(*t)).unwrap();
            let key = format!("k{k}");
            w.write_metadata(&[(&key, v.map(int))]).unwrap();
        }
        let check = |what: &str| {
            for t in 0..42 {
                assert_eq!(read_at(&ctx, "/m", t), reference(&ops, t), "{what}, at {t}");
            }
        };
        check("as written");
        let n = consolidate_metadata(&ctx, "/m").unwrap();
        prop_assert_eq!(n, if ops.len() >= 2 { ops.len() } else { 0 });
        check("consolidated");
        let report = vacuum(&ctx, "/m").unwrap();
        prop_assert_eq!(report.metadata.len(), n);
        check("vacuumed");
        // Writes after consolidation still apply by timestamp.
        let w = Array::open_at(&ctx, "/m", Mode::Write, Some(41)).unwrap();
        w.write_metadata(&[("k0", Some(int(7)))]).unwrap();
        prop_assert_eq!(read_at(&ctx, "/m", 41).get("k0").cloned(), Some(int(7)));
    }
}

#[test]
fn concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("m");
    let ctx = Context::new(Config::new()).unwrap();
    make(&ctx, uri.to_str().unwrap());
    std::thread::scope(|s| {
        for w in 0..4 {
            let (ctx, uri) = (ctx.clone(), uri.clone());
            s.spawn(move || {
                let a = Array::open(&ctx, &uri, Mode::Write).unwrap();
                for i in 0..20 {
                    a.write_metadata(&[(&format!("w{w}-{i}"), Some(int(i)))]).unwrap();
                    if i % 7 == 0 {
                        consolidate_metadata(&ctx, &uri).unwrap();
                    }
                }
            });
        }
    });
    let m = Array::open(&ctx, &uri, Mode::Read).unwrap().metadata().unwrap();
    assert_eq!(m.len(), 80);
    vacuum(&ctx, &uri).unwrap();
    consolidate_metadata(&ctx, &uri).unwrap();
    vacuum(&ctx, &uri).unwrap();
    assert_eq!(Array::open(&ctx, &uri, Mode::Read).unwrap().metadata().unwrap(), m);
    assert_eq!(std::fs::read_dir(uri.join(META_DIR)).unwrap().count(), 1);
}

#[test]
fn values_of_every_kind_and_bad_input() {
    let ctx = ctx();
    make(&ctx, "/m");
    let w = Array::open(&ctx, "/m", Mode::Write).unwrap();
    let floats: Vec<u8> = [1.5f32, -2.0, f32::NAN].iter().flat_map(|f| f.to_le_bytes()).collect();
    let text = MetaValue { datatype: Some(Datatype::Utf8), data: "Kelvin °".as_bytes().to_vec() };
    let raw = MetaValue { datatype: None, data: vec![0, 255, 7] };
    let arr = MetaValue { datatype: Some(Datatype::Float32), data: floats };
    w.write_metadata(&[("units", Some(text.clone())), ("raw", Some(raw.clone())), ("scale", Some(arr.clone()))])
        .unwrap();
    let bad = [
        ("", Some(int(1))),
        ("odd", Some(MetaValue { datatype: Some(Datatype::Int32), data: vec![1, 2, 3] })),
        ("text", Some(MetaValue { datatype: Some(Datatype::Utf8), data: vec![0xff, 0xfe] })),
    ];
    for b in bad {
        let e = w.write_metadata(&[("fine", Some(int(1))), b]).unwrap_err();
        assert!(matches!(e, Error::Query(QueryError::BadBuffer { .. })), "{e}");
    }
    let long = "k".repeat(MAX_META_KEY_BYTES + 1);
    assert!(w.write_metadata(&[(&long, None)]).is_err());
    let m = Array::open(&ctx, "/m", Mode::Read).unwrap().metadata().unwrap();
    assert_eq!(m.len(), 3, "a refused write wrote nothing: {m:?}");
    assert_eq!((&m["units"], &m["raw"], &m["scale"]), (&text, &raw, &arr));
    // Mode checks.
    assert!(w.metadata().is_err());
    assert!(Array::open(&ctx, "/m", Mode::Read).unwrap().write_metadata(&[("a", None)]).is_err());
}

#[test]
fn a_damaged_metadata_file_is_corruption_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("m");
    let ctx = Context::new(Config::new()).unwrap();
    make(&ctx, uri.to_str().unwrap());
    Array::open(&ctx, &uri, Mode::Write).unwrap().write_metadata(&[("k", Some(int(3)))]).unwrap();
    let file = std::fs::read_dir(uri.join(META_DIR)).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[5] ^= 1;
    std::fs::write(&file, bytes).unwrap();
    let e = Array::open(&ctx, &uri, Mode::Read).unwrap().metadata().unwrap_err();
    assert!(matches!(&e, Error::Corrupt { path, .. } if *path == file), "{e}");
    assert_eq!(e.context().array.as_deref(), Some(uri.as_path()));
}
