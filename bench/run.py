"""The benchmark suite (issue 6): the TileDB paper's experiments (section 6), Tessera side by side
with TileDB-Py, HDF5 (h5py), Zarr v3, TensorStore (dense) and TileDB-Py, DuckDB, Parquet (sparse),
on the same generated data, in one run, beside the machine's own limits measured in the same run.

    python bench/run.py            # full run: ~1 GiB dense array, 10M sparse points (~45 min here)
    python bench/run.py --quick    # the same workloads at ~100 MB / 1M points (a few minutes)
    python bench/run.py --quick --only "dense parallel writes" --no-docs   # some workloads only

``--only GROUP[,GROUP]`` runs the workloads whose group (the first column of the tables without
the case, e.g. "dense parallel writes zstd", "dense read warm none", "sparse load") is one of
the names given or starts with one followed by a space: "dense parallel" selects the parallel
reads and writes of every compression, "dense" every dense workload. Dense loads run whenever a
selected workload reads their stores; the sparse benchmark runs whole when a name starts with
"sparse". The machine limits are measured in every run.

Writes bench/out/results.json (every run of every figure, versions, machine facts and limits),
bench/out/results.md (the tables), docs/bench/*.png (plots in the manner of the paper's figures)
and docs/benchmarks.md (the latest run with its caveats). ``--no-docs`` leaves docs/ alone.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import time
from typing import Any, Dict, List, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402
import dask_bench  # noqa: E402
import dense  # noqa: E402
import open_cost  # noqa: E402
import sparse_ais  # noqa: E402
from adapters import all_adapters  # noqa: E402
from common import Row, log  # noqa: E402

QUICK = {
    "dense": dict(rows=5_000, cols=5_000, tile=(2_500, 1_000), reps=3, load_reps=1, cold_reps=1, squares=5,
                  point_sizes=(1_000, 10_000), update_sizes=(1_000, 10_000), fragment_counts=(10, 100),
                  parallel_squares=8, point_budget=0.5, parallel_write_reps=3),
    "sparse": dict(points=1_000_000, reps=3, cold_reps=1, shifts=2, targets=(10_000, 100_000)),
    "dask": dict(gib=0.5, points=1_000_000, reps=2),
    "open": dict(counts=(100, 1000), reps=9),
}
FULL = {
    "dense": dict(rows=20_000, cols=13_000, tile=(2_500, 1_000), reps=5, load_reps=3, cold_reps=5, squares=20,
                  point_sizes=(1_000, 10_000, 100_000), update_sizes=(1_000, 10_000, 100_000),
                  fragment_counts=(10, 100, 1000), parallel_squares=32, point_budget=5.0, parallel_write_reps=3),
    "sparse": dict(points=10_000_000, reps=5, cold_reps=5, shifts=5, targets=(10_000, 100_000, 1_000_000)),
    "dask": dict(gib=4.0, points=10_000_000, reps=3),
    "open": dict(counts=(100, 1000, 10000), reps=15),
}


# -- report ---------------------------------------------------------------------------------
def limits_table(limits: Dict[str, Any]) -> str:
    lines = ["| machine limit (measured in this run) | |", "|---|---|",
             f"| memcpy (one thread) | {common.fmt_rate(limits.get('memcpy'))} |",
             f"| sequential write + fsync | {common.fmt_rate(limits.get('seq_write_fsync'))} |",
             f"| sequential read, page cache (warm) | {common.fmt_rate(limits.get('seq_read_warm'))} |",
             f"| sequential read after fadvise(DONTNEED) (cold) | {common.fmt_rate(limits.get('seq_read_cold'))} |"]
    for name, v in limits.get("codecs", {}).items():
        lines.append(f"| {name}, one core, on the dense data: compress / decompress (ratio) | "
                     f"{common.fmt_rate(v['compress'])} / {common.fmt_rate(v['decompress'])} ({v['ratio']:.1f}x) |")
    return "\n".join(lines)


def section(rows: List[Row], limits: Dict[str, Any], groups: List[str]) -> str:
    sel = [r for r in rows if r.group in groups]
    return common.table(sel, limits) if sel else "(not run)"


def tessera_summary(rows: List[Row]) -> str:
    """Per workload: Tessera's best variant against the best other engine (same compression)."""
    by: Dict[Any, Dict[str, float]] = {}
    for r in rows:
        if r.seconds is None or "stored" in r.group:
            continue
        by.setdefault((r.group, r.case), {})[r.engine] = r.seconds
    lines = ["| workload | Tessera | best peer | Tessera / best peer |", "|---|---|---|---|"]
    for (g, c), v in by.items():
        mine = {e: s for e, s in v.items() if e.startswith("tessera")}
        peers = {e: s for e, s in v.items() if not e.startswith("tessera")}
        if not mine or not peers:
            continue
        me = min(mine, key=mine.get)
        pe = min(peers, key=peers.get)
        ratio = mine[me] / peers[pe]
        flag = "**slower**" if ratio > 1.05 else ("faster" if ratio < 0.95 else "par")
        lines.append(f"| {g}: {c} | {me} {common.fmt_time(mine[me])} | {pe} {common.fmt_time(peers[pe])} | "
                     f"{ratio:.2f} ({flag}) |")
    return "\n".join(lines)


def report_md(res: Dict[str, Any]) -> str:
    rows: List[Row] = res["rows"]
    limits = res["limits"]
    out: List[str] = []
    out.append(f"Run: {res['started']} ({'quick' if res['quick'] else 'full'}), {res['total_seconds'] / 60:.1f} min; "
               f"machine: {res['machine']['cpu']}, {res['machine']['cores']} cores, "
               f"{res['machine']['memory_bytes'] / 2**30:.0f} GiB; load average at start / end: "
               f"{res.get('load_average_start')} / {res.get('load_average_end')}.")
    out.append("")
    out.append("Versions: " + ", ".join(f"{k} {v}" for k, v in res["versions"].items()))
    out.append("")
    out.append(limits_table(limits))
    out.append("")
    out.append("Reading the tables: each figure is a median; `(2.10x)` is its ratio to the best engine on that line "
               "(the best is bold); `[45% of memcpy]` is the share of the machine's limit it reaches (the limit's "
               "time for the same bytes divided by the engine's time); numbers in brackets like `[3]` are "
               "footnotes.")
    if "dense" in res:
        d = res["dense"]
        p = d["params"]
        raw = p["rows"] * p["cols"] * 4
        out.append("")
        out.append(f"### Dense: {p['rows']:,} x {p['cols']:,} int32 ({common.fmt_bytes(raw)}), tiles "
                   f"{p['tile'][0]:,} x {p['tile'][1]:,} ({common.fmt_bytes(p['tile'][0] * p['tile'][1] * 4)})")
        for comp in dense.COMPRESSIONS:
            groups = [f"dense load {comp}", f"dense read warm {comp}", f"dense read cold {comp}",
                      f"dense random reads {comp}", f"dense parallel reads {comp}", f"dense random updates {comp}",
                      f"dense parallel writes {comp}"]
            if not any(r.group in groups for r in rows):
                continue
            out.append("")
            out.append(f"#### {comp}")
            out.append("")
            out.append(section(rows, limits, groups))
        stored = [r for r in rows if r.group.startswith("dense stored")]
        if stored:
            out.append("")
            out.append(common.bytes_table(stored, raw))
            out.append("")
            out.append("(in parentheses: compression ratio against the raw int32 array)")
        if any(r.group == "dense fragments" for r in rows):
            out.append("")
            out.append("#### Fragments (random 1Kx1K reads, mean per read)")
            out.append("")
            out.append(section(rows, limits, ["dense fragments"]))
    if "sparse" in res:
        s = res["sparse"]
        p = s["params"]
        out.append("")
        out.append(f"### Sparse: {p['points']:,} AIS-like points in {p['months']} writes")
        out.append("")
        out.append("Query boxes (base box; the shifted copies' counts in brackets):")
        out.append("")
        for q in s["queries"]:
            b = q["boxes"][0]
            out.append(f"- {q['region']} ~{q['target']:,}: {(b[1] - b[0]) / 1e6:.4f} x {(b[3] - b[2]) / 1e6:.4f} degrees, "
                       f"{q['counts']} points")
        out.append("")
        out.append(section(rows, limits, ["sparse load"]))
        raw = p["points"] * 9 * 8
        out.append("")
        out.append(common.bytes_table([r for r in rows if r.group == "sparse stored"], raw))
        out.append("")
        out.append(section(rows, limits, ["sparse read warm", "sparse read cold"]))
        if any(r.group == "sparse updates" for r in rows):
            out.append("")
            out.append(f"#### Updates: {p.get('appends')} appends of {p.get('append_size'):,} points, consolidation")
            out.append("")
            out.append(section(rows, limits, ["sparse updates", "sparse read warm, updated", "sparse read cold, updated"]))
    out.append("")
    out.append("### Tessera against the best peer")
    out.append("")
    out.append(tessera_summary(rows))
    return "\n".join(out)


# -- plots ----------------------------------------------------------------------------------
def plots(res: Dict[str, Any], outdir: str) -> List[str]:
    """PNG figures in the manner of the paper's (log scales where the spread needs them)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        log(f"plots skipped: {e}")
        return []
    os.makedirs(outdir, exist_ok=True)
    rows: List[Row] = res["rows"]
    written: List[str] = []
    engines = []
    for r in rows:
        base = r.engine.split("+")[0].split(" ")[0]
        if base not in engines:
            engines.append(base)
    cmap = plt.get_cmap("tab10")
    color = {e: cmap(i % 10) for i, e in enumerate(engines)}

    def get(group: str, case: str, engine: str) -> Optional[float]:
        for r in rows:
            if r.group == group and r.case == case and r.engine == engine:
                return r.seconds
        return None

    def save(fig: Any, name: str) -> None:
        path = os.path.join(outdir, name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)

    def bars(ax: Any, groups: List[str], cases: List[str], names: List[str], title: str, ylabel: str = "seconds") -> None:
        w = 0.8 / max(1, len(names))
        for k, eng in enumerate(names):
            vals = [get(g, c, eng) for g, c in zip(groups, cases)]
            xs = np.arange(len(cases)) + k * w
            ax.bar(xs, [v if v else 0 for v in vals], width=w, label=eng, color=color[eng.split("+")[0].split(" ")[0]],
                   alpha=0.6 + 0.4 * (k % 2))
            for x, v in zip(xs, vals):
                if v is None:
                    ax.text(x, ax.get_ylim()[0] if ax.get_yscale() == "log" else 0, "n/a", rotation=90, fontsize=6,
                            ha="center", va="bottom")
        ax.set_xticks(np.arange(len(cases)) + 0.4 - w / 2)
        ax.set_xticklabels([c for c in cases], fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.3)

    if "dense" in res:
        dengines = [e for e in ("tessera", "tessera-mmap", "tiledb", "h5py", "zarr", "tensorstore")
                    if any(r.engine == e and r.group.startswith("dense") and r.seconds for r in rows)]
        # Figure 9(a): load.
        fig, ax = plt.subplots(figsize=(7, 4))
        comps = ["none", "gzip", "zstd"]
        bars(ax, [f"dense load {c}" for c in comps], ["whole array"] * 3, dengines, "Dense load (fig. 9a)")
        ax.set_xticklabels(comps)
        ax.legend(fontsize=7)
        save(fig, "dense_load.png")
        # Figure 11(a): subarray reads, warm and cold, per compression.
        cases = [c for c in dict.fromkeys(r.case for r in rows if r.group == "dense read warm none")]
        fig, axes = plt.subplots(2, 3, figsize=(14, 7))
        for j, comp in enumerate(comps):
            for i, kind in enumerate(("warm", "cold")):
                g = f"dense read {kind} {comp}"
                bars(axes[i][j], [g] * len(cases), cases, dengines, f"Subarray reads, {comp}, {kind} (fig. 11a)")
        axes[0][0].legend(fontsize=7)
        save(fig, "dense_subarray.png")
        # Figures 10(a) and 11(c): updates and random element reads vs number of elements.
        for group, name, title in (("dense random updates", "dense_updates.png", "Random element updates (fig. 10a)"),
                                   ("dense random reads", "dense_random_reads.png", "Random element reads (fig. 11c)")):
            fig, axes = plt.subplots(1, 2, figsize=(11, 4))
            for ax, comp in zip(axes, ("none", "zstd")):
                g = f"{group} {comp}"
                cs = [c for c in dict.fromkeys(r.case for r in rows if r.group == g)]
                xs = [int(c.split("K")[0]) * 1000 for c in cs]
                for eng in dengines:
                    ys = [get(g, c, eng) for c in cs]
                    pts = [(x, y) for x, y in zip(xs, ys) if y]
                    if pts:
                        ax.plot(*zip(*pts), marker="o", label=eng, color=color[eng])
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlabel("elements")
                ax.set_ylabel("seconds")
                ax.set_title(f"{title}, {comp}", fontsize=10)
                ax.grid(which="both", alpha=0.3)
            axes[0].legend(fontsize=7)
            save(fig, name)
        # Figure 11(d): parallel reads; then parallel writes of the whole array.
        fig, axes = plt.subplots(2, 2, figsize=(11, 8))
        for i, (kind, title) in enumerate((("reads", "Parallel 1Kx1K reads, {} (fig. 11d)"),
                                           ("writes", "Parallel writes of the whole array, {}"))):
            for ax, comp in zip(axes[i], ("none", "zstd")):
                g = f"dense parallel {kind} {comp}"
                cs = [c for c in dict.fromkeys(r.case for r in rows if r.group == g)]
                for eng in dengines:
                    ys = [get(g, c, eng) for c in cs]
                    pts = [(int(c.split(", ")[1].split()[0]), y) for c, y in zip(cs, ys) if y]
                    if pts:
                        ax.plot(*zip(*pts), marker="o", label=eng, color=color[eng])
                ax.set_xticks([1, 2])
                ax.set_yscale("log")
                ax.set_xlabel("processes (one engine thread each)")
                ax.set_ylabel("seconds (wall)")
                ax.set_title(title.format(comp), fontsize=10)
                ax.grid(which="both", alpha=0.3)
            axes[i][0].legend(fontsize=7)
        save(fig, "dense_parallel.png")
        # Figure 12(a): fragments.
        fr = [r for r in rows if r.group == "dense fragments" and r.engine == "tessera" and r.seconds and r.case != "consolidate"]
        if fr:
            fig, ax = plt.subplots(figsize=(5, 3.5))
            ax.bar([r.case for r in fr], [r.seconds * 1e3 for r in fr], color=color["tessera"])
            ax.set_ylabel("ms per random 1Kx1K read")
            ax.set_xlabel("fragments (1 dense + N sparse of 1,000 cells)")
            ax.set_title("Tessera: reads vs fragments (fig. 12a)", fontsize=10)
            save(fig, "dense_fragments.png")
    if "sparse" in res:
        labels = [r.engine for r in rows if r.group == "sparse load" and r.seconds]
        if labels:
            fig, axes = plt.subplots(1, 2, figsize=(11, 4))
            axes[0].bar(labels, [get("sparse load", r.case, r.engine) for r in rows if r.group == "sparse load" and r.seconds],
                        color=[color[e.split("+")[0]] for e in labels])
            axes[0].set_ylabel("seconds")
            axes[0].set_title("Sparse load, 10 writes (fig. 13a)", fontsize=10)
            axes[0].tick_params(axis="x", rotation=45, labelsize=8)
            st = [r for r in rows if r.group == "sparse stored"]
            axes[1].bar([r.engine for r in st], [r.bytes / 2**20 for r in st], color=[color[r.engine.split("+")[0]] for r in st])
            axes[1].set_ylabel("MiB stored")
            axes[1].set_title("Sparse stored bytes", fontsize=10)
            axes[1].tick_params(axis="x", rotation=45, labelsize=8)
            save(fig, "sparse_load.png")
            fig, axes = plt.subplots(2, 2, figsize=(11, 7))
            for i, kind in enumerate(("warm", "cold")):
                for j, region in enumerate(("dense", "sparse")):
                    ax = axes[i][j]
                    g = f"sparse read {kind}"
                    cs = [c for c in dict.fromkeys(r.case for r in rows if r.group == g and r.case.startswith(region))]
                    for k, eng in enumerate(labels):
                        pts = []
                        for c in cs:
                            v = get(g, c, eng)
                            if v:
                                pts.append((int(c.split("~")[1].rstrip("K")) * 1000, v))
                        if pts:
                            ax.plot(*zip(*pts), marker="o", label=eng, color=color[eng.split("+")[0]],
                                    linestyle="--" if "+" in eng else "-")
                    ax.set_xscale("log")
                    ax.set_yscale("log")
                    ax.set_xlabel("result size (points)")
                    ax.set_ylabel("seconds")
                    ax.set_title(f"Sparse subarray, {region} region, {kind} (fig. 14{'ab'[j]})", fontsize=10)
                    ax.grid(which="both", alpha=0.3)
            axes[0][0].legend(fontsize=7)
            save(fig, "sparse_subarray.png")
    return written


# -- docs -----------------------------------------------------------------------------------
CAVEATS = """\
- **Shared, noisy machine.** 2 cores and 24 GiB, shared with other work (the load average at the
  start and end of the run is printed above; it was rarely below 2). To keep the comparison fair,
  engines are timed *in turns* on every workload (A, B, C, then B, C, A, ...), so background load
  hits them alike; every figure is a median (of 5 warm runs for reads, 3 for cold runs and updates,
  1 for loads longer than a second). Ratios between engines in the same run are more trustworthy
  than absolute times. Compare with the previous run before believing a change below ~1.3x.
- **Cold runs are approximate.** The page cache cannot be dropped here (no root on the host), so
  a cold run first calls `fsync` and `posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)` on every file of
  the store being read, then reopens the store and reads inside the timed region (so cold figures
  include the open). Directory entries and inodes stay cached; the disk is a virtual disk whose
  host may cache too (see the measured cold sequential read bandwidth above).
- **Threads.** Every engine uses its default parallelism (both cores) except in the parallel read
  and write workloads, where each process is limited to one engine thread (Tessera `sm.compute_concurrency`
  and `sm.io_concurrency`, TileDB `sm.compute_concurrency_level` / `sm.io_concurrency_level`,
  TensorStore `data_copy_concurrency` / `file_io_concurrency`, Zarr `threading.max_workers`; HDF5
  is single-threaded). The codec limits are single-core; an engine may beat them with two threads.
- **Parallel writes.** The whole dense array is written into a created, empty store (creation
  untimed) by 1 process, then by 2 processes each writing half, a band of whole tile rows, with
  one engine thread each; timed from a barrier until the last process has written its band and
  fsynced every file of the store. Tessera and TileDB write one fragment per process, Zarr and
  TensorStore one file per chunk; HDF5 (h5py without MPI) runs one process only: two processes
  cannot write one HDF5 file. The writers map the data from /dev/shm and write one scratch tile
  before the first run (untimed); the whole array is read back and checked after every run.
- **Loads include durability.** Each load is create + write + `fsync` of every file of the store
  (the paper synced after every load and update); the random updates include the fsync too.
- **Engines' own caches.** HDF5 reads use its default 1 MiB chunk cache (smaller than a 10 MB
  chunk: no data cached between reads); HDF5 element reads and updates open the file with a
  1.5 GiB chunk cache (the paper gave HDF5 an unlimited cache), and that open is timed. TensorStore
  has no cache pool (the default); Tessera runs with its default tile cache (`sm.tile_cache_size`
  128 MiB, holding tiles of at most 8 MiB: the 10 MB dense tiles are never cached, the sparse data
  tiles are); DuckDB keeps its buffer pool between warm queries (cold runs reconnect).
- **What each engine cannot do** is a footnote in the tables: TileDB 2.x cannot write single cells
  into a dense array (no sparse or multi-range dense writes), so its "updates" read, modify and
  rewrite every touched tile; TileDB-Py has no point-list read for dense arrays (a multi-range
  read returns the cross product), so its random element reads are one query per element, timed
  on as many elements as fit in a time budget and scaled linearly (footnoted); Tessera reads the
  list in one `A.read_points` call; DuckDB and Parquet are not run on dense arrays.
- **Sparse peers' layouts differ.** DuckDB holds one table sorted by (x, y) (built by an
  `ORDER BY` over the 10 staged batches: the load includes that sort); Parquet holds one file per
  batch, each sorted by (x, y), row groups of 10,000 rows (the fastest of 10K/30K/100K/1M rows in
  a one-off test at 10M points); Tessera and TileDB hold 10 fragments, each with space tiles of
  10M x 10M and data tiles of 10,000 cells. DuckDB's lightweight compression cannot be turned off.
- **Sparse query boxes.** With 10M points, a box centred in the emptiest ocean must grow to ~80
  degrees to hold 1M points, so the "sparse region 1M" box reaches into denser areas (as in the
  paper, where the sparse boxes were also grown to their target counts). The shifted copies of a
  box (up to 10% of its size) hold somewhat different counts (listed above).
- **Synthetic data.** The AIS-like points are generated (bench/ais.py): harbours, coastlines and
  open ocean; real AIS data would compress and cluster differently. The dense data (the paper's
  i % ncols + j) is far more compressible here (gzip 144x, zstd 680x) than the paper's 2.9x, so
  the compressed dense workloads mostly measure per-tile overheads, not codec speed, and the
  "% of codec limit" figures can exceed 100% (two cores against a one-core limit).
- **The engine under test moves.** Tessera is installed from the working tree (`make build`);
  other work rebuilds it, and `results.json` records when the loaded `_core` was built
  (`tessera_core_built`). Runs made before and after a rebuild are not comparable. The
  parallel-read workers are new processes and load whatever build is installed at that moment.
- **Scaled figures.** Random element reads one query per element (Tessera, TileDB) are timed on
  as many elements as fit in a few seconds and scaled linearly to the full count (footnoted with
  the count actually timed); at these rates (milliseconds per element) the scaling is linear.
"""


def s3_section(path: str) -> str:
    """The "Object storage (S3)" section of the page at ``path`` (from its heading to the end),
    written by bench/s3_bench.py: kept when this suite rewrites the page. Empty when absent."""
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        old = f.read()
    at = old.find(S3_HEADING)
    return "" if at < 0 else "\n" + old[at:]


S3_HEADING = "\n## Object storage (S3)\n"


def write_docs(res: Dict[str, Any], md: str, pngs: List[str], path: str) -> None:
    rel = [os.path.relpath(p, os.path.dirname(path)) for p in pngs]
    head = f"""# Benchmarks

The instrument behind issue 6: Tessera against the engines people use today, on the workloads of
the TileDB paper's section 6, on the same generated data, in one run, beside the machine's own
limits measured in the same run.

```sh
make bench          # cargo benches, then the full suite (~1 GiB dense, 10M sparse points)
make bench-quick    # the same workloads at ~100 MB / 1M points
.venv/bin/python bench/sparse_ais.py    # the sparse AIS benchmark alone (10M points)
.venv/bin/python bench/run.py --quick --engines tessera,zarr   # a subset
```

Everything lives in `bench/`: `ais.py` (the AIS-like data generator), `sparse_ais.py` (the sparse
benchmark), `dense.py` (the dense workloads), `dask_bench.py` (Dask against Zarr and Parquet on a
cluster of 2 worker processes), `open_cost.py` (open time against the fragment count, against
TileDB-Py), `chunk_tradeoff.py` (what the chunk size of compressed tiles costs and gains, on two
data sets), `s3_bench.py` (object storage: Tessera, Zarr and TileDB-Py on a local S3 server; the
last section of this page), `common.py` (timing, fsync/fadvise, machine limits, tables), `adapters/` (one small module per engine, each documenting the method it uses),
`run.py` (the suite, this page and the plots), `profile_tessera.py` (the engine's statistics of a
slow sparse read), `sparse_partitions_cpu.py` (the CPU time of the Dask bench's sparse read, in
one process). Results: `bench/out/results.json` (every run of every figure, versions, machine
facts, limits), `bench/out/results.md`; plots in `docs/bench/`.

## Latest run

This page shows the {'quick' if res['quick'] else 'full'} run of {res['started']} (tables and plots are
regenerated by every run; the analysis below is `bench/analysis.md`, written by hand for the run it
names: check it against the tables when they are newer).

"""
    body = md
    figs = "\n".join(f"![{os.path.basename(p)}]({p})" for p in rel)
    analysis = ""
    apath = os.path.join(common.HERE, "analysis.md")
    if os.path.exists(apath):
        with open(apath) as f:
            analysis = f.read().strip() + "\n\n"
    text = (head + analysis + "## Tables\n\n" + body + "\n\n## Plots\n\n" + figs + "\n\n## Caveats\n\n" + CAVEATS)
    text = text.rstrip("\n") + "\n" + s3_section(path)
    with open(path, "w") as f:
        f.write(text)


# -- main -----------------------------------------------------------------------------------
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="~100 MB dense, 1M sparse points, fewer repetitions")
    p.add_argument("--engines", default=None, help="comma-separated adapters (default: all)")
    p.add_argument("--skip-dense", action="store_true")
    p.add_argument("--skip-sparse", action="store_true")
    p.add_argument("--skip-dask", action="store_true")
    p.add_argument("--skip-open", action="store_true")
    p.add_argument("--only", default=None, metavar="GROUP[,GROUP]",
                   help='only these workload groups, e.g. "dense parallel writes,dense load none" '
                        '(matching: see the docstring of bench/run.py)')
    p.add_argument("--workdir", default=None, help="where stores are written (default bench/out/data)")
    p.add_argument("--min-free-gb", type=float, default=None,
                   help="refuse to start with less free space than this where stores are written "
                        "(default 30 for a full run, 4 with --quick; 0: no check)")
    p.add_argument("--out", default=os.path.join(common.HERE, "out"))
    p.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md and docs/bench/")
    p.add_argument("--report-only", metavar="RESULTS_JSON", default=None,
                   help="no benchmarks: rebuild results.md, the plots and docs/benchmarks.md from a results.json")
    args = p.parse_args()
    if args.report_only:
        import json

        with open(args.report_only) as f:
            res = json.load(f)
        res["rows"] = [Row(**r) for r in res["rows"]]
        md = report_md(res)
        with open(os.path.join(os.path.dirname(os.path.abspath(args.report_only)), "results.md"), "w") as f:
            f.write(md + "\n")
        if not args.no_docs:
            pngs = plots(res, os.path.join(common.REPO, "docs", "bench"))
            write_docs(res, md, pngs, os.path.join(common.REPO, "docs", "benchmarks.md"))
        log(md)
        return
    cfg = QUICK if args.quick else FULL
    engines = args.engines.split(",") if args.engines else None
    only = [g.strip() for g in args.only.split(",") if g.strip()] if args.only else None
    workdir = args.workdir or common.default_workdir()
    os.makedirs(workdir, exist_ok=True)
    need_gb = args.min_free_gb if args.min_free_gb is not None else (4.0 if args.quick else 30.0)
    free_gb = shutil.disk_usage(workdir).free / 1e9
    if free_gb < need_gb:
        # A full run that ran the disk full left every later engine's rows failed (ENOSPC).
        raise SystemExit(f"bench: {free_gb:.1f} GB free under {workdir}, {need_gb:g} GB wanted: free some space "
                         f"(old clones and temporary folders of side runs under /tmp are the usual culprits) "
                         f"or pass --min-free-gb")
    t0 = time.perf_counter()
    res: Dict[str, Any] = {"started": dt.datetime.now().isoformat(timespec="seconds"), "quick": args.quick,
                           "machine": common.machine_facts(), "versions": common.versions(),
                           "load_average_start": common.load_average(), "config": cfg, "only": only}
    avail = {n: (m.AVAILABLE, m.REASON, m.VERSION) for n, m in all_adapters().items()}
    res["adapters"] = {n: {"available": a, "reason": r, "version": v} for n, (a, r, v) in avail.items()}
    for n, (a, r, v) in avail.items():
        log(f"{n:<12} {v if a else 'NOT AVAILABLE: ' + r}")
    sample = dense.make_data(4096, 4096).tobytes()  # 64 MiB of the dense data, for the codec limits
    res["limits"] = common.machine_limits(workdir, sample=sample, quick=args.quick)
    log("\n" + limits_table(res["limits"]))
    rows: List[Row] = []
    if not args.skip_dense and (not only or any(g.startswith("dense") for g in only)):
        t = time.perf_counter()
        d = dense.run(workdir=workdir, engines=engines, only=only, **cfg["dense"])
        rows += d.pop("rows")
        d["seconds"] = time.perf_counter() - t
        res["dense"] = d
        log(f"\n(dense workloads: {d['seconds'] / 60:.1f} min)")
    if not args.skip_sparse and (not only or any(g.startswith("sparse") for g in only)):
        t = time.perf_counter()
        s = sparse_ais.run(workdir=workdir, engines=engines, **cfg["sparse"])
        rows += s.pop("rows")
        s["seconds"] = time.perf_counter() - t
        res["sparse"] = s
        log(f"\n(sparse workloads: {s['seconds'] / 60:.1f} min)")
    if not args.skip_dask and (not only or any(g.startswith("dask") for g in only)):
        t = time.perf_counter()
        k = dask_bench.run(workdir=workdir, **cfg["dask"])
        rows += k.pop("rows")
        k["seconds"] = time.perf_counter() - t
        res["dask"] = k
        log(f"\n(dask workloads: {k['seconds'] / 60:.1f} min)")
    if not args.skip_open and (not only or any(g.startswith("open") for g in only)):
        t = time.perf_counter()
        o = open_cost.run(workdir=workdir, **cfg["open"])
        rows += o.pop("rows")
        o["seconds"] = time.perf_counter() - t
        res["open"] = o
        log(f"\n(open workloads: {o['seconds'] / 60:.1f} min)")
    res["rows"] = rows
    res["load_average_end"] = common.load_average()
    res["total_seconds"] = time.perf_counter() - t0
    md = report_md(res)
    common.write_json(os.path.join(args.out, "results.json"), res)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(md + "\n")
    log("\n" + md)
    if not args.no_docs:
        pngs = plots(res, os.path.join(common.REPO, "docs", "bench"))
        write_docs(res, md, pngs, os.path.join(common.REPO, "docs", "benchmarks.md"))
        log(f"\nwrote docs/benchmarks.md and {len(pngs)} plots in docs/bench/")
    log(f"wrote {args.out}/results.json and results.md in {res['total_seconds'] / 60:.1f} min")


if __name__ == "__main__":
    main()
