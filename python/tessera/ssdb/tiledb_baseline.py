"""SS-DB on TileDB (TileDB-Py): the array-engine baseline.

``python -m tessera.ssdb.tiledb_baseline --config micro --dir D`` writes the arrays under
``D/tiledb`` and ``D/report.json`` in the shape of SSDB.md §5.

Layout, as TileDB's documentation recommends (dense arrays for images, sparse for point data):

- ``images``: dense 3-D ``(t, y, x)`` in local coordinates, 11 int32 attributes, space tiles
  ``(1, 100, 100)`` (one image per tile row; the D6 = 100 windows of Q8/Q9 meet at most 4
  tiles), byte shuffle + zstd level 1, one fragment per cycle. ``images_llc``: dense 1-D ``t`` ->
  ``llc_x``, ``llc_y``.
- ``observations``: sparse 3-D ``(t, cy, cx)`` (tiles 20 x 1000 x 1000: one cycle, a world box),
  duplicates allowed (two objects can share a centre), attributes ``id``, ``pixelSum``,
  ``avgDist``, the bbox, ``vertices`` and the polygon as a var-length int32 attribute
  (``x0 y0 x1 y1 ...``); cooked with the reference cooker from the ``pix`` read back, one
  fragment per cycle.
- ``groups``: dense 1-D ``gid`` with ``n``, ``sumCx``, ``sumCy``, the trajectory box, the box of
  the members' polygons, and ``members`` (var-length int64, 5 values per member in (t, id)
  order: t, id, cx, cy, pixelSum), from the reference grouper.

Queries read what they need (a cycle's slab, a cycle's world box of observations widened by D1 for
Q5, every group for Q7-Q9 with box prefilters, the member polygons of Q9's candidates) and apply
§4's exact tests from ``tessera.ssdb.reference``. Cold runs: a new ``tiledb.Ctx`` (no tile cache
carried over) and every file of the arrays dropped from the OS page cache
(``posix_fadvise(POSIX_FADV_DONTNEED)``) before each run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from tessera.ssdb import reference as ref
from tessera.ssdb import tiles as sky

TILE = 100
COORD_MAX = (1 << 20) - 1


def _tiledb() -> Any:
    try:
        return importlib.import_module("tiledb")  # untyped: used through Any
    except ImportError as e:
        raise RuntimeError("TileDB-Py is not installed: `pip install tiledb` (requirements-bench.txt)") from e


def _filters(tdb: Any) -> Any:
    return tdb.FilterList([tdb.ByteShuffleFilter(), tdb.ZstdFilter(level=1)])


def create_arrays(tdb: Any, root: Path, cfg: ref.Config, ctx: Any) -> None:
    n, s = cfg.images, cfg.side
    tile = min(TILE, s)
    dom = tdb.Domain(
        tdb.Dim("t", domain=(0, n - 1), tile=1, dtype=np.int32, ctx=ctx),
        tdb.Dim("y", domain=(0, s - 1), tile=tile, dtype=np.int32, ctx=ctx),
        tdb.Dim("x", domain=(0, s - 1), tile=tile, dtype=np.int32, ctx=ctx),
        ctx=ctx,
    )
    attrs = [tdb.Attr(a, dtype=np.int32, filters=_filters(tdb), ctx=ctx) for a in ref.ATTRS]
    tdb.Array.create(str(root / "images"), tdb.ArraySchema(domain=dom, attrs=attrs, ctx=ctx))
    dom = tdb.Domain(tdb.Dim("t", domain=(0, n - 1), tile=n, dtype=np.int32, ctx=ctx), ctx=ctx)
    attrs = [tdb.Attr(a, dtype=np.int64, ctx=ctx) for a in ("llc_x", "llc_y")]
    tdb.Array.create(str(root / "images_llc"), tdb.ArraySchema(domain=dom, attrs=attrs, ctx=ctx))
    dom = tdb.Domain(
        tdb.Dim("t", domain=(0, n - 1), tile=20, dtype=np.int32, ctx=ctx),
        tdb.Dim("cy", domain=(0, COORD_MAX), tile=1000, dtype=np.int32, ctx=ctx),
        tdb.Dim("cx", domain=(0, COORD_MAX), tile=1000, dtype=np.int32, ctx=ctx),
        ctx=ctx,
    )
    attrs = [
        tdb.Attr("id", dtype=np.int64, filters=_filters(tdb), ctx=ctx),
        tdb.Attr("pixelSum", dtype=np.int64, filters=_filters(tdb), ctx=ctx),
        tdb.Attr("avgDist", dtype=np.float64, filters=_filters(tdb), ctx=ctx),
        *(tdb.Attr(b, dtype=np.int32, filters=_filters(tdb), ctx=ctx) for b in ("bx0", "by0", "bx1", "by1")),
        tdb.Attr("polygon", dtype=np.int32, var=True, filters=_filters(tdb), ctx=ctx),
    ]
    tdb.Array.create(
        str(root / "observations"),
        tdb.ArraySchema(domain=dom, attrs=attrs, sparse=True, allows_duplicates=True, capacity=4096, ctx=ctx),
    )


def _evict(root: Path) -> None:
    for dirpath, _, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                fd = os.open(os.path.join(dirpath, name), os.O_RDONLY)
                try:
                    os.fdatasync(fd)  # DONTNEED drops clean pages only
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def _write_observations(tdb: Any, root: Path, obs: Sequence[ref.Observation], ctx: Any) -> None:
    if not obs:
        return
    polys = np.empty(len(obs), dtype=object)
    for i, o in enumerate(obs):
        polys[i] = np.array([c for p in o.polygon for c in p], dtype=np.int32)
    with tdb.open(str(root / "observations"), "w", ctx=ctx) as a:
        a[
            np.array([o.t for o in obs], np.int32),
            np.array([o.cy for o in obs], np.int32),
            np.array([o.cx for o in obs], np.int32),
        ] = {
            "id": np.array([o.id for o in obs], np.int64),
            "pixelSum": np.array([o.pixel_sum for o in obs], np.int64),
            "avgDist": np.array([o.avg_dist for o in obs], np.float64),
            **{b: np.array([o.bbox[k] for o in obs], np.int32) for k, b in enumerate(("bx0", "by0", "bx1", "by1"))},
            "polygon": polys,
        }


def _read_observations(a: Any, t0: int, t1: int, y0: int, y1: int, x0: int, x1: int) -> List[ref.Observation]:
    """Observations with t in [t0, t1], cy in [y0, y1], cx in [x0, x1] (inclusive), by id."""
    r = a.query(attrs=["id", "pixelSum", "avgDist", "bx0", "by0", "bx1", "by1", "polygon"]).multi_index[
        t0:t1, max(0, y0) : min(COORD_MAX, y1), max(0, x0) : min(COORD_MAX, x1)
    ]
    out = []
    for i in range(len(r["id"])):
        flat = r["polygon"][i]
        out.append(
            ref.Observation(
                int(r["id"][i]),
                int(r["t"][i]),
                int(r["cx"][i]),
                int(r["cy"][i]),
                int(r["pixelSum"][i]),
                float(r["avgDist"][i]),
                (int(r["bx0"][i]), int(r["by0"][i]), int(r["bx1"][i]), int(r["by1"][i])),
                [(int(flat[k]), int(flat[k + 1])) for k in range(0, len(flat), 2)],
            )
        )
    out.sort(key=lambda o: o.id)
    return out


def _write_groups(tdb: Any, root: Path, groups: Sequence[ref.Group], ctx: Any) -> None:
    g = len(groups)
    dom = tdb.Domain(tdb.Dim("gid", domain=(0, max(g, 1) - 1), tile=min(max(g, 1), 4096), dtype=np.int64, ctx=ctx))
    names = ("n", "sumCx", "sumCy", "tx0", "ty0", "tx1", "ty1", "px0", "py0", "px1", "py1")
    attrs = [tdb.Attr(nm, dtype=np.int64, filters=_filters(tdb), ctx=ctx) for nm in names]
    attrs.append(tdb.Attr("members", dtype=np.int64, var=True, filters=_filters(tdb), ctx=ctx))
    tdb.Array.create(str(root / "groups"), tdb.ArraySchema(domain=dom, attrs=attrs, ctx=ctx))
    cols: Dict[str, List[int]] = {nm: [] for nm in names}
    members = np.empty(g, dtype=object)
    for i, gr in enumerate(groups):
        ms = sorted(gr.members, key=lambda o: (o.t, o.id))
        vals = (
            len(ms),
            sum(o.cx for o in ms),
            sum(o.cy for o in ms),
            min(o.cx for o in ms),
            min(o.cy for o in ms),
            max(o.cx for o in ms),
            max(o.cy for o in ms),
            min(o.bbox[0] for o in ms),
            min(o.bbox[1] for o in ms),
            max(o.bbox[2] for o in ms),
            max(o.bbox[3] for o in ms),
        )
        for nm, v in zip(names, vals):
            cols[nm].append(v)
        members[i] = np.array([v for o in ms for v in (o.t, o.id, o.cx, o.cy, o.pixel_sum)], dtype=np.int64)
    if g:
        with tdb.open(str(root / "groups"), "w", ctx=ctx) as a:
            a[0:g] = {**{nm: np.array(v, np.int64) for nm, v in cols.items()}, "members": members}


Member = Tuple[int, int, int, int, int]  # t, id, cx, cy, pixelSum


def _read_groups(tdb: Any, root: Path, ctx: Any) -> Tuple[Dict[str, np.ndarray], List[List[Member]]]:
    with tdb.open(str(root / "groups"), ctx=ctx) as a:
        r = a[:]
    members = [[tuple(int(v) for v in m[k : k + 5]) for k in range(0, len(m), 5)] for m in r["members"]]
    return r, members  # type: ignore[return-value]


def _group_key(ms: Sequence[Member]) -> str:
    return ";".join(sorted(f"{t},{cx},{cy},{ps}" for t, _, cx, cy, ps in ms))


def _windows(
    images: Any, cfg: ref.Config, llcs: Sequence[ref.Point], ms: Sequence[Member], slab: ref.Box
) -> Dict[str, Any]:
    s, half = cfg.side, cfg.d6 // 2
    meeting = [
        t
        for t, (lx, ly) in enumerate(llcs)
        if lx <= slab[2] and slab[0] <= lx + s - 1 and ly <= slab[3] and slab[1] <= ly + s - 1
    ]
    order = sorted(ms, key=lambda m: (m[0], m[2], m[3], m[4]))

    def clip(cx: int, cy: int, ti: int) -> Optional[Tuple[int, int, int, int]]:
        lx, ly = llcs[ti]
        x0, x1 = max(cx - half, lx), min(cx + half, lx + s)
        y0, y1 = max(cy - half, ly), min(cy + half, ly + s)
        return (x0, y0, x1, y1) if x0 < x1 and y0 < y1 else None

    # one read per image: the box its windows span (local coordinates)
    pixels: Dict[int, Tuple[int, int, np.ndarray]] = {}
    for ti in meeting:
        boxes = [b for m in order if (b := clip(m[2], m[3], ti)) is not None]
        if boxes:
            lx, ly = llcs[ti]
            bx0, by0 = min(b[0] for b in boxes) - lx, min(b[1] for b in boxes) - ly
            bx1, by1 = max(b[2] for b in boxes) - lx, max(b[3] for b in boxes) - ly
            pix = images.query(attrs=["pix"])[ti : ti + 1, by0:by1, bx0:bx1]["pix"][0]
            pixels[ti] = (lx + bx0, ly + by0, pix)
    h = hashlib.sha256()
    windows = 0
    for t, _, cx, cy, ps in order:
        for ti in meeting:
            box = clip(cx, cy, ti)
            if box is None:
                continue
            x0, y0, x1, y1 = box
            ox, oy, block = pixels[ti]
            pix = block[y0 - oy : y1 - oy, x0 - ox : x1 - ox]
            windows += 1
            h.update(np.array([t, cx, cy, ps, ti, x0, y0, x1, y1], dtype="<i8").tobytes())
            h.update(np.ascontiguousarray(pix, dtype="<i4").tobytes())
    return {"windows": windows, "pix_windows_sha256": h.hexdigest()}


def _selected(ms_all: List[List[Member]], idx: Sequence[int]) -> Tuple[Dict[str, Any], List[Member]]:
    keys = [_group_key(ms_all[i]) for i in idx]
    members: Dict[int, Member] = {}
    for i in idx:
        for m in ms_all[i]:
            members[m[1]] = m
    return {"count": len(keys), "keys_sha256": ref.sha256_lines(keys)}, list(members.values())


def run_queries(
    tdb: Any, root: Path, cfg: ref.Config, x: int, y: int, r: int, seconds: Dict[str, float]
) -> Dict[str, Any]:
    cyc = {f"Q{q}": ref.query_cycle(q, r, cfg.cycles) for q in range(1, 7)}
    m = min(cfg.u1, cfg.side)
    out: Dict[str, Any] = {"run": r, "X": x, "Y": y, "cycles": cyc}
    ctx = tdb.Ctx()
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        seconds[name] = seconds.get(name, 0.0) + now - clock[0]
        clock[0] = now

    with tdb.open(str(root / "images"), ctx=ctx) as images, tdb.open(str(root / "images_llc"), ctx=ctx) as la:
        llc = la[:]
        llcs = [(int(a), int(b)) for a, b in zip(llc["llc_x"], llc["llc_y"])]
        c = cyc["Q1"]
        # TileDB's aggregate pushdown (as its docs recommend): full tiles from fragment metadata.
        # (``agg("sum")`` would sum every attribute: name the one.)
        total = images.query().agg({"pix": "sum"})[20 * c : 20 * c + 20, 0:m, 0:m]
        out["Q1"] = {"sum": int(total), "count": 20 * m * m}
        lap("Q1")

        t2 = 20 * cyc["Q2"]
        slab = images.query(attrs=["pix"])[t2 : t2 + 1, 0:m, 0:m]["pix"][0]
        q2 = ref.cook(slab, llcs[t2], t2, 900, cfg.d1, cfg.d2)
        # stored as a file next to the arrays (the run's output, as Q3's)
        np.save(root / "q2_result.npy", np.array([(o.t, o.cx, o.cy, o.pixel_sum) for o in q2], np.int64))
        out["Q2"] = {
            "count": len(q2),
            "pixelSum": sum(o.pixel_sum for o in q2),
            "keys_sha256": ref.sha256_lines(o.key for o in q2),
        }
        lap("Q2")

        c = cyc["Q3"]
        data = images[20 * c : 20 * c + 20, 0:m, 0:m]
        results = [ref.regrid({a: data[a][k] for a in ref.ATTRS}, m) for k in range(20)]
        np.save(root / "q3_result.npy", np.stack(results))
        shas = [hashlib.sha256(res.astype("<i4").tobytes()).hexdigest() for res in results]
        out["Q3"] = {"sha256_of_image_shas": hashlib.sha256("".join(shas).encode()).hexdigest()}
        lap("Q3")

        x1, y1 = x + cfg.u2 - 1, y + cfg.u2 - 1
        box2 = (x, y, x1, y1)
        with tdb.open(str(root / "observations"), ctx=ctx) as oa:
            c = cyc["Q4"]
            q4 = _read_observations(oa, 20 * c, 20 * c + 19, y, y1, x, x1)
            out["Q4"] = {
                "count": len(q4),
                "sum": sum(o.pixel_sum for o in q4),
                "keys_sha256": ref.sha256_lines(o.key for o in q4),
            }
            lap("Q4")
            c = cyc["Q5"]
            # a kept polygon lies within its bbox, whose sides are <= D1 and which holds its centre
            d = cfg.d1 - 1
            cands = _read_observations(oa, 20 * c, 20 * c + 19, y - d, y1 + d, x - d, x1 + d)
            q5 = [o for o in cands if ref.region_meets_box(o.polygon, box2)]
            out["Q5"] = {"count": len(q5), "keys_sha256": ref.sha256_lines(o.key for o in q5)}
            lap("Q5")
            c = cyc["Q6"]
            q6 = _read_observations(oa, 20 * c, 20 * c + 19, y, y1, x, x1)
            out["Q6"] = ref.density_windows([(o.cx, o.cy) for o in q6], x, y, cfg.u2, cfg.d4, cfg.d5)
            lap("Q6")

            g, ms_all = _read_groups(tdb, root, ctx)
            n = g["n"]
            sel = np.nonzero(
                (x * n <= g["sumCx"])
                & (g["sumCx"] < (x + cfg.u2) * n)
                & (y * n <= g["sumCy"])
                & (g["sumCy"] < (y + cfg.u2) * n)
            )[0]
            summary, _ = _selected(ms_all, sel.tolist())
            out["Q7"] = {
                "count": summary["count"],
                "singletons": int((n[sel] == 1).sum()),
                "keys_sha256": summary["keys_sha256"],
            }
            lap("Q7")

            slab3 = (x, y, x + cfg.u3 - 1, y + cfg.u3 - 1)
            near = (g["tx0"] <= slab3[2]) & (g["tx1"] >= slab3[0]) & (g["ty0"] <= slab3[3]) & (g["ty1"] >= slab3[1])
            q8 = [
                i
                for i in np.nonzero(near)[0].tolist()
                if ref.polyline_meets_box([(m_[2], m_[3]) for m_ in ms_all[i]], slab3)
            ]
            summary, members = _selected(ms_all, q8)
            out["Q8"] = {"groups": summary, "output": _windows(images, cfg, llcs, members, slab3)}
            lap("Q8")

            near = (g["px0"] <= slab3[2]) & (g["px1"] >= slab3[0]) & (g["py0"] <= slab3[3]) & (g["py1"] >= slab3[1])
            cand = np.nonzero(near)[0].tolist()
            q9 = []
            if cand:
                # one read: every member of a candidate has its centre in this box (all times)
                cms = [m_ for i in cand for m_ in ms_all[i]]
                by_id = {
                    o.id: o
                    for o in _read_observations(
                        oa,
                        min(m_[0] for m_ in cms),
                        max(m_[0] for m_ in cms),
                        min(m_[3] for m_ in cms),
                        max(m_[3] for m_ in cms),
                        min(m_[2] for m_ in cms),
                        max(m_[2] for m_ in cms),
                    )
                }
                for i in cand:
                    grp = ref.Group([by_id[m_[1]] for m_ in ms_all[i]])
                    if any(ref.region_meets_box(p, slab3) for p in ref.q9_regions(grp)):
                        q9.append(i)
            summary, members = _selected(ms_all, q9)
            out["Q9"] = {"groups": summary, "output": _windows(images, cfg, llcs, members, slab3)}
            lap("Q9")
    return out


def run(
    cfg: ref.Config,
    workdir: Path,
    starts: Sequence[Tuple[str, int]] = (("spec", 15), ("dense", 15)),
    cold: bool = True,
    tiles: Optional[Path] = None,
) -> Dict[str, Any]:
    tdb = _tiledb()
    root = workdir / "tiledb"
    if root.exists():
        raise FileExistsError(f"{root} exists: give a fresh --dir")
    root.mkdir(parents=True)
    ctx = tdb.Ctx()
    tile_arr = ref.load_tiles(tiles)
    report: Dict[str, Any] = {"config": cfg.name, "engine": f"tiledb {tdb.libtiledb.version()}"}
    report["data"] = {"tileData_sha256": sky.SHA256}
    seconds: Dict[str, Any] = {"load": 0.0, "generate": 0.0, "cook": 0.0, "F1prime": 0.0}
    create_arrays(tdb, root, cfg, ctx)
    obs: List[ref.Observation] = []
    prime: List[ref.Observation] = []
    llcs = [ref.nominal_llc(cfg, t) for t in range(cfg.images)]
    with tdb.open(str(root / "images_llc"), "w", ctx=ctx) as a:
        a[:] = {"llc_x": np.array([p[0] for p in llcs], np.int64), "llc_y": np.array([p[1] for p in llcs], np.int64)}
    s = cfg.side
    for c in range(cfg.cycles):
        t0 = time.perf_counter()
        imgs = [ref.generate_image(cfg, tile_arr, t) for t in range(20 * c, 20 * c + 20)]
        t1 = time.perf_counter()
        with tdb.open(str(root / "images"), "w", ctx=ctx) as a:
            a[20 * c : 20 * c + 20, 0:s, 0:s] = {name: np.stack([im[name] for im in imgs]) for name in ref.ATTRS}
        t2 = time.perf_counter()
        seconds["generate"] += t1 - t0
        seconds["load"] += t2 - t1
        del imgs
        with tdb.open(str(root / "images"), ctx=ctx) as a:
            pix = a.query(attrs=["pix"])[20 * c : 20 * c + 20, 0:s, 0:s]["pix"]
        new: List[ref.Observation] = []
        for k in range(20):
            for o in ref.cook(pix[k], llcs[20 * c + k], 20 * c + k, 1000, cfg.d1, cfg.d2):
                o.id = len(obs) + len(new) + 1
                new.append(o)
        _write_observations(tdb, root, new, ctx)
        obs += new
        t3 = time.perf_counter()
        seconds["cook"] += t3 - t2
        for k in range(20):
            prime += ref.cook(pix[k], llcs[20 * c + k], 20 * c + k, 900, cfg.d1, cfg.d2)
        seconds["F1prime"] += time.perf_counter() - t3
    t0 = time.perf_counter()
    with tdb.open(str(root / "observations"), ctx=ctx) as a:
        stored = _read_observations(a, 0, cfg.images - 1, 0, COORD_MAX, 0, COORD_MAX)
    groups = ref.group(stored, cfg.d3)
    _write_groups(tdb, root, groups, ctx)
    seconds["group"] = time.perf_counter() - t0
    seconds["total"] = seconds["load"] + seconds["cook"] + seconds["group"]
    report["F1"] = ref.f1_summary(stored)
    report["F1prime"] = ref.f1_summary(prime)
    g, ms_all = _read_groups(tdb, root, ctx)
    singles = int((g["n"] == 1).sum())
    report["F2"] = {
        "groups": len(ms_all),
        "multi_member_groups": len(ms_all) - singles,
        "singletons": singles,
        "groups_sha256": ref.sha256_lines(_group_key(ms) for ms in ms_all),
    }
    report["queries"] = {}
    seconds["queries"] = {}
    for which, runs in starts:
        qsec: Dict[str, float] = {}
        out_runs = []
        for r in range(runs):
            if cold:
                _evict(root)
            out_runs.append(run_queries(tdb, root, cfg, *cfg.starts(which)[r // 3], r, qsec))
        report["queries"][which] = {"runs": out_runs}
        qs = {f"Q{q}": qsec.get(f"Q{q}", 0.0) for q in range(1, 10)}
        qs["total"] = sum(qs.values())
        seconds["queries"][which] = qs
    report["seconds"] = seconds
    return report


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tessera.ssdb.tiledb_baseline", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="micro", choices=sorted(ref.CONFIGS))
    ap.add_argument("--dir", type=Path, required=True, help="folder for the arrays (DIR/tiledb) and report.json")
    ap.add_argument("--starts", default="spec,dense", help="start sets: spec, dense, each optionally NAME:RUNS")
    ap.add_argument("--warm", action="store_true", help="no page-cache eviction between runs")
    ap.add_argument("--tiles", type=Path, help="a tileData file (else made by the recipe)")
    args = ap.parse_args(argv)
    try:
        starts = ref.parse_starts(args.starts)
    except ValueError as e:
        ap.error(str(e))
    args.dir = args.dir.resolve()  # the server runs elsewhere: a relative path would miss
    try:
        rep = run(ref.CONFIGS[args.config], args.dir, starts, not args.warm, args.tiles)
    except (RuntimeError, FileExistsError) as e:
        print(f"tiledb baseline: {e}", file=sys.stderr)
        return 3 if isinstance(e, RuntimeError) else 2
    tmp = args.dir / "report.json.tmp"
    tmp.write_text(json.dumps(rep, indent=2) + "\n")
    os.replace(tmp, args.dir / "report.json")
    sec = rep["seconds"]
    print(
        f"{args.config} on TileDB: load {sec['load']:.2f} s, cook {sec['cook']:.2f} s, group {sec['group']:.2f} s; "
        + ", ".join(f"{w} queries {v['total']:.2f} s" for w, v in sec["queries"].items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
