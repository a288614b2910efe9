"""numpy interplay: ``ts.from_numpy`` (all or nothing) and ``np.asarray(A)`` (``__array__``,
``shape``, ``dtype``, ``ndim``)."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np
import pytest

import tessera as ts


def listing(root: pathlib.Path) -> list:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


# -- from_numpy: a failure leaves nothing behind ----------------------------------------------

def test_a_failed_from_numpy_leaves_nothing(tmp_path: pathlib.Path) -> None:
    bad = np.array([1, "x"], dtype=object)  # an int among str cells: the write refuses it
    for uri in (tmp_path / "a", tmp_path / "new" / "parents" / "a", "file://" + str(tmp_path / "u")):
        with pytest.raises(ts.QueryError, match="cell 0"):
            ts.from_numpy(uri, bad)
        assert listing(tmp_path) == []


def test_a_failure_after_create_removes_the_array(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(self: Any, key: Any, value: Any) -> None:
        raise KeyboardInterrupt  # anything, even an interrupt, between create and commit

    monkeypatch.setattr(ts.Array, "__setitem__", boom)
    with pytest.raises(KeyboardInterrupt):
        ts.from_numpy(tmp_path / "a", np.arange(4, dtype=np.int32))
    assert listing(tmp_path) == []
    # An empty folder given as the location stays, empty.
    (tmp_path / "empty").mkdir()
    with pytest.raises(KeyboardInterrupt):
        ts.from_numpy(tmp_path / "empty", np.arange(4, dtype=np.int32))
    assert listing(tmp_path) == ["empty"]


def test_from_numpy_never_removes_what_was_there(tmp_path: pathlib.Path) -> None:
    ts.from_numpy(tmp_path / "a", np.arange(4, dtype=np.int32))
    before = listing(tmp_path)
    with pytest.raises(ts.ArrayError, match="already exists"):
        ts.from_numpy(tmp_path / "a", np.arange(4, dtype=np.int32))
    (tmp_path / "file").write_text("x")
    with pytest.raises(ts.TesseraError):
        ts.from_numpy(tmp_path / "file", np.arange(4, dtype=np.int32))
    assert listing(tmp_path) == sorted(before + ["file"])
    assert (tmp_path / "file").read_text() == "x"
    with ts.open(tmp_path / "a") as A:
        np.testing.assert_array_equal(A[:], np.arange(4, dtype=np.int32))
    assert os.path.isdir(tmp_path / "a")


# -- np.asarray(A) ----------------------------------------------------------------------------

def test_asarray_reads_the_whole_domain(uri: str) -> None:
    data = np.arange(12, dtype=np.int16).reshape(3, 4)
    ts.from_numpy(uri, data)
    with ts.open(uri) as A:
        assert (A.shape, A.ndim, A.dtype) == ((3, 4), 2, np.dtype(np.int16))
        got = np.asarray(A)
        assert type(got) is np.ndarray and got.dtype == A.dtype and got.shape == A.shape
        np.testing.assert_array_equal(got, data)
        np.testing.assert_array_equal(np.asarray(A, dtype=np.float64), data.astype(np.float64))
        assert np.asarray(A, dtype=np.float64).dtype == np.float64
        np.testing.assert_array_equal(np.array(A, copy=True), data)
        assert int(np.sum(A)) == int(data.sum())  # numpy functions take it as an array
        with pytest.raises(ValueError, match="copy=False"):
            np.asarray(A, copy=False)
    with ts.open(uri, "w") as A, pytest.raises(ts.QueryError, match="needs mode 'r'"):
        np.asarray(A)


def test_asarray_of_strings_and_multi_value_cells(tmp_path: pathlib.Path) -> None:
    attrs = [ts.Attr("v", "(3,)f4"), ts.Attr("s", str), ts.Attr("n", "int8", nullable=True)]
    schema = ts.ArraySchema(dims=[ts.Dim("r", (1, 3), 3)], attrs=attrs)
    ts.create(tmp_path / "m", schema)
    with ts.open(tmp_path / "m", "w") as A:
        n = np.ma.masked_array([1, 2, 3], [0, 1, 0], dtype=np.int8)
        A[1:4] = {"v": np.ones((3, 3), np.float32), "s": ["a", "bc", ""], "n": n}
    with ts.open(tmp_path / "m") as A:
        assert A.dtype == np.dtype([("v", "(3,)f4"), ("s", object), ("n", "i1")])
        with pytest.raises(ts.QueryError, match=r"exactly one attribute.*v, s, n"):
            np.asarray(A)
    for name, attr, value in [
        ("s", ts.Attr("s", str), ["a", "bc", ""]),
        ("v", ts.Attr("v", "(3,)f4"), np.arange(9, dtype=np.float32).reshape(3, 3)),
    ]:
        ts.create(tmp_path / name, ts.ArraySchema(dims=[ts.Dim("r", (1, 3), 3)], attrs=[attr]))
        with ts.open(tmp_path / name, "w") as A:
            A[1:4] = value
        with ts.open(tmp_path / name) as A:
            got = np.asarray(A)
            assert got.dtype == np.empty(3, A.dtype).dtype
            np.testing.assert_array_equal(got, np.asarray(value, dtype=got.dtype))


def test_asarray_refuses_nulls_and_sparse_arrays(tmp_path: pathlib.Path) -> None:
    schema = ts.ArraySchema(dims=[ts.Dim("r", (1, 3), 3)], attrs=[ts.Attr("n", "int8", nullable=True)])
    ts.create(tmp_path / "n", schema)
    with ts.open(tmp_path / "n", "w") as A:
        A[1:4] = np.ma.masked_array([1, 2, 3], [0, 0, 0], dtype=np.int8)
    with ts.open(tmp_path / "n") as A:
        np.testing.assert_array_equal(np.asarray(A), [1, 2, 3])
    with ts.open(tmp_path / "n", "w") as A:
        A[2:3] = np.ma.masked_array([9], [1], dtype=np.int8)
    with ts.open(tmp_path / "n") as A, pytest.raises(ts.QueryError, match="attribute n holds null cells"):
        np.asarray(A)
    sparse = ts.ArraySchema(dims=[ts.Dim("x", (0, 9), 5)], attrs=[ts.Attr("a", "int32")], sparse=True)
    ts.create(tmp_path / "s", sparse)
    with ts.open(tmp_path / "s") as A:
        assert (A.shape, A.ndim, A.dtype) == ((10,), 1, np.dtype(np.int32))
        with pytest.raises(ts.QueryError, match="sparse"):
            np.asarray(A)
