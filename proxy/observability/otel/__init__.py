"""OpenTelemetry: a span per proxied request and the GenAI client metrics, exported over OTLP.

Off unless `otel.enabled` (`proxy.config.otel`); this package, and with it the SDK, is
imported only then, so a proxy without the `otel` extra serves as before. When on,
`open_otel` builds this worker's tracer and meter providers (never the global ones) and
yields what the app needs: the `Tracer` that starts each request's span in
`proxy.serving.forwarding`, and the observer that ends it (`spans.SpanObserver`).

Export happens in the SDK's threads: a batch span processor behind a bounded queue
(`export.GatedProcessor`) and a periodic metric reader. Whatever is lost on the way is
counted in `curator_otel_dropped_total`; serving never waits for the collector. On shutdown
the providers get `SHUTDOWN_TIMEOUT_S` to send what is queued, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

from proxy.config.loader import Config
from proxy.observability.exchange import Observer, Tracer
from proxy.observability.otel.content import ContentCapture
from proxy.observability.otel.export import (
    CountingMetrics,
    Dropped,
    GatedProcessor,
    metric_exporter,
    span_exporter,
)
from proxy.observability.otel.meters import GenAIMeters
from proxy.observability.otel.settings import Settings, resolve
from proxy.observability.otel.spans import SpanObserver
from proxy.observability.otel.trace import Tracing

log = logging.getLogger("curator.otel")

SCOPE = "context-curator"
"""The instrumentation scope's name on every span and metric."""
SHUTDOWN_TIMEOUT_S = 5.0
DISTRIBUTION = "context-curator"


@dataclass(frozen=True, slots=True)
class Otel:
    """What the lifespan hands the app: the span starter (None: traces off) and the observer."""

    tracing: Tracer | None
    observer: Observer


@asynccontextmanager
async def open_otel(
    config: Config, dropped: Dropped, env: Mapping[str, str] | None = None
) -> AsyncIterator[Otel | None]:
    """This worker's OpenTelemetry export (None when off), shut down on exit."""
    settings = resolve(config.otel, os.environ if env is None else env)
    if settings is None:
        yield None
        return
    release = _version()
    resource = Resource.create({"service.name": settings.service_name, "service.version": release})
    async with AsyncExitStack() as stack:
        tracer_provider = _tracer_provider(settings, resource, dropped)
        meter_provider = _meter_provider(settings, resource, dropped)
        for provider in (tracer_provider, meter_provider):
            if provider is not None:
                stack.push_async_callback(_shutdown, provider)
        tracer = tracer_provider.get_tracer(SCOPE, release) if tracer_provider else None
        meter = meter_provider.get_meter(SCOPE, release) if meter_provider else None
        content = ContentCapture(config.audit.redact) if settings.capture_content else None
        observer = SpanObserver(tracer, GenAIMeters(meter) if meter else None, content)
        log.info(
            "OpenTelemetry: traces %s, metrics %s, over %s",
            "on" if tracer else "off",
            "on" if meter else "off",
            "/".join(sorted(set(settings.protocols.values()))),
        )
        yield Otel(Tracing(tracer) if tracer else None, observer)


def _tracer_provider(
    settings: Settings, resource: Resource, dropped: Dropped
) -> TracerProvider | None:
    if not settings.traces:
        return None
    provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER
    gate = GatedProcessor(span_exporter(settings), settings.max_queue_size, dropped)
    provider.add_span_processor(gate)
    return provider


def _meter_provider(
    settings: Settings, resource: Resource, dropped: Dropped
) -> MeterProvider | None:
    if not settings.metrics:
        return None
    # The interval: OTEL_METRIC_EXPORT_INTERVAL (ms), 60 s by default.
    reader = PeriodicExportingMetricReader(CountingMetrics(metric_exporter(settings), dropped))
    return MeterProvider(resource=resource, metric_readers=[reader])


def _version() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


async def _shutdown(provider: TracerProvider | MeterProvider) -> None:
    """Send what is queued, off the loop, for at most `SHUTDOWN_TIMEOUT_S`."""
    if isinstance(provider, MeterProvider):
        call = lambda: provider.shutdown(timeout_millis=SHUTDOWN_TIMEOUT_S * 1000)  # noqa: E731
    else:
        call = provider.shutdown
    try:
        await asyncio.wait_for(asyncio.to_thread(call), SHUTDOWN_TIMEOUT_S + 1)
    except TimeoutError:
        log.warning("OpenTelemetry: the collector took too long; what was queued is lost")
