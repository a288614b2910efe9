"""TileDB-Py (TileDB Embedded), through its Python API."""

from __future__ import annotations

from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

import numpy as np

from . import Unsupported

try:
    import tiledb

    AVAILABLE, REASON = True, ""
    VERSION = f"{tiledb.__version__} (libtiledb {'.'.join(map(str, tiledb.libtiledb.version()))})"
except Exception as e:  # noqa: BLE001
    tiledb = None
    AVAILABLE, REASON, VERSION = False, f"{type(e).__name__}: {e}", None

NAME = "tiledb"


def _ctx(threads: Optional[int] = None) -> Any:
    cfg = {}
    if threads:
        cfg = {"sm.compute_concurrency_level": str(threads), "sm.io_concurrency_level": str(threads)}
    return tiledb.Ctx(tiledb.Config(cfg)) if cfg else tiledb.Ctx()


class Sparse:
    """The same schema as Tessera's: int64 dims x, y with 10M x 10M space tiles, row-major cell
    and tile order, capacity 10,000, int64 attributes; ``compressed``: attributes byte shuffle +
    zstd-3, coordinates delta + byte shuffle + zstd-3; otherwise no filters. One write (fragment) per batch, unordered
    (TileDB sorts). Reads: ``query(order="U").multi_index[x0:x1, y0:y1]`` (inclusive), all
    attributes, numpy results."""

    def __init__(self, path: str, compressed: bool, attrs: Sequence[str], domain: Tuple[int, int],
                 capacity: int = 10_000, tile: int = 10_000_000, order: str = "U") -> None:
        self.path, self.compressed, self.attrs = path, compressed, list(attrs)
        self.domain, self.capacity, self.tile, self.order = domain, capacity, tile, order
        self.engine = NAME + ("+z" if compressed else "")
        self.A: Any = None
        self.W: Any = None
        self.ctx = _ctx()
        self.note = ""

    def load(self, batches: Iterable[Dict[str, np.ndarray]]) -> None:
        z = (tiledb.FilterList([tiledb.ByteShuffleFilter(), tiledb.ZstdFilter(level=3)]) if self.compressed
             else tiledb.FilterList([]))
        # An empty filter list on a dimension means "the schema's coordinate filters", whose
        # default is zstd: "none" needs a no-op filter.
        cf = (tiledb.FilterList([tiledb.DeltaFilter(), tiledb.ByteShuffleFilter(), tiledb.ZstdFilter(level=3)])
              if self.compressed
              else tiledb.FilterList([tiledb.NoOpFilter()]))
        dom = tiledb.Domain(
            tiledb.Dim("x", domain=(0, self.domain[0] - 1), tile=self.tile, dtype=np.int64, filters=cf, ctx=self.ctx),
            tiledb.Dim("y", domain=(0, self.domain[1] - 1), tile=self.tile, dtype=np.int64, filters=cf, ctx=self.ctx),
            ctx=self.ctx)
        schema = tiledb.ArraySchema(
            domain=dom, sparse=True, capacity=self.capacity, cell_order="row-major", tile_order="row-major",
            attrs=[tiledb.Attr(a, dtype=np.int64, filters=z, ctx=self.ctx) for a in self.attrs],
            coords_filters=cf, allows_duplicates=False, ctx=self.ctx)
        tiledb.Array.create(self.path, schema, ctx=self.ctx)
        with tiledb.open(self.path, "w", ctx=self.ctx) as A:
            for b in batches:
                A[b["x"], b["y"]] = {a: b[a] for a in self.attrs}

    def open(self) -> None:
        self.A = tiledb.open(self.path, "r", ctx=self.ctx)

    def query(self, box: Tuple[int, int, int, int]) -> Dict[str, np.ndarray]:
        x0, x1, y0, y1 = box
        return self.A.query(order=self.order).multi_index[x0:x1, y0:y1]

    def close(self) -> None:
        if self.A is not None:
            self.A.close()
            self.A = None

    def append(self, b: Dict[str, np.ndarray]) -> None:
        """One more write (one fragment), through one writer kept open across appends."""
        if self.W is None:
            self.W = tiledb.open(self.path, "w", ctx=self.ctx)
        self.W[b["x"], b["y"]] = {a: b[a] for a in self.attrs}

    def end_appends(self) -> None:
        if self.W is not None:
            self.W.close()
            self.W = None

    def consolidate(self) -> None:
        """``tiledb.consolidate`` (fragments, the default mode) then ``tiledb.vacuum``."""
        tiledb.consolidate(self.path, ctx=self.ctx)
        tiledb.vacuum(self.path, ctx=self.ctx)


def _tiles_touched(rows: np.ndarray, cols: np.ndarray, tile: Tuple[int, int]) -> Dict[Tuple[int, int], np.ndarray]:
    key = (rows // tile[0]) * (1 << 32) + cols // tile[1]
    order = np.argsort(key, kind="stable")
    k = key[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], len(k)]
    return {(int(k[s] >> 32), int(k[s] & 0xFFFFFFFF)): order[s:e] for s, e in zip(starts, ends)}


class Dense:
    """The same dense schema as Tessera's (int64 dims from 0, row-major, 10 MB tiles), attribute
    ``a`` int32 with no filter, gzip-6 or zstd-3. Load: ``A[:] = data``. Reads: ``A[r0:r1,
    c0:c1]``. Random updates: TileDB 2.x cannot write individual cells of a dense array
    ("Multi-range dense writes are not supported"; unordered dense writes were removed), so each
    touched tile is read, modified and written back as a dense fragment (one per tile). Random
    element reads: ``multi_index`` of point lists returns their cross product, so one ``A[r, c]``
    per element."""

    point_reads_native = False

    def __init__(self, path: str, shape: Tuple[int, int], tile: Tuple[int, int], compression: str = "none",
                 threads: Optional[int] = None) -> None:
        self.path, self.shape, self.tile, self.compression = path, shape, tile, compression
        self.engine = NAME + ("" if compression == "none" else f"+{compression}")
        self.ctx = _ctx(threads)
        self.A: Any = None
        self.notes = {"points": "no point-list read for dense arrays: one A[r, c] per element",
                      "update": "no cell writes to dense arrays: read-modify-write of each touched tile"}

    def create(self) -> None:
        """The empty array (schema only)."""
        R, C = self.shape
        f = {"none": [], "gzip": [tiledb.GzipFilter(level=6)], "zstd": [tiledb.ZstdFilter(level=3)]}[self.compression]
        dom = tiledb.Domain(
            tiledb.Dim("rows", domain=(0, R - 1), tile=self.tile[0], dtype=np.int64, ctx=self.ctx),
            tiledb.Dim("cols", domain=(0, C - 1), tile=self.tile[1], dtype=np.int64, ctx=self.ctx), ctx=self.ctx)
        schema = tiledb.ArraySchema(domain=dom, sparse=False, cell_order="row-major", tile_order="row-major",
                                    attrs=[tiledb.Attr("a", dtype=np.int32, filters=tiledb.FilterList(f), ctx=self.ctx)],
                                    ctx=self.ctx)
        tiledb.Array.create(self.path, schema, ctx=self.ctx)

    def load(self, data: np.ndarray) -> None:
        self.create()
        with tiledb.open(self.path, "w", ctx=self.ctx) as A:
            A[:] = data

    def write_rows(self, r0: int, r1: int, data: np.ndarray) -> None:
        """Rows ``r0:r1`` (every column) of the created array: ``A[r0:r1, 0:C] = data`` on an array
        opened for writing (a fragment of its own; TileDB's writers are independent)."""
        with tiledb.open(self.path, "w", ctx=self.ctx) as A:
            A[r0:r1, 0:self.shape[1]] = data

    def open(self) -> None:
        self.A = tiledb.open(self.path, "r", ctx=self.ctx)

    def read(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        return self.A[r0:r1, c0:c1]["a"]

    def read_points(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        A = self.A
        return np.array([A[r, c]["a"] for r, c in zip(rows.tolist(), cols.tolist())], dtype=np.int32).reshape(-1)

    def update(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        R, C = self.shape
        tr, tc = self.tile
        with tiledb.open(self.path, "r", ctx=self.ctx) as A:
            tiles = {}
            for (i, j), idx in _tiles_touched(rows, cols, self.tile).items():
                r0, c0 = i * tr, j * tc
                r1, c1 = min(R, r0 + tr), min(C, c0 + tc)
                block = A[r0:r1, c0:c1]["a"]
                block[rows[idx] - r0, cols[idx] - c0] = values[idx]
                tiles[(r0, r1, c0, c1)] = block
        with tiledb.open(self.path, "w", ctx=self.ctx) as W:
            for (r0, r1, c0, c1), block in tiles.items():
                W[r0:r1, c0:c1] = block

    def close(self) -> None:
        if self.A is not None:
            self.A.close()
            self.A = None

    def fragments(self) -> int:
        return len(tiledb.array_fragments(self.path, ctx=self.ctx))

    def consolidate(self) -> None:
        tiledb.consolidate(self.path, ctx=self.ctx)
        tiledb.vacuum(self.path, ctx=self.ctx)
