//! Configuration: string keys and values as users of TileDB know them, parsed and checked once.

use std::collections::BTreeMap;

use crate::error::ArrayError;
use crate::filter::DeflateEncoder;
use crate::storage::{ObjectStoreOptions, ReadMode};

/// Every key `Config` understands, with its default and meaning.
pub const KEYS: &[(&str, &str, &str)] = &[
    ("sm.compute_concurrency", "0", "threads that filter and unfilter tiles (0: all cores)"),
    (
        "sm.io_concurrency",
        "0",
        "threads that read tiles at once, the calling thread among them (0: one per core, and the calling thread beside them)",
    ),
    (
        "sm.memory_budget",
        "1073741824",
        "bytes of unfiltered tiles a dense read holds at once; a read needing a single tile larger than this is refused",
    ),
    (
        "sm.limits.tile_bytes",
        "1073741824",
        "largest unfiltered tile of one file that a read decodes or a write builds (bounds what bytes on disk can make a read allocate)",
    ),
    (
        "sm.tile_chunk_size",
        "auto",
        "writers filter a tile of a filtered attribute larger than twice this in independent chunks of this many bytes, so a read of a few cells decodes only their chunks and one tile decodes on every core (auto: 64 KiB, 256 KiB, 1 MiB or, for tiles up to 2 MiB, the whole tile, whichever comes first among those storing the tile's first MiB within 10% of the best; if 1 MiB, then 1 MiB or 4 MiB or, for tiles up to 8 MiB, the whole tile, by the same rule on its first 4 MiB; 0: whole tiles; else a power of two from 4096 to 2^30)",
    ),
    ("sm.limits.attributes", "65536", "most attributes a schema read from disk may have"),
    ("sm.limits.schema_bytes", "16777216", "largest schema file a read accepts, in bytes"),
    (
        "sm.tile_cache_size",
        "134217728",
        "bytes of the LRU cache of unfiltered tiles shared by a context's queries (0: off); it takes tiles of at most a sixteenth of its size",
    ),
    (
        "sm.read.update_index_size",
        "134217728",
        "bytes of memory an open array may give its index of small sparse fragments (updates): their cells' keys and fixed-size values (0: no index)",
    ),
    (
        "sm.read.update_index_min_fragments",
        "8",
        "fewest small sparse fragments for which an open array builds its update index",
    ),
    (
        "sm.read.update_index_after_reads",
        "1",
        "sparse reads of an open array that read its small fragments' tiles themselves before the next one builds the update index (0: the first read builds it): a read that builds the index spends more than one that reads without it, so an array opened for one read is better off without",
    ),
    (
        "sm.read.batch_size",
        "16777216",
        "bytes of unfiltered tiles a dense read decodes and copies at once (a tile decoded or read straight into the result counts only the stored chunks it holds), or one tile per compute thread when tiles are larger (sm.memory_budget bounds both): a small working set reuses the same memory, where holding hundreds of decoded tiles at once spends more time in page faults than in decoding",
    ),
    (
        "sm.read.sparse_whole_tiles",
        "true",
        "a sparse read takes each tile inside the query that no other fragment's tile overlaps (nor a deletion, a query condition or the layout reorders) whole: its coordinates and fixed-size values decode straight into the result, with no per-cell work, and skip the tile cache (false: every cell goes through the general path)",
    ),
    (
        "sm.read.max_result_bytes",
        "0",
        "largest result a read into new buffers may allocate (0: the memory the system reports available); a larger read fails before allocating: read it in batches",
    ),
    (
        "sm.write.pack_bytes",
        "1048576",
        "a fragment whose tiles hold at most this many unfiltered bytes (as the writer knows in advance: an unordered sparse write, a dense subarray of fixed-size attributes) is stored in one file instead of one per attribute and dimension (0: never)",
    ),
    (
        "sm.write.inline_block_checksums",
        "8192",
        "a fragment with at most this many block checksums (one per 4 KiB block of its large unfiltered tiles: 8192 for 32 MiB) keeps them in its metadata, which opening the array reads; more are kept in the fragment's file __block_checksums, read per tile by reads of part of a tile",
    ),
    (
        "sm.write.deflate_encoder",
        "auto",
        "the deflate encoder of gzip stages at levels 6-9 (both write the same zlib stream): libdeflate at the stage's level, zlib (zlib-rs's lazy matcher at the stage's level, at least 7), or auto: per file, from its first tile's first stored piece (chunk or whole tile, at most 4 MiB) filtered twice by each, zlib when it is at least 10% faster and stores at most 10% more, else libdeflate, chosen again every GiB of the file's tiles",
    ),
    (
        "sm.write.tile_stats",
        "true",
        "true: writers store each tile's null count, value count, sum, min and max per attribute in the fragment metadata, which aggregates use for tiles they cover whole",
    ),
    (
        "sm.aggregate.tile_stats",
        "true",
        "true: aggregates without a condition take the stored summaries of tiles they cover whole that no other fragment overlaps, instead of reading those tiles",
    ),
    (
        "sm.commit.checkpoint_interval",
        "32",
        "a writer whose commit takes a sequence number divisible by this also writes a checkpoint of the commit log (when only writes followed the previous one) and one file of the metadata of the fragments written since, so that opening an array reads the records after the newest checkpoint and a few metadata files, not a record and a metadata file per fragment (0: never)",
    ),
    ("sm.consolidation.buffer_size", "268435456", "bytes of cells a consolidation holds at once"),
    ("sm.vacuum.lock_timeout_ms", "600000", "how long vacuum waits for readers and writers to finish"),
    (
        "sm.vacuum.temp_grace_ms",
        "3600000",
        "age after which vacuum deletes temporary files that killed processes left behind",
    ),
    (
        "sm.vacuum.grace_ms",
        "3600000",
        "on storage without locks (object stores): how long vacuum keeps a fragment after it was replaced or abandoned; readers must finish with a snapshot, and writers commit, within it (writers within half)",
    ),
    ("vfs.read_mode", "pread", "how tiles are read: pread or mmap"),
    ("vfs.coalesce_gap", "1048576", "byte ranges of one file closer than this are read as one"),
    ("vfs.coalesce_max", "134217728", "largest byte range a coalesced read may span"),
    ("vfs.s3.endpoint", "", "S3 server URL, e.g. http://127.0.0.1:9000 (empty: AWS_ENDPOINT_URL, else AWS)"),
    ("vfs.s3.region", "", "S3 region (empty: AWS_REGION / AWS_DEFAULT_REGION)"),
    ("vfs.s3.access_key_id", "", "S3 access key (empty: AWS_ACCESS_KEY_ID)"),
    ("vfs.s3.secret_access_key", "", "S3 secret key (empty: AWS_SECRET_ACCESS_KEY)"),
    ("vfs.s3.session_token", "", "S3 session token (empty: AWS_SESSION_TOKEN)"),
    ("vfs.s3.allow_http", "", "true to allow a plain-HTTP endpoint (empty: AWS_ALLOW_HTTP)"),
    ("vfs.s3.virtual_hosted_style", "false", "true: bucket in the host name; false: in the path"),
    (
        "vfs.s3.unsigned_payload",
        "",
        "true: S3 request bodies are sent without a SHA-256 in their signature; false: always signed; empty: unsigned only over https (TLS protects them) unless AWS_UNSIGNED_PAYLOAD says otherwise",
    ),
    ("vfs.s3.max_retries", "10", "retries of a failed S3 request (5xx, 429, transport errors), with backoff"),
    ("vfs.s3.retry_timeout_ms", "180000", "no S3 retry starts later than this after the first attempt"),
    ("vfs.s3.connect_timeout_ms", "5000", "S3 connection timeout"),
    ("vfs.s3.request_timeout_ms", "60000", "timeout of one S3 request attempt, headers and body"),
    (
        "vfs.s3.multipart_part_size",
        "5242880",
        "S3 files larger than this are uploaded in parts, the first ones of this size (5 MiB to 5 GiB)",
    ),
    (
        "vfs.s3.multipart_parts_per_size",
        "1000",
        "S3 upload parts of one size before the part size doubles (S3 allows 10,000 parts of at most 5 GiB)",
    ),
    ("vfs.s3.upload_concurrency", "4", "parts of one S3 file uploaded at once"),
    (
        "vfs.s3.read_chunk_size",
        "2097152",
        "S3 byte ranges longer than this are fetched in pieces of this size, vfs.s3.read_concurrency at a time",
    ),
    ("vfs.s3.read_concurrency", "8", "pieces of one S3 byte range fetched at once"),
    (
        "vfs.s3.io_concurrency",
        "16",
        "threads that read tiles and metadata from S3 at once (each mostly waits on a request)",
    ),
];

/// Smallest and largest tile chunk size (log2) a fragment may record (docs/format.md §8.2).
pub(crate) const CHUNK_LOG2_RANGE: std::ops::RangeInclusive<u32> = 12..=30;

/// How writers store large tiles of filtered files (`sm.tile_chunk_size`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TileChunking {
    /// Whole tiles (`0`).
    Whole,
    /// Chunks of `2^log2` bytes.
    Fixed(u32),
    /// Chunks of 64 KiB, 256 KiB, 1 MiB or 4 MiB, or whole tiles up to 8 MiB, chosen from a sample
    /// of the data (`auto`).
    Auto,
}

/// Keys whose values are text (any other key but `vfs.read_mode` takes a non-negative integer).
const TEXT_KEYS: &[&str] =
    &["vfs.s3.endpoint", "vfs.s3.region", "vfs.s3.access_key_id", "vfs.s3.secret_access_key", "vfs.s3.session_token"];

/// Keys whose values are `true` or `false` (or empty where the default is empty).
const BOOL_KEYS: &[&str] = &[
    "vfs.s3.allow_http",
    "vfs.s3.unsigned_payload",
    "vfs.s3.virtual_hosted_style",
    "sm.read.sparse_whole_tiles",
    "sm.write.tile_stats",
    "sm.aggregate.tile_stats",
];

/// Limits that bound what bytes on disk (or a schema) can make a read or write allocate; each is
/// a configuration key (`sm.limits.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `sm.limits.tile_bytes`: the largest unfiltered tile of one file.
    pub tile_bytes: u64,
    /// `sm.limits.attributes`: the most attributes of a schema.
    pub attributes: u64,
    /// `sm.limits.schema_bytes`: the largest schema file.
    pub schema_bytes: u64,
}

impl Default for Limits {
    /// The defaults of the keys.
    fn default() -> Self {
        Config::new().limits()
    }
}

/// `Ok` when `needed <= limit`, else the `ArrayError::Limit` naming `what` and the key.
pub(crate) fn check_limit(
    key: &'static str,
    what: impl FnOnce() -> String,
    needed: u64,
    limit: u64,
) -> Result<(), ArrayError> {
    if needed <= limit {
        return Ok(());
    }
    Err(ArrayError::Limit { key, what: what(), needed, limit })
}

/// A set of configuration values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    values: BTreeMap<String, String>,
}

impl Config {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` to `value` after checking both.
    ///
    /// # Errors
    /// `ArrayError::Config` for an unknown key or a value of the wrong form.
    pub fn set(&mut self, key: &str, value: &str) -> Result<&mut Self, ArrayError> {
        let err = |detail: String| ArrayError::Config { key: key.to_string(), detail };
        if !KEYS.iter().any(|k| k.0 == key) {
            let known: Vec<&str> = KEYS.iter().map(|k| k.0).collect();
            return Err(err(format!("unknown key (known: {})", known.join(", "))));
        }
        if key == "vfs.read_mode" {
            if value != "pread" && value != "mmap" {
                return Err(err(format!("{value:?} is not pread or mmap")));
            }
        } else if TEXT_KEYS.contains(&key) {
            if value.contains(['\n', '\r', '\0']) {
                return Err(err("holds a line break or NUL".into()));
            }
        } else if BOOL_KEYS.contains(&key) {
            if !matches!(value, "true" | "false" | "") {
                return Err(err(format!("{value:?} is not true or false")));
            }
        } else if key == "sm.write.deflate_encoder" {
            if !matches!(value, "auto" | "libdeflate" | "zlib") {
                return Err(err(format!("{value:?} is not auto, libdeflate or zlib")));
            }
        } else if key == "sm.tile_chunk_size" {
            let n: Option<u64> = value.parse().ok();
            let log2_ok = n.is_some_and(|n| n.is_power_of_two() && CHUNK_LOG2_RANGE.contains(&n.trailing_zeros()));
            if value != "auto" && n != Some(0) && !log2_ok {
                return Err(err(format!("{value:?} is not auto, 0 or a power of two from 4096 to 2^30")));
            }
        } else if value.parse::<u64>().is_err() {
            return Err(err(format!("{value:?} is not a non-negative integer")));
        }
        self.values.insert(key.to_string(), value.to_string());
        Ok(self)
    }

    /// The value of `key` (its default when unset).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str).or_else(|| KEYS.iter().find(|k| k.0 == key).map(|k| k.1))
    }

    fn num(&self, key: &str) -> u64 {
        self.get(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn threads(&self, key: &str) -> usize {
        match self.num(key) {
            0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            n => n as usize,
        }
    }

    /// Threads for filtering.
    pub fn compute_concurrency(&self) -> usize {
        self.threads("sm.compute_concurrency")
    }
    /// `vfs.s3.io_concurrency`: threads that wait on object-store requests (at least 1).
    pub fn remote_io_concurrency(&self) -> usize {
        self.get("vfs.s3.io_concurrency").and_then(|v| v.parse::<usize>().ok()).unwrap_or(16).clamp(1, 1024)
    }
    /// Threads for reading.
    pub fn io_concurrency(&self) -> usize {
        self.threads("sm.io_concurrency")
    }
    /// Whether `sm.io_concurrency` is left at 0: the calling thread then reads beside one
    /// thread per core; a set value counts the calling thread among its readers.
    pub(crate) fn io_concurrency_per_core(&self) -> bool {
        self.num("sm.io_concurrency") == 0
    }
    /// Bytes of unfiltered tiles a read holds at once.
    pub fn memory_budget(&self) -> u64 {
        self.num("sm.memory_budget").max(1)
    }
    /// Bytes of unfiltered tiles a dense read decodes and copies at once (`sm.read.batch_size`;
    /// readers also take one tile per compute thread, within the memory budget).
    pub fn read_batch_size(&self) -> u64 {
        self.num("sm.read.batch_size").max(1)
    }
    /// Whether sparse reads take the tiles they can whole (`sm.read.sparse_whole_tiles`).
    pub fn sparse_whole_tiles(&self) -> bool {
        self.get("sm.read.sparse_whole_tiles") != Some("false")
    }
    /// The limits on what bytes on disk may make the engine allocate.
    pub fn limits(&self) -> Limits {
        Limits {
            tile_bytes: self.num("sm.limits.tile_bytes"),
            attributes: self.num("sm.limits.attributes"),
            schema_bytes: self.num("sm.limits.schema_bytes"),
        }
    }
    /// The largest result a read into new buffers may allocate, when set; `None` (0, the
    /// default) stands for the memory the system reports available.
    pub fn max_result_bytes(&self) -> Option<u64> {
        Some(self.num("sm.read.max_result_bytes")).filter(|&n| n > 0)
    }
    /// `sm.write.pack_bytes`: the largest fragment (unfiltered bytes of its tiles, as the
    /// writer estimates them) stored packed in one file.
    pub fn write_pack_bytes(&self) -> u64 {
        self.num("sm.write.pack_bytes")
    }

    /// `sm.write.inline_block_checksums`: the most block checksums a fragment keeps in its
    /// metadata (more are kept apart, docs/format.md §8.1).
    pub fn write_inline_block_checksums(&self) -> u64 {
        self.num("sm.write.inline_block_checksums")
    }

    /// `sm.write.tile_stats`: whether writers store per-tile summaries.
    pub fn write_tile_stats(&self) -> bool {
        self.get("sm.write.tile_stats") != Some("false")
    }

    /// `sm.aggregate.tile_stats`: whether aggregates use stored tile summaries.
    pub fn aggregate_tile_stats(&self) -> bool {
        self.get("sm.aggregate.tile_stats") != Some("false")
    }

    /// Bytes of cells a consolidation holds at once.
    pub fn consolidation_buffer_size(&self) -> u64 {
        self.num("sm.consolidation.buffer_size").max(1)
    }
    /// Age in milliseconds after which vacuum deletes abandoned temporary files.
    pub fn vacuum_temp_grace_ms(&self) -> u64 {
        self.num("sm.vacuum.temp_grace_ms")
    }

    /// How long vacuum waits for the array's lock, in milliseconds.
    pub fn vacuum_lock_timeout_ms(&self) -> u64 {
        self.num("sm.vacuum.lock_timeout_ms")
    }
    /// Bytes of the tile cache (0: no cache).
    pub fn tile_cache_size(&self) -> u64 {
        self.num("sm.tile_cache_size")
    }
    /// Bytes of an open array's update index.
    pub fn update_index_size(&self) -> u64 {
        self.num("sm.read.update_index_size")
    }
    /// Fewest small fragments for which an update index is built.
    pub fn update_index_min_fragments(&self) -> usize {
        self.num("sm.read.update_index_min_fragments") as usize
    }
    /// Sparse reads of an open array made without the update index before one builds it.
    pub fn update_index_after_reads(&self) -> u64 {
        self.num("sm.read.update_index_after_reads")
    }
    /// How tiles are read.
    pub fn read_mode(&self) -> ReadMode {
        if self.get("vfs.read_mode") == Some("mmap") {
            ReadMode::Mmap
        } else {
            ReadMode::Pread
        }
    }
    /// `sm.commit.checkpoint_interval`: writers checkpoint the commit log after commits whose
    /// sequence number it divides (0: never).
    pub fn checkpoint_interval(&self) -> u64 {
        self.num("sm.commit.checkpoint_interval")
    }
    /// Largest gap between byte ranges read as one.
    pub fn coalesce_gap(&self) -> u64 {
        self.num("vfs.coalesce_gap")
    }
    /// `sm.tile_chunk_size`: how writers store large tiles of filtered files.
    pub fn tile_chunking(&self) -> TileChunking {
        match self.get("sm.tile_chunk_size") {
            Some("auto") => TileChunking::Auto,
            _ => match self.num("sm.tile_chunk_size") {
                0 => TileChunking::Whole,
                n => TileChunking::Fixed(n.trailing_zeros()),
            },
        }
    }
    /// `sm.write.deflate_encoder`: the encoder of gzip stages at levels 6-9, or `None` for
    /// auto (writers choose per file from a sample).
    pub(crate) fn deflate_encoder(&self) -> Option<DeflateEncoder> {
        match self.get("sm.write.deflate_encoder") {
            Some("libdeflate") => Some(DeflateEncoder::Libdeflate),
            Some("zlib") => Some(DeflateEncoder::ZlibLazy),
            _ => None,
        }
    }
    /// Largest coalesced read.
    pub fn coalesce_max(&self) -> u64 {
        self.num("vfs.coalesce_max")
    }

    /// The options of object-store backends (the `vfs.s3.*` keys and `sm.vacuum.grace_ms`).
    pub fn object_store_options(&self) -> ObjectStoreOptions {
        let config = self;
        let text = |key: &str| config.get(key).filter(|v| !v.is_empty()).map(str::to_string);
        let ms =
            |key: &str| std::time::Duration::from_millis(config.get(key).and_then(|v| v.parse().ok()).unwrap_or(0));
        let num = |key: &str| config.get(key).and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
        ObjectStoreOptions {
            endpoint: text("vfs.s3.endpoint"),
            region: text("vfs.s3.region"),
            access_key_id: text("vfs.s3.access_key_id"),
            secret_access_key: text("vfs.s3.secret_access_key"),
            session_token: text("vfs.s3.session_token"),
            allow_http: text("vfs.s3.allow_http").map(|v| v == "true"),
            virtual_hosted_style: config.get("vfs.s3.virtual_hosted_style") == Some("true"),
            unsigned_payload: text("vfs.s3.unsigned_payload").map(|v| v == "true"),
            max_retries: num("vfs.s3.max_retries"),
            retry_timeout: ms("vfs.s3.retry_timeout_ms"),
            connect_timeout: ms("vfs.s3.connect_timeout_ms"),
            request_timeout: ms("vfs.s3.request_timeout_ms"),
            part_size: num("vfs.s3.multipart_part_size").clamp(5 << 20, crate::storage::MAX_PART_SIZE),
            parts_per_size: num("vfs.s3.multipart_parts_per_size").max(1),
            upload_concurrency: num("vfs.s3.upload_concurrency").max(1),
            read_chunk_size: num("vfs.s3.read_chunk_size").max(1) as u64,
            read_concurrency: num("vfs.s3.read_concurrency").max(1),
            grace: ms("sm.vacuum.grace_ms"),
        }
    }

    /// Every key set explicitly.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.values.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// The memory the system reports available for new allocations without swapping, in bytes
/// (Linux: `MemAvailable` of `/proc/meminfo`); `None` where unknown.
pub(crate) fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.trim_start_matches("MemAvailable:").trim().trim_end_matches("kB").trim().parse().ok()?;
    kib.checked_mul(1024)
}

/// Results up to this size are allocated without asking the system for its free memory.
const SMALL_RESULT: u128 = 64 << 20;

/// Whether `needed` bytes exceed the limit `configured`, or by default the memory the system
/// reports available (asked only for more than 64 MiB), or `isize::MAX` (no allocation may
/// be larger): the limit and where it comes from, or `None` when the bytes fit.
pub(crate) fn memory_limit(configured: Option<u64>, needed: u128) -> Option<(u64, &'static str)> {
    let (limit, from) = match configured {
        Some(l) => (l, "sm.read.max_result_bytes"),
        None if needed <= SMALL_RESULT => return None,
        None => match available_memory() {
            Some(m) => (m, "the memory the system reports available"),
            None => (isize::MAX as u64, "the address space"),
        },
    };
    let (limit, from) =
        if limit > isize::MAX as u64 { (isize::MAX as u64, "the address space") } else { (limit, from) };
    (needed > u128::from(limit)).then_some((limit, from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        let mut c = Config::new();
        assert_eq!(c.get("vfs.read_mode"), Some("pread"));
        c.set("vfs.read_mode", "mmap").unwrap();
        assert_eq!(c.read_mode(), ReadMode::Mmap);
        assert!(c.set("vfs.read_mode", "fast").is_err());
        assert!(c.set("sm.no_such_key", "1").is_err());
        assert!(c.set("sm.compute_concurrency", "-1").is_err());
        c.set("sm.compute_concurrency", "3").unwrap();
        assert_eq!(c.compute_concurrency(), 3);
    }

    #[test]
    fn the_deflate_encoder_is_auto_libdeflate_or_zlib() {
        let mut c = Config::new();
        assert_eq!(c.deflate_encoder(), None);
        c.set("sm.write.deflate_encoder", "zlib").unwrap();
        assert_eq!(c.deflate_encoder(), Some(DeflateEncoder::ZlibLazy));
        c.set("sm.write.deflate_encoder", "libdeflate").unwrap();
        assert_eq!(c.deflate_encoder(), Some(DeflateEncoder::Libdeflate));
        for bad in ["zlib-ng", "Auto", ""] {
            let e = c.set("sm.write.deflate_encoder", bad).unwrap_err().to_string();
            assert!(e.contains("sm.write.deflate_encoder") && e.contains("auto, libdeflate or zlib"), "{e}");
        }
        assert_eq!(c.deflate_encoder(), Some(DeflateEncoder::Libdeflate), "a refused value changes nothing");
        c.set("sm.write.deflate_encoder", "auto").unwrap();
        assert_eq!(c.deflate_encoder(), None);
    }

    #[test]
    fn the_tile_chunk_size_is_auto_zero_or_a_power_of_two() {
        let mut c = Config::new();
        assert_eq!(c.tile_chunking(), TileChunking::Auto);
        c.set("sm.tile_chunk_size", "0").unwrap();
        assert_eq!(c.tile_chunking(), TileChunking::Whole);
        c.set("sm.tile_chunk_size", "4096").unwrap();
        assert_eq!(c.tile_chunking(), TileChunking::Fixed(12));
        for bad in ["2048", "65535", "-1", "automatic", ""] {
            assert!(c.set("sm.tile_chunk_size", bad).is_err(), "{bad:?}");
        }
        c.set("sm.tile_chunk_size", "auto").unwrap();
        assert_eq!(c.tile_chunking(), TileChunking::Auto);
    }

    #[test]
    fn the_result_limit_defaults_to_the_available_memory() {
        let mut c = Config::new();
        assert_eq!(c.max_result_bytes(), None);
        if cfg!(target_os = "linux") {
            let avail = available_memory();
            assert!(avail.is_some_and(|b| b > 0), "{avail:?}");
        }
        c.set("sm.read.max_result_bytes", "1000").unwrap();
        assert_eq!(c.max_result_bytes(), Some(1000));
    }
}
