"""Numbers at the edges of dense arrays: float bounds of reads, coordinates repeated in one update,
results too large for memory, and domains that end at the last value of uint64."""

from __future__ import annotations

import numpy as np
import pytest

import tessera as ts
from conftest import make_2d


def test_float_bounds_take_the_integers_inside(uri: str) -> None:
    make_2d(uri, rows=6, cols=4, tile=(4, 3))
    with ts.open(uri, "w") as A:
        A[:, :] = np.arange(24, dtype=np.int32).reshape(6, 4)
    with ts.open(uri) as A:
        # Rows 2 and 3 (domain from 1), not row 1: the bound is not truncated.
        np.testing.assert_array_equal(A.read(ranges=[(1.5, 3), None]), np.arange(4, 12).reshape(2, 4))
        np.testing.assert_array_equal(A.read(ranges={"r": (2.0, 2.0), "c": [(1.0, 1.9), (3.1, 4)]}), [[4, 7]])
        batches = list(A.iter_batches({"r": (1.5, 3)}, budget_bytes=16))
        np.testing.assert_array_equal(np.concatenate([b["a"] for b in batches]), np.arange(4, 12).reshape(2, 4))
        with pytest.raises(ts.DomainError, match=r"range \[1.2, 1.8\] holds no integer coordinate"):
            A.read(ranges=[(1.2, 1.8), None])
        with pytest.raises(ts.DomainError, match="outside the domain"):
            A.read(ranges=[(0.5, 2), None])


def test_a_coordinate_given_twice_in_an_update_takes_its_last_value(uri: str) -> None:
    make_2d(uri, rows=4, cols=4, tile=(2, 2))
    with ts.open(uri, "w") as A:
        A.write({"r": [1, 2, 1, 1], "c": [1, 2, 1, 1]}, {"a": np.array([10, 20, 30, 40], dtype=np.int32)})
    with ts.open(uri) as A:
        assert A[1, 1] == 40 and A[2, 2] == 20
        assert [f.cell_count for f in A.fragments()] == [2]


def test_a_result_larger_than_memory_is_refused(uri: str) -> None:
    schema = ts.ArraySchema(dims=[ts.Dim("x", (0, (1 << 40) - 1), 1 << 20, dtype="uint64")],
                            attrs=[ts.Attr("a", "int32")])
    ts.create(uri, schema)
    with ts.open(uri) as A:
        with pytest.raises(ts.QueryError, match=r"needs 4398046511104 bytes \(4.0 TiB\).*iter_batches"):
            A[:]
        first = next(iter(A.iter_batches(budget_bytes=1 << 20)))["a"]
        assert first.shape == (1 << 18,) and (first == np.iinfo(np.int32).min).all()


def test_the_last_cell_of_a_full_uint64_domain(uri: str) -> None:
    top = (1 << 64) - 2
    ts.create(uri, ts.ArraySchema(dims=[ts.Dim("x", (0, top), 7, dtype="uint64")], attrs=[ts.Attr("a", "int32")]))
    with ts.open(uri, "w") as A:
        A[top] = 5
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[top - 3 :], [np.iinfo(np.int32).min] * 3 + [5])
