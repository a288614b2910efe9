"""Every error class, raised for the right reason with the engine's message."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

import tessera as ts
from conftest import make_2d


def test_hierarchy() -> None:
    for cls in (ts.SchemaError, ts.DomainError, ts.QueryError, ts.ArrayError, ts.ConfigError,
                ts.CorruptionError, ts.StorageError):
        assert issubclass(cls, ts.TesseraError) and cls.__module__ == "tessera"
    assert issubclass(ts.TesseraError, Exception)
    # Bad argument values and types are tessera errors and also what Python code expects.
    assert issubclass(ts.ArgumentError, ts.QueryError) and issubclass(ts.ArgumentError, ValueError)
    assert issubclass(ts.ArgumentTypeError, ts.QueryError) and issubclass(ts.ArgumentTypeError, TypeError)
    assert ts.ArgumentError.__module__ == ts.ArgumentTypeError.__module__ == "tessera"


def test_errors_carry_their_context_as_fields(uri: str) -> None:
    make_2d(uri, rows=12, cols=10, attrs=[ts.Attr("a", "int32")])
    with pytest.raises(ts.DomainError) as e, ts.open(uri) as A:
        A[0:20, 0:3]
    assert e.value.dimension == "r" and e.value.attribute is None, vars(e.value)
    with pytest.raises(ts.QueryError) as e, ts.open(uri, "w") as A:
        A[1:3, 1:3] = {"a": np.zeros(3, np.int32)}
    assert e.value.attribute == "a" and e.value.dimension is None, vars(e.value)
    with pytest.raises(ts.ArrayError) as e:
        ts.open(os.path.join(uri, "nothing-here"))
    assert e.value.array == os.path.join(uri, "nothing-here") and e.value.fragment is None
    # Errors the package raises itself have the fields too, unset.
    with pytest.raises(ts.ArgumentError) as e:
        ts.open(uri, "q")
    assert (e.value.array, e.value.tile) == (None, None)


@pytest.fixture
def filled(uri: str) -> str:
    make_2d(uri, attrs=[ts.Attr("a", "int32"), ts.Attr("b", "float32")])
    # One file per attribute (not packed, as a fragment this small is by default): the tests
    # below damage one attribute's file.
    with ts.open(uri, "w", config={"sm.write.pack_bytes": "0"}) as A:
        A[:] = {"a": np.zeros((12, 10), np.int32), "b": np.zeros((12, 10), np.float32)}
    return uri


def test_out_of_domain_reversed_and_wrong_dimension_count(filled: str) -> None:
    with ts.open(filled) as A:
        with pytest.raises(ts.DomainError, match=r"dimension r: range \[0, 3\] is outside the domain \[1, 12\]"):
            A[0:4]
        with pytest.raises(ts.DomainError, match="outside the domain"):
            A[:, 5:12]
        with pytest.raises(ts.DomainError, match="outside the domain"):
            A[13]
        with pytest.raises(ts.DomainError, match=r"range \[5, 2\] is reversed"):
            A[5:3]
        with pytest.raises(ts.DomainError, match="reversed"):
            A.read([(4, 3), None])
        with pytest.raises(ts.DomainError, match="3 dimensions given, the array has 2"):
            A.read([(1, 2), (1, 2), (1, 1)])
        with pytest.raises(ts.DomainError, match="1 dimensions given, the array has 2"):
            A.read([(1, 2)])
        with pytest.raises(ts.DomainError, match="3 dimensions given"):
            A[1, 1, 1]
    with ts.open(filled, "w") as A:
        with pytest.raises(ts.DomainError, match="outside the domain"):
            A[10:14, :] = {"a": np.zeros((4, 10), np.int32), "b": np.zeros((4, 10), np.float32)}
        with pytest.raises(ts.DomainError, match="reversed"):
            A[3:2, :] = {"a": np.zeros((0, 10), np.int32), "b": np.zeros((0, 10), np.float32)}


def test_bad_index_types(filled: str) -> None:
    with ts.open(filled) as A:
        with pytest.raises(ts.QueryError, match="step"):
            A[1:10:2]
        with pytest.raises(TypeError):
            A[1.5]
        with pytest.raises(TypeError):
            A[True]
        with pytest.raises(IndexError):
            A[..., ...]


def test_wrong_shape_and_dtype_on_write(filled: str) -> None:
    with ts.open(filled, "w") as A:
        ok_b = np.zeros((2, 3), np.float32)
        with pytest.raises(ts.QueryError, match=r"value shape \(3, 2\) does not match the selection's \(2, 3\)"):
            A[1:3, 1:4] = {"a": np.zeros((3, 2), np.int32), "b": ok_b}
        with pytest.raises(ts.QueryError, match="dtype int64 does not match the attribute's int32"):
            A[1:3, 1:4] = {"a": np.zeros((2, 3), np.int64), "b": ok_b}
        with pytest.raises(ts.QueryError, match="dtype float64 does not match the attribute's float32"):
            A[1:3, 1:4] = {"a": np.zeros((2, 3), np.int32), "b": np.zeros((2, 3))}
        with pytest.raises(ts.QueryError, match="no silent casts"):
            A[1:3, 1:4] = {"a": 1.5, "b": ok_b}
        with pytest.raises(ts.QueryError, match="does not fit"):
            A[1:3, 1:4] = {"a": 2**40, "b": ok_b}
        with pytest.raises(ts.QueryError, match="dtype >i4"):
            A[1:3, 1:4] = {"a": np.zeros((2, 3), ">i4"), "b": ok_b}
        with pytest.raises(ts.QueryError, match="missing: b"):
            A[1:3, 1:4] = {"a": np.zeros((2, 3), np.int32)}
        with pytest.raises(ts.QueryError, match="assign a dict"):
            A[1:3, 1:4] = np.zeros((2, 3), np.int32)
        with pytest.raises(ts.QueryError, match="not nullable"):
            A[1:3, 1:4] = {"a": np.ma.MaskedArray(np.zeros((2, 3), np.int32), mask=True), "b": ok_b}
    with ts.open(filled) as A:
        assert (A[:]["a"] == 0).all()  # nothing was written


def test_string_cells_must_be_str(uri: str) -> None:
    make_2d(uri, rows=2, cols=2, tile=(2, 2), attrs=[ts.Attr("s", str)])
    with ts.open(uri, "w") as A:
        with pytest.raises(ts.QueryError, match="cell 1 is bytes, not str"):
            A[:] = np.array([["a", b"b"], ["c", "d"]], dtype=object)
        with pytest.raises(ts.QueryError, match="None but the attribute is not nullable"):
            A[:] = np.array([["a", None], ["c", "d"]], dtype=object)


def test_unknown_attribute(filled: str) -> None:
    with ts.open(filled) as A:
        with pytest.raises(ts.QueryError, match="unknown attribute 'nope'"):
            A.read(attrs=["nope"])
        with pytest.raises(ts.QueryError, match="unknown attribute"):
            list(A.iter_batches(attrs=["a", "nope"]))
    with ts.open(filled, "w") as A, pytest.raises(ts.QueryError, match="unknown attribute 'c'"):
        A[1, 1] = {"a": np.int32(1), "b": np.float32(1), "c": 1}


def test_wrong_mode(filled: str) -> None:
    with ts.open(filled) as A, pytest.raises(ts.QueryError, match="is open for read; write needs mode write"):
        A[1, 1] = {"a": np.int32(1), "b": np.float32(1)}
    with ts.open(filled, "w") as A:
        with pytest.raises(ts.QueryError, match="is open for write; read needs mode read"):
            A[1, 1]
        with pytest.raises(ts.QueryError, match="needs mode 'r'"):
            A.fragments()
        with pytest.raises(ts.QueryError, match="needs mode 'r'"):
            A.nonempty_domain()
    with pytest.raises(ValueError):
        ts.open(filled, "x")


def test_bad_order(filled: str) -> None:
    with ts.open(filled) as A:
        with pytest.raises(ts.QueryError, match="order"):
            A.read(order="K")
        with pytest.raises(ts.QueryError, match="global layout needs exactly one range"):
            A.read([[(1, 2), (4, 5)], None], order="G")


def test_closed_array(filled: str) -> None:
    with ts.open(filled) as A:
        pass
    assert A.closed
    with pytest.raises(ts.QueryError, match="closed"):
        A[1, 1]
    with pytest.raises(ts.QueryError, match="closed"):
        A.nonempty_domain()
    with pytest.raises(ts.QueryError, match="closed"), A:
        pass
    A.close()  # idempotent


def test_missing_path_not_an_array_and_existing(tmp_path: pathlib.Path, filled: str) -> None:
    with pytest.raises(ts.ArrayError, match="does not exist"):
        ts.open(tmp_path / "nope")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "file.txt").write_text("hi")
    with pytest.raises(ts.ArrayError, match="is not a Tessera array"):
        ts.open(tmp_path / "plain")
    with pytest.raises(ts.ArrayError, match="is not a Tessera array"):
        ts.open(tmp_path / "plain" / "file.txt")
    with pytest.raises(ts.ArrayError, match="already exists"):
        ts.create(filled, ts.ArraySchema([ts.Dim("d", (1, 2), 1)], [ts.Attr("a", "i4")]))


def test_bad_config_key(filled: str) -> None:
    with pytest.raises(ts.ConfigError, match=r"sm\.bogus: unknown key"):
        ts.open(filled, config={"sm.bogus": "1"})
    with pytest.raises(ts.ConfigError):
        ts.create(filled + "2", ts.ArraySchema([ts.Dim("d", (1, 2), 1)], [ts.Attr("a", "i4")]),
                  config={"vfs.read_mode": "never"})
    assert not os.path.exists(filled + "2")


def test_storage_error_when_a_tile_file_cannot_be_read(filled: str) -> None:
    # A tile file replaced by a folder: reading it fails in the OS (EISDIR), whoever runs this.
    frag = next((pathlib.Path(filled) / "__fragments").iterdir())
    (frag / "a1.data").unlink()
    (frag / "a1.data").mkdir()
    for mode in ("pread", "mmap"):
        with ts.open(filled, config={"vfs.read_mode": mode}) as A:
            with pytest.raises(ts.StorageError, match=r"a1\.data: is a directory"):
                A[:]
            assert (A.read(attrs=["a"]) == 0).all()  # the other attribute still reads


def test_missing_tile_file_of_a_committed_fragment_is_corruption(filled: str) -> None:
    frag = next((pathlib.Path(filled) / "__fragments").iterdir())
    (frag / "a0.data").unlink()
    with ts.open(filled) as A, pytest.raises(ts.CorruptionError, match=r"a0\.data does not exist"):
        A[:]
