"""Time travel over a range: ``ts.open(uri, timestamp=(start, end))`` sees only the fragments
written within the inclusive range (``t0 >= start`` and ``t1 <= end``); either end may be None,
and ``(None, t)`` is the same as ``timestamp=t``."""

from __future__ import annotations

import time
from typing import Any, List

import numpy as np
import pytest

import tessera as ts
from conftest import make_2d

FILL = np.iinfo(np.int32).min


def three_fragments(uri: str) -> List[Any]:
    """Rows 1, 2 and 3 of a 4 x 5 array written one fragment each, ms apart."""
    make_2d(uri, rows=4, cols=5, tile=(2, 5))
    for k in range(3):
        with ts.open(uri, "w") as A:
            A[k + 1 : k + 2, 1:6] = np.full((1, 5), 10 * (k + 1), dtype=np.int32)
        time.sleep(0.005)  # distinct millisecond timestamps
    frags = ts.fragments(uri)
    assert len(frags) == 3 and frags[0].t1 < frags[1].t0 and frags[1].t1 < frags[2].t0
    return frags


def rows_seen(A: Any) -> List[int]:
    """The value of each row (FILL where nothing visible was written)."""
    data = np.asarray(A[1:5, 1:6])
    assert (data == data[:, :1]).all()
    return [int(v) for v in data[:, 0]]


def test_a_range_shows_only_the_fragments_written_within_it(uri: str) -> None:
    f = three_fragments(uri)
    with ts.open(uri, timestamp=(f[1].t0, f[1].t1)) as A:
        assert [x.name for x in A.fragments()] == [f[1].name]
        assert rows_seen(A) == [FILL, 20, FILL, FILL]
        assert (A.start, A.timestamp) == (f[1].t0, f[1].t1)
    with ts.open(uri, timestamp=(f[1].t0, None)) as A:
        assert rows_seen(A) == [FILL, 20, 30, FILL]
    with ts.open(uri, timestamp=(None, f[1].t1)) as A, ts.open(uri, timestamp=f[1].t1) as B:
        assert rows_seen(A) == rows_seen(B) == [10, 20, FILL, FILL]
    with ts.open(uri, timestamp=(None, None)) as A:
        assert rows_seen(A) == [10, 20, 30, FILL]
    # A range that holds no whole fragment shows none.
    with ts.open(uri, timestamp=(f[0].t0 + 1, f[2].t1 - 1)) as A:
        assert [x.name for x in A.fragments()] == [f[1].name]
    assert [x.name for x in ts.fragments(uri, timestamp=(f[2].t0, f[2].t1))] == [f[2].name]


def test_bad_ranges_are_refused(uri: str) -> None:
    f = three_fragments(uri)
    with pytest.raises(ValueError, match="starts after it ends"):
        ts.open(uri, timestamp=(f[2].t0, f[0].t1))
    with pytest.raises(ValueError, match=r"\(start, end\)"):
        ts.open(uri, timestamp=(1, 2, 3))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only applies to reads"):
        ts.open(uri, "w", timestamp=(f[0].t0, None))


def test_a_write_timestamp_names_the_fragments_and_time_travel_follows_it(uri: str) -> None:
    """``ts.open(uri, "w", timestamp=t)``: every fragment written is named (t, t)."""
    make_2d(uri, rows=4, cols=5, tile=(2, 5))
    with ts.open(uri, "w") as A:
        A[1:5, 1:6] = np.full((4, 5), 1, dtype=np.int32)
    with ts.open(uri, "w", timestamp=1000) as A:
        assert A.timestamp == 1000
        A[2:3, 1:6] = np.full((1, 5), 7, dtype=np.int32)
        A.delete(ranges={"r": (4, 4)})
    frags = ts.fragments(uri)
    # Fragments are ordered by commit: the write made now first, then the two at 1000.
    assert [f.kind for f in frags] == ["dense", "dense", "delete"]
    assert frags[0].t0 > 1000 and [(f.t0, f.t1) for f in frags[1:]] == [(1000, 1000)] * 2
    with ts.open(uri, timestamp=999) as A:
        assert A.fragments() == []
    with ts.open(uri, timestamp=1000) as A:
        assert rows_seen(A) == [FILL, 7, FILL, FILL]
    with ts.open(uri) as A:  # the writes at 1000 committed last: they win
        assert rows_seen(A) == [1, 7, 1, FILL]
    with ts.open(uri, "w", timestamp=2000) as A:
        A[1:2, 1:6] = np.full((1, 5), 5, dtype=np.int32)
    with ts.open(uri, timestamp=2000) as A:
        assert rows_seen(A) == [5, 7, FILL, FILL]
    with pytest.raises(ts.QueryError, match=str(2**63)):
        ts.open(uri, "w", timestamp=2**63)
