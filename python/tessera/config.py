"""Configuration: the engine's string keys (``sm.compute_concurrency``, ``vfs.read_mode``,
``sm.memory_budget``, ...), checked when the ``Config`` is made. Arrays opened with equal
configurations share one engine context (and its thread pool)."""

from __future__ import annotations

from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Union

from . import _check, _core
from .errors import ConfigError

ConfigLike = Union["Config", Mapping[str, object]]


class Config(Mapping[str, str]):
    """A checked set of configuration values; unknown keys or bad values raise ``ConfigError``.

    Iterating gives the keys set explicitly; ``get`` and ``[]`` also answer for the others with
    their defaults.
    """

    def __init__(self, values: Optional[Mapping[str, object]] = None) -> None:
        items = _items(values or {})
        self._all: Dict[str, str] = dict(_core.check_config(items))
        self._set = items

    @staticmethod
    def describe() -> List[Tuple[str, str, str]]:
        """Every key the engine understands: (key, default, description)."""
        return list(_core.config_keys())

    def __getitem__(self, key: str) -> str:
        return self._all[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._set)

    def __len__(self) -> int:
        return len(self._set)

    def __contains__(self, key: object) -> bool:
        return key in self._set

    def items_set(self) -> Dict[str, str]:
        """The explicitly set values (what the binding receives)."""
        return dict(self._set)

    def __repr__(self) -> str:
        return f"Config({self._set!r})"


def _text(v: object) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)


def _items(values: Mapping[str, object]) -> Dict[str, str]:
    """Keys and values as text, refusing text UTF-8 cannot encode (``ConfigError`` naming the
    key)."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"a configuration is a mapping of keys to values, not {type(values).__name__}")
    out = {}
    for k, v in values.items():
        key = _check.text(str(k), "config key", ConfigError)
        out[key] = _check.text(_text(v), f"config {key}: value", ConfigError)
    return out


def as_items(config: Optional[ConfigLike]) -> Optional[Dict[str, str]]:
    """The key-value strings of a ``Config`` or mapping, for the binding (which checks them)."""
    if config is None:
        return None
    if isinstance(config, Config):
        return config.items_set()
    return _items(config)


def retained_memory() -> Tuple[int, int]:
    """(bytes kept, most bytes kept) of the process's cache of freed large blocks: result
    columns of at least 1 MiB that numpy freed are kept and reused by the next read, so that
    their pages need not be mapped and zeroed again (a third of the CPU of repeated large
    reads). The limit starts at 256 MiB, or at the environment variable
    ``TESSERA_RETAINED_MEMORY`` (bytes) when the module is imported. Unless that is 0, the
    import also sets glibc's mmap threshold to 1 MiB and trim threshold to 32 MiB (process-wide),
    so the smaller blocks a read makes and frees stay mapped too."""
    kept, limit = _core.retained_memory()
    return int(kept), int(limit)


def set_retained_memory_limit(limit: int) -> None:
    """Keeps at most ``limit`` bytes of freed large blocks from now on (0: none), giving back
    to the system at once what is over."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ConfigError(f"the retained memory limit is a number of bytes >= 0, not {limit!r}")
    _core.set_retained_memory_limit(limit)


def release_memory() -> None:
    """Gives every kept block back to the system (see ``retained_memory``)."""
    _core.release_memory()
