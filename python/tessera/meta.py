"""Array metadata: ``A.meta``, a mapping of typed key-value pairs stored with the array.

Values are numbers (``int`` as int64, or uint64 above its range; ``float`` as float64; ``bool``),
numpy scalars and 1-D numpy arrays of the numeric dtypes (int8 to uint64, float32, float64,
bool, datetime64 of the units D h m s ms us ns), ``str`` (UTF-8) and ``bytes``. A value of one
number reads back as a number (``int``/``float`` for int64/float64, a numpy scalar otherwise);
several as a 1-D numpy array.

In mode "w", ``A.meta[key] = value``, ``del A.meta[key]`` and ``A.meta.update({...})`` each
commit one metadata file atomically (``update``: all its pairs in one), at the array's write
timestamp. In mode "r", ``A.meta`` shows the metadata as of the array's timestamp (time
travel), read once when first used. ``ts.consolidate_metadata(uri)`` merges the files;
``ts.vacuum`` deletes the merged ones. Neither changes what any reader sees.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, MutableMapping, Optional, Tuple, Union

import numpy as np

from . import _core
from .config import ConfigLike, as_items
from .errors import ArgumentError, ArgumentTypeError, QueryError

MetaValue = Union[int, float, str, bytes, np.generic, np.ndarray]

_NUMERIC = (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "bool"
) + tuple(
    f"datetime64[{u}]" for u in ("D", "h", "m", "s", "ms", "us", "ns")
)


def _encode(key: str, value: Any) -> Tuple[Optional[str], bytes]:
    if not isinstance(key, str):
        raise ArgumentTypeError(f"metadata keys are str, not {type(key).__name__}")
    if isinstance(value, bool):
        return "bool", bytes([int(value)])
    if isinstance(value, str):
        return "utf8", value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return None, bytes(value)
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return "int64", int(value).to_bytes(8, "little", signed=True)
        if 0 <= value < 2**64:
            return "uint64", int(value).to_bytes(8, "little")
        raise ArgumentError(f"metadata {key!r}: {value} does not fit 64 bits")
    if isinstance(value, float):
        return "float64", np.float64(value).tobytes()
    if isinstance(value, (np.generic, np.ndarray)):
        arr = np.asarray(value)
        if arr.ndim > 1:
            raise ArgumentError(f"metadata {key!r}: arrays are 1-D, not {arr.ndim}-D")
        name = arr.dtype.name
        if name not in _NUMERIC:
            raise ArgumentTypeError(f"metadata {key!r}: dtype {arr.dtype} is not one of {', '.join(_NUMERIC)}")
        return name, np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    raise ArgumentTypeError(
        f"metadata {key!r}: {type(value).__name__} values are not supported "
        "(int, float, str, bytes, numpy scalars and 1-D numpy arrays are)"
    )


def _decode(dtype: Optional[str], data: bytes) -> MetaValue:
    if dtype is None:
        return bytes(data)
    if dtype == "utf8":
        return data.decode("utf-8")
    arr = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)
    if arr.size == 1:
        if dtype == "int64":
            return int(arr[0])
        if dtype == "float64":
            return float(arr[0])
        if dtype == "bool":
            return bool(arr[0])
        scalar: np.generic = arr[0]
        return scalar
    return arr


class Metadata(MutableMapping[str, Any]):
    """The metadata of an open array or group (``A.meta``, ``G.meta``); see the module
    documentation."""

    def __init__(self, core: Union[_core.Array, _core.Group], mode: str) -> None:
        self._core = core
        self._mode = mode
        self._cache: Optional[Dict[str, MetaValue]] = None

    def _read(self) -> Dict[str, MetaValue]:
        if self._mode != "r":
            raise QueryError("the array is open for write; reading metadata needs mode 'r'")
        if self._cache is None:
            self._cache = {k: _decode(t, bytes(b)) for k, t, b in self._core.metadata()}
        return self._cache

    def _write(self, changes: List[Tuple[str, Optional[Tuple[Optional[str], bytes]]]]) -> None:
        if self._mode != "w":
            raise QueryError("the array is open for read; writing metadata needs mode 'w'")
        self._core.write_metadata(changes)

    def __getitem__(self, key: str) -> Any:
        return self._read()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())

    def __setitem__(self, key: str, value: Any) -> None:
        self._write([(key, _encode(key, value))])

    def __delitem__(self, key: str) -> None:
        if not isinstance(key, str):
            raise ArgumentTypeError(f"metadata keys are str, not {type(key).__name__}")
        self._write([(key, None)])

    def update(self, other: Any = (), /, **kw: Any) -> None:
        """Puts every pair of ``other`` and ``kw`` in one metadata file (all or nothing)."""
        pairs = dict(other.items() if isinstance(other, Mapping) else other, **kw)
        self._write([(k, _encode(k, v)) for k, v in pairs.items()])

    def __repr__(self) -> str:
        if self._mode != "r":
            return "<tessera.Metadata (mode 'w')>"
        return f"<tessera.Metadata {self._read()!r}>"


def consolidate_metadata(uri: str, config: Optional[ConfigLike] = None) -> int:
    """Merges the metadata files of the array at ``uri`` into one; returns how many it replaced
    (0 when there were fewer than two). What every reader sees, at any timestamp, is unchanged;
    ``ts.vacuum`` deletes the replaced files."""
    return _core.consolidate_metadata(str(uri), as_items(config))
