"""Audit sinks: where redacted records are written (SQLite by default, or JSONL)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from proxy.config.audit import AuditConfig
from proxy.observability.audit.entry import AuditRecord
from proxy.observability.audit.sinks.jsonl import JsonlSink
from proxy.observability.audit.sinks.sqlite import SqliteSink


class Sink(Protocol):
    """Where records go. Called from the writer thread only."""

    def write_many(self, records: Sequence[AuditRecord]) -> None:
        """Write all of `records` (in order), or raise."""
        ...

    def prune(self, now: float | None = None) -> int: ...

    def close(self) -> None: ...


def open_sink(config: AuditConfig) -> Sink:
    if config.sink == "jsonl":
        return JsonlSink(config.path)
    return SqliteSink(config.path, max_age_days=config.max_age_days, max_bytes=config.max_bytes)
