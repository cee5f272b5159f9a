"""The OTLP exporters, wrapped so that a lost span or metric export is counted, and the span
queue is bounded before it reaches the SDK's batch processor.

`GatedProcessor` counts the spans it handed on and the export has not yet finished with;
at `max_queue_size` it drops a span itself (counted `queue_full`) rather than letting the
batch processor's deque drop its oldest, which would log a warning per span on the event
loop. Exports run in the SDK's own threads, so a slow or absent collector only fills the
queue: serving never waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

from proxy.observability.otel.settings import Settings

Dropped = Callable[[str, str, int], None]
"""`(signal, reason, count)`: told of every loss (`curator_otel_dropped_total`)."""
MAX_EXPORT_BATCH = 512


def span_exporter(settings: Settings) -> SpanExporter:
    """The OTLP span exporter for the settings' protocol (grpc imported only when chosen)."""
    endpoint = settings.signal_endpoint("traces")
    if settings.protocols["traces"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpans,
        )

        return GrpcSpans(endpoint=endpoint, headers=settings.headers)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=endpoint, headers=settings.headers)


def metric_exporter(settings: Settings) -> MetricExporter:
    """The OTLP metric exporter for the settings' protocol."""
    endpoint = settings.signal_endpoint("metrics")
    if settings.protocols["metrics"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetrics,
        )

        return GrpcMetrics(endpoint=endpoint, headers=settings.headers)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(endpoint=endpoint, headers=settings.headers)


class GatedProcessor(SpanProcessor):
    """A `BatchSpanProcessor` behind a bounded, counted gate (see the module docstring)."""

    def __init__(self, exporter: SpanExporter, max_queue_size: int, dropped: Dropped) -> None:
        self._max = max_queue_size
        self._pending = 0
        self._lock = threading.Lock()
        self._dropped = dropped
        self._batch = BatchSpanProcessor(
            _CountingSpans(exporter, self, dropped),
            max_queue_size=max_queue_size,
            max_export_batch_size=min(MAX_EXPORT_BATCH, max_queue_size),
        )

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None or not context.trace_flags.sampled:
            return
        with self._lock:
            full = self._pending >= self._max
            if not full:
                self._pending += 1
        if full:
            self._dropped("spans", "queue_full", 1)
            return
        self._batch.on_end(span)

    def exported(self, count: int) -> None:
        """The export is done with `count` spans, sent or not."""
        with self._lock:
            self._pending -= count

    def pending(self) -> int:
        """Spans handed on whose export has not finished."""
        with self._lock:
            return self._pending

    def shutdown(self) -> None:
        self._batch.shutdown()  # type: ignore[no-untyped-call]
        if (left := self.pending()) > 0:  # the exporter's time ran out before they went
            self._dropped("spans", "shutdown", left)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._batch.force_flush(timeout_millis)


class _CountingSpans(SpanExporter):
    """The span exporter, counting what it failed to send."""

    def __init__(self, inner: SpanExporter, gate: GatedProcessor, dropped: Dropped) -> None:
        self._inner = inner
        self._gate = gate
        self._dropped = dropped

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self._inner.export(spans)
        except Exception:  # an exporter bug must not kill the export thread
            result = SpanExportResult.FAILURE
        self._gate.exported(len(spans))
        if result is not SpanExportResult.SUCCESS:
            self._dropped("spans", "export_failed", len(spans))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self._inner.force_flush(timeout_millis)


class CountingMetrics(MetricExporter):
    """The metric exporter, counting its failed exports (the next one carries the totals)."""

    def __init__(self, inner: MetricExporter, dropped: Dropped) -> None:
        super().__init__(
            preferred_temporality=inner._preferred_temporality,
            preferred_aggregation=inner._preferred_aggregation,
        )
        self._inner = inner
        self._dropped = dropped

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        try:
            result = self._inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        except Exception:
            result = MetricExportResult.FAILURE
        if result is not MetricExportResult.SUCCESS:
            self._dropped("metrics", "export_failed", 1)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis, **kwargs)
