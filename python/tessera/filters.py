"""Tile filters, one class per engine filter. Each serializes to the engine's JSON form, e.g.
``Zstd(level=3).to_json() == {"name": "zstd", "level": 3}``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Dict, Mapping, Type

from .errors import SchemaError


@dataclass(frozen=True)
class Filter:
    """Base class of the filters."""

    name: ClassVar[str] = ""

    def to_json(self) -> Dict[str, Any]:
        """The engine's JSON form of this filter."""
        out: Dict[str, Any] = {"name": self.name}
        out.update(self.__dict__)
        return out

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "Filter":
        """The filter of an engine JSON object such as ``{"name": "gzip", "level": 6}``."""
        args = dict(d)
        name = args.pop("name", None)
        cls = _BY_NAME.get(str(name))
        if cls is None:
            raise SchemaError(f"unknown filter {name!r} (known: {', '.join(sorted(_BY_NAME))})")
        return cls(**args)


@dataclass(frozen=True)
class Gzip(Filter):
    """Deflate (zlib stream), level 0..9."""

    level: int = 6
    name: ClassVar[str] = "gzip"


@dataclass(frozen=True)
class Zstd(Filter):
    """Zstandard, level -7..22."""

    level: int = 3
    name: ClassVar[str] = "zstd"


@dataclass(frozen=True)
class Lz4(Filter):
    """LZ4 block compression."""

    name: ClassVar[str] = "lz4"


@dataclass(frozen=True)
class Rle(Filter):
    """Run-length encoding of equal consecutive values."""

    name: ClassVar[str] = "rle"


@dataclass(frozen=True)
class Delta(Filter):
    """Differences of consecutive values."""

    name: ClassVar[str] = "delta"


@dataclass(frozen=True)
class ByteShuffle(Filter):
    """Byte transposition (all first bytes, then all second bytes, ...)."""

    name: ClassVar[str] = "byteshuffle"


_BY_NAME: Dict[str, Type[Filter]] = {c.name: c for c in (Gzip, Zstd, Lz4, Rle, Delta, ByteShuffle)}
