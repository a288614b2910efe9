//! A real S3 server for Tessera's tests: SigV4-authenticated S3 over HTTP on loopback, built on
//! [`s3s`] (protocol, authentication) and `s3s-fs` (buckets are folders under a root), with
//! the conformance fixes Tessera's commit protocol needs and fault injection between client and
//! server. Not for production: one access key, no TLS, no versioning.
//!
//! Used two ways:
//! - in process, from Rust tests: [`S3Server::start`] serves on `127.0.0.1:<free port>` from
//!   its own thread and tokio runtime until dropped;
//! - as the `tessera-s3-server` binary, from Python tests (`python/tests/s3server.py`): it
//!   prints `listening http://127.0.0.1:PORT` and exits on SIGTERM, SIGINT or when its stdin
//!   closes, so a killed test process cannot leak it.
//!
//! # Conformance fixes over s3s-fs
//! See `src/store.rs` for details: conditional writes (`If-None-Match: *`,
//! `If-Match`) are atomic per key, so of N racing creates exactly one wins, as on S3; GET and
//! HEAD honour `If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since`; a PUT
//! whose `Content-MD5` or `x-amz-checksum-*` header does not match its body is refused before it
//! touches the object; a key that is a prefix of other keys (a folder on disk) is a missing
//! object for HEAD, GET and DELETE instead of a 500; writes to a missing bucket answer
//! `NoSuchBucket`; parts of a multipart upload are stored at their final offsets in one file, so
//! completion renames that file instead of copying the parts (s3s-fs copied and hashed all of
//! them again), and checks the part ETags the client names; a listing beside deletes leaves out
//! the keys deleted while it walks (s3s-fs failed the whole listing with 500).
//!
//! # Faults
//! Configured by [`Faults`] (at start, with [`S3Server::set_faults`], or via the binary's
//! control endpoint `PUT /__tessera/faults`), injected in the HTTP layer before s3s:
//! - `error`: the request body is read and discarded, the request is **not** executed, and the
//!   answer is 503 `SlowDown` (or 500 `InternalError`) with an S3 XML error body. Clients such
//!   as `object_store` retry these.
//! - `slow`: sleep `slow_ms`, then execute normally.
//! - `drop`: the request is read, **not** executed, and the connection is closed without a
//!   response. `object_store` sees an incomplete message and retries.
//! - `drop_after`: the request **is executed**, then the connection is closed instead of
//!   answering.
//!
//! # The ambiguous write (what the engine must handle)
//! `drop_after` on a conditional create (`PutMode::Create`, `If-None-Match: *`) is the case
//! where the PUT happened but the client never heard. `object_store` retries the request
//! (a closed connection counts as "request not sent"), the retry finds the object and gets
//! 412, which `object_store` reports as `AlreadyExists`, although the object holds *this*
//! client's bytes. A commit protocol built on conditional create must therefore, on
//! `AlreadyExists`, read the object and compare it with what it wrote before concluding that
//! another writer won. The same holds for `PutMode::Update` (`Precondition` after an applied
//! update) and for deletes (a retried delete of an object it already removed succeeds).
//!
//! # Known s3s-fs differences from S3 (not fixed here)
//! Keys map to paths, so `a` and `a/b` cannot both exist (`a` would be a file and a folder):
//! the second write is refused with 400 `InvalidRequest` saying so;
//! list pagination is by continuation token (the last key) and rescans the bucket on every
//! page; a checksum sent as an aws-chunked *trailer* is still compared only after the object
//! was replaced; a deleted object's ETag/checksum side file stays behind; no listing of
//! multipart uploads (`ListMultipartUploads`); no versioning, ACLs or tagging.

mod body;
mod classify;
mod faults;
mod listing;
mod multipart;
mod parts;
mod server;
mod service;
mod store;

pub use faults::{Counts, FaultCounts, FaultKind, Faults, FaultsError};
pub use server::{DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY, S3Server, ServerOptions};
