"""Buffers to numpy and back: the engine's per-attribute (data, offsets, validity) buffers become
numpy arrays shaped like the selection, and numpy values become such buffers. Fixed-size cells
are never copied on the way in or out when the value is C- or F-contiguous."""

from __future__ import annotations

import numbers
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from . import _time
from .errors import QueryError, located
from .schema import BYTES, COMPLEX, FIXED_BYTES, MULTI, NUM, RAGGED, STR, Attr

Buffers = Tuple[np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]


# --------------------------------------------------------------------------------------------
# Reading


def cells_1d(attr: Attr, data: np.ndarray, offsets: Optional[np.ndarray]) -> np.ndarray:
    """The cells of one result as a 1-D array (object array for variable-length cells; for
    multi-valued cells a 2-D array cells x values)."""
    k = attr.kind
    if offsets is None:
        if k == MULTI:
            return data.view(attr.base_dtype).reshape(-1, int(attr.cell_val_num))
        return data.view(attr.cell_dtype)
    n = len(offsets)
    out = np.empty(n, dtype=object)
    if n == 0:
        return out
    starts = offsets.tolist()
    ends = starts[1:] + [len(data)]
    if k == STR:
        raw = data.tobytes()
        text = raw.decode()
        if len(text) == len(raw):  # ASCII: byte offsets are character offsets
            out[:] = [text[s:e] for s, e in zip(starts, ends)]
        else:
            out[:] = [raw[s:e].decode() for s, e in zip(starts, ends)]
    elif k == BYTES:
        raw = data.tobytes()
        out[:] = [raw[s:e] for s, e in zip(starts, ends)]
    else:
        vals = data.view(attr.base_dtype)
        size = attr.base_dtype.itemsize
        for i, (s, e) in enumerate(zip(starts, ends)):
            out[i] = vals[s // size : e // size]
    return out


def shape_cells(cells: np.ndarray, shape: Sequence[int], order: str) -> np.ndarray:
    """Reshapes 1-D cells (plus a trailing axis of multi-valued cells) to ``shape`` in C or F
    order, without copying."""
    extra = cells.shape[1:]
    if order == "F":
        rev = tuple(reversed(shape))
        a = cells.reshape(rev + extra)
        axes = tuple(reversed(range(len(shape)))) + tuple(range(len(shape), len(shape) + len(extra)))
        return a.transpose(axes)
    return cells.reshape(tuple(shape) + extra)


def to_numpy(attr: Attr, bufs: Buffers, shape: Optional[Sequence[int]], order: str) -> np.ndarray:
    """One attribute's result: shaped like ``shape`` (None: 1-D), masked where null."""
    data, offsets, validity = bufs
    values = cells_1d(attr, data, offsets)
    if shape is not None:
        values = shape_cells(values, shape, order)
    if validity is None:
        return values
    mask = validity == 0
    if shape is not None:
        mask = shape_cells(mask, shape, order)
    if values.ndim > mask.ndim:
        mask = np.broadcast_to(mask[..., None], values.shape)
    return np.ma.MaskedArray(values, mask=mask)


# --------------------------------------------------------------------------------------------
# Writing


def _err(attr: Attr, msg: str) -> QueryError:
    return located(QueryError(f"attribute {attr.name}: {msg}"), attribute=attr.name)


def _split_validity(attr: Attr, value: Any) -> Tuple[Any, Optional[np.ndarray]]:
    """(values, validity as bool array or None) of a masked array or (values, validity) pair."""
    if isinstance(value, tuple) and len(value) == 2 and attr.nullable:
        vals, valid = value
        return vals, np.asarray(valid, dtype=bool)
    if isinstance(value, np.ma.MaskedArray):
        mask: np.ndarray = np.ma.getmaskarray(value)
        if not attr.nullable:
            if mask.any():
                raise _err(attr, "masked (null) cells given for an attribute that is not nullable")
            return value.data, None
        if attr.kind == MULTI:
            mask = np.asarray(mask.any(axis=-1))
        return value.data, ~mask
    return value, None


def _object_array(value: Any, shape: Tuple[int, ...]) -> np.ndarray:
    """An object array of a (nested) list, one element per cell even where the elements are
    equal-length sequences themselves."""
    if isinstance(value, (list, tuple)) and len(shape) == 1 and len(value) == shape[0]:
        out = np.empty(shape, dtype=object)
        for i, v in enumerate(value):
            out[i] = v
        return out
    return np.asarray(value, dtype=object)


def _scalar(attr: Attr, value: Any, shape: Tuple[int, ...]) -> np.ndarray:
    """A Python scalar broadcast over the selection, converted only when exact."""
    k = attr.kind
    if k in (STR, BYTES, RAGGED):
        out = np.empty(shape, dtype=object)
        for idx in np.ndindex(shape):
            out[idx] = value
        return out
    dt = attr.dtype
    base = attr.base_dtype
    if base.kind == "M" and k == NUM:
        value = _time.value(dt, value, f"attribute {attr.name}")
    if isinstance(value, (np.generic, np.ndarray)):
        if value.dtype != dt and not (k == MULTI and value.dtype == base):
            raise _err(attr, f"value dtype {value.dtype} does not match the attribute's {dt} (no silent casts)")
    elif isinstance(value, bool):
        if base.kind != "b":
            raise _err(attr, f"a bool does not match the attribute's {dt}")
    elif isinstance(value, numbers.Integral):
        if base.kind not in "iuf" or k == COMPLEX:
            raise _err(attr, f"an int does not match the attribute's {dt}")
        if base.kind in "iu":
            info = np.iinfo(base)
            if not info.min <= int(value) <= info.max:
                raise _err(attr, f"{value} does not fit {base}")
    elif isinstance(value, numbers.Real):
        if base.kind != "f" or k == COMPLEX:
            raise _err(attr, f"a float does not match the attribute's {dt} (no silent casts)")
    elif isinstance(value, numbers.Complex):
        if k != COMPLEX:
            raise _err(attr, f"a complex number does not match the attribute's {dt}")
    elif isinstance(value, (bytes, str)) and k == FIXED_BYTES:
        pass
    else:
        raise _err(attr, f"cannot write {type(value).__name__} values")
    full = shape + ((int(attr.cell_val_num),) if k == MULTI else ())
    return np.full(full, value, dtype=base if k == MULTI else dt)


def cell_layout(arr: np.ndarray, cell_axes: int) -> Optional[str]:
    """"C" or "F" when the cells of ``arr`` (its first ``cell_axes`` axes; any further axes
    are the values of one cell) are in row- or column-major order without a copy."""
    if arr.flags.c_contiguous:
        return "C"
    if cell_axes == arr.ndim and arr.flags.f_contiguous:
        return "F"
    axes = tuple(reversed(range(cell_axes))) + tuple(range(cell_axes, arr.ndim))
    if arr.transpose(axes).flags.c_contiguous:
        return "F"
    return None


def _as_f_order_cells(arr: np.ndarray, cell_axes: int) -> np.ndarray:
    axes = tuple(reversed(range(cell_axes))) + tuple(range(cell_axes, arr.ndim))
    return arr.transpose(axes)


def prepare(attr: Attr, value: Any, shape: Tuple[int, ...]) -> Tuple[Any, Optional[np.ndarray]]:
    """Checks one attribute's value against the selection ``shape`` and the attribute's dtype;
    returns (values as an ndarray of cells, validity bool array or None)."""
    value, valid = _split_validity(attr, value)
    k = attr.kind
    if k in (STR, BYTES, RAGGED):
        if not isinstance(value, (list, tuple, np.ndarray)):
            arr = _scalar(attr, value, shape)
        else:
            arr = value if isinstance(value, np.ndarray) else _object_array(value, shape)
            if k == RAGGED and arr.dtype != object:
                raise _err(attr, "ragged cells are given as an object array of 1-D arrays")
    elif np.ndim(value) == 0:
        arr = _scalar(attr, value, shape)
    else:
        if not isinstance(value, np.ndarray):
            raise _err(attr, f"give a numpy array (or a scalar), not {type(value).__name__}")
        arr = value
        if attr.base_dtype.kind == "M" and k == NUM and arr.dtype.kind == "M":
            arr = _time.cast_exact(arr, attr.dtype, f"attribute {attr.name}")
        ok = arr.dtype == attr.dtype or (k == MULTI and arr.dtype == attr.base_dtype)
        if not ok:
            raise _err(attr, f"value dtype {arr.dtype} does not match the attribute's {attr.dtype} (no silent casts)")
    want = shape + ((int(attr.cell_val_num),) if k == MULTI else ())
    if arr.shape != want:
        raise _err(attr, f"value shape {arr.shape} does not match the selection's {want}")
    if valid is not None:
        valid = np.broadcast_to(valid, shape) if valid.ndim == 0 else valid
        if valid.shape != shape:
            raise _err(attr, f"validity shape {valid.shape} does not match the selection's {shape}")
    return arr, valid


Input = Tuple[str, np.ndarray, Optional[np.ndarray], Optional[np.ndarray]]


def encode(attr: Attr, arr: np.ndarray, valid: Optional[np.ndarray], layout: str, cell_axes: int) -> Input:
    """The binding's (name, data, offsets, validity) of one attribute, cells in ``layout``. A
    fixed-size value already in ``layout`` is passed as a uint8 view of its memory (no copy)."""
    k = attr.kind
    if valid is None and attr.nullable:
        valid = np.ones(arr.shape[:cell_axes], dtype=bool)
    validity = None
    if valid is not None:
        v = valid if layout == "C" else _as_f_order_cells(valid, cell_axes)
        # Always a new uint8 buffer (never the caller's bool array, which may be written below).
        validity = np.ascontiguousarray(v, dtype=np.uint8).reshape(-1)
    src = arr if layout == "C" else _as_f_order_cells(arr, cell_axes)
    if k in (STR, BYTES, RAGGED):
        data, offsets = _encode_var(attr, src.reshape(-1), validity)
        return (attr.name, data, offsets, validity)
    data = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
    return (attr.name, data, None, validity)


def _encode_var(attr: Attr, cells: np.ndarray, validity: Optional[np.ndarray]) -> Tuple[np.ndarray, np.ndarray]:
    k = attr.kind
    parts: List[bytes] = []
    null = validity is not None
    for i, c in enumerate(cells.tolist()):
        if c is None or c is np.ma.masked:
            if not null:
                raise _err(attr, f"cell {i} is None but the attribute is not nullable")
            validity[i] = 0  # type: ignore[index]
            parts.append(b"")
        elif k == STR:
            if not isinstance(c, str):
                raise _err(attr, f"cell {i} is {type(c).__name__}, not str")
            try:
                parts.append(c.encode())
            except UnicodeEncodeError as e:
                raise _err(
                    attr,
                    f"cell {i}: {c!r} holds a lone surrogate ({c[e.start]!r} at character {e.start}), "
                    "which UTF-8 cannot encode",
                ) from None
        elif k == BYTES:
            if not isinstance(c, (bytes, bytearray, memoryview)):
                raise _err(attr, f"cell {i} is {type(c).__name__}, not bytes")
            parts.append(bytes(c))
        else:
            if isinstance(c, np.ndarray):
                if c.dtype != attr.base_dtype:
                    raise _err(
                        attr, f"cell {i} has dtype {c.dtype}, the attribute's is {attr.base_dtype} (no silent casts)"
                    )
                a = c
            else:
                try:
                    a = np.asarray(c, dtype=attr.base_dtype)
                except (TypeError, ValueError, OverflowError) as e:
                    raise _err(attr, f"cell {i}: {c!r} is not a 1-D array of {attr.base_dtype} ({e})") from None
            if a.ndim != 1:
                raise _err(attr, f"cell {i} is not a 1-D array")
            parts.append(np.ascontiguousarray(a).tobytes())
    lengths = np.fromiter((len(p) for p in parts), dtype=np.uint64, count=len(parts))
    offsets = np.zeros(len(parts), dtype=np.uint64)
    if len(parts) > 1:
        np.cumsum(lengths[:-1], out=offsets[1:])
    data = np.frombuffer(b"".join(parts), dtype=np.uint8)
    return data, offsets
