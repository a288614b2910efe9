"""datetime64 values where the engine takes counts of a unit: dimension bounds, indices and
coordinates, attribute values. The engine stores ``datetime64[unit]`` as int64 counts of the
unit (NaT = the smallest int64, as numpy); these helpers convert numpy datetimes, ISO 8601 text
and Python ``datetime``/``date`` objects to counts, and back, only where the conversion is exact
(no silent loss of precision, the package's rule for every cast)."""

from __future__ import annotations

import datetime as _dt
import numbers
from typing import Any, Tuple

import numpy as np

from .errors import DomainError, QueryError

#: Python objects taken as one point in time.
TIME_SCALARS = (np.datetime64, str, _dt.date)


def is_time(dtype: Any) -> bool:
    """Whether ``dtype`` is a datetime64 dtype."""
    return bool(np.dtype(dtype).kind == "M")


def _is_count(x: Any) -> bool:
    """Whether ``x`` is an integer count (a Python or numpy integer, not a bool)."""
    if isinstance(x, (bool, np.bool_)):
        return False
    return isinstance(x, (numbers.Integral, np.integer))


def _of_unit(v: int, unit: str) -> Any:
    """The count ``v`` of ``unit`` as a ``np.datetime64``."""
    return np.int64(v).astype(f"datetime64[{unit}]")


def unit_of(dtype: Any) -> str:
    """The unit code of a datetime64 dtype ("s", "ns", ...)."""
    return np.datetime_data(np.dtype(dtype))[0]


def count(dtype: Any, x: Any, where: str) -> int:
    """``x`` (an int count of the unit, a ``np.datetime64``, ISO 8601 text or a Python
    ``datetime``/``date``) as an int count of ``dtype``'s unit. NaT and values finer than the
    unit are a DomainError naming ``where``."""
    if _is_count(x):
        return int(x)
    if not isinstance(x, TIME_SCALARS):
        raise DomainError(f"{where}: {x!r} is not a time (a np.datetime64, ISO 8601 text or an int count)")
    try:
        t = np.datetime64(x)
    except ValueError as e:
        raise DomainError(f"{where}: {x!r} is not a time ({e})") from None
    if np.isnat(t):
        raise DomainError(f"{where}: NaT is not a coordinate")
    exact = t.astype(np.dtype(dtype))
    if exact != t:
        raise DomainError(f"{where}: {x!r} is finer than the unit {unit_of(dtype)!r}")
    return int(exact.astype(np.int64))


def value(dtype: Any, x: Any, where: str) -> Any:
    """``x`` (as for ``count``; NaT allowed) as a ``np.datetime64`` of ``dtype``'s unit, exactly."""
    if _is_count(x):
        return _of_unit(int(x), unit_of(dtype))
    if isinstance(x, np.ndarray) and x.dtype.kind == "M":
        return cast_exact(x, dtype, where)[()]
    if not isinstance(x, TIME_SCALARS):
        raise QueryError(f"{where}: {x!r} is not a time (a np.datetime64, ISO 8601 text or an int count)")
    try:
        t = np.datetime64(x)
    except ValueError as e:
        raise QueryError(f"{where}: {x!r} is not a time ({e})") from None
    return cast_exact(np.asarray(t), dtype, where)[()]


def show(dtype: Any, v: Any) -> Any:
    """The count ``v`` of ``dtype``'s unit as a ``np.datetime64``."""
    return _of_unit(int(v), unit_of(dtype))


def pair(dtype: Any, lo: Any, hi: Any) -> Tuple[Any, Any]:
    return show(dtype, lo), show(dtype, hi)


def cast_exact(arr: np.ndarray, dtype: Any, where: str) -> np.ndarray:
    """A datetime64 array as ``dtype`` (another unit), refused unless every value (NaT
    included) converts exactly."""
    dtype = np.dtype(dtype)
    if arr.dtype == dtype:
        return arr
    if arr.dtype.kind != "M":
        raise QueryError(f"{where}: values of dtype {arr.dtype} are not times of {dtype} (no silent casts)")
    out = arr.astype(dtype)
    same = (out == arr) | (np.isnat(out) & np.isnat(arr))
    if not np.all(same):
        i = int(np.flatnonzero(~np.asarray(same).reshape(-1))[0])
        raise QueryError(f"{where}: value {arr.reshape(-1)[i]} of cell {i} does not fit {dtype} exactly")
    return out
