"""Consolidation and vacuum: ``ts.consolidate`` (all, by names, by timestamp range,
size-tiered), ``ts.vacuum`` and its lock, checked against numpy and dict references, with time
travel before and after vacuum; and a writer, a consolidator-vacuumer and readers running at
once in separate processes."""

from __future__ import annotations

import collections
import os
import pathlib
import shutil
import sys
import threading
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import pytest

import consolidation_worker as worker
import tessera as ts

# -- helpers ---------------------------------------------------------------------------------


def folders(uri: str) -> List[str]:
    """Fragment folders on disk (committed or not, superseded or not)."""
    return sorted(os.listdir(os.path.join(uri, "__fragments")))


def commit_files(uri: str, suffix: str) -> List[str]:
    return sorted(f for f in os.listdir(os.path.join(uri, "__commits")) if f.endswith(suffix))


as_ndarray = worker.as_ndarray


def read_dense(uri: str, timestamp: Optional[int] = None) -> np.ndarray:
    with ts.open(uri, timestamp=timestamp) as A:
        return as_ndarray(A[...])


def newest(uri: str) -> ts.FragmentInfo:
    return ts.fragments(uri)[-1]


class DenseHistory:
    """A 2-D int32 dense array with a numpy reference and the state after every write."""

    def __init__(self, uri: str, shape: Tuple[int, int] = (40, 36), tile: Tuple[int, int] = (8, 6), seed: int = 0):
        self.uri = uri
        dims = [ts.Dim("r", (0, shape[0] - 1), tile[0]), ts.Dim("c", (0, shape[1] - 1), tile[1])]
        ts.create(uri, ts.ArraySchema(dims, [ts.Attr("a", "int32", filters=[ts.Zstd(level=1)])]))
        self.ref = read_dense(uri)  # the fill values: nothing written yet
        self.fill = self.ref.copy()
        self.rng = np.random.default_rng(seed)
        #: (fragment written, state after it), oldest first.
        self.states: List[Tuple[ts.FragmentInfo, np.ndarray]] = []

    def slab(self, r: Tuple[int, int], c: Tuple[int, int]) -> None:
        vals = self.rng.integers(-1000, 1000, size=(r[1] - r[0], c[1] - c[0]), dtype=np.int32)
        with ts.open(self.uri, "w") as A:
            A[r[0]:r[1], c[0]:c[1]] = vals
        self.ref[r[0]:r[1], c[0]:c[1]] = vals
        self._record(dense=True)

    def update(self, k: int) -> None:
        """Random updates of ``k`` distinct cells: a sparse fragment of the dense array."""
        flat = self.rng.choice(self.ref.size, size=k, replace=False)
        rows, cols = flat // self.ref.shape[1], flat % self.ref.shape[1]
        vals = self.rng.integers(5000, 6000, size=k, dtype=np.int32)
        with ts.open(self.uri, "w") as A:
            A.write({"r": rows.astype(np.int64), "c": cols.astype(np.int64)}, vals)
        self.ref[rows, cols] = vals
        self._record(dense=False)

    def _record(self, dense: bool) -> None:
        f = newest(self.uri)
        assert f.dense == dense
        self.states.append((f, self.ref.copy()))

    def standard(self) -> None:
        """Overlapping slabs, random updates, then more slabs (8 fragments, the first cells of
        the array never written, so fill values take part)."""
        self.slab((0, 20), (0, 20))
        self.slab((10, 30), (5, 36))
        self.slab((4, 9), (2, 30))
        self.update(25)
        self.update(40)
        self.slab((25, 40), (0, 18))
        self.update(10)
        self.slab((12, 14), (12, 14))


# -- dense -----------------------------------------------------------------------------------


@pytest.mark.parametrize("buffer_size", [None, "1500"])
def test_dense_consolidate_all_then_vacuum(uri: str, buffer_size: Optional[str]) -> None:
    h = DenseHistory(uri)
    h.standard()
    names = [f.name for f, _ in h.states]
    assert [f.name for f in ts.fragments(uri)] == names
    assert np.array_equal(read_dense(uri), h.ref)
    assert len(np.unique(h.ref)) > 100 and (h.ref == h.fill).any()  # some cells never written

    # A reader open before the consolidation keeps its snapshot.
    early = ts.open(uri)
    config = None if buffer_size is None else {"sm.consolidation.buffer_size": buffer_size}
    c = ts.consolidate(uri, config=config)
    assert isinstance(c, ts.FragmentInfo) and c.dense
    assert (c.t0, c.t1) == (h.states[0][0].t0, h.states[-1][0].t1)
    assert ts.fragments(uri) == [c]
    assert np.array_equal(read_dense(uri), h.ref)
    assert len(early.fragments()) == len(names) and np.array_equal(as_ndarray(early[:, :]), h.ref)
    early.close()
    # On disk: the inputs stay until vacuum; the commit log holds a record per write and one for
    # the consolidation (which lists its inputs).
    assert folders(uri) == sorted(names + [c.name])
    assert len(commit_files(uri, ".commit")) == len(names) + 1

    # Time travel to before the last input still shows the inputs up to then.
    for k in (0, 2, 4, 6):
        f, state = h.states[k]
        with ts.open(uri, timestamp=f.t1) as A:
            assert [g.name for g in A.fragments()] == names[: k + 1]
            assert np.array_equal(as_ndarray(A[:, :]), state)
    assert np.array_equal(read_dense(uri, timestamp=c.t1), h.ref)

    report = ts.vacuum(uri)
    assert isinstance(report, ts.VacuumReport)
    assert sorted(report.removed) == sorted(names) and report.uncommitted == ()
    assert folders(uri) == [c.name]
    # The log is down to one checkpoint listing the consolidated fragment.
    assert len(commit_files(uri, ".commit")) == 1 and commit_files(uri, ".ok") == []
    assert ts.fragments(uri) == [c]
    assert np.array_equal(read_dense(uri), h.ref)
    # The inputs are gone: before the consolidated fragment's t1 there is nothing left.
    with ts.open(uri, timestamp=h.states[6][0].t1) as A:
        assert A.fragments() == [] and np.array_equal(as_ndarray(A[:, :]), h.fill)
    assert ts.vacuum(uri) == ts.VacuumReport((), ())
    # Consolidating one fragment does nothing.
    assert ts.consolidate(uri) is None and folders(uri) == [c.name]


def test_dense_consolidate_subsets_by_names_and_timestamps(uri: str) -> None:
    h = DenseHistory(uri, seed=1)
    h.standard()
    f = [fi for fi, _ in h.states]
    # Fragments 2..4 (a slab and two sparse updates) by names, given as FragmentInfo or str.
    c1 = ts.consolidate(uri, fragments=[f[2], f[3].name, f[4]])
    assert c1 is not None and c1.dense and (c1.t0, c1.t1) == (f[2].t0, f[4].t1)
    assert [g.name for g in ts.fragments(uri)] == [f[0].name, f[1].name, c1.name, f[5].name, f[6].name, f[7].name]
    assert np.array_equal(read_dense(uri), h.ref)
    # Time travel: inside the consolidated range, the inputs up to then; at its end, c1.
    for k in range(len(f)):
        with ts.open(uri, timestamp=f[k].t1) as A:
            assert np.array_equal(as_ndarray(A[:, :]), h.states[k][1]), k
            seen = [g.name for g in A.fragments()]
        assert (c1.name in seen) == (k >= 4)

    # Fragments 5..7 by an inclusive timestamp range (a datetime works too).
    plan = ts.consolidation_plan(uri, timestamp=(f[5].t0, f[7].t1))
    assert [g.name for g in plan] == [f[5].name, f[6].name, f[7].name]
    c2 = ts.consolidate(uri, timestamp=(f[5].t0, f[7].t1))
    assert c2 is not None and (c2.t0, c2.t1) == (f[5].t0, f[7].t1)
    assert [g.name for g in ts.fragments(uri)] == [f[0].name, f[1].name, c1.name, c2.name]
    assert np.array_equal(read_dense(uri), h.ref)
    # A range holding no whole fragment, or one, selects nothing.
    assert ts.consolidate(uri, timestamp=(f[5].t0, f[6].t1)) is None
    assert ts.consolidate(uri, timestamp=(f[0].t0, f[0].t1)) is None

    # Not consecutive: QueryError with the engine's message, nothing written.
    before = folders(uri)
    with pytest.raises(ts.QueryError, match="consecutive"):
        ts.consolidate(uri, fragments=[f[0].name, c1.name])
    with pytest.raises(ts.QueryError, match="no fragment called __1_1_nope_1"):
        ts.consolidate(uri, fragments=[f[0].name, "__1_1_nope_1"])
    # A superseded input is no longer a committed fragment one can name.
    with pytest.raises(ts.QueryError, match="no fragment called"):
        ts.consolidate(uri, fragments=[f[2].name, f[3].name])
    assert ts.consolidate(uri, fragments=[f[0].name]) is None
    assert ts.consolidate(uri, fragments=[]) is None
    assert folders(uri) == before

    # A crashed writer's folder (a fragment folder with no commit file) goes with vacuum.
    crashed = "__1_1_0123456789abcdef0123456789abcdef_1"
    shutil.copytree(os.path.join(uri, "__fragments", f[0].name), os.path.join(uri, "__fragments", crashed))
    assert np.array_equal(read_dense(uri), h.ref)
    report = ts.vacuum(uri)
    assert sorted(report.removed) == sorted(g.name for g in f[2:])
    assert report.uncommitted == (crashed,)
    assert folders(uri) == sorted([f[0].name, f[1].name, c1.name, c2.name])
    assert np.array_equal(read_dense(uri), h.ref)
    # After vacuum, time travel into a consolidated range no longer finds the inputs.
    with ts.open(uri, timestamp=f[3].t1) as A:
        assert [g.name for g in A.fragments()] == [f[0].name, f[1].name]
        assert np.array_equal(as_ndarray(A[:, :]), h.states[1][1])
    # Consolidating what is left: one fragment, the same values.
    c3 = ts.consolidate(uri)
    assert c3 is not None and (c3.t0, c3.t1) == (f[0].t0, f[7].t1)
    ts.vacuum(uri)
    assert folders(uri) == [c3.name] and np.array_equal(read_dense(uri), h.ref)


def test_dense_only_sparse_updates_consolidate_to_sparse(uri: str) -> None:
    h = DenseHistory(uri, seed=2)
    h.slab((0, 40), (0, 36))
    for k in (5, 17, 9):
        h.update(k)
    f = [fi for fi, _ in h.states]
    c = ts.consolidate(uri, fragments=f[1:])
    # Updates alone merge into one sparse fragment holding each updated cell once.
    assert c is not None and not c.dense and c.cell_count <= 31
    assert np.array_equal(read_dense(uri), h.ref)
    ts.vacuum(uri)
    assert folders(uri) == sorted([f[0].name, c.name])
    assert np.array_equal(read_dense(uri), h.ref)


# -- sparse ----------------------------------------------------------------------------------


def sparse_cells(r: Dict[str, np.ndarray]) -> List[Tuple[int, int, int, str]]:
    """A sparse read's cells as sorted tuples (x, y, a, s)."""
    return sorted(zip(r["x"].tolist(), r["y"].tolist(), r["a"].tolist(), list(r["s"])))


def read_sparse(uri: str, timestamp: Optional[int] = None) -> List[Tuple[int, int, int, str]]:
    with ts.open(uri, timestamp=timestamp) as A:
        return sparse_cells(A.read())  # type: ignore[arg-type]


@pytest.mark.parametrize("dups", [False, True], ids=["unique", "duplicates"])
def test_sparse_consolidate_and_vacuum(uri: str, dups: bool) -> None:
    ts.create(uri, ts.ArraySchema([ts.Dim("x", (0, 49), 10), ts.Dim("y", (0, 49), 10)],
                                  [ts.Attr("a", "int32"), ts.Attr("s", str)], sparse=True, capacity=16,
                                  allows_duplicates=dups))
    rng = np.random.default_rng(5 + dups)
    cells: Dict[Tuple[int, int], Tuple[int, str]] = {}  # no duplicates: the newest value per cell
    multiset: "collections.Counter[Tuple[int, int, int, str]]" = collections.Counter()  # duplicates: every cell written
    states: List[Tuple[ts.FragmentInfo, List[Tuple[int, int, int, str]]]] = []

    def expected() -> List[Tuple[int, int, int, str]]:
        if dups:
            return sorted(multiset.elements())
        return sorted((x, y, a, s) for (x, y), (a, s) in cells.items())

    for w in range(7):
        n = int(rng.integers(5, 60))
        # Cells of one write are distinct; later writes often hit earlier cells.
        flat = rng.choice(400 if w % 2 else 2500, size=n, replace=False)
        xs, ys = (flat // 50).astype(np.int64), (flat % 50).astype(np.int64)
        a = rng.integers(0, 10**6, size=n, dtype=np.int32)
        s = [f"w{w}-{i}" * int(rng.integers(0, 4)) for i in range(n)]
        with ts.open(uri, "w") as A:
            A.write({"x": xs, "y": ys}, {"a": a, "s": s})
        for x, y, v, t in zip(xs.tolist(), ys.tolist(), a.tolist(), s):
            cells[(x, y)] = (v, t)
            multiset[(x, y, v, t)] += 1
        states.append((newest(uri), expected()))
    f = [fi for fi, _ in states]
    assert read_sparse(uri) == expected()
    total = sum(fi.cell_count for fi in f)
    assert dups == (len(expected()) == total)

    # A consecutive subset by names, then time travel inside it (before vacuum).
    c1 = ts.consolidate(uri, fragments=[fi.name for fi in f[1:4]])
    assert c1 is not None and not c1.dense and (c1.t0, c1.t1) == (f[1].t0, f[3].t1)
    assert [g.name for g in ts.fragments(uri)] == [f[0].name, c1.name] + [fi.name for fi in f[4:]]
    assert read_sparse(uri) == expected()
    for k in range(len(f)):
        assert read_sparse(uri, f[k].t1) == states[k][1], k
    # Then by timestamp range, the rest after c1.
    c2 = ts.consolidate(uri, timestamp=(f[4].t0, f[6].t1))
    assert c2 is not None
    assert read_sparse(uri) == expected()
    # Everything.
    c3 = ts.consolidate(uri)
    assert c3 is not None and (c3.t0, c3.t1) == (f[0].t0, f[6].t1)
    assert ts.fragments(uri) == [c3]
    assert read_sparse(uri) == expected()
    # Duplicates kept: the consolidated fragment holds every cell written; otherwise each
    # coordinate once.
    assert c3.cell_count == (total if dups else len(cells))
    assert len(folders(uri)) == 7 + 3
    assert read_sparse(uri, f[2].t1) == states[2][1]  # still there before vacuum

    report = ts.vacuum(uri)
    assert len(report.removed) == 7 + 2 and report.uncommitted == ()
    assert folders(uri) == [c3.name]
    assert read_sparse(uri) == expected()
    assert read_sparse(uri, f[2].t1) == []  # the inputs are gone


# -- size-tiered -----------------------------------------------------------------------------


def test_size_tiered_picks_similar_sizes(uri: str) -> None:
    h = DenseHistory(uri, shape=(32, 32), tile=(8, 8), seed=3)
    h.slab((0, 32), (0, 32))  # 16 tiles
    for i in range(4):
        h.slab((8 * i, 8 * i + 4), (0, 8))  # 1 tile each
    h.slab((0, 32), (0, 32))  # 16 tiles again
    h.slab((3, 5), (3, 5))  # 1 tile
    f = [fi for fi, _ in h.states]
    assert f[0].stored_bytes > 8 * f[1].stored_bytes
    plan = ts.consolidation_plan(uri, policy="size-tiered", ratio=4.0, min_fragments=4)
    assert [g.name for g in plan] == [g.name for g in f[1:5]]
    # A run shorter than min_fragments is left alone; a ratio large enough takes everything.
    assert ts.consolidation_plan(uri, policy="size-tiered", min_fragments=5) == []
    assert len(ts.consolidation_plan(uri, policy="size-tiered", ratio=1000.0, min_fragments=2)) == len(f)
    assert ts.consolidate(uri, policy="size-tiered", min_fragments=5) is None
    c = ts.consolidate(uri, policy="size-tiered")  # ratio 4, at least 4 fragments
    assert c is not None and (c.t0, c.t1) == (f[1].t0, f[4].t1)
    assert [g.name for g in ts.fragments(uri)] == [f[0].name, c.name, f[5].name, f[6].name]
    assert np.array_equal(read_dense(uri), h.ref)
    ts.vacuum(uri)
    assert np.array_equal(read_dense(uri), h.ref) and len(folders(uri)) == 4


# -- vacuum and the lock ---------------------------------------------------------------------


FAST = {"sm.vacuum.lock_timeout_ms": "100"}


def test_vacuum_waits_for_arrays_open_in_this_process(uri: str) -> None:
    h = DenseHistory(uri, seed=4)
    h.standard()
    reader = ts.open(uri)
    c = ts.consolidate(uri)
    assert c is not None
    before = folders(uri)
    t = time.perf_counter()
    with pytest.raises(ts.ArrayBusyError, match="in use by readers or writers") as e:
        ts.vacuum(uri, config=FAST)
    assert isinstance(e.value, ts.ArrayError) and time.perf_counter() - t >= 0.09
    assert folders(uri) == before  # nothing removed
    assert np.array_equal(as_ndarray(reader[:, :]), h.ref)  # the open snapshot (the inputs) still reads
    reader.close()

    # A batch iterator holds the lock until it is exhausted or dropped.
    with ts.open(uri) as A:
        batches = A.iter_batches(budget_bytes=256)
        next(batches)
    with pytest.raises(ts.ArrayBusyError):
        ts.vacuum(uri, config=FAST)
    rest = list(batches)
    assert rest
    # Arrays open for writing hold no lock between writes.
    with ts.open(uri, "w"):
        report = ts.vacuum(uri, config=FAST)
    assert len(report.removed) == len(h.states) and folders(uri) == [c.name]
    assert np.array_equal(read_dense(uri), h.ref)


def test_vacuum_waits_for_another_thread_to_close(uri: str) -> None:
    h = DenseHistory(uri, seed=5)
    h.standard()
    ts.consolidate(uri)
    A = ts.open(uri)
    closed_at: List[float] = []

    def close_later() -> None:
        time.sleep(0.3)
        A[:, :]  # the GIL is free while vacuum waits: this thread reads, then closes
        closed_at.append(time.perf_counter())
        A.close()

    t = threading.Thread(target=close_later)
    start = time.perf_counter()
    t.start()
    report = ts.vacuum(uri, config={"sm.vacuum.lock_timeout_ms": "20000"})
    done = time.perf_counter()
    t.join()
    assert closed_at and closed_at[0] <= done and done - start >= 0.3
    assert len(report.removed) == len(h.states)
    assert np.array_equal(read_dense(uri), h.ref)


def test_consolidate_releases_the_gil(uri: str) -> None:
    """Another Python thread keeps counting while a consolidation runs (with a long switch
    interval the interpreter never takes the GIL from a thread holding it)."""
    data = np.random.default_rng(9).normal(size=(500, 500))
    ts.create(uri, ts.ArraySchema([ts.Dim("r", (0, 499), 100), ts.Dim("c", (0, 499), 100)],
                                  [ts.Attr("a", "float64", filters=[ts.Gzip(level=6)])]))
    with ts.open(uri, "w") as W:
        W[...] = data
        W[100:400, 100:400] = data[:300, :300]
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    t = threading.Thread(target=spin)
    t.start()
    try:
        while ticks == 0:
            time.sleep(0.001)
        start = ticks
        c = ts.consolidate(uri)
        counted = ticks - start
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(old)
    assert c is not None and counted > 10_000
    data[100:400, 100:400] = data[:300, :300]
    assert np.array_equal(read_dense(uri), data)


# -- arguments -------------------------------------------------------------------------------


def test_arguments_and_errors(uri: str, tmp_path: pathlib.Path) -> None:
    h = DenseHistory(uri, seed=6)
    h.slab((0, 4), (0, 4))
    h.slab((2, 6), (2, 6))
    f = [fi for fi, _ in h.states]
    with pytest.raises(ValueError, match="at most one"):
        ts.consolidate(uri, fragments=[f[0].name], timestamp=(0, 1))
    with pytest.raises(ValueError, match="policy"):
        ts.consolidate(uri, policy="leveled")
    with pytest.raises(ValueError, match="size-tiered"):
        ts.consolidate(uri, ratio=2.0)
    with pytest.raises(ValueError, match="ratio"):
        ts.consolidate(uri, policy="size-tiered", ratio=0.5)
    with pytest.raises(ValueError, match="min_fragments"):
        ts.consolidate(uri, policy="size-tiered", min_fragments=1)
    with pytest.raises(TypeError, match="list of fragment names"):
        ts.consolidate(uri, fragments=f[0].name)
    with pytest.raises(TypeError):
        ts.consolidate(uri, fragments=[1, 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="pair"):
        ts.consolidate(uri, timestamp=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="reversed"):
        ts.consolidate(uri, timestamp=(f[1].t1, f[0].t0))
    with pytest.raises(ts.ConfigError):
        ts.consolidate(uri, config={"sm.consolidation.buffer_size": "lots"})
    assert len(ts.fragments(uri)) == 2
    # Datetimes bound a timestamp range too.
    import datetime as dt

    lo = dt.datetime.fromtimestamp(f[0].t0 / 1000.0)
    hi = dt.datetime.fromtimestamp((f[1].t1 + 1) / 1000.0)
    assert len(ts.consolidation_plan(uri, timestamp=(lo, hi))) == 2
    # Not an array.
    missing = str(tmp_path / "missing")
    with pytest.raises(ts.ArrayError):
        ts.consolidate(missing)
    with pytest.raises(ts.ArrayError):
        ts.vacuum(missing)
    # An empty array: nothing to do.
    empty = str(tmp_path / "empty")
    ts.create(empty, ts.ArraySchema([ts.Dim("r", (0, 9), 5)], [ts.Attr("a", "int32")]))
    assert ts.consolidate(empty) is None and ts.vacuum(empty) == ts.VacuumReport((), ())
    # A closed array refuses everything, its lock released.
    A = ts.open(uri)
    A.close()
    A.close()
    assert A.closed
    with pytest.raises(ts.QueryError, match="closed"):
        A.fragments()


# -- processes -------------------------------------------------------------------------------


def test_writer_consolidator_and_readers_in_separate_processes(tmp_path: pathlib.Path) -> None:
    """One process writes random slabs and updates and saves the state after each write (by
    the write's t1); one consolidates and vacuums; readers (another process and two threads
    here) check every read against the state of the snapshot they opened. No read may fail or
    differ."""
    uri = str(tmp_path / "arr")
    refdir = tmp_path / "refs"
    refdir.mkdir()
    ts.create(uri, ts.ArraySchema([ts.Dim("r", (0, 63), 16), ts.Dim("c", (0, 63), 16)], [ts.Attr("a", "int32")]))
    init = np.random.default_rng(0).integers(-100, 100, size=worker.SHAPE, dtype=np.int32)
    with ts.open(uri, "w") as A:
        A[:, :] = init
    worker.save_ref(str(refdir), newest(uri).t1, init)

    outputs, thread_counts = worker.run_roles(uri, str(refdir), str(tmp_path), run_for=15.0, seed=10,
                                              reader_threads=2)
    w, c, r = outputs["writer"], outputs["consolidator"], outputs["reader"]
    print(f"\nwriter {w}\nconsolidator {c}\nreader process {r}\nreader threads {thread_counts}")
    # Everything took part: writes of both kinds, consolidations, vacuums that removed
    # fragments, and reads of many snapshots, some through consolidated fragments.
    assert w["slabs"] >= 5 and w["updates"] >= 3, w
    assert c["consolidations"] >= 3 and c["vacuums"] >= 1 and c["removed"] >= 2, c
    for counts in [r] + thread_counts:
        assert counts["reads"] >= 20 and counts["snapshots"] >= 3 and counts["consolidated_seen"] >= 1, counts

    # At rest: the last state, before and after a last consolidation and vacuum.
    last = np.load(refdir / f"{newest(uri).t1}.npy")
    assert np.array_equal(read_dense(uri), last)
    ts.consolidate(uri)
    ts.vacuum(uri)
    assert len(ts.fragments(uri)) == 1 and len(folders(uri)) == 1
    assert np.array_equal(read_dense(uri), last)
