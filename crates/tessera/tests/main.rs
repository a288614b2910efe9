//! Integration tests of the engine, built as one binary.

mod common;
mod dense_errors;
mod dense_model;
mod dense_roundtrip;
mod faults;
