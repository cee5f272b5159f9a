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
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from proxy.observability.exchange import new_id
from proxy.serving.admin_conns import MAX_CONNECTIONS, Connections
from proxy.viewer.app import REQUEST_ID, Viewer
from proxy.viewer.wire import MAX_BODY_BYTES, REASONS, Reply, ViewRequest

log = logging.getLogger("curator.admin")

Render = Callable[[], tuple[bytes, str]]
READ_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 16 * 1024
"""The longest request head (request line to blank line, included) answered; a longer one
gets 431, as on the client port (its `server.max_header_kb` defaults to 16 too)."""
LINGER_S = 2.0
LINGER_BYTES = 1024 * 1024
PLAIN = "text/plain; charset=utf-8"
HEAD_TOO_LARGE = "431 Request Header Fields Too Large"
INTERNAL_ERROR = "500 Internal Server Error"


@asynccontextmanager
async def admin_listener(
    host: str,
    port: int,
    path: str,
    render: Render | None,
    *,
    reuse_port: bool = False,
    viewer: Viewer | None = None,
    sock: socket.socket | None = None,
) -> AsyncIterator[asyncio.Server]:
    """Serve `render()` at `path` (None: no metrics) and `viewer` elsewhere on host:port
    until the block exits; on `sock` when given (bound and listening: `admin_socket`).
    On exit, answers still in progress are cancelled."""
    sock = sock or admin_socket(host, port, reuse_port=reuse_port)
    answering: set[asyncio.Task[Any]] = set()

    connections = Connections(MAX_CONNECTIONS)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not connections.admit(writer):
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        answering.add(task)
        try:
            await _answer(reader, writer, path, render, viewer, connections.headed)
        except asyncio.CancelledError:
            pass  # the listener is closing (asyncio logs a connection task ended cancelled)
        finally:
            answering.discard(task)
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
        for task in list(answering):
            task.cancel()
        await asyncio.gather(*answering, return_exceptions=True)
        await server.wait_closed()


def admin_socket(
    host: str, port: int, *, reuse_port: bool = False, listen: bool = True
) -> socket.socket:
    """The admin listener's socket, bound (and listening, unless not `listen`); an OSError
    names `metrics.port`."""
    try:
        return _listening_socket(host, port, reuse_port=reuse_port, listen=listen)
    except OSError as exc:
        shown = f"[{host}]" if ":" in host else host
        reason = exc.strerror or str(exc)
        raise OSError(
            exc.errno, f"metrics.port {port}: cannot listen on {shown}: {reason}"
        ) from exc


def _listening_socket(
    host: str, port: int, *, reuse_port: bool, listen: bool = True
) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if listen:
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
    """One request, one answer, then close: never a connection closed unanswered while a
    client waits (a head too large: 431, too slow: 408, a bug: 500 naming a request id)."""
    linger = False
    try:
        try:
            response = await _reply(reader, writer, path, render, viewer, headed)
        except asyncio.LimitOverrunError:
            limit = f"the request head is over {MAX_HEAD_BYTES // 1024} KiB\n"
            response = _response(HEAD_TOO_LARGE, limit.encode(), PLAIN, head=False)
            linger = True  # unread bytes at close would reset the connection, 431 unread
        except TimeoutError:
            response = _response("408 Request Timeout", b"request timeout\n", PLAIN, head=False)
        except Exception:  # a bug must not take the listener down, nor go unanswered
            rid = new_id()
            log.exception("admin listener: answering a request failed, request id %s", rid)
            body = f"internal error; the proxy's log names it with request id {rid}\n"
            extra = ((REQUEST_ID, rid),)
            response = _response(INTERNAL_ERROR, body.encode(), PLAIN, head=False, extra=extra)
        writer.write(response)
        await writer.drain()
        if linger:
            await _linger(reader, writer)
    except (asyncio.IncompleteReadError, OSError):
        pass  # the client went away: nobody to answer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def _reply(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    path: str,
    render: Render | None,
    viewer: Viewer | None,
    headed: Callable[[asyncio.StreamWriter], None],
) -> bytes:
    """The whole response to the request `reader` holds."""
    async with asyncio.timeout(READ_TIMEOUT_S):
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > MAX_HEAD_BYTES:  # readuntil's limit leaves out the blank line
            raise asyncio.LimitOverrunError("request head too large", len(head))
        headed(writer)
        target = head.partition(b" ")[2].partition(b" ")[0].decode("latin-1")
        viewing = viewer is not None and target.partition("?")[0] != path
        request = await _view_request(reader, head) if viewing else None
    if viewer is not None and request is not None:
        reply = await asyncio.to_thread(viewer.handle, request)
        return _view_response(reply, head=request.method == "HEAD")
    status, body, content_type = await _route(head, path, render)
    return _response(status, body, content_type, head=head.startswith(b"HEAD "))


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half-close, then read what the client still sends (up to `LINGER_BYTES`, for up to
    `LINGER_S`), so the close does not reset the connection before it read the answer."""
    if writer.can_write_eof():
        writer.write_eof()
    left = LINGER_BYTES
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(LINGER_S):
            while left > 0 and (chunk := await reader.read(min(left, 65536))):
                left -= len(chunk)


async def _route(head: bytes, path: str, render: Render | None) -> tuple[str, bytes, str]:
    method, _, rest = head.partition(b" ")
    target = rest.partition(b" ")[0].decode("latin-1")
    if target.partition("?")[0] != path or render is None:
        return "404 Not Found", b"not found\n", PLAIN
    if method not in (b"GET", b"HEAD"):
        return "405 Method Not Allowed", b"method not allowed\n", PLAIN
    # Multiprocess mode reads every worker's files: off the event loop.
    body, content_type = await asyncio.to_thread(render)
    return "200 OK", body, content_type


def _response(
    status: str,
    body: bytes,
    content_type: str,
    *,
    head: bool,
    extra: tuple[tuple[str, str], ...] = (),
) -> bytes:
    lines = [
        f"HTTP/1.1 {status}",
        f"content-type: {content_type}",
        *(f"{name}: {value}" for name, value in extra),
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
