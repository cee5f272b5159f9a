"""What `curator audit` needs from a store reader, whichever store it reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson

from proxy.observability.audit.sinks.base import DIGEST_SIZE, TOOLS_REF


def resolve_tools(
    record: dict[str, Any], fetch: Callable[[list[bytes]], list[Any]] | None
) -> dict[str, Any]:
    """A stored record's fields with its `tools` back in place of the reference to their
    blob (`sinks.base.TOOLS_REF`); without `fetch` (a summary) the reference is dropped."""
    ref = record.pop(TOOLS_REF, None)
    if isinstance(ref, str) and fetch is not None:
        record["tools"] = fetch([bytes.fromhex(ref)])[0]
    return record


def stored_summary(fields: bytes, n_original: int | None, n_curated: int | None) -> dict[str, Any]:
    """A summary row from a content-addressed store: the fields, and message counts from
    the lengths of the digest columns (`curated` NULL: the model saw the original)."""
    summary = resolve_tools(orjson.loads(fields), None)
    summary["messages"] = (n_original or 0) // DIGEST_SIZE
    summary["curated_messages"] = (n_curated or n_original or 0) // DIGEST_SIZE
    return summary


class Store(Protocol):
    """Records back as plain dicts (the JSONL shape): summaries, one record, a time range."""

    def summaries(self, *, limit: int, route: str | None = None) -> list[dict[str, Any]]: ...

    def get(self, record_id: str) -> dict[str, Any] | None: ...

    def between(self, since: float, until: float | None = None) -> Iterator[dict[str, Any]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class StoredRow:
    """A record as a content-addressed store holds it: its time, its fields JSON (tools by
    reference, `TOOLS_REF`) and its messages' digests, concatenated."""

    time: float
    fields: bytes
    original: bytes
    curated: bytes | None
    """None: the model saw the original."""


@runtime_checkable
class ContentStore(Protocol):
    """A store that keeps each message once, by digest (SQLite, PostgreSQL): read as it is
    stored, for `curator audit export --format bundle`, without resolving any message."""

    def stored_rows(self, since: float, until: float | None = None) -> Iterator[StoredRow]:
        """Records with since <= time < until, oldest first, a few at a time."""
        ...

    def bodies(self, digests: list[bytes]) -> dict[bytes, bytes]:
        """The stored bodies of these digests (those it has)."""
        ...


@runtime_checkable
class Aggregating(Protocol):
    """A store that adds `curator report`'s figures up itself (SQL GROUP BY) and reads one
    conversation's record fields without its messages."""

    def grouped(self, since: float, until: float | None) -> list[tuple[Any, ...]]:
        """Totals per route, policy, model and day (`readers.aggregate.GroupRow`)."""
        ...

    def conversation_fields(
        self, key: str, since: float, until: float | None
    ) -> Iterator[dict[str, Any]]:
        """The fields of the client records (no summarizer calls) of the conversations
        whose key starts with `key`, oldest first, without their messages."""
        ...


Opener = Callable[[str, Mapping[str, Any]], Store]
"""(location, the sink's parsed options) -> an open reader."""


@dataclass(frozen=True, slots=True)
class ReaderType:
    """One registered reader: the sink name whose stores it reads, and the URL schemes
    or file suffixes that select it when no config names the sink."""

    name: str
    open: Opener
    schemes: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
