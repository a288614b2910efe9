"""Tessera (this project), through its Python API."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from . import Unsupported

try:
    import tessera as ts

    AVAILABLE, REASON, VERSION = True, "", ts.__version__
except Exception as e:  # noqa: BLE001
    ts = None
    AVAILABLE, REASON, VERSION = False, f"{type(e).__name__}: {e}", None

NAME = "tessera"
MMAP_COLD_NOTE = ("no cold figure in mmap mode: the engine keeps every file it mapped mapped for the life of the "
                  "process (contexts are cached), and posix_fadvise(DONTNEED) cannot evict mapped pages")


def _config(threads: Optional[int] = None, read_mode: Optional[str] = None,
            tile_chunk_size: Optional[int] = None) -> Optional[Dict[str, str]]:
    cfg: Dict[str, str] = {}
    if tile_chunk_size is not None:
        cfg["sm.tile_chunk_size"] = str(tile_chunk_size)
    if threads:
        cfg["sm.compute_concurrency"] = str(threads)
        cfg["sm.io_concurrency"] = str(threads)
    if read_mode:
        cfg["vfs.read_mode"] = read_mode
    return cfg or None


# -- sparse ---------------------------------------------------------------------------------
class Sparse:
    """A 2-D sparse array: int64 dims x, y with 10M x 10M space tiles, int64 attributes, data
    tiles of ``capacity`` cells. ``compressed``: attributes byte shuffle + zstd-3 (the pipeline
    TileDB's documentation advises for integers: it decodes 3-4x faster than zstd alone on these
    columns) and coordinates the default delta + byte shuffle + zstd-3; otherwise no filters. One write (one fragment) per batch, in any order
    (the engine sorts). Reads: ``A.read(ranges=..., order=...)`` with all attributes."""

    #: A write returns once its fragment is committed: data, metadata, folders and the commit
    #: record synced (docs/format.md, "Committing").
    durable_writes = True

    def __init__(self, path: str, compressed: bool, attrs: Sequence[str], domain: Tuple[int, int],
                 capacity: int = 10_000, tile: int = 10_000_000, order: str = "U", read_mode: Optional[str] = None) -> None:
        self.path, self.compressed, self.attrs = path, compressed, list(attrs)
        self.domain, self.capacity, self.tile, self.order = domain, capacity, tile, order
        self.engine = NAME + ("+z" if compressed else "") + ("" if order == "U" else f" (order {order})")
        self.config = _config(read_mode=read_mode)
        self.A: Any = None
        self.W: Any = None
        self.note = "" if read_mode is None else f"vfs.read_mode={read_mode}"
        self.cold_note = MMAP_COLD_NOTE if read_mode == "mmap" else ""

    def schema(self) -> Any:
        cf = None if self.compressed else []  # None: the engine's default delta + shuffle + zstd
        af = [ts.ByteShuffle(), ts.Zstd(level=3)] if self.compressed else []
        return ts.ArraySchema(
            dims=[ts.Dim("x", (0, self.domain[0] - 1), tile=self.tile, dtype="int64", filters=cf),
                  ts.Dim("y", (0, self.domain[1] - 1), tile=self.tile, dtype="int64", filters=cf)],
            attrs=[ts.Attr(a, "int64", filters=af) for a in self.attrs],
            sparse=True, capacity=self.capacity)

    def load(self, batches: Iterable[Dict[str, np.ndarray]]) -> None:
        ts.create(self.path, self.schema())
        with ts.open(self.path, "w") as A:
            for b in batches:
                A.write({"x": b["x"], "y": b["y"]}, {a: b[a] for a in self.attrs})

    def open(self) -> None:
        self.A = ts.open(self.path, config=self.config)

    def query(self, box: Tuple[int, int, int, int]) -> Dict[str, np.ndarray]:
        x0, x1, y0, y1 = box
        return self.A.read(ranges={"x": (x0, x1), "y": (y0, y1)}, order=self.order)

    def close(self) -> None:
        """Closes the array and empties the engine's tile cache (as a new process finds it), so
        that a cold run after ``close`` starts with nothing cached."""
        if self.A is not None:
            self.A.close()
            self.A = None
        ts.drop_caches()

    def fragments(self) -> int:
        with ts.open(self.path) as A:
            return len(A.fragments())

    def append(self, b: Dict[str, np.ndarray]) -> None:
        """One more write (one fragment, committed when ``write`` returns), through one writer
        kept open across appends."""
        if self.W is None:
            self.W = ts.open(self.path, "w")
        self.W.write({"x": b["x"], "y": b["y"]}, {a: b[a] for a in self.attrs})

    def end_appends(self) -> None:
        if self.W is not None:
            self.W.close()
            self.W = None

    def consolidate(self) -> None:
        """All fragments into one (``ts.consolidate``), then the old ones removed (``ts.vacuum``)."""
        ts.consolidate(self.path, config=self.config)
        ts.vacuum(self.path, config=self.config)


# -- dense ----------------------------------------------------------------------------------
class Dense:
    """A 2-D dense int32 array (int64 dims ``rows``, ``cols`` from 0), one attribute ``a``,
    row-major cells and tiles, filters none / gzip-6 / zstd-3. Writes: ``A[...] = data`` (one
    fragment). Reads: ``A[r0:r1, c0:c1]``. Random updates: ``A.write(coords, values)``, one
    sparse fragment (no data is rewritten). Random element reads: ``A.read_points(coords)``
    (each tile holding points is read once). Consolidation: ``ts.consolidate`` then
    ``ts.vacuum``. ``read_mode``: the engine's ``vfs.read_mode`` (default pread; the suite also
    runs reads with "mmap" as the engine ``tessera-mmap``). ``tile_chunk_size``: the engine's
    ``sm.tile_chunk_size`` (default ``auto``: filtered tiles are filtered in independent chunks
    of 64 KiB to 1 MiB chosen per tile from a sample of the data; the suite runs 0, whole tiles,
    as the engine ``tessera-whole``)."""

    point_reads_native = True

    def __init__(self, path: str, shape: Tuple[int, int], tile: Tuple[int, int], compression: str = "none",
                 threads: Optional[int] = None, read_mode: Optional[str] = None,
                 tile_chunk_size: Optional[int] = None) -> None:
        if tile_chunk_size is not None and compression == "none":
            raise Unsupported("the store of tessera: tiles without filters are stored whole at any chunk size")
        self.path, self.shape, self.tile, self.compression = path, shape, tile, compression
        self.engine = NAME + ("" if compression == "none" else f"+{compression}")
        self.config = _config(threads, read_mode, tile_chunk_size)
        self.cold_note = MMAP_COLD_NOTE if read_mode == "mmap" else ""
        self.A: Any = None
        self.notes: Dict[str, str] = {"points": "A.read_points(coords): one point read",
                                      "update": "A.write(coords, values): one sparse fragment"}

    def _filters(self) -> List[Any]:
        return {"none": [], "gzip": [ts.Gzip(level=6)], "zstd": [ts.Zstd(level=3)]}[self.compression]

    def create(self) -> None:
        """The empty array (schema only)."""
        R, C = self.shape
        schema = ts.ArraySchema(
            dims=[ts.Dim("rows", (0, R - 1), tile=self.tile[0], dtype="int64"),
                  ts.Dim("cols", (0, C - 1), tile=self.tile[1], dtype="int64")],
            attrs=[ts.Attr("a", "int32", filters=self._filters())])
        ts.create(self.path, schema, config=self.config)

    def write_rows(self, r0: int, r1: int, data: np.ndarray) -> None:
        """Rows ``r0:r1`` (every column) of the created array: open for writing, ``A[r0:r1, 0:C]
        = data`` (one fragment of its own; writers take no lock, so processes write at once)."""
        with ts.open(self.path, "w", config=self.config) as A:
            A[r0:r1, 0:self.shape[1]] = data

    def load(self, data: np.ndarray) -> None:
        self.create()
        self.write_rows(0, self.shape[0], data)

    def open(self) -> None:
        self.A = ts.open(self.path, config=self.config)

    def read(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        return self.A[r0:r1, c0:c1]

    def read_points(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return self.A.read_points({"rows": rows, "cols": cols})

    def update(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        with ts.open(self.path, "w", config=self.config) as A:
            A.write({"rows": rows, "cols": cols}, {"a": values})

    def close(self) -> None:
        """Closes the array and empties the engine's tile cache (as a new process finds it), so
        that a cold run after ``close`` starts with nothing cached."""
        if self.A is not None:
            self.A.close()
            self.A = None
        ts.drop_caches()

    def fragments(self) -> int:
        with ts.open(self.path, config=self.config) as A:
            return len(A.fragments())

    def consolidate(self) -> None:
        # Vacuum waits for every open array (readers hold the lock shared): close ours first.
        was_open = self.A is not None
        self.close()
        ts.consolidate(self.path, config=self.config)
        ts.vacuum(self.path, config=self.config)
        if was_open:
            self.open()
