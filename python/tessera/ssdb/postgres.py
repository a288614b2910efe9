"""SS-DB on PostgreSQL + PostGIS: the relational baseline (the role MySQL played in the paper).

``python -m tessera.ssdb.postgres --config micro --dir D`` starts its own server (``initdb`` and
``pg_ctl`` in a temporary folder under D, listening on 127.0.0.1 on a free port; as the
``postgres`` user when run as root, in the system's temporary folder if that user cannot reach
D), runs SS-DB and writes ``D/report.json`` in the shape of
SSDB.md §5, then stops the server and removes its folder, also on an error or Ctrl-C.

Schema, after the paper's MySQL design (§IV.B):

- one table per raw image, ``raw_TTTT(tile, y, x, pix, var, valid, sat, v0..v6)`` in local
  coordinates, a row per pixel, with a B-tree primary key ``(tile, y, x)`` where ``tile`` is the
  100 x 100 tile of the cell (the MySQL tables were clustered on such a tile id); rows are loaded
  with ``COPY`` (binary) in key order, so the heap is clustered too. ``images(t, tbl, llc_x,
  llc_y)`` lists them.
- ``observations(id, t, cycle, cx, cy, pixelsum, avgdist, xmin, ymin, xmax, ymax, vertices,
  center, polygon, ring)``: cooked outside the database, as the MySQL design did (with the
  reference cooker, ``tessera.ssdb.reference.cook``, on the pixels read back from the image
  tables), loaded with ``COPY``. ``polygon`` is the PostGIS polygon of the boundary B (a point
  or a line when B has fewer than 3 vertices), ``ring`` the closed boundary line; GiST indexes
  on ``center`` and ``polygon``, B-tree on ``cycle``.
- ``group_members(gid, obs_id)`` from the reference grouper (F2), loaded with ``COPY``; then in
  SQL: ``groups(gid, n, sumcx, sumcy, traj)`` with the trajectory line of the member centres
  (GiST), and ``group_trajectory(gid, t1, t2, geom, ring)`` for Q9 (the MySQL GroupTrajectory
  table): the convex hull of the members' polygons at consecutive distinct times, or each
  member's polygon for a group seen at one time (GiST). Singletons are stored as groups.

Queries (§4) are SQL, with exact integer conditions: Q1 sums; Q2 reads the slab, cooks it
outside (threshold 900) and stores the observations; Q3 regrids in SQL (a join with the 10:3
weight table, exact numeric rounding) into a result table; Q4 centres in the slab; Q5 polygons
(``ring`` meets the box, or the box's corner lies in ``polygon``: PostGIS's point-in-polygon
counts the winding number, so this is §4's closed non-zero-winding region); Q6 fetches the
slab's centres by SQL and counts the windows with prefix sums outside; Q7 exact group centres;
Q8 trajectories; Q9 ``group_trajectory``; the Q8/Q9 windows are read from the image tables,
one query per image meeting the slab.

Durability: the benchmark measures loading and querying, not crash safety, so the server runs
with ``fsync = off``, ``synchronous_commit = off`` and ``full_page_writes = off`` (``--fsync``
turns the three back on). Between query runs the server is restarted (its shared buffers are
lost) and the cluster's files are evicted from the OS page cache with
``posix_fadvise(POSIX_FADV_DONTNEED)`` (``--warm`` skips both).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from tessera.ssdb import reference as ref
from tessera.ssdb import tiles as sky

PG_BIN_CANDIDATES = ("/usr/lib/postgresql/15/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/17/bin")
TILE = 100  # pixel tables are keyed by 100 x 100 tiles, as the MySQL design
SERVER_USER = "postgres"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL, PostGIS or psycopg is missing, or the server cannot be started."""


def pg_bindir() -> Path:
    """The folder of ``initdb``/``pg_ctl``: ``$PG_BINDIR``, Debian's, or ``pg_config --bindir``."""
    env = os.environ.get("PG_BINDIR")
    cands = [env] if env else []
    cands += list(PG_BIN_CANDIDATES)
    pg_config = shutil.which("pg_config")
    if pg_config:
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            cands.append(
                subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True).stdout.strip()
            )
    for c in cands:
        if c and (Path(c) / "initdb").is_file() and (Path(c) / "pg_ctl").is_file():
            return Path(c)
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found; `make ssdb-deps` installs them "
        "(Debian: postgresql-15-postgis-3), or set PG_BINDIR"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """A private PostgreSQL cluster in ``root`` (created, started, restarted, stopped)."""

    def __init__(self, root: Path, fsync: bool = False) -> None:
        self.bindir = pg_bindir()
        self.root = root
        self.data = root / "data"
        self.log = root / "server.log"
        self.port = _free_port()
        self.running = False
        self.user: Optional[str] = None
        if os.geteuid() == 0:  # initdb refuses root: run the server as the postgres user
            try:
                pw = pwd.getpwnam(SERVER_USER)
            except KeyError as e:
                raise PostgresUnavailable(f"running as root and there is no {SERVER_USER!r} user") from e
            os.chown(root, pw.pw_uid, pw.pw_gid)
            self.user = SERVER_USER
        self._run(
            [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "ssdb", "--auth=trust", "-E", "UTF8",
             "--locale=C", "--no-sync"]
        )  # fmt: skip
        durable = "on" if fsync else "off"
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(
                f"\n# tessera.ssdb.postgres\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{root}'\nfsync = {durable}\nsynchronous_commit = {durable}\n"
                f"full_page_writes = {durable}\nmax_wal_size = 4GB\nwork_mem = 64MB\n"
            )

    def _run(self, args: List[str]) -> None:
        p = subprocess.run(args, capture_output=True, text=True, user=self.user, cwd=self.root)
        if p.returncode != 0:
            raise PostgresUnavailable(
                f"{Path(args[0]).name} failed ({p.returncode}): {p.stderr.strip() or p.stdout.strip()}"
            )

    def start(self) -> None:
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start"])
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop"])
            self.running = False

    def evict(self) -> None:
        """Drops the cluster's files from the OS page cache: each is written back (fdatasync: the
        server ran without fsync, and DONTNEED drops clean pages only), then POSIX_FADV_DONTNEED."""
        for dirpath, _, files in os.walk(self.data):
            for name in files:
                with contextlib.suppress(OSError):
                    fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
                    try:
                        os.fdatasync(fd)  # DONTNEED drops clean pages only
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    finally:
                        os.close(fd)

    def restart_cold(self) -> None:
        self.stop()
        self.evict()
        self.start()

    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=ssdb dbname=postgres"


def _traversable_by_others(path: Path) -> bool:
    """Whether every folder from / to ``path`` lets other users through (o+x)."""
    p = path.resolve()
    return all(os.stat(q).st_mode & 0o001 for q in [p, *p.parents])


@contextlib.contextmanager
def server(parent: Path, fsync: bool = False) -> Iterator[Server]:
    """A started server in a temporary folder under ``parent``; always stopped and removed."""
    parent.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0 and not _traversable_by_others(parent):
        parent = Path(tempfile.gettempdir())  # the server's user could not reach a folder under it
    root = Path(tempfile.mkdtemp(prefix="tessera-ssdb-pg.", dir=parent))
    srv: Optional[Server] = None
    previous = signal.getsignal(signal.SIGTERM)

    def on_term(signum: int, frame: Optional[FrameType]) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    main_thread = threading.current_thread() is threading.main_thread()  # signals: main thread only
    try:
        if main_thread:
            signal.signal(signal.SIGTERM, on_term)
        srv = Server(root, fsync)
        srv.start()
        yield srv
    finally:
        try:
            if srv is not None:
                srv.stop()
        finally:
            if main_thread:
                signal.signal(signal.SIGTERM, previous)
            shutil.rmtree(root, ignore_errors=True)


# --- loading -----------------------------------------------------------------------------------

PIXEL_COLUMNS = ("tile", "y", "x", *ref.ATTRS)


def _binary_copy(columns: Dict[str, np.ndarray]) -> bytes:
    """A PostgreSQL binary COPY stream of int4 columns (all the same length)."""
    names = list(columns)
    n = len(columns[names[0]])
    dtype = np.dtype([("count", ">i2")] + [f for c in names for f in ((f"{c}_len", ">i4"), (c, ">i4"))])
    rows = np.empty(n, dtype=dtype)
    rows["count"] = len(names)
    for c in names:
        rows[f"{c}_len"] = 4
        rows[c] = columns[c]
    return b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8 + rows.tobytes() + b"\xff\xff"


def _read_binary(cur: Any, sql: str, ncols: int) -> np.ndarray:
    """Rows of ``ncols`` non-null int4 columns from ``COPY (sql) TO STDOUT (FORMAT binary)``."""
    with cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT binary)") as cp:
        data = b"".join(bytes(block) for block in cp)
    head = 19  # signature 11, flags 4, extension length 4 (0)
    if data[:11] != b"PGCOPY\n\xff\r\n\x00" or data[15:19] != b"\x00" * 4 or data[-2:] != b"\xff\xff":
        raise RuntimeError(f"unexpected binary COPY framing from: {sql}")
    body = data[head:-2]
    dtype = np.dtype([("count", ">i2")] + [f for i in range(ncols) for f in ((f"l{i}", ">i4"), (f"c{i}", ">i4"))])
    rows = np.frombuffer(body, dtype=dtype)
    return (
        np.stack([rows[f"c{i}"].astype(np.int64) for i in range(ncols)], axis=1)
        if len(rows)
        else np.zeros((0, ncols), np.int64)
    )


def _tiles_per_row(side: int) -> int:
    return -(-side // TILE)


def create_schema(cur: Any) -> None:
    cur.execute("CREATE EXTENSION IF NOT EXISTS postgis")
    cur.execute("CREATE TABLE images (t int PRIMARY KEY, tbl text NOT NULL, llc_x int NOT NULL, llc_y int NOT NULL)")


def load_image(cur: Any, cfg: ref.Config, t: int, img: ref.Image, llc: ref.Point) -> None:
    """Image t into its own table, by binary COPY in (tile, y, x) order, then its B-tree key."""
    tbl = f"raw_{t:04d}"
    cols = ", ".join(f"{c} int NOT NULL" for c in PIXEL_COLUMNS)
    cur.execute(f"CREATE TABLE {tbl} ({cols})")
    s = cfg.side
    ys, xs = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")
    tile = (ys // TILE) * _tiles_per_row(s) + xs // TILE
    order = np.lexsort((xs.ravel(), ys.ravel(), tile.ravel()))
    columns = {"tile": tile.ravel()[order], "y": ys.ravel()[order], "x": xs.ravel()[order]}
    for a in ref.ATTRS:
        columns[a] = img[a].ravel()[order]
    with cur.copy(f"COPY {tbl} ({', '.join(PIXEL_COLUMNS)}) FROM STDIN (FORMAT binary)") as cp:
        cp.write(_binary_copy(columns))
    cur.execute(f"ALTER TABLE {tbl} ADD PRIMARY KEY (tile, y, x)")
    cur.execute("INSERT INTO images VALUES (%s, %s, %s, %s)", (t, tbl, llc[0], llc[1]))


def _tiles_of(cfg: ref.Config, x0: int, y0: int, x1: int, y1: int) -> List[int]:
    """The tile ids of the local box [x0, x1) x [y0, y1)."""
    per = _tiles_per_row(cfg.side)
    return [
        ty * per + tx
        for ty in range(y0 // TILE, (y1 - 1) // TILE + 1)
        for tx in range(x0 // TILE, (x1 - 1) // TILE + 1)
    ]


def read_pix(cur: Any, cfg: ref.Config, t: int, x0: int, y0: int, x1: int, y1: int) -> np.ndarray:
    """``pix`` of the local box [x0, x1) x [y0, y1) of image t, read from its table."""
    tiles = ",".join(str(k) for k in _tiles_of(cfg, x0, y0, x1, y1))
    rows = _read_binary(
        cur,
        f"SELECT y, x, pix FROM raw_{t:04d} WHERE tile IN ({tiles}) AND y >= {y0} AND y < {y1} "
        f"AND x >= {x0} AND x < {x1}",
        3,
    )
    out = np.zeros((y1 - y0, x1 - x0), dtype=np.int32)
    if len(rows) != out.size:
        raise RuntimeError(f"raw_{t:04d}: {len(rows)} cells read for a box of {out.size}")
    out[rows[:, 0] - y0, rows[:, 1] - x0] = rows[:, 2]
    return out


def _wkt(points: Sequence[ref.Point]) -> Tuple[str, str]:
    """(polygon, ring) WKT of a boundary B: a point, a line, or a polygon and its closed line."""
    pts = ", ".join(f"{x} {y}" for x, y in [*points, points[0]])
    if len(points) == 1:
        p = f"POINT({points[0][0]} {points[0][1]})"
        return p, p
    line = f"LINESTRING({pts})"
    if len(points) < 3:
        return line, line
    return f"POLYGON(({pts}))", line


OBS_COLUMNS = (
    "id", "t", "cycle", "cx", "cy", "pixelsum", "avgdist", "bx0", "by0", "bx1", "by1", "vertices", "center",
    "polygon", "ring",
)  # fmt: skip


def create_observations(cur: Any, table: str = "observations") -> None:
    cur.execute(
        f"CREATE TABLE {table} (id bigint PRIMARY KEY, t int NOT NULL, cycle int NOT NULL, cx int NOT NULL, "
        "cy int NOT NULL, pixelsum bigint NOT NULL, avgdist float8 NOT NULL, bx0 int NOT NULL, by0 int NOT NULL, "
        "bx1 int NOT NULL, by1 int NOT NULL, vertices int NOT NULL, center geometry(Point) NOT NULL, "
        "polygon geometry NOT NULL, ring geometry NOT NULL)"
    )


def copy_observations(cur: Any, obs: Sequence[ref.Observation], table: str = "observations") -> None:
    with cur.copy(f"COPY {table} ({', '.join(OBS_COLUMNS)}) FROM STDIN") as cp:
        for o in obs:
            poly, ring = _wkt(o.polygon)
            cp.write_row(
                (o.id, o.t, o.cycle, o.cx, o.cy, o.pixel_sum, o.avg_dist, *o.bbox, len(o.polygon),
                 f"POINT({o.cx} {o.cy})", poly, ring)
            )  # fmt: skip


def index_observations(cur: Any) -> None:
    cur.execute("CREATE INDEX observations_cycle ON observations (cycle)")
    cur.execute("CREATE INDEX observations_center ON observations USING gist (center)")
    cur.execute("CREATE INDEX observations_polygon ON observations USING gist (polygon)")
    cur.execute("ANALYZE observations")


def read_observations(cur: Any) -> List[ref.Observation]:
    """The stored observations in id order (polygons from ``ring``, without its closing point)."""
    cur.execute(
        "SELECT id, t, cx, cy, pixelsum, avgdist, bx0, by0, bx1, by1, vertices, ST_AsText(ring) "
        "FROM observations ORDER BY id"
    )
    out = []
    for oid, t, cx, cy, ps, ad, x0, y0, x1, y1, nv, ring in cur.fetchall():
        inner = ring[ring.index("(") + 1 : ring.rindex(")")] if "(" in ring else ""
        pts = [(int(float(a)), int(float(b))) for a, b in (p.split() for p in inner.split(","))]
        out.append(ref.Observation(oid, t, cx, cy, ps, ad, (x0, y0, x1, y1), pts[:nv]))
    return out


def load_groups(cur: Any, groups: Sequence[ref.Group]) -> None:
    """F2's memberships by COPY; the groups' sums, trajectories and Q9's hulls derived in SQL."""
    cur.execute("CREATE TABLE group_members (gid int NOT NULL, obs_id bigint NOT NULL, PRIMARY KEY (gid, obs_id))")
    with cur.copy("COPY group_members (gid, obs_id) FROM STDIN") as cp:
        for gid, g in enumerate(groups, start=1):
            for o in g.members:
                cp.write_row((gid, o.id))
    cur.execute("CREATE INDEX group_members_obs ON group_members (obs_id)")
    cur.execute(
        "CREATE TABLE groups AS SELECT m.gid, count(*)::int AS n, "
        "sum(o.cx)::bigint AS sumcx, sum(o.cy)::bigint AS sumcy, "
        "CASE WHEN min(o.cx) = max(o.cx) AND min(o.cy) = max(o.cy) THEN ST_Point(min(o.cx), min(o.cy)) "
        "ELSE ST_MakeLine(o.center ORDER BY o.t, o.id) END AS traj "
        "FROM group_members m JOIN observations o ON o.id = m.obs_id GROUP BY m.gid"
    )
    cur.execute("ALTER TABLE groups ADD PRIMARY KEY (gid)")
    cur.execute("CREATE INDEX groups_traj ON groups USING gist (traj)")
    # Q9: hulls of the polygons at consecutive distinct times; a one-time group keeps its polygons.
    cur.execute(
        "CREATE TABLE group_trajectory AS "
        "WITH times AS (SELECT DISTINCT m.gid, o.t FROM group_members m JOIN observations o ON o.id = m.obs_id), "
        "pairs AS (SELECT gid, t AS t1, lead(t) OVER (PARTITION BY gid ORDER BY t) AS t2, "
        "count(*) OVER (PARTITION BY gid) AS nt FROM times) "
        "SELECT p.gid, p.t1, p.t2, ST_ConvexHull(ST_Collect(o.polygon)) AS geom, NULL::geometry AS ring "
        "FROM pairs p JOIN group_members m ON m.gid = p.gid JOIN observations o ON o.id = m.obs_id "
        "AND o.t IN (p.t1, p.t2) WHERE p.t2 IS NOT NULL GROUP BY p.gid, p.t1, p.t2 "
        "UNION ALL "
        "SELECT p.gid, p.t1, p.t1, o.polygon, o.ring FROM pairs p JOIN group_members m ON m.gid = p.gid "
        "JOIN observations o ON o.id = m.obs_id WHERE p.nt = 1"
    )
    cur.execute("CREATE INDEX group_trajectory_geom ON group_trajectory USING gist (geom)")
    cur.execute("ANALYZE groups")
    cur.execute("ANALYZE group_trajectory")
    cur.execute("ANALYZE group_members")


# --- summaries from the database ----------------------------------------------------------------

KEY = "o.t || ',' || o.cx || ',' || o.cy || ',' || o.pixelsum"


def f1_from_db(cur: Any, table: str = "observations") -> Dict[str, Any]:
    cur.execute(f"SELECT count(*), coalesce(sum(pixelsum), 0), coalesce(sum(vertices), 0) FROM {table}")
    count, ps, nv = cur.fetchone()
    cur.execute(f"SELECT {KEY} FROM {table} o")
    return {
        "count": int(count),
        "pixelSum": int(ps),
        "vertices": int(nv),
        "observation_keys_sha256": ref.sha256_lines(k for (k,) in cur.fetchall()),
    }


def _group_keys(cur: Any, gids_sql: str) -> List[str]:
    """The keys of the groups whose gid the SQL ``gids_sql`` selects."""
    cur.execute(
        f"SELECT string_agg({KEY}, ';' ORDER BY ({KEY}) COLLATE \"C\") FROM group_members m "
        f"JOIN observations o ON o.id = m.obs_id WHERE m.gid IN ({gids_sql}) GROUP BY m.gid"
    )
    return [k for (k,) in cur.fetchall()]


def f2_from_db(cur: Any) -> Dict[str, Any]:
    cur.execute("SELECT count(*), count(*) FILTER (WHERE n = 1) FROM groups")
    groups, singles = cur.fetchone()
    return {
        "groups": int(groups),
        "multi_member_groups": int(groups - singles),
        "singletons": int(singles),
        "groups_sha256": ref.sha256_lines(_group_keys(cur, "SELECT gid FROM groups")),
    }


# --- queries ------------------------------------------------------------------------------------


def _box(x0: int, y0: int, x1: int, y1: int) -> str:
    """The closed box [x0, x1] x [y0, y1] as a geometry. A box of width or height 0 is a line or
    a point: GEOS does not see the zero-area polygon ST_MakeEnvelope would give as touching
    anything on it."""
    if x0 == x1 and y0 == y1:
        return f"ST_Point({x0}, {y0})"
    if x0 == x1 or y0 == y1:
        return f"ST_MakeLine(ST_Point({x0}, {y0}), ST_Point({x1}, {y1}))"
    return f"ST_MakeEnvelope({x0}, {y0}, {x1}, {y1})"


def _windows(cur: Any, cfg: ref.Config, gids_sql: str, slab: ref.Box) -> Dict[str, Any]:
    """Q8/Q9 output: the D6 windows of the selected groups' members in every image meeting the slab."""
    cur.execute(
        "SELECT DISTINCT o.id, o.t, o.cx, o.cy, o.pixelsum FROM group_members m JOIN observations o "
        f"ON o.id = m.obs_id WHERE m.gid IN ({gids_sql})"
    )
    members = sorted(cur.fetchall(), key=lambda r: (r[1], r[2], r[3], r[4]))
    s = cfg.side
    cur.execute(
        f"SELECT t, llc_x, llc_y FROM images WHERE llc_x <= {slab[2]} AND llc_x + {s - 1} >= {slab[0]} "
        f"AND llc_y <= {slab[3]} AND llc_y + {s - 1} >= {slab[1]} ORDER BY t"
    )
    images = cur.fetchall()
    half = cfg.d6 // 2
    # per image: the windows clipped to it, then one read of the box they span
    plan: Dict[int, List[Tuple[int, int, int, int]]] = {}
    for _, _, cx, cy, _ in members:
        for ti, lx, ly in images:
            x0, x1 = max(cx - half, lx), min(cx + half, lx + s)
            y0, y1 = max(cy - half, ly), min(cy + half, ly + s)
            if x0 < x1 and y0 < y1:
                plan.setdefault(ti, []).append((x0, y0, x1, y1))
    pixels: Dict[int, Tuple[int, int, np.ndarray]] = {}
    for ti, lx, ly in images:
        if ti not in plan:
            continue
        boxes = plan[ti]
        bx0, by0 = min(b[0] for b in boxes) - lx, min(b[1] for b in boxes) - ly
        bx1, by1 = max(b[2] for b in boxes) - lx, max(b[3] for b in boxes) - ly
        pixels[ti] = (lx + bx0, ly + by0, read_pix(cur, cfg, ti, bx0, by0, bx1, by1))
    h = hashlib.sha256()
    windows = 0
    for _, t, cx, cy, ps in members:
        for ti, lx, ly in images:
            x0, x1 = max(cx - half, lx), min(cx + half, lx + s)
            y0, y1 = max(cy - half, ly), min(cy + half, ly + s)
            if x0 >= x1 or y0 >= y1:
                continue
            ox, oy, pix = pixels[ti]
            windows += 1
            h.update(np.array([t, cx, cy, ps, ti, x0, y0, x1, y1], dtype="<i8").tobytes())
            h.update(np.ascontiguousarray(pix[y0 - oy : y1 - oy, x0 - ox : x1 - ox], dtype="<i4").tobytes())
    return {"windows": windows, "pix_windows_sha256": h.hexdigest()}


def _q3_weights(cur: Any, m: int) -> None:
    """Q3's weight table of the m x m slab: (y, x, v, u, w), the source cell (x, y)'s weight
    w = wy·wx in output cell (u, v), with per axis |[10u, 10u+10) ∩ [3i, 3i+3)|."""
    n = -(-3 * m // 10)
    axis = (
        f"SELECT i, u, least(10 * u + 10, 3 * i + 3) - greatest(10 * u, 3 * i) AS w "
        f"FROM generate_series(0, {m - 1}) i, generate_series(0, {n - 1}) u "
        "WHERE least(10 * u + 10, 3 * i + 3) > greatest(10 * u, 3 * i)"
    )
    cur.execute("DROP TABLE IF EXISTS q3_weights")
    cur.execute(
        f"CREATE TEMPORARY TABLE q3_weights AS SELECT a.i AS y, b.i AS x, a.u AS v, b.u AS u, a.w * b.w AS w "
        f"FROM ({axis}) a, ({axis}) b"
    )
    cur.execute("ANALYZE q3_weights")


def run_queries(cur: Any, cfg: ref.Config, x: int, y: int, r: int, seconds: Dict[str, float]) -> Dict[str, Any]:
    """Run r of Q1-Q9 from start point (x, y); adds each query's time to ``seconds``."""
    cyc = {f"Q{q}": ref.query_cycle(q, r, cfg.cycles) for q in range(1, 7)}
    m = min(cfg.u1, cfg.side)
    out: Dict[str, Any] = {"run": r, "X": x, "Y": y, "cycles": cyc}

    def timed(name: str) -> contextlib.AbstractContextManager[None]:
        @contextlib.contextmanager
        def cm() -> Iterator[None]:
            t0 = time.perf_counter()
            yield
            cur.connection.commit()
            seconds[name] = seconds.get(name, 0.0) + time.perf_counter() - t0

        return cm()

    with timed("Q1"):
        c = cyc["Q1"]
        parts = " UNION ALL ".join(
            f"SELECT sum(pix::bigint) AS s, count(*) AS n FROM raw_{t:04d} WHERE x < {m} AND y < {m}"
            for t in range(20 * c, 20 * c + 20)
        )
        cur.execute(f"SELECT sum(s), sum(n) FROM ({parts}) q")
        total, cells = cur.fetchone()
        out["Q1"] = {"sum": int(total), "count": int(cells)}

    with timed("Q2"):
        t2 = 20 * cyc["Q2"]
        cur.execute("SELECT llc_x, llc_y FROM images WHERE t = %s", (t2,))
        lx, ly = cur.fetchone()
        q2 = ref.cook(read_pix(cur, cfg, t2, 0, 0, m, m), (lx, ly), t2, 900, cfg.d1, cfg.d2)
        for i, o in enumerate(q2, start=1):
            o.id = i
        cur.execute("DROP TABLE IF EXISTS q2_result")
        create_observations(cur, "q2_result")
        copy_observations(cur, q2, "q2_result")
        s2 = f1_from_db(cur, "q2_result")
        out["Q2"] = {"count": s2["count"], "pixelSum": s2["pixelSum"], "keys_sha256": s2["observation_keys_sha256"]}

    with timed("Q3"):
        c = cyc["Q3"]
        _q3_weights(cur, m)
        cur.execute("DROP TABLE IF EXISTS q3_result")
        cur.execute(
            "CREATE TABLE q3_result (t int, v int, u int, "
            + ", ".join(f"{a} int" for a in ref.ATTRS)
            + ", PRIMARY KEY (t, v, u))"
        )

        # round(Σ w·v / Σ w), ties half away from zero, in exact bigint arithmetic
        def rounded(a: str) -> str:
            num = f"sum(g.w * r.{a}::bigint)::bigint"
            den = "sum(g.w)::bigint"
            return f"(CASE WHEN {num} < 0 THEN -1 ELSE 1 END * ((2 * abs({num}) + {den}) / (2 * {den})))::int"

        cols = [
            "bool_and(r.valid <> 0)::int" if a == "valid" else "bool_or(r.sat <> 0)::int" if a == "sat" else rounded(a)
            for a in ref.ATTRS
        ]
        for t in range(20 * c, 20 * c + 20):
            cur.execute(
                f"INSERT INTO q3_result SELECT {t}, g.v, g.u, {', '.join(cols)} "
                f"FROM raw_{t:04d} r JOIN q3_weights g ON g.y = r.y AND g.x = r.x GROUP BY g.v, g.u"
            )
        shas = []
        n = -(-3 * m // 10)
        for t in range(20 * c, 20 * c + 20):
            cur.execute(f"SELECT {', '.join(ref.ATTRS)} FROM q3_result WHERE t = {t} ORDER BY v, u")
            arr = np.array(cur.fetchall(), dtype=np.int64).reshape(n, n, len(ref.ATTRS)).transpose(2, 0, 1)
            shas.append(hashlib.sha256(arr.astype("<i4").tobytes()).hexdigest())
        out["Q3"] = {"sha256_of_image_shas": hashlib.sha256("".join(shas).encode()).hexdigest()}

    x1, y1 = x + cfg.u2 - 1, y + cfg.u2 - 1
    box2 = _box(x, y, x1, y1)
    with timed("Q4"):
        cur.execute(
            f"SELECT {KEY}, o.pixelsum FROM observations o WHERE o.cycle = %s AND o.center && {box2} "
            f"AND o.cx BETWEEN {x} AND {x1} AND o.cy BETWEEN {y} AND {y1}",
            (cyc["Q4"],),
        )
        rows = cur.fetchall()
        out["Q4"] = {
            "count": len(rows),
            "sum": sum(int(p) for _, p in rows),
            "keys_sha256": ref.sha256_lines(k for k, _ in rows),
        }

    with timed("Q5"):
        cur.execute(
            f"SELECT {KEY} FROM observations o WHERE o.cycle = %s AND o.polygon && {box2} "
            f"AND (ST_Intersects(o.ring, {box2}) OR ST_Intersects(o.polygon, ST_Point({x}, {y})))",
            (cyc["Q5"],),
        )
        keys = [k for (k,) in cur.fetchall()]
        out["Q5"] = {"count": len(keys), "keys_sha256": ref.sha256_lines(keys)}

    with timed("Q6"):
        cur.execute(
            f"SELECT o.cx, o.cy FROM observations o WHERE o.cycle = %s AND o.center && {box2} "
            f"AND o.cx BETWEEN {x} AND {x1} AND o.cy BETWEEN {y} AND {y1}",
            (cyc["Q6"],),
        )
        out["Q6"] = ref.density_windows(cur.fetchall(), x, y, cfg.u2, cfg.d4, cfg.d5)

    with timed("Q7"):
        sel = (
            f"SELECT gid FROM groups WHERE {x}::bigint * n <= sumcx AND sumcx < {x + cfg.u2}::bigint * n "
            f"AND {y}::bigint * n <= sumcy AND sumcy < {y + cfg.u2}::bigint * n"
        )
        cur.execute(f"SELECT count(*), count(*) FILTER (WHERE n = 1) FROM groups WHERE gid IN ({sel})")
        count, singles = cur.fetchone()
        out["Q7"] = {
            "count": int(count),
            "singletons": int(singles),
            "keys_sha256": ref.sha256_lines(_group_keys(cur, sel)),
        }

    slab3 = (x, y, x + cfg.u3 - 1, y + cfg.u3 - 1)
    box3 = _box(*slab3)
    with timed("Q8"):
        sel = f"SELECT gid FROM groups WHERE traj && {box3} AND ST_Intersects(traj, {box3})"
        keys = _group_keys(cur, sel)
        out["Q8"] = {
            "groups": {"count": len(keys), "keys_sha256": ref.sha256_lines(keys)},
            "output": _windows(cur, cfg, sel, slab3),
        }

    with timed("Q9"):
        sel = (
            f"SELECT DISTINCT gid FROM group_trajectory WHERE geom && {box3} AND CASE WHEN ring IS NULL "
            f"THEN ST_Intersects(geom, {box3}) ELSE ST_Intersects(ring, {box3}) "
            f"OR ST_Intersects(geom, ST_Point({x}, {y})) END"
        )
        keys = _group_keys(cur, sel)
        out["Q9"] = {
            "groups": {"count": len(keys), "keys_sha256": ref.sha256_lines(keys)},
            "output": _windows(cur, cfg, sel, slab3),
        }
    return out


# --- the run -------------------------------------------------------------------------------------


def _connect(srv: Server) -> Any:
    try:
        import psycopg
    except ImportError as e:
        raise PostgresUnavailable("the Python package psycopg (3) is not installed: `make venv`") from e
    return psycopg.connect(srv.dsn())


def run(
    cfg: ref.Config,
    workdir: Path,
    starts: Sequence[Tuple[str, int]] = (("spec", 15), ("dense", 15)),
    cold: bool = True,
    fsync: bool = False,
    tiles: Optional[Path] = None,
) -> Dict[str, Any]:
    """The whole benchmark on a private server under ``workdir``; returns the report."""
    seconds: Dict[str, Any] = {}
    report: Dict[str, Any] = {"config": cfg.name, "engine": "postgresql+postgis"}
    tile_arr = ref.load_tiles(tiles)  # size and sha256 checked
    report["data"] = {"tileData_sha256": sky.SHA256}
    with server(workdir, fsync) as srv:
        conn = _connect(srv)
        try:
            with conn.cursor() as cur:
                try:
                    create_schema(cur)
                except Exception as e:
                    raise PostgresUnavailable(f"PostGIS is not available to the server: {e}") from e
                conn.commit()
                cur.execute("SELECT version(), postgis_full_version()")
                version, postgis = cur.fetchone()
                report["server"] = {"version": version, "postgis": postgis, "fsync": fsync, "cold_runs": cold}
                generate = load = 0.0
                for t in range(cfg.images):
                    t0 = time.perf_counter()
                    img = ref.generate_image(cfg, tile_arr, t)
                    llc = ref.nominal_llc(cfg, t)
                    t1 = time.perf_counter()
                    load_image(cur, cfg, t, img, llc)
                    conn.commit()
                    generate += t1 - t0
                    load += time.perf_counter() - t1
                seconds.update(load=load, generate=generate)

                t0 = time.perf_counter()
                cur.execute("SELECT t, llc_x, llc_y FROM images ORDER BY t")
                llcs = [(int(a), int(b)) for _, a, b in cur.fetchall()]
                s = cfg.side
                pix = [read_pix(cur, cfg, t, 0, 0, s, s) for t in range(cfg.images)]
                obs = ref.cook_all(cfg, lambda t: pix[t], llcs, 1000)
                create_observations(cur)
                copy_observations(cur, obs)
                index_observations(cur)
                conn.commit()
                seconds["cook"] = time.perf_counter() - t0
                t0 = time.perf_counter()
                prime = ref.cook_all(cfg, lambda t: pix[t], llcs, 900)
                seconds["F1prime"] = time.perf_counter() - t0
                pix.clear()

                t0 = time.perf_counter()
                groups = ref.group(read_observations(cur), cfg.d3)
                load_groups(cur, groups)
                conn.commit()
                seconds["group"] = time.perf_counter() - t0
                seconds["total"] = seconds["load"] + seconds["cook"] + seconds["group"]

                report["F1"] = f1_from_db(cur)
                report["F1prime"] = ref.f1_summary(prime)
                report["F2"] = f2_from_db(cur)
                conn.commit()
        finally:
            conn.close()

        report["queries"] = {}
        seconds["queries"] = {}
        for which, runs in starts:
            qsec: Dict[str, float] = {}
            out_runs = []
            for r in range(runs):
                x, y = cfg.starts(which)[r // 3]
                if cold:
                    srv.restart_cold()
                conn = _connect(srv)
                try:
                    with conn.cursor() as cur:
                        out_runs.append(run_queries(cur, cfg, x, y, r, qsec))
                finally:
                    conn.close()
            report["queries"][which] = {"runs": out_runs}
            qsec = {f"Q{q}": qsec.get(f"Q{q}", 0.0) for q in range(1, 10)}
            qsec["total"] = sum(qsec.values())
            seconds["queries"][which] = qsec
    report["seconds"] = seconds
    return report


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tessera.ssdb.postgres", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="micro", choices=sorted(ref.CONFIGS))
    ap.add_argument("--dir", type=Path, required=True, help="folder for report.json and the temporary cluster")
    ap.add_argument(
        "--starts",
        default="spec,dense",
        help="start sets, comma-separated: spec, dense, each optionally NAME:RUNS for its first RUNS runs "
        "(1..15; the benchmark runs 15)",
    )
    ap.add_argument("--warm", action="store_true", help="no server restart or page-cache eviction between runs")
    ap.add_argument("--fsync", action="store_true", help="fsync, synchronous_commit and full_page_writes on")
    ap.add_argument("--tiles", type=Path, help="a tileData file (else made by the recipe)")
    args = ap.parse_args(argv)
    try:
        starts = ref.parse_starts(args.starts)
    except ValueError as e:
        ap.error(str(e))
    args.dir = args.dir.resolve()  # the server runs elsewhere: a relative path would miss
    cfg = ref.CONFIGS[args.config]
    try:
        rep = run(cfg, args.dir, starts, not args.warm, args.fsync, args.tiles)
    except PostgresUnavailable as e:
        print(f"postgres baseline: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt as e:
        print(f"postgres baseline: interrupted ({e or 'Ctrl-C'}); the server is stopped", file=sys.stderr)
        return 130
    args.dir.mkdir(parents=True, exist_ok=True)
    tmp = args.dir / "report.json.tmp"
    tmp.write_text(json.dumps(rep, indent=2) + "\n")
    os.replace(tmp, args.dir / "report.json")
    sec = rep["seconds"]
    print(
        f"{cfg.name} on PostgreSQL: load {sec['load']:.2f} s, cook {sec['cook']:.2f} s, group {sec['group']:.2f} s; "
        + ", ".join(f"{w} queries {v['total']:.2f} s" for w, v in sec["queries"].items())
        + f"; report in {args.dir / 'report.json'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
