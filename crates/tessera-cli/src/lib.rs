//! The `tessera` command: create, inspect, write and read Tessera arrays from the shell, with
//! NumPy `.npy` files as the exchange format for dense arrays and CSV or Parquet files (one row
//! per cell) for sparse ones.
//!
//! `main.rs` only parses the command line into [`Cli`] and calls [`run`]; every command is a
//! function taking its arguments, the engine [`Config`] and a writer for its standard output, so
//! tests run commands in-process and capture what they print. Errors carry context naming the
//! array or file (anyhow); [`exit_code`] prints them as `error: ...` on stderr.
//!
//! Modules: [`npy`] reads and writes `.npy` files, [`subarray_spec`] parses `--subarray`,
//! `attr_npy` maps attributes to `.npy` dtypes and shapes, `info` renders `tessera info`,
//! `progress` draws progress bars on stderr. Sparse arrays: `sparse` holds `write`, `read` and
//! `import` for them, over `table` (columns of cells, conversion and type inference), [`csv`]
//! (an RFC 4180 reader and writer) with `csv_io`, and `parquet_io`.
//!
//! `--stats` (or `--stats-json FILE`) records the engine's statistics during any command and
//! prints them to stderr (writes them as JSON) at the end.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context as _, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use tessera::{Array, ArraySchema, AttrInput, Config, Context, Layout, Mode, Subarray};

mod attr_npy;
pub mod csv;
mod csv_io;
mod info;
pub mod maintenance;
pub mod npy;
#[cfg(feature = "parquet")]
mod parquet_io;
mod progress;
mod sparse;
pub mod subarray_spec;
mod table;

use attr_npy::{check_input, check_representable, read_form, InputOrder};
use info::{human, spec_str};
use npy::{shape_str, Header};
use subarray_spec::SubarraySpec;

/// Bytes of input cells handed to the engine per submit when writing.
const SLAB_BYTES: u64 = 64 << 20;
/// Bytes of result cells asked of the engine per batch when reading.
const BATCH_BYTES: u64 = 64 << 20;

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

const SCHEMA_HELP: &str = r#"Schema file: the engine's JSON form of a schema. `tessera schema-example > schema.json`
prints the example below without the comments (JSON has none).

  {
    "version": 1,                     // schema format version: 1
    "array_type": "dense",            // only "dense" arrays are supported for now
    "dims": [                         // slowest-varying first (as in C order)
      { "name": "y",
        "type": "int64",              // int8 int16 int32 int64 uint8 uint16 uint32 uint64
        "domain": [1, 3000],          // inclusive [lo, hi]; negative bounds are fine
        "tile": 500 },                // space-tile extent in cells (the unit of I/O)
      { "name": "x", "type": "int64", "domain": [1, 12000], "tile": 1000 }
    ],
    "attrs": [
      { "name": "temperature",
        "type": "float32",            // the integer types, float32, float64, utf8
        "cell_val_num": 1,            // values per cell (2 for complex), or "var"
        "nullable": false,            // per-cell validity (not writable from .npy)
        "filters": [                  // applied in order to every tile
          { "name": "byteshuffle" },  // also: delta, rle, lz4,
          { "name": "zstd", "level": 3 }  // gzip {level 0..9}, zstd {level -7..22}
        ],
        "fill": ["nan"] }             // optional: value of never-written cells, one per
    ],                                //   cell value (default: type min/max, NaN)
    "cell_order": "row-major",        // order of cells in a tile: row-major | col-major
    "tile_order": "row-major"         // order of the tiles: row-major | col-major
  }"#;

const LONG_ABOUT: &str = "Create, inspect, write and read Tessera arrays (dense and sparse \
multi-dimensional arrays stored as compressed, timestamped fragments). Dense arrays are exchanged as \
NumPy .npy files (one per attribute), sparse arrays as CSV or Parquet files (one row per cell, one \
column per dimension and attribute).

Example session (dense):
  tessera schema-example > schema.json
  tessera create temps --schema schema.json
  tessera write temps --subarray 1:3000,1:12000 --input temperature=day1.npy
  tessera info temps
  tessera read temps --subarray 1:10,: --output temperature=first_rows.npy

Example session (sparse):
  tessera import trips.parquet trips --dims lon,lat --domain lon=-180:180,lat=-90:90 --tile lon=1,lat=1
  tessera write trips --input more_trips.csv
  tessera read trips --subarray -74.1:-73.9,40.6:40.8 --output midtown.csv --stats";

/// The long help of `--subarray`, followed by what an omitted `--subarray` means.
macro_rules! spec_help {
    ($default:literal) => {
        concat!(
            "Comma-separated inclusive ranges lo:hi, one per dimension, in domain coordinates, e.g. \
             1:3000,1:12000 or -5:5,: . A single number n means n:n; lo: and :hi run to the domain's \
             bound; `:`, an empty item or a dimension left off at the end means the whole domain of \
             that dimension. ",
            $default
        )
    };
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
    #[command(after_long_help = SCHEMA_HELP)]
    Create(CreateArgs),
    /// Print an example schema (JSON) to start from.
    SchemaExample,
    /// Show an array's schema, fragments, non-empty domain, size on disk and compression ratio.
    Info(InfoArgs),
    /// Write cells as a new fragment: a dense subarray from .npy files (one per attribute), or
    /// sparse cells from a CSV or Parquet file (one row per cell).
    #[command(after_long_help = WRITE_HELP)]
    Write(WriteArgs),
    /// Read cells: a dense subarray into .npy files (one per attribute), or sparse cells into a
    /// CSV or Parquet file.
    #[command(after_long_help = READ_HELP)]
    Read(ReadArgs),
    /// Create a sparse array from a CSV or Parquet file (types and domain inferred) and write the
    /// file into it.
    #[command(after_long_help = IMPORT_HELP)]
    Import(ImportArgs),
    /// List the fragments readers see: name, kind, timestamps, cells, bytes, non-empty domain.
    Fragments(maintenance::FragmentsArgs),
    /// Merge consecutive fragments into one (all by default).
    Consolidate(maintenance::ConsolidateArgs),
    /// Delete fragments superseded by consolidation and what crashed writers left.
    Vacuum(maintenance::VacuumArgs),
    /// Delete every cell of a subarray (a delete fragment: older values stop being read).
    Delete(maintenance::DeleteArgs),
    /// The SS-DB benchmark (SSDB.md): generate, load, cook and group a configuration.
    Ssdb(tessera_ssdb::SsdbArgs),
}

const WRITE_HELP: &str = "Each .npy file must have exactly the attribute's dtype (no casting: \
int32 needs <i4, float64 <f8, ...; bool is accepted for uint8) and the subarray's shape. C-order \
arrays are written row-major and Fortran-order ones column-major, without copying. A float32 or \
float64 attribute with cell_val_num 2 takes complex64/complex128 (or a trailing axis of 2); other \
multi-value attributes take a trailing axis of cell_val_num; fixed-length utf8 takes |S<n> byte \
strings. Variable-length and nullable attributes cannot be represented in .npy: write those with \
the Python API. A write is all or nothing: on any error no fragment is committed.

Sparse arrays: --input is one .csv (.tsv) or .parquet file with one row per cell and one column per \
dimension and attribute, named like them (every one is needed; other columns are an error unless \
--ignore-extra). Values must be exactly of the schema's types: integers within the type's range for \
integer types, numbers for float types, text for utf8 (a fixed-length utf8 attribute takes strings of \
exactly its length), coordinates inside the domain. An empty CSV field or a Parquet null is an absent \
value, allowed only for nullable attributes; in CSV write \"\" for an empty string. Parquet columns \
may be INT32, INT64 (also unsigned, dates and timestamps as their integers), FLOAT, DOUBLE or \
BYTE_ARRAY strings; integers go into float attributes only when exact. Every row is checked before \
anything is written, and the file becomes one fragment (one unordered write). With --sorted the \
rows must already be in the array's global order and are streamed in chunks of 1Mi rows into one \
global-order write (less memory; still one fragment, nothing committed on error).";

const READ_HELP: &str = "Each .npy file is shaped like the subarray (with --layout global: one \
axis of cells in the array's global order) and has the attribute's dtype; 2-value float32/float64 \
attributes come back as complex64/complex128. row-major writes a C-order file, col-major a \
Fortran-order one. Variable-length and nullable attributes cannot be represented in .npy: read \
those with the Python API. Files are written under a temporary name and renamed when complete.

Sparse arrays: --output is one .csv (.tsv) or .parquet file: a column per dimension, then one per \
attribute (all, or those of --attrs), a row per cell. --subarray bounds may be floats for float \
dimensions (-12.5:47.25). --layout global gives the array's global order, row-major and col-major sort \
by coordinates, unordered whatever is fastest. CSV writes floats as the shortest text that reads back \
exactly, null as an empty field and the empty string as \"\"; Parquet writes one row group per \
batch, zstd-compressed, nullable attributes as optional columns.";

const IMPORT_HELP: &str = "Column types are inferred from the data: a column whose values are all \
integers becomes int64 (a Parquet UINT64 column with values above 2^63 - 1: uint64), numbers \
float64, anything else utf8 of variable length; a column with absent values (empty CSV fields, \
Parquet nulls) becomes a nullable attribute. Dimensions must all have one type (an engine rule): \
if any is float64, all are. The domain of each dimension is the range of its values unless given \
with --domain; without --tile a dimension has no tile extent (one space tile; see --cell-order \
hilbert for spatial locality). The file is read twice (once to infer, once to write); on any error \
the array folder is removed again.

Example:
  tessera import points.csv pts --dims x,y --tile x=1000,y=1000 --cell-order hilbert --zstd 5";

/// Arguments of `tessera create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Where to create the array (a folder that does not exist or is empty).
    pub uri: PathBuf,
    /// The schema as a JSON file (`-` for standard input); see below.
    #[arg(long, value_name = "FILE")]
    pub schema: PathBuf,
}

/// Arguments of `tessera info`.
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
    /// The cells to write (default: the whole domain).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true,
          long_help = spec_help!("Without --subarray: the whole domain."))]
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
    /// The cells to read (default: the non-empty domain, the bounding box of all writes).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true,
          long_help = spec_help!("Without --subarray: the non-empty domain (the bounding box of all writes)."))]
    pub subarray: Option<String>,
    /// Dense arrays: a .npy file to create per attribute read, as ATTR=FILE (FILE alone with one
    /// attribute). Sparse arrays: one .csv or .parquet file.
    #[arg(long, value_name = "[ATTR=]FILE", required = true, num_args = 1..)]
    pub output: Vec<String>,
    /// Order of the cells in the files.
    #[arg(long, value_enum, default_value_t = LayoutArg::RowMajor)]
    pub layout: LayoutArg,
    /// Sparse arrays: the attributes to read, comma-separated (default: all).
    #[arg(long, value_name = "ATTR,...", value_delimiter = ',')]
    pub attrs: Vec<String>,
    /// CSV field delimiter (default: `,`; tab for .tsv files).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<String>,
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
    #[arg(long, value_enum, default_value_t = CellOrderArg::RowMajor)]
    pub cell_order: CellOrderArg,
    /// Compress attributes with zstd at LEVEL (-7..=22), and coordinates with delta + zstd at LEVEL
    /// (default: attributes unfiltered, coordinates delta + zstd level 3).
    #[arg(long, value_name = "LEVEL", allow_hyphen_values = true)]
    pub zstd: Option<i32>,
    /// The rows are in the new array's global order: stream them (see `tessera write --help`).
    #[arg(long)]
    pub sorted: bool,
    /// CSV field delimiter (default: `,`; tab for .tsv files).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<String>,
}

/// `--cell-order` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CellOrderArg {
    /// Last dimension fastest.
    RowMajor,
    /// First dimension fastest.
    ColMajor,
    /// Along a Hilbert curve (keeps nearby cells together).
    Hilbert,
}

/// `--layout` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// Last dimension fastest: a C-order .npy file.
    RowMajor,
    /// First dimension fastest: a Fortran-order .npy file.
    ColMajor,
    /// The array's global (tile) order: a 1-D .npy file of cells.
    Global,
    /// Sparse arrays: whatever order is fastest.
    Unordered,
}

impl From<LayoutArg> for Layout {
    fn from(l: LayoutArg) -> Self {
        match l {
            LayoutArg::RowMajor => Layout::RowMajor,
            LayoutArg::ColMajor => Layout::ColMajor,
            LayoutArg::Global => Layout::Global,
            LayoutArg::Unordered => Layout::Unordered,
        }
    }
}

fn config_help() -> String {
    let mut s = String::from("Configuration keys for --config KEY=VALUE (with their defaults):");
    for (k, default, what) in tessera::CONFIG_KEYS {
        s.push_str(&format!("\n  {k} = {default}\n      {what}"));
    }
    s
}

/// Runs a parsed command line, writing its normal output to `out`.
///
/// # Errors
/// Whatever the command reports; the message names the array or file concerned.
pub fn run(cli: Cli, out: &mut impl Write) -> Result<()> {
    // `ssdb run --config micro`: the ssdb command reads the SS-DB configuration from --config.
    let ssdb = matches!(cli.command, Command::Ssdb(_));
    let config = if ssdb { tessera::Config::new() } else { parse_config(&cli.config)? };
    let stats = cli.stats || cli.stats_json.is_some();
    if stats {
        tessera::stats::reset();
        tessera::stats::enable();
    }
    let result = match &cli.command {
        Command::Create(a) => create(a, &config, out),
        Command::SchemaExample => schema_example(out),
        Command::Info(a) => info(a, &config, out),
        Command::Write(a) => write(a, &config, out),
        Command::Read(a) => read(a, &config, out),
        Command::Import(a) => import(a, &config, out),
        Command::Fragments(a) => maintenance::fragments(a, &config, out),
        Command::Consolidate(a) => maintenance::consolidate_cmd(a, &config, out),
        Command::Vacuum(a) => maintenance::vacuum_cmd(a, &config, out),
        Command::Delete(a) => maintenance::delete(a, &config, out),
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
            if result.is_ok() {
                written?;
            }
        }
    }
    result
}

/// Prints `error: ...` (with every context) to stderr for an error and turns the result into
/// the process's exit code: 0 on success, 1 on error. A closed stdout (`tessera info | head`)
/// is not an error.
pub fn exit_code(result: Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let broken_pipe = e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
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
    let ctx = context(config)?;
    Array::open(&ctx, uri, mode).with_context(|| format!("cannot open array {}", uri.display()))
}

/// `tessera create URI --schema FILE`.
///
/// # Errors
/// An unreadable or invalid schema file, or an array that cannot be created (e.g. the folder
/// exists and is not empty).
pub fn create(args: &CreateArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let (text, name) = if args.schema.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s).context("cannot read the schema from standard input")?;
        (s, "standard input".to_string())
    } else {
        let p = &args.schema;
        let s = std::fs::read_to_string(p).with_context(|| format!("cannot read schema file {}", p.display()))?;
        (s, p.display().to_string())
    };
    let schema = ArraySchema::from_json(&text).with_context(|| format!("invalid schema in {name}"))?;
    let ctx = context(config)?;
    let uri = &args.uri;
    Array::create(&ctx, uri, &schema).with_context(|| format!("cannot create array {}", uri.display()))?;
    writeln!(
        out,
        "created array {} ({} dimension{}, {} attribute{})",
        uri.display(),
        schema.dims.len(),
        plural(schema.dims.len()),
        schema.attrs.len(),
        plural(schema.attrs.len())
    )?;
    Ok(())
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// `tessera schema-example`: prints [`SCHEMA_EXAMPLE`].
///
/// # Errors
/// `out` cannot be written.
pub fn schema_example(out: &mut impl Write) -> Result<()> {
    out.write_all(SCHEMA_EXAMPLE.as_bytes())?;
    Ok(())
}

/// `tessera info URI [--json]`.
///
/// # Errors
/// The array cannot be opened or measured.
pub fn info(args: &InfoArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let array = open(config, &args.uri, Mode::Read)?;
    info::write_info(&array, args.json, out).with_context(|| format!("array {}", args.uri.display()))
}

/// Splits `--input`/`--output` items into (attribute index, file), checking that no attribute
/// is named twice. `existing`: a FILE containing `=` is accepted if it exists.
fn assign_files(schema: &ArraySchema, items: &[String], flag: &str, existing: bool) -> Result<Vec<(usize, PathBuf)>> {
    let names = || schema.attrs.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ");
    let mut out: Vec<(usize, PathBuf)> = Vec::new();
    for item in items {
        let (attr, file) = match item.split_once('=') {
            Some((name, file)) if schema.attr_index(name).is_some() => (schema.attr_index(name), file),
            Some((name, _)) if !(existing && Path::new(item).is_file()) => {
                bail!("{flag} {item}: the array has no attribute {name:?} (it has: {})", names())
            }
            _ => (None, item.as_str()),
        };
        let attr = match attr {
            Some(i) => i,
            None if schema.attrs.len() == 1 => 0,
            None => bail!("{flag} {item}: the array has several attributes ({}); name one as ATTR=FILE", names()),
        };
        if file.is_empty() {
            bail!("{flag} {item}: no file name after '='");
        }
        if out.iter().any(|(a, _)| *a == attr) {
            bail!("{flag}: attribute {} is given more than once", schema.attrs[attr].name);
        }
        out.push((attr, PathBuf::from(file)));
    }
    Ok(out)
}

/// One `--input` file, checked and positioned at its data.
struct Input {
    attr: usize,
    path: PathBuf,
    file: File,
    order: InputOrder,
    cell_size: u64,
}

/// `tessera write URI --subarray SPEC --input [ATTR=]FILE.npy ...`: validates every input
/// (attributes, dtypes, shapes, file sizes) before writing anything, then submits slabs along the
/// slowest dimension and commits one fragment.
///
/// # Errors
/// A bad SPEC, a missing array, an attribute that `.npy` cannot represent, a missing or repeated
/// attribute, a dtype or shape mismatch, a truncated file, or an engine failure. Nothing is
/// committed on error.
pub fn write(args: &WriteArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    write_in_slabs(args, config, out, SLAB_BYTES)
}

fn write_in_slabs(args: &WriteArgs, config: &Config, out: &mut impl Write, slab_bytes: u64) -> Result<()> {
    let uri = &args.uri;
    let array = open(config, uri, Mode::Write)?;
    if array.schema().is_sparse() {
        return sparse::write(&array, args, out);
    }
    for (set, flag) in
        [(args.ignore_extra, "--ignore-extra"), (args.sorted, "--sorted"), (args.delimiter.is_some(), "--delimiter")]
    {
        if set {
            bail!("{flag} applies to sparse arrays; array {} is dense (written from .npy files)", uri.display());
        }
    }
    refuse_tables(&args.input, "--input", uri)?;
    let spec = args.subarray.as_deref().map(SubarraySpec::parse).transpose()?;
    let schema = array.schema().clone();
    let in_array = || format!("array {}", uri.display());
    for a in &schema.attrs {
        check_representable(a, "written").with_context(|| format!("{}: a write needs every attribute", in_array()))?;
    }
    let ranges = match &spec {
        Some(s) => s.resolve(&schema).with_context(in_array)?,
        None => schema.dims.iter().map(tessera::Dimension::int_domain).collect(),
    };
    let spec_text = spec_str(&ranges);
    let shape = extents(&ranges)?;
    let assigned = assign_files(&schema, &args.input, "--input", true)?;
    let missing: Vec<&str> = (0..schema.attrs.len())
        .filter(|i| !assigned.iter().any(|(a, _)| a == i))
        .map(|i| schema.attrs[i].name.as_str())
        .collect();
    if !missing.is_empty() {
        bail!("{}: a write needs every attribute; missing --input for: {}", in_array(), missing.join(", "));
    }
    let mut inputs = Vec::new();
    for (attr, path) in assigned {
        let shown = path.display().to_string();
        let mut file = File::open(&path).with_context(|| format!("cannot open input {shown}"))?;
        let (header, data_at) = Header::read_from(&mut file).with_context(|| format!("cannot read {shown}"))?;
        let a = &schema.attrs[attr];
        let order = check_input(a, &header, &shape, &spec_text, &shown).with_context(in_array)?;
        let data_len = header.data_len().ok_or_else(|| anyhow!("{shown}: the shape is too large"))?;
        let file_len = file.metadata().with_context(|| format!("cannot read {shown}"))?.len();
        if file_len != data_at + data_len {
            bail!(
                "{shown}: the data section has {} bytes but shape {} of {} needs {data_len}",
                file_len.saturating_sub(data_at),
                shape_str(&header.shape),
                header.dtype.name()
            );
        }
        inputs.push(Input { attr, path, file, order, cell_size: a.cell_size() as u64 });
    }
    let layout = write_layout(&inputs)?;

    let subarray = Subarray::from_ranges(&ranges);
    let mut writer = array.writer(&subarray, layout).with_context(|| format!("cannot write to {}", in_array()))?;
    let ndim = shape.len();
    let slow = if layout == Layout::ColMajor { ndim - 1 } else { 0 };
    let unit_cells: u64 = shape.iter().enumerate().filter(|&(i, _)| i != slow).map(|(_, n)| n).product();
    let unit_bytes: u64 = inputs.iter().map(|i| i.cell_size * unit_cells).sum();
    let total_bytes = unit_bytes * shape[slow];
    let rows_target = (slab_bytes / unit_bytes.max(1)).max(1);
    let dim = &schema.dims[slow];
    let bar = progress::bytes_bar(total_bytes, "writing");
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); inputs.len()];
    let (mut start, hi) = ranges[slow];
    while start <= hi {
        let end = slab_end(start, hi, rows_target, dim.int_domain().0, dim.tile_extent());
        let rows = u64::try_from(end - start + 1)?;
        for (inp, buf) in inputs.iter_mut().zip(bufs.iter_mut()) {
            let len = usize::try_from(rows * unit_cells * inp.cell_size)?;
            buf.resize(len, 0);
            inp.file.read_exact(buf).with_context(|| format!("cannot read {}", inp.path.display()))?;
        }
        let mut part = ranges.clone();
        part[slow] = (start, end);
        let attr_inputs: Vec<AttrInput<'_>> =
            inputs.iter().zip(&bufs).map(|(inp, b)| AttrInput::fixed(&schema.attrs[inp.attr].name, b)).collect();
        writer
            .submit_part(&Subarray::from_ranges(&part), &attr_inputs)
            .with_context(|| format!("cannot write cells {} to {}", spec_str(&part), in_array()))?;
        bar.inc(rows * unit_bytes);
        start = end + 1;
    }
    bar.finish_and_clear();
    let meta = writer.finish().with_context(|| format!("cannot commit the write to {}", in_array()))?;
    writeln!(
        out,
        "wrote {} cells, {}, of {} to {} as fragment {}",
        meta.cell_count,
        human(total_bytes),
        spec_text,
        uri.display(),
        meta.name
    )?;
    Ok(())
}

/// `tessera import FILE URI --dims ...`: creates a sparse array whose schema is inferred from a
/// CSV or Parquet file and writes the file into it as one fragment.
///
/// # Errors
/// An existing, non-empty URI, an unreadable file, a missing column, a dimension column with text
/// or empty values, bad `--tile`/`--domain` items, or any error of a sparse write. On error the
/// array folder is removed (emptied, if it existed).
pub fn import(args: &ImportArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    sparse::import(args, config, out)
}

/// Dense arrays exchange .npy files: CSV and Parquet files (for sparse arrays) are refused.
fn refuse_tables(items: &[String], flag: &str, uri: &Path) -> Result<()> {
    for item in items {
        let file = item.split_once('=').map_or(item.as_str(), |(_, f)| f);
        let ext = Path::new(file).extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if matches!(ext.as_deref(), Some("csv" | "tsv" | "parquet" | "pq")) {
            bail!(
                "{flag} {item}: array {} is dense and exchanges .npy files (one per attribute); CSV and Parquet \
                 files are for sparse arrays",
                uri.display()
            );
        }
    }
    Ok(())
}

/// Cells per dimension of inclusive ranges.
fn extents(ranges: &[(i128, i128)]) -> Result<Vec<u64>> {
    ranges.iter().map(|&(lo, hi)| u64::try_from(hi - lo + 1).context("range too large")).collect()
}

/// The layout of the inputs: the order of those whose cells are not a single line (for which C
/// and Fortran order are the same bytes); row-major when all are.
fn write_layout(inputs: &[Input]) -> Result<Layout> {
    let mut chosen: Option<(Layout, &Path)> = None;
    for inp in inputs.iter().filter(|i| !i.order.either) {
        match chosen {
            None => chosen = Some((inp.order.layout, &inp.path)),
            Some((l, p)) if l != inp.order.layout => {
                let name = |l: Layout| if l == Layout::ColMajor { "Fortran" } else { "C" };
                bail!(
                    "inputs mix C and Fortran order ({} is {} order, {} is {} order); convert one with \
                     np.ascontiguousarray or np.asfortranarray",
                    p.display(),
                    name(l),
                    inp.path.display(),
                    name(inp.order.layout)
                );
            }
            Some(_) => {}
        }
    }
    Ok(chosen.map_or(Layout::RowMajor, |c| c.0))
}

/// The last coordinate of the slab starting at `start`: at least `rows` coordinates, extended to
/// the end of a space tile (so every tile the slab touches is complete and the engine can
/// filter and write it at once), and at most `hi`.
fn slab_end(start: i128, hi: i128, rows: u64, dom_lo: i128, tile: u64) -> i128 {
    let tile = i128::from(tile.max(1));
    let target = start - dom_lo + i128::from(rows);
    let aligned = (target + tile - 1) / tile * tile;
    (aligned - 1 + dom_lo).min(hi)
}

/// One `--output` file being written under a temporary name.
struct Output {
    path: PathBuf,
    tmp: PathBuf,
    writer: Option<BufWriter<File>>,
    header: Header,
    attr: String,
}

/// Removes temporary output files unless the read completed.
struct TempFiles(Vec<PathBuf>);

impl Drop for TempFiles {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// `tessera read URI [--subarray SPEC] --output [ATTR=]FILE.npy ... [--layout ...]`: streams the
/// result in batches into temporary files, renamed to the outputs once complete.
///
/// # Errors
/// A bad SPEC, a missing array, an attribute `.npy` cannot represent, an empty array without
/// `--subarray`, an output that cannot be created, or an engine failure. No output file is
/// created or replaced on error.
pub fn read(args: &ReadArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    read_in_batches(args, config, out, BATCH_BYTES)
}

fn read_in_batches(args: &ReadArgs, config: &Config, out: &mut impl Write, batch_bytes: u64) -> Result<()> {
    let uri = &args.uri;
    let array = open(config, uri, Mode::Read)?;
    if array.schema().is_sparse() {
        return sparse::read(&array, args, batch_bytes, out);
    }
    for (set, flag) in [(!args.attrs.is_empty(), "--attrs"), (args.delimiter.is_some(), "--delimiter")] {
        if set {
            bail!(
                "{flag} applies to sparse arrays; array {} is dense (read into .npy files named as ATTR=FILE)",
                uri.display()
            );
        }
    }
    if args.layout == LayoutArg::Unordered {
        bail!("--layout unordered applies to sparse arrays; array {} is dense", uri.display());
    }
    refuse_tables(&args.output, "--output", uri)?;
    let spec = args.subarray.as_deref().map(SubarraySpec::parse).transpose()?;
    let schema = array.schema();
    let in_array = || format!("array {}", uri.display());
    let layout = Layout::from(args.layout);
    let assigned = assign_files(schema, &args.output, "--output", false)?;
    let mut forms = Vec::new();
    for (k, (attr, path)) in assigned.iter().enumerate() {
        if assigned[..k].iter().any(|(_, p)| p == path) {
            bail!("--output: file {} is given more than once", path.display());
        }
        let a = &schema.attrs[*attr];
        let form = read_form(a).with_context(|| format!("--output {}", path.display()))?;
        if layout == Layout::ColMajor && form.values_axis.is_some() {
            bail!(
                "--output {}: attribute {} has {} values per cell, which a Fortran-order file would \
                 separate; use --layout row-major",
                path.display(),
                a.name,
                form.values_axis.unwrap_or(0)
            );
        }
        forms.push(form);
    }
    let ranges = match &spec {
        Some(s) => s.resolve(schema).with_context(in_array)?,
        None => array.nonempty_domain().ok_or_else(|| {
            anyhow!("{} is empty (nothing written yet); give --subarray to read fill values", in_array())
        })?,
    };
    let spec_text = spec_str(&ranges);
    let names: Vec<&str> = assigned.iter().map(|(a, _)| schema.attrs[*a].name.as_str()).collect();
    let mut query = array
        .read_query(&Subarray::from_ranges(&ranges), &names, layout)
        .with_context(|| format!("cannot read {spec_text} of {}", in_array()))?;
    let total_cells = query.total_cells();
    let cells_shape = if layout == Layout::Global { vec![total_cells] } else { extents(&ranges)? };

    let mut temps = TempFiles(Vec::new());
    let mut outputs = Vec::new();
    for ((attr, path), form) in assigned.iter().zip(&forms) {
        let file_name = path.file_name().ok_or_else(|| anyhow!("--output {}: not a file name", path.display()))?;
        let tmp = path.with_file_name(format!(".{}.tessera-{}.tmp", file_name.to_string_lossy(), std::process::id()));
        let file = File::create(&tmp).with_context(|| format!("cannot create {}", path.display()))?;
        temps.0.push(tmp.clone());
        let header =
            Header { dtype: form.dtype, fortran_order: layout == Layout::ColMajor, shape: form.shape(&cells_shape) };
        let mut writer = BufWriter::with_capacity(1 << 20, file);
        writer.write_all(&header.encode()).with_context(|| format!("cannot write {}", path.display()))?;
        outputs.push(Output {
            path: path.clone(),
            tmp,
            writer: Some(writer),
            header,
            attr: schema.attrs[*attr].name.clone(),
        });
    }
    let cell_bytes: u64 = assigned.iter().map(|(a, _)| schema.attrs[*a].cell_size() as u64).sum();
    let bar = progress::bytes_bar(total_cells * cell_bytes, "reading");
    while let Some(batch) =
        query.next_batch(batch_bytes).with_context(|| format!("cannot read {spec_text} of {}", in_array()))?
    {
        for (o, data) in outputs.iter_mut().zip(&batch.attrs) {
            if let Some(w) = o.writer.as_mut() {
                w.write_all(&data.data).with_context(|| format!("cannot write {}", o.path.display()))?;
            }
        }
        bar.inc(batch.cells * cell_bytes);
    }
    bar.finish_and_clear();
    for o in &mut outputs {
        if let Some(w) = o.writer.take() {
            let file = w
                .into_inner()
                .map_err(|e| e.into_error())
                .with_context(|| format!("cannot write {}", o.path.display()))?;
            file.sync_all().with_context(|| format!("cannot write {}", o.path.display()))?;
        }
    }
    for o in &outputs {
        std::fs::rename(&o.tmp, &o.path).with_context(|| format!("cannot create {}", o.path.display()))?;
        temps.0.retain(|t| t != &o.tmp);
    }
    for o in &outputs {
        writeln!(
            out,
            "wrote {}: {} of {} as {}, shape {}, {} order",
            o.path.display(),
            o.attr,
            spec_text,
            o.header.dtype,
            shape_str(&o.header.shape),
            if o.header.fortran_order { "Fortran" } else { "C" }
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn slabs_end_on_tile_boundaries() {
        // Domain starts at 1, tiles of 10: tiles are 1..10, 11..20, ...
        assert_eq!(slab_end(1, 100, 1, 1, 10), 10);
        assert_eq!(slab_end(5, 100, 1, 1, 10), 10);
        assert_eq!(slab_end(5, 100, 6, 1, 10), 10);
        assert_eq!(slab_end(5, 100, 7, 1, 10), 20);
        assert_eq!(slab_end(91, 95, 30, 1, 10), 95);
        assert_eq!(slab_end(-5, 5, 1, -10, 4), -3);
    }

    #[test]
    fn config_items_are_checked() {
        assert!(parse_config(&["sm.compute_concurrency=2".into()]).is_ok());
        let e = format!("{:#}", parse_config(&["sm.nope=1".into()]).unwrap_err());
        assert!(e.contains("unknown key"), "{e}");
        assert!(parse_config(&["novalue".into()]).is_err());
    }

    /// Writes in many slabs (C and Fortran order) and reads in many batches.
    #[test]
    fn many_slabs_and_batches_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("arr");
        let schema = r#"{"version": 1, "array_type": "dense",
            "dims": [{"name": "r", "type": "int32", "domain": [-7, 12], "tile": 3},
                     {"name": "c", "type": "int32", "domain": [0, 10], "tile": 4}],
            "attrs": [{"name": "v", "type": "int64", "filters": [{"name": "lz4"}]}],
            "cell_order": "row-major", "tile_order": "col-major"}"#;
        let schema_path = dir.path().join("s.json");
        std::fs::write(&schema_path, schema).unwrap();
        let config = Config::new();
        let mut out = Vec::new();
        create(&CreateArgs { uri: uri.clone(), schema: schema_path }, &config, &mut out).unwrap();
        // Rows -6..=10 (17), columns 1..=9 (9); value = 100 * r + c.
        let (rows, cols) = ((-6i64..=10).collect::<Vec<_>>(), (1i64..=9).collect::<Vec<_>>());
        let value = |r: i64, c: i64| 100 * r + c;
        for fortran in [false, true] {
            let vals: Vec<i64> = if fortran {
                cols.iter().flat_map(|&c| rows.iter().map(move |&r| value(r, c))).collect()
            } else {
                rows.iter().flat_map(|&r| cols.iter().map(move |&c| value(r, c))).collect()
            };
            let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
            let h = Header { dtype: npy::Dtype::parse("<i8").unwrap(), fortran_order: fortran, shape: vec![17, 9] };
            let input = dir.path().join("in.npy");
            npy::write(&mut File::create(&input).unwrap(), &h, &bytes).unwrap();
            let args = WriteArgs {
                uri: uri.clone(),
                subarray: Some("-6:10,1:9".into()),
                input: vec![input.display().to_string()],
                ignore_extra: false,
                sorted: false,
                delimiter: None,
            };
            write_in_slabs(&args, &config, &mut out, 1).unwrap();
            for layout in [LayoutArg::RowMajor, LayoutArg::ColMajor] {
                let output = dir.path().join("out.npy");
                let args = ReadArgs {
                    uri: uri.clone(),
                    subarray: None,
                    output: vec![format!("v={}", output.display())],
                    layout,
                    attrs: Vec::new(),
                    delimiter: None,
                };
                read_in_batches(&args, &config, &mut out, 50).unwrap();
                let back = npy::read(&mut File::open(&output).unwrap()).unwrap();
                assert_eq!(back.header.shape, vec![17, 9]);
                assert_eq!(back.header.fortran_order, layout == LayoutArg::ColMajor);
                let want: Vec<i64> = if layout == LayoutArg::ColMajor {
                    cols.iter().flat_map(|&c| rows.iter().map(move |&r| value(r, c))).collect()
                } else {
                    rows.iter().flat_map(|&r| cols.iter().map(move |&c| value(r, c))).collect()
                };
                let got: Vec<i64> =
                    back.data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
                assert_eq!(got, want, "fortran input {fortran}, layout {layout:?}");
            }
        }
    }

    #[test]
    fn the_example_schema_is_valid() {
        let s = ArraySchema::from_json(SCHEMA_EXAMPLE).unwrap();
        assert_eq!(s.dims.len(), 2);
    }
}
