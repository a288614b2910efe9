"""The SS-DB sky tiles (SSDB.md section 1): the canonical ``tileData`` file.

Ten synthetic 1000 x 1000 star fields drawn with ``numpy.random.default_rng(k)``, written in
benchGen.cc's format (four little-endian int32: xSize, ySize, xRepeat, yRepeat; then the tiles,
row by row, as little-endian uint16). Run ``python -m tessera.ssdb.tiles OUT`` to write it; the
result must have the size and sha256 below (the Rust pipeline checks both before every use).
"""

from __future__ import annotations

import hashlib
import os
import sys

import numpy as np

ST = 1000
P = 1024
TILES = 10
SIZE = 16 + TILES * ST * ST * 2
SHA256 = "d08dc7e4ba3b54db649bd97476ad4509ee36d6de212e757fede37ce2ece67090"


def tile(k: int) -> np.ndarray:
    """Tile ``k`` as a (ty, tx) uint16 array, by SSDB.md's recipe."""
    g = np.random.default_rng(k)
    b = g.normal(120, 25, (ST, ST))
    n = g.poisson(700)
    xs = g.uniform(0, ST, n)
    ys = g.uniform(0, ST, n)
    us = 1 - g.random(n)
    cs = g.random(n)
    ws = g.random(n)
    for i in range(n):
        x, y, u, c, w = float(xs[i]), float(ys[i]), float(us[i]), float(cs[i]), float(ws[i])
        a = 500 * u ** (-1 / 0.85)
        if c < 0.90:
            sigma = 1.6
        elif c < 0.99:
            sigma = 2 + 1.5 * w
        else:
            sigma = 4 + 4 * w
        h = sigma * np.sqrt(2 * np.log(max(a / 0.01, 1)))
        x0, x1 = max(0, int(np.floor(x - 0.5 - h))), min(ST - 1, int(np.floor(x - 0.5 + h)))
        y0, y1 = max(0, int(np.floor(y - 0.5 - h))), min(ST - 1, int(np.floor(y - 0.5 + h)))
        if x0 > x1 or y0 > y1:
            continue
        tx = np.arange(x0, x1 + 1, dtype=np.float64)
        ty = np.arange(y0, y1 + 1, dtype=np.float64)
        dx = (tx + 0.5 - x) ** 2
        dy = (ty + 0.5 - y) ** 2
        b[y0 : y1 + 1, x0 : x1 + 1] += a * np.exp(-(dx[None, :] + dy[:, None]) / (2 * sigma**2))
    return np.clip(np.rint(b), 0, 65535).astype(np.uint16)


def tile_data() -> bytes:
    """The whole ``tileData`` file."""
    head = np.array([ST, ST, P, P], dtype="<i4").tobytes()
    return head + b"".join(tile(k).astype("<u2").tobytes() for k in range(TILES))


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tessera.ssdb.tiles OUT", file=sys.stderr)
        return 2
    data = tile_data()
    digest = hashlib.sha256(data).hexdigest()
    out = argv[0]
    tmp = f"{out}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, out)
    if len(data) != SIZE or digest != SHA256:
        print(f"{out}: {len(data)} bytes, sha256 {digest}; expected {SIZE} bytes, sha256 {SHA256}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
