//! Sparse arrays from and to CSV and Parquet files: `tessera write` and `tessera read` on sparse
//! arrays, and `tessera import`.
//!
//! A file holds one row per cell and one column per dimension and attribute, named like them.
//! Writing reads every row into column buffers (checking each value against the schema, so a bad
//! row is reported before anything is written) and hands them to the engine in one unordered
//! submit: one fragment, however large the file. With `--sorted` the rows are instead streamed in
//! chunks into one global-order write (the rows must already be in the array's global order),
//! committed at the end. Reading streams result batches into the file, under a temporary name
//! renamed when complete.
//!
//! Files are read and written as Arrow record batches by `table`; `arrow` converts between
//! batches and the engine's columns.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _, Result};
use arrow_array::RecordBatch;
use arrow_schema::{DataType, Field, Schema};
use tessera::{
    default_coord_filters, Array, ArraySchema, ArrayType, AttrInput, Attribute, CellValNum, Config, CoordInput,
    Datatype, Dimension, Filter, FilterPipeline, FragmentMetadata, Layout, Mode, SparseWriter,
};
use tessera::{parse_datetime, TimeUnit, NAT};

use crate::arrow::{
    check_compatible, csv_empty_strings, csv_type, field_of, readable, specs_of, to_arrow, to_engine, ColumnBuf,
    ColumnSpec, Inference, Inferred, Kind,
};
use crate::info::{domain_str, human, json_name, tile_str};
use crate::spec::{named_str, Spec};
use crate::table::{self, Column, Format, Sink};
use crate::{bytes_bar, context, open, plural, ImportArgs, ReadArgs, TempFiles, WriteArgs};

/// Rows per batch read from a file (and per submit with `--sorted`).
const CHUNK_ROWS: usize = 1 << 20;

/// Finds the column of each spec in `cols` (of `file`) and how to read it (CSV: parsed as
/// [`csv_type`]; Parquet: as it is, checked to fit the spec).
fn map_columns(
    cols: &[Column],
    specs: &[ColumnSpec],
    format: Format,
    array: &str,
    file: &str,
    ignore_extra: bool,
) -> Result<Vec<(usize, DataType)>> {
    let names = || cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ");
    let missing: Vec<String> =
        specs.iter().filter(|s| !cols.iter().any(|c| c.name == s.name)).map(ColumnSpec::role).collect();
    if !missing.is_empty() {
        bail!("{file}: no column for {} of {array} (the file has columns: {})", missing.join(", "), names());
    }
    let extra: Vec<&str> =
        cols.iter().filter(|c| !specs.iter().any(|s| s.name == c.name)).map(|c| c.name.as_str()).collect();
    if !extra.is_empty() && !ignore_extra {
        let (s, es, them) = if extra.len() == 1 { ("", "es", "it") } else { ("s", "", "them") };
        let (extra, known) = (extra.join(", "), specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", "));
        bail!(
            "{file}: column{s} {extra} match{es} no dimension or attribute of {array} (it has: {known}); pass \
             --ignore-extra to skip {them}"
        );
    }
    let pick = |s: &ColumnSpec| {
        let i = cols.iter().position(|c| c.name == s.name).unwrap_or_default();
        let c = &cols[i];
        if !matches!(format, Format::Csv(_)) {
            check_compatible(&c.data_type, &c.name, &c.type_name, s).with_context(|| file.to_string())?;
        }
        Ok((i, csv_type(s)))
    };
    specs.iter().map(pick).collect()
}

/// Writes the rows of `path` into the open sparse `array` as one fragment: all rows in one
/// unordered submit, or with `sorted` (rows in global order) chunks of `chunk_rows` rows into one
/// global-order write. Errors name the row and column of a bad value; nothing is committed on
/// error.
fn load(
    array: &Array,
    path: &Path,
    format: Format,
    ignore_extra: bool,
    sorted: bool,
    chunk_rows: usize,
) -> Result<FragmentMetadata> {
    let schema = array.schema();
    let in_array = format!("array {}", array.uri().display());
    let all: Vec<usize> = (0..schema.attrs.len()).collect();
    let specs = specs_of(schema, &all).with_context(|| format!("{in_array}: a write needs every attribute"))?;
    let file = path.display().to_string();
    let cols = table::columns(path, format, false)?;
    let picked = map_columns(&cols, &specs, format, &in_array, &file, ignore_extra)?;
    let bar = bytes_bar(std::fs::metadata(path).map_or(0, |m| m.len()), "loading");
    let mut bufs = vec![ColumnBuf::default(); specs.len()];
    let layout = if sorted { Layout::Global } else { Layout::Unordered };
    let mut w = array.sparse_writer(layout).with_context(|| format!("cannot write to {in_array}"))?;
    let mut rows = 0u64;
    for batch in table::batches(path, format, &cols, &picked, chunk_rows, &bar)? {
        let batch = batch?;
        if sorted {
            bufs.iter_mut().for_each(ColumnBuf::clear);
        }
        for ((spec, values), buf) in specs.iter().zip(&batch).zip(bufs.iter_mut()) {
            let values =
                if matches!(format, Format::Csv(_)) { csv_empty_strings(spec, values) } else { Arc::clone(values) };
            to_engine(spec, values.as_ref(), buf)
                .map_err(|(row, e)| anyhow!("{file}: row {}, column {}: {e}", rows + row as u64 + 1, spec.name))?;
        }
        let (first, n) = (rows + 1, batch.first().map_or(0, |c| c.len() as u64));
        if sorted {
            submit(&mut w, schema.dims.len(), &specs, &bufs).with_context(|| {
                format!(
                    "cannot write rows {first}..{} of {file} to {in_array} (cell k of these rows is row {first} + k; \
                     --sorted needs the rows in the array's global order)",
                    first + n - 1
                )
            })?;
        }
        rows += n;
    }
    bar.finish_and_clear();
    if rows == 0 {
        bail!("{file} has no data rows: nothing to write");
    }
    if !sorted {
        if rows > u64::from(u32::MAX) {
            // The engine sorts an unordered write with a u32 permutation.
            bail!(
                "{file} has {rows} rows; one unordered write takes at most 2^32 - 1 cells (sort the rows in the \
                 array's global order and pass --sorted)"
            );
        }
        submit(&mut w, schema.dims.len(), &specs, &bufs)
            .with_context(|| format!("cannot write {file} to {in_array} (cell k is data row k + 1 of the file)"))?;
        drop(bufs);
    }
    w.finish().with_context(|| format!("cannot commit the write to {in_array}"))
}

/// Submits the buffered cells (dimensions first, as `specs`).
fn submit(w: &mut SparseWriter, ndim: usize, specs: &[ColumnSpec], bufs: &[ColumnBuf]) -> tessera::Result<()> {
    let coords: Vec<CoordInput<'_>> =
        specs[..ndim].iter().zip(bufs).map(|(s, b)| CoordInput { name: &s.name, data: &b.data }).collect();
    let attrs: Vec<AttrInput<'_>> = (specs[ndim..].iter().zip(&bufs[ndim..]))
        .map(|(s, b)| AttrInput {
            name: &s.name,
            data: &b.data,
            offsets: (s.kind == Kind::Str(None)).then_some(b.offsets.as_slice()),
            validity: s.nullable.then_some(b.validity.as_slice()),
        })
        .collect();
    w.submit(&coords, &attrs)
}

/// `tessera write URI --input FILE.csv|FILE.parquet` on a sparse array.
pub(crate) fn write(array: &Array, args: &WriteArgs, out: &mut impl Write) -> Result<()> {
    let uri = args.uri.display();
    if args.subarray.is_some() {
        bail!("array {uri} is sparse: --subarray is for dense writes; a sparse write takes every cell's coordinates from the file");
    }
    let [input] = args.input.as_slice() else {
        bail!("array {uri} is sparse: give one --input file (.csv or .parquet) holding every column");
    };
    let path = PathBuf::from(input);
    let npy = format!(
        "array {uri} is sparse: write it from a .csv or .parquet file with one row per cell (columns named like its \
         dimensions and attributes), not from .npy"
    );
    let format = Format::of(&path, args.delimiter.as_deref(), Some(&npy))?;
    let start = Instant::now();
    let meta = load(array, &path, format, args.ignore_extra, args.sorted, CHUNK_ROWS)?;
    let (n, stored, secs) = (meta.cell_count, human(meta.stored_bytes()), start.elapsed().as_secs_f64());
    let (file, name, s) = (path.display(), &meta.name, plural(n));
    writeln!(out, "wrote {n} cell{s} from {file} to {uri} as fragment {name} ({stored} stored) in {secs:.2} s")?;
    Ok(())
}

/// `tessera read URI --output FILE.csv|FILE.parquet` on a sparse array.
pub(crate) fn read(array: &Array, args: &ReadArgs, batch_bytes: u64, out: &mut impl Write) -> Result<()> {
    let uri = args.uri.display();
    let schema = array.schema();
    let [output] = args.output.as_slice() else {
        bail!("array {uri} is sparse: give one --output file (.csv or .parquet)");
    };
    let path = PathBuf::from(output);
    let npy = format!("array {uri} is sparse: read it into a .csv or .parquet file (one row per cell), not .npy");
    let format = Format::of(&path, args.delimiter.as_deref(), Some(&npy))?;
    let mut attrs: Vec<usize> = if args.attrs.is_empty() { (0..schema.attrs.len()).collect() } else { Vec::new() };
    for name in &args.attrs {
        let Some(i) = schema.attr_index(name) else {
            let names: Vec<&str> = schema.attrs.iter().map(|a| a.name.as_str()).collect();
            bail!("--attrs: array {uri} has no attribute {name:?} (it has: {})", names.join(", "));
        };
        if attrs.contains(&i) {
            bail!("--attrs: attribute {name} is given more than once");
        }
        attrs.push(i);
    }
    let specs =
        specs_of(schema, &attrs).with_context(|| format!("array {uri}: choose the attributes to read with --attrs"))?;
    // No SPEC is the whole domain, as an empty one.
    let ranges = Spec::parse(args.subarray.as_deref().unwrap_or(""), false)?;
    let ranges = ranges.resolve(schema).with_context(|| format!("array {uri}"))?;
    let range_text = named_str(schema, &ranges);
    let ranges: Vec<Vec<_>> = ranges.iter().map(|r| r.iter().copied().collect()).collect();
    let names: Vec<&str> = attrs.iter().map(|&i| schema.attrs[i].name.as_str()).collect();
    let layout = args.layout;
    let reading = || format!("cannot read {range_text} of array {uri}");
    let mut query = match crate::parse_where(args.where_.as_deref())? {
        Some(c) => array.sparse_query_where(&ranges, &names, layout, &c),
        None => array.sparse_query(&ranges, &names, layout),
    }
    .with_context(reading)?;
    let mut temps = TempFiles::default();
    let text = matches!(format, Format::Csv(_));
    let fields: Vec<Field> = specs.iter().map(|s| field_of(s, text)).collect();
    let arrow_schema = Arc::new(Schema::new(fields));
    let mut sink = Sink::new(temps.create(&path)?, format, &arrow_schema)?;
    let cell_bytes: u64 = specs.iter().map(ColumnSpec::size_estimate).sum();
    let bar = bytes_bar(query.total_cells() * cell_bytes, "reading");
    let mut cells = 0u64;
    let writing = || format!("cannot write {}", path.display());
    while let Some(batch) = query.next_batch(batch_bytes).with_context(reading)? {
        let n = usize::try_from(batch.cells)?;
        let cols = specs.iter().zip(batch.attrs).map(|(s, a)| to_arrow(s, a, n, text)).collect::<Result<_>>();
        let batch_cells = batch.cells;
        let rb = RecordBatch::try_new(arrow_schema.clone(), cols.with_context(reading)?).with_context(reading)?;
        sink.write(&rb).with_context(writing)?;
        cells += batch_cells;
        bar.inc(batch_cells * cell_bytes);
    }
    bar.finish_and_clear();
    sink.finish().with_context(writing)?;
    temps.commit()?;
    let kind = if text { "CSV" } else { "Parquet" };
    let columns = specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ");
    let (file, layout, s) = (path.display(), layout.name(), plural(cells));
    writeln!(
        out,
        "wrote {file} ({kind}): {cells} cell{s} of {uri} ({range_text}), layout {layout}, columns {columns}"
    )?;
    Ok(())
}

/// Parses `NAME=VALUE` items of `flag`, checking names are dimensions in `dims`.
fn named_items<'a>(items: &'a [String], flag: &str, dims: &[String]) -> Result<Vec<(usize, &'a str)>> {
    let mut out: Vec<(usize, &str)> = Vec::new();
    for item in items {
        let Some((name, value)) = item.split_once('=') else {
            bail!("{flag} {item:?}: expected DIM=VALUE");
        };
        let Some(i) = dims.iter().position(|d| d == name.trim()) else {
            bail!("{flag} {item:?}: {name:?} is not one of the dimensions ({})", dims.join(", "));
        };
        if out.iter().any(|(k, _)| *k == i) {
            bail!("{flag}: dimension {name} is given more than once");
        }
        out.push((i, value.trim()));
    }
    Ok(out)
}

/// Parses `flag` value `v` of dimension `d`, which `ok` must accept (else: `flag d=v: what`).
fn value_of<T: std::str::FromStr>(flag: &str, d: &str, v: &str, ok: impl Fn(&T) -> bool, what: &str) -> Result<T> {
    v.trim().parse::<T>().ok().filter(ok).ok_or_else(|| anyhow!("{flag} {d}={v}: {what}"))
}

/// Parses `--domain` value `v` (`LO:HI`) of dimension `d`.
fn domain_of<T: std::str::FromStr>(d: &str, v: &str, ok: impl Fn(&T) -> bool, what: &str) -> Result<(T, T)> {
    let (a, b) = v.split_once(':').ok_or_else(|| anyhow!("--domain {d}={v}: expected LO:HI"))?;
    let p = |s: &str| s.trim().parse::<T>().ok().filter(&ok).ok_or_else(|| anyhow!("--domain {d}={v}: {what}"));
    Ok((p(a)?, p(b)?))
}

/// Parses `--domain` value `v` of `datetime64[u]` dimension `d`: `LO:HI` (or `LO..HI`) of
/// counts of `u` or ISO 8601 times, split as `--subarray` items are (a time's own colons stay).
fn time_domain(d: &str, v: &str, u: TimeUnit) -> Result<(i128, i128)> {
    let bound = |s: &str| {
        let s = s.trim();
        s.parse().ok().or_else(|| parse_datetime(s, u).ok().filter(|&t| t != NAT).map(i128::from))
    };
    let range = crate::spec::split_range(v).ok().flatten().and_then(|(a, b)| Some((bound(a)?, bound(b)?)));
    range.ok_or_else(|| anyhow!("--domain {d}={v}: expected LO:HI, ISO 8601 times or integer counts of {}", u.code()))
}

/// The folder an import creates the array in: absent (created) or empty (emptied on failure).
struct NewArrayDir {
    path: PathBuf,
    existed: bool,
    done: bool,
}

impl Drop for NewArrayDir {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.existed {
            if let Ok(entries) = std::fs::read_dir(&self.path) {
                for e in entries.flatten() {
                    let p = e.path();
                    let _ = if p.is_dir() { std::fs::remove_dir_all(&p) } else { std::fs::remove_file(&p) };
                }
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// `tessera import FILE URI --dims ...`: infers a sparse schema from the file, creates the array
/// and writes the file into it.
pub(crate) fn import(args: &ImportArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let start = Instant::now();
    let path = &args.file;
    let file = path.display().to_string();
    let format = Format::of(path, args.delimiter.as_deref(), None)?;
    let uri = &args.uri;
    // The target must not hold anything yet (checked first: nothing is read for nothing).
    let existed = uri.exists();
    if existed && (!uri.is_dir() || std::fs::read_dir(uri).map_or(true, |mut d| d.next().is_some())) {
        bail!("cannot import into {}: it already exists (give a new folder)", uri.display());
    }
    let dims: Vec<String> = args.dims.iter().map(|d| d.trim().to_string()).collect();
    let cols = table::columns(path, format, true)?;
    let col_names = || cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ");
    let find = |name: &str, what: &str| {
        cols.iter()
            .position(|c| c.name == name)
            .ok_or_else(|| anyhow!("{file}: no column {name:?} for {what} (the file has columns: {})", col_names()))
    };
    let mut picked = dims.iter().map(|d| find(d, "--dims")).collect::<Result<Vec<_>>>()?;
    let attrs: Vec<String> = if args.attrs.is_empty() {
        cols.iter().filter(|c| !dims.contains(&c.name)).map(|c| c.name.clone()).collect()
    } else {
        args.attrs.iter().map(|a| a.trim().to_string()).collect()
    };
    for a in &attrs {
        if dims.contains(a) {
            bail!("column {a} is given both as a dimension and as an attribute");
        }
        picked.push(find(a, "--attrs")?);
    }
    for (k, &c) in picked.iter().enumerate() {
        if picked[..k].contains(&c) {
            bail!("column {} is given more than once", cols[c].name);
        }
        if !readable(&cols[c].data_type) {
            bail!("{file}: column {} has Parquet type {}, which tessera cannot read", cols[c].name, cols[c].type_name);
        }
    }
    if dims.is_empty() {
        bail!("--dims: name at least one column");
    }
    if attrs.is_empty() {
        bail!("{file}: an array needs at least one attribute, and every column is a dimension");
    }
    let picked: Vec<(usize, DataType)> = picked.iter().map(|&c| (c, cols[c].data_type.clone())).collect();

    // Pass 1 (after arrow-csv's inference of a CSV file's types): nulls and ranges.
    let mut inf = vec![Inference::default(); picked.len()];
    let bar = bytes_bar(std::fs::metadata(path).map_or(0, |m| m.len()), "scanning");
    for batch in table::batches(path, format, &cols, &picked, CHUNK_ROWS, &bar)? {
        for (i, v) in inf.iter_mut().zip(&batch?) {
            i.add(v.as_ref())?;
        }
    }
    bar.finish_and_clear();
    if inf.first().map_or(0, |i| i.rows) == 0 {
        bail!("{file} has no data rows: nothing to import");
    }
    let (schema, notes) = infer_schema(args, &dims, &attrs, &inf, &file)?;

    // Create, then write; on failure the folder is left as it was.
    let ctx = context(config)?;
    let mut guard = NewArrayDir { path: uri.clone(), existed, done: false };
    Array::create(&ctx, uri, &schema).with_context(|| format!("cannot create array {}", uri.display()))?;
    let array = open(config, uri, Mode::Write)?;
    let meta = load(&array, path, format, true, args.sorted, CHUNK_ROWS)?;
    guard.done = true;
    let disk = ctx.storage().usage(uri).map(|(b, _)| b).unwrap_or(0);

    let (cells, secs) = (meta.cell_count, start.elapsed().as_secs_f64());
    writeln!(out, "imported {cells} cells from {file} into {} in {secs:.2} s", uri.display())?;
    for n in &notes {
        writeln!(out, "  note: {n}")?;
    }
    for d in &schema.dims {
        let domain = domain_str(d);
        let tile = tile_str(d).map_or_else(|| "no tile extent".into(), |t| format!("tile {t}"));
        writeln!(out, "  dimension {}: {}, domain {domain}, {tile}", d.name, d.datatype)?;
    }
    for a in &schema.attrs {
        let var = if a.is_var() { " (variable length)" } else { "" };
        let null = if a.nullable { ", nullable" } else { "" };
        writeln!(out, "  attribute {}: {}{var}{null}", a.name, a.datatype)?;
    }
    let (order, tiles, capacity) = (json_name(schema.cell_order), json_name(schema.tile_order), schema.capacity);
    let dups = if schema.allows_duplicates { "allowed" } else { "not allowed" };
    writeln!(out, "  cell order {order}, tile order {tiles}, capacity {capacity}, duplicates {dups}")?;
    let (name, stored, unfiltered, disk) =
        (&meta.name, human(meta.stored_bytes()), human(meta.unfiltered_bytes()), human(disk));
    writeln!(out, "  1 fragment ({name}): {stored} stored ({unfiltered} before filters), {disk} on disk")?;
    Ok(())
}

/// The schema `tessera import` creates, and notes on choices made for the user.
fn infer_schema(
    args: &ImportArgs,
    dims: &[String],
    attrs: &[String],
    inf: &[Inference],
    file: &str,
) -> Result<(ArraySchema, Vec<String>)> {
    let mut notes = Vec::new();
    let ndim = dims.len();
    // Dimension types: all the same (the engine's rule); floats win over integers.
    let mut dim_types = Vec::new();
    for (d, i) in dims.iter().zip(inf) {
        if i.nulls > 0 {
            let (n, s, row) = (i.nulls, plural(i.nulls), i.first_null.unwrap_or(0));
            bail!("{file}: column {d} has {n} empty value{s} (first at row {row}); every cell needs a coordinate");
        }
        match i.inferred() {
            Inferred::Str => bail!("{file}: column {d} holds text; a dimension needs numbers"),
            Inferred::Int(Datatype::Bool) => bail!("{file}: column {d} holds booleans; a dimension needs numbers"),
            t => dim_types.push(t),
        }
        if i.non_finite {
            bail!("{file}: column {d} holds NaN or infinite values; coordinates must be finite");
        }
    }
    // datetime64 dimensions: all of one unit (no other type holds their values exactly).
    let time = dim_types.iter().find_map(|t| matches!(t, Inferred::Int(Datatype::Datetime64(_))).then_some(*t));
    if let Some(t) = time.filter(|&t| dim_types.iter().any(|&u| u != t)) {
        let name = |t: &Inferred| match *t {
            Inferred::Int(t) => t.name(),
            _ => "float64",
        };
        let types: Vec<String> = dims.iter().zip(&dim_types).map(|(d, t)| format!("{d} {}", name(t))).collect();
        let (types, t) = (types.join(", "), name(&t));
        bail!(
            "{file}: the dimensions would be {types}, but all dimensions of an array have one type (a {t} dimension \
             needs the others of that type too)"
        );
    }
    let float_dims = dim_types.contains(&Inferred::Float);
    if float_dims {
        let ints: Vec<&str> =
            dims.iter().zip(&dim_types).filter(|(_, t)| **t != Inferred::Float).map(|(d, _)| d.as_str()).collect();
        if !ints.is_empty() {
            let (s, are) = if ints.len() == 1 { ("s", "is") } else { ("", "are") };
            let ints = ints.join(", ");
            notes.push(format!("{ints} hold{s} integers but {are} float64: all dimensions of an array have one type"));
        }
    }
    let int_type = match time {
        Some(Inferred::Int(t)) => t,
        _ if dim_types.contains(&Inferred::Int(Datatype::UInt64)) => Datatype::UInt64,
        _ => Datatype::Int64,
    };
    let domains = named_items(&args.domain, "--domain", dims)?;
    let tiles = named_items(&args.tile, "--tile", dims)?;
    let (level, mut inferred) = (args.zstd, Vec::new());
    let mut b = ArraySchema::builder(ArrayType::Sparse);
    for (k, (d, i)) in dims.iter().zip(inf).enumerate() {
        let domain = domains.iter().find(|(j, _)| *j == k).map(|(_, v)| *v);
        let tile = tiles.iter().find(|(j, _)| *j == k).map(|(_, v)| *v);
        if domain.is_none() {
            inferred.push(d.as_str());
        }
        let mut dim = if float_dims {
            let domain = domain.map(|v| domain_of(d, v, |x: &f64| x.is_finite(), "bounds must be finite numbers"));
            let tile = tile
                .map(|v| value_of("--tile", d, v, |t: &f64| t.is_finite() && *t > 0.0, "expected a positive number"));
            let domain = domain.transpose()?.unwrap_or(i.float_range.unwrap_or((0.0, 0.0)));
            Dimension::float(d.clone(), Datatype::Float64, domain, tile.transpose()?)
        } else {
            let domain = domain.map(|v| match int_type.time_unit() {
                Some(u) => time_domain(d, v, u),
                None => domain_of(d, v, |_: &i128| true, "bounds must be integers (the column holds integers)"),
            });
            let tile = tile.map(|v| value_of("--tile", d, v, |t: &u64| *t > 0, "expected a positive integer"));
            let domain = domain.transpose()?.unwrap_or(i.int_range.unwrap_or((0, 0)));
            Dimension {
                tile: tile.transpose()?.map(tessera::Extent::Int),
                ..Dimension::new(d.clone(), int_type, domain, 1)
            }
        };
        if let Some(l) = level {
            let zstd = |&f: &Filter| if let Filter::Zstd { .. } = f { Filter::Zstd { level: l } } else { f };
            dim.filters = FilterPipeline::new(default_coord_filters().filters().iter().map(zstd).collect());
        }
        b = b.dim(dim);
    }
    if !inferred.is_empty() {
        notes.push(format!(
            "the domain of {} is the range of the data; later writes must stay inside it (set it with --domain)",
            inferred.join(", ")
        ));
    }
    if let Some(l) = level.filter(|l| !(-7..=22).contains(l)) {
        bail!("--zstd {l}: the level must be in -7..=22");
    }
    for (a, i) in attrs.iter().zip(&inf[ndim..]) {
        let (t, cell_val_num) = match i.inferred() {
            Inferred::Int(t) => (t, CellValNum::Fixed(1)),
            Inferred::Float => (Datatype::Float64, CellValNum::Fixed(1)),
            Inferred::Str => (Datatype::Utf8, CellValNum::Var),
        };
        let filters = level.map(|l| FilterPipeline::new(vec![Filter::Zstd { level: l }])).unwrap_or_default();
        b = b.attr(Attribute { cell_val_num, nullable: i.nulls > 0, filters, ..Attribute::new(a.clone(), t) });
    }
    if let Some(c) = args.capacity {
        b = b.capacity(c);
    }
    b = b.cell_order(args.cell_order).tile_order(args.tile_order);
    b = b.allows_duplicates(args.allows_duplicates);
    Ok((b.build().context("cannot build the inferred schema")?, notes))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn tree(dir: &Path) -> Vec<(PathBuf, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p.clone());
                }
                let len = std::fs::metadata(&p).unwrap().len();
                out.push((p, len));
            }
        }
        out.sort();
        out
    }

    /// `--sorted` streams many chunks into one fragment; a bad row in a late chunk (after full
    /// tiles were written) commits nothing and leaves the folder as it was.
    #[test]
    fn sorted_streaming_in_small_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("s");
        let schema = ArraySchema::builder(ArrayType::Sparse)
            .dim(Dimension::new("x", Datatype::Int64, (0, 999), 100))
            .attr(Attribute::new("v", Datatype::Int32))
            .capacity(3)
            .build()
            .unwrap();
        let ctx = context(&Config::new()).unwrap();
        Array::create(&ctx, &uri, &schema).unwrap();
        let array = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let csv = dir.path().join("in.csv");
        let text: String =
            std::iter::once("x,v\n".to_string()).chain((0..25).map(|i| format!("{},{i}\n", i * 7))).collect();
        std::fs::write(&csv, &text).unwrap();
        let meta = load(&array, &csv, Format::Csv(b','), false, true, 2).unwrap();
        assert_eq!(meta.cell_count, 25);
        let before = tree(&uri);
        // Out of order at row 20 (in the 10th chunk of 2 rows).
        let bad: String = std::iter::once("x,v\n".to_string())
            .chain((0..25).map(|i| format!("{},{i}\n", if i == 19 { 5 } else { i * 7 + 1 })))
            .collect();
        std::fs::write(&csv, &bad).unwrap();
        let array = Array::open(&ctx, &uri, Mode::Write).unwrap();
        let e = format!("{:#}", load(&array, &csv, Format::Csv(b','), false, true, 2).unwrap_err());
        assert!(e.contains("cannot write rows 19..20") && e.contains("not in global order"), "{e}");
        assert_eq!(tree(&uri), before);
        // A bad value in a late chunk, too.
        let bad = text.replace("\n140,20\n", "\n140,x\n");
        std::fs::write(&csv, &bad).unwrap();
        let e = format!("{:#}", load(&array, &csv, Format::Csv(b','), false, true, 2).unwrap_err());
        assert!(e.contains("in.csv") && e.contains("at line 21") && e.contains("'x'"), "{e}");
        assert_eq!(tree(&uri), before);
        let r = Array::open(&ctx, &uri, Mode::Read).unwrap();
        assert_eq!(r.fragments().len(), 1);
    }
}
