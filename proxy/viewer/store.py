"""Opening the audit store the viewer reads, once per request."""

from __future__ import annotations

from proxy.observability.audit.readers.query import Reader
from proxy.observability.audit.readers.sqlite import SqliteReader
from proxy.observability.audit.sinks.jsonl import JsonlReader
from proxy.viewer.app import OpenReader

SQLITE_MAGIC = b"SQLite format 3"


def open_reader(path: str) -> Reader:
    """A reader for the store at `path`: SQLite or JSONL by its first bytes (as `curator
    audit` tells them apart). Raises FileNotFoundError when there is no store yet."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except FileNotFoundError:
        raise FileNotFoundError(f"no audit records yet at {path}") from None
    if head.startswith(SQLITE_MAGIC):
        return SqliteReader(path)
    return JsonlReader(path)


def opener(path: str) -> OpenReader:
    """`open_reader` bound to `path`, for `Viewer`."""

    def open_it() -> Reader:
        return open_reader(path)

    return open_it
