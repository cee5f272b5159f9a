"""The production upstream client: a raw `aiohttp.ClientSession` (see `proxy.upstream.client`),
mapping aiohttp's errors to the proxy's."""

from __future__ import annotations

import aiohttp
from yarl import URL

from proxy.errors import ProxyError, upstream_failed, upstream_timeout, upstream_unreachable
from proxy.types import Headers
from proxy.upstream.client import UpstreamClient, UpstreamRequest, UpstreamResponse


def aiohttp_error(exc: BaseException) -> ProxyError | None:
    """The proxy error for an aiohttp or socket failure, None for anything else."""
    if isinstance(exc, TimeoutError):  # aiohttp's own timeouts subclass it
        return upstream_timeout()
    if isinstance(exc, aiohttp.ClientConnectorError):
        return upstream_unreachable()
    if isinstance(exc, aiohttp.ClientError | OSError):
        return upstream_failed()
    return None


class _AiohttpResponse:
    __slots__ = ("_response", "headers", "status")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self.status = response.status
        self.headers: Headers = response.raw_headers

    async def read(self) -> bytes:
        try:
            return await self._response.content.readany()
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _mapped(exc) from exc

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
        try:
            response = await self._session.request(
                request.method,
                URL(request.url, encoded=True),
                headers=headers,
                data=request.body or None,
                allow_redirects=False,
                timeout=timeout,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise _mapped(exc) from exc
        return _AiohttpResponse(response)


def _texts(headers: Headers) -> list[tuple[str, str]] | None:
    """The headers as aiohttp will write them back to the same bytes (it encodes them as
    UTF-8), or None when some name or value is not UTF-8."""
    try:
        return [(name.decode("utf-8"), value.decode("utf-8")) for name, value in headers]
    except UnicodeDecodeError:
        return None


def aiohttp_session() -> aiohttp.ClientSession:
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


def _mapped(exc: BaseException) -> ProxyError:
    return aiohttp_error(exc) or upstream_failed()
