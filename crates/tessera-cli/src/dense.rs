//! Dense arrays from and to NumPy `.npy` files: `tessera write` and `tessera read` (sparse arrays
//! are handed to `sparse`).
//!
//! `npyz` reads and writes the headers; the data sections are streamed as raw bytes, since C
//! order is the engine's row-major layout and Fortran order its column-major one. A fixed-size,
//! non-nullable attribute of `cell_val_num` n over a subarray of shape `S` is:
//! - n = 1: the dtype of the attribute's type (`int32` → `<i4`, `bool` → `|b1`,
//!   `datetime64[s]` → `<M8[s]`: the same unit, NaT being the `i64` minimum in both), shape `S`;
//!   `uint8` also takes `bool` (`|b1`) input, written as its 0/1 bytes;
//! - `float32`/`float64` with n = 2: `complex64`/`complex128` of shape `S` (what a read gives), or
//!   the float type with shape `S + (2,)`;
//! - other n > 1: the value type with shape `S + (n,)`, C order only (a cell's values adjacent);
//! - `utf8` with n values: byte strings `|S<n>` of shape `S`.
//!
//! Variable-length and nullable attributes have no `.npy` form and are refused.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _, Result};
use npyz::{DType, NpyHeader, Order, TypeChar, TypeStr, WriteOptions, WriterBuilder};
use tessera::{ArraySchema, AttrInput, Attribute, CellValNum, Config, Datatype, Layout, Mode, Subarray, TimeUnit};

use crate::info::human;
use crate::spec::{spec_str, Spec};
use crate::{bytes_bar, open, ReadArgs, TempFiles, WriteArgs};

/// Bytes of input cells handed to the engine per submit when writing.
pub(crate) const SLAB_BYTES: u64 = 64 << 20;
/// Bytes of result cells asked of the engine per batch when reading.
pub(crate) const BATCH_BYTES: u64 = 64 << 20;

/// What to tell users about attributes `.npy` cannot hold.
const PYTHON_HINT: &str = "use the Python API (`import tessera`), which returns offsets and validity as \
     separate arrays";

/// The `.npy` form of an attribute's cells: the element type (with its unit for `datetime64`)
/// and, if any, a trailing axis of `values_axis` values per cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Form {
    kind: TypeChar,
    size: u64,
    unit: Option<TimeUnit>,
    values_axis: Option<u64>,
}

impl Form {
    /// The shape of `cells` cells in this form.
    fn shape(self, cells: &[u64]) -> Vec<u64> {
        cells.iter().copied().chain(self.values_axis).collect()
    }

    /// The NumPy type string, e.g. `<f8`, `|u1`, `|S5`, `<M8[ms]`.
    fn type_str(self) -> Result<TypeStr> {
        let order = if self.size == 1 || self.kind == TypeChar::ByteStr { '|' } else { '<' };
        let unit = self.unit.map(|u| format!("[{}]", u.code())).unwrap_or_default();
        format!("{order}{}{}{unit}", self.kind.to_str(), self.size).parse().map_err(|e| anyhow!("dtype: {e}"))
    }
}

/// A dtype for people: `float64 (<f8)`, `bool (|b1)`, `S4 (|S4)`, `datetime64[s] (<M8[s])`.
fn dtype_str(ts: &TypeStr) -> String {
    let (kind, size) = (ts.type_char(), ts.size_field());
    let bits = size * 8;
    let name = match kind {
        TypeChar::Int => format!("int{bits}"),
        TypeChar::Uint => format!("uint{bits}"),
        TypeChar::Float => format!("float{bits}"),
        TypeChar::Complex => format!("complex{bits}"),
        TypeChar::Bool => "bool".into(),
        TypeChar::ByteStr => format!("S{size}"),
        TypeChar::DateTime => format!("datetime64[{}]", ts.time_units().map_or("?", |u| u.to_str())),
        k => format!("{}{size}", k.to_str()),
    };
    format!("{name} ({ts})")
}

/// The forms attribute `a` takes, the one a read produces first; refuses attributes without one
/// (`verb`: "read" or "written").
fn forms(a: &Attribute, verb: &str) -> Result<Vec<Form>> {
    let (name, datatype) = (&a.name, a.datatype);
    let n = match a.cell_val_num {
        CellValNum::Var => bail!(
            "attribute {name} is variable-length ({datatype}, cell_val_num \"var\"): .npy cannot represent it, so it \
             cannot be {verb} here; {PYTHON_HINT}"
        ),
        CellValNum::Fixed(n) => u64::from(n),
    };
    if a.nullable {
        bail!(
            "attribute {name} is nullable: .npy cannot represent null cells, so it cannot be {verb} here; \
             {PYTHON_HINT}"
        );
    }
    let (size, unit) = (a.datatype.size() as u64, a.datatype.time_unit());
    let kind = match a.datatype {
        Datatype::Utf8 => return Ok(vec![Form { kind: TypeChar::ByteStr, size: n, unit, values_axis: None }]),
        Datatype::Float32 | Datatype::Float64 => TypeChar::Float,
        Datatype::Bool => TypeChar::Bool,
        Datatype::Datetime64(_) => TypeChar::DateTime,
        t if t.integer_bounds().is_some_and(|(lo, _)| lo < 0) => TypeChar::Int,
        t if t.is_integer() => TypeChar::Uint,
        t => bail!("attribute {name}: type {t} has no .npy equivalent"),
    };
    let values_axis = (n > 1).then_some(n);
    let mut out = vec![Form { kind, size, unit, values_axis }];
    if kind == TypeChar::Float && n == 2 {
        out.insert(0, Form { kind: TypeChar::Complex, size: 2 * size, unit, values_axis: None });
    }
    if a.datatype == Datatype::UInt8 {
        out.push(Form { kind: TypeChar::Bool, size: 1, unit, values_axis });
    }
    Ok(out)
}

/// One `--input` file, checked and positioned at its data.
struct Input {
    attr: usize,
    path: PathBuf,
    file: File,
    fortran: bool,
    cell_size: u64,
}

/// Reads the header of `.npy` file `file` (shown as `shown`), leaving it at the data; returns
/// the header, the offset of the data and the file's length. Every size the header gives is
/// checked before `npyz` sees it: the header length against 16 MiB and the file's length, and
/// the shape's element count (which `npyz` multiplies out unchecked) against overflow and the
/// bytes after the header.
fn read_header(file: &mut File, shown: &str) -> Result<(NpyHeader, u64, u64)> {
    let invalid = |e: &dyn std::fmt::Display| anyhow!("cannot read {shown}: not a valid .npy file: {e}");
    let file_len = file.metadata().with_context(|| format!("cannot read {shown}"))?.len();
    let mut head = Vec::with_capacity(12);
    Read::by_ref(file).take(12).read_to_end(&mut head).with_context(|| format!("cannot read {shown}"))?;
    let (start, hlen) = match (head.get(6), head.get(8..10), head.get(8..12)) {
        (Some(1), Some(b), _) => (10, u64::from(u16::from_le_bytes([b[0], b[1]]))),
        (Some(2 | 3), _, Some(b)) => (12, u64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))),
        _ => (0, 0),
    };
    if hlen > 1 << 24 {
        return Err(invalid(&format!("header length {hlen} is implausibly large")));
    }
    let data_at = start + hlen;
    if data_at > file_len {
        return Err(invalid(&format!("the header ({hlen} bytes) runs past the end of the file ({file_len} bytes)")));
    }
    let rest = data_at.saturating_sub(head.len() as u64);
    Read::by_ref(file).take(rest).read_to_end(&mut head).with_context(|| format!("cannot read {shown}"))?;
    if let Some(shape) = head.get(usize::try_from(start)?..).and_then(shape_text) {
        // Every dtype the CLI takes has at least one byte per element (and a 0 in the shape none).
        let nonzero = shape.iter().filter(|&&n| n != 0).try_fold(1u64, |p, &n| p.checked_mul(n));
        let room = file_len - data_at;
        if nonzero.is_none_or(|n| n > room && !shape.contains(&0)) {
            let shape = shape_str(&shape);
            return Err(invalid(&format!(
                "shape {shape} has more elements than the {room} bytes after the header can hold"
            )));
        }
    }
    let header = NpyHeader::from_reader(head.as_slice()).map_err(|e| invalid(&e))?;
    if head.len() as u64 != data_at {
        return Err(invalid(&format!("the header length {hlen} does not match the header")));
    }
    Ok((header, data_at, file_len))
}

/// The numbers of the `'shape': (...)` tuple of a `.npy` header's text, if it has one that
/// parses (whatever does not is left to `npyz` to refuse).
fn shape_text(header: &[u8]) -> Option<Vec<u64>> {
    let text = std::str::from_utf8(header).ok()?;
    let after = &text[text.find("'shape'").or_else(|| text.find("\"shape\""))?..];
    let tuple = &after[after.find('(')? + 1..after.find(')')?];
    tuple.split(',').map(str::trim).filter(|n| !n.is_empty()).map(|n| n.trim_end_matches('L').parse().ok()).collect()
}

/// Checks that `header` (of file `shown`) holds cells of `a` over a subarray of shape `cells`
/// (`spec` names it), and says whether its data is in Fortran order.
fn check_input(a: &Attribute, header: &NpyHeader, cells: &[u64], spec: &str, shown: &str) -> Result<bool> {
    let ts = match header.dtype() {
        DType::Plain(ts) => ts,
        DType::Record(_) => bail!("{shown}: structured (record) dtypes are not supported; save one array per field"),
        DType::Array(..) => bail!("{shown}: array dtypes are not supported"),
    };
    let unsupported = |why: &str| anyhow!("{shown}: dtype {:?} is not supported: {why}", ts.to_string());
    match ts.type_char() {
        TypeChar::UnicodeStr => Err(unsupported("unicode strings; store bytes (astype('S')) or use the Python API")),
        TypeChar::Object => Err(unsupported("Python objects cannot be stored")),
        _ => Ok(()),
    }?;
    let (kind, size, unit) = (ts.type_char(), ts.size_field(), ts.time_units().map(npyz::TimeUnits::to_str));
    if ts.endianness() == npyz::Endianness::Big && size > 1 && kind != TypeChar::ByteStr {
        bail!(
            "{shown}: dtype {:?} is big-endian; only little-endian data is supported (convert with arr.astype('<{}'))",
            ts.to_string(),
            &ts.to_string()[1..]
        );
    }
    let forms = forms(a, "written")?;
    let unit_of = |f: &Form| f.unit.map(TimeUnit::code);
    let Some(form) = forms.iter().find(|f| f.kind == kind && f.size == size && unit_of(f) == unit) else {
        let (dtype, name, datatype) = (dtype_str(&ts), &a.name, a.datatype);
        if let Some(f) = forms.iter().find(|f| f.kind == kind && f.size == size) {
            // Counts of another unit are other times: no silent reinterpretation.
            let (unit, to) = (unit.unwrap_or("?"), f.type_str()?);
            bail!(
                "{shown}: dtype {dtype} has unit {unit} but attribute {name} is {datatype}; no implicit conversion is \
                 done (convert with arr.astype('{to}'))"
            );
        }
        let want: Vec<String> = forms.iter().map(|f| f.type_str().map(|t| dtype_str(&t))).collect::<Result<_>>()?;
        let n = if let CellValNum::Fixed(n @ 2..) = a.cell_val_num { format!(" x {n}") } else { String::new() };
        let (want, to) = (want.join(" or "), forms[0].type_str()?);
        bail!(
            "{shown}: dtype {dtype} does not match attribute {name} ({datatype}{n}), which needs {want}; no implicit \
             casting is done (convert with arr.astype('{to}'))"
        );
    };
    let want = form.shape(cells);
    if header.shape() != want.as_slice() {
        bail!(
            "{shown}: shape {} does not match the subarray {spec}, which needs shape {} for attribute {}",
            shape_str(header.shape()),
            shape_str(&want),
            a.name
        );
    }
    let fortran = header.order() == Order::Fortran;
    if let Some(n) = form.values_axis.filter(|_| fortran) {
        bail!(
            "{shown}: Fortran-order data with {n} values per cell on the last axis keeps a cell's values apart; save \
             it in C order (np.ascontiguousarray)"
        );
    }
    Ok(fortran)
}

/// A shape as Python prints it: `(3, 4)`, `(5,)`, `()`.
fn shape_str(shape: &[u64]) -> String {
    match shape {
        [n] => format!("({n},)"),
        _ => format!("({})", shape.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    }
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

/// Refuses flags of sparse arrays and CSV or Parquet files on a dense array.
fn refuse_sparse_options(uri: &Path, flags: &[(bool, &str)], files: &[String], flag: &str) -> Result<()> {
    let what = if flag == "--input" { "written from .npy files" } else { "read into .npy files named as ATTR=FILE" };
    let uri = uri.display();
    if let Some((_, f)) = flags.iter().find(|(set, _)| *set) {
        bail!("{f} applies to sparse arrays; array {uri} is dense ({what})");
    }
    for item in files {
        let file = item.split_once('=').map_or(item.as_str(), |(_, f)| f);
        let ext = Path::new(file).extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if matches!(ext.as_deref(), Some("csv" | "tsv" | "parquet" | "pq")) {
            bail!(
                "{flag} {item}: array {uri} is dense and exchanges .npy files (one per attribute); CSV and Parquet \
                 files are for sparse arrays"
            );
        }
    }
    Ok(())
}

/// Cells per dimension of inclusive ranges.
fn extents(ranges: &[(i128, i128)]) -> Result<Vec<u64>> {
    ranges.iter().map(|&(lo, hi)| u64::try_from(hi - lo + 1).context("range too large")).collect()
}

/// `tessera write URI --subarray SPEC --input [ATTR=]FILE.npy ...`: validates every input
/// (attributes, dtypes, shapes, file sizes) before writing anything, then submits slabs along the
/// slowest dimension (of about `slab_bytes`, [`SLAB_BYTES`] but in tests) and commits one
/// fragment. Nothing is committed on error.
pub(crate) fn write(args: &WriteArgs, config: &Config, out: &mut impl Write, slab_bytes: u64) -> Result<()> {
    let uri = &args.uri;
    let array = open(config, uri, Mode::Write)?;
    if array.schema().is_sparse() {
        return crate::sparse::write(&array, args, out);
    }
    let flags =
        [(args.ignore_extra, "--ignore-extra"), (args.sorted, "--sorted"), (args.delimiter.is_some(), "--delimiter")];
    refuse_sparse_options(uri, &flags, &args.input, "--input")?;
    // No SPEC is the whole domain, as an empty one.
    let spec = Spec::parse(args.subarray.as_deref().unwrap_or(""), true)?;
    let schema = array.schema().clone();
    let in_array = || format!("array {}", uri.display());
    for a in &schema.attrs {
        forms(a, "written").with_context(|| format!("{}: a write needs every attribute", in_array()))?;
    }
    let ranges = spec.resolve_dense(&schema).with_context(in_array)?;
    let spec_text = spec_str(&ranges);
    let shape = extents(&ranges)?;
    let assigned = assign_files(&schema, &args.input, "--input", true)?;
    let given = |i: &usize| assigned.iter().any(|(a, _)| a == i);
    let missing: Vec<&str> =
        (0..schema.attrs.len()).filter(|i| !given(i)).map(|i| schema.attrs[i].name.as_str()).collect();
    if !missing.is_empty() {
        bail!("{}: a write needs every attribute; missing --input for: {}", in_array(), missing.join(", "));
    }
    let mut inputs = Vec::new();
    for (attr, path) in assigned {
        let shown = path.display().to_string();
        let mut file = File::open(&path).with_context(|| format!("cannot open input {shown}"))?;
        let (header, data_at, file_len) = read_header(&mut file, &shown)?;
        let a = &schema.attrs[attr];
        let fortran = check_input(a, &header, &shape, &spec_text, &shown).with_context(in_array)?;
        let size = header.dtype().num_bytes().map(|s| s as u64);
        let data_len = size.and_then(|s| header.shape().iter().try_fold(s, |n, &d| n.checked_mul(d)));
        let data_len = data_len.ok_or_else(|| anyhow!("{shown}: the shape is too large"))?;
        if data_at.checked_add(data_len) != Some(file_len) {
            bail!(
                "{shown}: the data section has {} bytes but shape {} needs {data_len}",
                file_len.saturating_sub(data_at),
                shape_str(header.shape()),
            );
        }
        inputs.push(Input { attr, path, file, fortran, cell_size: a.cell_size() as u64 });
    }
    // Inputs whose cells form at most one line are the same bytes in C and Fortran order.
    let line = shape.iter().filter(|&&n| n > 1).count() <= 1;
    let first = inputs.first().filter(|_| !line);
    if let Some((a, b)) = first.zip(inputs.iter().find(|i| first.is_some_and(|f| i.fortran != f.fortran))) {
        let name = |f: bool| if f { "Fortran" } else { "C" };
        bail!(
            "inputs mix C and Fortran order ({} is {} order, {} is {} order); convert one with \
             np.ascontiguousarray or np.asfortranarray",
            a.path.display(),
            name(a.fortran),
            b.path.display(),
            name(b.fortran)
        );
    }
    let layout = if first.is_some_and(|f| f.fortran) { Layout::ColMajor } else { Layout::RowMajor };

    let mut writer = array
        .writer(&Subarray::from_ranges(&ranges), layout)
        .with_context(|| format!("cannot write to {}", in_array()))?;
    let slow = if layout == Layout::ColMajor { shape.len() - 1 } else { 0 };
    let unit_cells: u64 = shape.iter().enumerate().filter(|&(i, _)| i != slow).map(|(_, n)| n).product();
    let unit_bytes: u64 = inputs.iter().map(|i| i.cell_size * unit_cells).sum();
    let total_bytes = unit_bytes * shape[slow];
    let rows_target = (slab_bytes / unit_bytes.max(1)).max(1);
    let dim = &schema.dims[slow];
    let bar = bytes_bar(total_bytes, "writing");
    let mut bufs: Vec<Vec<u8>> = vec![Vec::new(); inputs.len()];
    let (mut start, hi) = ranges[slow];
    while start <= hi {
        let end = slab_end(start, hi, rows_target, dim.int_domain().0, dim.tile_extent());
        let rows = u64::try_from(end - start + 1)?;
        for (inp, buf) in inputs.iter_mut().zip(bufs.iter_mut()) {
            buf.resize(usize::try_from(rows * unit_cells * inp.cell_size)?, 0);
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
    let (cells, bytes, name) = (meta.cell_count, human(total_bytes), &meta.name);
    writeln!(out, "wrote {cells} cells, {bytes}, of {spec_text} to {} as fragment {name}", uri.display())?;
    Ok(())
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

/// `tessera read URI [--subarray SPEC] --output [ATTR=]FILE.npy ... [--layout ...]`: streams the
/// result in batches into temporary files, renamed to the outputs once complete. No output file
/// is created or replaced on error. Batches hold about `batch_bytes` ([`BATCH_BYTES`] but in tests).
pub(crate) fn read(args: &ReadArgs, config: &Config, out: &mut impl Write, batch_bytes: u64) -> Result<()> {
    let uri = &args.uri;
    let array = open(config, uri, Mode::Read)?;
    if array.schema().is_sparse() {
        return crate::sparse::read(&array, args, batch_bytes, out);
    }
    let flags = [
        (!args.attrs.is_empty(), "--attrs"),
        (args.delimiter.is_some(), "--delimiter"),
        (args.layout == Layout::Unordered, "--layout unordered"),
    ];
    refuse_sparse_options(uri, &flags, &args.output, "--output")?;
    let spec = args.subarray.as_deref().map(|s| Spec::parse(s, true)).transpose()?;
    let schema = array.schema();
    let in_array = || format!("array {}", uri.display());
    let layout = args.layout;
    let assigned = assign_files(schema, &args.output, "--output", false)?;
    let mut outputs = Vec::new();
    for (k, (attr, path)) in assigned.iter().enumerate() {
        if assigned[..k].iter().any(|(_, p)| p == path) {
            bail!("--output: file {} is given more than once", path.display());
        }
        let a = &schema.attrs[*attr];
        let form = forms(a, "read").with_context(|| format!("--output {}", path.display()))?[0];
        if let Some(n) = form.values_axis.filter(|_| layout == Layout::ColMajor) {
            bail!(
                "--output {}: attribute {} has {n} values per cell, which a Fortran-order file would separate; use \
                 --layout row-major",
                path.display(),
                a.name
            );
        }
        outputs.push((path, a, form));
    }
    let ranges = match &spec {
        Some(s) => s.resolve_dense(schema).with_context(in_array)?,
        None => array.nonempty_domain().ok_or_else(|| {
            anyhow!("{} is empty (nothing written yet); give --subarray to read fill values", in_array())
        })?,
    };
    let spec_text = spec_str(&ranges);
    let names: Vec<&str> = outputs.iter().map(|(_, a, _)| a.name.as_str()).collect();
    let condition = crate::parse_where(args.where_.as_deref())?;
    let mut query = array
        .read_query(&Subarray::from_ranges(&ranges), &names, layout)
        .and_then(|q| condition.iter().try_fold(q, |q, c| q.with_condition(c)))
        .with_context(|| format!("cannot read {spec_text} of {}", in_array()))?;
    let total_cells = query.total_cells();
    let cells_shape = if layout == Layout::Global { vec![total_cells] } else { extents(&ranges)? };
    let order = if layout == Layout::ColMajor { Order::Fortran } else { Order::C };

    let mut temps = TempFiles::default();
    let mut writers = Vec::new();
    for (path, _, form) in &outputs {
        let w = BufWriter::with_capacity(1 << 20, temps.create(path)?);
        let options = WriteOptions::new_header_only().dtype(DType::Plain(form.type_str()?));
        let options = options.shape(&form.shape(&cells_shape)).order(order);
        writers
            .push(options.writer(w).write_header_only().with_context(|| format!("cannot write {}", path.display()))?);
    }
    let cell_bytes: u64 = outputs.iter().map(|(_, a, _)| a.cell_size() as u64).sum();
    let bar = bytes_bar(total_cells * cell_bytes, "reading");
    while let Some(batch) =
        query.next_batch(batch_bytes).with_context(|| format!("cannot read {spec_text} of {}", in_array()))?
    {
        for ((w, data), (path, ..)) in writers.iter_mut().zip(&batch.attrs).zip(&outputs) {
            w.write_all(&data.data).with_context(|| format!("cannot write {}", path.display()))?;
        }
        bar.inc(batch.cells * cell_bytes);
    }
    bar.finish_and_clear();
    for (w, (path, ..)) in writers.into_iter().zip(&outputs) {
        let file = w.into_inner().map_err(|e| e.into_error());
        file.and_then(|f| f.sync_all()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    temps.commit()?;
    let order = if order == Order::Fortran { "Fortran" } else { "C" };
    for (path, a, form) in &outputs {
        let (dtype, shape) = (dtype_str(&form.type_str()?), shape_str(&form.shape(&cells_shape)));
        writeln!(out, "wrote {}: {} of {spec_text} as {dtype}, shape {shape}, {order} order", path.display(), a.name)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::CreateArgs;

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
    fn attribute_forms() {
        let attr = |t, n| {
            let mut a = Attribute::new("v", t);
            a.cell_val_num = CellValNum::Fixed(n);
            a
        };
        let first = |t, n| {
            let f = forms(&attr(t, n), "read").unwrap()[0];
            (f.type_str().unwrap().to_string(), f.values_axis)
        };
        assert_eq!(first(Datatype::Int16, 1), ("<i2".into(), None));
        assert_eq!(first(Datatype::Float32, 2), ("<c8".into(), None));
        assert_eq!(first(Datatype::Float64, 2), ("<c16".into(), None));
        assert_eq!(first(Datatype::UInt32, 3), ("<u4".into(), Some(3)));
        assert_eq!(first(Datatype::Utf8, 4), ("|S4".into(), None));
        assert_eq!(forms(&attr(Datatype::UInt8, 1), "read").unwrap()[1].kind, TypeChar::Bool);
        assert_eq!(first(Datatype::Bool, 1), ("|b1".into(), None));
        assert_eq!(first(Datatype::Datetime64(TimeUnit::Second), 1), ("<M8[s]".into(), None));
        assert_eq!(first(Datatype::Datetime64(TimeUnit::Nano), 2), ("<M8[ns]".into(), Some(2)));
        let mut v = attr(Datatype::Utf8, 1);
        v.cell_val_num = CellValNum::Var;
        assert!(forms(&v, "read").unwrap_err().to_string().contains("variable-length"));
        let mut n = attr(Datatype::Int32, 1);
        n.nullable = true;
        assert!(forms(&n, "read").unwrap_err().to_string().contains("Python API"));
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
        crate::create(&CreateArgs { uri: uri.clone(), schema: schema_path }, &config, &mut out).unwrap();
        // Rows -6..=10 (17), columns 1..=9 (9); value = 100 * r + c.
        let (rows, cols) = ((-6i64..=10).collect::<Vec<_>>(), (1i64..=9).collect::<Vec<_>>());
        let cells = |fortran: bool| -> Vec<i64> {
            if fortran {
                cols.iter().flat_map(|&c| rows.iter().map(move |&r| 100 * r + c)).collect()
            } else {
                rows.iter().flat_map(|&r| cols.iter().map(move |&c| 100 * r + c)).collect()
            }
        };
        for fortran in [false, true] {
            let input = dir.path().join("in.npy");
            let order = if fortran { Order::Fortran } else { Order::C };
            let w = WriteOptions::new().default_dtype().shape(&[17, 9]).order(order);
            let mut w = w.writer(File::create(&input).unwrap()).begin_nd().unwrap();
            w.extend(cells(fortran)).unwrap();
            w.finish().unwrap();
            let args = WriteArgs {
                uri: uri.clone(),
                subarray: Some("-6:10,1:9".into()),
                input: vec![input.display().to_string()],
                ignore_extra: false,
                sorted: false,
                delimiter: None,
            };
            write(&args, &config, &mut out, 1).unwrap();
            for layout in [Layout::RowMajor, Layout::ColMajor] {
                let output = dir.path().join("out.npy");
                let args = ReadArgs {
                    uri: uri.clone(),
                    subarray: None,
                    output: vec![format!("v={}", output.display())],
                    layout,
                    attrs: Vec::new(),
                    delimiter: None,
                    where_: None,
                };
                read(&args, &config, &mut out, 50).unwrap();
                let back = npyz::NpyFile::new(File::open(&output).unwrap()).unwrap();
                assert_eq!(back.shape(), &[17, 9]);
                assert_eq!(back.order() == Order::Fortran, layout == Layout::ColMajor);
                assert_eq!(back.into_vec::<i64>().unwrap(), cells(layout == Layout::ColMajor), "{fortran} {layout:?}");
            }
        }
    }
}
