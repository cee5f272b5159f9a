"""The admin listener: `GET <metrics.path>` on its own port, apart from the public listener,
and the audit viewer (`proxy.viewer`) on every other path when it is on.

A few lines of asyncio rather than a second uvicorn server: uvicorn's `Server` takes over
the process's signal handlers, which the main server already owns. A scrape is one small
HTTP/1.1 request per connection, so each connection answers one request and closes.

At most `MAX_CONNECTIONS` are open at once: past it, the one that has waited longest for its
request head is closed to make room (585 idle connections to this port once used up the
descriptors the public listener needed).

With `--workers N` every worker binds the port with SO_REUSEPORT; the kernel spreads
scrapes over the workers, and each one answers with every worker's metrics (multiprocess
mode), so any of them will do. Without workers the port is bound exclusively, so a second
proxy on the same port fails at startup instead of silently sharing it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from proxy.viewer.app import Viewer
from proxy.viewer.wire import MAX_BODY_BYTES, REASONS, Reply, ViewRequest

log = logging.getLogger("curator.admin")

Render = Callable[[], tuple[bytes, str]]
READ_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 16 * 1024
MAX_CONNECTIONS = 32
"""Open admin connections at once, per worker: well inside the descriptors the worker keeps
back from its public listener (`conn_limits.RESERVED_FDS`)."""


class _Connections:
    """The listener's open connections, and which of them still wait for a request head."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: set[asyncio.StreamWriter] = set()
        self.waiting: OrderedDict[asyncio.StreamWriter, None] = OrderedDict()

    def admit(self, writer: asyncio.StreamWriter) -> bool:
        """Count `writer` in, closing the longest-waiting one to make room if need be;
        False when every open connection is past its head (being answered)."""
        if len(self.open) >= self.limit:
            if not self.waiting:
                return False
            oldest, _ = self.waiting.popitem(last=False)
            self.open.discard(oldest)
            oldest.transport.abort()
        self.open.add(writer)
        self.waiting[writer] = None
        return True

    def headed(self, writer: asyncio.StreamWriter) -> None:
        self.waiting.pop(writer, None)

    def closed(self, writer: asyncio.StreamWriter) -> None:
        self.open.discard(writer)
        self.waiting.pop(writer, None)


@asynccontextmanager
async def admin_listener(
    host: str,
    port: int,
    path: str,
    render: Render | None,
    *,
    reuse_port: bool = False,
    viewer: Viewer | None = None,
) -> AsyncIterator[asyncio.Server]:
    """Serve `render()` at `path` (None: no metrics) and `viewer` elsewhere on host:port
    until the block exits."""
    try:
        sock = _listening_socket(host, port, reuse_port=reuse_port)
    except OSError as exc:
        raise OSError(exc.errno, f"metrics.port {port}: cannot listen on {host}: {exc}") from exc

    connections = _Connections(MAX_CONNECTIONS)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not connections.admit(writer):
            writer.transport.abort()
            return
        try:
            await _answer(reader, writer, path, render, viewer, connections.headed)
        finally:
            connections.closed(writer)

    server = await asyncio.start_server(handle, sock=sock, limit=MAX_HEAD_BYTES)
    if render is not None:
        log.info("metrics on http://%s:%d%s", host, port, path)
    if viewer is not None:
        log.info("audit viewer on http://%s:%d/requests", host, port)
    try:
        yield server
    finally:
        server.close()
        await server.wait_closed()


def _listening_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        sock.listen(64)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


async def _answer(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    path: str,
    render: Render | None,
    viewer: Viewer | None,
    headed: Callable[[asyncio.StreamWriter], None],
) -> None:
    try:
        async with asyncio.timeout(READ_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
            headed(writer)
            target = head.partition(b" ")[2].partition(b" ")[0].decode("latin-1")
            viewing = viewer is not None and target.partition("?")[0] != path
            request = await _view_request(reader, head) if viewing else None
        if viewer is not None and request is not None:
            reply = await asyncio.to_thread(viewer.handle, request)
            writer.write(_view_response(reply, head=request.method == "HEAD"))
        else:
            status, body, content_type = await _route(head, path, render)
            writer.write(_response(status, body, content_type, head=head.startswith(b"HEAD ")))
        await writer.drain()
    except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
        pass  # a client that went away or never sent a request: nothing to answer
    except Exception:  # a rendering bug must not take the listener down
        log.exception("metrics: answering a scrape failed")
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _route(head: bytes, path: str, render: Render | None) -> tuple[str, bytes, str]:
    method, _, rest = head.partition(b" ")
    target = rest.partition(b" ")[0].decode("latin-1")
    if target.partition("?")[0] != path or render is None:
        return "404 Not Found", b"not found\n", "text/plain; charset=utf-8"
    if method not in (b"GET", b"HEAD"):
        return "405 Method Not Allowed", b"method not allowed\n", "text/plain; charset=utf-8"
    # Multiprocess mode reads every worker's files: off the event loop.
    body, content_type = await asyncio.to_thread(render)
    return "200 OK", body, content_type


def _response(status: str, body: bytes, content_type: str, *, head: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {status}",
        f"content-type: {content_type}",
        f"content-length: {len(body)}",
        "connection: close",
    ]
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (b"" if head else body)


async def _view_request(reader: asyncio.StreamReader, head: bytes) -> ViewRequest:
    """The viewer's request from a head, plus the body a login form POST carries."""
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, _, rest = request_line.partition(" ")
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length", "0")
    size = int(length) if length.isdigit() else 0
    body = await reader.readexactly(size) if 0 < size <= MAX_BODY_BYTES else b""
    if size > MAX_BODY_BYTES:
        body = b"\x00" * (MAX_BODY_BYTES + 1)  # too large: the viewer refuses it unread
    return ViewRequest.parse(method, rest.partition(" ")[0], headers, body)


def _view_response(reply: Reply, *, head: bool) -> bytes:
    lines = [f"HTTP/1.1 {reply.status} {REASONS.get(reply.status, 'Unknown')}"]
    lines += [f"{name}: {value}" for name, value in reply.all_headers()]
    lines += [f"content-length: {len(reply.body)}", "connection: close"]
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (b"" if head else reply.body)
