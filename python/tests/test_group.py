"""Groups: members found in the folder, opening members, metadata with time travel, errors that
change nothing, and metadata readers racing consolidating and vacuuming processes."""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import time
from typing import Any

import numpy as np
import pytest

import tessera as ts


def _schema() -> ts.ArraySchema:
    return ts.ArraySchema(dims=[ts.Dim("r", (0, 9), 5)], attrs=[ts.Attr("a", "int32")])


def test_members_metadata_and_opening(tmp_path: Any) -> None:
    uri = ts.Group.create(str(tmp_path / "g"))
    assert ts.object_kind(uri) == "group"
    with ts.Group(uri, "w") as G:
        G.meta["title"] = "ships"
        G.meta.update({"year": 2016, "bbox": np.array([1.5, 2.5])})
        a = G.create_array("tracks", _schema())
        G.create_group("derived")
    ts.create(os.path.join(uri, "made_elsewhere"), _schema())  # created by path: a member too
    os.makedirs(os.path.join(uri, "plain_folder"))
    with ts.open(a, "w") as A:
        A[...] = np.arange(10, dtype=np.int32)
    with ts.Group(uri) as G:
        assert G.members() == {"derived": "group", "made_elsewhere": "array", "tracks": "array"}
        assert list(G) == ["derived", "made_elsewhere", "tracks"] and len(G) == 3
        assert "tracks" in G and "plain_folder" not in G
        assert G.meta["title"] == "ships" and G.meta["year"] == 2016
        np.testing.assert_array_equal(G.meta["bbox"], [1.5, 2.5])
        with G["tracks"] as A:
            assert isinstance(A, ts.Array)
            np.testing.assert_array_equal(A[...], np.arange(10))
        with G["derived"] as D:
            assert isinstance(D, ts.Group) and len(D) == 0
        with pytest.raises(ts.QueryError, match="no member 'nope'"):
            G["nope"]
        for bad in ["", "..", "a/b", "__meta"]:
            with pytest.raises(ts.QueryError):
                G.member_uri(bad)
        with pytest.raises(ts.QueryError):
            G.meta["x"] = 1  # read mode
        with pickle.loads(pickle.dumps(G)) as H:
            assert H.members() == G.members()


def test_metadata_time_travels(tmp_path: Any) -> None:
    uri = ts.Group.create(str(tmp_path / "g"))
    for t, v in ((10, "one"), (20, "two")):
        with ts.Group(uri, "w", timestamp=t) as G:
            G.meta["k"] = v
    assert ts.Group(uri, timestamp=15).meta["k"] == "one"
    assert ts.Group(uri).meta["k"] == "two"
    assert len(ts.Group(uri, timestamp=5).meta) == 0
    assert ts.consolidate_metadata(uri) == 2
    assert len(ts.Group.vacuum(uri)) == 2
    assert ts.Group(uri, timestamp=15).meta["k"] == "one"
    assert ts.Group(uri).meta["k"] == "two"


def test_errors_change_nothing(tmp_path: Any) -> None:
    arr = str(tmp_path / "a")
    ts.create(arr, _schema())
    before = sorted(os.listdir(arr))
    with pytest.raises(ts.ArrayError, match="is not a Tessera group"):
        ts.Group(arr)
    with pytest.raises(ts.ArrayError, match="already exists"):
        ts.Group.create(arr)
    assert sorted(os.listdir(arr)) == before
    with pytest.raises(ts.ArrayError, match="does not exist"):
        ts.Group(str(tmp_path / "missing"))
    assert not os.path.exists(tmp_path / "missing")
    with pytest.raises(ts.ArgumentError):
        ts.Group(arr, "x")
    assert ts.object_kind(arr) == "array" and ts.object_kind(str(tmp_path)) is None


def _writer(uri: str, n: int) -> None:
    for i in range(n):
        with ts.Group(uri, "w") as G:
            G.meta[f"k{os.getpid()}_{i}"] = i


def _maintainer(uri: str, stop_at: float) -> None:
    while time.time() < stop_at:
        ts.consolidate_metadata(uri)
        ts.Group.vacuum(uri)


def test_readers_never_lose_entries_to_concurrent_consolidate_and_vacuum(tmp_path: Any) -> None:
    uri = ts.Group.create(str(tmp_path / "g"))
    with ts.Group(uri, "w") as G:
        G.meta.update({f"base{i}": i for i in range(5)})
    ctx = mp.get_context("spawn")
    stop_at = time.time() + 4
    procs = [ctx.Process(target=_writer, args=(uri, 40)) for _ in range(2)]
    procs.append(ctx.Process(target=_maintainer, args=(uri, stop_at)))
    for p in procs:
        p.start()
    reads = 0
    seen = 0
    while time.time() < stop_at:
        m = dict(ts.Group(uri).meta)
        # Entries are only ever added: every base entry, and never fewer than a read before.
        assert all(f"base{i}" in m for i in range(5)), sorted(m)
        assert len(m) >= seen
        seen = len(m)
        reads += 1
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert reads > 10
    assert len(ts.Group(uri).meta) == 5 + 80
