//! The object-store backend: [`ObjectStorage`] keeps arrays in an S3-compatible bucket through the
//! `object_store` crate, behind the same [`Storage`] trait as local files (docs/format.md,
//! "Object stores").
//!
//! A path `s3://bucket/a/b` is the object `a/b` of `bucket`. Object stores have no folders, no
//! rename and no locks, so:
//! - a folder is a zero-byte marker object `<folder>/.tessera-folder` written by
//!   `create_dir_all` (hidden from listings), or any object under the folder's prefix;
//! - `write_atomic` is one PUT (objects are replaced whole) and `write_new` a conditional PUT
//!   (`If-None-Match: *`); `sync_dir` does nothing (an acknowledged PUT is durable);
//! - files being written are buffered and sent as one PUT when finished, or as a multipart
//!   upload once they pass `vfs.s3.multipart_part_size`: each full part goes up (its buffer
//!   handed over without a copy) while the writer fills the next, nothing is visible before
//!   `finish`, and a handle dropped unfinished aborts its upload. Parts double in size every
//!   `vfs.s3.multipart_parts_per_size` parts (up to [`MAX_PART_SIZE`]), so that S3's cap of
//!   10,000 parts per upload still allows files of many TiB ([`part_size_at`]);
//! - `lock` hands out guards that exclude nothing, and [`Storage::lock_free_grace`] tells the
//!   engine to protect readers and writers from vacuum by a grace period instead.
//!
//! Retries with exponential backoff (of 5xx and 429 answers and transport errors) are
//! `object_store`'s; the HTTP client under it counts every attempt (`object_http.rs`).
//!
//! A conditional PUT retried after a lost answer meets its own first attempt and fails with
//! "already exists": `write_new` then reads the object back and reports success when it holds
//! exactly the bytes written. The engine only ever writes distinct contents under one name with
//! `write_new` (commit records name unique fragments), so equal bytes mean this call won.

use std::future::Future;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{
    BackoffConfig, ClientOptions, MultipartUpload, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig,
};

use super::object_http::{CountingConnector, RequestCounts, RequestTally};
use super::{Bytes, LockGuard, LockKind, Storage, StorageError, WriteHandle};
use crate::stats::{self, Counter};

/// The marker object that makes an empty folder exist.
pub(crate) const FOLDER_MARKER: &str = ".tessera-folder";

/// S3's largest part of a multipart upload (5 GiB).
pub(crate) const MAX_PART_SIZE: usize = 5 << 30;

/// The size of part `index` (0-based) of a multipart upload whose first part is `first` bytes:
/// `first` doubled once per `per_size` parts before it, at most [`MAX_PART_SIZE`].
///
/// With the default 5 MiB first parts (S3's smallest, and TileDB's default) and 1,000 parts
/// per size, 1,000 parts hold 5 GiB, and the 10,000 parts S3 allows hold 4.9 TiB (S3's largest
/// object is 5 TiB), while a file of 1 TiB still uses parts of at most 640 MiB (memory held:
/// `vfs.s3.upload_concurrency` + 1 parts).
pub(crate) fn part_size_at(first: usize, per_size: usize, index: usize) -> usize {
    let doublings = u32::try_from(index / per_size.max(1)).unwrap_or(u32::MAX);
    first.saturating_mul(1usize.checked_shl(doublings).unwrap_or(usize::MAX)).min(MAX_PART_SIZE)
}

/// The URI scheme of S3-compatible stores.
pub const S3_SCHEME: &str = "s3://";

/// How an object-store backend connects and behaves; each field is a `vfs.s3.*` key of
/// `Config` (`Config::object_store_options`), or (when the key is empty) the usual AWS
/// environment variable.
#[derive(Debug, Clone)]
pub struct ObjectStoreOptions {
    /// `vfs.s3.endpoint` / `AWS_ENDPOINT_URL`: the server, e.g. `http://127.0.0.1:9000`.
    pub endpoint: Option<String>,
    /// `vfs.s3.region` / `AWS_REGION`.
    pub region: Option<String>,
    /// `vfs.s3.access_key_id` / `AWS_ACCESS_KEY_ID`.
    pub access_key_id: Option<String>,
    /// `vfs.s3.secret_access_key` / `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: Option<String>,
    /// `vfs.s3.session_token` / `AWS_SESSION_TOKEN`.
    pub session_token: Option<String>,
    /// `vfs.s3.allow_http` / `AWS_ALLOW_HTTP`: plain HTTP (a local endpoint).
    pub allow_http: Option<bool>,
    /// `vfs.s3.unsigned_payload` / `AWS_UNSIGNED_PAYLOAD`: send bodies without a SHA-256 in
    /// their signature; `None`: only over TLS (`over_tls`).
    pub unsigned_payload: Option<bool>,
    /// `vfs.s3.virtual_hosted_style`: bucket in the host name instead of the path.
    pub virtual_hosted_style: bool,
    /// `vfs.s3.max_retries`.
    pub max_retries: usize,
    /// `vfs.s3.retry_timeout_ms`: no retry starts later than this after the first attempt.
    pub retry_timeout: Duration,
    /// `vfs.s3.connect_timeout_ms`.
    pub connect_timeout: Duration,
    /// `vfs.s3.request_timeout_ms`: one attempt, headers and body.
    pub request_timeout: Duration,
    /// `vfs.s3.multipart_part_size`: files larger than this are uploaded in parts, the first
    /// ones of this size (later ones larger, see `part_size_at`).
    pub part_size: usize,
    /// `vfs.s3.multipart_parts_per_size`: parts of one size before the part size doubles.
    pub parts_per_size: usize,
    /// `vfs.s3.upload_concurrency`: parts of one file uploaded at once.
    pub upload_concurrency: usize,
    /// `vfs.s3.read_chunk_size`: ranges longer than this are fetched in pieces of this size.
    pub read_chunk_size: u64,
    /// `vfs.s3.read_concurrency`: pieces of one range fetched at once.
    pub read_concurrency: usize,
    /// `sm.vacuum.grace_ms`: see [`Storage::lock_free_grace`].
    pub grace: Duration,
}

/// The state shared by an [`ObjectStorage`] and its write handles.
#[derive(Debug)]
struct Shared {
    store: Arc<dyn ObjectStore>,
    /// `s3://bucket`: paths start with it.
    root: String,
    runtime: tokio::runtime::Runtime,
    counts: Arc<RequestCounts>,
    options: ObjectStoreOptions,
}

/// One bucket of an S3-compatible object store. See the module doc.
#[derive(Debug)]
pub struct ObjectStorage {
    shared: Arc<Shared>,
}

fn io_error(op: &'static str, path: &Path, e: impl std::fmt::Display) -> StorageError {
    StorageError::Io { op, path: path.to_path_buf(), source: std::io::Error::other(e.to_string()) }
}

/// Maps an `object_store` error of `op` on `path` to the storage layer's.
fn map_error(op: &'static str, path: &Path, e: object_store::Error) -> StorageError {
    match e {
        object_store::Error::NotFound { .. } => StorageError::NotFound { path: path.to_path_buf() },
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            StorageError::kind(op, path, std::io::ErrorKind::AlreadyExists)
        }
        other => io_error(op, path, other),
    }
}

impl Shared {
    /// Runs `fut` on the backend's runtime and waits for it from any thread (also one of
    /// another runtime).
    fn run<T: Send + 'static>(&self, fut: impl Future<Output = T> + Send + 'static) -> Result<T, StorageError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv().map_err(|_| io_error("run", Path::new(&self.root), "the object-store task stopped"))
    }

    /// The object key of `path` (`s3://bucket/a/b` -> `a/b`).
    fn key(&self, path: &Path) -> Result<Key, StorageError> {
        let bad = |why: &str| io_error("resolve", path, format!("not an object of {}: {why}", self.root));
        let text = path.to_str().ok_or_else(|| bad("not UTF-8"))?;
        let rest = text.strip_prefix(self.root.as_str()).ok_or_else(|| bad("another bucket"))?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(bad("another bucket"));
        }
        let rest = rest.trim_matches('/');
        if rest.split('/').any(|s| s.is_empty() || s == "." || s == "..") && !rest.is_empty() {
            return Err(bad("empty, . or .. path segments"));
        }
        Key::parse(rest).map_err(|e| bad(&e.to_string()))
    }

    fn head(&self, path: &Path) -> Result<object_store::ObjectMeta, StorageError> {
        let (store, key) = (Arc::clone(&self.store), self.key(path)?);
        self.run(async move { store.head(&key).await })?.map_err(|e| map_error("head", path, e))
    }

    fn put(&self, path: &Path, data: PutPayload, mode: PutMode) -> Result<(), StorageError> {
        let (store, key) = (Arc::clone(&self.store), self.key(path)?);
        stats::add(Counter::VfsObjectBytesSent, data.content_length() as u64);
        let opts = PutOptions { mode, ..PutOptions::default() };
        self.run(async move { store.put_opts(&key, data, opts).await })?
            .map(|_| ())
            .map_err(|e| map_error("put", path, e))
    }

    /// A conditional create of `data` at `path`; `Ok(false)` when another object is there. A
    /// retried attempt that finds its own first attempt's object counts as created.
    fn put_new(&self, path: &Path, data: bytes::Bytes) -> Result<bool, StorageError> {
        match self.put(path, PutPayload::from(data.clone()), PutMode::Create) {
            Ok(()) => Ok(true),
            Err(StorageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
                match self.get(path, None) {
                    Ok(existing) => Ok(*existing == *data),
                    // Removed since: it existed, so it was not this call's.
                    Err(StorageError::NotFound { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    fn get(&self, path: &Path, range: Option<Range<u64>>) -> Result<Bytes, StorageError> {
        let (store, key) = (Arc::clone(&self.store), self.key(path)?);
        let got = self.run(async move {
            match range {
                Some(r) => store.get_range(&key, r).await,
                None => store.get(&key).await?.bytes().await,
            }
        })?;
        let got = got.map_err(|e| map_error("read", path, e))?;
        stats::add(Counter::VfsObjectBytesReceived, got.len() as u64);
        Ok(Bytes::from_shared(got))
    }

    /// The whole object if it holds at most `max` bytes, else its size: one GET, whose body is
    /// dropped unread (the connection closed) when the length its headers give is beyond `max`.
    fn get_within(&self, path: &Path, max: u64) -> Result<Result<Bytes, u64>, StorageError> {
        let (store, key) = (Arc::clone(&self.store), self.key(path)?);
        let got = self.run(async move {
            let r = store.get(&key).await?;
            if r.meta.size > max {
                return Ok(Err(r.meta.size));
            }
            r.bytes().await.map(Ok)
        })?;
        match got.map_err(|e| map_error("read", path, e))? {
            Ok(b) => {
                stats::add(Counter::VfsObjectBytesReceived, b.len() as u64);
                Ok(Ok(Bytes::from_shared(b)))
            }
            Err(size) => Ok(Err(size)),
        }
    }

    /// `range` of an object, in `vfs.s3.read_chunk_size` pieces fetched
    /// `vfs.s3.read_concurrency` at a time (one stream from a store is slower than several)
    /// and joined; one GET when it is no longer than a piece.
    ///
    /// A range beyond the object's end is `OutOfBounds`, found without a HEAD: the answer to the
    /// first piece carries the object's size, which is checked before any piece past the first
    /// `vfs.s3.read_concurrency` starts (so a hostile length costs at most that many GETs).
    fn get_split(&self, path: &Path, range: Range<u64>) -> Result<Bytes, StorageError> {
        let chunk = self.options.read_chunk_size.max(1);
        if range.end - range.start <= chunk {
            return self.get(path, Some(range));
        }
        let step = usize::try_from(chunk).unwrap_or(usize::MAX);
        let (start, end) = (range.start, range.end);
        let pieces = (start..end).step_by(step).map(move |s| s..s.saturating_add(chunk).min(end));
        let (store, key) = (Arc::clone(&self.store), self.key(path)?);
        let width = self.options.read_concurrency.max(1);
        let got = self.run(async move {
            let mut stream = futures::stream::iter(pieces.enumerate())
                .map(|(i, r)| {
                    let (store, key) = (Arc::clone(&store), key.clone());
                    async move {
                        if i > 0 {
                            return store.get_range(&key, r).await.map(|b| (b, None));
                        }
                        let opts = object_store::GetOptions::new().with_range(Some(r));
                        let first = store.get_opts(&key, opts).await?;
                        let size = first.meta.size;
                        Ok((first.bytes().await?, Some(size)))
                    }
                })
                .buffered(width);
            let mut out = Vec::new();
            while let Some(piece) = stream.next().await {
                let (bytes, size) = piece?;
                if let Some(size) = size.filter(|&size| size < end) {
                    return Ok(Err(size));
                }
                out.push(bytes);
            }
            Ok(Ok(out))
        })?;
        let pieces = match got.map_err(|e| map_error("read", path, e))? {
            Ok(pieces) => pieces,
            Err(size) => {
                return Err(StorageError::OutOfBounds {
                    path: path.to_path_buf(),
                    offset: start,
                    len: end - start,
                    size,
                })
            }
        };
        let total: usize = pieces.iter().map(bytes::Bytes::len).sum();
        stats::add(Counter::VfsObjectBytesReceived, total as u64);
        let mut out = Vec::with_capacity(total);
        for p in &pieces {
            out.extend_from_slice(p);
        }
        Ok(Bytes::from_vec(out))
    }

    /// The objects under folder `path` (recursively), markers included.
    fn list_all(&self, path: &Path) -> Result<Vec<object_store::ObjectMeta>, StorageError> {
        let (store, key) = (Arc::clone(&self.store), self.key(path)?);
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        self.run(async move { store.list(prefix.as_ref()).try_collect::<Vec<_>>().await })?
            .map_err(|e| map_error("list", path, e))
    }

    fn delete_all(&self, path: &Path, keys: Vec<Key>) -> Result<(), StorageError> {
        let store = Arc::clone(&self.store);
        let results = self.run(async move {
            let stream = futures::stream::iter(keys.into_iter().map(Ok)).boxed();
            store.delete_stream(stream).collect::<Vec<_>>().await
        })?;
        for r in results {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(map_error("remove", path, e)),
            }
        }
        Ok(())
    }
}

impl ObjectStorage {
    /// The backend of bucket `bucket`.
    ///
    /// # Errors
    /// `StorageError::Io` when the options are incomplete or malformed (no region, a bad
    /// endpoint URL) or the runtime cannot start.
    pub fn new(bucket: &str, options: ObjectStoreOptions) -> Result<Self, StorageError> {
        let root = format!("{S3_SCHEME}{bucket}");
        let counts = Arc::new(RequestCounts::default());
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_virtual_hosted_style_request(options.virtual_hosted_style)
            .with_http_connector(CountingConnector { counts: Arc::clone(&counts) })
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: options.max_retries,
                retry_timeout: options.retry_timeout,
            })
            .with_client_options(
                ClientOptions::new()
                    .with_connect_timeout(options.connect_timeout)
                    .with_timeout(options.request_timeout)
                    .with_allow_http(options.allow_http.unwrap_or_else(allow_http_from_env)),
            );
        if let Some(v) = &options.endpoint {
            b = b.with_endpoint(v);
        }
        if let Some(v) = &options.region {
            b = b.with_region(v);
        }
        if let Some(v) = &options.access_key_id {
            b = b.with_access_key_id(v);
        }
        if let Some(v) = &options.secret_access_key {
            b = b.with_secret_access_key(v);
        }
        if let Some(v) = &options.session_token {
            b = b.with_token(v);
        }
        // Unset (and no AWS_UNSIGNED_PAYLOAD): bodies unsigned only where TLS protects them.
        if let Some(unsigned) = options.unsigned_payload {
            b = b.with_unsigned_payload(unsigned);
        } else if std::env::var_os("AWS_UNSIGNED_PAYLOAD").is_none() {
            let endpoint = b.get_config_value(&object_store::aws::AmazonS3ConfigKey::Endpoint);
            b = b.with_unsigned_payload(over_tls(endpoint.as_deref()));
        }
        let store = b.build().map_err(|e| io_error("configure", Path::new(&root), e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tessera-object-io")
            .enable_all()
            .build()
            .map_err(|e| StorageError::Io { op: "start runtime", path: PathBuf::from(&root), source: e })?;
        let shared = Shared { store: Arc::new(store), root, runtime, counts, options };
        Ok(Self { shared: Arc::new(shared) })
    }

    /// Requests sent so far, by kind (every attempt).
    pub fn requests(&self) -> RequestTally {
        self.shared.counts.snapshot()
    }
}

/// Whether requests to `endpoint` go over TLS: an `https://` URL, or none (AWS's own endpoints).
/// TLS authenticates every byte of a request's body, which makes SHA-256 signing of the body
/// (`vfs.s3.unsigned_payload`) redundant there; over plain HTTP the signature is the body's only
/// protection, and the server refuses a body that does not match it.
fn over_tls(endpoint: Option<&str>) -> bool {
    endpoint.is_none_or(|e| e.trim_start().get(..8).is_some_and(|p| p.eq_ignore_ascii_case("https://")))
}

/// `AWS_ALLOW_HTTP=true` in the environment.
fn allow_http_from_env() -> bool {
    std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// A file being written: bytes are buffered, then sent as one PUT at `finish`, or as a multipart
/// upload once more than a part has been written.
struct ObjectWriter {
    shared: Arc<Shared>,
    path: PathBuf,
    key: Key,
    buf: Vec<u8>,
    upload: Option<Box<dyn MultipartUpload>>,
    /// Parts being uploaded, oldest first.
    in_flight: std::collections::VecDeque<tokio::task::JoinHandle<object_store::Result<()>>>,
    /// Parts handed to the upload so far.
    parts_sent: usize,
    position: u64,
}

impl ObjectWriter {
    /// Sends the buffer (one whole part, or the last part) as the next part of the upload,
    /// starting the upload first if needed, with at most `vfs.s3.upload_concurrency` parts in
    /// flight. The payload is the buffer itself, handed over without a copy.
    fn send_part(&mut self) -> Result<(), StorageError> {
        if self.upload.is_none() {
            let (store, key) = (Arc::clone(&self.shared.store), self.key.clone());
            let up = self.shared.run(async move { store.put_multipart(&key).await })?;
            self.upload = Some(up.map_err(|e| map_error("start upload", &self.path, e))?);
        }
        self.parts_sent += 1;
        // The next part's buffer is allocated whole: no regrowth copies.
        let next = Vec::with_capacity(self.part_size());
        let chunk = std::mem::replace(&mut self.buf, next);
        stats::add(Counter::VfsObjectBytesSent, chunk.len() as u64);
        let Some(upload) = self.upload.as_mut() else { unreachable!("started above") };
        let fut = upload.put_part(PutPayload::from(chunk));
        self.in_flight.push_back(self.shared.runtime.spawn(fut));
        while self.in_flight.len() > self.shared.options.upload_concurrency.max(1) {
            self.wait_oldest()?;
        }
        Ok(())
    }

    /// The size of the part being filled.
    fn part_size(&self) -> usize {
        let o = &self.shared.options;
        part_size_at(o.part_size.max(1), o.parts_per_size, self.parts_sent)
    }

    fn wait_oldest(&mut self) -> Result<(), StorageError> {
        let Some(h) = self.in_flight.pop_front() else { return Ok(()) };
        match self.shared.run(h)? {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(map_error("upload part", &self.path, e)),
            Err(e) => Err(io_error("upload part", &self.path, e)),
        }
    }
}

impl WriteHandle for ObjectWriter {
    fn write_all(&mut self, mut data: &[u8]) -> Result<(), StorageError> {
        self.position += data.len() as u64;
        while !data.is_empty() {
            // A full buffer goes up only once more bytes follow: a file of exactly one part
            // stays a single PUT.
            if self.buf.len() >= self.part_size() {
                self.send_part()?;
            }
            let take = (self.part_size() - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        Ok(())
    }
    fn position(&self) -> u64 {
        self.position
    }
    fn finish(mut self: Box<Self>) -> Result<(), StorageError> {
        if self.upload.is_none() {
            // One PUT that creates the object only if the path is free.
            let data = bytes::Bytes::from(std::mem::take(&mut self.buf));
            return match self.shared.put_new(&self.path, data)? {
                true => Ok(()),
                false => Err(StorageError::kind("create", &self.path, std::io::ErrorKind::AlreadyExists)),
            };
        }
        if !self.buf.is_empty() {
            self.send_part()?;
        }
        while !self.in_flight.is_empty() {
            self.wait_oldest()?;
        }
        let Some(mut upload) = self.upload.take() else { unreachable!("checked above") };
        let done = self.shared.run(async move { upload.complete().await })?;
        done.map(|_| ()).map_err(|e| map_error("complete upload", &self.path, e))
    }
}

impl Drop for ObjectWriter {
    fn drop(&mut self) {
        // Unfinished: abort the upload so no part lingers (best effort).
        if let Some(mut upload) = self.upload.take() {
            for h in self.in_flight.drain(..) {
                h.abort();
            }
            let _ = self.shared.run(async move { upload.abort().await });
        }
    }
}

impl Storage for ObjectStorage {
    fn read_range(&self, path: &Path, offset: u64, len: u64) -> Result<Bytes, StorageError> {
        let oob = |size| StorageError::OutOfBounds { path: path.to_path_buf(), offset, len, size };
        let Some(end) = offset.checked_add(len) else {
            return Err(oob(self.file_size(path)?));
        };
        if len == 0 {
            // Empty ranges have no GET.
            let size = self.file_size(path)?;
            return if offset > size { Err(oob(size)) } else { Ok(Bytes::default()) };
        }
        match self.shared.get_split(path, offset..end) {
            Ok(b) if b.len() as u64 == len => Ok(b),
            Ok(_) => Err(oob(self.file_size(path)?)),
            Err(e @ StorageError::OutOfBounds { .. }) => Err(e),
            Err(StorageError::NotFound { .. }) => Err(StorageError::NotFound { path: path.to_path_buf() }),
            Err(e) => match self.file_size(path) {
                Ok(size) if end > size => Err(oob(size)),
                _ => Err(e),
            },
        }
    }
    fn read_all(&self, path: &Path) -> Result<Bytes, StorageError> {
        self.shared.get(path, None)
    }
    fn read_all_within(&self, path: &Path, max: u64) -> Result<Result<Bytes, u64>, StorageError> {
        self.shared.get_within(path, max)
    }
    fn file_size(&self, path: &Path) -> Result<u64, StorageError> {
        Ok(self.shared.head(path)?.size)
    }
    fn create(&self, path: &Path) -> Result<Box<dyn WriteHandle>, StorageError> {
        let key = self.shared.key(path)?;
        Ok(Box::new(ObjectWriter {
            shared: Arc::clone(&self.shared),
            path: path.to_path_buf(),
            key,
            buf: Vec::new(),
            upload: None,
            in_flight: std::collections::VecDeque::new(),
            parts_sent: 0,
            position: 0,
        }))
    }
    fn write_atomic(&self, path: &Path, data: &[u8]) -> Result<(), StorageError> {
        self.shared.put(path, PutPayload::from(data.to_vec()), PutMode::Overwrite)
    }
    fn write_new(&self, path: &Path, data: &[u8]) -> Result<bool, StorageError> {
        self.shared.put_new(path, bytes::Bytes::copy_from_slice(data))
    }
    fn list_temps(&self, _dir: &Path) -> Result<Vec<(String, Option<u64>)>, StorageError> {
        // Objects are written whole: there are no temporary files.
        Ok(Vec::new())
    }
    fn create_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        self.shared.put(&path.join(FOLDER_MARKER), PutPayload::default(), PutMode::Overwrite)
    }
    fn sync_dir(&self, _path: &Path) -> Result<(), StorageError> {
        Ok(())
    }
    fn list_dir(&self, path: &Path) -> Result<Vec<String>, StorageError> {
        let (store, key) = (Arc::clone(&self.shared.store), self.shared.key(path)?);
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        let listed = self.shared.run(async move { store.list_with_delimiter(prefix.as_ref()).await })?;
        let listed = listed.map_err(|e| map_error("list", path, e))?;
        let mut marker = false;
        let mut names: Vec<String> = Vec::with_capacity(listed.objects.len() + listed.common_prefixes.len());
        for o in &listed.objects {
            match o.location.filename() {
                Some(FOLDER_MARKER) => marker = true,
                Some(n) => names.push(n.to_string()),
                None => {}
            }
        }
        names.extend(listed.common_prefixes.iter().filter_map(|p| p.filename().map(str::to_string)));
        if names.is_empty() && !marker {
            return Err(StorageError::NotFound { path: path.to_path_buf() });
        }
        names.sort_unstable();
        names.dedup();
        Ok(names)
    }
    fn is_dir(&self, path: &Path) -> bool {
        if self.shared.head(&path.join(FOLDER_MARKER)).is_ok() {
            return true;
        }
        let Ok(key) = self.shared.key(path) else { return false };
        let store = Arc::clone(&self.shared.store);
        let prefix = (!key.as_ref().is_empty()).then_some(key);
        let first = self.shared.run(async move { store.list(prefix.as_ref()).next().await });
        matches!(first, Ok(Some(Ok(_))))
    }
    fn is_file(&self, path: &Path) -> bool {
        self.shared.head(path).is_ok()
    }
    fn remove_file(&self, path: &Path) -> Result<(), StorageError> {
        self.shared.head(path)?;
        self.shared.delete_all(path, vec![self.shared.key(path)?])
    }
    fn remove_dir_all(&self, path: &Path) -> Result<(), StorageError> {
        let objects = self.shared.list_all(path)?;
        if objects.is_empty() {
            return Err(StorageError::NotFound { path: path.to_path_buf() });
        }
        // The marker last: a folder stays visible until everything in it is gone.
        let (markers, mut keys): (Vec<Key>, Vec<Key>) =
            objects.into_iter().map(|o| o.location).partition(|k| k.filename() == Some(FOLDER_MARKER));
        self.shared.delete_all(path, std::mem::take(&mut keys))?;
        self.shared.delete_all(path, markers)
    }
    fn lock(&self, _path: &Path, _kind: LockKind, _wait: bool) -> Result<LockGuard, StorageError> {
        // Object stores have no locks; see `lock_free_grace`.
        Ok(LockGuard::new(Box::new(())))
    }
    fn lock_free_grace(&self, _path: &Path) -> Option<Duration> {
        Some(self.shared.options.grace)
    }
    fn remote(&self, _path: &Path) -> bool {
        true
    }
    fn usage(&self, path: &Path) -> Result<(u64, u64), StorageError> {
        if let Ok(meta) = self.shared.head(path) {
            return Ok((meta.size, 1));
        }
        let objects = self.shared.list_all(path)?;
        if objects.is_empty() {
            return Err(StorageError::NotFound { path: path.to_path_buf() });
        }
        let files = objects.iter().filter(|o| o.location.filename() != Some(FOLDER_MARKER));
        Ok(files.fold((0, 0), |(b, n), o| (b + o.size, n + 1)))
    }
    fn modified_ms(&self, path: &Path) -> Result<u64, StorageError> {
        let newest = match self.shared.head(path) {
            Ok(meta) => Some(meta.last_modified),
            Err(StorageError::NotFound { .. }) => self.shared.list_all(path)?.iter().map(|o| o.last_modified).max(),
            Err(e) => return Err(e),
        };
        let newest = newest.ok_or_else(|| StorageError::NotFound { path: path.to_path_buf() })?;
        Ok(u64::try_from(newest.timestamp_millis()).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::s3_testing::S3Test;
    use crate::storage::RequestTally;

    #[test]
    fn bodies_go_unsigned_only_over_tls() {
        assert!(over_tls(None), "AWS's own endpoints are https");
        assert!(over_tls(Some("https://s3.example.org")));
        assert!(over_tls(Some("HTTPS://s3.example.org:9000")));
        for plain in ["http://127.0.0.1:9000", "127.0.0.1:9000", "", "htt", "http://https://x"] {
            assert!(!over_tls(Some(plain)), "{plain}");
        }
    }

    /// The test server (plain HTTP) takes unsigned bodies when asked for them.
    #[test]
    fn unsigned_bodies_round_trip() {
        let s3 = S3Test::with_options(|o| o.unsigned_payload = Some(true));
        let (s, p) = (s3.storage(), s3.path("unsigned"));
        let data: Vec<u8> = (0..12u32 << 20).map(|i| (i % 239) as u8).collect();
        let mut h = s.create(&p).unwrap();
        h.write_all(&data).unwrap();
        h.finish().unwrap();
        s.write_atomic(&s3.path("small"), b"abc").unwrap();
        assert!(*s.read_all(&p).unwrap() == data[..]);
        assert_eq!(&*s.read_all(&s3.path("small")).unwrap(), b"abc");
    }

    #[test]
    fn parts_double_every_parts_per_size_and_stop_at_the_largest_part() {
        let mib = 1usize << 20;
        assert_eq!(part_size_at(16 * mib, 1000, 0), 16 * mib);
        assert_eq!(part_size_at(16 * mib, 1000, 999), 16 * mib);
        assert_eq!(part_size_at(16 * mib, 1000, 1000), 32 * mib);
        assert_eq!(part_size_at(16 * mib, 1000, 9999), MAX_PART_SIZE);
        assert_eq!(part_size_at(16 * mib, 0, 5), (16 * mib) << 5, "0 parts per size counts as 1");
        assert_eq!(part_size_at(16 * mib, 1, usize::MAX), MAX_PART_SIZE, "no overflow");
        assert_eq!(part_size_at(usize::MAX, 1, 3), MAX_PART_SIZE, "no overflow");
        // The 10,000 parts S3 allows hold its largest object (5 TiB) from 16 MiB first parts,
        // and nearly as much (4.9 TiB) from the smallest, the default.
        let total = |first| (0..10_000).map(|i| part_size_at(first, 1000, i) as u128).sum::<u128>();
        assert!(total(16 * mib) >= 5u128 << 40);
        assert_eq!(total(5 * mib), 5 * (1u128 << 20) * 1000 * 1023);
    }

    /// A file written through a real S3 server in growing parts (5, 10 and 20 MiB, then the last 2 MiB)
    /// reads back whole and took one PUT per part.
    #[test]
    fn a_large_file_goes_up_in_growing_parts() {
        let s3 = S3Test::with_options(|o| o.parts_per_size = 1);
        let s = s3.storage();
        let p = s3.path("big");
        let chunk: Vec<u8> = (0..(1u32 << 20) + 7).map(|i| (i % 251) as u8).collect();
        let before = s3.requests();
        let mut h = s.create(&p).unwrap();
        for _ in 0..37 {
            h.write_all(&chunk).unwrap();
        }
        h.finish().unwrap();
        let cost = s3.requests().since(&before);
        let len = 37 * chunk.len();
        assert_eq!(cost.put, 4, "{cost:?}");
        assert_eq!(cost.multipart, 2, "start and complete: {cost:?}");
        let all = s.read_all(&p).unwrap();
        assert_eq!(all.len(), len);
        assert!(all.chunks(chunk.len()).all(|c| c == &chunk[..]));
    }

    /// A range longer than a piece costs only its GETs (the first answer carries the object's
    /// size, no HEAD); one past the end is refused after at most `vfs.s3.read_concurrency` GETs.
    #[test]
    fn long_ranges_cost_no_head_and_hostile_lengths_few_gets() {
        let s3 = S3Test::with_options(|o| o.read_concurrency = 3);
        let s = s3.storage();
        let p = s3.path("long");
        let data: Vec<u8> = (0..12u32 << 20).map(|i| (i % 241) as u8).collect();
        s.write_atomic(&p, &data).unwrap();
        let before = s3.requests();
        let got = s.read_range(&p, 5, 10 << 20).unwrap();
        assert!(*got == data[5..5 + (10 << 20)]);
        let cost = s3.requests().since(&before);
        assert_eq!(cost, RequestTally { get: 10, ..RequestTally::default() }, "pieces of 1 MiB");
        for len in [(12 << 20) - 4, 1 << 40, u64::MAX - 100] {
            let before = s3.requests();
            match s.read_range(&p, 5, len) {
                Err(StorageError::OutOfBounds { size, offset: 5, .. }) => assert_eq!(size, 12 << 20),
                other => panic!("{len}: expected OutOfBounds, got {other:?}"),
            }
            let cost = s3.requests().since(&before);
            assert!(cost.get <= 3 && cost.total() <= 4, "{len}: {cost:?}");
        }
    }
}
