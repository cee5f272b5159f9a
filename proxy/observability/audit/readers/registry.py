"""The reader registry: which reader opens a store, by config or URL, never by content.

A store is read by the reader named like the sink that wrote it: the config's
`audit.sink`, or `--sink`; else a URL's scheme picks (`postgresql://`), else a file's
suffix (`.jsonl`), else SQLite, the default sink. Adding a reader is one module plus one
line here.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any

from proxy.observability.audit.readers.base import ReaderType, Store


def _sqlite(location: str, _options: Mapping[str, Any]) -> Store:
    from proxy.observability.audit.readers.sqlite import SqliteReader

    return SqliteReader(location)


def _jsonl(location: str, _options: Mapping[str, Any]) -> Store:
    from proxy.observability.audit.readers.jsonl import JsonlReader

    return JsonlReader(location)


def _postgres(location: str, options: Mapping[str, Any]) -> Store:
    # Imported only when used: psycopg is the optional `postgres` extra.
    from proxy.observability.audit.readers.postgres import PostgresReader

    return PostgresReader(str(options.get("dsn") or location))


_TYPES: tuple[ReaderType, ...] = (
    ReaderType("sqlite", _sqlite, suffixes=(".db", ".sqlite", ".sqlite3")),
    ReaderType("jsonl", _jsonl, suffixes=(".jsonl", ".ndjson", ".json", ".log")),
    ReaderType("postgres", _postgres, schemes=("postgres", "postgresql")),
)
READERS: Mapping[str, ReaderType] = types.MappingProxyType({t.name: t for t in _TYPES})
DEFAULT = "sqlite"


def reader_for(location: str, sink: str | None = None) -> ReaderType:
    """The reader for `location`: `sink` if named, else by URL scheme, else by suffix."""
    if sink is not None:
        found = READERS.get(sink)
        if found is None:
            raise LookupError(f"no reader for sink {sink!r}; known: {', '.join(READERS)}")
        return found
    scheme, sep, _ = location.partition("://")
    if sep:
        for candidate in _TYPES:
            if scheme.lower() in candidate.schemes:
                return candidate
        raise LookupError(f"no audit reader for URLs starting {scheme}://")
    lowered = location.lower()
    for candidate in _TYPES:
        if lowered.endswith(candidate.suffixes):
            return candidate
    return READERS[DEFAULT]


def open_reader(
    location: str, sink: str | None = None, options: Mapping[str, Any] | None = None
) -> Store:
    """An open reader for the store at `location` (see `reader_for`)."""
    return reader_for(location, sink).open(location, options or {})
