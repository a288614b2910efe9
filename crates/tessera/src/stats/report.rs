//! Values of the registry at one moment ([`Snapshot`]), the derived [`Summary`] and the two
//! renderings: the text report (TileDB's layout) and JSON. Pure functions of a snapshot, so the
//! arithmetic and the formatting are tested on hand-set values.

use std::fmt::Write as _;

use serde_json::{json, Map, Value};

use super::names::{Counter, Timer};

/// Calls and total time of one [`Timer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerStats {
    /// Completed timed calls.
    pub calls: u64,
    /// Total nanoseconds of those calls, summed over threads.
    pub ns: u64,
}

/// All statistics at one moment (each value read atomically; the set as a whole is not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    counters: [u64; Counter::COUNT],
    timers: [TimerStats; Timer::COUNT],
    /// Reported as "Hardware concurrency" (threads the machine can run at once).
    pub hardware_concurrency: u64,
}

impl Default for Snapshot {
    /// All zero, hardware concurrency 1.
    fn default() -> Self {
        Self { counters: [0; Counter::COUNT], timers: [TimerStats::default(); Timer::COUNT], hardware_concurrency: 1 }
    }
}

impl Snapshot {
    /// A counter's value.
    pub fn counter(&self, c: Counter) -> u64 {
        self.counters[c.index()]
    }

    /// A timer's calls and nanoseconds.
    pub fn timer(&self, t: Timer) -> TimerStats {
        self.timers[t.index()]
    }

    /// Sets a counter (for building reports by hand).
    pub fn set_counter(&mut self, c: Counter, value: u64) {
        self.counters[c.index()] = value;
    }

    /// Sets a timer (for building reports by hand).
    pub fn set_timer(&mut self, t: Timer, value: TimerStats) {
        self.timers[t.index()] = value;
    }

    /// Every counter with its value, in report order.
    pub fn counters(&self) -> impl Iterator<Item = (Counter, u64)> + '_ {
        Counter::ALL.iter().map(|&c| (c, self.counter(c)))
    }

    /// Every timer with its values, in report order.
    pub fn timers(&self) -> impl Iterator<Item = (Timer, TimerStats)> + '_ {
        Timer::ALL.iter().map(|&t| (t, self.timer(t)))
    }

    /// The summary derived from the counters.
    pub fn summary(&self) -> Summary {
        let c = |counter| self.counter(counter);
        let fixed = Ratio::new(c(Counter::ReaderNumFixedCellBytesCopied), c(Counter::ReaderNumFixedCellBytesRead));
        let var = Ratio::new(c(Counter::ReaderNumVarCellBytesCopied), c(Counter::ReaderNumVarCellBytesRead));
        let read_meta = c(Counter::ReaderNumMetadataBytesRead);
        let write_meta = c(Counter::WriterNumMetadataBytesWritten);
        Summary {
            hardware_concurrency: self.hardware_concurrency,
            read_query_submits: c(Counter::SmQuerySubmitRead),
            tile_cache_hit_ratio: Ratio::new(
                c(Counter::ReaderAttrTileCacheHits),
                c(Counter::ReaderNumAttrTilesTouched),
            ),
            fixed_copy_to_read_ratio: fixed,
            var_copy_to_read_ratio: var,
            total_copy_to_read_ratio: Ratio::new(
                fixed.numerator.saturating_add(var.numerator),
                fixed.denominator.saturating_add(var.denominator),
            ),
            read_compression_ratio: Ratio::new(
                c(Counter::ReaderNumBytesAfterFiltering).saturating_add(read_meta),
                c(Counter::ReaderNumTileBytesRead).saturating_add(read_meta),
            ),
            write_query_submits: c(Counter::SmQuerySubmitWrite),
            tiles_written: c(Counter::WriterNumAttrTilesWritten),
            write_compression_ratio: Ratio::new(
                c(Counter::WriterNumBytesBeforeFiltering).saturating_add(write_meta),
                c(Counter::WriterNumBytesWritten).saturating_add(write_meta),
            ),
        }
    }

    /// The text report: title, function table, counter table, summary (see the module doc).
    pub fn report(&self) -> String {
        let mut s = String::new();
        s.push_str(TITLE);
        s.push_str("\n\nIndividual function statistics:\n");
        let _ = writeln!(s, "  {:<71}# calls{:>22}", "Function name", "Total time (ns)");
        let _ = writeln!(s, "  {}", "-".repeat(100));
        for (t, v) in self.timers() {
            let _ = writeln!(s, "  {:<FUNC_NAME_WIDTH$}{:>19}{:>20}", format!("{t},"), format!("{},", v.calls), v.ns);
        }
        s.push_str("\nIndividual counter statistics:\n");
        let _ = writeln!(s, "  {:<73}Value", "Counter name");
        let _ = writeln!(s, "  {}", "-".repeat(78));
        for (c, v) in self.counters() {
            let _ = writeln!(s, "  {:<COUNTER_NAME_WIDTH$}{v:>28}", format!("{c},"));
        }
        s.push('\n');
        s.push_str(&self.summary().to_string());
        s
    }

    /// The JSON report as a value: `{"summary": {...}, "timers": {name: {"calls", "ns"}},
    /// "counters": {name: value}}`.
    pub fn to_json_value(&self) -> Value {
        let timers: Map<String, Value> =
            self.timers().map(|(t, v)| (t.name().to_owned(), json!({"calls": v.calls, "ns": v.ns}))).collect();
        let counters: Map<String, Value> = self.counters().map(|(c, v)| (c.name().to_owned(), json!(v))).collect();
        json!({"summary": self.summary().to_json_value(), "timers": timers, "counters": counters})
    }

    /// [`Self::to_json_value`] as a string.
    pub fn to_json(&self) -> String {
        self.to_json_value().to_string()
    }
}

/// The report's title line.
const TITLE: &str =
    "===================================== Tessera Statistics Report ======================================";
/// Width of the name column of the function table (after the 2-space indent).
pub(super) const FUNC_NAME_WIDTH: usize = 60;
/// Width of the name column of the counter table (after the 2-space indent).
pub(super) const COUNTER_NAME_WIDTH: usize = 50;

/// `numerator / denominator`, the form of every ratio in the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ratio {
    /// The numerator.
    pub numerator: u64,
    /// The denominator.
    pub denominator: u64,
}

impl Ratio {
    /// `numerator / denominator`.
    pub const fn new(numerator: u64, denominator: u64) -> Self {
        Self { numerator, denominator }
    }

    /// The quotient, or `None` when the denominator is 0.
    pub fn value(&self) -> Option<f64> {
        (self.denominator > 0).then(|| self.numerator as f64 / self.denominator as f64)
    }

    /// `numerator * scale / denominator` rounded to the nearest integer (halves up), exactly; `None`
    /// when the denominator is 0.
    fn scaled(&self, scale: u128) -> Option<u128> {
        let d = u128::from(self.denominator);
        (d > 0).then(|| (u128::from(self.numerator) * scale + d / 2) / d)
    }

    /// The percentage with one decimal (`"104.1"`), rounded half up; `None` when the denominator is
    /// 0.
    pub fn percent_text(&self) -> Option<String> {
        self.scaled(1000).map(tenths)
    }

    /// The quotient with one decimal (`"10.8"`), rounded half up; `None` when the denominator is 0.
    pub fn times_text(&self) -> Option<String> {
        self.scaled(10).map(tenths)
    }

    /// JSON: `{"numerator", "denominator", "ratio"}`, the ratio `null` when the denominator is 0.
    fn to_json_value(self) -> Value {
        json!({"numerator": self.numerator, "denominator": self.denominator, "ratio": self.value()})
    }
}

/// `n` tenths as `"i.d"`.
fn tenths(n: u128) -> String {
    format!("{}.{}", n / 10, n % 10)
}

/// The summary section of the report; every field is defined in the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Threads the machine can run at once.
    pub hardware_concurrency: u64,
    /// `sm_query_submit_read`.
    pub read_query_submits: u64,
    /// `reader_attr_tile_cache_hits / reader_num_attr_tiles_touched`.
    pub tile_cache_hit_ratio: Ratio,
    /// `reader_num_fixed_cell_bytes_copied / reader_num_fixed_cell_bytes_read`.
    pub fixed_copy_to_read_ratio: Ratio,
    /// `reader_num_var_cell_bytes_copied / reader_num_var_cell_bytes_read`.
    pub var_copy_to_read_ratio: Ratio,
    /// Fixed plus var numerators over fixed plus var denominators.
    pub total_copy_to_read_ratio: Ratio,
    /// `(reader_num_bytes_after_filtering + reader_num_metadata_bytes_read) /
    /// (reader_num_tile_bytes_read + reader_num_metadata_bytes_read)`.
    pub read_compression_ratio: Ratio,
    /// `sm_query_submit_write`.
    pub write_query_submits: u64,
    /// `writer_num_attr_tiles_written`.
    pub tiles_written: u64,
    /// `(writer_num_bytes_before_filtering + writer_num_metadata_bytes_written) /
    /// (writer_num_bytes_written + writer_num_metadata_bytes_written)`.
    pub write_compression_ratio: Ratio,
}

impl Summary {
    /// JSON: the fields above under their names, each ratio as `{"numerator", "denominator",
    /// "ratio"}`.
    pub fn to_json_value(&self) -> Value {
        json!({
            "hardware_concurrency": self.hardware_concurrency,
            "read_query_submits": self.read_query_submits,
            "tile_cache_hit_ratio": self.tile_cache_hit_ratio.to_json_value(),
            "fixed_copy_to_read_ratio": self.fixed_copy_to_read_ratio.to_json_value(),
            "var_copy_to_read_ratio": self.var_copy_to_read_ratio.to_json_value(),
            "total_copy_to_read_ratio": self.total_copy_to_read_ratio.to_json_value(),
            "read_compression_ratio": self.read_compression_ratio.to_json_value(),
            "write_query_submits": self.write_query_submits,
            "tiles_written": self.tiles_written,
            "write_compression_ratio": self.write_compression_ratio.to_json_value(),
        })
    }
}

/// `"{label}: n / d{unit}"`, then ` (p%)` or ` (r.rx)` unless the denominator is 0.
fn ratio_line(out: &mut std::fmt::Formatter<'_>, label: &str, r: Ratio, unit: &str, times: bool) -> std::fmt::Result {
    write!(out, "  {label}: {} / {}{unit}", r.numerator, r.denominator)?;
    match if times { r.times_text() } else { r.percent_text() } {
        Some(v) if times => writeln!(out, " ({v}x)"),
        Some(v) => writeln!(out, " ({v}%)"),
        None => writeln!(out),
    }
}

impl std::fmt::Display for Summary {
    /// The summary exactly in TileDB's shape (including the two spaces before the hit ratio's
    /// percentage, which has no unit).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "Summary:\n--------")?;
        writeln!(f, "Hardware concurrency: {}", self.hardware_concurrency)?;
        writeln!(f, "Reads:")?;
        writeln!(f, "  Read query submits: {}", self.read_query_submits)?;
        // TileDB prints "n / d " + unit + " (p%)": with no unit that leaves two spaces before the
        // parenthesis. Without a parenthesis the trailing space is dropped.
        let hit_unit = if self.tile_cache_hit_ratio.denominator > 0 { " " } else { "" };
        ratio_line(f, "Tile cache hit ratio", self.tile_cache_hit_ratio, hit_unit, false)?;
        ratio_line(f, "Fixed-length tile data copy-to-read ratio", self.fixed_copy_to_read_ratio, " bytes", false)?;
        ratio_line(f, "Var-length tile data copy-to-read ratio", self.var_copy_to_read_ratio, " bytes", false)?;
        ratio_line(f, "Total tile data copy-to-read ratio", self.total_copy_to_read_ratio, " bytes", false)?;
        ratio_line(f, "Read compression ratio", self.read_compression_ratio, " bytes", true)?;
        writeln!(f, "Writes:")?;
        writeln!(f, "  Write query submits: {}", self.write_query_submits)?;
        writeln!(f, "  Tiles written: {}", self.tiles_written)?;
        ratio_line(f, "Write compression ratio", self.write_compression_ratio, " bytes", true)
    }
}
