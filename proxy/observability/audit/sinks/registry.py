"""The sink registry: each audit sink's `SinkType`, in one tuple.

Adding a sink is one module (its writer and a `SINK = SinkType(...)`) plus one line here;
`audit.sink` accepts its name, `audit.path` its URL schemes, and the `audit:` section its
own keys, parsed by the sink itself.
"""

from __future__ import annotations

import types
from collections.abc import Mapping

from proxy.observability.audit.sinks import jsonl, postgres, sqlite
from proxy.observability.audit.sinks.base import SinkType

_TYPES: tuple[SinkType, ...] = (sqlite.SINK, jsonl.SINK, postgres.SINK)

SINKS: Mapping[str, SinkType] = types.MappingProxyType({t.name: t for t in _TYPES})
"""`audit.sink` name -> its type, read-only."""


def by_scheme(location: str) -> SinkType | None:
    """The sink a URL's scheme selects (`postgresql://...`), None for a plain path."""
    scheme, sep, _ = location.partition("://")
    if not sep:
        return None
    return next((t for t in _TYPES if scheme.lower() in t.schemes), None)


def owning(keys: object) -> SinkType | None:
    """The sink that owns one of these `audit:` keys (`dsn` -> postgres), if any."""
    present = set(keys) if isinstance(keys, Mapping) else set()
    return next((t for t in _TYPES if present & set(t.keys)), None)
