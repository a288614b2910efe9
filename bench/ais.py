"""Synthetic AIS-like ship positions, as in the TileDB paper's sparse experiments (section 6.2).

X is the longitude and Y the latitude in millionths of a degree, shifted to start at 0:
X in [0, 360e6), Y in [0, 180e6), both int64. Real AIS data is strongly skewed (most positions
are near coasts and in harbours, few over the open ocean); the generator mimics this with a
mixture:

* ``harbour``: Gaussian clusters around a few hundred harbour centres placed on the coastlines,
  their sizes Zipf-distributed (one very busy harbour, the paper's "Los Angeles"), their spreads
  log-uniform between 0.005 and 0.1 degrees;
* ``coast``: points along a few dozen random-walk "coastline" polylines, offset perpendicularly
  by a Gaussian of 0.02 to 0.3 degrees (coastal traffic and shipping lanes);
* ``ocean``: uniform over the whole domain (the open ocean).

Attributes (SOG, COG, Heading, ROT, Status, VoyageID, MMSI) are int64 with plausible ranges:
speeds near zero and "moored" status in harbours, under way at sea, ships drawn from a pool of
MMSI numbers. Coordinates are deduplicated over the whole data set, and the points are split in
``months`` batches (one write per month, in random order within a batch).

Deterministic (``numpy.random.default_rng(seed)``) and vectorized: 10 million points in a few
seconds. ``python bench/ais.py --points 1000000`` prints a summary.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import numpy as np

X_MAX = 360_000_000  # exclusive: X in [0, X_MAX)
Y_MAX = 180_000_000
DEG = 1_000_000  # one degree in coordinate units
ATTRS = ("sog", "cog", "heading", "rot", "status", "voyage_id", "mmsi")
COLUMNS = ("x", "y") + ATTRS


@dataclass
class AIS:
    """A generated data set: the columns (all int64, deduplicated (x, y)) and the batches."""

    columns: Dict[str, np.ndarray]
    #: ``months`` arrays of row indices into ``columns`` (a random order within each batch).
    batches: List[np.ndarray]
    harbours: np.ndarray  # (k, 2) centres, busiest first
    coasts: List[np.ndarray] = field(default_factory=list)  # polylines, (m, 2) each
    #: rows after the batches' (``generate(extra=...)``), for appends after the load
    extra: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def n(self) -> int:
        """Points in the batches (the load), without the extra rows."""
        return len(self.columns["x"]) - len(self.extra)

    def rows(self, idx: np.ndarray) -> Dict[str, np.ndarray]:
        """The columns of the rows ``idx`` (copies, contiguous)."""
        return {k: v[idx] for k, v in self.columns.items()}

    def batch(self, i: int) -> Dict[str, np.ndarray]:
        """The columns of batch ``i`` (copies, contiguous, in the batch's random order)."""
        idx = self.batches[i]
        return {k: v[idx] for k, v in self.columns.items()}

    def sorted_xy(self) -> Tuple[np.ndarray, np.ndarray]:
        """x and y of the batches' points sorted by (x, y), for counting the points inside boxes
        quickly."""
        x, y = self.columns["x"][: self.n], self.columns["y"][: self.n]
        order = np.lexsort((y, x))
        return x[order], y[order]


def _coastlines(rng: np.random.Generator, n_lines: int) -> List[np.ndarray]:
    """Random-walk polylines with steps of 0.5 to 3 degrees and a slowly turning heading."""
    lines = []
    for _ in range(n_lines):
        m = int(rng.integers(20, 80))
        start = np.array([rng.uniform(5, 355), rng.uniform(10, 170)]) * DEG
        heading = rng.uniform(0, 2 * np.pi) + np.cumsum(rng.normal(0, 0.35, m))
        step = rng.uniform(0.5, 3.0, m) * DEG
        pts = start + np.cumsum(np.stack([np.cos(heading), np.sin(heading)], axis=1) * step[:, None], axis=0)
        pts[:, 0] = np.clip(pts[:, 0], 0, X_MAX - 1)
        pts[:, 1] = np.clip(pts[:, 1], 0, Y_MAX - 1)
        lines.append(np.vstack([start, pts]))
    return lines


def _points(rng: np.random.Generator, n: int, coasts: List[np.ndarray], harbours: np.ndarray,
            weights: np.ndarray, sigmas: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` raw points (float x, y and the component: 0 harbour, 1 coast, 2 ocean)."""
    comp = rng.choice(3, size=n, p=[0.45, 0.35, 0.20])
    x = np.empty(n)
    y = np.empty(n)
    # Harbours.
    h = np.flatnonzero(comp == 0)
    k = rng.choice(len(harbours), size=len(h), p=weights)
    x[h] = harbours[k, 0] + rng.normal(0, 1, len(h)) * sigmas[k]
    y[h] = harbours[k, 1] + rng.normal(0, 1, len(h)) * sigmas[k]
    # Coasts: a segment chosen by length, a point along it, a perpendicular offset.
    c = np.flatnonzero(comp == 1)
    a = np.vstack([ln[:-1] for ln in coasts])
    b = np.vstack([ln[1:] for ln in coasts])
    seg_sigma = np.concatenate([np.full(len(ln) - 1, s) for ln, s in
                                zip(coasts, np.exp(rng.uniform(np.log(0.02), np.log(0.3), len(coasts))) * DEG)])
    length = np.hypot(*(b - a).T)
    s = rng.choice(len(a), size=len(c), p=length / length.sum())
    t = rng.random(len(c))
    d = b[s] - a[s]
    normal = np.stack([-d[:, 1], d[:, 0]], axis=1) / np.maximum(length[s], 1)[:, None]
    off = rng.normal(0, 1, len(c)) * seg_sigma[s]
    x[c] = a[s, 0] + t * d[:, 0] + off * normal[:, 0]
    y[c] = a[s, 1] + t * d[:, 1] + off * normal[:, 1]
    # Open ocean.
    o = np.flatnonzero(comp == 2)
    x[o] = rng.uniform(0, X_MAX, len(o))
    y[o] = rng.uniform(0, Y_MAX, len(o))
    return x, y, comp


def generate(n: int = 10_000_000, months: int = 10, seed: int = 20160901,
             n_harbours: int = 300, n_coasts: int = 60, n_ships: int = 60_000, extra: int = 0) -> AIS:
    """``n`` distinct AIS-like points in ``months`` batches, and ``extra`` more points (distinct
    from them, of the same distribution, dated the month after) in ``AIS.extra``."""
    base, n = n, n + extra
    rng = np.random.default_rng(seed)
    coasts = _coastlines(rng, n_coasts)
    # Harbours sit on the coastlines; the busiest first (Zipf weights).
    line = rng.integers(0, len(coasts), n_harbours)
    harbours = np.array([coasts[i][rng.integers(0, len(coasts[i]))] for i in line])
    weights = 1.0 / np.arange(1, n_harbours + 1) ** 1.1
    weights /= weights.sum()
    sigmas = np.exp(rng.uniform(np.log(0.005), np.log(0.1), n_harbours)) * DEG
    weights[0] *= 1.6  # the busiest harbour ("Los Angeles") holds ~15% of all points
    weights /= weights.sum()
    sigmas[0] = 0.1 * DEG

    keys, have = [], 0
    while have < n:
        want = int((n - have) * 1.03) + 1000
        x, y, comp = _points(rng, want, coasts, harbours, weights, sigmas)
        x = np.rint(x).astype(np.int64)
        y = np.rint(y).astype(np.int64)
        ok = (x >= 0) & (x < X_MAX) & (y >= 0) & (y < Y_MAX)
        # One int64 per point: (x * Y_MAX + y) * 4 + component (< 2.6e17).
        keys.append((x[ok] * Y_MAX + y[ok]) * 4 + comp[ok])
        key = np.sort(np.concatenate(keys))
        first = np.ones(len(key), dtype=bool)
        first[1:] = (key[1:] >> 2) != (key[:-1] >> 2)  # deduplicate the coordinates
        key = key[first]
        keys = [key]
        have = len(key)
    key = key[rng.permutation(len(key))[:n]]  # exactly n, in random order
    comp = key & 3
    xy = key >> 2
    x, y = xy // Y_MAX, xy % Y_MAX
    del key, xy

    at_sea = comp != 0
    ship = np.minimum(rng.zipf(1.3, n), n_ships) - 1 + rng.integers(0, n_ships, n) // 4
    ship %= n_ships
    mmsi = 200_000_000 + (ship * 9_587) % 575_000_000
    # Months: consecutive runs of the random order (batches of multinomial sizes).
    sizes = rng.multinomial(base, [1.0 / months] * months)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    month = np.concatenate([np.repeat(np.arange(months), sizes), np.full(extra, months)])
    voyage = ship * 64 + month * 4 + rng.integers(0, 4, n)
    sog = np.where(at_sea, rng.normal(140, 40, n), np.abs(rng.normal(0, 8, n))).clip(0, 1022).astype(np.int64)
    cog = rng.integers(0, 3600, n)
    heading = np.where(rng.random(n) < 0.1, 511, (cog // 10 + rng.integers(-3, 4, n)) % 360)
    rot = np.where(rng.random(n) < 0.7, 0, rng.normal(0, 20, n).clip(-127, 127)).astype(np.int64)
    status = np.where(at_sea, np.where(rng.random(n) < 0.9, 0, 8), np.where(rng.random(n) < 0.6, 5, 1))
    columns = {"x": x, "y": y, "sog": sog, "cog": cog, "heading": heading.astype(np.int64), "rot": rot,
               "status": status.astype(np.int64), "voyage_id": voyage.astype(np.int64), "mmsi": mmsi.astype(np.int64)}
    columns = {k: np.ascontiguousarray(v, dtype=np.int64) for k, v in columns.items()}
    batches = [np.arange(bounds[i], bounds[i + 1]) for i in range(months)]
    return AIS(columns, batches, harbours, coasts, np.arange(base, n))


def count_box(sx: np.ndarray, sy: np.ndarray, box: Tuple[int, int, int, int]) -> int:
    """Points inside the inclusive box (x0, x1, y0, y1), with x and y sorted by (x, y)."""
    x0, x1, y0, y1 = box
    i, j = np.searchsorted(sx, [x0, x1 + 1])
    ys = sy[i:j]
    return int(np.count_nonzero((ys >= y0) & (ys <= y1)))


def box_around(cx: int, cy: int, half: float, aspect: float = 1.0) -> Tuple[int, int, int, int]:
    """The inclusive box of half-width ``half`` (and half-height ``half / aspect``) centred at
    (cx, cy), clipped to the domain."""
    hx, hy = int(half), int(half / aspect)
    return (max(0, cx - hx), min(X_MAX - 1, cx + hx), max(0, cy - hy), min(Y_MAX - 1, cy + hy))


def box_for_count(sx: np.ndarray, sy: np.ndarray, cx: int, cy: int, target: int) -> Tuple[Tuple[int, int, int, int], int]:
    """A box centred at (cx, cy) holding about ``target`` points: a binary search on its size
    (geometric, 60 steps). Returns the box and its count."""
    lo, hi = 1.0, float(X_MAX)
    best = (box_around(cx, cy, hi), count_box(sx, sy, box_around(cx, cy, hi)))
    for _ in range(60):
        mid = (lo * hi) ** 0.5
        box = box_around(cx, cy, mid)
        c = count_box(sx, sy, box)
        if abs(c - target) < abs(best[1] - target):
            best = (box, c)
        if c < target:
            lo = mid
        elif c > target:
            hi = mid
        else:
            break
        if hi - lo < 1:
            break
    return best


def dense_and_sparse_centres(data: AIS) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    """The dense centre (the busiest harbour's mean position) and a sparse centre (the middle of
    the 1-degree cell with the fewest points within 10 degrees, away from the domain's edges)."""
    x, y = data.columns["x"][: data.n], data.columns["y"][: data.n]
    hist, _, _ = np.histogram2d(x // DEG, y // DEG, bins=[360, 180], range=[[0, 360], [0, 180]])
    # Points within +-10 degrees of every cell (a box filter via cumulative sums).
    r = 10
    c = np.pad(hist, r).cumsum(0).cumsum(1)
    c = np.pad(c, ((1, 0), (1, 0)))
    w = 2 * r + 1
    near = c[w:, w:] - c[:-w, w:] - c[w:, :-w] + c[:-w, :-w]
    near = near[: hist.shape[0], : hist.shape[1]]
    near[: 3 * r, :] = np.inf; near[-3 * r:, :] = np.inf  # keep away from the edges
    near[:, : 3 * r] = np.inf; near[:, -3 * r:] = np.inf
    i, j = np.unravel_index(np.argmin(near), near.shape)
    sparse = (int(i * DEG + DEG // 2), int(j * DEG + DEG // 2))
    h0 = data.harbours[0]
    dense = (int(h0[0]), int(h0[1]))
    return dense, sparse


def coord_checksum(x: np.ndarray, y: np.ndarray) -> int:
    """An order-independent checksum of the coordinates (a sum of mixed 64-bit hashes)."""
    with np.errstate(over="ignore"):
        h = x.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ y.astype(np.uint64) * np.uint64(0xC2B2AE3D27D4EB4F)
        h ^= h >> np.uint64(29)
        return int(h.sum(dtype=np.uint64))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=10_000_000)
    p.add_argument("--seed", type=int, default=20160901)
    args = p.parse_args()
    t = time.perf_counter()
    d = generate(args.points, seed=args.seed)
    dt = time.perf_counter() - t
    print(f"{d.n} points in {len(d.batches)} batches ({[len(b) for b in d.batches]}) in {dt:.2f} s")
    dense, sparse = dense_and_sparse_centres(d)
    sx, sy = d.sorted_xy()
    for name, (cx, cy) in (("dense", dense), ("sparse", sparse)):
        for target in (10_000, 100_000, 1_000_000):
            box, c = box_for_count(sx, sy, cx, cy, target)
            print(f"{name:6} centre ({cx / DEG:7.3f}, {cy / DEG:7.3f}) deg, target {target:>9}: {c:>9} points, "
                  f"box {(box[1] - box[0]) / DEG:8.4f} x {(box[3] - box[2]) / DEG:8.4f} deg")


if __name__ == "__main__":
    main()
