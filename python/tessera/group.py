"""Groups: a folder that holds arrays and other groups (its members) and metadata of its own.

>>> ts.Group.create("survey")                                       # doctest: +SKIP
>>> with ts.Group("survey", "w") as G:                              # doctest: +SKIP
...     G.meta["title"] = "Ship tracks 2016"
...     G.create_array("tracks", schema)
...     G.create_group("derived")
>>> with ts.Group("survey") as G:                                   # doctest: +SKIP
...     list(G)                      # ['derived', 'tracks']: member names, sorted
...     G.members()                  # {'derived': 'group', 'tracks': 'array'}
...     with G["tracks"] as A: ...   # members open as arrays or groups (read mode)

Members are the arrays and groups directly inside the group's folder: an array created there by
any means (``ts.create(uri + "/name", ...)``) is a member, and removing its folder removes it.
``G.meta`` is stored and time-travels as an array's does (``ts.consolidate_metadata`` merges its
files, ``ts.Group.vacuum`` deletes the merged ones).
"""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Type, Union

from . import _core
from .array import Array, PathLike, Timestamp, _timestamp_ms, _uri, create, open
from .config import ConfigLike, as_items
from .errors import ArgumentError, QueryError
from .meta import Metadata
from .schema import ArraySchema

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["Group", "object_kind"]


def object_kind(uri: PathLike, config: Optional[ConfigLike] = None) -> Optional[str]:
    """What is at ``uri``: "array", "group", or None (nothing, or something else)."""
    return _core.object_kind(_uri(uri), as_items(config))


class Group:
    """An open group (``ts.Group(uri, mode="r")``); a context manager."""

    @staticmethod
    def create(uri: PathLike, config: Optional[ConfigLike] = None) -> str:
        """Creates an empty group at ``uri`` (a missing or empty folder); returns the uri."""
        _core.group_create(_uri(uri), as_items(config))
        return str(uri)

    @staticmethod
    def vacuum(uri: PathLike, config: Optional[ConfigLike] = None) -> List[str]:
        """Deletes the group's metadata files that ``ts.consolidate_metadata`` replaced; returns
        their names. What readers see is unchanged."""
        return _core.group_vacuum(_uri(uri), as_items(config))

    def __init__(
        self, uri: PathLike, mode: str = "r", timestamp: Optional[Timestamp] = None, config: Optional[ConfigLike] = None
    ) -> None:
        if mode not in ("r", "w"):
            raise ArgumentError(f"mode must be 'r' or 'w', not {mode!r}")
        self._timestamp = _timestamp_ms(timestamp)
        self._config = config
        self._core: Optional[_core.Group] = _core.Group.open(_uri(uri), mode, self._timestamp, as_items(config))
        self._mode = mode
        self._meta: Optional[Metadata] = None

    def _c(self) -> _core.Group:
        if self._core is None:
            raise QueryError("the group is closed")
        return self._core

    def close(self) -> None:
        """Closes the group (idempotent)."""
        self._core = None

    def __enter__(self) -> Self:
        self._c()
        return self

    def __exit__(
        self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    @property
    def uri(self) -> str:
        """The group's location."""
        return self._c().uri

    @property
    def mode(self) -> str:
        """"r" or "w"."""
        return self._mode

    @property
    def meta(self) -> Metadata:
        """The group's metadata (a mapping; see ``tessera.meta``)."""
        if self._meta is None:
            self._meta = Metadata(self._c(), self._mode)
        return self._meta

    def members(self) -> Dict[str, str]:
        """Member name → "array" or "group", sorted by name."""
        return dict(self._c().members())

    def __iter__(self) -> Iterator[str]:
        return iter(self.members())

    def __len__(self) -> int:
        return len(self.members())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.members()

    def member_uri(self, name: str) -> str:
        """The location of member ``name`` (a plain name: no path separators, not ``__...``)."""
        return self._c().member_uri(name)

    def open(self, name: str, mode: str = "r") -> Union[Array, "Group"]:
        """Opens member ``name``: an ``Array`` or a ``Group``, with this group's timestamp (read
        mode) and configuration."""
        kind = self.members().get(name)
        if kind is None:
            raise QueryError(f"group {self.uri} has no member {name!r} (it has: {', '.join(self.members()) or 'none'})")
        uri = self.member_uri(name)
        ts = self._timestamp if mode == "r" else None
        if kind == "group":
            return Group(uri, mode, ts, self._config)
        return open(uri, mode, timestamp=ts, config=self._config)

    def __getitem__(self, name: str) -> Union[Array, "Group"]:
        return self.open(name)

    def create_array(self, name: str, schema: ArraySchema) -> str:
        """Creates an array member ``name`` with ``schema``; returns its uri."""
        uri = self.member_uri(name)
        create(uri, schema, self._config)
        return uri

    def create_group(self, name: str) -> str:
        """Creates a group member ``name``; returns its uri."""
        uri = self.member_uri(name)
        Group.create(uri, self._config)
        return uri

    def __repr__(self) -> str:
        if self._core is None:
            return "<tessera.Group (closed)>"
        return f"<tessera.Group {self.uri!r} mode={self._mode!r} members={self.members()!r}>"

    def __reduce__(self) -> Any:
        return (Group, (self.uri, self._mode, self._timestamp, self._config))
