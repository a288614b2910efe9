"""Deletions: ``A.delete({"x": xs, ...})`` (cells at coordinates) and ``A.delete(ranges=...)``
(the cross product of inclusive ranges) write delete fragments. Dense arrays read deleted cells
as the fill value (null where nullable), sparse arrays no longer return them; later writes at the
same coordinates win again, time travel to before a delete shows the old cells, consolidation
applies deletions and vacuum removes the tombstones. Ends with model tests mixing writes, point
deletes and range deletes against numpy (dense) and list (sparse) references."""

from __future__ import annotations

import math
import os
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera as ts

I32_MIN = np.iinfo(np.int32).min
# Reads through the update index of small fragments even when there are few of them, from the
# first read of an open array.
INDEXED = {"sm.read.update_index_min_fragments": 1, "sm.read.update_index_after_reads": 0}
I16_MIN = np.iinfo(np.int16).min


def listing(uri: str) -> List[str]:
    """Every file and folder under the array's folder."""
    out = []
    for root, dirs, files in os.walk(uri):
        out += [os.path.relpath(os.path.join(root, x), uri) for x in dirs + files]
    return sorted(out)


def fragment_dirs(uri: str) -> List[str]:
    """The fragment folders on disk (committed or not, superseded or not)."""
    return sorted(os.listdir(os.path.join(uri, "__fragments")))


def rows(r: Dict[str, np.ndarray]) -> List[Tuple[Any, ...]]:
    """A sparse result as sorted row tuples (masked cells as None)."""
    cols = []
    for v in r.values():
        if isinstance(v, np.ma.MaskedArray):
            cols.append([None if m else x for x, m in zip(v.data.tolist(), np.ma.getmaskarray(v).tolist())])
        else:
            cols.append(v.tolist())
    return sorted(zip(*cols), key=repr)


# ---------------------------------------------------------------------------------------------
# Dense arrays


def make_dense(uri: str) -> ts.ArraySchema:
    """A 6 x 5 dense array (r in [1, 6], c in [1, 5]) with an int32, a float64, a nullable int16
    and a str attribute, all written (cell (r, c) holds 10 r + c)."""
    schema = ts.ArraySchema(
        dims=[ts.Dim("r", (1, 6), 3), ts.Dim("c", (1, 5), 2)],
        attrs=[ts.Attr("a", "int32"), ts.Attr("f", "float64"), ts.Attr("n", "int16", nullable=True), ts.Attr("s", str)],
    )
    ts.create(uri, schema)
    v = 10 * np.arange(1, 7)[:, None] + np.arange(1, 6)[None, :]
    s = np.array([[f"s{x}" for x in row] for row in v.tolist()], dtype=object)
    with ts.open(uri, "w") as A:
        A[...] = {"a": v.astype(np.int32), "f": v.astype(np.float64), "n": v.astype(np.int16), "s": s}
    return schema


def dense_ref() -> Dict[str, np.ndarray]:
    v = 10 * np.arange(1, 7)[:, None] + np.arange(1, 6)[None, :]
    return {
        "a": v.astype(np.int32),
        "f": v.astype(np.float64),
        "n": v.astype(np.int16),
        "s": np.array([[f"s{x}" for x in row] for row in v.tolist()], dtype=object),
        "valid": np.ones(v.shape, dtype=bool),
    }


def erase(ref: Dict[str, np.ndarray], sel: Any) -> None:
    """Deletes ``sel`` (a numpy index, 0-based) from a dense reference."""
    ref["a"][sel] = I32_MIN
    ref["f"][sel] = np.nan
    ref["n"][sel] = I16_MIN
    ref["s"][sel] = ""
    ref["valid"][sel] = False


def check_dense(A: ts.Array, ref: Dict[str, np.ndarray]) -> None:
    got = A[...]
    assert isinstance(got, dict)
    np.testing.assert_array_equal(got["a"], ref["a"])
    np.testing.assert_array_equal(got["f"], ref["f"])  # NaN == NaN here
    assert isinstance(got["n"], np.ma.MaskedArray)
    np.testing.assert_array_equal(np.ma.getmaskarray(got["n"]), ~ref["valid"])
    np.testing.assert_array_equal(got["n"].data[ref["valid"]], ref["n"][ref["valid"]])
    assert got["s"].tolist() == ref["s"].tolist()


def test_dense_delete_points_reads_fill_and_null(uri: str) -> None:
    make_dense(uri)
    ref = dense_ref()
    with ts.open(uri, "w") as A:
        # Repeated points, Python ints and a numpy column of the exact dtype; a scalar cell too.
        name = A.delete({"r": [1, 1, 2, 6], "c": np.array([1, 1, 3, 5], dtype=np.int64)})
        A.delete({"r": 4, "c": 2})
    assert isinstance(name, str) and name.startswith("__")
    for r, c in [(1, 1), (2, 3), (6, 5), (4, 2)]:
        erase(ref, (r - 1, c - 1))
    with ts.open(uri) as A:
        check_dense(A, ref)
        assert A[1, 1]["a"] == I32_MIN and math.isnan(A[2, 3]["f"]) and A[6, 5]["n"] is np.ma.masked
        np.testing.assert_array_equal(A.read({"r": (1, 2)}, attrs=["a"]), ref["a"][:2])
        frags = A.fragments()
        assert [f.kind for f in frags] == ["dense", "delete", "delete"]
        assert [(f.dense, f.sparse) for f in frags] == [(True, False), (False, False), (False, False)]
        assert frags[1].name == name and frags[1].cell_count == 3  # distinct points
        assert frags[1].nonempty_domain == ((1, 6), (1, 5)) and frags[2].nonempty_domain == ((4, 4), (2, 2))


def test_dense_delete_ranges(uri: str) -> None:
    make_dense(uri)
    ref = dense_ref()
    with ts.open(uri, "w") as A:
        A.delete(ranges={"r": [(1, 1), (5, 6)], "c": (2, 3)})  # the cross product: 3 rows x 2 cols
        A.delete(ranges=[(3, 3), None])  # list form; None: the whole dimension
    erase(ref, (np.ix_([0, 4, 5], [1, 2])))
    erase(ref, (2, slice(None)))
    with ts.open(uri) as A:
        check_dense(A, ref)
        assert [f.kind for f in A.fragments()] == ["dense", "delete", "delete"]
        assert A.fragments()[2].cell_count == 0  # rectangles are not counted


def test_dense_delete_everything_then_rewrite(uri: str) -> None:
    make_dense(uri)
    ref = dense_ref()
    with ts.open(uri, "w") as A:
        A.delete(ranges={})
    erase(ref, ...)
    with ts.open(uri) as A:
        check_dense(A, ref)


def test_dense_writes_after_a_delete_win_and_time_travel_sees_before(uri: str) -> None:
    make_dense(uri)
    ref = dense_ref()
    before = ts.fragments(uri)[-1].t1
    with ts.open(uri, "w") as A:
        A.delete(ranges={"r": (2, 5)})
    deleted_at = ts.fragments(uri)[-1].t1
    erase(ref, slice(1, 5))
    after_delete = {k: v.copy() for k, v in ref.items()}
    with ts.open(uri, "w") as A:
        # A dense write over part of the deleted region, and a random update inside it.
        A[3:4, 1:6] = {"a": np.full((1, 5), 7, np.int32), "f": np.full((1, 5), 7.0), "n": np.full((1, 5), 7, np.int16),
                       "s": np.array([["x"] * 5], dtype=object)}
        A.write({"r": [5], "c": [5]}, {"a": np.array([9], np.int32), "f": np.array([9.0]), "n": np.array([9], np.int16),
                                       "s": ["y"]})
    ref["a"][2] = 7
    ref["f"][2] = 7.0
    ref["n"][2] = 7
    ref["s"][2] = "x"
    ref["valid"][2] = True
    ref["a"][4, 4], ref["f"][4, 4], ref["n"][4, 4], ref["s"][4, 4], ref["valid"][4, 4] = 9, 9.0, 9, "y", True
    with ts.open(uri) as A:
        check_dense(A, ref)
        assert [f.kind for f in A.fragments()] == ["dense", "delete", "dense", "sparse"]
    with ts.open(uri, timestamp=before) as A:
        check_dense(A, dense_ref())
    with ts.open(uri, timestamp=deleted_at) as A:
        check_dense(A, after_delete)


def test_delete_then_update_in_the_same_array_handle(uri: str) -> None:
    """One write-mode handle can delete, write and delete again; each call is one fragment."""
    ts.from_numpy(uri, np.arange(12, dtype=np.int32).reshape(3, 4))
    with ts.open(uri, "w") as A:
        A.delete({"d0": [0, 1], "d1": [0, 1]})
        A[0:1, 0:2] = np.array([[40, 41]], np.int32)
        A.delete(ranges={"d0": (0, 0), "d1": (1, 1)})
    with ts.open(uri) as A:
        want = np.arange(12, dtype=np.int32).reshape(3, 4)
        want[0, 0], want[0, 1], want[1, 1] = 40, I32_MIN, I32_MIN
        np.testing.assert_array_equal(A[...], want)
        assert [f.kind for f in A.fragments()] == ["dense", "delete", "dense", "delete"]


@pytest.mark.parametrize(
    "call, exc, words",
    [
        (lambda A: A.delete(ranges={"r": (0, 3)}), ts.DomainError, "outside the domain"),
        (lambda A: A.delete(ranges={"r": (2, 7)}), ts.DomainError, "outside the domain"),
        (lambda A: A.delete(ranges={"c": (4, 2)}), ts.DomainError, "reversed"),
        (lambda A: A.delete(ranges={"c": (math.nan, 2)}), ts.DomainError, "NaN"),
        (lambda A: A.delete(ranges={"c": []}), ts.DomainError, "no range"),
        (lambda A: A.delete(ranges={"c": (1.25, 1.75)}), ts.DomainError, "select no cell"),
        (lambda A: A.delete(ranges={"z": (1, 2)}), ts.DomainError, "unknown dimension 'z'"),
        (lambda A: A.delete(ranges=[None]), ts.DomainError, "1 dimensions given"),
        (lambda A: A.delete(ranges={"r": ("a", "b")}), ts.DomainError, r"dimension r: range bound 'a' is not a number"),
        (lambda A: A.delete(ranges={"r": 3}), ts.DomainError, r"not a \(lo, hi\) pair or a list"),
        (lambda A: A.delete({"r": [0], "c": [1]}), ts.DomainError, "outside the domain"),
        (lambda A: A.delete({"z": [1], "c": [1]}), ts.DomainError, "unknown dimension 'z'"),
        (lambda A: A.delete({"r": [1.0], "c": [1]}), ts.QueryError, "not an integer"),
        (lambda A: A.delete({"r": [2**70], "c": [1]}), ts.QueryError, "does not fit"),
        (lambda A: A.delete({"r": ["1"], "c": [1]}), ts.QueryError, "not a number"),
        (lambda A: A.delete({"r": np.array([1], np.int32), "c": [1]}), ts.QueryError, "no silent casts"),
        (lambda A: A.delete({"r": np.array([[1]]), "c": [1]}), ts.QueryError, "1-D"),
        (lambda A: A.delete({"r": [1]}), ts.QueryError, "dimension c are missing"),
        (lambda A: A.delete({"r": [1, 2], "c": [1]}), ts.QueryError, "equal lengths"),
        (lambda A: A.delete({"r": [], "c": []}), ts.QueryError, "at least one point"),
        (lambda A: A.delete([(1, 1), (1, 1)]), ts.QueryError, "given as a dict"),
        (lambda A: A.delete(), ValueError, "exactly one of"),
        (lambda A: A.delete({"r": [1], "c": [1]}, ranges={}), ValueError, "exactly one of"),
    ],
)
def test_bad_deletes_write_nothing(uri: str, call: Any, exc: type, words: str) -> None:
    make_dense(uri)
    before = listing(uri), ts.fragments(uri)
    with ts.open(uri, "w") as A, pytest.raises(exc, match=words):
        call(A)
    assert (listing(uri), ts.fragments(uri)) == before


def test_deletes_need_write_mode_and_an_open_array(uri: str) -> None:
    make_dense(uri)
    with ts.open(uri) as A, pytest.raises(ts.QueryError, match="open for read"):
        A.delete(ranges={})
    A = ts.open(uri, "w")
    A.close()
    with pytest.raises(ts.QueryError, match="closed"):
        A.delete(ranges={})
    assert [f.kind for f in ts.fragments(uri)] == ["dense"]


# ---------------------------------------------------------------------------------------------
# Sparse arrays


def make_sparse(uri: str, dups: bool, dtype: str = "int64") -> ts.ArraySchema:
    is_float = dtype.startswith("float")
    lo, hi = (0.0, 10.0) if is_float else (0, 10)
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (lo, hi), 4 if not is_float else 2.5, dtype=dtype),
              ts.Dim("y", (lo, hi), 4 if not is_float else 2.5, dtype=dtype)],
        attrs=[ts.Attr("a", "int32"), ts.Attr("s", str, nullable=True)],
        sparse=True,
        capacity=3,
        allows_duplicates=dups,
    )
    ts.create(uri, schema)
    return schema


@pytest.mark.parametrize("dups", [False, True])
def test_sparse_deletes_remove_cells_and_later_writes_exist(uri: str, dups: bool) -> None:
    make_sparse(uri, dups)
    xs, ys = [1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7]
    with ts.open(uri, "w") as A:
        A.write({"x": xs, "y": ys}, {"a": np.arange(7, dtype=np.int32), "s": [f"v{i}" for i in range(7)]})
        if dups:  # a second cell at (2, 2) and at (5, 5), in another fragment
            A.write({"x": [2, 5], "y": [2, 5]}, {"a": np.array([20, 50], np.int32), "s": [None, "w"]})
    t_written = ts.fragments(uri)[-1].t1
    with ts.open(uri, "w") as A:
        A.delete({"x": [2, 2, 9], "y": [2, 2, 9]})  # repeated, and a point holding no cell
        A.delete(ranges={"x": [(4, 5), (7, 7)], "y": (0, 5)})  # removes (4, 4), (5, 5); not (7, 7)
    t_deleted = ts.fragments(uri)[-1].t1
    with ts.open(uri, "w") as A:
        A.write({"x": [2, 4], "y": [2, 4]}, {"a": np.array([100, 101], np.int32), "s": ["new", None]})
    with ts.open(uri) as A:
        got = rows(A.read())
        assert got == rows({"x": np.array([1, 2, 3, 4, 6, 7]), "y": np.array([1, 2, 3, 4, 6, 7]),
                            "a": np.array([0, 100, 2, 101, 5, 6]),
                            "s": np.ma.MaskedArray(np.array(["v0", "new", "v2", "", "v5", "v6"], dtype=object),
                                                   mask=[False, False, False, True, False, False])})
        assert rows(A[2:5, :]) == [r for r in got if 2 <= r[0] <= 4]
        kinds = [f.kind for f in A.fragments()]
        assert kinds == ["sparse"] * (2 if dups else 1) + ["delete", "delete", "sparse"]
        assert [f.sparse for f in A.fragments()] == [k == "sparse" for k in kinds]
        assert not any(f.dense for f in A.fragments())
        batches = list(A.iter_batches(budget_bytes=16))
        assert sorted(r for b in batches for r in rows(b)) == sorted(got)
    with ts.open(uri, timestamp=t_written) as A:
        assert len(A.read(attrs=[])["x"]) == (9 if dups else 7)
    with ts.open(uri, timestamp=t_deleted) as A:
        assert A.read(attrs=["a"])["a"].tolist() == [0, 2, 5, 6]


def test_sparse_float_deletes_take_exact_coordinates_and_float_ranges(uri: str) -> None:
    make_sparse(uri, False, "float32")
    with ts.open(uri, "w") as A:
        A.write({"x": [0.5, 1.5, 2.5, 3.5], "y": [0.5, 0.5, 0.5, 0.5]},
                {"a": np.arange(4, dtype=np.int32), "s": ["a", "b", "c", "d"]})
        with pytest.raises(ts.QueryError, match="not exactly representable"):
            A.delete({"x": [0.1], "y": [0.5]})
        with pytest.raises(ts.QueryError, match="no silent casts"):
            A.delete({"x": np.array([0.5]), "y": np.array([0.5])})  # float64 for float32
        with pytest.raises(ts.DomainError, match="outside the domain"):
            A.delete(ranges={"x": (-0.5, 1.0)})
        A.delete({"x": np.array([0.5], np.float32), "y": [0.5]})
        A.delete(ranges={"x": (2.25, 2.75)})  # bounds between coordinates
    with ts.open(uri) as A:
        r = A.read()
        assert r["x"].tolist() == [1.5, 3.5] and r["a"].tolist() == [1, 3]


def test_sparse_float_bounds_on_integer_dimensions_take_the_integers_inside(uri: str) -> None:
    make_sparse(uri, False)
    with ts.open(uri, "w") as A:
        A.write({"x": [1, 2, 3, 4], "y": [0, 0, 0, 0]}, {"a": np.arange(4, dtype=np.int32), "s": list("abcd")})
        A.delete(ranges={"x": (1.5, 3.5)})
    with ts.open(uri) as A:
        assert A.read()["x"].tolist() == [1, 4]


# ---------------------------------------------------------------------------------------------
# Consolidation and vacuum


def test_dense_consolidation_applies_deletes_and_vacuum_removes_tombstones(uri: str) -> None:
    make_dense(uri)
    with ts.open(uri, "w") as A:
        A.delete({"r": [1, 6], "c": [1, 5]})
        A.write({"r": [2], "c": [2]}, {"a": np.array([-5], np.int32), "f": np.array([-5.0]),
                                       "n": np.ma.masked_all(1, np.int16), "s": ["u"]})
        A.delete(ranges={"r": (4, 4)})
    with ts.open(uri) as A:
        want = A[...]
        tombstones = [f.name for f in A.fragments() if f.kind == "delete"]
    assert len(tombstones) == 2
    out = ts.consolidate(uri)
    assert out is not None and out.kind == "dense" and out.dense and not out.sparse
    with ts.open(uri) as A:
        assert [f.kind for f in A.fragments()] == ["dense"]
        got = A[...]
    removed = ts.vacuum(uri).removed
    assert set(tombstones) <= set(removed) and len(removed) == 4
    assert len(fragment_dirs(uri)) == 1 and not set(tombstones) & set(fragment_dirs(uri))
    with ts.open(uri) as A:
        after = A[...]
    for g in (got, after):
        for k in want:
            np.testing.assert_array_equal(g[k], want[k])
            np.testing.assert_array_equal(np.ma.getmaskarray(g[k]), np.ma.getmaskarray(want[k]))


@pytest.mark.parametrize("dups", [False, True])
def test_sparse_consolidation_applies_deletes_and_vacuum_removes_tombstones(uri: str, dups: bool) -> None:
    make_sparse(uri, dups)
    rng = np.random.default_rng(3)
    with ts.open(uri, "w") as A:
        for w in range(3):
            pts = rng.integers(0, 11, size=(2, 12))
            if not dups:
                pts = np.unique(pts, axis=1)
            n = pts.shape[1]
            A.write({"x": pts[0], "y": pts[1]}, {"a": np.arange(n, dtype=np.int32) + 100 * w,
                                                 "s": [None if i % 4 == 0 else f"{w}.{i}" for i in range(n)]})
            A.delete({"x": pts[0][::3], "y": pts[1][::3]})
        A.delete(ranges={"x": (0, 3), "y": [(0, 2), (8, 10)]})
    with ts.open(uri) as A:
        want = rows(A.read())
        tombstones = [f.name for f in A.fragments() if f.kind == "delete"]
    assert len(tombstones) == 4
    out = ts.consolidate(uri)
    assert out is not None and out.kind == "sparse" and out.cell_count == len(want)
    with ts.open(uri) as A:
        assert rows(A.read()) == want
    assert set(tombstones) <= set(ts.vacuum(uri).removed)
    with ts.open(uri) as A:
        assert rows(A.read()) == want and [f.kind for f in A.fragments()] == ["sparse"]
    assert len(fragment_dirs(uri)) == 1 and not set(tombstones) & set(fragment_dirs(uri))


def test_sparse_consolidation_refuses_deletes_with_older_fragments_outside(uri: str) -> None:
    make_sparse(uri, False)
    with ts.open(uri, "w") as A:
        A.write({"x": [1, 2], "y": [1, 2]}, {"a": np.array([1, 2], np.int32), "s": ["a", "b"]})
        A.delete({"x": [1], "y": [1]})
        A.write({"x": [3], "y": [3]}, {"a": np.array([3], np.int32), "s": ["c"]})
    frags = ts.fragments(uri)
    before = listing(uri)
    with pytest.raises(ts.QueryError, match="start the run at the oldest fragment"):
        ts.consolidate(uri, fragments=frags[1:])
    with pytest.raises(ts.QueryError, match="oldest fragment"):
        ts.consolidate(uri, timestamp=(frags[1].t0, frags[2].t1))
    assert listing(uri) == before and ts.fragments(uri) == frags
    # Starting at the oldest fragment works.
    out = ts.consolidate(uri, fragments=frags[:2])
    assert out is not None and out.kind == "sparse" and out.cell_count == 1
    with ts.open(uri) as A:
        assert A.read()["a"].tolist() == [2, 3]


def test_dense_array_updates_and_deletes_alone_are_refused_too(uri: str) -> None:
    """On a dense array, a run of random updates and deletes makes a sparse output: refused while
    the dense fragment before it remains outside."""
    ts.from_numpy(uri, np.arange(6, dtype=np.int32).reshape(2, 3))
    with ts.open(uri, "w") as A:
        A.write({"d0": [0], "d1": [0]}, np.array([9], np.int32))
        A.delete({"d0": [1], "d1": [2]})
    frags = ts.fragments(uri)
    with pytest.raises(ts.QueryError, match="oldest fragment"):
        ts.consolidate(uri, fragments=frags[1:])
    ts.consolidate(uri)
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[...], np.array([[9, 1, 2], [3, 4, I32_MIN]], np.int32))


# ---------------------------------------------------------------------------------------------
# Model tests: random sequences of writes, point deletes and range deletes, checked after the
# sequence, at a random earlier timestamp, after consolidating everything and after vacuum.


def consolidate_a_run(uri: str, data: Any, check: Callable[[ts.Array], None]) -> None:
    """Consolidates a random run of consecutive fragments: refused when the output is sparse (no
    dense fragment in the run), the run holds deletes and older fragments remain outside it;
    otherwise the reads are unchanged."""
    frags = ts.fragments(uri)
    i = data.draw(st.integers(0, len(frags) - 1))
    run = frags[i : data.draw(st.integers(i, len(frags)))]
    if len(run) < 2:
        assert ts.consolidate(uri, fragments=run) is None
        return
    dense_output = any(x.kind == "dense" for x in run)
    if not dense_output and i > 0 and any(x.kind == "delete" for x in run):
        with pytest.raises(ts.QueryError, match="start the run at the oldest fragment"):
            ts.consolidate(uri, fragments=run)
        assert ts.fragments(uri) == frags
    else:
        out = ts.consolidate(uri, fragments=run)
        assert out is not None and out.kind == ("dense" if dense_output else "sparse")
        assert ts.fragments(uri) == frags[:i] + [out] + frags[i + len(run) :]
    with ts.open(uri) as A:
        check(A)


@st.composite
def dense_cases(draw: Any) -> Dict[str, Any]:
    ndim = draw(st.integers(1, 2))
    dims = []
    for _ in range(ndim):
        lo = draw(st.integers(-3, 3))
        n = draw(st.integers(1, 6))
        dims.append((lo, n, draw(st.integers(1, n))))
    shape = tuple(n for _, n, _ in dims)
    point = st.tuples(*[st.integers(0, n - 1) for n in shape])
    ops: List[Tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["write", "update", "delete_points", "delete_ranges"]))
        if kind == "write":
            box = []
            for n in shape:
                a = draw(st.integers(0, n - 1))
                box.append((a, draw(st.integers(a, n - 1))))
            ops.append((kind, box))
        elif kind == "update":
            ops.append((kind, draw(st.lists(point, min_size=1, max_size=8, unique=True))))
        elif kind == "delete_points":
            ops.append((kind, draw(st.lists(point, min_size=1, max_size=8))))  # repeats allowed
        else:
            ops.append((kind, draw(range_lists(shape)), draw(st.booleans())))
    return {"dims": dims, "cell_order": draw(st.sampled_from(["row-major", "col-major"])), "ops": ops}


@st.composite
def range_lists(draw: Any, shape: Sequence[int]) -> List[Optional[List[Tuple[int, int]]]]:
    """Per dimension None (the whole dimension) or 1-2 inclusive grid ranges (may overlap)."""
    out: List[Optional[List[Tuple[int, int]]]] = []
    for n in shape:
        if draw(st.integers(0, 2)) == 0:
            out.append(None)
            continue
        rs = []
        for _ in range(draw(st.integers(1, 2))):
            a = draw(st.integers(0, n - 1))
            rs.append((a, draw(st.integers(a, n - 1))))
        out.append(rs)
    return out


def _range_arg(names: Sequence[str], ranges: Sequence[Optional[List[Tuple[Any, Any]]]], by_name: bool) -> Any:
    if by_name:
        return {n: r for n, r in zip(names, ranges) if r is not None}
    return [None if r is None else (r[0] if len(r) == 1 else r) for r in ranges]


def _in_ranges(p: Sequence[int], ranges: Sequence[Optional[List[Tuple[int, int]]]]) -> bool:
    return all(r is None or any(lo <= x <= hi for lo, hi in r) for x, r in zip(p, ranges))


def _check_dense_model(A: ts.Array, a: np.ndarray, f: np.ndarray, valid: np.ndarray) -> None:
    got = A[...]
    assert isinstance(got, dict)
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(np.ma.getmaskarray(got["f"]), ~valid)
    np.testing.assert_array_equal(got["f"].data[valid], f[valid])


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(c=dense_cases(), data=st.data())
def test_dense_delete_model(c: Dict[str, Any], data: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="tessera-delete-") as tmp:
        uri = tmp + "/arr"
        dims = [ts.Dim(f"d{i}", (lo, lo + n - 1), t) for i, (lo, n, t) in enumerate(c["dims"])]
        schema = ts.ArraySchema(dims, [ts.Attr("a", "int32"), ts.Attr("f", "float64", nullable=True)],
                                cell_order=c["cell_order"])
        ts.create(uri, schema)
        names, shape, los = schema.dim_names, schema.shape, [lo for lo, _, _ in c["dims"]]
        a = np.full(shape, I32_MIN, np.int32)
        f = np.full(shape, np.nan)
        valid = np.zeros(shape, dtype=bool)
        snapshots = []  # (t1 of the op's fragment, a, f, valid)
        kinds = []
        for k, op in enumerate(c["ops"]):
            with ts.open(uri, "w") as A:
                if op[0] == "write":
                    sl = tuple(slice(x, y + 1) for x, y in op[1])
                    sub = tuple(y - x + 1 for x, y in op[1])
                    va = (np.arange(int(np.prod(sub))) + 100 * k).astype(np.int32).reshape(sub)
                    vv = va % 3 != 0
                    A[tuple(slice(lo + x, lo + y + 1) for lo, (x, y) in zip(los, op[1]))] = {
                        "a": va, "f": np.ma.MaskedArray(va.astype(np.float64) / 2, mask=~vv)}
                    a[sl], f[sl], valid[sl] = va, va / 2, vv
                    kinds.append("dense")
                elif op[0] == "update":
                    pts = op[1]
                    va = (np.arange(len(pts)) + 100 * k + 50).astype(np.int32)
                    vv = va % 2 == 0
                    coords = {n: np.array([lo + p[d] for p in pts], np.int64)
                              for d, (n, lo) in enumerate(zip(names, los))}
                    A.write(coords, {"a": va, "f": (va.astype(np.float64) / 2, vv)})
                    for i, p in enumerate(pts):
                        a[p], f[p], valid[p] = va[i], va[i] / 2, vv[i]
                    kinds.append("sparse")
                elif op[0] == "delete_points":
                    pts = op[1]
                    A.delete({n: [lo + p[d] for p in pts] for d, (n, lo) in enumerate(zip(names, los))})
                    for p in pts:
                        a[p], f[p], valid[p] = I32_MIN, np.nan, False
                    kinds.append("delete")
                else:
                    ranges, by_name = op[1], op[2]
                    shifted = [None if r is None else [(lo + x, lo + y) for x, y in r] for lo, r in zip(los, ranges)]
                    A.delete(ranges=_range_arg(names, shifted, by_name))
                    for p in np.ndindex(*shape):
                        if _in_ranges(p, ranges):
                            a[p], f[p], valid[p] = I32_MIN, np.nan, False
                    kinds.append("delete")
            snapshots.append((ts.fragments(uri)[-1].t1, a.copy(), f.copy(), valid.copy()))
        with ts.open(uri) as A:
            assert [x.kind for x in A.fragments()] == kinds
            _check_dense_model(A, a, f, valid)
        with ts.open(uri, config=INDEXED) as A:
            _check_dense_model(A, a, f, valid)
        t, sa, sf, sv = snapshots[data.draw(st.integers(0, len(snapshots) - 1))]
        with ts.open(uri, timestamp=t) as A:
            _check_dense_model(A, sa, sf, sv)
        consolidate_a_run(uri, data, lambda A: _check_dense_model(A, a, f, valid))
        if len(ts.fragments(uri)) > 1:
            assert ts.consolidate(uri) is not None
            with ts.open(uri) as A:
                assert len(A.fragments()) == 1
                _check_dense_model(A, a, f, valid)
            if data.draw(st.integers(0, 2)) == 0:  # vacuum is slow (it syncs every removal)
                ts.vacuum(uri)
                with ts.open(uri) as A:
                    _check_dense_model(A, a, f, valid)
                assert len(fragment_dirs(uri)) == 1


@st.composite
def sparse_cases(draw: Any) -> Dict[str, Any]:
    is_float = draw(st.booleans())
    ndim = draw(st.integers(1, 2))
    dims = []
    for _ in range(ndim):
        lo = draw(st.integers(0, 3))
        n = draw(st.integers(1, 7))
        dims.append((lo, n, draw(st.one_of(st.none(), st.integers(1, n)))))
    shape = tuple(n for _, n, _ in dims)
    dups = draw(st.booleans())
    point = st.tuples(*[st.integers(0, n - 1) for n in shape])
    ops: List[Tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["write", "write", "delete_points", "delete_ranges"]))
        if kind == "write":
            ops.append((kind, draw(st.lists(point, min_size=1, max_size=10, unique=not dups))))
        elif kind == "delete_points":
            ops.append((kind, draw(st.lists(point, min_size=1, max_size=6))))
        else:
            ranges = draw(range_lists(shape))
            # Float dimensions: bounds may also fall between grid points (a quarter step off).
            offs: List[Optional[List[Tuple[float, float]]]] = []
            for r, n in zip(ranges, shape):
                if r is None or not is_float:
                    offs.append(None if r is None else [(0, 0)] * len(r))
                    continue
                offs.append([(draw(st.sampled_from([0.0, -0.25] if x > 0 else [0.0])),
                              draw(st.sampled_from([0.0, 0.25] if y < n - 1 else [0.0]))) for x, y in r])
            ops.append((kind, ranges, offs, draw(st.booleans())))
    return {"is_float": is_float, "dims": dims, "dups": dups, "capacity": draw(st.sampled_from([1, 2, 4, 100])),
                "cell_order": draw(st.sampled_from(["row-major", "col-major", "hilbert"])), "ops": ops}


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(c=sparse_cases(), data=st.data())
def test_sparse_delete_model(c: Dict[str, Any], data: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="tessera-delete-") as tmp:
        uri = tmp + "/arr"
        is_float = c["is_float"]
        step = 0.5 if is_float else 1
        dtype = "float64" if is_float else "int64"

        def coord(d: int, x: float) -> Any:
            return c["dims"][d][0] + x * step

        dims = []
        for i, (lo, n, t) in enumerate(c["dims"]):
            hi = lo + (n - 1) * step
            dims.append(ts.Dim(f"d{i}", (float(lo), hi) if is_float else (lo, hi),
                               None if t is None else t * step, dtype=dtype))
        schema = ts.ArraySchema(dims, [ts.Attr("a", "int32")], sparse=True, capacity=c["capacity"],
                                cell_order=c["cell_order"], allows_duplicates=c["dups"])
        ts.create(uri, schema)
        names, nd = schema.dim_names, len(dims)
        cells: List[Tuple[Tuple[int, ...], int]] = []  # every cell that exists (grid offsets, a)
        snapshots = []
        counter = 0
        for op in c["ops"]:
            with ts.open(uri, "w") as A:
                if op[0] == "write":
                    pts = op[1]
                    va = np.arange(counter, counter + len(pts), dtype=np.int32)
                    counter += len(pts)
                    A.write({n: np.array([coord(d, p[d]) for p in pts], dtype) for d, n in enumerate(names)}, va)
                    if not c["dups"]:
                        cells = [cell for cell in cells if cell[0] not in set(pts)]
                    cells += [(p, int(v)) for p, v in zip(pts, va)]
                elif op[0] == "delete_points":
                    pts = op[1]
                    A.delete({n: [coord(d, p[d]) for p in pts] for d, n in enumerate(names)})
                    cells = [cell for cell in cells if cell[0] not in set(pts)]
                else:
                    _, ranges, offs, by_name = op
                    vals = [None if r is None or o is None
                            else [(coord(d, x) + ox, coord(d, y) + oy) for (x, y), (ox, oy) in zip(r, o)]
                            for d, (r, o) in enumerate(zip(ranges, offs))]
                    A.delete(ranges=_range_arg(names, vals, by_name))
                    cells = [cell for cell in cells if not _in_ranges(cell[0], ranges)]
            snapshots.append((ts.fragments(uri)[-1].t1, list(cells)))

        def want(cs: List[Tuple[Tuple[int, ...], int]]) -> List[Tuple[Any, ...]]:
            return sorted((tuple(coord(d, p[d]) for d in range(nd)) + (v,) for p, v in cs), key=repr)

        with ts.open(uri) as A:
            assert rows(A.read()) == want(cells)
            assert [x.kind for x in A.fragments()] == ["sparse" if op[0] == "write" else "delete" for op in c["ops"]]
        with ts.open(uri, config=INDEXED) as A:
            assert rows(A.read()) == want(cells)
        t, cs = snapshots[data.draw(st.integers(0, len(snapshots) - 1))]
        with ts.open(uri, timestamp=t) as A:
            assert rows(A.read()) == want(cs)

        def check(A: ts.Array) -> None:
            assert rows(A.read()) == want(cells)

        consolidate_a_run(uri, data, check)
        if len(ts.fragments(uri)) > 1:
            out = ts.consolidate(uri)
            assert out is not None and out.kind == "sparse"
            with ts.open(uri) as A:
                assert rows(A.read()) == want(cells)
            if data.draw(st.integers(0, 2)) == 0:  # vacuum is slow (it syncs every removal)
                ts.vacuum(uri)
                with ts.open(uri) as A:
                    assert rows(A.read()) == want(cells) and len(A.fragments()) == 1
                assert len(fragment_dirs(uri)) == 1


def test_read_points_match_numpy_with_updates_and_deletes(tmp_path: Any) -> None:
    uri = str(tmp_path / "pts")
    ts.create(uri, ts.ArraySchema(
        dims=[ts.Dim("r", domain=(1, 40), tile=16, dtype="int64"), ts.Dim("c", domain=(1, 30), tile=7, dtype="int64")],
        attrs=[ts.Attr("a", dtype="int32"), ts.Attr("f", dtype="float64")]))
    ref_a = np.arange(1200, dtype=np.int32).reshape(40, 30)
    ref_f = ref_a.astype(np.float64) / 2
    rng = np.random.default_rng(3)
    with ts.open(uri, "w") as A:
        A[1:41, 1:31] = {"a": ref_a, "f": ref_f}
        flat = rng.choice(1200, size=40, replace=False)
        rows, cols = flat // 30 + 1, flat % 30 + 1
        A.write({"r": rows, "c": cols}, {"a": np.full(40, -5, np.int32), "f": np.full(40, -5.0)})
        ref_a[rows - 1, cols - 1], ref_f[rows - 1, cols - 1] = -5, -5.0
        A.delete(ranges={"r": [(3, 4)]})
        ref_a[2:4, :], ref_f[2:4, :] = np.iinfo(np.int32).min, np.nan
    pr = rng.integers(1, 41, size=500)
    pc = rng.integers(1, 31, size=500)
    with ts.open(uri) as A:
        got = A.read_points({"r": pr, "c": pc})
        assert np.array_equal(got["a"], ref_a[pr - 1, pc - 1])
        assert np.array_equal(got["f"], ref_f[pr - 1, pc - 1], equal_nan=True)
        assert np.array_equal(A.read_points({"r": [1, 40], "c": [30, 1]}, attrs=["a"]), ref_a[[0, 39], [29, 0]])
        with pytest.raises(ts.DomainError):
            A.read_points({"r": [0], "c": [1]})
