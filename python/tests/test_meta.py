"""Array metadata (``A.meta``) against a dict: every value kind round-trips, time travel shows
metadata as it was, consolidation and vacuum change nothing any reader sees, a bad value in an
update writes nothing, and the mode is checked."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera as ts
from conftest import make_2d


def _meta_at(uri: str, t: int) -> dict:
    with ts.open(uri, timestamp=t) as A:
        return dict(A.meta)


def test_values_round_trip(uri: str) -> None:
    make_2d(uri)
    values = {
        "units": "Kelvin °",
        "raw": b"\x00\xff\x07",
        "count": -(2**63),
        "big": np.uint64(2**64 - 1),
        "scale": 0.1,
        "f32": np.float32(1.5),
        "axis": np.arange(5, dtype=np.int16),
        "empty": np.zeros(0, dtype=np.float64),
    }
    with ts.open(uri, "w") as A:
        A.meta.update(values)
    with ts.open(uri, "w") as A:
        A.meta["huge"] = 2**64 - 1  # an int above int64 is stored as uint64
    with ts.open(uri) as A:
        got = dict(A.meta)
    assert got.pop("huge") == np.uint64(2**64 - 1)
    assert got.keys() == values.keys()
    for k, v in values.items():
        if isinstance(v, np.ndarray):
            assert got[k].dtype == v.dtype and np.array_equal(got[k], v), k
        else:
            assert got[k] == v and type(got[k]) is type(v), (k, got[k])


def test_bad_values_write_nothing_and_modes_are_checked(uri: str) -> None:
    make_2d(uri)
    with ts.open(uri, "w") as A:
        A.meta["a"] = 1
        for bad in (np.array([1], "datetime64[Y]"), np.zeros((2, 2)), np.array(["x"]), 2**64, [1, 2], None):
            with pytest.raises((ts.ArgumentError, ts.ArgumentTypeError)):
                A.meta.update({"b": 2, "c": bad})
        with pytest.raises(ts.QueryError):
            A.meta["a"]
        with pytest.raises(ts.QueryError):
            A.meta[""] = 1
    with ts.open(uri) as A:
        assert dict(A.meta) == {"a": 1}
        with pytest.raises(ts.QueryError):
            A.meta["x"] = 1


keys = st.sampled_from(["a", "b", "c"])
ops = st.lists(st.tuples(st.integers(1, 30), keys, st.one_of(st.none(), st.integers(-5, 5), st.text(max_size=3))),
               min_size=1, max_size=12, unique_by=lambda o: o[0])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops)
def test_time_travel_consolidation_and_vacuum(tmp_path_factory: pytest.TempPathFactory, ops: list) -> None:
    uri = str(tmp_path_factory.mktemp("meta") / "a")
    make_2d(uri)
    for t, k, v in ops:
        with ts.open(uri, "w", timestamp=t) as A:
            if v is None:
                del A.meta[k]
            else:
                A.meta[k] = v

    def reference(t: int) -> dict:
        m: dict = {}
        for ts_, k, v in sorted(ops):
            if ts_ <= t:
                if v is None:
                    m.pop(k, None)
                else:
                    m[k] = v
        return m

    def check() -> None:
        for t in range(0, 32, 3):
            assert _meta_at(uri, t) == reference(t), t

    check()
    assert ts.consolidate_metadata(uri) == (len(ops) if len(ops) > 1 else 0)
    check()
    ts.vacuum(uri)
    check()


_WRITER = """
import sys, tessera as ts
uri, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    with ts.open(uri, "w") as A:
        A.meta[f"{who}-{i}"] = i
        if i % 5 == 4:
            del A.meta[f"{who}-{i - 1}"]
"""

_MAINTAINER = """
import sys, tessera as ts
uri, n = sys.argv[1], int(sys.argv[2])
for _ in range(n):
    ts.consolidate_metadata(uri)
    ts.vacuum(uri)
"""


def test_processes_writing_consolidating_and_vacuuming_lose_nothing(uri: str) -> None:
    """Two writer processes and one that consolidates metadata and vacuums in a loop, at once:
    every put and delete of the writers is visible at the end, and stays so after a last
    consolidation and vacuum."""
    import subprocess
    import sys

    make_2d(uri)
    n = 25
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, uri, who, str(n)]) for who in ("a", "b")]
    procs.append(subprocess.Popen([sys.executable, "-c", _MAINTAINER, uri, "15"]))
    assert [p.wait(timeout=300) for p in procs] == [0, 0, 0]
    expected = {f"{who}-{i}": i for who in ("a", "b") for i in range(n) if i % 5 != 3}
    assert _meta_at_now(uri) == expected
    ts.consolidate_metadata(uri)
    ts.vacuum(uri)
    assert _meta_at_now(uri) == expected
    assert len(os.listdir(os.path.join(uri, "__meta"))) == 1


def _meta_at_now(uri: str) -> dict:
    with ts.open(uri) as A:
        return dict(A.meta)


def test_hostile_metadata_files_are_refused_not_trusted(uri: str) -> None:
    """A truncated or garbage metadata file is corruption naming the file (lengths inside a
    file are checked against its bytes: crates/tessera/src/meta.rs tests)."""
    make_2d(uri)
    with ts.open(uri, "w") as A:
        A.meta["k"] = "v"
    (name,) = os.listdir(os.path.join(uri, "__meta"))
    path = os.path.join(uri, "__meta", name)
    with open(path, "rb") as f:
        good = f.read()
    for bad in (good[:-1], good[:10], b"\xff" * 64):
        with open(path, "wb") as f:
            f.write(bad)
        with pytest.raises(ts.CorruptionError) as e, ts.open(uri) as A:
            dict(A.meta)
        assert e.value.file == path, vars(e.value)
