//! `tessera info`: what an array is (schema), what it holds (fragments, non-empty domain) and what
//! it costs (bytes on disk, compression ratio), as text for people or JSON for scripts.

use std::io::Write;
use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::{json, Value};
use tessera::{Array, CellValNum, DimRange, Dimension, Extent, FilterPipeline, FragmentMetadata};

/// Sizes gathered once for both output forms.
struct Totals {
    stored: u64,
    unfiltered: u64,
    disk_bytes: u64,
    disk_files: u64,
}

impl Totals {
    fn ratio(&self) -> Option<f64> {
        (self.stored > 0).then(|| self.unfiltered as f64 / self.stored as f64)
    }
}

/// Writes the summary of the open array `array` to `out`, as JSON when `as_json`.
///
/// # Errors
/// The array's folder cannot be walked, or `out` cannot be written.
pub(crate) fn write_info(array: &Array, as_json: bool, out: &mut impl Write) -> Result<()> {
    let uri = array.uri();
    let (disk_bytes, disk_files) = dir_size(uri).with_context(|| format!("cannot measure {}", uri.display()))?;
    let frags = array.fragments();
    let totals = Totals {
        stored: frags.iter().map(FragmentMetadata::stored_bytes).sum(),
        unfiltered: frags.iter().map(FragmentMetadata::unfiltered_bytes).sum(),
        disk_bytes,
        disk_files,
    };
    if as_json {
        let v = info_json(array, &totals)?;
        serde_json::to_writer_pretty(&mut *out, &v)?;
        writeln!(out)?;
    } else {
        info_text(array, &totals, out)?;
    }
    Ok(())
}

fn info_json(array: &Array, t: &Totals) -> Result<Value> {
    let schema = array.schema();
    let frags: Vec<Value> = array
        .fragments()
        .iter()
        .map(|f| {
            json!({
                "name": f.name.to_string(),
                "t0": f.name.t0,
                "t1": f.name.t1,
                "uuid": f.name.uuid,
                "format_version": f.name.version,
                "kind": f.kind().name(),
                "cell_count": f.cell_count,
                "tile_count": f.tile_count(),
                "nonempty_domain": coords_json(&f.nonempty_domain(schema)),
                "stored_bytes": f.stored_bytes(),
                "unfiltered_bytes": f.unfiltered_bytes(),
            })
        })
        .collect();
    Ok(json!({
        "uri": array.uri().display().to_string(),
        "schema": serde_json::to_value(schema).context("cannot convert the schema to JSON")?,
        "nonempty_domain": array.nonempty_domain_ranges().map(|d| coords_json(&d)),
        "fragments": frags,
        "stored_bytes": t.stored,
        "unfiltered_bytes": t.unfiltered,
        "compression_ratio": t.ratio(),
        "size_on_disk": t.disk_bytes,
        "files_on_disk": t.disk_files,
    }))
}

fn int_json(v: i128) -> Value {
    if let Ok(i) = i64::try_from(v) {
        i.into()
    } else if let Ok(u) = u64::try_from(v) {
        u.into()
    } else {
        v.to_string().into()
    }
}

/// One bound of a range as JSON and as text.
fn bound_json(r: &DimRange) -> (Value, Value) {
    match *r {
        DimRange::Int(a, b) => (int_json(a), int_json(b)),
        DimRange::Float(a, b) => (a.into(), b.into()),
    }
}

fn coords_json(r: &[DimRange]) -> Value {
    Value::Array(
        r.iter()
            .map(|x| {
                let (a, b) = bound_json(x);
                Value::Array(vec![a, b])
            })
            .collect(),
    )
}

fn coords_str(r: &[DimRange]) -> String {
    r.iter()
        .map(|x| match *x {
            DimRange::Int(a, b) => format!("{a}:{b}"),
            DimRange::Float(a, b) => format!("{a:?}:{b:?}"),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Ranges as a SPEC (`1:30,1:40`), ready to paste into `--subarray`.
pub(crate) fn spec_str(r: &[(i128, i128)]) -> String {
    r.iter().map(|(a, b)| format!("{a}:{b}")).collect::<Vec<_>>().join(",")
}

/// A dimension's domain as `lo:hi`: floats for float dimensions whatever the JSON gave (a float
/// dimension's domain written `[0, 10]` is read as integers).
pub(crate) fn domain_str(d: &Dimension) -> String {
    if d.is_float() {
        let (lo, hi) = d.float_domain();
        format!("{lo:?}:{hi:?}")
    } else {
        let (lo, hi) = d.int_domain();
        format!("{lo}:{hi}")
    }
}

/// A dimension's tile extent as `tile 5` (`tile 5.0` on float dimensions), if it has one.
pub(crate) fn tile_str(d: &Dimension) -> Option<String> {
    match d.tile? {
        _ if d.is_float() => d.float_tile().map(|t| format!("tile {t:?}")),
        Extent::Int(t) => Some(format!("tile {t}")),
        Extent::Float(t) => Some(format!("tile {t:?}")),
    }
}

fn filters_str(p: &FilterPipeline) -> String {
    let fs = p.filters();
    if fs.is_empty() {
        return "none".into();
    }
    fs.iter()
        .map(|f| {
            let params = match serde_json::to_value(f) {
                Ok(Value::Object(m)) => m
                    .iter()
                    .filter(|(k, _)| k.as_str() != "name")
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                _ => String::new(),
            };
            if params.is_empty() {
                f.name().to_string()
            } else {
                format!("{}({params})", f.name())
            }
        })
        .collect::<Vec<_>>()
        .join(" -> ")
}

fn info_text(array: &Array, t: &Totals, out: &mut impl Write) -> Result<()> {
    let schema = array.schema();
    let kind = serde_json::to_value(schema.array_type).ok().and_then(|v| v.as_str().map(String::from));
    writeln!(out, "array {} ({})", array.uri().display(), kind.as_deref().unwrap_or("?"))?;
    writeln!(out, "dimensions: {}", schema.dims.len())?;
    let w = schema.dims.iter().map(|d| d.name.len()).max().unwrap_or(0);
    for d in &schema.dims {
        let domain = domain_str(d);
        let tile = match tile_str(d) {
            Some(t) if d.is_float() => format!("{t} ({} tiles)", d.tile_count_any()),
            Some(t) => format!("{t} ({})", count(d.tile_count(), "tile")),
            None => "no tile extent".to_string(),
        };
        let filters =
            if d.filters.is_empty() { String::new() } else { format!("  filters {}", filters_str(&d.filters)) };
        writeln!(out, "  {:w$}  {:7}  domain {domain}  {tile}{filters}", d.name, d.datatype.name())?;
    }
    writeln!(out, "attributes: {}", schema.attrs.len())?;
    let w = schema.attrs.iter().map(|a| a.name.len()).max().unwrap_or(0);
    for a in &schema.attrs {
        let cvn = match a.cell_val_num {
            CellValNum::Fixed(n) => n.to_string(),
            CellValNum::Var => "var".into(),
        };
        let fill = match &a.fill {
            Some(v) => v.iter().map(|x| x.to_string().trim_matches('"').to_string()).collect::<Vec<_>>().join(" "),
            None => "default".into(),
        };
        writeln!(
            out,
            "  {:w$}  {:7}  cell_val_num {cvn}  nullable {}  filters {}  fill {fill}",
            a.name,
            a.datatype.name(),
            if a.nullable { "yes" } else { "no" },
            filters_str(&a.filters)
        )?;
    }
    let order = |o| serde_json::to_value(o).ok().and_then(|v| v.as_str().map(String::from)).unwrap_or_default();
    writeln!(out, "cell order {}, tile order {}", order(schema.cell_order), order(schema.tile_order))?;
    if schema.is_sparse() {
        writeln!(
            out,
            "capacity {} cells per data tile, duplicates {}",
            schema.capacity,
            if schema.allows_duplicates { "allowed" } else { "not allowed" }
        )?;
    }
    match array.nonempty_domain_ranges() {
        Some(d) => writeln!(out, "non-empty domain: {}", coords_str(&d))?,
        None => writeln!(out, "non-empty domain: none (nothing written)")?,
    }
    let frags = array.fragments();
    writeln!(out, "fragments: {}{}", frags.len(), if frags.len() > 1 { " (oldest first)" } else { "" })?;
    for f in frags {
        writeln!(out, "  {} ({})", f.name, f.kind().name())?;
        writeln!(out, "    t0 {} ({}), t1 {} ({})", f.name.t0, iso_ms(f.name.t0), f.name.t1, iso_ms(f.name.t1))?;
        writeln!(
            out,
            "    {} cells in {}, {}; stored {}, unfiltered {}",
            f.cell_count,
            coords_str(&f.nonempty_domain(schema)),
            count(f.tile_count() as u64, "tile"),
            human(f.stored_bytes()),
            human(f.unfiltered_bytes())
        )?;
    }
    writeln!(out, "tile bytes: stored {}, unfiltered {}", human(t.stored), human(t.unfiltered))?;
    match t.ratio() {
        Some(r) => writeln!(out, "compression ratio: {r:.2} (unfiltered / stored tile bytes)")?,
        None => writeln!(out, "compression ratio: n/a (no tiles)")?,
    }
    writeln!(out, "size on disk: {} in {} files", human(t.disk_bytes), t.disk_files)?;
    Ok(())
}

/// `1 tile`, `5 tiles`.
fn count(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Bytes for people: `4.7 MiB (4928512 bytes)`, or `812 bytes`.
pub(crate) fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {} ({n} bytes)", UNITS[u])
}

/// Milliseconds since the Unix epoch as ISO 8601 UTC, e.g. `2024-04-05T19:34:38.901Z`.
pub(crate) fn iso_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z", rem / 3600, rem / 60 % 60, rem % 60, ms % 1000)
}

/// Bytes and number of the files under `path` (symbolic links are counted, not followed).
pub(crate) fn dir_size(path: &Path) -> std::io::Result<(u64, u64)> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() {
        return Ok((meta.len(), 1));
    }
    let mut total = (0, 0);
    for entry in std::fs::read_dir(path)? {
        let (b, n) = dir_size(&entry?.path())?;
        total.0 += b;
        total.1 += n;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(iso_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso_ms(1_712_345_678_901), "2024-04-05T19:34:38.901Z");
        assert_eq!(human(812), "812 bytes");
        assert_eq!(human(1536), "1.5 KiB (1536 bytes)");
        assert_eq!(human(5 << 30), "5.0 GiB (5368709120 bytes)");
        assert_eq!(spec_str(&[(-5, 5), (1, 10)]), "-5:5,1:10");
        assert_eq!(int_json(-3), json!(-3));
        assert_eq!(int_json(i128::from(u64::MAX)), json!(u64::MAX));
    }
}
