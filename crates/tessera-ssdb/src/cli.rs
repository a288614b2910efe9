//! The `tessera ssdb` command line: `tessera ssdb run --config micro --dir DIR [--steps ...]
//! [--starts ...]`. The `tessera` binary embeds [`SsdbArgs`] as a subcommand and calls
//! [`run_command`] with its global `--config` values: the `tessera` command already takes
//! `--config KEY=VALUE` (engine settings) on every subcommand, so `ssdb run` reads the SS-DB
//! configuration from the same option: the one value without `=` names it, the `KEY=VALUE` ones
//! still set the engine.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};

use crate::params::{Config, StartSet};
use crate::pipeline::{run, RunSpec, Step};
use crate::progress::Bars;

/// The SS-DB benchmark (SSDB.md): generate, load, cook and group a configuration, then run
/// the queries.
#[derive(Debug, Args)]
pub struct SsdbArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: SsdbCommand,
}

/// The `ssdb` subcommands.
#[derive(Debug, Subcommand)]
pub enum SsdbCommand {
    /// Run a configuration end to end and write DIR/report.json.
    Run(RunArgs),
}

/// Options of `ssdb run` (the configuration comes from the global `--config`: micro, tiny,
/// very-small, small, normal or large; `--config KEY=VALUE` sets the engine as elsewhere).
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Folder of the generated store and of report.json (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Steps, comma-separated: load, cook, group, queries (Q1-Q9, 15 runs each per start set).
    #[arg(long, value_delimiter = ',', default_value = "load,cook,group,queries")]
    pub steps: Vec<Step>,
    /// Query start sets, comma-separated: spec, dense.
    #[arg(long, value_delimiter = ',', default_value = "spec,dense")]
    pub starts: Vec<StartSet>,
    /// The sky tiles file (tileData); by default the cached one, made on first use with
    /// numpy (TESSERA_SSDB_CACHE, TESSERA_SSDB_PYTHON).
    #[arg(long)]
    pub tiles: Option<PathBuf>,
}

/// Runs an `ssdb` subcommand; writes a one-line summary and where the report went to `out`.
///
/// # Errors
/// Whatever the run refuses or fails on (see [`crate::pipeline::run`]).
pub fn run_command(args: &SsdbArgs, config: &[String], out: &mut dyn Write) -> Result<()> {
    match &args.command {
        SsdbCommand::Run(a) => {
            let (names, engine): (Vec<&String>, Vec<&String>) = config.iter().partition(|c| !c.contains('='));
            let [name] = names.as_slice() else {
                bail!(
                    "ssdb run needs exactly one --config naming the configuration (micro, tiny, very-small, \
                     small, normal, large), got {names:?}"
                );
            };
            let config: Config = name.parse().map_err(anyhow::Error::msg)?;
            let mut engine_config = tessera::Config::new();
            for kv in engine {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                engine_config.set(k, v).with_context(|| format!("--config {kv}"))?;
            }
            let mut steps = a.steps.clone();
            steps.sort_unstable();
            steps.dedup();
            let spec = RunSpec {
                config,
                engine: engine_config,
                dir: a.dir.clone(),
                steps,
                starts: a.starts.clone(),
                tiles: a.tiles.clone(),
            };
            let report = run(&spec, &Bars::default())?;
            let seconds = &report["seconds"];
            let mut times: Vec<String> = ["load", "cook", "group"]
                .iter()
                .filter_map(|k| seconds[*k].as_f64().map(|v| format!("{k} {v:.2} s")))
                .collect();
            if let Some(sets) = seconds["queries"].as_object() {
                for (set, s) in sets {
                    if let Some(v) = s["total"].as_f64() {
                        times.push(format!("queries {set} {v:.2} s"));
                    }
                }
            }
            writeln!(
                out,
                "{}: {}; report in {}",
                spec.config,
                times.join(", "),
                spec.dir.join("report.json").display()
            )?;
            Ok(())
        }
    }
}
