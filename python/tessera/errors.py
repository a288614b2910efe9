"""The exception hierarchy of Tessera (created in the binding, ``tessera._core``).

``TesseraError`` is the base class; each subclass is one kind of failure:

* ``SchemaError``: an invalid schema (dimensions, attributes, filters, datatypes).
* ``DomainError``: a subarray outside the domain, reversed, or with the wrong number of dimensions.
* ``QueryError``: any other bad query (buffer size or dtype, unknown attribute, wrong mode,
  layout, write state, a closed array).

  * ``ArgumentError``: an argument with a bad value (a negative or too large timestamp or
    budget, an unknown mode or order, text UTF-8 cannot encode); also a ``ValueError``.
  * ``ArgumentTypeError``: an argument of the wrong type; also a ``TypeError``.
* ``ArrayError``: no array at the path, a folder that is not an array, or one that already exists.

  * ``ArrayBusyError``: the array's lock stayed held longer than ``sm.vacuum.lock_timeout_ms``:
    ``ts.vacuum`` waiting for readers and writers (arrays open for reading, in any process,
    this one included), or a reader or writer waiting for a vacuum.
  * ``ConsolidationConflictError``: ``ts.consolidate`` committed nothing because another
    consolidation (in any process) replaced some of the same fragments first; the array is
    unchanged and the other consolidation's result is visible.

* ``ConfigError``: an unknown configuration key or a bad value.
* ``CorruptionError``: bytes on disk are wrong; the message names the file and the tile.
* ``StorageError``: an I/O failure.

Every one of them also says where it happened, as far as the engine knows, in the attributes
``array``, ``fragment``, ``file`` (paths as ``str``), ``tile``, ``cell`` (``int``), ``attribute``
and ``dimension`` (``str``), each ``None`` when unknown::

    try:
        A[0:10]
    except ts.CorruptionError as e:
        print(e.fragment, e.file, e.tile)
"""

from __future__ import annotations

from typing import TypeVar

from ._core import (
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

_E = TypeVar("_E", bound=TesseraError)


def located(err: _E, *, attribute: str | None = None, dimension: str | None = None) -> _E:
    """``err`` with the attribute or dimension it concerns set (errors raised by the package)."""
    if attribute is not None:
        err.attribute = attribute
    if dimension is not None:
        err.dimension = dimension
    return err


class ArgumentError(QueryError, ValueError):
    """An argument with a bad value (also a ``ValueError``): the message names the argument."""

    __module__ = "tessera"


class ArgumentTypeError(QueryError, TypeError):
    """An argument of the wrong type (also a ``TypeError``): the message names the argument."""

    __module__ = "tessera"


__all__ = [
    "ArgumentError",
    "ArgumentTypeError",
    "ArrayBusyError",
    "ArrayError",
    "ConfigError",
    "ConsolidationConflictError",
    "CorruptionError",
    "DomainError",
    "QueryError",
    "SchemaError",
    "StorageError",
    "TesseraError",
]
