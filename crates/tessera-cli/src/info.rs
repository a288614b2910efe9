//! `tessera info`: what an array is (schema), what it holds (fragments, non-empty domain) and what
//! it costs (bytes on disk, compression ratio), as text for people (tables laid out by
//! `comfy-table`) or JSON for scripts.

use std::io::Write;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{Context as _, Result};
use comfy_table::{presets::NOTHING, Table};
use serde_json::{json, Value};
use tessera::{Array, CellValNum, DimRange, Dimension, Extent, FilterPipeline, FragmentMetadata};

use crate::spec::{coords_str, int_range_str};

/// Writes the summary of the open array `array` to `out`, as JSON when `as_json`.
///
/// # Errors
/// The array's folder cannot be walked, or `out` cannot be written.
pub(crate) fn write_info(array: &Array, as_json: bool, out: &mut impl Write) -> Result<()> {
    let uri = array.uri();
    let (disk_bytes, disk_files) =
        array.context().storage().usage(uri).with_context(|| format!("cannot measure {}", uri.display()))?;
    let (schema, frags) = (array.schema(), array.fragments());
    let stored: u64 = frags.iter().map(FragmentMetadata::stored_bytes).sum();
    let unfiltered: u64 = frags.iter().map(FragmentMetadata::unfiltered_bytes).sum();
    #[allow(clippy::cast_precision_loss)]
    let ratio = (stored > 0).then(|| unfiltered as f64 / stored as f64);
    if as_json {
        let frag = |f: &FragmentMetadata| {
            json!({
                "name": f.name.to_string(), "t0": f.name.t0, "t1": f.name.t1, "uuid": f.name.uuid,
                "format_version": f.name.version, "kind": f.kind().name(), "cell_count": f.cell_count,
                "tile_count": f.tile_count(), "nonempty_domain": coords_json(&f.nonempty_domain(schema)),
                "stored_bytes": f.stored_bytes(), "unfiltered_bytes": f.unfiltered_bytes(),
            })
        };
        let frags: Vec<Value> = frags.iter().map(frag).collect();
        let v = json!({
            "uri": uri.display().to_string(),
            "schema": serde_json::to_value(schema).context("cannot convert the schema to JSON")?,
            "nonempty_domain": array.nonempty_domain_ranges().map(|d| coords_json(&d)),
            "fragments": frags, "stored_bytes": stored, "unfiltered_bytes": unfiltered, "compression_ratio": ratio,
            "size_on_disk": disk_bytes, "files_on_disk": disk_files,
        });
        return crate::write_json(out, &v);
    }
    writeln!(out, "array {} ({})", uri.display(), json_name(schema.array_type))?;
    writeln!(out, "dimensions: {}", schema.dims.len())?;
    let dims = schema.dims.iter().map(|d| {
        let tile = match tile_str(d) {
            Some(t) if d.is_float() => format!("{t} ({} tiles)", d.tile_count_any()),
            Some(t) => format!("{t} ({} tile{})", d.tile_count(), crate::plural(d.tile_count())),
            None => "none".to_string(),
        };
        let filters = if d.filters.is_empty() { String::new() } else { filters_str(&d.filters) };
        vec![d.name.clone(), d.datatype.name().into(), domain_str(d), tile, filters]
    });
    write_table(out, &["name", "type", "domain", "tile", "filters"], dims)?;
    writeln!(out, "attributes: {}", schema.attrs.len())?;
    let attrs = schema.attrs.iter().map(|a| {
        let cvn = if let CellValNum::Fixed(n) = a.cell_val_num { n.to_string() } else { "var".into() };
        let fill = match &a.fill {
            Some(v) => v.iter().map(|x| x.to_string().trim_matches('"').to_string()).collect::<Vec<_>>().join(" "),
            None => "default".into(),
        };
        let nullable = if a.nullable { "yes" } else { "no" };
        vec![a.name.clone(), a.datatype.name().into(), cvn, nullable.into(), filters_str(&a.filters), fill]
    });
    write_table(out, &["name", "type", "cell_val_num", "nullable", "filters", "fill"], attrs)?;
    let (cells, tiles) = (json_name(schema.cell_order), json_name(schema.tile_order));
    writeln!(out, "cell order {cells}, tile order {tiles}")?;
    if schema.is_sparse() {
        let dups = if schema.allows_duplicates { "allowed" } else { "not allowed" };
        writeln!(out, "capacity {} cells per data tile, duplicates {dups}", schema.capacity)?;
    }
    let domain = array.nonempty_domain_ranges().map(|d| coords_str(schema, &d));
    writeln!(out, "non-empty domain: {}", domain.as_deref().unwrap_or("none (nothing written)"))?;
    writeln!(out, "fragments: {}{}", frags.len(), if frags.len() > 1 { " (oldest first)" } else { "" })?;
    if !frags.is_empty() {
        let rows = frags.iter().map(|f| {
            vec![
                f.name.to_string(),
                f.kind().name().into(),
                format!("{} .. {}", iso_ms(f.name.t0), iso_ms(f.name.t1)),
                f.cell_count.to_string(),
                coords_str(schema, &f.nonempty_domain(schema)),
                f.tile_count().to_string(),
                human(f.stored_bytes()),
                human(f.unfiltered_bytes()),
            ]
        });
        let header =
            ["name", "kind", "written (t0 .. t1)", "cells", "non-empty domain", "tiles", "stored", "unfiltered"];
        write_table(out, &header, rows)?;
    }
    writeln!(out, "tile bytes: stored {}, unfiltered {}", human(stored), human(unfiltered))?;
    let ratio = ratio.map(|r| format!("{r:.2} (unfiltered / stored tile bytes)"));
    writeln!(out, "compression ratio: {}", ratio.as_deref().unwrap_or("n/a (no tiles)"))?;
    writeln!(out, "size on disk: {} in {disk_files} files", human(disk_bytes))?;
    Ok(())
}

/// Writes a borderless table, indented by two spaces.
pub(crate) fn write_table(
    out: &mut impl Write,
    header: &[&str],
    rows: impl Iterator<Item = Vec<String>>,
) -> Result<()> {
    let mut table = Table::new();
    table.load_style(NOTHING).set_header(header.to_vec()).add_rows(rows);
    for line in table.lines() {
        writeln!(out, " {}", line.trim_end())?;
    }
    Ok(())
}

/// The JSON name of a schema enum (`dense`, `row-major`).
pub(crate) fn json_name(v: impl serde::Serialize) -> String {
    serde_json::to_value(v).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default()
}

fn coords_json(r: &[DimRange]) -> Value {
    let int = |v: i128| i64::try_from(v).map(Value::from).or_else(|_| u64::try_from(v).map(Value::from));
    let int = |v: i128| int(v).unwrap_or_else(|_| v.to_string().into());
    let pair = |r: &DimRange| match *r {
        DimRange::Int(a, b) => json!([int(a), int(b)]),
        DimRange::Float(a, b) => json!([a, b]),
    };
    Value::Array(r.iter().map(pair).collect())
}

/// A dimension's domain as `lo:hi`: floats for float dimensions whatever the JSON gave (a float
/// dimension's domain written `[0, 10]` is read as integers); ISO times, then the counts of the
/// unit, for `datetime64` (both are what `--subarray` takes).
pub(crate) fn domain_str(d: &Dimension) -> String {
    if d.is_float() {
        let (lo, hi) = d.float_domain();
        format!("{lo:?}:{hi:?}")
    } else {
        let (lo, hi) = d.int_domain();
        int_range_str(d, lo, hi)
    }
}

/// A dimension's tile extent (`5`, or `5.0` on float dimensions), if it has one.
pub(crate) fn tile_str(d: &Dimension) -> Option<String> {
    match d.tile? {
        _ if d.is_float() => d.float_tile().map(|t| format!("{t:?}")),
        Extent::Int(t) => Some(t.to_string()),
        Extent::Float(t) => Some(format!("{t:?}")),
    }
}

/// A pipeline as `byteshuffle -> zstd(level 3)`, or `none`.
fn filters_str(p: &FilterPipeline) -> String {
    let one = |f: &tessera::Filter| {
        let params: Vec<String> = match serde_json::to_value(f) {
            Ok(Value::Object(m)) => m.iter().filter(|(k, _)| *k != "name").map(|(k, v)| format!("{k} {v}")).collect(),
            _ => Vec::new(),
        };
        let params = if params.is_empty() { String::new() } else { format!("({})", params.join(", ")) };
        format!("{}{params}", f.name())
    };
    let fs: Vec<String> = p.filters().iter().map(one).collect();
    if fs.is_empty() {
        "none".into()
    } else {
        fs.join(" -> ")
    }
}

/// Bytes for people: `4.7 MiB (4928512 bytes)`, or `812 bytes`.
pub(crate) fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    #[allow(clippy::cast_precision_loss)]
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {} ({n} bytes)", UNITS[u])
}

/// Milliseconds since the Unix epoch as ISO 8601 UTC (`2024-04-05T19:34:38.901Z`); past the
/// year 9999, which ISO 8601 cannot write, the milliseconds.
pub(crate) fn iso_ms(ms: u64) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    if write!(s, "{}", humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms))).is_err() {
        return format!("{ms} ms");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(iso_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso_ms(1_712_345_678_901), "2024-04-05T19:34:38.901Z");
        assert_eq!(iso_ms(u64::MAX), format!("{} ms", u64::MAX));
        assert_eq!(human(812), "812 bytes");
        assert_eq!(human(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(human(5 << 30), "5.0 GiB (5368709120 bytes)");
        let r = [DimRange::Int(-3, i128::from(u64::MAX)), DimRange::Float(0.5, 1.0)];
        assert_eq!(coords_json(&r), json!([[-3, u64::MAX], [0.5, 1.0]]));
    }
}
