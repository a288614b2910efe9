//! The `tessera-s3-server` binary: the listening line, fault flags, the control endpoint on the
//! same port, and exiting on the end of stdin and on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use object_store::path::Path;
use object_store::{ObjectStoreExt, PutPayload};
use tessera_s3_server::{Counts, DEFAULT_ACCESS_KEY, DEFAULT_SECRET_KEY};

/// Starts the binary with `args` and returns it with its endpoint from the listening line.
fn spawn(root: &std::path::Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera-s3-server"))
        .arg("--root")
        .arg(root)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let endpoint = line.strip_prefix("listening ").unwrap_or_else(|| panic!("first line {line:?}")).trim().to_string();
    assert!(endpoint.starts_with("http://127.0.0.1:"), "{endpoint}");
    (child, endpoint)
}

/// One HTTP/1.1 request on a fresh connection; returns status and body.
fn http(endpoint: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut conn = TcpStream::connect(endpoint.trim_start_matches("http://")).unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(req.as_bytes()).unwrap();
    let mut resp = String::new();
    conn.read_to_string(&mut resp).unwrap();
    let status = resp.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("response {resp:?}"));
    let body = resp.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if t.elapsed() > within {
            child.kill().unwrap();
            panic!("the server did not exit within {within:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_serves_with_fault_flags_and_exits_when_stdin_ends() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["--bucket", "tessera", "--error-rate", "0.3", "--fault-seed", "9", "--fault-methods", "PUT,GetObject"];
    let (mut child, endpoint) = spawn(dir.path(), &args);
    let s3 = object_store::aws::AmazonS3Builder::new()
        .with_endpoint(&endpoint)
        .with_allow_http(true)
        .with_access_key_id(DEFAULT_ACCESS_KEY)
        .with_secret_access_key(DEFAULT_SECRET_KEY)
        .with_region("us-east-1")
        .with_bucket_name("tessera")
        .with_virtual_hosted_style_request(false)
        .build()
        .unwrap();
    for i in 0..20 {
        let path = Path::from(format!("k{i}"));
        s3.put(&path, PutPayload::from(format!("v{i}"))).await.unwrap();
        assert_eq!(s3.get(&path).await.unwrap().bytes().await.unwrap(), format!("v{i}").as_bytes());
    }
    assert!(dir.path().join("tessera/k19").is_file(), "buckets are folders under --root");

    let (status, body) = http(&endpoint, "GET", "/__tessera/counts", "");
    assert_eq!(status, 200, "{body}");
    let counts: Counts = serde_json::from_str(&body).unwrap();
    assert!(counts.faults.error >= 3, "{counts:?}");
    assert_eq!(counts.requests_of("PutObject") + counts.requests_of("GetObject"), 40 + counts.faults.error);

    let (status, body) = http(&endpoint, "PUT", "/__tessera/faults", r#"{"slow_rate": 1.0, "slow_ms": 1}"#);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"slow_ms\":1"), "{body}");
    let (status, body) = http(&endpoint, "PUT", "/__tessera/faults", r#"{"slow_rate": 1.5}"#);
    assert_eq!(status, 400, "{body}");
    assert_eq!(http(&endpoint, "DELETE", "/__tessera/counts", "").0, 200);
    assert_eq!(http(&endpoint, "GET", "/__tessera/nothing", "").0, 404);

    drop(child.stdin.take()); // what happens when the parent dies
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());
}

#[test]
fn binary_exits_cleanly_on_sigterm_and_rejects_bad_flags() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _endpoint) = spawn(dir.path(), &[]);
    let kill = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().unwrap();
    assert!(kill.success());
    assert!(wait_exit(&mut child, Duration::from_secs(10)).success());

    let out = Command::new(env!("CARGO_BIN_EXE_tessera-s3-server"))
        .arg("--root")
        .arg(dir.path())
        .args(["--error-rate", "0.8", "--drop-rate", "0.8"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("sum"), "{}", String::from_utf8_lossy(&out.stderr));
}
