"""Writes and reads: every dtype, indexing (slices, integers, Ellipsis), multi-range reads,
orders C/F/G, batches, fill values, fragment order, time travel, from_numpy."""

from __future__ import annotations

import time

import numpy as np
import pytest

import tessera as ts
from conftest import iota, make_2d

NUMERIC = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
           "complex64", "complex128"]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("dim_dtype", ["int64", "uint8"])
def test_round_trip_of_every_dtype(uri: str, dtype: str, dim_dtype: str) -> None:
    rng = np.random.default_rng(0)
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (3, 12), 4, dtype=dim_dtype), ts.Dim("y", (0, 6), 3, dtype=dim_dtype)],
        attrs=[ts.Attr("v", dtype, filters=[ts.Zstd(level=1)])])
    ts.create(uri, schema)
    dt = np.dtype(dtype)
    if dt.kind == "c":
        vals = (rng.normal(size=(10, 7)) + 1j * rng.normal(size=(10, 7))).astype(dt)
    elif dt.kind == "f":
        vals = rng.normal(size=(10, 7)).astype(dt)
    else:
        info = np.iinfo(dt)
        vals = rng.integers(info.min, info.max, size=(10, 7), dtype=dt, endpoint=True)
    with ts.open(uri, "w") as A:
        A[3:13, 0:7] = vals
    with ts.open(uri) as A:
        got = A[:]
        assert got.dtype == dt and got.shape == (10, 7)
        np.testing.assert_array_equal(got, vals)
        np.testing.assert_array_equal(A[5:8, 2:4], vals[2:5, 2:4])


def test_reads_hand_over_engine_buffers_without_copy(uri: str) -> None:
    make_2d(uri)
    with ts.open(uri, "w") as A:
        A[:, :] = iota((12, 10))
    with ts.open(uri) as A:
        got = A[:, :]
        assert not got.flags.owndata and got.base is not None  # a view of the engine's Vec


def test_indexing_with_slices_ints_and_ellipsis(uri: str) -> None:
    make_2d(uri, lo=-3)  # domains [-3, 8] and [-3, 6]
    data = iota((12, 10))
    with ts.open(uri, "w") as A:
        A[...] = data
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[:], data)
        np.testing.assert_array_equal(A[...], data)
        np.testing.assert_array_equal(A[-3:0], data[0:3])  # negative numbers are coordinates
        np.testing.assert_array_equal(A[:, 2:], data[:, 5:])
        np.testing.assert_array_equal(A[..., :-1], data[:, :2])
        row = A[0]
        assert row.shape == (10,)
        np.testing.assert_array_equal(row, data[3])
        col = A[..., 4]
        assert col.shape == (12,)
        np.testing.assert_array_equal(col, data[:, 7])
        one = A[np.int64(1), 1]
        assert one.shape == () and one == data[4, 4]
        np.testing.assert_array_equal(A[2:4, -3], data[5:7, 0])


def test_writes_with_ints_ellipsis_broadcast_scalars_and_fortran_order(uri: str) -> None:
    make_2d(uri)
    with ts.open(uri, "w") as A:
        A[...] = np.int32(7)
        A[2] = np.arange(10, dtype=np.int32)
        A[..., 3] = np.full(12, -1, np.int32)
        A[5:8, 5:8] = np.asfortranarray(iota((3, 3)))
        A[9:11, 1:4] = 99
    expect = np.full((12, 10), 7, np.int32)
    expect[1] = np.arange(10)
    expect[:, 2] = -1
    expect[4:7, 4:7] = iota((3, 3))
    expect[8:10, 0:3] = 99
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[:], expect)


def test_fortran_writes_pass_column_major_layout(uri: str) -> None:
    make_2d(uri, rows=30, cols=20, tile=(7, 6))
    data = np.asfortranarray(iota((30, 20), np.int32))
    assert not data.flags.c_contiguous
    with ts.open(uri, "w") as A:
        A[:, :] = data
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[:], data)


def test_multi_range_reads_concatenate_per_dimension(uri: str) -> None:
    make_2d(uri)
    data = iota((12, 10))
    with ts.open(uri, "w") as A:
        A[:] = data
    with ts.open(uri) as A:
        got = A.read([[(1, 2), (7, 9), (4, 4)], [(2, 3), (8, 10)]])
        rows = [0, 1, 6, 7, 8, 3]
        cols = [1, 2, 7, 8, 9]
        np.testing.assert_array_equal(got, data[np.ix_(rows, cols)])
        np.testing.assert_array_equal(A.read([None, (5, 5)]), data[:, 4:5])
        np.testing.assert_array_equal(A.read(), data)


@pytest.mark.parametrize("cell_order", ["row-major", "col-major"])
@pytest.mark.parametrize("tile_order", ["row-major", "col-major"])
def test_orders_c_f_g(uri: str, cell_order: str, tile_order: str) -> None:
    make_2d(uri, rows=6, cols=5, tile=(4, 3), cell_order=cell_order, tile_order=tile_order,
            attrs=[ts.Attr("a", "int32"), ts.Attr("b", "float64")])
    a = iota((6, 5))
    with ts.open(uri, "w") as A:
        A[:] = {"a": a, "b": a.astype(np.float64) / 2}
    with ts.open(uri) as A:
        c = A.read(order="C")
        f = A.read(order="F")
        assert isinstance(c, dict) and set(c) == {"a", "b"}
        np.testing.assert_array_equal(c["a"], a)
        np.testing.assert_array_equal(f["a"], a)
        assert f["a"].flags.f_contiguous and c["a"].flags.c_contiguous
        np.testing.assert_array_equal(f["b"], a / 2)
        g = A.read(attrs=["a"], order="G")
        assert g.ndim == 1
        # Global order by hand: tiles in tile order, cells in cell order inside each tile.
        tiles = [(r0, c0) for r0 in range(0, 6, 4) for c0 in range(0, 5, 3)]
        if tile_order == "col-major":
            tiles = [(r0, c0) for c0 in range(0, 5, 3) for r0 in range(0, 6, 4)]
        expect = []
        for r0, c0 in tiles:
            block = a[r0:r0 + 4, c0:c0 + 3]
            expect.extend((block.T if cell_order == "col-major" else block).ravel().tolist())
        assert g.tolist() == expect


def test_iter_batches_equals_whole_read(uri: str) -> None:
    make_2d(uri, rows=40, cols=30, tile=(7, 8), attrs=[ts.Attr("a", "int32"), ts.Attr("s", str)])
    a = iota((40, 30))
    s = np.array([[f"r{i}c{j}" * (j % 3) for j in range(30)] for i in range(40)], dtype=object)
    with ts.open(uri, "w") as W:
        W[:] = {"a": a, "s": s}
    with ts.open(uri) as A:
        batches = list(A.iter_batches(budget_bytes=30 * 4 * 5))
        assert len(batches) > 3
        assert all(b["a"].ndim == 2 and b["a"].shape[1] == 30 for b in batches)
        np.testing.assert_array_equal(np.concatenate([b["a"] for b in batches]), a)
        assert np.concatenate([b["s"] for b in batches]).tolist() == s.tolist()
        # A budget below one row gives 1-D batches covering the result in order.
        small = list(A.iter_batches((slice(3, 5), slice(2, 20)), attrs=["a"], budget_bytes=16))
        np.testing.assert_array_equal(np.concatenate([b["a"].ravel() for b in small]), a[2:4, 1:19].ravel())
        # Ranges and integer selections.
        rb = list(A.iter_batches([[(1, 2), (10, 12)], [(1, 30)]], attrs=["a"], budget_bytes=240))
        np.testing.assert_array_equal(np.concatenate([b["a"] for b in rb]), a[[0, 1, 9, 10, 11]])
        ib = list(A.iter_batches((5, ...), attrs=["a"]))
        assert len(ib) == 1 and ib[0]["a"].shape == (30,)
        np.testing.assert_array_equal(ib[0]["a"], a[4])
        fb = list(A.iter_batches(attrs=["a"], order="F", budget_bytes=40 * 4 * 3))
        np.testing.assert_array_equal(np.concatenate([b["a"] for b in fb], axis=1), a)


@pytest.mark.parametrize(
    "dtype, fill",
    [("int8", -128), ("int16", -(2**15)), ("int32", -(2**31)), ("int64", -(2**63)), ("uint8", 255),
     ("uint16", 2**16 - 1), ("uint32", 2**32 - 1), ("uint64", 2**64 - 1), ("float32", np.nan), ("float64", np.nan)],
)
def test_default_fill_of_never_written_cells(uri: str, dtype: str, fill: object) -> None:
    make_2d(uri, attrs=[ts.Attr("a", dtype)])
    with ts.open(uri, "w") as A:
        A[2:4, 2:4] = np.ones((2, 2), dtype)
    with ts.open(uri) as A:
        got = A[:]
    assert (got[1:3, 1:3] == 1).all()
    rest = np.delete(got.ravel(), [11, 12, 21, 22])
    if isinstance(fill, float):
        assert np.isnan(rest).all()
    else:
        assert (rest == np.array(fill, dtype)).all()


def test_custom_fill_values(uri: str) -> None:
    make_2d(uri, attrs=[ts.Attr("a", "int16", fill=-7), ts.Attr("z", "complex64", fill=1 - 1j),
                        ts.Attr("s", str, fill="n/a"), ts.Attr("v", "(3,)f8", fill=[0.5, np.inf, -1])])
    with ts.open(uri) as A:
        got = A[1:3, 1:2]
    assert (got["a"] == -7).all() and (got["z"] == 1 - 1j).all()
    assert got["s"].tolist() == [["n/a"], ["n/a"]]
    assert got["v"].shape == (2, 1, 3) and (got["v"] == [0.5, np.inf, -1]).all()


def test_overlapping_writes_newest_wins(uri: str) -> None:
    make_2d(uri)
    expect = np.full((12, 10), np.iinfo(np.int32).min, np.int32)
    with ts.open(uri, "w") as A:
        for k, (r0, r1, c0, c1) in enumerate([(1, 13, 1, 11), (3, 9, 2, 6), (5, 6, 1, 11), (1, 4, 4, 5)]):
            A[r0:r1, c0:c1] = np.full((r1 - r0, c1 - c0), k, np.int32)
            expect[r0 - 1:r1 - 1, c0 - 1:c1 - 1] = k
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[:], expect)
        assert len(A.fragments()) == 4


def test_time_travel_with_timestamp(uri: str) -> None:
    make_2d(uri)
    with ts.open(uri, "w") as A:
        A[:] = np.zeros((12, 10), np.int32)
    time.sleep(0.005)
    with ts.open(uri, "w") as A:
        A[1:4, :] = np.ones((3, 10), np.int32)
    frags = ts.fragments(uri)
    assert len(frags) == 2 and frags[0].t1 < frags[1].t1
    assert frags[1].nonempty_domain == ((1, 3), (1, 10)) and frags[1].cell_count == 30
    assert frags[0].stored_bytes > 0 and frags[0].dense
    with ts.open(uri, timestamp=frags[0].t1) as A:
        assert A.timestamp == frags[0].t1
        assert (A[:] == 0).all()
        assert len(A.fragments()) == 1
    with ts.open(uri, timestamp=frags[0].t0 - 1) as A:
        assert A.nonempty_domain() is None
        assert (A[:] == np.iinfo(np.int32).min).all()
    with ts.open(uri) as A:
        assert (A[1:4] == 1).all() and (A[4:] == 0).all()
        assert A.nonempty_domain() == ((1, 12), (1, 10))


def test_from_numpy(tmp_path: object) -> None:
    import pathlib

    base = pathlib.Path(str(tmp_path))
    data = np.random.default_rng(1).normal(size=(300, 200, 3))
    uri = ts.from_numpy(base / "x", data, filters=[ts.Zstd()])
    with ts.open(uri) as A:
        assert A.dim_names == ("d0", "d1", "d2") and A.domain == ((0, 299), (0, 199), (0, 2))
        tiles = [d.tile for d in A.schema.dims]
        assert 0.25 < np.prod(tiles) * 8 / 2**20 <= 1.0
        np.testing.assert_array_equal(A[:], data)
    s = np.array(["a", "bé", ""], dtype=object)
    with ts.open(ts.from_numpy(base / "s", s, tile=2, attr="name")) as A:
        assert A.attr_names == ("name",) and A[:].tolist() == ["a", "bé", ""]


def test_extreme_coordinates_of_uint64_and_int64_dims(tmp_path: object) -> None:
    base = str(tmp_path)
    s = ts.ArraySchema([ts.Dim("x", (0, 2**64 - 2), 2**20, dtype="uint64")], [ts.Attr("a", "int8")])
    ts.create(base + "/u", s)
    with ts.open(base + "/u", "w") as A:
        A[2**64 - 5:] = np.arange(4, dtype=np.int8)
    with ts.open(base + "/u") as A:
        assert A[2**64 - 6:].tolist() == [-128, 0, 1, 2, 3] and A[2**64 - 2] == 3
        assert A.nonempty_domain() == ((2**64 - 5, 2**64 - 2),)
    s = ts.ArraySchema([ts.Dim("x", (-(2**63), 2**63 - 2), 2**20)], [ts.Attr("a", "int8")])
    ts.create(base + "/i", s)
    with ts.open(base + "/i", "w") as A:
        A[-(2**63):-(2**63) + 2] = np.array([5, 6], np.int8)
    with ts.open(base + "/i") as A:
        assert A[: -(2**63) + 3].tolist() == [5, 6, -128]


def test_writes_lend_numpy_memory_without_copy() -> None:
    from tessera import _codec
    from tessera.array import _write_layout

    attr = ts.Attr("a", "float32")
    for arr, layout in [(np.ones((30, 20), np.float32), "C"), (np.asfortranarray(np.ones((30, 20), np.float32)), "F")]:
        arr2, valid = _codec.prepare(attr, arr, (30, 20))
        assert _write_layout([(attr, arr2, valid)], 2) == layout
        _, data, _, _ = _codec.encode(attr, arr2, valid, layout, 2)
        assert data.dtype == np.uint8 and data.nbytes == arr.nbytes and np.shares_memory(data, arr)
    # A strided view has to be copied once into the layout.
    view = np.ones((30, 40), np.float32)[:, ::2]
    arr2, valid = _codec.prepare(attr, view, (30, 20))
    _, data, _, _ = _codec.encode(attr, arr2, valid, _write_layout([(attr, arr2, valid)], 2), 2)
    assert not np.shares_memory(data, view) and data.nbytes == view.nbytes
