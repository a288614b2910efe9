//! Tessera: a storage engine for dense and sparse multi-dimensional arrays.
//!
//! Arrays are stored as immutable, timestamped fragments; each fragment groups cells into
//! space tiles that are filtered (compressed) one by one and checksummed; a read merges
//! fragments so the newest value of every cell wins. See `docs/architecture.md` for the map of
//! modules and `docs/format.md` for the bytes on disk.
//!
//! ```no_run
//! use tessera::{Array, ArraySchema, ArrayType, Attribute, AttrInput, Context, Config, Datatype,
//!               Dimension, Layout, Mode, Subarray};
//! # fn main() -> tessera::Result<()> {
//! let ctx = Context::new(Config::new())?;
//! let schema = ArraySchema::builder(ArrayType::Dense)
//!     .dim(Dimension::new("rows", Datatype::Int64, (1, 100), 10))
//!     .dim(Dimension::new("cols", Datatype::Int64, (1, 100), 10))
//!     .attr(Attribute::new("a", Datatype::Int32))
//!     .build()?;
//! Array::create(&ctx, "img", &schema)?;
//! let values: Vec<i32> = (0..100 * 100).collect();
//! let w = Array::open(&ctx, "img", Mode::Write)?;
//! w.write(&Subarray::full(&schema), Layout::RowMajor,
//!         &[AttrInput::fixed("a", bytemuck::cast_slice(&values))])?;
//! let r = Array::open(&ctx, "img", Mode::Read)?;
//! let part = r.read(&Subarray::from_ranges(&[(1, 3), (1, 100)]), &["a"], Layout::RowMajor)?;
//! assert_eq!(part.cells, 300);
//! # Ok(()) }
//! ```

mod aggregate;
mod array;
pub mod cache;
mod checksum;
mod commit;
mod condition;
mod config;
mod consolidate;
mod context;
mod error;
mod fast_hash;
mod filter;
mod footer;
mod fragment;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzz;
mod geometry;
mod group;
mod input;
mod meta;
mod paths;
mod read;
mod retaining_alloc;
mod schema;
mod snapshot;
pub mod stats;
mod storage;
mod uninit;
mod write;

pub use aggregate::{AggregateOp, AggregateRequest, AggregateValue};
pub use array::{Array, Mode, MAX_DELETE_RECTS, MAX_WRITE_TIMESTAMP, META_DIR};
pub use commit::COMMITS_DIR;
pub use condition::{AttrRef, Bound as BoundCondition, CmpOp, Condition, Value as ConditionValue};
pub use config::{Config, Limits, TileChunking, KEYS as CONFIG_KEYS};
pub use consolidate::{
    consolidate, consolidate_fragment_metadata, plan as plan_consolidation, vacuum, ConsolidationPlan, Selection,
    VacuumReport,
};
pub use context::Context;
pub use error::{ArrayError, Error, ErrorContext, QueryError, Result};
pub use filter::{Filter, FilterError, FilterPipeline};
pub use footer::FORMAT_VERSION;
pub use fragment::{
    AttrStats, BlockIndex, Chunk, ChunkIndex, Extremes, FragmentKind, FragmentMetadata, FragmentName, RTree,
    SparseIndex, SummaryKind, TileChunks, TileEntry, TileStats, TileSummary, BLOCK_LOG2, BLOCK_SUMS_FILE,
    FRAGMENTS_DIR, INLINE_BLOCK_SUMS, METADATA_FILE, PACKED_FILE,
};
pub use geometry::{curve_key, dense_tile_parts, DimRange, Layout, Subarray, TilePart};
pub use group::{object_kind, Group, ObjectKind};
pub use input::{AttrInput, CoordInput};
pub use meta::{consolidate_metadata, MetaValue, MAX_META_FILE_BYTES, MAX_META_KEY_BYTES};
pub use read::{
    units_read_in_part, AttrBuffer, AttrData, ReadQuery, ReadResult, ReadStatus, SparseReadQuery, DIRECT_PIECE,
};
pub use retaining_alloc::RetainingAllocator;
pub use schema::{
    default_coord_filters, display_datetime, format_datetime, parse_datetime, ArraySchema, ArraySchemaBuilder,
    ArrayType, Attribute, CellOrder, CellValNum, Datatype, Dimension, Domain, Extent, SchemaError, TimeUnit, NAT,
    SCHEMA_DIR, SCHEMA_VERSION,
};
pub use storage::{
    Bytes, FailingStorage, ImmutableStream, InstrumentedStorage, LocalStorage, LockGuard, LockKind, MemoryStorage,
    ObjectStorage, ObjectStoreOptions, PowerLossStorage, ReadMode, RequestKind, RequestTally, RoutedStorage,
    StagedFile, Storage, StorageError, WriteHandle, COLD_PROBE, S3_SCHEME,
};
pub use write::{DenseWriter, SparseWriter};
