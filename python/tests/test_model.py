"""A model test: random small schemas (dims, tiles, orders, filters, dtypes, strings, nullable
attributes) receive random sequences of slab writes; after every step the whole array, random
regions (in a random order) and batches are compared with numpy reference arrays that start as
the fill (null where nullable)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any, Dict, List, Tuple

import numpy as np
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import tessera as ts

FILTERS = [ts.Zstd(level=1), ts.Gzip(level=1), ts.Lz4(), ts.Rle(), ts.Delta(), ts.ByteShuffle()]
DTYPES = ["int8", "uint16", "int32", "uint64", "float32", "float64"]
FILL = {"int8": -128, "uint16": 65535, "int32": -(2**31), "uint64": 2**64 - 1}


@st.composite
def schemas(draw: Any) -> ts.ArraySchema:
    ndim = draw(st.integers(1, 3))
    dims = []
    for i in range(ndim):
        lo = draw(st.integers(-5, 5))
        n = draw(st.integers(1, 9))
        dims.append(ts.Dim(f"d{i}", (lo, lo + n - 1), draw(st.integers(1, n))))
    nattr = draw(st.integers(1, 2))
    attrs = []
    for k in range(nattr):
        filters = draw(st.lists(st.sampled_from(FILTERS), max_size=2))
        dtype = draw(st.sampled_from(DTYPES + ["str"]))
        attrs.append(ts.Attr(f"a{k}", dtype, filters=filters, nullable=draw(st.booleans())))
    order = st.sampled_from(["row-major", "col-major"])
    return ts.ArraySchema(dims, attrs, cell_order=draw(order), tile_order=draw(order))


def fill_of(a: ts.Attr) -> Any:
    return "" if a.kind == "str" else FILL.get(a.engine_type, np.nan)


def cells_of(a: ts.Attr, v: np.ndarray) -> np.ndarray:
    """Values of attribute ``a`` made from integers ``v``."""
    if a.kind == "str":
        out = np.empty(v.shape, dtype=object)
        out.ravel()[:] = [("é" if x % 3 == 0 else "s") * (x % 5) for x in v.ravel().tolist()]
        return out
    return (v % 120).astype(a.dtype)


def check(a: ts.Attr, got: np.ndarray, ref: np.ndarray, valid: np.ndarray) -> None:
    if a.nullable:
        assert isinstance(got, np.ma.MaskedArray)
        np.testing.assert_array_equal(np.ma.getmaskarray(got), ~valid)
        got, ref = got.data[valid], ref[valid]
    if a.kind == "str":
        assert got.tolist() == ref.tolist()
    else:
        np.testing.assert_array_equal(got, ref)


@st.composite
def boxes(draw: Any, shape: Tuple[int, ...]) -> List[Tuple[int, int]]:
    out = []
    for n in shape:
        a = draw(st.integers(0, n - 1))
        b = draw(st.integers(a, n - 1))
        out.append((a, b))
    return out


class SlabWrites(RuleBasedStateMachine):
    """The state: an array on disk and its numpy reference."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="tessera-model-")
        self.uri = self.dir + "/arr"

    @initialize(schema=schemas())
    def create(self, schema: ts.ArraySchema) -> None:
        ts.create(self.uri, schema)
        self.schema = schema
        self.ref: Dict[str, np.ndarray] = {
            a.name: np.full(schema.shape, fill_of(a), dtype=object if a.kind == "str" else a.dtype)
            for a in schema.attrs
        }
        self.valid = {a.name: np.zeros(schema.shape, dtype=bool) for a in schema.attrs}

    @rule(data=st.data())
    def write(self, data: Any) -> None:
        box = data.draw(boxes(self.schema.shape))
        shape = tuple(b - a + 1 for a, b in box)
        fortran = data.draw(st.booleans())
        values = {}
        sl = tuple(slice(x, y + 1) for x, y in box)
        for a in self.schema.attrs:
            v = data.draw(st.integers(0, 100)) + np.arange(int(np.prod(shape))).reshape(shape)
            arr = cells_of(a, v)
            arr = np.asfortranarray(arr) if fortran else arr
            valid = np.ones(shape, dtype=bool)
            if a.nullable:
                valid = (v % data.draw(st.integers(2, 4))) != 0
                values[a.name] = np.ma.MaskedArray(arr, mask=~valid)
            else:
                values[a.name] = arr
            self.ref[a.name][sl] = arr
            self.valid[a.name][sl] = valid
        key = tuple(slice(d.domain[0] + x, d.domain[0] + y + 1) for d, (x, y) in zip(self.schema.dims, box))
        with ts.open(self.uri, "w") as A:
            A[key] = values if len(values) > 1 or data.draw(st.booleans()) else next(iter(values.values()))

    @rule(data=st.data())
    def read_region(self, data: Any) -> None:
        box = data.draw(boxes(self.schema.shape))
        order = data.draw(st.sampled_from(["C", "F"]))
        ranges = [(d.domain[0] + x, d.domain[0] + y) for d, (x, y) in zip(self.schema.dims, box)]
        with ts.open(self.uri) as A:
            got = A.read(ranges, attrs=list(self.schema.attr_names), order=order)
        got = got if isinstance(got, dict) else {self.schema.attrs[0].name: got}
        sl = tuple(slice(x, y + 1) for x, y in box)
        for a in self.schema.attrs:
            check(a, got[a.name], self.ref[a.name][sl], self.valid[a.name][sl] | (not a.nullable))

    @invariant()
    def whole_array_matches(self) -> None:
        if not hasattr(self, "schema"):
            return
        with ts.open(self.uri) as A:
            got = A[...]
            got = got if isinstance(got, dict) else {self.schema.attrs[0].name: got}
            for a in self.schema.attrs:
                check(a, got[a.name], self.ref[a.name], self.valid[a.name] | (not a.nullable))
            a = self.schema.attrs[-1]
            parts = [b[a.name] for b in A.iter_batches(attrs=[a.name], budget_bytes=24)]
            flat = np.ma.concatenate([p.reshape(-1) for p in parts]) if a.nullable else np.concatenate(
                [p.reshape(-1) for p in parts])
            check(a, flat, self.ref[a.name].reshape(-1), self.valid[a.name].reshape(-1) | (not a.nullable))

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


SlabWrites.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_slab_writes_match_numpy_model = SlabWrites.TestCase
