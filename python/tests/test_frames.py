"""pandas and Arrow: DataFrames and Arrow tables (or any Arrow C stream) in as sparse arrays and
out as reads, fixed-size columns without copies, ``A.df[...]`` on sparse and dense arrays."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera as ts

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
frames = pytest.importorskip("tessera.frames")


def _sorted(df: Any) -> Any:
    return df.sort_values(["x", "y"]).reset_index(drop=True)


def _df(n: int = 10) -> Any:
    return pd.DataFrame({
        "x": np.arange(n, dtype=np.int64) * 3,
        "y": np.arange(n, dtype=np.int64)[::-1].copy(),
        "v": np.arange(n, dtype=np.float32) / 4,
        "s": [f"s{i}" for i in range(n)],
        "n": pd.array([None if i % 4 == 1 else i for i in range(n)], dtype="Int32"),
    })


def test_a_dataframe_round_trips(tmp_path: Any) -> None:
    df = _df()
    uri = ts.from_pandas(df, str(tmp_path / "p"), dims=["x", "y"])
    with ts.open(uri) as A:
        assert A.sparse and A.dim_names == ("x", "y") and A.attr_names == ("v", "s", "n")
        assert A.schema.attr("n").nullable and not A.schema.attr("v").nullable
        back = _sorted(A.df[:, :])
    pd.testing.assert_frame_equal(back, _sorted(df), check_dtype=False)
    assert back.v.dtype == np.float32 and str(back.n.dtype) == "Int32"
    ts.write_pandas(uri, df.assign(x=df.x + 1))  # later writes go anywhere in the type's range
    with ts.open(uri) as A:
        assert len(A.df[:, :]) == 20
        assert len(A.df[0:10, :]) == 4 + 3  # half-open slices in coordinates


def test_arrow_in_and_out_without_copying_fixed_size_columns(tmp_path: Any) -> None:
    table = pa.table({"x": pa.array([1, 2, 3], pa.int64()), "y": pa.array([5, 6, 7], pa.int64()),
                      "v": pa.array([0.5, 1.5, 2.5]), "b": pa.array([b"a", None, b"c"])})
    col = frames._column(pa, table.column("v"), "v")
    assert col.ctypes.data == table.column("v").chunks[0].buffers()[1].address  # a view, no copy
    uri = ts.from_arrow(table.to_batches()[0], str(tmp_path / "a"), dims=["x", "y"])
    with ts.open(uri) as A:
        res = A.read()
        out = pa.table(res)  # through __arrow_c_stream__
        assert out.column("v").chunks[0].buffers()[1].address == res["v"].ctypes.data
    assert out.select(["x", "y", "v", "b"]).equals(table)

    class Stream:  # any producer of the Arrow PyCapsule stream protocol
        def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
            return table.__arrow_c_stream__(requested_schema)

    ts.write_arrow(uri, Stream())
    with ts.open(uri) as A:
        assert A.read().cells == 3  # the same cells again: newest wins


def test_bad_tables_change_nothing(tmp_path: Any) -> None:
    df = _df()
    target = str(tmp_path / "bad")
    with pytest.raises(ts.ArgumentError, match="missing"):
        ts.from_pandas(df, target, dims=["x", "z"])
    with pytest.raises(ts.SchemaError, match="differs from the first dimension"):
        ts.from_pandas(df.assign(y=df.y.astype(np.float64)), target, dims=["x", "y"])
    with pytest.raises(ts.ArgumentError, match="without nulls"):
        ts.from_pandas(df, target, dims=["x", "n"])
    with pytest.raises(ts.ArgumentTypeError, match="is not supported"):
        ts.from_arrow(pa.table({"x": [1], "l": [[1, 2]]}), target, dims=["x"])
    assert not os.path.exists(target)
    uri = ts.from_pandas(df, str(tmp_path / "ok"), dims=["x", "y"])
    with pytest.raises(ts.ArgumentError, match="neither dimensions nor attributes"):
        ts.write_pandas(uri, df.assign(extra=1))
    with ts.open(uri) as A:
        assert len(A.fragments()) == 1


def test_dense_df_is_one_row_per_cell(tmp_path: Any) -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    uri = ts.from_numpy(str(tmp_path / "d"), a)
    with ts.open(uri) as A:
        df = A.df[1:3, 0:2]
    assert list(df.columns) == ["d0", "d1", "a"]
    assert df.values.tolist() == [[1, 0, 4], [1, 1, 5], [2, 0, 8], [2, 1, 9]]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**40, 2**40), st.integers(-5, 5), st.floats(allow_nan=False, width=32),
                          st.one_of(st.none(), st.text(max_size=5))),
                min_size=1, max_size=30, unique_by=lambda r: (r[0], r[1])))
def test_any_table_reads_back_as_written(tmp_path_factory: Any, rows: Any) -> None:
    df = pd.DataFrame({"x": np.array([r[0] for r in rows], np.int64), "y": np.array([r[1] for r in rows], np.int64),
                       "f": np.array([r[2] for r in rows], np.float32), "t": [r[3] for r in rows]})
    uri = ts.from_pandas(df, str(tmp_path_factory.mktemp("h") / "a"), dims=["x", "y"])
    with ts.open(uri) as A:
        back = _sorted(A.df[:, :])
    want = _sorted(df)
    assert back.x.tolist() == want.x.tolist() and back.y.tolist() == want.y.tolist()
    np.testing.assert_array_equal(back.f.to_numpy(), want.f.to_numpy())
    assert [None if v is None else v for v in back.t.tolist()] == want.t.tolist()
