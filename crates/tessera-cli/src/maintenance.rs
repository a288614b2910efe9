//! Commands that manage fragments: `tessera fragments` (list), `tessera consolidate`,
//! `tessera vacuum` and `tessera delete` (cells in a subarray).

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use tessera::{consolidate, vacuum, Config, FragmentMetadata, Mode, Selection};

use crate::info::{human, iso_ms, write_table};
use crate::spec::{coords_str, named_str, Spec};
use crate::{context, open};

/// Arguments of `tessera consolidate`.
#[derive(Debug, Args)]
pub struct ConsolidateArgs {
    /// The array.
    pub uri: PathBuf,
    /// Consolidate these fragments (consecutive in fragment order); repeatable.
    #[arg(long = "fragment", value_name = "NAME")]
    pub fragments: Vec<String>,
    /// Consolidate the fragments written between these times (ms since the epoch, inclusive).
    #[arg(long, value_name = "T0:T1")]
    pub timestamp: Option<String>,
    /// Size-tiered: the longest run of at least MIN similar-size fragments (within RATIO).
    #[arg(long, value_name = "RATIO:MIN")]
    pub size_tiered: Option<String>,
    /// Vacuum afterwards (deletes the consolidated fragments).
    #[arg(long)]
    pub vacuum: bool,
}

/// Arguments of `tessera delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The array.
    pub uri: PathBuf,
    /// The cells to delete: inclusive `lo:hi` per dimension (floats for float dimensions, ISO
    /// 8601 times or counts for datetime64 ones; `:` or omitted: the whole dimension).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub subarray: String,
}

/// `tessera fragments URI`: the fragments readers see, oldest first.
///
/// # Errors
/// The array cannot be opened, or `out` cannot be written.
pub fn fragments(args: &crate::InfoArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let a = open(config, &args.uri, Mode::Read)?;
    let frags = a.fragments();
    if args.json {
        let row = |f: &FragmentMetadata| {
            let domain = f.nonempty_domain(a.schema()).into_iter().map(Some).collect::<Vec<_>>();
            serde_json::json!({
                "name": f.name.to_string(), "t0": f.name.t0, "t1": f.name.t1, "kind": f.kind().name(),
                "cells": f.cell_count, "tiles": f.tile_count(), "stored_bytes": f.stored_bytes(),
                "nonempty_domain": named_str(a.schema(), &domain),
            })
        };
        return crate::write_json(out, &frags.iter().map(row).collect::<Vec<_>>());
    }
    writeln!(out, "{} fragment(s) of {} (oldest first)", frags.len(), args.uri.display())?;
    let rows = frags.iter().map(|f| {
        vec![
            f.name.to_string(),
            f.kind().name().into(),
            iso_ms(f.name.t0),
            iso_ms(f.name.t1),
            f.cell_count.to_string(),
            human(f.stored_bytes()),
            coords_str(a.schema(), &f.nonempty_domain(a.schema())),
        ]
    });
    write_table(out, &["name", "kind", "t0", "t1", "cells", "stored", "non-empty domain"], rows)
}

fn pair<T: std::str::FromStr>(s: &str, what: &str) -> Result<(T, T)> {
    let parse = |x: &str| x.trim().parse::<T>().ok();
    match s.split_once(':').map(|(a, b)| (parse(a), parse(b))) {
        Some((Some(a), Some(b))) => Ok((a, b)),
        _ => bail!("{what} {s:?}: expected two numbers as A:B"),
    }
}

/// `tessera consolidate URI [--fragment NAME ...|--timestamp T0:T1|--size-tiered R:N] [--vacuum]`.
///
/// # Errors
/// Contradicting selections, a selection that is not consecutive, or an engine failure.
pub fn consolidate_cmd(args: &ConsolidateArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let given = [!args.fragments.is_empty(), args.timestamp.is_some(), args.size_tiered.is_some()];
    if given.iter().filter(|&&g| g).count() > 1 {
        bail!("give at most one of --fragment, --timestamp and --size-tiered");
    }
    let sel = if !args.fragments.is_empty() {
        Selection::Names(args.fragments.clone())
    } else if let Some(t) = &args.timestamp {
        pair::<u64>(t, "--timestamp").map(|(a, b)| Selection::Timestamps(a, b))?
    } else if let Some(s) = &args.size_tiered {
        pair::<f64>(s, "--size-tiered")
            .map(|(ratio, min)| Selection::SizeTiered { ratio, min_fragments: min as usize })?
    } else {
        Selection::All
    };
    let t = std::time::Instant::now();
    let made = consolidate(&context(config)?, &args.uri, &sel)
        .with_context(|| format!("cannot consolidate {}", args.uri.display()))?;
    match made {
        None => writeln!(out, "nothing to consolidate in {} (fewer than two fragments chosen)", args.uri.display())?,
        Some(m) => {
            let (cells, bytes, secs) = (m.cell_count, human(m.stored_bytes()), t.elapsed().as_secs_f64());
            writeln!(out, "consolidated into {} ({cells} cells, {bytes}) in {secs:.2} s", m.name)?;
        }
    }
    if args.vacuum {
        vacuum_cmd(&args.uri, config, out)?;
    }
    Ok(())
}

/// `tessera vacuum URI`: deletes consolidated fragments and crashed writers' leftovers.
///
/// # Errors
/// Readers or writers holding the array past `sm.vacuum.lock_timeout_ms`, or a storage failure.
pub fn vacuum_cmd(uri: &Path, config: &Config, out: &mut impl Write) -> Result<()> {
    let r = vacuum(&context(config)?, uri).with_context(|| format!("cannot vacuum {}", uri.display()))?;
    let (uri, removed, unfinished) = (uri.display(), r.removed.len(), r.uncommitted.len());
    writeln!(out, "vacuumed {uri}: removed {removed} superseded fragment(s) and {unfinished} unfinished one(s)")?;
    Ok(())
}

/// `tessera delete URI --subarray SPEC`: deletes every cell of the subarray.
///
/// # Errors
/// A bad SPEC (reversed, outside the domain) or an engine failure.
pub fn delete(args: &DeleteArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let a = open(config, &args.uri, Mode::Write)?;
    let ranges = Spec::parse(&args.subarray, false)?.resolve(a.schema())?;
    let engine: Vec<Vec<_>> = ranges.iter().map(|r| r.iter().copied().collect()).collect();
    let name = a.delete_ranges(&engine).with_context(|| format!("cannot delete from {}", args.uri.display()))?;
    writeln!(out, "deleted {} from {} (fragment {name})", named_str(a.schema(), &ranges), args.uri.display())?;
    Ok(())
}
