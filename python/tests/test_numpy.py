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
