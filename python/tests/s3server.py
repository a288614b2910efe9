"""Start the `tessera-s3-server` binary for a test: a real SigV4 S3 server on loopback with fault
injection (crates/tessera-s3-server). Standard library only.

    with running_s3_server(tmp_path / "s3", error_rate=0.2) as s3:
        env = s3.env()          # AWS_ENDPOINT_URL, keys, region, AWS_ALLOW_HTTP
        s3.set_faults(drop_after_rate=1.0, conditional_only=True, limit=1)
        s3.counts()["requests"]["PutObject"]

The binary is `$TESSERA_S3_SERVER`, else this checkout's `target/release/tessera-s3-server`
(built with cargo when missing). The server exits when the test process dies (it watches its
stdin), so a killed pytest cannot leak it.
"""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import selectors
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from typing import IO, Any, Dict, Iterator, Optional, Union

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULT_ACCESS_KEY = "tessera-test"
DEFAULT_SECRET_KEY = "tessera-test-secret"


def s3_server_binary() -> str:
    """The server binary: $TESSERA_S3_SERVER, or this checkout's release build (built if missing)."""
    env = os.environ.get("TESSERA_S3_SERVER")
    if env:
        return env
    path = ROOT / "target" / "release" / "tessera-s3-server"
    if not (path.is_file() and os.access(path, os.X_OK)):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tessera-s3-server"], cwd=ROOT, check=True)
    return str(path)


class S3ServerHandle:
    """A running server: its endpoint, credentials and bucket, and its control endpoint."""

    def __init__(
        self, process: subprocess.Popen[bytes], endpoint: str, bucket: str, access_key: str, secret_key: str
    ) -> None:
        self.process = process
        self.endpoint = endpoint
        self.bucket = bucket
        self.access_key = access_key
        self.secret_key = secret_key

    def env(self) -> Dict[str, str]:
        """Environment variables that point an AWS-style client (object_store, boto3) at the server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        }

    def set_faults(self, **faults: Any) -> Dict[str, Any]:
        """Replace the fault configuration (fields of `Faults`: error_rate, error_status, slow_rate,
        slow_ms, drop_rate, drop_after_rate, seed, methods, key_contains, conditional_only, limit;
        missing ones are off). Returns the configuration now in force; ValueError if rejected."""
        return self._control("PUT", "faults", faults)

    def faults(self) -> Dict[str, Any]:
        """The fault configuration in force."""
        return self._control("GET", "faults")

    def counts(self) -> Dict[str, Any]:
        """{"requests": {operation: n}, "statuses": {"200": n}, "faults": {kind: n}}."""
        return self._control("GET", "counts")

    def reset_counts(self) -> Dict[str, Any]:
        """Set all counts to zero."""
        return self._control("DELETE", "counts")

    def _control(self, method: str, name: str, body: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.endpoint}/__tessera/{name}", data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                result: Dict[str, Any] = json.loads(resp.read())
                return result
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise ValueError(f"{method} /__tessera/{name} failed with {e.code}: {detail}") from e


def _read_listening_line(process: subprocess.Popen[bytes], stderr: IO[bytes], timeout: float) -> str:
    """Wait for `listening <endpoint>`; on exit or timeout raise with the server's stderr."""
    assert process.stdout is not None
    deadline = time.monotonic() + timeout
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(process.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                break
            chunk = os.read(process.stdout.fileno(), 1)
            if not chunk:
                break
            line += chunk
    text = line.decode(errors="replace").strip()
    if text.startswith("listening http://"):
        return text.split(" ", 1)[1]
    process.kill()
    process.wait()
    stderr.seek(0)
    err = stderr.read().decode(errors="replace").strip()
    raise RuntimeError(f"tessera-s3-server did not start within {timeout} s (stdout {text!r}); stderr:\n{err}")


@contextlib.contextmanager
def running_s3_server(
    root: Union[str, "os.PathLike[str]"],
    bucket: str = "tessera",
    *,
    access_key: str = DEFAULT_ACCESS_KEY,
    secret_key: str = DEFAULT_SECRET_KEY,
    timeout: float = 30.0,
    **faults: Any,
) -> Iterator[S3ServerHandle]:
    """Run the server on a free loopback port with buckets as folders under `root` (bucket
    `bucket` is created), set `faults` (as `set_faults`), and stop it on exit (terminate,
    wait, kill)."""
    cmd = [s3_server_binary(), "--root", os.fspath(root), "--bucket", bucket]
    cmd += ["--access-key", access_key, "--secret-key", secret_key]
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        try:
            endpoint = _read_listening_line(process, stderr, timeout)
            handle = S3ServerHandle(process, endpoint, bucket, access_key, secret_key)
            if faults:
                handle.set_faults(**faults)
            yield handle
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()
