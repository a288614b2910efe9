//! The `tessera` command: create, inspect, write and read Tessera arrays from the shell, with
//! NumPy `.npy` files as the exchange format for dense arrays and CSV or Parquet files (one row
//! per cell) for sparse ones. A thin layer over the engine: `npyz` reads and writes `.npy`
//! headers; sparse tables are Arrow record batches, read from and written to CSV by `arrow-csv`
//! and to Parquet by the `parquet` crate, and converted to the engine's types by `arrow-cast`;
//! `comfy-table` lays out tables and `indicatif` draws progress bars.
//!
//! `main.rs` only parses the command line into [`Cli`] and calls [`run`]; every command is a
//! function taking its arguments, the engine [`Config`] and a writer for its standard output, so
//! tests run commands in-process and capture what they print. Errors carry context naming the
//! array or file (anyhow); [`exit_code`] prints them as `error: ...` on stderr.
//!
//! Modules: `dense` (write and read `.npy` files), `spec` (`--subarray`), `info` (`tessera
//! info`), [`maintenance`] (fragments, consolidate, vacuum, delete); sparse arrays: `sparse`
//! (write, read, import) over `arrow` (Arrow columns ⇄ engine columns: exact conversion, type
//! inference) and `table` (CSV and Parquet files ⇄ Arrow record batches).
//!
//! `--stats` (or `--stats-json FILE`) records the engine's statistics during any command and
//! prints them to stderr (writes them as JSON) at the end.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context as _, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tessera::{Array, ArraySchema, Config, Context, Layout, Mode};

pub mod advise;
pub mod aggregate;
mod arrow;
mod dense;
mod info;
pub mod ls;
pub mod maintenance;
pub mod meta;
mod sparse;
mod spec;
mod table;

/// The example schema printed by `tessera schema-example` (valid JSON).
pub const SCHEMA_EXAMPLE: &str = r#"{
  "version": 1,
  "array_type": "dense",
  "dims": [
    { "name": "y", "type": "int64", "domain": [1, 3000], "tile": 500 },
    { "name": "x", "type": "int64", "domain": [1, 12000], "tile": 1000 }
  ],
  "attrs": [
    {
      "name": "temperature",
      "type": "float32",
      "cell_val_num": 1,
      "nullable": false,
      "filters": [{ "name": "byteshuffle" }, { "name": "zstd", "level": 3 }],
      "fill": ["nan"]
    }
  ],
  "cell_order": "row-major",
  "tile_order": "row-major"
}
"#;

const LONG_ABOUT: &str = "Create, inspect, write and read Tessera arrays (dense and sparse \
multi-dimensional arrays stored as compressed, timestamped fragments). Dense arrays are exchanged as \
NumPy .npy files (one per attribute), sparse arrays as CSV or Parquet files (one row per cell, one \
column per dimension and attribute). docs/cli.md is the reference: what each option takes and what \
the files hold.

Example session:
  tessera schema-example > schema.json
  tessera create temps --schema schema.json
  tessera write temps --subarray 1:3000,1:12000 --input temperature=day1.npy
  tessera read temps --subarray 1:10,: --output temperature=first_rows.npy
  tessera import trips.parquet trips --dims lon,lat --tile lon=1,lat=1
  tessera read trips --subarray -74.1:-73.9,40.6:40.8 --output midtown.csv --stats";

/// What `tessera create --help` shows after the options: the example schema.
fn schema_help() -> String {
    format!("The schema's fields are described in docs/cli.md; `tessera schema-example` prints:\n\n{SCHEMA_EXAMPLE}")
}

/// Create, inspect, write and read Tessera arrays.
#[derive(Debug, Parser)]
#[command(name = "tessera", version, about, long_about = LONG_ABOUT, after_long_help = config_help())]
pub struct Cli {
    /// Engine configuration as KEY=VALUE (repeatable; `tessera --help` lists the keys).
    #[arg(long = "config", value_name = "KEY=VALUE", global = true)]
    pub config: Vec<String>,
    /// Record engine statistics during the command and print them to stderr at the end.
    #[arg(long, global = true)]
    pub stats: bool,
    /// Record engine statistics during the command and write them as JSON to FILE at the end.
    #[arg(long, value_name = "FILE", global = true)]
    pub stats_json: Option<PathBuf>,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create an empty array from a JSON schema.
    #[command(after_long_help = schema_help())]
    Create(CreateArgs),
    /// Print an example schema (JSON) to start from.
    SchemaExample,
    /// Show an array's schema, fragments, non-empty domain, size on disk and compression ratio.
    Info(InfoArgs),
    /// Write cells as a new fragment: a dense subarray from .npy files (one per attribute), or
    /// sparse cells from a CSV or Parquet file (one row per cell).
    Write(WriteArgs),
    /// Read cells: a dense subarray into .npy files (one per attribute), or sparse cells into a
    /// CSV or Parquet file.
    Read(ReadArgs),
    /// Aggregates computed in the engine (count, count_valid, null_count, sum, min, max, mean) of
    /// attributes over a subarray, optionally of the cells passing --where.
    Aggregate(aggregate::AggregateArgs),
    /// Create a sparse array from a CSV or Parquet file (types and domain inferred) and write the
    /// file into it.
    Import(ImportArgs),
    /// List the fragments readers see: name, kind, timestamps, cells, bytes, non-empty domain.
    Fragments(InfoArgs),
    /// Merge consecutive fragments into one (all by default).
    Consolidate(maintenance::ConsolidateArgs),
    /// Delete fragments superseded by consolidation and what crashed writers left.
    Vacuum {
        /// The array.
        uri: PathBuf,
    },
    /// Delete every cell of a subarray (a delete fragment: older values stop being read).
    Delete(maintenance::DeleteArgs),
    /// List an array's or a group's metadata, or set (--set KEY=VALUE) and delete (--delete
    /// KEY) keys.
    Meta(meta::MetaArgs),
    /// List a group's members (arrays and groups), or describe one array in a line.
    Ls(ls::LsArgs),
    /// Recommend tile extents, tile order and cell order for a dense array from a log of the
    /// queries it serves (the cost model of docs/layouts.md); --apply DST rewrites it so.
    Advise(advise::AdviseArgs),
    /// The MultiMap layout research (docs/multimap.md).
    #[command(subcommand)]
    Multimap(MultimapCommand),
    /// The SS-DB benchmark (SSDB.md): generate, load, cook and group a configuration.
    Ssdb(tessera_ssdb::SsdbArgs),
}

/// `tessera multimap` subcommands.
#[derive(Debug, Subcommand)]
pub enum MultimapCommand {
    /// Rerun the paper's Table 3 on the modelled disks (analytic model and simulator) beside the
    /// paper's figures; with --out DIR also write DIR/table3.json and DIR/table3.md.
    Reproduce {
        /// Folder for table3.json and table3.md.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
}

/// Arguments of `tessera create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Where to create the array (a folder that does not exist or is empty).
    pub uri: PathBuf,
    /// The schema as a JSON file (`-` for standard input); see below.
    #[arg(long, value_name = "FILE")]
    pub schema: PathBuf,
}

/// Arguments of `tessera info` and `tessera fragments`.
#[derive(Debug, Args)]
pub struct InfoArgs {
    /// The array.
    pub uri: PathBuf,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `tessera write`.
#[derive(Debug, Args)]
pub struct WriteArgs {
    /// The array.
    pub uri: PathBuf,
    /// The cells to write: inclusive lo:hi per dimension, e.g. 1:3000,1:12000 or -5:5,: (default:
    /// the whole domain; docs/cli.md describes SPECs).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub subarray: Option<String>,
    /// Dense arrays: one .npy file per attribute, as ATTR=FILE (FILE alone when the array has one
    /// attribute). Sparse arrays: one .csv or .parquet file with every dimension and attribute.
    #[arg(long, value_name = "[ATTR=]FILE", required = true, num_args = 1..)]
    pub input: Vec<String>,
    /// Sparse arrays: skip columns of the file that are neither dimensions nor attributes.
    #[arg(long)]
    pub ignore_extra: bool,
    /// Sparse arrays: the rows are in the array's global order; stream them in chunks.
    #[arg(long)]
    pub sorted: bool,
    /// CSV field delimiter (default: `,`; tab for .tsv files).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<String>,
}

/// Arguments of `tessera read`.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// The array.
    pub uri: PathBuf,
    /// The cells to read: inclusive lo:hi per dimension (default: the non-empty domain, the
    /// bounding box of all writes; docs/cli.md describes SPECs).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub subarray: Option<String>,
    /// Dense arrays: a .npy file to create per attribute read, as ATTR=FILE (FILE alone with one
    /// attribute). Sparse arrays: one .csv or .parquet file.
    #[arg(long, value_name = "[ATTR=]FILE", required = true, num_args = 1..)]
    pub output: Vec<String>,
    /// Order of the cells in the files.
    #[arg(long, value_parser = layouts(), default_value = "row-major")]
    pub layout: Layout,
    /// Sparse arrays: the attributes to read, comma-separated (default: all).
    #[arg(long, value_name = "ATTR,...", value_delimiter = ',')]
    pub attrs: Vec<String>,
    /// CSV field delimiter (default: `,`; tab for .tsv files).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<String>,
    /// A condition on attribute values, evaluated in the engine, e.g. "pix >= 900 and (valid
    /// == 1 or v0 < -3)": sparse arrays read only the cells that pass; dense arrays give the
    /// others the fill value.
    #[arg(long = "where", value_name = "EXPR", allow_hyphen_values = true)]
    pub where_: Option<String>,
}

/// Parses the `--where` condition of `tessera read` and `tessera aggregate`.
fn parse_where(expr: Option<&str>) -> Result<Option<tessera::Condition>> {
    expr.map(tessera::Condition::parse).transpose().context("--where")
}

/// Arguments of `tessera import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The CSV (.csv, .tsv) or Parquet (.parquet) file.
    pub file: PathBuf,
    /// The array to create (a folder that does not exist or is empty).
    pub uri: PathBuf,
    /// The columns that are the dimensions, comma-separated, slowest-varying first.
    #[arg(long, value_name = "COL,...", value_delimiter = ',', required = true)]
    pub dims: Vec<String>,
    /// The columns that are the attributes (default: every other column).
    #[arg(long, value_name = "COL,...", value_delimiter = ',')]
    pub attrs: Vec<String>,
    /// Cells per data tile.
    #[arg(long, value_name = "N")]
    pub capacity: Option<u64>,
    /// Space-tile extents, e.g. x=1000,y=1000 (integers for integer dimensions).
    #[arg(long, value_name = "DIM=EXTENT,...", value_delimiter = ',')]
    pub tile: Vec<String>,
    /// Domains, e.g. x=0:360000000,y=-90:90 (default: the range of the data).
    #[arg(long, value_name = "DIM=LO:HI,...", value_delimiter = ',', allow_hyphen_values = true)]
    pub domain: Vec<String>,
    /// Allow several cells with the same coordinates.
    #[arg(long)]
    pub allows_duplicates: bool,
    /// Order of the cells inside a space tile.
    #[arg(long, value_parser = cell_orders(), default_value = "row-major")]
    pub cell_order: tessera::CellOrder,
    /// Order of the space tiles.
    #[arg(long, value_parser = cell_orders(), default_value = "row-major")]
    pub tile_order: tessera::CellOrder,
    /// Compress attributes with zstd at LEVEL (-7..=22), and coordinates with delta + byte
    /// shuffle + zstd at LEVEL (default: attributes unfiltered, coordinates delta + byte shuffle +
    /// zstd level 3).
    #[arg(long, value_name = "LEVEL", allow_hyphen_values = true)]
    pub zstd: Option<i32>,
    /// The rows are in the new array's global order: stream them (see `tessera write --help`).
    #[arg(long)]
    pub sorted: bool,
    /// CSV field delimiter (default: `,`; tab for .tsv files).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<String>,
}

/// `--cell-order` and `--tile-order` values: the engine's names of the orders.
fn cell_orders() -> impl TypedValueParser<Value = tessera::CellOrder> {
    PossibleValuesParser::new([
        PossibleValue::new("row-major").help("Last dimension fastest"),
        PossibleValue::new("col-major").help("First dimension fastest"),
        PossibleValue::new("hilbert").help("Along a Hilbert curve (keeps nearby cells together)"),
        PossibleValue::new("z").help("Along a Z (Morton) curve: coordinate bits interleaved"),
    ])
    .try_map(|s| tessera::CellOrder::parse(&s).ok_or("not a cell order"))
}

/// `--layout` values: the engine's names of the layouts.
fn layouts() -> impl TypedValueParser<Value = Layout> {
    PossibleValuesParser::new([
        PossibleValue::new("row-major").help("Last dimension fastest: a C-order .npy file"),
        PossibleValue::new("col-major").help("First dimension fastest: a Fortran-order .npy file"),
        PossibleValue::new("global").help("The array's global (tile) order: a 1-D .npy file of cells"),
        PossibleValue::new("unordered").help("Sparse arrays: whatever order is fastest"),
    ])
    .try_map(|s| Layout::parse(&s).ok_or("not a layout"))
}

fn config_help() -> String {
    let keys: String =
        tessera::CONFIG_KEYS.iter().map(|(k, default, what)| format!("\n  {k} = {default}\n      {what}")).collect();
    format!("Configuration keys for --config KEY=VALUE (with their defaults):{keys}")
}

/// Runs a parsed command line, writing its normal output to `out`.
///
/// # Errors
/// Whatever the command reports; the message names the array or file concerned.
pub fn run(cli: Cli, out: &mut impl Write) -> Result<()> {
    // `ssdb run --config micro`: the ssdb command reads the SS-DB configuration from --config.
    let config = if matches!(cli.command, Command::Ssdb(_)) { Config::new() } else { parse_config(&cli.config)? };
    let stats = cli.stats || cli.stats_json.is_some();
    if stats {
        tessera::stats::reset();
        tessera::stats::enable();
    }
    let result = match &cli.command {
        Command::Create(a) => create(a, &config, out),
        Command::SchemaExample => out.write_all(SCHEMA_EXAMPLE.as_bytes()).map_err(Into::into),
        Command::Info(a) => open(&config, &a.uri, Mode::Read).and_then(|array| {
            info::write_info(&array, a.json, out).with_context(|| format!("array {}", a.uri.display()))
        }),
        Command::Write(a) => dense::write(a, &config, out, dense::SLAB_BYTES),
        Command::Read(a) => dense::read(a, &config, out, dense::BATCH_BYTES),
        Command::Aggregate(a) => aggregate::aggregate(a, &config, out),
        Command::Import(a) => sparse::import(a, &config, out),
        Command::Fragments(a) => maintenance::fragments(a, &config, out),
        Command::Consolidate(a) => maintenance::consolidate_cmd(a, &config, out),
        Command::Vacuum { uri } => maintenance::vacuum_cmd(uri, &config, out),
        Command::Delete(a) => maintenance::delete(a, &config, out),
        Command::Meta(a) => meta::meta(a, &config, out),
        Command::Ls(a) => ls::ls(a, &config, out),
        Command::Advise(a) => advise::advise(a, &config, out),
        Command::Multimap(MultimapCommand::Reproduce { out: dir }) => {
            tessera_multimap::run_reproduce_command(dir.clone())
        }
        Command::Ssdb(a) => tessera_ssdb::run_command(a, &cli.config, out),
    };
    if stats {
        tessera::stats::disable();
        if cli.stats {
            let dump = tessera::stats::dump();
            eprint!("{dump}{}", if dump.ends_with('\n') { "" } else { "\n" });
        }
        if let Some(p) = &cli.stats_json {
            let written = std::fs::write(p, tessera::stats::json() + "\n")
                .with_context(|| format!("cannot write statistics to {}", p.display()));
            return result.and(written);
        }
    }
    result
}

/// Prints `error: ...` (with every context) to stderr for an error and turns the result into
/// the process's exit code: 0 on success, 1 on error. A closed stdout (`tessera info | head`)
/// is not an error.
pub fn exit_code(result: Result<()>) -> ExitCode {
    let broken_pipe = |c: &(dyn std::error::Error + 'static)| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    };
    match result {
        Err(e) if !e.chain().any(broken_pipe) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Builds the engine configuration from `--config KEY=VALUE` items.
///
/// # Errors
/// An item without `=`, an unknown key or a bad value.
pub fn parse_config(items: &[String]) -> Result<Config> {
    let mut config = Config::new();
    for item in items {
        let Some((k, v)) = item.split_once('=') else {
            bail!("--config {item:?}: expected KEY=VALUE, e.g. sm.compute_concurrency=4");
        };
        config.set(k.trim(), v.trim()).with_context(|| format!("--config {item:?}"))?;
    }
    Ok(config)
}

fn context(config: &Config) -> Result<Context> {
    Context::new(config.clone()).context("cannot start the engine")
}

fn open(config: &Config, uri: &Path, mode: Mode) -> Result<Array> {
    Array::open(&context(config)?, uri, mode).with_context(|| format!("cannot open array {}", uri.display()))
}

/// Writes `v` as indented JSON and a newline (the `--json` output of every command).
fn write_json(out: &mut impl Write, v: &impl serde::Serialize) -> Result<()> {
    serde_json::to_writer_pretty(&mut *out, v)?;
    Ok(writeln!(out)?)
}

fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The files a read writes, under temporary names next to their targets: removed on drop
/// unless [`TempFiles::commit`] renamed them all.
#[derive(Default)]
struct TempFiles(Vec<(PathBuf, PathBuf)>);

impl TempFiles {
    /// Creates the temporary file for `path`.
    fn create(&mut self, path: &Path) -> Result<std::fs::File> {
        let name = path.file_name().with_context(|| format!("--output {}: not a file name", path.display()))?;
        let tmp = path.with_file_name(format!(".{}.tessera-{}.tmp", name.to_string_lossy(), std::process::id()));
        let file = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", path.display()))?;
        self.0.push((tmp, path.to_path_buf()));
        Ok(file)
    }

    /// Renames every temporary file to its target (on failure, the ones left are removed).
    fn commit(mut self) -> Result<()> {
        for (tmp, path) in &self.0 {
            std::fs::rename(tmp, path).with_context(|| format!("cannot create {}", path.display()))?;
        }
        self.0.clear();
        Ok(())
    }
}

impl Drop for TempFiles {
    fn drop(&mut self) {
        for (tmp, _) in &self.0 {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// A byte-counting progress bar on stderr titled `msg`, drawn only when stderr is a terminal and
/// the work is large enough (64 MiB) to take a noticeable time; otherwise a hidden one.
fn bytes_bar(total: u64, msg: &str) -> ProgressBar {
    if total < 64 << 20 || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{msg} [{elapsed_precise}] {wide_bar} {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.with_style(style).with_message(msg.to_string())
}

/// `tessera create URI --schema FILE`.
///
/// # Errors
/// An unreadable or invalid schema file, or an array that cannot be created (e.g. the folder
/// exists and is not empty).
pub fn create(args: &CreateArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let p = &args.schema;
    let (text, name) = if p.as_os_str() == "-" {
        let s = std::io::read_to_string(std::io::stdin()).context("cannot read the schema from standard input")?;
        (s, "standard input".to_string())
    } else {
        let s = std::fs::read_to_string(p).with_context(|| format!("cannot read schema file {}", p.display()))?;
        (s, p.display().to_string())
    };
    let schema = ArraySchema::from_json(&text).with_context(|| format!("invalid schema in {name}"))?;
    let uri = &args.uri;
    Array::create(&context(config)?, uri, &schema).with_context(|| format!("cannot create array {}", uri.display()))?;
    let (d, a) = (schema.dims.len() as u64, schema.attrs.len() as u64);
    writeln!(out, "created array {} ({d} dimension{}, {a} attribute{})", uri.display(), plural(d), plural(a))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn config_items_are_checked() {
        assert!(parse_config(&["sm.compute_concurrency=2".into()]).is_ok());
        let e = format!("{:#}", parse_config(&["sm.nope=1".into()]).unwrap_err());
        assert!(e.contains("unknown key"), "{e}");
        assert!(parse_config(&["novalue".into()]).is_err());
    }

    #[test]
    fn the_example_schema_is_valid() {
        let s = ArraySchema::from_json(SCHEMA_EXAMPLE).unwrap();
        assert_eq!(s.dims.len(), 2);
    }
}
