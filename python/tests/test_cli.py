"""The installed `tessera` command (`make build` puts it into the virtualenv), end to end: create,
write, read and info on a small dense array, a sparse import and read, and an error's exit code."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tessera as ts

TESSERA = pathlib.Path(sys.executable).parent / "tessera"

SCHEMA = {
    "version": 1,
    "array_type": "dense",
    "dims": [
        {"name": "y", "type": "int64", "domain": [1, 6], "tile": 3},
        {"name": "x", "type": "int64", "domain": [1, 8], "tile": 4},
    ],
    "attrs": [{"name": "v", "type": "float32", "filters": [{"name": "zstd", "level": 3}]}],
    "cell_order": "row-major",
    "tile_order": "row-major",
}


def tessera(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """Runs the installed command; checks its exit code is 0 (or 1 when not `ok`)."""
    if not TESSERA.exists():
        pytest.fail(f"{TESSERA} is missing: `make build` installs it")
    p = subprocess.run([str(TESSERA), *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == (0 if ok else 1), (args, p.stdout, p.stderr)
    return p


def test_dense_create_write_read_info(tmp_path: pathlib.Path) -> None:
    arr, schema = tmp_path / "img", tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    assert "created array" in tessera("create", str(arr), "--schema", str(schema)).stdout
    block = np.arange(4 * 8, dtype="<f4").reshape(4, 8) / 4
    np.save(tmp_path / "block.npy", block)
    out = tessera("write", str(arr), "--subarray", "2:5,:", "--input", str(tmp_path / "block.npy")).stdout
    assert "wrote 32 cells" in out
    # Read in Fortran order; the Python API sees the same cells.
    part = tmp_path / "part.npy"
    tessera("read", str(arr), "--subarray", "3:4,2:7", "--output", f"v={part}", "--layout", "col-major")
    got = np.load(part)
    assert got.dtype == np.float32 and got.flags.f_contiguous
    np.testing.assert_array_equal(got, block[1:3, 1:7])
    with ts.open(str(arr)) as a:
        cells = a[3:5, 2:8]  # half-open
    np.testing.assert_array_equal(cells["v"] if isinstance(cells, dict) else cells, got)
    info = json.loads(tessera("info", str(arr), "--json").stdout)
    assert info["nonempty_domain"] == [[2, 5], [1, 8]]
    assert [f["cell_count"] for f in info["fragments"]] == [32]
    text = tessera("info", str(arr)).stdout
    assert "fragments: 1" in text and "zstd(level 3)" in text
    # Errors: exit code 1, a message naming what is wrong, nothing written.
    bad = tessera("write", str(arr), "--subarray", "1:2,:", "--input", str(tmp_path / "block.npy"), ok=False)
    assert bad.stderr.startswith("error: ") and "shape (4, 8) does not match the subarray 1:2,1:8" in bad.stderr
    assert len(json.loads(tessera("fragments", str(arr), "--json").stdout)) == 1


def test_sparse_import_and_read(tmp_path: pathlib.Path) -> None:
    csv = tmp_path / "pts.csv"
    csv.write_text('x,y,name,t\n1,5,"a, b",0.5\n3,2,,1.5\n2,9,"",-2\n')
    out = tessera("import", str(csv), str(tmp_path / "pts"), "--dims", "x,y").stdout
    assert "imported 3 cells" in out and "attribute name: utf8 (variable length), nullable" in out
    back = tmp_path / "back.csv"
    tessera("read", str(tmp_path / "pts"), "--subarray", "1:2", "--output", str(back))
    # arrow-csv reads "" as null and writes null as an empty field.
    assert back.read_text() == 'x,y,name,t\n1,5,"a, b",0.5\n2,9,,-2.0\n'


def test_ls_and_meta_on_groups(tmp_path: pathlib.Path) -> None:
    g = ts.Group.create(str(tmp_path / "survey"))
    with ts.Group(g, "w") as G:
        G.create_array("img", ts.ArraySchema(dims=[ts.Dim("r", (0, 9), 5)], attrs=[ts.Attr("a", "int32")]))
        sub = G.create_group("derived")
    pts = ts.ArraySchema(dims=[ts.Dim("x", (0.0, 1.0), dtype="float64")], attrs=[ts.Attr("v", "int8")], sparse=True)
    ts.Group(sub, "w").create_array("pts", pts)
    text = tessera("ls", g).stdout.splitlines()
    assert text[0] == "derived/  group"
    assert text[1] == "img  dense array  r[0:9]  attributes: a:int32  fragments: 0"
    listed = json.loads(tessera("ls", "--recursive", "--json", g).stdout)
    assert [e["name"] for e in listed] == ["derived", "derived/pts", "img"]
    assert listed[1]["type"] == "sparse" and listed[1]["fragments"] == 0
    tessera("meta", g, "--set", "title=ship tracks", "--set", "year=2016")
    assert json.loads(tessera("meta", g, "--json").stdout) == {"title": "ship tracks", "year": 2016}
    assert ts.Group(g).meta["year"] == 2016
    bad = tessera("ls", str(tmp_path), ok=False)
    assert "neither a Tessera group nor a Tessera array" in bad.stderr
