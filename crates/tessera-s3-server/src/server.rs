//! [`S3Server`]: starts the server on its own thread and tokio runtime, owns its lifetime
//! (Drop shuts it down and joins the thread), and exposes faults and counts to its owner.

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use crate::faults::{Counts, Faults, FaultsError};
use crate::service::{Handler, Shared};
use crate::store::Store;

/// How long shutdown waits for open connections to finish their requests.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Options of [`S3Server::start`]. `Default`: `127.0.0.1:0` (a free port), the test
/// credentials, no buckets, no faults.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Address to listen on; port 0 picks a free port.
    pub addr: SocketAddr,
    /// The only access key the server accepts (SigV4 signatures are verified).
    pub access_key: String,
    /// The secret key of `access_key`.
    pub secret_key: String,
    /// Buckets (folders under the root) to create at start if missing.
    pub buckets: Vec<String>,
    /// Faults to inject from the first request on.
    pub faults: Faults,
}

/// Access key of [`ServerOptions::default`].
pub const DEFAULT_ACCESS_KEY: &str = "tessera-test";
/// Secret key of [`ServerOptions::default`].
pub const DEFAULT_SECRET_KEY: &str = "tessera-test-secret";

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            access_key: DEFAULT_ACCESS_KEY.to_string(),
            secret_key: DEFAULT_SECRET_KEY.to_string(),
            buckets: Vec::new(),
            faults: Faults::default(),
        }
    }
}

/// A running S3 server. Dropping it stops accepting, lets open requests finish (up to 2 s) and
/// joins the server thread.
#[derive(Debug)]
pub struct S3Server {
    addr: SocketAddr,
    root: PathBuf,
    access_key: String,
    secret_key: String,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl S3Server {
    /// Starts a server for the buckets (folders) under `root`, which is created if missing.
    /// The port is bound before this returns, so the server accepts connections at once.
    ///
    /// # Errors
    /// An I/O error if the root cannot be created or opened, a bucket cannot be created, the
    /// address cannot be bound, the fault configuration is invalid (`InvalidInput`) or the
    /// runtime or thread cannot be started.
    pub fn start(root: &Path, opts: ServerOptions) -> std::io::Result<S3Server> {
        opts.faults.validate().map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        std::fs::create_dir_all(root).map_err(|e| with_path(e, "creating the root", root))?;
        let root = root.canonicalize().map_err(|e| with_path(e, "resolving the root", root))?;
        for bucket in &opts.buckets {
            make_bucket(&root, bucket)?;
        }
        let store = Store::new(root.clone())?;
        let mut builder = S3ServiceBuilder::new(store);
        builder.set_auth(SimpleAuth::from_single(opts.access_key.clone(), opts.secret_key.clone()));
        let shared = Arc::new(Shared::new(opts.faults));
        let handler = Handler { s3: builder.build(), shared: shared.clone() };

        let listener = StdTcpListener::bind(opts.addr)
            .map_err(|e| std::io::Error::new(e.kind(), format!("binding {}: {e}", opts.addr)))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("tessera-s3-worker")
            .enable_all()
            .build()?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let thread = std::thread::Builder::new().name("tessera-s3-server".into()).spawn(move || {
            runtime.block_on(serve(listener, handler, shutdown_rx));
            runtime.shutdown_timeout(SHUTDOWN_GRACE);
        })?;
        Ok(S3Server {
            addr,
            root,
            access_key: opts.access_key,
            secret_key: opts.secret_key,
            shared,
            shutdown,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The (canonical) root folder; each bucket is a folder in it.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The access key the server accepts.
    pub fn access_key(&self) -> &str {
        &self.access_key
    }

    /// The secret key of [`S3Server::access_key`].
    pub fn secret_key(&self) -> &str {
        &self.secret_key
    }

    /// Creates bucket `name` (a folder under the root) if it does not exist.
    ///
    /// # Errors
    /// `InvalidInput` for a name S3 does not allow; the I/O error of creating the folder.
    pub fn create_bucket(&self, name: &str) -> std::io::Result<()> {
        make_bucket(&self.root, name)
    }

    /// Replaces the fault configuration; its generator and limit start again.
    ///
    /// # Errors
    /// [`FaultsError`] when a rate is out of range, the rates sum to more than 1 or the error
    /// status is neither 500 nor 503; the old configuration then stays.
    pub fn set_faults(&self, faults: Faults) -> Result<(), FaultsError> {
        self.shared.set_faults(faults)
    }

    /// The current fault configuration.
    pub fn faults(&self) -> Faults {
        self.shared.faults()
    }

    /// Requests by operation, responses by status and injected faults so far.
    pub fn counts(&self) -> Counts {
        self.shared.counts()
    }

    /// Sets all counts to zero.
    pub fn reset_counts(&self) {
        self.shared.reset_counts();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(thread) = self.thread.take() {
            // A panic on the server thread was already reported there; nothing to add.
            let _ = thread.join();
        }
    }
}

fn with_path(e: std::io::Error, what: &str, path: &Path) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

fn make_bucket(root: &Path, name: &str) -> std::io::Result<()> {
    if !s3s::path::check_bucket_name(name) {
        let msg = format!("{name:?} is not a valid S3 bucket name");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, msg));
    }
    let path = root.join(name);
    std::fs::create_dir_all(&path).map_err(|e| with_path(e, "creating bucket folder", &path))
}

/// Accepts connections until shutdown, then waits up to [`SHUTDOWN_GRACE`] for them.
async fn serve(listener: StdTcpListener, handler: Handler, mut shutdown: watch::Receiver<bool>) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tessera-s3-server: cannot register the listener: {e}");
            return;
        }
    };
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            res = listener.accept() => match res {
                Ok((stream, _)) => {
                    conns.spawn(serve_connection(stream, handler.clone(), shutdown.clone()));
                }
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    eprintln!("tessera-s3-server: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
            _ = shutdown.changed() => break,
        }
        while conns.try_join_next().is_some() {}
    }
    drop(listener);
    let drain = async { while conns.join_next().await.is_some() {} };
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, drain).await;
    conns.abort_all();
}

/// Serves one HTTP/1 connection; closes it when a fault asks (`kill`) or, gracefully, on
/// shutdown.
async fn serve_connection(stream: TcpStream, handler: Handler, mut shutdown: watch::Receiver<bool>) {
    let _ = stream.set_nodelay(true);
    let kill = Arc::new(Notify::new());
    let kill_for_requests = kill.clone();
    let svc = hyper::service::service_fn(move |req| handler.clone().handle(req, kill_for_requests.clone()));
    let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    // Returning drops `conn`, which closes the socket without a response when `kill` fired.
    tokio::select! {
        _ = conn.as_mut() => {}
        () = kill.notified() => {}
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                () = kill.notified() => {}
            }
        }
    }
}
