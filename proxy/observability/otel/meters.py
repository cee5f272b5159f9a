"""The GenAI client metrics, recorded for each exchange a GenAI operation names.

`gen_ai.client.operation.duration` (s), `gen_ai.client.token.usage` ({token}, by
`gen_ai.token.type`) and, for streamed responses, `gen_ai.client.operation.time_to_first_chunk`
(s): the time from the request's arrival to the upstream's first body byte. Buckets are the
conventions' advice.
"""

from __future__ import annotations

from opentelemetry.metrics import Meter

from proxy.observability.exchange import ExchangeRecord
from proxy.observability.otel.attributes import Attributes
from proxy.protocols.base import Usage

DURATION_BUCKETS = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TOKEN_BUCKETS = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
METRIC_KEYS = (
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "server.address",
    "server.port",
    "error.type",
)
"""The span attributes the metrics carry too (the conventions' metric attributes)."""


class GenAIMeters:
    """The three instruments, on one meter."""

    __slots__ = ("duration", "first_chunk", "tokens")

    def __init__(self, meter: Meter) -> None:
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.first_chunk = meter.create_histogram(
            "gen_ai.client.operation.time_to_first_chunk",
            unit="s",
            description="Time to receive the first chunk of a streamed response.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )

    def record(self, record: ExchangeRecord, span: Attributes, usage: Usage | None) -> None:
        """Record one exchange; `span` is its span's attributes (only GenAI ones count)."""
        if "gen_ai.operation.name" not in span:
            return
        common = {key: span[key] for key in METRIC_KEYS if key in span}
        self.duration.record(record.latency_s, common)
        if usage is not None:
            for kind, count in (("input", usage.input_tokens), ("output", usage.output_tokens)):
                if count is not None:
                    self.tokens.record(count, {**common, "gen_ai.token.type": kind})
        if span.get("gen_ai.request.stream") is True and record.ttfb_s is not None:
            self.first_chunk.record(record.ttfb_s, common)
