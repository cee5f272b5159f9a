"""The upstream HTTP client behind a tiny protocol: `H1Client` in production (HTTP/1.1 on
asyncio's transports, `proxy.upstream.h1_client`), httpx in tests.

Measured on a 2-core box: starlette + httpx's default transport relayed ~270 req/s, httpx
over aiohttp ~900, a raw aiohttp session ~2,500; H1Client costs a quarter of aiohttp's CPU
per request (see its module). `create_app(config, transport=...)` swaps in an httpx client so
unit tests can use `httpx.MockTransport` or respx.

Both clients send exactly the headers they are given (plus Host and Content-Length, which
they derive from the URL and the body), never decompress, never follow redirects and never
keep cookies: a proxy must not add `Accept-Encoding`, inflate a gzip body, or leak one
client's cookies to the next. Both send the URL's path and query, and every header's bytes,
exactly as given, UTF-8 or not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from proxy.types import Headers


@dataclass(slots=True)  # not frozen: one per request (see ExchangeRecord)
class UpstreamRequest:
    """Everything needed to send one request upstream."""

    method: str
    url: str
    """Already percent-encoded; sent as is."""
    headers: Headers
    body: bytes
    """Emptied once the upstream's response begins (`relay.forward`): sent by then, and a
    stream would otherwise hold a 500 KB body for as long as it lasts."""
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

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        """Raises `ProxyError` (upstream_unreachable, upstream_timeout, upstream_error)
        when the upstream fails, its library's own error as the cause; so does the
        response's `read`. Every client maps its own library's errors."""
        ...
