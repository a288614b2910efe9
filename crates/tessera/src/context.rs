//! The context of array operations: configuration, the storage backend (wrapped so statistics
//! see every I/O), the tile cache, and the thread pool that filters and unfilters tiles. Cheap to
//! clone; shared by every array and query opened with it.
//!
//! Array locations are local paths, or `file://` URIs naming one; any other `scheme://` URI
//! (`s3://`, `gs://`, ...) is refused by [`Context::resolve_uri`] until object storage exists,
//! rather than being taken for a relative folder called `s3:`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::cache::TileCache;
use crate::config::Config;
use crate::error::{ArrayError, Error, Result};
use crate::storage::{InstrumentedStorage, LocalStorage, Storage};

/// Configuration, storage and compute threads.
#[derive(Clone, Debug)]
pub struct Context {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    storage: Arc<dyn Storage>,
    cache: TileCache,
    pool: rayon::ThreadPool,
    io_pool: rayon::ThreadPool,
}

impl Context {
    /// A context over local files.
    ///
    /// # Errors
    /// The thread pool cannot be started.
    pub fn new(config: Config) -> Result<Self> {
        let storage: Arc<dyn Storage> = Arc::new(LocalStorage::new(config.read_mode()));
        Self::with_storage(config, storage)
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
        Ok(Self { inner: Arc::new(Inner { config, storage, cache, pool, io_pool }) })
    }

    /// The storage location of the array at `uri`: a local path as given, or the path of a
    /// `file://` URI (`file:///data/a` or `file://localhost/data/a`, percent-escapes decoded).
    /// Every entry point that takes an array's location resolves it first.
    ///
    /// # Errors
    /// `ArrayError::UnsupportedUri` for any other `scheme://` URI (object storage is not
    /// supported yet) and for a `file://` URI that names no local absolute path.
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

    /// The cache of unfiltered tiles shared by every query of this context.
    pub fn tile_cache(&self) -> &TileCache {
        &self.inner.cache
    }

    /// Runs `f` on the I/O pool (`sm.io_concurrency` threads): parallel iterators inside it
    /// issue that many reads at once.
    pub fn install_io<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.inner.io_pool.install(f)
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
    if !scheme.eq_ignore_ascii_case("file") {
        return Err(bad(format!(
            "scheme {scheme}:// is not supported (object storage is not supported yet); give a local path or a file:// URI"
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

    #[test]
    fn local_paths_and_file_uris_resolve_other_schemes_are_refused() {
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
        for (u, what) in [
            ("s3://bucket/a", "s3://"),
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
