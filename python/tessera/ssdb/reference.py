"""An independent, straightforward reference of SS-DB (SSDB.md) for small configurations.

Written from SSDB.md's text only, as the oracle the engines are checked against (§5:
"results must equal those of an independent, straightforward implementation"): it shares no
code with the Rust crate ``tessera-ssdb``. Clarity over speed: components by breadth-first
search over the qualifying cells, the Moore trace cell by cell as §2 words it, grouping by a
scan of the last 20 images, the geometric tests of §4 in exact integer arithmetic; numpy only
for whole-image work (generation, Q1 sums, Q3 regridding, Q6 prefix sums).

Raw input: the images are regenerated here from §1 (``generate_image``: the sky tiles of
``tessera.ssdb.tiles``, whose ``tileData`` sha256 is checked, then §1's formula as whole-array
numpy arithmetic), so the reference does not depend on the Tessera store either. ``store_images``
reads them back from a Tessera store instead (``tessera ssdb run`` keeps them in ``DIR/images``,
dimensions (t, y, x), and the nominal corners in ``DIR/images_llc``).

``python -m tessera.ssdb.reference --config micro --out report.json`` writes a report in the
shape of §5 (F1, F1prime, F2 and the queries of both start sets).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import numpy as np

from tessera.ssdb import tiles as sky

W = 1_000_000
PI = "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679"
ATTRS = ("pix", "var", "valid", "sat", "v0", "v1", "v2", "v3", "v4", "v5", "v6")
T_WINDOW = 20  # §3: images t-20..t-1
IMAGES_PER_CYCLE = 20

Image = Dict[str, np.ndarray]
Point = Tuple[int, int]
Box = Tuple[int, int, int, int]  # closed integer box (x0, y0, x1, y1)


# --- §6: configurations and parameters -------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """A configuration of §6 with the medium object parameters and its query slabs."""

    name: str
    images: int
    side: int
    dense: int
    u1: int
    u2: int
    u3: int
    spec_x: Tuple[int, ...]
    spec_y: Tuple[int, ...]
    d1: int = 50
    d2: int = 50
    d3: Fraction = Fraction(1, 10)
    d4: int = 100
    d5: int = 20
    d6: int = 100

    @property
    def cycles(self) -> int:
        return self.images // IMAGES_PER_CYCLE

    def starts(self, which: str) -> List[Point]:
        """The five start points of set ``spec`` (§6's table) or ``dense`` (§5)."""
        if which == "spec":
            return list(zip(self.spec_x, self.spec_y))
        if which == "dense":
            base = (W - self.dense) // 2
            fs = [(0.1, 0.1), (0.3, 0.5), (0.5, 0.2), (0.2, 0.4), (0.4, 0.3)]
            # Python's round() is round half to even, as §5 asks.
            return [(base + round(fx * self.dense), base + round(fy * self.dense)) for fx, fy in fs]
        raise ValueError(f"unknown start set {which!r}: expected spec or dense")


CONFIGS = {
    "micro": Config(
        "micro", 40, 200, 267, 200, 533, 53,
        (500080, 500107, 500000, 500107, 500107), (500080, 499760, 500107, 500027, 499813),
    ),
    "tiny": Config(
        "tiny", 160, 500, 1333, 500, 1333, 133,
        (500400, 500533, 500000, 500533, 500533), (500400, 498800, 500533, 500133, 499067),
    ),
    # §6 gives no row for very-small: U1 = S, U2 and U3 scaled by S/3750 (4266.7, 426.7), and the
    # published points' offsets from 500000 scaled by R/10^4 = 0.3162, as the Rust `params` does.
    "very-small": Config(
        "very-small", 40, 1600, 3162, 1600, 4267, 427,
        (500949, 501265, 500000, 501265, 501265), (500949, 497154, 501265, 500316, 497787),
    ),
}  # fmt: skip


# --- §1: raw data ------------------------------------------------------------------------------


def rand(t: int) -> float:
    """§1's rand: lcg applied 10 times in C int arithmetic (only the low 30 bits survive)."""
    x = t & 0xFFFFFFFF
    for _ in range(10):
        x = (1103515245 * x + 12345) & 0x3FFFFFFF
    return x / float(1 << 30)


def _rand_array(t: np.ndarray) -> np.ndarray:
    x = t.astype(np.int64) & 0xFFFFFFFF
    for _ in range(10):
        x = (1103515245 * x + 12345) & 0x3FFFFFFF
    return x / float(1 << 30)


def _norm_array(t: np.ndarray) -> np.ndarray:
    t = t.astype(np.int64)
    total = np.zeros(t.shape, dtype=np.float64)
    for i in range(12):
        total += _rand_array(12 * t + i)
    return total - 6.0


def nominal_llc(cfg: Config, t: int) -> Point:
    """The nominal lower-left corner of image t (§1)."""
    n, s, r = cfg.images, cfg.side, cfg.dense
    tp = t - n // 2 if t >= n // 2 else t
    if rand(3 * tp) < 0.8:
        return (W - r) // 2 + int(rand(3 * tp + 1) * (r - s)), (W - r) // 2 + int(rand(3 * tp + 2) * (r - s))
    return int(rand(3 * tp + 1) * (W - s)), int(rand(3 * tp + 2) * (W - s))


def load_tiles(path: Optional[Path] = None) -> np.ndarray:
    """The 10 sky tiles as a (10, ty, tx) uint16 array, from ``path`` or the recipe; checked."""
    data = path.read_bytes() if path is not None else sky.tile_data()
    digest = hashlib.sha256(data).hexdigest()
    if len(data) != sky.SIZE or digest != sky.SHA256:
        raise ValueError(f"tileData: {len(data)} bytes, sha256 {digest}; expected {sky.SIZE}, {sky.SHA256}")
    head = np.frombuffer(data[:16], dtype="<i4")
    if list(head) != [sky.ST, sky.ST, sky.P, sky.P]:
        raise ValueError(f"tileData header {list(head)}")
    return np.frombuffer(data[16:], dtype="<u2").reshape(10, sky.ST, sky.ST)


def generate_image(cfg: Config, tiles: np.ndarray, t: int) -> Image:
    """The 11 int32 attributes of image t, each (S, S) indexed [y, x], by §1's formula."""
    s = cfg.side
    lx, ly = nominal_llc(cfg, t)
    ax = max(0, lx + t % 3 - 1)
    ay = max(0, ly + (t // 3) % 3 - 1)
    wy, wx = np.meshgrid(np.arange(s, dtype=np.int64) + ay, np.arange(s, dtype=np.int64) + ax, indexing="ij")
    p = sky.P
    digits = np.array([int(c) for c in PI[:101]])
    k = digits[(wx // p + (wy // p) * (W // p + 1)) % 101]
    tx, ty = wx % p, wy % p
    gap = (tx >= sky.ST) | (ty >= sky.ST)
    raw = np.where(gap, 0, tiles[k, np.minimum(ty, sky.ST - 1), np.minimum(tx, sky.ST - 1)].astype(np.int64))
    pix = np.clip(raw + (t % 5 - 2) * 10, 0, 65535)
    seed = (3141 * t + 592 * wx + wy) % 65359
    nk = [_norm_array(6 * seed + j) for j in range(1, 7)]
    out = {
        "pix": pix,
        "var": np.floor(np.sqrt(pix.astype(np.float64))),
        "valid": (~gap).astype(np.int64),
        "sat": (raw == 65535).astype(np.int64),
        "v0": np.maximum(0, np.trunc((pix - 3000) * 65535 / 62535)),
        "v1": np.trunc(65535 * nk[0]),
        "v2": np.trunc(32768 + 32768 * nk[1]),
        "v3": np.trunc(-5e8 + 1e6 * nk[2]),
        "v4": np.trunc(10 * nk[3]),
        "v5": np.trunc(1000 + 100 * nk[4]),
        "v6": np.trunc(1 + 0.5 * nk[5]),
    }
    return {a: np.ascontiguousarray(out[a].astype(np.int32)) for a in ATTRS}


def store_images(store: Path) -> Tuple[List[Image], List[Point]]:
    """The raw images and nominal corners read back from a Tessera SS-DB store (``DIR``)."""
    import tessera as ts

    with ts.open(str(store / "images")) as a:
        n = a.shape[0]
        images = []
        for t in range(n):
            got = a.read(ranges=[(t, t), None, None])
            images.append({name: np.ascontiguousarray(got[name][0]) for name in ATTRS})
    with ts.open(str(store / "images_llc")) as a:
        llc = a.read()
    return images, [(int(x), int(y)) for x, y in zip(llc["llc_x"], llc["llc_y"])]


# --- §2: cooking -------------------------------------------------------------------------------

# Moore directions d = 0..7 (y pointing down): N, NE, E, SE, S, SW, W, NW.
DIRS = ((0, -1), (1, -1), (1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1))


@dataclass
class Observation:
    """An observation of §2, in world coordinates."""

    id: int
    t: int
    cx: int
    cy: int
    pixel_sum: int
    avg_dist: float
    bbox: Box
    polygon: List[Point]

    @property
    def cycle(self) -> int:
        return self.t // IMAGES_PER_CYCLE

    @property
    def key(self) -> str:
        return f"{self.t},{self.cx},{self.cy},{self.pixel_sum}"

    @property
    def sort_key(self) -> Tuple[int, int, int, int]:
        return (self.t, self.cx, self.cy, self.pixel_sum)


def components(pix: np.ndarray, th: int) -> List[List[Point]]:
    """The 8-connected components of the cells with ``pix >= th``, in raster order of first cell."""
    ys, xs = np.nonzero(pix >= th)  # row-major: raster order
    qualifying = set(zip(xs.tolist(), ys.tolist()))
    seen: Set[Point] = set()
    out = []
    for y, x in zip(ys.tolist(), xs.tolist()):
        if (x, y) in seen:
            continue
        seen.add((x, y))
        cells = []
        queue = deque([(x, y)])
        while queue:
            c = queue.popleft()
            cells.append(c)
            for dx in (-1, 0, 1):
                for dy in (-1, 0, 1):
                    nb = (c[0] + dx, c[1] + dy)
                    if nb in qualifying and nb not in seen:
                        seen.add(nb)
                        queue.append(nb)
        out.append(cells)
    return out


def moore_trace(cells: Set[Point]) -> List[Point]:
    """The boundary B of §2: Moore-neighbour trace from the leftmost-then-topmost cell."""
    s0 = min(cells)  # smallest x, then smallest y

    def step(c: Point, d: int) -> Optional[Tuple[Point, int]]:
        e = d - 1 if d % 2 == 0 else d - 2
        for i in range(8):
            nd = (e + i) % 8
            nb = (c[0] + DIRS[nd][0], c[1] + DIRS[nd][1])
            if nb in cells:
                return nb, nd
        return None

    first = step(s0, 7)
    if first is None:
        return [s0]
    b = [s0]
    cur, d = first
    limit = 8 * len(cells) + 8  # each cell is entered at most once per direction
    while len(b) <= limit:
        if cur == s0:
            nxt = step(s0, d)
            if nxt == first:
                return b
        b.append(cur)
        nxt = step(cur, d)
        assert nxt is not None  # a cell with a predecessor has a neighbour
        cur, d = nxt
    raise AssertionError("Moore trace did not close")


def cook(pix: np.ndarray, llc: Point, t: int, th: int, d1: int, d2: int) -> List[Observation]:
    """F1 (th 1000) or F1' (th 900) of one image: kept observations in raster order, id 0."""
    out = []
    for cells in components(pix, th):
        xs = [c[0] for c in cells]
        ys = [c[1] for c in cells]
        xmin, xmax, ymin, ymax = min(xs), max(xs), min(ys), max(ys)
        polygon = moore_trace(set(cells))
        if len(polygon) > d2 or xmax - xmin + 1 > d1 or ymax - ymin + 1 > d1:
            continue
        vs = [int(pix[y, x]) for x, y in cells]
        total = sum(vs)
        sx = sum(v * x for v, (x, _) in zip(vs, cells))
        sy = sum(v * y for v, (_, y) in zip(vs, cells))
        fx, fy = sx / total, sy / total
        avg = sum(v * math.hypot(x - fx, y - fy) for v, (x, y) in zip(vs, cells)) / total
        lx, ly = llc
        out.append(
            Observation(
                id=0,
                t=t,
                cx=lx + sx // total,
                cy=ly + sy // total,
                pixel_sum=total,
                avg_dist=avg,
                bbox=(lx + xmin, ly + ymin, lx + xmax, ly + ymax),
                polygon=[(lx + x, ly + y) for x, y in polygon],
            )
        )
    return out


def cook_all(cfg: Config, pix_of: Callable[[int], np.ndarray], llcs: Sequence[Point], th: int) -> List[Observation]:
    """Cooks every image in time order and numbers the observations 1, 2, ..."""
    obs: List[Observation] = []
    for t in range(cfg.images):
        for o in cook(pix_of(t), llcs[t], t, th, cfg.d1, cfg.d2):
            o.id = len(obs) + 1
            obs.append(o)
    return obs


# --- §3: grouping -------------------------------------------------------------------------------


@dataclass
class Group:
    members: List[Observation] = field(default_factory=list)

    @property
    def key(self) -> str:
        return ";".join(sorted(o.key for o in self.members))


def matches(n: Observation, e: Observation, d3: Fraction) -> bool:
    """§3's test, exactly: 1 <= dt <= 20 and q·d² <= p·dt."""
    dt = n.t - e.t
    if not 1 <= dt <= T_WINDOW:
        return False
    d2 = (n.cx - e.cx) ** 2 + (n.cy - e.cy) ** 2
    return d3.denominator * d2 <= d3.numerator * dt


def group(obs: Sequence[Observation], d3: Fraction) -> List[Group]:
    """F2: created groups in creation order, then the singletons in id order."""
    by_time: Dict[int, List[Observation]] = {}
    for o in sorted(obs, key=lambda o: o.id):
        by_time.setdefault(o.t, []).append(o)
    groups: List[Group] = []
    member_of: Dict[int, List[int]] = {}  # observation id -> group indices
    for t in sorted(by_time):
        window = [e for tt in range(t - T_WINDOW, t) for e in by_time.get(tt, [])]
        window.sort(key=lambda e: e.id)
        for n in by_time[t]:
            collected: List[int] = []
            for e in window:
                if not matches(n, e, d3):
                    continue
                if e.id in member_of:
                    for g in member_of[e.id]:
                        if g not in collected:
                            collected.append(g)
                else:
                    groups.append(Group([e]))
                    member_of[e.id] = [len(groups) - 1]
                    collected.append(len(groups) - 1)
            for g in collected:
                groups[g].members.append(n)
                member_of.setdefault(n.id, []).append(g)
    for o in sorted(obs, key=lambda o: o.id):
        if o.id not in member_of:
            groups.append(Group([o]))
    return groups


# --- §5: summaries ------------------------------------------------------------------------------


def sha256_lines(keys: Iterable[str]) -> str:
    """sha256 of the keys sorted as UTF-8 byte strings and joined by newlines (no trailing one)."""
    ordered = sorted(k.encode() for k in keys)
    return hashlib.sha256(b"\n".join(ordered)).hexdigest()


def f1_summary(obs: Sequence[Observation]) -> Dict[str, Any]:
    return {
        "count": len(obs),
        "pixelSum": sum(o.pixel_sum for o in obs),
        "vertices": sum(len(o.polygon) for o in obs),
        "observation_keys_sha256": sha256_lines(o.key for o in obs),
    }


def f2_summary(groups: Sequence[Group]) -> Dict[str, Any]:
    singletons = sum(1 for g in groups if len(g.members) == 1)
    return {
        "groups": len(groups),
        "multi_member_groups": len(groups) - singletons,
        "singletons": singletons,
        "groups_sha256": sha256_lines(g.key for g in groups),
    }


# --- §4: exact geometry -------------------------------------------------------------------------


def _orient(a: Point, b: Point, c: Point) -> int:
    v = (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])
    return (v > 0) - (v < 0)


def _on_segment(a: Point, b: Point, p: Point) -> bool:
    return min(a[0], b[0]) <= p[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= p[1] <= max(a[1], b[1])


def segments_meet(a: Point, b: Point, c: Point, d: Point) -> bool:
    """Whether closed segments ab and cd share a point (exact)."""
    o1, o2, o3, o4 = _orient(a, b, c), _orient(a, b, d), _orient(c, d, a), _orient(c, d, b)
    if o1 != o2 and o3 != o4:
        return True
    return (
        (o1 == 0 and _on_segment(a, b, c))
        or (o2 == 0 and _on_segment(a, b, d))
        or (o3 == 0 and _on_segment(c, d, a))
        or (o4 == 0 and _on_segment(c, d, b))
    )


def in_box(p: Point, box: Box) -> bool:
    return box[0] <= p[0] <= box[2] and box[1] <= p[1] <= box[3]


def segment_meets_box(a: Point, b: Point, box: Box) -> bool:
    if in_box(a, box) or in_box(b, box):
        return True
    x0, y0, x1, y1 = box
    corners = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    return any(segments_meet(a, b, corners[i], corners[(i + 1) % 4]) for i in range(4))


def winding(path: Sequence[Point], p: Point) -> int:
    """Winding number of the closed path (last vertex joined to the first) around p."""
    wn = 0
    n = len(path)
    for i in range(n):
        a, b = path[i], path[(i + 1) % n]
        if a[1] <= p[1]:
            if b[1] > p[1] and _orient(a, b, p) > 0:
                wn += 1
        elif b[1] <= p[1] and _orient(a, b, p) < 0:
            wn -= 1
    return wn


def region_meets_box(path: Sequence[Point], box: Box) -> bool:
    """Whether the closed region of the path (boundary + non-zero winding) meets the closed box."""
    n = len(path)
    xs = [p[0] for p in path]
    ys = [p[1] for p in path]
    if max(xs) < box[0] or min(xs) > box[2] or max(ys) < box[1] or min(ys) > box[3]:
        return False  # the region lies in the path's bounding box
    if n == 1:
        return in_box(path[0], box)
    if any(segment_meets_box(path[i], path[(i + 1) % n], box) for i in range(n)):
        return True
    # The boundary misses the box: the box is wholly inside or wholly outside the region.
    return winding(path, (box[0], box[1])) != 0


def polyline_meets_box(points: Sequence[Point], box: Box) -> bool:
    """Whether the open polyline (a point if one vertex) meets the closed box."""
    if len(points) == 1:
        return in_box(points[0], box)
    return any(segment_meets_box(points[i], points[i + 1], box) for i in range(len(points) - 1))


def convex_hull(points: Iterable[Point]) -> List[Point]:
    """Convex hull vertices (monotone chain, exact), counter-clockwise; 1 or 2 points if degenerate."""
    pts = sorted(set(points))
    if len(pts) <= 2:
        return pts

    def half(seq: Iterable[Point]) -> List[Point]:
        h: List[Point] = []
        for p in seq:
            while len(h) >= 2 and _orient(h[-2], h[-1], p) <= 0:
                h.pop()
            h.append(p)
        return h

    lower, upper = half(pts), half(reversed(pts))
    return lower[:-1] + upper[:-1]


# --- §4: queries --------------------------------------------------------------------------------


def query_cycle(q: int, r: int, cycles: int) -> int:
    """Cycle of run r of query Qq (q = 1..6)."""
    return math.floor(rand(100 * q + r) * cycles)


@functools.lru_cache(maxsize=8)
def regrid_weights(m: int) -> Tuple[np.ndarray, np.ndarray]:
    """Q3's per-axis weights of an m-cell slab axis, as (index, weight) arrays of shape (4, n).

    Output cell u takes source i with weight |[10u, 10u+10) ∩ [3i, 3i+3)|: at most 4 sources
    (i = floor(10u/3) .. +3); unused slots have weight 0 (and index 0)."""
    n = -(-3 * m // 10)
    idx = np.zeros((4, n), dtype=np.int64)
    wts = np.zeros((4, n), dtype=np.int64)
    for u in range(n):
        slot = 0
        for i in range(m):
            w = min(10 * u + 10, 3 * i + 3) - max(10 * u, 3 * i)
            if w > 0:
                idx[slot, u], wts[slot, u] = i, w
                slot += 1
    idx.flags.writeable = False
    wts.flags.writeable = False
    return idx, wts


def regrid(img: Image, m: int) -> np.ndarray:
    """Q3: the m x m slab (local [0, m)^2) regridded 10:3, as an (11, n, n) int32 array."""
    idx, wts = regrid_weights(m)
    n = idx.shape[1]
    den = wts.sum(axis=0)[:, None] * wts.sum(axis=0)[None, :]
    out = np.empty((len(ATTRS), n, n), dtype=np.int32)
    for k, name in enumerate(ATTRS):
        v = img[name][:m, :m].astype(np.int64)
        num = np.zeros((n, n), dtype=np.int64)
        every = np.ones((n, n), dtype=bool)
        some = np.zeros((n, n), dtype=bool)
        for a in range(4):  # y slot
            for b in range(4):  # x slot
                w = wts[a][:, None] * wts[b][None, :]
                cells = v[idx[a]][:, idx[b]]
                num += w * cells
                every &= (w == 0) | (cells != 0)
                some |= (w > 0) & (cells != 0)
        if name == "valid":
            out[k] = every.astype(np.int32)  # AND over the cells with w > 0
        elif name == "sat":
            out[k] = some.astype(np.int32)  # OR
        else:
            # round(num / den), ties half away from zero, exactly in integers
            q = (2 * np.abs(num) + den) // (2 * den)
            out[k] = (np.sign(num) * q).astype(np.int32)
    return out


def _windows_hash(
    members: Sequence[Observation], images: Sequence[Image], llcs: Sequence[Point], cfg: Config, slab: Box
) -> Tuple[int, str]:
    """Q8/Q9's output: the D6 windows of every member around its centre in every image meeting the slab."""
    s, half = cfg.side, cfg.d6 // 2
    meeting = [
        t
        for t, (lx, ly) in enumerate(llcs)
        if lx <= slab[2] and slab[0] <= lx + s - 1 and ly <= slab[3] and slab[1] <= ly + s - 1
    ]
    h = hashlib.sha256()
    windows = 0
    for o in sorted(members, key=lambda o: o.sort_key):
        for t in meeting:
            lx, ly = llcs[t]
            x0, x1 = max(o.cx - half, lx), min(o.cx + half, lx + s)
            y0, y1 = max(o.cy - half, ly), min(o.cy + half, ly + s)
            if x0 >= x1 or y0 >= y1:
                continue
            windows += 1
            h.update(np.array([o.t, o.cx, o.cy, o.pixel_sum, t, x0, y0, x1, y1], dtype="<i8").tobytes())
            cells = images[t]["pix"][y0 - ly : y1 - ly, x0 - lx : x1 - lx]
            h.update(np.ascontiguousarray(cells, dtype="<i4").tobytes())
    return windows, h.hexdigest()


def _group_output(
    selected: Sequence[Group], images: Sequence[Image], llcs: Sequence[Point], cfg: Config, slab: Box
) -> Dict[str, Any]:
    members: Dict[int, Observation] = {}
    for g in selected:
        for o in g.members:
            members[o.id] = o
    windows, digest = _windows_hash(list(members.values()), images, llcs, cfg, slab)
    return {
        "groups": {"count": len(selected), "keys_sha256": sha256_lines(g.key for g in selected)},
        "output": {"windows": windows, "pix_windows_sha256": digest},
    }


def q9_regions(g: Group) -> List[List[Point]]:
    """Q9's polygon trajectory of a group: hulls of consecutive distinct times, or its polygons."""
    times = sorted({o.t for o in g.members})
    if len(times) == 1:
        return [o.polygon for o in g.members]
    out = []
    for k in range(len(times) - 1):
        pts = [p for o in g.members if o.t in (times[k], times[k + 1]) for p in o.polygon]
        out.append(convex_hull(pts))
    return out


@dataclass
class Dataset:
    """Everything the queries read: images, corners, F1 observations and F2 groups."""

    cfg: Config
    images: List[Image]
    llcs: List[Point]
    obs: List[Observation]
    groups: List[Group]


def run_queries(ds: Dataset, x: int, y: int, r: int) -> Dict[str, Any]:
    """The 9 answers of run r from start point (x, y), as §5's report fields (no times)."""
    cfg = ds.cfg
    cyc = {f"Q{q}": query_cycle(q, r, cfg.cycles) for q in range(1, 7)}
    m = min(cfg.u1, cfg.side)
    out: Dict[str, Any] = {"run": r, "X": x, "Y": y, "cycles": cyc}

    c = cyc["Q1"]
    total = cells = 0
    for t in range(20 * c, 20 * c + 20):
        slab = ds.images[t]["pix"][:m, :m]
        total += int(slab.astype(np.int64).sum())
        cells += slab.size
    out["Q1"] = {"sum": total, "count": cells}

    t2 = 20 * cyc["Q2"]
    q2 = cook(ds.images[t2]["pix"][:m, :m], ds.llcs[t2], t2, 900, cfg.d1, cfg.d2)
    out["Q2"] = {
        "count": len(q2),
        "pixelSum": sum(o.pixel_sum for o in q2),
        "keys_sha256": sha256_lines(o.key for o in q2),
    }

    shas = [
        hashlib.sha256(regrid(ds.images[t], m).astype("<i4").tobytes()).hexdigest()
        for t in range(20 * cyc["Q3"], 20 * cyc["Q3"] + 20)
    ]
    out["Q3"] = {"sha256_of_image_shas": hashlib.sha256("".join(shas).encode()).hexdigest()}

    u2 = (x, y, x + cfg.u2 - 1, y + cfg.u2 - 1)
    q4 = [o for o in ds.obs if o.cycle == cyc["Q4"] and in_box((o.cx, o.cy), u2)]
    out["Q4"] = {"count": len(q4), "sum": sum(o.pixel_sum for o in q4), "keys_sha256": sha256_lines(o.key for o in q4)}

    q5 = [o for o in ds.obs if o.cycle == cyc["Q5"] and region_meets_box(o.polygon, u2)]
    out["Q5"] = {"count": len(q5), "keys_sha256": sha256_lines(o.key for o in q5)}

    centres = [(o.cx, o.cy) for o in ds.obs if o.cycle == cyc["Q6"] and in_box((o.cx, o.cy), u2)]
    out["Q6"] = density_windows(centres, x, y, cfg.u2, cfg.d4, cfg.d5)

    q7 = [
        g
        for g in ds.groups
        if x * len(g.members) <= sum(o.cx for o in g.members) < (x + cfg.u2) * len(g.members)
        and y * len(g.members) <= sum(o.cy for o in g.members) < (y + cfg.u2) * len(g.members)
    ]
    out["Q7"] = {
        "count": len(q7),
        "singletons": sum(1 for g in q7 if len(g.members) == 1),
        "keys_sha256": sha256_lines(g.key for g in q7),
    }

    u3 = (x, y, x + cfg.u3 - 1, y + cfg.u3 - 1)
    q8 = [
        g
        for g in ds.groups
        if polyline_meets_box([(o.cx, o.cy) for o in sorted(g.members, key=lambda o: (o.t, o.id))], u3)
    ]
    out["Q8"] = _group_output(q8, ds.images, ds.llcs, cfg, u3)
    q9 = [g for g in ds.groups if any(region_meets_box(p, u3) for p in q9_regions(g))]
    out["Q9"] = _group_output(q9, ds.images, ds.llcs, cfg, u3)
    return out


def density_windows(centres: Sequence[Point], x: int, y: int, u2: int, d4: int, d5: int) -> Dict[str, Any]:
    """Q6: the windows of side D4 inside the slab holding strictly more than D5 centres."""
    grid = np.zeros((u2 + 1, u2 + 1), dtype=np.int64)  # prefix sums, [row b - y][col a - x]
    for cx, cy in centres:
        grid[cy - y + 1, cx - x + 1] += 1
    pre = grid.cumsum(axis=0).cumsum(axis=1)
    k = u2 - d4 + 1
    counts = pre[d4 : d4 + k, d4 : d4 + k] - pre[0:k, d4 : d4 + k] - pre[d4 : d4 + k, 0:k] + pre[0:k, 0:k]
    bs, as_ = np.nonzero(counts > d5)
    lines = sorted((int(a) + x, int(b) + y, int(counts[b, a])) for b, a in zip(bs, as_))
    digest = hashlib.sha256("".join(f"{a},{b},{n}\n" for a, b, n in lines).encode()).hexdigest()
    return {"windows": len(lines), "sha256": digest}


# --- the whole run ------------------------------------------------------------------------------


def build(cfg: Config, images: List[Image], llcs: List[Point]) -> Tuple[Dataset, Dict[str, Any]]:
    """F1, F1' and F2 over the images; the dataset and the report's F1/F1prime/F2 sections."""
    obs = cook_all(cfg, lambda t: images[t]["pix"], llcs, 1000)
    prime = cook_all(cfg, lambda t: images[t]["pix"], llcs, 900)
    groups = group(obs, cfg.d3)
    summary = {"F1": f1_summary(obs), "F1prime": f1_summary(prime), "F2": f2_summary(groups)}
    return Dataset(cfg, images, llcs, obs, groups), summary


def generate(cfg: Config, tiles_path: Optional[Path] = None) -> Tuple[List[Image], List[Point]]:
    tiles = load_tiles(tiles_path)
    return [generate_image(cfg, tiles, t) for t in range(cfg.images)], [nominal_llc(cfg, t) for t in range(cfg.images)]


def report(ds: Dataset, summary: Dict[str, Any], starts: Sequence[str] = ("spec", "dense")) -> Dict[str, Any]:
    out: Dict[str, Any] = {"config": ds.cfg.name, "data": {"tileData_sha256": sky.SHA256}, **summary}
    out["queries"] = {
        which: {"runs": [run_queries(ds, *ds.cfg.starts(which)[r // 3], r) for r in range(15)]} for which in starts
    }
    return out


def parse_starts(text: str) -> List[Tuple[str, int]]:
    """The baselines' ``--starts``: comma-separated start sets ``spec``/``dense``, each optionally
    ``NAME:RUNS`` for its first RUNS runs (1..15); ValueError names what is wrong."""
    starts: List[Tuple[str, int]] = []
    for item in (s for s in text.split(",") if s):
        name, _, count = item.partition(":")
        if name not in ("spec", "dense"):
            raise ValueError(f"--starts: unknown start set {name!r}: expected spec or dense")
        if count and not (count.isdigit() and 1 <= int(count) <= 15):
            raise ValueError(f"--starts: {item!r}: the run count must be in 1..15")
        starts.append((name, int(count) if count else 15))
    return starts


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tessera.ssdb.reference", description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="micro", choices=sorted(CONFIGS))
    ap.add_argument("--store", type=Path, help="read the raw images from this Tessera store instead")
    ap.add_argument("--tiles", type=Path, help="a tileData file (else made by the recipe)")
    ap.add_argument("--out", type=Path, required=True, help="report.json to write")
    args = ap.parse_args(argv)
    cfg = CONFIGS[args.config]
    t0 = time.perf_counter()
    images, llcs = store_images(args.store) if args.store else generate(cfg, args.tiles)
    ds, summary = build(cfg, images, llcs)
    rep = report(ds, summary)
    rep["seconds"] = {"total": time.perf_counter() - t0}
    args.out.write_text(json.dumps(rep, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
