"""The roles of the multi-process stress test (``test_stress.py``, issue 12), each run as its own
process: ``python stress_worker.py <role> <index> <workdir> <deadline> <seed>``. Every role
stops by itself at ``deadline`` (``time.time()`` seconds) and prints one JSON line: its counts
and the violations it saw.

Four arrays live in ``<workdir>``, one per kind (``KINDS``); each writer ``w`` owns a region
of each and applies to it a numbered sequence of operations ("ops") 0, 1, 2, ..., one commit
each, so the state of its region after op ``n`` is a known function ``expected(kind, w, n)``
and every check is exact:

* ``dense``: a dense int64 array; writer ``w`` owns rows ``[w*4, (w+1)*4)`` (tiles of 3 x 5
  cells, so a block spans tiles and a torn write shows as a mix of ops inside a block). Op
  ``n`` writes the whole block with values encoding ``(n, w, cell)`` (as a dense slab, or when
  ``n % 4 == 2`` as a sparse update of every cell), except when ``n % 4 == 3``, which deletes
  the cells ``deleted(kind, i)`` of the block (they read as the fill value, -1).
* ``sparse``: a sparse array without duplicates; writer ``w`` owns the points ``(i, w)``, i <
  16; op ``n`` writes them all (values encoding ``(n, w, i)``) or, when ``n % 4 == 3``, deletes
  those ``deleted``.
* ``dups``: a sparse array allowing duplicates; op ``n`` of writer ``w`` writes the fresh
  points ``(n, w*8 + i)``, i < 4, each twice (two copies with distinct values), or, when
  ``n % 4 == 3``, deletes the points of op ``n - 1`` with even ``i``. Every op ever committed
  stays visible, so the region holds a known multiset in which a cell read twice, a lost write
  or a deleted cell that came back all show.
* ``chunked``: like ``dense`` (the same ops and values), but with chunked tiles: a zstd-filtered
  int64 array of 40 x 60 tiles (19200 bytes: four chunks of ``sm.tile_chunk_size`` = 4096 bytes
  and a shorter fifth, ``CHUNKED_CONFIG``, which the writers and consolidators use; a tile row
  is 480 bytes, so chunks begin inside rows). Writer ``w`` owns rows ``[w*60, (w+1)*60)`` of
  all 120 columns, so each slab op covers two tiles whole (filtered chunk by chunk straight
  from the caller's rows) and half of two more, which it shares with the next or previous
  writer (assembled from its cells and the fill). Deletes remove whole columns of the block
  (``i % 120 % 3 == 0``) by ranges.

Roles:

* ``writer`` (index ``w``): round-robin over the arrays, applies the next op to its region and,
  once the commit has returned, appends ``<kind> <n> <time.monotonic()>`` to its log
  ``log-<w>.txt`` (flushed and fsynced).
* ``reader``: in a loop, for each array: notes ``t_start`` (``time.monotonic()``, one clock for
  every process), reads the writers' logs (after ``t_start``), then opens and reads the whole
  array; for each writer's region it finds which op ``n`` the region's contents are the state
  of (a region matching no state is ``torn``, ``duplicate``, ``resurrected``, ``missing`` or
  ``corrupt``), and checks that ``n`` is at least every op whose commit returned before
  ``t_start`` (``missed``: a committed write not seen) and at least the op this reader saw
  last time (``backwards``: going back in time). Errors opening or reading are ``read_error``.
  On ``chunked`` it also reads, for each writer, a few rows and columns of its block (partial
  reads in one snapshot, ``PARTIAL_READ_CONFIG``: without the tile cache, so they decode only
  the one or two chunks of each tile that hold them) and checks each the same way against the
  same cells of each state (``missed`` and ``backwards`` too, the latter against whole reads as
  well); it reads ``chunked`` whole every other round only, as that costs more than the rest.
  With every whole read it asks the engine, in the same snapshot, for the count, sum, min and
  max of the whole domain (from tile summaries where no newer fragment overlaps a tile, which
  consolidation rewrites too) and checks them against the cells it read (``aggregate``).
* ``consolidator``: in a loop, consolidates one array (everything, or a random run of
  consecutive fragments by names or by timestamps) and often vacuums it. Refusals that are
  part of the API (a sparse run with deletions not starting at the oldest fragment; a run,
  chosen from a listing, that another consolidation superseded or a newer commit split
  meanwhile; the array busy longer than ``VACUUM_WAIT_MS``) are counted, any other error is a
  ``consolidate_error`` or ``vacuum_error`` violation.
"""

from __future__ import annotations

import collections
import json
import os
import random
import sys
import time
import traceback
from typing import Any, Counter, Dict, List, Optional, Tuple

import numpy as np

import tessera as ts

KINDS = ("dense", "sparse", "dups", "chunked")
#: The kinds whose arrays are dense: each writer owns a block of whole rows.
DENSE_KINDS = ("dense", "chunked")
#: Writers at most (the arrays' domains have room for this many regions).
MAX_WRITERS = 8
#: Dense kinds: rows per writer block, columns (the whole width), and the tile shape.
BLOCK = {"dense": (4, 8), "chunked": (60, 120)}
TILE = {"dense": (3, 5), "chunked": (40, 60)}
#: Points per writer and op: dense block cells, sparse points, dups points.
K = {"sparse": 16, "dups": 4, **{kind: br * bc for kind, (br, bc) in BLOCK.items()}}
FILL = -1
#: Chunked tiles: a 40 x 60 int64 tile (19200 bytes) is more than two chunks of 4 KiB, so its
#: filtered attribute is stored as five independently filtered chunks.
CHUNKED_CONFIG = {"sm.tile_chunk_size": "4096"}
#: Partial reads of ``chunked``: without the tile cache, which would otherwise hold whole tiles.
PARTIAL_READ_CONFIG = {**CHUNKED_CONFIG, "sm.tile_cache_size": "0"}
#: Writers of ``dense`` and ``sparse`` checkpoint the commit log and copy fragment metadata every
#: 3 commits (the default is 32), so those race with the other writers, the consolidations and
#: the vacuums; readers open with the default interval (a guess that misses their checkpoints).
CHECKPOINTING_CONFIG = {"sm.commit.checkpoint_interval": "3"}
#: The configuration each kind's array is created, written and consolidated with.
CONFIG: Dict[str, Optional[Dict[str, str]]] = {"dense": CHECKPOINTING_CONFIG, "sparse": CHECKPOINTING_CONFIG,
                                               "dups": None, "chunked": CHUNKED_CONFIG}
#: Value encoding (``encode``): op number, writer and cell index within the region, copy bit.
OP_SHIFT, WRITER_SHIFT, CELL_MASK = 32, 24, (1 << 23) - 1
#: How long vacuum waits for readers before giving up (busy) in the consolidators.
VACUUM_WAIT_MS = 1000
#: Violation samples of each kind each process reports (all are counted).
SAMPLES = 10


def deleted(kind: str, i: np.ndarray) -> np.ndarray:
    """Whether cells/points ``i`` of a region are among those a delete op deletes."""
    if kind == "chunked":
        i = i % BLOCK[kind][1]  # whole columns of the block
    out: np.ndarray = i % 2 == 0 if kind == "dups" else i % 3 == 0
    return out


def is_delete(n: int) -> bool:
    return n % 4 == 3


def encode(n: Any, w: int, i: Any, copy: Any) -> Any:
    return (n << OP_SHIFT) | (w << WRITER_SHIFT) | (i << 1) | copy


def op_part(v: np.ndarray) -> np.ndarray:
    return v >> OP_SHIFT


def writer_part(v: np.ndarray) -> np.ndarray:
    return (v >> WRITER_SHIFT) & 0xFF


def cell_part(v: np.ndarray) -> np.ndarray:
    return (v >> 1) & CELL_MASK


def uri_of(workdir: str, kind: str) -> str:
    return os.path.join(workdir, kind)


def create_arrays(workdir: str, writers: int) -> None:
    assert writers <= MAX_WRITERS
    a = [ts.Attr("a", "int64", fill=FILL)]
    for kind in DENSE_KINDS:
        (br, bc), (tr, tc) = BLOCK[kind], TILE[kind]
        attrs = [ts.Attr("a", "int64", fill=FILL, filters=[ts.Zstd(level=1)])] if kind == "chunked" else a
        ts.create(uri_of(workdir, kind),
                  ts.ArraySchema([ts.Dim("r", (0, MAX_WRITERS * br - 1), tr), ts.Dim("c", (0, bc - 1), tc)], attrs),
                  config=CONFIG[kind])
    ts.create(uri_of(workdir, "sparse"),
              ts.ArraySchema([ts.Dim("x", (0, 63), 4), ts.Dim("y", (0, 63), 4)], a, sparse=True, capacity=4))
    ts.create(uri_of(workdir, "dups"),
              ts.ArraySchema([ts.Dim("x", (0, 1 << 40), 64), ts.Dim("y", (0, 63), 8)], a, sparse=True,
                             capacity=4, allows_duplicates=True))


# -- the ops and the states they leave -------------------------------------------------------


def region_coords(kind: str, w: int, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """Coordinates of the K cells an op ``n`` of writer ``w`` writes (in cell order i)."""
    i = np.arange(K[kind], dtype=np.int64)
    if kind in DENSE_KINDS:
        br, bc = BLOCK[kind]
        return w * br + i // bc, i % bc
    if kind == "sparse":
        return i, np.full_like(i, w)
    return np.full_like(i, n), w * 8 + i


def apply_op(workdir: str, kind: str, w: int, n: int) -> None:
    """Applies op ``n`` of writer ``w`` to the array ``kind`` (one commit)."""
    i = np.arange(K[kind], dtype=np.int64)
    d0, d1 = ("r", "c") if kind in DENSE_KINDS else ("x", "y")
    with ts.open(uri_of(workdir, kind), "w", config=CONFIG[kind]) as W:
        if is_delete(n) and kind == "chunked":
            br, bc = BLOCK[kind]
            W.delete(ranges={d0: (w * br, (w + 1) * br - 1), d1: [(c, c) for c in range(0, bc, 3)]})
            return
        if is_delete(n):
            a, b = region_coords(kind, w, n - 1)
            mask = deleted(kind, i)
            W.delete({d0: a[mask], d1: b[mask]})
            return
        a, b = region_coords(kind, w, n)
        vals = encode(n, w, i, 0)
        if kind in DENSE_KINDS:
            br, bc = BLOCK[kind]
            if n % 4 == 2:
                W.write({d0: a, d1: b}, vals)
            else:
                W[w * br:(w + 1) * br, :] = vals.reshape(br, bc)
        elif kind == "sparse":
            W.write({d0: a, d1: b}, vals)
        else:
            W.write({d0: np.concatenate([a, a]), d1: np.concatenate([b, b])}, np.concatenate([vals, vals | 1]))


def expected(kind: str, w: int, n: int) -> np.ndarray:
    """The values in writer ``w``'s region after its op ``n`` (-1: before any), sorted; the
    dense fill value is left out."""
    i = np.arange(K[kind], dtype=np.int64)
    if n < 0:
        return np.zeros(0, dtype=np.int64)
    if kind != "dups":
        if is_delete(n):
            return np.sort(encode(n - 1, w, i[~deleted(kind, i)], 0))
        return np.sort(encode(n, w, i, 0))
    m = np.arange(n + 1, dtype=np.int64)[:, None]
    keep = (m % 4 != 3) & ~((m % 4 == 2) & (m + 1 <= n) & deleted(kind, i)[None, :])
    mm, ii = np.broadcast_arrays(m, i[None, :])
    v = encode(mm[keep], w, ii[keep], 0)
    return np.sort(np.concatenate([v, v | 1]))


def classify(kind: str, w: int, n: int, got: np.ndarray, cells: Optional[np.ndarray] = None
             ) -> Optional[Tuple[str, str]]:
    """None if ``got`` (sorted) holds exactly the values of the state after op ``n``; else the
    kind of difference and its details. ``cells``: only those cells of the region were read
    (dense kinds)."""
    want = expected(kind, w, n)
    if cells is not None:
        want = want[np.isin(cell_part(want), cells)]
    if np.array_equal(got, want):
        return None
    gu, gc = np.unique(got, return_counts=True)
    wu, wc = np.unique(want, return_counts=True)
    every = np.union1d(gu, wu)
    gcount, wcount = np.zeros(len(every), np.int64), np.zeros(len(every), np.int64)
    gcount[np.searchsorted(every, gu)] = gc
    wcount[np.searchsorted(every, wu)] = wc
    excess, lack = every[gcount > wcount], every[gcount < wcount]
    detail = (f"no state matches (nearest op {n}); (op, cell) in excess "
              f"{list(zip(op_part(excess).tolist(), cell_part(excess).tolist()))[:6]}, missing "
              f"{list(zip(op_part(lack).tolist(), cell_part(lack).tolist()))[:6]}")
    if (gcount > wcount)[wcount > 0].any() or (kind != "dups" and (gcount > 1).any()):
        return "duplicate", detail
    if kind != "dups" and len(np.unique(op_part(got))) > 1:
        return "torn", detail
    if len(excess) and deleted(kind, cell_part(excess)).all():
        return "resurrected", detail
    if len(lack):
        return "missing", detail
    return "inconsistent", detail


def regions_of(kind: str, data: Dict[str, np.ndarray], writers: int) -> Tuple[Dict[int, np.ndarray], List[str]]:
    """Splits a whole-array read into the writers' regions (sorted values of each); checks that
    each value sits at the coordinates its encoding names (else a ``corrupt`` message)."""
    if kind in DENSE_KINDS:
        a = data["a"]
        rows, cols = np.nonzero(a != FILL)
        vals = a[rows, cols].astype(np.int64)
        br, bc = BLOCK[kind]
        owner, local, xs = rows // br, (rows % br) * bc + cols, None
    else:
        x, y, vals = data["x"], data["y"], data["a"].astype(np.int64)
        owner, local, xs = (y, x, None) if kind == "sparse" else (y // 8, y % 8, x)
    ok = (writer_part(vals) == owner) & (cell_part(vals) == local) & (owner < writers)
    if xs is not None:
        ok &= op_part(vals) == xs
    corrupt = [f"value {int(v)} at {kind} coordinates of writer {int(o)} cell {int(c)}"
               for v, o, c in zip(vals[~ok][:3], owner[~ok][:3], local[~ok][:3])]
    return {w: np.sort(vals[owner == w]) for w in range(writers)}, corrupt


def op_of(kind: str, got: np.ndarray) -> int:
    """The op whose state the region (sorted values) most likely shows (checked exactly
    afterwards)."""
    if not len(got):
        return -1
    m = int(op_part(got).max())
    if m % 4 == 2:
        # The delete that follows op m removes cells of op m: the state after it has op m's
        # kept cells only.
        present = cell_part(got[op_part(got) == m])
        if len(present) and not deleted(kind, present).any():
            return m + 1
    return m


# -- logs ------------------------------------------------------------------------------------


class Logs:
    """The writers' logs, read incrementally: for each (kind, writer), the ops committed and
    when their commit returned."""

    def __init__(self, workdir: str, writers: int) -> None:
        self.paths = [os.path.join(workdir, f"log-{w}.txt") for w in range(writers)]
        self.offsets = [0] * writers
        self.entries: Dict[Tuple[str, int], List[Tuple[int, float]]] = collections.defaultdict(list)

    def refresh(self) -> None:
        for w, path in enumerate(self.paths):
            try:
                with open(path, "rb") as f:
                    f.seek(self.offsets[w])
                    chunk = f.read()
            except FileNotFoundError:
                continue
            end = chunk.rfind(b"\n") + 1  # whole lines only
            for line in chunk[:end].decode().splitlines():
                kind, n, t = line.split()
                self.entries[(kind, w)].append((int(n), float(t)))
            self.offsets[w] += end

    def committed_before(self, kind: str, w: int, t: float) -> int:
        """The newest op of writer ``w`` on ``kind`` whose commit returned before ``t``."""
        best = -1
        for n, t_ret in reversed(self.entries[(kind, w)]):
            if t_ret < t:
                best = max(best, n)
                break
        return best

    def last(self, kind: str, w: int) -> int:
        e = self.entries[(kind, w)]
        return e[-1][0] if e else -1


# -- roles -----------------------------------------------------------------------------------


class Report:
    def __init__(self) -> None:
        self.counts: Counter[str] = collections.Counter()
        self.violations: Counter[str] = collections.Counter()
        self.samples: List[str] = []

    def violation(self, what: str, detail: str) -> None:
        """Counts a violation; keeps the first ``SAMPLES`` of each kind as examples."""
        self.violations[what] += 1
        if self.violations[what] <= SAMPLES:
            self.samples.append(f"{what}: {detail}")

    def json(self) -> str:
        return json.dumps({"counts": dict(self.counts), "violations": dict(self.violations),
                           "samples": self.samples})


def write_loop(workdir: str, w: int, deadline: float, seed: int, report: Report) -> None:
    rng = random.Random(seed)
    next_op = dict.fromkeys(KINDS, 0)
    with open(os.path.join(workdir, f"log-{w}.txt"), "a") as log:
        while time.time() < deadline:
            for kind in KINDS:
                n = next_op[kind]
                try:
                    apply_op(workdir, kind, w, n)
                except ts.TesseraError as e:
                    # Nothing may fail; the op is tried again (a write that failed at open wrote
                    # nothing).
                    report.violation("write_error", f"{kind} op {n}: {type(e).__name__}: {e}")
                    continue
                t_ret = time.monotonic()
                log.write(f"{kind} {n} {t_ret!r}\n")
                log.flush()
                os.fsync(log.fileno())
                next_op[kind] = n + 1
                report.counts[f"{kind}_ops"] += 1
                report.counts["deletes" if is_delete(n) else "writes"] += 1
            time.sleep(rng.uniform(0, 0.005))


#: The aggregates each whole read is checked against, computed by the engine in the same snapshot.
AGGREGATES = ["count", "sum", "min", "max"]


def read_all(uri: str, kind: str) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
    """The whole array's cells, and the engine's ``AGGREGATES`` of ``a`` over the whole domain
    in the same snapshot (from tile summaries where a tile allows, else from its cells)."""
    with ts.open(uri) as A:
        if kind in DENSE_KINDS:
            data = {"a": np.asarray(A[:, :])}
        else:
            res = A.read()
            assert isinstance(res, dict), "a sparse read gives one array per field"
            data = {k: np.asarray(v) for k, v in res.items()}
        return data, A.aggregate({"a": AGGREGATES})["a"]


def aggregates_of(a: np.ndarray) -> Dict[str, Any]:
    """``AGGREGATES`` of the values a read gave, as the engine reports them."""
    v = a.astype(np.int64).ravel()
    if v.size == 0:
        return {"count": 0, "sum": 0, "min": None, "max": None}
    return {"count": int(v.size), "sum": int(v.sum()), "min": int(v.min()), "max": int(v.max())}


def check_array(workdir: str, kind: str, writers: int, logs: Logs, last_seen: Dict[Tuple[str, int], int],
                report: Report) -> None:
    t_start = time.monotonic()
    logs.refresh()
    required = {w: logs.committed_before(kind, w, t_start) for w in range(writers)}
    try:
        data, aggs = read_all(uri_of(workdir, kind), kind)
    except ts.TesseraError as e:
        report.violation("read_error", f"{kind}: {type(e).__name__}: {e}")
        return
    report.counts[f"{kind}_reads"] += 1
    want = aggregates_of(data["a"])
    if aggs != want:
        report.violation("aggregate", f"{kind}: the engine's aggregates {aggs} differ from those of the cells read "
                                      f"in the same snapshot {want}")
    else:
        report.counts["aggregates_checked"] += 1
    regions, corrupt = regions_of(kind, data, writers)
    if corrupt:
        report.violation("corrupt", f"{kind}: {corrupt}")
        return
    for w, got in regions.items():
        if check_region(kind, w, got, None, required[w], last_seen, report):
            report.counts["regions_checked"] += 1


def check_region(kind: str, w: int, got: np.ndarray, cells: Optional[np.ndarray], required: int,
                 last_seen: Dict[Tuple[str, int], int], report: Report) -> bool:
    """Checks that ``got`` (sorted values of writer ``w``'s region, or of its ``cells`` only) is
    the state after one op, no older than ``required`` nor than this reader saw last; whether
    it is one state."""
    where = f"{kind} writer {w}" + ("" if cells is None else f" (partial read, {len(cells)} cells)")
    n = op_of(kind, got)
    bad = classify(kind, w, n, got, cells)
    if bad is not None:
        report.violation(bad[0], f"{where}: {bad[1]}")
        return False
    if n < required:
        report.violation("missed", f"{where}: read shows op {n}, but op {required} had committed before the "
                                   f"read began")
    prev = last_seen.get((kind, w), -1)
    if n < prev:
        report.violation("backwards", f"{where}: read shows op {n} after this reader saw op {prev}")
    last_seen[(kind, w)] = max(prev, n)
    return True


def check_partial(workdir: str, kind: str, writers: int, rng: random.Random, logs: Logs,
                  last_seen: Dict[Tuple[str, int], int], report: Report) -> None:
    """Opens the array once and reads, for each writer, one to three rows and three or more
    columns of its block (so both kept and deleted columns); checks each part as
    ``check_array`` checks whole regions."""
    br, bc = BLOCK[kind]
    boxes = []
    for w in range(writers):
        nr, nc = rng.randint(1, 3), rng.randint(3, 24)
        boxes.append((w, w * br + rng.randrange(br - nr + 1), nr, rng.randrange(bc - nc + 1), nc))
    t_start = time.monotonic()
    logs.refresh()
    try:
        with ts.open(uri_of(workdir, kind), config=PARTIAL_READ_CONFIG) as A:
            parts = [np.asarray(A[r0:r0 + nr, c0:c0 + nc]).astype(np.int64) for _, r0, nr, c0, nc in boxes]
    except ts.TesseraError as e:
        report.violation("read_error", f"{kind} partial reads {boxes}: {type(e).__name__}: {e}")
        return
    report.counts[f"{kind}_partial_reads"] += 1
    for (w, r0, nr, c0, nc), a in zip(boxes, parts):
        local = (np.arange(r0, r0 + nr)[:, None] - w * br) * bc + np.arange(c0, c0 + nc)[None, :]
        present = a != FILL
        vals, at = a[present], local[present]
        wrong = (writer_part(vals) != w) | (cell_part(vals) != at)
        if wrong.any():
            report.violation("corrupt", f"{kind} rows {r0}+{nr} columns {c0}+{nc}: values "
                                        f"{vals[wrong][:3].tolist()} at writer {w} cells {at[wrong][:3].tolist()}")
            continue
        required = logs.committed_before(kind, w, t_start)
        if check_region(kind, w, np.sort(vals), local.ravel(), required, last_seen, report):
            report.counts["partial_regions_checked"] += 1


def read_loop(workdir: str, writers: int, deadline: float, seed: int, report: Report) -> None:
    rng = random.Random(seed)
    logs = Logs(workdir, writers)
    last_seen: Dict[Tuple[str, int], int] = {}
    while time.time() < deadline:
        for kind in KINDS:
            # A whole read of ``chunked`` costs more than the other kinds' together.
            if kind != "chunked" or report.counts["rounds"] % 2 == 0:
                check_array(workdir, kind, writers, logs, last_seen, report)
        check_partial(workdir, "chunked", writers, rng, logs, last_seen, report)
        report.counts["rounds"] += 1
        time.sleep(rng.uniform(0, 0.003))


#: Refusals of consolidate that the API documents; anything else is a violation.
REFUSALS = ("start the run at the oldest fragment", "no fragment called", "must be consecutive in fragment order")


def consolidate_loop(workdir: str, deadline: float, seed: int, report: Report) -> None:
    rng = random.Random(seed)
    common = {"sm.vacuum.lock_timeout_ms": str(VACUUM_WAIT_MS), "sm.consolidation.buffer_size": "4096"}
    while time.time() < deadline:
        kind = rng.choice(KINDS)
        config = {**common, **(CONFIG[kind] or {})}
        uri = uri_of(workdir, kind)
        how = rng.randrange(3)
        try:
            frs = ts.fragments(uri)
            if how == 0 or len(frs) < 3:
                out = ts.consolidate(uri, config=config)
            else:
                i = rng.randrange(0, len(frs) - 1)
                j = rng.randrange(i + 2, len(frs) + 1)
                run = frs[i:j]
                if how == 1:
                    out = ts.consolidate(uri, fragments=[f.name for f in run], config=config)
                else:
                    # Fragments are ordered by commit, not by timestamp: the run's timestamps span
                    # from its smallest t0 to its largest t1 (other fragments may fall inside: a
                    # refusal, as they are then not consecutive).
                    out = ts.consolidate(
                        uri, timestamp=(min(f.t0 for f in run), max(f.t1 for f in run)), config=config
                    )
            report.counts["consolidations" if out is not None else "consolidations_empty"] += 1
        except ts.ArrayBusyError:
            # The other consolidator's vacuum held the array longer than VACUUM_WAIT_MS.
            report.counts["consolidations_busy"] += 1
        except ts.ConsolidationConflictError:
            # The other consolidator replaced some of the same fragments first: nothing committed.
            report.counts["consolidations_conflict"] += 1
        except ts.TesseraError as e:
            if any(r in str(e) for r in REFUSALS):
                report.counts["consolidations_refused"] += 1
            else:
                report.violation("consolidate_error", f"{kind}: {type(e).__name__}: {e}")
        if rng.random() < 0.5:
            try:
                rep = ts.vacuum(uri, config=config)
            except ts.ArrayBusyError:
                report.counts["vacuums_busy"] += 1
            except ts.TesseraError as e:
                report.violation("vacuum_error", f"{kind}: {type(e).__name__}: {e}")
            else:
                report.counts["vacuums"] += 1
                report.counts["vacuumed_fragments"] += len(rep.removed)
        time.sleep(rng.uniform(0, 0.02))


def final_check(workdir: str, writers: int) -> Report:
    """At rest (every process stopped): each region holds exactly the state of its writer's
    last logged op (or of the op after it, if the writer stopped between commit and log)."""
    report = Report()
    logs = Logs(workdir, writers)
    logs.refresh()
    for kind in KINDS:
        data, aggs = read_all(uri_of(workdir, kind), kind)
        if aggs != aggregates_of(data["a"]):
            report.violation("aggregate", f"{kind} at rest: the engine's aggregates {aggs} differ from those of "
                                          f"the cells read {aggregates_of(data['a'])}")
        regions, corrupt = regions_of(kind, data, writers)
        for w, got in regions.items():
            last = logs.last(kind, w)
            if corrupt or all(classify(kind, w, n, got) is not None for n in (last, last + 1)):
                report.violation("final_state", f"{kind} writer {w}: not the state after op {last}")
            report.counts["final_regions_checked"] += 1
    return report


def main() -> None:
    role, index, workdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    deadline, seed = float(sys.argv[4]), int(sys.argv[5])
    writers = int(os.environ.get("TESSERA_STRESS_WRITERS", "3"))
    report = Report()
    try:
        if role == "writer":
            write_loop(workdir, index, deadline, seed, report)
        elif role == "reader":
            read_loop(workdir, writers, deadline, seed, report)
        elif role == "consolidator":
            consolidate_loop(workdir, deadline, seed, report)
        else:
            raise SystemExit(f"unknown role {role}")
    except Exception:
        report.violation(f"{role}_crashed", traceback.format_exc())
    print(report.json(), flush=True)


if __name__ == "__main__":
    main()
