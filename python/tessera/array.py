"""Arrays: ``create``, ``open``, ``from_numpy``, ``fragments`` and the ``Array`` class with numpy
indexing in domain coordinates (``A[1:3001, 1:12001]``: half-open slices, integers select one
coordinate and drop the axis, ``...`` and ``:`` mean the whole domain).
"""

from __future__ import annotations

import datetime as _dt
import math
import operator
import os
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union, cast

import numpy as np

from . import _codec, _core
from .config import ConfigLike, as_items
from .errors import DomainError, QueryError
from .filters import Filter
from .schema import BYTES, RAGGED, STR, ArraySchema, Attr, Dim

PathLike = Union[str, "os.PathLike[str]"]
Ranges = List[List[Tuple[int, int]]]
RangesLike = Sequence[Union[None, Tuple[int, int], Sequence[Tuple[int, int]]]]
Result = Union[np.ndarray, Dict[str, np.ndarray]]
Timestamp = Union[int, _dt.datetime]

_ORDERS = {"C": "C", "F": "F", "G": "G", "row-major": "C", "col-major": "F", "global": "G"}


@dataclass(frozen=True)
class FragmentInfo:
    """One committed fragment as an array sees it."""

    name: str
    #: First and last timestamp covered (milliseconds since the Unix epoch).
    t0: int
    t1: int
    uuid: str
    version: int
    dense: bool
    cell_count: int
    tile_count: int
    #: Bytes of its tiles on disk (after filtering) and before filtering.
    stored_bytes: int
    unfiltered_bytes: int
    #: Inclusive (lo, hi) per dimension of the cells it holds (None for sparse fragments, whose
    #: domain the engine does not yet report in coordinates).
    nonempty_domain: Optional[Tuple[Tuple[int, int], ...]]

    @property
    def timestamp(self) -> Tuple[int, int]:
        """(t0, t1)."""
        return (self.t0, self.t1)


def create(uri: PathLike, schema: ArraySchema, config: Optional[ConfigLike] = None) -> None:
    """Creates an empty array with ``schema`` at ``uri`` (``ArrayError`` if something non-empty
    is there)."""
    if not isinstance(schema, ArraySchema):
        raise TypeError(f"schema must be a ts.ArraySchema, not {type(schema).__name__}")
    _core.create(os.fspath(uri), schema.to_json(), as_items(config))


def open(  # noqa: A001 - the API is ts.open, like tiledb.open and h5py.File
    uri: PathLike,
    mode: str = "r",
    timestamp: Optional[Timestamp] = None,
    config: Optional[ConfigLike] = None,
) -> "Array":
    """Opens the array at ``uri`` for reading ("r") or writing ("w"). ``timestamp`` (ms since
    the epoch, or a datetime) shows only the fragments committed by then."""
    if mode not in ("r", "w"):
        raise ValueError(f"mode must be 'r' or 'w', not {mode!r}")
    ts = _timestamp_ms(timestamp)
    core = _core.Array.open(os.fspath(uri), mode, ts, as_items(config))
    return Array(core, ts)


def fragments(uri: PathLike, timestamp: Optional[Timestamp] = None, config: Optional[ConfigLike] = None) -> List[FragmentInfo]:
    """The committed fragments of the array at ``uri``, oldest first."""
    with open(uri, "r", timestamp=timestamp, config=config) as A:
        return A.fragments()


def from_numpy(
    uri: PathLike,
    array: np.ndarray,
    tile: Union[None, int, Sequence[int]] = None,
    attr: str = "a",
    filters: Sequence[Filter] = (),
    config: Optional[ConfigLike] = None,
) -> str:
    """Creates a dense array at ``uri`` holding ``array``: dimensions ``d0, d1, ...`` with
    domains ``[0, n - 1]``, one attribute ``attr``. ``tile``: the tile extent (one for every
    axis, or one per axis); by default tiles of about 1 MiB. Returns the uri."""
    array = np.asarray(array) if not isinstance(array, np.ndarray) else array
    if array.ndim == 0:
        raise QueryError("from_numpy needs an array with at least one axis")
    if array.dtype.kind in "OU":
        dtype: Any = str
    elif array.dtype.kind == "S":
        dtype = array.dtype if array.dtype.itemsize else bytes
    else:
        dtype = array.dtype
    if tile is None:
        tiles = _default_tiles(array.shape, max(array.dtype.itemsize, 8) if array.dtype.kind in "OU" else array.dtype.itemsize)
    elif isinstance(tile, int):
        tiles = [min(tile, n) for n in array.shape]
    else:
        tiles = list(tile)
    schema = ArraySchema(
        dims=[Dim(f"d{i}", (0, n - 1), t) for i, (n, t) in enumerate(zip(array.shape, tiles))],
        attrs=[Attr(attr, dtype, filters=filters)],
    )
    create(uri, schema, config)
    with open(uri, "w", config=config) as A:
        A[...] = array
    return os.fspath(uri)


def _default_tiles(shape: Sequence[int], itemsize: int, target: int = 1 << 20) -> List[int]:
    """Tile extents whose product is about ``target`` bytes, as square as the shape allows."""
    budget = max(1, target // max(1, itemsize))
    tiles = [1] * len(shape)
    order = sorted(range(len(shape)), key=lambda i: shape[i])
    for k, i in enumerate(order):
        left = len(shape) - k
        ideal = max(1, int(math.floor(budget ** (1.0 / left) + 1e-9)))
        tiles[i] = max(1, min(shape[i], ideal))
        budget = max(1, budget // tiles[i])
    return tiles


def _timestamp_ms(t: Optional[Timestamp]) -> Optional[int]:
    if t is None:
        return None
    if isinstance(t, _dt.datetime):
        return int(t.timestamp() * 1000)
    return operator.index(t)


class Array:
    """An open array (use ``ts.open``). A context manager: leaving the ``with`` block closes it,
    and a closed array raises ``QueryError``."""

    def __init__(self, core: _core.Array, timestamp: Optional[int] = None) -> None:
        self._core: Optional[_core.Array] = core
        self._uri = core.uri
        self._mode = core.mode
        self._timestamp = timestamp
        self._schema = ArraySchema.from_json(core.schema_json())

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the array (idempotent)."""
        self._core = None

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._core is None

    def __enter__(self) -> "Array":
        self._c()
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def _c(self) -> _core.Array:
        if self._core is None:
            raise QueryError(f"array {self._uri} is closed")
        return self._core

    # -- metadata --------------------------------------------------------------------------
    @property
    def schema(self) -> ArraySchema:
        """The schema."""
        return self._schema

    @property
    def uri(self) -> str:
        """The array's location."""
        return self._uri

    @property
    def mode(self) -> str:
        """"r" or "w"."""
        return self._mode

    @property
    def timestamp(self) -> Optional[int]:
        """The time-travel timestamp it was opened at (ms), or None."""
        return self._timestamp

    @property
    def attr_names(self) -> Tuple[str, ...]:
        """The attributes' names."""
        return self._schema.attr_names

    @property
    def dim_names(self) -> Tuple[str, ...]:
        """The dimensions' names."""
        return self._schema.dim_names

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return self._schema.ndim

    @property
    def shape(self) -> Tuple[int, ...]:
        """Number of coordinates per dimension."""
        return self._schema.shape

    @property
    def domain(self) -> Tuple[Tuple[int, int], ...]:
        """Inclusive (lo, hi) per dimension."""
        return self._schema.domain

    def _need_read(self, what: str) -> _core.Array:
        c = self._c()
        if self._mode != "r":
            raise QueryError(f"array {self._uri} is open for write; {what} needs mode 'r'")
        return c

    def nonempty_domain(self) -> Optional[Tuple[Tuple[int, int], ...]]:
        """Inclusive (lo, hi) per dimension bounding every written cell, or None (mode "r")."""
        d = self._need_read("nonempty_domain()").nonempty_domain()
        return None if d is None else tuple((int(lo), int(hi)) for lo, hi in d)

    def fragments(self) -> List[FragmentInfo]:
        """The fragments this array sees, oldest first (mode "r")."""
        out = []
        for f in self._need_read("fragments()").fragments():
            dom = f["nonempty_domain"]
            f["nonempty_domain"] = None if dom is None else tuple((int(lo), int(hi)) for lo, hi in dom)
            out.append(FragmentInfo(**f))
        return out

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"mode={self._mode!r}"
        return f"<tessera.Array {self._uri!r} {state} dims={self.dim_names} attrs={self.attr_names}>"

    # -- selections ------------------------------------------------------------------------
    def _selection(self, key: Any) -> Tuple[Ranges, Tuple[bool, ...]]:
        """Inclusive ranges per dimension and which axes an integer index drops."""
        if not isinstance(key, tuple):
            key = (key,)
        n_ell = sum(1 for k in key if k is Ellipsis)
        if n_ell > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        nd = self.ndim
        if len(key) - n_ell > nd:
            raise DomainError(f"subarray: {len(key) - n_ell} dimensions given, the array has {nd}")
        if n_ell:
            i = key.index(Ellipsis)
            key = key[:i] + (slice(None),) * (nd - len(key) + 1) + key[i + 1 :]
        key = key + (slice(None),) * (nd - len(key))
        ranges: Ranges = []
        dropped: List[bool] = []
        for k, dim in zip(key, self._schema.dims):
            lo_d, hi_d = dim.domain
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise QueryError(f"dimension {dim.name}: slices with a step ({k.step}) are not supported")
                lo = lo_d if k.start is None else operator.index(k.start)
                hi = hi_d if k.stop is None else operator.index(k.stop) - 1
                ranges.append([(lo, hi)])
                dropped.append(False)
            elif isinstance(k, (bool, np.bool_)):
                raise TypeError(f"dimension {dim.name}: boolean indices are not supported")
            else:
                try:
                    x = operator.index(k)
                except TypeError:
                    raise TypeError(
                        f"dimension {dim.name}: index must be an int, a slice or '...', not {type(k).__name__}"
                    ) from None
                ranges.append([(x, x)])
                dropped.append(True)
        return ranges, tuple(dropped)

    def _ranges(self, ranges: Optional[RangesLike]) -> Ranges:
        """Normalizes ``read``'s ranges: per dimension None (whole domain), one (lo, hi) pair or a
        list of pairs, all inclusive."""
        if ranges is None:
            return [[d.domain] for d in self._schema.dims]
        out: Ranges = []
        for i, r in enumerate(ranges):
            if r is None:
                out.append([self._schema.dims[i].domain] if i < self.ndim else [])
            elif len(r) == 2 and all(isinstance(x, (int, np.integer)) for x in r):
                pair = cast(Tuple[int, int], r)
                out.append([(int(pair[0]), int(pair[1]))])
            else:
                pairs = cast(Sequence[Tuple[int, int]], r)
                out.append([(int(lo), int(hi)) for lo, hi in pairs])
        return out

    def _attrs(self, attrs: Optional[Sequence[str]]) -> List[Attr]:
        if attrs is None:
            return list(self._schema.attrs)
        if isinstance(attrs, str):
            attrs = [attrs]
        out = []
        for name in attrs:
            try:
                out.append(self._schema.attr(name))
            except KeyError:
                raise QueryError(
                    f"unknown attribute {name!r} (the array has: {', '.join(self.attr_names)})"
                ) from None
        return out

    # -- reads -----------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Result:
        ranges, dropped = self._selection(key)
        return self._read(ranges, list(self._schema.attrs), "C", dropped)

    def read(self, ranges: Optional[RangesLike] = None, attrs: Optional[Sequence[str]] = None, order: str = "C") -> Result:
        """Reads ``attrs`` (default: all) over INCLUSIVE ``ranges``, one entry per dimension:
        None for the whole domain, a (lo, hi) pair, or a list of pairs (the result concatenates
        them along that dimension). ``order``: "C" (row-major), "F" (column-major) or "G" (the
        array's global order; 1-D results). One attribute gives an ndarray, several a dict."""
        layout = _layout(order)
        return self._read(self._ranges(ranges), self._attrs(attrs), layout, None)

    def _read(self, ranges: Ranges, attrs: List[Attr], layout: str, dropped: Optional[Tuple[bool, ...]]) -> Result:
        shape, bufs = self._c().read(ranges, [a.name for a in attrs], layout)
        out: Dict[str, np.ndarray] = {}
        for a in attrs:
            arr = _codec.to_numpy(a, bufs[a.name], None if layout == "G" else shape, layout)
            if dropped is not None and any(dropped):
                arr = arr[tuple(0 if d else slice(None) for d in dropped)]
            out[a.name] = arr
        return out[attrs[0].name] if len(attrs) == 1 else out

    def iter_batches(
        self,
        selection: Any = None,
        attrs: Optional[Sequence[str]] = None,
        budget_bytes: int = 64 << 20,
        order: str = "C",
    ) -> Iterator[Dict[str, np.ndarray]]:
        """Reads in batches of about ``budget_bytes``, each a dict name → array. ``selection``:
        an index as for ``A[...]`` (slices, integers, ``...``), or a list of inclusive ranges
        as for ``read``. With order "C" (or "F") a batch holds whole slabs of the first (last)
        dimension when one fits, shaped (rows, *rest); other batches are 1-D."""
        layout = _layout(order)
        if selection is None or isinstance(selection, list):
            ranges, dropped = self._ranges(selection), (False,) * self.ndim
        else:
            ranges, dropped = self._selection(selection)
        attr_list = self._attrs(attrs)
        q = self._c().read_query(ranges, [a.name for a in attr_list], layout)
        shape = list(q.shape)
        if layout == "C":
            slab, axis = math.prod(shape[1:]), 0
        elif layout == "F":
            slab, axis = math.prod(shape[:-1]), len(shape) - 1
        else:
            slab, axis = 0, 0
        while True:
            batch = q.next_batch(int(budget_bytes))
            if batch is None:
                return
            start, cells, bufs = batch
            bshape: Optional[List[int]] = None
            if slab and cells % slab == 0 and start % slab == 0:
                bshape = list(shape)
                bshape[axis] = cells // slab
            out: Dict[str, np.ndarray] = {}
            for a in attr_list:
                arr = _codec.to_numpy(a, bufs[a.name], bshape, layout)
                if bshape is not None and any(dropped):
                    arr = arr[tuple(0 if d else slice(None) for d in dropped)]
                out[a.name] = arr
            yield out

    # -- writes ----------------------------------------------------------------------------
    def __setitem__(self, key: Any, value: Any) -> None:
        """Writes ``value`` (an ndarray or scalar for the single attribute, or a dict holding
        every attribute) over the selection as one new fragment. Dtypes must match exactly;
        shapes must equal the selection's (scalars broadcast)."""
        ranges, dropped = self._selection(key)
        shape = tuple(hi - lo + 1 for ((lo, hi),) in ranges)
        sel_shape = tuple(n for n, d in zip(shape, dropped) if not d)
        attrs = self._schema.attrs
        if isinstance(value, Mapping):
            values = dict(value)
            known = set(self.attr_names)
            for name in values:
                if name not in known:
                    raise QueryError(f"unknown attribute {name!r} (the array has: {', '.join(self.attr_names)})")
        elif len(attrs) == 1:
            values = {attrs[0].name: value}
        else:
            raise QueryError(f"the array has {len(attrs)} attributes ({', '.join(self.attr_names)}); assign a dict")
        if any(lo > hi for ((lo, hi),) in ranges):
            self._c().write(ranges, "C", [])  # the engine reports the reversed range (DomainError)
        prepared: List[Tuple[Attr, np.ndarray, Optional[np.ndarray]]] = []
        for a in attrs:
            if a.name not in values:
                continue
            arr, valid = _codec.prepare(a, values[a.name], sel_shape)
            axes = tuple(i for i, d in enumerate(dropped) if d)
            if axes:
                arr = np.expand_dims(arr, axes)
                valid = None if valid is None else np.expand_dims(valid, axes)
            prepared.append((a, arr, valid))
        layout = _write_layout(prepared, self.ndim)
        inputs = [_codec.encode(a, arr, valid, layout, self.ndim) for a, arr, valid in prepared]
        self._c().write(ranges, layout, inputs)


def _layout(order: str) -> str:
    try:
        return _ORDERS[order]
    except KeyError:
        raise QueryError(f"order must be 'C', 'F' or 'G', not {order!r}") from None


def _write_layout(prepared: Sequence[Tuple[Attr, np.ndarray, Optional[np.ndarray]]], ndim: int) -> str:
    """"F" when every fixed-size value is in column-major cell order (and not row-major), so
    no value is copied; otherwise "C"."""
    fixed = [arr for a, arr, _ in prepared if a.kind not in (STR, BYTES, RAGGED)]
    if fixed and all(_codec.cell_layout(arr, ndim) == "F" for arr in fixed):
        return "F"
    return "C"
