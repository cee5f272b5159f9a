"""Per-connection limits, resolved for one worker, and the answers the connection guard gives.

`server.max_connections` defaults to what the open-file limit can carry: every served
connection may hold an upstream socket too, and the worker needs descriptors of its own
(listening socket, audit database and its WAL, log files, tokenizer files, DNS). `serve`
first raises the soft open-file limit to the hard one, as most servers do, since the soft
default (often 1024) is far below what a proxy holding idle keep-alive clients needs.
"""

from __future__ import annotations

import http
import logging
import resource
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from proxy.config.limits import MAX_CONNECTIONS_CAP, Limits
from proxy.errors import JSON_HEADERS, ProxyError

log = logging.getLogger("curator.server")

RESERVED_FDS = 128
"""Descriptors kept back from client connections for everything else the worker opens."""
BODY_TIMED_OUT = "curator.body_timed_out"
"""Scope key the connection guard sets when a request's body did not arrive in time: the
app then sees the disconnect as that 408, not as a client that left."""
TRAILERS_TOO_LARGE = "curator.trailers_too_large"
"""Scope key the connection guard sets (to the head limit) when a body's trailers passed
the head limit: the app then sees the disconnect as that 431."""
EVICTION_SCAN = 64
"""Connections looked at to find one to evict: bounded, so a flood costs O(1) per accept
(under a flood nearly every connection is an idle one)."""
LINGER_S = 2.0
"""After a 431, what the client still sends is read and dropped this long before closing:
closing with unread data makes the kernel reset the connection, and the client would then
likely never read the answer."""
FDS_PER_CONNECTION = 2
"""The client's socket and, while its request is forwarded, one upstream socket."""


@dataclass(frozen=True, slots=True)
class ConnLimits:
    """What the connection guard enforces (see `proxy.serving.connection_guard`)."""

    max_head_bytes: int = 64 * 1024
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 448


def conn_limits(limits: Limits) -> ConnLimits:
    """`limits`' connection keys, with `max_connections` sized from the fd limit if unset."""
    return ConnLimits(
        max_head_bytes=limits.max_header_kb * 1024,
        header_timeout_s=limits.header_timeout_s,
        body_timeout_s=limits.body_timeout_s,
        max_connections=limits.max_connections or connection_limit(),
    )


def connection_limit() -> int:
    """How many client connections this process's open-file limit carries."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS_CAP
    return max(1, min(MAX_CONNECTIONS_CAP, (soft - RESERVED_FDS) // FDS_PER_CONNECTION))


def raise_fd_limit() -> int:
    """Raise the soft open-file limit to the hard one (inherited by workers); the new soft."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or (hard != resource.RLIM_INFINITY and soft > hard):
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # e.g. RLIM_INFINITY beyond the kernel's nr_open
        log.warning("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
        return soft
    return hard


def check_fd_budget(limits: ConnLimits) -> None:
    """Warn when `max_connections` is more than the open-file limit can carry."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = limits.max_connections * FDS_PER_CONNECTION + RESERVED_FDS
    if soft != resource.RLIM_INFINITY and needed > soft:
        log.warning(
            "server.max_connections: %d connections may need %d open files, but the limit "
            "is %d (ulimit -n); past it, accepting connections fails",
            limits.max_connections,
            needed,
            soft,
        )


# -- the guard's answers ------------------------------------------------------------------
def request_header_too_large(limit: int) -> ProxyError:
    return ProxyError(
        431,
        "request_header_too_large",
        f"The request head (request line and headers) is over {limit} bytes.",
    )


def request_timeout(seconds: float) -> ProxyError:
    return ProxyError(
        408,
        "request_timeout",
        f"The request body did not arrive within {seconds:g} seconds.",
    )


def too_many_connections() -> ProxyError:
    return ProxyError(
        503,
        "too_many_connections",
        "The proxy has too many open connections; retry after a short wait.",
        type_="server_error",
    )


def closing_response(err: ProxyError) -> bytes:
    """`err` as a raw HTTP/1.1 response that closes the connection (written by the guard
    itself: no request cycle exists yet, or the app is still waiting for the body)."""
    body = err.body()
    phrase = http.HTTPStatus(err.status).phrase
    lines = [f"HTTP/1.1 {err.status} {phrase}".encode()]
    lines += [name + b": " + value for name, value in JSON_HEADERS]
    lines += [b"content-length: " + str(len(body)).encode(), b"connection: close"]
    if err.status == 503:
        lines.append(b"retry-after: 1")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def cut_short(scope: Mapping[str, Any], timeout_s: float) -> ProxyError | None:
    """Why the connection guard ended a request's body, if it did (else the client left)."""
    if scope.get(BODY_TIMED_OUT):
        return request_timeout(timeout_s)
    limit = scope.get(TRAILERS_TOO_LARGE)
    return request_header_too_large(limit) if limit is not None else None
