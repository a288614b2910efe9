"""Tessera: a storage engine for dense multi-dimensional arrays, numpy in and numpy out.

>>> import numpy as np, tessera as ts
>>> schema = ts.ArraySchema(
...     dims=[ts.Dim("rows", domain=(1, 100), tile=10), ts.Dim("cols", domain=(1, 100), tile=10)],
...     attrs=[ts.Attr("a", dtype="int32", filters=[ts.Zstd(level=3)])])
>>> ts.create("img", schema)                                        # doctest: +SKIP
>>> with ts.open("img", "w") as A:                                  # doctest: +SKIP
...     A[1:51, 1:101] = np.arange(5000, dtype=np.int32).reshape(50, 100)
>>> with ts.open("img") as A:                                       # doctest: +SKIP
...     part = A[1:3, 1:4]                                          # half-open, domain coordinates
"""

from __future__ import annotations

from ._core import FORMAT_VERSION, __version__
from .array import Array, FragmentInfo, create, fragments, from_numpy, open
from .config import Config
from .errors import (
    ArrayError,
    ConfigError,
    CorruptionError,
    DomainError,
    QueryError,
    SchemaError,
    StorageError,
    TesseraError,
)
from .filters import ByteShuffle, Delta, Filter, Gzip, Lz4, Rle, Zstd
from .schema import ArraySchema, Attr, Dim

__all__ = [
    "FORMAT_VERSION",
    "Array",
    "ArrayError",
    "ArraySchema",
    "Attr",
    "ByteShuffle",
    "Config",
    "ConfigError",
    "CorruptionError",
    "Delta",
    "Dim",
    "DomainError",
    "Filter",
    "FragmentInfo",
    "Gzip",
    "Lz4",
    "QueryError",
    "Rle",
    "SchemaError",
    "StorageError",
    "TesseraError",
    "Zstd",
    "__version__",
    "create",
    "fragments",
    "from_numpy",
    "open",
]
