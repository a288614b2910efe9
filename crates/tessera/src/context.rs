//! The context of array operations: configuration, the storage backend (wrapped so statistics
//! see every I/O), the tile cache, the thread pool that filters and unfilters tiles, and the
//! chunk sizes and deflate encoders writers chose per array file (`sm.tile_chunk_size` and
//! `sm.write.deflate_encoder` auto), so that the next fragment of an array does not sample its
//! data again. Cheap to clone; shared by every array and query opened with it.
//!
//! Array locations are local paths, `file://` URIs naming one, or `s3://bucket/path` URIs of an
//! S3-compatible object store (configured by the `vfs.s3.*` keys and the AWS environment); any
//! other `scheme://` URI (`gs://`, ...) is refused by [`Context::resolve_uri`] rather than being
//! taken for a relative folder called `gs:`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use crate::cache::TileCache;
use crate::config::Config;
use crate::error::{ArrayError, Error, Result};
use crate::fast_hash::FastMap;
use crate::filter::DeflateEncoder;
use crate::storage::{InstrumentedStorage, LocalStorage, RequestTally, RoutedStorage, Storage, S3_SCHEME};

/// Configuration, storage and compute threads.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    storage: Arc<dyn Storage>,
    /// The router under `storage` when the context made it (`Context::new`).
    routed: Option<Arc<RoutedStorage>>,
    cache: TileCache,
    pool: rayon::ThreadPool,
    io_pool: rayon::ThreadPool,
    /// Whether the caller of `io_map` reads beside every thread of `io_pool`
    /// (`sm.io_concurrency` left at 0) rather than counting among them.
    caller_beside_io: bool,
    /// Threads that wait on object-store requests (`vfs.s3.io_concurrency`), made when first
    /// needed.
    remote_pool: OnceLock<rayon::ThreadPool>,
    chunk_sizes: FileChoices<(u32, u64)>,
    deflate_encoders: FileChoices<(DeflateEncoder, u64)>,
}

/// What writers last chose for each (array, file) from a sample of its data, with the bytes
/// the choice still holds for, as the writer keeps it within one fragment: the chunk size
/// (`fragment::AutoChunkSize`, `(log2, bytes)`) or the deflate encoder (`(encoder, bytes)`). At
/// most [`FileChoices::MAX`] entries (then emptied: a choice is only a saved sample).
#[derive(Debug)]
pub(crate) struct FileChoices<T> {
    map: Mutex<FastMap<(PathBuf, String), T>>,
}

impl<T> Default for FileChoices<T> {
    fn default() -> Self {
        Self { map: Mutex::default() }
    }
}

impl<T: Copy> FileChoices<T> {
    const MAX: usize = 4096;

    /// The choice recorded for file `file` of the array at `array`.
    pub(crate) fn get(&self, array: &Path, file: &str) -> Option<T> {
        let map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(&(array.to_path_buf(), file.to_owned())).copied()
    }

    /// Records the choice for file `file` of the array at `array`.
    pub(crate) fn set(&self, array: &Path, file: &str, choice: T) {
        let mut map = self.map.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= Self::MAX {
            map.clear();
        }
        map.insert((array.to_path_buf(), file.to_owned()), choice);
    }
}

impl Context {
    /// A context over local files and S3-compatible object stores (`s3://` URIs).
    ///
    /// # Errors
    /// The thread pool cannot be started.
    pub fn new(config: Config) -> Result<Self> {
        let local: Arc<dyn Storage> = Arc::new(LocalStorage::new(config.read_mode()));
        let routed = Arc::new(RoutedStorage::new(local, config.object_store_options()));
        let mut ctx = Self::with_storage(config, Arc::clone(&routed) as Arc<dyn Storage>)?;
        if let Some(inner) = Arc::get_mut(&mut ctx.inner) {
            inner.routed = Some(routed);
        }
        Ok(ctx)
    }

    /// The requests this context has sent to the object store holding `uri` so far, by kind
    /// (every attempt); `None` for a local path or a context made with
    /// [`Context::with_storage`].
    ///
    /// # Errors
    /// The bucket's options are incomplete or malformed.
    pub fn object_store_requests(&self, uri: impl AsRef<Path>) -> Result<Option<RequestTally>> {
        let Some(routed) = &self.inner.routed else { return Ok(None) };
        let uri = self.resolve_uri(uri.as_ref())?;
        Ok(routed.object_storage(&uri)?.map(|s| s.requests()))
    }

    /// A context over the given storage backend.
    ///
    /// # Errors
    /// The thread pool cannot be started.
    pub fn with_storage(config: Config, storage: Arc<dyn Storage>) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.compute_concurrency())
            .thread_name(|i| format!("tessera-compute-{i}"))
            .build()
            .map_err(|e| ArrayError::Config { key: "sm.compute_concurrency".into(), detail: e.to_string() })?;
        let io_pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.io_concurrency())
            .thread_name(|i| format!("tessera-io-{i}"))
            .build()
            .map_err(|e| ArrayError::Config { key: "sm.io_concurrency".into(), detail: e.to_string() })?;
        let storage: Arc<dyn Storage> = Arc::new(InstrumentedStorage::new(storage));
        let cache = TileCache::new(config.tile_cache_size());
        let (chunk_sizes, deflate_encoders) = (FileChoices::default(), FileChoices::default());
        let remote_pool = OnceLock::new();
        let caller_beside_io = config.io_concurrency_per_core();
        let inner = Inner {
            config,
            storage,
            routed: None,
            cache,
            pool,
            io_pool,
            caller_beside_io,
            remote_pool,
            chunk_sizes,
            deflate_encoders,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    /// The storage location of the array at `uri`: a local path as given, the path of a
    /// `file://` URI (`file:///data/a` or `file://localhost/data/a`, percent-escapes decoded), or
    /// an `s3://bucket/key` URI (without a trailing `/`). Every entry point that takes an
    /// array's location resolves it first.
    ///
    /// # Errors
    /// `ArrayError::UnsupportedUri` for any other `scheme://` URI, for a `file://` URI that names
    /// no local absolute path, and for an `s3://` URI without a valid bucket name or with empty,
    /// `.` or `..` path segments.
    pub fn resolve_uri(&self, uri: &Path) -> Result<PathBuf> {
        resolve_uri(uri)
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The storage backend.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.inner.storage
    }

    /// The chunk sizes writers chose per array file.
    pub(crate) fn chunk_sizes(&self) -> &FileChoices<(u32, u64)> {
        &self.inner.chunk_sizes
    }

    /// The deflate encoders writers chose per array file (`sm.write.deflate_encoder` auto).
    pub(crate) fn deflate_encoders(&self) -> &FileChoices<(DeflateEncoder, u64)> {
        &self.inner.deflate_encoders
    }

    /// The cache of unfiltered tiles shared by every query of this context.
    pub fn tile_cache(&self) -> &TileCache {
        &self.inner.cache
    }

    /// Runs `f` on the pool for reads of `path`: the I/O pool (`sm.io_concurrency` threads:
    /// parallel iterators inside it issue that many reads at once), or for an object store
    /// (whose reads are requests that mostly wait) the `vfs.s3.io_concurrency` threads of the
    /// remote pool.
    pub(crate) fn install_io_for<R: Send>(&self, path: &Path, f: impl FnOnce() -> R + Send) -> R {
        match self.remote_pool(path) {
            Some(pool) => pool.install(f),
            None => self.inner.io_pool.install(f),
        }
    }

    /// Threads of the pool that reads `path` ([`Context::install_io_for`]).
    pub(crate) fn io_threads_for(&self, path: &Path) -> usize {
        self.remote_pool(path).unwrap_or(&self.inner.io_pool).current_num_threads()
    }

    /// Runs `work` on every item, on the calling thread and on threads of the pool for `path`,
    /// each taking the next item not taken, and returns the results in the items' order.
    /// Returns the first error instead; items not started by then are skipped. A set
    /// `sm.io_concurrency` (or `vfs.s3.io_concurrency`) is the number of threads that work at
    /// once, the caller among them: a process limited to one thread reads on the caller alone.
    /// Left at 0, the caller works beside one pool thread per core.
    ///
    /// The caller works too, where [`Context::install_io_for`] hands everything to the pool and
    /// sleeps: a thread that sleeps as it wakes the pool lets the scheduler put the woken
    /// threads on the core it leaves, where they take turns while the other core idles. A warm
    /// 10 MB tile read after 20 ms of idling took 3.4 ms through the pool and 2.1 ms this way
    /// (a memcpy of the same bytes: 1.3 ms; with one pool thread fewer, 3.4 ms again).
    pub(crate) fn io_map<T: Send, R: Send>(
        &self,
        path: &Path,
        items: Vec<T>,
        work: impl Fn(usize, T) -> Result<R> + Sync,
    ) -> Result<Vec<R>> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        fn lock<X>(m: &Mutex<X>) -> std::sync::MutexGuard<'_, X> {
            m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
        }
        let n = items.len();
        let slots: Vec<Mutex<(Option<T>, Option<R>)>> =
            items.into_iter().map(|t| Mutex::new((Some(t), None))).collect();
        let next = AtomicUsize::new(0);
        let first_error: Mutex<Option<Error>> = Mutex::new(None);
        let run = || loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = slots.get(i).and_then(|m| lock(m).0.take()) else { break };
            match work(i, item) {
                Ok(r) => lock(&slots[i]).1 = Some(r),
                Err(e) => {
                    next.store(n, Ordering::Relaxed);
                    lock(&first_error).get_or_insert(e);
                    break;
                }
            }
        };
        let (pool, caller_beside) = match self.remote_pool(path) {
            Some(pool) => (pool, false),
            None => (&self.inner.io_pool, self.inner.caller_beside_io),
        };
        let readers = pool.current_num_threads() + usize::from(caller_beside);
        let helpers = readers.saturating_sub(1).min(n.saturating_sub(1));
        if helpers == 0 {
            run();
        } else {
            pool.in_place_scope(|scope| {
                for _ in 0..helpers {
                    scope.spawn(|_| run());
                }
                run();
            });
        }
        if let Some(e) = first_error.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner) {
            return Err(e);
        }
        // No error: every item was taken, and the scope waited for each to finish.
        Ok(slots
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner).1.expect("every item ran"))
            .collect())
    }

    /// Runs `f` on the compute pool, or for an object store on the remote pool (see
    /// [`Context::install_io_for`]): for work that is mostly small reads, such as metadata.
    pub(crate) fn install_for<R: Send>(&self, path: &Path, f: impl FnOnce() -> R + Send) -> R {
        match self.remote_pool(path) {
            Some(pool) => pool.install(f),
            None => self.inner.pool.install(f),
        }
    }

    /// The remote pool when `path` is on an object store (made on first use; if its threads
    /// cannot start, `None`: the caller's pool does the work).
    fn remote_pool(&self, path: &Path) -> Option<&rayon::ThreadPool> {
        if !self.inner.storage.remote(path) {
            return None;
        }
        if let Some(pool) = self.inner.remote_pool.get() {
            return Some(pool);
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(self.inner.config.remote_io_concurrency())
            .thread_name(|i| format!("tessera-remote-{i}"))
            .build()
            .ok()?;
        Some(self.inner.remote_pool.get_or_init(|| pool))
    }

    /// Threads of the compute pool (`sm.compute_concurrency`, 0 resolved to the cores once, when
    /// the context was made: asking the system again reads cgroup files on every call).
    pub(crate) fn compute_threads(&self) -> usize {
        self.inner.pool.current_num_threads()
    }

    /// Runs `f` on the compute pool (parallel iterators inside it use the pool's threads).
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.inner.pool.install(f)
    }
}

/// See [`Context::resolve_uri`].
fn resolve_uri(uri: &Path) -> Result<PathBuf> {
    let Some(text) = uri.to_str() else { return Ok(uri.to_path_buf()) };
    let Some((scheme, rest)) = text.split_once("://") else { return Ok(uri.to_path_buf()) };
    // RFC 3986: a letter, then letters, digits, '+', '-' or '.'. One letter is a Windows drive.
    let mut chars = scheme.chars();
    let is_scheme = scheme.len() >= 2
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme {
        return Ok(uri.to_path_buf());
    }
    let bad = |detail: String| -> Error { ArrayError::UnsupportedUri { uri: text.to_string(), detail }.into() };
    if scheme.eq_ignore_ascii_case("s3") {
        return resolve_s3(rest).map_err(bad);
    }
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(bad(format!(
            "scheme {scheme}:// is not supported; give a local path, a file:// URI or an s3://bucket/path URI"
        )));
    }
    let path = rest.strip_prefix("localhost").unwrap_or(rest);
    if !path.starts_with('/') {
        return Err(bad("a file:// URI names a local absolute path: file:///path or file://localhost/path".into()));
    }
    let decoded = percent_decode(path).ok_or_else(|| bad("a bad percent-escape (%XX of hex digits)".into()))?;
    let decoded = String::from_utf8(decoded).map_err(|_| bad("the decoded path is not UTF-8".into()))?;
    if decoded.contains('\0') {
        return Err(bad("the decoded path holds a NUL byte".into()));
    }
    Ok(PathBuf::from(decoded))
}

/// The location of `s3://` + `rest`: `s3://bucket/a/b`, checked (S3 bucket naming rules) and
/// without trailing `/`.
fn resolve_s3(rest: &str) -> std::result::Result<PathBuf, String> {
    let rest = rest.trim_end_matches('/');
    let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && bucket.starts_with(|c: char| c.is_ascii_alphanumeric())
        && bucket.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !bucket_ok {
        return Err(format!("{bucket:?} is not an S3 bucket name (3 to 63 lower-case letters, digits, '-' and '.')"));
    }
    if !key.is_empty() && key.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Err("the path holds an empty, '.' or '..' segment".into());
    }
    if key.contains(|c: char| c.is_control()) {
        return Err("the path holds a control character".into());
    }
    Ok(PathBuf::from(format!("{S3_SCHEME}{rest}")))
}

/// `%XX` escapes decoded to bytes; `None` for a `%` not followed by two hex digits.
fn percent_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `io_map` returns every item's result in order, from the caller and the pool's threads,
    /// called from outside any pool or from inside another; the first error stops it.
    #[test]
    fn io_map_runs_every_item_once_in_order_and_stops_at_an_error() {
        let mut config = Config::default();
        config.set("sm.io_concurrency", "3").unwrap();
        let ctx = Context::new(config).unwrap();
        let here = Path::new("local");
        for n in [0usize, 1, 2, 7, 500] {
            let ran = std::sync::atomic::AtomicUsize::new(0);
            let work = |i: usize, x: usize| {
                ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                assert_eq!(i, x);
                Ok(x * 2)
            };
            let out = ctx.io_map(here, (0..n).collect(), work).unwrap();
            assert_eq!(out, (0..n).map(|x| x * 2).collect::<Vec<_>>());
            let nested = ctx.install(|| ctx.io_map(here, (0..n).collect(), work)).unwrap();
            assert_eq!(nested, out);
            assert_eq!(ran.load(std::sync::atomic::Ordering::Relaxed), 2 * n);
        }
        let ran = std::sync::atomic::AtomicUsize::new(0);
        let failing = ctx.io_map(here, (0..10_000usize).collect(), |_, x| {
            ran.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if x == 3 {
                return Err(Error::corrupt(Path::new("f"), "item 3"));
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
            Ok(())
        });
        assert!(failing.unwrap_err().to_string().contains("item 3"));
        assert!(ran.load(std::sync::atomic::Ordering::Relaxed) < 10_000, "items after the error were skipped");
    }

    /// A set `sm.io_concurrency` counts the caller among its readers: 1 reads on the calling
    /// thread alone (a process limited to one thread), 2 on the caller and one more.
    #[test]
    fn io_concurrency_counts_the_calling_thread() {
        let threads_used = |value: &str| {
            let mut config = Config::default();
            config.set("sm.io_concurrency", value).unwrap();
            let ctx = Context::new(config).unwrap();
            let seen = Mutex::new(std::collections::BTreeSet::new());
            ctx.io_map(Path::new("local"), (0..64).collect(), |_, _: i32| {
                seen.lock().unwrap().insert(format!("{:?}", std::thread::current().id()));
                std::thread::sleep(std::time::Duration::from_millis(2));
                Ok(())
            })
            .unwrap();
            let here = format!("{:?}", std::thread::current().id());
            let seen = seen.into_inner().unwrap();
            (seen.len(), seen.contains(&here))
        };
        assert_eq!(threads_used("1"), (1, true));
        assert_eq!(threads_used("2"), (2, true));
    }

    #[test]
    fn local_paths_file_and_s3_uris_resolve_other_schemes_are_refused() {
        for p in ["a", "/data/a", "./s3/a", "C://x", "weird:/one/slash", "1ab://x", "a b://c"] {
            assert_eq!(resolve_uri(Path::new(p)).unwrap(), PathBuf::from(p), "{p}");
        }
        for (u, p) in [
            ("file:///data/a", "/data/a"),
            ("FILE:///data/a", "/data/a"),
            ("file://localhost/data/a", "/data/a"),
            ("file:///my%20dir/%C3%BE", "/my dir/\u{fe}"),
        ] {
            assert_eq!(resolve_uri(Path::new(u)).unwrap(), PathBuf::from(p), "{u}");
        }
        for (u, p) in [("s3://bucket/a", "s3://bucket/a"), ("S3://my.bucket-1/a/b/", "s3://my.bucket-1/a/b")] {
            assert_eq!(resolve_uri(Path::new(u)).unwrap(), PathBuf::from(p), "{u}");
        }
        for (u, what) in [
            ("s3://Bucket/a", "bucket name"),
            ("s3://ab/a", "bucket name"),
            ("s3://-ab/a", "bucket name"),
            ("s3://bucket/a//b", "segment"),
            ("s3://bucket/a/../b", "segment"),
            ("s3://bucket/a/\u{7}", "control"),
            ("gs://b/a", "gs://"),
            ("az+blob://c/a", "az+blob://"),
            ("http://host/a", "http://"),
            ("file://host/a", "absolute path"),
            ("file://relative", "absolute path"),
            ("file:///a%2", "percent-escape"),
            ("file:///a%zz", "percent-escape"),
            ("file:///a%ff", "UTF-8"),
            ("file:///a%00b", "NUL"),
        ] {
            let e = resolve_uri(Path::new(u)).unwrap_err();
            assert!(matches!(e, Error::Array(ArrayError::UnsupportedUri { .. })), "{u}: {e}");
            let msg = e.to_string();
            assert!(msg.contains(u) && msg.contains(what), "{u}: {msg}");
        }
    }
}
