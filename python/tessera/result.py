"""``Result``: what a read of a sparse array returns, a dict of equal-length 1-D numpy arrays
(multi-valued cells add a trailing axis), the dimension columns first, then the attributes, with
conversions to a pandas ``DataFrame`` and a pyarrow ``Table`` (pandas and pyarrow are optional
and imported only when asked for)."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional

import numpy as np

from .schema import BYTES, COMPLEX, FIXED_BYTES, MULTI, RAGGED, STR, Attr

__all__ = ["Result"]


def _import(module: str, method: str) -> Any:
    try:
        return __import__(module)
    except ImportError as e:
        raise ImportError(
            f"Result.{method}() needs {module}, which is not installed (pip install {module})"
        ) from e


class Result(Dict[str, np.ndarray]):
    """Cells of a sparse read: column name → numpy array, dimension columns first (in schema
    order), then the attributes (in the order asked for). Nullable attributes are
    ``numpy.ma.MaskedArray`` (masked where null); strings, bytes and ragged cells are object
    arrays."""

    def __init__(self, columns: Optional[Mapping[str, np.ndarray]] = None, attrs: Optional[Mapping[str, Attr]] = None):
        super().__init__(columns or {})
        # The attributes' schema entries, so conversions know strings from bytes even when empty.
        self._attrs: Dict[str, Attr] = dict(attrs or {})

    @property
    def cells(self) -> int:
        """Number of cells (rows)."""
        return len(next(iter(self.values()))) if self else 0

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` with one column per entry, in order. Null cells become ``<NA>``
        (nullable integer and float columns) or ``None``; multi-valued cells become 1-D arrays.
        Columns without nulls share the result's arrays instead of copying them (pandas would
        otherwise copy every column into one block per dtype: for a large read, more time than
        the read's own copies)."""
        pd = _import("pandas", "to_pandas")
        columns = {name: _pandas_column(pd, v) for name, v in self.items()}
        return pd.DataFrame(columns, columns=list(self), copy=False)

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` with one column per entry, in order: strings as ``string``, bytes
        as ``binary``, ragged cells as ``list``, multi-valued cells as ``fixed_size_list``,
        null cells as nulls. Complex numbers have no Arrow type (TypeError)."""
        pa = _import("pyarrow", "to_arrow")
        cols = {name: _arrow_column(pa, name, v, self._attrs.get(name)) for name, v in self.items()}
        return pa.table(cols)

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        """The Arrow PyCapsule stream interface: ``pyarrow.table(result)``, polars and DuckDB
        read a ``Result`` through it (fixed-size columns without copying)."""
        return self.to_arrow().__arrow_c_stream__(requested_schema)

    def __repr__(self) -> str:
        return f"Result({dict.__repr__(self)})"


def _split(v: np.ndarray) -> Any:
    """(values, mask or None) of a column."""
    if isinstance(v, np.ma.MaskedArray):
        mask = np.ma.getmaskarray(v)
        if mask.ndim > 1:
            mask = np.asarray(mask.any(axis=tuple(range(1, mask.ndim))))
        return v.data, mask
    return v, None


def _pandas_column(pd: Any, v: np.ndarray) -> Any:
    values, mask = _split(v)
    if values.ndim > 1:
        out = np.empty(len(values), dtype=object)
        out[:] = list(values)
        values = out
    if mask is None or not mask.any():
        return values
    if values.dtype.kind in "iu":
        return pd.arrays.IntegerArray(values, mask)
    if values.dtype.kind == "f":
        return pd.arrays.FloatingArray(values, mask)
    if values.dtype.kind == "b":
        return pd.arrays.BooleanArray(values, mask)
    if values.dtype.kind == "M":  # null times are NaT, as pandas shows them
        out = values.copy()
        out[mask] = np.datetime64("NaT")
        return out
    out = values.astype(object)
    out[mask] = None
    return out


def _arrow_column(pa: Any, name: str, v: np.ndarray, attr: Optional[Attr]) -> Any:
    values, mask = _split(v)
    kind = attr.kind if attr is not None else None
    if kind == COMPLEX or values.dtype.kind == "c":
        raise TypeError(f"column {name}: complex numbers have no Arrow type")
    if values.dtype == object:
        cells = values.tolist()
        if mask is not None:
            cells = [None if m else c for c, m in zip(cells, mask.tolist())]
        if kind == STR:
            return pa.array(cells, type=pa.string())
        if kind == BYTES:
            return pa.array(cells, type=pa.binary())
        if kind == RAGGED and attr is not None:
            item = pa.from_numpy_dtype(attr.base_dtype)
            return pa.array([None if c is None else np.asarray(c) for c in cells], type=pa.list_(item))
        return pa.array(cells)
    if kind == FIXED_BYTES or values.dtype.kind == "S":
        return pa.array(values.tolist(), type=pa.binary(values.dtype.itemsize), mask=mask)
    if kind == MULTI or values.ndim > 1:
        n = int(np.prod(values.shape[1:]))
        flat = pa.array(np.ascontiguousarray(values).reshape(-1))
        arr = pa.FixedSizeListArray.from_arrays(flat, n)
        if mask is not None and mask.any():
            arr = pa.array(
                [None if m else c for c, m in zip(arr.to_pylist(), mask.tolist())], type=arr.type
            )
        return arr
    if values.dtype.kind == "M" and np.datetime_data(values.dtype)[0] in ("h", "m"):
        values = values.astype("datetime64[s]")  # Arrow has no hour or minute timestamps
    return pa.array(values, mask=mask)
