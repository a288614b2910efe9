"""Tables in and out: pandas DataFrames and Arrow tables as sparse arrays, and reads as
DataFrames.

>>> ts.from_pandas(df, "pts", dims=["x", "y"])                      # doctest: +SKIP
>>> ts.from_arrow(table, "pts2", dims=["x", "y"])                   # any Arrow stream
>>> with ts.open("pts") as A:                                       # doctest: +SKIP
...     A.df[0:100, :]                                              # a DataFrame
...     pa.table(A.read())                                          # Arrow, through the C stream

Columns named in ``dims`` become the dimensions (their domain: the whole range of the column's
type unless ``domains`` says otherwise; all dimensions share one type), the others attributes,
with each column's type: integers, floats, strings, bytes and nullable columns (pandas' ``<NA>``,
Arrow's nulls). Arrow columns of fixed-size values without nulls reach the engine without a copy
(numpy views of the Arrow buffers); a ``Result`` gives itself to Arrow through the Arrow PyCapsule
(C data) interface, so ``pyarrow.table(result)``, polars and DuckDB take it without a copy of
fixed-size columns.
"""

from __future__ import annotations

import importlib
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import array as _array
from .config import ConfigLike
from .errors import ArgumentError, ArgumentTypeError
from .filters import Filter
from .result import Result
from .schema import ArraySchema, Attr, Dim

__all__ = ["from_arrow", "from_pandas", "write_arrow", "write_pandas"]


def _pa() -> Any:
    try:
        pa = importlib.import_module("pyarrow")
    except ImportError as e:
        raise ImportError("Arrow tables need pyarrow (pip install pyarrow)") from e
    return pa


def _table(data: Any) -> Any:
    """A ``pyarrow.Table`` of a Table, a RecordBatch or any object with ``__arrow_c_stream__``."""
    pa = _pa()
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
        return pa.table(data)
    raise ArgumentTypeError(f"expected an Arrow table, record batch or stream, not {type(data).__name__}")


def _column(pa: Any, col: Any, name: str) -> Any:
    """A numpy column (a view of the Arrow buffers when fixed-size without nulls), a masked
    array for nullable numbers, or a list for strings and bytes (``None`` for nulls)."""
    if isinstance(col, pa.ChunkedArray):  # one chunk: its buffers as they are; several: joined
        col = col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return col.to_pylist()
    if pa.types.is_null(t):  # only nulls (a pandas object column of None): a nullable text column
        return [None] * len(col)
    if pa.types.is_dictionary(t):
        return col.cast(t.value_type).to_pylist()
    if pa.types.is_boolean(t):  # bit-packed in Arrow: one byte per value here
        values = col.fill_null(False).to_numpy(zero_copy_only=False)
    elif pa.types.is_timestamp(t) or pa.types.is_date(t):  # UTC counts of the unit (dates: days)
        values = col.to_numpy(zero_copy_only=False)
        values = values.astype("datetime64[D]") if pa.types.is_date32(t) else values
    elif pa.types.is_integer(t) or pa.types.is_floating(t):
        if col.null_count == 0:
            return col.to_numpy(zero_copy_only=True)
        values = col.fill_null(0).to_numpy(zero_copy_only=False)
    else:
        raise ArgumentTypeError(
            f"column {name}: Arrow type {t} is not supported (integers, floats, bools, timestamps, dates, strings, "
            "bytes)"
        )
    if col.null_count == 0:
        return values
    return np.ma.MaskedArray(values, mask=col.is_null().to_numpy(zero_copy_only=False))


def _arrow_columns(data: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(column name → values, column name → Arrow type) of an Arrow table-like."""
    pa = _pa()
    table = _table(data)
    return ({n: _column(pa, table.column(n), n) for n in table.column_names},
            {f.name: f for f in table.schema})


def _schema(columns: Mapping[str, Any], fields: Mapping[str, Any], dims: Sequence[str],
            domains: Optional[Mapping[str, Tuple[Any, Any]]], tiles: Optional[Mapping[str, Any]],
            capacity: Optional[int], allows_duplicates: bool, filters: Sequence[Filter]) -> ArraySchema:
    pa = _pa()
    missing = [d for d in dims if d not in columns]
    if missing or not dims:
        raise ArgumentError(f"dims must name columns of the table; missing: {missing or 'none given'}")
    out_dims = []
    for d in dims:
        col = columns[d]
        if not isinstance(col, np.ndarray) or isinstance(col, np.ma.MaskedArray):
            raise ArgumentError(f"dimension column {d} must hold numbers without nulls")
        if domains and d in domains:
            lo, hi = domains[d]
        elif col.dtype.kind in "iu":  # the whole range of the type: later writes may go anywhere
            info = np.iinfo(col.dtype)
            signed = info.min < 0  # at most 2^64 - 1 values
            lo, hi = int(info.min) + int(signed), int(info.max) - int(not signed)
        elif col.dtype.kind == "f":
            finfo = np.finfo(col.dtype)
            lo, hi = float(-finfo.max), float(finfo.max)
        elif col.dtype.kind == "M":  # every time but NaT, as counts of the unit
            lo, hi = -(2**63) + 1, 2**63 - 1
        else:
            raise ArgumentError(
                f"dimension column {d} holds {col.dtype}: dimensions are integers, floats or datetime64"
            )
        out_dims.append(Dim(d, (lo, hi), (tiles or {}).get(d), dtype=col.dtype))
    attrs = []
    for name, col in columns.items():
        if name in dims:
            continue
        field = fields.get(name)
        if isinstance(col, list):
            is_text = field is None or not (pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type))
            kind: Any = str if is_text else bytes
            attrs.append(Attr(name, kind, filters=list(filters), nullable=any(v is None for v in col)))
        else:
            attrs.append(Attr(name, col.dtype, filters=list(filters), nullable=isinstance(col, np.ma.MaskedArray)))
    if not attrs:
        raise ArgumentError("the table has no column besides the dimensions: an array needs an attribute")
    return ArraySchema(dims=out_dims, attrs=attrs, sparse=True, capacity=capacity,
                       allows_duplicates=allows_duplicates)


def _write(uri: _array.PathLike, columns: Mapping[str, Any], dims: Sequence[str], config: Optional[ConfigLike]) -> str:
    with _array.open(uri, "w", config=config) as A:
        unknown = [c for c in columns if c not in A.dim_names and c not in A.attr_names]
        if unknown:
            raise ArgumentError(f"columns {unknown} are neither dimensions nor attributes of {A.uri}")
        return A.write({d: columns[d] for d in dims}, {c: v for c, v in columns.items() if c not in dims})


def _create_and_write(uri: _array.PathLike, columns: Dict[str, Any], fields: Dict[str, Any], dims: Sequence[str],
                      kwargs: Dict[str, Any], config: Optional[ConfigLike]) -> str:
    schema = _schema(columns, fields, dims, **kwargs)
    made = _array._made_by_create(_array._uri(uri))
    try:
        _array.create(uri, schema, config)
        _write(uri, columns, dims, config)
    except BaseException:
        _array._remove_made(made)
        raise
    return str(uri)


def from_arrow(data: Any, uri: _array.PathLike, dims: Sequence[str], *,
               domains: Optional[Mapping[str, Tuple[Any, Any]]] = None, tiles: Optional[Mapping[str, Any]] = None,
               capacity: Optional[int] = None, allows_duplicates: bool = False, filters: Sequence[Filter] = (),
               config: Optional[ConfigLike] = None) -> str:
    """Creates a sparse array at ``uri`` from an Arrow table, record batch or stream (anything
    with ``__arrow_c_stream__``) and writes its rows as one fragment; all or nothing. Returns
    the uri."""
    columns, fields = _arrow_columns(data)
    kwargs = {"domains": domains, "tiles": tiles, "capacity": capacity, "allows_duplicates": allows_duplicates,
              "filters": filters}
    return _create_and_write(uri, columns, fields, dims, kwargs, config)


def _pandas_columns(df: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    pa = _pa()
    return _arrow_columns(pa.Table.from_pandas(df, preserve_index=False))


def from_pandas(df: Any, uri: _array.PathLike, dims: Sequence[str], *,
                domains: Optional[Mapping[str, Tuple[Any, Any]]] = None, tiles: Optional[Mapping[str, Any]] = None,
                capacity: Optional[int] = None, allows_duplicates: bool = False, filters: Sequence[Filter] = (),
                config: Optional[ConfigLike] = None) -> str:
    """Creates a sparse array at ``uri`` from a pandas DataFrame (through Arrow) and writes its
    rows as one fragment; ``dims`` are the coordinate columns. All or nothing."""
    columns, fields = _pandas_columns(df)
    kwargs = {"domains": domains, "tiles": tiles, "capacity": capacity, "allows_duplicates": allows_duplicates,
              "filters": filters}
    return _create_and_write(uri, columns, fields, dims, kwargs, config)


def write_arrow(uri: _array.PathLike, data: Any, config: Optional[ConfigLike] = None) -> str:
    """Writes the rows of an Arrow table-like into the existing sparse array at ``uri`` as one
    fragment (columns named as its dimensions and attributes); returns the fragment's name."""
    columns, _ = _arrow_columns(data)
    with _array.open(uri, "r", config=config) as A:
        dims: List[str] = list(A.dim_names)
    return _write(uri, columns, dims, config)


def write_pandas(uri: _array.PathLike, df: Any, config: Optional[ConfigLike] = None) -> str:
    """``write_arrow`` for a pandas DataFrame."""
    columns, _ = _pandas_columns(df)
    with _array.open(uri, "r", config=config) as A:
        dims: List[str] = list(A.dim_names)
    return _write(uri, columns, dims, config)


class DataFrameIndexer:
    """``A.df[...]``: what ``A[...]`` selects, as a pandas DataFrame (dense arrays: one row per
    cell, the coordinates then the attributes, row-major)."""

    def __init__(self, array: _array.Array) -> None:
        self._array = array

    def __getitem__(self, key: Any) -> Any:
        pd = importlib.import_module("pandas")
        A = self._array
        if A.sparse:
            res = A[key]
            assert isinstance(res, Result)
            return res.to_pandas()
        ranges, _ = A._selection(key)
        values = A._read(ranges, list(A.schema.attrs), "C", None)
        vals = values if isinstance(values, dict) else {A.attr_names[0]: values}
        axes = [_axis(lo, hi, d.dtype) for ((lo, hi),), d in zip(ranges, A.schema.dims)]
        grids = np.meshgrid(*axes, indexing="ij") if axes else []
        cols: Dict[str, Any] = {d.name: g.reshape(-1) for d, g in zip(A.schema.dims, grids)}
        for name, v in vals.items():
            n = int(np.prod(v.shape[: A.ndim]))
            cols[name] = v.reshape((n,) + v.shape[A.ndim:]) if v.ndim > A.ndim else v.reshape(n)
        return pd.DataFrame(cols)


def _axis(lo: int, hi: int, dtype: np.dtype) -> np.ndarray:
    """The coordinates ``lo..=hi`` of a dimension (datetime64: counts of the unit) in its dtype."""
    if dtype.kind == "M":
        return np.arange(lo, hi + 1, dtype=np.int64).view(dtype)
    return np.arange(lo, hi + 1, dtype=dtype)
