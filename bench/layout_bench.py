"""Layouts on real storage (issue 18, MULTIMAP.md §6's recipe): beam queries along each dimension
and cube queries of several sizes on one 3-D dense array stored under each tile/cell order
(row-major, col-major, Z, Hilbert), measured with the statistics system (bytes read, read
requests, tiles touched) and time, cold and warm, in one run.

- The array: N^3 int32 (default 256^3 = 64 MiB), tiles T^3 (default 16^3 = 16 KiB), no
  compression (the order decides which bytes are neighbours on storage, which a compressor would
  blur), the same values in every layout (a checksum of every query's result is compared across
  layouts; the run stops on a difference).
- Beams: all cells along one dimension at fixed coordinates on the others (15 runs, the same random
  coordinates for every layout). Cubes: an axis-aligned cube whose edge is p% of N, at random
  corners (15 runs): p = 1, 2, 3 as in the recipe (at this scale they fall inside one or two tiles
  per dimension) and p = 10, 25 (many tiles, where the tile order decides how many requests the
  reader's coalescing of neighbouring ranges, `vfs.coalesce_gap`, leaves).
- Cold: the store's pages evicted (fsync + POSIX_FADV_DONTNEED per file, see bench/common.py),
  the engine's caches dropped, the array opened inside the timed region. Warm: pages cached, the
  array open, the engine's tile cache dropped before each run (so each run goes through storage
  reads that the page cache serves: the cost of requests without the device).

Row-major keeps the LAST dimension contiguous (MultiMap's Dim_0 is the first dimension it lays
along the track: row-major's d2 plays it); col-major the first. Results go to
``OUT/layouts.json`` and ``docs/layouts.md`` (the analysis in bench/layout_analysis.md, then the
run's tables).

    .venv/bin/python bench/layout_bench.py [--n 256] [--tile 16] [--reps 15]
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
from common import HERE, REPO, log  # noqa: E402

OUT = os.path.join(REPO, "target", "bench")
LAYOUTS: List[Tuple[str, str, str]] = [
    ("row-major", "row-major", "row-major"),
    ("col-major", "col-major", "col-major"),
    ("z", "z", "z"),
    ("hilbert", "hilbert", "hilbert"),
]
CUBE_PERCENTS = (1, 2, 3, 10, 25)
Ranges = List[Tuple[int, int]]


def queries(n: int, reps: int, seed: int = 18) -> List[Tuple[str, List[Ranges]]]:
    """Every query kind with its `reps` ranges (inclusive), the same for every layout."""
    rng = np.random.default_rng(seed)
    out: List[Tuple[str, List[Ranges]]] = []
    for d in range(3):
        runs = []
        for _ in range(reps):
            fixed = rng.integers(0, n, size=3)
            runs.append([(0, n - 1) if i == d else (int(fixed[i]), int(fixed[i])) for i in range(3)])
        out.append((f"d{d} beam", runs))
    for p in CUBE_PERCENTS:
        edge = max(1, round(n * p / 100))
        runs = []
        for _ in range(reps):
            lo = rng.integers(0, n - edge + 1, size=3)
            runs.append([(int(lo[i]), int(lo[i]) + edge - 1) for i in range(3)])
        out.append((f"{p}% cube ({edge}^3)", runs))
    return out


def make_array(path: str, data: np.ndarray, tile: int, tile_order: str, cell_order: str) -> None:
    import tessera as ts

    n = data.shape[0]
    dims = [ts.Dim(f"d{i}", (0, n - 1), tile, dtype="int32") for i in range(3)]
    schema = ts.ArraySchema(dims=dims, attrs=[ts.Attr("v", "int32")], tile_order=tile_order, cell_order=cell_order)
    ts.create(path, schema)
    with ts.open(path, "w") as A:
        A[:, :, :] = {"v": data}
    common.fsync_tree(path)


COUNTERS = ("vfs_read_num_requests", "vfs_read_total_bytes", "reader_num_attr_tiles_touched")


def run_query(A: Any, ranges: Ranges) -> Tuple[np.ndarray, Dict[str, int]]:
    import tessera as ts

    ts.stats.reset()
    out = A.read(ranges=ranges, attrs=["v"])
    c = ts.stats.json()["counters"]
    return out, {k: int(c.get(k, 0)) for k in COUNTERS}


def measure_layout(path: str, qs: List[Tuple[str, List[Ranges]]]) -> Dict[str, Dict[str, Any]]:
    """Cold and warm medians and per-run counters of every query on one stored layout."""
    res: Dict[str, Dict[str, Any]] = {}
    for name, runs in qs:
        digest = hashlib.sha256()
        cold, warm, counts = workload_pass(path, runs, digest)
        res[name] = {
            "cold_s": statistics.median(cold), "warm_s": statistics.median(warm),
            "cold_runs": cold, "warm_runs": warm,
            "cells": int(np.prod([hi - lo + 1 for lo, hi in runs[0]])),
            **{k: statistics.median([c[k] for c in counts]) for k in COUNTERS},
            "sha256": digest.hexdigest(),
        }
    return res


TESSERA = os.path.join(REPO, "target", "release", "tessera")


def open_cost(path: str, reps: int) -> Tuple[int, float]:
    """Bytes an open of the array reads (its schema and fragment metadata) and the median time of
    a cold open (pages evicted, caches dropped)."""
    import tessera as ts

    ts.stats.enable()
    ts.stats.reset()
    try:
        with ts.open(path):
            nbytes = int(ts.stats.json()["counters"].get("vfs_read_total_bytes", 0))
    finally:
        ts.stats.disable()
    times = []
    for _ in range(reps):
        common.drop_cache(path)
        ts.drop_caches()
        t = time.perf_counter()
        with ts.open(path):
            pass
        times.append(time.perf_counter() - t)
    return nbytes, statistics.median(times)


def calibrate(results: Dict[str, Dict[str, Dict[str, Any]]], opens: List[Tuple[int, float]]) -> Dict[str, float]:
    """The device the advisor prices on this machine. Least-squares fit of cold query time =
    fixed + latency x requests + bytes / bandwidth over every (layout, query) of the run; every
    cold query also opens the array, whose cost grows with its metadata (its tile count): the
    cold opens `opens` (metadata bytes, seconds) of arrays with two tile sizes give the cost per
    metadata byte, and the open of these layouts' metadata is taken out of the fixed term (the
    advisor prices it per layout, `--cold-open --metadata-bandwidth`)."""
    rows = [(r["vfs_read_num_requests"], r["vfs_read_total_bytes"], r["cold_s"])
            for lay in results.values() for r in lay.values()]
    a = np.array([[1.0, q, b] for q, b, _ in rows])
    y = np.array([t for _, _, t in rows])
    (fixed, latency, per_byte), *_ = np.linalg.lstsq(a, y, rcond=None)
    latency = max(float(latency), 1e-6)
    per_byte = max(float(per_byte), 1e-12)
    (b_many, t_many), (b_few, t_few) = opens
    per_meta_byte = max((t_many - t_few) / max(b_many - b_few, 1), 1e-12)
    return {"fixed_s": float(fixed) - b_many * per_meta_byte, "latency_s": latency, "read_bps": 1.0 / per_byte,
            "open_bytes": b_many, "metadata_bps": 1.0 / per_meta_byte}


def workloads(qs: List[Tuple[str, List[Ranges]]]) -> Dict[str, List[Ranges]]:
    """The advisor's three validation workloads, from the run's queries."""
    q = dict(qs)
    cube = next(k for k in q if k.startswith("10% cube"))
    return {
        "d0 beams": q["d0 beam"],
        "d1 beams + 1% cubes": q["d1 beam"] + q[next(k for k in q if k.startswith("1% cube"))],
        "mixed (beams on every dimension, 10% cubes)": q["d0 beam"] + q["d1 beam"] + q["d2 beam"] + q[cube],
    }


WORKLOAD_REPS = 5


def workload_pass(path: str, runs: List[Ranges],
                  digest: Optional[Any] = None) -> Tuple[List[float], List[float], List[Dict[str, int]]]:
    """One pass of queries `runs` on one stored layout: every query's cold time (pages evicted,
    caches dropped, the array opened in the timed region), warm time (pages cached, tile cache
    dropped) and counters; the cold results' bytes go into `digest` when given."""
    import tessera as ts

    cold, warm, counts = [], [], []
    ts.stats.enable()
    try:
        for ranges in runs:
            common.drop_cache(path)
            ts.drop_caches()
            t = time.perf_counter()
            with ts.open(path) as A:
                out, c = run_query(A, ranges)
            cold.append(time.perf_counter() - t)
            counts.append(c)
            if digest is not None:
                digest.update(np.ascontiguousarray(out).tobytes())
        with ts.open(path) as A:
            for ranges in runs:
                ts.drop_caches()
                run_query(A, ranges)  # the query's pages in the page cache
                ts.drop_caches()
                t = time.perf_counter()
                run_query(A, ranges)
                warm.append(time.perf_counter() - t)
    finally:
        ts.stats.disable()
    return cold, warm, counts


def validate_advisor(root: str, data: np.ndarray, tile: int, qs: List[Tuple[str, List[Ranges]]],
                     device: Dict[str, float]) -> List[Dict[str, Any]]:
    """For each workload: `tessera advise --apply` on the row-major array, then the workload's
    cold and warm time on every layout tried (the four orders with cubic tiles, and the advised
    one) beside the model's prediction for each. A workload's time is the sum over its queries of
    each query's median over WORKLOAD_REPS passes; the passes visit the layouts in turn (a
    rotating order), so that the machine's drift is spread over every layout alike."""
    import subprocess

    out = []
    base = os.path.join(root, "row-major")
    make_array(base, data, tile, "row-major", "row-major")
    tried_orders: Dict[str, Tuple[str, Tuple[Tuple[int, ...], str, str]]] = {}
    for name, t_order, c_order in LAYOUTS:
        path = os.path.join(root, "w-" + name)
        make_array(path, data, tile, t_order, c_order)
        tried_orders[name] = (path, ((tile,) * 3, t_order, c_order))
    for wname, runs in workloads(qs).items():
        log_path = os.path.join(root, "queries.jsonl")
        with open(log_path, "w") as f:
            for r in runs:
                f.write(json.dumps({"ranges": [list(x) for x in r]}) + "\n")
        advised = os.path.join(root, "advised")
        common.remove(advised)
        cmd = [TESSERA, "advise", base, "--log", log_path, "--json", "--apply", advised, "--cold-open",
               "--metadata-bandwidth", repr(device["metadata_bps"]),
               "--query-overhead", repr(max(device["fixed_s"], 0.0)), "--latency", repr(device["latency_s"]), "--bandwidth", repr(device["read_bps"])]
        advice = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        predicted = {(tuple(s["layout"]["extents"]), s["layout"]["tile_order"], s["layout"]["cell_order"]): s["seconds"]
                     for s in advice["ranked"] + [advice["current"]]}
        best = advice["ranked"][0]["layout"]
        label = "advised " + "x".join(map(str, best["extents"])) + f" {best['tile_order']}/{best['cell_order']}"
        common.fsync_tree(advised)
        tried = dict(tried_orders)
        tried[label] = (advised, (tuple(best["extents"]), best["tile_order"], best["cell_order"]))
        names = list(tried)
        cold: Dict[str, List[List[float]]] = {n: [] for n in names}
        warm: Dict[str, List[List[float]]] = {n: [] for n in names}
        counts: Dict[str, List[Dict[str, int]]] = {}
        for rep in range(WORKLOAD_REPS):
            for name in names[rep % len(names):] + names[:rep % len(names)]:
                c, w, k = workload_pass(tried[name][0], runs)
                cold[name].append(c)
                warm[name].append(w)
                counts.setdefault(name, k)

        def total(passes: List[List[float]]) -> float:
            return sum(statistics.median(q) for q in zip(*passes))

        rows = []
        for name in names:
            rows.append({"layout": name, "measured_s": total(cold[name]), "warm_s": total(warm[name]),
                         "predicted_s": predicted.get(tried[name][1]),
                         "requests": statistics.mean(c["vfs_read_num_requests"] for c in counts[name]),
                         "bytes": statistics.mean(c["vfs_read_total_bytes"] for c in counts[name])})
        common.remove(advised)
        fastest = min(rows, key=lambda r: r["measured_s"])["layout"]
        out.append({"workload": wname, "queries": len(runs), "rows": rows, "advised": label,
                    "advised_fastest": fastest == label, "gain_predicted": advice["current"]["seconds"] / advice["ranked"][0]["seconds"]})
    for path, _ in tried_orders.values():
        common.remove(path)
    common.remove(base)
    return out


def markdown(results: Dict[str, Dict[str, Dict[str, Any]]], meta: Dict[str, Any]) -> str:
    names = [q for q in next(iter(results.values()))]
    layouts = list(results)
    lines = [f"Array {meta['n']}^3 int32 ({meta['n'] ** 3 * 4 / 2**20:.0f} MiB), tiles {meta['tile']}^3 "
             f"({meta['tile'] ** 3 * 4 // 1024} KiB), no filters, {meta['reps']} runs per query (medians); "
             f"{meta['date']}, {meta['cpus']} cores, load average {meta['load_average'][0]:.1f} at the start, "
             f"{meta['load_average'][1]:.1f} at the end. Every layout returned the same bytes for every query.", ""]
    for title, key, fmt in (
        ("Read requests per query (after coalescing neighbouring ranges)", "vfs_read_num_requests",
         lambda v: f"{v:g}"),
        ("Bytes read per query", "vfs_read_total_bytes", common.fmt_bytes),
        ("Tiles touched per query", "reader_num_attr_tiles_touched", lambda v: f"{v:g}"),
        ("Cold time per query (array opened in the timed region)", "cold_s", common.fmt_time),
        ("Warm time per query (page cache warm, engine tile cache dropped)", "warm_s", common.fmt_time),
    ):
        lines += [f"### {title}", "", "| query | cells | " + " | ".join(layouts) + " |",
                  "|---|---|" + "---|" * len(layouts)]
        for q in names:
            row = [fmt(results[lay][q][key]) for lay in layouts]
            lines.append(f"| {q} | {results[layouts[0]][q]['cells']} | " + " | ".join(row) + " |")
        lines.append("")
    lines += ["### Cold time relative to row-major (< 1: faster)", "",
              "| query | " + " | ".join(layouts) + " |", "|---|" + "---|" * len(layouts)]
    for q in names:
        base = results[layouts[0]][q]["cold_s"]
        lines.append(f"| {q} | " + " | ".join(f"{results[lay][q]['cold_s'] / base:.2f}" for lay in layouts) + " |")
    return "\n".join(lines) + "\n"


def advisor_markdown(meta: Dict[str, Any], validation: List[Dict[str, Any]]) -> str:
    dev = meta["device"]
    lines = ["### The advisor on three workloads", "",
             f"Device fitted to this run's cold queries (least squares of time = fixed + latency x requests + "
             f"bytes / bandwidth): latency {dev['latency_s'] * 1e6:.0f} µs per request, {dev['read_bps'] / 1e6:.0f} MB/s, "
             f"fixed {dev['fixed_s'] * 1e3:.2f} ms besides the open's read and decoding of the array's metadata "
             f"({common.fmt_bytes(dev.get('open_bytes', 0))} for these 16^3 tiles) at "
             f"{dev.get('metadata_bps', 0) / 1e6:.0f} MB/s (cold opens of 16^3 and 32^3 tiles); `tessera advise "
             "--cold-open --metadata-bandwidth --query-overhead --latency --bandwidth` priced with it (the metadata "
             "per layout). "
             f"Times: the sum over the workload's queries of each query's median over {WORKLOAD_REPS} passes (the passes "
             "visit the layouts in a rotating order); requests and bytes: the mean per query.", ""]
    for v in validation:
        lines += [f"**{v['workload']}** ({v['queries']} queries): advised `{v['advised']}`, predicted gain over the "
                  f"current row-major 16^3 layout {v['gain_predicted']:.2f}x; fastest measured: "
                  f"{'the advised layout' if v['advised_fastest'] else 'NOT the advised layout'}.", "",
                  "| layout | measured cold | measured warm | predicted | requests/query | bytes/query |", "|---|---|---|---|---|---|"]
        for r in v["rows"]:
            pred = common.fmt_time(r["predicted_s"]) if r["predicted_s"] is not None else "-"
            lines.append(f"| {r['layout']} | {common.fmt_time(r['measured_s'])} | {common.fmt_time(r['warm_s'])} | {pred} | "
                         f"{r['requests']:g} | {common.fmt_bytes(r['bytes'])} |")
        base = next(r for r in v["rows"] if r["layout"] == "row-major")
        adv = next(r for r in v["rows"] if r["layout"] == v["advised"])
        if base["predicted_s"] and adv["predicted_s"]:
            lines += ["", f"Row-major over advised: measured {base['measured_s'] / adv['measured_s']:.2f}x, "
                          f"predicted {base['predicted_s'] / adv['predicted_s']:.2f}x."]
        lines.append("")
    return "\n".join(lines)


def write_docs(md: str, path: str) -> None:
    with open(os.path.join(HERE, "layout_analysis.md")) as f:
        analysis = f.read().strip()
    with open(path, "w") as f:
        f.write(analysis + "\n\n## Latest run\n\n" + md)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=256, help="edge of the cubic array")
    ap.add_argument("--tile", type=int, default=16, help="edge of the cubic tiles")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/layouts.md")
    ap.add_argument("--no-advisor", action="store_true", help="skip the advisor's validation")
    ap.add_argument("--docs-only", action="store_true",
                    help="no benchmark: rewrite docs/layouts.md from OUT/layouts.json and bench/layout_analysis.md")
    args = ap.parse_args(argv)
    page = os.path.join(REPO, "docs", "layouts.md")
    if args.docs_only:
        with open(os.path.join(args.out, "layouts.json")) as f:
            saved = json.load(f)
        md = markdown(saved["results"], saved["meta"])
        if saved.get("validation"):
            md += "\n" + advisor_markdown(saved["meta"], saved["validation"])
        write_docs(md, page)
        return 0
    if args.n % args.tile or args.n < 4 * args.tile:
        raise SystemExit("--n must be a multiple of --tile and at least 4 tiles")
    n = args.n
    data = (np.arange(n ** 3, dtype=np.int64) * 2654435761 % 1000003).astype(np.int32).reshape(n, n, n)
    qs = queries(n, args.reps)
    started, load_start = time.time(), os.getloadavg()[0]
    results: Dict[str, Dict[str, Dict[str, Any]]] = {}
    os.makedirs(common.default_workdir(), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tessera-layout-bench-", dir=common.default_workdir()) as root:
        for name, tile_order, cell_order in LAYOUTS:
            path = os.path.join(root, name)
            t = time.perf_counter()
            make_array(path, data, args.tile, tile_order, cell_order)
            log(f"{name}: written in {time.perf_counter() - t:.2f} s")
            if name == "row-major":
                opens = [open_cost(path, args.reps)]
            results[name] = measure_layout(path, qs)
            common.remove(path)
        # An array of 8x fewer tiles: the open's cost per metadata byte.
        few = os.path.join(root, "few-tiles")
        make_array(few, data, 2 * args.tile, "row-major", "row-major")
        opens.append(open_cost(few, args.reps))
        common.remove(few)
        device = calibrate(results, opens)
        validation = [] if args.no_advisor else validate_advisor(root, data, args.tile, qs, device)
    for q, _ in qs:
        digests = {lay: results[lay][q]["sha256"] for lay in results}
        if len(set(digests.values())) != 1:
            raise SystemExit(f"layouts disagree on {q}: {digests}")
    meta = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "n": n, "tile": args.tile,
            "reps": args.reps, "python": platform.python_version(), "cpus": os.cpu_count(),
            "load_average": [load_start, os.getloadavg()[0]], "wall_s": round(time.time() - started, 1),
            "device": device}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "layouts.json"), "w") as f:
        json.dump({"meta": meta, "results": results, "validation": validation}, f, indent=1)
    md = markdown(results, meta)
    if validation:
        md += "\n" + advisor_markdown(meta, validation)
    print(md)
    if not args.no_docs:
        write_docs(md, page)
    print(f"wall {meta['wall_s']} s; wrote {os.path.join(args.out, 'layouts.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
