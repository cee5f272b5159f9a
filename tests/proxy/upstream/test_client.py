"""upstream.py: both clients send the URL and the header bytes they are given, unchanged.

The production client (aiohttp) is covered on real sockets in
tests/hardening/test_header_bytes.py; here, the httpx client and the hand-over between them.
"""

from __future__ import annotations

import aiohttp
import httpx
import pytest

from proxy.upstream.client import (
    AiohttpClient,
    UpstreamRequest,
    UpstreamResponse,
    open_client,
)

pytestmark = pytest.mark.anyio

URL = 'http://upstream.test:8080/tenant-a/v1/files/a%20b?q=%2e%2e/|"&r=..%2f'
ODD = (b"x-title", b"caf\xe9\xff")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiohttp is asyncio-only


def request(url: str = URL, headers: tuple[tuple[bytes, bytes], ...] = (ODD,)) -> UpstreamRequest:
    return UpstreamRequest("GET", url, headers, b"", connect_timeout_s=5, read_timeout_s=5)


async def test_the_httpx_client_sends_header_bytes_and_target_as_given() -> None:
    seen: list[httpx.Request] = []

    def handle(outgoing: httpx.Request) -> httpx.Response:
        seen.append(outgoing)
        return httpx.Response(200)

    async with open_client(httpx.MockTransport(handle)) as client:
        response = await client.send(request())
        await response.aclose()
    (sent,) = seen
    assert ODD in sent.headers.raw
    assert sent.extensions["target"] == b'/tenant-a/v1/files/a%20b?q=%2e%2e/|"&r=..%2f'


class Recording:
    """An UpstreamClient that only notes what it was asked to send."""

    def __init__(self) -> None:
        self.sent: list[UpstreamRequest] = []

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.sent.append(request)
        return ResponseStub()


class ResponseStub:
    status = 200
    headers: tuple[tuple[bytes, bytes], ...] = ()

    async def read(self) -> bytes:
        return b""

    async def aclose(self) -> None:
        return None


async def test_aiohttp_hands_what_it_would_change_to_the_verbatim_client() -> None:
    verbatim = Recording()
    async with aiohttp.ClientSession() as session:
        client = AiohttpClient(session, verbatim)
        latin1 = request(headers=(ODD,))
        non_ascii_query = request(url="http://127.0.0.1:9/v1/models?q=caf\xe9", headers=())
        await client.send(latin1)
        await client.send(non_ascii_query)
    assert verbatim.sent == [latin1, non_ascii_query]


async def test_aiohttp_sends_utf8_headers_itself(dead_port: int) -> None:
    verbatim = Recording()
    utf8 = request(f"http://127.0.0.1:{dead_port}/v1/models", ((b"x-title", b"Caf\xc3\xa9"),))
    async with aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectorError):  # nobody listens: aiohttp tried
            await AiohttpClient(session, verbatim).send(utf8)
    assert verbatim.sent == []
