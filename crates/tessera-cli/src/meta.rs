//! `tessera meta`: list, set and delete the key-value metadata of an array or a group
//! (docs/format.md §13, §14).

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use tessera::{Config, Datatype, Group, MetaValue, Mode, ObjectKind};

use crate::open;

/// Arguments of `tessera meta`.
#[derive(Debug, Args)]
pub struct MetaArgs {
    /// The array or group.
    pub uri: PathBuf,
    /// Set KEY to VALUE (repeatable; all in one atomic write). The value is an int64 if it parses
    /// as an integer, else a float64 if it parses as a number, else text; --type forces a type.
    #[arg(long = "set", value_name = "KEY=VALUE", allow_hyphen_values = true)]
    pub set: Vec<String>,
    /// The type of every --set value: int8 ... uint64, float32, float64 or utf8 (one number,
    /// or a comma-separated list of numbers).
    #[arg(long = "type", value_name = "TYPE")]
    pub datatype: Option<String>,
    /// Delete KEY (repeatable; in the same write as --set).
    #[arg(long = "delete", value_name = "KEY")]
    pub delete: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `tessera meta`.
pub(crate) fn meta(args: &MetaArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    if args.set.is_empty() && args.delete.is_empty() {
        return list(args, config, out);
    }
    let forced = args
        .datatype
        .as_deref()
        .map(|t| Datatype::parse(t).with_context(|| format!("--type {t}: not a datatype name")));
    let forced = forced.transpose()?;
    let mut changes: Vec<(&str, Option<MetaValue>)> = Vec::new();
    for s in &args.set {
        let Some((key, text)) = s.split_once('=') else { bail!("--set {s}: expected KEY=VALUE") };
        let value = parse_value(text, forced).with_context(|| format!("--set {key}"))?;
        changes.push((key, Some(value)));
    }
    changes.extend(args.delete.iter().map(|k| (k.as_str(), None)));
    let written = match open_group(config, &args.uri, Mode::Write)? {
        Some(group) => group.write_metadata(&changes),
        None => open(config, &args.uri, Mode::Write)?.write_metadata(&changes),
    };
    written.with_context(|| format!("cannot write metadata of {}", args.uri.display()))?;
    writeln!(out, "wrote {} metadata change(s) to {}", changes.len(), args.uri.display())?;
    Ok(())
}

/// A value from its text: the forced type, or int64, float64, text in that order of preference.
fn parse_value(text: &str, forced: Option<Datatype>) -> Result<MetaValue> {
    let numbers = |d: Datatype| -> Result<MetaValue> {
        let mut data = Vec::new();
        for part in text.split(',') {
            let p = part.trim();
            let bad = || format!("{p:?} is not a {} value", d.name());
            match d {
                Datatype::Int8 => data.extend(p.parse::<i8>().with_context(bad)?.to_le_bytes()),
                Datatype::Int16 => data.extend(p.parse::<i16>().with_context(bad)?.to_le_bytes()),
                Datatype::Int32 => data.extend(p.parse::<i32>().with_context(bad)?.to_le_bytes()),
                Datatype::Int64 => data.extend(p.parse::<i64>().with_context(bad)?.to_le_bytes()),
                Datatype::UInt8 => data.extend(p.parse::<u8>().with_context(bad)?.to_le_bytes()),
                Datatype::UInt16 => data.extend(p.parse::<u16>().with_context(bad)?.to_le_bytes()),
                Datatype::UInt32 => data.extend(p.parse::<u32>().with_context(bad)?.to_le_bytes()),
                Datatype::UInt64 => data.extend(p.parse::<u64>().with_context(bad)?.to_le_bytes()),
                Datatype::Float32 => data.extend(p.parse::<f32>().with_context(bad)?.to_le_bytes()),
                Datatype::Float64 => data.extend(p.parse::<f64>().with_context(bad)?.to_le_bytes()),
                _ => bail!("type {} is not a number type", d.name()),
            }
        }
        Ok(MetaValue { datatype: Some(d), data })
    };
    match forced {
        Some(d) if d != Datatype::Utf8 => numbers(d),
        None if text.parse::<i64>().is_ok() => numbers(Datatype::Int64),
        None if text.parse::<f64>().is_ok() => numbers(Datatype::Float64),
        _ => Ok(MetaValue { datatype: Some(Datatype::Utf8), data: text.as_bytes().to_vec() }),
    }
}

/// The values of `v` as JSON: text as a string, raw bytes as a list of byte values, one number
/// as a number, several as a list.
fn to_json(v: &MetaValue) -> serde_json::Value {
    use serde_json::Value;
    let Some(d) = v.datatype else { return Value::from(v.data.clone()) };
    if d == Datatype::Utf8 {
        return Value::from(String::from_utf8_lossy(&v.data).into_owned());
    }
    let one = |c: &[u8]| match d {
        Datatype::Int8 => Value::from(c[0] as i8),
        Datatype::Int16 => Value::from(i16::from_le_bytes(c.try_into().unwrap_or_default())),
        Datatype::Int32 => Value::from(i32::from_le_bytes(c.try_into().unwrap_or_default())),
        Datatype::Int64 | Datatype::Datetime64(_) => Value::from(i64::from_le_bytes(c.try_into().unwrap_or_default())),
        Datatype::UInt8 => Value::from(c[0]),
        Datatype::UInt16 => Value::from(u16::from_le_bytes(c.try_into().unwrap_or_default())),
        Datatype::UInt32 => Value::from(u32::from_le_bytes(c.try_into().unwrap_or_default())),
        Datatype::UInt64 => Value::from(u64::from_le_bytes(c.try_into().unwrap_or_default())),
        Datatype::Float32 => Value::from(f64::from(f32::from_le_bytes(c.try_into().unwrap_or_default()))),
        Datatype::Float64 => Value::from(f64::from_le_bytes(c.try_into().unwrap_or_default())),
        Datatype::Bool => Value::from(c[0] != 0),
        _ => Value::from(c.to_vec()),
    };
    // Chunks of the type's size: every conversion to an array of that size succeeds.
    let values: Vec<Value> = v.data.chunks_exact(d.size()).map(one).collect();
    match <[Value; 1]>::try_from(values) {
        Ok([one]) => one,
        Err(many) => Value::from(many),
    }
}

/// The group at `uri` opened in `mode`, or `None` when `uri` is not a group.
fn open_group(config: &Config, uri: &std::path::Path, mode: Mode) -> Result<Option<Group>> {
    let ctx = crate::context(config)?;
    if tessera::object_kind(&ctx, uri)? != Some(ObjectKind::Group) {
        return Ok(None);
    }
    Ok(Some(Group::open(&ctx, uri, mode, None).with_context(|| format!("cannot open group {}", uri.display()))?))
}

fn list(args: &MetaArgs, config: &Config, out: &mut impl Write) -> Result<()> {
    let meta = match open_group(config, &args.uri, Mode::Read)? {
        Some(group) => group.metadata(),
        None => open(config, &args.uri, Mode::Read)?.metadata(),
    };
    let meta = meta.with_context(|| format!("cannot read metadata of {}", args.uri.display()))?;
    if args.json {
        let map: serde_json::Map<_, _> = meta.iter().map(|(k, v)| (k.clone(), to_json(v))).collect();
        return Ok(writeln!(out, "{}", serde_json::Value::Object(map))?);
    }
    for (k, v) in &meta {
        let kind = v.datatype.map_or("bytes", Datatype::name);
        writeln!(out, "{k} ({kind}): {}", to_json(v))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_as_json() {
        let v = |d, data: &[u8]| to_json(&MetaValue { datatype: Some(d), data: data.to_vec() });
        assert_eq!(v(Datatype::Int16, &[0xfe, 0xff, 7, 0]), json!([-2, 7]));
        assert_eq!(v(Datatype::UInt64, &u64::MAX.to_le_bytes()), json!(u64::MAX));
        assert_eq!(v(Datatype::Float32, &1.5f32.to_le_bytes()), json!(1.5));
        assert_eq!(v(Datatype::Utf8, b"hi"), json!("hi"));
        // Booleans and times are values of their own type, not the bits of a float64.
        assert_eq!(v(Datatype::Bool, &[1, 0]), json!([true, false]));
        assert_eq!(v(Datatype::Datetime64(tessera::TimeUnit::Second), &60i64.to_le_bytes()), json!(60));
        assert_eq!(to_json(&MetaValue { datatype: None, data: vec![1, 2] }), json!([1, 2]));
    }
}
