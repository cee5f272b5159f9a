"""The otel observer: ends a finished exchange's span and adds its children.

The request's span (`proxy.observability.otel.trace`) gets its GenAI name and attributes;
under it, a curated request gets a `curate` span with the proxy's own attributes, and under
that each summarizer model call its own GenAI span. Children are written after the fact
with the times the exchange noted, so nothing is traced while the request is being served.
The GenAI metrics are recorded from the same attributes, sampled or not.
"""

from __future__ import annotations

from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, set_span_in_context

from proxy.observability.exchange import ExchangeRecord, SummaryCall
from proxy.observability.otel.attributes import (
    body_attributes,
    curation_attributes,
    request_attributes,
    response_attributes,
)
from proxy.observability.otel.content import ContentCapture
from proxy.observability.otel.meters import GenAIMeters
from proxy.observability.otel.trace import LiveTrace


class SpanObserver:
    """An `Observer`: ends each exchange's span, writes its children, records the metrics."""

    __slots__ = ("_content", "_meters", "_tracer")

    def __init__(
        self, tracer: Tracer | None, meters: GenAIMeters | None, content: ContentCapture | None
    ) -> None:
        self._tracer = tracer
        self._meters = meters
        self._content = content

    def __call__(self, record: ExchangeRecord) -> None:
        trace = record.trace
        live = trace if isinstance(trace, LiveTrace) else None
        attributes = request_attributes(record, live.upstream_url if live else None)
        attributes.update(body_attributes(record.body))
        usage = record.usage()
        attributes.update(response_attributes(record, usage))
        if self._meters is not None:
            self._meters.record(record, attributes, usage)
        if live is None:
            return
        span = live.span
        if span.is_recording():
            operation = attributes.get("gen_ai.operation.name")
            model = record.model or attributes.get("gen_ai.response.model")
            name = f"{operation} {model}" if operation and model else operation
            span.update_name(str(name or f"{record.method} {record.path}"))
            span.set_attributes(attributes)
            if "error.type" in attributes:
                span.set_status(Status(StatusCode.ERROR))
            if self._content is not None and record.curated is not None:
                span.set_attribute(
                    "gen_ai.input.messages", self._content.input_messages(record.curated)
                )
            if record.protocol is not None and record.mode is not None:
                self._curation(record, live)
        span.end(end_time=live.start_ns + int(record.latency_s * 1e9))

    def _curation(self, record: ExchangeRecord, live: LiveTrace) -> None:
        if self._tracer is None:
            return
        started = record.curation_started
        start = live.at(started) if started is not None else live.start_ns
        end = start + int((record.curation_s or 0.0) * 1e9)
        span = self._tracer.start_span(
            "curate",
            context=set_span_in_context(live.span),
            kind=SpanKind.INTERNAL,
            attributes=curation_attributes(record),
            start_time=start,
        )
        for call in record.summary_calls:
            self._summary(call, span, record)
        span.end(end_time=end)

    def _summary(self, call: SummaryCall, parent: Span, record: ExchangeRecord) -> None:
        assert self._tracer is not None  # _curation checked
        model = call.request.model
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": model,
            "gen_ai.provider.name": call.request.upstream,
            "curator.summary_for": record.id,
        }
        if call.completion is not None:
            attributes["gen_ai.usage.input_tokens"] = call.completion.prompt_tokens
            attributes["gen_ai.usage.output_tokens"] = call.completion.completion_tokens
        else:
            attributes["error.type"] = type(call.error).__name__
        start = int(call.started_at * 1e9)
        span = self._tracer.start_span(
            f"chat {model}",
            context=set_span_in_context(parent),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=start,
        )
        if call.completion is None:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=start + int(call.latency_s * 1e9))
