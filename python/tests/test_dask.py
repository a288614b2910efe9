"""tessera.dask on a real dask.distributed cluster of 2 worker processes: lazy dense reads with
tile-aligned chunks, one snapshot per graph, parallel writes (one fragment per task), sparse
arrays as dataframes split by space, and picklable array handles."""

from __future__ import annotations

import os
import pickle
from typing import Any, Dict, Iterator, List, Tuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tessera as ts

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
tsd = pytest.importorskip("tessera.dask")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _pids(client: Any) -> set:
    return set(client.run(os.getpid).values())


def test_dense_read_in_worker_processes_matches_numpy(client: Any, tmp_path: Any) -> None:
    x = np.random.default_rng(0).integers(-1000, 1000, (230, 170), dtype=np.int32)
    uri = ts.from_numpy(str(tmp_path / "a"), x, tile=(40, 30))
    y = tsd.from_tessera(uri, chunks=(80, 60))
    assert y.dtype == np.int32 and y.shape == x.shape
    np.testing.assert_array_equal(y.compute(), x)
    np.testing.assert_array_equal((y[17:201, 5:160] * 2).sum(axis=0).compute(), (x[17:201, 5:160] * 2).sum(axis=0))
    assert len(_pids(client)) == 2


def test_default_chunks_are_whole_tiles(tmp_path: Any, monkeypatch: Any) -> None:
    dims = [ts.Dim("r", (-7, 992), 25), ts.Dim("c", (1, 600), 40)]
    schema = ts.ArraySchema(dims=dims, attrs=[ts.Attr("a", "float32")])
    uri = str(tmp_path / "t")
    ts.create(uri, schema)
    monkeypatch.setattr(tsd, "CHUNK_BYTES", 25 * 40 * 4 * 6)  # six tiles a chunk
    y = tsd.from_tessera(uri, ranges=[(0, 500), (10, 600)])
    assert y.shape == (501, 591)
    for axis, (lo, tile) in enumerate([(-7, 25), (1, 40)]):
        start = (0, 10)[axis]
        edges = np.cumsum((start,) + y.chunks[axis])[:-1]
        assert all((e - lo) % tile == 0 for e in edges[1:]), y.chunks
    assert max(np.prod([c[0] for c in y.chunks]) * 4, 1) <= 25 * 40 * 4 * 6 * 2
    np.testing.assert_array_equal(y.compute(), np.full((501, 591), np.nan, np.float32))  # the fill


def test_a_graph_reads_one_snapshot(client: Any, tmp_path: Any) -> None:
    uri = ts.from_numpy(str(tmp_path / "a"), np.ones((100, 100), np.int64), tile=25)
    with ts.open(uri, "w") as A:
        A[0:50, :] = np.full((50, 100), 2, np.int64)
    y = tsd.from_tessera(uri, chunks=25)
    ts.consolidate(uri)
    ts.vacuum(uri)  # the graph's fragments are gone; their consolidated fragment shows the same cells
    with ts.open(uri, "w") as A:
        A[...] = np.full((100, 100), 7, np.int64)  # committed after the graph was built
    expected = np.ones((100, 100), np.int64)
    expected[:50] = 2
    np.testing.assert_array_equal(y.compute(), expected)
    np.testing.assert_array_equal(tsd.from_tessera(uri).compute(), np.full((100, 100), 7))


def test_parallel_write_commits_a_fragment_per_chunk(client: Any, tmp_path: Any) -> None:
    x = np.arange(120 * 90, dtype=np.float64).reshape(120, 90)
    uri = str(tmp_path / "w")
    tsd.to_tessera(da.from_array(x, chunks=(40, 30)), uri, attr="v")
    with ts.open(uri) as A:
        assert A.attr_names == ("v",) and [d.tile for d in A.schema.dims] == [40, 30]
        assert len(A.fragments()) == 9
        np.testing.assert_array_equal(A[...], x)
    # into a region of the existing array, then consolidated once every task has committed
    tsd.to_tessera(da.from_array(-x[:60, :45], chunks=(20, 15)), uri, attr="v", region=(30, 20), consolidate=True)
    expected = x.copy()
    expected[30:90, 20:65] = -x[:60, :45]
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[...], expected)
        assert len(A.fragments()) == 1


def test_write_errors_change_nothing(tmp_path: Any) -> None:
    uri = ts.from_numpy(str(tmp_path / "a"), np.zeros((10, 10), np.int32))
    x = da.zeros((10, 10), dtype=np.float64, chunks=5)
    with pytest.raises(ts.ArgumentError, match="dtype float64"):
        tsd.to_tessera(x, uri)
    with pytest.raises(ts.ArgumentError, match="does not fit the domain"):
        tsd.to_tessera(x.astype(np.int32), uri, region=(5, 0))
    with pytest.raises(ts.ArgumentError, match="no attribute 'b'"):
        tsd.to_tessera(x.astype(np.int32), uri, attr="b")
    with pytest.raises(ts.QueryError, match=r"dense: read it with tessera\.dask\.from_tessera"):
        tsd.read_dataframe(uri)
    with ts.open(uri) as A:
        assert len(A.fragments()) == 1


def test_array_handles_pickle_to_their_snapshot(tmp_path: Any) -> None:
    uri = ts.from_numpy(str(tmp_path / "a"), np.zeros((4, 4), np.int32))
    for _ in range(3):  # fragments stamped within one ms: the snapshot must still hold them all
        with ts.open(uri, "w") as A:
            A[0:1, 0:1] = np.array([[_ + 1]], np.int32)
    with ts.open(uri) as A:
        blob = pickle.dumps(A)
        before = A[...]
    with ts.open(uri, "w") as W:
        W[...] = np.full((4, 4), 9, np.int32)
    with pickle.loads(blob) as B:
        np.testing.assert_array_equal(B[...], before)
        assert before[0, 0] == 3
    with ts.open(uri, "w") as W:
        assert pickle.loads(pickle.dumps(W)).mode == "w"


def _sparse(tmp_path: Any, name: str, dtype: str = "int64") -> str:
    lo, hi = (0, 10**6) if dtype == "int64" else (0.0, 1.0)
    schema = ts.ArraySchema(
        dims=[ts.Dim("x", (lo, hi), dtype=dtype), ts.Dim("y", (lo, hi), dtype=dtype)],
        attrs=[ts.Attr("v", "float64"), ts.Attr("s", str)],
        sparse=True,
    )
    uri = str(tmp_path / name)
    ts.create(uri, schema)
    return uri


def _frame(df: Any) -> Any:
    """Sorted by coordinates, strings as objects (dask turns them into Arrow strings)."""
    df = df.sort_values(["x", "y"]).reset_index(drop=True)
    return df.astype({c: object for c in df.columns if c == "s"})


@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_sparse_dataframe_partitions_cover_every_cell_once(client: Any, tmp_path: Any, dtype: str) -> None:
    uri = _sparse(tmp_path, "s", dtype)
    rng = np.random.default_rng(2)
    for i in range(6):  # fragments over different stripes of x, one over everything
        n = 3000
        span = (i * 150_000, i * 150_000 + 200_000) if i < 5 else (0, 10**6)
        xs = rng.integers(*span, n)
        ys = rng.integers(0, 10**6, n)
        if dtype == "float64":
            xs, ys = xs / 10**6, ys / 10**6
        with ts.open(uri, "w") as A:
            A.write({"x": xs, "y": ys}, {"v": rng.random(n), "s": [f"c{k}" for k in range(n)]})
    with ts.open(uri) as A:
        direct = _frame(A.read().to_pandas())
    df = tsd.read_dataframe(uri, npartitions=7)
    assert df.npartitions == 7
    got = _frame(df.compute())
    assert len(got) == len(direct)
    assert got.equals(direct)
    sizes = df.map_partitions(len).compute()
    assert max(sizes) < 2.5 * len(direct) / 7, list(sizes)  # balanced by the fragments' cells
    lo, hi = (200_000, 700_000) if dtype == "int64" else (0.2, 0.7)
    part = _frame(tsd.read_dataframe(uri, ranges={"x": [(lo, hi)]}, npartitions=3, attrs=["v"]).compute())
    inside = direct[(direct.x >= lo) & (direct.x <= hi)][["x", "y", "v"]].reset_index(drop=True)
    assert part.equals(inside)


def test_sparse_dataframe_writes_a_fragment_per_partition(client: Any, tmp_path: Any) -> None:
    import pandas as pd

    src = pd.DataFrame({"x": np.arange(0, 5000) * 7, "y": np.arange(5000)[::-1] * 3, "v": np.arange(5000) / 8})
    src["s"] = [f"r{k}" for k in range(5000)]
    uri = _sparse(tmp_path, "w")
    tsd.write_dataframe(dd.from_pandas(src, npartitions=4), uri, dims=["y", "x"])
    with ts.open(uri) as A:
        assert len(A.fragments()) == 4
        back = _frame(A.read().to_pandas())
    assert back[["x", "y", "v", "s"]].equals(_frame(src)[["x", "y", "v", "s"]])
    with pytest.raises(ts.ArgumentError, match="neither dimensions nor attributes"):
        tsd.write_dataframe(dd.from_pandas(src.assign(z=1), npartitions=2), uri, dims=["x", "y"])


@settings(max_examples=200, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 500)), max_size=6),
    user=st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1, max_size=3),
    n=st.integers(1, 9),
)
def test_first_dimension_pieces_are_disjoint_and_cover_the_ranges(
    spans: List[Tuple[int, int, int]], user: List[Tuple[int, int]], n: int
) -> None:
    dim = ts.Dim("x", (0, 1000))
    spans_ = tuple(np.array(c, dtype=t) for c, t in zip(zip(*spans), ("f8", "f8", "u8"))) if spans else (
        np.zeros(0), np.zeros(0), np.zeros(0, np.uint64))
    ranges = [(min(a, b), max(a, b)) for a, b in user]
    pieces = tsd._split_first_dim(dim, spans_, ranges, n)
    assert len(pieces) <= n
    covered: List[int] = [v for part in pieces for lo, hi in part for v in range(lo, hi + 1)]
    wanted = sorted({v for lo, hi in ranges for v in range(lo, hi + 1)})
    parts_sets = [{v for lo, hi in part for v in range(lo, hi + 1)} for part in pieces]
    assert sum(len(p) for p in parts_sets) == len(set().union(*parts_sets)) if parts_sets else True
    assert sorted(set(covered)) == wanted


def _mass_below(spans: List[Tuple[float, float, int]], c: float) -> float:
    """The reference cell mass left of ``c``: each span's cells spread evenly over [lo, hi],
    those of a one-point span on its point."""
    m = 0.0
    for a, b, n in spans:
        lo, hi = min(a, b), max(a, b)
        m += n * min(max((c - lo) / (hi - lo), 0.0), 1.0) if hi > lo else (n if lo < c else 0)
    return m


@settings(max_examples=300, deadline=None)
@given(
    spans=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**5)), min_size=1,
                   max_size=40),
    n=st.integers(2, 12),
    snap=st.booleans(),
)
def test_cuts_split_the_cell_mass_into_equal_parts(spans: List[Tuple[int, int, int]], n: int, snap: bool) -> None:
    arrays = tuple(np.array(c, dtype=t) for c, t in zip(zip(*spans), ("f8", "f8", "u8")))
    cuts = tsd._cuts(arrays, n, snap=snap)
    total = sum(c for _, _, c in spans)
    assert cuts == sorted(set(cuts))
    points: Dict[int, int] = {}
    for a, b, c in spans:
        if a == b:
            points[a] = points.get(a, 0) + c
    tol = max(points.values(), default=0) / 2 + 1e-6 * max(total, 1)
    if snap:  # moved to a span's start, by at most a quarter of a part
        tol = max(tol, total / n / 4 + 1e-6 * max(total, 1))
    targets = [total * k / n for k in range(1, n)]
    for c in cuts:  # each cut leaves about k/n of the cells left of it
        assert min(abs(_mass_below(spans, c) - t) for t in targets) <= tol, (c, targets)
    if not points and total and not snap:  # a continuous mass: every target gets its own cut
        assert len(cuts) == n - 1


def test_sparse_partitions_follow_the_tiles_of_one_skewed_fragment(client: Any, tmp_path: Any) -> None:
    # One fragment whose cells crowd into a few stripes of x: its bounding box says nothing of
    # that, its tiles' do, and the partitions come out about equal.
    uri = str(tmp_path / "k")
    ts.create(uri, ts.ArraySchema(dims=[ts.Dim("x", (0, 10**6)), ts.Dim("y", (0, 10**6))],
                                  attrs=[ts.Attr("v", "float64")], sparse=True, capacity=2_000))
    rng = np.random.default_rng(5)
    xs = np.concatenate([rng.integers(0, 10_000, 40_000), rng.integers(900_000, 1_000_000, 4_000),
                         rng.integers(400_000, 410_000, 16_000)])
    with ts.open(uri, "w") as A:
        A.write({"x": xs, "y": rng.integers(0, 10**6, len(xs))},
                {"v": rng.random(len(xs))})
    df = tsd.read_dataframe(uri, npartitions=6)
    sizes = list(df.map_partitions(len).compute())
    assert sum(sizes) == len(xs)
    assert max(sizes) < 1.5 * len(xs) / 6, sizes


def test_a_write_in_the_millisecond_of_the_opening_is_not_in_the_snapshot(tmp_path: Any, monkeypatch: Any) -> None:
    import tessera.array

    uri = ts.from_numpy(str(tmp_path / "a"), np.zeros((4, 4), np.int32))
    opened_at = max(f.t1 for f in ts.fragments(uri)) + 1000
    monkeypatch.setattr(tessera.array, "_now_ms", lambda: opened_at)
    with ts.open(uri) as A:
        blob = pickle.dumps(A)
    with ts.open(uri, "w", timestamp=opened_at) as W:  # stamped in that same millisecond
        W[...] = np.full((4, 4), 5, np.int32)
    with pickle.loads(blob) as B:
        np.testing.assert_array_equal(B[...], np.zeros((4, 4), np.int32))


def test_bool_and_datetime_arrays_round_trip_through_workers(client: Any, tmp_path: Any) -> None:
    rng = np.random.default_rng(3)
    flags = rng.integers(0, 2, (60, 40)).astype(bool)
    times = rng.integers(-10**12, 10**12, (60, 40)).view("datetime64[us]")
    times[5, 7] = np.datetime64("NaT")
    for name, x in (("b", flags), ("t", times)):
        uri = str(tmp_path / name)
        tsd.to_tessera(da.from_array(x, chunks=(20, 20)), uri)
        y = tsd.from_tessera(uri, chunks=(30, 20))
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(y.compute(), x)


def test_tasks_on_a_worker_decode_with_the_workers_threads(client: Any) -> None:
    # Each worker runs one task at a time: the engine takes one compute thread there (as dask
    # limits numpy's), unless the configuration says otherwise; off a worker nothing changes.
    assert client.submit(tsd._task_config, None, pure=False).result() == {"sm.compute_concurrency": "1"}
    cfg = {"sm.io_concurrency": "3"}
    assert client.submit(tsd._task_config, cfg, pure=False).result() == {**cfg, "sm.compute_concurrency": "1"}
    mine = {"sm.compute_concurrency": "2"}
    assert client.submit(tsd._task_config, mine, pure=False).result() == mine
    assert tsd._task_config(None) is None and tsd._task_config(cfg) == cfg
