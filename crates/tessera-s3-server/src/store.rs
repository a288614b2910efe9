//! [`Store`]: the S3 implementation behind the server, s3s-fs's `FileSystem` with the fixes
//! Tessera's commit protocol depends on.
//!
//! - **Atomic conditional writes.** s3s-fs checks `If-None-Match: *` / `If-Match` and then
//!   writes (check-then-act), so two concurrent conditional PUTs of one key can both succeed.
//!   Here every write of a key (PutObject, CopyObject's destination, CompleteMultipartUpload,
//!   DeleteObject, DeleteObjects) holds that key's lock for its whole check + write, and reads
//!   (GetObject, HeadObject) hold it shared while they open the file and load its ETag, so a
//!   read never pairs new bytes with an old ETag. Locks are striped by a hash of bucket + key:
//!   different keys may share a stripe (only costing concurrency), each operation takes its
//!   stripes in ascending order, so there is no deadlock.
//! - **Read conditions.** s3s-fs ignores `If-Match`, `If-None-Match`, `If-Modified-Since` and
//!   `If-Unmodified-Since` on GET and HEAD; they are evaluated here (412 / 304 as S3 answers).
//! - **Digests before the write.** s3s-fs compares `Content-MD5` and `x-amz-checksum-*` headers
//!   with the body only after renaming it over the object, so a rejected PUT (`BadDigest`) had
//!   already replaced it; here they are checked first (the body is in memory anyway).
//! - **Keys that are folders.** s3s-fs stores keys as paths, so a key that is a prefix of other
//!   keys (`a` beside `a/b`) is a folder: HEAD, GET and DELETE of it answered 500, which clients
//!   retry. Here it is a missing object (404, and a DELETE that does nothing), as on S3. Writing a
//!   key that would need a path to be both a file and a folder is refused with 400
//!   `InvalidRequest` naming the conflict (S3 would store both).
//! - **Multipart completion without a copy.** s3s-fs copies every part into a new file and
//!   hashes it again; here parts are stored at their final offsets in one file per upload
//!   (`parts.rs`), which completion renames over the object (`multipart.rs`), with the parts'
//!   ETags checked against those the client names, as S3 does. ListParts lists them in order
//!   (s3s-fs's did not sort, and panicked on files it did not write).
//! - **Listings beside deletes.** s3s-fs failed a whole listing with 500 when a file it had
//!   seen in the folder was deleted before it stat'ed it; `listing.rs` leaves such entries out
//!   (and caps `max-keys` at 1 000, and URL-encodes the answer when asked, as S3 does).
//! - **Missing buckets.** s3s-fs's PutObject creates a missing bucket's folder; here writes to
//!   a bucket that does not exist answer `NoSuchBucket` like S3.
//!
//! Plain PUTs are already atomic for readers in s3s-fs: the body goes to a temporary file in the
//! root, which is renamed over the object.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};
use s3s_fs::FileSystem;
use tokio::sync::{OwnedRwLockWriteGuard, RwLock};

use crate::body::FileRange;
use crate::listing;
use crate::multipart::{RequestedPart, Uploads, internal};

/// Number of lock stripes; a power of two is not needed, only enough to keep unrelated keys
/// mostly apart.
const STRIPES: usize = 64;

/// s3s-fs's `FileSystem` with atomic conditional writes, read conditions and bucket checks.
pub(crate) struct Store {
    inner: FileSystem,
    root: PathBuf,
    uploads: Uploads,
    stripes: Vec<std::sync::Arc<RwLock<()>>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("root", &self.root).finish_non_exhaustive()
    }
}

impl Store {
    /// A store serving the buckets (folders) under `root`.
    pub(crate) fn new(root: PathBuf) -> std::io::Result<Self> {
        let inner = FileSystem::new(&root)
            .map_err(|e| std::io::Error::other(format!("s3s-fs on {}: {e:?}", root.display())))?;
        let stripes = (0..STRIPES).map(|_| std::sync::Arc::new(RwLock::new(()))).collect();
        // s3s-fs names its upload files under the canonical root.
        let uploads = Uploads::new(root.canonicalize()?);
        Ok(Self { inner, root, uploads, stripes })
    }

    fn stripe(&self, bucket: &str, key: &str) -> usize {
        let mut h = DefaultHasher::new();
        (bucket, key).hash(&mut h);
        // The remainder is < STRIPES, so it fits a usize on every platform.
        usize::try_from(h.finish() % STRIPES as u64).unwrap_or(0)
    }

    fn lock(&self, bucket: &str, key: &str) -> &std::sync::Arc<RwLock<()>> {
        &self.stripes[self.stripe(bucket, key)]
    }

    /// Write locks on the stripes of all `keys`, taken in ascending stripe order.
    async fn lock_all(&self, bucket: &str, keys: &[&str]) -> Vec<OwnedRwLockWriteGuard<()>> {
        let mut ids: Vec<usize> = keys.iter().map(|k| self.stripe(bucket, k)).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut guards = Vec::with_capacity(ids.len());
        for id in ids {
            guards.push(self.stripes[id].clone().write_owned().await);
        }
        guards
    }

    fn object_path(&self, bucket: &str, key: &str) -> PathBuf {
        self.root.join(bucket).join(key)
    }

    /// Whether `key` is a folder (a prefix of other keys), which S3 would call no object.
    fn is_folder(&self, bucket: &str, key: &str) -> bool {
        !key.ends_with('/') && self.object_path(bucket, key).is_dir()
    }

    /// Refuses an object key whose path, or one of whose parent paths, has the other kind
    /// (file or folder) already.
    fn check_storable(&self, bucket: &str, key: &str) -> S3Result<()> {
        if key.ends_with('/') {
            return Ok(());
        }
        let conflict = || {
            s3_error!(
                InvalidRequest,
                "key {key:?} would need one path to be both a file and a folder: this test server stores keys as \
                 paths, so a key cannot also be a prefix of other keys (S3 allows it)"
            )
        };
        let path = self.object_path(bucket, key);
        // A folder left empty by deletes holds no keys any more: it may become the object.
        if path.is_dir() && std::fs::remove_dir(&path).is_err() {
            return Err(conflict());
        }
        let bucket_dir = self.root.join(bucket);
        let mut parent = path.parent();
        while let Some(p) = parent {
            if p == bucket_dir || !p.starts_with(&bucket_dir) {
                break;
            }
            if p.is_file() {
                return Err(conflict());
            }
            parent = p.parent();
        }
        Ok(())
    }

    fn require_bucket(&self, bucket: &str) -> S3Result<()> {
        if s3s::path::check_bucket_name(bucket) && self.root.join(bucket).is_dir() {
            Ok(())
        } else {
            Err(s3_error!(NoSuchBucket))
        }
    }
}

/// Checks a PUT's `Content-MD5` and `x-amz-checksum-*` headers against its body, which is read
/// into memory and put back. Checksums sent as trailers (aws-chunked uploads) are left to
/// s3s-fs, which checks them after the write.
async fn verify_digests(input: &mut PutObjectInput) -> S3Result<()> {
    use futures::TryStreamExt;
    use s3s::crypto::Checksum as _;
    let has_checksum = input.checksum_crc32.is_some()
        || input.checksum_crc32c.is_some()
        || input.checksum_sha1.is_some()
        || input.checksum_sha256.is_some()
        || input.checksum_crc64nvme.is_some();
    if input.content_md5.is_none() && !has_checksum {
        return Ok(());
    }
    let Some(body) = input.body.take() else { return Err(s3_error!(IncompleteBody)) };
    let chunks: Vec<bytes::Bytes> = body.try_collect().await.map_err(|e| s3_error!(IncompleteBody, "{e}"))?;
    let data: bytes::Bytes = chunks.concat().into();

    if let Some(want) = &input.content_md5 {
        let mut md5 = s3s::crypto::Md5::new();
        md5.update(&data);
        if base64_simd::STANDARD.encode_to_string(md5.finalize()) != *want {
            return Err(s3_error!(BadDigest, "Content-MD5 does not match the body"));
        }
    }
    let mut hasher = s3s::checksum::ChecksumHasher::default();
    fn on<T: Default>(wanted: Option<&String>) -> Option<T> {
        wanted.map(|_| T::default())
    }
    hasher.crc32 = on(input.checksum_crc32.as_ref());
    hasher.crc32c = on(input.checksum_crc32c.as_ref());
    hasher.sha1 = on(input.checksum_sha1.as_ref());
    hasher.sha256 = on(input.checksum_sha256.as_ref());
    hasher.crc64nvme = on(input.checksum_crc64nvme.as_ref());
    hasher.update(&data);
    let got = hasher.finalize();
    let pairs = [
        ("crc32", &input.checksum_crc32, &got.checksum_crc32),
        ("crc32c", &input.checksum_crc32c, &got.checksum_crc32c),
        ("sha1", &input.checksum_sha1, &got.checksum_sha1),
        ("sha256", &input.checksum_sha256, &got.checksum_sha256),
        ("crc64nvme", &input.checksum_crc64nvme, &got.checksum_crc64nvme),
    ];
    for (name, want, got) in pairs {
        if want.is_some() && want != got {
            return Err(s3_error!(BadDigest, "x-amz-checksum-{name} does not match the body"));
        }
    }
    input.body = Some(StreamingBlob::from(s3s::Body::from(data)));
    Ok(())
}

/// The `If-*` headers of a GET or HEAD.
#[derive(Clone, Copy)]
struct ReadConditions<'a> {
    if_match: Option<&'a ETagCondition>,
    if_none_match: Option<&'a ETagCondition>,
    if_modified_since: Option<&'a Timestamp>,
    if_unmodified_since: Option<&'a Timestamp>,
}

/// Evaluates read conditions against an object's ETag and last-modified time as S3 does:
/// a failed `If-Match` (or, without `If-Match`, a failed `If-Unmodified-Since`) is 412; a
/// matching `If-None-Match` (or, without `If-None-Match`, an unmet `If-Modified-Since`) is 304.
/// Times compare at whole seconds, the resolution of HTTP dates.
fn check_read_conditions(
    c: &ReadConditions<'_>,
    etag: Option<&ETag>,
    last_modified: Option<&Timestamp>,
) -> S3Result<()> {
    let secs = |t: &Timestamp| time::OffsetDateTime::from(t.clone()).unix_timestamp();
    let matches = |cond: &ETagCondition, weak: bool| match (cond, etag) {
        (ETagCondition::Any, _) => true,
        (ETagCondition::ETag(want), Some(have)) => {
            if weak {
                have.weak_cmp(want)
            } else {
                have.strong_cmp(want)
            }
        }
        (ETagCondition::ETag(_), None) => false,
    };
    match (c.if_match, c.if_unmodified_since) {
        (Some(cond), _) if !matches(cond, false) => return Err(s3_error!(PreconditionFailed)),
        (None, Some(since)) if last_modified.is_some_and(|lm| secs(lm) > secs(since)) => {
            return Err(s3_error!(PreconditionFailed));
        }
        _ => {}
    }
    match (c.if_none_match, c.if_modified_since) {
        (Some(cond), _) if matches(cond, true) => Err(s3_error!(NotModified)),
        (None, Some(since)) if last_modified.is_some_and(|lm| secs(lm) <= secs(since)) => Err(s3_error!(NotModified)),
        _ => Ok(()),
    }
}

/// Delegates the listed operations to s3s-fs unchanged; the remaining items (the operations
/// this module changes) are passed through into the same `impl S3 for Store`.
macro_rules! impl_s3 {
    ($($op:ident($input:ty) -> $output:ty;)* ; $($rest:tt)*) => {
        #[async_trait::async_trait]
        impl S3 for Store {
            $(
                async fn $op(&self, req: S3Request<$input>) -> S3Result<S3Response<$output>> {
                    self.inner.$op(req).await
                }
            )*
            $($rest)*
        }
    };
}

impl_s3! {
    create_bucket(CreateBucketInput) -> CreateBucketOutput;
    delete_bucket(DeleteBucketInput) -> DeleteBucketOutput;
    get_bucket_location(GetBucketLocationInput) -> GetBucketLocationOutput;
    head_bucket(HeadBucketInput) -> HeadBucketOutput;
    list_buckets(ListBucketsInput) -> ListBucketsOutput;
    upload_part_copy(UploadPartCopyInput) -> UploadPartCopyOutput;
    ;

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        self.require_bucket(&req.input.bucket)?;
        let root = self.root.join(&req.input.bucket);
        Ok(S3Response::new(listing::list_objects(root, req.input).await?))
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.require_bucket(&req.input.bucket)?;
        let root = self.root.join(&req.input.bucket);
        Ok(S3Response::new(listing::list_objects_v2(root, req.input).await?))
    }

    async fn put_object(&self, mut req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        self.require_bucket(&req.input.bucket)?;
        verify_digests(&mut req.input).await?;
        let _guard = self.lock(&req.input.bucket, &req.input.key).write().await;
        self.check_storable(&req.input.bucket, &req.input.key)?;
        self.inner.put_object(req).await
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        self.require_bucket(&req.input.bucket)?;
        // Only the destination is locked: locking the source too could take two stripes out
        // of order against another copy.
        let _guard = self.lock(&req.input.bucket, &req.input.key).write().await;
        self.check_storable(&req.input.bucket, &req.input.key)?;
        self.inner.copy_object(req).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.require_bucket(&req.input.bucket)?;
        self.check_storable(&req.input.bucket, &req.input.key)?;
        self.inner.create_multipart_upload(req).await
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        let input = req.input;
        self.require_bucket(&input.bucket)?;
        let body = input.body.ok_or_else(|| s3_error!(IncompleteBody))?;
        let access_key = req.credentials.map(|c| c.access_key);
        let md5 = self.uploads.store_part(&input.upload_id, input.part_number, access_key.as_deref(), body).await?;
        Ok(S3Response::new(UploadPartOutput { e_tag: Some(ETag::Strong(md5)), ..Default::default() }))
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        let input = req.input;
        self.require_bucket(&input.bucket)?;
        let id = Uploads::checked_id(&input.upload_id)?;
        let state = self.uploads.state(&id);
        let _gate = state.gate.read().await;
        self.uploads.check_live(&id, req.credentials.as_ref().map(|c| c.access_key.as_str()))?;
        let marker = input.part_number_marker.unwrap_or(0);
        let max = input.max_parts.unwrap_or(1000).clamp(0, 1000);
        let uploads = self.uploads.clone();
        let listed = {
            let id = id.clone();
            tokio::task::spawn_blocking(move || uploads.list_stored(&id, marker, usize::try_from(max).unwrap_or(0)))
        };
        let (parts, truncated) = listed.await.map_err(internal)??;
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(id),
            part_number_marker: Some(marker),
            next_part_number_marker: parts.last().and_then(|p| p.part_number),
            max_parts: Some(max),
            is_truncated: Some(truncated),
            parts: Some(parts),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let id = Uploads::checked_id(&req.input.upload_id)?;
        let state = self.uploads.state(&id);
        let _gate = state.gate.write().await;
        self.uploads.check_live(&id, req.credentials.as_ref().map(|c| c.access_key.as_str()))?;
        let resp = self.inner.abort_multipart_upload(req).await;
        if resp.is_ok() {
            self.uploads.forget(&id);
        }
        resp
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        self.require_bucket(&input.bucket)?;
        let _guard = self.lock(&input.bucket, &input.key).write().await;
        self.check_storable(&input.bucket, &input.key)?;
        let object = self.object_path(&input.bucket, &input.key);
        let (uploads, bucket, key) = (self.uploads.clone(), input.bucket.clone(), input.key.clone());
        let current = {
            let (uploads, bucket, key, object) = (uploads.clone(), bucket.clone(), key.clone(), object.clone());
            tokio::task::spawn_blocking(move || uploads.current_e_tag(&bucket, &key, &object))
                .await
                .map_err(|e| s3_error!(InternalError, "{e}"))??
        };
        if input.if_none_match.as_ref().is_some_and(ETagCondition::is_any) && current.is_some() {
            return Err(s3_error!(PreconditionFailed, "Object already exists"));
        }
        match (&input.if_match, &current) {
            (Some(_), None) => return Err(s3_error!(PreconditionFailed, "Object does not exist")),
            (Some(ETagCondition::ETag(want)), Some(have)) if !want.strong_cmp(&ETag::Strong(have.clone())) => {
                return Err(s3_error!(PreconditionFailed, "ETag does not match"));
            }
            _ => {}
        }
        let parts: Vec<RequestedPart> = input
            .multipart_upload
            .and_then(|m| m.parts)
            .unwrap_or_default()
            .into_iter()
            .map(|p| RequestedPart { number: p.part_number.unwrap_or(0), e_tag: p.e_tag.map(ETag::into_value) })
            .collect();
        let (id, access_key) = (Uploads::checked_id(&input.upload_id)?, req.credentials.map(|c| c.access_key));
        // No part is written while the upload completes (see `parts.rs`).
        let state = self.uploads.state(&id);
        let _gate = state.gate.write().await;
        let e_tag = {
            let (uploads, id) = (uploads.clone(), id.clone());
            tokio::task::spawn_blocking(move || uploads.complete(&bucket, &key, &id, access_key.as_deref(), &parts, &object))
                .await
                .map_err(|e| s3_error!(InternalError, "{e}"))??
        };
        uploads.forget(&id);
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            e_tag: Some(ETag::Strong(e_tag)),
            ..Default::default()
        }))
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let _guard = self.lock(&req.input.bucket, &req.input.key).write().await;
        if self.is_folder(&req.input.bucket, &req.input.key) {
            return Ok(S3Response::new(DeleteObjectOutput::default()));
        }
        self.inner.delete_object(req).await
    }

    async fn delete_objects(&self, mut req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        self.require_bucket(&req.input.bucket)?;
        let keys: Vec<String> = req.input.delete.objects.iter().map(|o| o.key.clone()).collect();
        let key_refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let _guards = self.lock_all(&req.input.bucket, &key_refs).await;
        // Folders are not objects: report them deleted without passing them on (s3s-fs would
        // fail the whole request on them).
        let (folders, objects): (Vec<ObjectIdentifier>, Vec<ObjectIdentifier>) =
            std::mem::take(&mut req.input.delete.objects).into_iter().partition(|o| self.is_folder(&req.input.bucket, &o.key));
        let mut resp = if objects.is_empty() {
            S3Response::new(DeleteObjectsOutput::default())
        } else {
            req.input.delete.objects = objects;
            self.inner.delete_objects(req).await?
        };
        let deleted = resp.output.deleted.get_or_insert_with(Vec::new);
        deleted.extend(folders.into_iter().map(|o| DeletedObject { key: Some(o.key), version_id: o.version_id, ..Default::default() }));
        Ok(resp)
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        let _guard = self.lock(&req.input.bucket, &req.input.key).read().await;
        if self.is_folder(&req.input.bucket, &req.input.key) {
            return Err(s3_error!(NoSuchKey));
        }
        let i = &req.input;
        let (m, nm, ms, us) = (i.if_match.clone(), i.if_none_match.clone(), i.if_modified_since.clone(), i.if_unmodified_since.clone());
        let (path, range) = (self.object_path(&i.bucket, &i.key), i.range);
        let mut resp = self.inner.get_object(req).await?;
        let conds = ReadConditions { if_match: m.as_ref(), if_none_match: nm.as_ref(), if_modified_since: ms.as_ref(), if_unmodified_since: us.as_ref() };
        check_read_conditions(&conds, resp.output.e_tag.as_ref(), resp.output.last_modified.as_ref())?;
        // s3s-fs's body reads 4 KiB at a time (see `body.rs`): replaced by one that reads the
        // range in large pieces. The file is opened while this key's lock is held, as s3s-fs's
        // was, so the bytes and the ETag checked above belong to the same version even after
        // the lock is released.
        let file = tokio::fs::File::open(&path).await.map_err(internal)?.into_std().await;
        let file_len = file.metadata().map_err(internal)?.len();
        let bytes = match range {
            None => 0..file_len,
            Some(r) => r.check(file_len).map_err(|_| s3_error!(InvalidRange))?,
        };
        resp.output.body = Some(StreamingBlob::wrap(FileRange::new(file, bytes.start, bytes.end - bytes.start)));
        Ok(resp)
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        let _guard = self.lock(&req.input.bucket, &req.input.key).read().await;
        if self.is_folder(&req.input.bucket, &req.input.key) {
            return Err(s3_error!(NoSuchKey));
        }
        let i = &req.input;
        let (m, nm, ms, us) = (i.if_match.clone(), i.if_none_match.clone(), i.if_modified_since.clone(), i.if_unmodified_since.clone());
        let resp = self.inner.head_object(req).await?;
        let conds = ReadConditions { if_match: m.as_ref(), if_none_match: nm.as_ref(), if_modified_since: ms.as_ref(), if_unmodified_since: us.as_ref() };
        check_read_conditions(&conds, resp.output.e_tag.as_ref(), resp.output.last_modified.as_ref())?;
        Ok(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<T>(input: T) -> S3Request<T> {
        S3Request {
            input,
            method: http::Method::PUT,
            uri: http::Uri::from_static("/"),
            headers: http::HeaderMap::new(),
            extensions: http::Extensions::new(),
            credentials: None,
            region: None,
            service: None,
            trailing_headers: None,
        }
    }

    fn put(key: &str, body: &'static [u8], md5: Option<&[u8]>, sha256: Option<&str>) -> S3Request<PutObjectInput> {
        use s3s::crypto::Checksum as _;
        let mut b = PutObjectInput::builder();
        b.set_bucket("bkt".into());
        b.set_key(key.into());
        b.set_body(Some(StreamingBlob::from(s3s::Body::from(bytes::Bytes::from_static(body)))));
        b.set_content_md5(md5.map(|m| {
            let mut h = s3s::crypto::Md5::new();
            h.update(m);
            base64_simd::STANDARD.encode_to_string(h.finalize())
        }));
        b.set_checksum_sha256(sha256.map(String::from));
        request(b.build().unwrap())
    }

    async fn read(store: &Store, key: &str) -> Vec<u8> {
        use futures::TryStreamExt;
        let mut b = GetObjectInput::builder();
        b.set_bucket("bkt".into());
        b.set_key(key.into());
        let resp = store.get_object(request(b.build().unwrap())).await.unwrap();
        let chunks: Vec<bytes::Bytes> = resp.output.body.unwrap().try_collect().await.unwrap();
        chunks.concat()
    }

    /// s3s-fs renamed the body over the object before comparing digests, so a rejected PUT
    /// replaced the object.
    #[tokio::test]
    async fn a_put_with_a_wrong_digest_leaves_the_object_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("bkt")).unwrap();
        let store = Store::new(dir.path().to_path_buf()).unwrap();
        store.put_object(put("k", b"old", Some(b"old"), None)).await.unwrap();
        let err = store.put_object(put("k", b"new", Some(b"other"), None)).await.unwrap_err();
        assert_eq!(*err.code(), s3s::S3ErrorCode::BadDigest);
        assert_eq!(read(&store, "k").await, b"old");
        let wrong_sha = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="; // sha256 of ""
        let err = store.put_object(put("k", b"new", None, Some(wrong_sha))).await.unwrap_err();
        assert_eq!(*err.code(), s3s::S3ErrorCode::BadDigest);
        assert_eq!(read(&store, "k").await, b"old");
        store.put_object(put("k", b"", None, Some(wrong_sha))).await.unwrap();
        assert_eq!(read(&store, "k").await, b"");
    }

    fn ts(secs: i64, nanos: u32) -> Timestamp {
        let t =
            time::OffsetDateTime::from_unix_timestamp(secs).unwrap() + time::Duration::nanoseconds(i64::from(nanos));
        Timestamp::from(t)
    }

    #[test]
    fn read_conditions_follow_s3_precedence() {
        let etag = ETag::Strong("abc".into());
        let other = ETagCondition::ETag(ETag::Strong("zzz".into()));
        let same = ETagCondition::ETag(ETag::Strong("abc".into()));
        let lm = ts(100, 500_000_000);
        let none =
            ReadConditions { if_match: None, if_none_match: None, if_modified_since: None, if_unmodified_since: None };
        let check =
            |c: &ReadConditions<'_>| check_read_conditions(c, Some(&etag), Some(&lm)).map_err(|e| e.code().clone());

        assert!(check(&none).is_ok());
        assert!(check(&ReadConditions { if_match: Some(&same), ..none }).is_ok());
        assert_eq!(
            check(&ReadConditions { if_match: Some(&other), ..none }),
            Err(s3s::S3ErrorCode::PreconditionFailed)
        );
        assert_eq!(check(&ReadConditions { if_none_match: Some(&same), ..none }), Err(s3s::S3ErrorCode::NotModified));
        assert!(check(&ReadConditions { if_none_match: Some(&other), ..none }).is_ok());
        // Whole seconds: modified at 100.5 s is not modified since 100 s.
        let t100 = ts(100, 0);
        let t99 = ts(99, 0);
        assert_eq!(
            check(&ReadConditions { if_modified_since: Some(&t100), ..none }),
            Err(s3s::S3ErrorCode::NotModified)
        );
        assert!(check(&ReadConditions { if_modified_since: Some(&t99), ..none }).is_ok());
        assert_eq!(
            check(&ReadConditions { if_unmodified_since: Some(&t99), ..none }),
            Err(s3s::S3ErrorCode::PreconditionFailed)
        );
        // If-Match true overrides a failed If-Unmodified-Since; If-None-Match false overrides
        // an unmet If-Modified-Since.
        assert!(check(&ReadConditions { if_match: Some(&same), if_unmodified_since: Some(&t99), ..none }).is_ok());
        assert!(check(&ReadConditions { if_none_match: Some(&other), if_modified_since: Some(&t100), ..none }).is_ok());
    }
}
