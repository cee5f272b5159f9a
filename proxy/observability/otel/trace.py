"""A request's span, started as the request arrives so the upstream request can carry it on.

The span continues the client's trace when the request brings a W3C `traceparent` (and
`tracestate`); the upstream request gets this span's `traceparent` in place of the client's,
so the model server's spans hang under ours. Everything else about the span (its name, its
attributes, its children) is filled in when the exchange ends (`proxy.observability.otel.spans`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry.trace import Span, SpanKind, Tracer, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

TRACE_HEADERS = (b"traceparent", b"tracestate")


@dataclass(slots=True)
class LiveTrace:
    """One request's open span, and the clock it started on (`ExchangeRecord.trace`)."""

    span: Span
    propagator: TraceContextTextMapPropagator
    start_ns: int
    """Epoch nanoseconds the span started."""
    start_perf: float
    """`perf_counter()` at the same moment: later perf readings map onto the span's clock."""
    upstream_url: str | None = None
    """The upstream's base URL, once routing chose it (the span's server address)."""

    def carry(
        self, headers: list[tuple[bytes, bytes]], upstream_url: str
    ) -> list[tuple[bytes, bytes]]:
        """`headers` with this span's trace context in place of the client's."""
        self.upstream_url = upstream_url
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier, context=set_span_in_context(self.span))
        kept = [(name, value) for name, value in headers if name.lower() not in TRACE_HEADERS]
        kept.extend(
            (name.encode("latin-1"), value.encode("latin-1")) for name, value in carrier.items()
        )
        return kept

    def at(self, perf: float) -> int:
        """The epoch nanoseconds of a `perf_counter()` reading taken during the request."""
        return self.start_ns + int((perf - self.start_perf) * 1e9)


class Tracing:
    """Starts the span of each proxied request (`proxy.serving.forwarding`)."""

    __slots__ = ("_propagator", "_tracer")

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer
        self._propagator = TraceContextTextMapPropagator()

    def start(self, headers: Sequence[tuple[bytes, bytes]]) -> LiveTrace:
        """A span for a request with these (ASGI, lower-cased) headers."""
        carrier = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in headers
            if name in TRACE_HEADERS
        }
        parent = self._propagator.extract(carrier) if carrier else None
        start_ns, start_perf = time.time_ns(), time.perf_counter()
        span = self._tracer.start_span(
            "proxy", context=parent, kind=SpanKind.CLIENT, start_time=start_ns
        )
        return LiveTrace(span, self._propagator, start_ns, start_perf)
