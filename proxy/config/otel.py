"""The `otel:` config section -> `OtelConfig`: OpenTelemetry traces and GenAI metrics over OTLP.

```yaml
otel:
  enabled: false            # default off; needs the `otel` extra
  service_name: curator     # default $OTEL_SERVICE_NAME, else context-curator
  endpoint: http://collector:4318   # default $OTEL_EXPORTER_OTLP_ENDPOINT, else localhost
  protocol: http/protobuf   # or grpc; default $OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf
  headers: {x-api-key: ${COLLECTOR_KEY}}   # default $OTEL_EXPORTER_OTLP_HEADERS
  traces: true              # spans (also off with OTEL_TRACES_EXPORTER=none)
  metrics: true             # GenAI metrics (also off with OTEL_METRICS_EXPORTER=none)
  capture_content: false    # true: the messages the model saw, redacted as the audit redacts
  max_queue_size: 2048      # spans waiting for export; past it spans are dropped and counted
```

A key left out falls back to the standard `OTEL_*` variable, read when the proxy starts
(`proxy.observability.otel`). Kept apart from it so that loading a config never imports the
OpenTelemetry SDK; the loader only checks that the SDK is installed when the section is on.
"""

from __future__ import annotations

import importlib.util
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

from policies import validate as v
from policies.validate import Reader, describe
from policies.yamlsrc import KeyPath

KEYS = (
    "enabled",
    "service_name",
    "endpoint",
    "protocol",
    "headers",
    "traces",
    "metrics",
    "capture_content",
    "max_queue_size",
)
PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_QUEUE = 2048
EXTRA_HINT = "pip install 'context-curator[otel]'"
_NO_HEADERS: Mapping[str, str] = types.MappingProxyType({})


@dataclass(frozen=True, slots=True)
class OtelConfig:
    """Whether and where traces and GenAI metrics are exported (None: the OTEL_* variable)."""

    enabled: bool = False
    service_name: str | None = None
    endpoint: str | None = None
    """The collector's base URL; the http exporter appends /v1/traces and /v1/metrics."""
    protocol: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: _NO_HEADERS)
    traces: bool = True
    metrics: bool = True
    capture_content: bool = False
    max_queue_size: int = DEFAULT_QUEUE


def read_otel(read: Reader, value: object, path: KeyPath) -> OtelConfig:
    """Read an `otel:` mapping, reporting problems into the loader's shared `Reader`."""
    data = read.mapping(value, path, KEYS)
    if data is None:
        return OtelConfig()
    config = OtelConfig(
        enabled=read.get(data, "enabled", path, False, v.boolean),
        service_name=read.get(data, "service_name", path, None, v.optional_text) or None,
        endpoint=read.get(data, "endpoint", path, None, _optional_url) or None,
        protocol=read.get(data, "protocol", path, None, _optional_protocol),
        headers=types.MappingProxyType(_headers(read, data.get("headers"), (*path, "headers"))),
        traces=read.get(data, "traces", path, True, v.boolean),
        metrics=read.get(data, "metrics", path, True, v.boolean),
        capture_content=read.get(data, "capture_content", path, False, v.boolean),
        max_queue_size=read.get(data, "max_queue_size", path, DEFAULT_QUEUE, v.int_in(1)),
    )
    if config.enabled and not sdk_installed():
        read.problems.add(
            (*path, "enabled"), f"needs the OpenTelemetry SDK, which is not installed: {EXTRA_HINT}"
        )
    return config


def sdk_installed() -> bool:
    """Whether the `otel` extra's SDK and OTLP exporters can be imported."""
    names = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")
    try:
        return all(importlib.util.find_spec(name) is not None for name in names)
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _headers(read: Reader, value: object, path: KeyPath) -> dict[str, str]:
    if value is None:
        return {}
    headers: dict[str, str] = {}
    for name, item, where in read.named(value, path):
        if not isinstance(item, str | int) or isinstance(item, bool):
            read.problems.add(where, f"expected a text value, got {describe(item)}")
            continue
        headers[name.lower()] = str(item)
    return headers


def _optional_url(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        return "expected a URL such as http://collector:4318"
    return None


def _optional_protocol(value: object) -> str | None:
    if value is None:
        return None
    return v.one_of(*PROTOCOLS)(value)
