"""Schemas, filters and configuration: construction, the engine's JSON form, validation."""

from __future__ import annotations

import json

import numpy as np
import pytest

import tessera as ts
from tessera import _core


def test_schema_properties_and_json_round_trip() -> None:
    s = ts.ArraySchema(
        dims=[ts.Dim("rows", domain=(1, 12000), tile=1000, dtype="int64"),
              ts.Dim("cols", domain=(-5, 4), tile=5, dtype="int64")],
        attrs=[ts.Attr("a", dtype="int32", filters=[ts.Zstd(level=3)]),
               ts.Attr("s", str, nullable=True),
               ts.Attr("z", np.complex128, fill=1 + 2j),
               ts.Attr("v", "(3,)f4", filters=[ts.ByteShuffle(), ts.Lz4()]),
               ts.Attr("r", "int16", var=True, filters=[ts.Delta(), ts.Rle(), ts.Gzip(level=9)])],
        cell_order="col-major", tile_order="F")
    assert s.ndim == 2 and s.shape == (12000, 10) and s.domain == ((1, 12000), (-5, 4))
    assert s.dim_names == ("rows", "cols") and s.attr_names == ("a", "s", "z", "v", "r")
    assert s.cell_order == s.tile_order == "col-major"
    d = json.loads(s.to_json())
    assert d["attrs"][0]["filters"] == [{"name": "zstd", "level": 3}]
    assert d["attrs"][1]["type"] == "utf8" and d["attrs"][1]["cell_val_num"] == "var"
    assert d["attrs"][2]["type"] == "float64" and d["attrs"][2]["cell_val_num"] == 2
    assert d["attrs"][2]["fill"] == [1.0, 2.0]
    assert d["attrs"][3]["type"] == "float32" and d["attrs"][3]["cell_val_num"] == 3
    back = ts.ArraySchema.from_json(s.to_json())
    assert back == s and back.to_json() == s.to_json()
    assert back.attr("z").dtype == np.complex128 and back.attr("z").fill == 1 + 2j
    assert back.attr("v").dtype == np.dtype("(3,)f4")
    assert back.attr("r").var and back.attr("r").dtype == np.int16
    assert back.attr("s").kind == "str" and back.attr("s").nullable
    r = repr(s)
    assert "Dim('rows', domain=(1, 12000), tile=1000, dtype='int64')" in r
    assert "Attr('a', dtype='int32', filters=[Zstd(level=3)])" in r
    assert "Attr('s', dtype='str', nullable=True)" in r


@pytest.mark.parametrize(
    "dtype, etype, cvn",
    [("int8", "int8", 1), (np.uint64, "uint64", 1), ("f4", "float32", 1), (np.complex64, "float32", 2),
     (str, "utf8", "var"), ("U", "utf8", "var"), (bytes, "uint8", "var"), ("S4", "utf8", 4),
     (np.dtype(">i4"), "int32", 1)],
)
def test_dtype_mapping(dtype: object, etype: str, cvn: object) -> None:
    a = ts.Attr("x", dtype)  # type: ignore[arg-type]
    assert (a.engine_type, a.cell_val_num) == (etype, cvn)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda: ts.ArraySchema([ts.Dim("d", (1, 10), 11)], [ts.Attr("a", "i4")]), "exceeds"),
        (lambda: ts.ArraySchema([ts.Dim("d", (5, 1), 1)], [ts.Attr("a", "i4")]), "reversed"),
        (lambda: ts.ArraySchema([ts.Dim("d", (1, 10), 2)], [ts.Attr("d", "i4")]), "used twice"),
        (lambda: ts.ArraySchema([ts.Dim("d", (0, 300), 2, dtype="int8")], [ts.Attr("a", "i4")]), "does not fit"),
        (lambda: ts.ArraySchema([ts.Dim("d", (0, 3), 2, dtype="float64")], [ts.Attr("a", "i4")]), "integer"),
        (lambda: ts.ArraySchema([ts.Dim("d", (1, 4))], [ts.Attr("a", "i4")]), "tile"),
        (lambda: ts.ArraySchema([], [ts.Attr("a", "i4")]), "at least one dimension"),
        (lambda: ts.ArraySchema([ts.Dim("d", (1, 10), 2)], []), "at least one attribute"),
        (lambda: ts.ArraySchema([ts.Dim("d", (1, 10), 2)], [ts.Attr("a", "i4", filters=[ts.Gzip(level=12)])]),
         "level 12"),
        (lambda: ts.ArraySchema([ts.Dim("d", (1, 10), 2)], [ts.Attr("a", "i1", fill=1000)]), "fill"),
        (lambda: ts.ArraySchema([ts.Dim("d", (0, 1), 1, dtype=bool)], [ts.Attr("a", "i4")]),
         "type bool is not supported for dimensions"),
        (lambda: ts.Attr("a", "datetime64[fs]"), "no Tessera datatype"),
        (lambda: ts.Attr("a", "datetime64[2s]"), "no Tessera datatype"),
        (lambda: ts.Dim("d", ("2020-01-01T00:00:00.5", "2021-01-01"), 1, dtype="datetime64[s]"), "finer than"),
        (lambda: ts.Attr("a", "(2,)f4"), "complex"),
        (lambda: ts.Attr("a", "float64", cell_val_num=2), "complex"),
        (lambda: ts.Attr("a", "datetime64[Y]"), "no Tessera datatype"),
        (lambda: ts.ArraySchema.from_json("{"), "JSON"),
        (lambda: ts.ArraySchema([ts.Dim("d", (1, 10), 2)], [ts.Attr("a", "i4")], cell_order="zigzag"), "zigzag"),
    ],
)
def test_invalid_schemas_raise_schema_error(make: object, words: str) -> None:
    with pytest.raises(ts.SchemaError, match=words):
        make()  # type: ignore[operator]


def test_filters_serialize_to_engine_json() -> None:
    fs = [ts.Gzip(), ts.Zstd(level=-1), ts.Lz4(), ts.Rle(), ts.Delta(), ts.ByteShuffle()]
    js = [f.to_json() for f in fs]
    assert js == [{"name": "gzip", "level": 6}, {"name": "zstd", "level": -1}, {"name": "lz4"},
                  {"name": "rle"}, {"name": "delta"}, {"name": "byteshuffle"}]
    assert [ts.Filter.from_json(j) for j in js] == fs
    with pytest.raises(ts.SchemaError):
        ts.Filter.from_json({"name": "snappy"})


def test_config_checks_keys_and_values() -> None:
    c = ts.Config({"sm.compute_concurrency": 2, "vfs.read_mode": "mmap"})
    assert c["sm.compute_concurrency"] == "2" and c["vfs.read_mode"] == "mmap"
    assert c["sm.memory_budget"] == "1073741824"  # defaults answer too
    assert dict(c) == {"sm.compute_concurrency": "2", "vfs.read_mode": "mmap"}
    assert any(k == "sm.io_concurrency" for k, _, _ in ts.Config.describe())
    with pytest.raises(ts.ConfigError, match="unknown key"):
        ts.Config({"sm.no_such_key": 1})
    with pytest.raises(ts.ConfigError, match="pread or mmap"):
        ts.Config({"vfs.read_mode": "fast"})
    with pytest.raises(ts.ConfigError, match="non-negative integer"):
        ts.Config({"sm.memory_budget": -1})


def test_contexts_are_shared_per_config(uri: str) -> None:
    ts.from_numpy(uri, np.zeros((4, 4), np.int32))
    cfg = {"sm.compute_concurrency": "1", "sm.io_concurrency": "3"}
    with ts.open(uri, config=cfg):
        pass
    n = _core.context_count()
    for _ in range(5):
        with ts.open(uri, config=ts.Config(cfg)):
            pass
        with ts.open(uri):
            pass
    assert _core.context_count() == n


def test_schema_classes_are_the_engines_and_pickle() -> None:
    """One schema model (issue 19): the classes are the binding's wrappers of the engine's types,
    and every one round-trips through pickle (the default filters of a dimension included)."""
    import pickle

    for cls in (ts.ArraySchema, ts.Dim, ts.Attr, ts.Filter, ts.Zstd):
        assert cls is getattr(_core, cls.__name__) and cls.__module__ == "tessera"
    s = ts.ArraySchema(
        dims=[ts.Dim("x", (0.0, 9.0), 5.0, dtype="float32"), ts.Dim("y", (0.0, 1.0), dtype="float32", filters=[])],
        attrs=[ts.Attr("a", "int32", fill=3, filters=[ts.Zstd(1)]), ts.Attr("s", str, fill="ab")],
        sparse=True,
    )
    objects = [s, *s.dims, *s.attrs, ts.Gzip(2), ts.Lz4(), ts.Dim("x", (0, 9))]
    for o in objects:
        back = pickle.loads(pickle.dumps(o))
        assert back == o and repr(back) == repr(o)
    assert hash(pickle.loads(pickle.dumps(s))) == hash(s) and len({ts.Zstd(3), ts.Zstd(3), ts.Lz4()}) == 2
    # A dimension made without filters still gets the engine's defaults after a pickle.
    d = pickle.loads(pickle.dumps(ts.Dim("x", (0, 9))))
    assert ts.ArraySchema([d], [ts.Attr("a", "i4")], sparse=True).dims[0].filters == ts.default_coord_filters()


def test_filter_levels_are_checked_by_the_engine_when_made() -> None:
    assert ts.Zstd(level=-7).level == -7 and ts.Gzip().level == 6 and ts.Zstd.name == "zstd"
    for make in (lambda: ts.Zstd(level=23), lambda: ts.Gzip(level=-1), lambda: ts.Gzip(level=1.5)):
        with pytest.raises(ts.SchemaError, match="level"):
            make()
