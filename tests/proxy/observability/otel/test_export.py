"""The export's bounded gate and its drop counting (export.py), with exporters we control;
and how the `otel:` section and the OTEL_* variables resolve (settings.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from proxy.config.otel import OtelConfig
from proxy.observability.otel.export import GatedProcessor
from proxy.observability.otel.settings import resolve


class Exporter(SpanExporter):
    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS) -> None:
        self.result = result
        self.release = threading.Event()
        self.release.set()
        self.exported: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        self.exported.extend(s.name for s in spans)
        return self.result


class Drops:
    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}

    def __call__(self, signal: str, reason: str, count: int) -> None:
        self.counts[signal, reason] = self.counts.get((signal, reason), 0) + count


def spans(gate: GatedProcessor, count: int, provider: TracerProvider | None = None) -> None:
    provider = provider or TracerProvider()
    provider.add_span_processor(gate)
    tracer = provider.get_tracer("test")
    for i in range(count):
        tracer.start_span(f"s{i}").end()


def test_a_stalled_exporter_fills_the_queue_and_the_rest_is_counted() -> None:
    exporter, drops = Exporter(), Drops()
    exporter.release.clear()
    gate = GatedProcessor(exporter, 5, drops)
    spans(gate, 12)
    assert gate.pending() == 5
    assert drops.counts == {("spans", "queue_full"): 7}
    exporter.release.set()
    gate.force_flush()
    assert sorted(exporter.exported) == sorted(f"s{i}" for i in range(5))
    assert gate.pending() == 0
    gate.shutdown()
    assert drops.counts == {("spans", "queue_full"): 7}


def test_failed_exports_count_every_span_of_the_batch() -> None:
    drops = Drops()
    gate = GatedProcessor(Exporter(SpanExportResult.FAILURE), 100, drops)
    spans(gate, 3)
    gate.force_flush()
    assert drops.counts == {("spans", "export_failed"): 3}
    assert gate.pending() == 0
    gate.shutdown()


def test_spans_still_queued_at_shutdown_are_counted() -> None:
    exporter, drops = Exporter(), Drops()
    exporter.release.clear()
    gate = GatedProcessor(exporter, 10, drops)
    spans(gate, 4)
    threading.Timer(0.5, exporter.release.set).start()  # the export ends after shutdown began
    gate.shutdown()
    lost = drops.counts.get(("spans", "shutdown"), 0)
    assert lost + len(exporter.exported) == 4


def test_unsampled_spans_take_no_room() -> None:
    drops = Drops()
    gate = GatedProcessor(Exporter(), 1, drops)
    spans(gate, 5, TracerProvider(sampler=ALWAYS_OFF))
    assert gate.pending() == 0
    assert drops.counts == {}
    gate.shutdown()


def test_settings_off_unless_enabled_and_not_disabled_by_the_sdk_variables() -> None:
    on = OtelConfig(enabled=True)
    assert resolve(OtelConfig(), {}) is None
    assert resolve(on, {"OTEL_SDK_DISABLED": "true"}) is None
    both_off = {"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
    assert resolve(on, both_off) is None
    settings = resolve(on, {"OTEL_TRACES_EXPORTER": "none"})
    assert settings is not None
    assert (settings.traces, settings.metrics) == (False, True)


@pytest.mark.parametrize(
    ("config", "env", "expected"),
    [
        (OtelConfig(enabled=True), {}, ("context-curator", "http/protobuf", None)),
        (
            OtelConfig(enabled=True),
            {"OTEL_SERVICE_NAME": "edge", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            ("edge", "grpc", None),
        ),
        (
            OtelConfig(enabled=True, service_name="mine", endpoint="http://c:4318/", protocol=None),
            {"OTEL_SERVICE_NAME": "edge"},
            ("mine", "http/protobuf", "http://c:4318/v1/traces"),
        ),
        (
            OtelConfig(enabled=True, endpoint="http://c:4317", protocol="grpc"),
            {"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
            ("context-curator", "grpc", "http://c:4317"),
        ),
    ],
)
def test_config_keys_win_over_variables(
    config: OtelConfig, env: dict[str, str], expected: tuple[str, str, str | None]
) -> None:
    settings = resolve(config, env)
    assert settings is not None
    found = (
        settings.service_name,
        settings.protocols["traces"],
        settings.signal_endpoint("traces"),
    )
    assert found == expected
