"""Arrays: ``create``, ``open``, ``from_numpy``, ``fragments`` and the ``Array`` class with numpy
indexing in domain coordinates (``A[1:3001, 1:12001]``: half-open slices, integers select one
coordinate and drop the axis, ``...`` and ``:`` mean the whole domain).

Sparse arrays hold only the cells written, each with its coordinates. They are written with
coordinate arrays (``A.write({"x": xs, "y": ys}, {"a": vals})`` or ``A[xs, ys] = vals``) and read
as a ``Result``: a dict of 1-D numpy arrays, the dimension columns first, then the attributes
(``A[1:11, :]`` with half-open integer slices, or ``A.read(ranges={"x": [(lo, hi)]})`` with
inclusive bounds of any type).

Deletes (``A.delete({"x": xs, "y": ys})`` for cells at coordinates, ``A.delete(ranges={"x":
[(lo, hi)]})`` for the cross product of inclusive ranges) write a delete fragment: older cells
there no longer exist (dense arrays read the fill value and null), later writes do.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import numbers
import operator
import os
import re
import shutil
import time
import urllib.parse
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

import numpy as np

from . import _check, _codec, _core, _time
from .config import ConfigLike, as_items
from .errors import ArgumentError, ArgumentTypeError, DomainError, QueryError, located
from .filters import Filter
from .meta import Metadata
from .result import Result
from .schema import BYTES, RAGGED, STR, ArraySchema, Attr, Dim

if TYPE_CHECKING:
    from typing_extensions import Self

    from .frames import DataFrameIndexer

PathLike = Union[str, "os.PathLike[str]"]
Ranges = List[List[Tuple[int, int]]]
#: Ranges of a sparse read: per dimension, inclusive (lo, hi) pairs of ints or floats.
SparseRanges = List[List[Tuple[Any, Any]]]
_RangeEntry = Union[None, Tuple[Any, Any], Sequence[Tuple[Any, Any]]]
RangesLike = Union[Sequence[_RangeEntry], Mapping[str, _RangeEntry]]
DenseResult = Union[np.ndarray, Dict[str, np.ndarray]]
Timestamp = Union[int, _dt.datetime]
#: A timestamp, or an inclusive (start, end) range of them (either end may be None).
TimestampRange = Union[Timestamp, Tuple[Optional[Timestamp], Optional[Timestamp]]]

_ORDERS = {"C": "C", "F": "F", "G": "G", "row-major": "C", "col-major": "F", "global": "G"}
_SPARSE_ORDERS = dict(_ORDERS, U="U", unordered="U")
_WRITE_ORDERS = {"U": "U", "unordered": "U", "G": "G", "global": "G"}


@dataclass(frozen=True)
class FragmentInfo:
    """One committed fragment as an array sees it."""

    name: str
    #: First and last timestamp covered (milliseconds since the Unix epoch).
    t0: int
    t1: int
    uuid: str
    version: int
    #: What it holds: "dense" (a hyper-rectangle of cells), "sparse" (cells with explicit
    #: coordinates: a sparse array's writes, or random updates of a dense array) or "delete"
    #: (tombstones written by ``Array.delete``; neither ``dense`` nor ``sparse``).
    kind: str
    #: Whether ``kind`` is "dense".
    dense: bool
    #: Cells it holds; for a delete fragment, the distinct points deleted by coordinates (cells
    #: deleted by ranges are not counted).
    cell_count: int
    tile_count: int
    #: Bytes of its tiles on disk (after filtering) and before filtering.
    stored_bytes: int
    unfiltered_bytes: int
    #: Whether its tiles are all stored in one file, ``packed.data`` (small fragments; the
    #: ``sm.write.pack_bytes`` setting), rather than one file per attribute and dimension.
    packed: bool
    #: Inclusive (lo, hi) per dimension bounding the cells it holds (a delete fragment: the
    #: points and ranges it deletes), in domain coordinates (floats for float dimensions).
    nonempty_domain: Tuple[Tuple[Any, Any], ...]

    @property
    def timestamp(self) -> Tuple[int, int]:
        """(t0, t1)."""
        return (self.t0, self.t1)

    @property
    def sparse(self) -> bool:
        """Whether ``kind`` is "sparse": cells stored with explicit coordinates. False for dense
        fragments and for delete fragments (which hold coordinates of deleted cells, not cells)."""
        return self.kind == "sparse"


def _fragment_info(d: Dict[str, Any]) -> FragmentInfo:
    """A ``FragmentInfo`` from the binding's dict."""
    d = dict(d)
    d["nonempty_domain"] = tuple((lo, hi) for lo, hi in d["nonempty_domain"])
    return FragmentInfo(**d)


def create(uri: PathLike, schema: ArraySchema, config: Optional[ConfigLike] = None) -> None:
    """Creates an empty array with ``schema`` at ``uri`` (``ArrayError`` if something non-empty
    is there)."""
    if not isinstance(schema, ArraySchema):
        raise ArgumentTypeError(f"schema must be a ts.ArraySchema, not {type(schema).__name__}")
    _core.create(_uri(uri), schema.to_json(), as_items(config))


def open(  # the API is ts.open, like tiledb.open and h5py.File
    uri: PathLike,
    mode: str = "r",
    timestamp: Optional[TimestampRange] = None,
    config: Optional[ConfigLike] = None,
) -> "Array":
    """Opens the array at ``uri`` for reading ("r") or writing ("w").

    Reads: ``timestamp`` (ms since the epoch, or a datetime) shows only the fragments committed
    by then; a pair ``(start, end)`` (either may be None) shows only the fragments written
    within that inclusive range, e.g. the updates of one day without the data they changed.

    Writes: ``timestamp`` (at most 2**63 - 1) is the timestamp of every fragment written
    through this array (``t0 == t1 == timestamp``) instead of the time of the write, so reads
    as of an earlier timestamp do not see them. The timestamp chooses what time travel sees,
    not which fragment wins a cell: fragments are ordered by commit, so such a write wins over
    every fragment committed before it (in reads as of any time that sees both)."""
    if not isinstance(mode, str) or mode not in ("r", "w"):
        raise ArgumentError(f"mode must be 'r' or 'w', not {mode!r}")
    if isinstance(timestamp, tuple) and mode == "w":
        raise ArgumentError(
            "a (start, end) timestamp range only applies to reads; a write takes one timestamp (its fragments' t0 = t1)"
        )
    if isinstance(timestamp, tuple):
        if len(timestamp) != 2:
            raise ArgumentError(f"a timestamp range is (start, end), not {timestamp!r}")
        start = _check.timestamp_ms(timestamp[0], "timestamp range start")
        end = _check.timestamp_ms(timestamp[1], "timestamp range end")
        if start is not None and end is not None and start > end:
            raise ArgumentError(f"timestamp range starts after it ends: {timestamp!r}")
        opened_at = _now_ms()
        core = _core.Array.open(_uri(uri), mode, end, as_items(config), start)
        return Array(core, end, start, as_items(config), opened_at)
    ts = _timestamp_ms(timestamp)
    opened_at = _now_ms()
    core = _core.Array.open(_uri(uri), mode, ts, as_items(config))
    return Array(core, ts, None, as_items(config), opened_at)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _reopen(uri: str, mode: str, timestamp: Any, config: Optional[Dict[str, str]]) -> "Array":
    """Unpickles an ``Array``: opens it again by URI and timestamp."""
    return open(uri, mode, timestamp=timestamp, config=config)


def fragments(
    uri: PathLike, timestamp: Optional[TimestampRange] = None, config: Optional[ConfigLike] = None
) -> List[FragmentInfo]:
    """The committed fragments of the array at ``uri``, oldest first: name, timestamps, kind
    ("dense", "sparse" or "delete"), cells, tiles, bytes and non-empty domain. Fragments a consolidation superseded are
    left out once the consolidated fragment is committed (with ``timestamp`` before its ``t1``,
    they are shown until ``ts.vacuum`` deletes them)."""
    with open(uri, "r", timestamp=timestamp, config=config) as A:
        return A.fragments()


def from_numpy(
    uri: PathLike,
    array: np.ndarray,
    tile: Union[int, Sequence[int], None] = None,
    attr: str = "a",
    filters: Sequence[Filter] = (),
    config: Optional[ConfigLike] = None,
) -> str:
    """Creates a dense array at ``uri`` holding ``array``: dimensions ``d0, d1, ...`` with
    domains ``[0, n - 1]``, one attribute ``attr``. ``tile``: the tile extent (one for every
    axis, or one per axis); by default tiles of about 1 MiB. Returns the uri.

    All or nothing: when anything fails (the write refusing a value, an interrupt), what this
    call created is removed again (an empty folder given as ``uri`` is left, empty)."""
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
        itemsize = max(array.dtype.itemsize, 8) if array.dtype.kind in "OU" else array.dtype.itemsize
        tiles = _default_tiles(array.shape, itemsize)
    elif _check.is_real(tile):
        t = _check.count(tile, "tile", lo=1)
        tiles = [min(t, n) for n in array.shape]
    else:
        if isinstance(tile, (str, bytes)) or not isinstance(tile, Sequence):
            raise ArgumentTypeError(f"tile is an int or one int per axis, not {type(tile).__name__} {tile!r}")
        if len(tile) != array.ndim:
            raise ArgumentError(f"tile gives {len(tile)} extents for an array of {array.ndim} axes")
        tiles = [_check.count(t, f"tile[{i}]", lo=1) for i, t in enumerate(tile)]
    schema = ArraySchema(
        dims=[Dim(f"d{i}", (0, n - 1), t) for i, (n, t) in enumerate(zip(array.shape, tiles))],
        attrs=[Attr(attr, dtype, filters=filters)],
    )
    made = _made_by_create(_uri(uri))
    try:
        create(uri, schema, config)
        with open(uri, "w", config=config) as A:
            A[...] = array
    except BaseException:
        _remove_made(made)
        raise
    return os.fspath(uri)


def _made_by_create(uri: str) -> Optional[Tuple[str, bool]]:
    """What ``create(uri)`` would make and a failed ``from_numpy`` must remove: (the topmost
    folder missing on the way to ``uri``, False), or (``uri``, True) when it is an empty folder
    (only its contents are then removed); None when ``uri`` is not a local path or holds
    something (``create`` refuses it and nothing is removed)."""
    if uri[:7].lower() == "file://":
        rest = uri[7:]
        rest = rest[len("localhost") :] if rest.startswith("localhost") else rest
        if not rest.startswith("/"):
            return None  # the engine refuses it before making anything
        try:
            uri = urllib.parse.unquote(rest, errors="strict")
        except UnicodeDecodeError:
            return None  # not UTF-8: the engine refuses it before making anything
    elif re.match(r"[A-Za-z][A-Za-z0-9+.-]+://", uri):
        return None  # another scheme: refused before anything is made
    path = os.path.abspath(uri)
    if os.path.isdir(path) and not os.path.islink(path):
        return (path, True) if not os.listdir(path) else None
    if os.path.lexists(path):
        return None
    top = path
    while True:
        parent = os.path.dirname(top)
        if parent == top or os.path.lexists(parent):
            return (top, False)
        top = parent


def _remove_made(made: Optional[Tuple[str, bool]]) -> None:
    """Removes what ``_made_by_create`` said ``create`` would make."""
    if made is None:
        return
    path, keep_folder = made
    if not os.path.isdir(path):
        return
    if keep_folder:
        for entry in os.listdir(path):
            p = os.path.join(path, entry)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.remove(p)
    else:
        shutil.rmtree(path, ignore_errors=True)


def _default_tiles(shape: Sequence[int], itemsize: int, target: int = 1 << 20) -> List[int]:
    """Tile extents whose product is about ``target`` bytes, as square as the shape allows."""
    budget = max(1, target // max(1, itemsize))
    tiles = [1] * len(shape)
    order = sorted(range(len(shape)), key=lambda i: shape[i])
    for k, i in enumerate(order):
        left = len(shape) - k
        ideal = max(1, math.floor(budget ** (1.0 / left) + 1e-9))
        tiles[i] = max(1, min(shape[i], ideal))
        budget = max(1, budget // tiles[i])
    return tiles


def _timestamp_ms(t: Optional[Timestamp]) -> Optional[int]:
    """A ``timestamp`` argument in ms (checked: an int in [0, 2**64 - 1] or a datetime)."""
    return _check.timestamp_ms(t)


def _uri(uri: PathLike) -> str:
    """An array location as the binding takes it: text UTF-8 can encode."""
    try:
        path = os.fspath(uri)
    except TypeError:
        raise ArgumentTypeError(f"uri is a str or os.PathLike, not {type(uri).__name__}") from None
    if not isinstance(path, str):
        raise ArgumentTypeError(f"uri is text (str), not {type(path).__name__} {path!r}")
    return _check.text(path, "uri")


def _range_pairs(r: Any, dim: Dim) -> List[Any]:
    """The (lo, hi) pairs of one dimension's entry of ``ranges``: one pair or a non-empty list of
    pairs; ``DomainError`` naming the dimension otherwise."""
    if not _is_pair(r) and not isinstance(r, (list, tuple, np.ndarray)):
        raise located(
            DomainError(f"dimension {dim.name}: {r!r} is not a (lo, hi) pair or a list of pairs"),
            dimension=dim.name,
        )
    pairs = [r] if _is_pair(r) else list(r)
    if not pairs:
        raise located(
            DomainError(f"dimension {dim.name} has no range (give None for the whole domain)"),
            dimension=dim.name,
        )
    for p in pairs:
        if not _is_pair(p):
            raise located(DomainError(f"dimension {dim.name}: {p!r} is not a (lo, hi) pair"), dimension=dim.name)
    return pairs


class Array:
    """An open array (use ``ts.open``). A context manager: leaving the ``with`` block closes it,
    and a closed array raises ``QueryError``."""

    def __init__(
        self,
        core: _core.Array,
        timestamp: Optional[int] = None,
        start: Optional[int] = None,
        config: Optional[Dict[str, str]] = None,
        opened_at: Optional[int] = None,
    ) -> None:
        self._core: Optional[_core.Array] = core
        self._uri = core.uri
        self._mode = core.mode
        self._context_id = core.context_id
        self._timestamp = timestamp
        self._start = start
        self._config = config
        self._opened_at = opened_at
        self._schema = ArraySchema.from_json(core.schema_json())
        self._meta: Optional[Metadata] = None

    # -- pickling --------------------------------------------------------------------------
    def snapshot_timestamp(self) -> int:
        """The timestamp that shows this read handle's fragments: the one it was opened at, or
        for an array opened at the latest state, the later of the millisecond before its opening
        and the newest fragment it sees (a process may stamp fragments ahead of the clock). Reopening at it
        shows the same fragments unless a write that started before then commits after, or a
        consolidation of them is vacuumed (its fragment then shows the same cells)."""
        if self._mode != "r":
            raise QueryError(f"array {self._uri} is open for write; only a read has a snapshot timestamp")
        if self._timestamp is not None:
            return self._timestamp
        newest = max((f.t1 for f in self.fragments()), default=0)
        # One ms before the opening: a write stamped in that same ms, committed after the open,
        # must not show (every fragment the handle sees has t1 <= newest).
        self._timestamp = max(newest, (self._opened_at or 1) - 1)
        return self._timestamp

    def __reduce__(self) -> Tuple[Any, Tuple[Any, ...]]:
        """Pickles as (URI, mode, timestamp, configuration): a read reopens at
        ``snapshot_timestamp()`` (with the same start), so every copy (a Dask task in another
        process) reads the same snapshot; a write reopens with the same write timestamp."""
        if self._mode == "r":
            end = self.snapshot_timestamp()
            ts: Any = end if self._start is None else (self._start, end)
        else:
            ts = self._timestamp
        return (_reopen, (self._uri, self._mode, ts, self._config))

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        """Closes the array (idempotent). An array open for reading holds the array's lock
        shared, so ``ts.vacuum`` waits for it: closing releases it at once (a batch iterator
        from ``iter_batches`` keeps it until it is exhausted or dropped)."""
        core, self._core = self._core, None
        if core is not None:
            core.close()

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._core is None

    def __enter__(self) -> Self:
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
    def meta(self) -> Metadata:
        """The array's key-value metadata (``tessera.meta``): read in mode "r" as of the
        array's timestamp, written in mode "w" (each assignment one atomic commit)."""
        if self._meta is None:
            self._meta = Metadata(self._c(), self._mode)
        return self._meta

    @property
    def df(self) -> "DataFrameIndexer":
        """``A.df[...]``: the selection ``A[...]`` would read, as a pandas DataFrame."""
        from .frames import DataFrameIndexer

        return DataFrameIndexer(self)

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
    def start(self) -> Optional[int]:
        """The start of the time-travel range it was opened with (ms), or None."""
        return self._start

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
    def sparse(self) -> bool:
        """Whether the array is sparse."""
        return self._schema.sparse

    @property
    def shape(self) -> Tuple[int, ...]:
        """Number of coordinates per dimension: the shape of ``np.asarray(A)`` (TypeError for
        float dimensions)."""
        return self._schema.shape

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of the cells as read: with one attribute, that of ``np.asarray(A)``
        (``object`` for strings, bytes and ragged cells, a subarray dtype such as ``(3,)f4`` for
        several values per cell); with several, a structured dtype with one field per attribute."""
        fields = [(a.name, _read_dtype(a)) for a in self._schema.attrs]
        return fields[0][1] if len(fields) == 1 else np.dtype(fields)

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        """``np.asarray(A)``: the whole domain of a dense array with exactly one attribute, as
        ``A[...]`` reads it (mode "r"; the engine refuses results too large to hold). Refused
        (``QueryError``) for sparse arrays, for several attributes (read one: ``A.read(attrs=
        ["a"])``) and where a nullable attribute holds nulls (``A[...]`` gives a masked array).
        ``copy=False`` raises ``ValueError``: every read makes a new array."""
        if copy is False:
            raise ValueError(
                "np.asarray(A, copy=False): a tessera array is on storage; reading it always makes a new array"
            )
        if self.sparse:
            raise QueryError(
                f"array {self._uri} is sparse: it has no dense numpy form (read its cells with A[...] or A.read())"
            )
        if len(self._schema.attrs) != 1:
            raise QueryError(
                f"np.asarray needs an array with exactly one attribute; {self._uri} has "
                f"{len(self._schema.attrs)} ({', '.join(self.attr_names)}): read one with A.read(attrs=[name])"
            )
        self._need_read("np.asarray(A)")
        out = self[...]
        assert isinstance(out, np.ndarray)
        if isinstance(out, np.ma.MaskedArray):
            if np.ma.getmaskarray(out).any():
                raise QueryError(
                    f"attribute {self.attr_names[0]} holds null cells, which a plain ndarray cannot show: "
                    "A[...] gives a masked array"
                )
            out = np.ma.getdata(out)
        return out if dtype is None else out.astype(dtype, copy=False)

    @property
    def domain(self) -> Tuple[Tuple[Any, Any], ...]:
        """Inclusive (lo, hi) per dimension."""
        return self._schema.domain

    @property
    def context_id(self) -> int:
        """Identifies the engine context (thread pool, tile cache) the array uses: arrays opened
        with equal configurations share one."""
        return self._context_id

    def _need_read(self, what: str) -> _core.Array:
        c = self._c()
        if self._mode != "r":
            raise QueryError(f"array {self._uri} is open for write; {what} needs mode 'r'")
        return c

    def nonempty_domain(self) -> Optional[Tuple[Tuple[Any, Any], ...]]:
        """Inclusive (lo, hi) per dimension bounding every written cell (floats for float
        dimensions), or None when nothing was written (mode "r"). A bound, not the tightest
        box: cells deleted since still count, and so do the points and ranges of deletes (an
        array whose only fragment is a delete has a non-empty domain)."""
        d = self._need_read("nonempty_domain()").nonempty_domain()
        if d is None:
            return None
        dts = [dim.dtype for dim in self._schema.dims]
        return tuple(_time.pair(dt, lo, hi) if dt.kind == "M" else (lo, hi) for (lo, hi), dt in zip(d, dts))

    def fragments(self) -> List[FragmentInfo]:
        """The fragments this array sees, oldest first (mode "r")."""
        return [_fragment_info(f) for f in self._need_read("fragments()").fragments()]

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"mode={self._mode!r}"
        return f"<tessera.Array {self._uri!r} {state} dims={self.dim_names} attrs={self.attr_names}>"

    # -- selections ------------------------------------------------------------------------
    def _expand_key(self, key: Any) -> Tuple[Any, ...]:
        """An index as one entry per dimension (``...`` and missing trailing entries become
        ``:``)."""
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
        out: Tuple[Any, ...] = key + (slice(None),) * (nd - len(key))
        return out

    def _selection(self, key: Any) -> Tuple[Ranges, Tuple[bool, ...]]:
        """Inclusive ranges per dimension and which axes an integer index drops."""
        key = self._expand_key(key)
        ranges: Ranges = []
        dropped: List[bool] = []
        for k, dim in zip(key, self._schema.dims):
            lo_d, hi_d = dim.int_domain
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise located(
                        QueryError(f"dimension {dim.name}: slices with a step ({k.step}) are not supported"),
                        dimension=dim.name,
                    )
                lo = lo_d if k.start is None else _index(dim, k.start, "slice start")
                hi = hi_d if k.stop is None else _in_i128(dim, _index(dim, k.stop, "slice stop") - 1)
                ranges.append([(lo, hi)])
                dropped.append(False)
            else:
                x = _index(dim, k, "index")
                ranges.append([(x, x)])
                dropped.append(True)
        return ranges, tuple(dropped)

    def _range_entries(self, ranges: Optional[RangesLike]) -> List[Any]:
        """``read``'s ranges as one entry per dimension: given in dimension order, or as a dict
        by dimension name (dimensions left out: the whole domain)."""
        if ranges is None:
            return [None] * self.ndim
        if isinstance(ranges, Mapping):
            names = self.dim_names
            for name in ranges:
                if name not in names:
                    raise DomainError(f"unknown dimension {name!r} (the array has: {', '.join(names)})")
            return [ranges.get(name) for name in names]
        return list(ranges)

    def _ranges(self, ranges: Optional[RangesLike]) -> SparseRanges:
        """Normalizes ``read``'s ranges of a dense array: per dimension None (whole domain), one
        (lo, hi) pair or a list of pairs, all inclusive. Bounds are ints, or floats of which the
        engine takes the integers inside, as for sparse reads (``(1.5, 3)`` reads 2 and 3)."""
        entries = self._range_entries(ranges)
        if len(entries) != self.ndim:
            raise DomainError(f"subarray: {len(entries)} dimensions given, the array has {self.ndim}")
        out: SparseRanges = []
        for r, dim in zip(entries, self._schema.dims):
            if r is None:
                out.append([dim.int_domain])
                continue
            out.append([(_bound(dim, lo), _bound(dim, hi)) for lo, hi in _range_pairs(r, dim)])
        return out

    def _sparse_ranges(self, ranges: Optional[RangesLike]) -> SparseRanges:
        """Normalizes the INCLUSIVE ranges of a sparse read: per dimension None (the whole
        domain), one (lo, hi) pair or a list of pairs; ints or floats (an integer dimension
        takes the integers inside float bounds)."""
        entries = self._range_entries(ranges)
        if len(entries) != self.ndim:
            raise DomainError(f"subarray: {len(entries)} dimensions given, the array has {self.ndim}")
        out: SparseRanges = []
        for r, dim in zip(entries, self._schema.dims):
            if r is None:
                out.append([])  # the engine's "whole domain"
                continue
            out.append([(_bound(dim, lo), _bound(dim, hi)) for lo, hi in _range_pairs(r, dim)])
        return out

    def _sparse_selection(self, key: Any) -> SparseRanges:
        """Inclusive ranges of a sparse index: half-open integer slices, single coordinates
        (ints; exact floats on float dimensions) and ``:``/``...`` for the whole domain."""
        out: SparseRanges = []
        for k, dim in zip(self._expand_key(key), self._schema.dims):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise located(
                        QueryError(f"dimension {dim.name}: slices with a step ({k.step}) are not supported"),
                        dimension=dim.name,
                    )
                if k.start is None and k.stop is None:
                    out.append([])
                    continue
                if dim.is_float:
                    raise QueryError(
                        f"dimension {dim.name} has float coordinates, which half-open slices do not suit: "
                        f"use A.read(ranges={{{dim.name!r}: [(lo, hi)]}}) with inclusive bounds"
                    )
                lo = dim.int_domain[0] if k.start is None else _index(dim, k.start, "slice start")
                hi = dim.int_domain[1] if k.stop is None else _in_i128(dim, _index(dim, k.stop, "slice stop") - 1)
                out.append([(lo, hi)])
            elif isinstance(k, (bool, np.bool_)):
                raise ArgumentTypeError(f"dimension {dim.name}: boolean indices are not supported")
            elif _time_count(dim, k, "index") is not None:
                t = _in_i128(dim, _time.count(dim.dtype, k, f"dimension {dim.name}: index"))
                out.append([(t, t)])
            elif _is_number(k):
                if not dim.is_float and not isinstance(k, (numbers.Integral, np.integer)):
                    raise ArgumentTypeError(f"dimension {dim.name}: index must be an int, a slice or '...', not {k!r}")
                x = _bound(dim, k)
                out.append([(x, x)])
            else:
                raise ArgumentTypeError(
                    f"dimension {dim.name}: index must be a number, a slice or '...', not {type(k).__name__}"
                )
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
    def __getitem__(self, key: Any) -> Union[DenseResult, Result]:
        """Dense arrays: the cells of the selection shaped like it (one attribute: an ndarray,
        several: a dict). Sparse arrays: the cells written inside it as a ``Result`` in
        row-major order (half-open integer slices; ``:`` for any dimension's whole domain)."""
        if self.sparse:
            return self._sparse_read(self._sparse_selection(key), list(self._schema.attrs), "C")
        ranges, dropped = self._selection(key)
        return self._read(ranges, list(self._schema.attrs), "C", dropped)

    def read(
        self,
        ranges: Optional[RangesLike] = None,
        attrs: Optional[Sequence[str]] = None,
        order: str = "C",
        where: Optional[str] = None,
    ) -> Union[DenseResult, Result]:
        """Reads ``attrs`` (default: all) over INCLUSIVE ``ranges``: one entry per dimension, or
        a dict by dimension name (dimensions left out: the whole domain); each entry None for
        the whole domain, a (lo, hi) pair, or a list of pairs.

        Dense arrays: the result concatenates the ranges along each dimension; ``order`` "C"
        (row-major), "F" (column-major) or "G" (the array's global order; 1-D results). One
        attribute gives an ndarray, several a dict. Bounds may be floats, of which a dimension
        takes the integers inside as on sparse arrays (``(1.5, 3)`` reads 2 and 3; a range
        without an integer is a DomainError). A result larger than the memory available (or
        ``sm.read.max_result_bytes``) raises QueryError before anything is allocated: read it
        with ``iter_batches``.

        Sparse arrays: bounds may be ints or floats; the cells inside any of a dimension's
        ranges, as a ``Result`` (the dimension columns, then ``attrs``; ``attrs=[]`` gives the
        coordinates alone). ``order``: "C" (row-major by coordinates), "F" (column-major), "G"
        (the array's global order) or "U" (any order, the fastest).

        ``where``: a query condition evaluated in the engine on each cell's current value (the
        newest write's, after deletes), e.g. ``"pix >= 900 and (valid == 1 or v0 < -3)"``:
        comparisons ``< <= > >= == !=`` with a number (or, on variable-length strings, ``==``
        and ``!=`` with a quoted string), ``a between lo and hi`` (inclusive), ``a is null``,
        ``a is not null``, ``and``, ``or``, ``not`` and parentheses. Null and NaN values pass no
        comparison, nor its ``not``. Sparse arrays return only the cells that pass; dense
        arrays keep the result's shape and give failing cells the fill value (null where
        nullable). A malformed condition, an unknown attribute or a literal the attribute's
        type cannot hold raises QueryError."""
        cond = None if where is None else _check.text(where, "where")
        if self.sparse:
            return self._sparse_read(self._sparse_ranges(ranges), self._attrs(attrs), _sparse_layout(order), cond)
        layout = _layout(order)
        return self._read(self._ranges(ranges), self._attrs(attrs), layout, None, cond)

    def aggregate(
        self,
        aggregates: Mapping[str, Union[str, Sequence[str]]],
        ranges: Optional[RangesLike] = None,
        where: Optional[str] = None,
    ) -> Dict[str, Dict[str, Union[int, float, None]]]:
        """Aggregates computed in the engine, e.g. ``A.aggregate({"a": ["sum", "mean"], "b":
        "count"}, ranges=[(0, 9), None], where="b > 0")`` gives ``{"a": {"sum": ..., "mean":
        ...}, "b": {"count": ...}}``. ``aggregates``: attribute name → one operation or a list:
        ``count`` (cells, null or not), ``count_valid`` (non-null cells), ``null_count``,
        ``sum``, ``min``, ``max``, ``mean``. ``ranges`` as for ``read`` (default: the whole
        domain); ``where``: a query condition as for ``read``: only the cells whose current
        value passes it count.

        The cells are those a read returns: each cell's newest value, after updates and deletes;
        on dense arrays, cells never written hold the fill value and count as such. Nulls, and NaN
        in float attributes, are left out of ``sum``, ``min``, ``max`` and ``mean`` (as numpy's
        ``nansum``...). Integer sums are exact Python ints (never wrapped); float sums and every
        mean are floats; the sum of no value is 0, the min, max and mean of no value None.
        ``sum``, ``min``, ``max`` and ``mean`` need a numeric attribute with one value per cell.
        bool attributes count as 0/1 (``sum`` counts true, as numpy); datetime64 attributes
        give ``np.datetime64`` min, max and mean (exact, rounded down to the unit), skip NaT,
        and have no sum.
        The array is read in batches of ``sm.memory_budget`` bytes and aggregated in parallel,
        without holding the GIL. Unknown attributes or operations and operations the attribute
        cannot take (the sum of strings) raise QueryError."""
        if not isinstance(aggregates, Mapping) or not aggregates:
            raise ArgumentTypeError(
                "aggregates: expected a non-empty dict attribute name -> operation(s), "
                f"got {_check.type_name(aggregates)}"
            )
        requests: List[Tuple[str, str]] = []
        for name, ops in aggregates.items():
            if not isinstance(name, str):
                raise ArgumentTypeError(f"aggregates: attribute names are str, got {_check.type_name(name)}")
            op_list = [ops] if isinstance(ops, str) else list(ops)
            if not op_list or not all(isinstance(o, str) for o in op_list):
                raise ArgumentTypeError(f"aggregates[{name!r}]: expected an operation name or a non-empty list of them")
            requests.extend((name, o) for o in op_list)
        cond = None if where is None else _check.text(where, "where")
        values = self._need_read("aggregate").aggregate(self._sparse_ranges(ranges), requests, cond)
        out: Dict[str, Dict[str, Any]] = {}
        for (name, op), v in zip(requests, values):
            out.setdefault(name, {})[op] = self._aggregate_value(name, op, v)
        return out

    def _aggregate_value(self, name: str, op: str, v: Any) -> Any:
        """An aggregate as numpy shows it: min/max/mean of datetime64 attributes as
        ``np.datetime64`` of their unit, min/max of bool attributes as bools."""
        if v is None or op not in ("min", "max", "mean") or name not in self.attr_names:
            return v
        dt = self._schema.attr(name).dtype
        if dt.kind == "M":
            return _time.show(dt, v)
        if dt.kind == "b" and op != "mean":
            return bool(v)
        return v

    def read_points(self, coords: Mapping[str, Any], attrs: Optional[Sequence[str]] = None) -> DenseResult:
        """Reads the cells of a dense array at ``coords`` (a dict dimension name → coordinates,
        converted as for sparse writes), in the order given: random element reads. Each tile
        holding some of the points is read once. One attribute gives a 1-D ndarray, several a
        dict."""
        if self.sparse:
            raise QueryError("read_points reads dense arrays; use read(ranges=...) on sparse arrays")
        attr_list = self._attrs(attrs)
        cols = self._coord_columns(coords, "a point read")
        bufs = self._c().read_points(cols, [a.name for a in attr_list])
        out = {a.name: _codec.to_numpy(a, bufs[a.name], None, "G") for a in attr_list}
        return out[attr_list[0].name] if len(attr_list) == 1 else out

    def _sparse_read(self, ranges: SparseRanges, attrs: List[Attr], layout: str, cond: Optional[str] = None) -> Result:
        names = [a.name for a in attrs] or [self._schema.attrs[0].name]
        bufs = self._c().sparse_read(ranges, names, layout, cond)
        return self._sparse_result(bufs, attrs)

    def _sparse_result(self, bufs: Mapping[str, _codec.Buffers], attrs: List[Attr]) -> Result:
        out = Result(attrs={a.name: a for a in attrs})
        for d in self._schema.dims:
            out[d.name] = bufs[d.name][0].view(d.dtype)
        for a in attrs:
            out[a.name] = _codec.to_numpy(a, bufs[a.name], None, "G")
        return out

    def _read(
        self,
        ranges: SparseRanges,
        attrs: List[Attr],
        layout: str,
        dropped: Optional[Tuple[bool, ...]],
        cond: Optional[str] = None,
    ) -> DenseResult:
        shape, bufs = self._c().read(ranges, [a.name for a in attrs], layout, cond)
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
        where: Optional[str] = None,
    ) -> Iterator[Dict[str, np.ndarray]]:
        """Reads in batches of about ``budget_bytes``, each a dict name → array. ``selection``:
        an index as for ``A[...]`` (slices, integers, ``...``), or inclusive ranges as for
        ``read`` (a list, or a dict by dimension name). Dense arrays: with order "C" (or "F") a
        batch holds whole slabs of the first (last) dimension when one fits, shaped
        (rows, *rest); other batches are 1-D. Sparse arrays: every batch is a ``Result`` (the
        dimension columns, then the attributes) of at least one cell; together they are the
        whole read in ``order`` ("C", "F", "G" or "U"). ``where``: a query condition, as for
        ``read``."""
        budget = _check.count(budget_bytes, "budget_bytes", lo=1)
        cond = None if where is None else _check.text(where, "where")
        if self.sparse:
            return self._sparse_batches(selection, attrs, budget, order, cond)
        return self._dense_batches(selection, attrs, budget, order, cond)

    def _sparse_batches(
        self, selection: Any, attrs: Optional[Sequence[str]], budget_bytes: int, order: str, cond: Optional[str]
    ) -> Iterator[Result]:
        layout = _sparse_layout(order)
        if selection is None or isinstance(selection, (list, Mapping)):
            ranges = self._sparse_ranges(selection)
        else:
            ranges = self._sparse_selection(selection)
        attr_list = self._attrs(attrs)
        names = [a.name for a in attr_list] or [self._schema.attrs[0].name]
        q = self._c().sparse_query(ranges, names, layout, cond)
        while True:
            batch = q.next_batch(int(budget_bytes))
            if batch is None:
                return
            yield self._sparse_result(batch[2], attr_list)

    def _dense_batches(
        self, selection: Any, attrs: Optional[Sequence[str]], budget_bytes: int, order: str, cond: Optional[str]
    ) -> Iterator[Dict[str, np.ndarray]]:
        layout = _layout(order)
        if selection is None or isinstance(selection, (list, Mapping)):
            ranges, dropped = self._ranges(selection), (False,) * self.ndim
        else:
            ranges, dropped = self._selection(selection)
        attr_list = self._attrs(attrs)
        q = self._c().read_query(ranges, [a.name for a in attr_list], layout, cond)
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
    def write(self, coords: Mapping[str, Any], values: Any, order: str = "U") -> str:
        """Writes cells with explicit coordinates as one new sparse fragment and returns its
        name. ``coords``: dimension name → coordinates (a 1-D numpy array of the dimension's
        exact dtype, or a list of Python numbers converted when exact; a scalar for one cell).
        ``values``: attribute name → values (as for dense writes: numpy arrays of the exact
        dtype, lists of str/bytes, masked arrays or (values, validity) pairs for nullable
        attributes), or the values of the single attribute. ``order``: "U" (any order; the
        engine sorts) or "G" (cells already in the array's global order). On a sparse array a
        cell written again replaces the older one, unless the schema allows duplicates. On a
        dense array (random updates) a coordinate given twice takes the value given last, as in
        numpy assignment (with order "G", within one call).
        Nothing is written when any input is rejected."""
        if not isinstance(coords, Mapping):
            raise QueryError("coordinates are given as a dict: dimension name → coordinates")
        try:
            layout = _WRITE_ORDERS[order]
        except (KeyError, TypeError):
            raise QueryError(f"a sparse write's order is 'U' (unordered) or 'G' (global), not {order!r}") from None
        by_name = {d.name: d for d in self._schema.dims}
        cols = self._coord_columns(coords, "a sparse write")
        if not cols:
            self._c().write_sparse([], layout, [])  # the engine names the missing coordinates
        n = len(cols[0][1]) // by_name[cols[0][0]].dtype.itemsize
        inputs = []
        for a, v in self._attr_values(values):
            if isinstance(v, (np.ndarray, list)) and len(v) != n and not (isinstance(v, np.ndarray) and v.ndim == 0):
                raise located(
                    QueryError(f"attribute {a.name}: {len(v)} values for {n} cells (one per coordinate)"),
                    attribute=a.name,
                )
            arr, valid = _codec.prepare(a, v, (n,))
            inputs.append(_codec.encode(a, arr, valid, "C", 1))
        return self._c().write_sparse(cols, layout, inputs)

    def _coord_columns(self, coords: Mapping[str, Any], what: str) -> List[Tuple[str, np.ndarray]]:
        """The coordinate columns of a sparse write or a delete (each as bytes), checked as
        ``_coord_column`` does; unknown dimensions raise ``DomainError``."""
        if not isinstance(coords, Mapping):
            raise QueryError(f"the coordinates of {what} are given as a dict: dimension name → coordinates")
        by_name = {d.name: d for d in self._schema.dims}
        cols = []
        for name, c in coords.items():
            dim = by_name.get(name)
            if dim is None:
                raise DomainError(f"unknown dimension {name!r} (the array has: {', '.join(self.dim_names)})")
            cols.append((name, _coord_column(dim, c)))
        return cols

    def delete(self, coords: Optional[Mapping[str, Any]] = None, *, ranges: Optional[RangesLike] = None) -> str:
        """Deletes cells (mode "w") and returns the name of the delete fragment written. Give
        exactly one of:

        * ``coords``: dimension name → coordinates of the cells to delete, one entry per
          dimension, converted as for ``write`` (a numpy array of the dimension's exact dtype, or
          Python numbers converted only when exact; a scalar for one cell). Repeated points and
          points where no cell exists are fine.
        * ``ranges``: INCLUSIVE ranges as for ``read``: one entry per dimension, or a dict by
          dimension name; each entry None (the whole dimension), a (lo, hi) pair or a list of
          pairs; dimensions left out of a dict are whole. Every cell in the cross product of the
          ranges is deleted (``ranges={}``: every cell). Bounds may be ints or floats (an integer
          dimension takes the integers inside float bounds); ranges outside the domain, reversed
          or selecting no cell raise ``DomainError``.

        Cells written before the delete no longer exist: dense arrays read them as the
        attribute's fill value (null for nullable attributes), sparse arrays do not return them
        (with duplicates allowed, every cell at a deleted point is gone). Cells written later at
        the same coordinates exist again, and time travel to before the delete still shows the
        old cells. Consolidation applies deletions (the consolidated fragment holds none); a
        sparse array refuses to consolidate a run holding deletions while older fragments would
        remain outside it (``QueryError``: start the run at the oldest fragment). The GIL is
        released while the fragment is written; nothing is written when any input is rejected."""
        if (coords is None) == (ranges is None):
            raise ValueError(
                "give exactly one of coords (a dict of coordinates: A.delete({'x': xs, ...})) "
                "and ranges (inclusive ranges: A.delete(ranges={'x': [(lo, hi)]}))"
            )
        if coords is not None:
            cols = self._coord_columns(coords, "a delete")
            if len(cols) == self.ndim and all(len(c) == 0 for _, c in cols):
                raise QueryError("a delete by coordinates needs at least one point (no coordinates given)")
            return self._c().delete_cells(cols)
        return self._c().delete_ranges(self._sparse_ranges(ranges))

    def _attr_values(self, value: Any) -> List[Tuple[Attr, Any]]:
        """The attributes given by a write's value: a dict by name, or the single attribute's."""
        attrs = self._schema.attrs
        if isinstance(value, Mapping):
            known = set(self.attr_names)
            for name in value:
                if name not in known:
                    raise QueryError(f"unknown attribute {name!r} (the array has: {', '.join(self.attr_names)})")
            return [(a, value[a.name]) for a in attrs if a.name in value]
        if len(attrs) == 1:
            return [(attrs[0], value)]
        raise QueryError(f"the array has {len(attrs)} attributes ({', '.join(self.attr_names)}); give a dict")

    def __setitem__(self, key: Any, value: Any) -> None:
        """Dense arrays: writes ``value`` (an ndarray or scalar for the single attribute, or a
        dict holding every attribute) over the selection as one new fragment. Dtypes must match
        exactly; shapes must equal the selection's (scalars broadcast).

        Sparse arrays: ``A[xs, ys] = values`` writes cells at the coordinates given, one array
        per dimension, as ``A.write({"x": xs, "y": ys}, values)`` does."""
        if self.sparse:
            key = key if isinstance(key, tuple) else (key,)
            if len(key) != self.ndim or any(isinstance(k, slice) or k is Ellipsis for k in key):
                raise QueryError(
                    f"a sparse array is written at coordinates: A[{', '.join(self.dim_names)}] = values, "
                    "with one array of coordinates per dimension"
                )
            self.write(dict(zip(self.dim_names, key)), value)
            return
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
    except (KeyError, TypeError):
        raise QueryError(f"order must be 'C', 'F' or 'G', not {order!r}") from None


def _sparse_layout(order: str) -> str:
    try:
        return _SPARSE_ORDERS[order]
    except (KeyError, TypeError):
        raise QueryError(f"order must be 'C', 'F', 'G' or 'U', not {order!r}") from None


def _is_number(x: Any) -> bool:
    return isinstance(x, (numbers.Real, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _is_pair(r: Any) -> bool:
    """Whether a range entry is one (lo, hi) pair (rather than a list of pairs); times (for
    datetime64 dimensions) count as numbers."""
    return (
        isinstance(r, (tuple, list, np.ndarray))
        and len(r) == 2
        and all(_is_number(x) or isinstance(x, _time.TIME_SCALARS) for x in r)
    )


def _time_count(dim: Dim, x: Any, what: str) -> Optional[int]:
    """``x`` as a count of a datetime64 dimension's unit when it is a time (``np.datetime64``,
    ISO text, ``datetime``); None for other values or dimensions."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, _time.TIME_SCALARS):
        return None
    dt = dim.dtype
    if dt.kind != "M":
        return None
    return _time.count(dt, x, f"dimension {dim.name}: {what}")


def _bound(dim: Dim, x: Any) -> Any:
    """A range bound of a sparse read as the binding takes it: an int for integer bounds on
    integer dimensions, otherwise a float (the engine takes the integers inside float bounds;
    NaN is refused there, naming the dimension)."""
    t = _time_count(dim, x, "range bound")
    if t is not None:
        return _in_i128(dim, t)
    if not _is_number(x):
        raise located(DomainError(f"dimension {dim.name}: range bound {x!r} is not a number"), dimension=dim.name)
    if not dim.is_float and isinstance(x, (numbers.Integral, np.integer)):
        return _in_i128(dim, int(x))
    try:
        return float(x)
    except OverflowError:
        raise DomainError(f"dimension {dim.name}: range bound {x} is outside the domain {dim.domain}") from None


#: Integer bounds the binding converts (i128); anything beyond lies outside every domain.
_I128 = 2**127


def _in_i128(dim: Dim, v: int) -> int:
    if not -_I128 <= v < _I128:
        lo, hi = dim.domain
        raise located(
            DomainError(f"dimension {dim.name}: coordinate {v} is outside the domain [{lo}, {hi}]"),
            dimension=dim.name,
        )
    return v


def _int_bound(dim: Dim, x: Any) -> int:
    """An inclusive range bound of a dense read: an integer, or a float holding a whole number."""
    t = _time_count(dim, x, "range bound")
    if t is not None:
        return _in_i128(dim, t)
    if not _is_number(x):
        raise located(DomainError(f"dimension {dim.name}: range bound {x!r} is not a number"), dimension=dim.name)
    if isinstance(x, (numbers.Integral, np.integer)):
        return _in_i128(dim, int(x))
    f = float(x)
    if not math.isfinite(f):
        raise located(
            DomainError(f"dimension {dim.name}: range bound {x!r} is not a finite number"),
            dimension=dim.name,
        )
    if f != math.floor(f):
        raise located(
            DomainError(f"dimension {dim.name}: range bound {x!r} is not an integer (the dimension's are)"),
            dimension=dim.name,
        )
    return _in_i128(dim, int(f))


def _index(dim: Dim, k: Any, what: str) -> int:
    """An integer index or slice end on a dimension (``what``: "index", "slice start", ...)."""
    if isinstance(k, (bool, np.bool_)):
        raise ArgumentTypeError(f"dimension {dim.name}: boolean indices are not supported")
    t = _time_count(dim, k, what)
    if t is not None:
        return _in_i128(dim, t)
    try:
        x = operator.index(k)
    except TypeError:
        raise ArgumentTypeError(
            f"dimension {dim.name}: {what} must be an int (indices are integer coordinates), "
            f"not {type(k).__name__} {k!r}"
        ) from None
    return _in_i128(dim, x)


def _coord_column(dim: Dim, value: Any) -> np.ndarray:
    """The coordinates of one dimension for a sparse write as bytes: a numpy array must have the
    dimension's exact dtype; Python numbers are converted when the conversion is exact."""
    dt = dim.dtype
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and dt.kind == "M" and value.dtype.kind == "M":
        value = _time.cast_exact(value, dt, f"dimension {dim.name}: coordinates")
    if isinstance(value, np.ndarray):
        if value.dtype != dt:
            raise QueryError(
                f"dimension {dim.name}: coordinates of dtype {value.dtype} do not match the dimension's {dt} "
                "(no silent casts)"
            )
        arr = value.reshape(1) if value.ndim == 0 else value
    else:
        scalar = _is_number(value) or isinstance(value, (bool, np.bool_) + _time.TIME_SCALARS)
        items = [value] if scalar else value
        try:
            items = list(items)
        except TypeError:
            raise QueryError(
                f"dimension {dim.name}: coordinates are a numpy array or a list of numbers, not {type(value).__name__}"
            ) from None
        arr = _exact_coords(dim, items)
    if arr.ndim != 1:
        raise located(
            QueryError(f"dimension {dim.name}: coordinates must be 1-D, not of shape {arr.shape}"),
            dimension=dim.name,
        )
    return np.ascontiguousarray(arr).reshape(-1).view(np.uint8)


def _exact_coords(dim: Dim, items: List[Any]) -> np.ndarray:
    """Python numbers as an array of the dimension's dtype, refusing any conversion that is not
    exact: ints out of range, floats on an integer dimension, values a float32 cannot hold."""
    dt = dim.dtype
    where = f"dimension {dim.name}"
    if dt.kind == "M":
        counts = [_time.count(dt, x, f"{where}: coordinate of cell {i}") for i, x in enumerate(items)]
        try:
            return np.array(counts, dtype=np.int64).view(dt)
        except OverflowError:
            raise QueryError(f"{where}: a coordinate does not fit {dt}") from None
    for i, x in enumerate(items):
        if not _is_number(x):
            raise QueryError(f"{where}: coordinate {x!r} of cell {i} is not a number")
    if dt.kind in "iu":
        info = np.iinfo(dt)
        for i, x in enumerate(items):
            if not isinstance(x, (numbers.Integral, np.integer)):
                raise QueryError(
                    f"{where}: coordinate {x!r} of cell {i} is not an integer (the dimension's dtype is {dt})"
                )
            if not info.min <= int(x) <= info.max:
                raise QueryError(f"{where}: coordinate {x} of cell {i} does not fit {dt}")
        return np.array([int(x) for x in items], dtype=dt)
    out = np.empty(len(items), dtype=dt)
    with np.errstate(over="ignore"):
        for i, x in enumerate(items):
            if isinstance(x, (numbers.Integral, np.integer)):
                try:
                    c = dt.type(float(int(x)))
                    exact = math.isfinite(float(c)) and int(c) == int(x)
                except OverflowError:
                    exact = False
            else:
                f = float(x)
                c = dt.type(f)
                # NaN and infinities pass: the engine rejects them, naming the cell.
                exact = float(c) == f or not math.isfinite(f)
            if not exact:
                raise QueryError(f"{where}: coordinate {x!r} of cell {i} is not exactly representable as {dt}")
            out[i] = c
    return out


def _write_layout(prepared: Sequence[Tuple[Attr, np.ndarray, Optional[np.ndarray]]], ndim: int) -> str:
    """"F" when every fixed-size value is in column-major cell order (and not row-major), so
    no value is copied; otherwise "C"."""
    fixed = [arr for a, arr, _ in prepared if a.kind not in (STR, BYTES, RAGGED)]
    if fixed and all(_codec.cell_layout(arr, ndim) == "F" for arr in fixed):
        return "F"
    return "C"


def _read_dtype(a: Attr) -> np.dtype:
    """The dtype of one attribute's cells in a read result (variable-length cells are objects)."""
    return np.dtype(object) if a.kind in (STR, BYTES, RAGGED) else a.dtype
