"""The multi-process stress test of issue 12: writers, readers and two consolidate+vacuum loops
run at once, each in its own process, on a dense array, on sparse arrays with and without
duplicates and on a dense array of chunked tiles read whole and in parts (see
``stress_worker.py`` for the exact checks). No read may show a torn write, go back in time,
miss a write whose commit returned before the read began, return a cell twice or bring a
deleted cell back; no engine aggregate may differ from the cells read in the same snapshot; no
operation may fail.

``TESSERA_STRESS_SECONDS`` sets how long the processes run (default 20; ``make stress`` runs
300). The counts are printed (``pytest -s``)."""

from __future__ import annotations

import collections
import json
import os
import pathlib
import random
import subprocess
import sys
import time
from typing import Any, Counter, Dict, List, Tuple

import stress_worker as worker
import tessera as ts

WRITERS, READERS, CONSOLIDATORS = 3, 3, 2


def run_stress(workdir: pathlib.Path, seconds: float) -> Tuple[Counter[str], Counter[str], List[str]]:
    """Runs every role for ``seconds``; returns the summed counts, the violations and samples of
    them."""
    worker.create_arrays(str(workdir), WRITERS)
    deadline = time.time() + seconds + 1.0  # + the children's start-up
    script = str(pathlib.Path(worker.__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TESSERA_STRESS_WRITERS=str(WRITERS))
    roles = [("writer", w) for w in range(WRITERS)] + [("reader", r) for r in range(READERS)] + [
        ("consolidator", c) for c in range(CONSOLIDATORS)
    ]
    procs: List[Tuple[str, "subprocess.Popen[bytes]", Any]] = []
    counts: Counter[str] = collections.Counter()
    violations: Counter[str] = collections.Counter()
    samples: List[str] = []
    try:
        for seed, (role, index) in enumerate(roles):
            # Closed in the finally below, once its process has ended or been killed.
            log = open(workdir / f"{role}-{index}.out", "w+")  # noqa: SIM115
            p = subprocess.Popen([sys.executable, script, role, str(index), str(workdir), str(deadline), str(seed)],
                                 stdout=log, stderr=subprocess.STDOUT, env=env)
            procs.append((f"{role}-{index}", p, log))
        for name, p, log in procs:
            rc = p.wait(timeout=seconds + 120)
            log.seek(0)
            text = log.read()
            if rc != 0 or not text.strip():
                violations["process_failed"] += 1
                samples.append(f"{name} exited with status {rc}:\n{text[-3000:]}")
                continue
            out: Dict[str, Any] = json.loads(text.strip().splitlines()[-1])
            counts.update(out["counts"])
            violations.update(out["violations"])
            samples.extend(f"{name}: {s}" for s in out["samples"])
    finally:
        for _, p, log in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()
    final = worker.final_check(str(workdir), WRITERS)
    counts.update(final.counts)
    violations.update(final.violations)
    samples.extend(final.samples)
    return counts, violations, samples


def test_writers_readers_and_consolidators_in_processes(tmp_path: pathlib.Path) -> None:
    seconds = float(os.environ.get("TESSERA_STRESS_SECONDS", "20"))
    started = time.monotonic()
    counts, violations, samples = run_stress(tmp_path, seconds)
    took = time.monotonic() - started
    print(f"\nstress: {seconds:.0f} s ({took:.1f} s in all), {WRITERS} writers, {READERS} readers, "
          f"{CONSOLIDATORS} consolidators")
    print("counts:", json.dumps(dict(sorted(counts.items()))))
    print("violations:", json.dumps(dict(sorted(violations.items()))))
    shown: Counter[str] = collections.Counter()
    for s in samples:
        kind = s.split(": ")[1] if ": " in s else s
        shown[kind] += 1
        if shown[kind] <= 3:
            print("  ", s)
    # Everything took part, so a run without violations proves something.
    assert counts["writes"] >= 10 and counts["deletes"] >= 3, counts
    assert counts["regions_checked"] >= 30 and counts["consolidations"] >= 2, counts
    assert counts["aggregates_checked"] >= 10, counts
    assert counts["chunked_ops"] >= 4 and counts["partial_regions_checked"] >= 10, counts
    assert counts["final_regions_checked"] == WRITERS * len(worker.KINDS), counts
    assert not violations, f"{sum(violations.values())} violations: {dict(violations)}\n" + "\n".join(samples[:10])


def test_the_chunked_kind_stores_chunked_tiles_that_partial_reads_decode_in_part(tmp_path: pathlib.Path) -> None:
    """The ``chunked`` array of the stress test really has chunked tiles, and its partial reads
    decode one 4 KiB chunk of each 19200-byte tile they touch (else the stress test would not
    exercise them): after one slab write of each writer (two whole tiles and two half tiles
    each), two rows of a whole tile and three rows across two shared half tiles; both pass the
    readers' check."""
    worker.create_arrays(str(tmp_path), WRITERS)
    for w in range(WRITERS):
        worker.apply_op(str(tmp_path), "chunked", w, 0)
    uri = worker.uri_of(str(tmp_path), "chunked")
    ts.stats.enable()
    try:
        for rows, cols, tiles in ((slice(0, 2), slice(0, 10), 1), (slice(50, 53), slice(55, 65), 2)):
            ts.stats.reset()
            with ts.open(uri, config=worker.PARTIAL_READ_CONFIG) as A:
                A[rows, cols]
            c = ts.stats.json()["counters"]
            assert c["reader_num_attr_tiles_touched"] == tiles, c
            assert c["reader_num_bytes_after_filtering"] == 4096 * tiles, c
    finally:
        ts.stats.disable()
        ts.stats.reset()
    report = worker.Report()
    logs = worker.Logs(str(tmp_path), WRITERS)
    worker.check_partial(str(tmp_path), "chunked", WRITERS, random.Random(1), logs, {}, report)
    assert report.counts["partial_regions_checked"] == WRITERS and not report.violations, report.json()
