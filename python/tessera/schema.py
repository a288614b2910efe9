"""Schemas: dimensions (``Dim``), attributes (``Attr``) and the ``ArraySchema`` tying them
together. They are the engine's own schema classes (``tessera._core``, crates/tessera-py
``schema.rs``): each wraps the engine's ``Dimension``, ``Attribute`` or ``ArraySchema``, and the
engine validates the schema when the ``ArraySchema`` is made (``SchemaError``).

How numpy dtypes map onto the engine's datatypes (the engine's JSON records only the latter, so
a schema read back from disk is interpreted by the same rules):

=====================================  ===================================  =====================
numpy (``Attr(dtype=...)``)            engine (type, cell_val_num)          read back as
=====================================  ===================================  =====================
int8..uint64, float32, float64         same type, 1                         that dtype
``bool``                               bool (one byte 0/1), 1               bool
``"datetime64[u]"``, u in D h m s      datetime64[u] (int64 count, NaT =    ``datetime64[u]``
ms us ns (also for ``Dim``)            the smallest int64), 1
``"(3,)f4"`` or ``cell_val_num=3``     float32, 3                           extra trailing axis
complex64 / complex128                 float32 / float64, 2                 complex64 / complex128
``str``, ``"str"``, ``"U"``            utf8, var                            object array of str
``bytes``, ``"bytes"``                 uint8, var                           object array of bytes
``"S5"``                               utf8, 5                              ``S5``
numeric with ``var=True``              type, var                            object array of ndarrays
=====================================  ===================================  =====================

datetime64 dimensions take their domain, ranges, indices and coordinates as ``np.datetime64``
values, ISO 8601 text, ``datetime`` objects or int counts of the unit (``Dim.domain`` shows
``np.datetime64``; ``Dim.int_domain`` the counts); the tile extent as an int count or a
``np.timedelta64``. Values finer than the unit are refused, never truncated.

Two consequences of the engine having no complex or blob datatype: a float attribute with two
values per cell always reads as complex, and a variable-length uint8 attribute always reads as
``bytes``.
"""

from __future__ import annotations

from ._core import SCHEMA_VERSION, ArraySchema, Attr, Dim, default_coord_filters

# What a cell holds (``Attr.kind``), derived by the engine from (type, cell_val_num) alone.
NUM, MULTI, COMPLEX, STR, BYTES, FIXED_BYTES, RAGGED = "num", "multi", "complex", "str", "bytes", "sbytes", "ragged"

__all__ = [
    "BYTES",
    "COMPLEX",
    "FIXED_BYTES",
    "MULTI",
    "NUM",
    "RAGGED",
    "SCHEMA_VERSION",
    "STR",
    "ArraySchema",
    "Attr",
    "Dim",
    "default_coord_filters",
]
