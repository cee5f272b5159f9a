"""What `curator audit` needs from a store reader, whichever store it reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

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
