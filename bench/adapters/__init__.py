"""One small adapter per engine, each using that library's fastest honest method.

Every module defines ``AVAILABLE`` (bool), ``REASON`` (why not, when not) and ``VERSION``, and
some of: ``Sparse`` (a sparse AIS-like point store: ``load(batches)``, ``open()``,
``query(box)``, ``close()``) and ``Dense`` (a dense 2-D int32 array: ``load``, subarray reads,
random element updates and reads; ``create`` and ``write_rows(r0, r1, data)`` for the parallel
writes: the empty array, then bands of rows written by several processes at once). A workload an
engine cannot do raises ``Unsupported`` with the reason, which the output and the tables report;
a module whose engine cannot have several processes write one store says why in
``CONCURRENT_WRITES`` (absent: it can).
"""

from __future__ import annotations

import importlib
from typing import Any, Dict


class Unsupported(Exception):
    """The engine cannot run this workload (the message says why)."""


NAMES = ("tessera", "tiledb", "h5py", "zarr", "tensorstore", "duckdb", "parquet")


def load(name: str) -> Any:
    """The adapter module ``name`` (its ``AVAILABLE``/``REASON`` say whether its library is
    installed)."""
    return importlib.import_module(f"adapters.{name}")


def all_adapters() -> Dict[str, Any]:
    return {n: load(n) for n in NAMES}
