"""Parquet files via pyarrow (the column-store analogue of the paper's Vertica)."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Sequence, Tuple

import numpy as np

from . import Unsupported

try:
    import pyarrow as pa
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    AVAILABLE, REASON, VERSION = True, "", pa.__version__
except Exception as e:  # noqa: BLE001
    pa = None
    AVAILABLE, REASON, VERSION = False, f"{type(e).__name__}: {e}", None

NAME = "parquet"


def _numpy(table: Any) -> Dict[str, np.ndarray]:
    return {name: table.column(name).to_numpy() for name in table.column_names}


class Sparse:
    """One Parquet file per batch (the analogue of one fragment per write), each sorted by
    (x, y) with row groups of ``row_group`` rows carrying min/max statistics. ``compressed``:
    zstd-3 (otherwise none; dictionary encoding off in both, as for the other engines' raw
    int64 columns). Queries: a ``pyarrow.dataset`` over the files (made once at open), filtered
    with ``x >= .. & x <= .. & y >= .. & y <= ..``: row groups whose statistics miss the box are
    skipped, the rest decoded and filtered, multi-threaded. Row groups of 10,000 rows were the
    fastest of 10K/30K/100K/1M rows for these queries in a one-off test at 10M points."""

    def __init__(self, path: str, compressed: bool, attrs: Sequence[str], domain: Tuple[int, int],
                 row_group: int = 10_000, **_: Any) -> None:
        self.path, self.compressed, self.attrs, self.row_group = path, compressed, list(attrs), row_group
        self.engine = NAME + ("+z" if compressed else "")
        self.ds: Any = None
        self.parts = 0  # files written so far (the next file's number)
        self.note = f"one file per batch sorted by (x, y), row groups of {row_group} rows"

    def _write(self, t: Any, path: str) -> None:
        pq.write_table(t, path, row_group_size=self.row_group,
                       compression="zstd" if self.compressed else "none", compression_level=3 if self.compressed else None,
                       use_dictionary=False, write_statistics=True)

    def _write_batch(self, b: Dict[str, np.ndarray]) -> None:
        order = np.lexsort((b["y"], b["x"]))
        self._write(pa.table({c: b[c][order] for c in ["x", "y"] + self.attrs}),
                    os.path.join(self.path, f"part-{self.parts:04d}.parquet"))
        self.parts += 1

    def load(self, batches: Iterable[Dict[str, np.ndarray]]) -> None:
        os.makedirs(self.path, exist_ok=True)
        for b in batches:
            self._write_batch(b)

    def append(self, b: Dict[str, np.ndarray]) -> None:
        """One more file, sorted by (x, y), as a load's batch."""
        self._write_batch(b)

    def end_appends(self) -> None:
        pass

    def consolidate(self) -> None:
        """Every file read into one table, sorted by (x, y) and written as one file (row groups
        of ``row_group`` rows), which then replaces them."""
        old = sorted(os.listdir(self.path))
        t = pads.dataset(self.path, format="parquet").to_table()
        t = t.sort_by([("x", "ascending"), ("y", "ascending")])
        tmp = os.path.join(self.path, "consolidated.tmp")
        self._write(t, tmp)
        os.replace(tmp, os.path.join(self.path, f"part-{self.parts:04d}.parquet"))
        self.parts += 1
        for f in old:
            os.remove(os.path.join(self.path, f))

    def open(self) -> None:
        self.ds = pads.dataset(self.path, format="parquet")

    def query(self, box: Tuple[int, int, int, int]) -> Dict[str, np.ndarray]:
        x0, x1, y0, y1 = (int(v) for v in box)
        f = pads.field
        t = self.ds.to_table(filter=(f("x") >= x0) & (f("x") <= x1) & (f("y") >= y0) & (f("y") <= y1))
        return _numpy(t)

    def close(self) -> None:
        self.ds = None


class Dense:
    """Not run: see ``adapters.duckdb.Dense``."""

    def __init__(self, *a: Any, **k: Any) -> None:
        raise Unsupported("dense arrays: not an array engine (one row per cell not benchmarked)")
