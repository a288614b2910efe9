"""Z and Hilbert orders (issue 18): dense and sparse arrays laid out along space-filling curves
read back exactly what row-major arrays do; the schema carries the orders."""

from __future__ import annotations

import json
from typing import Dict

import numpy as np
import pytest

import tessera as ts

ORDERS = ["row-major", "col-major", "z", "hilbert"]


@pytest.mark.parametrize("cell_order", ORDERS)
@pytest.mark.parametrize("tile_order", ORDERS)
def test_dense_round_trip_under_every_order(tmp_path: object, cell_order: str, tile_order: str) -> None:
    uri = str(tmp_path) + "/dense"
    schema = ts.ArraySchema(
        dims=[ts.Dim("r", (1, 13), 5), ts.Dim("c", (0, 10), 3), ts.Dim("k", (-2, 4), 7)],
        attrs=[ts.Attr("a", "int32", filters=[ts.Zstd(level=1)]), ts.Attr("s", str, nullable=True)],
        cell_order=cell_order, tile_order=tile_order)
    assert (schema.cell_order, schema.tile_order) == (cell_order, tile_order)
    curve = cell_order in ("z", "hilbert") or tile_order in ("z", "hilbert")
    assert json.loads(schema.to_json())["version"] == (2 if curve else 1)
    ts.create(uri, schema)
    full = np.arange(13 * 11 * 7, dtype=np.int32).reshape(13, 11, 7)
    with ts.open(uri, "w") as A:
        text = np.array([str(x) for x in full.ravel()], dtype=object).reshape(full.shape)
        A[1:14, 0:11, -2:5] = {"a": full, "s": text}
        A[3:9, 2:7, 0:3] = {"a": -full[2:8, 2:7, 2:5], "s": np.full((6, 5, 3), "x", dtype=object)}
    want = full.copy()
    want[2:8, 2:7, 2:5] = -full[2:8, 2:7, 2:5]
    with ts.open(uri) as A:
        got = A[1:14, 0:11, -2:5]
        np.testing.assert_array_equal(got["a"], want)
        assert got["s"][2, 2, 2] == "x" and got["s"][0, 0, 0] == "0"
        np.testing.assert_array_equal(A[4:7, 1:10, 0:1]["a"], want[3:6, 1:10, 2:3])
    ts.consolidate(uri)
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[1:14, 0:11, -2:5]["a"], want)


@pytest.mark.parametrize("cell_order", ["z", "hilbert"])
@pytest.mark.parametrize("tile_order", ["row-major", "z", "hilbert"])
def test_sparse_round_trip_under_curve_orders(tmp_path: object, cell_order: str, tile_order: str) -> None:
    uri = str(tmp_path) + "/sparse"
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (0, 99), 10), ts.Dim("y", (-50, 49), 7)],
        attrs=[ts.Attr("a", "int64")], sparse=True, capacity=16,
        cell_order=cell_order, tile_order=tile_order)
    ts.create(uri, schema)
    rng = np.random.default_rng(7)
    model: Dict[tuple, int] = {}
    for _ in range(3):
        cells = rng.choice(100 * 100, 300, replace=False)  # distinct within a write
        xs, ys = cells // 100, cells % 100 - 50
        vals = rng.integers(-(10**9), 10**9, 300)
        with ts.open(uri, "w") as A:
            A.write({"x": xs, "y": ys}, {"a": vals})
        for x, y, v in zip(xs.tolist(), ys.tolist(), vals.tolist()):
            model[(x, y)] = v
    for _ in range(2):
        with ts.open(uri) as A:
            r = A.read(ranges={"x": [(10, 80)], "y": [(-20, 30)]}, order="G")
            got = {(x, y): v for x, y, v in zip(r["x"].tolist(), r["y"].tolist(), r["a"].tolist())}
        want = {k: v for k, v in model.items() if 10 <= k[0] <= 80 and -20 <= k[1] <= 30}
        assert got == want
        ts.consolidate(uri)


def test_curve_keys_wider_than_128_bits_are_refused() -> None:
    dims = [ts.Dim(n, (0, 2**60), None, dtype="int64") for n in "xyz"]
    with pytest.raises(ts.SchemaError, match="more than 128"):
        ts.ArraySchema(dims, [ts.Attr("a", "i4")], sparse=True, cell_order="hilbert")
