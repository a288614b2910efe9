"""The process's cache of freed large result columns (``ts.retained_memory``): reads after a
block is reused return their own values, and the limit holds."""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import tessera as ts


def test_reused_blocks_hold_each_reads_own_values(tmp_path: Any) -> None:
    ts.set_retained_memory_limit(256 << 20)
    try:
        a = np.arange(2000 * 1000, dtype=np.int64).reshape(2000, 1000)  # 16 MB columns
        b = (a * 3 + 1)[::-1].copy()
        ua = ts.from_numpy(str(tmp_path / "a"), a, tile=(500, 1000))
        ub = ts.from_numpy(str(tmp_path / "b"), b, tile=(500, 1000))
        sparse = str(tmp_path / "s")
        ts.create(sparse, ts.ArraySchema(dims=[ts.Dim("x", (0, 10**7))], attrs=[ts.Attr("v", "int64")],
                                         sparse=True, capacity=50_000))
        with ts.open(sparse, "w") as S:
            S.write({"x": np.arange(1_000_000) * 7}, {"v": np.arange(1_000_000)[::-1].copy()})
        for _ in range(3):
            with ts.open(ua) as A:
                np.testing.assert_array_equal(A[...], a)
            gc.collect()
            assert ts.retained_memory()[0] >= 1 << 20  # the freed column is kept ...
            with ts.open(ub) as B:
                np.testing.assert_array_equal(B[...], b)  # ... and reused, holding b's values
            with ts.open(sparse) as S:
                r = S.read()
                np.testing.assert_array_equal(r["x"], np.arange(1_000_000) * 7)
                np.testing.assert_array_equal(r["v"], np.arange(1_000_000)[::-1])
                del r
            gc.collect()
            kept, limit = ts.retained_memory()
            assert 0 < kept <= limit == 256 << 20
        ts.set_retained_memory_limit(4 << 20)
        assert ts.retained_memory()[0] <= 4 << 20
        ts.release_memory()
        assert ts.retained_memory()[0] == 0
        ts.set_retained_memory_limit(0)
        with ts.open(ua) as A:
            np.testing.assert_array_equal(A[...], a)
        gc.collect()
        assert ts.retained_memory() == (0, 0)  # nothing is kept under a limit of 0
    finally:
        ts.set_retained_memory_limit(256 << 20)


@pytest.mark.parametrize("bad", [-1, 1.5, "1M", True, None])
def test_a_bad_limit_is_refused(bad: Any) -> None:
    before = ts.retained_memory()[1]
    with pytest.raises(ts.ConfigError, match="retained memory limit"):
        ts.set_retained_memory_limit(bad)
    assert ts.retained_memory()[1] == before
