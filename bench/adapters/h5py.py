"""HDF5 through h5py (chunked datasets; zstd through the hdf5plugin filter)."""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from . import Unsupported

try:
    import h5py

    AVAILABLE, REASON = True, ""
    VERSION = f"{h5py.__version__} (HDF5 {h5py.version.hdf5_version})"
except Exception as e:  # noqa: BLE001
    h5py = None
    AVAILABLE, REASON, VERSION = False, f"{type(e).__name__}: {e}", None

try:
    import hdf5plugin
except Exception:  # noqa: BLE001
    hdf5plugin = None

NAME = "hdf5"
BIG_CACHE = 1536 << 20  # the paper gave HDF5 an unlimited chunk cache for updates
# Several processes writing one file: not without parallel HDF5 (MPI-IO), which h5py from PyPI
# is not built with. The library caches metadata (chunk index, free space) in each process and
# writes it back on flush/close, so two writers overwrite each other's metadata; HDF5 >= 1.10
# locks the file against a second writer, and SWMR allows one writer with many readers.
CONCURRENT_WRITES = ("HDF5 without parallel HDF5 (MPI) cannot have two processes write one file: each caches the "
                     "file's metadata and writes it back (the file is locked against a second writer; SWMR allows "
                     "one writer only)")


class Dense:
    """A chunked dataset (chunks = the tiles), no filter, gzip-6 (deflate) or zstd-3
    (hdf5plugin). Load: ``d[...] = data``. Reads: ``d[r0:r1, c0:c1]`` with the default 1 MiB
    chunk cache (smaller than a chunk, so nothing is cached between reads, like the other
    engines). Random element reads and updates: ``H5Sselect_elements`` (the paper's method)
    through h5py's low-level API, on a file opened for the call with a 1.5 GiB chunk cache (so a
    compressed chunk is decompressed and recompressed once, not once per element); the open is
    timed."""

    point_reads_native = True

    def __init__(self, path: str, shape: Tuple[int, int], tile: Tuple[int, int], compression: str = "none",
                 threads: Optional[int] = None) -> None:
        self.path, self.shape, self.tile, self.compression = path, shape, tile, compression
        self.engine = NAME + ("" if compression == "none" else f"+{compression}")
        self.f: Any = None
        self.d: Any = None
        self.notes = {"points": "H5Sselect_elements (one call)", "update": "H5Sselect_elements in place (one call)"}
        if threads and threads > 1:
            self.notes["threads"] = "HDF5 is single-threaded"

    def _filter(self) -> Dict[str, Any]:
        if self.compression == "none":
            return {}
        if self.compression == "gzip":
            return {"compression": "gzip", "compression_opts": 6}
        if hdf5plugin is None:
            raise Unsupported("zstd needs the hdf5plugin package (not installed)")
        return dict(hdf5plugin.Zstd(clevel=3))

    def load(self, data: np.ndarray) -> None:
        with h5py.File(self.path, "w") as f:
            d = f.create_dataset("a", shape=self.shape, dtype=np.int32, chunks=self.tile, **self._filter())
            d[...] = data

    def create(self) -> None:
        """The file with the empty dataset (chunks are allocated when written)."""
        with h5py.File(self.path, "w") as f:
            f.create_dataset("a", shape=self.shape, dtype=np.int32, chunks=self.tile, **self._filter())

    def write_rows(self, r0: int, r1: int, data: np.ndarray) -> None:
        """Rows ``r0:r1`` of the created dataset: ``d[r0:r1, :] = data`` on the file opened "r+"
        (one writer at a time: see ``CONCURRENT_WRITES``)."""
        with h5py.File(self.path, "r+") as f:
            f["a"][r0:r1, :] = data

    def open(self) -> None:
        self.f = h5py.File(self.path, "r")
        self.d = self.f["a"]

    def read(self, r0: int, r1: int, c0: int, c1: int) -> np.ndarray:
        return self.d[r0:r1, c0:c1]

    @staticmethod
    def _select(d: Any, rows: np.ndarray, cols: np.ndarray) -> Tuple[Any, Any]:
        space = d.id.get_space()
        space.select_elements(np.stack([rows, cols], axis=1).astype(np.uint64))
        return h5py.h5s.create_simple((len(rows),)), space

    def read_points(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        with h5py.File(self.path, "r", rdcc_nbytes=BIG_CACHE, rdcc_nslots=100_003) as f:
            d = f["a"]
            mspace, fspace = self._select(d, rows, cols)
            out = np.empty(len(rows), dtype=np.int32)
            d.id.read(mspace, fspace, out)
        return out

    def update(self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray) -> None:
        with h5py.File(self.path, "r+", rdcc_nbytes=BIG_CACHE, rdcc_nslots=100_003) as f:
            d = f["a"]
            mspace, fspace = self._select(d, rows, cols)
            d.id.write(mspace, fspace, np.ascontiguousarray(values, dtype=np.int32))

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = self.d = None
