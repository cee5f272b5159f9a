"""The viewer as a pure-ASGI app, for `viewer.public: true` (the client port, under
`/curator/`). The admin listener and `curator audit serve` call `Viewer.handle` directly."""

from __future__ import annotations

import asyncio
from urllib.parse import quote

from starlette.types import Receive, Scope, Send

from proxy.viewer.app import Viewer
from proxy.viewer.wire import MAX_BODY_BYTES, Reply, ViewRequest


class ViewerApp:
    """Serves `viewer` at paths under `prefix`; the prefix is cut before routing."""

    def __init__(self, viewer: Viewer, prefix: str) -> None:
        self.viewer = viewer
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
        }
        body = await _body(receive) if scope["method"] == "POST" else b""
        path = _target(scope).removeprefix(self.prefix) or "/"
        query = scope.get("query_string", b"").decode("latin-1")
        request = ViewRequest.parse(
            scope["method"], path + ("?" + query if query else ""), headers, body
        )
        reply = await asyncio.to_thread(self.viewer.handle, request)
        await _send(send, reply, head=scope["method"] == "HEAD")


def _target(scope: Scope) -> str:
    """The path as the client sent it, still percent-encoded, as the admin listener hands it
    to the viewer: the viewer decodes it once (the decoded `path` would be decoded twice, and
    an encoded `?` in it would start a query)."""
    raw = scope.get("raw_path")
    if isinstance(raw, bytes):
        return raw.decode("latin-1")
    return quote(scope["path"], safe="/:@!$&'()*+,;=~")


async def _body(receive: Receive) -> bytes:
    """The login form, read up to one byte past the limit (the viewer refuses more)."""
    chunks: list[bytes] = []
    size = 0
    while size <= MAX_BODY_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk: bytes = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send(send: Send, reply: Reply, *, head: bool) -> None:
    headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.all_headers()]
    headers.append((b"content-length", str(len(reply.body)).encode()))
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else reply.body})
