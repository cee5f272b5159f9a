"""The audit writer the `audit:` config section describes (`open_audit`)."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable

from proxy.config.audit import AuditConfig
from proxy.config.spool import SpoolConfig
from proxy.observability.audit.entry import RecordBuilder
from proxy.observability.audit.redact import Redactor
from proxy.observability.audit.sinks.base import Sink
from proxy.observability.audit.sinks.registry import SINKS
from proxy.observability.audit.spool.sink import OnDropped, OnState, SpooledSink
from proxy.observability.audit.spool.store import Spool
from proxy.observability.audit.writer import AuditWriter, WriteOutcome
from proxy.priority import Turns

log = logging.getLogger("curator.audit")


def open_audit(
    config: AuditConfig,
    *,
    on_outcome: Callable[[WriteOutcome], None] | None = None,
    turns: Turns | None = None,
    on_spool: OnState | None = None,
    on_spool_dropped: OnDropped | None = None,
) -> AuditWriter | None:
    """A running writer for `config`, or None when auditing is off (`sink: none`); call it
    once per worker process. A remote sink goes behind its disk spool (`audit.spool`),
    whose state and drops reach `on_spool` and `on_spool_dropped`."""
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
    if config.spool is not None and config.spool.enabled:
        sink = spooled(sink, config.spool, on_state=on_spool, on_dropped=on_spool_dropped)
    return AuditWriter(
        sink,
        builder,
        max_queue=config.max_queue,
        max_queue_bytes=config.max_queue_bytes,
        on_outcome=on_outcome,
        turns=turns,
    )


def spooled(
    sink: Sink,
    config: SpoolConfig,
    *,
    on_state: OnState | None = None,
    on_dropped: OnDropped | None = None,
) -> Sink:
    """`sink` behind the disk spool `config` describes; `sink` as it is, the reason logged,
    when the spool cannot be opened (an outage is then held in memory, up to max_queue)."""
    try:
        spool = Spool(
            config.path, max_bytes=config.max_bytes, max_age_s=config.max_age_hours * 3600
        )
    except (OSError, sqlite3.Error) as exc:
        log.error("audit: no disk spool, %s cannot be opened: %s", config.path, exc)
        return sink
    log.info("audit spool: %s", config.path)
    return SpooledSink(sink, spool, on_state=on_state, on_dropped=on_dropped)
