//! The `tessera-s3-server` binary: starts an [`S3Server`], prints `listening <endpoint>` on one
//! stdout line once it accepts connections, and runs until SIGTERM, SIGINT or the end of its
//! stdin (`--keep-stdin` turns the last off), so a test process that dies cannot leak it.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Parser;
use tessera_s3_server::{DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY, Faults, S3Server, ServerOptions};
use tokio::io::AsyncReadExt;
use tokio::signal::unix::{SignalKind, signal};

/// A real S3 server (s3s + s3s-fs) with atomic conditional puts and fault injection, for tests.
/// Run-time control: `PUT /__tessera/faults` (JSON, the fault fields below in snake_case),
/// `GET /__tessera/counts`, `DELETE /__tessera/counts`.
#[derive(Debug, Parser)]
#[command(name = "tessera-s3-server", version)]
struct Args {
    /// Root folder; each bucket is a folder in it (created if missing).
    #[arg(long)]
    root: PathBuf,
    /// Address to listen on (port 0: a free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    /// The access key clients must sign with.
    #[arg(long, default_value = DEFAULT_ACCESS_KEY)]
    access_key: String,
    /// The secret key of the access key.
    #[arg(long, default_value = DEFAULT_SECRET_KEY)]
    secret_key: String,
    /// Bucket to create at start (repeatable).
    #[arg(long = "bucket")]
    buckets: Vec<String>,
    /// Fraction of eligible requests answered with an injected error, not executed.
    #[arg(long, default_value_t = 0.0)]
    error_rate: f64,
    /// Status of injected errors: 503 (SlowDown) or 500 (InternalError).
    #[arg(long, default_value_t = 503)]
    error_status: u16,
    /// Fraction of eligible requests delayed by --slow-ms.
    #[arg(long, default_value_t = 0.0)]
    slow_rate: f64,
    /// Delay of slow requests in milliseconds.
    #[arg(long, default_value_t = 100)]
    slow_ms: u64,
    /// Fraction of eligible requests whose connection is closed before execution.
    #[arg(long, default_value_t = 0.0)]
    drop_rate: f64,
    /// Fraction of eligible requests executed, then left unanswered (connection closed).
    #[arg(long, default_value_t = 0.0)]
    drop_after_rate: f64,
    /// Seed of the fault generator.
    #[arg(long, default_value_t = 0)]
    fault_seed: u64,
    /// Only these HTTP methods or S3 operations are faulted (comma-separated: PUT,GetObject).
    #[arg(long, value_delimiter = ',')]
    fault_methods: Vec<String>,
    /// Only requests whose object key contains this substring are faulted.
    #[arg(long)]
    fault_key_contains: Option<String>,
    /// Only conditional requests (If-None-Match / If-Match) are faulted.
    #[arg(long)]
    fault_conditional_only: bool,
    /// Inject at most this many faults.
    #[arg(long)]
    fault_limit: Option<u64>,
    /// Keep running when stdin reaches its end (for running by hand with stdin closed).
    #[arg(long)]
    keep_stdin: bool,
}

impl Args {
    fn options(&self) -> ServerOptions {
        ServerOptions {
            addr: self.addr,
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
            buckets: self.buckets.clone(),
            faults: Faults {
                seed: self.fault_seed,
                error_rate: self.error_rate,
                error_status: self.error_status,
                slow_rate: self.slow_rate,
                slow_ms: self.slow_ms,
                drop_rate: self.drop_rate,
                drop_after_rate: self.drop_after_rate,
                methods: self.fault_methods.clone(),
                key_contains: self.fault_key_contains.clone(),
                conditional_only: self.fault_conditional_only,
                limit: self.fault_limit,
            },
        }
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera-s3-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> std::io::Result<()> {
    // Install the signal handlers before announcing readiness, so a SIGTERM sent right after
    // the listening line is never fatal.
    let waiter = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut sigterm = waiter.block_on(async { signal(SignalKind::terminate()) })?;
    let mut sigint = waiter.block_on(async { signal(SignalKind::interrupt()) })?;
    let server = S3Server::start(&args.root, args.options())?;
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening {}", server.endpoint())?;
        out.flush()?;
    }
    let keep_stdin = args.keep_stdin;
    waiter.block_on(async {
        let stdin_end = async {
            if keep_stdin {
                std::future::pending::<()>().await;
            }
            let mut stdin = tokio::io::stdin();
            let mut buf = [0u8; 256];
            // Data on stdin is ignored; the end of it (or an error reading it) means the
            // parent is gone.
            while let Ok(n) = stdin.read(&mut buf).await {
                if n == 0 {
                    break;
                }
            }
        };
        tokio::select! {
            _ = sigterm.recv() => {}
            _ = sigint.recv() => {}
            () = stdin_end => {}
        }
    });
    drop(server);
    // tokio's stdin reader is a blocking thread that may still sit in read(); do not wait for it.
    waiter.shutdown_background();
    Ok(())
}
