//! `tessera ls`: what a location holds — a group's members (arrays with their kind, shape and
//! attributes; groups), recursively with `--recursive`, or one array's summary line.

use std::io::Write;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};
use tessera::{Array, Config, Context, Group, Mode, ObjectKind};

/// Arguments of `tessera ls`.
#[derive(Debug, clap::Args)]
pub struct LsArgs {
    /// A group or an array.
    pub uri: std::path::PathBuf,
    /// Descend into member groups.
    #[arg(short, long)]
    pub recursive: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tessera ls`.
pub(crate) fn ls(args: &LsArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let ctx = crate::context(config)?;
    let entries = match tessera::object_kind(&ctx, &args.uri)? {
        Some(ObjectKind::Group) => members(&ctx, &args.uri, "", args.recursive)?,
        Some(ObjectKind::Array) => vec![array_entry(&ctx, &args.uri, &args.uri.display().to_string())?],
        None => bail!("{} is neither a Tessera group nor a Tessera array", args.uri.display()),
    };
    if args.json {
        return crate::write_json(out, &entries);
    }
    for e in &entries {
        let s = |key: &str| e[key].as_str().unwrap_or_default();
        let (name, kind, dims, attrs, frags) = (s("name"), s("type"), s("dims"), s("attrs"), &e["fragments"]);
        match s("kind") {
            "group" => writeln!(out, "{name}/  group")?,
            _ => writeln!(out, "{name}  {kind} array  {dims}  attributes: {attrs}  fragments: {frags}")?,
        }
    }
    Ok(())
}

/// The members of the group at `uri`, named from `prefix`, depth first when `recursive`.
fn members(ctx: &Context, uri: &Path, prefix: &str, recursive: bool) -> Result<Vec<Value>> {
    let group =
        Group::open(ctx, uri, Mode::Read, None).with_context(|| format!("cannot open group {}", uri.display()))?;
    let mut out = Vec::new();
    for (name, kind) in group.members()? {
        let path = group.member_uri(&name)?;
        let shown = format!("{prefix}{name}");
        match kind {
            ObjectKind::Group => {
                out.push(json!({"name": shown, "kind": "group"}));
                if recursive {
                    out.extend(members(ctx, &path, &format!("{shown}/"), true)?);
                }
            }
            ObjectKind::Array => out.push(array_entry(ctx, &path, &shown)?),
        }
    }
    Ok(out)
}

fn array_entry(ctx: &Context, uri: &Path, shown: &str) -> Result<Value> {
    let array = Array::open(ctx, uri, Mode::Read).with_context(|| format!("cannot open array {}", uri.display()))?;
    let schema = array.schema();
    let dims: Vec<String> = schema.dims.iter().map(|d| format!("{}[{}]", d.name, crate::info::domain_str(d))).collect();
    let attrs: Vec<String> = schema.attrs.iter().map(|a| format!("{}:{}", a.name, a.datatype.name())).collect();
    Ok(json!({
        "name": shown,
        "kind": "array",
        "type": if schema.is_sparse() { "sparse" } else { "dense" },
        "dims": dims.join(" x "),
        "attrs": attrs.join(", "),
        "fragments": array.fragments().len(),
    }))
}
