"""Faults: a flipped byte on disk is reported naming the file and tile; a writer killed with
SIGKILL in the middle of a large write leaves the array readable with its earlier contents."""

from __future__ import annotations

import os
import pathlib
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tessera as ts
from conftest import make_2d


@pytest.mark.parametrize("pack", [True, False])
def test_flipped_byte_in_a_tile_is_corruption_naming_file_and_tile(uri: str, pack: bool) -> None:
    # Unfiltered tiles of 5 x 5 int32 cells are 100 bytes each, stored one after another in
    # a0.data, or in packed.data (the fragment's one file) when it is packed, as small ones are
    # by default.
    make_2d(uri, rows=10, cols=10, tile=(5, 5), attrs=[ts.Attr("a", "int32")])
    data = np.arange(100, dtype=np.int32).reshape(10, 10)
    with ts.open(uri, "w", config=None if pack else {"sm.write.pack_bytes": "0"}) as A:
        A[:] = data
    with ts.open(uri) as A:
        (info,) = A.fragments()
    assert info.tile_count == 4 and info.stored_bytes == 400 and info.packed == pack
    stored = "packed.data" if pack else "a0.data"
    f = pathlib.Path(uri) / "__fragments" / info.name / stored
    assert sorted(p.name for p in f.parent.iterdir()) == sorted(["__fragment_metadata", stored])
    raw = bytearray(f.read_bytes())
    raw[2 * 100 + 17] ^= 0x40
    f.write_bytes(bytes(raw))
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[1:6, 1:6], data[:5, :5])  # tile 0 is intact
        with pytest.raises(ts.CorruptionError) as e:
            A[:]
        with pytest.raises(ts.CorruptionError):
            list(A.iter_batches(budget_bytes=80))
    msg = str(e.value)
    assert stored in msg and "tile 2" in msg and "checksum" in msg, msg
    # The same facts as fields.
    assert (e.value.tile, e.value.fragment, e.value.file) == (2, info.name, str(f)), vars(e.value)
    assert e.value.array is not None and pathlib.Path(e.value.array).resolve() == pathlib.Path(uri).resolve()
    assert e.value.attribute is None and e.value.cell is None


def flip(path: pathlib.Path, at: int) -> bytes:
    """Flips one bit of byte `at` of the file (negative: from the end); returns the old bytes."""
    orig = path.read_bytes()
    raw = bytearray(orig)
    raw[at] ^= 1
    path.write_bytes(bytes(raw))
    return orig


def test_flipped_byte_in_fragment_metadata_is_corruption(uri: str) -> None:
    make_2d(uri)
    with ts.open(uri, "w") as A:
        A[:] = np.zeros((12, 10), np.int32)
    # The write's commit record carries a copy of the fragment's metadata (format 8): a reader
    # takes it from there, and a flipped byte in it fails the record's checksum.
    record = pathlib.Path(uri) / "__commits" / "00000000000000000001.commit"
    orig = flip(record, -40)
    with pytest.raises(ts.CorruptionError, match=r"00000000000000000001\.commit"):
        ts.open(uri)
    record.write_bytes(orig)
    # After a vacuum the log is one checkpoint, which carries no copies: the fragment's own file.
    ts.vacuum(uri)
    meta = next((pathlib.Path(uri) / "__fragments").iterdir()) / "__fragment_metadata"
    flip(meta, 40)
    with pytest.raises(ts.CorruptionError, match="__fragment_metadata"):
        ts.open(uri)


WRITER = r"""
import sys, numpy as np, tessera as ts
uri, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
data = np.random.default_rng(5).integers(2, 1 << 16, size=(rows, cols), dtype=np.int32)
with ts.open(uri, "w") as A:
    print("start", flush=True)
    A[:, :] = data
print("done", flush=True)
"""


def test_sigkill_mid_write_leaves_earlier_contents(tmp_path: pathlib.Path) -> None:
    uri = str(tmp_path / "arr")
    rows = cols = 3000
    schema = ts.ArraySchema([ts.Dim("r", (1, rows), 500), ts.Dim("c", (1, cols), 500)],
                            [ts.Attr("a", "int32", filters=[ts.Gzip(level=6)])])
    ts.create(uri, schema)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    # How long a whole write of such data takes here, to pick kill delays inside it.
    noise = np.random.default_rng(6).integers(2, 1 << 16, size=(rows, cols), dtype=np.int32)
    t0 = time.perf_counter()
    with ts.open(uri, "w") as A:
        A[:, :] = noise
    duration = time.perf_counter() - t0
    with ts.open(uri, "w") as A:
        A[:, :] = np.ones((rows, cols), np.int32)
    rng = random.Random(1234)
    killed_mid_write = 0
    for _ in range(4):
        p = subprocess.Popen([sys.executable, str(script), uri, str(rows), str(cols)], stdout=subprocess.PIPE,
                             env=env, text=True)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "start"
        time.sleep(rng.uniform(0.15, 0.75) * duration)
        p.send_signal(signal.SIGKILL)
        out = p.stdout.read()
        p.wait()
        with ts.open(uri) as A:
            got = A[:]
            committed = {f.name for f in A.fragments()}
        if "done" in out:  # the write finished before the kill: the new contents, whole
            assert (got > 1).all()
            with ts.open(uri, "w") as A:  # the earlier contents again, for the next round
                A[:, :] = np.ones((rows, cols), np.int32)
            continue
        assert (got == 1).all(), "a killed write changed what readers see"
        # The killed writer had started its fragment: a folder without a commit is left behind.
        folders = {d.name for d in (pathlib.Path(uri) / "__fragments").iterdir()}
        if folders - committed:
            killed_mid_write += 1
    assert killed_mid_write >= 2, "the kills did not land inside the writes"
    # The array stays writable after the crashes.
    with ts.open(uri, "w") as A:
        A[1:3, 1:3] = np.full((2, 2), 5, np.int32)
    with ts.open(uri) as A:
        assert (A[1:3, 1:3] == 5).all() and A[3, 3] == 1
