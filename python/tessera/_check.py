"""Checks of the scalar arguments of the public API before they reach the binding: each bad
value raises a ``TesseraError`` naming the argument (and the dimension, attribute or cell),
never a Python internal such as ``cannot convert float NaN to integer``, ``can't convert
negative int to unsigned`` or a bare ``UnicodeEncodeError``."""

from __future__ import annotations

import datetime as _dt
import math
import numbers
from typing import Any, Optional, Type

import numpy as np

from .errors import ArgumentError, ArgumentTypeError, TesseraError

#: The largest unsigned 64-bit value: timestamps, budgets and counts the engine takes.
U64_MAX = 2**64 - 1


def is_int(x: Any) -> bool:
    """Whether ``x`` is an integer (Python or numpy), booleans excluded."""
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, (bool, np.bool_))


def is_real(x: Any) -> bool:
    """Whether ``x`` is an int or a float (Python or numpy), booleans excluded."""
    return isinstance(x, (numbers.Real, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def type_name(x: Any) -> str:
    return type(x).__name__


def text(value: str, what: str, error: Type[TesseraError] = ArgumentError) -> str:
    """``value`` when UTF-8 can encode it; a lone surrogate raises ``error`` naming ``what``
    and the character's position."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise error(
            f"{what}: {value!r} holds a lone surrogate ({value[e.start]!r} at character {e.start}), "
            "which UTF-8 cannot encode"
        ) from None
    return value


def count(
    value: Any,
    what: str,
    lo: int = 0,
    hi: int = U64_MAX,
    error: Type[TesseraError] = ArgumentError,
    type_error: Type[TesseraError] = ArgumentTypeError,
) -> int:
    """An integer argument in ``[lo, hi]`` (a budget, a capacity, a tile extent). Floats are
    taken when they are whole numbers (``1e6``)."""
    if is_real(value) and not is_int(value):
        f = float(value)
        if not math.isfinite(f) or f != math.floor(f):
            raise error(f"{what} is a whole number, not {value!r}")
        value = int(f)
    if not is_int(value):
        raise type_error(f"{what} is an integer, not {type_name(value)} {value!r}")
    v = int(value)
    if not lo <= v <= hi:
        raise error(f"{what} must be in [{lo}, {hi}], not {v}")
    return v


def timestamp_ms(t: Any, what: str = "timestamp") -> Optional[int]:
    """A timestamp argument in ms since the Unix epoch: None, an integer in [0, 2**64 - 1] or a
    datetime (naive ones are local time)."""
    if t is None:
        return None
    if isinstance(t, _dt.datetime):
        try:
            ms = math.floor(t.timestamp() * 1000)
        except (OverflowError, ValueError, OSError) as e:
            raise ArgumentError(f"{what}: {t!r} cannot be converted to ms since the epoch ({e})") from None
        if ms < 0:
            raise ArgumentError(f"{what}: {t!r} is before the Unix epoch (timestamps are ms since 1970-01-01)")
        return ms
    if not is_int(t):
        raise ArgumentTypeError(
            f"{what} is an integer (ms since the Unix epoch) or a datetime, not {type_name(t)} {t!r}"
        )
    v = int(t)
    if v < 0:
        raise ArgumentError(f"{what} {v} is negative: timestamps are ms since the Unix epoch (>= 0)")
    if v > U64_MAX:
        raise ArgumentError(f"{what} {v} is too large (at most 2**64 - 1 ms)")
    return v
