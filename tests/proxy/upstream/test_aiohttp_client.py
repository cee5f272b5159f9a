"""upstream/aiohttp_client.py on a real loopback socket: what the production session sends and
keeps (nothing of its own), how a response body streams and goes back to the pool, its
per-request read timeouts, and cancellation.

Which proxy error each failure phase becomes (for both clients), the error table itself
(`aiohttp_error` on constructed exceptions), a refused connect and the hand-over of
non-UTF-8 requests to the verbatim client are in test_client.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest

from proxy.errors import ProxyError
from proxy.upstream.aiohttp_client import AiohttpClient, aiohttp_error, aiohttp_session
from proxy.upstream.client import UpstreamRequest, UpstreamResponse
from tests.fakes.servers import HOST
from tests.proxy.upstream.scripted import (
    GZIPPED,
    ScriptedUpstream,
    header,
    read_all,
    req,
)

pytestmark = pytest.mark.anyio


class NoVerbatim:
    """The verbatim client, which none of these (UTF-8, ASCII-URL) requests may reach."""

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        raise AssertionError(f"handed to the verbatim client: {request.url}")


@pytest.fixture
async def client() -> AsyncIterator[AiohttpClient]:
    async with aiohttp_session() as session:
        yield AiohttpClient(session, NoVerbatim())


async def fetch(client: AiohttpClient, request: UpstreamRequest) -> tuple[UpstreamResponse, bytes]:
    response = await client.send(request)
    try:
        return response, await read_all(response)
    finally:
        await response.aclose()


# -- what goes out, and what comes back unchanged -----------------------------------------
async def test_the_request_carries_only_the_given_headers_body_and_target(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    target = '/echo/a%20b/..%2fc?q=%2e%2e/|"&r=x%20y'
    sent = req(
        upstream,
        target,
        method="POST",
        headers=((b"x-title", "Café".encode()), (b"authorization", b"Bearer sk-1")),
        body=b'{"model": "gpt-4o"}',
    )
    _, echoed = await fetch(client, sent)
    head, body = echoed.split(b"\r\n\r\n", 1)
    line, *lines = head.split(b"\r\n")
    names = [raw.partition(b":")[0].lower() for raw in lines]
    assert line == b"POST " + target.encode() + b" HTTP/1.1"
    assert body == b'{"model": "gpt-4o"}'
    assert b"x-title: " + "Café".encode() in lines
    # The libraries' own additions are only the derived Host and Content-Length.
    assert sorted(names) == [b"authorization", b"content-length", b"host", b"x-title"]


async def test_a_body_streams_without_its_transfer_coding(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    response = await client.send(req(upstream, "/chunked"))
    try:
        assert (response.status, await read_all(response)) == (200, b"abcd")
        assert await response.read() == b""  # the end stays the end
    finally:
        await response.aclose()
    assert header(response, b"transfer-encoding") == b"chunked"  # the head is as sent


async def test_a_gzip_body_is_relayed_compressed(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    response, body = await fetch(client, req(upstream, "/gzip"))
    assert body == GZIPPED
    assert header(response, b"content-encoding") == b"gzip"


async def test_redirects_are_relayed_not_followed(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    response, body = await fetch(client, req(upstream, "/redirect"))
    assert (response.status, header(response, b"location"), body) == (302, b"/ok", b"")


async def test_cookies_from_one_response_are_not_sent_with_the_next(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    # By name: aiohttp's default jar ignores cookies from IP addresses anyway.
    by_name = upstream.origin.replace(HOST, "localhost")
    response, _ = await fetch(client, replace(req(upstream, "/cookie"), url=f"{by_name}/cookie"))
    assert header(response, b"set-cookie") == b"session=secret; Path=/"  # relayed as is
    _, echoed = await fetch(client, replace(req(upstream, "/echo"), url=f"{by_name}/echo"))
    assert b"cookie" not in echoed.lower()


async def test_a_read_body_returns_its_connection_a_half_read_one_closes_it(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    first, _ = await fetch(client, req(upstream, "/ok"))
    again, _ = await fetch(client, req(upstream, "/ok"))
    assert header(again, b"x-conn") == header(first, b"x-conn")  # pooled

    big = await client.send(req(upstream, "/big"))
    assert await big.read()
    await big.aclose()  # with megabytes unread: this connection is no longer usable
    after, body = await fetch(client, req(upstream, "/ok"))
    assert body == b"ok"
    assert header(big, b"x-conn") == header(first, b"x-conn")
    assert header(after, b"x-conn") != header(big, b"x-conn")


async def test_a_header_name_that_is_not_utf8_goes_to_the_verbatim_client(
    upstream: ScriptedUpstream,
) -> None:
    class Verbatim:
        def __init__(self) -> None:
            self.sent: list[UpstreamRequest] = []

        async def send(self, request: UpstreamRequest) -> UpstreamResponse:
            self.sent.append(request)
            raise ProxyError(599, "verbatim", "stub")

    verbatim = Verbatim()
    odd = req(upstream, "/echo", headers=((b"x-caf\xe9", b"1"),))
    async with aiohttp_session() as session:
        with pytest.raises(ProxyError, match="stub"):
            await AiohttpClient(session, verbatim).send(odd)
    assert verbatim.sent == [odd]


# -- failures by phase --------------------------------------------------------------------
async def test_each_request_gets_its_own_read_timeout(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    """The session keeps one timeout object per (connect, read) pair: a slower upstream's
    allowance must not leak into a stricter one's, nor the other way round."""
    with pytest.raises(ProxyError, match="did not respond in time"):
        await client.send(req(upstream, "/late", read_timeout_s=0.05))
    _, body = await fetch(client, req(upstream, "/late", read_timeout_s=5))
    assert body == b"ok"
    with pytest.raises(ProxyError, match="did not respond in time"):
        await client.send(req(upstream, "/late", read_timeout_s=0.05))


async def test_cancellation_is_not_mapped_to_an_upstream_error(
    client: AiohttpClient, upstream: ScriptedUpstream
) -> None:
    """A client that leaves cancels the send; the relay must see CancelledError, not a 502."""
    assert aiohttp_error(asyncio.CancelledError()) is None
    task = asyncio.ensure_future(client.send(req(upstream, "/silent")))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
