"""Where a cold dense read spends its time, Tessera against h5py: the bench's dense array
(20,000 x 13,000 int32, 2,500 x 1,000 tiles) in both, then the "tile", "par" and "col" reads
of bench/dense.py with the page cache dropped before each (``common.drop_cache``), the open and
the read timed apart, then the same reads warm (open once, read again); medians over rotations of
the cases.

``python bench/cold_dense.py [REPS [CASE,CASE]]`` (the stores stay in bench/out/data/cold-dense; delete it
to rebuild them)
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from typing import Dict, List, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common
from adapters import h5py as H
from adapters import tessera as T

R, C, TR, TC = 20_000, 13_000, 2_500, 1_000


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    d = os.path.join(common.default_workdir(), "cold-dense")
    os.makedirs(d, exist_ok=True)
    paths = {"tessera": os.path.join(d, "ts"), "h5py": os.path.join(d, "a.h5")}
    stores = {"tessera": T.Dense(paths["tessera"], (R, C), (TR, TC)), "h5py": H.Dense(paths["h5py"], (R, C), (TR, TC))}
    if not os.path.exists(os.path.join(d, "done")):
        data = np.arange(R * C, dtype=np.int32).reshape(R, C)
        for s in stores.values():
            common.remove(s.path)
            s.load(data)
        del data
        open(os.path.join(d, "done"), "w").close()
    ti, tj = (R // TR) // 2, (C // TC) // 2
    tile = (ti * TR, ti * TR + TR, tj * TC, tj * TC + TC)
    par = (tile[0] + 1, tile[1], tile[2] + 1, tile[3])
    col_j = tj * TC + TC // 2
    boxes = {"tile": tile, "par": par, "col": (0, R, col_j, col_j + 1)}
    if len(sys.argv) > 2:
        boxes = {c: boxes[c] for c in sys.argv[2].split(",")}
    res: Dict[Tuple[str, str], List[Tuple[float, float]]] = {}
    for _ in range(reps):
        for name, s in stores.items():
            for case, box in boxes.items():
                s.close()
                common.drop_cache(paths[name])
                t0 = time.perf_counter()
                s.open()
                t1 = time.perf_counter()
                got = s.read(*box)
                t2 = time.perf_counter()
                assert np.asarray(got).size == (box[1] - box[0]) * (box[3] - box[2])
                res.setdefault((name, case), []).append((t1 - t0, t2 - t1))
                t3 = time.perf_counter()
                s.read(*box)
                res.setdefault((name, case + " warm"), []).append((0.0, time.perf_counter() - t3))
    for (name, case), v in res.items():
        med = [statistics.median(f(x) for x in v) * 1e3 for f in (lambda x: x[0], lambda x: x[1], sum)]
        print(f"{name:<8} {case:<5} open {med[0]:6.2f}  read {med[1]:6.2f}  total {med[2]:6.2f} ms")


if __name__ == "__main__":
    main()
