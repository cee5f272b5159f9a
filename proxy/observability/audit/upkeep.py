"""The audit store's upkeep, in the writer's thread: retention, and closing at the end."""

from __future__ import annotations

import logging

from proxy.observability.audit.health import StoreHealth
from proxy.observability.audit.ratelog import RateLimitedLog
from proxy.observability.audit.sinks.base import Sink, StoreUnavailable

log = logging.getLogger("curator.audit")


def prune(sink: Sink, health: StoreHealth, report: RateLimitedLog) -> float | None:
    """Apply retention (which also opens the store at start). Seconds to the next try while
    the store is unavailable (sooner, so an outage shows and ends promptly); None for the
    usual interval."""
    try:
        sink.prune()
    except StoreUnavailable as exc:
        return health.failed(str(exc), 0)
    except Exception as exc:  # retention is retried at the next interval
        report("prune", logging.ERROR, "audit: retention failed: %s", exc)
    else:
        health.succeeded(0)
    return None


def close_sink(sink: Sink) -> None:
    try:
        sink.close()
    except Exception as exc:  # shutting down anyway; say why the file may be unclean
        log.error("audit: closing the sink failed: %s", exc)
