"""Tessera sparse arrays: a cloud of weather-station readings on float (longitude, latitude)
coordinates, written in any order, read by inclusive boxes, in batches, and as a pandas DataFrame
when pandas is installed; then the engine's statistics of one read. Everything lands in
./demo_data."""

import contextlib
import pathlib
import shutil
import time

import numpy as np

import tessera as ts

ROOT = pathlib.Path("demo_data")
ROOT.mkdir(exist_ok=True)
uri = ROOT / "stations"
shutil.rmtree(uri, ignore_errors=True)


@contextlib.contextmanager
def timed(label: str):
    t0 = time.perf_counter()
    yield
    print(f"  {label:<52} {1000 * (time.perf_counter() - t0):8.1f} ms")


# 1. The schema: float64 coordinates in 10-degree space tiles, cells along a Hilbert curve,
#    data tiles of 4096 cells. Coordinates get the default filters (delta, byte shuffle, zstd
#    level 3).
schema = ts.ArraySchema(
    dims=[ts.Dim("lon", domain=(-180.0, 180.0), tile=10.0, dtype="float64"),
          ts.Dim("lat", domain=(-90.0, 90.0), tile=10.0, dtype="float64")],
    attrs=[ts.Attr("temp", "float32", filters=[ts.ByteShuffle(), ts.Zstd(level=3)]),
           ts.Attr("station", str, filters=[ts.Zstd()]),
           ts.Attr("quality", "uint8", nullable=True)],
    sparse=True, cell_order="hilbert", capacity=4096)
print(schema)
ts.create(uri, schema)

# 2. One million readings in random order; the engine sorts them.
n = 1_000_000
rng = np.random.default_rng(42)
lon = np.round(rng.uniform(-180, 180, n), 4)
lat = np.round(rng.uniform(-90, 90, n), 4)
keep = rng.permutation(np.unique(np.stack([lon, lat]), axis=1, return_index=True)[1])  # no duplicates
lon, lat = lon[keep], lat[keep]
n = len(lon)
temp = (25 - np.abs(lat) / 3 + rng.normal(0, 2, n)).astype(np.float32)
station = np.array([f"ST{i:07d}" for i in range(n)], dtype=object)
quality = np.ma.MaskedArray(rng.integers(0, 100, n, dtype=np.uint8), mask=rng.random(n) < 0.1)
print(f"\n{n} readings")
with ts.open(uri, "w") as A:
    with timed("write (unordered: the engine sorts)"):
        A.write({"lon": lon, "lat": lat}, {"temp": temp, "station": station, "quality": quality})
    with timed("overwrite the first 1000 readings (newest wins)"):
        A[lon[:1000], lat[:1000]] = {"temp": np.full(1000, -99, np.float32), "station": station[:1000],
                                     "quality": quality[:1000]}

# 3. Reads: inclusive ranges on float dimensions, several ranges per dimension, any order.
with ts.open(uri) as A:
    with timed("read a 20 x 10 degree box (row-major)"):
        box = A.read(ranges={"lon": [(0.0, 20.0)], "lat": [(40.0, 50.0)]})
    inside = (lon >= 0) & (lon <= 20) & (lat >= 40) & (lat <= 50)
    assert box.cells == inside.sum() and list(box) == ["lon", "lat", "temp", "station", "quality"]
    assert np.all(np.diff(box["lon"]) >= 0)  # order "C": by lon, then lat
    print(f"    {box.cells} readings, mean temperature {box['temp'].mean():.2f}")
    with timed("read two longitude bands, temp only, unordered"):
        bands = A.read(ranges={"lon": [(-10.0, -5.0), (5.0, 10.0)]}, attrs=["temp"], order="U")
    assert bands.cells == (((lon >= -10) & (lon <= -5)) | ((lon >= 5) & (lon <= 10))).sum()
    with timed("iterate over everything in batches of 8 MiB"):
        total = sum(b.cells for b in A.iter_batches(attrs=["temp"], budget_bytes=8 << 20, order="G"))
    assert total == n
    overwritten = A.read(ranges={"lon": (lon[0], lon[0]), "lat": (lat[0], lat[0])})
    assert overwritten["temp"].tolist() == [-99.0]
    print(f"  non-empty domain: {A.nonempty_domain()}")
    for f in A.fragments():
        print(f"    fragment {f.name[:30]}...  {'sparse' if f.sparse else 'dense'}  {f.cell_count:>8} cells  "
              f"{f.stored_bytes / 2**20:6.2f} MiB stored  domain {f.nonempty_domain}")

try:
    df = box.to_pandas()
    print("\nthe box as a pandas DataFrame:")
    print(df.head())
except ImportError as e:
    print(f"\n(to_pandas skipped: {e})")

# 4. Statistics of one read.
ts.stats.reset()
ts.stats.enable()
with ts.open(uri) as A:
    A.read(ranges={"lon": [(100.0, 110.0)]})
ts.stats.disable()
text = ts.stats.dumps()
print("\n" + text[text.index("Summary:"):])
print("all values read back equal what was written")
