//! `tessera advise`: the layout advisor of `tessera_multimap::advise` on the command line — read
//! a query log, print the predicted cost of the current layout and of the best candidates with
//! the expected gain, and with `--apply DST` rewrite the array into the recommended layout.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use tessera::{Config, Mode};
use tessera_multimap::advise::{self, Device, SearchOptions};

/// Arguments of `tessera advise`.
#[derive(Debug, clap::Args)]
pub struct AdviseArgs {
    /// A dense array.
    pub uri: PathBuf,
    /// The queries it serves: JSON lines `{"ranges": [[lo, hi], ...], "weight": n, "layout": "C"}`
    /// (a range per dimension, null for the whole dimension; or an object by dimension name).
    #[arg(long)]
    pub log: PathBuf,
    /// Write the array in the recommended layout to this new array.
    #[arg(long, value_name = "DST")]
    pub apply: Option<PathBuf>,
    /// Candidates to print besides the current layout.
    #[arg(long, default_value_t = 5)]
    pub top: usize,
    /// Seconds every query costs whatever the layout (default: 300 µs).
    #[arg(long)]
    pub query_overhead: Option<f64>,
    /// Seconds per read request (default: 100 µs, or 20 ms for s3:// arrays).
    #[arg(long)]
    pub latency: Option<f64>,
    /// Read bandwidth, bytes per second (default: 1e9, or 1e8 for s3:// arrays).
    #[arg(long)]
    pub bandwidth: Option<f64>,
    /// Every query opens the array cold: price the read of its fragment metadata per query
    /// (its size grows with the layout's tile count).
    #[arg(long)]
    pub cold_open: bool,
    /// With `--cold-open`: bytes of fragment metadata per second an open reads and decodes
    /// (default: 3e8).
    #[arg(long)]
    pub metadata_bandwidth: Option<f64>,
    /// Smallest tile considered (unfiltered bytes of all attributes).
    #[arg(long, default_value_t = 16 << 10)]
    pub min_tile_bytes: u64,
    /// Largest tile considered.
    #[arg(long, default_value_t = 16 << 20)]
    pub max_tile_bytes: u64,
    /// Print JSON (every candidate) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tessera advise`.
pub(crate) fn advise(args: &AdviseArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let array = crate::open(config, &args.uri, Mode::Read)?;
    let (ctx, schema) = (array.context().clone(), array.schema().clone());
    drop(array);
    let log = advise::read_log(&args.log, &schema)?;
    let s3 = args.uri.to_string_lossy().starts_with(tessera::S3_SCHEME);
    let mut dev = if s3 { Device::object_store(config) } else { Device::local(config) };
    dev.query_s = args.query_overhead.unwrap_or(dev.query_s);
    dev.latency_s = args.latency.unwrap_or(dev.latency_s);
    dev.read_bps = args.bandwidth.unwrap_or(dev.read_bps);
    dev.cold_open = args.cold_open;
    dev.metadata_bps = args.metadata_bandwidth.unwrap_or(dev.metadata_bps);
    let opts = SearchOptions { min_tile_bytes: args.min_tile_bytes, max_tile_bytes: args.max_tile_bytes };
    let advice =
        advise::advise(&ctx, &args.uri, &log, dev, opts).with_context(|| format!("advising {}", args.uri.display()))?;
    if args.json {
        crate::write_json(out, &advice)?;
    } else {
        let row = |s: &advise::Scored| {
            let (l, tile) = (&s.layout, s.layout.extents.iter().map(u64::to_string).collect::<Vec<_>>().join("x"));
            let (secs, requests, bytes) = (s.seconds, s.requests, s.bytes);
            format!("{tile:<16} {:<10} {:<10} {secs:>12.6} {requests:>10.0} {bytes:>14.0}", l.tile_order, l.cell_order)
        };
        writeln!(out, "{} queries ({} candidate layouts), device: {:.0} µs per request, {:.0} MB/s, coalescing gap {} B; stored/unfiltered {:.2}",
            log.len(), advice.ranked.len(), dev.latency_s * 1e6, dev.read_bps / 1e6, dev.coalesce_gap, advice.stored_ratio)?;
        writeln!(
            out,
            "{:<16} {:<10} {:<10} {:>12} {:>10} {:>14}",
            "tile", "tile order", "cell order", "seconds", "requests", "bytes"
        )?;
        writeln!(out, "{}  (current)", row(&advice.current))?;
        for s in advice.ranked.iter().take(args.top) {
            writeln!(out, "{}", row(s))?;
        }
        let (best, gain) = (&advice.best().layout, advice.gain());
        let (tiles, cells) = (&best.tile_order, &best.cell_order);
        let tile = best.extents.iter().map(u64::to_string).collect::<Vec<_>>().join(" x ");
        writeln!(
            out,
            "recommended: tile {tile} , tile order {tiles}, cell order {cells}: expected {gain:.2}x the current speed"
        )?;
        for (shape, cur, new) in advise::by_shape(&advice, &log, &schema) {
            writeln!(out, "  {shape}: {:.3} ms -> {:.3} ms per query ({:.2}x)", cur * 1e3, new * 1e3, cur / new)?;
        }
    }
    if let Some(dst) = &args.apply {
        let budget = config.memory_budget().max(1 << 20);
        let slabs = advise::apply(&ctx, &args.uri, dst, &advice.best().layout, budget)?;
        if !args.json {
            writeln!(out, "wrote {} in the recommended layout ({slabs} fragments)", dst.display())?;
        }
    }
    Ok(())
}
