//! Test support: a real S3 server on loopback (the workspace's `tessera-s3-server` dev tool, run
//! in process over a temporary folder) and an [`ObjectStorage`] connected to it.

use std::path::PathBuf;
use std::time::Duration;

use tessera_s3_server::{S3Server, ServerOptions};

use super::object::{ObjectStorage, ObjectStoreOptions};
use super::Storage;

/// The bucket every test server has.
pub(crate) const BUCKET: &str = "tessera-test";

/// A server and a backend of its bucket; both stop when dropped.
pub(crate) struct S3Test {
    storage: ObjectStorage,
    _server: S3Server,
    _dir: tempfile::TempDir,
}

impl S3Test {
    /// A fresh server with a one-hour vacuum grace.
    pub(crate) fn start() -> Self {
        Self::with_grace(Duration::from_secs(3600))
    }

    /// A fresh server; the backend's vacuum grace is `grace`.
    pub(crate) fn with_grace(grace: Duration) -> Self {
        Self::with_options(|o| o.grace = grace)
    }

    /// A fresh server; the backend has the test options with `change` applied.
    pub(crate) fn with_options(change: impl FnOnce(&mut ObjectStoreOptions)) -> Self {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let opts = ServerOptions { buckets: vec![BUCKET.into()], ..ServerOptions::default() };
        let server = S3Server::start(dir.path(), opts).expect("the S3 server starts");
        let mut backend = options(&server, Duration::from_secs(3600));
        change(&mut backend);
        let storage = ObjectStorage::new(BUCKET, backend).expect("the backend connects");
        Self { storage, _server: server, _dir: dir }
    }

    /// Requests the backend has sent so far.
    pub(crate) fn requests(&self) -> super::RequestTally {
        self.storage.requests()
    }

    /// The backend.
    pub(crate) fn storage(&self) -> &dyn Storage {
        &self.storage
    }

    /// `s3://tessera-test/<rel>`.
    pub(crate) fn path(&self, rel: &str) -> PathBuf {
        PathBuf::from(format!("s3://{BUCKET}/{rel}"))
    }
}

/// Backend options for `server`'s test credentials.
pub(crate) fn options(server: &S3Server, grace: Duration) -> ObjectStoreOptions {
    ObjectStoreOptions {
        endpoint: Some(server.endpoint()),
        region: Some("us-east-1".into()),
        access_key_id: Some(server.access_key().into()),
        secret_access_key: Some(server.secret_key().into()),
        session_token: None,
        allow_http: Some(true),
        virtual_hosted_style: false,
        unsigned_payload: None,
        max_retries: 10,
        retry_timeout: Duration::from_secs(60),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(30),
        part_size: 5 << 20,
        parts_per_size: 1000,
        upload_concurrency: 4,
        read_chunk_size: 1 << 20,
        read_concurrency: 4,
        grace,
    }
}
