"""Where Tessera spends a sparse read: loads the AIS-like points (default 10M) into a Tessera
sparse array and prints the engine's statistics (``ts.stats``) of the 1M-point dense-region
query, beside the time of the same query in DuckDB's layout (for scale) and the bytes involved.

``python bench/profile_tessera.py [--points N] [--compressed]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ais  # noqa: E402
import common  # noqa: E402
from adapters import tessera as T  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--points", type=int, default=10_000_000)
    p.add_argument("--compressed", action="store_true")
    p.add_argument("--target", type=int, default=1_000_000)
    p.add_argument("--region", choices=["dense", "sparse"], default="dense")
    args = p.parse_args()
    import tessera as ts

    data = ais.generate(args.points)
    sx, sy = data.sorted_xy()
    dense, sparse = ais.dense_and_sparse_centres(data)
    c = dense if args.region == "dense" else sparse
    box, count = ais.box_for_count(sx, sy, *c, args.target)
    path = os.path.join(common.default_workdir(), "profile-tessera")
    common.remove(path)
    store = T.Sparse(path, args.compressed, ais.ATTRS, (ais.X_MAX, ais.Y_MAX))
    t = time.perf_counter()
    store.load(data.batch(i) for i in range(len(data.batches)))
    print(f"load {time.perf_counter() - t:.2f} s")
    store.open()
    for order in ("U", "G", "C"):
        store.order = order
        tm = common.measure(lambda: store.query(box), reps=5)
        print(f"query order {order}: {count:,} points, median {common.fmt_time(tm.median)}")
    store.order = "U"
    # How many cells lie in the x-slab of the box (what a row-major layout must scan at least).
    x0, x1, y0, y1 = box
    i, j = np.searchsorted(sx, [x0, x1 + 1])
    print(f"points in the box's x-slab: {j - i:,}; in the box: {count:,}")
    for attrs in ([], ["sog"]):
        tm = common.measure(lambda: store.A.read(ranges={"x": (x0, x1), "y": (y0, y1)}, attrs=attrs, order="U"), reps=5)
        print(f"query with attrs={attrs}: median {common.fmt_time(tm.median)}")
    # The binding's raw call (engine read + buffers handed to Python) against the whole API call.
    core = store.A._c()
    ranges = [[(x0, x1)], [(y0, y1)]]
    tc = common.measure(lambda: core.sparse_read(ranges, list(ais.ATTRS), "U"), reps=5)
    tp = common.measure(lambda: core.sparse_query(ranges, list(ais.ATTRS), "U"), reps=5)
    tr = common.measure(lambda: core.sparse_query(ranges, list(ais.ATTRS), "U").read_all(), reps=5)
    print(f"_core.sparse_query (made, nothing read) {common.fmt_time(tp.median)}; "
          f"sparse_query + read_all {common.fmt_time(tr.median)}")
    tq = common.measure(lambda: store.query(box), reps=5)
    ts.stats.reset()
    ts.stats.enable()
    store.query(box)
    ts.stats.disable()
    st = ts.stats.json()
    rd = st["timers"].get("reader_read", {}).get("ns", 0) / 1e9
    ft = st["timers"].get("reader_fetch_tiles", {}).get("ns", 0) / 1e9
    print(f"A.read {common.fmt_time(tq.median)}; _core.sparse_read {common.fmt_time(tc.median)}; "
          f"engine reader_read {common.fmt_time(rd)} (of which reader_fetch_tiles {common.fmt_time(ft)})")
    print(ts.stats.dumps())
    store.close()
    common.remove(path)


if __name__ == "__main__":
    main()
