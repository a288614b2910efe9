//! Fuzz targets: one plain function per decoder of bytes read from disk. Each takes any bytes and
//! must return without panicking, hanging or allocating more than its limits; whatever it
//! accepts must be consistent (a decoded tile has exactly the length asked for, a schema stays
//! within its limits).
//!
//! The same functions run in two places: `fuzz/` (cargo-fuzz, libFuzzer, long runs: `make fuzz`,
//! see `fuzz/README.md`) and this module's tests, a short deterministic run in the normal test
//! suite that feeds each target thousands of mutated valid encodings and random byte strings.
//! Compiled for tests and with the `fuzzing` feature only.
//!
//! Inputs that must pass a checksum to reach a decoder (schema and metadata files) are sealed
//! with a correct footer by the target, so the fuzzer explores the decoder rather than the
//! checksum; the raw bytes are tried as well.
#![allow(clippy::missing_panics_doc)]

use std::path::Path;
use std::sync::Arc;

use crate::config::Limits;
use crate::filter::{Filter, FilterPipeline};
use crate::footer::seal;
use crate::fragment::{check_var_offsets, FragmentMetadata, FragmentName, METADATA_FILE};
use crate::geometry::TileGrid;
use crate::schema::{decode_schema_file, ArraySchema};

/// The largest decoded tile the filter targets ask for (a decoder must not allocate more than
/// about this; libFuzzer's `-malloc_limit_mb` in `make fuzz` enforces it).
pub const MAX_TILE: usize = 1 << 20;

/// A fuzz target: takes any bytes, panics only on a bug.
pub type Target = fn(&[u8]);

/// Every target by name, as `fuzz/fuzz_targets/<name>.rs` runs it.
pub const TARGETS: &[(&str, Target)] = &[
    ("commit_record", commit_record),
    ("meta_file", meta_file),
    ("fragment_meta_file", fragment_meta_file),
    ("schema", schema),
    ("fragment_metadata", fragment_metadata),
    ("filter_gzip", |d| filter(Filter::Gzip { level: 1 }, d)),
    ("filter_zstd", |d| filter(Filter::Zstd { level: 1 }, d)),
    ("filter_lz4", |d| filter(Filter::Lz4, d)),
    ("filter_rle", |d| filter(Filter::Rle, d)),
    ("filter_delta", |d| filter(Filter::Delta, d)),
    ("filter_byteshuffle", |d| filter(Filter::ByteShuffle, d)),
    ("filter_pipeline", pipeline),
    ("var_offsets", var_offsets),
    ("update_index", update_index),
];

/// Limits small enough that a fuzzer's memory cap is never the reason a run stops.
fn fuzz_limits() -> Limits {
    Limits { tile_bytes: MAX_TILE as u64, attributes: 1024, schema_bytes: 1 << 20 }
}

/// The schema file decoder, on `data` as a whole file and as a sealed JSON payload; an accepted
/// schema is within the limits and gives a tile grid and file lists (what opening does next).
pub fn schema(data: &[u8]) {
    let path = Path::new("__schema/__fuzz");
    let limits = fuzz_limits();
    for bytes in [data.to_vec(), seal(data.to_vec(), crate::schema::SCHEMA_MAGIC)] {
        if let Ok(s) = decode_schema_file(&bytes, path, &limits) {
            assert!(s.attrs.len() as u64 <= limits.attributes);
            let _ = TileGrid::new(&s);
            let _ = crate::fragment::FileSpec::for_sparse(&s);
            let back = ArraySchema::from_json(&s.to_json()).expect("a valid schema's JSON reads back");
            assert_eq!(back, s);
        }
    }
}

/// The fragment metadata decoder (tile index, sparse index, R-tree, deletes, block checksums),
/// on `data` as a whole file and as a sealed payload; decoded metadata encodes back to the same
/// payload.
pub fn fragment_metadata(data: &[u8]) {
    let path = Path::new(METADATA_FILE);
    let name = FragmentName::new(1);
    for bytes in [data.to_vec(), seal(data.to_vec(), crate::fragment::METADATA_FOOTER_MAGIC)] {
        if let Ok(m) = FragmentMetadata::decode(&bytes, name.clone(), path) {
            let _ = (m.tile_count(), m.stored_bytes(), m.unfiltered_bytes(), m.kind());
            let again = FragmentMetadata::decode(&m.encode(), name.clone(), path).expect("re-encoded");
            assert_eq!(again, m);
        }
    }
}

/// The array metadata file decoder, on `data` as a whole file and as a sealed payload; a decoded
/// file encodes back to the same bytes.
pub fn meta_file(data: &[u8]) {
    crate::meta::fuzz_decode(data);
}

/// The consolidated fragment metadata decoder, on `data` as a whole file and as a sealed
/// payload.
pub fn fragment_meta_file(data: &[u8]) {
    crate::snapshot::fragment_meta::fuzz_decode(data);
    crate::snapshot::fragment_meta::fuzz_decode(&seal(data.to_vec(), b"TSRFMETA"));
}

/// The commit record decoder (format 3; metadata copies since format 8), on `data` as a whole
/// file and as a sealed payload; a decoded record encodes back to itself, and a log holding it
/// resolves (or is corrupt) without panicking.
pub fn commit_record(data: &[u8]) {
    use crate::commit::{resolve, Log, Record, RECORD_MAGIC};
    let path = Path::new("__commits/00000000000000000002.commit");
    for bytes in [data.to_vec(), seal(data.to_vec(), RECORD_MAGIC)] {
        if let Ok((r, embedded)) = Record::decode_with(&bytes, path) {
            let copy = embedded.map(|e| &bytes[e]);
            let again = Record::decode_with(&r.encode_with(copy), path).expect("re-encoded");
            assert_eq!(again.0, r);
            assert_eq!(again.1.is_some(), copy.is_some_and(|c| c.len() <= crate::commit::MAX_EMBEDDED_METADATA));
            let mut log = Log::default();
            match r {
                Record::Checkpoint(live) => log.checkpoint = Some((2, live)),
                other => log.records = vec![(1, Record::Write(FragmentName::new(1))), (2, other)],
            }
            if let Ok(resolved) = resolve(&log, Path::new("__commits"), u64::MAX) {
                let mut positions: Vec<_> = resolved.live.iter().map(|p| p.position.clone()).collect();
                assert!(positions.windows(2).all(|w| w[0] < w[1]), "visible fragments out of order");
                positions.dedup();
                assert_eq!(positions.len(), resolved.live.len());
            }
        }
    }
}

/// The element width and decoded length a filter input asks for: `data[0]` picks the width
/// (1, 2, 4 or 8), `data[1..4]` the length (below [`MAX_TILE`]); the rest is the stage.
fn split_header(data: &[u8]) -> Option<(usize, usize, &[u8])> {
    let (&[w, a, b, c], rest) = data.split_first_chunk::<4>()?;
    let width = 1usize << (w & 3);
    let len = usize::from(a) | usize::from(b) << 8 | usize::from(c & 0x0f) << 16;
    Some((width, len, rest))
}

/// One filter's decoder on a stage (see [`split_header`] for the input's layout): it either
/// fails or returns exactly the length asked for.
pub fn filter(f: Filter, data: &[u8]) {
    let Some((width, len, stage)) = split_header(data) else { return };
    if let Ok(out) = FilterPipeline::new(vec![f]).decode(stage.to_vec(), width, len) {
        assert_eq!(out.len(), len, "{f:?} decoded a wrong length");
    }
}

/// The filters a pipeline input names (`data[0]`: three filters of 3 bits each, 0 ends).
fn pipeline_of(code: u16) -> Vec<Filter> {
    let all = [
        Filter::Gzip { level: 1 },
        Filter::Zstd { level: 1 },
        Filter::Lz4,
        Filter::Rle,
        Filter::Delta,
        Filter::ByteShuffle,
    ];
    (0..3).map_while(|k| all.get(usize::from((code >> (3 * k)) & 7)).copied()).collect()
}

/// A pipeline of up to three filters (named by the first two bytes) on the rest (as for
/// [`filter`]).
pub fn pipeline(data: &[u8]) {
    let Some((code, rest)) = data.split_first_chunk::<2>() else { return };
    let filters = pipeline_of(u16::from_le_bytes(*code));
    let Some((width, len, stage)) = split_header(rest) else { return };
    if let Ok(out) = FilterPipeline::new(filters).decode(stage.to_vec(), width, len) {
        assert_eq!(out.len(), len);
    }
}

/// The offsets-tile check: an accepted tile makes every cell a range inside the data tile.
pub fn var_offsets(data: &[u8]) {
    let Some((len, offs)) = data.split_first_chunk::<2>() else { return };
    let data_len = u64::from(u16::from_le_bytes(*len));
    if check_var_offsets(offs, data_len).is_ok() {
        let o: Vec<u64> = offs.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect();
        for (c, &start) in o.iter().enumerate() {
            let end = o.get(c + 1).copied().unwrap_or(data_len);
            assert!(start <= end && end <= data_len, "cell {c}: [{start}, {end}) of {data_len}");
        }
    }
}

/// The update index built from coordinate tiles: an in-memory sparse array of small update
/// fragments, one of whose coordinate tiles (unfiltered, 4 cells of 2 int64 dimensions) is
/// replaced by `data` (padded or cut to 64 bytes, checksum fixed); a read that builds the index
/// returns cells or an error.
pub fn update_index(data: &[u8]) {
    use crate::{
        Array, ArrayType, AttrInput, Attribute, Config, Context, CoordInput, Datatype, Dimension, Layout, Mode,
    };
    use crate::{DimRange, MemoryStorage, Storage};
    let mut config = Config::new();
    let settings = [
        ("sm.read.update_index_min_fragments", "1"),
        ("sm.read.update_index_after_reads", "0"),
        ("sm.compute_concurrency", "1"),
        ("sm.io_concurrency", "1"),
    ];
    for (k, v) in settings {
        config.set(k, v).expect("known key");
    }
    let storage = Arc::new(MemoryStorage::new());
    let ctx = Context::with_storage(config, storage.clone()).expect("context");
    let dim = |n: &str| Dimension::new(n, Datatype::Int64, (0, 99), 10).with_filters(FilterPipeline::default());
    let schema = ArraySchema::builder(ArrayType::Sparse)
        .dim(dim("x"))
        .dim(dim("y"))
        .attr(Attribute::new("a", Datatype::Int32))
        .build()
        .expect("schema");
    let uri = Path::new("/fuzz");
    Array::create(&ctx, uri, &schema).expect("create");
    let w = Array::open(&ctx, uri, Mode::Write).expect("open");
    let mut names = Vec::new();
    for k in 0..3i64 {
        let xs: Vec<i64> = (0..4).map(|j| (k * 17 + j * 29) % 100).collect();
        let ys: Vec<i64> = (0..4).map(|j| (k * 31 + j * 7) % 100).collect();
        let vals: Vec<i32> = (0..4).map(|j| (k * 4 + j) as i32).collect();
        let coords = [
            CoordInput { name: "x", data: bytemuck::cast_slice(&xs) },
            CoordInput { name: "y", data: bytemuck::cast_slice(&ys) },
        ];
        names.push(w.write_sparse(&coords, &[AttrInput::fixed("a", bytemuck::cast_slice(&vals))]).expect("write"));
    }
    drop(w);
    let mut tile = data.to_vec();
    tile.resize(32, 0);
    let file = if data.first().is_some_and(|b| b & 1 == 1) { "d1.data" } else { "d0.data" };
    let dir = uri.join(crate::FRAGMENTS_DIR).join(names[1].to_string());
    let meta_path = dir.join(METADATA_FILE);
    let meta_bytes = storage.read_all(&meta_path).expect("metadata");
    let mut meta = FragmentMetadata::decode(&meta_bytes, names[1].clone(), &meta_path).expect("metadata");
    if let Some(f) = meta.files.iter_mut().find(|f| f.0 == file) {
        let e = &mut f.1[0];
        (e.offset, e.stored_size, e.unfiltered_size) = (0, 32, 32);
        e.checksum = crate::checksum::xxh3_64(&tile);
    }
    storage.write_atomic(&dir.join(file), &tile).expect("tile");
    storage.write_atomic(&meta_path, &meta.encode()).expect("metadata");
    let Ok(r) = Array::open(&ctx, uri, Mode::Read) else { return };
    let all = vec![vec![DimRange::Int(0, 99)]; 2];
    if let Ok(mut q) = r.sparse_query(&all, &["a"], Layout::RowMajor) {
        if let Ok(res) = q.read_all() {
            assert!(res.cells <= 12);
        }
    }
    let some = vec![vec![DimRange::Int(10, 60)], vec![DimRange::Int(0, 40)]];
    let _ = r.sparse_query(&some, &["a"], Layout::Unordered).and_then(|mut q| q.read_all());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::testdata::random;
    use crate::fragment::{BlockIndex, Chunk, ChunkIndex, RTree, SparseIndex, TileChunks, TileEntry};
    use crate::schema::{ArrayType, Attribute, CellValNum, Datatype, Dimension};

    /// Deterministic xorshift.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n.max(1) as u64) as usize
        }
    }

    /// A mutation of `seed`: flipped bits, changed, inserted or removed bytes, a cut, or a
    /// spliced copy of a part of itself (as libFuzzer's mutators do, deterministically).
    fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
        let mut v = seed.to_vec();
        for _ in 0..1 + rng.below(4) {
            let n = v.len();
            match rng.below(7) {
                0 if n > 0 => {
                    let i = rng.below(n);
                    v[i] ^= 1 << rng.below(8);
                }
                1 if n > 0 => {
                    let i = rng.below(n);
                    v[i] = [0, 1, 0x7f, 0x80, 0xff][rng.below(5)];
                }
                2 => {
                    let i = rng.below(n + 1);
                    v.insert(i, rng.next() as u8);
                }
                3 if n > 0 => {
                    v.remove(rng.below(n));
                }
                4 => v.truncate(rng.below(n + 1)),
                5 if n >= 8 => {
                    // An 8-byte word (a length or count) set to something large.
                    let i = rng.below(n - 7);
                    let big = [u64::MAX, 1 << 40, 1 << 31, (n as u64) * 2, 0][rng.below(5)];
                    v[i..i + 8].copy_from_slice(&big.to_le_bytes());
                }
                6 if n > 0 => {
                    let (a, b) = (rng.below(n), rng.below(n));
                    let part = v[a.min(b)..a.max(b)].to_vec();
                    let at = rng.below(n + 1);
                    v.splice(at..at, part);
                }
                _ => {}
            }
        }
        v
    }

    /// Runs `target` on every seed, `mutations` mutations of the seeds and `random` random byte
    /// strings.
    fn run(target: Target, seeds: &[Vec<u8>], mutations: usize, random_inputs: usize) {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for s in seeds {
            target(s);
        }
        for _ in 0..mutations {
            let s = &seeds[rng.below(seeds.len())];
            target(&mutate(s, &mut rng));
        }
        for k in 0..random_inputs {
            let len = rng.below(300);
            target(&random(len, k as u64 + 1));
        }
    }

    fn schema_seeds() -> Vec<Vec<u8>> {
        let mut s = Attribute::new("s", Datatype::Utf8);
        s.cell_val_num = CellValNum::Var;
        s.nullable = true;
        s.filters = FilterPipeline::new(vec![Filter::Zstd { level: 3 }]);
        let dense = ArraySchema::builder(ArrayType::Dense)
            .dim(Dimension::new("r", Datatype::Int64, (1, 100), 10))
            .dim(Dimension::new("c", Datatype::Int64, (-5, 5), 3))
            .attr(Attribute::new("a", Datatype::Int32))
            .attr(s)
            .build()
            .unwrap();
        let sparse = ArraySchema::builder(ArrayType::Sparse)
            .dim(Dimension::float("x", Datatype::Float64, (0.0, 10.0), Some(2.5)))
            .dim(Dimension::float("y", Datatype::Float64, (-1.0, 1.0), None))
            .attr(Attribute::new("v", Datatype::UInt16))
            .capacity(7)
            .allows_duplicates(true)
            .build()
            .unwrap();
        [dense, sparse].iter().map(|s| s.to_json().into_bytes()).collect()
    }

    fn metadata_seeds() -> Vec<Vec<u8>> {
        let e = |i: u64| TileEntry { offset: i * 10, stored_size: 5000, unfiltered_size: 40, checksum: i };
        let dense = FragmentMetadata {
            name: FragmentName::new(5),
            domain: vec![[0, 9], [3, 7]],
            cell_count: 50,
            files: vec![("a0.data".into(), vec![e(0), e(1)]), ("a0.valid".into(), vec![e(2), e(3)])],
            sparse: None,
            deletes: None,
            blocks: BlockIndex::inline(10, vec![vec![vec![1, 2, 3, 4, 5], vec![]], vec![vec![], vec![]]]),
            chunks: ChunkIndex::default(),
            stats: crate::fragment::TileStats::default(),
            packed: false,
        };
        // A chunked tile: 10,000 bytes in chunks of 4 KiB, stored in 3 x 100 bytes.
        let mut chunked = dense.clone();
        let chunks: Vec<Chunk> = (0..3).map(|i| Chunk { stored: 100, checksum: 7 + i }).collect();
        let sums: Vec<u64> = chunks.iter().map(|c| c.checksum).collect();
        let sum = crate::fragment::checksum_of_sums(&sums);
        let big = TileEntry { offset: 0, stored_size: 300, unfiltered_size: 10_000, checksum: sum };
        chunked.files.push(("a1.data".into(), vec![big, e(4)]));
        let tile = TileChunks { log2: 12, list: chunks };
        chunked.chunks = ChunkIndex { chunks: vec![vec![], vec![], vec![tile, TileChunks::default()]] };
        let mut sparse = dense.clone();
        let mbrs = vec![vec![[0, 4], [3, 5]], vec![[5, 9], [4, 7]], vec![[1, 2], [3, 3]]];
        sparse.files = vec![("d0.data".into(), vec![e(0), e(1), e(2)])];
        sparse.blocks = BlockIndex::default();
        sparse.sparse = Some(SparseIndex {
            tile_cells: vec![3, 2, 1],
            rtree: RTree::build(&mbrs, 2),
            mbrs,
            first: vec![vec![0, 3], vec![5, 7], vec![1, 3]],
            last: vec![vec![4, 5], vec![9, 4], vec![2, 3]],
        });
        // Tile statistics of an integer and a float attribute.
        {
            use crate::fragment::{Extremes, SummaryKind, TileStats, TileSummary};
            let int = TileSummary { nulls: 1, values: 2, extremes: Extremes::Int { sum: 3, min: 1, max: 2 } };
            let float = TileSummary { nulls: 0, values: 1, extremes: Extremes::Float { sum: 0.5, min: 0.5, max: 0.5 } };
            sparse.stats = TileStats::collect(vec![
                (0, 0, SummaryKind::Signed, int),
                (2, 0, SummaryKind::Signed, int),
                (1, 1, SummaryKind::Float, float),
            ]);
        }
        let mut delete = sparse.clone();
        delete.stats = crate::fragment::TileStats::default();
        delete.deletes = Some(vec![vec![[1, 2], [3, 3]]]);
        // A packed fragment (version 7): the flags byte set.
        let packed = FragmentMetadata { packed: true, ..sparse.clone() };
        // Block checksums kept apart (version 9): the section naming file 0.
        let mut apart = dense.clone();
        apart.blocks =
            BlockIndex::inline(10, vec![vec![vec![1, 2, 3, 4, 5], vec![6, 7, 8, 9, 10]], vec![vec![], vec![]]]);
        let apart = apart.encode_with_block_file(0).0;
        // Payloads (the targets seal them): the encoding without its 20-byte footer.
        [dense, sparse, delete, chunked, packed]
            .iter()
            .map(|m| m.encode())
            .chain([apart])
            .map(|b| b[..b.len() - 20].to_vec())
            .collect()
    }

    /// A filter input: width selector, decoded length, then the stage.
    fn filter_input(w: usize, len: usize, stage: &[u8]) -> Vec<u8> {
        let mut v = vec![w.trailing_zeros() as u8, len as u8, (len >> 8) as u8, (len >> 16) as u8];
        v.extend_from_slice(stage);
        v
    }

    fn filter_seeds(filters: &[Filter]) -> Vec<Vec<u8>> {
        let p = FilterPipeline::new(filters.to_vec());
        let mut out = Vec::new();
        for (k, len) in [0usize, 1, 7, 64, 1000, 5000].into_iter().enumerate() {
            for w in [1usize, 2, 4, 8] {
                let data = if k % 2 == 0 { random(len, k as u64) } else { vec![3; len] };
                out.push(filter_input(w, len, &p.encode(data, w).unwrap()));
            }
        }
        out
    }

    fn commit_seeds() -> Vec<Vec<u8>> {
        use crate::commit::{Placed, Position, Record};
        let placed = |t: u64, seq: Option<u64>| {
            let name = FragmentName::new(t);
            let position = seq.map_or_else(|| Position::legacy(&name), Position::Seq);
            Placed { name, position }
        };
        let records = [
            Record::Write(FragmentName::new(5)),
            Record::Consolidation(FragmentName::covering(1, 9), vec![placed(1, Some(1)), placed(9, None)]),
            Record::Checkpoint(vec![placed(2, None), placed(3, Some(7))]),
        ];
        // Payloads (the target seals them): the encoding without its 20-byte footer.
        records.iter().map(Record::encode).map(|b| b[..b.len() - 20].to_vec()).collect()
    }

    #[test]
    fn fragment_meta_file_target() {
        let seeds = crate::snapshot::fragment_meta::fuzz_seeds();
        run(fragment_meta_file, &seeds, 20_000, 1000);
    }

    #[test]
    fn meta_file_target() {
        run(meta_file, &crate::meta::fuzz_seeds(), 20_000, 1000);
    }

    #[test]
    fn commit_record_target() {
        run(commit_record, &commit_seeds(), 20_000, 1000);
    }

    #[test]
    fn schema_target() {
        run(schema, &schema_seeds(), 10_000, 1000);
    }

    #[test]
    fn fragment_metadata_target() {
        run(fragment_metadata, &metadata_seeds(), 20_000, 1000);
    }

    #[test]
    fn filter_targets() {
        let filters = [
            Filter::Gzip { level: 1 },
            Filter::Zstd { level: 1 },
            Filter::Lz4,
            Filter::Rle,
            Filter::Delta,
            Filter::ByteShuffle,
        ];
        for (name, target) in TARGETS.iter().filter(|t| t.0.starts_with("filter_") && t.0 != "filter_pipeline") {
            let f = filters.iter().find(|f| name.ends_with(f.name())).copied().unwrap();
            run(*target, &filter_seeds(&[f]), 5000, 1000);
        }
        let mut seeds = Vec::new();
        for code in [0x0214u16, 0x0003, 0x01c5, 0x0e21] {
            for s in filter_seeds(&pipeline_of(code)) {
                let mut v = code.to_le_bytes().to_vec();
                v.extend_from_slice(&s);
                seeds.push(v);
            }
        }
        run(pipeline, &seeds, 10_000, 1000);
    }

    #[test]
    fn var_offsets_target() {
        let seed = |len: u16, offs: &[u64]| {
            let mut v = len.to_le_bytes().to_vec();
            offs.iter().for_each(|o| v.extend_from_slice(&o.to_le_bytes()));
            v
        };
        run(var_offsets, &[seed(8, &[0, 2, 4, 6]), seed(0, &[0, 0]), seed(100, &[0, 50, 50, 99])], 10_000, 1000);
    }

    #[test]
    fn update_index_target() {
        let seed: Vec<u8> = [5i64, 7, 9, 11].iter().flat_map(|v| v.to_le_bytes()).collect();
        run(update_index, &[seed.clone(), [vec![1], seed].concat()], 400, 50);
    }

    #[test]
    fn every_target_is_run_by_the_fuzz_crate() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/fuzz_targets");
        for (name, _) in TARGETS {
            assert!(dir.join(format!("{name}.rs")).is_file(), "fuzz/fuzz_targets/{name}.rs is missing");
        }
    }
}
