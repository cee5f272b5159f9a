"""The audit writer the `audit:` config section describes (`open_audit`)."""

from __future__ import annotations

from collections.abc import Callable

from proxy.config.audit import AuditConfig
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.registry import SINKS
from proxy.observability.audit.writer import AuditWriter, WriteOutcome
from proxy.priority import Turns


def open_audit(
    config: AuditConfig,
    *,
    on_outcome: Callable[[WriteOutcome], None] | None = None,
    turns: Turns | None = None,
) -> AuditWriter | None:
    """A running writer for `config`, or None when auditing is off (`sink: none`); call it
    once per worker process."""
    if not config.enabled:
        return None
    redactor = Redactor.build(builtin=config.redact.builtin, custom=config.redact.patterns)
    sink_type = SINKS[config.sink]
    builder = RecordBuilder(
        redactor,
        store_responses=config.store_responses,
        cache_bytes=config.cache_bytes,
        by_reference=sink_type.by_reference,
    )
    sink = sink_type.open(config.path, config.options, config.retention)
    return AuditWriter(
        sink,
        builder,
        max_queue=config.max_queue,
        max_queue_bytes=config.max_queue_bytes,
        on_outcome=on_outcome,
        turns=turns,
    )
