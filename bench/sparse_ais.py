"""The sparse benchmark of the TileDB paper (section 6.2) on synthetic AIS-like ship positions
(bench/ais.py): Tessera against TileDB-Py, DuckDB and Parquet (pyarrow), in one run.

1. Load ``--points`` points (default 10 million) in 10 writes, one per month: Tessera and TileDB
   as sparse arrays (int64 dims x, y in [0, 360e6) x [0, 180e6), space tiles 10M x 10M, data
   tiles of 10,000 cells), without compression and with it (attributes byte shuffle + zstd-3;
   coordinates delta + byte shuffle + zstd-3); DuckDB as a table ordered by (x, y); Parquet as one file per month sorted by
   (x, y), without and with zstd. The load time includes fsync of every file of the store.
2. Subarray queries in a dense region (the busiest harbour) and a sparse one (the emptiest
   open-ocean spot) returning about 10K, 100K and 1M points: boxes found by binary search on
   their size around each centre, plus ``--shifts - 1`` copies shifted by random offsets of up
   to 10% of the box (the paper's 50 shifted subarrays). Every query returns the coordinates and
   all 7 attributes as numpy arrays. Each engine's result is checked against numpy on the
   generated data (count, coordinate checksum, per-attribute sums).
3. Updates: ``--appends`` (100) writes of 1,000 more points each (distinct from the loaded ones,
   same distribution; Tessera and TileDB one fragment each, DuckDB an ``INSERT``, Parquet one
   more file), each timed until it is durable: Tessera's commit and DuckDB's transaction
   commit sync what they wrote before returning; TileDB and Parquet are timed with an fsync of
   the files they created or changed. Then the ~100K queries over the result; consolidation
   per engine (Tessera and TileDB consolidate and vacuum, DuckDB rebuilds the table in (x, y)
   order, Parquet rewrites one sorted file), timed the same way, three times, each from a copy
   of the store as the appends left it (the median is the figure); the ~100K queries again.
4. Warm: one untimed pass, then ``--reps`` rounds over the shifted boxes; the figure is the median
   over rounds of the mean time per query. Cold: ``posix_fadvise(DONTNEED)`` on every file of the
   store (the page cache cannot be dropped here), then open + query of the base box, timed
   (median of ``--cold-reps``).

``python bench/sparse_ais.py`` (full, 10M points) or ``--points 1000000 --reps 3`` (quick).
Writes bench/out/sparse_ais.json and bench/out/sparse_ais.md.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ais  # noqa: E402
import common  # noqa: E402
from adapters import load as load_adapter  # noqa: E402
from common import Row, log  # noqa: E402

# (engine label, adapter module, compressed); OPTIONS: adapter options of a label.
VARIANTS: List[Tuple[str, str, bool]] = [
    ("tessera", "tessera", False),
    ("tessera-mmap", "tessera", False),
    ("tessera+z", "tessera", True),
    ("tiledb", "tiledb", False),
    ("tiledb+z", "tiledb", True),
    ("duckdb", "duckdb", True),
    ("parquet", "parquet", False),
    ("parquet+z", "parquet", True),
]
OPTIONS: Dict[str, Dict[str, Any]] = {"tessera-mmap": {"read_mode": "mmap"}}
TARGETS = (10_000, 100_000, 1_000_000)
#: appends after the load (the issue's "10M + 100 batches"), of APPEND_SIZE points each
APPENDS, APPEND_SIZE = 100, 1_000
Box = Tuple[int, int, int, int]


def expected(data: ais.AIS, sx: np.ndarray, sy: np.ndarray, order: np.ndarray, box: Box) -> Dict[str, int]:
    """What a query must return: count, coordinate checksum, per-attribute sums."""
    x0, x1, y0, y1 = box
    i, j = np.searchsorted(sx, [x0, x1 + 1])
    m = (sy[i:j] >= y0) & (sy[i:j] <= y1)
    rows = order[i:j][m]
    out = {"count": int(len(rows)), "xy": ais.coord_checksum(sx[i:j][m], sy[i:j][m])}
    for a in ais.ATTRS:
        out[a] = int(data.columns[a][rows].sum())
    return out


def digest(res: Dict[str, np.ndarray]) -> Dict[str, int]:
    out = {"count": int(len(res["x"])), "xy": ais.coord_checksum(np.asarray(res["x"]), np.asarray(res["y"]))}
    for a in ais.ATTRS:
        out[a] = int(np.asarray(res[a]).sum())
    return out


def shifted(box: Box, k: int, rng: np.random.Generator) -> List[Box]:
    """``box`` and ``k - 1`` copies shifted by up to 10% of its width and height, in the domain."""
    x0, x1, y0, y1 = box
    w, h = x1 - x0, y1 - y0
    out = [box]
    for _ in range(k - 1):
        dx = int(rng.uniform(-0.1, 0.1) * w)
        dy = int(rng.uniform(-0.1, 0.1) * h)
        dx = max(-x0, min(ais.X_MAX - 1 - x1, dx))
        dy = max(-y0, min(ais.Y_MAX - 1 - y1, dy))
        out.append((x0 + dx, x1 + dx, y0 + dy, y1 + dy))
    return out


def time_queries(queries: List[Dict[str, Any]], stores: Dict[str, Any], paths: Dict[str, str], reps: int,
                 cold_reps: int, warm_group: str, cold_group: str, suffix: str, out: Dict[str, Any]) -> List[Row]:
    """Every store's result of every query checked against ``q["expected"]``, then the engines
    timed in turns: warm (the mean per query over the shifted boxes, median of ``reps`` rounds)
    and cold (close, ``posix_fadvise(DONTNEED)``, open, the base box; median of ``cold_reps``).
    The stores are open on return."""
    rows: List[Row] = []
    for q in queries:
        case = f"{q['region']} region ~{q['target'] // 1000}K{suffix}"
        live: Dict[str, Any] = {}
        for label, store in stores.items():
            try:
                for b, e in zip(q["boxes"], q["expected"]):
                    got = digest(store.query(b))
                    if got != e:
                        raise AssertionError(f"wrong result for box {b}: got {got}, expected {e}")
                live[label] = store
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {e}"[:300]
                log(f"  {case:<24} {label}: FAILED {msg}")
                rows.append(Row(warm_group, case, label, None, note=msg))
                out["engines"][label].setdefault("errors", []).append(msg)

        def round_fn(store: Any) -> Any:
            return lambda: [store.query(b) for b in q["boxes"]]

        warm = common.interleaved({k: round_fn(s) for k, s in live.items()}, reps=reps, warmup=0)

        def cold_setup(label: str) -> Any:
            def f() -> None:
                live[label].close()
                common.drop_cache(paths[label])
            return f

        def cold_fn(store: Any) -> Any:
            def f() -> None:
                store.open()
                store.query(q["boxes"][0])
            return f

        coldable = {k: s for k, s in live.items() if not getattr(s, "cold_note", "")}
        cold = common.interleaved({k: cold_fn(s) for k, s in coldable.items()}, reps=cold_reps, warmup=0,
                                  setups={k: cold_setup(k) for k in coldable})
        cells = int(np.mean(q["counts"]))
        res_bytes = cells * len(ais.COLUMNS) * 8
        nb = len(q["boxes"])
        for label in live:
            w, c = warm[label], cold.get(label)
            if isinstance(w, BaseException) or isinstance(c, BaseException):
                err = w if isinstance(w, BaseException) else c
                msg = f"{type(err).__name__}: {err}"[:300]
                rows.append(Row(warm_group, case, label, None, note=msg))
                log(f"  {case:<24} {label}: FAILED {msg}")
                continue
            per_query = [r / nb for r in w.runs]
            rows.append(Row(warm_group, case, label, float(np.median(per_query)), runs=per_query,
                            bytes=res_bytes, cells=cells, limit="memcpy"))
            if c is None:
                rows.append(Row(cold_group, case, label, None, note=live[label].cold_note))
            else:
                rows.append(Row(cold_group, case, label, c.median, runs=c.runs, bytes=res_bytes,
                                cells=q["counts"][0]))
            log(f"  {case:<24} {label:<12} warm {common.fmt_time(float(np.median(per_query))):>10}  "
                f"cold {common.fmt_time(c.median) if c is not None else 'n/a':>10}   (results verified: {q['counts']})")
    return rows


def updates(data: ais.AIS, stores: Dict[str, Any], paths: Dict[str, str], queries: List[Dict[str, Any]],
            appends: int, reps: int, cold_reps: int, out: Dict[str, Any]) -> List[Row]:
    """The update workload after the load: ``appends`` writes of ``data.extra``'s points in equal
    batches (the engines in turns, batch by batch; each timed until durable, ``_durably``), the
    ``queries`` over the result (every result checked), then consolidation per engine (timed
    the same way, median of ``CONSOLIDATION_RUNS`` from copies of the same store,
    ``_consolidations``) and the queries again, warm and cold."""
    rows: List[Row] = []
    batches = np.array_split(data.extra, appends)
    size = len(batches[0])
    log(f"\n## updates: {appends} appends of {size:,} points, reads, consolidation, reads")
    for label, store in stores.items():
        store.close()
    times: Dict[str, List[float]] = {label: [] for label in stores}
    failed: Dict[str, str] = {}
    for idx in batches:
        b = data.rows(idx)
        for label, store in stores.items():
            if label in failed:
                continue
            try:
                times[label].append(_durably(store, paths[label], lambda s=store: s.append(b)))
            except Exception as e:  # noqa: BLE001 - reported, never hidden
                failed[label] = f"append failed: {type(e).__name__}: {e}"[:300]
                log(f"  {label}: {failed[label]}")
    case = f"append of {size:,} points (median of {appends})"
    for label, store in stores.items():
        if label in failed:
            rows.append(Row("sparse updates", case, label, None, note=failed[label]))
            continue
        store.end_appends()
        med = float(np.median(times[label]))
        rows.append(Row("sparse updates", case, label, med, runs=times[label], cells=size))
        log(f"  {label:<12} append {common.fmt_time(med)} (median; min {common.fmt_time(min(times[label]))}, "
            f"max {common.fmt_time(max(times[label]))})")
    live = {k: s for k, s in stores.items() if k not in failed}
    # Expected results over the load and the appends.
    n_all = len(data.columns["x"])
    order = np.lexsort((data.columns["y"], data.columns["x"]))
    sx, sy = data.columns["x"][order], data.columns["y"][order]
    after = []
    for q in queries:
        exp = [expected(data, sx, sy, order, b) for b in q["boxes"]]
        after.append(dict(q, expected=exp, counts=[e["count"] for e in exp]))
    for store in live.values():
        store.open()
    rows += time_queries(after, live, paths, reps, cold_reps, "sparse read warm, updated", "sparse read cold, updated",
                         f", +{appends} appends", out)
    ccase = f"consolidate {data.n / 1e6:g}M + {appends} appends ({n_all:,} points)"
    for label, store in live.items():
        store.close()
        try:
            runs = _consolidations(store, paths[label])
            dt = float(np.median(runs))
            rows.append(Row("sparse updates", ccase, label, dt, runs=runs, cells=n_all))
            log(f"  {label:<12} consolidation {common.fmt_time(dt)} (median of {', '.join(map(common.fmt_time, runs))}), "
                f"stored {common.fmt_bytes(common.du(paths[label]))}")
        except Exception as e:  # noqa: BLE001
            msg = f"consolidation failed: {type(e).__name__}: {e}"[:300]
            rows.append(Row("sparse updates", ccase, label, None, note=msg))
            log(f"  {label}: {msg}")
        store.open()
    rows += time_queries(after, live, paths, reps, cold_reps, "sparse read warm, updated", "sparse read cold, updated",
                         ", consolidated", out)
    return rows


CONSOLIDATION_RUNS = 3


def _consolidations(store: Any, path: str) -> List[float]:
    """Seconds of ``CONSOLIDATION_RUNS`` consolidations of the (closed) store at ``path``, each
    timed until durable (``_durably``) and each from the store as it was before the first: a
    copy taken first is put back before every later run (and synced, so that no run pays for
    the copy's writes). The store is left consolidated."""
    backup = path.rstrip("/") + ".before-consolidation"
    _copy_store(path, backup)
    runs: List[float] = []
    try:
        for i in range(CONSOLIDATION_RUNS):
            if i:
                _copy_store(backup, path)
            os.sync()
            runs.append(_durably(store, path, store.consolidate))
    finally:
        _remove_store(backup)
    return runs


def _copy_store(src: str, dst: str) -> None:
    """Replaces the store at ``dst`` (a folder, or a file with DuckDB's write-ahead log beside
    it) with a copy of the one at ``src``."""
    _remove_store(dst)
    if os.path.isdir(src):
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)
    if os.path.exists(src + ".wal"):
        shutil.copy2(src + ".wal", dst + ".wal")


def _remove_store(path: str) -> None:
    """Removes the store at ``path`` (see ``_copy_store``), if there is one."""
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)
    if os.path.exists(path + ".wal"):
        os.remove(path + ".wal")


def _durably(store: Any, path: str, fn: Any) -> float:
    """Seconds for ``fn()`` to make its changes to the store at ``path`` durable: ``fn`` alone
    for an engine whose writes are durable when they return (``store.durable_writes``); for the
    others ``fn`` and then an fsync of the files it created or changed and of their folders (the
    scan that finds them is not timed)."""
    if getattr(store, "durable_writes", False):
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0
    before = _file_states(path)
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    changed = [f for f, st in _file_states(path).items() if before.get(f) != st]
    t0 = time.perf_counter()
    _fsync_files(changed)
    return dt + time.perf_counter() - t0


def _file_states(path: str) -> Dict[str, Tuple[int, int]]:
    """(size, mtime) of every file of a store, and of DuckDB's write-ahead log beside its file."""
    files = common.files_of(path) if os.path.exists(path) else []
    if os.path.exists(path + ".wal"):
        files.append(path + ".wal")
    out = {}
    for f in files:
        try:
            st = os.stat(f)
        except FileNotFoundError:
            continue
        out[f] = (st.st_size, st.st_mtime_ns)
    return out


def _fsync_files(files: List[str]) -> None:
    """fsync ``files`` and the directories that hold them."""
    common.fsync_existing(files + sorted({os.path.dirname(f) for f in files}))


def run(points: int = 10_000_000, months: int = 10, reps: int = 5, cold_reps: int = 3, shifts: int = 5,
        workdir: Optional[str] = None, engines: Optional[List[str]] = None, keep: bool = False,
        seed: int = 20160901, targets: Tuple[int, ...] = TARGETS, appends: int = APPENDS,
        append_size: int = APPEND_SIZE) -> Dict[str, Any]:
    workdir = workdir or common.default_workdir()
    os.makedirs(workdir, exist_ok=True)
    out: Dict[str, Any] = {"params": {"points": points, "months": months, "reps": reps, "cold_reps": cold_reps,
                                      "shifts": shifts, "seed": seed, "workdir": workdir, "appends": appends,
                                      "append_size": append_size}}
    rows: List[Row] = []
    t = time.perf_counter()
    data = ais.generate(points, months=months, seed=seed, extra=appends * append_size)
    out["generate_seconds"] = time.perf_counter() - t
    raw = data.n * len(ais.COLUMNS) * 8
    log(f"# sparse AIS: {data.n:,} points ({common.fmt_bytes(raw)} as int64 columns) in {months} batches, "
        f"generated in {out['generate_seconds']:.1f} s")
    sort_order = np.lexsort((data.columns["y"][: data.n], data.columns["x"][: data.n]))
    sx, sy = data.columns["x"][sort_order], data.columns["y"][sort_order]
    dense_c, sparse_c = ais.dense_and_sparse_centres(data)
    rng = np.random.default_rng(seed + 1)
    queries: List[Dict[str, Any]] = []
    for region, (cx, cy) in (("dense", dense_c), ("sparse", sparse_c)):
        for target in targets:
            box, count = ais.box_for_count(sx, sy, cx, cy, target)
            boxes = shifted(box, shifts, rng)
            exp = [expected(data, sx, sy, sort_order, b) for b in boxes]
            q = {"region": region, "target": target, "centre": (cx, cy), "boxes": boxes, "expected": exp,
                 "counts": [e["count"] for e in exp]}
            queries.append(q)
            log(f"  {region:6} ~{target:>9,}: base box {(box[1] - box[0]) / ais.DEG:.4f} x "
                f"{(box[3] - box[2]) / ais.DEG:.4f} deg at ({cx / ais.DEG:.3f}, {cy / ais.DEG:.3f}), counts "
                f"{[e['count'] for e in exp]}")
    out["queries"] = [{k: v for k, v in q.items() if k != "expected"} for q in queries]
    out["engines"] = {}
    out["load_average_start"] = common.load_average()
    variants = [v for v in VARIANTS if engines is None or v[0] in engines or v[1] in engines]
    stores: Dict[str, Any] = {}
    paths: Dict[str, str] = {}
    # 1. Loads, one engine after the other.
    for label, modname, compressed in variants:
        mod = load_adapter(modname)
        info: Dict[str, Any] = {"adapter": modname, "compressed": compressed}
        out["engines"][label] = info
        if not mod.AVAILABLE:
            info["error"] = f"not installed: {mod.REASON}"
            log(f"\n## {label}: SKIPPED ({info['error']})")
            rows.append(Row("sparse load", f"{data.n:,} points", label, None, note=info["error"]))
            continue
        info["version"] = mod.VERSION
        path = os.path.join(workdir, f"ais-{label}" + (".duckdb" if modname == "duckdb" else ""))
        common.remove(path)
        store = mod.Sparse(path, compressed, ais.ATTRS, (ais.X_MAX, ais.Y_MAX), **OPTIONS.get(label, {}))
        info["method"] = (store.__class__.__doc__ or "").strip()
        log(f"\n## {label} ({mod.VERSION}){': ' + store.note if store.note else ''}")
        try:
            batch_times: List[float] = []

            def batches():
                for i in range(months):
                    b = data.batch(i)
                    t0 = time.perf_counter()
                    yield b
                    batch_times.append(time.perf_counter() - t0)

            t0 = time.perf_counter()
            store.load(batches())
            common.fsync_tree(path)
            load_s = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001 - reported, never hidden
            info["error"] = f"load failed: {type(e).__name__}: {e}"
            log(f"  LOAD FAILED: {info['error']}")
            rows.append(Row("sparse load", f"{data.n:,} points", label, None, note=info["error"]))
            common.remove(path)
            continue
        stored = common.du(path)
        info.update(load_seconds=load_s, stored_bytes=stored, batch_seconds=batch_times)
        log(f"  load {load_s:.2f} s ({raw / load_s / 1e6:.0f} MB/s of int64 input), stored "
            f"{common.fmt_bytes(stored)} ({raw / stored:.2f}x smaller than the raw columns)")
        rows.append(Row("sparse load", f"{data.n:,} points", label, load_s, bytes=raw, cells=data.n,
                        limit="seq_write_fsync", limit_bytes=stored, extra={"stored_bytes": stored}))
        rows.append(Row("sparse stored", "bytes on disk", label, float(stored), bytes=stored))
        store.open()
        stores[label] = store
        paths[label] = path
    # 2. Queries: every result checked, then the engines timed in turns.
    log("\n## queries (engines timed in turns; warm: mean per query over the shifted boxes)")
    rows += time_queries(queries, stores, paths, reps, cold_reps, "sparse read warm", "sparse read cold", "", out)
    # 3. Updates: small appends, reads over them, consolidation, reads after it.
    if appends and stores:
        rows += updates(data, stores, paths, [q for q in queries if q["target"] == 100_000], appends, reps,
                        cold_reps, out)
    for label, store in stores.items():
        store.close()
        if not keep:
            common.remove(paths[label])
    out["load_average_end"] = common.load_average()
    out["rows"] = rows
    return out


def report(out: Dict[str, Any], limits: Dict[str, Any]) -> str:
    rows: List[Row] = out["rows"]
    lines = [f"Sparse AIS-like data: {out['params']['points']:,} points in {out['params']['months']} writes; "
             f"queries: median of {out['params']['reps']} rounds over {out['params']['shifts']} shifted boxes "
             f"(warm), cold = fadvise(DONTNEED) + open + query (median of {out['params']['cold_reps']}).", ""]
    load = [r for r in rows if r.group == "sparse load"]
    lines.append(common.table(load, limits))
    lines.append("")
    raw = out["params"]["points"] * len(ais.COLUMNS) * 8
    lines.append(common.bytes_table([r for r in rows if r.group == "sparse stored"], raw))
    lines.append("")
    lines.append(f"(in parentheses: how many times smaller than the raw int64 columns, {common.fmt_bytes(raw)})")
    lines.append("")
    lines.append(common.table([r for r in rows if r.group == "sparse read warm"], limits))
    lines.append("")
    lines.append(common.table([r for r in rows if r.group == "sparse read cold"], {}))
    lines.append("")
    for g, lim in (("sparse updates", {}), ("sparse read warm, updated", limits), ("sparse read cold, updated", {})):
        sel = [r for r in rows if r.group == g]
        if sel:
            lines.append(common.table(sel, lim))
            lines.append("")
    lines.append(tessera_vs_peers(rows))
    return "\n".join(lines)


def tessera_vs_peers(rows: List[Row]) -> str:
    """Tessera's best variant against the best non-Tessera peer, per workload."""
    by: Dict[Tuple[str, str], Dict[str, float]] = {}
    for r in rows:
        if r.seconds is not None and r.group != "sparse stored":
            by.setdefault((r.group, r.case), {})[r.engine] = r.seconds
    out = ["| workload | best Tessera | best peer | Tessera / peer |", "|---|---|---|---|"]
    for (g, c), v in by.items():
        mine = {e: s for e, s in v.items() if e.startswith("tessera")}
        peers = {e: s for e, s in v.items() if not e.startswith("tessera")}
        if not mine or not peers:
            continue
        me = min(mine, key=mine.get)
        pe = min(peers, key=peers.get)
        ratio = mine[me] / peers[pe]
        verdict = "faster" if ratio < 1 else "slower"
        out.append(f"| {g}: {c} | {me} {common.fmt_time(mine[me])} | {pe} {common.fmt_time(peers[pe])} | "
                   f"{ratio:.2f} ({verdict}) |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=10_000_000)
    p.add_argument("--months", type=int, default=10)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--cold-reps", type=int, default=3)
    p.add_argument("--shifts", type=int, default=5)
    p.add_argument("--appends", type=int, default=APPENDS, help="appends of 1,000 points after the load (0: none)")
    p.add_argument("--engines", default=None, help="comma-separated labels or adapters (default: all)")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true", help="keep the stores after the run")
    p.add_argument("--out", default=os.path.join(common.HERE, "out", "sparse_ais"))
    args = p.parse_args()
    t = time.perf_counter()
    workdir = args.workdir or common.default_workdir()
    os.makedirs(workdir, exist_ok=True)
    limits = common.machine_limits(workdir, quick=args.points < 5_000_000)
    log(f"machine: memcpy {common.fmt_rate(limits['memcpy'])}, sequential write+fsync "
        f"{common.fmt_rate(limits['seq_write_fsync'])}, read warm {common.fmt_rate(limits['seq_read_warm'])}, "
        f"cold {common.fmt_rate(limits['seq_read_cold'])}")
    out = run(points=args.points, months=args.months, reps=args.reps, cold_reps=args.cold_reps, shifts=args.shifts,
              workdir=workdir, engines=args.engines.split(",") if args.engines else None, keep=args.keep,
              appends=args.appends)
    out["limits"] = limits
    out["machine"] = common.machine_facts()
    out["versions"] = common.versions()
    out["total_seconds"] = time.perf_counter() - t
    md = report(out, limits)
    log("\n" + md)
    common.write_json(args.out + ".json", out)
    with open(args.out + ".md", "w") as f:
        f.write(md + "\n")
    log(f"\nwrote {args.out}.json and {args.out}.md ({out['total_seconds']:.0f} s in all)")


if __name__ == "__main__":
    main()
