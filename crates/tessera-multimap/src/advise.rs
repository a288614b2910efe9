//! The layout advisor (`tessera advise`): from a log of the queries a dense array serves, the
//! tile extents, tile order and cell order that the cost model predicts fastest, the expected
//! gain over the current layout, and the rewrite of the array into that layout.
//!
//! The cost model is MULTIMAP.md §6's for storage without rotation: a read of a layout costs its
//! requests times a per-request latency, plus its bytes over the device's bandwidth, plus the
//! unfiltering of the tiles it fetches, plus the copy into the result. The requests and bytes
//! are the reader's own, from its plan ([`tessera::dense_tile_parts`]: which tiles a query
//! copies from, where a layout stores them, the span of cells it copies from each) and its
//! rules: an unfiltered tile that the tile cache does not take, copied whole as one run of the
//! result, is read straight into it (a request); an unfiltered tile with checksum blocks of which
//! the copies need at most half the blocks is read in part (a request per run of blocks, or,
//! when the cache does not take it and it is streamed, a probe and a request per 256 KiB piece
//! of each run); every other tile is read whole, byte ranges of a file closer than
//! `vfs.coalesce_gap` read as one up to `vfs.coalesce_max`. The cell order changes which blocks
//! a box needs (curve orders: whole tiles) and the copy: runs along the result's fastest
//! dimension when the cell order keeps that dimension contiguous, one cell at a time otherwise,
//! and a permutation of every fetched tile for curve cell orders. Not modelled: chunked reads
//! of filtered tiles of more than 128 KiB (priced as whole tiles), tiles the cache already
//! holds, and a large direct tile read in 256 KiB pieces when the query has fewer such tiles
//! than I/O threads (priced as one request).
//!
//! Query log: JSON lines `{"ranges": [[lo, hi], ...], "weight": w, "layout": "C"}`, ranges
//! inclusive in domain coordinates, one per dimension (`null` for the whole dimension), or an
//! object by dimension name (dimensions left out: the whole domain); `weight` (default 1)
//! counts repetitions; `layout` "C" (row-major result, default) or "F".

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context as _, Result};
use serde::Serialize;
use tessera::{
    dense_tile_parts, units_read_in_part, Array, ArraySchema, ArrayType, AttrInput, CellOrder, CellValNum, Context,
    Layout, Mode, Subarray, TilePart, BLOCK_LOG2, COLD_PROBE, DIRECT_PIECE, INLINE_BLOCK_SUMS,
};

/// Most tiles one query may touch in the model (the positions are listed in memory).
const MAX_QUERY_TILES: u64 = 1 << 22;
/// Most tiles a candidate layout may have over the domain (curve orders rank them all).
const MAX_DOMAIN_TILES: u64 = 1 << 22;

/// One query of the log.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedQuery {
    /// One inclusive range per dimension, in domain coordinates.
    pub ranges: Vec<(i128, i128)>,
    /// How many times it runs.
    pub weight: f64,
    /// Whether the result is column-major ("F") rather than row-major.
    pub col_major: bool,
}

/// Reads a query log (JSON lines) for `schema`.
///
/// # Errors
/// An unreadable file, a line that is not a query for this schema (the line is named).
pub fn read_log(path: &Path, schema: &ArraySchema) -> Result<Vec<LoggedQuery>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let q = parse_query(line, schema).with_context(|| format!("{} line {}", path.display(), i + 1))?;
        out.push(q);
    }
    if out.is_empty() {
        bail!("{}: no queries", path.display());
    }
    Ok(out)
}

fn parse_query(line: &str, schema: &ArraySchema) -> Result<LoggedQuery> {
    let v: serde_json::Value = serde_json::from_str(line)?;
    let obj = v.as_object().ok_or_else(|| anyhow!("a query is a JSON object"))?;
    let whole: Vec<(i128, i128)> = schema.dims.iter().map(tessera::Dimension::int_domain).collect();
    let mut ranges = whole.clone();
    let range = |r: &serde_json::Value, d: usize| -> Result<(i128, i128)> {
        if r.is_null() {
            return Ok(whole[d]);
        }
        let pair = r.as_array().filter(|a| a.len() == 2).ok_or_else(|| anyhow!("a range is [lo, hi] or null"))?;
        let b = |x: &serde_json::Value| x.as_i64().map(i128::from).ok_or_else(|| anyhow!("bounds are integers"));
        Ok((b(&pair[0])?, b(&pair[1])?))
    };
    match obj.get("ranges") {
        Some(serde_json::Value::Array(rs)) => {
            if rs.len() != schema.dims.len() {
                bail!("{} ranges given, the array has {} dimensions", rs.len(), schema.dims.len());
            }
            for (d, r) in rs.iter().enumerate() {
                ranges[d] = range(r, d)?;
            }
        }
        Some(serde_json::Value::Object(by_name)) => {
            for (name, r) in by_name {
                let d = schema
                    .dims
                    .iter()
                    .position(|x| &x.name == name)
                    .ok_or_else(|| anyhow!("unknown dimension {name:?}"))?;
                ranges[d] = range(r, d)?;
            }
        }
        None => {}
        Some(_) => bail!("\"ranges\" is a list or an object"),
    }
    let weight = match obj.get("weight") {
        None => 1.0,
        Some(w) => w.as_f64().filter(|w| w.is_finite() && *w >= 0.0).ok_or_else(|| anyhow!("weight >= 0"))?,
    };
    let col_major = match obj.get("layout").and_then(serde_json::Value::as_str) {
        None | Some("C") => false,
        Some("F") => true,
        Some(o) => bail!("layout {o:?}: \"C\" or \"F\""),
    };
    // The engine checks the ranges against the domain.
    Subarray::from_ranges(&ranges).normalize(schema)?;
    Ok(LoggedQuery { ranges, weight, col_major })
}

/// The device and reader the model prices.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Device {
    /// Seconds every query costs whatever the layout (opening, planning; with `cold_open` the
    /// read of the fragment metadata is priced apart): it does not change the ranking, only the
    /// predicted gain.
    pub query_s: f64,
    /// Seconds per read request.
    pub latency_s: f64,
    /// Whether every query opens the array (cold): its fragment metadata, whose size grows with
    /// the layout's tile count, is then read and decoded per query at `metadata_bps`.
    pub cold_open: bool,
    /// Bytes of fragment metadata per second a cold open reads and decodes.
    pub metadata_bps: f64,
    /// Bytes per second read.
    pub read_bps: f64,
    /// Unfiltered bytes per second the filters produce (decompression).
    pub unfilter_bps: f64,
    /// Bytes per second of contiguous copies into the result.
    pub copy_bps: f64,
    /// Seconds per contiguous run copied (the per-run overhead of the copy kernel).
    pub run_s: f64,
    /// Seconds per cell of a curve cell order's permutation of a fetched tile.
    pub permute_cell_s: f64,
    /// The reader's coalescing gap (`vfs.coalesce_gap`).
    pub coalesce_gap: u64,
    /// The reader's largest coalesced range (`vfs.coalesce_max`).
    pub coalesce_max: u64,
    /// The largest tile the reader's tile cache takes (a sixteenth of `sm.tile_cache_size`; 0:
    /// no cache). Larger unfiltered tiles that a read copies whole as one run of its result are
    /// read straight into it, one request each.
    pub cache_tile_max: u64,
}

impl Device {
    /// A local SSD or page-cached file system (300 µs per query, 100 µs per request, 1 GB/s) with the engine's
    /// default coalescing.
    pub fn local(config: &tessera::Config) -> Self {
        Self {
            query_s: 300e-6,
            latency_s: 100e-6,
            cold_open: false,
            metadata_bps: 300e6,
            read_bps: 1e9,
            unfilter_bps: 2e9,
            copy_bps: 5e9,
            run_s: 20e-9,
            permute_cell_s: 2e-9,
            coalesce_gap: config.coalesce_gap(),
            coalesce_max: config.coalesce_max(),
            cache_tile_max: config.tile_cache_size() / 16,
        }
    }

    /// An object store (20 ms per request, 100 MB/s).
    pub fn object_store(config: &tessera::Config) -> Self {
        Self { latency_s: 20e-3, read_bps: 1e8, ..Self::local(config) }
    }
}

/// A layout: tile extents and the two orders.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Candidate {
    /// Tile extent per dimension.
    pub extents: Vec<u64>,
    /// Order of tiles.
    pub tile_order: String,
    /// Order of cells inside a tile.
    pub cell_order: String,
}

/// A layout's predicted cost over the log.
#[derive(Debug, Clone, Serialize)]
pub struct Scored {
    /// The layout.
    pub layout: Candidate,
    /// Predicted seconds of the whole log (weights applied).
    pub seconds: f64,
    /// Read requests of the whole log.
    pub requests: f64,
    /// Bytes read of the whole log.
    pub bytes: f64,
    /// Predicted seconds per query of the log, in log order.
    pub per_query: Vec<f64>,
}

/// The advice: the current layout's cost and every candidate's, best first.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    /// The array's layout as it is.
    pub current: Scored,
    /// Every candidate tried, cheapest first.
    pub ranked: Vec<Scored>,
    /// The device priced.
    pub device: Device,
    /// Stored bytes per unfiltered byte of the array's tiles (1 when it has no fragment).
    pub stored_ratio: f64,
}

impl Advice {
    /// The recommended layout.
    pub fn best(&self) -> &Scored {
        &self.ranked[0]
    }

    /// Current cost over the best's (> 1: the advice is faster).
    pub fn gain(&self) -> f64 {
        self.current.seconds / self.best().seconds
    }
}

fn order_name(o: CellOrder) -> &'static str {
    match o {
        CellOrder::ColMajor => "col-major",
        CellOrder::Z => "z",
        CellOrder::Hilbert => "hilbert",
        _ => "row-major",
    }
}

fn parse_order(name: &str) -> Result<CellOrder> {
    Ok(match name {
        "row-major" => CellOrder::RowMajor,
        "col-major" => CellOrder::ColMajor,
        "z" => CellOrder::Z,
        "hilbert" => CellOrder::Hilbert,
        o => bail!("unknown order {o:?}"),
    })
}

/// The schema of `schema` under `layout` (same domain, attributes and filters).
///
/// # Errors
/// A layout the engine refuses (e.g. curve keys over 128 bits).
pub fn schema_with(schema: &ArraySchema, layout: &Candidate) -> Result<ArraySchema> {
    let mut s = schema.clone();
    for (d, &e) in s.dims.iter_mut().zip(&layout.extents) {
        d.tile = Some(tessera::Extent::Int(e));
    }
    s.tile_order = parse_order(&layout.tile_order)?;
    s.cell_order = parse_order(&layout.cell_order)?;
    s.version = s.lowest_version();
    s.validate()?;
    Ok(s)
}

/// Bytes per cell of the fixed-size attributes `files` (data and validity together).
fn total_cell_bytes(files: &[AttrFiles]) -> u64 {
    files.iter().map(|a| a.data + u64::from(a.validity)).sum()
}

/// The files of one fixed-size attribute that a read of it fetches.
struct AttrFiles {
    /// Bytes per cell of its data file.
    data: u64,
    /// Whether it has a validity file (a byte per cell, read whole).
    validity: bool,
    /// Whether the data file is stored unfiltered (tiles with block checksums).
    unfiltered: bool,
}

fn attr_files(schema: &ArraySchema) -> Result<Vec<AttrFiles>> {
    schema
        .attrs
        .iter()
        .map(|a| match a.cell_val_num {
            CellValNum::Fixed(n) => Ok(AttrFiles {
                data: u64::from(n) * a.datatype.size() as u64,
                validity: a.nullable,
                unfiltered: a.filters.is_empty(),
            }),
            CellValNum::Var => bail!("attribute {}: variable-length attributes are not modelled", a.name),
        })
        .collect()
}

/// The checksum blocks `[a, b)` of an unfiltered tile of `tile_bytes` (cells of `cell_bytes`)
/// that the reader reads instead of the whole tile for the copies `spans`: the tile has blocks
/// (it is longer than two), a block holds whole cells, and the reader's own rule
/// ([`tessera::units_read_in_part`]) takes the blocks. Each run is one request.
fn block_runs(spans: &[[u64; 2]], cell_bytes: u64, tile_bytes: u64) -> Option<Vec<(u64, u64)>> {
    let block = 1u64 << BLOCK_LOG2;
    if tile_bytes <= 2 * block || cell_bytes == 0 || !block.is_multiple_of(cell_bytes) {
        return None;
    }
    let byte_spans = spans.iter().map(|&[first, last]| (first * cell_bytes, (last + 1) * cell_bytes));
    units_read_in_part(byte_spans, BLOCK_LOG2, tile_bytes.div_ceil(block))
}

/// The requests and bytes of reading one file's tiles `parts` of a query (`stored` bytes each;
/// `unfiltered`: stored as they are), as the reader does: unfiltered tiles that go
/// straight into the result (one request each), unfiltered tiles read in part (a request per
/// run of blocks when the cell order is `partial`, and one for the tile's checksums when they
/// are `sums_apart` and every query opens the array), unfiltered tiles streamed into the result
/// (one request each, [`streamed`]), the rest whole and coalesced.
fn file_reads(
    parts: &[TilePart],
    cell_bytes: u64,
    stored: u64,
    unfiltered: bool,
    (partial, sums_apart): (bool, bool),
    dev: &Device,
) -> (u64, u64) {
    let (mut requests, mut bytes) = (0u64, 0u64);
    let mut whole = Vec::with_capacity(parts.len());
    for p in parts {
        if unfiltered && p.one_run && stored > dev.cache_tile_max {
            requests += 1;
            bytes += stored;
        } else if let Some(runs) = block_runs(&p.spans, cell_bytes, stored).filter(|_| unfiltered && partial) {
            let lens = runs.iter().map(|&(a, b)| (b << BLOCK_LOG2).min(stored) - (a << BLOCK_LOG2));
            requests +=
                if streamed(p, cell_bytes, stored, dev) { stream_requests(lens.clone()) } else { runs.len() as u64 };
            bytes += lens.sum::<u64>();
            if sums_apart && dev.cold_open {
                // The tile's block checksums, read once per open.
                requests += 1;
                bytes += 8 * stored.div_ceil(1 << BLOCK_LOG2);
            }
        } else if unfiltered && partial && streamed(p, cell_bytes, stored, dev) {
            requests += stream_requests([stored]);
            bytes += stored;
        } else {
            whole.push(p.position);
        }
    }
    let (r, b) = coalesced(&whole, stored, dev);
    (requests + r, bytes + b)
}

/// The requests of streaming the byte ranges `lens` of a tile (runs of blocks, or the whole
/// tile) from memory, as the reader does: the probe (the first [`COLD_PROBE`] bytes of the
/// first range), then each range in pieces of [`DIRECT_PIECE`] bytes, the first piece without
/// the probe's bytes (none left: not read).
fn stream_requests(lens: impl IntoIterator<Item = u64>) -> u64 {
    let (piece, probe) = (DIRECT_PIECE as u64, COLD_PROBE as u64);
    let mut requests = 1;
    for (i, len) in lens.into_iter().enumerate() {
        requests += len.div_ceil(piece) - u64::from(i == 0 && len <= probe);
    }
    requests
}

/// Whether the reader streams unfiltered tile part `p` (tiles of `stored` bytes, cells of
/// `cell_bytes`), whole or in part, into the result: the tile has checksum blocks,
/// the tile cache does not take it, and its copies move at most a 64th of its cells one by one
/// (the reader's `MAX_CELL_RUNS_PER_TILE_CELLS`).
fn streamed(p: &TilePart, cell_bytes: u64, stored: u64, dev: &Device) -> bool {
    let cells = stored / cell_bytes.max(1);
    stored > 2 << BLOCK_LOG2 && stored > dev.cache_tile_max && p.cell_runs <= cells / 64
}

/// The requests and bytes of reading the tiles at `positions` (sorted) of a file of tiles of
/// `tile_bytes` each, coalesced as the reader does.
fn coalesced(positions: &[u64], tile_bytes: u64, dev: &Device) -> (u64, u64) {
    let (mut requests, mut bytes) = (0u64, 0u64);
    let mut open: Option<(u64, u64)> = None;
    for &p in positions {
        let (lo, hi) = (p * tile_bytes, (p + 1) * tile_bytes);
        open = match open {
            Some((a, b)) if lo.saturating_sub(b) <= dev.coalesce_gap && hi - a <= dev.coalesce_max => Some((a, hi)),
            Some((a, b)) => {
                requests += 1;
                bytes += b - a;
                Some((lo, hi))
            }
            None => Some((lo, hi)),
        };
    }
    if let Some((a, b)) = open {
        requests += 1;
        bytes += b - a;
    }
    (requests, bytes)
}

/// Bytes of the metadata of a dense fragment over the whole domain of `s` (format §8: what an
/// open reads): per tile and file its index entry (32 bytes); per unfiltered tile of more than two
/// checksum blocks its block checksums (24 + 8 per block), unless the fragment has more than
/// [`INLINE_BLOCK_SUMS`] of them ([`block_sums_apart`]: then 4 bytes per file that has them);
/// per filtered tile of more than two 64 KiB chunks its chunk list (24 + 16 per chunk, at the
/// smallest chunk size a writer picks); per tile inside the domain and attribute its summary
/// (56 bytes).
pub fn metadata_bytes(s: &ArraySchema) -> Result<f64> {
    let files = attr_files(s)?;
    let tile_cells: u64 = s.dims.iter().map(tessera::Dimension::tile_extent).product();
    let tiles: f64 = s.dims.iter().map(|d| d.domain_size().div_ceil(d.tile_extent()) as f64).product();
    let whole: f64 = s.dims.iter().map(|d| (d.domain_size() / d.tile_extent()) as f64).product();
    let apart = block_sums_apart(s)?;
    let listed = |bytes: u64, unit_log2: u32, per_unit: u64| -> u64 {
        if bytes > 2 << unit_log2 {
            24 + per_unit * bytes.div_ceil(1 << unit_log2)
        } else {
            0
        }
    };
    let blocks = |bytes: u64| if apart { 0 } else { listed(bytes, BLOCK_LOG2, 8) };
    let (mut per_tile, mut apart_files) = (0u64, 0u64);
    for f in &files {
        let data = tile_cells * f.data;
        per_tile += 32 + if f.unfiltered { blocks(data) } else { listed(data, 16, 16) };
        apart_files += u64::from(f.unfiltered && data > 2 << BLOCK_LOG2);
        if f.validity {
            per_tile += 32 + blocks(tile_cells);
            apart_files += u64::from(tile_cells > 2 << BLOCK_LOG2);
        }
    }
    let apart_section = if apart { 12 + 4 * apart_files } else { 0 };
    Ok(tiles * per_tile as f64 + whole * 56.0 * files.len() as f64 + apart_section as f64)
}

/// Whether a dense fragment over the whole domain of `s` keeps its block checksums apart from
/// its metadata (format §8.1: more than [`INLINE_BLOCK_SUMS`] of them, the writers' default):
/// a read of part of a tile then first reads the tile's checksums, one more request.
pub fn block_sums_apart(s: &ArraySchema) -> Result<bool> {
    let tile_cells: u64 = s.dims.iter().map(tessera::Dimension::tile_extent).product();
    let tiles: u64 = s.dims.iter().map(|d| d.domain_size().div_ceil(d.tile_extent())).product();
    let blocks = |bytes: u64| if bytes > 2 << BLOCK_LOG2 { bytes.div_ceil(1 << BLOCK_LOG2) } else { 0 };
    let per_tile: u64 = attr_files(s)?
        .iter()
        .map(|f| if f.unfiltered { blocks(tile_cells * f.data) } else { 0 } + if f.validity { blocks(tile_cells) } else { 0 })
        .sum();
    Ok(tiles.saturating_mul(per_tile) > INLINE_BLOCK_SUMS)
}

/// Predicted cost of `log` under `layout`.
///
/// # Errors
/// A layout the engine refuses, a query touching too many tiles to model.
pub fn score(
    schema: &ArraySchema,
    layout: &Candidate,
    log: &[LoggedQuery],
    dev: &Device,
    ratio: f64,
) -> Result<Scored> {
    let s = schema_with(schema, layout)?;
    let tile_cells: u64 = layout.extents.iter().product();
    let files = attr_files(&s)?;
    let cell_total = total_cell_bytes(&files);
    // Curve cell orders: the reader fetches whole tiles (their blocks hold no box's runs).
    let partial = matches!(s.cell_order, CellOrder::RowMajor | CellOrder::ColMajor);
    let open_s = if dev.cold_open { metadata_bytes(&s)? / dev.metadata_bps } else { 0.0 };
    let sums_apart = block_sums_apart(&s)?;
    let fastest_c = s.dims.len() - 1;
    let (mut seconds, mut requests, mut bytes) = (0.0, 0.0, 0.0);
    let mut per_query = Vec::with_capacity(log.len());
    for q in log {
        let layout_q = if q.col_major { Layout::ColMajor } else { Layout::RowMajor };
        let parts = dense_tile_parts(&s, &Subarray::from_ranges(&q.ranges), layout_q, MAX_QUERY_TILES)?;
        let tiles = parts.len() as f64;
        let (mut r, mut b) = (0u64, 0u64);
        for f in &files {
            // Stored tiles of one attribute, at the array's compression ratio.
            let (data_cells, unfiltered) = (tile_cells * f.data, f.unfiltered);
            let stored = if unfiltered { data_cells } else { ((data_cells as f64) * ratio).ceil().max(1.0) as u64 };
            let (qr, qb) = file_reads(&parts, f.data, stored, unfiltered, (partial, sums_apart), dev);
            r += qr;
            b += qb;
            if f.validity {
                let (qr, qb) = coalesced(&parts.iter().map(|p| p.position).collect::<Vec<_>>(), tile_cells, dev);
                r += qr;
                b += qb;
            }
        }
        let unfiltered = tiles * (tile_cells * cell_total) as f64;
        // The copy: the result's cells in runs along its fastest dimension when the cell order
        // keeps that dimension contiguous in a tile (row-major for C results, col-major for F).
        let fastest = if q.col_major { 0 } else { fastest_c };
        let cells: f64 = q.ranges.iter().map(|(lo, hi)| (hi - lo + 1) as f64).product();
        let runs_along = |d: usize| {
            let (lo, hi) = q.ranges[d];
            let e = i128::from(layout.extents[d]);
            // Tiles crossed along d, each a run of its part of the range.
            let pieces = (hi.div_euclid(e) - lo.div_euclid(e) + 1) as f64;
            cells / (hi - lo + 1) as f64 * pieces
        };
        let contiguous = match (s.cell_order, q.col_major) {
            (CellOrder::RowMajor, false) | (CellOrder::ColMajor, true) => true,
            (CellOrder::Z | CellOrder::Hilbert, _) => !q.col_major, // permuted to row-major first
            _ => false,
        };
        let runs = if contiguous { runs_along(fastest) } else { cells };
        let permute = if matches!(s.cell_order, CellOrder::Z | CellOrder::Hilbert) {
            tiles * tile_cells as f64 * dev.permute_cell_s
        } else {
            0.0
        };
        let result_bytes = cells * cell_total as f64;
        let t = dev.query_s
            + open_s
            + r as f64 * dev.latency_s
            + b as f64 / dev.read_bps
            + unfiltered / dev.unfilter_bps
            + permute
            + result_bytes / dev.copy_bps
            + runs * dev.run_s;
        per_query.push(t);
        seconds += q.weight * t;
        requests += q.weight * r as f64;
        bytes += q.weight * b as f64;
    }
    Ok(Scored { layout: layout.clone(), seconds, requests, bytes, per_query })
}

/// Options of the candidate search.
#[derive(Debug, Clone, Copy)]
pub struct SearchOptions {
    /// Smallest tile (all attributes, unfiltered bytes).
    pub min_tile_bytes: u64,
    /// Largest tile.
    pub max_tile_bytes: u64,
}

impl Default for SearchOptions {
    fn default() -> Self {
        Self { min_tile_bytes: 16 << 10, max_tile_bytes: 16 << 20 }
    }
}

/// The current layout of `schema`.
///
/// # Errors
/// A sparse array or a dimension without an integer tile extent.
pub fn current_layout(schema: &ArraySchema) -> Result<Candidate> {
    if schema.array_type != ArrayType::Dense {
        bail!("the advisor models dense arrays (a sparse array's tiles follow its data, not a grid)");
    }
    Ok(Candidate {
        extents: schema.dims.iter().map(tessera::Dimension::tile_extent).collect(),
        tile_order: order_name(schema.tile_order).into(),
        cell_order: order_name(schema.cell_order).into(),
    })
}

/// Every candidate layout: per dimension the powers of two up to the domain (and the current
/// extent), tiles between the size bounds and at most 2^22 tiles over the domain, under every
/// tile order and cell order.
///
/// # Errors
/// As [`current_layout`].
pub fn candidates(schema: &ArraySchema, opts: SearchOptions) -> Result<Vec<Candidate>> {
    let current = current_layout(schema)?;
    let cell: u64 = total_cell_bytes(&attr_files(schema)?).max(1);
    let per_dim: Vec<Vec<u64>> = schema
        .dims
        .iter()
        .zip(&current.extents)
        .map(|(d, &e)| {
            let size = d.domain_size();
            let mut v: Vec<u64> = (0..64).map(|k| 1u64 << k).take_while(|&x| x < size).collect();
            v.push(size);
            v.push(e);
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let orders = ["row-major", "col-major", "z", "hilbert"];
    let mut out = vec![current.clone()];
    let mut pick = vec![0usize; per_dim.len()];
    'combos: loop {
        let extents: Vec<u64> = pick.iter().zip(&per_dim).map(|(&i, v)| v[i]).collect();
        let tile_bytes = extents.iter().try_fold(cell, |a, &e| a.checked_mul(e));
        let domain_tiles =
            schema.dims.iter().zip(&extents).try_fold(1u64, |a, (d, &e)| a.checked_mul(d.domain_size().div_ceil(e)));
        let fits = tile_bytes.is_some_and(|b| (opts.min_tile_bytes..=opts.max_tile_bytes).contains(&b))
            && domain_tiles.is_some_and(|t| t <= MAX_DOMAIN_TILES);
        if fits {
            for t in orders {
                for c in orders {
                    let cand = Candidate { extents: extents.clone(), tile_order: t.into(), cell_order: c.into() };
                    if cand != current && schema_with(schema, &cand).is_ok() {
                        out.push(cand);
                    }
                }
            }
        }
        let mut d = pick.len();
        loop {
            if d == 0 {
                break 'combos;
            }
            d -= 1;
            pick[d] += 1;
            if pick[d] < per_dim[d].len() {
                break;
            }
            pick[d] = 0;
        }
    }
    Ok(out)
}

/// Stored bytes per unfiltered byte of the array's tiles (1 without fragments).
fn stored_ratio(array: &Array) -> f64 {
    let (stored, raw) = array
        .fragments()
        .iter()
        .fold((0u64, 0u64), |(s, r), f| (s.saturating_add(f.stored_bytes()), r.saturating_add(f.unfiltered_bytes())));
    if raw == 0 {
        1.0
    } else {
        stored as f64 / raw as f64
    }
}

/// Scores every candidate for the array at `uri` on `log`, cheapest first.
///
/// # Errors
/// As [`candidates`] and [`score`]; an array that does not open.
pub fn advise(ctx: &Context, uri: &Path, log: &[LoggedQuery], dev: Device, opts: SearchOptions) -> Result<Advice> {
    let array = Array::open(ctx, uri, Mode::Read)?;
    let schema = array.schema().clone();
    let ratio = stored_ratio(&array);
    let current = score(&schema, &current_layout(&schema)?, log, &dev, ratio)?;
    let cands = candidates(&schema, opts)?;
    let scored: Vec<Result<Scored>> = std::thread::scope(|s| {
        let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get).max(1);
        let chunk = cands.len().div_ceil(workers).max(1);
        let handles: Vec<_> = cands
            .chunks(chunk)
            .map(|part| {
                let schema = &schema;
                s.spawn(move || part.iter().map(|c| score(schema, c, log, &dev, ratio)).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap_or_else(|_| vec![Err(anyhow!("a worker panicked"))])).collect()
    });
    let mut ranked = scored.into_iter().collect::<Result<Vec<_>>>()?;
    ranked.sort_by(|a, b| {
        a.seconds.total_cmp(&b.seconds).then_with(|| layout_rank(&a.layout).cmp(&layout_rank(&b.layout)))
    });
    Ok(Advice { current, ranked, device: dev, stored_ratio: ratio })
}

/// Ties go to the simpler layout: row-major before curves, then smaller tiles.
fn layout_rank(c: &Candidate) -> (u8, u8, Vec<u64>) {
    let o = |n: &str| match n {
        "row-major" => 0,
        "col-major" => 1,
        "z" => 2,
        _ => 3,
    };
    (o(&c.tile_order), o(&c.cell_order), c.extents.clone())
}

/// Per-query predicted seconds of the best and current layouts, grouped by the query's shape
/// (which dimensions it spans whole): a summary for the report.
pub fn by_shape(advice: &Advice, log: &[LoggedQuery], schema: &ArraySchema) -> Vec<(String, f64, f64)> {
    let mut groups: HashMap<String, (f64, f64, f64)> = HashMap::new();
    for (i, q) in log.iter().enumerate() {
        let sides: Vec<String> = q.ranges.iter().map(|(lo, hi)| (hi - lo + 1).to_string()).collect();
        let key = format!(
            "{} cells ({})",
            sides.join(" x "),
            schema.dims.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
        );
        let g = groups.entry(key).or_insert((0.0, 0.0, 0.0));
        g.0 += q.weight * advice.current.per_query[i];
        g.1 += q.weight * advice.best().per_query[i];
        g.2 += q.weight;
    }
    let mut v: Vec<(String, f64, f64)> = groups.into_iter().map(|(k, (c, b, w))| (k, c / w, b / w)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Rewrites the dense array at `src` into a new array at `dst` under `layout`: same domain,
/// attributes and filters; the cells of its non-empty domain (as a read returns them: newest
/// write wins, fill values where nothing was written) copied in slabs of whole new tiles along
/// the first dimension, each at most `budget` bytes of cells (one fragment per slab). Returns
/// the number of slabs (0 for an empty array).
///
/// # Errors
/// `dst` exists, a layout the engine refuses, variable-length attributes, storage errors.
pub fn apply(ctx: &Context, src: &Path, dst: &Path, layout: &Candidate, budget: u64) -> Result<u64> {
    let array = Array::open(ctx, src, Mode::Read)?;
    let schema = schema_with(array.schema(), layout)?;
    let cell: u64 = total_cell_bytes(&attr_files(&schema)?).max(1);
    Array::create(ctx, dst, &schema).with_context(|| format!("creating {}", dst.display()))?;
    let writer = Array::open(ctx, dst, Mode::Write)?;
    let names: Vec<&str> = schema.attrs.iter().map(|a| a.name.as_str()).collect();
    let Some(nonempty) = array.nonempty_domain() else {
        return Ok(0);
    };
    let (lo0, hi0) = nonempty[0];
    let row_cells = nonempty[1..].iter().try_fold(1u64, |a, (lo, hi)| a.checked_mul(u64::try_from(hi - lo + 1).ok()?));
    let row_cells = row_cells.ok_or_else(|| anyhow!("the non-empty domain has more cells than 2^64"))?;
    let rows_per_slab = (budget / cell.saturating_mul(row_cells).max(1)).max(1);
    // Whole tiles of the new layout along the first dimension.
    let e0 = layout.extents[0];
    let step = i128::from((rows_per_slab / e0).max(1) * e0);
    // Slabs start on the new tiles' boundaries (relative to the domain's start).
    let origin = schema.dims[0].int_domain().0;
    let mut start = lo0;
    let mut slabs = 0;
    while start <= hi0 {
        let boundary = origin + (start - origin).div_euclid(step) * step;
        let end = (boundary + step - 1).min(hi0);
        let mut ranges = nonempty.clone();
        ranges[0] = (start, end);
        let sub = Subarray::from_ranges(&ranges);
        let res = array.read(&sub, &names, Layout::RowMajor)?;
        let inputs: Vec<AttrInput<'_>> = res
            .attrs
            .iter()
            .map(|a| AttrInput { name: &a.name, data: &a.data, offsets: None, validity: a.validity.as_deref() })
            .collect();
        writer.write(&sub, Layout::RowMajor, &inputs)?;
        slabs += 1;
        start = end + 1;
    }
    Ok(slabs)
}
