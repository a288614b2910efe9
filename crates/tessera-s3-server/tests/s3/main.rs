//! Integration tests of the S3 test server, one binary: `object_store`'s S3 client against the
//! in-process server, and the `tessera-s3-server` binary's command line and lifecycle.

#![allow(clippy::unwrap_used, clippy::panic, missing_docs)]

mod binary;
mod common;
mod objects;
