//! The fixed sets of statistics: [`Counter`] and [`Timer`]. Each is declared once, in the tables
//! below, by a doc comment, a variant and its report name; adding a statistic is adding one entry
//! (the report, the snapshot and the JSON pick it up from [`Counter::ALL`] / [`Timer::ALL`]).
//!
//! Names carry their subsystem as a prefix (`vfs_`, `filter_`, `compressor_`, `reader_`,
//! `writer_`, `cache_`, `sm_`, `consolidator_`), as in TileDB's report.

/// Declares a statistics enum, its `ALL` table (in declaration = report order), `COUNT`, `name()`
/// and `index()`. Variants may carry a `#[cfg(...)]` (used for the test-only entries).
macro_rules! stat_names {
    (
        $(#[$meta:meta])*
        pub enum $Enum:ident {
            $(
                $(#[doc = $doc:literal])*
                $(#[cfg($cfg:meta)])?
                $Variant:ident => $name:literal,
            )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $Enum {
            $(
                $(#[doc = $doc])*
                $(#[cfg($cfg)])?
                $Variant,
            )*
        }

        impl $Enum {
            /// Every value, in report order (`ALL[i].index() == i`).
            pub const ALL: &'static [$Enum] = &[$($(#[cfg($cfg)])? $Enum::$Variant,)*];
            /// The number of values.
            pub const COUNT: usize = Self::ALL.len();

            /// The name printed in the report and used as the JSON key.
            pub const fn name(self) -> &'static str {
                match self {
                    $($(#[cfg($cfg)])? $Enum::$Variant => $name,)*
                }
            }

            /// Position in [`Self::ALL`] and in the registry's arrays.
            #[inline]
            pub const fn index(self) -> usize {
                self as usize
            }
        }

        impl std::fmt::Display for $Enum {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

stat_names! {
    /// A counter: a sum of values passed to [`crate::stats::add`] (summed over threads).
    pub enum Counter {
        // ---- vfs: the storage layer ----
        /// Bytes read from storage by any read (tiles, fragment metadata, schemas, commit files).
        VfsReadTotalBytes => "vfs_read_total_bytes",
        /// Read requests made to storage.
        VfsReadNumRequests => "vfs_read_num_requests",
        /// Bytes written to storage by any write (tiles, metadata, schemas, commit files).
        VfsWriteTotalBytes => "vfs_write_total_bytes",
        /// Write requests made to storage.
        VfsWriteNumRequests => "vfs_write_num_requests",
        /// HTTP GET requests of objects or byte ranges of them sent to an object store (every
        /// attempt, retries included).
        VfsObjectGetRequests => "vfs_object_get_requests",
        /// HTTP HEAD requests (object sizes and existence) sent to an object store.
        VfsObjectHeadRequests => "vfs_object_head_requests",
        /// HTTP PUT requests (whole objects and multipart parts) sent to an object store.
        VfsObjectPutRequests => "vfs_object_put_requests",
        /// Listing requests (one page of up to 1,000 keys each) sent to an object store.
        VfsObjectListRequests => "vfs_object_list_requests",
        /// Delete requests (single and bulk) sent to an object store.
        VfsObjectDeleteRequests => "vfs_object_delete_requests",
        /// Requests that start, complete or abort a multipart upload.
        VfsObjectMultipartRequests => "vfs_object_multipart_requests",
        /// Bytes of object bodies received from an object store (GETs).
        VfsObjectBytesReceived => "vfs_object_bytes_received",
        /// Bytes of object bodies sent to an object store (PUTs and parts).
        VfsObjectBytesSent => "vfs_object_bytes_sent",
        /// Attempts that failed with a retryable answer (HTTP 5xx or 429) or a transport error
        /// (refused, reset or timed-out connection); each is retried with backoff while
        /// `vfs.s3.max_retries` and `vfs.s3.retry_timeout_ms` allow.
        VfsObjectFailedAttempts => "vfs_object_failed_attempts",

        // ---- reader: read queries ----
        /// Attribute tiles needed by read queries, whether served by the tile cache or fetched
        /// from storage: one per tile of each fragment file a query needs (one tile cache lookup
        /// each; a var-sized attribute's offsets and values tiles count separately). Denominator of
        /// the tile cache hit ratio.
        ReaderNumAttrTilesTouched => "reader_num_attr_tiles_touched",
        /// Tiles counted in `reader_num_attr_tiles_touched` that were served by the tile cache.
        /// Numerator of the tile cache hit ratio (so hits <= touched).
        ReaderAttrTileCacheHits => "reader_attr_tile_cache_hits",
        /// Unfiltered (uncompressed) bytes of fixed-size attribute tiles fetched from storage to
        /// serve reads. Tiles served by the tile cache are NOT counted: this is what makes the
        /// copy-to-read ratio exceed 100% when the cache saves reads.
        ReaderNumFixedCellBytesRead => "reader_num_fixed_cell_bytes_read",
        /// Bytes of fixed-size attribute values copied into read results.
        ReaderNumFixedCellBytesCopied => "reader_num_fixed_cell_bytes_copied",
        /// Unfiltered bytes of var-sized attribute tiles (offsets and values) fetched from storage
        /// to serve reads; tiles served by the tile cache are not counted.
        ReaderNumVarCellBytesRead => "reader_num_var_cell_bytes_read",
        /// Bytes of var-sized attribute data (offsets and values) copied into read results.
        ReaderNumVarCellBytesCopied => "reader_num_var_cell_bytes_copied",
        /// Stored (filtered) bytes of tiles fetched from storage by read queries (cache hits are
        /// not fetched, so not counted).
        ReaderNumTileBytesRead => "reader_num_tile_bytes_read",
        /// Unfiltered size of the tiles counted in `reader_num_tile_bytes_read`: the bytes the
        /// filter pipelines returned for them.
        ReaderNumBytesAfterFiltering => "reader_num_bytes_after_filtering",
        /// Bytes of array schemas and fragment metadata read from storage (counted on both sides
        /// of the read compression ratio).
        ReaderNumMetadataBytesRead => "reader_num_metadata_bytes_read",
        /// Cells of small fragments put in the update indexes of open arrays (each index counts
        /// once, when the first read that needs it builds it).
        ReaderUpdateIndexCells => "reader_update_index_cells",
        /// Result cells a query condition was evaluated on (after the merge of fragments).
        ReaderConditionCells => "reader_condition_cells",
        /// Result cells that passed a query condition.
        ReaderConditionPassed => "reader_condition_passed",
        /// Dense reads with a condition: copies from tiles dropped because none of their result
        /// cells passed (those tiles are not fetched for the other attributes).
        ReaderConditionCopiesSkipped => "reader_condition_copies_skipped",
        /// Result cells aggregates were computed on (after the merge of fragments and the
        /// condition, if any).
        ReaderAggregateCells => "reader_aggregate_cells",
        /// Batches of result cells aggregates were computed on (each read within
        /// `sm.memory_budget`).
        ReaderAggregateBatches => "reader_aggregate_batches",
        /// Tiles whose stored summaries (`sm.aggregate.tile_stats`) an aggregate used instead
        /// of reading their cells.
        ReaderAggregateTilesFromStats => "reader_aggregate_tiles_from_stats",
        /// Cells of those tiles.
        ReaderAggregateCellsFromStats => "reader_aggregate_cells_from_stats",

        // ---- writer: write queries ----
        /// Tiles written by write queries: one per tile of each fragment file written.
        WriterNumAttrTilesWritten => "writer_num_attr_tiles_written",
        /// Unfiltered bytes of the tiles written (the input of the filter pipelines).
        WriterNumBytesBeforeFiltering => "writer_num_bytes_before_filtering",
        /// Stored bytes of the tiles written (the output of the filter pipelines).
        WriterNumBytesWritten => "writer_num_bytes_written",
        /// Bytes of fragment metadata and commit files written (counted on both sides of the write
        /// compression ratio).
        WriterNumMetadataBytesWritten => "writer_num_metadata_bytes_written",

        // ---- cache: the LRU tile cache ----
        /// Values stored in a tile cache (new keys and replacements; oversize values are not).
        CacheLruInserts => "cache_lru_inserts",
        /// Tile cache lookups that found the tile.
        CacheLruReadHits => "cache_lru_read_hits",
        /// Tile cache lookups that did not find the tile (every lookup of a disabled cache).
        CacheLruReadMisses => "cache_lru_read_misses",
        /// Entries dropped from a tile cache to make room (not replacements or invalidations).
        CacheLruEvictions => "cache_lru_evictions",

        // ---- sm: query submission ----
        /// Read query submits.
        SmQuerySubmitRead => "sm_query_submit_read",
        /// Write query submits.
        SmQuerySubmitWrite => "sm_query_submit_write",
        /// Query submits with row-major layout.
        SmQuerySubmitLayoutRowMajor => "sm_query_submit_layout_row_major",
        /// Query submits with column-major layout.
        SmQuerySubmitLayoutColMajor => "sm_query_submit_layout_col_major",
        /// Query submits in global order.
        SmQuerySubmitLayoutGlobalOrder => "sm_query_submit_layout_global_order",
        /// Query submits with unordered layout.
        SmQuerySubmitLayoutUnordered => "sm_query_submit_layout_unordered",

        // ---- consolidator ----
        /// Fragments merged by consolidation (the inputs, not the fragment produced).
        ConsolidatorNumFragmentsConsolidated => "consolidator_num_fragments_consolidated",
        /// Queries a sparse consolidation read its inputs with: one per box of the bands of the
        /// global order it was cut into (1: not cut).
        ConsolidatorBands => "consolidator_bands",

        /// Test-only: recorded by no engine code, so tests can assert exact values while other
        /// tests run.
        #[cfg(test)]
        TestCounter => "test_counter",
    }
}

stat_names! {
    /// A timed function: number of calls and total nanoseconds, summed over threads (so the total
    /// can exceed the wall-clock time of parallel work). Timed with [`crate::stats::timer`].
    pub enum Timer {
        // ---- vfs ----
        /// Storage reads.
        VfsRead => "vfs_read",
        /// Storage writes.
        VfsWrite => "vfs_write",
        /// Storage fsyncs (files and folders).
        VfsSync => "vfs_sync",
        /// Object-store GET requests (time to the response headers and body).
        VfsObjectGet => "vfs_object_get",
        /// Object-store HEAD requests.
        VfsObjectHead => "vfs_object_head",
        /// Object-store PUT requests.
        VfsObjectPut => "vfs_object_put",
        /// Object-store listing requests.
        VfsObjectList => "vfs_object_list",
        /// Object-store delete requests.
        VfsObjectDelete => "vfs_object_delete",
        /// Object-store multipart start, complete and abort requests.
        VfsObjectMultipart => "vfs_object_multipart",

        // ---- filters ----
        /// Running a filter pipeline forward (filtering a tile for writing).
        FilterPipelineRunForward => "filter_pipeline_run_forward",
        /// Running a filter pipeline in reverse (unfiltering a tile that was read).
        FilterPipelineRunReverse => "filter_pipeline_run_reverse",
        /// Gzip compression.
        CompressorGzipCompress => "compressor_gzip_compress",
        /// Gzip decompression.
        CompressorGzipDecompress => "compressor_gzip_decompress",
        /// Zstandard compression.
        CompressorZstdCompress => "compressor_zstd_compress",
        /// Zstandard decompression.
        CompressorZstdDecompress => "compressor_zstd_decompress",
        /// LZ4 compression.
        CompressorLz4Compress => "compressor_lz4_compress",
        /// LZ4 decompression.
        CompressorLz4Decompress => "compressor_lz4_decompress",
        /// Run-length encoding.
        CompressorRleCompress => "compressor_rle_compress",
        /// Run-length decoding.
        CompressorRleDecompress => "compressor_rle_decompress",
        /// Delta filter, forward.
        FilterDeltaEncode => "filter_delta_encode",
        /// Delta filter, reverse.
        FilterDeltaDecode => "filter_delta_decode",
        /// Byte-shuffle filter, forward.
        FilterByteshuffleEncode => "filter_byteshuffle_encode",
        /// Byte-shuffle filter, reverse.
        FilterByteshuffleDecode => "filter_byteshuffle_decode",

        // ---- reader ----
        /// A whole read query.
        ReaderRead => "reader_read",
        /// Planning a read: which fragments and tiles, which cells of each.
        ReaderPlan => "reader_plan",
        /// Obtaining the tiles a read needs (tile cache lookups and storage reads).
        ReaderFetchTiles => "reader_fetch_tiles",
        /// Unfiltering the tiles fetched from storage.
        ReaderUnfilterTiles => "reader_unfilter_tiles",
        /// Building an open array's update index of its small fragments' cells (once per open).
        ReaderBuildUpdateIndex => "reader_build_update_index",
        /// Copying fixed-size cells into the results.
        ReaderCopyFixedCells => "reader_copy_fixed_cells",
        /// Copying var-sized cells into the results.
        ReaderCopyVarCells => "reader_copy_var_cells",

        // ---- writer ----
        /// A whole write query.
        WriterWrite => "writer_write",
        /// Cutting the input into tiles.
        WriterPrepareTiles => "writer_prepare_tiles",
        /// Filtering the tiles.
        WriterFilterTiles => "writer_filter_tiles",
        /// Writing the filtered tiles to storage.
        WriterWriteTiles => "writer_write_tiles",
        /// Writing the fragment metadata and the commit.
        WriterCommit => "writer_commit",

        // ---- sm: array and query operations ----
        /// Opening an array for reads.
        SmArrayOpenForReads => "sm_array_open_for_reads",
        /// Opening an array for writes.
        SmArrayOpenForWrites => "sm_array_open_for_writes",
        /// A query submit (read or write).
        SmQuerySubmit => "sm_query_submit",

        // ---- consolidator ----
        /// A consolidation.
        ConsolidatorConsolidate => "consolidator_consolidate",

        /// Test-only: timed by no engine code.
        #[cfg(test)]
        TestTimer => "test_timer",
    }
}
