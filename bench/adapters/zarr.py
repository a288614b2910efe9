"""Zarr v3 (zarr-python 3, local store)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import Unsupported

try:
    import zarr
    from zarr.codecs import GzipCodec, ZstdCodec

    AVAILABLE, REASON, VERSION = True, "", zarr.__version__
except Exception as e:  # noqa: BLE001
    zarr = None
    AVAILABLE, REASON, VERSION = False, f"{type(e).__name__}: {e}", None

NAME = "zarr"


class Dense:
    """A Zarr v3 array with chunks = the tiles, no compressor, gzip-6 or zstd-3 (no shuffle).
    Load: ``z[:] = data``. Reads: ``z[r0:r1, c0:c1]``. Random element reads and updates:
    ``z.vindex[rows, cols]`` (coordinate selection; an update rewrites every touched chunk)."""

    point_reads_native = True

    def __init__(self, path: str, shape: Tuple[int, int], tile: Tuple[int, int], compression: str = "none",
                 threads: Optional[int] = None) -> None:
        self.path, self.shape, self.tile, self.compression = path, shape, tile, compression
        self.engine = NAME + ("" if compression == "none" else f"+{compression}")
        self.z: Any = None
        self.notes = {"points": "z.vindex (coordinate selection)", "update": "z.vindex[...] = v (chunks rewritten)"}
        if threads:
            zarr.config.set({"threading.max_workers": threads, "async.concurrency": max(1, threads)})

    def create(self) -> Any:
        """The empty array (metadata only); returns it."""
        comp = {"none": None, "gzip": GzipCodec(level=6), "zstd": ZstdCodec(level=3)}[self.compression]
        return zarr.create_array(store=self.path, shape=self.shape, chunks=self.tile, dtype="int32",
                                 compressors=comp, filters=None, fill_value=0, overwrite=True)

    def load(self, data: np.ndarray) -> None:
        z = self.create()
        z[:] = data

    def write_rows(self, r0: int, r1: int, data: np.ndarray) -> None:
        """Rows ``r0:r1`` of the created array: ``z[r0:r1, :] = data`` on the array opened "r+"
        (one file per chunk: processes writing disjoint whole chunks do not meet)."""
        z = zarr.open_array(self.path, mode="r+")
        z[r0:r1, :] = data

    def open(self) -> None:
        self.z = zarr.open_array(self.path, mode="r")

    def read(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        return self.z[r0:r1, c0:c1]

    def read_points(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return self.z.vindex[rows, cols]

    def update(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        z = zarr.open_array(self.path, mode="r+")
        z.vindex[rows, cols] = values

    def close(self) -> None:
        self.z = None
