//! Integration tests of the engine, built as one binary.
#![allow(clippy::unwrap_used, clippy::panic, clippy::type_complexity, missing_docs, unreachable_pub)]

mod aggregate_model;
mod block_sums;
mod common;
mod concurrency;
mod crash_model;
mod dense_errors;
mod dense_model;
mod dense_reads;
mod dense_roundtrip;
mod dense_updates;
mod edges;
mod faults;
mod fragment_meta;
mod golden;
mod hostile;
mod metadata;
mod module_graph;
mod object_store;
mod races;
mod sparse_errors;
mod sparse_model;
mod sparse_whole_tiles;
mod tamper;
mod types_model;
mod update_index;
