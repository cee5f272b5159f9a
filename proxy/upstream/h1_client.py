"""The production upstream client: HTTP/1.1 over asyncio's own transports, with a pool of
kept-alive connections per origin (`proxy.upstream.h1_conn` is one connection,
`proxy.upstream.h1_response` what it reads).

Why not aiohttp's session, which it replaces: measured in one process against nginx on
this project's 2-core machine, 32 concurrent small requests, CPU per request of the
client's process: aiohttp 207-272 us, this 59-64 us, httpx ~3,000 us
(`python -m bench.client_bench`). A proxy pays it on every request: aiohttp's share was a
quarter of the proxy's CPU for a small passthrough request.

What it sends is what it is given: the method, the URL's path and query as they are (no
dot-segment resolution, no re-quoting), every header's bytes (UTF-8 or not), then Host
(from the URL) and Content-Length (from the body). It adds nothing else (no
Accept-Encoding, User-Agent or cookies), never decompresses and never follows redirects.
A request that could smuggle (CR or LF in a header, a space in the target) is refused.
URLs that are not ASCII, or that urlsplit reads otherwise, go to `fallback` (httpx); URL
credentials never reach a client (`UpstreamConfig` turns them into its Authorization).

A new connection tries the origin's addresses as RFC 8305 says (aiohappyeyeballs, as aiohttp
does: uvloop's `create_connection` cannot), the addresses looked up at most once a minute.

Failures map to the proxy's errors in `h1_error`, their causes being this module's own
exception types. A request that finds its reused connection closed before any byte of
the answer is sent once more on a new one when its method is idempotent (RFC 9112 9.3.1),
as aiohttp did.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any
from urllib.parse import urlsplit

from aiohappyeyeballs import start_connection

from proxy.errors import ProxyError, upstream_failed, upstream_timeout, upstream_unreachable
from proxy.types import Headers
from proxy.upstream.client import UpstreamClient, UpstreamRequest, UpstreamResponse
from proxy.upstream.h1_conn import Connection, Origin
from proxy.upstream.h1_response import ConnectFailed, ConnectionLost, ConnectTimeout, Response

KEEPALIVE_S = 30.0
"""How long an idle connection is kept (upstreams close theirs after 5 s to minutes)."""
MAX_IDLE = 256
"""Idle connections kept per origin after a burst; more are closed."""
HAPPY_EYEBALLS_DELAY_S = 0.25
"""How long a connect to one address runs before the next address (the other IP family
first) is tried beside it (RFC 8305): a broken IPv6 route costs 250 ms, not the timeout."""
DNS_TTL_S = 60.0
"""How long an origin's looked-up addresses are used for new connections."""
Address = tuple[Any, ...]
"""One `getaddrinfo` result: (family, type, proto, canonname, sockaddr)."""
IDEMPOTENT = frozenset(("GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"))
NO_BODY_METHODS = frozenset((b"GET", b"HEAD", b"OPTIONS", b"CONNECT", b"TRACE"))
"""Methods sent without a Content-Length when their body is empty (as aiohttp did)."""


class UnsendableRequest(ValueError):
    """A header with CR or LF, or a target with a space: it would split the request."""

    safe_reason = "request bytes HTTP does not allow"


def h1_error(exc: BaseException) -> ProxyError | None:
    """The proxy error for a failure of this client, None for anything else."""
    if isinstance(exc, TimeoutError):
        return upstream_timeout()
    if isinstance(exc, ConnectFailed):
        return upstream_unreachable()
    if isinstance(exc, OSError | UnsendableRequest):
        return upstream_failed()
    return None


def _mapped(exc: BaseException) -> ProxyError:
    return h1_error(exc) or upstream_failed()


class _H1Response:
    """`UpstreamResponse` over `Response`, mapping its failures."""

    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: Response) -> None:
        self._response = response
        self.status = response.status
        self.headers: Headers = response.headers

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except (OSError, TimeoutError) as exc:
            raise _mapped(exc) from exc

    async def aclose(self) -> None:
        self._response.close()


class Pool:
    """Each origin's idle connections (the most recently used first), and every open one."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._idle: dict[Origin, list[Connection]] = {}
        self._open: set[Connection] = set()

    def take(self, origin: Origin) -> Connection | None:
        idle = self._idle.get(origin)
        now = self.loop.time()
        while idle:
            conn = idle.pop()
            transport = conn.transport
            if transport is None or transport.is_closing():
                continue
            if now - conn.idle_since > KEEPALIVE_S:
                conn.close()
                continue
            conn.reused = True
            return conn
        return None

    def opened(self, conn: Connection) -> None:
        self._open.add(conn)

    def release(self, conn: Connection) -> None:
        """A connection whose response has ended, kept alive for the next request."""
        idle = self._idle.setdefault(conn.origin, [])
        now = self.loop.time()
        if idle and (len(idle) >= MAX_IDLE or now - idle[0].idle_since > KEEPALIVE_S):
            idle.pop(0).close()
        conn.idle_since = now
        idle.append(conn)

    def forget(self, conn: Connection) -> None:
        """A connection that has closed."""
        self._open.discard(conn)
        idle = self._idle.get(conn.origin)
        if idle and conn in idle:
            idle.remove(conn)

    def close(self) -> None:
        for conn in list(self._open):
            conn.abort()
        self._idle.clear()


class H1Client:
    """The production client (see the module docstring); one per worker process."""

    def __init__(self, fallback: UpstreamClient, tls: ssl.SSLContext | None = None) -> None:
        self._fallback = fallback
        self._tls = tls
        self._pool: Pool | None = None
        self._closed = False
        self._dns: dict[Origin, tuple[float, list[Address]]] = {}
        self._origins: dict[str, Origin | None] = {}
        """Each URL prefix's origin (None: `fallback` sends it); prefixes come from the
        config's base URLs, so this stays as small as the config."""

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        if self._closed:
            raise RuntimeError("the upstream client is closed")
        url = request.url
        start = url.find("/", url.find("//") + 2)
        prefix = url[:start] if start >= 0 else url
        try:
            origin = self._origins[prefix]
        except KeyError:
            origin = self._origins[prefix] = _origin(prefix)
        if origin is None or not url.isascii():
            return await self._fallback.send(request)
        target = url[start:].encode("ascii") if start >= 0 else b"/"
        method = request.method.encode("ascii")
        try:
            head = request_head(method, target, origin.host_header, request.headers, request.body)
        except UnsendableRequest as exc:
            raise _mapped(exc) from exc
        pool = self._pool
        if pool is None:
            pool = self._pool = Pool(asyncio.get_running_loop())
        retry = request.method in IDEMPOTENT
        pooled: Connection | None = pool.take(origin)
        while True:
            conn = pooled or await self._connect(pool, origin, request)
            response = conn.send(head, request.body, request.read_timeout_s, method == b"HEAD")
            try:
                await response.head()
            except ConnectionLost as exc:
                response.close()
                if retry and conn.reused and not response.got_bytes:
                    retry, pooled = False, None  # again on a new connection, not the next kept one
                    continue
                raise _mapped(exc) from exc
            except (OSError, TimeoutError) as exc:
                response.close()
                raise _mapped(exc) from exc
            except BaseException:  # cancelled: the client left
                response.close()
                raise
            return _H1Response(response)

    async def _connect(self, pool: Pool, origin: Origin, request: UpstreamRequest) -> Connection:
        conn = Connection(pool, origin)
        tls = self._context() if origin.tls else None
        try:
            async with asyncio.timeout(request.connect_timeout_s):
                sock = await start_connection(
                    await self._addresses(pool.loop, origin),
                    happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY_S,
                    interleave=1,
                    loop=pool.loop,
                )
                await pool.loop.create_connection(
                    lambda: conn,
                    sock=sock,
                    ssl=tls,
                    server_hostname=origin.host if tls is not None else None,
                )
        except OSError as exc:  # TimeoutError included
            conn.abort()
            timed_out = isinstance(exc, TimeoutError)
            failed = ConnectTimeout() if timed_out else ConnectFailed(exc.errno, "cannot connect")
            failed.__cause__ = exc  # the socket's, the resolver's or TLS's own error
            raise _mapped(failed) from failed
        pool.opened(conn)
        return conn

    async def _addresses(self, loop: asyncio.AbstractEventLoop, origin: Origin) -> list[Address]:
        """The origin's addresses, looked up again after `DNS_TTL_S`."""
        now = loop.time()
        cached = self._dns.get(origin)
        if cached is not None and now - cached[0] < DNS_TTL_S:
            return cached[1]
        found = await loop.getaddrinfo(origin.host, origin.port, type=socket.SOCK_STREAM)
        self._dns[origin] = (now, found)
        return found

    def _context(self) -> ssl.SSLContext:
        if self._tls is None:
            # The system's CA store, as aiohttp used (httpx would use certifi's).
            self._tls = ssl.create_default_context()
            self._tls.set_alpn_protocols(["http/1.1"])
        return self._tls

    def close(self) -> None:
        """Drops every connection; sending afterwards is a bug (RuntimeError)."""
        self._closed = True
        if self._pool is not None:
            self._pool.close()


def _origin(prefix: str) -> Origin | None:
    """`scheme://authority` as an Origin; None for what `fallback` must send (credentials
    in the URL, anything urlsplit reads otherwise)."""
    try:
        parts = urlsplit(prefix)
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    tls = parts.scheme == "https"
    if parts.scheme not in ("http", "https") or not host or "@" in parts.netloc:
        return None
    if parts.path or parts.query or parts.fragment or not prefix.isascii():
        return None
    default = 443 if tls else 80
    return Origin(host, port or default, tls, parts.netloc.encode("ascii"))


def request_head(method: bytes, target: bytes, host: bytes, headers: Headers, body: bytes) -> bytes:
    """The request line and headers, with Host and Content-Length; raises
    `UnsendableRequest` for bytes that would end a line or the request line early."""
    fields = b"".join([b"%s: %s\r\n" % field for field in headers])
    lines = len(headers)
    if fields.count(b"\n") != lines or fields.count(b"\r") != lines:
        raise UnsendableRequest()
    if b" " in target or b"\r" in target or b"\n" in target:
        raise UnsendableRequest()
    if body or method not in NO_BODY_METHODS:
        fields += b"Content-Length: %d\r\n" % len(body)
    return b"%s %s HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (method, target, host, fields)
