"""What the proxy may show of a URL or of an upstream failure, in logs, errors and
`curator check`.

Clients put keys in query strings (`?api-key=`, `?key=`) and operators put credentials in
URLs (`https://user:key@host`); httpx's exception messages quote the full URL and the
upstream's malformed status line or header bytes verbatim. So a log line gets
`scheme://host[:port]/path` at most and a reason made from the exception's type, never its
message: a class's own `safe_reason` (every failure of `proxy.upstream.h1_client` has one),
else the table below.
"""

from __future__ import annotations

import errno
from urllib.parse import urlsplit, urlunsplit

import httpx

from policies.urls import masked_url

__all__ = ["failure_reason", "loggable_url", "masked_url"]

_REASONS: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], str], ...] = (
    ((httpx.ConnectTimeout, httpx.PoolTimeout), "connect timeout"),
    ((httpx.ReadTimeout, httpx.WriteTimeout), "read timeout"),
    ((TimeoutError, httpx.TimeoutException), "timeout"),
    (httpx.ConnectError, "cannot connect"),
    ((httpx.RemoteProtocolError, httpx.LocalProtocolError), "HTTP protocol error"),
    ((httpx.TransportError, OSError), "transport error"),
)


def loggable_url(url: str) -> str:
    """`scheme://host[:port]/path`: no user, password, query or fragment."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<invalid URL>"
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def failure_reason(exc: BaseException) -> str:
    """`<ExceptionType>: <what went wrong>` from the type and errno only: httpx's messages
    quote the URL (with its query) and the upstream's raw bytes."""
    reason = getattr(type(exc), "safe_reason", None)
    if not isinstance(reason, str):
        reason = next((text for kinds, text in _REASONS if isinstance(exc, kinds)), "error")
    code = _errno(exc)
    if code:
        reason += f" ({errno.errorcode.get(code, code)})"
    return f"{type(exc).__name__}: {reason}"


def _errno(exc: BaseException) -> int | None:
    if isinstance(exc, OSError) and isinstance(exc.errno, int):
        return exc.errno
    return None
