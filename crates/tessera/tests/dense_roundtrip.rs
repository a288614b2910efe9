//! Example-based round trips of dense arrays on local files.

use tessera::*;

use crate::common::*;

#[test]
fn write_then_read_parts_in_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("img");
    let ctx = local_ctx();
    let schema = schema_2d(30, 40, 7, 9);
    Array::create(&ctx, &uri, &schema).unwrap();
    let vals: Vec<i32> = (0..30 * 40).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.nonempty_domain(), Some(vec![(1, 30), (1, 40)]));
    let res = r.read(&Subarray::from_ranges(&[(3, 5), (10, 12)]), &["a"], Layout::RowMajor).unwrap();
    let expect: Vec<i32> = (3..=5).flat_map(|i| (10..=12).map(move |j| (i - 1) * 40 + (j - 1))).collect();
    assert_eq!(as_i32(&res.attrs[0].data), expect);
    let res = r.read(&Subarray::from_ranges(&[(3, 5), (10, 12)]), &["a"], Layout::ColMajor).unwrap();
    let expect: Vec<i32> = (10..=12).flat_map(|j| (3..=5).map(move |i| (i - 1) * 40 + (j - 1))).collect();
    assert_eq!(as_i32(&res.attrs[0].data), expect);
    // A whole column.
    let res = r.read(&Subarray::from_ranges(&[(1, 30), (17, 17)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), (0..30).map(|i| i * 40 + 16).collect::<Vec<_>>());
    assert_eq!(r.fragments().len(), 1);
}

#[test]
fn strings_nullable_and_complex_cells() {
    let ctx = mem_ctx();
    let mut s = Attribute::new("name", Datatype::Utf8);
    s.cell_val_num = CellValNum::Var;
    let mut z = Attribute::new("z", Datatype::Float32);
    z.cell_val_num = CellValNum::Fixed(2);
    let mut n = Attribute::new("n", Datatype::UInt8);
    n.nullable = true;
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(Dimension::new("x", Datatype::UInt16, (0, 9), 4))
        .attr(s)
        .attr(z)
        .attr(n)
        .build()
        .unwrap();
    Array::create(&ctx, "/a", &schema).unwrap();
    let names = ["zero", "", "two", "þrjú", "four"];
    let mut data = Vec::new();
    let mut offs = Vec::new();
    for s in names {
        offs.push(data.len() as u64);
        data.extend_from_slice(s.as_bytes());
    }
    let zs: Vec<f32> = (0..10).map(|i| i as f32 * 0.5).collect();
    let nv = [7u8, 8, 9, 10, 11];
    let valid = [1u8, 0, 1, 0, 1];
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    w.write(
        &Subarray::from_ranges(&[(2, 6)]),
        Layout::RowMajor,
        &[
            AttrInput { name: "name", data: &data, offsets: Some(&offs), validity: None },
            AttrInput::fixed("z", bytemuck::cast_slice(&zs)),
            AttrInput { name: "n", data: &nv, offsets: None, validity: Some(&valid) },
        ],
    )
    .unwrap();
    let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let res = r.read(&Subarray::from_ranges(&[(0, 9)]), &[], Layout::RowMajor).unwrap();
    let name = res.attr("name").unwrap();
    let o = name.offsets.as_ref().unwrap();
    let got: Vec<&str> = (0..10)
        .map(|k| {
            let end = o.get(k + 1).copied().unwrap_or(name.data.len() as u64) as usize;
            std::str::from_utf8(&name.data[o[k] as usize..end]).unwrap()
        })
        .collect();
    assert_eq!(got, ["", "", "zero", "", "two", "þrjú", "four", "", "", ""]);
    let z: &[f32] = bytemuck::cast_slice(&res.attr("z").unwrap().data);
    assert!(z[0].is_nan() && z[3].is_nan());
    assert_eq!(&z[4..14], &zs[..]);
    let n = res.attr("n").unwrap();
    assert_eq!(n.validity.as_deref().unwrap(), &[0, 0, 1, 0, 1, 0, 1, 0, 0, 0]);
    assert_eq!(&n.data[2..7], &nv);
    assert_eq!(n.data[0], u8::MAX);
}

#[test]
fn newest_write_wins_and_hidden_fragments_are_not_needed() {
    let ctx = mem_ctx();
    let schema = schema_2d(8, 8, 4, 4);
    Array::create(&ctx, "/a", &schema).unwrap();
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    let ones = vec![1i32; 64];
    let twos = vec![2i32; 16];
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&ones))]).unwrap();
    w.write(&Subarray::from_ranges(&[(3, 6), (3, 6)]), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&twos))])
        .unwrap();
    let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 2);
    let res = r.read(&Subarray::from_ranges(&[(3, 3), (1, 8)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), vec![1, 1, 2, 2, 2, 2, 1, 1]);
    // Time travel to before the second write.
    let t = r.fragments()[0].name.t1;
    let old = Array::open_at(&ctx, "/a", Mode::Read, Some(t)).unwrap();
    let res = old.read(&Subarray::from_ranges(&[(3, 3), (1, 8)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), vec![1; 8]);
    // A start/end range: only the second write, so cells it did not write read as fill.
    let t2 = r.fragments()[1].name.t0;
    let only2 = Array::open_between(&ctx, "/a", Mode::Read, t2, u64::MAX).unwrap();
    assert_eq!(only2.fragments().len(), 1);
    let res = only2.read(&Subarray::from_ranges(&[(3, 3), (1, 8)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), vec![i32::MIN, i32::MIN, 2, 2, 2, 2, i32::MIN, i32::MIN]);
}

#[test]
fn write_mode_timestamp_names_every_fragment_and_time_travel_follows_it() {
    let ctx = mem_ctx();
    let schema = schema_2d(4, 4, 2, 2);
    Array::create(&ctx, "/a", &schema).unwrap();
    let ones = vec![1i32; 16];
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    let now = w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&ones))]).unwrap();
    // Writes at timestamp 1000: a dense write, random updates and a delete, all named t0 = t1 = 1000.
    let old = Array::open_at(&ctx, "/a", Mode::Write, Some(1000)).unwrap();
    let sevens = vec![7i32; 4];
    let dense = old
        .write(
            &Subarray::from_ranges(&[(1, 2), (1, 2)]),
            Layout::RowMajor,
            &[AttrInput::fixed("a", i32_bytes(&sevens))],
        )
        .unwrap();
    let (r, c, v) = ([4i64], [4i64], [9i32]);
    let coords = [
        CoordInput { name: "r", data: bytemuck::cast_slice(&r) },
        CoordInput { name: "c", data: bytemuck::cast_slice(&c) },
    ];
    let sparse = old.write_sparse(&coords, &[AttrInput::fixed("a", i32_bytes(&v))]).unwrap();
    let delete = old.delete_cells(&coords).unwrap();
    for n in [&dense, &sparse, &delete] {
        assert_eq!((n.t0, n.t1), (1000, 1000), "{n}");
    }
    assert!(now.t1 > 1000);
    // As of 999 nothing exists; as of 1000 the three old writes. Now all four are visible, in
    // commit order: the writes at 1000 committed last and win over the full write.
    assert!(Array::open_at(&ctx, "/a", Mode::Read, Some(999)).unwrap().fragments().is_empty());
    let at = Array::open_at(&ctx, "/a", Mode::Read, Some(1000)).unwrap();
    assert_eq!(at.fragments().len(), 3);
    let res = at.read(&Subarray::from_ranges(&[(1, 1), (1, 4)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), vec![7, 7, i32::MIN, i32::MIN]);
    let cur = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let names: Vec<_> = cur.fragments().iter().map(|f| f.name.clone()).collect();
    assert_eq!(names, vec![now, dense, sparse, delete]);
    let res = cur.read(&Subarray::from_ranges(&[(1, 1), (1, 4)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), vec![7, 7, 1, 1]);
    let res = cur.read(&Subarray::from_ranges(&[(4, 4), (3, 4)]), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(as_i32(&res.attrs[0].data), vec![1, i32::MIN]);
    // A timestamp the engine could not order after is refused.
    for t in [MAX_WRITE_TIMESTAMP + 1, u64::MAX] {
        let e = Array::open_at(&ctx, "/a", Mode::Write, Some(t)).unwrap_err();
        assert!(matches!(e, Error::Query(QueryError::Timestamp { .. })), "{e}");
        assert!(e.to_string().contains(&t.to_string()), "{e}");
    }
    Array::open_at(&ctx, "/a", Mode::Write, Some(MAX_WRITE_TIMESTAMP)).unwrap();
}

#[test]
fn several_submits_build_one_fragment() {
    let ctx = mem_ctx();
    let schema = schema_2d(6, 5, 4, 2);
    Array::create(&ctx, "/a", &schema).unwrap();
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    let mut wr = w.writer(&Subarray::full(&schema), Layout::RowMajor).unwrap();
    for (lo, hi) in [(1, 2), (3, 5), (6, 6)] {
        let vals: Vec<i32> = (lo..=hi).flat_map(|i| (1..=5).map(move |j| i * 10 + j)).collect();
        wr.submit_part(
            &Subarray::from_ranges(&[(lo.into(), hi.into()), (1, 5)]),
            &[AttrInput::fixed("a", i32_bytes(&vals))],
        )
        .unwrap();
    }
    let err = wr
        .submit_part(&Subarray::from_ranges(&[(2, 2), (1, 5)]), &[AttrInput::fixed("a", i32_bytes(&[0; 5]))])
        .unwrap_err();
    assert!(err.to_string().contains("overlaps"), "{err}");
    let meta = wr.finish().unwrap();
    assert_eq!(meta.cell_count, 30);
    let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
    assert_eq!(r.fragments().len(), 1);
    let res = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
    let expect: Vec<i32> = (1..=6).flat_map(|i| (1..=5).map(move |j| i * 10 + j)).collect();
    assert_eq!(as_i32(&res.attrs[0].data), expect);
}

#[test]
fn batches_cover_the_result_in_slabs() {
    let ctx = mem_ctx();
    let schema = schema_2d(10, 10, 3, 3);
    Array::create(&ctx, "/a", &schema).unwrap();
    let vals: Vec<i32> = (0..100).collect();
    let w = Array::open(&ctx, "/a", Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
    let r = Array::open(&ctx, "/a", Mode::Read).unwrap();
    let mut q = r.read_query(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
    let mut all = Vec::new();
    while let Some(b) = q.next_batch(130).unwrap() {
        assert_eq!(b.cells % 10, 0, "whole rows per batch");
        assert_eq!(b.start as usize, all.len());
        all.extend(as_i32(&b.attrs[0].data));
    }
    assert_eq!(all, vals);
}

/// A 256 x 512 int32 array in tiles of 64 x 256 (64 KiB, sixteen 4 KiB blocks each; no filters),
/// row- or column-major cells, written once per process; cell (r, c) holds r * 1000 + c.
fn block_array(col_major: bool) -> std::path::PathBuf {
    use std::sync::OnceLock;
    static DIRS: OnceLock<(tempfile::TempDir, [std::path::PathBuf; 2])> = OnceLock::new();
    let (_, uris) = DIRS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let ctx = local_ctx();
        let uris = [dir.path().join("row"), dir.path().join("col")];
        for (uri, order) in uris.iter().zip([CellOrder::RowMajor, CellOrder::ColMajor]) {
            let schema = ArraySchema::builder(ArrayType::Dense)
                .dim(dim("r", 0, 255, 64))
                .dim(dim("c", 0, 511, 256))
                .attr(Attribute::new("a", Datatype::Int32))
                .cell_order(order)
                .build()
                .unwrap();
            Array::create(&ctx, uri, &schema).unwrap();
            let vals: Vec<i32> = (0..256).flat_map(|r| (0..512).map(move |c| r * 1000 + c)).collect();
            let w = Array::open(&ctx, uri, Mode::Write).unwrap();
            w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", i32_bytes(&vals))]).unwrap();
        }
        (dir, uris)
    });
    uris[usize::from(col_major)].clone()
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 48, ..Default::default() })]
    /// Reads that need only some blocks of a tile (few points, thin boxes) give the same cells as
    /// the formula, with no cache (blocks read alone), a small one and the default.
    #[test]
    fn partial_block_reads_give_every_cell(
        col_major in proptest::prelude::any::<bool>(),
        cache in 0..3usize,
        pts in proptest::collection::vec((0i64..256, 0i64..512), 1..30),
        bx in (0i64..256, 0i64..8, 0i64..512, 0i64..512),
    ) {
        let uri = block_array(col_major);
        let mut c = Config::new();
        c.set("sm.tile_cache_size", ["0", "1048576", "134217728"][cache]).unwrap();
        let ctx = Context::new(c).unwrap();
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let (rs, cs): (Vec<i64>, Vec<i64>) = pts.iter().copied().unzip();
        let res = r
            .read_points(
                &[CoordInput { name: "r", data: bytemuck::cast_slice(&rs) }, CoordInput { name: "c", data: bytemuck::cast_slice(&cs) }],
                &["a"],
            )
            .unwrap();
        let want: Vec<i32> = pts.iter().map(|&(r, c)| (r * 1000 + c) as i32).collect();
        proptest::prop_assert_eq!(as_i32(&res.attrs[0].data), &want[..]);
        // A box a few rows high (in row-major tiles a few blocks).
        let (r0, r1) = (bx.0, (bx.0 + bx.1).min(255));
        let (c0, c1) = (bx.2.min(bx.3), bx.2.max(bx.3));
        let res = r.read(&Subarray::from_ranges(&[(r0.into(), r1.into()), (c0.into(), c1.into())]), &["a"], Layout::RowMajor).unwrap();
        let want: Vec<i32> = (r0..=r1).flat_map(|r| (c0..=c1).map(move |c| (r * 1000 + c) as i32)).collect();
        proptest::prop_assert_eq!(as_i32(&res.attrs[0].data), &want[..]);
    }
}

/// Full tiles of chunked files are filtered chunk by chunk straight from the caller's rows
/// (`TileRuns`), never assembled; tiles filled by several submits are assembled first. Both
/// must store the same bytes: an array written in one submit and the same array written in
/// bands of rows (every tile split between submits) have equal tile sizes, checksums and chunks,
/// and read back the same cells, including a nullable attribute whose validity is chunked too.
#[test]
fn chunked_tiles_from_the_callers_rows_equal_assembled_tiles() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::new();
    config.set("sm.tile_chunk_size", "4096").unwrap();
    let ctx = Context::new(config).unwrap();
    let (rows, cols) = (130i128, 320i128);
    let mut a = Attribute::new("a", Datatype::Int32);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 3 }]);
    let mut b = Attribute::new("b", Datatype::Int64);
    b.filters = FilterPipeline::new(vec![Filter::Delta, Filter::Gzip { level: 6 }]);
    b.nullable = true;
    // Tiles of 60 x 150 cells: 36,000 bytes of `a`, 72,000 of `b`, 9,000 of validity (all
    // chunked); the last row and column of tiles lie partly outside the domain.
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, rows, 60))
        .dim(dim("c", 1, cols, 150))
        .attr(a)
        .attr(b)
        .build()
        .unwrap();
    let n = (rows * cols) as usize;
    let av: Vec<i32> = (0..n as i32).map(|i| (i % 151) * 7 + i / 1000).collect();
    let bv: Vec<i64> = (0..n as i64).map(|i| i * i % 1_000_003).collect();
    let bb: Vec<u8> = bv.iter().flat_map(|v| v.to_le_bytes()).collect();
    let valid: Vec<u8> = (0..n).map(|i| u8::from(i % 13 != 0)).collect();
    let inputs = |r0: usize, r1: usize| {
        let (lo, hi) = (r0 * cols as usize, r1 * cols as usize);
        [
            AttrInput::fixed("a", &i32_bytes(&av)[lo * 4..hi * 4]),
            AttrInput { name: "b", data: &bb[lo * 8..hi * 8], offsets: None, validity: Some(&valid[lo..hi]) },
        ]
    };
    let whole = dir.path().join("whole");
    Array::create(&ctx, &whole, &schema).unwrap();
    Array::open(&ctx, &whole, Mode::Write)
        .unwrap()
        .write(&Subarray::full(&schema), Layout::RowMajor, &inputs(0, 130))
        .unwrap();
    let banded = dir.path().join("banded");
    Array::create(&ctx, &banded, &schema).unwrap();
    let w = Array::open(&ctx, &banded, Mode::Write).unwrap();
    let mut writer = w.writer(&Subarray::full(&schema), Layout::RowMajor).unwrap();
    for r0 in (0..130).step_by(25) {
        let r1 = (r0 + 25).min(130);
        let part = Subarray::from_ranges(&[(r0 as i128 + 1, r1 as i128), (1, cols)]);
        writer.submit_part(&part, &inputs(r0, r1)).unwrap();
    }
    writer.finish().unwrap();
    let frag = |uri: &std::path::Path| {
        let r = Array::open(&ctx, uri, Mode::Read).unwrap();
        r.fragments()[0].clone()
    };
    let (fw, fb) = (frag(&whole), frag(&banded));
    // Every tile of every file is chunked: 9 tiles, 3 files.
    assert_eq!(fw.chunks.chunks.iter().flatten().filter(|c| !c.list.is_empty()).count(), 27);
    assert_eq!(fw.chunks, fb.chunks);
    for ((name, tw), (_, tb)) in fw.files.iter().zip(&fb.files) {
        let key = |t: &TileEntry| (t.stored_size, t.unfiltered_size, t.checksum);
        assert_eq!(tw.iter().map(key).collect::<Vec<_>>(), tb.iter().map(key).collect::<Vec<_>>(), "{name}");
    }
    for uri in [&whole, &banded] {
        let r = Array::open(&ctx, uri, Mode::Read).unwrap();
        let res = r.read(&Subarray::from_ranges(&[(7, 123), (3, 318)]), &["a", "b"], Layout::RowMajor).unwrap();
        let cells: Vec<usize> = (6..123).flat_map(|i| (2..318).map(move |j| i * cols as usize + j)).collect();
        assert_eq!(as_i32(&res.attrs[0].data), cells.iter().map(|&k| av[k]).collect::<Vec<_>>());
        let got: Vec<i64> =
            res.attrs[1].data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, cells.iter().map(|&k| bv[k]).collect::<Vec<_>>());
        assert_eq!(res.attrs[1].validity.as_deref(), Some(&cells.iter().map(|&k| valid[k]).collect::<Vec<_>>()[..]));
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 40, ..Default::default() })]
    /// Chunked tiles the tile cache does not take have the chunks a read needs decoded straight
    /// into the result (a run per tile row when the result is wider than the tile, a run per
    /// point, a run per cell of a box with no longer runs, such as a column-major result, if it
    /// copies at most a 64th of the tile; larger ones copy from the decoded tile): random
    /// overlapping writes (several fragments), random boxes in both layouts and random
    /// points, pread and mmap, every read equal to a reference array of the newest values.
    #[test]
    fn whole_chunked_tiles_decode_into_the_result(
        writes in proptest::collection::vec((0i128..120, 1i128..120, 0i128..90, 1i128..90, proptest::prelude::any::<u32>()), 1..4),
        reads in proptest::collection::vec((0i128..120, 1i128..120, 0i128..90, 1i128..90, proptest::prelude::any::<bool>()), 1..5),
        mmap in proptest::prelude::any::<bool>(),
        points in proptest::collection::vec((1i64..=120, 1i64..=90), 1..40),
    ) {
        let (rows, cols) = (120i128, 90i128);
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("a");
        let mut config = Config::new();
        config.set("sm.tile_chunk_size", "4096").unwrap();
        config.set("sm.tile_cache_size", "0").unwrap();
        config.set("vfs.read_mode", if mmap { "mmap" } else { "pread" }).unwrap();
        let ctx = Context::new(config).unwrap();
        let mut a = Attribute::new("a", Datatype::Int64);
        a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
        // Tiles of 40 x 30 int64: 9,600 bytes, three chunks of 4 KiB (the last short).
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(dim("r", 1, rows, 40))
            .dim(dim("c", 1, cols, 30))
            .attr(a)
            .build()
            .unwrap();
        Array::create(&ctx, &uri, &schema).unwrap();
        let fill = i64::MIN;
        let mut model = vec![fill; (rows * cols) as usize];
        let span = |lo: i128, len: i128, n: i128| (lo + 1, (lo + len).min(n));
        for &(r0, rl, c0, cl, seed) in &writes {
            let ((r0, r1), (c0, c1)) = (span(r0, rl, rows), span(c0, cl, cols));
            let mut vals = Vec::new();
            for r in r0..=r1 {
                for c in c0..=c1 {
                    let v = i64::from(seed) * 1_000_000 + (r * 1000 + c) as i64;
                    model[((r - 1) * cols + c - 1) as usize] = v;
                    vals.push(v);
                }
            }
            let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
            w.write(&Subarray::from_ranges(&[(r0, r1), (c0, c1)]), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).unwrap();
        }
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        for &(r0, rl, c0, cl, col_major) in reads.iter().chain([(0, rows, 0, cols, false)].iter()) {
            let ((r0, r1), (c0, c1)) = (span(r0, rl, rows), span(c0, cl, cols));
            let layout = if col_major { Layout::ColMajor } else { Layout::RowMajor };
            let res = r.read(&Subarray::from_ranges(&[(r0, r1), (c0, c1)]), &["a"], layout).unwrap();
            let at = |r: i128, c: i128| model[((r - 1) * cols + c - 1) as usize];
            let want: Vec<i64> = if col_major {
                (c0..=c1).flat_map(|c| (r0..=r1).map(move |r| at(r, c))).collect()
            } else {
                (r0..=r1).flat_map(|r| (c0..=c1).map(move |c| at(r, c))).collect()
            };
            let got: &[i64] = bytemuck::cast_slice(&res.attrs[0].data);
            proptest::prop_assert_eq!(got, &want[..], "box {:?} {:?}", (r0, r1, c0, c1), layout);
        }
        // Points: each a run of one cell, decoded from the chunk holding it.
        let (rs, cs): (Vec<i64>, Vec<i64>) = points.iter().copied().unzip();
        let coords = [CoordInput { name: "r", data: bytemuck::cast_slice(&rs) }, CoordInput { name: "c", data: bytemuck::cast_slice(&cs) }];
        let res = r.read_points(&coords, &["a"]).unwrap();
        let want: Vec<i64> = points.iter().map(|&(pr, pc)| model[((pr - 1) as i128 * cols + (pc - 1) as i128) as usize]).collect();
        proptest::prop_assert_eq!(bytemuck::cast_slice::<u8, i64>(&res.attrs[0].data), &want[..]);
    }
}

/// Enough points that the runs of their chunked tiles are made on every core (4,096 copies or
/// more), and a column of every tile row (a run per cell), from tiles of three chunks: the
/// values of a reference array, in the points' order.
#[test]
fn many_points_and_a_column_of_chunked_tiles_decode_into_the_result() {
    let (rows, cols) = (120i128, 90i128);
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let mut config = Config::new();
    config.set("sm.tile_chunk_size", "4096").unwrap();
    config.set("sm.tile_cache_size", "0").unwrap();
    let ctx = Context::new(config).unwrap();
    let mut a = Attribute::new("a", Datatype::Int64);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, rows, 40))
        .dim(dim("c", 1, cols, 30))
        .attr(a)
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let vals: Vec<i64> = (0..(rows * cols) as i64).map(|i| i * 7919 % 100_003).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    assert_eq!(r.fragments()[0].chunks.of(0, 0).map(|c| c.list.len()), Some(3));
    // 6,000 distinct cells in scrambled order (7 is prime to the 10,800 cells).
    let cells: Vec<i64> = (0..6000i64).map(|k| k * 7 % (rows * cols) as i64).collect();
    let rs: Vec<i64> = cells.iter().map(|c| c / cols as i64 + 1).collect();
    let cs: Vec<i64> = cells.iter().map(|c| c % cols as i64 + 1).collect();
    let coords = [
        CoordInput { name: "r", data: bytemuck::cast_slice(&rs) },
        CoordInput { name: "c", data: bytemuck::cast_slice(&cs) },
    ];
    let res = r.read_points(&coords, &["a"]).unwrap();
    let want: Vec<i64> = cells.iter().map(|&c| vals[c as usize]).collect();
    assert_eq!(bytemuck::cast_slice::<u8, i64>(&res.attrs[0].data), &want[..]);
    let res = r.read(&Subarray::from_ranges(&[(1, rows), (47, 47)]), &["a"], Layout::RowMajor).unwrap();
    let want: Vec<i64> = (0..rows as usize).map(|i| vals[i * cols as usize + 46]).collect();
    assert_eq!(bytemuck::cast_slice::<u8, i64>(&res.attrs[0].data), &want[..]);
}

/// A flipped byte in a chunk of a tile decoded straight into the result is reported as that
/// tile's corruption, never returned as data.
#[test]
fn a_corrupt_chunk_of_a_tile_decoded_in_place_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join("a");
    let mut config = Config::new();
    config.set("sm.tile_chunk_size", "4096").unwrap();
    config.set("sm.tile_cache_size", "0").unwrap();
    let ctx = Context::new(config).unwrap();
    let mut a = Attribute::new("a", Datatype::Int64);
    a.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, 40, 40))
        .dim(dim("c", 1, 60, 60))
        .attr(a)
        .build()
        .unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let vals: Vec<i64> = (0..2400).map(|i| i * 7919 % 10007).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::RowMajor, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).unwrap();
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let res = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap();
    assert_eq!(bytemuck::cast_slice::<u8, i64>(&res.attrs[0].data), &vals[..]);
    let frag = r.fragments()[0].clone();
    let chunks = frag.chunks.of(0, 0).unwrap().list.clone();
    flip_stored(&dir.path().join("a"), &frag.name, "a0.data", chunks[0].stored + chunks[1].stored / 2, 0x20);
    let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
    let e = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap_err();
    assert!(e.to_string().contains("tile 0: chunk 1: checksum mismatch"), "{e}");
}

/// An uncompressed int64 array of `tiles` tiles of 1000 x 1000 cells (8 MB each, stored whole,
/// read and verified in pieces), written in one fragment in global order: its URI under `dir`
/// and its values in that order.
fn large_tile_array(dir: &std::path::Path, tiles: i64) -> (std::path::PathBuf, Vec<i64>) {
    let uri = dir.join("a");
    let schema = ArraySchema::builder(ArrayType::Dense)
        .dim(dim("r", 1, 1000, 1000))
        .dim(dim("c", 1, 1000 * i128::from(tiles), 1000))
        .attr(Attribute::new("a", Datatype::Int64))
        .build()
        .unwrap();
    let ctx = Context::new(Config::new()).unwrap();
    Array::create(&ctx, &uri, &schema).unwrap();
    let vals: Vec<i64> = (0..1_000_000 * tiles).map(|i| i * 7919 % 1_000_003).collect();
    let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
    w.write(&Subarray::full(&schema), Layout::Global, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).unwrap();
    (uri, vals)
}

/// A flipped byte deep inside a large uncompressed tile (read and verified in parallel pieces
/// of whole checksum blocks, straight into the result or through a tile buffer) is reported as
/// that tile's corruption in both read modes; the intact tile beside it still reads.
#[test]
fn a_corrupt_block_of_a_large_tile_read_in_pieces_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, vals) = large_tile_array(dir.path(), 2);
    let ctx = Context::new(Config::new()).unwrap();
    let frag = Array::open(&ctx, &uri, Mode::Read).unwrap().fragments()[0].clone();
    let data = uri.join(FRAGMENTS_DIR).join(frag.name.to_string()).join("a0.data");
    let mut bytes = std::fs::read(&data).unwrap();
    assert_eq!(bytes.len(), 16_000_000, "two tiles of 8 MB, stored whole");
    bytes[5_000_123] ^= 0x04;
    std::fs::write(&data, &bytes).unwrap();
    let tile = |c0, c1| Subarray::from_ranges(&[(1, 1000), (c0, c1)]);
    for mode in ["pread", "mmap"] {
        let mut config = Config::new();
        config.set("sm.tile_cache_size", "0").unwrap();
        config.set("vfs.read_mode", mode).unwrap();
        let ctx = Context::new(config).unwrap();
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        for sub in [tile(1, 1000), tile(2, 999), Subarray::from_ranges(&[(600, 700), (5, 6)])] {
            let e = r.read(&sub, &["a"], Layout::RowMajor).unwrap_err();
            let e = e.to_string();
            assert!(e.contains("a0.data: tile 0") && e.contains("checksum mismatch"), "{mode} {sub:?}: {e}");
        }
        let res = r.read(&tile(1001, 2000), &["a"], Layout::RowMajor).unwrap();
        let got: &[i64] = bytemuck::cast_slice(&res.attrs[0].data);
        assert_eq!(got, &vals[1_000_000..], "{mode}: the intact tile");
    }
}

/// A large tile whose recorded offset is near the end of the u64 range (metadata re-sealed, so
/// only the offset is wrong) is reported as corruption when read in pieces, not an arithmetic
/// overflow (a panic under overflow checks) or a read at a wrapped-around offset.
#[test]
fn a_large_tile_at_a_huge_offset_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (uri, _) = large_tile_array(dir.path(), 1);
    let r = Array::open(&Context::new(Config::new()).unwrap(), &uri, Mode::Read).unwrap();
    let (schema, name) = (r.schema().clone(), r.fragments()[0].name.clone());
    crate::tamper::drop_record_copies(&uri);
    let meta_path = crate::tamper::frag_dir(&uri, &name).join(METADATA_FILE);
    let mut meta = FragmentMetadata::decode(&std::fs::read(&meta_path).unwrap(), name, &meta_path).unwrap();
    meta.files[0].1[0].offset = u64::MAX - 1000;
    std::fs::write(&meta_path, meta.encode()).unwrap();
    for mode in ["pread", "mmap"] {
        let mut config = Config::new();
        config.set("vfs.read_mode", mode).unwrap();
        let r = Array::open(&Context::new(config).unwrap(), &uri, Mode::Read).unwrap();
        let e = r.read(&Subarray::full(&schema), &["a"], Layout::RowMajor).unwrap_err();
        assert!(matches!(e, Error::Corrupt { .. }), "{mode}: {e}");
    }
}

/// A dense fragment stores each file's tiles in tile order, whichever way the writer produces
/// them: tiles copied straight from the caller's buffers (whole unfiltered tiles) and tiles
/// assembled and filtered (tiles cut by the domain's end, filtered files) alike. Reads of
/// neighbouring tiles coalesce only if their bytes are neighbours too.
#[test]
fn tiles_are_stored_in_tile_order_edge_tiles_included() {
    for (tile_order, layout, pack) in [
        (CellOrder::RowMajor, Layout::RowMajor, "0"),
        (CellOrder::ColMajor, Layout::RowMajor, "0"),
        (CellOrder::RowMajor, Layout::ColMajor, "0"),
        (CellOrder::RowMajor, Layout::RowMajor, "1048576"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Config::new();
        c.set("sm.write.pack_bytes", pack).unwrap();
        let ctx = Context::new(c).unwrap();
        let mut zipped = Attribute::new("z", Datatype::Int32);
        zipped.filters = FilterPipeline::new(vec![Filter::Zstd { level: 1 }]);
        let schema = ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("x", Datatype::Int64, (0, 127), 64))
            .dim(Dimension::new("y", Datatype::Int64, (0, 95), 64))
            .attr(Attribute::new("a", Datatype::Int32))
            .attr(zipped)
            .tile_order(tile_order)
            .build()
            .unwrap();
        let uri = dir.path().join("a");
        Array::create(&ctx, &uri, &schema).unwrap();
        let vals: Vec<i32> = (0..128 * 96).collect();
        let w = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let inputs = [AttrInput::fixed("a", i32_bytes(&vals)), AttrInput::fixed("z", i32_bytes(&vals))];
        w.write(&Subarray::full(&schema), layout, &inputs).unwrap();
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        let frag = &r.fragments()[0];
        assert_eq!(frag.packed, pack != "0");
        for (name, tiles) in &frag.files {
            let offsets: Vec<u64> = tiles.iter().map(|t| t.offset).collect();
            assert!(
                offsets.windows(2).all(|w| w[0] < w[1]),
                "{tile_order:?} {layout:?} pack {pack} {name}: {offsets:?}"
            );
        }
        let res = r.read(&Subarray::full(&schema), &["a", "z"], layout).unwrap();
        assert!(as_i32(&res.attrs[0].data) == vals && as_i32(&res.attrs[1].data) == vals, "{tile_order:?} {layout:?}");
    }
}
