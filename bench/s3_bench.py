"""Object storage benchmark (issue 16): Tessera against Zarr v3 (object-store backends) and
TileDB-Py on one local S3 server, same data, same codec, same chunk/tile shape, in one run.

The server is this workspace's ``tessera-s3-server`` (a SigV4 S3 server over a folder, built by
``make build``), started on a temporary folder and stopped at the end. Every engine talks HTTP
to it on loopback, so the numbers measure the engines' S3 clients (requests, sizes, concurrency)
plus the server, not a network.

Data: a dense 2-D float64 array (a smooth field plus a little noise: compressible, not
trivially), chunks/tiles of ``--tile`` x ``--tile``, stored without compression and with zstd
(level 3) in turn. Workloads, each repeated ``--reps`` times with a fresh handle / context /
store every time (no engine cache survives from one repetition to the next):

    write       create the array and write all of it (a new array every repetition)
    read all    the whole array
    1 tile      one tile
    4x4 tiles   a 4 x 4-tile region, tile-aligned
    row strip   rows tile/2 .. tile-1, every column (half of each tile of the first tile row)

Every read is compared with numpy (exact: the codecs are lossless); a mismatch aborts. The
server's request counts (its ``/__tessera/counts`` endpoint) are reset before each workload and
read after it, and reported per repetition. For Tessera, one extra untimed repetition with
``ts.stats`` on records the engine's own request counters.

    python bench/s3_bench.py                 # 4096 x 4096 (128 MiB), 5 repetitions
    python bench/s3_bench.py --quick         # 2048 x 2048 (32 MiB)
    python bench/s3_bench.py --latency-ms 0  # loopback only (default: 0,20)

Every workload runs once per ``--latency-ms`` value on a fresh server: 0 is the loopback
server as is, 20 delays every request by 20 ms before the server runs it (as a remote
store's round trip would), which shows what an engine's sequential requests cost.

Writes bench/out/s3.json and bench/out/s3.md (the markdown table). The server binary is
$TESSERA_S3_SERVER, else this checkout's target/release/tessera-s3-server (built with cargo
when missing).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime as dt
import functools
import gc
import json
import logging
import os
import platform
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Callable, Counter, Dict, Iterator, List, Optional, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
ACCESS_KEY = "tessera-test"
SECRET_KEY = "tessera-test-secret"
REGION = "us-east-1"
ZSTD_LEVEL = 3

Sel = Tuple[slice, slice]


# -- the server ---------------------------------------------------------------------------
class Server:
    """A running tessera-s3-server: endpoint, bucket, and its request counts."""

    def __init__(self, endpoint: str, bucket: str) -> None:
        self.endpoint = endpoint
        self.bucket = bucket
        self.host_port = endpoint.split("://", 1)[1]

    def _control(self, method: str) -> Dict[str, Any]:
        req = urllib.request.Request(f"{self.endpoint}/__tessera/counts", method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            result: Dict[str, Any] = json.loads(resp.read())
            return result

    def counts(self) -> Dict[str, int]:
        """Requests per S3 operation since the last reset."""
        return {k: v for k, v in self._control("GET")["requests"].items() if v}

    def reset_counts(self) -> None:
        self._control("DELETE")


def server_binary() -> str:
    """$TESSERA_S3_SERVER, else target/release/tessera-s3-server (built when missing)."""
    env = os.environ.get("TESSERA_S3_SERVER")
    if env:
        return env
    path = os.path.join(REPO, "target", "release", "tessera-s3-server")
    if not os.access(path, os.X_OK):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tessera-s3-server"], cwd=REPO, check=True)
    return path


@contextlib.contextmanager
def running_server(root: str, bucket: str, latency_ms: int = 0) -> Iterator[Server]:
    """Start the server on a free loopback port over ``root``; stop it on exit. The server exits
    by itself when its stdin closes, so a killed benchmark cannot leak it. With ``latency_ms``
    every request waits that long before the server runs it (a remote store's round trip)."""
    cmd = [server_binary(), "--root", root, "--bucket", bucket, "--access-key", ACCESS_KEY,
           "--secret-key", SECRET_KEY]
    if latency_ms > 0:
        cmd += ["--slow-rate", "1", "--slow-ms", str(latency_ms)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = b""
        deadline = time.monotonic() + 30
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n") and time.monotonic() < deadline:
                if not sel.select(max(deadline - time.monotonic(), 0)):
                    break
                ch = os.read(proc.stdout.fileno(), 1)
                if not ch:
                    break
                line += ch
        text = line.decode(errors="replace").strip()
        if not text.startswith("listening http://"):
            raise RuntimeError(f"tessera-s3-server did not start (stdout {text!r})")
        yield Server(text.split(" ", 1)[1], bucket)
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


# -- engines ------------------------------------------------------------------------------
class Engine:
    """One engine on the server: ``write`` creates an array at ``key`` and writes ``data``;
    ``read`` opens it afresh and reads ``sel``."""

    name = ""
    backend = ""

    def __init__(self, srv: Server, tile: int) -> None:
        self.srv = srv
        self.tile = tile

    def write(self, key: str, data: np.ndarray, zstd: bool) -> None:
        raise NotImplementedError

    def read(self, key: str, sel: Sel) -> np.ndarray:
        raise NotImplementedError


class TesseraEngine(Engine):
    """Tessera: ``ts.create`` + ``ts.open(uri, "w")`` + ``A[...] = data``; reads ``A[r0:r1, c0:c1]``
    through a new ``ts.open`` with the tile cache off."""

    name = "tessera"

    def __init__(self, srv: Server, tile: int, extra: Optional[Dict[str, str]] = None) -> None:
        super().__init__(srv, tile)
        import tessera as ts

        self.ts = ts
        self.backend = f"built-in object_store client (tessera {getattr(ts, '__version__', '?')})"
        self.config = {
            "vfs.s3.endpoint": srv.endpoint, "vfs.s3.region": REGION, "vfs.s3.access_key_id": ACCESS_KEY,
            "vfs.s3.secret_access_key": SECRET_KEY, "vfs.s3.allow_http": "true", "sm.tile_cache_size": "0",
        }
        self.config.update(extra or {})
        if extra:
            self.backend += f", config {extra}"

    def uri(self, key: str) -> str:
        return f"s3://{self.srv.bucket}/{key}"

    def write(self, key: str, data: np.ndarray, zstd: bool) -> None:
        ts = self.ts
        filters = [ts.Zstd(level=ZSTD_LEVEL)] if zstd else []
        rows, cols = data.shape
        schema = ts.ArraySchema(
            dims=[ts.Dim("r", (0, rows - 1), tile=self.tile, dtype="int64"),
                  ts.Dim("c", (0, cols - 1), tile=self.tile, dtype="int64")],
            attrs=[ts.Attr("a", "float64", filters=filters)])
        ts.create(self.uri(key), schema, config=self.config)
        with ts.open(self.uri(key), "w", config=self.config) as A:
            A[0:rows, 0:cols] = data

    def read(self, key: str, sel: Sel) -> np.ndarray:
        with self.ts.open(self.uri(key), config=self.config) as A:
            out = A[sel]
        return out["a"] if isinstance(out, dict) else np.asarray(out)


class ZarrEngine(Engine):
    """Zarr v3: ``zarr.create_array`` (chunks = the tiles, no filters, no compressor or
    ZstdCodec(3)) + ``z[...] = data``; reads ``zarr.open_array(store)[sel]``, a new store each
    time. ``kind``: "obstore" (zarr.storage.ObjectStore over obstore's S3Store) or "s3fs"
    (zarr.storage.FsspecStore over s3fs)."""

    def __init__(self, srv: Server, tile: int, kind: str) -> None:
        super().__init__(srv, tile)
        import zarr

        self.zarr = zarr
        self.kind = kind
        self.name = f"zarr+{kind}"
        if kind == "obstore":
            import obstore

            self.backend = f"zarr {zarr.__version__}, zarr.storage.ObjectStore, obstore {obstore.__version__} S3Store"
        else:
            import s3fs

            # s3fs's asynchronous stores are dropped without closing their aiohttp sessions:
            # asyncio logs "Unclosed connector" at garbage collection, which is noise here.
            logging.getLogger("asyncio").setLevel(logging.CRITICAL)
            self.backend = f"zarr {zarr.__version__}, zarr.storage.FsspecStore, s3fs {s3fs.__version__}"

    def store(self, key: str, read_only: bool) -> Any:
        zarr = self.zarr
        if self.kind == "obstore":
            from obstore.store import S3Store

            s3 = S3Store(self.srv.bucket, prefix=key, endpoint=self.srv.endpoint, region=REGION,
                         access_key_id=ACCESS_KEY, secret_access_key=SECRET_KEY,
                         virtual_hosted_style_request=False, client_options={"allow_http": True})
            return zarr.storage.ObjectStore(s3, read_only=read_only)
        opts = {"key": ACCESS_KEY, "secret": SECRET_KEY, "endpoint_url": self.srv.endpoint,
                "client_kwargs": {"region_name": REGION}, "skip_instance_cache": True, "asynchronous": True}
        return zarr.storage.FsspecStore.from_url(f"s3://{self.srv.bucket}/{key}", storage_options=opts,
                                                 read_only=read_only)

    def write(self, key: str, data: np.ndarray, zstd: bool) -> None:
        from zarr.codecs import ZstdCodec

        comp = ZstdCodec(level=ZSTD_LEVEL) if zstd else None
        z = self.zarr.create_array(store=self.store(key, False), shape=data.shape, chunks=(self.tile, self.tile),
                                   dtype="float64", compressors=comp, filters=None, fill_value=0.0)
        z[...] = data

    def read(self, key: str, sel: Sel) -> np.ndarray:
        z = self.zarr.open_array(store=self.store(key, True), mode="r")
        return np.asarray(z[sel])


class TileDBEngine(Engine):
    """TileDB-Py: ``tiledb.Array.create`` + ``tiledb.open(uri, "w")[:] = data``; reads
    ``tiledb.open(uri)[sel]`` with a new context (tile cache off) each time."""

    name = "tiledb"

    def __init__(self, srv: Server, tile: int) -> None:
        super().__init__(srv, tile)
        import tiledb

        self.tiledb = tiledb
        lib = ".".join(map(str, tiledb.libtiledb.version()))
        self.backend = f"tiledb-py {tiledb.version.version} (libtiledb {lib})"

    def ctx(self) -> Any:
        return self.tiledb.Ctx(self.tiledb.Config({
            "vfs.s3.endpoint_override": self.srv.host_port, "vfs.s3.scheme": "http",
            "vfs.s3.use_virtual_addressing": "false", "vfs.s3.aws_access_key_id": ACCESS_KEY,
            "vfs.s3.aws_secret_access_key": SECRET_KEY, "vfs.s3.region": REGION, "sm.tile_cache_size": "0",
        }))

    def uri(self, key: str) -> str:
        return f"s3://{self.srv.bucket}/{key}"

    def write(self, key: str, data: np.ndarray, zstd: bool) -> None:
        tdb = self.tiledb
        ctx = self.ctx()
        rows, cols = data.shape
        filters = tdb.FilterList([tdb.ZstdFilter(level=ZSTD_LEVEL)] if zstd else [])
        dom = tdb.Domain(tdb.Dim("r", domain=(0, rows - 1), tile=self.tile, dtype=np.int64, ctx=ctx),
                         tdb.Dim("c", domain=(0, cols - 1), tile=self.tile, dtype=np.int64, ctx=ctx), ctx=ctx)
        schema = tdb.ArraySchema(domain=dom, sparse=False, attrs=[tdb.Attr("a", dtype=np.float64, filters=filters,
                                                                          ctx=ctx)], ctx=ctx)
        tdb.Array.create(self.uri(key), schema, ctx=ctx)
        with tdb.open(self.uri(key), "w", ctx=ctx) as A:
            A[:] = data

    def read(self, key: str, sel: Sel) -> np.ndarray:
        with self.tiledb.open(self.uri(key), ctx=self.ctx()) as A:
            out = A[sel]
        return out["a"] if isinstance(out, dict) else np.asarray(out)


# Tessera with its object-store reads split and spread (see docs/benchmarks.md, "Object storage"):
# coalesced reads of at most 8 MiB instead of the whole fragment, 8 reads in flight instead of one
# per core; and bodies sent unsigned (UNSIGNED-PAYLOAD) as TileDB-Py sends them here (its server
# side shows no SHA-256 work), where Tessera's default signs every body over plain HTTP. Engine
# settings only, no engine change.
TESSERA_TUNED = {"vfs.coalesce_max": str(8 << 20), "sm.io_concurrency": "8", "vfs.s3.unsigned_payload": "true"}


def make_engine(name: str, srv: Server, tile: int, tessera_config: Dict[str, str]) -> Engine:
    if name == "tessera":
        return TesseraEngine(srv, tile, tessera_config)
    if name == "tessera+tuned":
        eng = TesseraEngine(srv, tile, {**TESSERA_TUNED, **tessera_config})
        eng.name = name
        return eng
    if name == "tiledb":
        return TileDBEngine(srv, tile)
    if name in ("zarr+obstore", "zarr+s3fs"):
        return ZarrEngine(srv, tile, name.split("+", 1)[1])
    raise SystemExit(f"unknown engine {name!r} (tessera, tessera+tuned, zarr+obstore, zarr+s3fs, tiledb)")


# -- data and workloads -------------------------------------------------------------------
def make_data(rows: int, cols: int) -> np.ndarray:
    """A smooth field plus small noise: compressible, but not runs of equal bytes."""
    r = np.linspace(0.0, 8.0 * np.pi, rows)[:, None]
    c = np.linspace(0.0, 6.0 * np.pi, cols)[None, :]
    field = np.sin(r) * np.cos(c) + 0.25 * np.sin(0.3 * r + 0.7 * c)
    noise = np.random.default_rng(16).normal(0.0, 1e-3, size=(rows, cols))
    # Rounded to 1e-4: the low mantissa bytes repeat, as in most measured data.
    return np.round(field + noise, 4)


def read_selections(rows: int, cols: int, tile: int) -> Dict[str, Sel]:
    """The read workloads: name -> (row slice, column slice)."""
    region = min(4 * tile, rows - tile, cols - tile)
    r0 = tile // 2
    return {
        "read all": (slice(0, rows), slice(0, cols)),
        "1 tile": (slice(tile, 2 * tile), slice(tile, 2 * tile)),
        "4x4 tiles": (slice(tile, tile + region), slice(tile, tile + region)),
        "row strip": (slice(r0, r0 + tile // 2), slice(0, cols)),
    }


def timed(fn: Callable[[], Any]) -> float:
    """Seconds of one call of fn, garbage collector off inside it."""
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t
    finally:
        gc.enable()


Runs = Dict[str, Tuple[List[float], Counter[str]]]


def interleaved(srv: Server, calls: Dict[str, Callable[[int], Any]], reps: int) -> Runs:
    """``reps`` timed calls of each engine's fn(i), engines in turns (A B C, then B C A, ...) so
    background load hits them alike; the server's request counts of each call, summed per engine.
    Dirty pages are written back (untimed) before each call: otherwise the kernel's writeback of
    earlier writes (several GB over a run) lands in whichever call comes next."""
    names = list(calls)
    out: Runs = {n: ([], collections.Counter()) for n in names}
    for i in range(reps):
        for n in names[i % len(names):] + names[:i % len(names)]:
            srv.reset_counts()
            os.sync()
            out[n][0].append(timed(functools.partial(calls[n], i)))
            out[n][1].update(srv.counts())
    return out


def tessera_counters(eng: TesseraEngine, fn: Callable[[], Any]) -> Dict[str, int]:
    """Tessera's own object-store counters over one untimed call of ``fn``."""
    st = eng.ts.stats
    st.reset()
    st.enable()
    try:
        fn()
    finally:
        st.disable()
    counters = st.json()["counters"]
    st.reset()
    return {k: v for k, v in counters.items() if k.startswith("vfs_object") and v}


def result_row(eng: str, codec: str, workload: str, runs: List[float], nbytes: int, counts: Counter[str],
               extra: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    med, best = statistics.median(runs), min(runs)
    r = {"engine": eng, "codec": codec, "workload": workload, "runs_s": runs, "median_s": med, "min_s": best,
         "bytes": nbytes, "mb_s_median": nbytes / med / 1e6, "mb_s_best": nbytes / best / 1e6,
         "requests_per_rep": {k: round(v / len(runs), 2) for k, v in sorted(counts.items())}}
    r.update(extra or {})
    print(f"  {codec:6s} {workload:10s} {eng:13s} median {med:7.3f} s  {r['mb_s_median']:8.1f} MB/s  "
          f"requests/rep {r['requests_per_rep']}", flush=True)
    return r


def bench_codec(engines: List[Engine], srv: Server, data: np.ndarray, zstd: bool, reps: int) -> List[Dict[str, Any]]:
    """Every workload with one codec, engines in turns; returns result rows (engine order)."""
    codec = f"zstd-{ZSTD_LEVEL}" if zstd else "none"
    by_name = {e.name: e for e in engines}
    key = {e.name: f"arrays/{e.name}-{codec}" for e in engines}
    rows: List[Dict[str, Any]] = []
    def write(e: Engine, i: int) -> None:
        e.write(f"{key[e.name]}-{i}", data, zstd)

    writes = interleaved(srv, {e.name: functools.partial(write, e) for e in engines}, reps)
    for n, (runs, counts) in writes.items():
        key[n] = f"{key[n]}-{reps - 1}"  # reads use the last array written
        rows.append(result_row(n, codec, "write", runs, data.nbytes, counts,
                               {"stored_bytes": stored_bytes(srv, key[n])}))
    for workload, sel in read_selections(data.shape[0], data.shape[1], engines[0].tile).items():
        expect = data[sel]

        def check(e: Engine, _i: int = 0, sel: Sel = sel, expect: np.ndarray = expect,
                  workload: str = workload) -> None:
            got = e.read(key[e.name], sel)
            if got.shape != expect.shape or not np.array_equal(got, expect):
                raise SystemExit(f"MISMATCH: {e.name} {codec} {workload}: read differs from the data written")

        reads = interleaved(srv, {e.name: functools.partial(check, e) for e in engines}, reps)
        for n, (runs, counts) in reads.items():
            eng = by_name[n]
            extra: Dict[str, Any] = {}
            if isinstance(eng, TesseraEngine):
                extra["tessera_counters"] = tessera_counters(eng, functools.partial(check, eng))
            rows.append(result_row(n, codec, workload, runs, expect.nbytes, counts, extra))
    order = {e.name: i for i, e in enumerate(engines)}
    return sorted(rows, key=lambda r: order[r["engine"]])


def stored_bytes(srv: Server, key: str) -> int:
    """Bytes under bucket/key in the server's folder (set by main)."""
    path = os.path.join(STORE_ROOT[0], srv.bucket, key)
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.path.getsize(os.path.join(d, f))
    return total


STORE_ROOT: List[str] = [""]


# -- report -------------------------------------------------------------------------------
def markdown(results: List[Dict[str, Any]], meta: Dict[str, Any]) -> str:
    """One table per server latency of the run (runs before latencies existed: loopback only)."""
    intro = (f"{meta['rows']:,} x {meta['cols']:,} float64 ({meta['nbytes'] / 2**20:.0f} MiB), tiles/chunks "
             f"{meta['tile']} x {meta['tile']} ({meta['tile'] ** 2 * 8 / 2**20:.0f} MiB), {meta['reps']} "
             "repetitions, fresh handle each; MB = 10^6 bytes of the selection (uncompressed); requests: "
             "server-side, per repetition.")
    lines = [intro]
    for latency in sorted({r.get("latency_ms", 0) for r in results}):
        lines += ["", f"#### {'Loopback' if latency == 0 else f'Every request delayed {latency} ms'}", ""]
        if latency:
            lines += [f"The server waits {latency} ms before it runs each request, as a remote store's round trip "
                      "would: requests an engine sends one after another add up.", ""]
        lines += ["| codec | workload | engine | median s | min s | MB/s (median) | MB/s (best) | requests / rep |",
                  "|---|---|---|---:|---:|---:|---:|---|"]
        for r in results:
            if r.get("latency_ms", 0) != latency:
                continue
            req = ", ".join(f"{k} {v:g}" for k, v in r["requests_per_rep"].items())
            lines.append(f"| {r['codec']} | {r['workload']} | {r['engine']} | {r['median_s']:.3f} | {r['min_s']:.3f} | "
                         f"{r['mb_s_median']:.0f} | {r['mb_s_best']:.0f} | {req} |")
    return "\n".join(lines) + "\n"


S3_HEADING = "\n## Object storage (S3)\n"


def write_docs(md: str, meta: Dict[str, Any], path: str) -> None:
    """Rewrite the "Object storage (S3)" section of docs/benchmarks.md (its heading to the end of
    the page; bench/run.py keeps it): the hand-written bench/s3_analysis.md, then this run's table."""
    with open(path) as f:
        page = f.read()
    at = page.find(S3_HEADING)
    head = (page if at < 0 else page[:at]).rstrip("\n") + "\n"
    with open(os.path.join(HERE, "s3_analysis.md")) as f:
        analysis = f.read().strip()
    backends = "\n".join(f"- `{k}`: {v}" for k, v in meta["backends"].items())
    table = (f"### Latest run ({meta['date']}, load average {meta['load_average'][0]:.1f} at the start, "
             f"{meta['load_average'][1]:.1f} at the end, "
             f"{meta['wall_s']:.0f} s)\n\n{backends}\n\n{md}")
    with open(path, "w") as f:
        f.write(head + S3_HEADING + "\n" + analysis + "\n\n" + table)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2048 x 2048 (32 MiB)")
    ap.add_argument("--engines", default="tessera,tessera+tuned,zarr+obstore,tiledb",
                    help="of tessera, tessera+tuned, zarr+obstore, zarr+s3fs (slower than obstore here), tiledb")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    ap.add_argument("--codecs", default="none,zstd")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--tessera-config", action="append", default=[], metavar="KEY=VALUE",
                    help="an extra Tessera config entry (repeatable), e.g. vfs.coalesce_max=8388608")
    ap.add_argument("--latency-ms", default="0,20",
                    help="comma-separated: one run per value, the server delaying every request by that many ms "
                         "(a remote store's round trip; 0: loopback as is)")
    ap.add_argument("--docs-only", action="store_true",
                    help="no benchmark: rewrite the docs section from OUT/s3.json and bench/s3_analysis.md")
    args = ap.parse_args(argv)
    if args.docs_only:
        with open(os.path.join(args.out, "s3.json")) as f:
            saved = json.load(f)
        page = os.path.join(REPO, "docs", "benchmarks.md")
        write_docs(markdown(saved["results"], saved["meta"]), saved["meta"], page)
        return 0
    if args.quick:
        args.rows = args.cols = 2048
    if args.rows < 2 * args.tile or args.cols < 2 * args.tile:
        raise SystemExit("--rows and --cols must be at least twice --tile")
    data = make_data(args.rows, args.cols)
    results: List[Dict[str, Any]] = []
    started, load_start = time.time(), os.getloadavg()[0]
    latencies = [int(v) for v in str(args.latency_ms).split(",") if v.strip()]
    tcfg = dict(kv.split("=", 1) for kv in args.tessera_config)
    backends: Dict[str, str] = {}
    for latency in latencies:
        with tempfile.TemporaryDirectory(prefix="tessera-s3-bench-") as root, \
                running_server(root, "bench", latency) as srv:
            STORE_ROOT[0] = root
            engines = [make_engine(n.strip(), srv, args.tile, tcfg) for n in args.engines.split(",") if n.strip()]
            backends.update({e.name: e.backend for e in engines})
            print(f"server {srv.endpoint} (latency {latency} ms); data {data.shape} float64 "
                  f"{data.nbytes / 2**20:.0f} MiB; tile {args.tile}; reps {args.reps}", flush=True)
            for codec in args.codecs.split(","):
                for r in bench_codec(engines, srv, data, codec.strip() == "zstd", args.reps):
                    r["latency_ms"] = latency
                    results.append(r)
    meta = {"date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "rows": args.rows,
            "cols": args.cols, "tile": args.tile, "reps": args.reps, "nbytes": data.nbytes,
            "zstd_level": ZSTD_LEVEL, "latencies_ms": latencies, "backends": backends,
            "python": platform.python_version(),
            "cpus": os.cpu_count(), "load_average": [load_start, os.getloadavg()[0]],
            "wall_s": round(time.time() - started, 1)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "s3.json"), "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    md = markdown(results, meta)
    with open(os.path.join(args.out, "s3.md"), "w") as f:
        f.write(md)
    print(md)
    if not args.no_docs:
        write_docs(md, meta, os.path.join(REPO, "docs", "benchmarks.md"))
    print(f"wall {meta['wall_s']} s; wrote {os.path.join(args.out, 's3.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
