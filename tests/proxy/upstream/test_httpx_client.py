"""upstream/httpx_client.py: the verbatim client (what aiohttp cannot send byte for byte) on a
real loopback socket, and its response stream and error mapping through `httpx.MockTransport`.

Which proxy error each failure phase becomes on the wire (for both clients), the
constructed-error table for the common cases and the target of one odd URL are in
test_client.py.
"""

from __future__ import annotations

import gzip
import logging
from collections.abc import AsyncIterator

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import ProxyError
from proxy.upstream.client import UpstreamClient, UpstreamRequest
from proxy.upstream.connect import open_client
from proxy.upstream.httpx_client import httpx_error
from tests.proxy.upstream.scripted import (
    GZIPPED,
    ScriptedUpstream,
    header,
    read_all,
    recording,
    req,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
async def client() -> AsyncIterator[UpstreamClient]:
    """httpx's real transport, as the verbatim client uses it in production."""
    async with open_client(httpx.AsyncHTTPTransport()) as opened:
        yield opened


# -- on the wire --------------------------------------------------------------------------
async def test_the_wire_gets_the_target_and_header_bytes_as_given(
    client: UpstreamClient, upstream: ScriptedUpstream
) -> None:
    """The requests aiohttp hands over are the ones with latin-1 header bytes; they must reach
    the upstream as those bytes, with nothing of httpx's own but Host and Content-Length."""
    target = '/echo/a%20b/./..%2fc?q=%2e%2e/|"&r={x}'
    headers = ((b"X-Title", b"caf\xe9\xff"), (b"authorization", b"Bearer sk-1"))
    response = await client.send(req(upstream, target, method="POST", headers=headers, body=b"{}"))
    try:
        echoed = await read_all(response)
    finally:
        await response.aclose()
    head, body = echoed.split(b"\r\n\r\n", 1)
    line, *lines = head.split(b"\r\n")
    assert line == b"POST " + target.encode() + b" HTTP/1.1"
    assert body == b"{}"
    assert lines[:2] == [b"Host: " + upstream.origin[7:].encode(), b"X-Title: caf\xe9\xff"]
    names = sorted(raw.partition(b":")[0].lower() for raw in lines)
    assert names == [b"authorization", b"content-length", b"host", b"x-title"]


async def test_nothing_logs_the_url_or_its_query(
    client: UpstreamClient, upstream: ScriptedUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """httpx's client logs every request's URL at INFO, `?key=...` included; its transport,
    which this client uses, does not (httpcore's DEBUG lines name the host only)."""
    caplog.set_level(logging.DEBUG)
    key = "sk-query-" + "NotLogged_" * 3
    response = await client.send(req(upstream, f"/echo?key={key}"))
    await response.aclose()
    assert response.status == 200
    assert caplog.records  # httpcore's DEBUG lines
    assert key not in caplog.text
    assert "/echo" not in caplog.text


async def test_a_real_body_keeps_its_gzip_and_loses_its_chunking(
    client: UpstreamClient, upstream: ScriptedUpstream
) -> None:
    for target, expected in (("/gzip", GZIPPED), ("/chunked", b"abcd")):
        response = await client.send(req(upstream, target))
        try:
            assert await read_all(response) == expected
            assert await response.read() == b""
        finally:
            await response.aclose()


async def test_redirects_are_relayed_not_followed(
    client: UpstreamClient, upstream: ScriptedUpstream
) -> None:
    response = await client.send(req(upstream, "/redirect"))
    await response.aclose()
    assert (response.status, header(response, b"location")) == (302, b"/ok")


# -- the response stream, through MockTransport ------------------------------------------
class Scripted(httpx.AsyncByteStream):
    """A body whose items are chunks to yield or exceptions to raise, in order."""

    def __init__(self, *items: bytes | BaseException) -> None:
        self.items = items
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for item in self.items:
            if isinstance(item, BaseException):
                raise item
            yield item

    async def aclose(self) -> None:
        self.closed = True


MOCK_URL = "http://upstream.test/v1/chat/completions"


def mock_req(url: str = MOCK_URL) -> UpstreamRequest:
    return UpstreamRequest("POST", url, (), b"{}", connect_timeout_s=3, read_timeout_s=600)


async def test_each_request_carries_its_own_timeouts() -> None:
    seen: list[httpx.Request] = []
    async with open_client(recording(seen, 204)) as client:
        await (await client.send(mock_req())).aclose()
        other = UpstreamRequest("GET", MOCK_URL, (), b"", connect_timeout_s=1, read_timeout_s=5)
        await (await client.send(other)).aclose()
    # Write shares the read allowance (a slow upstream draining a big body), pool the connect.
    assert [r.extensions["timeout"] for r in seen] == [
        {"connect": 3, "read": 600, "write": 600, "pool": 3},
        {"connect": 1, "read": 5, "write": 5, "pool": 1},
    ]


async def test_reads_skip_empty_chunks_and_end_with_empty_bytes() -> None:
    stream = Scripted(b"", b"ab", b"", b"", b"cd", b"")
    async with open_client(httpx.MockTransport(lambda _r: httpx.Response(200, stream=stream))) as c:
        response = await c.send(mock_req())
        reads = [await response.read() for _ in range(4)]
        await response.aclose()
    assert reads == [b"ab", b"cd", b"", b""]
    assert stream.closed


async def test_a_gzip_body_from_a_transport_is_relayed_compressed() -> None:
    def handle(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-encoding": "gzip"}, content=GZIPPED)

    async with open_client(httpx.MockTransport(handle)) as client:
        response = await client.send(mock_req())
        try:
            assert await read_all(response) == GZIPPED
        finally:
            await response.aclose()
    assert gzip.decompress(GZIPPED)  # the bytes really are gzip, so they were not inflated


@pytest.mark.parametrize(
    ("failure", "status", "code"),
    [
        (httpx.ReadTimeout("slow"), 504, "upstream_timeout"),
        (TimeoutError(), 504, "upstream_timeout"),
        (httpx.ReadError("reset"), 502, "upstream_error"),
        (httpx.RemoteProtocolError("incomplete body"), 502, "upstream_error"),
        (ConnectionResetError(104, "reset"), 502, "upstream_error"),
    ],
)
async def test_a_failure_mid_body_is_mapped_after_the_bytes_before_it(
    failure: Exception, status: int, code: str
) -> None:
    stream = Scripted(b"data: 1\n\n", failure)
    async with open_client(httpx.MockTransport(lambda _r: httpx.Response(200, stream=stream))) as c:
        response = await c.send(mock_req())
        assert await response.read() == b"data: 1\n\n"
        with pytest.raises(ProxyError) as caught:
            await response.read()
        await response.aclose()
    assert (caught.value.status, caught.value.code, caught.value.__cause__) == (
        status,
        code,
        failure,
    )


async def test_a_bug_mid_body_is_not_dressed_up_as_an_upstream_error() -> None:
    bug = ValueError("a bug, not the upstream")
    stream = Scripted(bug)
    async with open_client(httpx.MockTransport(lambda _r: httpx.Response(200, stream=stream))) as c:
        response = await c.send(mock_req())
        with pytest.raises(ValueError, match="a bug") as caught:
            await response.read()
        await response.aclose()
    assert caught.value is bug


async def test_a_bug_in_the_transport_is_not_mapped_either() -> None:
    def handle(_request: httpx.Request) -> httpx.Response:
        raise KeyError("bug")

    async with open_client(httpx.MockTransport(handle)) as client:
        with pytest.raises(KeyError):
            await client.send(mock_req())


async def test_a_url_without_a_path_targets_the_root() -> None:
    seen: list[bytes] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["target"])
        return httpx.Response(204)

    async with open_client(httpx.MockTransport(handle)) as client:
        await (await client.send(mock_req("http://upstream.test:8080"))).aclose()
    assert seen == [b"/"]


# Printable ASCII but '#': what h11 and httptools accept in a request target (both refuse
# bytes past 0x7e, so no other target reaches the proxy; h11 would not send one either).
TARGET_CHARS = st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="#")


@settings(max_examples=60)
@given(path=st.text(TARGET_CHARS, max_size=20), query=st.text(TARGET_CHARS, max_size=20))
async def test_any_target_is_sent_as_its_bytes(path: str, query: str) -> None:
    target = f"/v1/{path}" + (f"?{query}" if query else "")
    seen: list[bytes] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.extensions["target"])
        return httpx.Response(204)

    async with open_client(httpx.MockTransport(handle)) as client:
        await (await client.send(mock_req(f"https://api.example.test{target}"))).aclose()
    assert seen == [target.encode()]


# -- the mapping over httpx's whole hierarchy --------------------------------------------
def _subclasses(cls: type[Exception]) -> list[type[Exception]]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


TRANSPORT_ERRORS = _subclasses(httpx.TransportError)


@pytest.mark.parametrize("cls", TRANSPORT_ERRORS, ids=lambda c: c.__name__)
def test_every_transport_error_is_an_upstream_error(cls: type[Exception]) -> None:
    mapped = httpx_error(cls("x"))
    assert mapped is not None
    if issubclass(cls, httpx.TimeoutException):
        expected = (504, "upstream_timeout")
    elif issubclass(cls, httpx.ConnectError):
        expected = (502, "upstream_unreachable")
    else:
        expected = (502, "upstream_error")
    assert (mapped.status, mapped.code, mapped.type) == (*expected, "upstream_error")


@pytest.mark.parametrize(
    "exc",
    [
        httpx.TooManyRedirects("x"),
        httpx.DecodingError("x"),
        httpx.InvalidURL("x"),
        httpx.StreamClosed(),
        httpx.ResponseNotRead(),
    ],
    ids=lambda e: type(e).__name__,
)
def test_httpx_errors_that_are_not_the_upstreams_are_not_mapped(exc: Exception) -> None:
    assert httpx_error(exc) is None
