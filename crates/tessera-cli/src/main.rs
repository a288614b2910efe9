//! The `tessera` command (placeholder until the CLI lands).
fn main() {}
