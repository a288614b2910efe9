"""The dense workloads of the TileDB paper (section 6.1), side by side: Tessera, TileDB-Py, HDF5
(h5py), Zarr v3 and TensorStore, on the same generated array in one run.

The array: ``rows x cols`` int32 (default 20,000 x 13,000 = 1.04 GB) in tiles/chunks of
2,500 x 1,000 cells (10 MB), value at (i, j) = i % cols + j (the paper's), row-major.

Per compression (none, gzip-6, zstd-3) and engine:

* load: create + write the whole array from memory + fsync of every file (median of ``--load-reps``);
* subarray reads (the paper's figure 11a): ``tile`` (exactly one tile, in the middle of the
  array), ``par`` (2,499 x 999 cells one cell inside that tile), ``col`` (one full column),
  ``1Kx1K`` (random 1,000 x 1,000 squares, mean per square); warm (median) and cold
  (``posix_fadvise(DONTNEED)`` on the store's files, then open + read, timed);
* random element reads of 1K, 10K, 100K cells (figure 11c; none and zstd);
* parallel reads of random 1Kx1K squares with 1 and 2 processes, each engine limited to one
  thread per process (figure 11d; none and zstd);
* random element updates of 1K, 10K, 100K cells + fsync (figure 10a; none and zstd);
* parallel writes of the whole array by 1 and 2 processes, each writing a band of whole tile rows
  of the created (empty) array with one engine thread, then fsync of the store: wall time from a
  barrier until every process is done (none and zstd; HDF5 by one process only);
* Tessera only: read time of random 1Kx1K squares with 1, 1+10, 1+100, 1+1000 fragments
  (1,000 random cells each), then consolidation (figure 12) if the engine has it.

Every read is checked against the formula (and updated cells after the updates, the whole
array after each parallel write).

``only``: run the workloads whose group (e.g. "dense parallel writes zstd") is a selected name or
starts with one followed by a space ("dense parallel" selects reads and writes); loads run when a
selected workload reads the loaded stores.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue as queue_mod
import shutil
import tempfile
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from adapters import Unsupported  # noqa: E402
from adapters import load as load_adapter  # noqa: E402
from common import Row, log  # noqa: E402

DENSE_ENGINES = ("tessera", "tessera-mmap", "tessera-whole", "tiledb", "h5py", "zarr", "tensorstore", "duckdb", "parquet")
# Engine variants: an adapter with options (a store of their own).
VARIANT_OF: Dict[str, Tuple[str, Dict[str, Any]]] = {"tessera-mmap": ("tessera", {"read_mode": "mmap"}),
                                                     "tessera-whole": ("tessera", {"tile_chunk_size": 0})}
# Variants that only read differently: they write exactly as their base engine (no parallel-write run).
READ_SIDE_VARIANTS = ("tessera-mmap",)
COMPRESSIONS = ("none", "gzip", "zstd")
CODEC_OF = {"gzip": "gzip-6", "zstd": "zstd-3"}


def make_data(rows: int, cols: int) -> np.ndarray:
    """value(i, j) = i % cols + j, int32."""
    return np.add.outer((np.arange(rows, dtype=np.int32) % cols), np.arange(cols, dtype=np.int32))


def expect(r0: int, r1: int, c0: int, c1: int, cols: int) -> np.ndarray:
    return np.add.outer((np.arange(r0, r1, dtype=np.int32) % cols), np.arange(c0, c1, dtype=np.int32))


def unique_cells(rng: np.random.Generator, n: int, shape: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray]:
    """``n`` distinct random cells (rows, cols as int64) in random order."""
    total = shape[0] * shape[1]
    got = np.empty(0, dtype=np.int64)
    while len(got) < n:
        got = np.unique(np.concatenate([got, rng.integers(0, total, int((n - len(got)) * 1.1) + 10)]))
    flat = rng.permutation(got)[:n]
    return flat // shape[1], flat % shape[1]


def _parallel_worker(modname: str, kw: Dict[str, Any], squares: List[Tuple[int, int]], side: int, barrier: Any,
                     queue: Any) -> None:
    try:
        sys.path.insert(0, common.HERE)
        from adapters import load as _load

        mod = _load(modname)
        store = mod.Dense(threads=1, **kw)
        store.open()
        for r, c in squares:  # warm-up, untimed
            store.read(r, r + side, c, c + side)
        barrier.wait()
        t0 = time.perf_counter()
        for r, c in squares:
            store.read(r, r + side, c, c + side)
        t1 = time.perf_counter()
        store.close()
        queue.put(("ok", t0, t1, time.time()))
    except Exception as e:  # noqa: BLE001
        try:
            barrier.abort()
        except Exception:  # noqa: BLE001
            pass
        queue.put(("error", f"{type(e).__name__}: {e}", 0, 0))


def parallel_read(modname: str, kw: Dict[str, Any], squares: List[Tuple[int, int]], side: int, procs: int) -> float:
    """Wall time of ``procs`` processes reading ``squares`` (split evenly) after a barrier."""
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(procs)
    queue = ctx.Queue()
    parts = [squares[i::procs] for i in range(procs)]
    ps = [ctx.Process(target=_parallel_worker, args=(modname, kw, parts[i], side, barrier, queue)) for i in range(procs)]
    for p in ps:
        p.start()
    res = [queue.get(timeout=1800) for _ in ps]
    for p in ps:
        p.join()
    errs = [r[1] for r in res if r[0] != "ok"]
    if errs:
        raise RuntimeError(errs[0])
    # Each process's clock is perf_counter (system-wide monotonic on Linux).
    return max(r[2] for r in res) - min(r[1] for r in res)


def _fsync_store(path: str) -> None:
    """``common.fsync_tree`` for a store other processes are writing: a file or directory that
    vanishes between the listing and its fsync (another writer's temporary file, renamed into
    place) is skipped; what it became is in the listing of its directory, fsynced after it."""
    entries: List[str] = []
    dirs: List[str] = []
    for root, ds, fs in os.walk(path):
        dirs.append(root)
        entries.extend(os.path.join(root, f) for f in fs)
    if not dirs:  # a single file (HDF5)
        entries = [path]
        dirs = [os.path.dirname(path) or "."]
    common.fsync_existing(entries + dirs)


def _write_worker(modname: str, kw: Dict[str, Any], r0: int, r1: int, src: str, shape: Tuple[int, int],
                  cmds: Any, barrier: Any, queue: Any) -> None:
    """One writer of the parallel writes: on each command, waits at the barrier, then writes rows
    ``r0:r1`` of the (created, empty) store and fsyncs the store; reports its clock."""
    try:
        sys.path.insert(0, common.HERE)
        from adapters import load as _load

        mod = _load(modname)
        store = mod.Dense(threads=1, **kw)
        band = np.memmap(src, dtype=np.int32, mode="r", shape=shape)[r0:r1]
        int(band[:, ::1024].sum())  # map every page of the band now (untimed)
        # Warm-up (untimed): one tile written into a scratch array, so that the engine's lazy
        # start-up (thread pools, codecs, ...) stays out of the first timed run.
        wshape = (min(kw["tile"][0], r1 - r0), min(kw["tile"][1], shape[1]))
        warm = mod.Dense(threads=1, **dict(kw, path=f"{kw['path']}.warmup{r0}", shape=wshape))
        common.remove(warm.path)
        warm.create()
        warm.write_rows(0, wshape[0], np.ascontiguousarray(band[:wshape[0], :wshape[1]]))
        common.fsync_tree(warm.path)
        common.remove(warm.path)
        queue.put(("ready", 0.0, 0.0))
    except Exception as e:  # noqa: BLE001
        queue.put(("error", f"{type(e).__name__}: {e}", 0.0))
        return
    while cmds.get() is not None:
        try:
            barrier.wait()
            t0 = time.perf_counter()
            store.write_rows(r0, r1, band)
            _fsync_store(kw["path"])
            t1 = time.perf_counter()
            queue.put(("ok", t0, t1))
        except Exception as e:  # noqa: BLE001
            try:
                barrier.abort()
            except Exception:  # noqa: BLE001
                pass
            queue.put(("error", f"{type(e).__name__}: {e}", 0.0))


class _Writers:
    """``procs`` writer processes of one engine, each with its band of whole tile rows, kept for
    the repetitions (so process start-up and imports stay out of the runs)."""

    def __init__(self, ctx: Any, modname: str, kw: Dict[str, Any], bands: List[Tuple[int, int]], src: str,
                 shape: Tuple[int, int]) -> None:
        self.queue = ctx.Queue()
        self.barrier = ctx.Barrier(len(bands))  # kept: the children attach to its semaphores
        self.cmds = [ctx.Queue() for _ in bands]
        self.ps = [ctx.Process(target=_write_worker, args=(modname, kw, r0, r1, src, shape, q, self.barrier,
                                                           self.queue), daemon=True)
                   for (r0, r1), q in zip(bands, self.cmds)]
        for p in self.ps:
            p.start()

    def _results(self, timeout: float = 1800) -> List[Tuple[str, Any, float]]:
        res: List[Tuple[str, Any, float]] = []
        end = time.monotonic() + timeout
        while len(res) < len(self.ps):
            try:
                res.append(self.queue.get(timeout=1))
            except queue_mod.Empty:
                dead = [p.exitcode for p in self.ps if p.exitcode is not None]
                if dead or time.monotonic() > end:
                    self.barrier.abort()
                    raise RuntimeError(f"writer process died (exit code {dead[0]})" if dead else "writers timed out")
        errs = [r[1] for r in res if r[0] == "error"]
        if errs:
            raise RuntimeError(errs[0])
        return res

    def ready(self) -> None:
        self._results()

    def run(self) -> float:
        """Wall time from the barrier's release until the last writer is done (fsync included)."""
        for q in self.cmds:
            q.put("go")
        res = self._results()
        # perf_counter is CLOCK_MONOTONIC, one clock for every process on Linux.
        return max(r[2] for r in res) - min(r[1] for r in res)

    def stop(self) -> None:
        for q in self.cmds:
            q.put(None)
        for p in self.ps:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()


def parallel_writes(data: np.ndarray, tile: Tuple[int, int], comp: str, engines: Sequence[str], reps: int,
                    workdir: str, procs_list: Sequence[int] = (1, 2)) -> List[Row]:
    """Parallel writes: the whole array written into a created, empty store by 1 and by 2
    processes (each a band of whole tile rows, one engine thread), then fsync of the store by each
    process; timed from a barrier until the last process is done; in turns across engines
    (median of ``reps``); the whole array is read back and checked after every run."""
    shape = data.shape
    rows, cols = shape
    nbytes = data.nbytes
    group = f"dense parallel writes {comp}"
    out: List[Row] = []
    log(f"  parallel writes ({comp}): {common.fmt_bytes(nbytes)} by {' and '.join(map(str, procs_list))} processes")
    # The data, once, in a file in memory (tmpfs) that every writer maps (else in the workdir).
    shm = "/dev/shm"
    if not os.path.isdir(shm) or shutil.disk_usage(shm).free < 2 * nbytes:
        shm = workdir
    fd, src = tempfile.mkstemp(prefix="tessera-bench-", suffix=".i32", dir=shm)
    os.close(fd)
    ctx = mp.get_context("spawn")
    try:
        data.tofile(src)
        mods: Dict[str, Any] = {}
        kws: Dict[str, Dict[str, Any]] = {}
        for name in engines:
            if name in READ_SIDE_VARIANTS:  # they write like their base engine
                continue
            modname, opts = VARIANT_OF.get(name, (name, {}))
            mod = load_adapter(modname)
            path = os.path.join(workdir, f"dense-pwrite-{name}" + ("" if comp == "none" else f"+{comp}"))
            kw = dict({"path": path, "shape": shape, "tile": tile, "compression": comp}, **opts)
            if not mod.AVAILABLE:
                out += [Row(group, f"whole array, {p} proc", name, None, note=f"not installed: {mod.REASON}")
                        for p in procs_list]
                continue
            try:
                probe = mod.Dense(**kw)
                if not hasattr(probe, "write_rows"):
                    raise Unsupported("no parallel-write method in the adapter")
            except Unsupported as e:
                out += [Row(group, f"whole array, {p} proc", name, None, note=str(e)) for p in procs_list]
                continue
            mods[name], kws[name] = mod, kw
        ntr = -(-rows // tile[0])  # tile rows
        for procs in procs_list:
            case = f"whole array, {procs} proc"
            bands = [(min(rows, (k * ntr // procs) * tile[0]), min(rows, ((k + 1) * ntr // procs) * tile[0]))
                     for k in range(procs)]
            writers: Dict[str, _Writers] = {}
            for name, mod in mods.items():
                why = getattr(mod, "CONCURRENT_WRITES", "") if procs > 1 else ""
                if not why and any(r0 >= r1 for r0, r1 in bands):
                    why = f"fewer tile rows ({ntr}) than processes"
                if why:
                    out.append(Row(group, case, name, None, note=why))
                    log(f"    parallel writes {procs} proc {name:<12} not run ({why})")
                    continue
                writers[name] = _Writers(ctx, VARIANT_OF.get(name, (name,))[0], kws[name], bands, src, shape)
            walls: Dict[str, Any] = {}
            for name, w in writers.items():
                try:
                    w.ready()
                    walls[name] = []
                except Exception as e:  # noqa: BLE001
                    walls[name] = e
            for rep in range(reps):
                names = [k for k, v in walls.items() if isinstance(v, list)]
                for name in names[rep % max(1, len(names)):] + names[: rep % max(1, len(names))]:
                    path = kws[name]["path"]
                    try:
                        common.remove(path)
                        mods[name].Dense(**kws[name]).create()  # untimed: the empty array
                        common.fsync_tree(path)
                        wall = writers[name].run()
                        chk = mods[name].Dense(**kws[name])
                        chk.open()
                        got = np.asarray(chk.read(0, rows, 0, cols)).reshape(shape)
                        chk.close()
                        if not np.array_equal(got, data):
                            raise AssertionError("the array read back after the parallel writes differs")
                        del got
                        walls[name].append(wall)
                    except Exception as e:  # noqa: BLE001
                        walls[name] = e
                    finally:
                        common.remove(path)
            for name, w in writers.items():
                w.stop()
                v = walls[name]
                if isinstance(v, BaseException):
                    msg = f"{type(v).__name__}: {v}"[:300]
                    out.append(Row(group, case, name, None, note=msg))
                    log(f"    parallel writes {procs} proc {name:<12} FAILED {msg}")
                    continue
                med = float(np.median(v))
                out.append(Row(group, case, name, med, runs=v, bytes=nbytes,
                               limit="seq_write_fsync" if comp == "none" else f"{CODEC_OF[comp]} compress"))
                log(f"    parallel writes {procs} proc {name:<12} {common.fmt_time(med):>9} "
                    f"({nbytes / med / 1e6:,.0f} MB/s)")
    finally:
        common.remove(src)
    return out


def run(rows: int = 20_000, cols: int = 13_000, tile: Tuple[int, int] = (2_500, 1_000), reps: int = 5,
        load_reps: int = 1, cold_reps: int = 3, squares: int = 20, point_sizes: Sequence[int] = (1_000, 10_000, 100_000),
        update_sizes: Sequence[int] = (1_000, 10_000, 100_000), fragment_counts: Sequence[int] = (10, 100, 1000),
        parallel_squares: int = 32, point_budget: float = 60.0, parallel_write_reps: int = 3,
        workdir: Optional[str] = None, engines: Optional[Sequence[str]] = None,
        compressions: Sequence[str] = COMPRESSIONS, only: Optional[Sequence[str]] = None,
        seed: int = 7) -> Dict[str, Any]:
    workdir = workdir or common.default_workdir()
    os.makedirs(workdir, exist_ok=True)
    engines = list(engines or DENSE_ENGINES)
    shape = (rows, cols)
    nbytes = rows * cols * 4
    out: Dict[str, Any] = {"params": {"rows": rows, "cols": cols, "tile": tile, "reps": reps, "load_reps": load_reps,
                                      "cold_reps": cold_reps, "squares": squares, "point_sizes": list(point_sizes),
                                      "update_sizes": list(update_sizes), "fragment_counts": list(fragment_counts),
                                      "parallel_squares": parallel_squares,
                                      "parallel_write_reps": parallel_write_reps, "only": list(only or []),
                                      "seed": seed},
                           "engines": {}}
    rows_out: List[Row] = []
    t = time.perf_counter()
    data = make_data(rows, cols)
    log(f"# dense: {rows:,} x {cols:,} int32 ({common.fmt_bytes(nbytes)}), tiles {tile[0]:,} x {tile[1]:,} "
        f"({common.fmt_bytes(tile[0] * tile[1] * 4)}), generated in {time.perf_counter() - t:.1f} s")
    rng = np.random.default_rng(seed)
    tr, tc = tile
    ti, tj = (rows // tr) // 2, (cols // tc) // 2
    tile_box = (ti * tr, min(rows, ti * tr + tr), tj * tc, min(cols, tj * tc + tc))
    par_box = (tile_box[0] + 1, tile_box[1], tile_box[2] + 1, tile_box[3])
    col_j = tj * tc + tc // 2
    col_box = (0, rows, col_j, col_j + 1)
    side = min(1000, rows, cols)
    sq = [(int(r), int(c)) for r, c in zip(rng.integers(0, rows - side + 1, squares), rng.integers(0, cols - side + 1, squares))]
    psq = [(int(r), int(c)) for r, c in zip(rng.integers(0, rows - side + 1, parallel_squares),
                                             rng.integers(0, cols - side + 1, parallel_squares))]
    point_sets = {n: unique_cells(np.random.default_rng(seed + n), n, shape) for n in point_sizes}
    reads = [("tile", tile_box), (f"par {par_box[1] - par_box[0]}x{par_box[3] - par_box[2]}", par_box), ("col", col_box)]
    out["params"]["boxes"] = {name: box for name, box in reads}
    update_counter = [0]
    out["load_average_start"] = common.load_average()

    def want(group: str) -> bool:
        return not only or any(group == g or group.startswith(g + " ") for g in only)

    def fail(group: str, case: str, label: str, e: BaseException) -> None:
        msg = f"{type(e).__name__}: {e}"[:300]
        rows_out.append(Row(group, case, label, None, note=msg))
        log(f"    {case} {label}: FAILED {msg}")

    for comp in compressions:
        on_stores = [g for g in ("dense load", "dense stored", "dense read warm", "dense read cold")
                     + (() if comp == "gzip" else ("dense random reads", "dense parallel reads", "dense random updates"))
                     if want(f"{g} {comp}")]
        if not on_stores and not (comp != "gzip" and want(f"dense parallel writes {comp}")):
            continue
        log(f"\n## compression: {comp}")
        stores: Dict[str, Any] = {}  # engine name -> adapter instance
        paths: Dict[str, str] = {}
        kws: Dict[str, Dict[str, Any]] = {}
        # 1. Loads, one engine after the other (when a selected workload reads the stores).
        for name in (engines if on_stores else []):
            label = name if comp == "none" else f"{name}+{comp}"
            modname, opts = VARIANT_OF.get(name, (name, {}))
            mod = load_adapter(modname)
            info: Dict[str, Any] = out["engines"].setdefault(label, {"adapter": modname, "options": opts})
            path = os.path.join(workdir, f"dense-{label}")
            if not mod.AVAILABLE:
                info["error"] = f"not installed: {mod.REASON}"
                rows_out.append(Row(f"dense load {comp}", "whole array", name, None, note=info["error"]))
                log(f"  {label}: SKIPPED ({info['error']})")
                continue
            try:
                store = mod.Dense(path=path, shape=shape, tile=tile, compression=comp, **opts)
            except Unsupported as e:
                info["error"] = str(e)
                rows_out.append(Row(f"dense load {comp}", "whole array", name, None, note=str(e)))
                log(f"  {label}: not run ({e})")
                continue
            info["version"] = mod.VERSION
            info["notes"] = getattr(store, "notes", {})
            info["method"] = (store.__class__.__doc__ or "").strip()
            try:
                def do_load() -> None:
                    store.load(data)
                    common.fsync_tree(path)

                load = common.measure(do_load, reps=load_reps, warmup=0, setup=lambda: common.remove(path),
                                      min_reps_under_1s=3)
            except Exception as e:  # noqa: BLE001
                info["error"] = f"{type(e).__name__}: {e}"[:300]
                fail(f"dense load {comp}", "whole array", name, e)
                common.remove(path)
                continue
            stored = common.du(path)
            info.update(load_runs=load.runs, stored_bytes=stored)
            limit = "seq_write_fsync" if comp == "none" else f"{CODEC_OF[comp]} compress"
            rows_out.append(Row(f"dense load {comp}", "whole array", name, load.median, runs=load.runs, bytes=nbytes,
                                limit=limit, limit_bytes=nbytes if comp != "none" else stored,
                                extra={"stored_bytes": stored}))
            rows_out.append(Row(f"dense stored {comp}", "bytes", name, float(stored), bytes=stored))
            log(f"  {label:<18} load {common.fmt_time(load.median):>9} ({nbytes / load.median / 1e6:,.0f} MB/s), "
                f"stored {common.fmt_bytes(stored)} ({nbytes / stored:.2f}x)")
            store.open()
            stores[name], paths[name] = store, path
            kws[name] = dict({"path": path, "shape": shape, "tile": tile, "compression": comp}, **opts)

        # 2. Subarray reads: checked, then timed in turns (warm), then cold in turns.
        rlimit = "memcpy" if comp == "none" else f"{CODEC_OF[comp]} decompress"
        cases: List[Tuple[str, List[Tuple[int, int, int, int]], int]] = [(n, [b], 1) for n, b in reads]
        cases.append((f"{side}x{side} random", [(r, r + side, c, c + side) for r, c in sq], min(5, len(sq))))
        for rname, boxes, ncold in (cases if want(f"dense read warm {comp}") or want(f"dense read cold {comp}")
                                    else []):
            live = {}
            for name, store in stores.items():
                try:
                    for (r0, r1, c0, c1) in boxes[:3]:
                        got = np.asarray(store.read(r0, r1, c0, c1)).reshape(r1 - r0, c1 - c0)
                        if not np.array_equal(got, expect(r0, r1, c0, c1, cols)):
                            raise AssertionError(f"{rname}: wrong values")
                    live[name] = store
                except Exception as e:  # noqa: BLE001
                    fail(f"dense read warm {comp}", rname, name, e)

            def rd(store: Any, bx: List[Tuple[int, int, int, int]]) -> Any:
                return lambda: [store.read(*b) for b in bx]

            def cold_setup(name: str) -> Any:
                def f() -> None:
                    stores[name].close()
                    common.drop_cache(paths[name])
                return f

            def cold_fn(store: Any, bx: List[Tuple[int, int, int, int]]) -> Any:
                def f() -> None:
                    store.open()
                    for b in bx:
                        store.read(*b)
                return f

            warm = common.interleaved({k: rd(st, boxes) for k, st in live.items()}, reps=reps, warmup=1)
            coldable = {k: st for k, st in live.items() if not getattr(st, "cold_note", "")}
            cold = common.interleaved({k: cold_fn(st, boxes[:ncold]) for k, st in coldable.items()}, reps=cold_reps,
                                      warmup=0, setups={k: cold_setup(k) for k in coldable})
            b = (boxes[0][1] - boxes[0][0]) * (boxes[0][3] - boxes[0][2]) * 4
            for name in live:
                w = warm[name]
                if isinstance(w, BaseException):
                    fail(f"dense read warm {comp}", rname, name, w)
                    continue
                wper = [x / len(boxes) for x in w.runs]
                rows_out.append(Row(f"dense read warm {comp}", rname, name, float(np.median(wper)), runs=wper, bytes=b,
                                    limit=rlimit))
                c = cold.get(name)
                if c is None:
                    rows_out.append(Row(f"dense read cold {comp}", rname, name, None, note=live[name].cold_note))
                    cper = [float("nan")]
                elif isinstance(c, BaseException):
                    fail(f"dense read cold {comp}", rname, name, c)
                    continue
                else:
                    cper = [x / ncold for x in c.runs]
                    rows_out.append(Row(f"dense read cold {comp}", rname, name, float(np.median(cper)), runs=cper,
                                        bytes=b, limit="seq_read_cold" if comp == "none" else None))
                log(f"    {rname:<16} {name:<12} warm {common.fmt_time(float(np.median(wper))):>9}  "
                    f"cold {common.fmt_time(float(np.median(cper))) if c is not None else 'n/a':>9}")
        for store in stores.values():
            store.close()
        if comp == "gzip":
            for p in paths.values():
                common.remove(p)
            continue
        for store in stores.values():
            store.open()

        # 3. Random element reads (engines without a point read: per element, within a time budget).
        for n, (pr, pc) in (point_sets.items() if want(f"dense random reads {comp}") else []):
            case = f"{n // 1000}K elements"
            fns, subset = {}, {}
            for name, store in stores.items():
                try:
                    pilot = min(n, 20 if not store.point_reads_native else n)
                    est = common.time_once(lambda: store.read_points(pr[:pilot], pc[:pilot])) * n / pilot
                    m = n
                    if not store.point_reads_native and est > point_budget:
                        m = max(pilot, int(n * point_budget / est))
                    got = store.read_points(pr[:m], pc[:m])
                    if not np.array_equal(np.asarray(got).reshape(-1), (pr[:m] % cols + pc[:m]).astype(np.int32)):
                        raise AssertionError("random element reads: wrong values")
                    subset[name] = m
                    fns[name] = (lambda st, mm: (lambda: st.read_points(pr[:mm], pc[:mm])))(store, m)
                except Exception as e:  # noqa: BLE001
                    fail(f"dense random reads {comp}", case, name, e)
            res = common.interleaved(fns, reps=reps if max(subset.values() or [0]) <= 10_000 else 3, warmup=0)
            for name, tm in res.items():
                if isinstance(tm, BaseException):
                    fail(f"dense random reads {comp}", case, name, tm)
                    continue
                m = subset[name]
                secs = tm.median * n / m
                note = ""
                if m < n:
                    note = (f"{stores[name].notes.get('points', '')}; timed on {m:,} of the {n:,} elements and "
                            "scaled linearly")
                elif not stores[name].point_reads_native:
                    note = stores[name].notes.get("points", "")
                rows_out.append(Row(f"dense random reads {comp}", case, name, secs, runs=[r * n / m for r in tm.runs],
                                    cells=n, note=note))
                log(f"    read {case:<12} {name:<12} {common.fmt_time(secs):>9}"
                    f"{' (scaled from ' + format(m, ',') + ')' if m < n else ''}")
        for store in stores.values():
            store.close()

        # 4. Parallel reads: 1 and 2 processes, one engine thread each, in turns.
        for procs in ((1, 2) if want(f"dense parallel reads {comp}") else ()):
            case = f"{parallel_squares} x {side}x{side}, {procs} proc"
            walls: Dict[str, List[float]] = {k: [] for k in stores}
            for rep in range(3):
                names = list(stores)
                for name in names[rep % len(names):] + names[: rep % len(names)]:
                    if walls.get(name) is None:
                        continue
                    try:
                        walls[name].append(parallel_read(VARIANT_OF.get(name, (name,))[0], kws[name], psq, side, procs))
                    except Exception as e:  # noqa: BLE001
                        fail(f"dense parallel reads {comp}", case, name, e)
                        walls[name] = None  # type: ignore[assignment]
            for name, w in walls.items():
                if w:
                    rows_out.append(Row(f"dense parallel reads {comp}", case, name, float(np.median(w)), runs=w,
                                        bytes=parallel_squares * side * side * 4))
                    log(f"    parallel {procs} proc {name:<12} {common.fmt_time(float(np.median(w))):>9}")

        # 5. Random element updates (+ fsync), in turns; each run writes a fresh set of cells.
        for n in (update_sizes if want(f"dense random updates {comp}") else ()):
            case = f"{n // 1000}K elements"
            last: Dict[str, Any] = {}
            pending: Dict[str, Any] = {}

            def cells_for(name: str) -> Any:
                # Drawn before the clock starts: the cells are the workload, not part of its cost.
                def setup() -> None:
                    update_counter[0] += 1
                    k = update_counter[0]
                    ur, uc = unique_cells(np.random.default_rng(1000 + k), n, shape)
                    pending[name] = (ur, uc, (-(np.arange(n, dtype=np.int64) + k * 1_000_000) % 2**31).astype(np.int32))
                return setup

            def upd(name: str) -> Any:
                def f() -> None:
                    ur, uc, vals = pending.pop(name)
                    stores[name].update(ur, uc, vals)
                    common.fsync_tree(paths[name])
                    last[name] = (ur, uc, vals)
                return f

            res = common.interleaved({k: upd(k) for k in stores}, reps=3, warmup=0,
                                     setups={k: cells_for(k) for k in stores})
            for name, tm in res.items():
                if isinstance(tm, BaseException):
                    fail(f"dense random updates {comp}", case, name, tm)
                    continue
                try:
                    ur, uc, vals = last[name]
                    st = stores[name]
                    st.open()
                    chk = min(n, 100)
                    got = st.read_points(ur[:chk], uc[:chk])
                    st.close()
                    if not np.array_equal(np.asarray(got).reshape(-1), vals[:chk]):
                        raise AssertionError("updated cells read back wrong")
                except Exception as e:  # noqa: BLE001
                    fail(f"dense random updates {comp}", case, name, e)
                    continue
                rows_out.append(Row(f"dense random updates {comp}", case, name, tm.median, runs=tm.runs, cells=n,
                                    note=stores[name].notes.get("update", "")))
                log(f"    update {case:<10} {name:<12} {common.fmt_time(tm.median):>9}")
        for name, store in stores.items():
            label = name if comp == "none" else f"{name}+{comp}"
            if hasattr(store, "fragments"):
                try:
                    out["engines"][label]["fragments_after_updates"] = store.fragments()
                except Exception:  # noqa: BLE001
                    pass
            common.remove(paths[name])

        # 6. Parallel writes: 1 and 2 processes, one engine thread each, in turns.
        if want(f"dense parallel writes {comp}"):
            rows_out.extend(parallel_writes(data, tile, comp, engines, parallel_write_reps, workdir))

    # 7. Fragments (Tessera; TileDB cannot add sparse fragments to a dense array).
    if "tessera" in engines and fragment_counts and want("dense fragments"):
        rows_out.extend(fragments_experiment(data, shape, tile, fragment_counts, sq, side, reps, workdir, seed))
        rows_out.append(Row("dense fragments", "1", "tiledb", None,
                            note="TileDB 2.x cannot write cells (sparse fragments) into a dense array"))
    out["load_average_end"] = common.load_average()
    out["rows"] = rows_out
    return out


def fragments_experiment(data: np.ndarray, shape: Tuple[int, int], tile: Tuple[int, int], counts: Sequence[int],
                         sq: List[Tuple[int, int]], side: int, reps: int, workdir: str, seed: int) -> List[Row]:
    """Figure 12: random 1Kx1K reads over 1 dense fragment + N sparse fragments of 1,000 random
    cells each, then consolidation (when the engine has it)."""
    mod = load_adapter("tessera")
    path = os.path.join(workdir, "dense-fragments-tessera")
    common.remove(path)
    store = mod.Dense(path=path, shape=shape, tile=tile, compression="none")
    store.load(data)
    common.fsync_tree(path)
    out: List[Row] = []
    log("\n## fragments (tessera): random 1Kx1K reads vs number of fragments")
    rng = np.random.default_rng(seed + 99)
    have = 0

    def time_squares(label: str) -> None:
        store.open()

        def rnd() -> None:
            for r, c in sq:
                store.read(r, r + side, c, c + side)

        t = common.measure(rnd, reps=reps, warmup=1)
        per = [x / len(sq) for x in t.runs]
        store.close()
        out.append(Row("dense fragments", label, "tessera", float(np.median(per)), runs=per))
        log(f"  {label:<10} {common.fmt_time(float(np.median(per))):>9} per 1Kx1K read ({store.fragments()} fragments)")

    time_squares("1")
    for n in counts:
        t0 = time.perf_counter()
        while have < n:
            r, c = unique_cells(rng, 1000, shape)
            store.update(r, c, rng.integers(-1000, 0, 1000, dtype=np.int32))
            have += 1
        common.fsync_tree(path)
        log(f"  wrote up to {n} sparse fragments of 1,000 cells ({time.perf_counter() - t0:.1f} s)")
        time_squares(f"1+{n}")
    try:
        t0 = time.perf_counter()
        store.consolidate()
        out.append(Row("dense fragments", "consolidate", "tessera", time.perf_counter() - t0))
        time_squares("1C")
    except Unsupported as e:
        out.append(Row("dense fragments", "consolidate", "tessera", None, note=str(e)))
        log(f"  consolidation: skipped ({e})")
    common.remove(path)
    return out
