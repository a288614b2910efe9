"""Shared helpers of the benchmark suite: timing (medians of repeated runs), stores on disk (bytes,
fsync, dropping their pages from the page cache), the machine's own limits measured in the same
run, versions and machine facts, and the markdown table.

Cold runs: this machine does not let us drop the whole page cache (``/proc/sys/vm/drop_caches``
needs root on the host), so a "cold" run first calls ``fsync`` and then
``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` on every file of the store being read, which
evicts that store's pages (and only those) from the page cache. The engine's own caches are
emptied by reopening the store inside the timed region.
"""

from __future__ import annotations

import datetime as dt
import gc
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


# -- timing ---------------------------------------------------------------------------------
@dataclass
class Timing:
    """Repeated runs of one measurement (seconds)."""

    runs: List[float]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def min(self) -> float:
        return min(self.runs)

    @property
    def max(self) -> float:
        return max(self.runs)

    def spread(self) -> float:
        """(max - min) / median: how noisy the runs were."""
        return (self.max - self.min) / self.median if self.median > 0 else 0.0


def measure(fn: Callable[[], Any], reps: int = 5, warmup: int = 1, setup: Optional[Callable[[], Any]] = None,
            min_reps_under_1s: int = 3) -> Timing:
    """Median-able timings of ``fn``: ``warmup`` untimed calls, then ``reps`` timed calls (at
    least ``min_reps_under_1s`` when one call takes under a second), each after ``setup()``
    (untimed). The garbage collector is off during each timed call."""
    for _ in range(warmup):
        if setup:
            setup()
        fn()
    runs: List[float] = []
    i = 0
    while i < reps or (runs and statistics.median(runs) < 1.0 and len(runs) < min_reps_under_1s):
        if setup:
            setup()
        gc.collect()
        gc.disable()
        try:
            t = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t)
        finally:
            gc.enable()
        i += 1
    return Timing(runs)


def interleaved(fns: Dict[str, Callable[[], Any]], reps: int, warmup: int = 1,
                setups: Optional[Dict[str, Callable[[], Any]]] = None) -> Dict[str, Any]:
    """Times several engines on one workload in turns (engine A, B, C, then B, C, A, ...), so
    that background load on a shared machine hits them alike. Returns a ``Timing`` per key, or
    the exception that stopped that key (it is not retried)."""
    runs: Dict[str, List[float]] = {k: [] for k in fns}
    errors: Dict[str, BaseException] = {}

    def one(k: str, timed: bool) -> None:
        try:
            if setups and k in setups:
                setups[k]()
            gc.collect()
            gc.disable()
            t = time.perf_counter()
            fns[k]()
            dt = time.perf_counter() - t
            if timed:
                runs[k].append(dt)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            errors[k] = e
        finally:
            gc.enable()

    for k in fns:
        for _ in range(warmup):
            if k not in errors:
                one(k, False)
    for i in range(reps):
        keys = [k for k in fns if k not in errors]
        if not keys:
            break
        for k in keys[i % len(keys):] + keys[: i % len(keys)]:
            one(k, True)
    return {k: errors[k] if k in errors else Timing(runs[k]) for k in fns}


def load_average() -> List[float]:
    try:
        return list(os.getloadavg())
    except OSError:
        return []


def time_once(fn: Callable[[], Any]) -> float:
    gc.collect()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


# -- stores on disk -------------------------------------------------------------------------
def files_of(path: str) -> List[str]:
    if os.path.isfile(path):
        return [path]
    out = []
    for root, _dirs, files in os.walk(path):
        out.extend(os.path.join(root, f) for f in files)
    return out


def du(path: str) -> int:
    """Bytes of the files of a store (a file or a directory tree)."""
    return sum(os.path.getsize(f) for f in files_of(path))


def fsync_existing(paths: List[str]) -> None:
    """fsync each of ``paths`` (files or directories) in order, skipping those that no longer
    exist (a temporary file renamed since it was listed)."""
    for f in paths:
        try:
            fd = os.open(f, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def fsync_tree(path: str) -> None:
    """fsync every file of a store and its directories (what the paper does after every load)."""
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    dirs = [path] if os.path.isdir(path) else [os.path.dirname(path) or "."]
    if os.path.isdir(path):
        for root, ds, _ in os.walk(path):
            dirs.extend(os.path.join(root, d) for d in ds)
    for d in dirs:
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def drop_cache(path: str) -> None:
    """Evicts a store's pages from the page cache: fsync, then POSIX_FADV_DONTNEED on every file
    (the whole page cache cannot be dropped here)."""
    for f in files_of(path):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def fresh_dir(path: str) -> str:
    shutil.rmtree(path, ignore_errors=True)
    if os.path.exists(path):
        os.remove(path)
    os.makedirs(path, exist_ok=True)
    return path


def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


# -- machine limits -------------------------------------------------------------------------
def memcpy_bandwidth(nbytes: int = 512 << 20, reps: int = 5) -> float:
    """Bytes per second of copying ``nbytes`` between two preallocated buffers (one thread)."""
    src = np.ones(nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    t = measure(lambda: np.copyto(dst, src), reps=reps)
    return nbytes / t.median


def disk_bandwidth(dirpath: str, nbytes: int = 1 << 30, reps: int = 3, chunk: int = 8 << 20) -> Dict[str, float]:
    """Sequential write + fsync, warm read (from the page cache) and cold read (after
    POSIX_FADV_DONTNEED) of one ``nbytes`` file, in bytes per second (medians)."""
    path = os.path.join(dirpath, "limits-seq.bin")
    buf = np.random.default_rng(0).integers(0, 255, chunk, dtype=np.uint8).tobytes()

    def write() -> None:
        with open(path, "wb", buffering=0) as f:
            for _ in range(nbytes // chunk):
                f.write(buf)
            os.fsync(f.fileno())

    rbuf = bytearray(chunk)

    def read() -> None:
        with open(path, "rb", buffering=0) as f:
            while f.readinto(rbuf):
                pass

    w = measure(write, reps=reps, warmup=0, setup=lambda: remove(path))
    write()
    warm = measure(read, reps=reps, warmup=1)
    cold = measure(read, reps=reps, warmup=0, setup=lambda: drop_cache(path))
    remove(path)
    return {"seq_write_fsync": nbytes / w.median, "seq_read_warm": nbytes / warm.median,
            "seq_read_cold": nbytes / cold.median}


def codec_throughput(sample: bytes, reps: int = 3) -> Dict[str, Dict[str, float]]:
    """Single-core compression and decompression throughput (uncompressed bytes per second) and
    ratio of gzip-6 (zlib), zstd-3 and lz4 on ``sample``."""
    out: Dict[str, Dict[str, float]] = {}
    codecs: List[Any] = [("gzip-6", lambda b: zlib.compress(b, 6), zlib.decompress)]
    try:
        import zstandard

        zc = zstandard.ZstdCompressor(level=3, threads=0)
        zd = zstandard.ZstdDecompressor()
        codecs.append(("zstd-3", zc.compress, zd.decompress))
    except ImportError:
        pass
    try:
        import lz4.block

        codecs.append(("lz4", lz4.block.compress, lz4.block.decompress))
    except ImportError:
        pass
    mv = bytes(sample)
    for name, comp, decomp in codecs:
        c = comp(mv)
        tc = measure(lambda: comp(mv), reps=reps, warmup=0)
        td = measure(lambda: decomp(c), reps=reps, warmup=0)
        out[name] = {"compress": len(mv) / tc.median, "decompress": len(mv) / td.median, "ratio": len(mv) / len(c)}
    return out


def machine_limits(workdir: str, sample: Optional[bytes] = None, quick: bool = False) -> Dict[str, Any]:
    """The machine's limits, measured now: memcpy, sequential fsynced write, sequential read
    (warm and cold), single-core codec throughput on ``sample``."""
    lim: Dict[str, Any] = {"memcpy": memcpy_bandwidth(256 << 20 if quick else 1 << 30)}
    lim.update(disk_bandwidth(workdir, (256 << 20) if quick else (1 << 30)))
    if sample is not None:
        lim["codecs"] = codec_throughput(sample)
        for name, v in lim["codecs"].items():  # flat keys for the tables: "zstd-3 decompress"
            lim[f"{name} compress"] = v["compress"]
            lim[f"{name} decompress"] = v["decompress"]
    return lim


# -- facts ----------------------------------------------------------------------------------
def _version(mod: str) -> Optional[str]:
    try:
        m = __import__(mod)
        v = getattr(m, "__version__", None)
        if v is None:
            import importlib.metadata

            v = importlib.metadata.version(mod)
        return str(v)
    except Exception as e:  # noqa: BLE001 - a missing peer is reported, not fatal
        return f"unavailable: {type(e).__name__}: {e}"


def machine_facts() -> Dict[str, Any]:
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = int(line.split()[1]) * 1024
    except OSError:
        pass
    fs = "?"
    try:
        fs = subprocess.run(["df", "-T", REPO], capture_output=True, text=True, timeout=10).stdout.splitlines()[-1]
    except Exception:  # noqa: BLE001
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_bytes": mem, "platform": platform.platform(),
            "python": sys.version.split()[0], "filesystem": fs}


def versions() -> Dict[str, Optional[str]]:
    out = {m: _version(m) for m in ("tessera", "numpy", "tiledb", "h5py", "hdf5plugin", "zarr", "tensorstore",
                                    "duckdb", "pyarrow", "pandas", "matplotlib", "zstandard", "lz4", "numcodecs")}
    try:
        import tiledb

        out["libtiledb"] = ".".join(map(str, tiledb.libtiledb.version()))
    except Exception:  # noqa: BLE001
        pass
    try:
        import h5py

        out["libhdf5"] = h5py.version.hdf5_version
    except Exception:  # noqa: BLE001
        pass
    try:
        import tessera

        core = tessera._core.__file__
        out["tessera_core_built"] = dt.datetime.fromtimestamp(os.path.getmtime(core)).isoformat(timespec="seconds")
    except Exception:  # noqa: BLE001
        pass
    return out


# -- results --------------------------------------------------------------------------------
@dataclass
class Row:
    """One figure: a workload (``group``/``case``) run by one engine."""

    group: str  # e.g. "sparse-load", "dense-read"
    case: str  # e.g. "dense region 100K"
    engine: str  # e.g. "tessera+z"
    seconds: Optional[float]  # median; None when the engine could not run it
    runs: List[float] = field(default_factory=list)
    bytes: Optional[int] = None  # bytes moved (for MB/s) or stored
    cells: Optional[int] = None
    note: str = ""
    limit: Optional[str] = None  # the machine limit this figure is held against (key into limits)
    limit_bytes: Optional[int] = None  # bytes to divide by the limit's bandwidth (default: bytes)
    extra: Dict[str, Any] = field(default_factory=dict)


def fmt_time(s: Optional[float]) -> str:
    if s is None:
        return "n/a"
    if s < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if s < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def fmt_bytes(n: Optional[float]) -> str:
    if n is None:
        return "n/a"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.2f} {unit}"
    return f"{int(n)} B"


def fmt_rate(bps: Optional[float]) -> str:
    return "n/a" if bps is None else f"{bps / 1e6:,.0f} MB/s"


def limit_seconds(row: Row, limits: Dict[str, Any]) -> Optional[float]:
    """The time the machine's limit would take for this row's bytes."""
    if row.limit is None or row.seconds is None:
        return None
    bw = limits.get(row.limit)
    nb = row.limit_bytes if row.limit_bytes is not None else row.bytes
    if not bw or not nb:
        return None
    return nb / bw


def table(rows: Sequence[Row], limits: Dict[str, Any]) -> str:
    """A markdown table: one line per (group, case), one column per engine. Each figure comes
    with its ratio to the best engine of that line (the best in bold) and, where it applies, the
    share of the machine's limit it reaches ("[80% of memcpy]": the limit's time for the same
    bytes over the engine's time). Notes and failures are numbered footnotes."""
    engines: List[str] = []
    for r in rows:
        if r.engine not in engines:
            engines.append(r.engine)
    keys: List[Any] = []
    by: Dict[Any, Dict[str, Row]] = {}
    for r in rows:
        k = (r.group, r.case)
        if k not in by:
            keys.append(k)
            by[k] = {}
        by[k][r.engine] = r
    notes: List[str] = []

    def ref(note: str) -> str:
        if note not in notes:
            notes.append(note)
        return f"[{notes.index(note) + 1}]"

    lines = ["| workload | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    for k in keys:
        cells = by[k]
        vals = [r.seconds for r in cells.values() if r.seconds is not None]
        best = min(vals) if vals else None
        out = []
        for e in engines:
            r = cells.get(e)
            if r is None:
                out.append("")
                continue
            if r.seconds is None:
                out.append("n/a " + ref(r.note or "failed"))
                continue
            s = fmt_time(r.seconds)
            ratio = r.seconds / best if best else None
            s = f"**{s}**" if ratio is not None and ratio <= 1.0 + 1e-9 else f"{s} ({ratio:.2f}x)"
            lt = limit_seconds(r, limits)
            if lt is not None:
                s += f" [{100 * lt / r.seconds:.0f}% of {r.limit}]"
            if r.note:
                s += " " + ref(r.note)
            out.append(s)
        lines.append(f"| {k[0]}: {k[1]} | " + " | ".join(out) + " |")
    if notes:
        lines.append("")
        lines.extend(f"[{i + 1}] {n}  " for i, n in enumerate(notes))
    return "\n".join(lines)


def bytes_table(rows: Sequence[Row], raw: int) -> str:
    """Stored bytes per (group, engine), with the ratio to the raw data."""
    engines: List[str] = []
    groups: List[str] = []
    by: Dict[Any, Row] = {}
    for r in rows:
        if r.engine not in engines:
            engines.append(r.engine)
        if r.group not in groups:
            groups.append(r.group)
        by[(r.group, r.engine)] = r
    lines = ["| stored | " + " | ".join(engines) + " |", "|---|" + "---|" * len(engines)]
    for g in groups:
        cells = []
        for e in engines:
            r = by.get((g, e))
            cells.append("" if r is None or not r.bytes else f"{fmt_bytes(r.bytes)} ({raw / r.bytes:.2f}x)")
        lines.append(f"| {g} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_json(path: str, obj: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)

    def default(o: Any) -> Any:
        if isinstance(o, Row):
            return asdict(o)
        if isinstance(o, (np.integer,)):
            return int(o)
        if isinstance(o, (np.floating,)):
            return float(o)
        if isinstance(o, np.ndarray):
            return o.tolist()
        raise TypeError(type(o))

    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=default)


def default_workdir() -> str:
    """Where stores are written: $TESSERA_BENCH_DIR, else bench/out/data (on the same disk as the
    repository; not /dev/shm or tmpfs, so fsync means something)."""
    return os.environ.get("TESSERA_BENCH_DIR") or os.path.join(HERE, "out", "data")


def log(*a: Any) -> None:
    print(*a, flush=True)




