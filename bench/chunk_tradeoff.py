"""Chunked tiles (``sm.tile_chunk_size``): what the chunk size costs and gains, on two data sets.

The dense suite's data (``value(i, j) = i % cols + j``) compresses 680x with zstd-3 when a 10 MB
tile is compressed whole, because each row is the previous one shifted by one value: a 64 KiB
chunk (16 rows) must spell its first row out, so it compresses ~30x and decompresses at a
fraction of the speed. Measured data rarely looks like that, so the same workloads also run on a
noisy version of it (``16 * value + uniform(0, 1024)``, ~1.8x), closer to the paper's 2.9x.

For each data set and chunk size (0: whole tiles; auto: the writer chooses 64 KiB, 256 KiB or
1 MiB from a sample of each file's data, the default): the stored size, the write of the whole
array (one fragment), and cold reads (the engine's tile cache emptied before each) of one
column, 32 random 1000x1000 squares, 1K and 10K random points; medians of ``--reps`` runs, all
in this one process (the page cache stays warm: the reads measure decoding, not the disk).

    .venv/bin/python bench/chunk_tradeoff.py            # 20,000 x 13,000 int32, ~1 GB per store
    .venv/bin/python bench/chunk_tradeoff.py --quick    # 5,000 x 13,000
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common

import tessera as ts

TILE = (2_500, 1_000)


def data_sets(rows: int, cols: int) -> Dict[str, np.ndarray]:
    grid = np.add.outer(np.arange(rows, dtype=np.int32) % cols, np.arange(cols, dtype=np.int32))
    noise = np.random.default_rng(0).integers(0, 1024, (rows, cols), dtype=np.int32)
    return {"grid": grid, "noisy": grid * 16 + noise}


def median_ms(f: Callable[[], object], reps: int) -> float:
    runs: List[float] = []
    for _ in range(reps):
        ts.drop_caches()
        t = time.perf_counter()
        f()
        runs.append(time.perf_counter() - t)
    return statistics.median(runs) * 1e3


def run(rows: int, cols: int, chunks: List[str], reps: int, workdir: str) -> List[Dict[str, object]]:
    rng = np.random.default_rng(7)
    squares = [(int(r), int(c)) for r, c in zip(rng.integers(0, rows - 1000, 32), rng.integers(0, cols - 1000, 32))]
    points = {n: {"r": rng.integers(0, rows, n), "c": rng.integers(0, cols, n)} for n in (1_000, 10_000)}
    col = cols // 2
    out: List[Dict[str, object]] = []
    for name, data in data_sets(rows, cols).items():
        for chunk in chunks:
            path = os.path.join(workdir, f"{name}-{chunk}")
            cfg = {"sm.tile_chunk_size": chunk}
            schema = ts.ArraySchema(
                dims=[ts.Dim("r", (0, rows - 1), tile=TILE[0], dtype="int64"),
                      ts.Dim("c", (0, cols - 1), tile=TILE[1], dtype="int64")],
                attrs=[ts.Attr("a", "int32", filters=[ts.Zstd(level=3)])])
            ts.create(path, schema, config=cfg)
            t = time.perf_counter()
            with ts.open(path, "w", config=cfg) as A:
                A[:, :] = data
            write_ms = (time.perf_counter() - t) * 1e3
            stored = common.du(path)
            with ts.open(path) as A:
                assert np.array_equal(A[:, col:col + 1].reshape(-1), data[:, col])
                row = {
                    "data": name, "chunk": chunk, "ratio": data.nbytes / stored, "write_ms": write_ms,
                    "column_ms": median_ms(lambda: A[:, col:col + 1], reps),
                    "squares_ms": median_ms(lambda: [A[r:r + 1000, c:c + 1000] for r, c in squares], reps),
                    "points_1k_ms": median_ms(lambda: A.read_points(points[1_000]), reps),
                    "points_10k_ms": median_ms(lambda: A.read_points(points[10_000]), reps),
                }
            out.append(row)
            shutil.rmtree(path)
            print(f"{name:<6} chunk {chunk:>8}: ratio {row['ratio']:7.1f}x  write {write_ms:7.0f} ms  "
                  f"column {row['column_ms']:6.1f}  32 squares {row['squares_ms']:7.1f}  "
                  f"1K points {row['points_1k_ms']:6.1f}  10K points {row['points_10k_ms']:6.1f} ms", flush=True)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="5,000 rows instead of 20,000")
    p.add_argument("--chunks", default="0,65536,262144,1048576,auto",
                   help="chunk sizes (0: whole tiles; auto: the writer's choice from a sample)")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--out", default=os.path.join(common.HERE, "out", "chunk_tradeoff.json"))
    args = p.parse_args()
    rows, cols = (5_000 if args.quick else 20_000), 13_000
    with tempfile.TemporaryDirectory(dir=common.default_workdir() if os.path.isdir(common.default_workdir())
                                     else None) as workdir:
        rows_out = run(rows, cols, args.chunks.split(","), args.reps, workdir)
    common.write_json(args.out, {"rows": rows_out, "shape": [rows, cols], "tile": list(TILE),
                                 "machine": common.machine_facts(), "reps": args.reps})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
