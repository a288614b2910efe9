"""The roles of the consolidation process test (``test_consolidate.py``), each run as its own
process (``python consolidation_worker.py <role> <uri> <refdir> <deadline> <seed>``) or, for
readers, also in a thread of the test (``read_loop``). Every role stops by itself at
``deadline`` (``time.time()`` seconds) and prints a JSON line of counts; any error ends the
process with a traceback and a non-zero status.

* ``writer``: writes random slabs and random updates (sparse fragments of the dense array) in a
  loop; after each committed write it saves the whole array's expected state to
  ``<refdir>/<t1>.npy``, ``t1`` the newest fragment timestamp of the array then (its own
  write's: it is the only writer, and a consolidated fragment takes its last input's ``t1``).
* ``consolidator``: consolidates (everything, a random run of consecutive fragments by name or
  by timestamp range, or size-tiered) and vacuums, in a loop.
* ``reader``: opens the array, reads a random subarray, and checks it against the saved state
  of the snapshot it opened (named by the newest ``t1`` among ``A.fragments()``).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Tuple

import numpy as np

import tessera as ts

SHAPE = (64, 64)
#: How long vacuum waits for readers in the consolidator (a busy array is retried later).
VACUUM_WAIT_MS = 2000
#: Extra configuration of every role from the environment: on S3 (test_s3.py) a short vacuum
#: grace period, so the consolidator's vacuums remove fragments during the run.
EXTRA_CONFIG = (
    {"sm.vacuum.grace_ms": os.environ["TESSERA_TEST_GRACE_MS"]} if "TESSERA_TEST_GRACE_MS" in os.environ else {}
)
#: How long a reader waits for the writer to save the state of a snapshot it saw.
REF_WAIT_S = 30.0


def as_ndarray(x: object) -> np.ndarray:
    """A dense read of one attribute (narrowed for type checkers)."""
    assert isinstance(x, np.ndarray)
    return x


def save_ref(refdir: str, t1: int, ref: np.ndarray) -> None:
    """Saves the state as of ``t1`` atomically (readers never see a partial file)."""
    tmp = os.path.join(refdir, f"{t1}.tmp.npy")
    np.save(tmp, ref)
    os.replace(tmp, os.path.join(refdir, f"{t1}.npy"))


def load_ref(refdir: str, t1: int, cache: Dict[int, np.ndarray]) -> np.ndarray:
    """The state as of ``t1``, waiting for the writer to save it (it saves just after its
    commit, so a reader may see the fragment first)."""
    if t1 in cache:
        return cache[t1]
    path = os.path.join(refdir, f"{t1}.npy")
    give_up = time.monotonic() + REF_WAIT_S
    while not os.path.exists(path):
        if time.monotonic() > give_up:
            raise AssertionError(f"no saved state for snapshot t1={t1}: a reader saw a fragment no write made")
        time.sleep(0.005)
    cache[t1] = np.load(path)
    return cache[t1]


def newest_t1(uri: str) -> int:
    return max(f.t1 for f in ts.fragments(uri))


def write_loop(uri: str, refdir: str, deadline: float, seed: int) -> Dict[str, int]:
    rng = np.random.default_rng(seed)
    with ts.open(uri) as A:
        ref = as_ndarray(A[:, :])
    counts = {"slabs": 0, "updates": 0}
    with ts.open(uri, "w", config=EXTRA_CONFIG) as W:
        while time.time() < deadline:
            if rng.random() < 0.6:
                r0, c0 = (int(x) for x in rng.integers(0, 60, 2))
                r1, c1 = r0 + int(rng.integers(1, 65 - r0)), c0 + int(rng.integers(1, 65 - c0))
                vals = rng.integers(-(10**6), 10**6, size=(r1 - r0, c1 - c0), dtype=np.int32)
                W[r0:r1, c0:c1] = vals
                ref[r0:r1, c0:c1] = vals
                counts["slabs"] += 1
            else:
                k = int(rng.integers(1, 40))
                flat = rng.choice(SHAPE[0] * SHAPE[1], size=k, replace=False)
                rows, cols = (flat // SHAPE[1]).astype(np.int64), (flat % SHAPE[1]).astype(np.int64)
                vals = rng.integers(-(10**6), 10**6, size=k, dtype=np.int32)
                W.write({"r": rows, "c": cols}, vals)
                ref[rows, cols] = vals
                counts["updates"] += 1
            save_ref(refdir, newest_t1(uri), ref)
            time.sleep(float(rng.uniform(0, 0.01)))
    return counts


def consolidate_loop(uri: str, deadline: float, seed: int) -> Dict[str, int]:
    rng = np.random.default_rng(seed)
    counts = {"consolidations": 0, "vacuums": 0, "removed": 0, "uncommitted": 0, "busy": 0}
    config = {"sm.vacuum.lock_timeout_ms": str(VACUUM_WAIT_MS), "sm.consolidation.buffer_size": "20000",
              **EXTRA_CONFIG}
    while time.time() < deadline:
        frs = ts.fragments(uri)
        how = rng.integers(0, 4)
        if how == 0 or len(frs) < 3:
            out = ts.consolidate(uri, config=config)
        elif how == 1:
            out = ts.consolidate(uri, policy="size-tiered", ratio=4.0, min_fragments=3, config=config)
        else:
            i = int(rng.integers(0, len(frs) - 1))
            j = int(rng.integers(i + 2, len(frs) + 1))
            run = frs[i:j]
            if how == 2:
                out = ts.consolidate(uri, fragments=[f.name for f in run], config=config)
            else:
                out = ts.consolidate(uri, timestamp=(run[0].t0, run[-1].t1), config=config)
        if out is not None:
            counts["consolidations"] += 1
        if rng.random() < 0.7:
            try:
                report = ts.vacuum(uri, config=config)
            except ts.ArrayBusyError:
                counts["busy"] += 1
            else:
                counts["vacuums"] += 1
                counts["removed"] += len(report.removed)
                counts["uncommitted"] += len(report.uncommitted)
        time.sleep(float(rng.uniform(0.02, 0.1)))
    return counts


def read_loop(uri: str, refdir: str, deadline: float, seed: int) -> Dict[str, int]:
    """Reads until ``deadline``; raises AssertionError on the first read that differs from its
    snapshot's state."""
    rng = np.random.default_rng(seed)
    cache: Dict[int, np.ndarray] = {}
    counts = {"reads": 0, "snapshots": 0, "consolidated_seen": 0}
    seen = set()
    while time.time() < deadline:
        with ts.open(uri) as A:
            frs = A.fragments()
            t1 = max(f.t1 for f in frs)
            r0, c0 = (int(x) for x in rng.integers(0, 64, 2))
            r1, c1 = r0 + int(rng.integers(1, 65 - r0)), c0 + int(rng.integers(1, 65 - c0))
            if rng.random() < 0.2:
                got = np.concatenate([b["a"] for b in A.iter_batches((slice(r0, r1), slice(c0, c1)),
                                                                     budget_bytes=1024)])
            else:
                got = as_ndarray(A[r0:r1, c0:c1])
        want = load_ref(refdir, t1, cache)[r0:r1, c0:c1]
        if not np.array_equal(got, want):
            bad = int(np.count_nonzero(got != want))
            raise AssertionError(
                f"snapshot t1={t1} ({len(frs)} fragments: {[f.name for f in frs]}): "
                f"[{r0}:{r1}, {c0}:{c1}] differs from the writer's state in {bad} cells"
            )
        counts["reads"] += 1
        seen.add(t1)
        counts["consolidated_seen"] += any(f.t0 != f.t1 for f in frs)
        time.sleep(float(rng.uniform(0, 0.003)))
    counts["snapshots"] = len(seen)
    return counts


def run_roles(uri: str, refdir: str, logdir: str, run_for: float, seed: int,
              reader_threads: int) -> Tuple[Dict[str, Dict[str, int]], List[Dict[str, int]]]:
    """Runs a writer, a consolidator and a reader, each in its own process, plus
    ``reader_threads`` reader threads here, for ``run_for`` seconds; returns each process's
    counts by role and the threads' counts. Any failure (a process's status, a thread's
    exception) raises with the process's output; every process is gone when it returns."""
    deadline = time.time() + run_for + 1.0  # + the children's start-up
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    procs: Dict[str, Tuple["subprocess.Popen[bytes]", Any]] = {}
    thread_errors: List[BaseException] = []
    thread_counts: List[Dict[str, int]] = []
    outputs: Dict[str, Dict[str, int]] = {}
    with contextlib.ExitStack() as logs:  # closes every log opened, even if a Popen fails
        try:
            for i, role in enumerate(("writer", "consolidator", "reader")):
                log = logs.enter_context(open(os.path.join(logdir, f"{role}.log"), "w+"))
                p = subprocess.Popen([sys.executable, __file__, role, uri, refdir, str(deadline), str(seed + i)],
                                     stdout=log, stderr=subprocess.STDOUT, env=env)
                procs[role] = (p, log)

            def reader(k: int) -> None:
                try:
                    thread_counts.append(read_loop(uri, refdir, deadline, seed + 100 + k))
                except BaseException as e:
                    thread_errors.append(e)

            threads = [threading.Thread(target=reader, args=(k,)) for k in range(reader_threads)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=run_for + 60)
            for role, (p, log) in procs.items():
                rc = p.wait(timeout=60)
                log.seek(0)
                text = log.read()
                assert rc == 0, f"{role} failed (status {rc}):\n{text}"
                outputs[role] = json.loads(text.strip().splitlines()[-1])
        finally:
            for p, _ in procs.values():
                if p.poll() is None:
                    p.kill()
                    p.wait()
    if thread_errors:
        raise thread_errors[0]
    assert len(thread_counts) == reader_threads
    return outputs, thread_counts


def main() -> None:
    role, uri, refdir, deadline, seed = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
    if role == "writer":
        counts = write_loop(uri, refdir, deadline, seed)
    elif role == "consolidator":
        counts = consolidate_loop(uri, deadline, seed)
    elif role == "reader":
        counts = read_loop(uri, refdir, deadline, seed)
    else:
        raise SystemExit(f"unknown role {role}")
    print(json.dumps(counts), flush=True)


if __name__ == "__main__":
    main()
