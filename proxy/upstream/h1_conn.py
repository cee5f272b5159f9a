"""One HTTP/1.1 connection to an upstream (`proxy.upstream.h1_client` pools them).

The connection is an asyncio protocol: the request goes out as the bytes it was given, the
response is parsed by httptools (llhttp, the parser uvicorn serves with) into a `Response`
(`proxy.upstream.h1_response`). A response read to its end hands its connection back to
the pool at once, before the reader has taken the last chunks.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass
from typing import Protocol, cast

import httptools

from proxy.upstream.h1_response import BadResponse, BodyCut, ConnectionLost, Response

MAX_HEAD_BYTES = 1024 * 1024
"""The most a response's status line and headers may take (interim responses included):
past it the upstream is sending no HTTP the proxy relays (aiohttp allowed 8 KiB a line)."""


@dataclass(frozen=True, slots=True)
class Origin:
    """Where one pool's connections go."""

    host: str
    port: int
    tls: bool
    host_header: bytes
    """The Host header: the URL's authority (no user part)."""


class Keeper(Protocol):
    """The pool a connection goes back to."""

    loop: asyncio.AbstractEventLoop

    def release(self, conn: Connection) -> None: ...

    def forget(self, conn: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """One upstream connection: idle in its pool, or carrying one response."""

    def __init__(self, pool: Keeper, origin: Origin) -> None:
        self.pool = pool
        self.origin = origin
        self.loop = pool.loop
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.response: Response | None = None
        self.reused = False
        self.idle_since = 0.0
        self._interim = False
        self._paused = False
        self._head_bytes = 0
        """Bytes received for the current response before its head was complete."""

    def send(self, head: bytes, body: bytes, read_timeout_s: float, head_only: bool) -> Response:
        """Writes the request; the response to it, still to arrive."""
        transport = self.transport
        if transport is None:
            raise RuntimeError("send() on a connection that is not open")
        response = self.response = Response(self, read_timeout_s, head_only)
        self._head_bytes = 0
        if len(body) <= 16384:
            transport.write(head + body if body else head)
        else:
            transport.write(head)
            transport.write(body)
        return response

    def pause(self) -> None:
        transport = self.transport
        if not self._paused and transport is not None and not transport.is_closing():
            self._paused = True
            transport.pause_reading()

    def resume(self) -> None:
        transport = self.transport
        if self._paused and transport is not None and not transport.is_closing():
            self._paused = False
            transport.resume_reading()

    def abort(self) -> None:
        """Drops the connection now (mid-exchange: what is in flight is worthless)."""
        self.response = None
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    # -- asyncio's callbacks ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # A head and a body written apart must not wait for each other's ACK.
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        response = self.response
        if response is None:  # nothing was asked: an idle connection the upstream gave up
            self.abort()
            return
        response.got_bytes = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:  # HttpParserUpgrade included
            self._fail(BadResponse())
            return
        if not response.has_head:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:  # httptools would keep collecting it
                self._fail(BadResponse())

    def eof_received(self) -> bool:
        return False  # close our side too: connection_lost follows

    def connection_lost(self, _exc: Exception | None) -> None:
        self.pool.forget(self)
        response = self.response
        self.response = None
        if response is None:
            return
        if not response.has_head:
            response.fail(ConnectionLost())
        elif response.close_delimited():
            response.finish()
        else:
            response.fail(BodyCut())

    def _fail(self, exc: BaseException) -> None:
        response = self.response
        self.abort()
        if response is not None:
            response.fail(exc)

    # -- httptools' callbacks ---------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        response = self.response
        if response is None:
            raise httptools.HttpParserError("bytes after the response")
        response.headers.append((name, value))

    def on_headers_complete(self) -> None:
        response = self.response
        if response is None:
            raise httptools.HttpParserError("bytes after the response")
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # 103 Early Hints and the like
            self._interim = True
            response.headers = []
            return
        response.status = status
        response.headed()
        if response.head_only or status == 101:  # llhttp would wait for a HEAD's body
            self.response = None
            response.finish()
            self.abort()

    def on_body(self, body: bytes) -> None:
        if self.response is not None:
            self.response.feed(body)

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        response = self.response
        if response is None:
            return
        self.response = None
        response.finish()
        if self.parser.should_keep_alive():
            self.resume()
            self.pool.release(self)
        else:
            self.close()
