//! Tests of the registry (inside `with_stats_lock`) and of the report arithmetic and layout (on
//! hand-built snapshots, no global state).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;

use super::report::{COUNTER_NAME_WIDTH, FUNC_NAME_WIDTH};
use super::*;

/// A snapshot with the given counters set and hardware concurrency 4.
fn snap(values: &[(Counter, u64)]) -> Snapshot {
    let mut s = Snapshot::default();
    s.hardware_concurrency = 4;
    for &(c, v) in values {
        s.set_counter(c, v);
    }
    s
}

/// The "Reads:" lines of a snapshot's summary (the 6 lines after "Reads:").
fn reads_section(s: &Snapshot) -> String {
    let text = s.summary().to_string();
    let lines: Vec<&str> = text.lines().collect();
    let i = lines.iter().position(|l| *l == "Reads:").unwrap();
    lines[i..i + 7].join("\n")
}

/// The "Writes:" lines of a snapshot's summary.
fn writes_section(s: &Snapshot) -> String {
    let text = s.summary().to_string();
    let i = text.find("Writes:").unwrap();
    text[i..].trim_end().to_owned()
}

/// Counters for a read: hits/touched, fixed copied/read, var copied/read, tile bytes after
/// filtering/read, metadata bytes.
#[allow(clippy::too_many_arguments)]
fn read_snap(
    submits: u64,
    (hits, touched): (u64, u64),
    (fc, fr): (u64, u64),
    (vc, vr): (u64, u64),
    (after, tile_read): (u64, u64),
    meta: u64,
) -> Snapshot {
    snap(&[
        (Counter::SmQuerySubmitRead, submits),
        (Counter::ReaderAttrTileCacheHits, hits),
        (Counter::ReaderNumAttrTilesTouched, touched),
        (Counter::ReaderNumFixedCellBytesCopied, fc),
        (Counter::ReaderNumFixedCellBytesRead, fr),
        (Counter::ReaderNumVarCellBytesCopied, vc),
        (Counter::ReaderNumVarCellBytesRead, vr),
        (Counter::ReaderNumBytesAfterFiltering, after),
        (Counter::ReaderNumTileBytesRead, tile_read),
        (Counter::ReaderNumMetadataBytesRead, meta),
    ])
}

// ---- names ----

#[test]
fn names_are_unique_prefixed_and_fit_the_tables() {
    let prefixes = ["vfs_", "filter_", "compressor_", "reader_", "writer_", "cache_", "sm_", "consolidator_", "test_"];
    let mut seen = HashSet::new();
    for (i, c) in Counter::ALL.iter().enumerate() {
        assert_eq!(c.index(), i);
        assert!(seen.insert(c.name()), "duplicate {c}");
        assert!(prefixes.iter().any(|p| c.name().starts_with(p)), "{c}");
        assert!(c.name().len() < COUNTER_NAME_WIDTH, "{c} too long for the counter table");
    }
    for (i, t) in Timer::ALL.iter().enumerate() {
        assert_eq!(t.index(), i);
        assert!(seen.insert(t.name()), "duplicate {t}");
        assert!(prefixes.iter().any(|p| t.name().starts_with(p)), "{t}");
        assert!(t.name().len() < FUNC_NAME_WIDTH, "{t} too long for the function table");
    }
    assert_eq!(Counter::COUNT, Counter::ALL.len());
    assert_eq!(Counter::ReaderNumAttrTilesTouched.name(), "reader_num_attr_tiles_touched");
    assert_eq!(Timer::CompressorZstdDecompress.to_string(), "compressor_zstd_decompress");
}

// ---- the global registry ----

#[test]
fn off_by_default_and_off_records_nothing() {
    with_stats_lock(|| {
        assert!(!is_enabled());
        add(Counter::TestCounter, 5);
        add(Counter::VfsReadTotalBytes, 7);
        drop(timer(Timer::TestTimer));
        timer(Timer::VfsRead).stop();
        // No test enables statistics outside the lock, so no counter can have counted. A timer
        // of another unit test (they run at the same time without the lock) started while the
        // previous locked test had recording on records when it stops, so only this test's own
        // timers are checked.
        let s = snapshot();
        assert!(s.counters().all(|(_, v)| v == 0), "{s:?}");
        assert_eq!(s.timer(Timer::TestTimer), TimerStats::default());
    });
}

#[test]
fn enable_disable_reset() {
    with_stats_lock(|| {
        enable();
        assert!(is_enabled());
        add(Counter::TestCounter, 3);
        add(Counter::TestCounter, 4);
        timer(Timer::TestTimer).stop();
        assert_eq!(snapshot().counter(Counter::TestCounter), 7);
        assert_eq!(snapshot().timer(Timer::TestTimer).calls, 1);

        disable();
        assert!(!is_enabled());
        add(Counter::TestCounter, 100);
        timer(Timer::TestTimer).stop();
        assert_eq!(snapshot().counter(Counter::TestCounter), 7, "values are kept, nothing added");
        assert_eq!(snapshot().timer(Timer::TestTimer).calls, 1);

        reset();
        // Only this test's own counter and timer: the library's other unit tests run at the same
        // time without the stats lock, and a timer of theirs started before `disable` records
        // when it stops, after `reset` (the race that made this test fail now and then).
        let s = snapshot();
        assert_eq!(s.counter(Counter::TestCounter), 0);
        assert_eq!(s.timer(Timer::TestTimer), TimerStats::default());

        enable();
        add(Counter::TestCounter, 1);
        assert_eq!(snapshot().counter(Counter::TestCounter), 1, "counting resumes from zero");
    });
}

#[test]
fn timer_records_calls_and_time_if_enabled_at_start() {
    with_stats_lock(|| {
        enable();
        {
            let _t = timer(Timer::TestTimer);
            std::thread::sleep(Duration::from_millis(3));
        }
        let t = snapshot().timer(Timer::TestTimer);
        assert_eq!(t.calls, 1);
        assert!(t.ns >= 3_000_000, "{t:?}");

        // Started while on, stopped while off: recorded.
        let g = timer(Timer::TestTimer);
        disable();
        g.stop();
        assert_eq!(snapshot().timer(Timer::TestTimer).calls, 2);

        // Started while off, stopped while on: not recorded.
        let g = timer(Timer::TestTimer);
        enable();
        g.stop();
        assert_eq!(snapshot().timer(Timer::TestTimer).calls, 2);
    });
}

#[test]
fn concurrent_adds_and_timers_sum_exactly() {
    with_stats_lock(|| {
        enable();
        const THREADS: u64 = 8;
        const PER_THREAD: u64 = 20_000;
        std::thread::scope(|s| {
            for t in 0..THREADS {
                s.spawn(move || {
                    for i in 0..PER_THREAD {
                        add(Counter::TestCounter, t + i % 3);
                        if i % 100 == 0 {
                            timer(Timer::TestTimer).stop();
                        }
                    }
                });
            }
        });
        let per_thread_extra: u64 = (0..PER_THREAD).map(|i| i % 3).sum();
        let expected: u64 = (0..THREADS).map(|t| t * PER_THREAD + per_thread_extra).sum();
        let s = snapshot();
        assert_eq!(s.counter(Counter::TestCounter), expected);
        assert_eq!(s.timer(Timer::TestTimer).calls, THREADS * PER_THREAD / 100);
    });
}

#[test]
fn with_stats_lock_restores_after_panic() {
    let r = std::panic::catch_unwind(|| {
        with_stats_lock(|| {
            enable();
            add(Counter::TestCounter, 1);
            panic!("boom");
        })
    });
    assert!(r.is_err());
    with_stats_lock(|| {
        assert!(!is_enabled());
        assert_eq!(snapshot().counter(Counter::TestCounter), 0);
    });
}

#[test]
fn global_dump_and_json_list_every_name() {
    with_stats_lock(|| {
        enable();
        add(Counter::TestCounter, 42);
        disable();
        let text = dump();
        let json: Value = serde_json::from_str(&json()).unwrap();
        for c in Counter::ALL {
            assert!(text.contains(&format!("  {c},")), "{c}");
            assert!(json["counters"][c.name()].is_u64(), "{c}");
        }
        for t in Timer::ALL {
            assert!(text.contains(&format!("  {t},")), "{t}");
            assert!(json["timers"][t.name()]["calls"].is_u64(), "{t}");
        }
        assert_eq!(json["counters"]["test_counter"], 42);
        assert!(text.contains(&format!("Hardware concurrency: {}\n", hardware_concurrency())));
        assert!(hardware_concurrency() >= 1);
    });
}

// ---- summary arithmetic and formatting (hand-set values, from the TileDB document) ----

#[test]
fn summary_first_example_of_the_document() {
    let mut s = read_snap(1, (0, 1), (4, 1000), (0, 0), (1245 - 274, 1274 - 274), 274);
    s.hardware_concurrency = 2;
    // The document prints "4 / 1000 bytes (0.0%)" for this example, which contradicts its own
    // definition (4 / 1000 = 0.4%) and its other examples (198 / 5001 = 4.0%): the arithmetic
    // wins.
    let expected = "\
Summary:
--------
Hardware concurrency: 2
Reads:
  Read query submits: 1
  Tile cache hit ratio: 0 / 1  (0.0%)
  Fixed-length tile data copy-to-read ratio: 4 / 1000 bytes (0.4%)
  Var-length tile data copy-to-read ratio: 0 / 0 bytes
  Total tile data copy-to-read ratio: 4 / 1000 bytes (0.4%)
  Read compression ratio: 1245 / 1274 bytes (1.0x)
Writes:
  Write query submits: 0
  Tiles written: 0
  Write compression ratio: 0 / 0 bytes
";
    assert_eq!(s.summary().to_string(), expected);
}

#[test]
fn summary_read_examples_of_the_document() {
    // One tile for the whole array.
    let s = read_snap(1, (0, 1), (144_000_000, 576_105_488), (0, 0), (576_000_000 - 1000, 576_105_488 - 1000), 1000);
    assert_eq!(
        reads_section(&s),
        "Reads:
  Read query submits: 1
  Tile cache hit ratio: 0 / 1  (0.0%)
  Fixed-length tile data copy-to-read ratio: 144000000 / 576105488 bytes (25.0%)
  Var-length tile data copy-to-read ratio: 0 / 0 bytes
  Total tile data copy-to-read ratio: 144000000 / 576105488 bytes (25.0%)
  Read compression ratio: 576000000 / 576105488 bytes (1.0x)"
    );

    // One tile per row.
    let s = read_snap(1, (0, 3000), (144_000_000, 144_060_000), (0, 0), (144_000_000, 144_060_000), 0);
    assert_eq!(
        reads_section(&s),
        "Reads:
  Read query submits: 1
  Tile cache hit ratio: 0 / 3000  (0.0%)
  Fixed-length tile data copy-to-read ratio: 144000000 / 144060000 bytes (100.0%)
  Var-length tile data copy-to-read ratio: 0 / 0 bytes
  Total tile data copy-to-read ratio: 144000000 / 144060000 bytes (100.0%)
  Read compression ratio: 144000000 / 144060000 bytes (1.0x)"
    );

    // Two overlapping queries, small cache: > 100% copy-to-read.
    let s = read_snap(2, (198, 5001), (240_048_000, 230_640_060), (0, 0), (230_544_000, 230_640_060), 0);
    assert_eq!(
        reads_section(&s),
        "Reads:
  Read query submits: 2
  Tile cache hit ratio: 198 / 5001  (4.0%)
  Fixed-length tile data copy-to-read ratio: 240048000 / 230640060 bytes (104.1%)
  Var-length tile data copy-to-read ratio: 0 / 0 bytes
  Total tile data copy-to-read ratio: 240048000 / 230640060 bytes (104.1%)
  Read compression ratio: 230544000 / 230640060 bytes (1.0x)"
    );

    // Same with a 100 MB cache.
    let s = read_snap(2, (697, 5001), (240_048_000, 206_678_080), (0, 0), (206_592_000, 206_678_080), 0);
    assert_eq!(
        reads_section(&s),
        "Reads:
  Read query submits: 2
  Tile cache hit ratio: 697 / 5001  (13.9%)
  Fixed-length tile data copy-to-read ratio: 240048000 / 206678080 bytes (116.1%)
  Var-length tile data copy-to-read ratio: 0 / 0 bytes
  Total tile data copy-to-read ratio: 240048000 / 206678080 bytes (116.1%)
  Read compression ratio: 206592000 / 206678080 bytes (1.0x)"
    );
}

#[test]
fn summary_write_examples_of_the_document() {
    let w = |before: u64, written: u64, meta: u64| {
        snap(&[
            (Counter::SmQuerySubmitWrite, 1),
            (Counter::WriterNumAttrTilesWritten, 12000),
            (Counter::WriterNumBytesBeforeFiltering, before),
            (Counter::WriterNumBytesWritten, written),
            (Counter::WriterNumMetadataBytesWritten, meta),
        ])
    };
    assert_eq!(
        writes_section(&w(576_000_000, 576_284_005 - 384_160, 384_160)),
        "Writes:
  Write query submits: 1
  Tiles written: 12000
  Write compression ratio: 576384160 / 576284005 bytes (1.0x)"
    );
    // (TileDB's own figures come from compressed metadata: 384160 bytes in, 35325 out. Tessera's
    // metadata is not filtered, so it counts the same on both sides.)
    assert_eq!(
        writes_section(&w(576_384_160 - 35_325, 53_101_395, 35_325)),
        "Writes:
  Write query submits: 1
  Tiles written: 12000
  Write compression ratio: 576384160 / 53136720 bytes (10.8x)"
    );
}

#[test]
fn summary_sums_var_and_fixed_and_metadata() {
    let s = read_snap(3, (5, 8), (10, 40), (30, 60), (700, 300), 100).summary();
    assert_eq!(s.read_query_submits, 3);
    assert_eq!(s.tile_cache_hit_ratio, Ratio::new(5, 8));
    assert_eq!(s.fixed_copy_to_read_ratio, Ratio::new(10, 40));
    assert_eq!(s.var_copy_to_read_ratio, Ratio::new(30, 60));
    assert_eq!(s.total_copy_to_read_ratio, Ratio::new(40, 100));
    assert_eq!(s.read_compression_ratio, Ratio::new(800, 400));
    let text = s.to_string();
    assert!(text.contains("  Tile cache hit ratio: 5 / 8  (62.5%)\n"), "{text}");
    assert!(text.contains("  Fixed-length tile data copy-to-read ratio: 10 / 40 bytes (25.0%)\n"));
    assert!(text.contains("  Var-length tile data copy-to-read ratio: 30 / 60 bytes (50.0%)\n"));
    assert!(text.contains("  Total tile data copy-to-read ratio: 40 / 100 bytes (40.0%)\n"));
    assert!(text.contains("  Read compression ratio: 800 / 400 bytes (2.0x)\n"));
}

#[test]
fn summary_zero_denominators() {
    let text = Snapshot::default().summary().to_string();
    assert_eq!(
        text,
        "\
Summary:
--------
Hardware concurrency: 1
Reads:
  Read query submits: 0
  Tile cache hit ratio: 0 / 0
  Fixed-length tile data copy-to-read ratio: 0 / 0 bytes
  Var-length tile data copy-to-read ratio: 0 / 0 bytes
  Total tile data copy-to-read ratio: 0 / 0 bytes
  Read compression ratio: 0 / 0 bytes
Writes:
  Write query submits: 0
  Tiles written: 0
  Write compression ratio: 0 / 0 bytes
"
    );
    // Nonzero numerator over zero: still no parenthesis (no division by zero).
    let s = read_snap(0, (3, 0), (7, 0), (0, 0), (9, 0), 0);
    let text = s.summary().to_string();
    assert!(text.contains("  Tile cache hit ratio: 3 / 0\n"));
    assert!(text.contains("  Fixed-length tile data copy-to-read ratio: 7 / 0 bytes\n"));
    assert!(text.contains("  Read compression ratio: 9 / 0 bytes\n"));
    assert!(!text.contains(" \n"), "no trailing spaces");
}

#[test]
fn ratio_rounding_is_exact_half_up() {
    let pct = |n, d| Ratio::new(n, d).percent_text();
    let times = |n, d| Ratio::new(n, d).times_text();
    assert_eq!(pct(0, 1).as_deref(), Some("0.0"));
    assert_eq!(pct(1, 1).as_deref(), Some("100.0"));
    assert_eq!(pct(1, 3).as_deref(), Some("33.3"));
    assert_eq!(pct(2, 3).as_deref(), Some("66.7"));
    assert_eq!(pct(1, 16).as_deref(), Some("6.3"), "6.25 rounds half up");
    assert_eq!(pct(1, 2000).as_deref(), Some("0.1"), "0.05 rounds half up");
    assert_eq!(pct(1, 2001).as_deref(), Some("0.0"));
    assert_eq!(pct(4, 1000).as_deref(), Some("0.4"));
    assert_eq!(pct(3, 2).as_deref(), Some("150.0"), "over 100%");
    assert_eq!(pct(1, 0), None);
    assert_eq!(pct(u64::MAX, 1).as_deref(), Some("1844674407370955161500.0"), "no overflow");
    assert_eq!(times(1, 4).as_deref(), Some("0.3"), "0.25 rounds half up");
    assert_eq!(times(5, 2).as_deref(), Some("2.5"));
    assert_eq!(times(576_384_160, 53_136_720).as_deref(), Some("10.8"));
    assert_eq!(times(0, 0), None);
    assert_eq!(Ratio::new(1, 4).value(), Some(0.25));
    assert_eq!(Ratio::new(1, 0).value(), None);
}

// ---- report layout and JSON ----

#[test]
fn report_layout_matches_the_document() {
    let mut s = snap(&[(Counter::WriterNumBytesBeforeFiltering, 576_000_000), (Counter::CacheLruInserts, 0)]);
    s.set_timer(Timer::WriterWrite, TimerStats { calls: 1, ns: 66_025_267_985 });
    s.set_timer(Timer::VfsWrite, TimerStats { calls: 12002, ns: 1_553_079_894 });
    let text = s.report();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].len(), 102);
    assert!(lines[0].starts_with("===================================== Tessera Statistics Report ="));
    assert_eq!(lines[1], "");
    assert_eq!(lines[2], "Individual function statistics:");
    // Header and rule exactly as TileDB's.
    assert_eq!(
        lines[3],
        "  Function name                                                          # calls       Total time (ns)"
    );
    assert_eq!(lines[4], format!("  {}", "-".repeat(100)));
    // Rows exactly as TileDB's (same column positions).
    assert!(text.contains(
        "\n  writer_write,                                                                1,         66025267985\n"
    ));
    assert!(text.contains(
        "\n  vfs_write,                                                               12002,          1553079894\n"
    ));
    assert!(text.contains(
        "\n  reader_read,                                                                 0,                   0\n"
    ));
    for t in Timer::ALL {
        let row = lines.iter().find(|l| l.starts_with(&format!("  {t},"))).unwrap();
        assert_eq!(row.len(), 101, "{row}");
        assert_eq!(row.as_bytes()[80], b',', "{row}");
    }
    let i = lines.iter().position(|l| *l == "Individual counter statistics:").unwrap();
    assert_eq!(lines[i - 1], "");
    assert_eq!(lines[i + 1], "  Counter name                                                             Value");
    assert_eq!(lines[i + 2], format!("  {}", "-".repeat(78)));
    assert!(text.contains("\n  writer_num_bytes_before_filtering,                                   576000000\n"));
    assert!(text.contains("\n  cache_lru_inserts,                                                           0\n"));
    for c in Counter::ALL {
        let row = lines.iter().find(|l| l.starts_with(&format!("  {c},"))).unwrap();
        assert_eq!(row.len(), 80, "{row}");
    }
    // Order: timers, counters, then a blank line and the summary at the end.
    let rows_end = i + 3 + Counter::COUNT;
    assert_eq!(lines[rows_end], "");
    assert_eq!(lines[rows_end + 1], "Summary:");
    assert!(text.ends_with(&s.summary().to_string()));
    assert!(text.ends_with("Write compression ratio: 576000000 / 0 bytes\n"));
}

#[test]
fn json_parses_and_matches_the_snapshot() {
    let mut s = read_snap(2, (697, 5001), (240_048_000, 206_678_080), (5, 0), (206_592_000, 206_678_080), 0);
    s.set_counter(Counter::WriterNumBytesBeforeFiltering, 10);
    s.set_counter(Counter::CacheLruEvictions, u64::MAX);
    s.set_timer(Timer::ReaderRead, TimerStats { calls: 3, ns: 1234 });
    let v: Value = serde_json::from_str(&s.to_json()).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 3);

    let counters = v["counters"].as_object().unwrap();
    assert_eq!(counters.len(), Counter::COUNT);
    for (c, value) in s.counters() {
        assert_eq!(counters[c.name()].as_u64(), Some(value), "{c}");
    }
    let timers = v["timers"].as_object().unwrap();
    assert_eq!(timers.len(), Timer::COUNT);
    for (t, value) in s.timers() {
        assert_eq!(timers[t.name()]["calls"].as_u64(), Some(value.calls), "{t}");
        assert_eq!(timers[t.name()]["ns"].as_u64(), Some(value.ns), "{t}");
    }

    let sum = &v["summary"];
    assert_eq!(sum["hardware_concurrency"], 4);
    assert_eq!(sum["read_query_submits"], 2);
    assert_eq!(sum["tile_cache_hit_ratio"]["numerator"], 697);
    assert_eq!(sum["tile_cache_hit_ratio"]["denominator"], 5001);
    // (serde_json parses floats to within an ulp, not always exactly.)
    let close = |v: &Value, x: f64| (v.as_f64().unwrap() - x).abs() <= 1e-12 * x;
    assert!(close(&sum["tile_cache_hit_ratio"]["ratio"], 697.0 / 5001.0));
    assert!(close(&sum["fixed_copy_to_read_ratio"]["ratio"], 240_048_000.0 / 206_678_080.0));
    assert_eq!(sum["var_copy_to_read_ratio"]["numerator"], 5);
    assert!(sum["var_copy_to_read_ratio"]["ratio"].is_null(), "zero denominator");
    assert_eq!(sum["total_copy_to_read_ratio"]["numerator"], 240_048_005);
    assert_eq!(sum["read_compression_ratio"]["denominator"], 206_678_080);
    assert_eq!(sum["write_query_submits"], 0);
    assert_eq!(sum["tiles_written"], 0);
    assert_eq!(sum["write_compression_ratio"]["numerator"], 10);
    assert!(sum["write_compression_ratio"]["ratio"].is_null());
    assert_eq!(s.to_json_value()["summary"], s.summary().to_json_value());
}
