"""Tile filters, one class per engine filter (the engine's own ``Filter``, wrapped by the binding
``tessera._core``). Each serializes to the engine's JSON form, e.g.
``Zstd(level=3).to_json() == {"name": "zstd", "level": 3}``; the engine checks levels when the
filter is made (``SchemaError``)."""

from __future__ import annotations

from ._core import ByteShuffle, Delta, Filter, Gzip, Lz4, Rle, Zstd

__all__ = ["ByteShuffle", "Delta", "Filter", "Gzip", "Lz4", "Rle", "Zstd"]
