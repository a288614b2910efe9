"""The roles of the multi-process stress test (``test_stress.py``, issue 12), each run as its own
process: ``python stress_worker.py <role> <index> <workdir> <deadline> <seed>``. Every role
stops by itself at ``deadline`` (``time.time()`` seconds) and prints one JSON line: its counts
and the violations it saw.

Three arrays live in ``<workdir>``, one per kind (``KINDS``); each writer ``w`` owns a region
of each and applies to it a numbered sequence of operations ("ops") 0, 1, 2, ..., one commit
each, so the state of its region after op ``n`` is a known function ``expected(kind, w, n)``
and every check is exact:

* ``dense``: a dense int64 array; writer ``w`` owns rows ``[w*R, (w+1)*R)`` (tiles of 3 x 5
  cells, so a block spans tiles and a torn write shows as a mix of ops inside a block). Op
  ``n`` writes the whole block with values encoding ``(n, w, cell)`` (as a dense slab, or when
  ``n % 4 == 2`` as a sparse update of every cell), except when ``n % 4 == 3``, which deletes
  the cells ``DELETED`` of the block (they read as the fill value, -1).
* ``sparse``: a sparse array without duplicates; writer ``w`` owns the points ``(i, w)``, i <
  16; op ``n`` writes them all (values encoding ``(n, w, i)``) or, when ``n % 4 == 3``, deletes
  those in ``DELETED``.
* ``dups``: a sparse array allowing duplicates; op ``n`` of writer ``w`` writes the fresh
  points ``(n, w*8 + i)``, i < 4, each twice (two copies with distinct values), or, when
  ``n % 4 == 3``, deletes the points of op ``n - 1`` with even ``i``. Every op ever committed
  stays visible, so the region holds a known multiset in which a cell read twice, a lost write
  or a deleted cell that came back all show.

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
* ``consolidator``: in a loop, consolidates one array (everything, or a random run of
  consecutive fragments by names or by timestamps) and often vacuums it. Refusals that are
  part of the API (a sparse run with deletions not starting at the oldest fragment; fragments
  named that another consolidation superseded meanwhile; vacuum busy) are counted, any other
  error is a ``consolidate_error`` or ``vacuum_error`` violation.
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

KINDS = ("dense", "sparse", "dups")
#: Writers at most (the arrays' domains have room for this many regions).
MAX_WRITERS = 8
#: Dense: rows per writer block, columns.
R, C = 4, 8
#: Points per writer and op: dense block cells, sparse points, dups points.
K = {"dense": R * C, "sparse": 16, "dups": 4}
FILL = -1
#: How long vacuum waits for readers before giving up (busy) in the consolidators.
VACUUM_WAIT_MS = 1000
#: Violation samples of each kind each process reports (all are counted).
SAMPLES = 10


def deleted(kind: str, i: int) -> bool:
    """Whether cell/point ``i`` of a region is deleted by a delete op."""
    return i % 2 == 0 if kind == "dups" else i % 3 == 0


def is_delete(n: int) -> bool:
    return n % 4 == 3


def encode(n: int, w: int, i: int, copy: int) -> int:
    return (n << 20) | (w << 12) | (i << 1) | copy


def decode(v: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(op, writer, cell, copy) of encoded values."""
    return v >> 20, (v >> 12) & 0xFF, (v >> 1) & 0x7FF, v & 1


def uri_of(workdir: str, kind: str) -> str:
    return os.path.join(workdir, kind)


def create_arrays(workdir: str, writers: int) -> None:
    assert writers <= MAX_WRITERS
    a = [ts.Attr("a", "int64", fill=FILL)]
    ts.create(uri_of(workdir, "dense"),
              ts.ArraySchema([ts.Dim("r", (0, MAX_WRITERS * R - 1), 3), ts.Dim("c", (0, C - 1), 5)], a))
    ts.create(uri_of(workdir, "sparse"),
              ts.ArraySchema([ts.Dim("x", (0, 63), 4), ts.Dim("y", (0, 63), 4)], a, sparse=True, capacity=4))
    ts.create(uri_of(workdir, "dups"),
              ts.ArraySchema([ts.Dim("x", (0, 1 << 40), 64), ts.Dim("y", (0, 63), 8)], a, sparse=True,
                             capacity=4, allows_duplicates=True))


# -- the ops and the states they leave -------------------------------------------------------


def region_coords(kind: str, w: int, n: int) -> Tuple[np.ndarray, np.ndarray]:
    """Coordinates of the K cells an op ``n`` of writer ``w`` writes (in cell order i)."""
    i = np.arange(K[kind], dtype=np.int64)
    if kind == "dense":
        return w * R + i // C, i % C
    if kind == "sparse":
        return i, np.full_like(i, w)
    return np.full_like(i, n), w * 8 + i


def apply_op(workdir: str, kind: str, w: int, n: int) -> None:
    """Applies op ``n`` of writer ``w`` to the array ``kind`` (one commit)."""
    i = np.arange(K[kind], dtype=np.int64)
    d0, d1 = ("r", "c") if kind == "dense" else ("x", "y")
    with ts.open(uri_of(workdir, kind), "w") as W:
        if is_delete(n):
            a, b = region_coords(kind, w, n - 1)
            mask = np.array([deleted(kind, int(k)) for k in i])
            W.delete({d0: a[mask], d1: b[mask]})
            return
        a, b = region_coords(kind, w, n)
        vals = np.array([encode(n, w, int(k), 0) for k in i], dtype=np.int64)
        if kind == "dense":
            if n % 4 == 2:
                W.write({d0: a, d1: b}, vals)
            else:
                W[w * R:(w + 1) * R, :] = vals.reshape(R, C)
        elif kind == "sparse":
            W.write({d0: a, d1: b}, vals)
        else:
            W.write({d0: np.concatenate([a, a]), d1: np.concatenate([b, b])},
                    np.concatenate([vals, vals | 1]))


def expected(kind: str, w: int, n: int) -> Counter[int]:
    """The multiset of values in writer ``w``'s region after its op ``n`` (-1: before any);
    the dense fill value is left out."""
    out: Counter[int] = collections.Counter()
    if n < 0:
        return out
    if kind in ("dense", "sparse"):
        m = n - 1 if is_delete(n) else n
        for i in range(K[kind]):
            if not (is_delete(n) and deleted(kind, i)):
                out[encode(m, w, i, 0)] += 1
        return out
    for m in range(n + 1):
        if is_delete(m):
            continue
        for i in range(K[kind]):
            if m + 1 <= n and is_delete(m + 1) and deleted(kind, i):
                continue
            out[encode(m, w, i, 0)] += 1
            out[encode(m, w, i, 1)] += 1
    return out


def classify(kind: str, w: int, n: int, got: Counter[int]) -> Optional[str]:
    """None if ``got`` is the state after op ``n``; else the kind of difference."""
    want = expected(kind, w, n)
    if got == want:
        return None
    if any(c > 1 for c in got.values()) and kind != "dups" or any(c > want[v] for v, c in got.items() if v in want):
        return "duplicate"
    ops = {int(v) >> 20 for v in got}
    if kind != "dups" and len(ops) > 1:
        return "torn"
    extra = [v for v in got if v not in want]
    if extra and all(deleted(kind, (v >> 1) & 0x7FF) for v in extra):
        return "resurrected"
    if any(v not in got for v in want):
        return "missing"
    return "inconsistent"


class Region:
    """What a reader found in one writer's region of one array."""

    def __init__(self) -> None:
        self.values: Counter[int] = collections.Counter()
        self.corrupt: List[str] = []


def regions_of(kind: str, data: Dict[str, np.ndarray], writers: int) -> Dict[int, Region]:
    """Splits a whole-array read into the writers' regions, checking that each value sits at
    the coordinates its encoding names (else ``corrupt``)."""
    regions = {w: Region() for w in range(writers)}
    if kind == "dense":
        a = data["a"]
        rows, cols = np.nonzero(a != FILL)
        vals = a[rows, cols]
        owner, local = rows // R, (rows % R) * C + cols
        xs = np.zeros_like(vals)
    else:
        x, y, vals = data["x"], data["y"], data["a"]
        if kind == "sparse":
            owner, local, xs = y, x, np.zeros_like(vals)
        else:
            owner, local, xs = y // 8, y % 8, x
    n, w, i, _copy = decode(vals)
    for k in range(len(vals)):
        o = int(owner[k])
        if o >= writers:
            regions.setdefault(o, Region()).corrupt.append(f"value {int(vals[k])} outside every region")
            continue
        ok = int(w[k]) == o and int(i[k]) == int(local[k]) and (kind != "dups" or int(n[k]) == int(xs[k]))
        if not ok:
            regions[o].corrupt.append(f"value {int(vals[k])} at {kind} coordinates of writer {o} cell {int(local[k])}")
        regions[o].values[int(vals[k])] += 1
    return regions


def op_of(kind: str, w: int, region: Region) -> int:
    """The op whose state the region most likely shows (checked exactly afterwards)."""
    if not region.values:
        return -1
    m = max(v >> 20 for v in region.values)
    if m % 4 == 2:
        # The delete that follows op m removes cells of op m: the state after it has op m's
        # kept cells only.
        present = {(v >> 1) & 0x7FF for v in region.values if v >> 20 == m}
        if present and not any(deleted(kind, i) for i in present):
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
    next_op = {k: 0 for k in KINDS}
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


def read_all(uri: str, kind: str) -> Dict[str, np.ndarray]:
    with ts.open(uri) as A:
        if kind == "dense":
            return {"a": np.asarray(A[:, :])}
        res = A.read()
        return {k: np.asarray(v) for k, v in res.items()}


def check_array(workdir: str, kind: str, writers: int, logs: Logs, last_seen: Dict[Tuple[str, int], int],
                report: Report) -> None:
    t_start = time.monotonic()
    logs.refresh()
    required = {w: logs.committed_before(kind, w, t_start) for w in range(writers)}
    try:
        data = read_all(uri_of(workdir, kind), kind)
    except ts.TesseraError as e:
        report.violation("read_error", f"{kind}: {type(e).__name__}: {e}")
        return
    report.counts[f"{kind}_reads"] += 1
    for w, region in sorted(regions_of(kind, data, writers).items()):
        if w >= writers or region.corrupt:
            report.violation("corrupt", f"{kind} writer {w}: {region.corrupt[:3]}")
            continue
        n = op_of(kind, w, region)
        bad = classify(kind, w, n, region.values)
        if bad is not None:
            want = expected(kind, w, n)
            extra = sorted((v >> 20, (v >> 1) & 0x7FF, c) for v, c in region.values.items() if c > want[v])
            lack = sorted((v >> 20, (v >> 1) & 0x7FF) for v, c in want.items() if region.values[v] < c)
            report.violation(bad, f"{kind} writer {w}: no state matches (nearest op {n}); "
                                  f"(op, cell, count) in excess {extra[:6]}, (op, cell) missing {lack[:6]}")
            continue
        if n < required[w]:
            report.violation("missed", f"{kind} writer {w}: read shows op {n}, but op {required[w]} "
                                       f"had committed before the read began")
        prev = last_seen.get((kind, w), -1)
        if n < prev:
            report.violation("backwards", f"{kind} writer {w}: read shows op {n} after this reader saw op {prev}")
        last_seen[(kind, w)] = max(prev, n)
        report.counts["regions_checked"] += 1


def read_loop(workdir: str, writers: int, deadline: float, seed: int, report: Report) -> None:
    rng = random.Random(seed)
    logs = Logs(workdir, writers)
    last_seen: Dict[Tuple[str, int], int] = {}
    while time.time() < deadline:
        for kind in KINDS:
            check_array(workdir, kind, writers, logs, last_seen, report)
        report.counts["rounds"] += 1
        time.sleep(rng.uniform(0, 0.003))


#: Refusals of consolidate that the API documents; anything else is a violation.
REFUSALS = ("start the run at the oldest fragment", "not a fragment of", "unknown fragment", "not consecutive",
            "no fragment named")


def consolidate_loop(workdir: str, deadline: float, seed: int, report: Report) -> None:
    rng = random.Random(seed)
    config = {"sm.vacuum.lock_timeout_ms": str(VACUUM_WAIT_MS), "sm.consolidation.buffer_size": "4096"}
    while time.time() < deadline:
        kind = rng.choice(KINDS)
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
                    out = ts.consolidate(uri, timestamp=(run[0].t0, run[-1].t1), config=config)
            report.counts["consolidations" if out is not None else "consolidations_empty"] += 1
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
        data = read_all(uri_of(workdir, kind), kind)
        for w, region in sorted(regions_of(kind, data, writers).items()):
            last = logs.last(kind, w)
            if region.corrupt or all(classify(kind, w, n, region.values) is not None for n in (last, last + 1)):
                report.violation("final_state", f"{kind} writer {w}: not the state after op {last}")
            report.counts["final_regions_checked"] += 1
    return report


def main() -> None:
    role, index, workdir, deadline, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
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
    except Exception:  # noqa: BLE001 - reported as a violation with its traceback
        report.violation(f"{role}_crashed", traceback.format_exc())
    print(report.json(), flush=True)


if __name__ == "__main__":
    main()
