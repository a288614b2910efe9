//! Block checksums kept apart from the fragment metadata (docs/format.md §8.1, version 9): a
//! fragment with many of them keeps them in its file `__block_checksums`, which only reads of
//! part of a tile read (the tile's own checksums, verified against the tile checksum); whole
//! tiles verify without them, and every damage is still an error naming the file.

use std::path::{Path, PathBuf};

use tessera::*;

use crate::common::{as_i32, cached_ctx, flip_stored, fragment_name_of, i32_bytes, points_rc, schema_2d, Hook, Hooked};

const ROWS: i128 = 4096;
const COLS: i128 = 2560;
/// Rows of a tile: 1024 x 2560 int32 cells = 10 MiB, 2,560 blocks of 4 KiB; four tiles hold
/// 10,240 block checksums, more than writers keep inline.
const TILE_ROWS: u64 = 1024;
const BLOCKS: u64 = TILE_ROWS * COLS as u64 * 4 / 4096;

fn value(r: i128, c: i128) -> i32 {
    ((r - 1) * COLS + (c - 1)) as i32 ^ 0x5a5a
}

/// The large array in `dir`: one fragment of four 10 MiB unfiltered tiles. Returns its folder.
fn write_large(dir: &Path) -> (PathBuf, PathBuf) {
    let uri = dir.join("a");
    let ctx = ctx();
    let schema = schema_2d(ROWS, COLS, TILE_ROWS, COLS as u64);
    Array::create(&ctx, &uri, &schema).unwrap();
    let vals: Vec<i32> = (1..=ROWS).flat_map(|r| (1..=COLS).map(move |c| value(r, c))).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    let frag = std::fs::read_dir(uri.join(FRAGMENTS_DIR)).unwrap().next().unwrap().unwrap().path();
    (uri, frag)
}

/// No tile cache: every read goes to the files.
fn ctx() -> Context {
    let mut c = Config::new();
    c.set("sm.tile_cache_size", "0").unwrap();
    Context::new(c).unwrap()
}

fn points(uri: &Path, pts: &[(i64, i64)]) -> Result<Vec<i32>> {
    points_rc(&ctx(), uri, pts)
}

fn read_box(uri: &Path, rows: (i128, i128), cols: (i128, i128)) -> Result<Vec<i32>> {
    let r = Array::open(&ctx(), uri, Mode::Read)?;
    let res = r.read(&Subarray::from_ranges(&[rows, cols]), &["a"], Layout::RowMajor)?;
    Ok(as_i32(&res.attrs[0].data))
}

fn expected_box(rows: (i128, i128), cols: (i128, i128)) -> Vec<i32> {
    (rows.0..=rows.1).flat_map(|r| (cols.0..=cols.1).map(move |c| value(r, c))).collect()
}

fn expected_points(pts: &[(i64, i64)]) -> Vec<i32> {
    pts.iter().map(|&(r, c)| value(r.into(), c.into())).collect()
}

/// Points spread over all four tiles.
fn spread() -> Vec<(i64, i64)> {
    (0..400).map(|k: i64| (1 + (k * 7919) % ROWS as i64, 1 + (k * 104_729) % COLS as i64)).collect()
}

#[test]
fn large_fragments_keep_block_checksums_apart_and_read_them_per_tile() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, frag) = write_large(dir.path());
    let sums = std::fs::metadata(frag.join(BLOCK_SUMS_FILE)).unwrap().len();
    assert_eq!(sums, 4 * BLOCKS * 8 + 20, "every tile's checksums and the footer");
    // The metadata holds the tile index, not the checksums: small enough for the commit
    // record's copy.
    let meta = std::fs::metadata(frag.join(METADATA_FILE)).unwrap().len();
    assert!(meta < 4096, "metadata of {meta} bytes");
    let r = Array::open(&ctx(), &uri, Mode::Read).unwrap();
    let blocks = &r.fragments()[0].blocks;
    assert!(blocks.is_apart());
    assert_eq!((blocks.count(0, 3), blocks.of(0, 3)), (Some(BLOCKS), None));
    // Whole tiles, parts of tiles (block runs) and points read right.
    assert_eq!(read_box(&uri, (1, ROWS), (1, COLS)).unwrap(), expected_box((1, ROWS), (1, COLS)));
    assert_eq!(read_box(&uri, (1030, 1033), (7, 2000)).unwrap(), expected_box((1030, 1033), (7, 2000)));
    let pts = spread();
    assert_eq!(points(&uri, &pts).unwrap(), expected_points(&pts));
}

#[test]
fn whole_tiles_need_no_block_checksums_and_parts_check_them() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, frag) = write_large(dir.path());
    let sums_path = frag.join(BLOCK_SUMS_FILE);
    let good = std::fs::read(&sums_path).unwrap();
    // Without the file, whole tiles still read (they hash their blocks themselves); a read of
    // part of a tile is corruption naming the file.
    std::fs::remove_file(&sums_path).unwrap();
    assert_eq!(read_box(&uri, (1, TILE_ROWS as i128), (1, COLS)).unwrap(), expected_box((1, 1024), (1, COLS)));
    let e = points(&uri, &[(5, 5)]).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains(BLOCK_SUMS_FILE), "{e}");
    // A flipped byte among tile 1's checksums fails reads of part of tile 1 only.
    let mut bad = good.clone();
    bad[(BLOCKS as usize + 5) * 8 + 3] ^= 1;
    std::fs::write(&sums_path, &bad).unwrap();
    let e = points(&uri, &[(1100, 5)]).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("do not match the tile checksum"), "{e}");
    assert_eq!(points(&uri, &[(5, 5), (3000, 9)]).unwrap(), expected_points(&[(5, 5), (3000, 9)]));
    assert_eq!(read_box(&uri, (1025, 2048), (1, COLS)).unwrap(), expected_box((1025, 2048), (1, COLS)));
    // A file cut short is corruption too.
    std::fs::write(&sums_path, &good[..BLOCKS as usize * 8 * 3]).unwrap();
    let e = points(&uri, &[(4000, 5)]).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains(BLOCK_SUMS_FILE), "{e}");
    std::fs::write(&sums_path, &good).unwrap();
    // A flipped byte of tile 2 fails the reads of its block and of the whole tile, not others.
    let tile2 = 2 * BLOCKS * 4096;
    let (row, col) = (2 * TILE_ROWS as i64 + 3 + 1, 1001);
    let at = tile2 + ((3 * COLS as u64 + 1000) * 4);
    flip_stored(&uri, &fragment_name_of(&frag), "a0.data", at, 0x40);
    let block = (at - tile2) / 4096;
    let e = points(&uri, &[(row, col)]).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains(&format!("block {block}:")), "{e}");
    assert_eq!(e.context().tile, Some(2), "{e}");
    assert_eq!(points(&uri, &[(row, 2500)]).unwrap(), expected_points(&[(row, 2500)]));
    let e = read_box(&uri, (2049, 3072), (1, COLS)).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }) && e.to_string().contains("checksum mismatch"), "{e}");
    assert_eq!(read_box(&uri, (3073, 4096), (1, COLS)).unwrap(), expected_box((3073, 4096), (1, COLS)));
}

/// Consolidating large fragments keeps the output's checksums apart too, and vacuum removes
/// the inputs' files with their folders.
#[test]
fn consolidation_and_vacuum_carry_the_block_checksum_files() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, _) = write_large(dir.path());
    let ctx = ctx();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    let patch = vec![-7i32; 10 * COLS as usize];
    w.write(
        &Subarray::from_ranges(&[(2001, 2010), (1, COLS)]),
        Layout::RowMajor,
        &[AttrInput::fixed("a", i32_bytes(&patch))],
    )
    .unwrap();
    consolidate(&ctx, &uri, &Selection::All).unwrap().unwrap();
    vacuum(&ctx, &uri).unwrap();
    let frags: Vec<PathBuf> = std::fs::read_dir(uri.join(FRAGMENTS_DIR)).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(frags.len(), 1);
    assert!(frags[0].join(BLOCK_SUMS_FILE).is_file());
    let mut want = expected_box((1, ROWS), (1, COLS));
    want[2000 * COLS as usize..2010 * COLS as usize].fill(-7);
    assert_eq!(read_box(&uri, (1, ROWS), (1, COLS)).unwrap(), want);
    assert_eq!(points(&uri, &[(2005, 17), (2011, 17)]).unwrap(), vec![-7, value(2011, 17)]);
}

/// Points over most of a tile's blocks, some read twice, and boxes over most of several tiles
/// are streamed through the tile into the result; from disk (the storage reporting nothing in
/// memory) and from memory they read right.
#[test]
fn reads_of_most_of_a_tile_stream_it_into_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, _) = write_large(dir.path());
    // 4,000 points of tile 1 (rows 1025-2048) touch most of its 2,560 blocks; every tenth twice.
    let mut pts: Vec<(i64, i64)> =
        (0..4000).map(|k: i64| (1025 + (k * 7919) % 1024, 1 + (k * 104_729) % COLS as i64)).collect();
    pts.extend(pts.clone().into_iter().step_by(10));
    for ctx in [ctx(), cached_ctx(0)] {
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let (rs, cs): (Vec<i64>, Vec<i64>) = pts.iter().copied().unzip();
        let res = r
            .read_points(
                &[
                    CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
                    CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
                ],
                &["a"],
            )
            .unwrap();
        assert_eq!(as_i32(&res.attrs[0].data), expected_points(&pts));
        for b in [((2, 3000), (2, COLS - 1)), ((900, 4096), (1000, 1003))] {
            let got = r.read(&Subarray::from_ranges(&[b.0, b.1]), &["a"], Layout::RowMajor).unwrap();
            assert_eq!(as_i32(&got.attrs[0].data), expected_box(b.0, b.1), "{b:?}");
        }
    }
}

/// A streamed tile whose size is not a whole number of blocks (60,000 bytes: 14 blocks and a
/// short one), from memory (the probe holds all of it), from disk, and partly in memory.
#[test]
fn streamed_tiles_end_in_a_short_block() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("s");
    let schema = schema_2d(300, 100, 150, 100);
    let vals: Vec<i32> = (0..30_000).map(|i: i32| i.wrapping_mul(2_654_435_761_u32 as i32)).collect();
    Array::create(&ctx(), &uri, &schema).unwrap();
    let w = Array::open(&ctx(), &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    let want: Vec<i32> =
        (2..=300).flat_map(|r| (2..=100).map(move |c| (r, c))).map(|(r, c)| vals[(r - 1) * 100 + c - 1]).collect();
    for cached in [usize::MAX, 0, 5_000] {
        let r = Array::open(&cached_ctx(cached), &uri, Mode::Read).unwrap();
        let got = r.read(&Subarray::from_ranges(&[(2, 300), (2, 100)]), &["a"], Layout::RowMajor).unwrap();
        assert_eq!(as_i32(&got.attrs[0].data), want, "cached {cached}");
    }
}

/// From disk (the storage says nothing is in memory), a large tile is one sequential stream
/// that starts a page at a time, so that the kernel's readahead ramps up ahead of it, and grows
/// to 1 MiB pieces, each read following the last of its tile (the streams of one read may run
/// side by side, each through a reader of its own). Whole tiles and streamed parts alike.
#[test]
fn cold_tiles_stream_from_a_page_in_growing_pieces() {
    use std::sync::{Arc, Mutex};
    let dir = tempfile::tempdir().unwrap();
    let (uri, frag) = write_large(dir.path());
    let reads: Arc<Mutex<Vec<(u64, u64)>>> = Arc::default();
    let log = Arc::clone(&reads);
    let hook = move |at: Hook, path: &Path| {
        if let Hook::Read(Some(range)) = at {
            if path.starts_with(&frag) && path.extension().is_some_and(|e| e == "data") && range.1 > 0 {
                log.lock().unwrap().push(range);
            }
        }
    };
    let inner: Arc<dyn Storage> = Arc::new(LocalStorage::new(ReadMode::Pread));
    let storage = Arc::new(Hooked { inner, hook: Arc::new(hook), cached: Some(0) });
    let ctx = Context::with_storage(ctx().config().clone(), storage).unwrap();
    let a = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let tile_bytes = TILE_ROWS * COLS as u64 * 4;
    let mut want = vec![4096u64; 16];
    let (mut left, mut step) = (tile_bytes - (64 << 10), 128u64 << 10);
    while left > 0 {
        want.push(step.min(left));
        (left, step) = (left - step.min(left), (step * 2).min(1 << 20));
    }
    // Two whole tiles; most of one tile (streamed through a buffer).
    for (rows, cols, tiles) in [((1, 2048), (1, COLS), 2), ((2, 1024), (2, COLS - 1), 1)] {
        reads.lock().unwrap().clear();
        let got = a.read(&Subarray::from_ranges(&[rows, cols]), &["a"], Layout::RowMajor).unwrap();
        assert_eq!(as_i32(&got.attrs[0].data), expected_box(rows, cols));
        // Per tile (the tiles lie back to back), reads each following the last.
        let log = std::mem::take(&mut *reads.lock().unwrap());
        let base = log.iter().map(|r| r.0).min().unwrap();
        let mut streams: std::collections::BTreeMap<u64, Vec<(u64, u64)>> = Default::default();
        for r in log {
            streams.entry((r.0 - base) / tile_bytes).or_default().push(r);
        }
        assert_eq!(streams.len(), tiles, "{rows:?}: one stream per tile");
        for s in streams.values() {
            assert!(s.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0), "{rows:?}: {s:?}");
            assert_eq!(s.iter().map(|r| r.1).collect::<Vec<_>>(), want, "{rows:?}");
        }
    }
}

/// The small array of [`reads_of_block_checksummed_tiles_match_a_reference`]: 200 x 300 int32
/// cells in tiles of 50 rows (60,000 bytes, 15 blocks of 4 KiB), a full write and a box written
/// over it, and the reference values.
fn overwritten_array() -> &'static (tempfile::TempDir, PathBuf, Vec<i32>) {
    static ARRAY: std::sync::OnceLock<(tempfile::TempDir, PathBuf, Vec<i32>)> = std::sync::OnceLock::new();
    ARRAY.get_or_init(|| {
        let (rows, cols) = (200i128, 300i128);
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("a");
        let c = ctx();
        let schema = schema_2d(rows, cols, 50, cols as u64);
        Array::create(&c, &uri, &schema).unwrap();
        let mut model: Vec<i32> = (0..rows * cols).map(|i| (i as i32).wrapping_mul(2_654_435_761_u32 as i32)).collect();
        let w = Array::open(&c, &uri, Mode::Write).unwrap();
        w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&model))]).unwrap();
        let (r0, r1, c0, c1) = (37i128, 141i128, 50i128, 262i128);
        let over: Vec<i32> = (r0..=r1).flat_map(|r| (c0..=c1).map(move |c| -((r * 1000 + c) as i32))).collect();
        let sub = Subarray::from_ranges(&[(r0, r1), (c0, c1)]);
        w.write(&sub, Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&over))]).unwrap();
        for (k, v) in over.into_iter().enumerate() {
            let (r, c) = (r0 + k as i128 / (c1 - c0 + 1), c0 + k as i128 % (c1 - c0 + 1));
            model[((r - 1) * cols + c - 1) as usize] = v;
        }
        (dir, uri, model)
    })
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]
    /// Boxes (a few cells, rows, columns, most of a tile) and points over tiles with block
    /// checksums, from two overlapping fragments, with no tile cache: read in part or whole,
    /// streamed from memory, from a map and as a stream from disk, they read what was written.
    #[test]
    fn reads_of_block_checksummed_tiles_match_a_reference(
        rows in (1i128..=200, 1i128..=200), cols in (1i128..=300, 1i128..=300),
        pts in proptest::collection::vec((1i64..=200, 1i64..=300), 1..40), how in 0..3usize,
    ) {
        let (_, uri, model) = overwritten_array();
        let (rows, cols) = ((rows.0.min(rows.1), rows.0.max(rows.1)), (cols.0.min(cols.1), cols.0.max(cols.1)));
        let c = match how {
            0 => ctx(),
            1 => {
                let mut config = Config::new();
                config.set("sm.tile_cache_size", "0").unwrap();
                config.set("vfs.read_mode", "mmap").unwrap();
                Context::new(config).unwrap()
            }
            _ => cached_ctx(0),
        };
        let at = |r: i128, c: i128| model[((r - 1) * 300 + c - 1) as usize];
        let r = Array::open(&c, uri, Mode::Read).unwrap();
        let res = r.read(&Subarray::from_ranges(&[rows, cols]), &["a"], Layout::RowMajor).unwrap();
        let want: Vec<i32> = (rows.0..=rows.1).flat_map(|r| (cols.0..=cols.1).map(move |c| at(r, c))).collect();
        proptest::prop_assert_eq!(as_i32(&res.attrs[0].data), want, "box {:?} x {:?}, way {}", rows, cols, how);
        let want: Vec<i32> = pts.iter().map(|&(r, c)| at(r.into(), c.into())).collect();
        proptest::prop_assert_eq!(points_rc(&c, uri, &pts).unwrap(), want, "points, way {}", how);
    }
}
