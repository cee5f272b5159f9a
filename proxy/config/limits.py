"""What one worker tolerates: body size, requests in flight, request shape, shutdown grace.

Read from the `server:` section (next to host and port), validated at load:
```yaml
server:
  max_body_mb: 32        # bigger bodies get 413 request_too_large (1-64)
  max_inflight: 1024     # per worker; beyond it a fast 503 proxy_overloaded with Retry-After
  max_messages: 10000    # a curated request with more messages gets 400 too_many_messages
  max_json_depth: 64     # a curated body nested deeper gets 400 nesting_too_deep (16-254)
  shutdown_grace_s: 20   # on SIGTERM, in-flight requests (streams too) get this long to finish
  max_header_kb: 64      # a bigger request head gets 431 and the connection is closed (1-1024)
  header_timeout_s: 10   # a request head must be complete this long after the connection is
                         # opened or the previous response ended, else the connection is closed
  body_timeout_s: 30     # a body must be complete this long after its head, else 408
  max_connections: null  # per worker; past it new connections get a fast 503 and are closed
                         # (null: sized from the open-file limit, see proxy.serving.conn_limits)
  max_ws_message_mb: 16  # a WebSocket message over this, either way, closes the session (1009)
```
The guard (proxy/serving/guard.py) enforces body size and max_inflight before the app runs;
the connection guard (proxy.serving.connection_guard) enforces the last four before any
request reaches the app; each protocol (`proxy.protocols`) enforces the shape limits when
it parses a body, before curation (`proxy.protocols.wire`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies import validate as v
from policies.validate import Reader
from policies.yamlsrc import KeyPath

MIB = 1024 * 1024
HARD_MAX_BODY_MB = 64
"""The app's own cap on a buffered body (`proxy.serving.app.MAX_BODY_BYTES`); a limit above it
would never be reached."""
ORJSON_MAX_DUMP_DEPTH = 254
"""orjson serializes at most this many levels; a deeper body could be parsed but never
re-encoded after curation, nor written to the audit log."""
LIMIT_KEYS = (
    "max_body_mb",
    "max_inflight",
    "max_messages",
    "max_json_depth",
    "shutdown_grace_s",
    "max_header_kb",
    "header_timeout_s",
    "body_timeout_s",
    "max_connections",
    "max_ws_message_mb",
)
MAX_CONNECTIONS_CAP = 10**6


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-worker limits from the `server:` section (see the module docstring)."""

    max_body_mb: int = 32
    max_inflight: int = 1024
    max_messages: int = 10_000
    max_json_depth: int = 64
    shutdown_grace_s: float = 20.0
    """Plus up to 5 s to flush the audit queue: still inside the 30 s an orchestrator
    (Kubernetes, Docker) gives by default between SIGTERM and SIGKILL."""
    max_header_kb: int = 64
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int | None = None
    """None: sized from RLIMIT_NOFILE when serving (`conn_limits.connection_limit`)."""
    max_ws_message_mb: int = 16
    """The largest WebSocket message relayed, either way. Messages go uncompressed (no
    permessage-deflate is negotiated): 16 KB of deflate on the wire inflated to 16 MiB on
    the event loop, and was compressed again for the other side."""

    @property
    def max_body_bytes(self) -> int:
        return self.max_body_mb * MIB

    @property
    def max_ws_message_bytes(self) -> int:
        return self.max_ws_message_mb * MIB


def read_limits(read: Reader, data: Mapping[Any, Any], path: KeyPath) -> Limits:
    """The limit keys of an already-read `server:` mapping; problems go to `read`."""
    d = Limits()
    grace = read.get(data, "shutdown_grace_s", path, d.shutdown_grace_s, _seconds)
    return Limits(
        max_body_mb=read.get(data, "max_body_mb", path, d.max_body_mb, v.int_in(1, 64)),
        max_inflight=read.get(data, "max_inflight", path, d.max_inflight, v.int_in(1, 10**6)),
        max_messages=read.get(data, "max_messages", path, d.max_messages, v.int_in(1, 10**7)),
        max_json_depth=read.get(
            data, "max_json_depth", path, d.max_json_depth, v.int_in(16, ORJSON_MAX_DUMP_DEPTH)
        ),
        shutdown_grace_s=float(grace),
        max_header_kb=read.get(data, "max_header_kb", path, d.max_header_kb, v.int_in(1, 1024)),
        header_timeout_s=float(
            read.get(data, "header_timeout_s", path, d.header_timeout_s, _timeout)
        ),
        body_timeout_s=float(read.get(data, "body_timeout_s", path, d.body_timeout_s, _timeout)),
        max_connections=read.get(
            data, "max_connections", path, d.max_connections, _connection_count
        ),
        max_ws_message_mb=read.get(
            data, "max_ws_message_mb", path, d.max_ws_message_mb, v.int_in(1, 64)
        ),
    )


def _seconds(value: Any) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 3600
    return None if ok else "expected a number of seconds from 0 to 3600"


def _timeout(value: Any) -> str | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 3600
    return None if ok else "expected a number of seconds above 0, at most 3600"


def _connection_count(value: Any) -> str | None:
    if value is None or v.int_in(1, MAX_CONNECTIONS_CAP)(value) is None:
        return None
    return f"expected an integer from 1 to {MAX_CONNECTIONS_CAP}, or null (from the fd limit)"
