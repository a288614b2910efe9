"""Cells that are not one number: strings, bytes, nullable, complex, multi-valued, ragged."""

from __future__ import annotations

import numpy as np
import pytest

import tessera as ts
from conftest import make_2d


def test_strings_unicode_and_empty(uri: str) -> None:
    make_2d(uri, rows=4, cols=3, tile=(3, 2), attrs=[ts.Attr("s", str, filters=[ts.Zstd()])])
    vals = np.array([["", "a", "ünïcødé"], ["日本語", "emoji 🎉", ""], ["x" * 1000, "tab\tnew\nline", "\x00nul"],
                     ["ascii", "", "ß"]], dtype=object)
    with ts.open(uri, "w") as A:
        A[:] = vals
    with ts.open(uri) as A:
        got = A[:]
        assert got.dtype == object and got.shape == (4, 3)
        assert got.tolist() == vals.tolist()
        assert A[1:3, 3].tolist() == ["ünïcødé", ""]
        assert A.read(order="F").tolist() == vals.tolist()
        assert A.read(order="G").tolist()[:2] == ["", "a"]


def test_strings_from_unicode_arrays_lists_and_scalars(uri: str) -> None:
    make_2d(uri, rows=3, cols=2, tile=(3, 2), attrs=[ts.Attr("s", "U")])
    with ts.open(uri, "w") as A:
        A[:] = np.array([["a", "bb"], ["ccc", ""], ["é", "f"]])  # dtype <U3
        A[3, :] = ["gg", "h"]
    with ts.open(uri) as A:
        assert A[:].tolist() == [["a", "bb"], ["ccc", ""], ["gg", "h"]]
    with ts.open(uri, "w") as A:
        A[:] = "same"
    with ts.open(uri) as A:
        assert (A[:] == "same").all()


def test_never_written_strings_are_empty(uri: str) -> None:
    make_2d(uri, rows=3, cols=3, tile=(2, 2), attrs=[ts.Attr("s", str)])
    with ts.open(uri, "w") as A:
        A[2, 2] = np.array("mid", dtype=object)
    with ts.open(uri) as A:
        assert A[:].tolist() == [["", "", ""], ["", "mid", ""], ["", "", ""]]


def test_bytes_attribute(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2), attrs=[ts.Attr("b", bytes)])
    vals = np.array([[b"\x00\xff", b""], [b"abc", bytes(range(256))]], dtype=object)
    with ts.open(uri, "w") as A:
        A[:] = vals
    with ts.open(uri) as A:
        assert A[:].tolist() == vals.tolist()


def test_fixed_size_byte_strings(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2), attrs=[ts.Attr("b", "S3")])
    vals = np.array([[b"abc", b"de"], [b"", b"xyz"]], dtype="S3")
    with ts.open(uri, "w") as A:
        A[:] = vals
    with ts.open(uri) as A:
        got = A[:]
        assert got.dtype == np.dtype("S3") and got.tolist() == vals.tolist()


def test_nullable_numeric_masked_arrays_and_pairs(uri: str) -> None:
    make_2d(uri, rows=3, cols=4, tile=(2, 2), attrs=[ts.Attr("a", "float64", nullable=True)])
    vals = np.arange(12, dtype=np.float64).reshape(3, 4)
    mask = (vals % 3) == 0
    with ts.open(uri, "w") as A:
        A[:] = np.ma.MaskedArray(vals, mask=mask)
    with ts.open(uri) as A:
        got = A[:]
        assert isinstance(got, np.ma.MaskedArray)
        assert (got.mask == mask).all()
        np.testing.assert_array_equal(got.compressed(), vals[~mask])
        f = A.read(order="F")
        assert (f.mask == mask).all() and (f.data[~mask] == vals[~mask]).all()
    with ts.open(uri, "w") as A:
        A[1:3, 1:3] = (np.full((2, 2), 5.0), np.array([[True, False], [False, True]]))
        A[3, :] = np.full(4, 1.5)  # a plain array: every cell valid
    with ts.open(uri) as A:
        got = A[:]
        assert got.mask.tolist() == [[False, True, False, True], [True, False, True, False],
                                     [False, False, False, False]]
        assert got[0, 0] == 5.0 and got[2].tolist() == [1.5] * 4


def test_nullable_strings_use_none(uri: str) -> None:
    make_2d(uri, rows=2, cols=3, tile=(2, 3), attrs=[ts.Attr("s", str, nullable=True), ts.Attr("n", "int8")])
    s = np.array([["a", None, "ç"], [None, "", "z"]], dtype=object)
    with ts.open(uri, "w") as A:
        A[:] = {"s": s, "n": np.ones((2, 3), np.int8)}
    with ts.open(uri) as A:
        got = A[:]["s"]
        assert isinstance(got, np.ma.MaskedArray)
        assert got.mask.tolist() == [[False, True, False], [True, False, False]]
        assert got[0, 0] == "a" and got[1, 1] == "" and got[0, 2] == "ç"


def test_never_written_nullable_cells_are_null(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2), attrs=[ts.Attr("a", "int32", nullable=True)])
    with ts.open(uri, "w") as A:
        A[1, 1] = np.int32(3)
    with ts.open(uri) as A:
        got = A[:]
        assert got.mask.tolist() == [[False, True], [True, True]] and got[0, 0] == 3


def test_complex_round_trip(uri: str) -> None:
    make_2d(uri, rows=3, cols=3, tile=(2, 2), attrs=[ts.Attr("z", np.complex64), ts.Attr("w", "complex128")])
    z = (np.arange(9) + 1j * np.arange(9)[::-1]).astype(np.complex64).reshape(3, 3)
    with ts.open(uri, "w") as A:
        A[:] = {"z": z, "w": z.astype(np.complex128) * 2}
    with ts.open(uri) as A:
        got = A[:]
        assert got["z"].dtype == np.complex64 and got["w"].dtype == np.complex128
        np.testing.assert_array_equal(got["z"], z)
        np.testing.assert_array_equal(got["w"], z * 2)
        np.testing.assert_array_equal(A.read(attrs=["z"], order="F"), z)


def test_multi_valued_cells(uri: str) -> None:
    make_2d(uri, rows=3, cols=4, tile=(2, 3), attrs=[ts.Attr("v", "(3,)f4"), ts.Attr("u", "uint16", cell_val_num=2)])
    v = np.arange(36, dtype=np.float32).reshape(3, 4, 3)
    u = np.arange(24, dtype=np.uint16).reshape(3, 4, 2)
    with ts.open(uri, "w") as A:
        A[:] = {"v": v, "u": u}
        A[2, 2] = {"v": np.float32(-1), "u": np.array([7, 8], np.uint16)}
    v[1, 1] = -1
    u[1, 1] = [7, 8]
    with ts.open(uri) as A:
        got = A[:]
        assert got["v"].shape == (3, 4, 3)
        np.testing.assert_array_equal(got["v"], v)
        np.testing.assert_array_equal(got["u"], u)
        np.testing.assert_array_equal(A.read(attrs=["v"], order="F"), v)
        np.testing.assert_array_equal(A[2:4, 3]["u"], u[1:3, 2])


def test_multi_valued_cells_written_in_column_major_cell_order(uri: str) -> None:
    make_2d(uri, rows=3, cols=4, tile=(2, 3), attrs=[ts.Attr("v", "(2,)i4")])
    v = np.arange(24, dtype=np.int32).reshape(3, 4, 2)
    f = np.ascontiguousarray(v.transpose(1, 0, 2)).transpose(1, 0, 2)  # cells col-major, values together
    assert not f.flags.c_contiguous
    with ts.open(uri, "w") as A:
        A[:] = f
    with ts.open(uri) as A:
        np.testing.assert_array_equal(A[:], v)


@pytest.mark.parametrize("dtype", ["int32", "float64", "int8", "uint64"])
def test_ragged_numeric_cells(uri: str, dtype: str) -> None:
    make_2d(uri, rows=2, cols=3, tile=(2, 2), attrs=[ts.Attr("rg", dtype, var=True, filters=[ts.Lz4()])])
    cells = np.empty((2, 3), dtype=object)
    for i in range(2):
        for j in range(3):
            cells[i, j] = np.arange(i * 3 + j, dtype=dtype)  # lengths 0..5
    with ts.open(uri, "w") as A:
        A[:] = cells
    with ts.open(uri) as A:
        got = A[:]
        assert got.dtype == object and got.shape == (2, 3)
        for i in range(2):
            for j in range(3):
                assert got[i, j].dtype == np.dtype(dtype)
                np.testing.assert_array_equal(got[i, j], cells[i, j])
        np.testing.assert_array_equal(A[2, 3], cells[1, 2])
    with ts.open(uri, "w") as A:
        A[1, :] = [[1, 2], [3, 4], [5]]  # lists take the attribute's dtype
    with ts.open(uri) as A:
        assert [x.tolist() for x in A[1]] == [[1, 2], [3, 4], [5]]
