"""Schemas: dimensions (``Dim``), attributes (``Attr``) and the ``ArraySchema`` tying them
together. A schema crosses into the engine as the engine's JSON form, and the engine validates
it when the ``ArraySchema`` is made (``SchemaError``).

How numpy dtypes map onto the engine's datatypes (the engine's JSON records only the latter, so
a schema read back from disk is interpreted by the same rules):

=====================================  ===================================  =====================
numpy (``Attr(dtype=...)``)            engine (type, cell_val_num)          read back as
=====================================  ===================================  =====================
int8..uint64, float32, float64         same type, 1                         that dtype
``"(3,)f4"`` or ``cell_val_num=3``     float32, 3                           extra trailing axis
complex64 / complex128                 float32 / float64, 2                 complex64 / complex128
``str``, ``"str"``, ``"U"``            utf8, var                            object array of str
``bytes``, ``"bytes"``                 uint8, var                           object array of bytes
``"S5"``                               utf8, 5                              ``S5``
numeric with ``var=True``              type, var                            object array of ndarrays
=====================================  ===================================  =====================

Two consequences of the engine having no complex or blob datatype: a float attribute with two
values per cell always reads as complex, and a variable-length uint8 attribute always reads as
``bytes``.
"""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from . import _check, _core
from .errors import SchemaError
from .filters import Filter

DTypeLike = Union[str, type, np.dtype]

#: Version of the schema JSON this package writes (the engine's ``SCHEMA_VERSION``).
SCHEMA_VERSION: int = _core.SCHEMA_VERSION

_ENGINE_TO_NUMPY: Dict[str, str] = {
    "int8": "<i1",
    "int16": "<i2",
    "int32": "<i4",
    "int64": "<i8",
    "uint8": "<u1",
    "uint16": "<u2",
    "uint32": "<u4",
    "uint64": "<u8",
    "float32": "<f4",
    "float64": "<f8",
}
_NUMPY_TO_ENGINE: Dict[np.dtype, str] = {np.dtype(v): k for k, v in _ENGINE_TO_NUMPY.items()}
_ORDERS = {"row-major": "row-major", "C": "row-major", "col-major": "col-major", "F": "col-major", "hilbert": "hilbert"}


def _engine_type(dtype: np.dtype, what: str) -> str:
    name = _NUMPY_TO_ENGINE.get(dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype)
    if name is None:
        raise SchemaError(f"{what}: numpy dtype {dtype} has no Tessera datatype")
    return name


def _order(o: str) -> str:
    try:
        return _ORDERS[o]
    except KeyError:
        raise SchemaError(f"order {o!r} is not row-major, col-major or hilbert") from None


def _int_bound(x: Any, what: str) -> int:
    """An integer domain bound or tile extent, given as an int (or an integral float)."""
    if isinstance(x, (bool, np.bool_)):
        raise SchemaError(f"{what}: {x!r} is not an integer")
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)) and float(x).is_integer():
        return int(x)
    raise SchemaError(f"{what}: {x!r} is not an integer (float coordinates need dtype float32 or float64)")


def _float_bound(x: Any, what: str) -> float:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
        raise SchemaError(f"{what}: {x!r} is not a number")
    return float(x)


_DEFAULT_COORD_FILTERS: Optional[Tuple[Filter, ...]] = None


def default_coord_filters() -> Tuple[Filter, ...]:
    """The coordinate filters the engine gives dimensions of sparse arrays created without
    ``filters`` (the engine's ``default_coord_filters()``: delta, then zstd level 3)."""
    global _DEFAULT_COORD_FILTERS
    if _DEFAULT_COORD_FILTERS is None:
        d = json.loads(_core.default_sparse_schema_json())
        _DEFAULT_COORD_FILTERS = tuple(Filter.from_json(f) for f in d["dims"][0].get("filters", []))
    return _DEFAULT_COORD_FILTERS


class Dim:
    """One dimension: a name, an inclusive ``domain`` (lo, hi), a space-tile extent ``tile`` and
    a coordinate ``dtype`` (all dimensions of a schema share it). Dense arrays need integer types
    (int8..uint64) and a tile on every dimension; sparse arrays also take float32/float64
    dimensions with float domains and float tile widths, and may leave ``tile`` out (one tile
    spanning the domain). ``filters`` apply to the coordinates stored by sparse fragments; when
    not given, a sparse array uses the engine's default (``Delta(), Zstd(level=3)``), and
    ``filters=[]`` stores them unfiltered."""

    __slots__ = ("_default_filters", "_type", "domain", "filters", "name", "tile")

    def __init__(
        self,
        name: str,
        domain: Tuple[Any, Any],
        tile: Optional[Any] = None,
        dtype: DTypeLike = "int64",
        filters: Optional[Sequence[Filter]] = None,
    ) -> None:
        self.name = _name(name, "dimension")
        self._type = _engine_type(np.dtype(dtype), f"dimension {name}")
        lo, hi = domain
        what = f"dimension {self.name}"
        if self.is_float:
            self.domain: Tuple[Any, Any] = (_float_bound(lo, what), _float_bound(hi, what))
            self.tile: Optional[Any] = None if tile is None else _float_bound(tile, f"{what} tile")
            # JSON has no infinities or NaN: these checks cannot be left to the engine.
            if not all(math.isfinite(x) for x in self.domain):
                raise SchemaError(f"{what}: domain [{self.domain[0]}, {self.domain[1]}] must be finite")
            if self.tile is not None and not math.isfinite(self.tile):
                raise SchemaError(f"{what}: tile extent {self.tile} must be positive and finite")
        else:
            self.domain = (_int_bound(lo, what), _int_bound(hi, what))
            self.tile = None if tile is None else _int_bound(tile, f"{what} tile")
        self.filters: Tuple[Filter, ...] = tuple(filters) if filters is not None else ()
        for f in self.filters:
            if not isinstance(f, Filter):
                raise SchemaError(f"{what}: {f!r} is not a filter (use ts.Zstd(), ts.Delta(), ...)")
        self._default_filters = filters is None

    @property
    def dtype(self) -> np.dtype:
        """The coordinate type."""
        return np.dtype(_ENGINE_TO_NUMPY[self._type])

    @property
    def is_float(self) -> bool:
        """Whether coordinates are floats."""
        return self._type.startswith("float")

    @property
    def size(self) -> int:
        """Number of coordinates in an integer domain (TypeError for float dimensions)."""
        if self.is_float:
            raise TypeError(f"dimension {self.name} has float coordinates: its domain has no size")
        return int(self.domain[1] - self.domain[0] + 1)

    def _with_default_filters(self) -> "Dim":
        d = Dim(self.name, self.domain, self.tile, self.dtype, default_coord_filters())
        return d

    def to_json(self) -> Dict[str, Any]:
        """The engine's JSON form."""
        d: Dict[str, Any] = {"name": self.name, "type": self._type, "domain": list(self.domain)}
        if self.tile is not None:
            d["tile"] = self.tile
        if self.filters:
            d["filters"] = [f.to_json() for f in self.filters]
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Dim":
        """A dimension from the engine's JSON form."""
        return Dim(
            d["name"],
            (d["domain"][0], d["domain"][1]),
            d.get("tile"),
            _ENGINE_TO_NUMPY.get(d["type"], d["type"]),
            [Filter.from_json(f) for f in d.get("filters", [])],
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Dim) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        extra = f", filters={list(self.filters)!r}" if self.filters else ""
        return f"Dim({self.name!r}, domain={self.domain}, tile={self.tile}, dtype={self._type!r}{extra})"


def _name(name: Any, what: str) -> str:
    """A dimension's or attribute's name: text UTF-8 can encode (``SchemaError`` otherwise)."""
    if not isinstance(name, str):
        raise SchemaError(f"{what} name {name!r} is not text (str) but {type(name).__name__}")
    return _check.text(name, f"{what} name", SchemaError)


# What a cell holds, derived from the engine's (type, cell_val_num) alone.
NUM, MULTI, COMPLEX, STR, BYTES, FIXED_BYTES, RAGGED = "num", "multi", "complex", "str", "bytes", "sbytes", "ragged"


def _kind(etype: str, cvn: Union[int, str]) -> str:
    if etype == "utf8":
        return STR if cvn == "var" else FIXED_BYTES
    if cvn == "var":
        return BYTES if etype == "uint8" else RAGGED
    if cvn == 2 and etype in ("float32", "float64"):
        return COMPLEX
    return NUM if cvn == 1 else MULTI


class Attr:
    """One attribute.

    ``dtype`` may be a numpy dtype or a string: any integer or float type; complex64/complex128;
    ``str`` for UTF-8 strings; ``bytes`` for byte strings; ``"S<n>"`` for fixed-size byte
    strings; a subarray dtype such as ``"(3,)f4"`` for three values per cell. ``var=True`` makes
    numeric cells ragged (each cell a 1-D array of any length); ``cell_val_num`` gives a fixed
    number of values per cell. ``nullable`` adds a validity flag per cell; ``fill`` is the value
    of cells never written (default: the minimum of signed integers, the maximum of unsigned
    ones, NaN for floats, empty for strings).
    """

    __slots__ = ("_cvn", "_fill", "_type", "filters", "name", "nullable")

    def __init__(
        self,
        name: str,
        dtype: DTypeLike,
        filters: Sequence[Filter] = (),
        nullable: bool = False,
        var: bool = False,
        fill: Any = None,
        cell_val_num: int = 1,
    ) -> None:
        self.name = _name(name, "attribute")
        self.filters: Tuple[Filter, ...] = tuple(filters)
        for f in self.filters:
            if not isinstance(f, Filter):
                raise SchemaError(f"attribute {name}: {f!r} is not a filter (use ts.Zstd(), ts.Gzip(), ...)")
        self.nullable = bool(nullable)
        self._type, self._cvn = _engine_form(self.name, dtype, var, int(cell_val_num))
        self._fill: Optional[List[Any]] = None
        if fill is not None:
            self._fill = _fill_to_json(self, fill)

    # The engine's form and the Python view of it.
    @property
    def kind(self) -> str:
        """What a cell holds: "num", "multi", "complex", "str", "bytes", "sbytes" or "ragged"."""
        return _kind(self._type, self._cvn)

    @property
    def var(self) -> bool:
        """Whether cells have a variable number of values."""
        return self._cvn == "var"

    @property
    def cell_val_num(self) -> Union[int, str]:
        """Values per cell (an int, or "var")."""
        return self._cvn

    @property
    def engine_type(self) -> str:
        """The engine's datatype name ("int32", "float64", "utf8", ...)."""
        return self._type

    @property
    def base_dtype(self) -> np.dtype:
        """The numpy dtype of one stored value (little-endian)."""
        if self._type == "utf8":
            return np.dtype("u1")
        return np.dtype(_ENGINE_TO_NUMPY[self._type])

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype of a cell as read: e.g. int32, complex64, ``(3,)f4``, ``<U0`` for
        strings, ``S`` for bytes, and the value dtype of ragged cells."""
        k = self.kind
        if k == STR:
            return np.dtype(str)
        if k == BYTES:
            return np.dtype(bytes)
        if k == FIXED_BYTES:
            return np.dtype(f"S{self._cvn}")
        if k == COMPLEX:
            return np.dtype("<c8" if self._type == "float32" else "<c16")
        if k == MULTI:
            return np.dtype((self.base_dtype, (int(self._cvn),)))
        return self.base_dtype

    @property
    def cell_dtype(self) -> np.dtype:
        """The numpy dtype whose items are exactly one fixed-size cell (for viewing buffers)."""
        k = self.kind
        if k in (NUM, COMPLEX, FIXED_BYTES):
            return self.dtype
        return self.base_dtype

    @property
    def fill(self) -> Any:
        """The fill value as given (None for the datatype's default)."""
        return None if self._fill is None else _fill_from_json(self, self._fill)

    def to_json(self) -> Dict[str, Any]:
        """The engine's JSON form."""
        d: Dict[str, Any] = {
            "name": self.name,
            "type": self._type,
            "cell_val_num": self._cvn,
            "nullable": self.nullable,
            "filters": [f.to_json() for f in self.filters],
        }
        if self._fill is not None:
            d["fill"] = self._fill
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Attr":
        """An attribute from the engine's JSON form."""
        a = Attr.__new__(Attr)
        a.name = d["name"]
        a.filters = tuple(Filter.from_json(f) for f in d.get("filters", []))
        a.nullable = bool(d.get("nullable", False))
        a._type = d["type"]
        a._cvn = d.get("cell_val_num", 1)
        a._fill = d.get("fill")
        return a

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Attr) and self.to_json() == other.to_json()

    def __repr__(self) -> str:
        k = self.kind
        dt = {STR: "str", BYTES: "bytes"}.get(k, str(self.dtype))
        parts = [repr(self.name), f"dtype={dt!r}"]
        if k == RAGGED:
            parts.append("var=True")
        if self.nullable:
            parts.append("nullable=True")
        if self.filters:
            parts.append(f"filters={list(self.filters)!r}")
        if self._fill is not None:
            parts.append(f"fill={self.fill!r}")
        return f"Attr({', '.join(parts)})"


def _engine_form(name: str, dtype: DTypeLike, var: bool, cvn: int) -> Tuple[str, Union[int, str]]:
    """(engine type, cell_val_num) of a user's dtype description."""
    etype, n = _engine_form_any(name, dtype, var, cvn)
    complex_given = dtype not in (str, bytes) and not isinstance(dtype, str) and np.dtype(dtype).kind == "c"
    complex_given = complex_given or (isinstance(dtype, str) and np.dtype(dtype).kind == "c")
    if n == 2 and etype in ("float32", "float64") and not complex_given:
        raise SchemaError(
            f"attribute {name}: two float values per cell are how complex numbers are stored; "
            "use dtype complex64/complex128 (or another cell_val_num)"
        )
    return etype, n


def _engine_form_any(name: str, dtype: DTypeLike, var: bool, cvn: int) -> Tuple[str, Union[int, str]]:
    if dtype is str or (isinstance(dtype, str) and dtype in ("str", "U", "unicode", "utf8")):
        return "utf8", "var"
    if dtype is bytes or (isinstance(dtype, str) and dtype in ("bytes", "S", "blob")):
        return "uint8", "var"
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise SchemaError(f"attribute {name}: {dtype!r} is not a dtype ({e})") from None
    if dt.kind == "U":
        return "utf8", "var"
    if dt.kind == "S":
        return ("utf8", dt.itemsize) if dt.itemsize else ("uint8", "var")
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        n = int(np.prod(shape))
        if var or cvn != 1 or base.kind == "c":
            raise SchemaError(f"attribute {name}: subarray dtype {dt} cannot be combined with var or cell_val_num")
        return _engine_type(base, f"attribute {name}"), n
    if dt.kind == "c":
        if var or cvn != 1:
            raise SchemaError(f"attribute {name}: complex cells cannot be variable-length or multi-valued")
        return {8: "float32", 16: "float64"}.get(dt.itemsize) or _engine_type(dt, f"attribute {name}"), 2
    if dt.kind == "b":
        raise SchemaError(f"attribute {name}: bool has no Tessera datatype (use uint8)")
    etype = _engine_type(dt, f"attribute {name}")
    if var:
        if cvn != 1:
            raise SchemaError(f"attribute {name}: var=True and cell_val_num={cvn} contradict each other")
        return etype, "var"
    return etype, cvn


def _json_number(x: Any) -> Any:
    x = x.item() if isinstance(x, np.generic) else x
    if isinstance(x, float):
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
    return x


def _fill_to_json(a: Attr, fill: Any) -> List[Any]:
    k = a.kind
    if k in (STR, BYTES, FIXED_BYTES):
        b = fill.encode() if isinstance(fill, str) else bytes(fill)
        return list(b)
    if k == COMPLEX:
        c = complex(fill)
        return [_json_number(c.real), _json_number(c.imag)]
    vals = np.ravel(np.asarray(fill)).tolist()
    if k == MULTI and len(vals) == 1:
        vals = vals * int(a.cell_val_num)
    return [_json_number(v) for v in vals]


def _fill_from_json(a: Attr, values: List[Any]) -> Any:
    k = a.kind
    nums = [float(v) if isinstance(v, str) else v for v in values]
    if k == STR:
        return bytes(int(v) for v in nums).decode(errors="replace")
    if k in (BYTES, FIXED_BYTES):
        return bytes(int(v) for v in nums)
    if k == COMPLEX:
        return complex(nums[0], nums[1])
    if k == NUM:
        return nums[0] if len(nums) == 1 else nums
    return nums


class ArraySchema:
    """Dimensions, attributes, cell order ("row-major"/"C", "col-major"/"F", or "hilbert" for
    sparse arrays) and tile order ("row-major" or "col-major"). Sparse arrays (``sparse=True``)
    store only written cells, with their coordinates, in data tiles of ``capacity`` cells;
    ``allows_duplicates`` lets them hold several cells with equal coordinates (otherwise a later
    write of a cell replaces it). The engine validates the whole schema here; errors raise
    ``SchemaError``."""

    __slots__ = ("_attrs", "_dims", "_json", "allows_duplicates", "capacity", "cell_order", "sparse", "tile_order")

    def __init__(
        self,
        dims: Sequence[Dim],
        attrs: Sequence[Attr],
        sparse: bool = False,
        cell_order: str = "row-major",
        tile_order: str = "row-major",
        capacity: int = 10000,
        allows_duplicates: bool = False,
    ) -> None:
        self._dims: Tuple[Dim, ...] = tuple(dims)
        self._attrs: Tuple[Attr, ...] = tuple(attrs)
        for d in self._dims:
            if not isinstance(d, Dim):
                raise SchemaError(f"{d!r} is not a ts.Dim")
        for a in self._attrs:
            if not isinstance(a, Attr):
                raise SchemaError(f"{a!r} is not a ts.Attr")
        self.sparse = bool(sparse)
        if self.sparse:
            # The engine's builder gives sparse dimensions without filters its default ones, but
            # its JSON form takes filters as written: fill them in here.
            self._dims = tuple(d._with_default_filters() if d._default_filters else d for d in self._dims)
        self.cell_order = _order(cell_order)
        self.tile_order = _order(tile_order)
        self.capacity = _check.count(capacity, "capacity", error=SchemaError, type_error=SchemaError)
        self.allows_duplicates = bool(allows_duplicates)
        self._json = _core.check_schema(json.dumps(self._json_dict()))

    def _json_dict(self) -> Dict[str, Any]:
        return {
            "version": SCHEMA_VERSION,
            "array_type": "sparse" if self.sparse else "dense",
            "dims": [d.to_json() for d in self._dims],
            "attrs": [a.to_json() for a in self._attrs],
            "cell_order": self.cell_order,
            "tile_order": self.tile_order,
            "capacity": self.capacity,
            "allows_duplicates": self.allows_duplicates,
        }

    def to_json(self) -> str:
        """The engine's JSON form (as stored in the array's ``__schema`` folder)."""
        return self._json

    @staticmethod
    def from_json(text: str) -> "ArraySchema":
        """A schema from its JSON form (validated by the engine)."""
        d = json.loads(_core.check_schema(text))
        return ArraySchema(
            dims=[Dim.from_json(x) for x in d["dims"]],
            attrs=[Attr.from_json(x) for x in d["attrs"]],
            sparse=d["array_type"] == "sparse",
            cell_order=d["cell_order"],
            tile_order=d["tile_order"],
            capacity=d.get("capacity", 10000),
            allows_duplicates=d.get("allows_duplicates", False),
        )

    @property
    def dims(self) -> Tuple[Dim, ...]:
        """The dimensions, slowest-varying first in row-major order."""
        return self._dims

    @property
    def attrs(self) -> Tuple[Attr, ...]:
        """The attributes."""
        return self._attrs

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self._dims)

    @property
    def shape(self) -> Tuple[int, ...]:
        """Number of coordinates per dimension (TypeError for float dimensions)."""
        return tuple(d.size for d in self._dims)

    @property
    def domain(self) -> Tuple[Tuple[Any, Any], ...]:
        """Inclusive (lo, hi) per dimension (floats for float dimensions)."""
        return tuple(d.domain for d in self._dims)

    @property
    def dim_names(self) -> Tuple[str, ...]:
        """The dimensions' names."""
        return tuple(d.name for d in self._dims)

    @property
    def attr_names(self) -> Tuple[str, ...]:
        """The attributes' names."""
        return tuple(a.name for a in self._attrs)

    def attr(self, name: str) -> Attr:
        """The attribute called ``name`` (KeyError if none)."""
        for a in self._attrs:
            if a.name == name:
                return a
        raise KeyError(name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArraySchema) and self._json == other._json

    def __hash__(self) -> int:
        return hash(self._json)

    def __repr__(self) -> str:
        lines = ["ArraySchema("]
        lines.append("  dims=[")
        lines += [f"    {d!r}," for d in self._dims]
        lines.append("  ],")
        lines.append("  attrs=[")
        lines += [f"    {a!r}," for a in self._attrs]
        lines.append("  ],")
        lines.append(f"  sparse={self.sparse}, cell_order={self.cell_order!r}, tile_order={self.tile_order!r},")
        if self.sparse:
            lines.append(f"  capacity={self.capacity}, allows_duplicates={self.allows_duplicates},")
        lines.append(")")
        return "\n".join(lines)
