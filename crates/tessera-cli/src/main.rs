//! The `tessera` command: parses the command line and hands it to the library (see `lib.rs`).

use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = tessera_cli::Cli::parse();
    tessera_cli::exit_code(tessera_cli::run(cli, &mut std::io::stdout().lock()))
}
