"""Cells that are not one number: strings, bytes, nullable, complex, multi-valued, ragged."""

from __future__ import annotations

import numpy as np
import pytest

import tessera as ts
from conftest import make_2d


def test_strings_unicode_and_empty(uri: str) -> None:
    make_2d(uri, rows=4, cols=3, tile=(3, 2), attrs=[ts.Attr("s", str, filters=[ts.Zstd()])])
    vals = np.array([["", "a", "ünïcødé"], ["日本語", "emoji 🎉", ""], ["x" * 1000, "tab\tnew\nline", "\x00nul"],
                     ["ascii", "", "ß"]], dtype=object)
    with ts.open(uri, "w") as A:
        A[:] = vals
    with ts.open(uri) as A:
        got = A[:]
        assert got.dtype == object and got.shape == (4, 3)
        assert got.tolist() == vals.tolist()
        assert A[1:3, 3].tolist() == ["ünïcødé", ""]
        assert A.read(order="F").tolist() == vals.tolist()
        assert A.read(order="G").tolist()[:2] == ["", "a"]


def test_strings_from_unicode_arrays_lists_and_scalars(uri: str) -> None:
    make_2d(uri, rows=3, cols=2, tile=(3, 2), attrs=[ts.Attr("s", "U")])
    with ts.open(uri, "w") as A:
        A[:] = np.array([["a", "bb"], ["ccc", ""], ["é", "f"]])  # dtype <U3
        A[3, :] = ["gg", "h"]
    with ts.open(uri) as A:
        assert A[:].tolist() == [["a", "bb"], ["ccc", ""], ["gg", "h"]]
    with ts.open(uri, "w") as A:
        A[:] = "same"
    with ts.open(uri) as A:
        assert (A[:] == "same").all()


def test_never_written_strings_are_empty(uri: str) -> None:
    make_2d(uri, rows=3, cols=3, tile=(2, 2), attrs=[ts.Attr("s", str)])
    with ts.open(uri, "w") as A:
        A[2, 2] = np.array("mid", dtype=object)
    with ts.open(uri) as A:
        assert A[:].tolist() == [["", "", ""], ["", "mid", ""], ["", "", ""]]


def test_bytes_attribute(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2), attrs=[ts.Attr("b", bytes)])
    vals = np.array([[b"\x00\xff", b""], [b"abc", bytes(range(256))]], dtype=object)
    with ts.open(uri, "w") as A:
        A[:] = vals
    with ts.open(uri) as A:
        assert A[:].tolist() == vals.tolist()


def test_fixed_size_byte_strings(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2), attrs=[ts.Attr("b", "S3")])
    vals = np.array([[b"abc", b"de"], [b"", b"xyz"]], dtype="S3")
    with ts.open(uri, "w") as A:
        A[:] = vals
    with ts.open(uri) as A:
        got = A[:]
        assert got.dtype == np.dtype("S3") and got.tolist() == vals.tolist()


def test_nullable_numeric_masked_arrays_and_pairs(uri: str) -> None:
    make_2d(uri, rows=3, cols=4, tile=(2, 2), attrs=[ts.Attr("a", "float64", nullable=True)])
    vals = np.arange(12, dtype=np.float64).reshape(3, 4)
    mask = (vals % 3) == 0
    with ts.open(uri, "w") as A:
        A[:] = np.ma.MaskedArray(vals, mask=mask)
    with ts.open(uri) as A:
        got = A[:]
        assert isinstance(got, np.ma.MaskedArray)
        assert (got.mask == mask).all()
        np.testing.assert_array_equal(got.compressed(), vals[~mask])
        f = A.read(order="F")
        assert (f.mask == mask).all() and (f.data[~mask] == vals[~mask]).all()
    with ts.open(uri, "w") as A:
        A[1:3, 1:3] = (np.full((2, 2), 5.0), np.array([[True, False], [False, True]]))
        A[3, :] = np.full(4, 1.5)  # a plain array: every cell valid
    with ts.open(uri) as A:
        got = A[:]
        assert got.mask.tolist() == [[False, True, False, True], [True, False, True, False],
                                     [False, False, False, False]]
        assert got[0, 0] == 5.0 and got[2].tolist() == [1.5] * 4


def test_nullable_strings_use_none(uri: str) -> None:
    make_2d(uri, rows=2, cols=3, tile=(2, 3), attrs=[ts.Attr("s", str, nullable=True), ts.Attr("n", "int8")])
    s = np.array([["a", None, "ç"], [None, "", "z"]], dtype=object)
    with ts.open(uri, "w") as A:
        A[:] = {"s": s, "n": np.ones((2, 3), np.int8)}
    with ts.open(uri) as A:
        got = A[:]["s"]
        assert isinstance(got, np.ma.MaskedArray)
        assert got.mask.tolist() == [[False, True, False], [True, False, False]]
        assert got[0, 0] == "a" and got[1, 1] == "" and got[0, 2] == "ç"


def test_never_written_nullable_cells_are_null(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2), attrs=[ts.Attr("a", "int32", nullable=True)])
    with ts.open(uri, "w") as A:
        A[1, 1] = np.int32(3)
    with ts.open(uri) as A:
        got = A[:]
        assert got.mask.tolist() == [[False, True], [True, True]] and got[0, 0] == 3


def test_complex_round_trip(uri: str) -> None:
    make_2d(uri, rows=3, cols=3, tile=(2, 2), attrs=[ts.Attr("z", np.complex64), ts.Attr("w", "complex128")])
    z = (np.arange(9) + 1j * np.arange(9)[::-1]).astype(np.complex64).reshape(3, 3)
    with ts.open(uri, "w") as A:
        A[:] = {"z": z, "w": z.astype(np.complex128) * 2}
    with ts.open(uri) as A:
        got = A[:]
        assert got["z"].dtype == np.complex64 and got["w"].dtype == np.complex128
        np.testing.assert_array_equal(got["z"], z)
        np.testing.assert_array_equal(got["w"], z * 2)
        np.testing.assert_array_equal(A.read(attrs=["z"], order="F"), z)


def test_multi_valued_cells(uri: str) -> None:
    make_2d(uri, rows=3, cols=4, tile=(2, 3), attrs=[ts.Attr("v", "(3,)f4"), ts.Attr("u", "uint16", cell_val_num=2)])
    v = np.arange(36, dtype=np.float32).reshape(3, 4, 3)
    u = np.arange(24, dtype=np.uint16).reshape(3, 4, 2)
    with ts.open(uri, "w") as A:
        A[:] = {"v": v, "u": u}
        A[2, 2] = {"v": np.float32(-1), "u": np.array([7, 8], np.uint16)}
    v[1, 1] = -1
    u[1, 1] = [7, 8]
    with ts.open(uri) as A:
        got = A[:]
        assert got["v"].shape == (3, 4, 3)
        np.testing.assert_array_equal(got["v"], v)
        np.testing.assert_array_equal(got["u"], u)
        np.testing.assert_array_equal(A.read(attrs=["v"], order="F"), v)
        np.testing.assert_array_equal(A[2:4, 3]["u"], u[1:3, 2])


def test_multi_valued_cells_written_in_column_major_cell_order(uri: str) -> None:
    make_2d(uri, rows=3, cols=4, tile=(2, 3), attrs=[ts.Attr("v", "(2,)i4")])
    v = np.arange(24, dtype=np.int32).reshape(3, 4, 2)
    f = np.ascontiguousarray(v.transpose(1, 0, 2)).transpose(1, 0, 2)  # cells col-major, values together
    assert not f.flags.c_contiguous
    with ts.open(uri, "w") as A:
        A[:] = f
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[:], v)


@pytest.mark.parametrize("dtype", ["int32", "float64", "int8", "uint64"])
def test_ragged_numeric_cells(uri: str, dtype: str) -> None:
    make_2d(uri, rows=2, cols=3, tile=(2, 2), attrs=[ts.Attr("rg", dtype, var=True, filters=[ts.Lz4()])])
    cells = np.empty((2, 3), dtype=object)
    for i in range(2):
        for j in range(3):
            cells[i, j] = np.arange(i * 3 + j, dtype=dtype)  # lengths 0..5
    with ts.open(uri, "w") as A:
        A[:] = cells
    with ts.open(uri) as A:
        got = A[:]
        assert got.dtype == object and got.shape == (2, 3)
        for i in range(2):
            for j in range(3):
                assert got[i, j].dtype == np.dtype(dtype)
                np.testing.assert_array_equal(got[i, j], cells[i, j])
        np.testing.assert_array_equal(A[2, 3], cells[1, 2])
    with ts.open(uri, "w") as A:
        A[1, :] = [[1, 2], [3, 4], [5]]  # lists take the attribute's dtype
    with ts.open(uri) as A:
        assert [x.tolist() for x in A[1]] == [[1, 2], [3, 4], [5]]


# -- bool and datetime64 ---------------------------------------------------------------------

import json  # noqa: E402

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

UNITS = ["D", "h", "m", "s", "ms", "us", "ns"]


@pytest.mark.parametrize("unit", UNITS)
def test_bool_and_datetime_dense_round_trip(uri: str, unit: str) -> None:
    dt = np.dtype(f"datetime64[{unit}]")
    make_2d(uri, rows=3, cols=4, tile=(2, 3), attrs=[ts.Attr("flag", bool), ts.Attr("t", dt, nullable=True)])
    flags = np.array([[True, False, True, True], [False, False, True, False], [True, True, False, False]])
    times = (np.arange(12, dtype=np.int64).reshape(3, 4) * 7919 - 40_000).view(dt)
    times[1, 2] = np.datetime64("NaT")
    valid = np.ones((3, 4), bool)
    valid[2, 3] = False
    with ts.open(uri, "w") as A:
        A[:] = {"flag": flags, "t": np.ma.MaskedArray(times, mask=~valid)}
    with ts.open(uri) as A:
        assert A.schema.attr("flag").dtype == np.dtype(bool) and A.schema.attr("t").dtype == dt
        got = A[:]
        assert got["flag"].dtype == np.dtype(bool) and got["t"].dtype == dt
        np.testing.assert_array_equal(got["flag"], flags)
        np.testing.assert_array_equal(np.ma.getmaskarray(got["t"]), ~valid)
        np.testing.assert_array_equal(got["t"].data[valid], times[valid])  # NaT stays NaT
        nat_cells = A.read(where="t is not null and not (t == 0 or t != 0)")["t"]
        assert np.ma.count(nat_cells) == 0  # NaT passes no comparison, negated or not
        assert json.loads(A.schema.to_json())["version"] == 3


def test_datetime_dimensions_take_times_text_and_counts(uri: str) -> None:
    dim = ts.Dim("t", (np.datetime64("1969-12-31T23:59:50"), "1970-01-01T00:00:09"), np.timedelta64(5, "s"),
                 dtype="datetime64[s]")
    assert dim.domain == (np.datetime64(-10, "s"), np.datetime64(9, "s")) and dim.int_domain == (-10, 9)
    assert dim.tile == 5
    ts.create(uri, ts.ArraySchema(dims=[dim], attrs=[ts.Attr("v", "int32")]))
    with ts.open(uri, "w") as A:
        A[np.datetime64("1969-12-31T23:59:58"):"1970-01-01T00:00:02"] = np.arange(4, dtype=np.int32)
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[-2:2], np.arange(4, dtype=np.int32))
        assert A[np.datetime64(0, "s")] == 2
        assert A.read(ranges=[("1969-12-31T23:59:59", np.datetime64(1, "s"))]).tolist() == [1, 2, 3]
        assert A.nonempty_domain() == ((np.datetime64(-2, "s"), np.datetime64(1, "s")),)
        df = A.df[-2:0]
        assert df["t"].dtype == np.dtype("datetime64[s]") and df["v"].tolist() == [0, 1]
        with pytest.raises(ts.DomainError, match="finer than the unit"):
            A[np.datetime64("1970-01-01T00:00:00.5")]


def test_inexact_casts_and_bad_bytes_are_refused(uri: str) -> None:
    make_2d(uri, rows=1, cols=2, tile=(1, 2), attrs=[ts.Attr("flag", bool), ts.Attr("t", "datetime64[s]")])
    with ts.open(uri, "w") as A:
        A[:] = {"flag": True, "t": np.array([["2020-01-01", "NaT"]], dtype="datetime64[D]")}  # exact: accepted
        with pytest.raises(ts.QueryError, match="does not fit datetime64"):
            A[:] = {"flag": True, "t": np.array([[1, 1500]], dtype="datetime64[ms]")}
        with pytest.raises(ts.QueryError, match="byte 7"):
            A[:] = {"flag": np.array([[1, 7]], np.uint8).view(bool), "t": "2020-01-01"}
    with ts.open(uri) as A:
        assert A[:]["t"].tolist()[0][0] == np.datetime64("2020-01-01", "s").item()
        assert np.isnat(A[:]["t"][0, 1]) and A[:]["flag"].all()


def test_fill_values_of_bool_and_datetime(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2),
            attrs=[ts.Attr("flag", bool, fill=True), ts.Attr("t", "datetime64[D]", fill="2000-01-02"),
                   ts.Attr("t0", "datetime64[ns]")])
    with ts.open(uri) as A:
        assert A.schema.attr("t").fill == np.datetime64("2000-01-02")
        assert A.schema.attr("flag").fill is True
        got = A[:]
        assert got["flag"].all() and (got["t"] == np.datetime64("2000-01-02")).all() and np.isnat(got["t0"]).all()


def test_metadata_of_bool_and_datetime(uri: str) -> None:
    make_2d(uri)
    times = np.array(["2020-01-01T00:00", "NaT", "1900-06-01T12:30"], dtype="datetime64[m]")
    with ts.open(uri, "w") as A:
        A.meta.update({"ok": True, "times": times, "flags": np.array([True, False])})
    with ts.open(uri) as A:
        assert A.meta["ok"] is True
        np.testing.assert_array_equal(A.meta["times"], times)
        assert A.meta["times"].dtype == times.dtype
        assert A.meta["flags"].tolist() == [True, False]


NS_DAY = 86_400 * 10**9


@settings(max_examples=25, deadline=None)
@given(
    cells=st.dictionaries(
        st.tuples(st.integers(-40, 40), st.integers(0, 5)),
        st.tuples(st.booleans(), st.one_of(st.none(), st.just("NaT"), st.integers(-10**6, 10**6))),
        max_size=40,
    ),
    bound=st.integers(-10**6, 10**6),
    flag=st.booleans(),
)
def test_sparse_datetime_coordinates_conditions_and_aggregates_match_numpy(
    tmp_path_factory: pytest.TempPathFactory, cells: dict, bound: int, flag: bool
) -> None:
    uri = str(tmp_path_factory.mktemp("s") / "a")
    schema = ts.ArraySchema(
        dims=[ts.Dim("t", ("1900-01-01", "2100-01-01"), 10 * NS_DAY, dtype="datetime64[ns]"),
              ts.Dim("k", (0, 5), 2, dtype="datetime64[ns]")],
        attrs=[ts.Attr("flag", bool), ts.Attr("when", "datetime64[ms]", nullable=True)],
        sparse=True, capacity=7,
    )
    ts.create(uri, schema)
    keys = sorted(cells)
    t = np.array([d * 3 * NS_DAY - 7 for d, _ in keys], dtype="datetime64[ns]")  # before and after 1970
    k = np.array([x for _, x in keys], dtype=np.int64).view("datetime64[ns]")
    flags = np.array([cells[x][0] for x in keys], dtype=bool)
    when = np.array([0 if v is None else v for _, v in (cells[x] for x in keys)], dtype=object)
    when = np.array([np.datetime64("NaT") if v == "NaT" else np.datetime64(v, "ms") for v in when], "datetime64[ms]")
    null = np.array([cells[x][1] is None for x in keys], dtype=bool)
    if keys:
        with ts.open(uri, "w") as A:
            A.write({"t": t, "k": k}, {"flag": flags, "when": np.ma.MaskedArray(when, mask=null)})
    lit = np.datetime64(bound, "ms")
    with ts.open(uri) as A:
        r = A[:]
        assert r["t"].dtype == np.dtype("datetime64[ns]") and r["flag"].dtype == np.dtype(bool)
        if keys:
            np.testing.assert_array_equal(r["t"], t)
            np.testing.assert_array_equal(r["flag"], flags)
        ok = ~null & ~np.isnat(when) & (when >= lit)
        got = A.read(where=f"when >= '{lit}' and flag == {str(flag).lower()}")
        want = ok & (flags == flag)
        np.testing.assert_array_equal(got["t"], t[want])
        agg = A.aggregate({"when": ["min", "max", "mean", "null_count"], "flag": ["sum", "mean", "count"]})
        live = when[~null & ~np.isnat(when)]
        assert agg["when"]["null_count"] == int(null.sum())
        assert agg["flag"]["sum"] == int(flags.sum()) and agg["flag"]["count"] == len(keys)
        if len(keys):
            assert agg["flag"]["mean"] == pytest.approx(flags.mean())
        if len(live):
            assert agg["when"]["min"] == live.min() and agg["when"]["max"] == live.max()
            mean = np.datetime64(int(np.floor(live.astype(np.int64).sum() / len(live))), "ms")
            assert abs(agg["when"]["mean"] - mean) <= np.timedelta64(1, "ms")
        else:
            assert agg["when"]["min"] is None and agg["when"]["mean"] is None
        with pytest.raises(ts.QueryError, match="not a time"):
            A.aggregate({"when": "sum"})


def test_pandas_and_arrow_round_trips_of_bool_and_times(tmp_path: object) -> None:
    pd = pytest.importorskip("pandas")
    pa = pytest.importorskip("pyarrow")
    df = pd.DataFrame({
        "t": pd.to_datetime(["1969-07-20T20:17:40", "2000-01-01", "2024-02-29T12:00"], format="ISO8601"),
        "ok": [True, False, True],
        "seen": pd.to_datetime(["2001-01-01", None, "1950-05-05"], format="ISO8601"),
    })
    uri = ts.from_pandas(df, str(tmp_path) + "/p", dims=["t"])  # type: ignore[operator]
    with ts.open(uri) as A:
        assert A.schema.dims[0].dtype.kind == "M"  # pandas picks the unit (us or ns)
        back = A[:].to_pandas().sort_values("t").reset_index(drop=True)
        pd.testing.assert_frame_equal(back[["t", "ok", "seen"]], df, check_dtype=False)
        assert back["ok"].dtype == bool and back["seen"].dtype.kind == "M"
        table = A[:].to_arrow()
        assert pa.types.is_timestamp(table.schema.field("t").type)
        assert pa.types.is_boolean(table.schema.field("ok").type)
        assert table.column("seen").null_count == 1
    days = pa.table({"d": pa.array([-3, 0, 19000], pa.date32()), "b": pa.array([True, None, False])})
    uri2 = ts.from_arrow(days, str(tmp_path) + "/q", dims=["d"])  # type: ignore[operator]
    with ts.open(uri2) as A:
        r = A[:]
        assert r["d"].dtype == np.dtype("datetime64[D]")
        assert r["d"].astype(np.int64).tolist() == [-3, 0, 19000]
        assert np.ma.getmaskarray(r["b"]).tolist() == [False, True, False]
        assert pa.table(A[:]).column("d").type == pa.date32()
