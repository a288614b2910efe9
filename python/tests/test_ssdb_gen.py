"""SS-DB generator (SSDB.md section 1) against an independent numpy implementation.

``python -m tessera.ssdb run --config micro`` generates and stores the 40 micro images; every cell
of every image, all 11 attributes, is read back through the ``tessera`` package and compared
with the spec's formula evaluated here with numpy (whole-array arithmetic, no tables shared with
the Rust generator). The sky tiles come from the Python recipe and must have the spec's hash.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import subprocess
import sys
from typing import Dict, Tuple

import numpy as np
import pytest

import tessera as ts
from conftest import tessera_binary
from tessera.ssdb import tiles as sky

W = 1_000_000
N, S, R = 40, 200, 267  # micro
PI = "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679"
ATTRS = ["pix", "var", "valid", "sat", "v0", "v1", "v2", "v3", "v4", "v5", "v6"]


def rand(t: np.ndarray) -> np.ndarray:
    """rand(t) of section 1; the low 30 bits are all that survive C's 32-bit wraparound."""
    x = t.astype(np.int64) & 0xFFFFFFFF
    for _ in range(10):
        x = (1103515245 * x + 12345) & 0x3FFFFFFF
    return x / float(1 << 30)


def norm(t: np.ndarray) -> np.ndarray:
    t = t.astype(np.int64)
    return sum(rand(12 * t + i) for i in range(12)) - 6.0


def nominal_llc(t: int) -> Tuple[int, int]:
    tp = t - N // 2 if t >= N // 2 else t
    r0, r1, r2 = (float(v) for v in rand(np.array([3 * tp, 3 * tp + 1, 3 * tp + 2])))
    if r0 < 0.8:
        return (W - R) // 2 + int(r1 * (R - S)), (W - R) // 2 + int(r2 * (R - S))
    return int(r1 * (W - S)), int(r2 * (W - S))


def image(tiles: np.ndarray, t: int) -> Dict[str, np.ndarray]:
    """The 11 attributes of image t, (S, S) int32 each, indexed [y, x]."""
    lx, ly = nominal_llc(t)
    ax = max(0, lx + t % 3 - 1)
    ay = max(0, ly + (t // 3) % 3 - 1)
    wy, wx = np.meshgrid(np.arange(S, dtype=np.int64) + ay, np.arange(S, dtype=np.int64) + ax, indexing="ij")
    digits = np.array([int(c) for c in PI])
    k = digits[(wx // 1024 + (wy // 1024) * (W // 1024 + 1)) % 101]
    tx, ty = wx % 1024, wy % 1024
    gap = (tx >= 1000) | (ty >= 1000)
    raw = np.where(gap, 0, tiles[k, np.minimum(ty, 999), np.minimum(tx, 999)].astype(np.int64))
    sat = raw == 65535
    pix = np.clip(raw + (t % 5 - 2) * 10, 0, 65535)
    s = (3141 * t + 592 * wx + wy) % 65359
    n = [norm(6 * s + j) for j in range(1, 7)]
    out = {
        "pix": pix,
        "var": np.floor(np.sqrt(pix.astype(np.float64))),
        "valid": (~gap).astype(np.int64),
        "sat": sat.astype(np.int64),
        "v0": np.maximum(0, np.trunc((pix - 3000) * 65535 / 62535)),
        "v1": np.trunc(65535 * n[0]),
        "v2": np.trunc(32768 + 32768 * n[1]),
        "v3": np.trunc(-5e8 + 1e6 * n[2]),
        "v4": np.trunc(10 * n[3]),
        "v5": np.trunc(1000 + 100 * n[4]),
        "v6": np.trunc(1 + 0.5 * n[5]),
    }
    return {a: v.astype(np.int32) for a, v in out.items()}


@pytest.fixture(scope="module")
def tiles() -> np.ndarray:
    data = sky.tile_data()
    assert len(data) == sky.SIZE == 20_000_016
    assert hashlib.sha256(data).hexdigest() == sky.SHA256
    return np.frombuffer(data[16:], dtype="<u2").reshape(10, 1000, 1000)


@pytest.fixture(scope="module")
def micro(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    store = tmp_path_factory.mktemp("ssdb") / "micro"
    env = dict(os.environ, TESSERA_BIN=tessera_binary())
    subprocess.run(
        [sys.executable, "-m", "tessera.ssdb", "run", "--config", "micro", "--dir", str(store)]
        + ["--steps", "load,cook,group"],
        check=True,
        env=env,
        capture_output=True,
    )
    return store


def test_every_cell_of_every_micro_image(tiles: np.ndarray, micro: pathlib.Path) -> None:
    with ts.open(str(micro / "images")) as a:
        assert a.shape == (N, S, S)
        assert list(a.attr_names) == ATTRS
        for t in range(N):
            got = a.read(ranges=[(t, t), None, None])
            want = image(tiles, t)
            for name in ATTRS:
                np.testing.assert_array_equal(got[name][0], want[name], err_msg=f"image {t}, {name}")


def test_corners_are_the_nominal_ones(micro: pathlib.Path) -> None:
    with ts.open(str(micro / "images_llc")) as a:
        got = a.read()
    want = np.array([nominal_llc(t) for t in range(N)])
    np.testing.assert_array_equal(got["llc_x"], want[:, 0])
    np.testing.assert_array_equal(got["llc_y"], want[:, 1])
    # The second half repeats the first half's positions.
    np.testing.assert_array_equal(want[: N // 2], want[N // 2 :])


def test_report_structure(micro: pathlib.Path) -> None:
    r = json.loads((micro / "report.json").read_text())
    assert r["data"]["tileData_sha256"] == sky.SHA256
    for step in ("load", "cook", "group"):
        assert r["seconds"][step] >= 0
    for f in ("F1", "F1prime"):
        assert set(r[f]) >= {"count", "pixelSum", "vertices", "observation_keys_sha256"}
        assert r[f]["count"] > 0
    f2 = r["F2"]
    assert f2["groups"] == f2["multi_member_groups"] + f2["singletons"]
    # F1 summarises the stored observations.
    with ts.open(str(micro / "observations")) as a:
        obs = a.read(attrs=["id", "pixelSum"])
    ids = np.sort(obs["id"])
    np.testing.assert_array_equal(ids, np.arange(1, r["F1"]["count"] + 1))
    assert int(obs["pixelSum"].sum()) == r["F1"]["pixelSum"]


def test_queries_step(micro: pathlib.Path) -> None:
    """The queries step on the stored micro run: section 5's runs in the report, Q2's and Q3's
    results stored as arrays that read back through the Python package."""
    env = dict(os.environ, TESSERA_BIN=tessera_binary())
    subprocess.run(
        [sys.executable, "-m", "tessera.ssdb", "run", "--config", "micro", "--dir", str(micro)]
        + ["--steps", "queries", "--starts", "dense"],
        check=True,
        env=env,
        capture_output=True,
    )
    r = json.loads((micro / "report.json").read_text())
    runs = r["queries"]["dense"]["runs"]
    assert [x["run"] for x in runs] == list(range(15))
    assert set(runs[0]) == {"run", "X", "Y", "cycles"} | {f"Q{i}" for i in range(1, 10)}
    assert set(r["seconds"]["queries"]["dense"]) == {f"Q{i}" for i in range(1, 10)} | {"total"}
    for x in runs:
        assert x["Q1"]["count"] == 20 * S * S
        with ts.open(str(micro / "results" / "dense" / f"q2_r{x['run']:02d}")) as a:
            got = a.read(attrs=["pixelSum"])
        assert len(got["pixelSum"]) == x["Q2"]["count"] > 0
        assert int(got["pixelSum"].sum()) == x["Q2"]["pixelSum"]
        t0 = 20 * x["cycles"]["Q3"]
        with ts.open(str(micro / "results" / "dense" / f"q3_r{x['run']:02d}")) as a:
            q3 = a.read(ranges=[(t0, t0 + 19), None, None])
        assert q3["pix"].shape == (20, 60, 60)
        # The per-image sha256s of the (11, n, n) little-endian outputs give the reported hash.
        shas = "".join(
            hashlib.sha256(b"".join(q3[name][k].astype("<i4").tobytes() for name in ATTRS)).hexdigest()
            for k in range(20)
        )
        assert hashlib.sha256(shas.encode()).hexdigest() == x["Q3"]["sha256_of_image_shas"]
