"""Shared fixtures: a fresh folder per test and small schema builders."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from typing import Callable, Sequence

import numpy as np
import pytest

import tessera as ts

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tessera_binary() -> str:
    """The tessera command: $TESSERA_BIN, the virtualenv's, or this checkout's release build."""
    for cand in (
        os.environ.get("TESSERA_BIN"),
        str(pathlib.Path(sys.executable).parent / "tessera"),
        str(ROOT / "target" / "release" / "tessera"),
    ):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "tessera-cli"], cwd=ROOT, check=True)
    return str(ROOT / "target" / "release" / "tessera")


@pytest.fixture
def uri(tmp_path: pathlib.Path) -> str:
    """A not-yet-existing array location inside the test's temporary folder."""
    return str(tmp_path / "arr")


def make_2d(
    uri: str,
    rows: int = 12,
    cols: int = 10,
    tile: Sequence[int] = (4, 3),
    attrs: Sequence[ts.Attr] = (),
    lo: int = 1,
    **kw: object,
) -> ts.ArraySchema:
    """Creates a 2-D dense array with domains [lo, lo + n - 1] and returns its schema."""
    schema = ts.ArraySchema(
        dims=[ts.Dim("r", (lo, lo + rows - 1), tile[0]), ts.Dim("c", (lo, lo + cols - 1), tile[1])],
        attrs=list(attrs) or [ts.Attr("a", "int32")],
        **kw,  # type: ignore[arg-type]
    )
    ts.create(uri, schema)
    return schema


@pytest.fixture
def arr2d(uri: str) -> Callable[..., ts.ArraySchema]:
    """Factory creating a 2-D array at ``uri``."""

    def f(**kw: object) -> ts.ArraySchema:
        return make_2d(uri, **kw)  # type: ignore[arg-type]

    return f


def iota(shape: Sequence[int], dtype: object = np.int32) -> np.ndarray:
    return np.arange(int(np.prod(shape))).astype(dtype).reshape(shape)
