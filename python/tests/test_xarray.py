"""tessera.xarray: a CF dataset (time x lat x lon, float32 packed with scale and fill, datetime
coordinate) round-trips exactly; lazy indexing matches numpy; region writes; dask chunks of whole
tiles; one snapshot per open; plain arrays open as Datasets; the backend is registered."""

from __future__ import annotations

import os
from typing import Any, List

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera as ts

xr = pytest.importorskip("xarray")
pd = pytest.importorskip("pandas")
tx = pytest.importorskip("tessera.xarray")


def _dataset(nt: int = 12, nlat: int = 25, nlon: int = 36) -> Any:
    rng = np.random.default_rng(0)
    t2m = (rng.integers(-400, 400, (nt, nlat, nlon)) * 0.5 + 250).astype(np.float32)
    t2m[0, 0, :5] = np.nan  # masked through _FillValue
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K", "long_name": "2 m temperature"}),
            "land": (("lat", "lon"), rng.integers(0, 2, (nlat, nlon)).astype(np.int8)),
            "level": ((), np.float64(850.0), {"units": "hPa"}),
        },
        coords={
            "time": pd.date_range("2000-01-01", periods=nt, freq="6h"),
            "lat": ("lat", np.linspace(-60, 60, nlat, dtype=np.float32), {"units": "degrees_north"}),
            "lon": np.arange(0, 10 * nlon, 10, dtype=np.float32),
        },
        attrs={"title": "reanalysis sample", "version": 3, "weights": np.array([0.25, 0.75])},
    )
    ds.t2m.encoding = {"dtype": "int16", "scale_factor": np.float32(0.5), "_FillValue": np.int16(-32767)}
    return ds


def test_cf_dataset_round_trips_exactly(tmp_path: Any) -> None:
    ds = _dataset()
    uri = tx.to_tessera(ds, str(tmp_path / "g"))
    assert ts.object_kind(uri) == "group"
    with ts.Group(uri) as G:
        assert set(G) == {"t2m", "land", "level", "time", "lat", "lon"}
        with G["t2m"] as A:
            assert A.schema.attr("values").dtype == np.int16  # stored packed
    back = xr.open_dataset(uri, engine="tessera")
    assert back.t2m.dtype == np.float32 and back.time.dtype.kind == "M"
    xr.testing.assert_identical(back.load(), ds)
    assert back.t2m.encoding["scale_factor"] == np.float32(0.5)
    np.testing.assert_array_equal(back.attrs["weights"], [0.25, 0.75])
    raw = xr.open_dataset(uri, engine="tessera", mask_and_scale=False, decode_times=False)
    assert raw.t2m.dtype == np.int16 and raw.t2m.values[0, 0, 0] == -32767
    assert "since" in raw.time.attrs["units"]


_key = st.one_of(
    st.integers(-12, 11),
    st.builds(slice, st.one_of(st.none(), st.integers(-14, 14)), st.one_of(st.none(), st.integers(-14, 14)),
              st.sampled_from([None, 1, 2, 3, -1, -2])),
    st.lists(st.integers(-12, 11), min_size=1, max_size=4),
)


@settings(max_examples=60, deadline=None)
@given(keys=st.tuples(_key, _key, _key))
def test_lazy_indexing_matches_numpy(tmp_path_factory: Any, keys: Any) -> None:
    uri = _shared(tmp_path_factory)
    back = xr.open_dataset(uri, engine="tessera")
    expected = _dataset().t2m.values
    k = list(keys)
    if sum(isinstance(x, list) for x in k) <= 1:
        got = back.t2m[tuple(k)].values
    else:
        got = back.t2m.isel(time=k[0], lat=k[1], lon=k[2]).values
    # xarray indexes orthogonally (outer indexing), one axis at a time; numpy's own indexing
    # would move the list's axis first when an integer and a list are separated by a slice.
    want = expected
    for axis in range(3):
        idx = k[axis]
        if isinstance(idx, int):
            continue
        want = np.take(want, np.arange(want.shape[axis])[idx], axis=axis) if isinstance(idx, slice) \
            else np.take(want, idx, axis=axis)
    want = want[tuple(x if isinstance(x, int) else slice(None) for x in k)]
    np.testing.assert_array_equal(got, want)


_made: List[str] = []


def _shared(tmp_path_factory: Any) -> str:
    if not _made:
        _made.append(tx.to_tessera(_dataset(), str(tmp_path_factory.mktemp("xr") / "g")))
    return _made[0]


def test_region_writes_fill_part_of_a_dataset(tmp_path: Any) -> None:
    ds = _dataset()
    uri = tx.to_tessera(ds, str(tmp_path / "g"))
    part = ds.isel(time=slice(4, 8)).drop_vars(["lat", "lon", "land", "level"])
    part["t2m"] = part.t2m * 0 + 1.5
    tx.to_tessera(part, uri, region={"time": slice(4, 8)})
    expected = ds.copy(deep=True)
    expected["t2m"][4:8] = 1.5
    xr.testing.assert_identical(xr.open_dataset(uri, engine="tessera").load(), expected)
    with pytest.raises(ts.ArgumentError, match="no region dimension"):
        tx.to_tessera(ds.isel(time=slice(0, 2)), uri, region={"time": slice(0, 2)})
    with pytest.raises(ts.ArgumentError, match="holds 3 cells"):
        tx.to_tessera(part, uri, region={"time": slice(0, 3)})
    with pytest.raises(ts.ArrayError, match="already exists"):
        tx.to_tessera(ds, uri)
    xr.testing.assert_identical(xr.open_dataset(uri, engine="tessera").load(), expected)


def test_dask_chunks_are_whole_tiles_and_dask_data_is_written(tmp_path: Any) -> None:
    ds = _dataset(nt=40, nlat=60, nlon=70).chunk({"time": 10, "lat": 30, "lon": 35})
    uri = tx.to_tessera(ds, str(tmp_path / "g"))
    with ts.Group(uri) as G, G["t2m"] as A:
        assert [d.tile for d in A.schema.dims] == [10, 30, 35]
        assert len(A.fragments()) == 4 * 2 * 2  # one per dask chunk
    back = xr.open_dataset(uri, engine="tessera", chunks={})
    assert back.t2m.chunks == ((10,) * 4, (30, 30), (35, 35))
    xr.testing.assert_identical(back.load(), ds.load())


def test_one_snapshot_per_open(tmp_path: Any) -> None:
    ds = _dataset()
    uri = tx.to_tessera(ds, str(tmp_path / "g"))
    back = xr.open_dataset(uri, engine="tessera")
    later = ds.isel(time=slice(0, 12)).drop_vars(["lat", "lon", "land", "level"])
    later["t2m"] = later.t2m * 0 + 7
    tx.to_tessera(later, uri, region={"time": slice(0, 12)})
    xr.testing.assert_identical(back.load(), ds)  # opened before the write: does not see it
    assert float(xr.open_dataset(uri, engine="tessera").t2m[5, 5, 5]) == 7


def test_a_plain_dense_array_opens_as_a_dataset(tmp_path: Any) -> None:
    schema = ts.ArraySchema(dims=[ts.Dim("y", (0, 9), 5), ts.Dim("x", (0, 19), 5)],
                            attrs=[ts.Attr("a", "int32"), ts.Attr("b", "float64")])
    uri = str(tmp_path / "a")
    ts.create(uri, schema)
    a = np.arange(200, dtype=np.int32).reshape(10, 20)
    with ts.open(uri, "w") as A:
        A[...] = {"a": a, "b": a / 2}
    ds = xr.open_dataset(uri, engine="tessera")
    assert set(ds.data_vars) == {"a", "b"} and ds.a.dims == ("y", "x")
    np.testing.assert_array_equal(ds.a.values, a)
    np.testing.assert_array_equal(ds.b[2:4, ::3].values, (a / 2)[2:4, ::3])


def test_the_backend_is_registered(tmp_path: Any) -> None:
    assert "tessera" in xr.backends.list_engines()
    uri = tx.to_tessera(_dataset(), str(tmp_path / "g"))
    entry = tx.TesseraBackendEntrypoint()
    assert entry.guess_can_open(uri) and not entry.guess_can_open(str(tmp_path))
    assert not entry.guess_can_open(os.path.join(str(tmp_path), "missing"))
    with pytest.raises(ts.QueryError, match="neither a Tessera group nor a Tessera array"):
        xr.open_dataset(str(tmp_path), engine="tessera")


def test_native_times_round_trip_exactly_and_take_region_writes(tmp_path: Any) -> None:
    ds = _dataset()
    ds = ds.assign_coords(time=ds.time.values + np.timedelta64(123456789, "ns"))  # beyond CF's usual units
    ds["seen"] = ("time", ds.time.values.copy())
    ds["seen"].values[3] = np.datetime64("NaT")
    uri = tx.to_tessera(ds, str(tmp_path / "g"), native_times=True)
    with ts.Group(uri) as G:
        for name in ("time", "seen"):
            with G[name] as A:
                assert A.schema.attr("values").dtype == ds[name].dtype
    back = xr.open_dataset(uri, engine="tessera")
    xr.testing.assert_identical(back.load(), ds)
    raw = xr.open_dataset(uri, engine="tessera", decode_times=False)
    assert raw.time.dtype.kind == "M" and "units" not in raw.time.attrs
    part = ds.isel(time=slice(2, 4))[["seen"]].drop_vars(["lat", "lon", "level"], errors="ignore")
    part["seen"] = ("time", np.array(["1999-01-01", "NaT"], dtype="datetime64[ns]"))
    tx.to_tessera(part, uri, region={"time": slice(2, 4)})
    expected = ds.copy(deep=True)
    expected["seen"].values[2:4] = part["seen"].values
    expected["time"] = ds.time  # unchanged: the region's time coordinate holds the same values
    xr.testing.assert_identical(xr.open_dataset(uri, engine="tessera").load(), expected)
