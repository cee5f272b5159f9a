"""`curator_otel_dropped_total`: telemetry the OpenTelemetry export lost, by signal and reason.

Updated from the export threads as well as the event loop, so it is a prometheus-client
(thread-safe) family. Every series shows from the start, at 0, so an alert can watch it
before the first drop.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter

SIGNALS = ("spans", "metrics")
REASONS = ("queue_full", "export_failed", "shutdown")
"""queue_full: a span found the export queue full; export_failed: the collector refused or
did not answer in time (spans: each span of the batch; metrics: each failed export);
shutdown: spans still queued when the proxy stopped and the exporter's time ran out."""


class OtelFamilies:
    """The drop counter, and `dropped` to hand to the exporters (`proxy.observability.otel`)."""

    def __init__(self, counter: Callable[..., Counter]) -> None:
        self.dropped_total = counter(
            "curator_otel_dropped",
            "OpenTelemetry spans and metric exports dropped, by signal and reason",
            "signal",
            "reason",
        )
        for signal in SIGNALS:
            for reason in REASONS:
                if signal == "spans" or reason == "export_failed":
                    self.dropped_total.labels(signal, reason)

    def dropped(self, signal: str, reason: str, count: int) -> None:
        """Count `count` items of `signal` lost for `reason` (any thread)."""
        if count > 0:
            self.dropped_total.labels(signal, reason).inc(count)
