"""Sparse arrays: schemas (float dimensions, default coordinate filters), writes (unordered and
global order, coordinates as numpy arrays or exact Python numbers), reads (``A[...]`` with
half-open slices, ``read`` with inclusive ranges of any type, every order, batches), results
(``ts.Result``, pandas, Arrow), fragments, and a model test against a dict."""

from __future__ import annotations

import io
import json
import math
import os
import pathlib
import sys
import tempfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tessera as ts


def listing(uri: str) -> List[Tuple[str, int]]:
    """Every file and folder under ``uri`` with its size (folders: -1)."""
    out = []
    for root, dirs, files in os.walk(uri):
        for d in dirs:
            out.append((os.path.relpath(os.path.join(root, d), uri), -1))
        for f in files:
            p = os.path.join(root, f)
            out.append((os.path.relpath(p, uri), os.path.getsize(p)))
    return sorted(out)


def points_schema(
    dtype: str = "int64",
    lo: Any = 1,
    hi: Any = 10,
    tile: Any = 4,
    attrs: Sequence[ts.Attr] = (),
    **kw: Any,
) -> ts.ArraySchema:
    return ts.ArraySchema(
        dims=[ts.Dim("x", (lo, hi), tile, dtype=dtype), ts.Dim("y", (lo, hi), tile, dtype=dtype)],
        attrs=list(attrs) or [ts.Attr("a", "int32")],
        sparse=True,
        **kw,
    )


def rows(r: Dict[str, np.ndarray]) -> List[Tuple[Any, ...]]:
    """A result as a list of row tuples (masked cells as None)."""
    cols = []
    for v in r.values():
        if isinstance(v, np.ma.MaskedArray):
            cols.append([None if m else x for x, m in zip(v.data.tolist(), np.ma.getmaskarray(v).tolist())])
        else:
            cols.append(v.tolist())
    return list(zip(*cols))


# ---------------------------------------------------------------------------------------------
# Schemas


def test_sparse_dims_get_the_engines_default_coordinate_filters() -> None:
    assert ts.default_coord_filters() == (ts.Delta(), ts.ByteShuffle(), ts.Zstd(level=3))
    s = ts.ArraySchema(
        dims=[ts.Dim("x", (0, 9), 5), ts.Dim("y", (0, 9), filters=[]), ts.Dim("z", (0, 9), filters=[ts.Gzip(1)])],
        attrs=[ts.Attr("a", "int32")],
        sparse=True,
    )
    d = json.loads(s.to_json())
    assert d["array_type"] == "sparse" and d["capacity"] == 10000 and d["allows_duplicates"] is False
    assert d["dims"][0]["filters"] == [{"name": "delta"}, {"name": "byteshuffle"}, {"name": "zstd", "level": 3}]
    assert "filters" not in d["dims"][1]  # explicitly unfiltered
    assert d["dims"][2]["filters"] == [{"name": "gzip", "level": 1}]
    assert "tile" not in d["dims"][1]  # sparse dimensions may leave the tile out
    assert ts.ArraySchema.from_json(s.to_json()) == s
    dense = ts.ArraySchema(dims=[ts.Dim("x", (0, 9), 5)], attrs=[ts.Attr("a", "int32")])
    assert "filters" not in json.loads(dense.to_json())["dims"][0]


def test_float_dimensions(uri: str) -> None:
    s = ts.ArraySchema(
        dims=[ts.Dim("lat", (-90, 90), tile=10, dtype="float64"), ts.Dim("lon", (-180.0, 180.0), dtype="float64")],
        attrs=[ts.Attr("t", "float32")],
        sparse=True,
        capacity=64,
        cell_order="hilbert",
        allows_duplicates=True,
    )
    lat = s.dims[0]
    assert lat.domain == (-90.0, 90.0) and isinstance(lat.domain[0], float) and lat.tile == 10.0 and lat.is_float
    d = json.loads(s.to_json())
    assert d["dims"][0]["domain"] == [-90.0, 90.0] and d["dims"][0]["tile"] == 10.0
    assert d["cell_order"] == "hilbert" and d["capacity"] == 64 and d["allows_duplicates"] is True
    with pytest.raises(TypeError, match="float"):
        _ = lat.size
    with pytest.raises(TypeError, match="float"):
        _ = s.shape
    ts.create(uri, s)
    with ts.open(uri) as A:
        assert A.schema == s and A.sparse and A.domain == ((-90.0, 90.0), (-180.0, 180.0))
    assert "capacity=64, allows_duplicates=True" in repr(s)


@pytest.mark.parametrize(
    "make, exc, words",
    [
        (lambda: ts.Dim("x", (0.5, 3)), ts.SchemaError, "not an integer"),
        (lambda: ts.Dim("x", (0, 3), tile=1.5), ts.SchemaError, "not an integer"),
        (lambda: ts.Dim("x", ("a", 3), dtype="float64"), ts.SchemaError, "not a number"),
        (lambda: ts.Dim("x", (0, 3), filters=["zstd"]), ts.SchemaError, "not a filter"),
        (lambda: ts.ArraySchema([ts.Dim("x", (0, 1), 1, dtype="float64")], [ts.Attr("a", "i4")]), ts.SchemaError,
         "integer dimensions"),
        (lambda: ts.ArraySchema([ts.Dim("x", (0, 9), 1)], [ts.Attr("a", "i4")], cell_order="peano"),
         ts.SchemaError, "hilbert or z"),
        (lambda: points_schema(capacity=0), ts.SchemaError, "capacity"),
        (lambda: points_schema("float64", 0.0, math.inf, None), ts.SchemaError, "finite"),
        (lambda: points_schema("float64", 0.0, 1.0, -0.5), ts.SchemaError, "positive"),
        (lambda: ts.ArraySchema([ts.Dim(n, (0, 2**62), None) for n in "xyz"], [ts.Attr("a", "i4")], sparse=True,
                                cell_order="z"), ts.SchemaError, "more than 128"),
    ],
)
def test_invalid_sparse_schemas(make: Callable[[], Any], exc: type, words: str) -> None:
    with pytest.raises(exc, match=words):
        make()


# ---------------------------------------------------------------------------------------------
# Writes and reads


def test_write_read_round_trip_and_newest_wins(uri: str) -> None:
    ts.create(uri, points_schema(attrs=[ts.Attr("a", "int32"), ts.Attr("s", str, nullable=True)]))
    with ts.open(uri, "w") as A:
        name = A.write({"x": np.array([3, 1, 2]), "y": np.array([7, 1, 9])},
                       {"a": np.array([30, 10, 20], np.int32), "s": ["c", None, "b"]})
        assert name.startswith("__")
        A.write({"y": [1, 5], "x": [1, 10]}, {"a": np.array([11, 105], np.int32), "s": np.array(["x", "é"], object)})
    with ts.open(uri) as A:
        r = A[:, :]
        assert isinstance(r, ts.Result) and list(r) == ["x", "y", "a", "s"]
        assert r["x"].dtype == np.int64 and r["a"].dtype == np.int32
        assert rows(r) == [(1, 1, 11, "x"), (2, 9, 20, "b"), (3, 7, 30, "c"), (10, 5, 105, "é")]
        assert r.cells == 4
        assert rows(A[1:3, :]) == [(1, 1, 11, "x"), (2, 9, 20, "b")]  # half-open
        assert rows(A[3, 7]) == [(3, 7, 30, "c")]
        assert rows(A[..., 5:9]) == [(3, 7, 30, "c"), (10, 5, 105, "é")]
        assert rows(A.read({"x": (2, 3)}, attrs=["a"])) == [(2, 9, 20), (3, 7, 30)]  # inclusive
        assert rows(A.read([None, [(1, 1), (9, 9)]], attrs=["s"], order="F")) == [(1, 1, "x"), (2, 9, "b")]
        assert rows(A.read(attrs=[])) == [(1, 1), (2, 9), (3, 7), (10, 5)]  # coordinates only
        # float bounds on an integer dimension take the integers inside
        assert rows(A.read({"x": (1.5, 3.5), "y": (1, 10)}, attrs=["a"])) == [(2, 9, 20), (3, 7, 30)]
        assert rows(A.read({"x": (2.2, 2.8)}, attrs=["a"])) == []
        # ranges beyond the domain are an error, as for dense arrays
        with pytest.raises(ts.DomainError, match="outside the domain"):
            A.read({"x": (-100, 100)})
        assert A.nonempty_domain() == ((1, 10), (1, 9))
        assert all(isinstance(v, int) for r_ in A.nonempty_domain() for v in r_)


def test_setitem_and_scalars(uri: str) -> None:
    ts.create(uri, ts.ArraySchema([ts.Dim("x", (0, 99), 10)], [ts.Attr("v", "float64")], sparse=True))
    with ts.open(uri, "w") as A:
        A[np.array([5, 3, 50])] = np.array([0.5, 0.3, 5.0])
        A[7] = 0.7  # one cell: a scalar coordinate and a scalar value
        A[[8, 9]] = np.float64(1.5)  # a scalar broadcast over the cells
    with ts.open(uri) as A:
        assert rows(A[:]) == [(3, 0.3), (5, 0.5), (7, 0.7), (8, 1.5), (9, 1.5), (50, 5.0)]
        assert rows(A[3:6]) == [(3, 0.3), (5, 0.5)]


def test_orders_of_results(uri: str) -> None:
    ts.create(uri, points_schema(lo=0, hi=7, tile=4, cell_order="row-major", tile_order="row-major"))
    pts = [(x, y) for x in range(8) for y in range(8) if (x * 3 + y) % 4 == 0]
    xs, ys = (np.array(c, dtype=np.int64) for c in zip(*pts))
    with ts.open(uri, "w") as A:
        A[xs, ys] = np.arange(len(pts), dtype=np.int32)
    with ts.open(uri) as A:
        c = rows(A.read(attrs=[], order="C"))
        f = rows(A.read(attrs=[], order="F"))
        g = rows(A.read(attrs=[], order="G"))
        u = rows(A.read(attrs=[], order="U"))
    assert c == sorted(pts)
    assert f == sorted(pts, key=lambda p: (p[1], p[0]))
    assert g == sorted(pts, key=lambda p: (p[0] // 4, p[1] // 4, p[0], p[1]))
    assert sorted(u) == sorted(pts)


def test_global_order_writes(uri: str) -> None:
    ts.create(uri, points_schema(lo=0, hi=7, tile=4, capacity=3))
    pts = sorted([(0, 5), (1, 1), (5, 0), (3, 3), (6, 7), (2, 6)], key=lambda p: (p[0] // 4, p[1] // 4, p))
    xs, ys = zip(*pts)
    with ts.open(uri, "w") as A:
        A.write({"x": list(xs), "y": list(ys)}, np.arange(6, dtype=np.int32), order="G")
    with ts.open(uri) as A:
        assert rows(A.read(order="G")) == [(x, y, i) for i, (x, y) in enumerate(pts)]
        (f,) = A.fragments()
        assert f.sparse and not f.dense and f.cell_count == 6 and f.tile_count == 2


def test_every_attribute_kind(uri: str) -> None:
    attrs = [
        ts.Attr("i8", "int8", nullable=True),
        ts.Attr("c", np.complex64),
        ts.Attr("m", "(3,)f4", filters=[ts.ByteShuffle(), ts.Lz4()]),
        ts.Attr("b", bytes, filters=[ts.Gzip()]),
        ts.Attr("fb", "S3"),
        ts.Attr("r", "int16", var=True, nullable=True),
        ts.Attr("s", str),
    ]
    ts.create(uri, ts.ArraySchema([ts.Dim("k", (0, 2**64 - 2), dtype="uint64")], attrs, sparse=True, capacity=2))
    ks = [2**64 - 2, 0, 2**63]
    vals = {
        "i8": np.ma.MaskedArray(np.array([1, -2, 3], np.int8), mask=[False, True, False]),
        "c": np.array([1 + 2j, 3j, -1], np.complex64),
        "m": np.arange(9, dtype=np.float32).reshape(3, 3),
        "b": [b"\x00\xff", b"", b"abc"],
        "fb": np.array([b"abc", b"de", b"f"], dtype="S3"),
        "r": [np.array([1, 2], np.int16), None, np.array([], np.int16)],
        "s": ["zürich", "", "x" * 1000],
    }
    with ts.open(uri, "w") as A:
        A.write({"k": ks}, vals)
    with ts.open(uri) as A:
        r = A[:]
    order = np.argsort(np.array(ks, dtype=np.uint64))
    assert r["k"].dtype == np.uint64 and r["k"].tolist() == sorted(ks)
    assert r["i8"].mask.tolist() == [True, False, False] and r["i8"].data[1:].tolist() == [3, 1]
    np.testing.assert_array_equal(r["c"], vals["c"][order])
    np.testing.assert_array_equal(r["m"], vals["m"][order])
    assert r["b"].tolist() == [vals["b"][i] for i in order]
    assert r["fb"].tolist() == [b"de", b"f", b"abc"]
    assert r["r"].mask.tolist() == [True, False, False]
    assert r["r"][1].tolist() == [] and r["r"][2].tolist() == [1, 2]
    assert r["s"].tolist() == ["", "x" * 1000, "zürich"]


def test_float_coordinates_and_nonempty_domain(uri: str) -> None:
    ts.create(uri, points_schema("float32", -1.0, 1.0, 0.25, capacity=2))
    xs = np.array([0.1, -0.75, 1.0, -1.0], np.float32)
    ys = np.array([0.5, 0.0, -0.125, 0.3], np.float32)
    with ts.open(uri, "w") as A:
        A.write({"x": xs, "y": ys}, np.arange(4, dtype=np.int32))
        A.write({"x": [0, 1], "y": [0.5, 0.25]}, np.array([7, 8], np.int32))  # exact Python numbers
    with ts.open(uri) as A:
        nd = A.nonempty_domain()
        assert nd == ((-1.0, 1.0), (float(np.float32(-0.125)), 0.5))
        assert all(isinstance(v, float) for r_ in nd for v in r_)
        r = A.read({"x": [(-1.0, -0.75), (1.0, 1.0)]}, order="C")
        assert r["x"].dtype == np.float32
        assert rows(r) == [(-1.0, np.float32(0.3), 3), (-0.75, 0.0, 1), (1.0, np.float32(-0.125), 2), (1.0, 0.25, 8)]
        assert rows(A.read({"x": (0.0, 0.0)})) == [(0.0, 0.5, 7)]
        assert len(A.read({"x": (0.05, 0.15)})["x"]) == 1  # 0.1 as float32
        assert rows(A[0.0, :]) == [(0.0, 0.5, 7)]  # an exact coordinate on a float dimension
        frags = ts.fragments(uri)
        assert [f.nonempty_domain for f in frags] == [
            ((-1.0, 1.0), (float(np.float32(-0.125)), 0.5)),
            ((0.0, 1.0), (0.25, 0.5)),
        ]
        with pytest.raises(ts.QueryError, match="read"):
            A[0.0:1.0, :]


def test_duplicates_allowed_keep_every_cell(uri: str) -> None:
    ts.create(uri, points_schema(allows_duplicates=True))
    with ts.open(uri, "w") as A:
        A[[1, 1], [2, 2]] = np.array([1, 2], np.int32)
        A[[1], [2]] = np.array([3], np.int32)
    with ts.open(uri) as A:
        assert sorted(rows(A[:, :])) == [(1, 2, 1), (1, 2, 2), (1, 2, 3)]


def test_time_travel_and_fragments(uri: str) -> None:
    ts.create(uri, points_schema())
    with ts.open(uri, "w") as A:
        A[[1, 2], [1, 2]] = np.array([1, 2], np.int32)
        A[[2, 3], [2, 3]] = np.array([20, 30], np.int32)
    frags = ts.fragments(uri)
    assert [f.cell_count for f in frags] == [2, 2] and all(f.sparse for f in frags)
    assert frags[0].nonempty_domain == ((1, 2), (1, 2)) and frags[1].nonempty_domain == ((2, 3), (2, 3))
    assert all(f.stored_bytes > 0 and f.unfiltered_bytes > 0 for f in frags)
    assert frags[0].t1 < frags[1].t0
    with ts.open(uri, timestamp=frags[0].t1) as A:
        assert rows(A[:, :]) == [(1, 1, 1), (2, 2, 2)]
        assert A.fragments() == frags[:1]
    with ts.open(uri) as A:
        assert rows(A[:, :]) == [(1, 1, 1), (2, 2, 20), (3, 3, 30)]


def test_iter_batches_equal_the_whole_read(uri: str) -> None:
    ts.create(uri, points_schema(lo=0, hi=999, tile=100, capacity=50,
                                 attrs=[ts.Attr("a", "int32"), ts.Attr("s", str, nullable=True)]))
    rng = np.random.default_rng(1)
    flat = rng.choice(1000 * 1000, size=2000, replace=False)
    xs, ys = flat // 1000, flat % 1000
    vals = rng.integers(0, 1000, size=2000, dtype=np.int32)
    s = np.array([None if v % 7 == 0 else str(v) for v in vals.tolist()], dtype=object)
    with ts.open(uri, "w") as A:
        A[xs, ys] = {"a": vals, "s": s}
    with ts.open(uri) as A:
        for order in "CFGU":
            whole = A.read({"x": (100, 899)}, order=order)
            batches = list(A.iter_batches({"x": (100, 899)}, budget_bytes=1000, order=order))
            assert len(batches) > 10 and all(isinstance(b, ts.Result) and b.cells > 0 for b in batches)
            assert sum(b.cells for b in batches) == whole.cells
            got = [row for b in batches for row in rows(b)]
            if order == "U":
                assert sorted(got, key=repr) == sorted(rows(whole), key=repr)
            else:
                assert got == rows(whole)
        sliced = list(A.iter_batches((slice(0, 10), slice(None)), attrs=["a"], budget_bytes=64))
        assert [r_ for b in sliced for r_ in rows(b)] == rows(A.read({"x": (0, 9)}, attrs=["a"]))


# ---------------------------------------------------------------------------------------------
# Results: pandas and Arrow


def _small_result(uri: str) -> ts.Result:
    ts.create(uri, ts.ArraySchema(
        [ts.Dim("x", (0.0, 10.0), dtype="float64")],
        [ts.Attr("a", "int32", nullable=True), ts.Attr("s", str, nullable=True), ts.Attr("b", bytes),
         ts.Attr("m", "(2,)u2"), ts.Attr("r", "float32", var=True), ts.Attr("f", "float64", nullable=True)],
        sparse=True))
    with ts.open(uri, "w") as A:
        A.write({"x": [1.5, 0.5, 2.5]}, {
            "a": np.ma.MaskedArray(np.array([1, 2, 3], np.int32), mask=[False, True, False]),
            "s": ["one", "two", None], "b": [b"1", b"", b"\x00"],
            "m": np.array([[1, 2], [3, 4], [5, 6]], np.uint16),
            "r": [np.array([1.0], np.float32), np.array([], np.float32), np.array([2.0, 3.0], np.float32)],
            "f": np.ma.MaskedArray(np.array([0.5, 1.5, 2.5]), mask=[True, False, False]),
        })
    with ts.open(uri) as A:
        r = A[:]
    assert isinstance(r, ts.Result)
    return r


def test_to_pandas(uri: str) -> None:
    pd = pytest.importorskip("pandas")
    df = _small_result(uri).to_pandas()
    assert list(df.columns) == ["x", "a", "s", "b", "m", "r", "f"]
    assert df["x"].tolist() == [0.5, 1.5, 2.5]
    assert df["a"].isna().tolist() == [True, False, False] and df["a"].iloc[1] == 1
    assert str(df["a"].dtype) == "Int32"
    assert df["s"].tolist()[:2] == ["two", "one"] and df["s"].isna().tolist() == [False, False, True]
    assert df["b"].tolist() == [b"", b"1", b"\x00"]
    assert [list(v) for v in df["m"]] == [[3, 4], [1, 2], [5, 6]]
    assert [list(v) for v in df["r"]] == [[], [1.0], [2.0, 3.0]]
    assert df["f"].isna().tolist() == [False, True, False]
    assert isinstance(df, pd.DataFrame)


def test_to_pandas_shares_the_columns_without_nulls(uri: str) -> None:
    pytest.importorskip("pandas")
    ts.create(uri, ts.ArraySchema([ts.Dim("x", (0.0, 10.0), dtype="float64")],
                                  [ts.Attr("a", "int32"), ts.Attr("f", "float64")], sparse=True))
    with ts.open(uri, "w") as A:
        A.write({"x": [2.5, 0.5, 1.5]}, {"a": np.array([7, 8, 9], np.int32), "f": np.array([0.25, 0.5, 0.75])})
    with ts.open(uri) as A:
        r = A.read(attrs=["a", "f"])
    df = r.to_pandas()
    assert df["x"].tolist() == [0.5, 1.5, 2.5] and df["a"].tolist() == [8, 9, 7]
    for name in ("x", "a", "f"):  # no copy into a 2-D block per dtype
        assert np.shares_memory(df[name].to_numpy(), r[name]), name


def test_to_arrow(uri: str) -> None:
    pa = pytest.importorskip("pyarrow")
    t = _small_result(uri).to_arrow()
    assert t.column_names == ["x", "a", "s", "b", "m", "r", "f"]
    assert t.schema.field("s").type == pa.string() and t.schema.field("b").type == pa.binary()
    assert t.schema.field("a").type == pa.int32() and t.schema.field("m").type == pa.list_(pa.uint16(), 2)
    assert t.schema.field("r").type == pa.list_(pa.float32())
    assert t.column("a").to_pylist() == [None, 1, 3]
    assert t.column("s").to_pylist() == ["two", "one", None]
    assert t.column("m").to_pylist() == [[3, 4], [1, 2], [5, 6]]
    assert t.column("r").to_pylist() == [[], [1.0], [2.0, 3.0]]
    assert t.column("f").to_pylist() == [1.5, None, 2.5]


def test_conversions_without_pandas_or_pyarrow_say_what_is_missing(
    uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _small_result(uri)
    monkeypatch.setitem(sys.modules, "pandas", None)  # makes `import pandas` fail
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"to_pandas\(\) needs pandas.*pip install pandas"):
        r.to_pandas()
    with pytest.raises(ImportError, match=r"to_arrow\(\) needs pyarrow"):
        r.to_arrow()


# ---------------------------------------------------------------------------------------------
# Bad input: the error names the problem, and nothing changes on disk


@pytest.fixture
def filled(tmp_path: pathlib.Path) -> Dict[str, str]:
    """An integer and a float sparse array, each holding one fragment."""
    out = {}
    for kind, schema, xs in [
        ("int", points_schema(attrs=[ts.Attr("a", "int32"), ts.Attr("s", str)]), [1, 2]),
        ("float", points_schema("float32", 0.0, 10.0, 2.5, attrs=[ts.Attr("a", "int32"), ts.Attr("s", str)]),
         [0.5, 1.0]),
    ]:
        uri = str(tmp_path / kind)
        ts.create(uri, schema)
        with ts.open(uri, "w") as A:
            A.write({"x": xs, "y": xs}, {"a": np.array([1, 2], np.int32), "s": ["p", "q"]})
        out[kind] = uri
    return out


I32 = np.int32
GOOD = {"a": np.array([1, 2, 3], I32), "s": ["a", "b", "c"]}
BAD_WRITES: List[Tuple[str, str, Callable[[ts.Array], Any], type, Sequence[str]]] = [
    ("int", "out of domain", lambda A: A.write({"x": np.array([1, 11, 12]), "y": np.array([1, 1, 1])}, GOOD),
     ts.DomainError, ["11", "cell 1", "outside the domain", "x"]),
    ("float", "NaN", lambda A: A.write({"x": np.array([1, 2, np.nan], np.float32), "y": [1, 2, 3]}, GOOD),
     ts.DomainError, ["NaN", "cell 2", "finite"]),
    ("float", "inf", lambda A: A.write({"x": [1.0, 2.0, 3.0], "y": [1.0, math.inf, 3.0]}, GOOD),
     ts.DomainError, ["inf", "cell 1"]),
    ("float", "out of float domain", lambda A: A.write({"x": [1.0, 2.0, 10.5], "y": [1.0, 2.0, 3.0]}, GOOD),
     ts.DomainError, ["10.5", "cell 2", "outside the domain"]),
    ("int", "lengths", lambda A: A.write({"x": np.array([1, 2, 3]), "y": np.array([1, 2])}, GOOD),
     ts.QueryError, ["equal lengths"]),
    ("int", "duplicates", lambda A: A.write({"x": np.array([1, 2, 1]), "y": np.array([5, 5, 5])}, GOOD),
     ts.QueryError, ["duplicate coordinates (1, 5)", "cells 0 and 2"]),
    ("int", "not global", lambda A: A.write({"x": np.array([9, 1, 2]), "y": np.array([9, 1, 2])}, GOOD, order="G"),
     ts.QueryError, ["not in global order"]),
    ("int", "dtype", lambda A: A.write({"x": np.array([1, 2, 3], I32), "y": np.array([1, 2, 3])}, GOOD),
     ts.QueryError, ["dimension x", "int32", "int64"]),
    ("int", "float on int", lambda A: A.write({"x": [1, 2.0, 3], "y": [1, 2, 3]}, GOOD),
     ts.QueryError, ["2.0", "cell 1", "not an integer"]),
    ("int", "too big", lambda A: A.write({"x": [1, 2, 2**63], "y": [1, 2, 3]}, GOOD),
     ts.QueryError, ["does not fit int64"]),
    ("float", "inexact", lambda A: A.write({"x": [1, 0.1, 3], "y": [1, 2, 3]}, GOOD),
     ts.QueryError, ["0.1", "cell 1", "float32"]),
    ("float", "inexact int", lambda A: A.write({"x": [1, 2**24 + 1, 3], "y": [1, 2, 3]}, GOOD),
     ts.QueryError, ["16777217", "float32"]),
    ("int", "not numbers", lambda A: A.write({"x": ["1", "2", "3"], "y": [1, 2, 3]}, GOOD),
     ts.QueryError, ["not a number"]),
    ("int", "bools", lambda A: A.write({"x": [True, False, True], "y": [1, 2, 3]}, GOOD),
     ts.QueryError, ["not a number"]),
    ("int", "2-D", lambda A: A.write({"x": np.ones((3, 1), np.int64), "y": np.ones(3, np.int64)}, GOOD),
     ts.QueryError, ["1-D"]),
    ("int", "missing dim", lambda A: A.write({"x": [1, 2, 3]}, GOOD),
     ts.QueryError, ["coordinates of dimension y are missing"]),
    ("int", "no coords", lambda A: A.write({}, GOOD), ts.QueryError, ["missing"]),
    ("int", "unknown dim", lambda A: A.write({"x": [1, 2, 3], "y": [1, 2, 3], "z": [1, 2, 3]}, GOOD),
     ts.DomainError, ["unknown dimension 'z'"]),
    ("int", "missing attr", lambda A: A.write({"x": [1, 2, 3], "y": [1, 2, 3]}, {"a": GOOD["a"]}),
     ts.QueryError, ["missing: s"]),
    ("int", "unknown attr", lambda A: A.write({"x": [1, 2, 3], "y": [1, 2, 3]}, dict(GOOD, b=GOOD["a"])),
     ts.QueryError, ["unknown attribute 'b'"]),
    ("int", "one value short", lambda A: A.write({"x": [1, 2, 3], "y": [1, 2, 3]}, dict(GOOD, a=GOOD["a"][:2])),
     ts.QueryError, ["attribute a", "2 values for 3 cells"]),
    ("int", "attr dtype", lambda A: A.write({"x": [1, 2, 3], "y": [1, 2, 3]}, dict(GOOD, a=GOOD["a"] * 1.0)),
     ts.QueryError, ["attribute a", "float64"]),
    ("int", "null in non-nullable", lambda A: A.write({"x": [1, 2, 3], "y": [1, 2, 3]}, dict(GOOD, s=["a", None, "c"])),
     ts.QueryError, ["attribute s", "not nullable"]),
    ("int", "no cells", lambda A: A.write({"x": [], "y": []}, {"a": np.array([], I32), "s": []}),
     ts.QueryError, ["at least one cell"]),
    ("int", "bad order", lambda A: A.write({"x": [1, 2, 3], "y": [1, 2, 3]}, GOOD, order="C"),
     ts.QueryError, ["'U'", "'G'"]),
    ("int", "not a dict", lambda A: A.write([[1, 2, 3], [1, 2, 3]], GOOD), ts.QueryError, ["dict"]),
    ("int", "values not a dict", lambda A: A.write({"x": [1], "y": [1]}, np.array([1], I32)),
     ts.QueryError, ["2 attributes"]),
    ("int", "setitem slices", lambda A: A.__setitem__((slice(1, 3), slice(1, 3)), GOOD),
     ts.QueryError, ["coordinates"]),
]


@pytest.mark.parametrize("kind, what, write, exc, words", BAD_WRITES, ids=[w[1] for w in BAD_WRITES])
def test_bad_sparse_writes_change_nothing(
    filled: Dict[str, str], kind: str, what: str, write: Callable[[ts.Array], Any], exc: type, words: Sequence[str]
) -> None:
    uri = filled[kind]
    before = listing(uri)
    with ts.open(uri, "w") as A, pytest.raises(exc) as info:
        write(A)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    assert listing(uri) == before, "a rejected sparse write changed the array folder"
    with ts.open(uri) as A:
        assert len(A.fragments()) == 1 and A[:, :].cells == 2


def test_writes_need_write_mode(filled: Dict[str, str]) -> None:
    before = listing(filled["int"])
    with ts.open(filled["int"]) as A, pytest.raises(ts.QueryError, match="open for read"):
        A.write({"x": [3], "y": [3]}, {"a": np.array([3], I32), "s": ["z"]})
    assert listing(filled["int"]) == before


@pytest.mark.parametrize(
    "read, exc, words",
    [
        (lambda A: A.read({"x": (5, 2)}), ts.DomainError, "reversed"),
        (lambda A: A.read({"x": (math.nan, 2)}), ts.DomainError, "NaN"),
        (lambda A: A.read({"z": (1, 2)}), ts.DomainError, "unknown dimension 'z'"),
        (lambda A: A.read({"x": []}), ts.DomainError, "no range"),
        (lambda A: A.read({"x": ("a", "b")}), ts.DomainError, r"dimension x: range bound 'a' is not a number"),
        (lambda A: A.read([None, None, None]), ts.DomainError, "3 dimensions given"),
        (lambda A: A.read(attrs=["nope"]), ts.QueryError, "unknown attribute 'nope'"),
        (lambda A: A.read(order="Z"), ts.QueryError, "'C', 'F', 'G' or 'U'"),
        (lambda A: A[1:5:2, :], ts.QueryError, "step"),
        (lambda A: A[1.5, :], TypeError, "index must be an int"),
        (lambda A: A["a", :], TypeError, "index must be a number"),
        (lambda A: A[1, 2, 3], ts.DomainError, "3 dimensions given"),
        (lambda A: list(A.iter_batches(order="X")), ts.QueryError, "order"),
    ],
)
def test_bad_sparse_reads(filled: Dict[str, str], read: Callable[[ts.Array], Any], exc: type, words: str) -> None:
    with ts.open(filled["int"]) as A, pytest.raises(exc, match=words):
        read(A)


def test_dense_reads_take_ranges_by_name_too(uri: str) -> None:
    ts.from_numpy(uri, np.arange(12, dtype=np.int32).reshape(3, 4))
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A.read({"d1": (1, 2)}), A.read([None, (1, 2)]))
        with pytest.raises(ts.DomainError, match="unknown dimension"):
            A.read({"x": (1, 2)})
        with pytest.raises(ts.QueryError, match="'C', 'F' or 'G'"):
            A.read(order="U")


# ---------------------------------------------------------------------------------------------
# The model test: random schemas and writes against a dict (or a list, when duplicates are
# allowed); random reads in random orders.

INT_DTYPES = ["int64", "int32", "uint16"]
FLOAT_DTYPES = ["float64", "float32"]


@st.composite
def cases(draw: Any) -> Dict[str, Any]:
    is_float = draw(st.booleans())
    dtype = draw(st.sampled_from(FLOAT_DTYPES if is_float else INT_DTYPES))
    ndim = draw(st.integers(1, 3))
    dims = []
    for _ in range(ndim):
        lo = draw(st.integers(-5, 5))
        if dtype.startswith("uint"):
            lo = abs(lo)
        size = draw(st.integers(1, 10))
        tile = draw(st.one_of(st.none(), st.integers(1, size)))
        dims.append((lo, size, tile))
    cell_order = draw(st.sampled_from(["row-major", "col-major", "hilbert"]))
    tile_order = draw(st.sampled_from(["row-major", "col-major"]))
    capacity = draw(st.sampled_from([1, 2, 3, 5, 7, 10000]))
    dups = draw(st.integers(0, 4)) == 0
    with_s = draw(st.booleans())
    point = st.tuples(*[st.integers(0, size - 1) for _, size, _ in dims])
    writes = []
    for _ in range(draw(st.integers(1, 4))):
        pts = draw(st.lists(point, min_size=1, max_size=20, unique=not dups))
        order = draw(st.sampled_from(["U", "G"] if cell_order != "hilbert" else ["U"]))
        writes.append((pts, order, draw(st.booleans())))
    reads = []
    for _ in range(draw(st.integers(1, 4))):
        ranges = []
        for _, size, _ in dims:
            if draw(st.booleans()):
                ranges.append(None)
                continue
            rs = []
            for _ in range(draw(st.integers(1, 2))):
                a, b = sorted((draw(st.integers(0, size - 1)), draw(st.integers(0, size - 1))))
                if is_float:  # bounds between grid points too (inside the domain, lo <= hi)
                    da = draw(st.sampled_from([0.0] + ([-0.25] if a > 0 else []) + ([0.25] if a < b else [])))
                    db = draw(st.sampled_from([0.0] + ([0.25] if b < size - 1 else []) + ([-0.25] if a < b else [])))
                    rs.append((a + da, b + db))
                else:
                    rs.append((a, b))
            ranges.append(rs)
        order = draw(st.sampled_from(["C", "F", "G", "U"]))
        attrs = draw(st.sampled_from([None, ["a"], []] + ([["s"], ["s", "a"]] if with_s else [])))
        by_name = draw(st.booleans())
        reads.append((ranges, order, attrs, by_name))
    return {"is_float": is_float, "dtype": dtype, "dims": dims, "cell_order": cell_order, "tile_order": tile_order,
                "capacity": capacity, "dups": dups, "with_s": with_s, "writes": writes, "reads": reads}


def _value(c: Dict[str, Any], d: int, off: float) -> Any:
    lo = c["dims"][d][0]
    return lo + off * 0.5 if c["is_float"] else lo + off


def _global_key(c: Dict[str, Any], p: Sequence[int]) -> Tuple[int, ...]:
    """The global order of row/col-major cell orders, on grid offsets (a float dimension's tile
    of ``t`` grid steps is ``t * 0.5`` wide)."""
    tiles = [0 if t is None else p[d] // t for d, (_, _, t) in enumerate(c["dims"])]
    k = list(reversed(tiles)) if c["tile_order"] == "col-major" else tiles
    k += list(reversed(p)) if c["cell_order"] == "col-major" else list(p)
    return tuple(k)


def _schema(c: Dict[str, Any]) -> ts.ArraySchema:
    dims = []
    for i, (lo, size, tile) in enumerate(c["dims"]):
        if c["is_float"]:
            dims.append(ts.Dim(f"d{i}", (float(lo), lo + (size - 1) * 0.5), None if tile is None else tile * 0.5,
                               dtype=c["dtype"]))
        else:
            dims.append(ts.Dim(f"d{i}", (lo, lo + size - 1), tile, dtype=c["dtype"]))
    attrs = [ts.Attr("a", "int32", filters=[ts.Delta(), ts.Zstd(level=1)])]
    if c["with_s"]:
        attrs.append(ts.Attr("s", str, nullable=True))
    return ts.ArraySchema(dims, attrs, sparse=True, cell_order=c["cell_order"], tile_order=c["tile_order"],
                          capacity=c["capacity"], allows_duplicates=c["dups"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(c=cases())
def test_sparse_model(c: Dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="tessera-sparse-") as tmp:
        uri = tmp + "/arr"
        schema = _schema(c)
        ts.create(uri, schema)
        names = schema.dim_names
        ndim = len(names)
        model: Dict[Tuple[int, ...], Tuple[int, Optional[str]]] = {}  # newest cell per point
        cells: List[Tuple[Tuple[int, ...], Tuple[int, Optional[str]]]] = []  # every cell (duplicates)
        for w, (pts, order, use_setitem) in enumerate(c["writes"]):
            if order == "G":
                pts = sorted(pts, key=lambda p: _global_key(c, p))
            coords = {n: np.array([_value(c, d, p[d]) for p in pts], dtype=schema.dims[d].dtype)
                      for d, n in enumerate(names)}
            a = np.arange(len(pts), dtype=np.int32) + 1000 * w
            s = [None if (i + w) % 3 == 0 else f"w{w}c{i}" for i in range(len(pts))]
            vals: Dict[str, Any] = {"a": a, "s": s} if c["with_s"] else {"a": a}
            with ts.open(uri, "w") as A:
                if use_setitem and order == "U":
                    A[tuple(coords[n] for n in names)] = vals if c["with_s"] else a
                else:
                    A.write(coords, vals, order=order)
            for i, p in enumerate(pts):
                cell = (int(a[i]), s[i])
                model[p] = cell
                cells.append((p, cell))
        expected_cells = cells if c["dups"] else list(model.items())

        with ts.open(uri) as A:
            frags = A.fragments()
            assert [f.cell_count for f in frags] == [len(w[0]) for w in c["writes"]]
            assert all(f.sparse for f in frags)
            every = [p for w in c["writes"] for p in w[0]]
            assert A.nonempty_domain() == tuple(
                (_value(c, d, min(p[d] for p in every)), _value(c, d, max(p[d] for p in every))) for d in range(ndim)
            )
            for ranges, order, attrs, by_name in c["reads"]:
                vr = [None if r is None else [(_value(c, d, lo), _value(c, d, hi)) for lo, hi in r]
                      for d, r in enumerate(ranges)]
                arg: Any = {n: r for n, r in zip(names, vr) if r is not None} if by_name else vr
                got = A.read(arg, attrs=attrs, order=order)
                assert isinstance(got, ts.Result)
                want_attrs = ["a", "s"][: 2 if c["with_s"] else 1] if attrs is None else attrs
                assert list(got) == list(names) + want_attrs

                def inside(p: Tuple[int, ...], ranges: Any = ranges) -> bool:
                    return all(r is None or any(lo <= p[d] <= hi for lo, hi in r) for d, r in enumerate(ranges))

                def row(
                    p: Tuple[int, ...], cell: Tuple[int, Optional[str]], want_attrs: Sequence[str] = want_attrs
                ) -> Tuple[Any, ...]:
                    extra = {"a": cell[0], "s": cell[1]}
                    return tuple(_value(c, d, p[d]) for d in range(ndim)) + tuple(extra[n] for n in want_attrs)

                want = [row(p, cell) for p, cell in expected_cells if inside(p)]
                got_rows = rows(got)
                assert sorted(got_rows, key=repr) == sorted(want, key=repr)
                offs = [tuple(round((r[d] - c["dims"][d][0]) * (2 if c["is_float"] else 1)) for d in range(ndim))
                        for r in got_rows]
                if order == "C":
                    assert offs == sorted(offs)
                elif order == "F":
                    assert offs == sorted(offs, key=lambda p: p[::-1])
                elif order == "G" and c["cell_order"] != "hilbert":
                    assert offs == sorted(offs, key=lambda p: _global_key(c, p))
                if got_rows:
                    parts = list(A.iter_batches(arg, attrs=attrs, order=order, budget_bytes=40))
                    assert all(b.cells > 0 for b in parts) and sum(b.cells for b in parts) == len(got_rows)
                    flat = [r_ for b in parts for r_ in rows(b)]
                    if order == "U" or c["dups"]:  # the order is free (among equal coordinates)
                        assert sorted(flat, key=repr) == sorted(got_rows, key=repr)
                    else:
                        assert flat == got_rows
            if not c["is_float"]:
                # A[...] with half-open slices equals read with the inclusive ranges
                lo_hi = [(min(d.domain[0] + 1, d.domain[1]), d.domain[1]) for d in schema.dims]
                key = tuple(slice(lo, hi + 1) for lo, hi in lo_hi)
                assert rows(A[key]) == rows(A.read(lo_hi))

def test_a_result_is_a_dict(uri: str) -> None:
    r = ts.Result({"x": np.array([1, 2]), "a": np.array([3, 4])})
    assert isinstance(r, dict) and list(r) == ["x", "a"] and r.cells == 2
    assert ts.Result().cells == 0
    out = io.StringIO()
    print(repr(r), file=out)
    assert out.getvalue().startswith("Result(")


def test_random_updates_of_a_dense_array_newest_wins(tmp_path: Any) -> None:
    uri = str(tmp_path / "img")
    ts.create(uri, ts.ArraySchema(
        dims=[ts.Dim("r", domain=(1, 20), tile=8, dtype="int64"), ts.Dim("c", domain=(1, 30), tile=7, dtype="int64")],
        attrs=[ts.Attr("a", dtype="int32")]))
    ref = np.arange(600, dtype=np.int32).reshape(20, 30)
    rng = np.random.default_rng(7)
    with ts.open(uri, "w") as A:
        A[1:21, 1:31] = ref
        # Random cell updates, written as a sparse fragment, then a dense write over part of them.
        flat = rng.choice(600, size=50, replace=False)
        rows, cols = flat // 30 + 1, flat % 30 + 1
        vals = rng.integers(-1000, 0, size=50).astype(np.int32)
        A.write({"r": rows, "c": cols}, {"a": vals})
        ref[rows - 1, cols - 1] = vals
        block = np.full((5, 5), 7, np.int32)
        A[3:8, 3:8] = block
        ref[2:7, 2:7] = block
    with ts.open(uri) as A:
        assert np.array_equal(A[1:21, 1:31], ref)
        assert np.array_equal(A[2:9, 4:25], ref[1:8, 3:24])
        assert np.array_equal(A.read(ranges=[[(1, 20)], [(5, 5), (1, 3)]], order="F"),
                              ref[:, [4, 0, 1, 2]])
        kinds = [f.sparse for f in A.fragments()]
        assert kinds == [False, True, False]


def test_tiles_read_whole_equal_the_general_path_and_skip_the_cache(uri: str) -> None:
    """Tiles inside the query that no other fragment overlaps are decoded straight into the
    result (``sm.read.sparse_whole_tiles``): the same frame, row for row, as the general path;
    their coordinates and fixed-size values do not go into the tile cache."""
    rng = np.random.default_rng(5)
    schema = points_schema(hi=1000, tile=100, capacity=64,
                           attrs=[ts.Attr("a", "int64", filters=[ts.ByteShuffle(), ts.Zstd(level=1)]),
                                  ts.Attr("s", "str")])
    ts.create(uri, schema)
    cells = rng.choice(1000 * 1000, 5000, replace=False)
    xs, ys = 1 + cells // 1000, 1 + cells % 1000
    with ts.open(uri, "w") as A:
        A.write({"x": xs, "y": ys}, {"a": np.arange(5000), "s": [f"s{k}" for k in range(5000)]})
    general = {"sm.read.sparse_whole_tiles": "false"}
    cached = []
    for config in (None, general):
        ts.drop_caches()
        with ts.open(uri, config=config) as A:
            assert len(A.read(attrs=["a"], order="U")["a"]) == 5000
        cached.append(ts.drop_caches())
    assert cached == [0, 5000 * 8 * 3]  # the general path caches both coordinates and a
    with ts.open(uri, "w") as A:  # an update over a corner: its tiles and those it overlaps merge
        A.write({"x": np.array([3, 4]), "y": np.array([5, 6])}, {"a": np.array([-1, -2]), "s": ["u", "v"]})
    for ranges in (None, [[(1, 400)], [(1, 1000)]]):
        with ts.open(uri) as A:
            fast = A.read(ranges=ranges, order="U").to_pandas()
        with ts.open(uri, config=general) as A:
            slow = A.read(ranges=ranges, order="U").to_pandas()
        assert fast.equals(slow)
        assert (fast.a >= 0).sum() == len(fast) - 2
