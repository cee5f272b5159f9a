"""The upstream HTTP client behind a tiny protocol: raw aiohttp in production, httpx in tests.

Measured on a 2-core box (see the edge issue): starlette + httpx's default transport
relays ~270 req/s, httpx over aiohttp ~900, a raw aiohttp session ~2,500. So production
uses a raw `aiohttp.ClientSession`; `create_app(config, transport=...)` swaps in an httpx
client so unit tests can use `httpx.MockTransport` or respx.

Both clients send exactly the headers they are given (plus Host and Content-Length, which
the libraries derive from the URL and the body), never decompress, never follow
redirects and never keep cookies: a proxy must not add `Accept-Encoding`, inflate a gzip
body, or leak one client's cookies to the next.

Both send the URL's path and query, and every header's bytes, exactly as given. aiohttp
takes them as `str` and writes them as UTF-8, so bytes that are not UTF-8 (`caf\xe9`, a
legal obs-text header value) cannot pass through it unchanged; the rare request carrying
such bytes goes through an httpx client instead, which writes bytes as they are.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol

import aiohttp
import httpx
from yarl import URL

Headers = Sequence[tuple[bytes, bytes]]


@dataclass(slots=True)  # not frozen: one per request (see ExchangeRecord)
class UpstreamRequest:
    """Everything needed to send one request upstream."""

    method: str
    url: str
    """Already percent-encoded; sent as is."""
    headers: Headers
    body: bytes
    connect_timeout_s: float
    read_timeout_s: float
    """Longest silence between two reads, so long SSE pauses survive."""


class UpstreamResponse(Protocol):
    """A response whose headers have arrived and whose body is still streaming."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Headers: ...

    async def read(self) -> bytes:
        """The next body bytes as they arrive, b"" at the end.

        Transfer coding is removed, content coding (gzip) is kept.
        """
        ...

    async def aclose(self) -> None: ...


class UpstreamClient(Protocol):
    """Sends requests upstream; one per process, owned by the app's lifespan."""

    async def send(self, request: UpstreamRequest) -> UpstreamResponse: ...


# -- aiohttp (production) ---------------------------------------------------------------
class _AiohttpResponse:
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: Headers = response.raw_headers

    async def read(self) -> bytes:
        return await self._response.content.readany()

    async def aclose(self) -> None:
        # Back to the pool when the body was read to the end; aiohttp closes the
        # connection instead when it was not (a half-read body poisons it).
        self._response.release()


class AiohttpClient:
    """Production client: a pooled aiohttp session that adds nothing of its own, and
    `verbatim` for requests whose bytes aiohttp would change (see the module docstring)."""

    def __init__(self, session: aiohttp.ClientSession, verbatim: UpstreamClient) -> None:
        self._session = session
        self._verbatim = verbatim
        self._timeouts: dict[tuple[float, float], aiohttp.ClientTimeout] = {}
        """One per upstream config; built once rather than per request."""

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        headers = _texts(request.headers)
        if headers is None or not request.url.isascii():
            return await self._verbatim.send(request)
        key = (request.connect_timeout_s, request.read_timeout_s)
        timeout = self._timeouts.get(key)
        if timeout is None:
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None, connect=key[0], sock_read=key[1]
            )
        response = await self._session.request(
            request.method,
            URL(request.url, encoded=True),
            headers=headers,
            data=request.body or None,
            allow_redirects=False,
            timeout=timeout,
        )
        return _AiohttpResponse(response)


def _texts(headers: Headers) -> list[tuple[str, str]] | None:
    """The headers as aiohttp will write them back to the same bytes (it encodes them as
    UTF-8), or None when some name or value is not UTF-8."""
    try:
        return [(name.decode("utf-8"), value.decode("utf-8")) for name, value in headers]
    except UnicodeDecodeError:
        return None


def _aiohttp_session() -> aiohttp.ClientSession:
    # limit=0: every client connection maps to at most one upstream connection, so the
    # pool is bounded by the server's own connection count; a limit would only add
    # queueing that counts against the connect timeout.
    connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=60, keepalive_timeout=30)
    return aiohttp.ClientSession(
        connector=connector,
        auto_decompress=False,
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent", "Content-Type"),
        timeout=aiohttp.ClientTimeout(total=None),
        raise_for_status=False,
    )


# -- httpx (tests, alternative transports) ----------------------------------------------
class _HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self.status = response.status_code
        self.headers: Headers = response.headers.raw
        stream = response.stream
        if not isinstance(stream, httpx.AsyncByteStream):
            raise TypeError("an AsyncClient transport returned a sync stream")
        # The stream itself, not aiter_raw(): a MockTransport response arrives already
        # read (and gzip-decoded in `.content`), but its stream still holds the raw bytes.
        self._chunks = aiter(stream)

    async def read(self) -> bytes:
        async for chunk in self._chunks:
            if chunk:
                return chunk
        return b""

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxClient:
    """An httpx-based client, for `httpx.MockTransport`, respx or any httpx transport."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self._client = client

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        # httpx.Request (not client.build_request) so the client's default headers
        # (Accept, Accept-Encoding, User-Agent, Connection) are not merged in.
        # The "target" extension sends the path and query as given: httpx's URL parser
        # would resolve dot segments and re-quote characters such as '"' and '|'.
        outgoing = httpx.Request(
            request.method,
            request.url,
            headers=list(request.headers),  # bytes: sent verbatim
            content=request.body,
            extensions={
                "target": _target(request.url),
                "timeout": httpx.Timeout(
                    connect=request.connect_timeout_s,
                    read=request.read_timeout_s,
                    write=request.read_timeout_s,
                    pool=request.connect_timeout_s,
                ).as_dict(),
            },
        )
        response = await self._client.send(outgoing, stream=True, follow_redirects=False)
        return _HttpxResponse(response)


def _target(url: str) -> bytes:
    """The request target (path and query) of an absolute URL, as its bytes."""
    start = url.find("/", url.find("://") + 3)
    return url[start:].encode("latin-1") if start >= 0 else b"/"


@asynccontextmanager
async def open_client(
    transport: httpx.AsyncBaseTransport | None = None,
) -> AsyncIterator[UpstreamClient]:
    """The process's upstream client: aiohttp, or httpx over `transport` when given."""
    if transport is not None:
        async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
            yield HttpxClient(client)
        return
    # The system's CA store, as aiohttp uses (httpx would use certifi's).
    verbatim = httpx.AsyncClient(trust_env=False, verify=ssl.create_default_context())
    async with _aiohttp_session() as session, verbatim:
        yield AiohttpClient(session, HttpxClient(verbatim))
