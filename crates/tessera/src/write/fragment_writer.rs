//! Writing one fragment: tiles are filtered in parallel, appended to their files with their index
//! entries recorded, and `finish` writes the metadata and runs the commit protocol.

use std::path::PathBuf;
use std::sync::Arc;

use crate::checksum::xxh3_64;
use rayon::prelude::*;

use crate::commit::{checkpoint_after_write, commit_consolidation, publish_write, stage_write, Placed};
use crate::config::check_limit;
use crate::config::TileChunking;
use crate::context::Context;
use crate::error::{ArrayError, Error, QueryError, Result};
use crate::filter::DeflateEncoder;
use crate::fragment::{
    block_sums, checksum_of_sums, choose_chunk_log2, encode_chunked_runs, encode_chunked_summarized, summarize,
    summarized_from_data, wants_blocks, wants_chunks, AutoChunkSize, BlockIndex, ChunkIndex, ChunkedRuns, FileKind,
    FileSpec, FragmentMetadata, FragmentName, SparseIndex, SummaryKind, TileChunks, TileEntry, TileRuns, TileStats,
    TileSummary, BLOCK_LOG2, BLOCK_SUMS_FILE, FRAGMENTS_DIR, METADATA_FILE, PACKED_FILE,
};
use crate::geometry::Rect;
use crate::schema::{ArraySchema, Attribute};
use crate::snapshot::fragment_meta;
use crate::stats::{self, Counter, Timer};
use crate::storage::{in_parallel, Staged, Storage, StorageJob, WriteHandle};

/// One tile ready to be filtered: its position in the fragment's tile order and one unfiltered
/// buffer per file of the fragment (in `FileSpec::for_schema` order).
#[derive(Debug)]
pub(crate) struct UnfilteredTile {
    /// Position among the fragment's tiles.
    pub index: u64,
    /// One buffer per fragment file.
    pub buffers: Vec<Vec<u8>>,
    /// Files of this tile already written with `write_tile_parts` (their buffers are empty).
    pub skip: Vec<bool>,
    /// Whether to summarize the tile's attributes that the writer summarizes from their data
    /// files (`FragmentWriter::summarize_files`).
    pub summarize: bool,
}

/// One filtered tile of one file.
struct FilteredTile {
    index: u64,
    file: usize,
    unfiltered: u64,
    bytes: Vec<u8>,
    checksum: u64,
    /// Block checksums (unfiltered tiles of more than two blocks), else empty.
    sums: Vec<u64>,
    /// Chunks (filtered tiles of more than two chunks), else none.
    chunks: TileChunks,
    /// The summary of the file's attribute in this tile, if asked for.
    summary: Option<TileSummary>,
}

/// The attribute summarized from file `file` (`summarized_files`: per file, the attribute its
/// data summarizes, if any), when `summarize` asks for it.
fn summarized_attr(summarized_files: &[Option<Attribute>], file: usize, summarize: bool) -> Option<&Attribute> {
    summarized_files.get(file).and_then(Option::as_ref).filter(|_| summarize)
}

/// Filters tile `index` of file `file` (`buf`, its unfiltered bytes) whole, with its checksums
/// (per block for large unfiltered tiles, else of the whole tile) and, with `attr`, its summary.
fn filter_whole(
    spec: &FileSpec,
    index: u64,
    file: usize,
    buf: Vec<u8>,
    attr: Option<&Attribute>,
) -> Result<FilteredTile> {
    let unfiltered = buf.len() as u64;
    let summary = attr.map(|a| summarize_cells(a, &buf));
    let bytes = spec.filters.encode(buf, spec.elem_size)?;
    let (sums, checksum) = if spec.filters.is_empty() && wants_blocks(bytes.len() as u64, BLOCK_LOG2) {
        let sums = block_sums(&[&bytes], BLOCK_LOG2);
        let checksum = checksum_of_sums(&sums);
        (sums, checksum)
    } else {
        (Vec::new(), xxh3_64(&bytes))
    };
    Ok(FilteredTile { index, file, unfiltered, bytes, checksum, sums, chunks: TileChunks::default(), summary })
}

/// With `sm.tile_chunk_size` auto, a file's chunk size is chosen again from a new sample after
/// this many unfiltered bytes of its tiles (a sample of at most 4 MiB, of which the two rounds
/// filter at most 10 MiB: about 1% of filtering them).
const RESAMPLE_BYTES: u64 = 1 << 30;

/// With `sm.write.deflate_encoder` auto, the most bytes of a tile that each encoder filters
/// twice to choose a file's (its first stored piece): 16 MiB filtered, ~1.5% of the filtering of
/// the `RESAMPLE_BYTES` the choice holds for.
const DEFLATE_SAMPLE_BYTES: u64 = 4 << 20;

/// Pieces smaller than this choose no deflate encoder: their filtering takes too little time to
/// compare.
const DEFLATE_SAMPLE_MIN: u64 = 256 << 10;

/// A deflate encoder is chosen from a write's tiles of a file only when they hold at least this
/// many sample pieces: the sample, filtered four times, then costs at most a quarter of
/// filtering them.
const DEFLATE_SAMPLE_SHARE: u64 = 16;

/// Writes the files of one fragment; nothing is visible to readers until `finish`.
pub(crate) struct FragmentWriter {
    storage: Arc<dyn Storage>,
    /// The context, whose chunk size choices (`sm.tile_chunk_size` auto) the writer resumes and
    /// leaves for the array's next fragment.
    ctx: Context,
    array: PathBuf,
    dir: PathBuf,
    name: FragmentName,
    specs: Vec<FileSpec>,
    handles: Vec<Box<dyn WriteHandle>>,
    entries: Vec<Vec<Option<TileEntry>>>,
    /// Block checksums per file and tile (unfiltered tiles of more than two blocks).
    blocks: Vec<Vec<Vec<u64>>>,
    /// Chunks per file and tile (filtered tiles of more than two chunks).
    chunks: Vec<Vec<TileChunks>>,
    /// `sm.tile_chunk_size`: whether and in what size filtered tiles are chunked.
    chunking: TileChunking,
    /// With `TileChunking::Auto`, per file: the chunk size chosen from a sample.
    chosen: Vec<AutoChunkSize>,
    /// With `sm.write.deflate_encoder` auto, per file: the deflate encoder chosen from a sample
    /// and the unfiltered bytes the choice still holds for.
    deflate: Vec<Option<(DeflateEncoder, u64)>>,
    /// `sm.write.tile_stats`: whether tile summaries are recorded.
    summarize: bool,
    /// Tile summaries `(tile, attribute, kind, summary)` recorded so far.
    summaries: Vec<(u64, u32, SummaryKind, TileSummary)>,
    /// Per file: the attribute the writer summarizes from it while filtering (data files of
    /// attributes `summarized_from_data` accepts, when summaries are recorded).
    summarized_files: Vec<Option<Attribute>>,
    domain: Rect,
    /// For a consolidation's output: the fragments it replaces, oldest first.
    replaces: Option<Vec<Placed>>,
    committed: bool,
    /// `sm.limits.tile_bytes`: no tile larger than readers accept is written.
    tile_limit: u64,
    /// When the fragment's folder was made (storage without locks: the commit must follow
    /// within half the vacuum grace period).
    started: Option<std::time::Instant>,
    /// Whether all files' tiles go to the one file `PACKED_FILE` (`pack_if_small`).
    packed: bool,
}

impl Drop for FragmentWriter {
    fn drop(&mut self) {
        // An unfinished fragment leaves no folder behind (best effort: a crash may leave one,
        // which readers ignore because it has no commit file).
        if !self.committed {
            self.handles.clear();
            if self.storage.is_dir(&self.dir) {
                let _ = self.storage.remove_dir_all(&self.dir);
            }
        }
    }
}

impl std::fmt::Debug for FragmentWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FragmentWriter({})", self.dir.display())
    }
}

impl FragmentWriter {
    /// A writer for fragment `name` of the array at `array`, holding `tile_count` tiles, with the
    /// storage, tile limit and chunk size of `ctx` (automatic chunk sizes resume the choices the
    /// array's last fragment written through `ctx` made).
    pub(crate) fn new(
        ctx: &Context,
        array: PathBuf,
        name: FragmentName,
        specs: Vec<FileSpec>,
        domain: Rect,
        tile_count: u64,
    ) -> Self {
        let config = ctx.config();
        let dir = array.join(FRAGMENTS_DIR).join(name.to_string());
        let entries = vec![vec![None; tile_count as usize]; specs.len()];
        let blocks = vec![Vec::new(); specs.len()];
        let chunks = vec![Vec::new(); specs.len()];
        let chosen = specs.iter().map(|s| AutoChunkSize::resumed(ctx.chunk_sizes().get(&array, &s.name))).collect();
        let deflate = specs.iter().map(|s| ctx.deflate_encoders().get(&array, &s.name)).collect();
        Self {
            storage: ctx.storage().clone(),
            ctx: ctx.clone(),
            array,
            dir,
            name,
            specs,
            handles: Vec::new(),
            entries,
            blocks,
            chunks,
            chunking: config.tile_chunking(),
            chosen,
            deflate,
            summarize: config.write_tile_stats(),
            summaries: Vec::new(),
            summarized_files: Vec::new(),
            domain,
            replaces: None,
            committed: false,
            tile_limit: config.limits().tile_bytes,
            started: None,
            packed: false,
        }
    }

    /// Stores the fragment packed, all its files' tiles in the one file `PACKED_FILE`, when
    /// `bytes` (the caller's estimate of its unfiltered tiles) is at most `sm.write.pack_bytes`:
    /// a small fragment then costs one file to create, write and sync instead of one per
    /// attribute and dimension. Only before the first tile is written.
    pub(crate) fn pack_if_small(&mut self, bytes: u64) {
        if self.handles.is_empty() && bytes <= self.ctx.config().write_pack_bytes() {
            self.packed = true;
        }
    }

    /// The handle that file `file`'s tiles are appended to.
    fn handle(&mut self, file: usize) -> &mut Box<dyn WriteHandle> {
        let h = if self.packed { 0 } else { file };
        &mut self.handles[h]
    }

    /// How this fragment's filtered tiles are chunked.
    pub(crate) fn chunking(&self) -> TileChunking {
        self.chunking
    }

    /// Sets the deflate encoder of the files of `tiles` (`(file, unfiltered size)`, stored in
    /// chunks of `log2s`, `None`: whole) that have a gzip stage it serves
    /// (`FilterPipeline::has_deflate_choice`): the one `sm.write.deflate_encoder` names or, with
    /// auto, the file's current choice, made again at the file's first tile here when the last
    /// one has held for `RESAMPLE_BYTES`, from `sample(i, n)`: the first `n` bytes of tile `i`,
    /// its first piece as it is stored (a chunk or the whole tile), at most
    /// `DEFLATE_SAMPLE_BYTES`, since deflate's ratio depends on the piece's size. No choice is
    /// made (the last one, or libdeflate) from pieces smaller than `DEFLATE_SAMPLE_MIN` (too
    /// little to time) nor when the file's tiles here, and as many tiles like the first as the
    /// fragment holds, are fewer than `DEFLATE_SAMPLE_SHARE` pieces (sampling would cost too
    /// large a share of the write).
    fn choose_deflate<'s>(
        &mut self,
        tiles: &[(usize, u64)],
        log2s: &[Option<u32>],
        sample: impl Fn(usize, usize) -> std::borrow::Cow<'s, [u8]>,
    ) -> Result<()> {
        let pinned = self.ctx.config().deflate_encoder();
        let mut seen = vec![false; self.specs.len()];
        let mut batch = vec![0u64; self.specs.len()];
        tiles.iter().for_each(|&(f, len)| batch[f] = batch[f].saturating_add(len));
        for (i, &(f, len)) in tiles.iter().enumerate() {
            let spec = &self.specs[f];
            if !spec.filters.has_deflate_choice() {
                continue;
            }
            let held = self.deflate[f].filter(|_| pinned.is_none());
            if std::mem::replace(&mut seen[f], true) {
                // Not the file's first tile here: filtered with the encoder set for the first.
                self.deflate[f] = held.map(|(e, left)| (e, left.saturating_sub(len)));
                continue;
            }
            let piece = log2s[i].map_or(len, |l| len.min(1 << l)).min(DEFLATE_SAMPLE_BYTES);
            // The bytes of the file this choice is for: its tiles here, or as many tiles as the
            // fragment holds, like this one.
            let ahead = batch[f].max((self.entries[f].len() as u64).saturating_mul(len));
            let encoder = match (pinned, held) {
                (Some(e), _) => e,
                (None, Some((e, left))) if left > 0 => {
                    self.deflate[f] = Some((e, left.saturating_sub(len)));
                    e
                }
                (None, held) if piece < DEFLATE_SAMPLE_MIN || ahead < piece.saturating_mul(DEFLATE_SAMPLE_SHARE) => {
                    held.map_or(DeflateEncoder::Libdeflate, |h| h.0)
                }
                (None, _) => {
                    let e = spec.filters.faster_deflate(&sample(i, piece as usize), spec.elem_size)?;
                    self.deflate[f] = Some((e, RESAMPLE_BYTES.saturating_sub(len)));
                    e
                }
            };
            self.specs[f].filters = spec.filters.with_deflate(encoder);
        }
        Ok(())
    }

    /// The chunk size (log2) of each tile `(file, unfiltered size)` of `tiles`, in order (`None`:
    /// filtered whole). With `TileChunking::Auto`, a file without a current choice gets one from
    /// `sample(i, n)`, the first `n` bytes of tile `i`.
    fn chunk_sizes<'s>(
        &mut self,
        tiles: &[(usize, u64)],
        sample: impl Fn(usize, usize) -> std::borrow::Cow<'s, [u8]>,
    ) -> Result<Vec<Option<u32>>> {
        let mut out = Vec::with_capacity(tiles.len());
        for (i, &(f, len)) in tiles.iter().enumerate() {
            let spec = &self.specs[f];
            let log2 = match self.chunking {
                _ if spec.filters.is_empty() => None,
                TileChunking::Whole => None,
                TileChunking::Fixed(log2) => wants_chunks(len, log2).then_some(log2),
                TileChunking::Auto => self.chosen[f].next(len, RESAMPLE_BYTES, || {
                    choose_chunk_log2(&spec.filters, spec.elem_size, len, |n| sample(i, n))
                })?,
            };
            out.push(log2);
        }
        Ok(out)
    }

    /// Whether tile summaries are recorded (`sm.write.tile_stats`): writers compute them only
    /// then.
    pub(crate) fn summarizes(&self) -> bool {
        self.summarize
    }

    /// Summarizes, from now on, the data files of `schema`'s attributes that
    /// `summarized_from_data` accepts, in the tiles written with `summarize` set.
    pub(crate) fn summarize_files(&mut self, schema: &ArraySchema) {
        if !self.summarize {
            return;
        }
        self.summarized_files = self
            .specs
            .iter()
            .map(|s| {
                let a = schema.attrs.get(s.attr).filter(|_| s.kind == FileKind::Data)?;
                summarized_from_data(a).then(|| a.clone())
            })
            .collect();
    }

    /// Records summaries `(tile, attribute, kind, summary)` of tiles of this fragment.
    pub(crate) fn add_summaries(&mut self, rows: impl IntoIterator<Item = (u64, u32, SummaryKind, TileSummary)>) {
        if self.summarize {
            self.summaries.extend(rows);
        }
    }

    /// The fragment's name.
    pub(crate) fn name(&self) -> &FragmentName {
        &self.name
    }

    fn start(&mut self) -> Result<()> {
        if self.handles.is_empty() {
            self.started.get_or_insert_with(std::time::Instant::now);
            // On object stores files need no folder, and the marker of an empty one would cost
            // a round trip before the first file: the fragment's files make its folder.
            if !self.storage.remote(&self.dir) {
                self.storage.create_dir_all(&self.dir)?;
            }
            if self.packed {
                self.handles.push(self.storage.create(&self.dir.join(PACKED_FILE))?);
            } else {
                for s in &self.specs {
                    self.handles.push(self.storage.create(&self.dir.join(&s.name))?);
                }
            }
        }
        Ok(())
    }

    /// Filters `tiles` in parallel and appends them to the fragment's files.
    ///
    /// # Errors
    /// A filter or storage failure, or a tile written twice.
    pub(crate) fn write_tiles(&mut self, tiles: Vec<UnfilteredTile>) -> Result<()> {
        // A tile larger than `sm.limits.tile_bytes` (variable-length data; fixed-size tiles are
        // refused when the writer starts) would be refused by every reader: refused here.
        for t in &tiles {
            for (f, b) in t.buffers.iter().enumerate() {
                check_limit(
                    "sm.limits.tile_bytes",
                    || format!("tile {} of {} of the fragment being written", t.index, self.specs[f].name),
                    b.len() as u64,
                    self.tile_limit,
                )?;
            }
        }
        self.start()?;
        let jobs: Vec<(u64, usize, Vec<u8>, bool)> = tiles
            .into_iter()
            .flat_map(|t| {
                let (index, skip, summarize) = (t.index, t.skip, t.summarize);
                t.buffers
                    .into_iter()
                    .enumerate()
                    .filter(move |(f, _)| !skip.get(*f).copied().unwrap_or(false))
                    .map(move |(f, b)| (index, f, b, summarize))
            })
            .collect();
        let filter_timer = stats::timer(Timer::WriterFilterTiles);
        let sizes: Vec<(usize, u64)> = jobs.iter().map(|(_, f, b, _)| (*f, b.len() as u64)).collect();
        let sample = |i: usize, n: usize| std::borrow::Cow::Borrowed(&jobs[i].2[..n]);
        let log2s = self.chunk_sizes(&sizes, sample)?;
        self.choose_deflate(&sizes, &log2s, sample)?;
        let specs = &self.specs;
        let summarized = &self.summarized_files;
        let filtered: Vec<FilteredTile> = jobs
            .into_par_iter()
            .zip(log2s)
            .map(|((index, file, buf, summarize), log2)| {
                let (spec, unfiltered) = (&specs[file], buf.len() as u64);
                let attr = summarized_attr(summarized, file, summarize);
                match log2 {
                    // Large filtered tiles: independent chunks, filtered in parallel.
                    Some(log2) => {
                        let ((bytes, chunks, checksum), summary) =
                            encode_chunked_summarized(&spec.filters, &buf, spec.elem_size, log2, attr)?;
                        Ok(FilteredTile { index, file, unfiltered, bytes, checksum, sums: Vec::new(), chunks, summary })
                    }
                    None => filter_whole(spec, index, file, buf, attr),
                }
            })
            .collect::<Result<_>>()?;
        drop(filter_timer);
        self.append(filtered)
    }

    /// Filters the tiles `tiles` (`(index, file, bytes as runs, summarize)`) and appends them to
    /// their files, as `write_tiles` of the assembled tiles: those stored in chunks without
    /// assembling them (every chunk of every tile in parallel, each gathered from the caller's
    /// buffer), those stored whole (too small, or whole by the automatic chunk size) gathered
    /// into one buffer each first.
    ///
    /// # Errors
    /// As `write_tiles`.
    pub(crate) fn write_tile_runs(&mut self, tiles: Vec<(u64, usize, TileRuns<'_>, bool)>) -> Result<()> {
        for (index, f, r, _) in &tiles {
            let what = || format!("tile {index} of {} of the fragment being written", self.specs[*f].name);
            check_limit("sm.limits.tile_bytes", what, r.len() as u64, self.tile_limit)?;
        }
        let filter_timer = stats::timer(Timer::WriterFilterTiles);
        let sizes: Vec<(usize, u64)> = tiles.iter().map(|(_, f, r, _)| (*f, r.len() as u64)).collect();
        let sample = |i: usize, n: usize| {
            let mut buf = vec![0; n];
            tiles[i].2.gather(0, &mut buf);
            std::borrow::Cow::Owned(buf)
        };
        let log2s = self.chunk_sizes(&sizes, sample)?;
        self.choose_deflate(&sizes, &log2s, sample)?;
        self.start()?;
        // Tiles stored in chunks are filtered chunk by chunk from the runs; those the automatic
        // chunk size stores whole are gathered first.
        let (chunked, whole): (Vec<_>, Vec<_>) = tiles.iter().zip(log2s).partition(|(_, log2)| log2.is_some());
        let (specs, summarized) = (&self.specs, &self.summarized_files);
        let runs: Vec<ChunkedRuns<'_, '_>> = chunked
            .iter()
            .map(|((_, f, r, summarize), log2)| {
                (r, &specs[*f].filters, log2.unwrap_or_default(), summarized_attr(summarized, *f, *summarize))
            })
            .collect();
        let encoded = encode_chunked_runs(&runs)?;
        drop(runs);
        let mut filtered: Vec<FilteredTile> = chunked
            .iter()
            .zip(encoded)
            .map(|(((index, file, r, _), _), ((bytes, chunks, checksum), summary))| FilteredTile {
                index: *index,
                file: *file,
                unfiltered: r.len() as u64,
                bytes,
                checksum,
                sums: Vec::new(),
                chunks,
                summary,
            })
            .collect();
        let whole: Vec<FilteredTile> = whole
            .par_iter()
            .map(|((index, f, r, summarize), _)| {
                let mut buf = vec![0; r.len()];
                r.gather(0, &mut buf);
                let attr = summarized_attr(summarized, *f, *summarize);
                filter_whole(&specs[*f], *index, *f, buf, attr)
            })
            .collect::<Result<_>>()?;
        filtered.extend(whole);
        drop(filter_timer);
        self.append(filtered)
    }

    /// Appends filtered tiles to their files and records their index entries.
    fn append(&mut self, filtered: Vec<FilteredTile>) -> Result<()> {
        let _t = stats::timer(Timer::WriterWriteTiles);
        for t in filtered {
            let (index, f) = (t.index, t.file);
            count_tile(t.unfiltered, t.bytes.len() as u64);
            if self.entries[f].len() <= index as usize {
                self.entries[f].resize(index as usize + 1, None);
            }
            if self.entries[f][index as usize].is_some() {
                return Err(QueryError::WriteState(format!("tile {index} written twice")).into());
            }
            let h = self.handle(f);
            let offset = h.position();
            h.write_all(&t.bytes)?;
            self.entries[f][index as usize] = Some(TileEntry {
                offset,
                stored_size: t.bytes.len() as u64,
                unfiltered_size: t.unfiltered,
                checksum: t.checksum,
            });
            set_at(&mut self.blocks[f], index, t.sums);
            self.add_summary(index, f, t.summary);
            if !t.chunks.list.is_empty() {
                if self.chunks[f].len() <= index as usize {
                    self.chunks[f].resize(index as usize + 1, TileChunks::default());
                }
                self.chunks[f][index as usize] = t.chunks;
            }
        }
        Ok(())
    }

    /// Appends one unfiltered tile of file `file` given as consecutive parts (a tile's rows taken
    /// straight from the caller's buffer), with one vectored write and no intermediate copy.
    ///
    /// # Errors
    /// A storage failure, a non-empty filter pipeline, or a tile written twice.
    pub(crate) fn write_tile_parts(&mut self, index: u64, file: usize, parts: &[&[u8]], summarize: bool) -> Result<()> {
        self.start()?;
        if !self.specs[file].filters.is_empty() {
            return Err(QueryError::WriteState("tile parts need an empty filter pipeline".into()).into());
        }
        if self.entries[file].len() <= index as usize {
            self.entries[file].resize(index as usize + 1, None);
        }
        if self.entries[file][index as usize].is_some() {
            return Err(QueryError::WriteState(format!("tile {index} written twice")).into());
        }
        let len: u64 = parts.iter().map(|p| p.len() as u64).sum();
        let (checksum, sums) = if wants_blocks(len, BLOCK_LOG2) {
            let sums = block_sums(parts, BLOCK_LOG2);
            (checksum_of_sums(&sums), sums)
        } else {
            let mut hasher = crate::checksum::Xxh3::new();
            parts.iter().for_each(|p| hasher.update(p));
            (hasher.digest(), Vec::new())
        };
        let summary = summarized_attr(&self.summarized_files, file, summarize).and_then(|a| {
            let mut parts = parts.iter().map(|p| summarize_cells(a, p));
            let first = parts.next()?;
            Some(parts.fold(first, TileSummary::merge))
        });
        self.add_summary(index, file, summary);
        let _t = stats::timer(Timer::WriterWriteTiles);
        count_tile(len, len);
        let h = self.handle(file);
        let offset = h.position();
        h.write_all_vectored(parts)?;
        self.entries[file][index as usize] =
            Some(TileEntry { offset, stored_size: len, unfiltered_size: len, checksum });
        set_at(&mut self.blocks[file], index, sums);
        Ok(())
    }

    /// Records the summary of file `file`'s attribute in tile `index`, if there is one.
    fn add_summary(&mut self, index: u64, file: usize, summary: Option<TileSummary>) {
        let attr = self.specs[file].attr;
        if let (Some(s), Some(a)) = (summary, self.summarized_files.get(file).and_then(Option::as_ref)) {
            self.summaries.push((index, attr as u32, SummaryKind::of(a), s));
        }
    }

    /// Makes this fragment a consolidation's output replacing `inputs` (consecutive visible
    /// fragments, oldest first): it is committed only if they are still visible then.
    pub(crate) fn set_replaces(&mut self, inputs: Vec<Placed>) {
        self.replaces = Some(inputs);
    }

    /// Sets the non-empty domain (sparse fragments know it only at the end).
    pub(crate) fn set_domain(&mut self, domain: Rect) {
        self.domain = domain;
    }

    /// Fsyncs the files, writes the metadata and commits the fragment.
    ///
    /// # Errors
    /// A storage failure (the fragment is then not committed), or a missing tile.
    pub(crate) fn finish(
        mut self,
        cell_count: u64,
        sparse: Option<SparseIndex>,
        deletes: Option<Vec<Rect>>,
    ) -> Result<FragmentMetadata> {
        let _t = stats::timer(Timer::WriterCommit);
        self.start()?;
        let meta = self.metadata(cell_count, sparse, deletes)?;
        let (encoded, block_file) = meta.encode_with_block_file(self.ctx.config().write_inline_block_checksums());
        let written = encoded.len() + block_file.as_ref().map_or(0, Vec::len);
        stats::add(Counter::WriterNumMetadataBytesWritten, written as u64);
        let storage = Arc::clone(&self.storage);
        let staged = self.write_durably(storage.as_ref(), &encoded, block_file.as_deref())?;
        for ((spec, chosen), deflate) in self.specs.iter().zip(&self.chosen).zip(&self.deflate) {
            if let Some(state) = chosen.state() {
                self.ctx.chunk_sizes().set(&self.array, &spec.name, state);
            }
            if let Some(state) = *deflate {
                self.ctx.deflate_encoders().set(&self.array, &spec.name, state);
            }
        }
        self.check_commit_deadline()?;
        self.committed = true;
        self.commit(&encoded, staged)?;
        Ok(meta)
    }

    /// The fragment's metadata: every tile written (else an error naming the first missing),
    /// its block checksums, chunks and statistics.
    fn metadata(
        &mut self,
        cell_count: u64,
        sparse: Option<SparseIndex>,
        deletes: Option<Vec<Rect>>,
    ) -> Result<FragmentMetadata> {
        let mut files = Vec::with_capacity(self.specs.len());
        for (spec, entries) in self.specs.iter().zip(&self.entries) {
            let tiles = entries
                .iter()
                .enumerate()
                .map(|(i, e)| {
                    e.ok_or_else(|| {
                        Error::from(QueryError::WriteState(format!(
                            "fragment {}: tile {i} of {} was never written",
                            self.name, spec.name
                        )))
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            files.push((spec.name.clone(), tiles));
        }
        let mut sums = std::mem::take(&mut self.blocks);
        let mut chunks = std::mem::take(&mut self.chunks);
        for ((s, c), (_, tiles)) in sums.iter_mut().zip(chunks.iter_mut()).zip(&files) {
            s.resize(tiles.len(), Vec::new());
            c.resize(tiles.len(), TileChunks::default());
        }
        Ok(FragmentMetadata {
            name: self.name.clone(),
            domain: self.domain.clone(),
            cell_count,
            files,
            sparse,
            deletes,
            blocks: BlockIndex::inline(BLOCK_LOG2, sums),
            chunks: ChunkIndex { chunks },
            stats: TileStats::collect(std::mem::take(&mut self.summaries)),
            packed: self.packed,
        })
    }

    /// Writes the metadata file `encoded` (and the block-checksum file `block_file` when the
    /// metadata keeps them apart) and makes the fragment durable; a write's commit record is
    /// staged at the same time (returned; a consolidation's depends on the log as it is when it
    /// commits).
    fn write_durably<'s>(
        &mut self,
        storage: &'s dyn Storage,
        encoded: &[u8],
        block_file: Option<&[u8]>,
    ) -> Result<Option<Staged<'s>>> {
        let mut meta_file = storage.create(&self.dir.join(METADATA_FILE))?;
        meta_file.write_all(encoded)?;
        if let Some(bytes) = block_file {
            let mut h = storage.create(&self.dir.join(BLOCK_SUMS_FILE))?;
            h.write_all(bytes)?;
            self.handles.push(h);
        }
        // The files (data and metadata), the fragment's folder (their entries) and the folder
        // of fragments (the fragment's entry) must be durable before the commit record names
        // them (docs/format.md, "Committing"): all are synced at the same time, every entry
        // existing by now, and so is the record of a write under a temporary name (it names
        // the fragment only once published, after this). From here on the folder must survive
        // a failure: the commit file may exist even if a sync reports an error.
        let (dir, parent) = (&self.dir, self.array.join(FRAGMENTS_DIR));
        let mut staged = None;
        let mut jobs: Vec<StorageJob<'_>> = std::mem::take(&mut self.handles)
            .into_iter()
            .chain([meta_file])
            .map(|h| Box::new(move || h.finish()) as StorageJob<'_>)
            .collect();
        jobs.push(Box::new(|| storage.sync_dir(dir)));
        jobs.push(Box::new(|| storage.sync_dir(&parent)));
        if self.replaces.is_none() {
            let (slot, array, name) = (&mut staged, &self.array, &self.name);
            jobs.push(Box::new(move || {
                *slot = Some(stage_write(storage, array, name, Some(encoded))?);
                Ok(())
            }));
        }
        in_parallel(jobs)?;
        Ok(staged)
    }

    /// Commits the fragment: a write by publishing its `staged` record, a consolidation by
    /// appending one carrying `encoded` (the metadata). Then leaves a checkpoint of the log and
    /// a file of metadata copies when this write's number calls for them.
    fn commit(&mut self, encoded: &[u8], staged: Option<Staged<'_>>) -> Result<()> {
        let storage = self.storage.as_ref();
        let interval = self.ctx.config().checkpoint_interval();
        let committed = match (&self.replaces, &staged) {
            (Some(inputs), _) => {
                commit_consolidation(storage, &self.array, &self.name, inputs, interval, Some(encoded))
            }
            (None, Some(staged)) => publish_write(&self.array, staged),
            (None, None) => {
                Err(QueryError::WriteState(format!("fragment {}: no commit record was staged", self.name)).into())
            }
        };
        let seq = match committed {
            Ok(seq) => seq,
            Err(e) => {
                if matches!(e, Error::Array(ArrayError::ConsolidationConflict { .. })) {
                    // Certainly not committed: the folder goes.
                    self.committed = false;
                }
                return Err(e);
            }
        };
        if self.replaces.is_none() {
            // Shortcuts for readers: a checkpoint of the log and one file of the metadata of
            // the fragments it summarized. The write is committed whether or not they could be
            // written, so their failure is not the write's.
            if let Ok(Some(names)) = checkpoint_after_write(storage, &self.array, seq, interval) {
                let names = names.iter().map(ToString::to_string).collect();
                let _ = fragment_meta::write_copies_of(&self.ctx, &self.array, names);
            }
        }
        Ok(())
    }
}

impl FragmentWriter {
    /// On storage without locks, a vacuum deletes a folder never committed once the grace
    /// period has passed since anything was written into it: a fragment is committed only
    /// within half the grace of starting it (the other half covers clock differences and the
    /// commit itself). Refused otherwise; the folder is then removed as for any failed write.
    fn check_commit_deadline(&self) -> Result<()> {
        let (Some(grace), Some(started)) = (self.storage.lock_free_grace(&self.dir), self.started) else {
            return Ok(());
        };
        if grace.is_zero() {
            // No grace: vacuum deletes at once; the user runs none beside writers.
            return Ok(());
        }
        let elapsed = started.elapsed();
        if elapsed < grace / 2 {
            return Ok(());
        }
        Err(ArrayError::CommitTooLate {
            path: self.array.clone(),
            fragment: self.name.to_string(),
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
        }
        .into())
    }
}

/// Puts `v` at `index` of `tiles` (per-tile lists of one file), growing it as needed; empty
/// lists are the default and are not stored.
fn set_at<T: Clone>(tiles: &mut Vec<Vec<T>>, index: u64, v: Vec<T>) {
    if v.is_empty() {
        return;
    }
    if tiles.len() <= index as usize {
        tiles.resize(index as usize + 1, Vec::new());
    }
    tiles[index as usize] = v;
}

/// Counts one tile of one file written.
/// The summary of whole cells of a non-nullable attribute.
fn summarize_cells(attr: &Attribute, bytes: &[u8]) -> TileSummary {
    summarize(attr, bytes, None, (bytes.len() / attr.cell_size().max(1)) as u64)
}

fn count_tile(unfiltered: u64, stored: u64) {
    stats::add(Counter::WriterNumAttrTilesWritten, 1);
    stats::add(Counter::WriterNumBytesBeforeFiltering, unfiltered);
    stats::add(Counter::WriterNumBytesWritten, stored);
}
