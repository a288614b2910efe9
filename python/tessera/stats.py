"""Statistics of the engine: a process-wide registry of counters and function timers, off by
default and nearly free when off (the engine's ``tessera::stats``).

>>> import tessera as ts
>>> ts.stats.enable()
>>> # ... reads and writes ...
>>> ts.stats.dump()                  # doctest: +SKIP
>>> ts.stats.json()["summary"]["read_query_submits"]  # doctest: +SKIP
>>> ts.stats.disable(); ts.stats.reset()

``dump`` prints TileDB's report: every function timer (calls, total ns), every counter
(prefixes ``vfs_``, ``filter_``, ``reader_``, ``writer_``, ``cache_``, ``consolidator_``,
``sm_``), then a summary (read and write query submits, tile cache hit ratio, copy-to-read
ratios, compression ratios). ``json`` gives the same as a dict: ``{"summary": {...},
"timers": {name: {"calls", "ns"}}, "counters": {name: value}}``.
"""

from __future__ import annotations

import json as _json
import sys
from typing import Any, Dict, Optional, TextIO

from . import _core

__all__ = ["disable", "dump", "dumps", "enable", "is_enabled", "json", "reset"]


def enable() -> None:
    """Turns recording on for the whole process."""
    _core.stats_enable()


def disable() -> None:
    """Turns recording off for the whole process (the values are kept; see ``reset``)."""
    _core.stats_disable()


def is_enabled() -> bool:
    """Whether recording is on."""
    return bool(_core.stats_is_enabled())


def reset() -> None:
    """Sets every counter and timer to zero (whether or not recording is on)."""
    _core.stats_reset()


def dumps() -> str:
    """The text report of the current values."""
    return str(_core.stats_dump())


def dump(file: Optional[TextIO] = None) -> None:
    """Prints the text report to ``file`` (default: ``sys.stdout``)."""
    text = dumps()
    out = sys.stdout if file is None else file
    out.write(text if text.endswith("\n") else text + "\n")


def json() -> Dict[str, Any]:
    """The current values as a dict: ``{"summary": {...}, "timers": {name: {"calls", "ns"}},
    "counters": {name: value}}``; each summary ratio is ``{"numerator", "denominator",
    "ratio"}`` (``ratio`` None when the denominator is 0)."""
    out: Dict[str, Any] = _json.loads(_core.stats_json())
    return out
