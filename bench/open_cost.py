"""Open cost against the number of fragments (issue 17): a sparse array written as N fragments of
one cell each, opened again and again (page cache warm, engine caches dropped), by Tessera and
TileDB-Py, each before and after consolidating its fragment metadata (Tessera:
``ts.consolidate_fragment_metadata``; TileDB: ``sm.consolidation.mode=fragment_meta``), in one
run. Tessera's log is checkpointed first (``ts.vacuum``), as any maintained array's is.

    .venv/bin/python bench/open_cost.py --counts 100,1000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Sequence

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from common import Row, log


def _median_open(open_close: Callable[[], Any], reps: int) -> List[float]:
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        open_close()
        runs.append(time.perf_counter() - t)
    return runs


def _tessera(path: str, n: int, reps: int) -> List[Row]:
    import tessera as ts

    schema = ts.ArraySchema(dims=[ts.Dim("x", (0, 10**9), 10**6)], attrs=[ts.Attr("v", "int64")], sparse=True)
    ts.create(path, schema)
    for i in range(n):
        with ts.open(path, "w") as A:
            A.write({"x": np.array([i * 7])}, {"v": np.array([i])})
    ts.vacuum(path)

    def once() -> None:
        ts.drop_caches()
        ts.open(path).close()

    rows = [Row("open", f"{n} fragments", "tessera", None, _median_open(once, reps))]
    ts.consolidate_fragment_metadata(path)
    rows.append(Row("open", f"{n} fragments", "tessera+fmeta", None, _median_open(once, reps)))
    return rows


def _tiledb(path: str, n: int, reps: int) -> List[Row]:
    import tiledb

    dom = tiledb.Domain(tiledb.Dim("x", domain=(0, 10**9), tile=10**6, dtype=np.int64))
    tiledb.Array.create(path, tiledb.ArraySchema(domain=dom, sparse=True, attrs=[tiledb.Attr("v", dtype=np.int64)]))
    for i in range(n):
        with tiledb.open(path, "w") as A:
            A[np.array([i * 7])] = {"v": np.array([i])}

    def once() -> None:
        with tiledb.open(path) as A:
            A.nonempty_domain()  # loads what a first read needs

    rows = [Row("open", f"{n} fragments", "tiledb", None, _median_open(once, reps))]
    tiledb.consolidate(path, config=tiledb.Config({"sm.consolidation.mode": "fragment_meta"}))
    rows.append(Row("open", f"{n} fragments", "tiledb+fmeta", None, _median_open(once, reps)))
    return rows


def run(workdir: str, counts: Sequence[int] = (100, 1000, 10000), reps: int = 15) -> Dict[str, Any]:
    rows: List[Row] = []
    for n in counts:
        for name, fn in (("tessera", _tessera), ("tiledb", _tiledb)):
            path = os.path.join(workdir, f"open-{name}-{n}")
            common.remove(path)
            try:
                got = fn(path, n, reps)
            except ImportError as e:
                got = [Row("open", f"{n} fragments", name, None, note=f"not installed: {e}")]
            for r in got:
                if r.runs:
                    r.seconds = statistics.median(r.runs)
                log(f"open {r.case:<16} {r.engine:<14} {common.fmt_time(r.seconds)}")
            rows += got
            common.remove(path)
    return {"rows": rows}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--counts", default="100,1000")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--workdir", default=None)
    a = p.parse_args()
    workdir = a.workdir or common.default_workdir()
    os.makedirs(workdir, exist_ok=True)
    res = run(workdir, [int(c) for c in a.counts.split(",")], a.reps)
    log("\n" + common.table(res["rows"], {}))


if __name__ == "__main__":
    main()
