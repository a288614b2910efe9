"""Aggregates computed in the engine (``A.aggregate``): a hypothesis model test against numpy over
a dict of the newest values (overlapping writes, deletes, NaN, nulls, u64 sums beyond 2**64,
conditions, dense and sparse, batches smaller than the array), and the errors."""

from __future__ import annotations

import math
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera as ts
from test_where import conditions, reference

BIG = 2**64 - 1
values = st.tuples(
    st.integers(-5, 5),
    st.sampled_from([-2.0, -1.5, 0.0, 0.5, 1.0, 3.0, math.inf, math.nan]),
    st.one_of(st.none(), st.integers(0, 9), st.integers(BIG - 9, BIG)),
)
Cell = Tuple[int, float, Optional[int]]
FILL: Cell = (np.iinfo(np.int32).min, math.nan, None)
box = st.tuples(st.integers(0, 7), st.integers(0, 7)).map(sorted)
OPS = ["count", "count_valid", "null_count", "sum", "min", "max", "mean"]


def expected(cells: List[Cell]) -> Dict[str, Dict[str, Any]]:
    a = np.array([c[0] for c in cells], np.int64)
    f = np.array([c[1] for c in cells], np.float64)
    fv = f[~np.isnan(f)]
    v = [c[2] for c in cells if c[2] is not None]
    n = len(cells)
    return {
        "a": {"count": n, "sum": int(a.sum()), "min": int(a.min()) if n else None,
              "max": int(a.max()) if n else None, "mean": float(a.sum()) / n if n else None},
        "f": {"count_valid": n, "sum": float(np.sum(fv)), "min": float(fv.min()) if fv.size else None,
              "max": float(fv.max()) if fv.size else None, "mean": float(np.mean(fv)) if fv.size else None},
        "v": {"count": n, "count_valid": len(v), "null_count": n - len(v), "sum": sum(v),
              "min": min(v) if v else None, "max": max(v) if v else None,
              "mean": float(sum(v)) / len(v) if v else None},
    }


def same(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return got == pytest.approx(want, rel=1e-12, nan_ok=True)
    return type(got) is type(want) and got == want


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    writes=st.lists(
        st.tuples(st.dictionaries(st.tuples(st.integers(0, 7), st.integers(0, 7)), values, min_size=1, max_size=20),
                  st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=4)),
        min_size=1,
        max_size=4,
    ),
    cond=st.one_of(st.none(), conditions()),
    rows=box,
    cols=box,
    dense=st.booleans(),
)
def test_aggregates_match_numpy_on_the_newest_values(
    writes: List[Tuple[Dict[Tuple[int, int], Cell], List[Tuple[int, int]]]],
    cond: Optional[str], rows: List[int], cols: List[int], dense: bool,
) -> None:
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (0, 7), 3), ts.Dim("y", (0, 7), 3)],
        attrs=[ts.Attr("a", "int32"), ts.Attr("f", "float64"), ts.Attr("v", "uint64", nullable=True)],
        sparse=not dense,
        capacity=3,
    )
    model: Dict[Tuple[int, int], Cell] = {}
    with tempfile.TemporaryDirectory() as d:
        uri = d + "/arr"
        ts.create(uri, schema)
        for cells, gone in writes:
            with ts.open(uri, "w") as A:
                keys = list(cells)
                vs = [cells[k][2] for k in keys]
                A.write(
                    {"x": np.array([k[0] for k in keys]), "y": np.array([k[1] for k in keys])},
                    {"a": np.array([cells[k][0] for k in keys], np.int32),
                     "f": np.array([cells[k][1] for k in keys], np.float64),
                     "v": np.ma.MaskedArray(np.array([0 if x is None else x for x in vs], np.uint64),
                                            mask=[x is None for x in vs])},
                )
                model.update(cells)
                if gone:
                    A.delete({"x": np.array([g[0] for g in gone]), "y": np.array([g[1] for g in gone])})
                    for g in gone:
                        model.pop(g, None)
        selected = []
        for x in range(rows[0], rows[1] + 1):
            for y in range(cols[0], cols[1] + 1):
                c = model.get((x, y), None if not dense else FILL)
                if c is not None and (cond is None or reference(cond, c[0], c[1])):
                    selected.append(c)
        want = expected(selected)
        # Batches of a few tiles: the array is read in several of them.
        with ts.open(uri, config={"sm.memory_budget": "1024"}) as A:
            got = A.aggregate({k: list(v) for k, v in want.items()}, ranges=[tuple(rows), tuple(cols)], where=cond)
        for attr, ops in want.items():
            for op, w in ops.items():
                assert same(got[attr][op], w), (attr, op, got[attr][op], w, cond)


def test_aggregate_forms_fill_values_and_errors(uri: str) -> None:
    ts.create(uri, ts.ArraySchema(dims=[ts.Dim("x", (0, 9), 5)],
                                  attrs=[ts.Attr("a", "int16"), ts.Attr("s", str, nullable=True)]))
    with ts.open(uri, "w") as A:
        A[0:4] = {"a": np.array([1, 2, 3, 4], np.int16), "s": np.array(["p", "q", "r", "s"], object)}
    with ts.open(uri) as A:
        got = A.aggregate({"a": ["sum", "max"], "s": "count"}, ranges={"x": (0, 5)})
        # Cells 4 and 5 were never written: they hold the fill value (-32768) and count.
        assert got == {"a": {"sum": 10 - 2 * 32768, "max": 4}, "s": {"count": 6}}
        assert A.aggregate({"s": ["null_count", "count_valid"]}) == {"s": {"null_count": 6, "count_valid": 4}}
        assert A.aggregate({"a": "mean"}, where="a > 2") == {"a": {"mean": 3.5}}
        with pytest.raises(ts.QueryError, match="aggregate sum of attribute s: the attribute holds text") as e:
            A.aggregate({"s": "sum"})
        assert e.value.attribute == "s"
        with pytest.raises(ts.QueryError, match=r"unknown attribute \"b\""):
            A.aggregate({"b": "count"})
        with pytest.raises(ts.QueryError, match=r"unknown operation \"median\""):
            A.aggregate({"a": "median"})
        with pytest.raises(ts.ArgumentTypeError):
            A.aggregate({})
    with ts.open(uri, "w") as A, pytest.raises(ts.QueryError, match="aggregate needs mode 'r'"):
        A.aggregate({"a": "count"})
