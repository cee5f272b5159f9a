"""upstream/client.py and its two clients: both send the URL and the header bytes they are
given, unchanged, and each maps its own library's errors to the proxy's: the same failure
phase (refused, connect hang, silence, a stalled, cut or lost response) gives the same
proxy error from either, each keeping its library's exception as the cause.

The production client (H1Client) is covered on real sockets in test_h1_client.py and
tests/hardening/test_header_bytes.py; here, the httpx client and the hand-over between them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import orjson
import pytest

from proxy.errors import ProxyError
from proxy.upstream.client import UpstreamClient, UpstreamRequest, UpstreamResponse
from proxy.upstream.connect import open_client
from proxy.upstream.h1_client import H1Client, UnsendableRequest, h1_error
from proxy.upstream.h1_response import (
    BadResponse,
    BodyCut,
    ConnectFailed,
    ConnectionLost,
    ConnectTimeout,
    ReadTimeout,
)
from proxy.upstream.httpx_client import httpx_error
from tests.fakes.servers import HOST, full_accept_queue
from tests.proxy.upstream.scripted import ScriptedUpstream, read_into, recording, req

pytestmark = pytest.mark.anyio

URL = 'http://upstream.test:8080/tenant-a/v1/files/a%20b?q=%2e%2e/|"&r=..%2f'
ODD = (b"x-title", b"caf\xe9\xff")


def request(url: str = URL, headers: tuple[tuple[bytes, bytes], ...] = (ODD,)) -> UpstreamRequest:
    return UpstreamRequest("GET", url, headers, b"", connect_timeout_s=5, read_timeout_s=5)


async def test_the_httpx_client_sends_header_bytes_and_target_as_given() -> None:
    seen: list[httpx.Request] = []
    async with open_client(recording(seen)) as client:
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


async def test_the_h1_client_hands_credentials_in_the_url_to_the_fallback() -> None:
    fallback = Recording()
    client = H1Client(fallback)
    with_credentials = request(url="http://user:key@127.0.0.1:9/v1/models", headers=())
    non_ascii_query = request(url="http://127.0.0.1:9/v1/models?q=caf\xe9", headers=())
    await client.send(with_credentials)
    await client.send(non_ascii_query)
    assert fallback.sent == [with_credentials, non_ascii_query]


async def test_the_h1_client_sends_header_bytes_that_are_not_utf8_itself(dead_port: int) -> None:
    fallback = Recording()
    latin1 = request(f"http://127.0.0.1:{dead_port}/v1/models", (ODD,))
    with pytest.raises(ProxyError) as caught:  # nobody listens: the H1 client tried
        await H1Client(fallback).send(latin1)
    assert isinstance(caught.value.__cause__, ConnectFailed)
    assert fallback.sent == []


# -- each client maps its own library's errors -------------------------------------------
def _assert_openai_shaped(err: ProxyError | None, status: int, code: str) -> None:
    assert err is not None
    assert (err.status, err.code) == (status, code)
    error = orjson.loads(err.body())["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "upstream.internal" not in error["message"]


@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (ConnectFailed(111, "cannot connect"), 502, "upstream_unreachable"),
        (ConnectTimeout(), 504, "upstream_timeout"),
        (ReadTimeout(), 504, "upstream_timeout"),
        (ConnectionLost(), 502, "upstream_error"),
        (BodyCut(), 502, "upstream_error"),
        (BadResponse(), 502, "upstream_error"),
        (UnsendableRequest(), 502, "upstream_error"),
        (ConnectionResetError(104, "reset"), 502, "upstream_error"),
    ],
)
def test_h1_errors_map_to_openai_shaped_proxy_errors(
    exc: Exception, status: int, code: str
) -> None:
    _assert_openai_shaped(h1_error(exc), status, code)


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
    assert h1_error(ValueError("bug")) is None
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


# -- every failure phase, the same proxy error from either client, on a real socket ----------
CAUSES: dict[str, dict[str, type[BaseException]]] = {
    "h1": {
        "refused": ConnectFailed,
        "connect": ConnectTimeout,
        "silent": ReadTimeout,
        "stall": ReadTimeout,
        "cut": BodyCut,
        "lost": ConnectionLost,
    },
    "httpx": {
        "refused": httpx.ConnectError,
        "connect": httpx.ConnectTimeout,
        "silent": httpx.ReadTimeout,
        "stall": httpx.ReadTimeout,
        "cut": httpx.RemoteProtocolError,
        "lost": httpx.TransportError,
    },
}
"""The library's own exception each client keeps as the proxy error's cause."""


@pytest.fixture(params=sorted(CAUSES))
async def either(request: pytest.FixtureRequest) -> AsyncIterator[tuple[UpstreamClient, str]]:
    """The production client (H1Client), and httpx over its real transport."""
    transport = httpx.AsyncHTTPTransport() if request.param == "httpx" else None
    async with open_client(transport) as client:
        yield client, request.param


async def failure(client: UpstreamClient, request: UpstreamRequest) -> ProxyError:
    with pytest.raises(ProxyError) as caught:
        await client.send(request)
    return caught.value


async def test_refused_is_unreachable(either: tuple[UpstreamClient, str], dead_port: int) -> None:
    client, name = either
    url = f"http://{HOST}:{dead_port}/v1/models"
    error = await failure(client, UpstreamRequest("GET", url, (), b"", 5, 5))
    assert (error.status, error.code) == (502, "upstream_unreachable")
    assert isinstance(error.__cause__, CAUSES[name]["refused"])


async def test_a_connect_that_never_completes_is_a_timeout(
    either: tuple[UpstreamClient, str],
) -> None:
    """A listener whose accept queue is full drops new SYNs, so the connect hangs."""
    client, name = either
    with full_accept_queue() as port:
        url = f"http://{HOST}:{port}/v1/models"
        error = await failure(client, UpstreamRequest("GET", url, (), b"", 0.3, 5))
    assert (error.status, error.code) == (504, "upstream_timeout")
    assert isinstance(error.__cause__, CAUSES[name]["connect"])


async def test_silence_before_the_head_is_a_timeout(
    either: tuple[UpstreamClient, str], upstream: ScriptedUpstream
) -> None:
    client, name = either
    error = await failure(client, req(upstream, "/silent", method="POST", read_timeout_s=0.2))
    assert (error.status, error.code) == (504, "upstream_timeout")
    assert isinstance(error.__cause__, CAUSES[name]["silent"])


async def test_a_stalled_body_times_out_on_read(
    either: tuple[UpstreamClient, str], upstream: ScriptedUpstream
) -> None:
    client, name = either
    response = await client.send(req(upstream, "/stall", read_timeout_s=0.2))
    try:
        assert await response.read() == b"0123456789"
        with pytest.raises(ProxyError) as caught:
            await response.read()
    finally:
        await response.aclose()
    assert (caught.value.status, caught.value.code) == (504, "upstream_timeout")
    assert isinstance(caught.value.__cause__, CAUSES[name]["stall"])


async def test_a_body_cut_short_is_an_upstream_error_after_the_bytes_that_came(
    either: tuple[UpstreamClient, str], upstream: ScriptedUpstream
) -> None:
    client, name = either
    response = await client.send(req(upstream, "/cut"))
    received: list[bytes] = []
    try:
        with pytest.raises(ProxyError) as caught:
            await read_into(response, received)
    finally:
        await response.aclose()
    assert b"".join(received) == b"0123456789"
    assert (caught.value.status, caught.value.code) == (502, "upstream_error")
    assert isinstance(caught.value.__cause__, CAUSES[name]["cut"])


@pytest.mark.parametrize("path", ["/hangup", "/reset"])
async def test_a_connection_lost_after_the_request_is_an_upstream_error(
    either: tuple[UpstreamClient, str], upstream: ScriptedUpstream, path: str
) -> None:
    """Not `upstream_unreachable`: the upstream accepted, so it may have acted on it."""
    client, name = either
    error = await failure(client, req(upstream, path, method="POST", body=b"{}"))
    assert (error.status, error.code) == (502, "upstream_error")
    assert isinstance(error.__cause__, CAUSES[name]["lost"])
    assert not isinstance(error.__cause__, ConnectFailed | httpx.ConnectError)
