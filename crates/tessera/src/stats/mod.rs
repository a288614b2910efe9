//! Statistics: a process-wide registry of counters and function timers, modelled on TileDB's
//! statistics, for finding wasted work (tiles read but barely used, cache misses, poor
//! compression).
//!
//! Off by default. [`enable`] / [`disable`] switch recording for the whole process; [`reset`] sets
//! everything to zero; [`dump`] returns the text report and [`json`] the same data as JSON;
//! [`snapshot`] returns the raw values. Typical use: `enable()`, run a query, `dump()`,
//! `disable()`.
//!
//! # Cost
//!
//! Every recording function ([`add`], [`timer`]) first does one relaxed load of a global
//! `AtomicBool` and returns when it is off. When on, a counter is one relaxed `fetch_add` on a
//! static `AtomicU64` and a timer two (calls and nanoseconds) plus reading the clock twice. No
//! locks, no allocation. The names are fixed enums, [`Counter`] and [`Timer`] (declared in one
//! table each; adding one is adding a line there).
//!
//! # Timers
//!
//! `let _t = stats::timer(Timer::ReaderRead);` records one call and the elapsed nanoseconds when
//! `_t` is dropped, if statistics were enabled when it was created (regardless of whether they
//! still are). Times are summed over threads: ten threads each spending 100 ns in `vfs_read`
//! report 1000 ns.
//!
//! # The summary
//!
//! The report ends with a summary in TileDB's shape:
//!
//! ```text
//! Summary:
//! --------
//! Hardware concurrency: 4
//! Reads:
//!   Read query submits: 1
//!   Tile cache hit ratio: 0 / 1  (0.0%)
//!   Fixed-length tile data copy-to-read ratio: 4 / 1000 bytes (0.4%)
//!   Var-length tile data copy-to-read ratio: 0 / 0 bytes
//!   Total tile data copy-to-read ratio: 4 / 1000 bytes (0.4%)
//!   Read compression ratio: 1245 / 1274 bytes (1.0x)
//! Writes:
//!   Write query submits: 0
//!   Tiles written: 0
//!   Write compression ratio: 0 / 0 bytes
//! ```
//!
//! Definitions (counter names as in [`Counter`]):
//!
//! - Hardware concurrency: threads the machine can run at once (cores times hardware threads),
//!   as given by `std::thread::available_parallelism`.
//! - Read query submits: `sm_query_submit_read`.
//! - Tile cache hit ratio = `reader_attr_tile_cache_hits / reader_num_attr_tiles_touched`: of the
//!   tiles read queries needed (hit or miss), how many the tile cache served. Reading the same
//!   tile twice with a cache large enough gives 1 / 2. Higher is better.
//! - Fixed-length tile data copy-to-read ratio = `reader_num_fixed_cell_bytes_copied /
//!   reader_num_fixed_cell_bytes_read`: bytes of fixed-size attribute values copied into results
//!   over the unfiltered bytes of fixed-size attribute tiles fetched from storage. Tiles served by
//!   the tile cache are not fetched from storage and not counted in the denominator, so the ratio
//!   exceeds 100% when the cache saves reads. Lower than 100% means wasted work (tiles read for
//!   few of their cells). Higher is better.
//! - Var-length tile data copy-to-read ratio: the same for var-sized attributes
//!   (`reader_num_var_cell_bytes_copied / reader_num_var_cell_bytes_read`).
//! - Total tile data copy-to-read ratio: (fixed + var numerators) / (fixed + var denominators).
//! - Read compression ratio = `(reader_num_bytes_after_filtering + reader_num_metadata_bytes_read)
//!   / (reader_num_tile_bytes_read + reader_num_metadata_bytes_read)`: bytes returned from storage
//!   reads after filtering over bytes read from storage, filtered or not (schema and fragment
//!   metadata count on both sides). Every filter counts as a "compressor".
//! - Write query submits: `sm_query_submit_write`.
//! - Tiles written: `writer_num_attr_tiles_written`, over all write queries.
//! - Write compression ratio = `(writer_num_bytes_before_filtering +
//!   writer_num_metadata_bytes_written) / (writer_num_bytes_written +
//!   writer_num_metadata_bytes_written)`: unfiltered bytes requested to be written over bytes
//!   written to storage after filtering.
//!
//! Formatting: `n / d`, then for percentages ` (p%)` with one decimal and for compression ratios
//! ` (r.rx)` with one decimal, both rounded half up from the exact integer quotient. A ratio
//! whose denominator is 0 is printed without the parenthesis (`0 / 0 bytes`; the hit ratio, which
//! has no unit, as `0 / 0`). The hit ratio keeps TileDB's two spaces before its parenthesis
//! (`0 / 1  (0.0%)`).
//!
//! [`json`] gives `{"summary": {...}, "timers": {name: {"calls", "ns"}}, "counters": {name:
//! value}}`; the summary holds the fields of [`Summary`], each ratio as `{"numerator",
//! "denominator", "ratio"}` with `"ratio": null` when the denominator is 0.
//!
//! # Tests
//!
//! The registry is global, so tests that enable it or read exact values must not overlap: they
//! run inside `with_stats_lock` (test builds only), which holds a static mutex and leaves the
//! registry disabled and zeroed before and after. Any test that calls [`enable`] must do so inside
//! it. Tests that merely run instrumented code without the lock still record while another test
//! has statistics enabled, so exact assertions should use values only the locked test produces
//! (the test-only `test_counter` / `test_timer`, a per-instance statistic) or lower bounds.

mod names;
mod report;

#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;
use std::time::Instant;

pub use names::{Counter, Timer};
pub use report::{Ratio, Snapshot, Summary, TimerStats};

/// Whether recording is on.
static ENABLED: AtomicBool = AtomicBool::new(false);
/// Counter values, indexed by [`Counter::index`].
static COUNTERS: [AtomicU64; Counter::COUNT] = [const { AtomicU64::new(0) }; Counter::COUNT];
/// Timer calls, indexed by [`Timer::index`].
static TIMER_CALLS: [AtomicU64; Timer::COUNT] = [const { AtomicU64::new(0) }; Timer::COUNT];
/// Timer nanoseconds, indexed by [`Timer::index`].
static TIMER_NS: [AtomicU64; Timer::COUNT] = [const { AtomicU64::new(0) }; Timer::COUNT];
/// Hooks ([`add`] and [`timer`] calls) reached while recording was on.
static HOOK_CALLS: AtomicU64 = AtomicU64::new(0);

/// Turns recording on for the whole process.
pub fn enable() {
    ENABLED.store(true, Relaxed);
}

/// Turns recording off for the whole process (values are kept; see [`reset`]).
pub fn disable() {
    ENABLED.store(false, Relaxed);
}

/// Whether recording is on.
#[inline]
pub fn is_enabled() -> bool {
    ENABLED.load(Relaxed)
}

/// Sets every counter and timer to zero (whether or not recording is on).
pub fn reset() {
    for a in COUNTERS.iter().chain(&TIMER_CALLS).chain(&TIMER_NS) {
        a.store(0, Relaxed);
    }
    HOOK_CALLS.store(0, Relaxed);
}

/// How many recording hooks ([`add`] and [`timer`] calls) ran while recording was on since the
/// last [`reset`]. The same code reaches the same hooks with recording off, where each costs a
/// relaxed load and a branch: this count times that cost bounds what disabled statistics cost.
pub fn hook_calls() -> u64 {
    HOOK_CALLS.load(Relaxed)
}

/// Adds `n` to a counter, if recording is on.
#[inline]
pub fn add(counter: Counter, n: u64) {
    if !is_enabled() {
        return;
    }
    HOOK_CALLS.fetch_add(1, Relaxed);
    COUNTERS[counter.index()].fetch_add(n, Relaxed);
}

/// Starts timing a call of `timer`; the returned guard records one call and the elapsed time
/// when dropped, if recording was on now.
#[inline]
pub fn timer(timer: Timer) -> TimerGuard {
    let start = if is_enabled() {
        HOOK_CALLS.fetch_add(1, Relaxed);
        Some(Instant::now())
    } else {
        None
    };
    TimerGuard { timer, start }
}

/// Times a call (see [`timer`]); records when dropped.
#[must_use = "the call is timed until the guard is dropped"]
#[derive(Debug)]
pub struct TimerGuard {
    timer: Timer,
    /// `None` when recording was off at the start.
    start: Option<Instant>,
}

impl TimerGuard {
    /// Stops the timer now (same as dropping it).
    pub fn stop(self) {}
}

impl Drop for TimerGuard {
    fn drop(&mut self) {
        if let Some(start) = self.start {
            let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let i = self.timer.index();
            TIMER_CALLS[i].fetch_add(1, Relaxed);
            TIMER_NS[i].fetch_add(ns, Relaxed);
        }
    }
}

/// The threads the machine can run at once (computed once).
fn hardware_concurrency() -> u64 {
    static HC: OnceLock<u64> = OnceLock::new();
    *HC.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u64))
}

/// The current values of every counter and timer.
pub fn snapshot() -> Snapshot {
    let mut s = Snapshot::default();
    s.hardware_concurrency = hardware_concurrency();
    for &c in Counter::ALL {
        s.set_counter(c, COUNTERS[c.index()].load(Relaxed));
    }
    for &t in Timer::ALL {
        let (calls, ns) = (TIMER_CALLS[t.index()].load(Relaxed), TIMER_NS[t.index()].load(Relaxed));
        s.set_timer(t, TimerStats { calls, ns });
    }
    s
}

/// The text report of the current values: a title, the function statistics table, the counter
/// statistics table and the summary (see the module doc).
pub fn dump() -> String {
    snapshot().report()
}

/// The current values as JSON: `{"summary": {...}, "timers": {name: {"calls", "ns"}},
/// "counters": {name: value}}` (see the module doc).
pub fn json() -> String {
    snapshot().to_json()
}

/// Runs `f` with exclusive use of the global registry, for tests (of any module) that enable
/// statistics or assert exact values. Holds a static mutex (a panicking holder does not poison
/// it for the others) and leaves the registry disabled and zeroed before `f` and after it (also
/// if `f` panics). Tests that call [`enable`] must do so only inside this.
#[cfg(test)]
pub(crate) fn with_stats_lock<R>(f: impl FnOnce() -> R) -> R {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Disables and zeroes the registry when dropped.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            disable();
            reset();
        }
    }

    let _lock = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    disable();
    reset();
    let _restore = Restore;
    f()
}
