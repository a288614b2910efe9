"""Consolidation and vacuum.

Every write adds a fragment, and reads merge every fragment they overlap, so many small writes
make reads slower. ``ts.consolidate`` merges a run of consecutive fragments into one whose
timestamps ``(t0, t1)`` cover theirs; readers opened afterwards see the new fragment instead of
its inputs (same values), readers already open keep their snapshot, and time travel to before
the new fragment's ``t1`` still shows the inputs. ``ts.vacuum`` then deletes the superseded
inputs (and the folders crashed writers left), after which time travel to before the
consolidation no longer finds them.

>>> ts.consolidate(uri)                                              # doctest: +SKIP
>>> ts.consolidate(uri, fragments=[f.name for f in ts.fragments(uri)[2:5]])   # doctest: +SKIP
>>> ts.consolidate(uri, timestamp=(t0, t1))                          # doctest: +SKIP
>>> ts.consolidate(uri, policy="size-tiered", ratio=4.0, min_fragments=4)     # doctest: +SKIP
>>> ts.vacuum(uri)                                                   # doctest: +SKIP
VacuumReport(removed=(...), uncommitted=(), deferred=())
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from . import _check, _core
from .array import FragmentInfo, PathLike, Timestamp, _fragment_info, _uri
from .config import ConfigLike, as_items
from .errors import ArgumentError, ArgumentTypeError

__all__ = ["VacuumReport", "consolidate", "consolidate_fragment_metadata", "consolidation_plan", "vacuum"]

#: The consolidation policies ``policy`` accepts.
POLICIES = ("size-tiered",)

FragmentsLike = Iterable[Union[str, FragmentInfo]]


@dataclass(frozen=True)
class VacuumReport:
    """What ``ts.vacuum`` deleted."""

    #: Names of the fragments consolidations had superseded.
    removed: Tuple[str, ...]
    #: Names of fragment folders that were never committed (left by crashed writers), or, on
    #: object stores, whose commit records an earlier vacuum's checkpoint already dropped.
    uncommitted: Tuple[str, ...]
    #: Object stores only: fragments no reader can see that were kept because they stopped being
    #: needed less than ``sm.vacuum.grace_ms`` ago (a later vacuum removes them).
    deferred: Tuple[str, ...] = ()


def _selection(
    fragments: Optional[FragmentsLike],
    timestamp: Optional[Tuple[Timestamp, Timestamp]],
    policy: Optional[str],
    ratio: Optional[float],
    min_fragments: Optional[int],
) -> Dict[str, Any]:
    """The binding's keyword arguments for a selection (checked)."""
    given = [k for k, v in (("fragments", fragments), ("timestamp", timestamp), ("policy", policy)) if v is not None]
    if len(given) > 1:
        raise ArgumentError(f"give at most one of fragments, timestamp and policy, not {' and '.join(given)}")
    if policy is None and (ratio is not None or min_fragments is not None):
        raise ArgumentError("ratio and min_fragments go with policy='size-tiered'")
    if fragments is not None:
        if isinstance(fragments, (str, bytes, FragmentInfo)) or not isinstance(fragments, Iterable):
            raise ArgumentTypeError("fragments is a list of fragment names (or FragmentInfo objects), not a single one")
        names = []
        for i, f in enumerate(fragments):
            if isinstance(f, FragmentInfo):
                names.append(f.name)
            elif isinstance(f, str):
                names.append(_check.text(f, f"fragments[{i}]"))
            else:
                raise ArgumentTypeError(
                    f"fragments holds names (str) or FragmentInfo objects, not {type(f).__name__} (fragments[{i}])"
                )
        return {"names": names}
    if timestamp is not None:
        if isinstance(timestamp, (str, bytes)) or not hasattr(timestamp, "__len__") or len(timestamp) != 2:
            raise ArgumentTypeError("timestamp is an inclusive (t0, t1) pair (ms since the epoch, or datetimes)")
        t0 = _check.timestamp_ms(timestamp[0], "timestamp t0")
        t1 = _check.timestamp_ms(timestamp[1], "timestamp t1")
        if t0 is None or t1 is None:
            raise ArgumentTypeError(f"timestamp: both ends of (t0, t1) are needed, not {timestamp!r}")
        if t0 > t1:
            raise ArgumentError(f"timestamp range ({t0}, {t1}) is reversed")
        return {"timestamps": (t0, t1)}
    if policy is not None:
        if not isinstance(policy, str) or policy not in POLICIES:
            raise ArgumentError(f"unknown consolidation policy {policy!r} (known: {', '.join(POLICIES)})")
        r = 4.0 if ratio is None else ratio
        if not _check.is_real(r) or math.isnan(r) or r < 1.0:
            raise ArgumentError(f"ratio is a number >= 1 (the largest size ratio inside a tier), not {ratio!r}")
        m = 4 if min_fragments is None else min_fragments
        if not _check.is_int(m) or m < 2:
            raise ArgumentError(f"min_fragments is an integer >= 2, not {min_fragments!r}")
        return {"size_tiered": (float(r), min(int(m), _check.U64_MAX))}
    return {}


def consolidate(
    uri: PathLike,
    fragments: Optional[FragmentsLike] = None,
    timestamp: Optional[Tuple[Timestamp, Timestamp]] = None,
    policy: Optional[str] = None,
    config: Optional[ConfigLike] = None,
    *,
    ratio: Optional[float] = None,
    min_fragments: Optional[int] = None,
) -> Optional[FragmentInfo]:
    """Merges fragments of the array at ``uri`` into one new fragment and returns it, or None
    when fewer than two fragments were chosen. Choose with at most one of:

    * ``fragments``: names (or ``FragmentInfo`` objects, e.g. from ``ts.fragments(uri)``);
    * ``timestamp``: an inclusive ``(t0, t1)`` pair (ms or datetimes): every fragment whose own
      ``t0`` and ``t1`` lie within it;
    * ``policy="size-tiered"``: the longest run of at least ``min_fragments`` (default 4)
      consecutive fragments whose stored sizes are within a factor ``ratio`` (default 4.0) of
      each other, as in an LSM tree;

    by default every fragment. The chosen fragments must be consecutive in fragment order
    (``ts.fragments(uri)``); otherwise, or for a name the array does not have, ``QueryError``
    (the engine's message). The new fragment covers the inputs' timestamps: reads opened
    afterwards see the same values through fewer fragments, reads already open are unaffected.
    The inputs stay on disk (time travel to before the new fragment's ``t1`` still sees them)
    until ``ts.vacuum``. Deletes (``Array.delete``) among the inputs are applied: the new
    fragment holds no tombstones. When it holds cells with coordinates (a sparse array, or a
    run of a dense array without dense fragments), a run holding deletes must start at the
    oldest fragment (``QueryError`` otherwise), since its deletes would no longer apply to the
    older fragments. At most ``sm.consolidation.buffer_size`` bytes of cells are held at
    once. Nothing is committed on error. The GIL is released while it runs."""
    sel = _selection(fragments, timestamp, policy, ratio, min_fragments)
    d = _core.consolidate(_uri(uri), config=as_items(config), **sel)
    return None if d is None else _fragment_info(d)


def consolidation_plan(
    uri: PathLike,
    fragments: Optional[FragmentsLike] = None,
    timestamp: Optional[Tuple[Timestamp, Timestamp]] = None,
    policy: Optional[str] = None,
    config: Optional[ConfigLike] = None,
    *,
    ratio: Optional[float] = None,
    min_fragments: Optional[int] = None,
) -> List[FragmentInfo]:
    """The fragments ``ts.consolidate`` with the same arguments would merge now, oldest first
    (empty when fewer than two). Nothing is written; errors as for ``consolidate``."""
    sel = _selection(fragments, timestamp, policy, ratio, min_fragments)
    return [_fragment_info(d) for d in _core.plan_consolidation(_uri(uri), config=as_items(config), **sel)]


def vacuum(uri: PathLike, config: Optional[ConfigLike] = None) -> VacuumReport:
    """Deletes the fragments consolidations superseded, and the folders of fragments that were
    never committed (left by crashed writers); returns what it deleted.

    Vacuum takes the array's lock exclusively, so no reader ever loses a file it reads: it
    waits until every reader and writer has finished, in any process, INCLUDING this one. An
    array open for reading (``ts.open(uri)``) holds the lock until it is closed (leave its
    ``with`` block or call ``close()``); a batch iterator (``iter_batches``) until it is
    exhausted or dropped; a writer during each write. Close them first: after
    ``sm.vacuum.lock_timeout_ms`` (default 600000) it raises ``ArrayBusyError`` (a subclass of
    ``ArrayError``) and deletes nothing. The GIL is released while it waits, so other threads
    can finish and close their arrays; an array the calling thread itself keeps open makes it
    wait for the whole timeout. Readers and writers that start while vacuum holds the lock wait
    for it (for at most the same timeout). Object stores (``s3://``) have no locks: there vacuum
    waits for nobody and keeps fragments replaced less than ``sm.vacuum.grace_ms`` ago (an hour)
    for later (``report.deferred``), so readers may use a snapshot that long."""
    removed, uncommitted, deferred = _core.vacuum(_uri(uri), as_items(config))
    return VacuumReport(tuple(removed), tuple(uncommitted), tuple(deferred))


def consolidate_fragment_metadata(uri: PathLike, config: Optional[ConfigLike] = None) -> int:
    """Writes one file holding a copy of every visible fragment's metadata, so opening an array
    of many fragments reads one file instead of one per fragment; returns how many fragments it
    holds. Fragments written later are read from their own files until the next call. What
    readers see is unchanged; ``ts.vacuum`` deletes older such files."""
    return _core.consolidate_fragment_metadata(_uri(uri), as_items(config))
