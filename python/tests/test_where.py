"""Query conditions (``where=``) evaluated in the engine: a hypothesis model test against a dict
(several overlapping writes and deletes, newest write wins, NaN values, sparse and dense), batches,
and the errors of bad conditions."""

from __future__ import annotations

import math
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera as ts

OPS = ["<", "<=", ">", ">=", "==", "!="]


@st.composite
def conditions(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 5 if depth < 3 else 2))
    if kind == 0:
        return f"a {draw(st.sampled_from(OPS))} {draw(st.integers(-5, 5))}"
    if kind == 1:
        return f"f {draw(st.sampled_from(OPS))} {draw(st.sampled_from(['-1.5', '0', '0.5', '2', '-inf']))}"
    if kind == 2:
        lo = draw(st.integers(-5, 5))
        return f"a between {lo} and {lo + draw(st.integers(0, 4))}"
    if kind == 3:
        return f"not ({draw(conditions(depth + 1))})"
    joiner = "and" if kind == 4 else "or"
    return f"({draw(conditions(depth + 1))}) {joiner} ({draw(conditions(depth + 1))})"


def reference(cond: str, a: int, f: float) -> bool:
    """The condition on one cell under SQL's rule: NaN makes a comparison unknown (None), `not`
    keeps unknown, and only true passes. Evaluated by rewriting the text into Python."""
    return evaluate(cond, a, f) is True


def evaluate(cond: str, a: int, f: float) -> Optional[bool]:
    tokens = cond.replace("(", " ( ").replace(")", " ) ").split()
    pos = 0

    def peek() -> Optional[str]:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def cmp(x: float, op: str, v: float) -> Optional[bool]:
        if math.isnan(x):
            return None
        return {"<": x < v, "<=": x <= v, ">": x > v, ">=": x >= v, "==": x == v, "!=": x != v}[op]

    def unary() -> Optional[bool]:
        t = take()
        if t == "not":
            r = unary()
            return None if r is None else not r
        if t == "(":
            r = disj()
            take()  # ")"
            return r
        x = float(a) if t == "a" else f
        op = take()
        if op == "between":
            lo = float(take())
            take()  # "and"
            hi = float(take())
            return conj3(cmp(x, ">=", lo), cmp(x, "<=", hi))
        return cmp(x, op, float(take()))

    def conj3(p: Optional[bool], q: Optional[bool]) -> Optional[bool]:
        if p is False or q is False:
            return False
        return None if p is None or q is None else True

    def conj() -> Optional[bool]:
        r = unary()
        while peek() == "and":
            take()
            r = conj3(r, unary())
        return r

    def disj() -> Optional[bool]:
        r = conj()
        while peek() == "or":
            take()
            q = conj()
            r = True if (r is True or q is True) else (None if r is None or q is None else False)
        return r

    return disj()


values = st.tuples(st.integers(-5, 5), st.sampled_from([-2.0, -1.5, 0.0, 0.5, 1.0, 3.0, math.nan]))
Cells = Dict[Tuple[int, int], Tuple[int, float]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    writes=st.lists(
        st.tuples(st.dictionaries(st.tuples(st.integers(0, 7), st.integers(0, 7)), values, min_size=1, max_size=20),
                  st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=4)),
        min_size=1,
        max_size=4,
    ),
    cond=conditions(),
    dense=st.booleans(),
)
def test_where_matches_the_newest_values(
    writes: List[Tuple[Cells, List[Tuple[int, int]]]], cond: str, dense: bool
) -> None:
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (0, 7), 3), ts.Dim("y", (0, 7), 3)],
        attrs=[ts.Attr("a", "int32"), ts.Attr("f", "float64")],
        sparse=not dense,
        **({} if dense else {"capacity": 3}),
    )
    model: Cells = {}
    with tempfile.TemporaryDirectory() as d:
        uri = d + "/arr"
        ts.create(uri, schema)
        if dense:
            # A dense base under the updates: rows 2..5, a = (x + y) % 11 - 5, f = x / 2.
            with ts.open(uri, "w") as A:
                xs, ys = np.meshgrid(np.arange(2, 6), np.arange(8), indexing="ij")
                A[2:6, :] = {"a": ((xs + ys) % 11 - 5).astype(np.int32), "f": xs / 2.0}
            model.update({(x, y): ((x + y) % 11 - 5, x / 2.0) for x in range(2, 6) for y in range(8)})
        for cells, gone in writes:
            with ts.open(uri, "w") as A:
                keys = list(cells)
                A.write(
                    {"x": np.array([k[0] for k in keys]), "y": np.array([k[1] for k in keys])},
                    {"a": np.array([cells[k][0] for k in keys], np.int32),
                     "f": np.array([cells[k][1] for k in keys], np.float64)},
                )
                model.update(cells)
                if gone:
                    A.delete({"x": np.array([g[0] for g in gone]), "y": np.array([g[1] for g in gone])})
                    for g in gone:
                        model.pop(g, None)
        with ts.open(uri) as A:
            got = A.read(where=cond)
            if dense:
                want_a = np.full((8, 8), np.iinfo(np.int32).min, np.int32)
                want_f = np.full((8, 8), np.nan)
                for (x, y), (a, f) in model.items():
                    if reference(cond, a, f):
                        want_a[x, y], want_f[x, y] = a, f
                # Cells no write holds read as the fill value whether they pass or not.
                np.testing.assert_array_equal(got["a"], want_a)
                np.testing.assert_array_equal(got["f"], want_f)
                # Batches (resumed reads) give the same cells in order.
                batches = [b["a"].ravel() for b in A.iter_batches(budget_bytes=64, attrs=["a"], where=cond)]
                np.testing.assert_array_equal(np.concatenate(batches), want_a.ravel())
            else:
                want = sorted((x, y, a, f) for (x, y), (a, f) in model.items() if reference(cond, a, f))
                rows = sorted(zip(got["x"].tolist(), got["y"].tolist(), got["a"].tolist(), got["f"].tolist()))
                assert [r[:3] for r in rows] == [w[:3] for w in want], cond
                for r, w in zip(rows, want):
                    assert r[3] == w[3] or (math.isnan(r[3]) and math.isnan(w[3]))
                # Batches give the same cells.
                batches = list(A.iter_batches(budget_bytes=64, where=cond))
                batched = sorted(x for b in batches for x in zip(b["x"].tolist(), b["y"].tolist()))
                assert batched == [r[:2] for r in rows]


def test_bad_conditions_raise_query_errors_saying_what_and_where(uri: str) -> None:
    ts.create(uri, ts.ArraySchema(dims=[ts.Dim("x", (0, 9), 5)], attrs=[ts.Attr("a", "int8")], sparse=True))
    with ts.open(uri) as A:
        with pytest.raises(ts.QueryError, match="at character 4"):
            A.read(where="a >=")
        with pytest.raises(ts.QueryError, match=r"unknown attribute \"b\""):
            A.read(where="b > 1")
        with pytest.raises(ts.QueryError, match=r"outside the range \[-128, 127\] of int8") as e:
            A.read(where="a > 300")
        assert e.value.attribute == "a"
        with pytest.raises(ts.QueryError, match="not an integer"):
            A.read(where="a == 1.5")
