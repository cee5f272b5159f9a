"""The response an upstream connection is reading (`proxy.upstream.h1_conn`), and the
failures of `proxy.upstream.h1_client`, each a type of its own with a `safe_reason`
(`proxy.upstream.safe_text`).

Body chunks wait in the `Response` until the relay reads them. When more than `HIGH_WATER`
bytes wait, its connection stops reading the socket, so a slow client slows the upstream
rather than filling the proxy's memory.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

HIGH_WATER = 256 * 1024
"""Body bytes waiting for the reader before the socket stops being read."""


class ConnectFailed(ConnectionError):
    """No connection could be made (refused, no route, DNS, TLS): the upstream never saw
    the request. The library's own error is its cause."""

    safe_reason = "cannot connect"


class ConnectTimeout(TimeoutError):
    safe_reason = "connect timeout"


class ReadTimeout(TimeoutError):
    safe_reason = "read timeout"


class ConnectionLost(ConnectionError):
    """The upstream closed the connection before its response's head was complete."""

    safe_reason = "the upstream closed the connection"


class BodyCut(ConnectionError):
    """The connection ended before the body its head announced."""

    safe_reason = "malformed or incomplete response body"


class BadResponse(ConnectionError):
    """Bytes that are no HTTP/1.1 response (httptools refused them)."""

    safe_reason = "malformed response status line, headers or body framing"


class Carrier(Protocol):
    """What a response needs of the connection carrying it."""

    loop: asyncio.AbstractEventLoop

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def abort(self) -> None: ...


class Response:
    """A response whose head has arrived (once `head()` returns) and whose body chunks
    arrive as the upstream sends them."""

    __slots__ = (
        "_chunks",
        "_conn",
        "_done",
        "_error",
        "_has_head",
        "_loop",
        "_size",
        "_timeout_s",
        "_waiter",
        "got_bytes",
        "head_only",
        "headers",
        "status",
    )

    def __init__(self, conn: Carrier, read_timeout_s: float, head_only: bool) -> None:
        self._conn: Carrier | None = conn
        self._loop = conn.loop
        self._timeout_s = read_timeout_s
        self._chunks: list[bytes] = []
        self._size = 0
        self._done = False
        self._has_head = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.got_bytes = False
        self.head_only = head_only
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []

    # -- the reader's side ------------------------------------------------------------------
    @property
    def has_head(self) -> bool:
        """Whether the status line and headers have all arrived."""
        return self._has_head

    async def head(self) -> None:
        """Returns once the head has arrived; raises the failure's own exception."""
        while not self._has_head:
            if self._error is not None:
                raise self._error
            await self._wait()

    async def read(self) -> bytes:
        """Every body byte that has arrived since the last read, b"" at the end; raises
        the failure's own exception (the client maps it)."""
        while True:
            chunks = self._chunks
            if chunks:
                data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
                chunks.clear()
                self._size = 0
                if self._conn is not None:
                    self._conn.resume()
                return data
            if self._error is not None:
                raise self._error
            if self._done:
                return b""
            await self._wait()

    def close(self) -> None:
        """Done with it: a connection still carrying this response cannot be reused."""
        conn = self._conn
        if conn is not None:
            self._conn = None
            conn.abort()

    async def _wait(self) -> None:
        waiter = self._waiter = self._loop.create_future()
        timer = self._loop.call_later(self._timeout_s, self._expire, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _expire(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            self._error = ReadTimeout()
            waiter.set_result(None)

    # -- the connection's side --------------------------------------------------------------
    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def feed(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        if self._size > HIGH_WATER and self._conn is not None:
            self._conn.pause()
        self._wake()

    def headed(self) -> None:
        self._has_head = True
        self._wake()

    def finish(self) -> None:
        self._done = True
        self._conn = None
        self._wake()

    def fail(self, exc: BaseException) -> None:
        if self._error is None:
            self._error = exc
        self._conn = None
        self._wake()

    def close_delimited(self) -> bool:
        """The body has no length and is not chunked: it ends where the connection does."""
        for name, _ in self.headers:
            if name.lower() in (b"content-length", b"transfer-encoding"):
                return False
        return self.status >= 200 and self.status not in (204, 304)
