"""Tessera quickstart (what `make demo` runs): a dense int32 image compressed with zstd, written
and read back in parts, then a small table of nullable strings. Everything lands in ./demo_data."""

import contextlib
import pathlib
import shutil
import time

import numpy as np

import tessera as ts

ROOT = pathlib.Path("demo_data")
shutil.rmtree(ROOT, ignore_errors=True)
ROOT.mkdir()


def mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


@contextlib.contextmanager
def timed(label: str):
    t0 = time.perf_counter()
    yield
    print(f"  {label:<46} {1000 * (time.perf_counter() - t0):8.1f} ms")


# 1. A 4000 x 3000 int32 image in 500 x 500 tiles, zstd level 3 (domain coordinates start at 1).
rows, cols = 4000, 3000
img = ROOT / "img"
schema = ts.ArraySchema(
    dims=[ts.Dim("rows", domain=(1, rows), tile=500, dtype="int64"),
          ts.Dim("cols", domain=(1, cols), tile=500, dtype="int64")],
    attrs=[ts.Attr("a", dtype="int32", filters=[ts.Zstd(level=3)])],
    cell_order="row-major", tile_order="row-major")
print(schema)
ts.create(img, schema)

y, x = np.mgrid[0:rows, 0:cols]
block = (1000 * np.sin(y / 300) * np.cos(x / 200) + (x * y) % 17 + 1).astype(np.int32)
original_top = block[:100].copy()
print(f"\nimage {rows} x {cols} int32 ({mib(block.nbytes)} in memory)")
with ts.open(img, "w") as A:
    with timed("write the whole image (one fragment)"):
        A[1:rows + 1, 1:cols + 1] = block  # half-open slices in domain coordinates
    with timed("overwrite rows 1..100 with zeros (a scalar)"):
        A[1:101, :] = np.int32(0)
block[:100] = 0
written = block.nbytes + original_top.nbytes

with ts.open(img) as A:  # mode "r"
    with timed("read everything"):
        whole = A[:, :]
    with timed("read rows 1001..1500, cols 2001..2500"):
        part = A[1001:1501, 2001:2501]
    with timed("read row 3000 (an integer drops the axis)"):
        row = A[3000, :]
    with timed("read rows 1..10 and 3991..4000, cols 1..5"):
        multi = A.read([[(1, 10), (3991, 4000)], (1, 5)])  # inclusive ranges
    with timed("iterate in batches of 8 MiB"):
        nrows = sum(b["a"].shape[0] for b in A.iter_batches(budget_bytes=8 << 20))
    assert np.array_equal(whole, block) and np.array_equal(part, block[1000:1500, 2000:2500])
    assert np.array_equal(row, block[2999]) and nrows == rows
    assert np.array_equal(multi, block[np.r_[0:10, 3990:4000], 0:5])
    frags = A.fragments()
    print(f"  non-empty domain {A.nonempty_domain()}; fragments:")
    for f in frags:
        print(f"    {f.name[:40]}...  {f.cell_count:>9} cells  {mib(f.stored_bytes)} stored")
on_disk = sum(f.stat().st_size for f in img.rglob("*") if f.is_file())
print(f"  on disk: {mib(on_disk)} for {mib(written)} written -> compression ratio {written / on_disk:.1f}x")
with ts.open(img, timestamp=frags[0].t1) as A:  # time travel: as of the first fragment
    assert np.array_equal(A[1:101, :], original_top)
    print("  opened as of the first fragment's timestamp: the overwritten rows are back")

# 2. Nullable UTF-8 strings next to numbers, in a 1-D array.
people = ROOT / "people"
ts.create(people, ts.ArraySchema(
    dims=[ts.Dim("id", domain=(0, 9), tile=5)],
    attrs=[ts.Attr("name", str, filters=[ts.Zstd()]), ts.Attr("city", str, nullable=True),
           ts.Attr("age", "uint8", fill=0)]))
names = np.array(["Ada", "Bjørn", "Chloé", "Dmitri", "Zoë"], dtype=object)
cities = np.array(["London", None, "Paris", None, "Zürich"], dtype=object)  # None is null
ages = np.array([36, 41, 29, 52, 33], dtype=np.uint8)
with ts.open(people, "w") as A:
    A[0:5] = {"name": names, "city": cities, "age": ages}
with ts.open(people) as A:
    got = A[:]
assert got["name"][:5].tolist() == names.tolist() and got["name"][5:].tolist() == [""] * 5
assert got["city"].mask.tolist() == [c is None for c in cities] + [True] * 5
assert got["city"][[0, 2, 4]].tolist() == ["London", "Paris", "Zürich"]
assert got["age"].tolist() == ages.tolist() + [0] * 5
print("\npeople (ids 5..9 were never written: empty names, null cities, the fill age 0):")
for i in range(6):
    print(f"  {i}: {got['name'][i]!r:9} {got['city'][i]!s:8} {got['age'][i]}")
print("\nall values read back equal what was written")
