"""The gate in front of the proxy, as pure-ASGI middleware: proxy keys, body size, overload.

`GET /healthz` and non-HTTP scopes (the lifespan) pass untouched. Every other request, in
this order:
1. Proxy key, when `auth.keys` is set: `Authorization: Bearer <key>` (or, from Azure
   clients, `api-key: <key>`) must name one, else 401 `invalid_proxy_key`. Keys are
   compared as SHA-256 digests with `hmac.compare_digest` against every key, with no early
   exit, so neither a key's content nor its length nor its position shows in the timing.
   Both headers are then removed: a proxy key is not an upstream credential and must never
   reach the upstream.
2. Body size: a Content-Length over `server.max_body_mb` gets 413 `request_too_large`
   before one byte of the body is read. A body without one (chunked) is counted as it is
   read; the read that crosses the limit raises that same 413 inside the app, which
   answers it and records the exchange.
3. Overload: beyond `server.max_inflight` proxied (`/v1/*`) requests in flight in this
   worker, a fast 503 `proxy_overloaded` with Retry-After instead of an unbounded queue. A
   proxied request's body is read first, and only a complete one takes a slot: a client
   still sending (slowly, say) holds no slot, and the connection guard
   (`proxy.serving.connection_guard`) ends its wait after `server.body_timeout_s` with 408.
   A body that fails (too large, timed out, client gone) reaches the app as that failure,
   which records the exchange. Other paths (/metrics) are not counted, so a scrape still
   answers under overload.

Answers here are not exchanges (the app never saw them), so they reach no observer; they
are counted in `curator_rejected_total{reason}`.
Nothing here buffers or touches the response: streams go through untouched, and a
client that leaves is still seen by the app's own `receive`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from proxy.config.auth import AuthConfig
from proxy.config.limits import Limits
from proxy.config.loader import Config
from proxy.config.upstreams import is_loopback
from proxy.config.viewer import PUBLIC_PREFIX
from proxy.errors import JSON_HEADERS, ProxyError, request_too_large
from proxy.protocols.vendor import vendor_of
from proxy.serving.conn_limits import cut_short
from proxy.types import ASGIApp, Message, Receive, Scope, Send

OPEN_PATHS = frozenset({"/healthz"})
PROXIED = "/v1/"
"""Only proxied requests count against `max_inflight`."""
RETRY_AFTER_S = 1
AUTHORIZATION = b"authorization"
API_KEY = b"api-key"
"""Azure's header; Azure clients send the proxy key there instead."""
X_API_KEY = b"x-api-key"
"""Anthropic's header; Anthropic clients (the SDKs, Claude Code) send the proxy key there."""
CREDENTIALS = frozenset({AUTHORIZATION, API_KEY, X_API_KEY})
PROXY_CREDENTIAL = "curator.proxy_credential"
"""Scope key: the proxy key a request was let in with (its credential headers are removed),
as an Authorization value, so the audit log can fingerprint which client sent it."""


def invalid_proxy_key() -> ProxyError:
    return ProxyError(
        401,
        "invalid_proxy_key",
        "Missing or invalid proxy key. Send it as 'Authorization: Bearer <key>' (or, from "
        "an Anthropic client, as 'x-api-key: <key>').",
    )


def proxy_overloaded() -> ProxyError:
    return ProxyError(
        503,
        "proxy_overloaded",
        "The proxy is handling too many requests; retry after a short wait.",
        type_="server_error",
    )


class KeyRing:
    """The proxy keys, held as digests and compared in constant time."""

    __slots__ = ("_digests",)

    def __init__(self, keys: Iterable[str]) -> None:
        self._digests = tuple(_digest(key.encode()) for key in keys)

    def __bool__(self) -> bool:
        return bool(self._digests)

    def accepts(self, authorization: bytes | None) -> bool:
        """Whether an Authorization header value is `Bearer <one of the keys>`."""
        token = _bearer(authorization)
        presented = _digest(token)
        found = False
        for digest in self._digests:  # every key, always: no early exit
            found |= hmac.compare_digest(presented, digest)
        return found and bool(token)


def _digest(value: bytes) -> bytes:
    return hashlib.sha256(value).digest()


def _bearer(authorization: bytes | None) -> bytes:
    if authorization is None:
        return b""
    scheme, _, token = authorization.strip().partition(b" ")
    return token.strip() if scheme.lower() == b"bearer" else b""


class Inflight:
    """Proxied requests of this worker inside the app right now (one event loop: no lock).

    The guard counts them; the chat path reads the count (see `proxy.curation.plan.plan_chat`)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class Guard:
    """Pure-ASGI middleware enforcing proxy keys, the body limit and `max_inflight`."""

    def __init__(self, app: ASGIApp, *, config: Config, inflight: Inflight | None = None) -> None:
        self.app = app
        limits: Limits = config.server.limits
        self._keys = KeyRing(config.auth.keys)
        self._max_body = limits.max_body_bytes
        self._max_inflight = limits.max_inflight
        self._body_timeout_s = limits.body_timeout_s
        self._inflight = inflight if inflight is not None else Inflight()
        # `viewer.public`: the viewer checks its own admin keys (a browser cannot send a
        # proxy key when it follows a link).
        self._viewer = PUBLIC_PREFIX + "/" if config.viewer.public else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"] in OPEN_PATHS
            or (self._viewer is not None and scope["path"].startswith(self._viewer))
        ):
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        served = scope  # the server's own scope (the connection guard flags a body timeout there)
        if self._keys:
            presented = presented_credential(headers)
            if not self._keys.accepts(presented):
                err, challenge = invalid_proxy_key(), (b"www-authenticate", b"Bearer")
                await _answer(scope, send, err, challenge)
                return
            kept = [h for h in headers if h[0] not in CREDENTIALS]
            scope = {**scope, "headers": kept, PROXY_CREDENTIAL: presented}
        length = _first(headers, b"content-length")
        if length is not None and length.isdigit() and int(length) > self._max_body:
            await _answer(scope, send, request_too_large(self._max_body))
            return
        if not scope["path"].startswith(PROXIED):  # /metrics answers even when overloaded
            counted = receive if length is not None else _counted(receive, self._max_body)
            await self.app(scope, counted, send)
            return
        first = await _read_body(served, receive, self._max_body, self._body_timeout_s)
        receive = _replaying(first, receive)
        if isinstance(first, ProxyError) or first["type"] != "http.request":
            await self.app(scope, receive, send)  # the app answers or records the failure
            return
        del first  # the app reads it from `receive`; held here, it would outlive its use
        inflight = self._inflight
        if inflight.count >= self._max_inflight:
            retry = (b"retry-after", str(RETRY_AFTER_S).encode())
            await _answer(scope, send, proxy_overloaded(), retry)
            return
        inflight.count += 1
        try:
            await self.app(scope, receive, send)
        finally:
            inflight.count -= 1


def presented_credential(headers: Sequence[tuple[bytes, bytes]]) -> bytes | None:
    """The credential a request presents, as an Authorization value (Azure's api-key and
    Anthropic's x-api-key too, when there is no Authorization)."""
    authorization = _first(headers, AUTHORIZATION)
    if authorization is not None:
        return authorization
    api_key = _first(headers, API_KEY) or _first(headers, X_API_KEY)
    return b"Bearer " + api_key if api_key is not None else None


def _first(headers: Sequence[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


async def _read_body(
    scope: Scope, receive: Receive, limit: int, timeout_s: float
) -> Message | ProxyError:
    """The whole body as one message; or the disconnect, or the error, that ended it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return cut_short(scope, timeout_s) or message
        chunk: bytes = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return request_too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body", False):
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}


def _replaying(first: Message | ProxyError, receive: Receive) -> Receive:
    """`receive` that first gives (or raises) `first`, then reads the connection again."""
    pending = [first]

    async def replay() -> Message:
        if not pending:
            return await receive()
        item = pending.pop()
        if isinstance(item, ProxyError):
            raise item
        return item

    return replay


def _counted(receive: Receive, limit: int) -> Receive:
    """`receive` that raises 413 once the body read so far exceeds `limit` bytes."""
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        seen += len(message.get("body", b""))
        if seen > limit:
            raise request_too_large(limit)
        return message

    return counted


async def _answer(scope: Scope, send: Send, err: ProxyError, *extra: tuple[bytes, bytes]) -> None:
    _count(scope, err.code)
    body = err.body(vendor_of(scope["path"], scope["headers"]))
    headers = [*JSON_HEADERS, (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _count(scope: Scope, reason: str) -> None:
    count_rejection(scope.get("state", {}), reason)


def count_rejection(state: Mapping[str, Any], reason: str) -> None:
    """Count a rejection in the worker's metrics (the lifespan state holds the live edge)."""
    live = state.get("edge")
    metrics = getattr(getattr(live, "current", None), "metrics", None)
    if metrics is not None:
        metrics.rejected.labels(reason).inc()


# -- the bind check `curator serve` runs ------------------------------------------------
def bind_refusal(config: Config, host: str) -> str | None:
    """Why serving `config` on `host` would let anyone spend an upstream key, or None.

    Refused: a non-loopback address, an upstream with an `api_key` (or `user:password` in its
    URL), no `auth.keys`, and no
    `auth.allow_unauthenticated: true`.
    """
    auth: AuthConfig = config.auth
    if auth.enabled or auth.allow_unauthenticated or is_loopback(host):
        return None
    keyed = [u.name for u in config.upstreams.values() if u.authorization]
    if not keyed:
        return None
    names = ", ".join(repr(name) for name in keyed)
    return (
        f"{config.source}: refusing to listen on {host}: upstream {names} has an api_key "
        "(or URL credentials) and auth.keys is empty, so anyone who can reach the proxy "
        "would spend that key. Set "
        "auth.keys (clients then send 'Authorization: Bearer <key>'), listen on 127.0.0.1, "
        "or set auth.allow_unauthenticated: true if this exposure is intended."
    )
