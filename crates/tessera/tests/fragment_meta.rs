//! Consolidated fragment metadata against a reference: random dense writes, metadata
//! consolidations, fragment consolidations and vacuums in any order read exactly what a plain
//! vector says; opens read one metadata file instead of one per fragment; a damaged file is
//! corruption naming it.

use proptest::prelude::*;
use tessera::*;

use crate::common::*;

/// In memory, writers checkpointing every `interval` commits (0: never).
fn ctx_checkpointing(interval: u64) -> Context {
    let mut c = Config::new();
    c.set("sm.compute_concurrency", "2").unwrap();
    c.set("sm.commit.checkpoint_interval", &interval.to_string()).unwrap();
    Context::with_storage(c, std::sync::Arc::new(MemoryStorage::new())).unwrap()
}

fn make(ctx: &Context, uri: &str) {
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("x", 0, 99, 10))
        .attr(Attribute::new("a", Datatype::Int32))
        .build();
    Array::create(ctx, uri, &schema.unwrap()).unwrap();
}

fn write(ctx: &Context, uri: &str, (lo, hi): (i128, i128), v: i32, model: &mut [i32]) {
    let vals = vec![v; (hi - lo + 1) as usize];
    let w = Array::open(ctx, uri, Mode::Write).unwrap();
    w.write(&Subarray::from_ranges(&[(lo, hi)]), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    model[lo as usize..=hi as usize].fill(v);
}

fn read_all(ctx: &Context, uri: &str) -> Vec<i32> {
    let r = Array::open(ctx, uri, Mode::Read).unwrap();
    as_i32(&r.read(&Subarray::from_ranges(&[(0, 99)]), &["a"], Layout::RowMajor).unwrap().attrs[0].data)
}

#[derive(Debug, Clone)]
enum Op {
    Write(i128, i128, i32),
    ConsolidateMeta,
    Consolidate,
    Vacuum,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0i128..100, 0i128..100, any::<i32>()).prop_map(|(a, b, v)| Op::Write(a.min(b), a.max(b), v)),
        2 => Just(Op::ConsolidateMeta),
        1 => Just(Op::Consolidate),
        1 => Just(Op::Vacuum),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn reads_match_the_model_whatever_the_order(ops in prop::collection::vec(op(), 1..30), interval in 0u64..4) {
        // Writers checkpoint the log and copy metadata every `interval` commits (0: never).
        let ctx = ctx_checkpointing(interval);
        make(&ctx, "/f");
        let mut model = vec![i32::MIN; 100]; // the fill value of int32
        for op in &ops {
            match *op {
                Op::Write(lo, hi, v) => write(&ctx, "/f", (lo, hi), v, &mut model),
                Op::ConsolidateMeta => {
                    let n = consolidate_fragment_metadata(&ctx, "/f").unwrap();
                    prop_assert_eq!(n, Array::open(&ctx, "/f", Mode::Read).unwrap().fragments().len());
                }
                Op::Consolidate => {
                    consolidate(&ctx, "/f", &Selection::All).unwrap();
                }
                Op::Vacuum => {
                    vacuum(&ctx, "/f").unwrap();
                }
            }
            prop_assert_eq!(read_all(&ctx, "/f"), model.clone());
        }
    }
}

#[test]
fn an_open_reads_one_metadata_file_and_vacuum_keeps_the_newest() {
    // Reads counted by this context's own storage: the process-wide statistics also count the
    // reads of the other tests of this binary, running at the same time.
    let reads = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = reads.clone();
    let counted = Hooked {
        inner: std::sync::Arc::new(MemoryStorage::new()),
        hook: std::sync::Arc::new(move |at, _| {
            if matches!(at, Hook::Read(_)) {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }),
        cached: None,
    };
    let mut c = Config::new();
    c.set("sm.compute_concurrency", "2").unwrap();
    c.set("sm.commit.checkpoint_interval", "0").unwrap();
    let ctx = Context::with_storage(c, std::sync::Arc::new(counted)).unwrap();
    make(&ctx, "/f");
    let mut model = vec![i32::MIN; 100];
    for i in 0..40 {
        write(&ctx, "/f", (i, i + 5), i as i32, &mut model);
    }
    let open_reads = |ctx: &Context| {
        let start = reads.load(std::sync::atomic::Ordering::SeqCst);
        let a = Array::open(ctx, "/f", Mode::Read).unwrap();
        (a.fragments().len(), reads.load(std::sync::atomic::Ordering::SeqCst) - start)
    };
    vacuum(&ctx, "/f").unwrap(); // checkpoints the commit log: an open reads one log file
    let (n, before) = open_reads(&ctx);
    assert_eq!(n, 40);
    assert_eq!(consolidate_fragment_metadata(&ctx, "/f").unwrap(), 40);
    write(&ctx, "/f", (90, 99), 7, &mut model); // after the consolidated file: read from its own file
    vacuum(&ctx, "/f").unwrap();
    let (n, after) = open_reads(&ctx);
    assert_eq!(n, 41);
    assert!(after < before / 4, "reads before {before} after {after}");
    assert_eq!(read_all(&ctx, "/f"), model);
    std::thread::sleep(std::time::Duration::from_millis(2)); // a newer name
    consolidate_fragment_metadata(&ctx, "/f").unwrap();
    let report = vacuum(&ctx, "/f").unwrap();
    assert_eq!(report.fragment_metadata.len(), 1);
    assert_eq!(read_all(&ctx, "/f"), model);
}

/// Writers that checkpoint every 8 commits leave an open after 38 small writes needing only
/// the newest checkpoint (record 41, after commit 40), the 2 records after it, the 5 files of
/// metadata copies the checkpoints came with (36 fragments) and the own metadata files of the 2
/// fragments after them: with every older record and every copied fragment's own metadata file
/// damaged, the array still opens and reads right.
#[test]
fn after_writers_checkpoints_an_open_reads_neither_old_records_nor_copied_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new();
    config.set("sm.commit.checkpoint_interval", "8").unwrap();
    let ctx = Context::new(config).unwrap();
    let path = dir.path().join("f");
    let uri = path.to_str().unwrap();
    make(&ctx, uri);
    let mut model = vec![i32::MIN; 100];
    for i in 0..38 {
        write(&ctx, uri, (i, i + 5), i as i32, &mut model);
    }
    let names: Vec<String> =
        Array::open(&ctx, uri, Mode::Read).unwrap().fragments().iter().map(|f| f.name.to_string()).collect();
    assert_eq!(names.len(), 38);
    assert_eq!(std::fs::read_dir(path.join("__fragment_meta")).unwrap().count(), 5);
    let records: Vec<std::path::PathBuf> =
        std::fs::read_dir(path.join("__commits")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(records.len(), 43);
    for r in &records {
        let seq: u64 = r.file_stem().unwrap().to_str().unwrap().parse().unwrap();
        if seq < 41 {
            std::fs::write(r, b"damaged").unwrap();
        }
    }
    for n in &names[..36] {
        std::fs::write(path.join("__fragments").join(n).join("__fragment_metadata"), b"damaged").unwrap();
    }
    assert_eq!(read_all(&ctx, uri), model);
    // A whole read of the log (vacuum) does read them.
    assert!(matches!(vacuum(&ctx, uri), Err(Error::Corrupt { .. })));
}

#[test]
fn a_damaged_consolidated_file_is_corruption_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = local_ctx();
    let uri = dir.path().join("f");
    let uri = uri.to_str().unwrap();
    make(&ctx, uri);
    let mut model = vec![i32::MIN; 100];
    write(&ctx, uri, (0, 9), 1, &mut model);
    consolidate_fragment_metadata(&ctx, uri).unwrap();
    // Readers prefer the commit record's copy: without it they read the consolidated file.
    crate::tamper::drop_record_copies(&dir.path().join("f"));
    let fdir = dir.path().join("f/__fragment_meta");
    let file = std::fs::read_dir(&fdir).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    bytes[10] ^= 0x20;
    std::fs::write(&file, &bytes).unwrap();
    let e = Array::open(&ctx, uri, Mode::Read).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("__fragment_meta"), "{e}");
}

/// The own metadata files of every fragment of the array at `uri`, removed.
fn remove_own_metadata(uri: &std::path::Path) {
    for frag in std::fs::read_dir(uri.join(FRAGMENTS_DIR)).unwrap() {
        let _ = std::fs::remove_file(frag.unwrap().path().join(METADATA_FILE));
    }
}

/// Since format 8 a commit record carries its fragment's metadata when it is small (a write's
/// and a consolidation's): an open reads the records, not the fragments' own metadata files.
/// A fragment with large metadata has no copy in its record and is read from its own file.
#[test]
fn commit_records_carry_small_fragment_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = local_ctx();
    let path = dir.path().join("f");
    let uri = path.to_str().unwrap();
    make(&ctx, uri);
    let mut model = vec![i32::MIN; 100];
    write(&ctx, uri, (0, 9), 1, &mut model);
    write(&ctx, uri, (5, 30), 2, &mut model);
    let mut later = model.clone();
    write(&ctx, uri, (20, 99), 3, &mut later);
    remove_own_metadata(&path);
    assert_eq!(read_all(&ctx, uri), later, "read from the records' copies alone");
    consolidate(&ctx, uri, &Selection::All).unwrap();
    remove_own_metadata(&path); // the consolidated fragment's
    assert_eq!(read_all(&ctx, uri), later, "the consolidation's record carries its fragment's");

    // 100,000 tiles: metadata over the 1 MiB a record carries.
    let big = dir.path().join("big");
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("x", 0, 499_999, 5))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .unwrap();
    Array::create(&ctx, &big, &schema).unwrap();
    let vals: Vec<i32> = (0..500_000).collect();
    let w = Array::open(&ctx, &big, Mode::Write).unwrap();
    let name = w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    let own = std::fs::metadata(big.join(FRAGMENTS_DIR).join(name.to_string()).join(METADATA_FILE)).unwrap().len();
    let record = std::fs::metadata(big.join(COMMITS_DIR).join("00000000000000000001.commit")).unwrap().len();
    assert!(own > 1 << 20 && record < 1_000, "metadata {own} bytes, record {record}");
    let r = Array::open(&ctx, &big, Mode::Read).unwrap();
    assert_eq!(as_i32(&r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap().attrs[0].data), vals);
    remove_own_metadata(&big);
    let e = Array::open(&ctx, &big, Mode::Read).unwrap_err();
    assert!(e.to_string().contains("metadata is missing"), "{e}");
}
