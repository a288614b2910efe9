"""SS-DB baselines (issue 14): the independent Python reference against Tessera, and its own checks.

The reference (``tessera.ssdb.reference``) regenerates the micro images from SSDB.md §1 (sky
tiles checked against the spec's sha256) and cooks, recooks and groups them by §2-§3; its F1,
F1prime and F2 report fields must equal those of ``tessera ssdb run --config micro``'s
report.json.
"""

from __future__ import annotations

import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

from conftest import tessera_binary
from tessera.ssdb import reference as ref


@pytest.fixture(scope="module")
def tessera_micro(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    store = tmp_path_factory.mktemp("ssdb") / "micro"
    env = dict(os.environ, TESSERA_BIN=tessera_binary())
    subprocess.run(
        [sys.executable, "-m", "tessera.ssdb", "run", "--config", "micro", "--dir", str(store)],
        check=True,
        env=env,
        capture_output=True,
    )
    report: Dict[str, Any] = json.loads((store / "report.json").read_text())
    return report


@pytest.fixture(scope="module")
def reference_micro() -> Tuple[ref.Dataset, Dict[str, Any]]:
    cfg = ref.CONFIGS["micro"]
    images, llcs = ref.generate(cfg)  # checks the tileData size and sha256
    return ref.build(cfg, images, llcs)


@pytest.mark.parametrize("section", ["F1", "F1prime", "F2"])
def test_reference_agrees_with_tessera_on_micro(
    tessera_micro: Dict[str, Any], reference_micro: Tuple[ref.Dataset, Dict[str, Any]], section: str
) -> None:
    _, summary = reference_micro
    assert tessera_micro["data"]["tileData_sha256"] == ref.sky.SHA256
    assert summary[section] == tessera_micro[section]


@pytest.mark.parametrize("which", ["dense", "spec"])
def test_tessera_queries_agree_with_the_reference_on_micro(
    tessera_micro: Dict[str, Any], reference_micro: Tuple[ref.Dataset, Dict[str, Any]], which: str
) -> None:
    """Every field of every one of the 15 runs of Q1-Q9: Tessera's engine-side queries against
    the independent reference (which the PostgreSQL and TileDB-Py baselines are held to below),
    so the three engines agree."""
    ds, _ = reference_micro
    got = tessera_micro["queries"][which]["runs"]
    assert [g["run"] for g in got] == list(range(15))
    starts = ds.cfg.starts(which)
    for r in range(15):
        want = ref.run_queries(ds, *starts[r // 3], r)
        for q in want:
            assert got[r][q] == want[q], f"{which} run {r} {q}"
    assert set(tessera_micro["seconds"]["queries"][which]) == {f"Q{q}" for q in range(1, 10)} | {"total"}


def test_reference_micro_is_not_trivial(reference_micro: Tuple[ref.Dataset, Dict[str, Any]]) -> None:
    ds, summary = reference_micro
    assert summary["F1"]["count"] > 500
    assert summary["F1prime"]["count"] > summary["F1"]["count"]
    assert summary["F2"]["multi_member_groups"] > 100
    # ids 1..n in time order, then raster order of the first cell inside an image
    assert [o.id for o in ds.obs] == list(range(1, len(ds.obs) + 1))
    assert [o.t for o in ds.obs] == sorted(o.t for o in ds.obs)


# --- the reference's own pieces, on hand-worked cases -------------------------------------------


def _image(cells: List[Tuple[int, int]], side: int = 8, value: int = 1000) -> np.ndarray:
    img = np.zeros((side, side), dtype=np.int32)
    for x, y in cells:
        img[y, x] = value
    return img


@pytest.mark.parametrize(
    ("cells", "trace"),
    [
        ([(1, 1)], [(1, 1)]),
        ([(1, 1), (2, 1), (3, 1)], [(1, 1), (2, 1), (3, 1), (2, 1)]),
        ([(1, 1), (1, 2), (2, 2)], [(1, 1), (2, 2), (1, 2)]),
        ([(1, 1), (2, 1), (3, 1), (1, 2)], [(1, 1), (2, 1), (3, 1), (2, 1), (1, 2)]),
    ],
)
def test_moore_trace_worked_examples(cells: List[Tuple[int, int]], trace: List[Tuple[int, int]]) -> None:
    assert ref.moore_trace(set(cells)) == trace


def test_ring_traces_its_border_and_hole_is_its_own_object() -> None:
    ring = [(x, y) for x in range(1, 6) for y in range(1, 6) if x in (1, 5) or y in (1, 5)]
    trace = ref.moore_trace(set(ring))
    assert len(trace) == 16 and set(trace) == set(ring)
    obs = ref.cook(_image([*ring, (3, 3)]), (100, 200), 7, 1000, 50, 50)
    assert [(o.cx, o.cy, o.pixel_sum, len(o.polygon)) for o in obs] == [(103, 203, 16000, 16), (103, 203, 1000, 1)]


def test_drop_rule_at_d2() -> None:
    cells = [(1, 1), (2, 1), (3, 1), (1, 2)]  # 5 vertices
    assert len(ref.cook(_image(cells), (0, 0), 0, 1000, 50, 5)) == 1
    assert ref.cook(_image(cells), (0, 0), 0, 1000, 50, 4) == []
    bar = [(x, 0) for x in range(6)]  # 6 wide
    assert len(ref.cook(_image(bar), (0, 0), 0, 1000, 6, 50)) == 1
    assert ref.cook(_image(bar), (0, 0), 0, 1000, 5, 50) == []


def test_objects_on_the_last_row_and_column_are_kept() -> None:
    obs = ref.cook(_image([(7, 7), (6, 7), (7, 0)]), (0, 0), 0, 1000, 50, 50)
    assert [(o.bbox, o.pixel_sum) for o in obs] == [((7, 0, 7, 0), 1000), ((6, 7, 7, 7), 2000)]


def _obs(oid: int, t: int, cx: int, cy: int) -> ref.Observation:
    return ref.Observation(oid, t, cx, cy, 1000 + oid, 0.0, (cx, cy, cx, cy), [(cx, cy)])


def test_grouping_worked_cases() -> None:
    # e at t=0; n1, n2 at t=1 both match e (d² = 0 <= 0.1): one group {e, n1, n2}.
    # f at t=0 far away; g at t=20 matches f exactly at the limit (10·d² = 10·2 = 20 <= 20);
    # h at t=21 is 21 images after f (no match) but matches g.
    e, f = _obs(1, 0, 10, 10), _obs(2, 0, 500, 500)
    n1, n2 = _obs(3, 1, 10, 10), _obs(4, 1, 10, 10)
    g, h, lone = _obs(5, 20, 501, 501), _obs(6, 21, 501, 501), _obs(7, 21, 900, 900)
    groups = ref.group([e, f, n1, n2, g, h, lone], ref.Fraction(1, 10))
    assert [[o.id for o in gr.members] for gr in groups] == [[1, 3, 4], [2, 5, 6], [7]]
    # one further cell and Δt = 20 fails: 10·(4+1) = 50 > 20
    far = _obs(5, 20, 502, 501)
    groups = ref.group([f, far], ref.Fraction(1, 10))
    assert [[o.id for o in gr.members] for gr in groups] == [[2], [5]]


def test_region_meets_box() -> None:
    square = [(0, 0), (10, 0), (10, 10), (0, 10)]
    assert ref.region_meets_box(square, (3, 3, 4, 4))  # inside, boundary not crossed
    assert ref.region_meets_box(square, (10, 10, 20, 20))  # corner touch
    assert not ref.region_meets_box(square, (11, 0, 20, 20))
    line = [(1, 1), (2, 1), (3, 1), (2, 1)]
    assert ref.region_meets_box(line, (3, 0, 5, 5)) and not ref.region_meets_box(line, (4, 0, 5, 5))
    assert ref.polyline_meets_box([(0, 0), (10, 10)], (5, 4, 6, 4)) is False
    assert ref.polyline_meets_box([(0, 0), (10, 10)], (4, 4, 4, 4))
    assert ref.convex_hull([(0, 0), (2, 0), (1, 1), (2, 2), (0, 2), (1, 0)]) == [(0, 0), (2, 0), (2, 2), (0, 2)]


def test_regrid_constant_and_partial_cells() -> None:
    m = 7  # n = ceil(21/10) = 3; the last output cell covers source 6 only (i in [20/3, 7))
    img = {name: np.full((m, m), 5, dtype=np.int32) for name in ref.ATTRS}
    img["pix"] = np.arange(m * m, dtype=np.int32).reshape(m, m)
    img["valid"][0, 0] = 0
    img["sat"][:] = 0
    img["sat"][6, 6] = 1
    out = ref.regrid(img, m)
    assert out.shape == (11, 3, 3)
    assert (out[1] == 5).all()
    assert out[2].tolist() == [[0, 1, 1], [1, 1, 1], [1, 1, 1]]
    assert out[3].tolist() == [[0, 0, 0], [0, 1, 1], [0, 1, 1]]  # source 6 is in outputs 1 and 2
    # pix of output (2, 2): only source (6, 6), value 48; output (0, 0): sources 0..3 with
    # weights 3, 3, 3, 1 per axis: Σ w·v / Σ w on v = 7y + x gives 7·1.2 + 1.2 = 9.6 -> 10
    assert out[0][2, 2] == 48
    assert out[0][0, 0] == 10


# --- the PostgreSQL/PostGIS baseline against the reference --------------------------------------

# The spec set's first runs only, to keep the test short (every run is a cold restart); the dense
# set, where every query has an answer, is run in full (15 runs).
PG_STARTS = {"dense": 15, "spec": 3}


@pytest.fixture(scope="module")
def postgres_micro(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    pytest.importorskip("psycopg", reason="psycopg (3) is not installed: `make venv` installs it")
    from tessera.ssdb import postgres as pg

    try:
        pg.pg_bindir()
    except pg.PostgresUnavailable as e:
        pytest.skip(str(e))
    out = tmp_path_factory.mktemp("ssdb_pg")
    starts = ",".join(f"{k}:{v}" for k, v in PG_STARTS.items())
    p = subprocess.run(
        [sys.executable, "-m", "tessera.ssdb.postgres", "--config", "micro", "--dir", str(out), "--starts", starts],
        capture_output=True,
        text=True,
    )
    if p.returncode == 3:  # PostgresUnavailable: PostGIS missing, or the server did not start
        pytest.skip(p.stderr.strip())
    assert p.returncode == 0, p.stderr
    report: Dict[str, Any] = json.loads((out / "report.json").read_text())
    # the temporary cluster is gone
    assert [q.name for q in out.iterdir()] == ["report.json"]
    return report


def test_postgres_agrees_with_the_reference_on_micro(
    postgres_micro: Dict[str, Any], reference_micro: Tuple[ref.Dataset, Dict[str, Any]]
) -> None:
    ds, summary = reference_micro
    assert postgres_micro["data"]["tileData_sha256"] == ref.sky.SHA256
    for section in ("F1", "F1prime", "F2"):
        assert postgres_micro[section] == summary[section], section
    assert set(postgres_micro["queries"]) == set(PG_STARTS)
    answered = set()
    for which, runs in PG_STARTS.items():
        got = postgres_micro["queries"][which]["runs"]
        assert [g["run"] for g in got] == list(range(runs))
        starts = ds.cfg.starts(which)
        for r in range(runs):
            want = ref.run_queries(ds, *starts[r // 3], r)
            for q in want:
                assert got[r][q] == want[q], f"{which} run {r} {q}"
            answered |= {q for q in ("Q4", "Q5", "Q7") if want[q]["count"] > 0}
            answered |= {q for q in ("Q8", "Q9") if want[q]["output"]["windows"] > 0}
            answered |= {"Q6"} if want["Q6"]["windows"] > 0 else set()
    assert answered == {"Q4", "Q5", "Q6", "Q7", "Q8", "Q9"}  # the comparison is not vacuous
    seconds = postgres_micro["seconds"]
    for step in ("load", "cook", "group", "total"):
        assert seconds[step] > 0
    for which in PG_STARTS:
        assert set(seconds["queries"][which]) == {f"Q{q}" for q in range(1, 10)} | {"total"}


def test_postgres_server_is_stopped_on_error(tmp_path: pathlib.Path) -> None:
    pytest.importorskip("psycopg", reason="psycopg (3) is not installed: `make venv` installs it")
    from tessera.ssdb import postgres as pg

    try:
        pg.pg_bindir()
    except pg.PostgresUnavailable as e:
        pytest.skip(str(e))
    seen: List[Any] = []
    try:
        with pg.server(tmp_path) as srv:
            seen.append(srv)
            assert (srv.data / "postmaster.pid").exists()
            raise KeyboardInterrupt("test")
    except pg.PostgresUnavailable as e:
        pytest.skip(str(e))
    except KeyboardInterrupt:
        pass
    assert len(seen) == 1 and not seen[0].running
    assert not seen[0].root.exists()  # the cluster's folder is removed
    with socket.socket() as s:  # nothing listens on its port any more
        assert s.connect_ex(("127.0.0.1", seen[0].port)) != 0


# --- the TileDB baseline against the reference --------------------------------------------------


def test_tiledb_agrees_with_the_reference_on_micro(
    tmp_path: pathlib.Path, reference_micro: Tuple[ref.Dataset, Dict[str, Any]]
) -> None:
    pytest.importorskip("tiledb", reason="TileDB-Py is not installed: `make bench-deps` installs it")
    p = subprocess.run(
        [sys.executable, "-m", "tessera.ssdb.tiledb_baseline", "--config", "micro", "--dir", str(tmp_path),
         "--starts", ",".join(f"{k}:{v}" for k, v in PG_STARTS.items())],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    got = json.loads((tmp_path / "report.json").read_text())
    ds, summary = reference_micro
    for section in ("F1", "F1prime", "F2"):
        assert got[section] == summary[section], section
    for which, runs in PG_STARTS.items():
        starts = ds.cfg.starts(which)
        assert len(got["queries"][which]["runs"]) == runs
        for r in range(runs):
            want = ref.run_queries(ds, *starts[r // 3], r)
            for q in want:
                assert got["queries"][which]["runs"][r][q] == want[q], f"{which} run {r} {q}"
    assert set(got["seconds"]["queries"]["dense"]) == {f"Q{q}" for q in range(1, 10)} | {"total"}


def test_postgis_region_test_equals_the_exact_one(tmp_path: pathlib.Path) -> None:
    """Q5's SQL test (ring meets the box, or the box's corner is in the polygon) against the
    reference's exact closed non-zero-winding region, on random blobs' Moore boundaries (thin
    parts, retraced edges, holes) and boxes around them, and Q9's hulls likewise."""
    pytest.importorskip("psycopg", reason="psycopg (3) is not installed: `make venv` installs it")
    from tessera.ssdb import postgres as pg

    try:
        pg.pg_bindir()
    except pg.PostgresUnavailable as e:
        pytest.skip(str(e))
    rng = np.random.default_rng(14)
    cases = []
    while len(cases) < 400:
        img = (rng.random((9, 9)) < 0.45).astype(np.int32) * 1000
        for cells in ref.components(img, 1000):
            trace = ref.moore_trace(set(cells))
            x0, y0 = int(rng.integers(-2, 10)), int(rng.integers(-2, 10))
            box = (x0, y0, x0 + int(rng.integers(0, 4)), y0 + int(rng.integers(0, 4)))
            cases.append((trace, box))
    try:
        with pg.server(tmp_path) as srv, pg._connect(srv) as conn, conn.cursor() as cur:
            cur.execute("CREATE EXTENSION postgis")
            for trace, box in cases:
                poly, ring = pg._wkt(trace)
                b = pg._box(*box)
                cur.execute(
                    f"SELECT ST_Intersects(ring, {b}) OR ST_Intersects(poly, ST_Point({box[0]}, {box[1]})), "
                    f"ST_Intersects(ST_ConvexHull(poly), {b}) "
                    "FROM (SELECT %s::geometry AS poly, %s::geometry AS ring) q",
                    (poly, ring),
                )
                region, hull = cur.fetchone()
                assert region == ref.region_meets_box(trace, box), (trace, box)
                assert hull == ref.region_meets_box(ref.convex_hull(trace), box), (trace, box)
    except pg.PostgresUnavailable as e:
        pytest.skip(str(e))
