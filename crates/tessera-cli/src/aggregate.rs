//! `tessera aggregate`: count, sum, min, max, mean and null counts of attributes over a subarray,
//! computed in the engine (`Array::aggregate`: tiles covered whole come from their stored
//! summaries), optionally over the cells passing a `--where` condition.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use tessera::{AggregateOp, AggregateRequest, AggregateValue, Config, Mode};

use crate::open;
use crate::spec::Spec;

/// Arguments of `tessera aggregate`.
#[derive(Debug, Args)]
pub struct AggregateArgs {
    /// The array.
    pub uri: PathBuf,
    /// What to compute, as ATTR:OP (OP: count, count_valid, null_count, sum, min, max, mean);
    /// comma-separated or repeated.
    #[arg(long = "agg", value_name = "ATTR:OP,...", value_delimiter = ',', required = true, num_args = 1..)]
    pub aggs: Vec<String>,
    /// The cells to aggregate: inclusive lo:hi per dimension (default: the whole domain;
    /// docs/cli.md describes SPECs).
    #[arg(long, value_name = "SPEC", allow_hyphen_values = true)]
    pub subarray: Option<String>,
    /// Only the cells whose current values pass this condition, e.g. "v > 0 and w is not null".
    #[arg(long = "where", value_name = "EXPR", allow_hyphen_values = true)]
    pub where_: Option<String>,
}

/// Parses `ATTR:OP`.
fn request(item: &str) -> Result<AggregateRequest> {
    let Some((attr, op)) = item.rsplit_once(':') else {
        bail!("--agg {item:?}: expected ATTR:OP, e.g. v:sum");
    };
    let names: Vec<&str> = AggregateOp::ALL.iter().map(|o| o.name()).collect();
    let Some(op) = AggregateOp::parse(op.trim()) else {
        bail!("--agg {item:?}: unknown operation {op:?} (known: {})", names.join(", "));
    };
    Ok(AggregateRequest::new(attr.trim(), op))
}

/// A value as printed: integers exactly, floats as Rust prints them (`inf`, `NaN`), no value as
/// `null`.
fn value_str(v: &AggregateValue) -> String {
    match v {
        AggregateValue::Count(c) => c.to_string(),
        AggregateValue::Int(i) => i.to_string(),
        AggregateValue::Float(f) => f.to_string(),
        _ => "null".to_string(),
    }
}

/// Runs `tessera aggregate`: one line `ATTR OP VALUE` per request, in the order given.
///
/// # Errors
/// A bad `--agg`, `--subarray` or `--where`, an attribute or operation the array refuses, or a
/// storage failure.
pub fn aggregate(args: &AggregateArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let reqs = args.aggs.iter().map(|a| request(a)).collect::<Result<Vec<_>>>()?;
    let a = open(config, &args.uri, Mode::Read)?;
    // No SPEC is the whole domain, as an empty one.
    let ranges = Spec::parse(args.subarray.as_deref().unwrap_or(""), false)?.resolve(a.schema())?;
    let engine: Vec<Vec<_>> = ranges.iter().map(|r| r.iter().copied().collect()).collect();
    let condition = crate::parse_where(args.where_.as_deref())?;
    let values = a
        .aggregate(&engine, condition.as_ref(), &reqs)
        .with_context(|| format!("cannot aggregate {}", args.uri.display()))?;
    for (r, v) in reqs.iter().zip(&values) {
        writeln!(out, "{} {} {}", r.attr, r.op.name(), value_str(v))?;
    }
    Ok(())
}
