"""An httpx-based upstream client: for tests (`httpx.MockTransport`, respx), other transports,
and the URLs `H1Client` hands over (not ASCII). It maps httpx's errors to the proxy's.

It sends through the transport, not an `httpx.AsyncClient`: the client logs every request's
URL at INFO (`HTTP Request: POST https://gw/v1/...?key=...`), query-string keys included,
and would add what a proxy must not (its auth from URL credentials, cookies, redirects)."""

from __future__ import annotations

import httpx

from proxy.errors import ProxyError, upstream_failed, upstream_timeout, upstream_unreachable
from proxy.types import Headers
from proxy.upstream.client import UpstreamRequest, UpstreamResponse

_FAILURES = (httpx.TransportError, TimeoutError, OSError)


def httpx_error(exc: BaseException) -> ProxyError | None:
    """The proxy error for an httpx or socket failure, None for anything else."""
    if isinstance(exc, httpx.TimeoutException | TimeoutError):
        return upstream_timeout()
    if isinstance(exc, httpx.ConnectError):
        return upstream_unreachable()
    if isinstance(exc, _FAILURES):
        return upstream_failed()
    return None


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
        try:
            async for chunk in self._chunks:
                if chunk:
                    return chunk
        except _FAILURES as exc:
            raise _mapped(exc) from exc
        return b""

    async def aclose(self) -> None:
        await self._response.aclose()


class HttpxClient:
    """An httpx-based client, for `httpx.MockTransport`, respx or any httpx transport."""

    def __init__(self, transport: httpx.AsyncBaseTransport) -> None:
        self._transport = transport

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
        try:
            response = await self._transport.handle_async_request(outgoing)
        except _FAILURES as exc:
            raise _mapped(exc) from exc
        return _HttpxResponse(response)


def _target(url: str) -> bytes:
    """The request target (path and query) of an absolute URL, as its bytes."""
    start = url.find("/", url.find("://") + 3)
    return url[start:].encode("latin-1") if start >= 0 else b"/"


def _mapped(exc: BaseException) -> ProxyError:
    return httpx_error(exc) or upstream_failed()
