"""Threads: concurrent reads give correct results, and the GIL is released while the engine
works (another Python thread keeps running during a long read)."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

import tessera as ts


def test_concurrent_reads_from_threads(uri: str) -> None:
    data = np.random.default_rng(7).integers(0, 1000, size=(600, 500), dtype=np.int64)
    ts.from_numpy(uri, data, tile=(64, 64), filters=[ts.Zstd(level=1)])
    rng = np.random.default_rng(8)
    boxes = []
    for _ in range(48):
        r0, c0 = rng.integers(0, 500), rng.integers(0, 400)
        boxes.append((int(r0), int(r0 + rng.integers(1, 100)), int(c0), int(c0 + rng.integers(1, 100))))
    with ts.open(uri) as A:  # one open array shared by every thread

        def read(b: tuple) -> bool:
            r0, r1, c0, c1 = b
            return bool(np.array_equal(A[r0:r1, c0:c1], data[r0:r1, c0:c1]))

        with ThreadPoolExecutor(max_workers=6) as ex:
            assert all(ex.map(read, boxes))

        # Each thread with its own batch iterator over the same array.
        def batches(k: int) -> bool:
            got = np.concatenate([b["a"] for b in A.iter_batches(attrs=["a"], budget_bytes=40_000 + k)])
            return bool(np.array_equal(got, data))

        with ThreadPoolExecutor(max_workers=3) as ex:
            assert all(ex.map(batches, range(3)))


def test_gil_is_released_during_reads_and_writes(uri: str) -> None:
    data = np.random.default_rng(3).normal(size=(1500, 1500))
    schema = ts.ArraySchema([ts.Dim("r", (0, 1499), 300), ts.Dim("c", (0, 1499), 300)],
                            [ts.Attr("a", "float64", filters=[ts.Gzip(level=6)])])
    ts.create(uri, schema)
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    def ticks_during(f: Callable[[], object]) -> int:
        """How far another Python thread counts while ``f`` runs. With a long switch interval
        the interpreter never takes the GIL from a thread that holds it, so the count only
        grows while ``f`` has released the GIL."""
        nonlocal ticks
        old = sys.getswitchinterval()
        sys.setswitchinterval(0.2)
        t = threading.Thread(target=spin)
        ticks = 0
        t.start()
        try:
            while ticks == 0:
                time.sleep(0.001)
            start = ticks
            f()
            return ticks - start
        finally:
            stop.set()
            t.join()
            stop.clear()
            sys.setswitchinterval(old)

    with ts.open(uri, "w") as W:

        def write() -> None:
            W[...] = data

        assert ticks_during(write) > 10_000
    with ts.open(uri) as R:
        got: list = []
        assert ticks_during(lambda: got.append(R[...])) > 10_000
        assert np.array_equal(got[0], data)
    # The check itself detects a held GIL: a pure-Python busy loop lets nobody count.
    assert ticks_during(lambda: sum(range(3_000_000))) < 10_000
