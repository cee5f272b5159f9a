"""The audit spool's families (`audit.spool`): what it holds, how old, and what it dropped.

The spool is one file for every worker, and each worker reads its figures: the gauges take
the largest worker's value (`livemax`), not the sum, in multiprocess mode.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge

from proxy.observability.audit.spool.store import SpoolState

DROP_REASONS = ("full", "expired", "refused")


class SpoolFamilies:
    """`curator_audit_spool_records`, `_age_seconds`, `_dropped_total{reason}`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.records = Gauge(
            "curator_audit_spool_records",
            "Audit records waiting in the disk spool for the store",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.age = Gauge(
            "curator_audit_spool_age_seconds",
            "How long ago the spool's oldest record was spooled (0: empty)",
            registry=registry,
            multiprocess_mode="livemax",
        )
        self.dropped = Counter(
            "curator_audit_spool_dropped",
            "Audit records the spool dropped: full, expired (max_age_hours), refused by the store",
            ["reason"],
            registry=registry,
        )
        for reason in DROP_REASONS:
            self.dropped.labels(reason)

    def state(self, state: SpoolState) -> None:
        """`SpooledSink(on_state=...)`."""
        self.records.set(state.records)
        self.age.set(state.age_s(time.time()))

    def drop(self, reason: str, count: int) -> None:
        """`SpooledSink(on_dropped=...)`."""
        self.dropped.labels(reason if reason in DROP_REASONS else "refused").inc(count)
