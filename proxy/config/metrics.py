"""The `metrics:` config section -> `MetricsConfig`, validated at load with `file:line: key.path`.

```yaml
metrics:
  enabled: true             # default true
  path: /metrics            # where Prometheus scrapes
  port: 9464                # optional: a separate admin listener (not the public one)
  host: 127.0.0.1           # admin listener interface (default: server.host)
  multiprocess_dir: /run/curator-metrics   # --workers N only (default: a fresh temp dir)
```

Kept apart from `proxy.observability.metrics.families` so that loading a config never
imports prometheus_client.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath

KEYS = ("enabled", "path", "port", "host", "multiprocess_dir")
RESERVED_PATHS = ("/healthz",)


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """Whether and where the Prometheus exposition is served."""

    enabled: bool = True
    path: str = "/metrics"
    port: int | None = None
    """Set: served on an admin listener on this port instead of the main listener."""
    host: str | None = None
    """The admin listener's interface; None means the main listener's host."""
    multiprocess_dir: str | None = None
    """Where workers keep their metric files with `--workers N`; None: a fresh temp dir."""


def read_metrics(
    read: Reader,
    value: object,
    path: KeyPath,
    *,
    base_dir: Path,
    server_port: int | None = None,
) -> MetricsConfig:
    """Read a `metrics:` mapping, reporting problems into the loader's shared `Reader`."""
    data = read.mapping(value, path, KEYS)
    if data is None:
        return MetricsConfig()
    default = MetricsConfig()
    raw_dir = read.get(data, "multiprocess_dir", path, None, v.optional_text)
    config = MetricsConfig(
        enabled=read.get(data, "enabled", path, default.enabled, v.boolean),
        path=read.get(data, "path", path, default.path, _endpoint_path),
        port=read.get(data, "port", path, None, _optional_port),
        host=read.get(data, "host", path, None, v.optional_text) or None,
        multiprocess_dir=str((base_dir / os.path.expanduser(raw_dir)).absolute())
        if raw_dir
        else None,
    )
    if config.port is not None and config.port == server_port:
        read.problems.add(
            (*path, "port"),
            f"must differ from server.port ({server_port}): the admin listener is separate; "
            "leave port out to serve metrics on the main listener",
        )
    return config


def _endpoint_path(value: object) -> str | None:
    if not isinstance(value, str) or not value.startswith("/") or len(value) < 2:
        return "expected a URL path such as /metrics"
    if value == "/v1" or value.startswith("/v1/"):
        return "expected a path outside /v1/ (every /v1/ path is proxied upstream)"
    if value in RESERVED_PATHS or any(c in value for c in "?# "):
        return f"expected a path other than {', '.join(RESERVED_PATHS)}, without ?, # or spaces"
    return None


def _optional_port(value: object) -> str | None:
    if value is None:
        return None
    return v.int_in(1, 65535)(value)
