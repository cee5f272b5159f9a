"""upstream/client.py and its two clients: both send the URL and the header bytes they are
given, unchanged, and each maps its own library's errors to the proxy's.

The production client (aiohttp) is covered on real sockets in
tests/hardening/test_header_bytes.py; here, the httpx client and the hand-over between them.
"""

from __future__ import annotations

import aiohttp
import httpx
import orjson
import pytest
from aiohttp.client_reqrep import ConnectionKey

from proxy.errors import ProxyError
from proxy.upstream.aiohttp_client import AiohttpClient, aiohttp_error
from proxy.upstream.client import UpstreamRequest, UpstreamResponse
from proxy.upstream.connect import open_client
from proxy.upstream.httpx_client import httpx_error

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
        with pytest.raises(ProxyError) as caught:  # nobody listens: aiohttp tried
            await AiohttpClient(session, verbatim).send(utf8)
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorError)
    assert verbatim.sent == []


# -- each client maps its own library's errors -------------------------------------------
def _connector_error() -> aiohttp.ClientConnectorError:
    key = ConnectionKey("upstream.internal", 443, True, True, None, None, None)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "refused"))


def _assert_openai_shaped(err: ProxyError | None, status: int, code: str) -> None:
    assert err is not None
    assert (err.status, err.code) == (status, code)
    error = orjson.loads(err.body())["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "upstream.internal" not in error["message"]


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (_connector_error(), 502, "upstream_unreachable"),
        (aiohttp.ConnectionTimeoutError(), 504, "upstream_timeout"),
        (aiohttp.SocketTimeoutError(), 504, "upstream_timeout"),
        (aiohttp.ServerDisconnectedError(), 502, "upstream_error"),
        (aiohttp.ClientPayloadError("cut"), 502, "upstream_error"),
        (ConnectionResetError(104, "reset"), 502, "upstream_error"),
    ],
)
def test_aiohttp_errors_map_to_openai_shaped_proxy_errors(
    exc: Exception, status: int, code: str
) -> None:
    _assert_openai_shaped(aiohttp_error(exc), status, code)


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (httpx.ConnectError("refused"), 502, "upstream_unreachable"),
        (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
        (httpx.ConnectTimeout("slow"), 504, "upstream_timeout"),
        (httpx.RemoteProtocolError("bad"), 502, "upstream_error"),
        (ConnectionResetError(104, "reset"), 502, "upstream_error"),
    ],
)
def test_httpx_errors_map_to_openai_shaped_proxy_errors(
    exc: Exception, status: int, code: str
) -> None:
    _assert_openai_shaped(httpx_error(exc), status, code)


def test_other_exceptions_are_not_mapped() -> None:
    assert aiohttp_error(ValueError("bug")) is None
    assert httpx_error(KeyError("bug")) is None


async def test_the_httpx_client_raises_proxy_errors_caused_by_its_own() -> None:
    refused = httpx.ConnectError("refused")

    def handler(_request: httpx.Request) -> httpx.Response:
        raise refused

    async with open_client(httpx.MockTransport(handler)) as client:
        with pytest.raises(ProxyError) as caught:
            await client.send(UpstreamRequest("GET", URL, [], b"", 1.0, 1.0))
    assert caught.value.code == "upstream_unreachable"
    assert caught.value.__cause__ is refused


async def test_the_aiohttp_client_raises_proxy_errors_caused_by_its_own(dead_port: int) -> None:
    url = f"http://127.0.0.1:{dead_port}/v1/models"
    async with open_client() as client:
        with pytest.raises(ProxyError) as caught:
            await client.send(UpstreamRequest("GET", url, [], b"", 1.0, 1.0))
    assert caught.value.code == "upstream_unreachable"
    assert isinstance(caught.value.__cause__, aiohttp.ClientConnectorError)
