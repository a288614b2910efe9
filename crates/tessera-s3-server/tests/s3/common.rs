//! Helpers shared by the test modules: a started server and an `object_store` client for it.

use std::time::Duration;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::{BackoffConfig, RetryConfig};
use tessera_s3_server::{S3Server, ServerOptions};

pub(crate) const BUCKET: &str = "tessera";

pub(crate) fn start() -> (tempfile::TempDir, S3Server) {
    let dir = tempfile::tempdir().unwrap();
    let opts = ServerOptions { buckets: vec![BUCKET.into()], ..ServerOptions::default() };
    let server = S3Server::start(&dir.path().join("root"), opts).unwrap();
    (dir, server)
}

/// A client as the engine configures one: path-style, plain HTTP, quick retries.
pub(crate) fn client_with(server: &S3Server, bucket: &str, secret: &str) -> AmazonS3 {
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(50),
            base: 2.0,
        },
        max_retries: 10,
        retry_timeout: Duration::from_secs(20),
    };
    AmazonS3Builder::new()
        .with_endpoint(server.endpoint())
        .with_allow_http(true)
        .with_access_key_id(server.access_key())
        .with_secret_access_key(secret)
        .with_region("us-east-1")
        .with_bucket_name(bucket)
        .with_virtual_hosted_style_request(false)
        .with_retry(retry)
        .build()
        .unwrap()
}

pub(crate) fn client(server: &S3Server) -> AmazonS3 {
    client_with(server, BUCKET, server.secret_key())
}
