"""Reading a JSONL audit file back, for `curator audit` (`proxy.cli.audit`) and the viewer."""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterator
from typing import Any

import orjson

from proxy.observability.audit.readers.query import (
    FACET_LIMIT,
    FACETS,
    Page,
    Query,
    clamp,
    matches,
    summary,
)
from proxy.observability.audit.stamps import parse_iso


class JsonlReader:
    """Reads a JSONL audit file back as dicts for `curator audit` (lines that fail to parse,
    such as a last line cut short by a crash, are skipped)."""

    def __init__(self, path: str) -> None:
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no audit log at {path}")
        self.path = path

    def records(self) -> Iterator[dict[str, Any]]:
        with open(self.path, "rb") as handle:
            for line in handle:
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if isinstance(record, dict):
                    yield record

    def summaries(self, *, limit: int, route: str | None = None) -> list[dict[str, Any]]:
        """The newest records, newest first, without their messages."""
        matching = (_summary(r) for r in self.records() if route is None or r.get("route") == route)
        # nlargest keeps memory at `limit` records, however long the file.
        return heapq.nlargest(limit, matching, key=_when)

    def get(self, record_id: str) -> dict[str, Any] | None:
        exact: dict[str, Any] | None = None
        prefixed: list[dict[str, Any]] = []
        for record in self.records():
            rid = str(record.get("id", ""))
            if rid == record_id:
                exact = record
            elif rid.startswith(record_id):
                prefixed.append(record)
        if exact is not None or not prefixed:
            return exact
        if len(prefixed) > 1:
            raise LookupError(f"several records have ids starting with {record_id!r}")
        return prefixed[0]

    def between(self, since: float, until: float | None = None) -> Iterator[dict[str, Any]]:
        end = float("inf") if until is None else until
        for record in self.records():
            if since <= _when(record) < end:
                yield record

    def search(self, query: Query) -> Page:
        """One page of the records `query` selects, newest first, by scanning the file."""
        query = clamp(query)
        wanted = query.offset + query.limit + 1
        # nlargest keeps memory at one page of summaries, however long the file; the line
        # number breaks ties between records of the same millisecond, newest line first.
        found = heapq.nlargest(
            wanted,
            (
                (when, n, summary(record))
                for n, record in enumerate(self.records())
                if matches(record, when := _when(record), query)
            ),
            key=lambda item: (item[0], item[1]),
        )
        rows = [row for _, _, row in found[query.offset : query.offset + query.limit]]
        return Page(rows, more=len(found) == wanted)

    def facets(self) -> dict[str, list[str]]:
        found: dict[str, set[str]] = {name: set() for name in FACETS}
        for record in self.records():
            for name, values in found.items():
                value = record.get(name)
                if value is not None and len(values) < FACET_LIMIT:
                    values.add(str(value))
        return {name: sorted(values) for name, values in found.items()}

    def close(self) -> None:
        """Nothing is held open between calls."""


def _summary(record: dict[str, Any]) -> dict[str, Any]:
    original = record.pop("original", None) or []
    curated = record.pop("curated", None) or []
    return {**record, "messages": len(original), "curated_messages": len(curated)}


def _when(record: dict[str, Any]) -> float:
    """The record's time; a line this proxy did not write counts as older than all others."""
    try:
        return parse_iso(str(record.get("time")))
    except ValueError:
        return float("-inf")
