"""Dask: lazy ``dask.array`` views of dense arrays and ``dask.dataframe`` views of sparse arrays,
and parallel writes from them in which every task commits its own fragment.

>>> import tessera.dask as tsd
>>> x = tsd.from_tessera("img")                                     # doctest: +SKIP
>>> tsd.to_tessera(x * 2, "img2", attr="a")                          # doctest: +SKIP
>>> df = tsd.read_dataframe("pts", npartitions=8)                    # doctest: +SKIP
>>> tsd.write_dataframe(df, "pts2", dims=["x", "y"])                 # doctest: +SKIP

Every task reopens the array by URI in its own process (nothing but the URI, a timestamp and the
configuration travels), so the tasks run on any worker of a ``dask.distributed`` cluster. On such
a worker the engine decodes with as many threads as the worker runs tasks
(``sm.compute_concurrency``, unless the configuration sets it), as dask's nanny limits numpy's
threads, so that worker processes do not oversubscribe the machine's cores. All the
reads of one graph see one snapshot: the read handle's ``snapshot_timestamp()``, fixed when the
graph is built. Writes need no coordination beyond the commit protocol: each task writes and
commits one fragment; ``consolidate=True`` merges them once every task has finished.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

from . import array as _array
from .config import ConfigLike, as_items
from .consolidation import consolidate as _consolidate
from .errors import ArgumentError, ArgumentTypeError, QueryError
from .filters import Filter
from .result import Result
from .schema import ArraySchema, Attr, Dim

if TYPE_CHECKING:
    import dask.array
    import dask.dataframe

__all__ = ["from_tessera", "read_dataframe", "to_tessera", "write_dataframe"]

def _task_config(config: Optional[Dict[str, str]]) -> Optional[Dict[str, str]]:
    """The configuration a task opens the array with: on a ``dask.distributed`` worker, the
    engine's compute pool takes the worker's thread count unless ``config`` sets it."""
    if config and "sm.compute_concurrency" in config:
        return config
    try:
        from distributed import get_worker

        threads = int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return config  # not on a worker (threaded or synchronous scheduler, or no distributed)
    return {**(config or {}), "sm.compute_concurrency": str(max(1, threads))}


#: Default size of one chunk of ``from_tessera`` (a whole number of tiles per axis).
CHUNK_BYTES = 64 << 20
#: Default cells of one partition of ``read_dataframe``.
PARTITION_CELLS = 2_000_000
#: The most chunks a lazy dense array may have (dask's graph for more is too large to build).
MAX_CHUNKS = 1_000_000


def _dask_array() -> Any:
    try:
        import dask.array as da
    except ImportError as e:
        raise ImportError("tessera.dask needs dask (pip install 'dask[array]')") from e
    return da


def _dask_dataframe() -> Any:
    try:
        import dask.dataframe as dd
    except ImportError as e:
        raise ImportError("tessera.dask needs dask's dataframes (pip install 'dask[dataframe]')") from e
    return dd


class _DenseBlocks:
    """What ``dask.array.from_array`` slices: reads one block (index slices from 0) by reopening
    the array at the graph's snapshot in the worker. Picklable: plain fields only."""

    def __init__(
        self, uri: str, timestamp: int, config: Optional[Dict[str, str]], attr: str, origin: Sequence[int],
        shape: Tuple[int, ...], dtype: np.dtype,
    ) -> None:
        self.uri = uri
        self.timestamp = timestamp
        self.config = config
        self.attr = attr
        self.origin = tuple(origin)
        self.shape = shape
        self.dtype = dtype
        self.ndim = len(shape)

    def __getitem__(self, key: Tuple[slice, ...]) -> np.ndarray:
        ranges = []
        for o, s, n in zip(self.origin, key, self.shape):
            start, stop, step = s.indices(n)
            if step != 1:
                raise ArgumentError(f"blocks are read with step 1, not {step}")
            if stop <= start:
                return np.empty(tuple(max(0, t.indices(m)[1] - t.indices(m)[0]) for t, m in zip(key, self.shape)),
                                dtype=self.dtype)
            ranges.append((o + start, o + stop - 1))
        with _array.open(self.uri, "r", timestamp=self.timestamp, config=_task_config(self.config)) as A:
            out = A.read(ranges=ranges, attrs=[self.attr])
        assert isinstance(out, np.ndarray)
        return out


def from_tessera(
    uri: _array.PathLike,
    attr: Optional[str] = None,
    chunks: Any = None,
    *,
    ranges: Optional[Sequence[Optional[Tuple[int, int]]]] = None,
    timestamp: Optional[_array.TimestampRange] = None,
    config: Optional[ConfigLike] = None,
) -> "dask.array.Array":
    """A lazy ``dask.array`` over attribute ``attr`` (may be omitted when the array has one) of
    the dense array at ``uri``: index 0 of each axis is the domain start (or the start of
    ``ranges``, inclusive (lo, hi) per dimension, to view a box). ``chunks``: as dask takes them;
    by default whole tiles, as many per chunk as make about 64 MiB. Every chunk is read by its
    own task from the snapshot fixed now (``timestamp`` as in ``ts.open``)."""
    da = _dask_array()
    cfg = as_items(config)
    with _array.open(uri, "r", timestamp=timestamp, config=config) as A:
        if A.sparse:
            raise QueryError(f"array {A.uri} is sparse: read it with tessera.dask.read_dataframe")
        name = _one_attr(A, attr)
        a = A.schema.attr(name)
        if a.var or a.nullable or a.cell_val_num != 1 or np.dtype(a.dtype).kind not in "biufcM":
            raise QueryError(f"attribute {name} is not fixed-size and non-null: a dask array cannot hold it")
        dims = A.schema.dims
        box = _box(dims, ranges)
        dtype = np.dtype(a.dtype)
        ts = A.snapshot_timestamp()
        start = A.start
        uri_s = A.uri
    shape = tuple(hi - lo + 1 for lo, hi in box)
    if chunks is None:
        chunks = _tile_chunks(dims, box, dtype.itemsize)
    count = math.prod(len(c) for c in da.core.normalize_chunks(chunks, shape, dtype=dtype))
    if count > MAX_CHUNKS:
        raise QueryError(f"{count} chunks is more than {MAX_CHUNKS}: pass larger chunks or a smaller box (ranges)")
    if start is not None:
        raise ArgumentError("from_tessera reads a snapshot: give one timestamp, not a (start, end) range")
    blocks = _DenseBlocks(uri_s, ts, cfg, name, [lo for lo, _ in box], shape, dtype)
    token = f"tessera-{uri_s}-{name}-{ts}-{box}"
    meta = np.empty((0,) * len(shape), dtype)
    x = da.from_array(blocks, chunks=chunks, name=token, lock=False, asarray=False, fancy=False, meta=meta)
    return cast("dask.array.Array", x)


def _one_attr(A: _array.Array, attr: Optional[str]) -> str:
    if attr is None:
        if len(A.attr_names) != 1:
            raise ArgumentError(f"array {A.uri} has attributes {', '.join(A.attr_names)}: say which one (attr=...)")
        return A.attr_names[0]
    if attr not in A.attr_names:
        raise ArgumentError(f"array {A.uri} has no attribute {attr!r} (it has: {', '.join(A.attr_names)})")
    return attr


def _box(dims: Sequence[Dim], ranges: Optional[Sequence[Optional[Tuple[int, int]]]]) -> List[Tuple[int, int]]:
    """The inclusive box read: the domain, or ``ranges`` checked against it."""
    if ranges is None:
        return [(int(d.int_domain[0]), int(d.int_domain[1])) for d in dims]
    if len(ranges) != len(dims):
        raise ArgumentError(f"ranges gives {len(ranges)} (lo, hi) pairs for {len(dims)} dimensions")
    box = []
    for d, r in zip(dims, ranges):
        lo, hi = (int(d.int_domain[0]), int(d.int_domain[1]))
        if r is not None:
            lo, hi = int(r[0]), int(r[1])
        if lo > hi or lo < d.int_domain[0] or hi > d.int_domain[1]:
            raise ArgumentError(f"dimension {d.name}: range ({lo}, {hi}) is not inside the domain {tuple(d.domain)}")
        box.append((lo, hi))
    return box


def _tile_chunks(dims: Sequence[Dim], box: Sequence[Tuple[int, int]], itemsize: int) -> Tuple[Tuple[int, ...], ...]:
    """Chunks of whole tiles (the first and last may be cut by the box), about ``CHUNK_BYTES``."""
    tiles = [int(d.tile or 1) for d in dims]  # dense dimensions always have a tile extent
    tile_bytes = math.prod(tiles) * itemsize
    counts = [(-(-(hi - d.int_domain[0] + 1) // t)) - ((lo - d.int_domain[0]) // t)
              for d, (lo, hi), t in zip(dims, box, tiles)]
    per = _array._default_tiles(counts, tile_bytes, CHUNK_BYTES)
    out = []
    for d, (lo, hi), t, k in zip(dims, box, tiles, per):
        step = t * k
        first = int(d.domain[0]) + ((lo - int(d.domain[0])) // step + 1) * step  # next chunk boundary
        edges = [lo, *range(first, hi + 1, step), hi + 1]
        out.append(tuple(b - a for a, b in zip(edges, edges[1:]) if b > a))
    return tuple(out)


class _BlockWriter:
    """``dask.array.store``'s target: writes one block as one fragment (index 0 = ``origin``)."""

    def __init__(self, uri: str, attr: str, origin: Sequence[int], config: Optional[Dict[str, str]]) -> None:
        self.uri = uri
        self.attr = attr
        self.origin = tuple(origin)
        self.config = config

    def __setitem__(self, key: Tuple[slice, ...], value: np.ndarray) -> None:
        sel = tuple(slice(o + s.start, o + s.stop) for o, s in zip(self.origin, key))
        with _array.open(self.uri, "w", config=_task_config(self.config)) as A:
            A[sel] = {self.attr: np.ascontiguousarray(value)}


def to_tessera(
    x: "dask.array.Array",
    uri: _array.PathLike,
    attr: str = "a",
    *,
    region: Optional[Sequence[int]] = None,
    tile: Optional[Sequence[int]] = None,
    filters: Sequence[Filter] = (),
    consolidate: bool = False,
    config: Optional[ConfigLike] = None,
    compute: bool = True,
) -> Any:
    """Writes the dask array ``x`` into attribute ``attr`` of the dense array at ``uri``, every
    chunk from its own task as its own fragment. A missing array is created first: dimensions
    ``d0, d1, ...`` with domains ``[0, n - 1]``, tiles of the chunks' size (or ``tile``), one
    attribute ``attr`` of ``x``'s dtype with ``filters``. ``region``: the domain coordinates
    where ``x[0, 0, ...]`` goes (default: the domain start). ``consolidate``: merge the new
    fragments once all are written. ``compute=False`` returns the ``dask.delayed`` to run."""
    da = _dask_array()
    from dask.delayed import delayed

    if not isinstance(x, da.Array):
        raise ArgumentTypeError(f"x is a dask.array.Array, not {type(x).__name__}")
    if x.ndim == 0 or any(math.isnan(n) for n in x.shape):
        raise ArgumentError(f"x needs known, non-empty shape, not {x.shape}")
    cfg = as_items(config)
    path = _array._uri(uri)
    if not _is_array(path, config):
        tiles = list(tile) if tile is not None else [max(1, c[0]) for c in x.chunks]
        if len(tiles) != x.ndim:
            raise ArgumentError(f"tile gives {len(tiles)} extents for an array of {x.ndim} axes")
        schema = ArraySchema(
            dims=[Dim(f"d{i}", (0, n - 1), t) for i, (n, t) in enumerate(zip(x.shape, tiles))],
            attrs=[Attr(attr, x.dtype, filters=filters)],
        )
        _array.create(uri, schema, config)
    with _array.open(uri, "r", config=config) as A:
        if A.sparse:
            raise QueryError(f"array {A.uri} is sparse: write it with tessera.dask.write_dataframe")
        a = A.schema.attr(_one_attr(A, attr))
        if np.dtype(a.dtype) != x.dtype:
            raise ArgumentError(f"x has dtype {x.dtype}, attribute {attr} of {A.uri} holds {np.dtype(a.dtype)}")
        dims = A.schema.dims
    origin = [int(d.int_domain[0]) for d in dims] if region is None else [int(v) for v in region]
    if len(origin) != x.ndim or len(dims) != x.ndim:
        raise ArgumentError(f"x has {x.ndim} axes, the array {len(dims)} dimensions, region {len(origin)} values")
    for d, o, n in zip(dims, origin, x.shape):
        if o < d.int_domain[0] or o + n - 1 > d.int_domain[1]:
            raise ArgumentError(
                f"dimension {d.name}: [{o}, {o + n - 1}] does not fit the domain {tuple(d.domain)}"
            )
    stored = da.store(x, _BlockWriter(path, attr, origin, cfg), lock=False, compute=False)
    if consolidate:
        stored = delayed(_consolidate_after)(stored, path, cfg)
    return stored.compute() if compute else stored


def _consolidate_after(_done: Any, uri: str, config: Optional[Dict[str, str]]) -> None:
    _consolidate(uri, config=config)


def _is_array(path: str, config: Optional[ConfigLike]) -> bool:
    if "://" not in path and not os.path.exists(path):
        return False
    try:
        with _array.open(path, "r", config=config):
            return True
    except Exception:  # not an array (yet): create it, which reports what is there
        return False


# -- sparse arrays as dataframes -------------------------------------------------------------


def read_dataframe(
    uri: _array.PathLike,
    ranges: Optional[_array.RangesLike] = None,
    npartitions: Optional[int] = None,
    attrs: Optional[Sequence[str]] = None,
    *,
    timestamp: Optional[_array.TimestampRange] = None,
    config: Optional[ConfigLike] = None,
) -> "dask.dataframe.DataFrame":
    """The cells of the sparse array at ``uri`` (inside ``ranges``, as ``Array.read`` takes them)
    as a lazy ``dask.dataframe``: the dimension columns, then ``attrs`` (default: all). The
    partitions split the first dimension at points that give each about the same number of
    cells, estimated from the fragments' cell counts and bounding boxes (``npartitions``;
    default: one per 2M cells). Each partition is read by its own task from the snapshot fixed
    now."""
    dd = _dask_dataframe()
    from dask.delayed import delayed

    with _array.open(uri, "r", timestamp=timestamp, config=config) as A:
        if not A.sparse:
            raise QueryError(f"array {A.uri} is dense: read it with tessera.dask.from_tessera")
        picked = list(A.attr_names) if attrs is None else [a.name for a in A._attrs(attrs)]
        user = A._sparse_ranges(ranges)
        spans = A._need_read("read_dataframe").cell_spans(0)
        ts = A.snapshot_timestamp()
        dim0 = A.schema.dims[0]
        uri_s = A.uri
    with _array.open(uri_s, "r", timestamp=(2**63 - 1, 2**63 - 1), config=config) as E:
        meta = _sparse_read(E, None, picked).to_pandas()  # no fragment in that time range: typed, empty
    cells = int(spans[2].sum())  # every tile of every fragment but deletions
    n = npartitions if npartitions is not None else max(1, -(-cells // PARTITION_CELLS))
    if not isinstance(n, int) or n < 1:
        raise ArgumentError(f"npartitions is a positive int, not {npartitions!r}")
    first = user[0] or [tuple(dim0.domain)]  # no range: the whole domain
    pieces = _split_first_dim(dim0, spans, first, n)
    cfg = as_items(config)
    parts = [
        delayed(_read_partition)(uri_s, ts, cfg, [p, *(r or None for r in user[1:])], picked, meta)
        for p in pieces
    ]
    if not parts:
        return cast("dask.dataframe.DataFrame", dd.from_pandas(meta, npartitions=1))
    return cast("dask.dataframe.DataFrame", dd.from_delayed(parts, meta=meta, verify_meta=False))


def _sparse_read(A: _array.Array, ranges: Any, attrs: List[str]) -> Result:
    out = A.read(ranges=ranges, attrs=attrs, order="U")
    assert isinstance(out, Result)
    return out


def _read_partition(
    uri: str, ts: int, config: Optional[Dict[str, str]], ranges: Any, attrs: List[str], meta: Any
) -> Any:
    with _array.open(uri, "r", timestamp=ts, config=_task_config(config)) as A:
        df = _sparse_read(A, ranges, attrs).to_pandas()
    return df.astype(meta.dtypes.to_dict(), copy=False) if len(df) == 0 else df


def _split_first_dim(dim: Dim, spans: _Spans, user: List[Any], n: int) -> List[List[Any]]:
    """Up to ``n`` disjoint lists of inclusive ranges of the first dimension, covering ``user``'s
    ranges, cut where the cells of ``spans`` (lowest and highest coordinate and cell count of each
    data tile, its cells taken as spread evenly between them) reach multiples of 1/n of the
    total."""
    cuts = _cuts(spans, n)
    is_int = np.dtype(dim.dtype).kind in "iuM"  # datetime64: int counts of the unit
    bounds: List[Tuple[Any, Any]] = []
    lo: Any = None
    for c in cuts:
        c = math.ceil(c) if is_int else c
        bounds.append((lo, (c - 1) if is_int else float(np.nextafter(c, -np.inf))))
        lo = c
    bounds.append((lo, None))
    out = []
    for blo, bhi in bounds:
        pieces = []
        for ulo, uhi in user:
            a = ulo if blo is None else max(ulo, blo)
            b = uhi if bhi is None else min(uhi, bhi)
            if a <= b:
                pieces.append((a, b))
        if pieces:
            out.append(pieces)
    return out


#: Per data tile: lowest and highest coordinate along a dimension, and cells.
_Spans = Tuple[np.ndarray, np.ndarray, np.ndarray]


def _cuts(spans: _Spans, n: int, snap: bool = True) -> List[float]:
    """Interior cut points (increasing, distinct) at which the cell mass of ``spans`` reaches
    k/n of its total, k = 1..n-1: a span's cells are spread evenly over [lo, hi], those of a span
    of one point sit on it. One sweep over the spans' end points (a tile index may have
    millions of spans).

    ``snap``: a cut moves to the nearest lowest coordinate of a span when that moves at most a
    quarter of a part's cells, so that a tile is not cut in two (a cut tile is read by both
    parts, its cells tested one by one: a whole one is decoded straight into the result)."""
    lo, hi, cells = (np.asarray(a, dtype=np.float64) for a in spans)
    lo, hi = np.minimum(lo, hi), np.maximum(lo, hi)
    total = float(cells.sum())
    if n <= 1 or total <= 0:
        return []
    wide = hi > lo
    density = np.where(wide, cells / np.where(wide, hi - lo, 1.0), 0.0)
    # Mass as a piecewise-linear function of the coordinate: the density steps up at each
    # span's lo and down at its hi; a one-point span adds its cells as a step at its point.
    points = np.unique(np.concatenate([lo, hi]))
    step = np.zeros(len(points))
    np.add.at(step, np.searchsorted(points, lo[wide]), density[wide])
    np.add.at(step, np.searchsorted(points, hi[wide]), -density[wide])
    slope = np.cumsum(step)[:-1]  # density on [points[i], points[i + 1])
    jump = np.zeros(len(points))
    np.add.at(jump, np.searchsorted(points, lo[~wide]), cells[~wide])
    # below[i]: the cells below points[i] (its own jump not counted).
    below = np.concatenate([[0.0], np.cumsum(slope * np.diff(points) + jump[:-1])])
    starts = np.unique(lo)
    cuts: List[float] = []
    last = len(points) - 1
    for k in range(1, n):
        target = total * k / n
        i = min(max(int(np.searchsorted(below, target, side="left")) - 1, 0), last)  # below[i] < target
        if target <= below[i] + jump[i] or i == last or slope[i] <= 0:
            # In the cells on points[i]: they go to the side that leaves the nearer mass.
            before = target - below[i] <= below[i] + jump[i] - target
            cut = float(points[i]) if before else float(np.nextafter(points[i], np.inf))
        else:
            cut = float(points[i] + (target - below[i] - jump[i]) / slope[i])
        if snap and len(starts):
            j = int(np.searchsorted(starts, cut, side="right"))
            # (how far the cells left of a tile start are from the target, the start)
            near = [(abs(below[np.searchsorted(points, starts[x])] - target), float(starts[x]))
                    for x in (j - 1, j) if 0 <= x < len(starts)]
            off, start = min(near)
            if off <= total / n / 4:
                cut = start
        if not cuts or cut > cuts[-1]:
            cuts.append(cut)
    return cuts


def write_dataframe(
    df: "dask.dataframe.DataFrame",
    uri: _array.PathLike,
    dims: Sequence[str],
    *,
    consolidate: bool = False,
    config: Optional[ConfigLike] = None,
    compute: bool = True,
) -> Any:
    """Writes every partition of ``df`` into the existing sparse array at ``uri`` as its own
    fragment, in parallel: the columns ``dims`` are the coordinates, the others attributes
    (each an attribute of the array). ``consolidate``: merge the new fragments afterwards."""
    dd = _dask_dataframe()
    from dask.delayed import delayed

    if not isinstance(df, dd.DataFrame):
        raise ArgumentTypeError(f"df is a dask.dataframe.DataFrame, not {type(df).__name__}")
    with _array.open(uri, "r", config=config) as A:
        if not A.sparse:
            raise QueryError(f"array {A.uri} is dense: write it with tessera.dask.to_tessera")
        if sorted(dims) != sorted(A.dim_names):
            raise ArgumentError(f"dims must name the array's dimensions {A.dim_names}, not {list(dims)}")
        unknown = [c for c in df.columns if c not in A.dim_names and c not in A.attr_names]
        if unknown:
            raise ArgumentError(f"columns {unknown} are neither dimensions nor attributes of {A.uri}")
        uri_s = A.uri
    cfg = as_items(config)
    parts = [delayed(_write_partition)(p, uri_s, list(dims), cfg) for p in df.to_delayed()]
    done = delayed(_all_done)(parts)
    if consolidate:
        done = delayed(_consolidate_after)(done, uri_s, cfg)
    return done.compute() if compute else done


def _write_partition(part: Any, uri: str, dims: List[str], config: Optional[Dict[str, str]]) -> int:
    if len(part) == 0:
        return 0
    coords = {d: part[d].to_numpy() for d in dims}
    values = {c: part[c].to_numpy() for c in part.columns if c not in dims}
    with _array.open(uri, "w", config=_task_config(config)) as A:
        A.write(coords, values)
    return len(part)


def _all_done(counts: List[int]) -> int:
    return sum(counts)
