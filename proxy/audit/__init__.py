"""The audit log: what each client sent and what the model saw, with secrets redacted.

The proxy fills an `AuditEntry` per request and hands it to `AuditWriter.submit`, which
never blocks; a background thread assembles the response, redacts, and writes to the
configured sink (SQLite by default, or JSONL). `open_audit` builds all of it from the
`audit:` config section; call it once per worker process.
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.audit.jsonl import JsonlSink
from proxy.audit.record import AuditEntry, AuditRecord, RecordBuilder, key_fingerprint
from proxy.audit.redact import Redactor
from proxy.audit.settings import AuditConfig, RedactConfig, parse_audit, read_audit
from proxy.audit.sqlite import SqliteSink
from proxy.audit.sse import SSEAccumulator
from proxy.audit.writer import AuditStats, AuditWriter, Outcome, Sink

__all__ = [
    "AuditConfig",
    "AuditEntry",
    "AuditRecord",
    "AuditStats",
    "AuditWriter",
    "Outcome",
    "RedactConfig",
    "Redactor",
    "SSEAccumulator",
    "key_fingerprint",
    "open_audit",
    "open_sink",
    "parse_audit",
    "read_audit",
]


def open_sink(config: AuditConfig) -> Sink:
    if config.sink == "jsonl":
        return JsonlSink(config.path)
    return SqliteSink(config.path, max_age_days=config.max_age_days, max_bytes=config.max_bytes)


def open_audit(
    config: AuditConfig, *, on_outcome: Callable[[Outcome], None] | None = None
) -> AuditWriter | None:
    """A running writer for `config`, or None when auditing is off (`sink: none`)."""
    if not config.enabled:
        return None
    redactor = Redactor.build(builtin=config.redact.builtin, custom=config.redact.patterns)
    builder = RecordBuilder(redactor, store_responses=config.store_responses)
    return AuditWriter(
        open_sink(config), builder, max_queue=config.max_queue, on_outcome=on_outcome
    )
