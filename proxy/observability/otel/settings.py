"""What the `otel:` section and the standard `OTEL_*` variables resolve to when the proxy starts.

A key set in the config wins; a key left out falls back to its variable, then to the
default. `OTEL_SDK_DISABLED=true` turns the whole export off, `OTEL_TRACES_EXPORTER=none`
and `OTEL_METRICS_EXPORTER=none` one signal each. What the exporters and processors read
themselves (timeouts, compression, TLS files, `OTEL_BSP_*`, `OTEL_METRIC_EXPORT_INTERVAL`,
`OTEL_TRACES_SAMPLER`, `OTEL_RESOURCE_ATTRIBUTES`) is left to them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from proxy.config.otel import OtelConfig

DEFAULT_SERVICE = "context-curator"
DEFAULT_PROTOCOL = "http/protobuf"
SIGNAL_PATHS = {"traces": "/v1/traces", "metrics": "/v1/metrics"}


@dataclass(frozen=True, slots=True)
class Settings:
    """The export as it will run: both signals' protocol and endpoint, and what is on."""

    service_name: str
    traces: bool
    metrics: bool
    capture_content: bool
    max_queue_size: int
    endpoint: str | None
    """The config's base URL; None: the exporters read `OTEL_EXPORTER_OTLP_*ENDPOINT`."""
    headers: dict[str, str] | None
    """The config's headers; None: the exporters read `OTEL_EXPORTER_OTLP_*HEADERS`."""
    protocols: Mapping[str, str]
    """Signal (traces, metrics) -> http/protobuf or grpc."""

    def signal_endpoint(self, signal: str) -> str | None:
        """The endpoint to hand `signal`'s exporter: the http one wants the full URL."""
        if self.endpoint is None or self.protocols[signal] == "grpc":
            return self.endpoint
        return self.endpoint.rstrip("/") + SIGNAL_PATHS[signal]


def resolve(config: OtelConfig, env: Mapping[str, str]) -> Settings | None:
    """The settings, or None when nothing is to be exported."""
    if not config.enabled or _true(env.get("OTEL_SDK_DISABLED")):
        return None
    traces = config.traces and env.get("OTEL_TRACES_EXPORTER", "otlp").strip() != "none"
    metrics = config.metrics and env.get("OTEL_METRICS_EXPORTER", "otlp").strip() != "none"
    if not (traces or metrics):
        return None
    return Settings(
        service_name=config.service_name or env.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE,
        traces=traces,
        metrics=metrics,
        capture_content=config.capture_content,
        max_queue_size=config.max_queue_size,
        endpoint=config.endpoint,
        headers=dict(config.headers) or None,
        protocols={signal: _protocol(config, env, signal) for signal in SIGNAL_PATHS},
    )


def _protocol(config: OtelConfig, env: Mapping[str, str], signal: str) -> str:
    if config.protocol is not None:
        return config.protocol
    named = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL"
    )
    # http/json is not offered by the SDK's OTLP exporters: protobuf over http instead.
    return "grpc" if (named or "").strip() == "grpc" else DEFAULT_PROTOCOL


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"
