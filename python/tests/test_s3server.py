"""The S3 test server's Python helper (s3server.py): start and stop, the control endpoint
(faults, counts), authentication, and the server's exit when its parent goes away."""

from __future__ import annotations

import http.client
import pathlib
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request

import pytest

from s3server import running_s3_server


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_start_unauthenticated_request_counts_and_stop(tmp_path: pathlib.Path) -> None:
    with running_s3_server(tmp_path / "s3") as s3:
        assert urllib.parse.urlparse(s3.endpoint).hostname == "127.0.0.1"
        assert (tmp_path / "s3" / "tessera").is_dir(), "the bucket is a folder under the root"
        status, body = _get(f"{s3.endpoint}/tessera?list-type=2")
        assert status == 403, body
        assert b"<Code>AccessDenied</Code>" in body
        counts = s3.counts()
        assert counts["requests"] == {"ListObjectsV2": 1}
        assert counts["statuses"] == {"403": 1}
        assert s3.reset_counts()["requests"] == {}
        env = s3.env()
        assert env["AWS_ENDPOINT_URL"] == s3.endpoint
        assert (env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]) == ("tessera-test", "tessera-test-secret")
        assert (env["AWS_REGION"], env["AWS_ALLOW_HTTP"]) == ("us-east-1", "true")
        process = s3.process
    assert process.returncode == 0, "SIGTERM is a clean exit"
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{s3.endpoint}/__tessera/counts", timeout=5)


def test_faults_set_at_start_and_at_run_time(tmp_path: pathlib.Path) -> None:
    with running_s3_server(tmp_path / "s3", error_rate=1.0, error_status=500) as s3:
        status, body = _get(f"{s3.endpoint}/tessera/key")
        assert status == 500 and b"<Code>InternalError</Code>" in body, body

        faults = s3.set_faults(error_rate=1.0, methods=["PUT"])
        assert faults["error_status"] == 503 and faults["methods"] == ["PUT"]
        assert _get(f"{s3.endpoint}/tessera/key")[0] == 403, "GET is no longer faulted"
        req = urllib.request.Request(f"{s3.endpoint}/tessera/key", data=b"x", method="PUT")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code == 503 and b"<Code>SlowDown</Code>" in err.value.read()

        s3.set_faults(drop_rate=1.0, limit=1)
        conn = http.client.HTTPConnection(urllib.parse.urlparse(s3.endpoint).netloc, timeout=10)
        conn.request("GET", "/tessera/key")
        with pytest.raises((http.client.RemoteDisconnected, ConnectionError)):
            conn.getresponse()
        conn.close()
        assert _get(f"{s3.endpoint}/tessera/key")[0] == 403, "the limit stops faults after one"

        counts = s3.counts()["faults"]
        assert counts == {"error": 2, "slow": 0, "drop": 1, "drop_after": 0}
        with pytest.raises(ValueError, match="sum"):
            s3.set_faults(error_rate=0.7, drop_rate=0.7)
        with pytest.raises(ValueError, match="unknown field"):
            s3.set_faults(eror_rate=0.5)
        assert s3.faults()["drop_rate"] == 1.0, "a rejected configuration leaves the old one"


@pytest.mark.parametrize("how", ["stdin", "sigint"])
def test_server_exits_when_its_parent_goes_away(tmp_path: pathlib.Path, how: str) -> None:
    with running_s3_server(tmp_path / "s3") as s3:
        if how == "stdin":
            assert s3.process.stdin is not None
            s3.process.stdin.close()  # what the kernel does when the test process dies
        else:
            s3.process.send_signal(signal.SIGINT)
        try:
            assert s3.process.wait(timeout=10) == 0
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server kept running after {how}")


def test_start_failure_reports_stderr(tmp_path: pathlib.Path) -> None:
    with pytest.raises(RuntimeError, match="not a valid S3 bucket name"), running_s3_server(tmp_path, "Bad_Bucket"):
        pass
