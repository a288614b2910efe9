"""CPU time of the Dask bench's sparse read without the cluster (issue 15): the partitions that
``tessera.dask.read_dataframe(path, npartitions=8)`` makes, read one after the other in this
process and turned into pandas frames as its tasks do, every column summed. On a shared
machine the process CPU time (``time.process_time``) is steadier than the wall time. Prints
the median of ``--reps`` and the peak RSS. The array: ``--make`` writes the bench's (10M AIS
points, same schema and filters, consolidated) at ``path`` first.

    .venv/bin/python bench/sparse_partitions_cpu.py bench/out/ais_sparse --make
    .venv/bin/python bench/sparse_partitions_cpu.py bench/out/ais_sparse --config sm.read.sparse_whole_tiles=false
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def make(path: str, points: int) -> None:
    import ais
    import common

    import tessera as ts

    data = ais.generate(points)
    common.fresh_dir(path)
    os.rmdir(path)
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (0, ais.X_MAX - 1), 10_000_000), ts.Dim("y", (0, ais.Y_MAX - 1), 10_000_000)],
        attrs=[ts.Attr(a, "int64", filters=[ts.ByteShuffle(), ts.Zstd(level=3)]) for a in ais.ATTRS], sparse=True,
        capacity=100_000)
    ts.create(path, schema)
    for i in range(len(data.batches)):
        b = data.batch(i)
        with ts.open(path, "w") as A:
            A.write({"x": b["x"], "y": b["y"]}, {a: b[a] for a in ais.ATTRS})
    ts.consolidate(path)
    ts.vacuum(path)
    common.fsync_tree(path)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path")
    p.add_argument("--make", action="store_true")
    p.add_argument("--points", type=int, default=10_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--config", nargs="*", default=[], help="engine configuration, key=value")
    args = p.parse_args()
    if args.make:
        make(args.path, args.points)
    import dask

    import tessera.dask as tsd

    config = dict(kv.split("=", 1) for kv in args.config) or None
    df = tsd.read_dataframe(args.path, npartitions=8, config=config)
    parts, cols = df.to_delayed(), list(df.columns)
    cpu = []
    for _ in range(args.reps):
        t = time.process_time()
        for part in parts:
            dask.compute(part, scheduler="sync")[0][cols].sum()
        cpu.append(time.process_time() - t)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"CPU median {statistics.median(cpu):.3f} s ({', '.join(f'{c:.3f}' for c in cpu)}), peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
