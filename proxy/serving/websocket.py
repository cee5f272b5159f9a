"""WebSocket sessions under `/v1/` (the Realtime API, the Responses API's WebSocket mode),
relayed message for message.

The proxy checks the proxy key and the path as it does for HTTP, and picks the route by path,
headers and the `model` query parameter (there is no body to read a model from). It then
opens the same path on the route's upstream (`http` becomes `ws`, `https` `wss`) with the
client's headers cleaned as for HTTP (a configured upstream key replaces the client's) and
the client's subprotocols offered. The client's handshake is answered only once the
upstream has accepted, with the subprotocol the upstream chose, so a refusal reaches the
client as the upstream's own status and body. Messages are then relayed unchanged both
ways, text as text and binary as binary, until one side closes; its close code and reason
are passed on. Neither side gets permessage-deflate, and a message over
`server.max_ws_message_mb` either way ends the session (1009): 16 KB of deflate inflated to
16 MiB on the event loop, then was compressed again for the other side.

Nothing is curated: a session's messages are events the model already holds state for,
not a history the proxy could shorten. The proxy's own refusals (key, path, route, an
upstream it cannot reach) are OpenAI-shaped HTTP responses to the handshake, through
ASGI's `websocket.http.response` extension (uvicorn has it), else a close before accept
(a 403).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import suppress
from urllib.parse import parse_qs

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from proxy.errors import ProxyError, no_route, upstream_timeout, upstream_unreachable
from proxy.serving.edge import Edge
from proxy.serving.guard import (
    CREDENTIALS,
    KeyRing,
    count_rejection,
    invalid_proxy_key,
    presented_credential,
)
from proxy.serving.incoming import header_map
from proxy.serving.paths import checked_path
from proxy.types import Headers, Message, Receive, Scope, Send
from proxy.upstream.hygiene import request_headers, upstream_url

HANDSHAKE = frozenset(
    (
        b"sec-websocket-key",
        b"sec-websocket-version",
        b"sec-websocket-extensions",
        b"sec-websocket-protocol",
        b"sec-websocket-accept",
        b"user-agent",  # passed on by its own argument
    )
)
UNSENDABLE_CODES = frozenset((1005, 1006, 1015))
"""Close codes that report a state and may not be sent in a close frame."""
DENIAL_DROPS = frozenset((b"content-length", b"transfer-encoding", b"connection", b"upgrade"))
FRAGMENT = 1 << 20
"""A message to the upstream longer than this goes in fragments this long (`_send`)."""


async def relay_websocket(
    scope: Scope, receive: Receive, send: Send, edge: Edge, keys: KeyRing
) -> None:
    """Serve one WebSocket session under `/v1/` (see the module docstring)."""
    if (await receive())["type"] != "websocket.connect":
        return
    try:
        upstream = await _open_upstream(scope, edge, keys)
    except InvalidStatus as refused:
        response = refused.response
        raw = [
            (k.lower().encode("latin-1"), v.encode("latin-1"))
            for k, v in response.headers.raw_items()
        ]
        await _deny(scope, send, response.status_code, raw, bytes(response.body or b""))
        return
    except ProxyError as err:
        extra = [(b"www-authenticate", b"Bearer")] if err.status == 401 else []
        json = (b"content-type", b"application/json")
        await _deny(scope, send, err.status, [json, *err.headers, *extra], err.body())
        return
    async with upstream:
        accept: Message = {"type": "websocket.accept", "subprotocol": upstream.subprotocol}
        await send(accept)
        await _pump(receive, send, upstream)


async def _open_upstream(scope: Scope, edge: Edge, keys: KeyRing) -> ClientConnection:
    headers: Headers = scope["headers"]
    if keys:
        if not keys.accepts(presented_credential(headers)):
            count_rejection(scope.get("state", {}), "invalid_proxy_key")
            raise invalid_proxy_key()
        headers = [h for h in headers if h[0] not in CREDENTIALS]
    target = checked_path(scope)
    query: bytes = scope["query_string"]
    model = parse_qs(query.decode("latin-1")).get("model", [None])[0]
    wanted = header_map(headers) if edge.route_by_headers else {}
    route = edge.curation.router.route(
        scope["path"], model if edge.route_by_model else None, wanted
    )
    if route is None:
        raise no_route()
    config = edge.config.upstreams[route.upstream]
    url = upstream_url(config.base_url, target, query)
    url = "ws" + url[4:] if url.startswith("http") else url  # http -> ws, https -> wss
    sent = request_headers(headers, config.authorization, config.kind)
    agent = next((v.decode("latin-1") for k, v in sent if k == b"user-agent"), None)
    try:
        return await connect(
            url,
            additional_headers=[
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in sent if k not in HANDSHAKE
            ],
            subprotocols=scope.get("subprotocols") or None,
            user_agent_header=agent,
            open_timeout=config.connect_timeout_s,
            # As the client's side (uvicorn_options): uncompressed, bounded.
            max_size=edge.config.server.limits.max_ws_message_bytes,
            compression=None,
            proxy=None,
        )
    except InvalidStatus:
        raise
    except TimeoutError:
        raise upstream_timeout() from None
    except (OSError, InvalidHandshake):
        raise upstream_unreachable() from None


async def _deny(scope: Scope, send: Send, status: int, headers: Headers, body: bytes) -> None:
    """Refuse the handshake with an HTTP response, or a close where the server has none."""
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})
        return
    kept = [(k, v) for k, v in headers if k not in DENIAL_DROPS]
    kept.append((b"content-length", str(len(body)).encode()))
    await send({"type": "websocket.http.response.start", "status": status, "headers": kept})
    await send({"type": "websocket.http.response.body", "body": body})


async def _send(upstream: ClientConnection, data: str | bytes) -> None:
    """Send one message upstream; one over `FRAGMENT` in fragments of that size, the loop
    let in between them. Encoding, masking and copying 16 MiB in one go held the loop for
    ~40 ms (a fragment: ~2.5 ms); RFC 6455 lets an intermediary fragment a message anew."""
    if len(data) <= FRAGMENT:
        await upstream.send(data)
        return

    async def fragments() -> AsyncIterator[str | bytes]:
        for start in range(0, len(data), FRAGMENT):
            yield data[start : start + FRAGMENT]
            await asyncio.sleep(0)

    await upstream.send(fragments())


async def _received(upstream: ClientConnection) -> AsyncIterator[str | bytes]:
    """The upstream's messages, each in the loop step after the one that read it: reading
    a 16 MiB message (joined and decoded) and handing it to the server (encoded and
    framed again) held the loop ~45 ms as one step; as two, ~15-28 ms each."""
    while True:
        pieces = [piece async for piece in upstream.recv_streaming()]
        if len(pieces) > 1 or len(pieces[0]) > FRAGMENT:  # a small one goes at once
            await asyncio.sleep(0)
        yield _joined(pieces)


def _joined(pieces: list[str | bytes]) -> str | bytes:
    """A message's fragments as one message (one fragment: itself, not copied)."""
    if len(pieces) == 1:
        return pieces[0]
    texts = [p for p in pieces if isinstance(p, str)]
    return "".join(texts) if texts else b"".join(p for p in pieces if isinstance(p, bytes))


async def _pump(receive: Receive, send: Send, upstream: ClientConnection) -> None:
    """Relay messages both ways until either side closes, then close the other."""
    client_gone = asyncio.Event()

    async def from_client() -> None:
        while True:
            message = await receive()
            if message["type"] == "websocket.receive":
                text = message.get("text")
                await _send(upstream, text if text is not None else message.get("bytes") or b"")
            elif message["type"] == "websocket.disconnect":
                client_gone.set()
                await upstream.close(message.get("code", 1000), message.get("reason") or "")
                return

    async def from_upstream() -> None:
        with suppress(ConnectionClosed):
            async for data in _received(upstream):
                kind = "text" if isinstance(data, str) else "bytes"
                await send({"type": "websocket.send", kind: data})
        if client_gone.is_set():
            return
        said = upstream.protocol.close_rcvd
        if said is not None and said.code not in UNSENDABLE_CODES:
            code, reason = said.code, said.reason
        else:
            code, reason = (1000 if said is not None else 1011), ""
        await send({"type": "websocket.close", "code": code, "reason": reason})

    tasks = [asyncio.create_task(from_client()), asyncio.create_task(from_upstream())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with suppress(asyncio.CancelledError, ConnectionClosed, OSError):
                await task
