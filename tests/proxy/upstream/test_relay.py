"""upstream/relay.py (and hygiene.py): URL mapping, header hygiene and the streaming relay."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping, Sequence
from typing import Any

import httpx
import orjson
import pytest

from proxy.errors import ProxyError
from proxy.protocols.base import USAGE_TAIL_BYTES
from proxy.upstream.client import UpstreamRequest
from proxy.upstream.h1_client import h1_error
from proxy.upstream.h1_response import BodyCut, ReadTimeout
from proxy.upstream.httpx_client import httpx_error
from proxy.upstream.hygiene import request_headers, response_head, upstream_url
from proxy.upstream.relay import Relay, StreamAborted, forward, sse_error_event

pytestmark = pytest.mark.anyio

BASE = "https://api.example.test/v1"


# -- URL mapping -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("target", "query", "expected"),
    [
        (b"/v1/models", b"", f"{BASE}/models"),
        (b"/v1/models", b"x=1&y=%20", f"{BASE}/models?x=1&y=%20"),
        (b"/v1/files/a%20b", b"", f"{BASE}/files/a%20b"),
        (b"/v1/models", b'q=%2e%2e/|"', f'{BASE}/models?q=%2e%2e/|"'),
    ],
)
def test_upstream_url_appends_the_rest_of_the_path(
    target: bytes, query: bytes, expected: str
) -> None:
    assert upstream_url(BASE, target, query) == expected


# -- header hygiene ----------------------------------------------------------------------
CLIENT_HEADERS = [
    (b"host", b"proxy.local:8080"),
    (b"content-type", b"application/json"),
    (b"connection", b"keep-alive, x-hop-me"),
    (b"keep-alive", b"timeout=5"),
    (b"x-hop-me", b"1"),
    (b"proxy-authorization", b"Basic abc"),
    (b"te", b"trailers"),
    (b"transfer-encoding", b"chunked"),
    (b"upgrade", b"h2c"),
    (b"trailer", b"x-sum"),
    (b"expect", b"100-continue"),
    (b"content-length", b"12"),
    (b"x-curator-policy", b"off"),
    (b"authorization", b"Bearer sk-client"),
    (b"openai-organization", b"org-1"),
    (b"x-title", "Café".encode()),
]


def test_request_headers_drop_hop_by_hop_control_and_derived_headers() -> None:
    out = request_headers(CLIENT_HEADERS, None)
    assert out == [
        (b"content-type", b"application/json"),
        (b"authorization", b"Bearer sk-client"),
        (b"openai-organization", b"org-1"),
        (b"x-title", "Café".encode()),
    ]


def test_configured_api_key_replaces_the_clients_authorization() -> None:
    out = request_headers(CLIENT_HEADERS, b"Bearer sk-upstream")
    auth = [v for n, v in out if n.lower() == b"authorization"]
    assert auth == [b"Bearer sk-upstream"]


def test_response_headers_are_lowercased_and_lose_hop_by_hop_ones() -> None:
    upstream = [
        (b"Content-Type", b"application/json"),
        (b"Connection", b"keep-alive, X-Internal"),
        (b"X-Internal", b"secret-route"),
        (b"Keep-Alive", b"timeout=5"),
        (b"Transfer-Encoding", b"chunked"),
        (b"Proxy-Authenticate", b"Basic"),
        (b"Content-Encoding", b"gzip"),
        (b"x-request-id", b"req_1"),
    ]
    head = response_head(upstream)
    assert head.headers == [
        (b"content-type", b"application/json"),
        (b"content-encoding", b"gzip"),
        (b"x-request-id", b"req_1"),
    ]
    assert (head.event_stream, head.content_length) == (False, None)


def test_response_head_notes_event_streams_and_lengths() -> None:
    sse = response_head([(b"Content-Type", b"Text/Event-Stream; charset=utf-8")])
    assert (sse.event_stream, sse.content_length) == (True, None)
    sized = response_head([(b"content-type", b"application/json"), (b"Content-Length", b"42")])
    assert (sized.event_stream, sized.content_length) == (False, 42)


# -- error mapping -----------------------------------------------------------------------
def test_sse_error_event_terminates_a_partial_event_first() -> None:
    err = ProxyError(504, "upstream_timeout", "slow")
    whole = sse_error_event(err, ends_event=True)
    assert whole.startswith(b"event: error\ndata: {")
    assert whole.endswith(b"\n\n")
    assert orjson.loads(whole.split(b"data: ", 1)[1])["error"]["code"] == "upstream_timeout"
    assert sse_error_event(err, ends_event=False) == b"\n\n" + whole


# -- the relay ---------------------------------------------------------------------------
class ScriptedResponse:
    """An upstream response whose reads follow a script: bytes, an exception, or a wait."""

    def __init__(self, status: int, headers: Sequence[tuple[bytes, bytes]], script: list[Any]):
        self.status = status
        self.headers = list(headers)
        self.script = script
        self.closed = asyncio.Event()

    async def read(self) -> bytes:
        if not self.script:
            return b""
        step = self.script.pop(0)
        if isinstance(step, BaseException):
            raise _as_client_raises(step)
        if isinstance(step, asyncio.Event):
            await step.wait()
            return b""
        assert isinstance(step, bytes)
        return step

    async def aclose(self) -> None:
        self.closed.set()


class ScriptedClient:
    def __init__(self, response: ScriptedResponse | BaseException) -> None:
        self.response = response
        self.sent: list[UpstreamRequest] = []

    async def send(self, request: UpstreamRequest) -> ScriptedResponse:
        self.sent.append(request)
        if isinstance(self.response, BaseException):
            raise _as_client_raises(self.response)
        return self.response


def _as_client_raises(exc: BaseException) -> BaseException:
    """A library's error as a real client raises it: mapped, the original as its cause."""
    mapped = h1_error(exc) or httpx_error(exc)
    if mapped is None:
        return exc
    mapped.__cause__ = exc
    return mapped


class Client:
    """The ASGI side: collects sent messages; `leave()` makes receive report a disconnect."""

    def __init__(self) -> None:
        self.messages: list[MutableMapping[str, Any]] = []
        self.gone = asyncio.Event()
        self.got_body = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.messages.append(message)
        if message["type"] == "http.response.body":
            self.got_body.set()
            if not message.get("more_body", False):
                self.gone.set()  # ASGI: receive reports disconnect once the response is done

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages[1:])


REQUEST = UpstreamRequest("POST", f"{BASE}/chat/completions", [], b"{}", 1.0, 1.0)
SSE = [(b"Content-Type", b"text/event-stream"), (b"Transfer-Encoding", b"chunked")]


async def test_relays_status_headers_and_chunks_in_order() -> None:
    chunks = [b"data: 1\n\n", b"data: 2\n\n", b"data: [DONE]\n\n"]
    response = ScriptedResponse(201, SSE, list(chunks))
    client = Client()
    relay = Relay("r1")
    await forward(
        ScriptedClient(response), REQUEST, client.receive, client.send, [(b"x-a", b"1")], relay
    )
    start = client.messages[0]
    assert start["status"] == 201
    assert start["headers"] == [(b"content-type", b"text/event-stream"), (b"x-a", b"1")]
    assert [m["body"] for m in client.messages[1:-1]] == chunks
    assert client.messages[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
    assert (relay.status, relay.outcome, relay.complete) == (201, "ok", True)
    assert relay.first_byte_at is not None
    assert response.closed.is_set()


@pytest.mark.parametrize("size", [1, 700, 5000, USAGE_TAIL_BYTES + 1])
async def test_an_observed_relay_keeps_the_bodys_tail(size: int) -> None:
    chunks = [bytes([65 + i % 26]) * size for i in range(40)]
    relay = Relay("r1", keep_tail=True)
    client = Client()
    await forward(
        ScriptedClient(ScriptedResponse(200, SSE, list(chunks))),
        REQUEST,
        client.receive,
        client.send,
        [],
        relay,
    )
    assert relay.tail() == b"".join(chunks)[-USAGE_TAIL_BYTES:]
    assert relay.tail_parts is not None
    assert sum(map(len, relay.tail_parts)) < USAGE_TAIL_BYTES + size  # bounded, not the body


async def test_an_unobserved_relay_keeps_nothing() -> None:
    relay = Relay("r1")
    client = Client()
    response = ScriptedResponse(200, SSE, [b"data: 1\n\n"])
    await forward(ScriptedClient(response), REQUEST, client.receive, client.send, [], relay)
    assert (relay.tail_parts, relay.tail()) == (None, b"")


async def test_client_disconnect_closes_the_upstream_response() -> None:
    never = asyncio.Event()
    response = ScriptedResponse(200, SSE, [b"data: 1\n\n", never])
    client = Client()
    relay = Relay("r2")
    running = asyncio.ensure_future(
        forward(ScriptedClient(response), REQUEST, client.receive, client.send, [], relay)
    )
    await client.got_body.wait()
    client.gone.set()
    await asyncio.wait_for(running, 10)
    assert relay.outcome == "client_disconnect"
    assert response.closed.is_set()
    assert not never.is_set()


async def test_mid_stream_failure_on_sse_ends_with_an_error_event_not_done() -> None:
    script: list[Any] = [b"data: 1\n\n", b'data: {"partial', ReadTimeout()]
    response = ScriptedResponse(200, SSE, script)
    client = Client()
    relay = Relay("r3")
    await forward(ScriptedClient(response), REQUEST, client.receive, client.send, [], relay)
    last = client.messages[-1]
    assert last["more_body"] is False
    assert last["body"].startswith(b"\n\nevent: error\ndata: ")
    assert b"[DONE]" not in client.body()
    assert (relay.outcome, relay.error) == ("upstream_error", "upstream_timeout")


async def test_mid_body_failure_on_plain_responses_aborts_the_connection() -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"100")]
    response = ScriptedResponse(200, headers, [b'{"id":', BodyCut()])
    client = Client()
    with pytest.raises(StreamAborted):
        await forward(
            ScriptedClient(response), REQUEST, client.receive, client.send, [], Relay("r4")
        )
    assert all(m.get("more_body", True) for m in client.messages[1:])
    assert response.closed.is_set()


async def test_failure_before_the_response_raises_a_proxy_error_and_sends_nothing() -> None:
    client = Client()
    with pytest.raises(ProxyError) as caught:
        await forward(
            ScriptedClient(httpx.ConnectError("refused")),
            REQUEST,
            client.receive,
            client.send,
            [],
            Relay("r5"),
        )
    assert caught.value.code == "upstream_unreachable"
    assert client.messages == []


async def test_a_complete_content_length_body_ends_without_another_read() -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"10")]
    script: list[Any] = [b"01234", b"56789", AssertionError("read past the body")]
    response = ScriptedResponse(200, headers, script)
    client = Client()
    relay = Relay("r6")
    await forward(ScriptedClient(response), REQUEST, client.receive, client.send, [], relay)
    assert [m.get("more_body") for m in client.messages[1:]] == [True, False]
    assert client.body() == b"0123456789"
    assert (relay.outcome, relay.complete) == ("ok", True)
