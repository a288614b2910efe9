"""Tessera: a storage engine for dense and sparse multi-dimensional arrays, numpy in and numpy out.

>>> import numpy as np, tessera as ts
>>> schema = ts.ArraySchema(
...     dims=[ts.Dim("rows", domain=(1, 100), tile=10), ts.Dim("cols", domain=(1, 100), tile=10)],
...     attrs=[ts.Attr("a", dtype="int32", filters=[ts.Zstd(level=3)])])
>>> ts.create("img", schema)                                        # doctest: +SKIP
>>> with ts.open("img", "w") as A:                                  # doctest: +SKIP
...     A[1:51, 1:101] = np.arange(5000, dtype=np.int32).reshape(50, 100)
>>> with ts.open("img") as A:                                       # doctest: +SKIP
...     part = A[1:3, 1:4]                                          # half-open, domain coordinates

Sparse arrays store only the cells written, with their coordinates (integers or floats):

>>> sparse = ts.ArraySchema(
...     dims=[ts.Dim("x", domain=(0.0, 1.0), dtype="float64"), ts.Dim("y", domain=(0.0, 1.0), dtype="float64")],
...     attrs=[ts.Attr("a", dtype="int32")], sparse=True)
>>> ts.create("pts", sparse)                                        # doctest: +SKIP
>>> with ts.open("pts", "w") as A:                                  # doctest: +SKIP
...     A.write({"x": xs, "y": ys}, {"a": vals})
>>> with ts.open("pts") as A:                                       # doctest: +SKIP
...     r = A.read(ranges={"x": [(0.25, 0.5)]})                     # inclusive; a ts.Result
...     df = r.to_pandas()                                          # columns x, y, a

Deletes write a delete fragment: cells at coordinates, or every cell in inclusive ranges (dense
arrays then read the fill value and null there; sparse arrays return nothing):

>>> with ts.open("pts", "w") as A:                                  # doctest: +SKIP
...     A.delete({"x": [0.5], "y": [0.25]})
...     A.delete(ranges={"x": [(0.0, 0.1)]})                        # other dimensions: whole

Each write adds a fragment; ``ts.consolidate`` merges fragments (all, by name, by timestamp
range, or size-tiered) and ``ts.vacuum`` deletes the ones it superseded (close open arrays
first: vacuum waits for them):

>>> ts.consolidate("img")                                           # doctest: +SKIP
>>> ts.vacuum("img")                                                # doctest: +SKIP

Statistics: ``ts.stats.enable()``, ``ts.stats.dump()``, ``ts.stats.json()``. Memory kept for
reuse between reads: ``ts.retained_memory()``, ``ts.set_retained_memory_limit(n)``,
``ts.release_memory()``.
"""

from __future__ import annotations

from . import stats
from ._core import FORMAT_VERSION, __version__, drop_caches
from .array import Array, FragmentInfo, create, fragments, from_numpy, open
from .config import Config, release_memory, retained_memory, set_retained_memory_limit
from .consolidation import VacuumReport, consolidate, consolidate_fragment_metadata, consolidation_plan, vacuum
from .errors import (
    ArgumentError,
    ArgumentTypeError,
    ArrayBusyError,
    ArrayError,
    ConfigError,
    ConsolidationConflictError,
    CorruptionError,
    DomainError,
    QueryError,
    SchemaError,
    StorageError,
    TesseraError,
)
from .filters import ByteShuffle, Delta, Filter, Gzip, Lz4, Rle, Zstd
from .frames import from_arrow, from_pandas, write_arrow, write_pandas
from .group import Group, object_kind
from .meta import Metadata, consolidate_metadata
from .result import Result
from .schema import SCHEMA_VERSION, ArraySchema, Attr, Dim, default_coord_filters

__all__ = [
    "FORMAT_VERSION",
    "SCHEMA_VERSION",
    "ArgumentError",
    "ArgumentTypeError",
    "Array",
    "ArrayBusyError",
    "ArrayError",
    "ArraySchema",
    "Attr",
    "ByteShuffle",
    "Config",
    "ConfigError",
    "ConsolidationConflictError",
    "CorruptionError",
    "Delta",
    "Dim",
    "DomainError",
    "Filter",
    "FragmentInfo",
    "Group",
    "Gzip",
    "Lz4",
    "Metadata",
    "QueryError",
    "Result",
    "Rle",
    "SchemaError",
    "StorageError",
    "TesseraError",
    "VacuumReport",
    "Zstd",
    "__version__",
    "consolidate",
    "consolidate_fragment_metadata",
    "consolidate_metadata",
    "consolidation_plan",
    "create",
    "default_coord_filters",
    "drop_caches",
    "fragments",
    "from_arrow",
    "from_numpy",
    "from_pandas",
    "object_kind",
    "open",
    "release_memory",
    "retained_memory",
    "set_retained_memory_limit",
    "stats",
    "vacuum",
    "write_arrow",
    "write_pandas",
]
