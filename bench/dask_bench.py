"""Dask workloads (issue 15): Tessera against Zarr v3 and Parquet through Dask, on one
``dask.distributed.LocalCluster`` of 2 worker processes (1 thread each), in one run.

- dense write: a float32 array of ``gib`` GiB (chunks of 4096 x 4096 = 64 MiB, computed on the
  workers), written by ``tessera.dask.to_tessera`` (one fragment per chunk, tiles = chunks) and
  by ``dask.array.store`` into a Zarr v3 array with the same chunks; both zstd level 3, both
  fsynced before the clock stops (Tessera syncs at commit; the Zarr store's files are fsynced by
  the benchmark);
- dense read: ``from_tessera(...).sum()`` and ``da.from_zarr(...).sum()``, page cache dropped
  (fadvise) before each run;
- sparse read: the AIS points (``bench/ais.py``) of one sparse array, read into a dask dataframe
  by ``tessera.dask.read_dataframe`` and, from the same points in Parquet files (one per month,
  zstd), by ``dask.dataframe.read_parquet``; every column summed. Each side encodes its integers
  before zstd level 3 as its library advises: pyarrow's defaults (dictionary pages where they
  pay, else plain), Tessera's default coordinate filters (delta, byte shuffle) and a byte
  shuffle for the int64 attributes.

Each engine gets a new cluster, one untimed run (the workers import its libraries), then the
timed runs: ``reps`` for the dense workloads, at least 7 for the sparse read (about a second
each); every figure is their median. Peak memory per worker: the highest peak RSS of a worker
over the timed runs, reported beside the chunk size (and for the writes, the bytes each store
takes on disk).

    .venv/bin/python bench/dask_bench.py --gib 1 --points 2000000
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Callable, Dict, List

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ais
import common
from common import Row, log

CHUNK = 4096
#: Timed runs of the sparse read at least (each takes about a second: the median of 3 swung
#: 1.3x between runs of the same build).
SPARSE_REPS = 7


def _reset_peak() -> None:
    """Resets this process's peak RSS (VmHWM): a forked worker starts with its parent's."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _peak_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _peak(client: Any) -> int:
    """The highest peak RSS of a worker since ``_reset_peak``, in bytes."""
    return max(client.run(_peak_bytes).values())


def _source(n: int) -> Any:
    import dask.array as da

    r = da.arange(n, chunks=CHUNK, dtype=np.float32)
    return (r[:, None] * 0.25 + (r[None, :] % 1000)).astype(np.float32)


def _timed(fn: Callable[[], Any], reps: int, setup: Callable[[], Any]) -> Dict[str, Any]:
    """``reps`` timed runs of ``fn`` (each after ``setup``) on a new cluster of 2 worker
    processes, after one untimed run (the workers import the engine's libraries and make their
    first allocations: up to 2x a later run, for every engine), and the highest peak RSS of a
    worker."""
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster) as client:
        setup()
        fn()
        client.run(_reset_peak)
        runs: List[float] = []
        for _ in range(reps):
            setup()
            t = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t)
        return {"runs": runs, "peak": _peak(client)}


def run(workdir: str, gib: float = 4.0, points: int = 10_000_000, reps: int = 3) -> Dict[str, Any]:
    import dask.array as da
    import dask.dataframe as dd
    import zarr

    import tessera as ts
    import tessera.dask as tsd

    n = max(1, round((gib * (1 << 30) / 4) ** 0.5 / CHUNK)) * CHUNK
    nbytes = n * n * 4
    rows: List[Row] = []
    tpath = os.path.join(workdir, "dask_tessera")
    zpath = os.path.join(workdir, "dask_zarr")
    x = _source(n)
    chunk_bytes = CHUNK * CHUNK * 4

    def write_tessera() -> None:
        tsd.to_tessera(x, tpath, attr="a", filters=[ts.Zstd(level=3)])

    def write_zarr() -> None:
        z = zarr.create_array(store=zpath, shape=(n, n), chunks=(CHUNK, CHUNK), dtype="float32",
                              compressors=zarr.codecs.ZstdCodec(level=3), overwrite=True)
        da.store(x, z, lock=False)
        common.fsync_tree(zpath)

    for engine, fn, path in (("tessera", write_tessera, tpath), ("zarr", write_zarr, zpath)):
        r = _timed(fn, reps, lambda p=path: common.remove(p))
        stored = common.du(path)
        rows.append(Row("dask dense write", f"{nbytes >> 20} MiB float32, 2 workers", engine,
                        float(np.median(r["runs"])), r["runs"], bytes=nbytes,
                        note=f"peak worker RSS {common.fmt_bytes(r['peak'])}, chunk {common.fmt_bytes(chunk_bytes)}, "
                             f"stored {common.fmt_bytes(stored)}",
                        extra={"peak_worker_rss": r["peak"], "stored": stored}))
        log(f"dask dense write {engine}: {common.fmt_time(rows[-1].seconds)}, {rows[-1].note}")
    expected = None
    for engine, reader, path in (("tessera", lambda: tsd.from_tessera(tpath), tpath),
                                 ("zarr", lambda: da.from_zarr(zpath), zpath)):
        sums: List[float] = []
        r = _timed(lambda rd=reader, out=sums: out.append(float(rd().sum(dtype=np.float64).compute())), reps,
                   lambda p=path: common.drop_cache(p))
        expected = sums[0] if expected is None else expected
        if sums[0] != expected:
            raise AssertionError(f"dask dense read: {engine} sums to {sums[0]}, not {expected}")
        rows.append(Row("dask dense read cold", f"{nbytes >> 20} MiB float32, 2 workers", engine,
                        float(np.median(r["runs"])), r["runs"], bytes=nbytes,
                        note=f"peak worker RSS {common.fmt_bytes(r['peak'])}",
                        extra={"peak_worker_rss": r["peak"]}))
        log(f"dask dense read {engine}: {common.fmt_time(rows[-1].seconds)}, {rows[-1].note}")
    common.remove(tpath)
    common.remove(zpath)
    rows += _sparse(workdir, points, max(reps, SPARSE_REPS), ts, tsd, dd)
    return {"rows": rows, "gib": nbytes / (1 << 30), "points": points}


def _sparse(workdir: str, points: int, reps: int, ts: Any, tsd: Any, dd: Any) -> List[Row]:
    import pandas as pd

    data = ais.generate(points)
    spath = os.path.join(common.fresh_dir(os.path.join(workdir, "dask_sparse")), "tessera")
    ppath = common.fresh_dir(os.path.join(workdir, "dask_sparse", "parquet"))
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (0, ais.X_MAX - 1), 10_000_000), ts.Dim("y", (0, ais.Y_MAX - 1), 10_000_000)],
        attrs=[ts.Attr(a, "int64", filters=[ts.ByteShuffle(), ts.Zstd(level=3)]) for a in ais.ATTRS], sparse=True,
        capacity=100_000)
    ts.create(spath, schema)
    for i in range(len(data.batches)):
        b = data.batch(i)
        with ts.open(spath, "w") as A:
            A.write({"x": b["x"], "y": b["y"]}, {a: b[a] for a in ais.ATTRS})
        pd.DataFrame(b).to_parquet(os.path.join(ppath, f"part-{i:03d}.parquet"), compression="zstd", index=False)
    ts.consolidate(spath)
    ts.vacuum(spath)
    common.fsync_tree(spath)
    rows: List[Row] = []
    expected = None
    for engine, reader, path in (("tessera", lambda: tsd.read_dataframe(spath, npartitions=8), spath),
                                 ("dask+parquet", lambda: dd.read_parquet(ppath), ppath)):
        sums: List[Any] = []
        r = _timed(lambda rd=reader, out=sums: out.append(rd()[list(ais.COLUMNS)].sum().compute()), reps,
                   lambda p=path: common.drop_cache(p))
        got = tuple(int(sums[0][c]) for c in ais.COLUMNS)
        expected = got if expected is None else expected
        if got != expected:
            raise AssertionError(f"dask sparse read: {engine} column sums {got} differ from {expected}")
        rows.append(Row("dask sparse read cold", f"{points / 1e6:g}M points, 9 columns, 2 workers", engine,
                        float(np.median(r["runs"])), r["runs"], cells=points,
                        bytes=common.du(path), note=f"peak worker RSS {common.fmt_bytes(r['peak'])}",
                        extra={"peak_worker_rss": r["peak"]}))
        log(f"dask sparse read {engine}: {common.fmt_time(rows[-1].seconds)}, {rows[-1].note}")
    common.remove(os.path.join(workdir, "dask_sparse"))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gib", type=float, default=4.0)
    p.add_argument("--points", type=int, default=10_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--workdir", default=None)
    args = p.parse_args()
    workdir = args.workdir or common.default_workdir()
    os.makedirs(workdir, exist_ok=True)
    res = run(workdir, args.gib, args.points, args.reps)
    log("\n" + common.table(res["rows"], {}))


if __name__ == "__main__":
    main()
