"""Arrays on S3: a real S3 server (``tessera-s3-server``, s3s over a temporary folder on
127.0.0.1) started by the tests. Round trips from numpy, configuration from ``ts.Config`` and
from the AWS environment variables, statistics of requests, writers, consolidators, vacuums and
readers in separate processes, faults injected between the engine and the server, and Dask
workers writing one array in parallel."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, Iterator

import numpy as np
import pytest

import consolidation_worker as worker
import tessera as ts
from s3server import running_s3_server


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with running_s3_server(str(tmp_path_factory.mktemp("s3root")), bucket="tessera") as server:
        yield server


def config(server: Any, **extra: str) -> Dict[str, str]:
    return {
        "vfs.s3.endpoint": server.endpoint,
        "vfs.s3.region": "us-east-1",
        "vfs.s3.access_key_id": server.access_key,
        "vfs.s3.secret_access_key": server.secret_key,
        "vfs.s3.allow_http": "true",
        **extra,
    }


_names = iter(range(10**9))


def fresh(server: Any) -> str:
    """A new array location in the server's bucket."""
    return f"s3://{server.bucket}/t{os.getpid()}_{next(_names)}"


def test_numpy_round_trip_dense_and_sparse(s3: Any) -> None:
    cfg = config(s3)
    data = np.random.default_rng(1).normal(size=(300, 200))
    uri = fresh(s3)
    ts.from_numpy(uri, data, tile=(64, 64), filters=[ts.Zstd(level=3)], config=cfg)
    with ts.open(uri, config=cfg) as A:
        np.testing.assert_array_equal(A[...], data)
        np.testing.assert_array_equal(A[17:250, 33:34], data[17:250, 33:34])
    assert ts.object_kind(uri, config=cfg) == "array"
    schema = ts.ArraySchema([ts.Dim("x", (0, 999), 100), ts.Dim("y", (0, 999), 100)],
                            [ts.Attr("v", "float32")], sparse=True)
    sp = fresh(s3)
    ts.create(sp, schema, config=cfg)
    rng = np.random.default_rng(2)
    xs, ys = rng.choice(1000, 500, replace=False), rng.integers(0, 1000, 500)
    vs = rng.normal(size=500).astype(np.float32)
    with ts.open(sp, "w", config=cfg) as A:
        A.write({"x": xs, "y": ys}, vs)
    with ts.open(sp, config=cfg) as A:
        got = A.read()
    order = np.lexsort((got["y"], got["x"]))
    want = np.lexsort((ys, xs))
    np.testing.assert_array_equal(got["x"][order], xs[want])
    np.testing.assert_array_equal(got["v"][order], vs[want])


def test_the_aws_environment_configures_the_store(s3: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    uri = fresh(s3)
    # A configuration no other test uses: a new engine context reads the environment.
    cfg = {"sm.io_concurrency": "3"}
    ts.from_numpy(uri, np.arange(100, dtype=np.int64), config=cfg)
    with ts.open(uri, config=cfg) as A:
        np.testing.assert_array_equal(A[...], np.arange(100))


def test_statistics_count_requests_by_kind(s3: Any) -> None:
    cfg = config(s3, **{"sm.tile_cache_size": "0"})
    uri = fresh(s3)
    ts.from_numpy(uri, np.arange(64 * 64, dtype=np.int32).reshape(64, 64), tile=(16, 16), config=cfg)
    with ts.open(uri, config=cfg) as A:
        ts.stats.reset()
        ts.stats.enable()
        try:
            A[0:16, 0:16]
        finally:
            ts.stats.disable()
    counters = ts.stats.json()["counters"]
    # One tile of one attribute: one GET, nothing else; the open before it fetched the metadata.
    assert counters["vfs_object_get_requests"] == 1, counters
    assert counters["vfs_object_head_requests"] == counters["vfs_object_list_requests"] == 0, counters
    assert "vfs_object_get_requests" in ts.stats.dumps()


def test_block_checksums_kept_apart_on_s3(s3: Any) -> None:
    """Fragments whose block checksums are kept in their own object (format 9,
    ``sm.write.inline_block_checksums`` 0): a read of part of a tile fetches that tile's
    checksums once per open (one GET, beside one for the blocks), a whole-tile read none; the
    same after a consolidation and a vacuum, and the values are the writes' throughout."""
    cfg = config(s3, **{"sm.tile_cache_size": "0", "sm.write.inline_block_checksums": "0"})
    uri = fresh(s3)
    ref = np.arange(128 * 1024, dtype=np.int32).reshape(128, 1024)
    ts.from_numpy(uri, ref, tile=(64, 1024), config=cfg)
    ref[60:70, 500:600] = -7
    with ts.open(uri, "w", config=cfg) as A:
        A[60:70, 500:600] = ref[60:70, 500:600]

    def gets(read: Any) -> int:
        ts.stats.reset()
        ts.stats.enable()
        try:
            read()
        finally:
            ts.stats.disable()
        return int(ts.stats.json()["counters"].get("vfs_object_get_requests", 0))

    for step in ("two fragments", "consolidated"):
        with ts.open(uri, config=cfg) as A:
            # Rows 5-6 of the first tile: 2 of its 64 blocks (a row is one 4 KiB block).
            n = gets(lambda: np.testing.assert_array_equal(A[5:7, 100:400], ref[5:7, 100:400]))
            assert n == 2, (step, n)
            n = gets(lambda: np.testing.assert_array_equal(A[8:9, 0:1024], ref[8:9]))
            assert n == 1, (step, n)  # its checksums are in memory now
            np.testing.assert_array_equal(A[...], ref)
        if step == "two fragments":
            ts.consolidate(uri, config=cfg)
            ts.vacuum(uri, config=cfg)


def test_bad_s3_locations_and_settings_are_clear_errors(s3: Any) -> None:
    with pytest.raises(ts.ArrayError, match="bucket name"):
        ts.open("s3://NO/a")
    with pytest.raises(ts.ConfigError, match=r"vfs\.s3\.allow_http"):
        ts.Config({"vfs.s3.allow_http": "maybe"})
    # A bucket that does not exist: an error naming it, nothing created.
    cfg = config(s3)
    with pytest.raises(ts.TesseraError, match="no-such-bucket"):
        ts.create("s3://no-such-bucket/a", ts.ArraySchema([ts.Dim("r", (0, 3), 2)], [ts.Attr("a", "int32")]),
                  config=cfg)


def test_the_command_line_takes_s3_uris_and_options(s3: Any) -> None:
    tessera_cmd = pathlib.Path(sys.executable).parent / "tessera"
    if not tessera_cmd.exists():
        pytest.fail(f"{tessera_cmd} is missing: `make build` installs it")
    cfg = config(s3)
    uri = fresh(s3)
    ts.from_numpy(uri, np.arange(12, dtype=np.int32).reshape(3, 4), config=cfg)
    opts = [a for k, v in cfg.items() for a in ("--config", f"{k}={v}")]
    info = subprocess.run([str(tessera_cmd), *opts, "info", uri, "--json"], capture_output=True, text=True,
                          timeout=120)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["nonempty_domain"] == [[0, 2], [0, 3]]
    # Without the endpoint it cannot reach the server: a clear error, exit code 1.
    bad = subprocess.run([str(tessera_cmd), "--config", "vfs.s3.max_retries=0", "--config",
                          "vfs.s3.endpoint=http://127.0.0.1:1", "--config", "vfs.s3.allow_http=true", "--config",
                          "vfs.s3.region=us-east-1", "info", uri], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 1 and bad.stderr.startswith("error: "), bad.stderr


def test_faults_between_engine_and_server_lose_no_write(s3: Any) -> None:
    cfg = config(s3, **{"vfs.s3.max_retries": "20", "sm.tile_cache_size": "0"})
    uri = fresh(s3)
    ref = np.zeros((40, 40), dtype=np.int32)
    ts.from_numpy(uri, ref, tile=(10, 10), config=cfg)
    s3.set_faults(seed=3, error_rate=0.15, drop_rate=0.05, drop_after_rate=0.1)
    try:
        rng = np.random.default_rng(5)
        for i in range(15):
            r0, c0 = (int(x) for x in rng.integers(0, 35, 2))
            vals = rng.integers(-1000, 1000, size=(5, 5), dtype=np.int32)
            with ts.open(uri, "w", config=cfg) as W:
                W[r0:r0 + 5, c0:c0 + 5] = vals
            ref[r0:r0 + 5, c0:c0 + 5] = vals
            with ts.open(uri, config=cfg) as A:
                np.testing.assert_array_equal(A[...], ref, err_msg=f"after write {i}")
        ts.consolidate(uri, config=cfg)
        ts.vacuum(uri, config=cfg)
        injected = s3.counts()["faults"]
    finally:
        s3.set_faults()
    assert injected["error"] > 0 and injected["drop_after"] > 0, injected
    with ts.open(uri, config=cfg) as A:
        np.testing.assert_array_equal(A[...], ref)
        assert len(A.fragments()) == 1


def test_writer_consolidator_and_readers_in_separate_processes(
    s3: Any, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """test_consolidate.py's process test on S3: no locks there, so vacuum deletes replaced
    fragments only after its grace period (here 2 s) and readers must stay right meanwhile."""
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TESSERA_TEST_GRACE_MS", "2000")
    cfg = {"sm.vacuum.grace_ms": "2000"}
    uri = fresh(s3)
    refdir = tmp_path / "refs"
    refdir.mkdir()
    ts.create(uri, ts.ArraySchema([ts.Dim("r", (0, 63), 16), ts.Dim("c", (0, 63), 16)], [ts.Attr("a", "int32")]),
              config=cfg)
    init = np.random.default_rng(0).integers(-100, 100, size=worker.SHAPE, dtype=np.int32)
    with ts.open(uri, "w", config=cfg) as A:
        A[:, :] = init
    worker.save_ref(str(refdir), worker.newest_t1(uri), init)

    outputs, _ = worker.run_roles(uri, str(refdir), str(tmp_path), run_for=12.0, seed=20, reader_threads=1)
    w, c, r = outputs["writer"], outputs["consolidator"], outputs["reader"]
    print(f"\nwriter {w}\nconsolidator {c}\nreader {r}")
    assert w["slabs"] >= 3 and c["consolidations"] >= 2 and c["vacuums"] >= 1, (w, c)
    # (On S3 replaced fragments outlive the checkpoint that drops their records, so a later
    # vacuum removes them without knowing they were committed: "uncommitted".)
    assert c["removed"] + c["uncommitted"] >= 1, c
    assert r["reads"] >= 10 and r["snapshots"] >= 2, r
    last = np.load(refdir / f"{worker.newest_t1(uri)}.npy")
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[...], last)


def test_dask_workers_write_one_array_in_parallel(s3: Any) -> None:
    da = pytest.importorskip("dask.array")
    distributed = pytest.importorskip("distributed")
    tsd = pytest.importorskip("tessera.dask")
    cfg = config(s3)
    x = np.arange(120 * 90, dtype=np.float64).reshape(120, 90)
    uri = fresh(s3)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=40)
    client = distributed.Client(cluster)
    try:
        tsd.to_tessera(da.from_array(x, chunks=(40, 30)), uri, attr="v", config=cfg)
        pids = set(client.run(os.getpid).values())
        assert len(pids) == 2
        with ts.open(uri, config=cfg) as A:
            assert len(A.fragments()) == 9
            np.testing.assert_array_equal(A[...], x)
        back = tsd.from_tessera(uri, config=cfg).compute()
        np.testing.assert_array_equal(back, x)
    finally:
        client.close()
        cluster.close()
