//! Fragments: the immutable, timestamped units every write produces. This module owns their
//! names (timestamps and order), their metadata (non-empty domain and tile index), the files a
//! fragment holds, and writing a fragment's files before it is committed (docs/format.md,
//! "Fragments"); committing is `crate::commit`'s.

mod block_index;
mod blocks;
mod chunks;
mod files;
mod metadata;
mod name;
mod rtree;
mod tile_stats;

pub use block_index::{BlockIndex, BLOCK_SUMS_FILE, INLINE_BLOCK_SUMS};
pub use blocks::BLOCK_LOG2;
pub(crate) use blocks::{block_sums, checksum_of_sums, hash_blocks, verify_sums, verify_tile, wants_blocks};
pub(crate) use chunks::{
    choose_chunk_log2, chunks_tile, encode_chunked_runs, encode_chunked_summarized, max_chunked_len,
    scattered_decode_bytes, stored_offsets, wants_chunks, AutoChunkSize, ChunkedRuns, ChunkedTile, TileRuns,
};
pub use chunks::{Chunk, ChunkIndex, TileChunks};
pub(crate) use files::{check_var_offsets, FileKind, FileSpec};
#[cfg(any(test, feature = "fuzzing"))]
pub(crate) use metadata::FOOTER_MAGIC as METADATA_FOOTER_MAGIC;
pub use metadata::{FragmentKind, FragmentMetadata, SparseIndex, TileEntry, METADATA_FILE, PACKED_FILE};
pub use name::FragmentName;
pub(crate) use name::{next_timestamp, now_ms};
pub use rtree::RTree;
pub(crate) use tile_stats::{summarize, summarize_runs, summarized_from_data};
pub use tile_stats::{AttrStats, Extremes, SummaryKind, TileStats, TileSummary};

pub use crate::paths::FRAGMENTS_DIR;
pub(crate) use rtree::FANOUT;
