"""upstream/h1_client.py on a real loopback socket: what it sends (only what it is given),
how a response ends (a length, chunks, the connection's end, a HEAD's head), when a
connection goes back to the pool and when it is dropped, the hand-overs to the fallback
client, per-request read timeouts and cancellation.

Which proxy error each failure phase becomes (for both clients) is in test_client.py.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from dataclasses import replace

import httptools
import pytest
import trustme
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.errors import ProxyError
from proxy.upstream import h1_client
from proxy.upstream.client import UpstreamRequest, UpstreamResponse
from proxy.upstream.h1_client import Address, H1Client, UnsendableRequest, h1_error, request_head
from proxy.upstream.h1_response import HIGH_WATER, BadResponse, ConnectFailed, ConnectionLost
from tests.fakes.servers import HOST, full_accept_queue
from tests.proxy.upstream.scripted import (
    BIG,
    GZIPPED,
    ScriptedUpstream,
    header,
    read_all,
    req,
)

pytestmark = pytest.mark.anyio


class Fallback:
    """The client H1Client hands over to: records what it was given."""

    def __init__(self) -> None:
        self.sent: list[UpstreamRequest] = []

    async def send(self, request: UpstreamRequest) -> UpstreamResponse:
        self.sent.append(request)
        raise ProxyError(599, "fallback", "stub")


@pytest.fixture
def fallback() -> Fallback:
    return Fallback()


@pytest.fixture
async def client(fallback: Fallback) -> AsyncIterator[H1Client]:
    production = H1Client(fallback)
    try:
        yield production
    finally:
        production.close()
        await asyncio.sleep(0)  # let the aborted transports finish closing


async def fetch(client: H1Client, request: UpstreamRequest) -> tuple[UpstreamResponse, bytes]:
    response = await client.send(request)
    try:
        return response, await read_all(response)
    finally:
        await response.aclose()


def conn_of(response: UpstreamResponse) -> bytes | None:
    return header(response, b"x-conn")


# -- what goes out, and what comes back unchanged -----------------------------------------
async def test_the_request_carries_only_the_given_headers_body_and_target(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    target = '/echo/a%20b/..%2fc?q=%2e%2e/|"&r=x%20y'
    odd = "Café".encode("latin-1")  # not UTF-8: sent as the bytes it is
    sent = req(
        upstream,
        target,
        method="POST",
        headers=((b"x-title", odd), (b"x-caf\xe9", b"1"), (b"authorization", b"Bearer sk-1")),
        body=b'{"model": "gpt-4o"}',
    )
    _, echoed = await fetch(client, sent)
    head, body = echoed.split(b"\r\n\r\n", 1)
    line, *lines = head.split(b"\r\n")
    assert line == b"POST " + target.encode() + b" HTTP/1.1"
    assert body == b'{"model": "gpt-4o"}'
    assert lines == [
        b"Host: " + upstream.origin.removeprefix("http://").encode(),
        b"x-title: " + odd,
        b"x-caf\xe9: 1",
        b"authorization: Bearer sk-1",
        b"Content-Length: 19",
    ]


@pytest.mark.parametrize(("method", "length"), [("GET", None), ("DELETE", b"0"), ("POST", b"0")])
async def test_an_empty_body_has_a_length_only_where_the_method_takes_one(
    client: H1Client, upstream: ScriptedUpstream, method: str, length: bytes | None
) -> None:
    _, echoed = await fetch(client, req(upstream, "/echo", method=method))
    lines = echoed.split(b"\r\n\r\n")[0].split(b"\r\n")
    assert (
        next(
            (v for n, _, v in (ln.partition(b": ") for ln in lines) if n == b"Content-Length"), None
        )
        == length
    )


@pytest.mark.parametrize(
    "headers",
    [((b"x-a", b"1\r\nx-injected: 1"),), ((b"x-a\nx-b", b"1"),), ((b"x-a", b"1\r"),)],
)
def test_bytes_that_would_split_the_request_are_refused(
    headers: tuple[tuple[bytes, bytes], ...],
) -> None:
    with pytest.raises(UnsendableRequest):
        request_head(b"GET", b"/v1/models", b"h", headers, b"")


def test_a_target_with_a_space_is_refused() -> None:
    with pytest.raises(UnsendableRequest):
        request_head(b"GET", b"/v1/models HTTP/1.0\r\n", b"h", (), b"")


async def test_a_refused_request_is_an_upstream_error_and_sends_nothing(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(ProxyError) as caught:
        await client.send(req(upstream, "/echo", headers=((b"x-a", b"1\r\nx-b: 2"),)))
    assert (caught.value.status, caught.value.code) == (502, "upstream_error")
    assert isinstance(caught.value.__cause__, UnsendableRequest)


async def test_a_body_streams_without_its_transfer_coding(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    response = await client.send(req(upstream, "/chunked"))
    try:
        assert (response.status, await read_all(response)) == (200, b"abcd")
        assert await response.read() == b""  # the end stays the end
    finally:
        await response.aclose()
    assert header(response, b"transfer-encoding") == b"chunked"  # the head is as sent


async def test_a_body_without_length_ends_with_the_connection(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    response, body = await fetch(client, req(upstream, "/eof"))
    assert (response.status, body) == (200, b"until the end")


async def test_a_head_request_ends_at_its_head(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    """llhttp would wait for the 1000 bytes its Content-Length announces."""
    response, body = await fetch(client, req(upstream, "/head", method="HEAD"))
    assert (response.status, header(response, b"content-length"), body) == (200, b"1000", b"")
    again, _ = await fetch(client, req(upstream, "/ok"))
    assert conn_of(again) != conn_of(response)  # not reused: its framing is unknown


async def test_an_interim_response_is_skipped(client: H1Client, upstream: ScriptedUpstream) -> None:
    response, body = await fetch(client, req(upstream, "/early"))
    assert (response.status, body) == (200, b"ok")
    assert header(response, b"link") is None


async def test_a_gzip_body_is_relayed_compressed(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    response, body = await fetch(client, req(upstream, "/gzip"))
    assert body == GZIPPED
    assert header(response, b"content-encoding") == b"gzip"


async def test_redirects_are_relayed_not_followed(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    response, body = await fetch(client, req(upstream, "/redirect"))
    assert (response.status, header(response, b"location"), body) == (302, b"/ok", b"")


async def test_cookies_from_one_response_are_not_sent_with_the_next(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    by_name = upstream.origin.replace(HOST, "localhost")
    response, _ = await fetch(client, replace(req(upstream, "/cookie"), url=f"{by_name}/cookie"))
    assert header(response, b"set-cookie") == b"session=secret; Path=/"  # relayed as is
    _, echoed = await fetch(client, replace(req(upstream, "/echo"), url=f"{by_name}/echo"))
    assert b"cookie" not in echoed.lower()


@pytest.mark.parametrize(
    "path",
    ["/garbage", "/endless"],
    ids=["no-http", "a-head-past-1-MiB"],  # /endless: 2 MiB of headers, never collected whole
)
async def test_bytes_that_are_no_http_response_are_an_upstream_error(
    client: H1Client, upstream: ScriptedUpstream, path: str
) -> None:
    with pytest.raises(ProxyError) as caught:
        await client.send(req(upstream, path))
    assert (caught.value.status, caught.value.code) == (502, "upstream_error")
    assert isinstance(caught.value.__cause__, BadResponse)


# -- the pool -------------------------------------------------------------------------------
async def test_a_read_body_returns_its_connection_a_half_read_one_closes_it(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    first, _ = await fetch(client, req(upstream, "/ok"))
    again, _ = await fetch(client, req(upstream, "/ok"))
    assert conn_of(again) == conn_of(first)  # pooled

    big = await client.send(req(upstream, "/big"))
    assert await big.read()
    await big.aclose()  # with megabytes unread: this connection is no longer usable
    after, body = await fetch(client, req(upstream, "/ok"))
    assert body == b"ok"
    assert conn_of(big) == conn_of(first)
    assert conn_of(after) != conn_of(big)


async def test_a_reader_that_waits_stops_the_socket_being_read(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    """A slow client must slow the upstream, not fill the proxy's memory."""
    response = await client.send(req(upstream, "/big"))
    try:
        await asyncio.sleep(0.3)  # the upstream sends 8 MiB meanwhile, if it can
        waiting = await response.read()
        assert HIGH_WATER <= len(waiting) < HIGH_WATER + 512 * 1024
        assert len(waiting) + len(await read_all(response)) == BIG  # and then all of it
    finally:
        await response.aclose()


async def test_a_connection_the_upstream_closes_is_not_reused(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    first, body = await fetch(client, req(upstream, "/close"))
    assert body == b"ok"
    second, _ = await fetch(client, req(upstream, "/ok", method="POST"))  # never retried
    assert conn_of(second) != conn_of(first)


async def test_an_idle_connection_past_its_keepalive_is_not_reused(
    client: H1Client, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, _ = await fetch(client, req(upstream, "/ok"))
    monkeypatch.setattr(h1_client, "KEEPALIVE_S", 0.05)
    await asyncio.sleep(0.1)
    second, _ = await fetch(client, req(upstream, "/ok"))
    assert conn_of(second) != conn_of(first)


async def test_a_kept_alive_connection_found_closed_is_retried_for_idempotent_methods(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    """The upstream hangs up on the second request of a connection, as one does that closed
    an idle connection just as the request went out. A GET goes again, on a new one."""
    first, _ = await fetch(client, req(upstream, "/flaky"))
    second, body = await fetch(client, req(upstream, "/flaky"))
    assert body == b"ok"
    assert conn_of(second) != conn_of(first)


async def test_the_retry_goes_on_a_new_connection_not_the_next_kept_one(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    """Two kept connections the upstream has both given up on (it restarted, say): the
    retry must not take the second."""
    kept = await asyncio.gather(*(fetch(client, req(upstream, "/flaky")) for _ in range(2)))
    assert len({conn_of(response) for response, _ in kept}) == 2
    retried, body = await fetch(client, req(upstream, "/flaky"))
    assert body == b"ok"
    assert conn_of(retried) not in {conn_of(response) for response, _ in kept}


async def test_a_post_on_a_connection_found_closed_is_not_sent_twice(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    """The upstream may have acted on it: the client gets the error, not a second completion."""
    await fetch(client, req(upstream, "/flaky", method="POST", body=b"{}"))
    with pytest.raises(ProxyError) as caught:
        await client.send(req(upstream, "/flaky", method="POST", body=b"{}"))
    assert (caught.value.status, caught.value.code) == (502, "upstream_error")
    assert isinstance(caught.value.__cause__, ConnectionLost)


# -- what the fallback client sends ---------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    ["http://user:key@{origin}/echo", "http://{origin}/caf\u00e9"],
    ids=["credentials", "non-ascii"],
)
async def test_credentials_in_the_url_and_non_ascii_urls_go_to_the_fallback(
    client: H1Client, fallback: Fallback, upstream: ScriptedUpstream, url: str
) -> None:
    sent = replace(req(upstream, "/echo"), url=url.format(origin=upstream.origin[7:]))
    with pytest.raises(ProxyError, match="stub"):
        await client.send(sent)
    assert fallback.sent == [sent]


# -- failures by phase ----------------------------------------------------------------------
async def test_each_request_gets_its_own_read_timeout(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    with pytest.raises(ProxyError, match="did not respond in time"):
        await client.send(req(upstream, "/late", read_timeout_s=0.05))
    _, body = await fetch(client, req(upstream, "/late", read_timeout_s=5))
    assert body == b"ok"
    with pytest.raises(ProxyError, match="did not respond in time"):
        await client.send(req(upstream, "/late", read_timeout_s=0.05))


async def test_cancellation_is_not_mapped_to_an_upstream_error(
    client: H1Client, upstream: ScriptedUpstream
) -> None:
    """A client that leaves cancels the send; the relay must see CancelledError, not a 502."""
    assert h1_error(asyncio.CancelledError()) is None
    task = asyncio.ensure_future(client.send(req(upstream, "/silent")))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# -- TLS ------------------------------------------------------------------------------------
@pytest.fixture
async def tls_upstream() -> AsyncIterator[tuple[str, trustme.CA]]:
    """An HTTPS upstream on loopback whose certificate a throwaway CA signed."""
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(answer, HOST, 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"https://localhost:{port}", ca


async def test_https_is_verified_against_the_trusted_cas(
    tls_upstream: tuple[str, trustme.CA], fallback: Fallback
) -> None:
    origin, ca = tls_upstream
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    client = H1Client(fallback, tls=trusting)
    try:
        for _ in range(2):  # the second on the kept-alive connection
            response, body = await fetch(
                client, UpstreamRequest("GET", origin + "/v1", (), b"", 5, 5)
            )
            assert (response.status, body) == (200, b"ok")
    finally:
        client.close()
        await asyncio.sleep(0)
    assert fallback.sent == []


async def test_an_upstream_certificate_nobody_trusts_is_unreachable(
    tls_upstream: tuple[str, trustme.CA], client: H1Client
) -> None:
    origin, _ = tls_upstream  # the system's CAs never signed it
    with pytest.raises(ProxyError) as caught:
        await client.send(UpstreamRequest("GET", origin + "/v1", (), b"", 5, 5))
    assert (caught.value.status, caught.value.code) == (502, "upstream_unreachable")
    assert isinstance(caught.value.__cause__, ConnectFailed)
    assert isinstance(caught.value.__cause__.__cause__, ssl.SSLCertVerificationError)


# -- the request head, for any bytes it may carry --------------------------------------------
class _Parsed:
    """What httptools (the parser uvicorn serves with) reads back from a request head."""

    def __init__(self) -> None:
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.done = False

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_message_complete(self) -> None:
        self.done = True


TARGET_CHARS = st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="#")
NAMES = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789-_!#$%&'*+.^`|~"), min_size=1)
VALUES = st.binary(max_size=30).map(
    lambda v: bytes(b for b in v if b not in b"\r\n\x00\x7f" and (b >= 0x20 or b == 9)).strip(
        b" \t"
    )
)


@settings(max_examples=80)
@given(
    target=st.text(TARGET_CHARS, max_size=30),
    headers=st.lists(st.tuples(NAMES.map(str.encode), VALUES), max_size=6),
    body=st.binary(max_size=20),
)
def test_any_head_reads_back_as_the_target_and_headers_it_was_given(
    target: str, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    path = b"/v1/" + target.encode()
    head = request_head(b"POST", path, b"upstream.test:8080", headers, body)
    parsed = _Parsed()
    httptools.HttpRequestParser(parsed).feed_data(head + body)
    assert parsed.done
    assert parsed.url == path
    assert parsed.headers == [
        (b"Host", b"upstream.test:8080"),
        *headers,
        (b"Content-Length", str(len(body)).encode()),
    ]


# -- new connections: the addresses tried, and how often they are looked up ------------------
async def test_an_address_that_never_answers_does_not_hold_up_the_next(
    client: H1Client, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Happy Eyeballs: the first address (a black hole, as a broken IPv6 route is) gets
    250 ms, then the next is tried beside it; without, the request waits out the connect
    timeout and fails (504)."""
    port = int(upstream.origin.rpartition(":")[2])
    with full_accept_queue() as hanging:
        addresses = [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (HOST, hanging)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", (HOST, port)),
        ]

        async def looked_up(*_args: object) -> list[Address]:
            return addresses

        monkeypatch.setattr(client, "_addresses", looked_up)
        _, body = await fetch(client, replace(req(upstream, "/ok"), connect_timeout_s=3))
    assert body == b"ok"  # without, the connect timeout (3 s) would have run out first


async def test_an_origin_is_looked_up_once_a_minute(
    client: H1Client, upstream: ScriptedUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop = asyncio.get_running_loop()
    lookups: list[object] = []
    real = loop.getaddrinfo

    async def counted(host: str, port: int, **kwargs: object) -> list[Address]:
        lookups.append(host)
        return await real(host, port, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(loop, "getaddrinfo", counted)
    by_name = replace(
        req(upstream, "/close"), url=upstream.origin.replace(HOST, "localhost") + "/close"
    )
    for _ in range(2):  # each on a new connection: the upstream closes the last
        _, body = await fetch(client, by_name)
        assert body == b"ok"
    assert lookups == ["localhost"]
    monkeypatch.setattr(h1_client, "DNS_TTL_S", 0.0)
    await fetch(client, by_name)
    assert lookups == ["localhost", "localhost"]
