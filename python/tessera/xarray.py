"""xarray: ``xr.open_dataset(uri, engine="tessera")`` opens a Tessera group (or a single array)
lazily as a Dataset, and ``tessera.xarray.to_tessera(ds, uri)`` writes a Dataset, whole or into a
region of one written before.

>>> ds = xr.open_dataset("era5", engine="tessera")                   # doctest: +SKIP
>>> ds = xr.open_dataset("era5", engine="tessera", chunks={})        # dask, chunks of whole tiles
>>> tessera.xarray.to_tessera(ds, "copy")                            # doctest: +SKIP
>>> tessera.xarray.to_tessera(ds.isel(time=slice(0, 10)), "copy", region={"time": slice(0, 10)})

The layout is Zarr's, in Tessera's terms: a Dataset is a group; each variable (data and
coordinate variables alike) is a dense array member of the same name with the variable's
dimensions (domains ``[0, n - 1]``) and one attribute, ``values``, holding its CF-encoded values
(xarray's own encoder: times as integers with ``units`` and ``calendar``, ``scale_factor``/
``add_offset`` packing, ``_FillValue``), or, with ``to_tessera(..., native_times=True)``,
datetime64 variables as datetime64 attributes (no CF time encoding needed to read them). A
variable's encoded attributes are the array's metadata ``xarray.attrs`` (JSON); the Dataset's
attributes are the group's. Opening decodes with xarray's decoder, so ``mask_and_scale``, ``decode_times`` and the other
``open_dataset`` options behave as for netCDF and Zarr. Reads go to one snapshot: the group's
arrays are opened at the time ``open_dataset`` was called.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

import numpy as np

from . import array as _array
from .config import ConfigLike
from .errors import ArgumentError, QueryError
from .group import Group, object_kind
from .schema import ArraySchema, Attr, Dim

try:
    import xarray as xr
    from xarray.backends import BackendArray, BackendEntrypoint
    from xarray.core import indexing
except ImportError as e:  # pragma: no cover - exercised only without xarray
    raise ImportError("tessera.xarray needs xarray (pip install xarray)") from e

__all__ = ["TesseraBackendEntrypoint", "to_tessera"]

#: Metadata key of a variable's (encoded) attributes, and of a Dataset's on its group.
ATTRS_KEY = "xarray.attrs"
#: The attribute holding a variable's values in its array (named apart from the dimensions).
VALUES_ATTR = "values"
#: Dimension name given to 0-d variables (Tessera arrays have at least one dimension).
SCALAR_DIM = "xarray_scalar"


# -- reading ---------------------------------------------------------------------------------


class TesseraBackendArray(BackendArray):
    """One attribute of a dense array, read lazily (basic indexing) from a fixed snapshot."""

    def __init__(self, uri: str, attr: str, shape: Tuple[int, ...], dtype: np.dtype, origin: Tuple[int, ...],
                 timestamp: int, config: Optional[ConfigLike]) -> None:
        self.uri = uri
        self.attr = attr
        self.shape = shape
        self.dtype = dtype
        self.origin = origin
        self.timestamp = timestamp
        self.config = config

    def __getitem__(self, key: Any) -> np.ndarray:
        key = _no_empty_reversed_slices(key, self.shape)
        out = indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.OUTER, self._read)
        return np.asarray(out)

    def _read(self, key: Tuple[Any, ...]) -> np.ndarray:
        """Reads the bounding box of ``key`` (ints, slices, integer arrays per axis), then
        picks the cells of steps and arrays with numpy, axis by axis."""
        ranges: List[Any] = []
        picks: List[Any] = []  # per axis: None (all), an index array, or an int (axis dropped)
        for k, n, o in zip(key, self.shape, self.origin):
            if isinstance(k, (int, np.integer)):
                i = int(k) + (n if k < 0 else 0)
                ranges.append([(o + i, o + i)])
                picks.append(0)
                continue
            if isinstance(k, slice):
                idx = np.arange(*k.indices(n), dtype=np.int64)
            else:
                idx = np.asarray(k, dtype=np.int64)
                idx = np.where(idx < 0, idx + n, idx)
            if idx.size == 0:
                shape = [len(np.arange(*q.indices(m))) if isinstance(q, slice) else np.size(q)
                         for q, m in zip(key, self.shape) if not isinstance(q, (int, np.integer))]
                return np.empty(shape, self.dtype)
            lo, hi = int(idx.min()), int(idx.max())
            ranges.append([(o + lo, o + hi)])
            dense_step = isinstance(k, slice) and (k.step in (None, 1))
            picks.append(None if dense_step else idx - lo)
        with _array.open(self.uri, "r", timestamp=self.timestamp, config=self.config) as A:
            data = A.read(ranges=ranges, attrs=[self.attr])
        assert isinstance(data, np.ndarray)
        data = np.ma.filled(data) if isinstance(data, np.ma.MaskedArray) else data
        axis = 0
        for p in picks:
            if p is None:
                axis += 1
            elif isinstance(p, int):
                data = np.take(data, 0, axis=axis)
            else:
                data = np.take(data, p, axis=axis)
                axis += 1
        return np.asarray(data)


def _no_empty_reversed_slices(key: Any, shape: Tuple[int, ...]) -> Any:
    """``key`` with empty slices of negative step made ``slice(0, 0)``: xarray's indexer
    decomposition fails on them (an IndexError in ``_decompose_slice``)."""
    parts = list(key.tuple)
    changed = False
    for i, (k, n) in enumerate(zip(parts, shape)):
        if isinstance(k, slice) and (k.step or 1) < 0 and len(range(*k.indices(n))) == 0:
            parts[i] = slice(0, 0)
            changed = True
    return type(key)(tuple(parts)) if changed else key


def _json_meta(meta: Mapping[str, Any], key: str) -> Dict[str, Any]:
    raw = meta.get(key)
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except (TypeError, ValueError) as e:
        raise QueryError(f"metadata {key!r} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise QueryError(f"metadata {key!r} is not a JSON object")
    return value


def _decode_attr(v: Any) -> Any:
    """An attribute value from its JSON form (numpy scalars and arrays keep their dtype)."""
    if isinstance(v, dict) and "__numpy__" in v:
        dtype = np.dtype(v["__numpy__"])
        return np.array(v["values"], dtype=dtype) if "values" in v else dtype.type(v["value"])
    return v


def _array_variables(
    uri: str, timestamp: int, config: Optional[ConfigLike], name: Optional[str] = None
) -> Dict[str, Any]:
    """The encoded variables of one dense array: one per attribute, named after it; a group
    member with one attribute gives one variable named ``name`` (the member's)."""
    out = {}
    with _array.open(uri, "r", timestamp=timestamp, config=config) as A:
        if A.sparse:
            raise QueryError(f"array {A.uri} is sparse: xarray opens dense arrays (read sparse ones with A.read())")
        attrs = {k: _decode_attr(v) for k, v in _json_meta(A.meta, ATTRS_KEY).items()}
        dims = tuple(d.name for d in A.schema.dims)
        shape = A.schema.shape
        origin = tuple(int(d.int_domain[0]) for d in A.schema.dims)
        single = name is not None and len(A.schema.attrs) == 1
        for a in A.schema.attrs:
            if a.var or a.cell_val_num != 1:
                continue  # variable-length and multi-valued cells have no xarray form
            var_name = name if single and name is not None else a.name
            backend = TesseraBackendArray(A.uri, a.name, shape, np.dtype(a.dtype), origin, timestamp, config)
            if dims == (SCALAR_DIM,):
                out[var_name] = xr.Variable((), backend._read((0,)), dict(attrs))
            else:
                tiles = {d.name: int(d.tile or 1) for d in A.schema.dims}  # chunks={}: whole tiles
                out[var_name] = xr.Variable(
                    dims, indexing.LazilyIndexedArray(backend), dict(attrs), encoding={"preferred_chunks": tiles}
                )
    return out


class TesseraBackendEntrypoint(BackendEntrypoint):
    """``xr.open_dataset(uri, engine="tessera")``: a group of dense arrays (or one dense array)."""

    description = "Open Tessera groups and dense arrays (tessera.xarray)"
    url = "https://github.com/tessera/tessera"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "timestamp", "config")

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        try:
            return object_kind(os.fspath(filename_or_obj)) is not None
        except Exception:  # not a path the engine accepts
            return False

    def open_dataset(
        self,
        filename_or_obj: Any,
        *,
        drop_variables: Optional[Iterable[str]] = None,
        mask_and_scale: bool = True,
        decode_times: Any = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        use_cftime: Optional[bool] = None,
        decode_timedelta: Optional[bool] = None,
        timestamp: Optional[int] = None,
        config: Optional[ConfigLike] = None,
    ) -> "xr.Dataset":
        uri = os.fspath(filename_or_obj)
        ts = timestamp if timestamp is not None else time.time_ns() // 1_000_000
        kind = object_kind(uri, config)
        variables: Dict[str, Any] = {}
        attrs: Dict[str, Any] = {}
        if kind == "group":
            with Group(uri, timestamp=ts, config=config) as G:
                attrs = {k: _decode_attr(v) for k, v in _json_meta(G.meta, ATTRS_KEY).items()}
                for name, member in G.members().items():
                    if member == "array":
                        variables.update(_array_variables(G.member_uri(name), ts, config, name))
        elif kind == "array":
            variables = _array_variables(uri, ts, config)
        else:
            raise QueryError(f"{uri} is neither a Tessera group nor a Tessera array")
        drop = set(drop_variables or ())
        variables = {k: v for k, v in variables.items() if k not in drop}
        ds = xr.Dataset(variables, attrs=attrs)
        ds = xr.decode_cf(ds, mask_and_scale=mask_and_scale, decode_times=decode_times,
                          concat_characters=concat_characters, decode_coords=decode_coords,
                          use_cftime=use_cftime, decode_timedelta=decode_timedelta)
        ds.set_close(None)
        return ds


# -- writing ---------------------------------------------------------------------------------


def _encode(ds: "xr.Dataset") -> Tuple[Dict[str, "xr.Variable"], Dict[str, Any]]:
    """The CF-encoded variables (coordinates included) and attributes of ``ds``."""
    variables, attrs = xr.conventions.encode_dataset_coordinates(ds)
    encoded, attrs = xr.conventions.cf_encoder(variables, attrs)
    return dict(encoded), dict(attrs)


#: datetime64 units a Tessera attribute holds (``native_times``).
_NATIVE_UNITS = ("D", "h", "m", "s", "ms", "us", "ns")

#: Attributes CF time encoding adds, dropped from natively stored times.
_TIME_ENCODING = ("units", "calendar", "dtype", "_FillValue", "missing_value")


def _native(var: "xr.Variable", encoded: "xr.Variable") -> Optional["xr.Variable"]:
    """``var`` as stored natively (a datetime64 attribute, its values as they are, without CF
    time attributes) when it holds datetime64 values of a unit Tessera has; else None."""
    if var.dtype.kind != "M" or np.datetime_data(var.dtype)[0] not in _NATIVE_UNITS:
        return None
    attrs = {k: v for k, v in encoded.attrs.items() if k not in _TIME_ENCODING}
    return xr.Variable(var.dims, var.data, attrs)


def _jsonable(attrs: Mapping[str, Any]) -> str:
    def conv(v: Any) -> Any:
        # numpy values keep their dtype (a float32 scale_factor decodes to float32 data)
        if isinstance(v, np.ndarray):
            return {"__numpy__": v.dtype.str, "values": v.tolist()}
        if isinstance(v, np.generic):
            return {"__numpy__": v.dtype.str, "value": v.item()}
        if isinstance(v, (list, tuple)):
            return [conv(x) for x in v]
        return v

    try:
        return json.dumps({k: conv(v) for k, v in attrs.items()})
    except TypeError as e:
        raise ArgumentError(f"an attribute cannot be stored: {e}") from None


def _tiles(shape: Tuple[int, ...], itemsize: int, chunks: Optional[Tuple[Tuple[int, ...], ...]]) -> List[int]:
    if chunks:
        return [max(1, c[0]) for c in chunks]
    return _array._default_tiles(shape, itemsize)


def _write_values(uri: str, var: "xr.Variable", origin: Tuple[int, ...], config: Optional[ConfigLike]) -> None:
    data = var.data
    shape = var.shape if var.ndim else (1,)
    if hasattr(data, "dask") and var.ndim:
        from . import dask as tsd

        tsd.to_tessera(data, uri, attr=VALUES_ATTR, region=origin, config=config)
        return
    values = np.asarray(data).reshape(shape)
    sel = tuple(slice(o, o + n) for o, n in zip(origin, shape))
    with _array.open(uri, "w", config=config) as A:
        A[sel] = {VALUES_ATTR: np.ascontiguousarray(values)}


def to_tessera(
    ds: "xr.Dataset",
    uri: _array.PathLike,
    *,
    region: Optional[Mapping[str, slice]] = None,
    filters: Any = (),
    native_times: bool = False,
    config: Optional[ConfigLike] = None,
) -> str:
    """Writes ``ds`` as a group at ``uri`` (which must not hold anything): one dense array per
    variable, tiles of the dask chunks or about 1 MiB, each with ``filters``; attributes and
    encodings as the module says. ``region`` ({dim: slice}) writes ``ds`` into the group written
    before instead: every variable of ``ds`` must use a region dimension and exist there with the
    same dimensions, and is encoded with the stored encoding (units, scale, fill). ``native_times``:
    datetime64 variables are stored as they are, in datetime64 attributes (exact at any
    resolution, NaT kept), instead of CF-encoded integers with ``units``; readers need no CF
    decoding for them. Returns the uri."""
    if not isinstance(ds, xr.Dataset):
        raise ArgumentError(f"ds is an xarray.Dataset, not {type(ds).__name__}")
    path = os.fspath(uri)
    if region is not None:
        _write_region(ds, path, region, config)
        return path
    encoded, attrs = _encode(ds)
    if native_times:
        for name, var in ds.variables.items():
            native = _native(var, encoded[str(name)]) if name in encoded else None
            if native is not None:
                encoded[str(name)] = native
    Group.create(path, config)
    with Group(path, "w", config=config) as G:
        G.meta[ATTRS_KEY] = _jsonable(attrs)
        for name, var in encoded.items():
            dims = var.dims if var.ndim else (SCALAR_DIM,)
            shape = var.shape if var.ndim else (1,)
            dtype: Any = var.dtype if var.dtype.kind not in "OU" else str
            chunks = var.chunks if hasattr(var.data, "dask") else None
            tiles = _tiles(shape, max(var.dtype.itemsize, 1), chunks)
            schema = ArraySchema(
                dims=[Dim(str(d), (0, n - 1), t) for d, n, t in zip(dims, shape, tiles)],
                attrs=[Attr(VALUES_ATTR, dtype, filters=list(filters))],
            )
            member = G.create_array(name, schema)
            _write_values(member, var, (0,) * len(shape), config)
            with _array.open(member, "w", config=config) as A:
                A.meta[ATTRS_KEY] = _jsonable(var.attrs)
    return path


def _write_region(ds: "xr.Dataset", path: str, region: Mapping[str, slice], config: Optional[ConfigLike]) -> None:
    stored = xr.open_dataset(path, engine="tessera", config=config, mask_and_scale=False, decode_times=False)
    for d, s in region.items():
        if d not in stored.sizes:
            raise ArgumentError(f"region dimension {d!r} is not a dimension of {path}")
        if not isinstance(s, slice) or s.step not in (None, 1):
            raise ArgumentError(f"region[{d!r}] is a slice with step 1, not {s!r}")
    for name, var in ds.variables.items():
        if name not in stored.variables:
            raise ArgumentError(f"variable {name!r} is not in {path} (a region write only fills existing variables)")
        if not set(var.dims) & set(region):
            raise ArgumentError(f"variable {name!r} has no region dimension: drop it from the Dataset first")
        if tuple(stored[name].dims) != tuple(var.dims):
            raise ArgumentError(f"variable {name!r} has dimensions {var.dims}, the stored one {stored[name].dims}")
    # Encode as the stored variables were: their encoded attributes become the encoding.
    prepared = ds.copy()
    native = {name for name in prepared.variables if stored[name].dtype.kind == "M"}
    for name in prepared.variables:
        enc = {k: v for k, v in stored[name].attrs.items()
               if k in ("units", "calendar", "scale_factor", "add_offset", "_FillValue", "missing_value")}
        enc["dtype"] = stored[name].dtype
        prepared[name].encoding = enc
        prepared[name].attrs = {}
    encoded, _ = _encode(prepared)
    for name in native:
        encoded[str(name)] = xr.Variable(ds[name].dims, ds[name].data.astype(stored[name].dtype))
    for name, var in encoded.items():
        if name not in ds.variables:
            continue
        origin = []
        for dim, n in zip(var.dims, var.shape):
            d = str(dim)
            start, stop, _ = region.get(d, slice(0, stored.sizes[d])).indices(stored.sizes[d])
            if stop - start != n:
                raise ArgumentError(f"region of {d!r} holds {stop - start} cells, variable {name!r} {n}")
            origin.append(start)
        _write_values(os.path.join(path, name), var, tuple(origin), config)
