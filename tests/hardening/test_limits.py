"""Limits over real sockets: body size (with and without Content-Length), message count,
JSON nesting, and overload answered with a fast 503 rather than a queue."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import orjson
import pytest

from proxy.config.limits import MIB, Limits
from proxy.errors import ProxyError
from proxy.protocols.wire import BRACKET_COUNT_MAX_BYTES, check_depth, within_depth
from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.raw_http import connect, read_response, request_head, send_all_tolerant
from tests.hardening.support import (
    CHAT,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
    wait_for,
)

LIMITS = Limits(max_body_mb=1, max_inflight=2, max_messages=50, max_json_depth=20)


@pytest.fixture
def proxy(fake: FakeOpenAI) -> Iterator[RunningProxy]:
    with running_proxy(hardening_config(fake.origin, limits=LIMITS)) as running:
        yield running


@pytest.fixture
def http(proxy: RunningProxy) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy.origin, timeout=30) as client:
        yield client


def _padded(size: int) -> bytes:
    """A valid chat body of exactly `size` bytes (padded outside the messages, so the
    upstream's context window does not refuse it)."""
    empty = chat_body(extra={"user": ""})
    return chat_body(extra={"user": "a" * (size - len(empty))})


def _assert_error(status: int, body: bytes, expected_status: int, code: str) -> None:
    assert status == expected_status
    error = orjson.loads(body)["error"]
    assert error["code"] == code
    assert set(error) == {"message", "type", "param", "code"}


# -- body size -------------------------------------------------------------------------
def test_a_content_length_over_the_limit_is_refused_before_the_body_is_read(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    head = {"content-type": "application/json", "content-length": str(10**9)}
    with connect(proxy.port) as sock:
        # Only the head is sent: an answer proves the proxy did not wait for the body.
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port))
        response = read_response(sock)
    _assert_error(response.status, response.body, 413, "request_too_large")
    assert str(MIB) in orjson.loads(response.body)["error"]["message"]
    assert fake.requests == []


def test_a_chunked_body_over_the_limit_gets_413(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    head = {"content-type": "application/json", "transfer-encoding": "chunked"}
    piece = b"a" * 65536
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    with connect(proxy.port) as sock:
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port))
        send_all_tolerant(sock, chunk * (2 * MIB // len(piece)) + b"0\r\n\r\n")
        response = read_response(sock)
    _assert_error(response.status, response.body, 413, "request_too_large")
    record = proxy.wait_records(1)[0]
    assert (record.status, record.outcome, record.error) == (
        413,
        "proxy_error",
        "request_too_large",
    )
    assert fake.requests == []


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_limit_is_forwarded_intact(
    http: httpx.Client, fake: FakeOpenAI, chunked: bool
) -> None:
    body = _padded(MIB)
    content = iter([body[: MIB // 2], body[MIB // 2 :]]) if chunked else body
    response = http.post(CHAT, content=content)
    assert response.status_code == 200
    assert fake.last.body == body
    assert (fake.last.header("transfer-encoding") is None) or chunked


def test_one_byte_over_the_limit_is_refused(http: httpx.Client, fake: FakeOpenAI) -> None:
    response = http.post(CHAT, content=_padded(MIB + 1))
    _assert_error(response.status_code, response.content, 413, "request_too_large")
    assert fake.requests == []


# -- chat shape ------------------------------------------------------------------------
def _messages(count: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": "x"} for i in range(count)]


def test_too_many_messages_is_400(
    http: httpx.Client, fake: FakeOpenAI, proxy: RunningProxy
) -> None:
    body = orjson.dumps({"model": "gpt-4o", "messages": _messages(LIMITS.max_messages + 1)})
    response = http.post(CHAT, content=body)
    _assert_error(response.status_code, response.content, 400, "too_many_messages")
    assert response.json()["error"]["param"] == "messages"
    assert fake.requests == []
    assert proxy.wait_records(1)[0].outcome == "proxy_error"


def test_the_message_limit_itself_is_allowed(http: httpx.Client) -> None:
    body = orjson.dumps({"model": "gpt-4o", "messages": _messages(LIMITS.max_messages - 1)})
    assert http.post(CHAT, content=body).status_code == 200


def _nested(depth: int) -> bytes:
    """A chat body whose deepest value sits `depth` containers down."""
    body: dict[str, object] = {"model": "gpt-4o", "messages": _messages(1)}
    inner: object = "leaf"
    for _ in range(depth - 1):  # the body itself is the first level
        inner = [inner]
    body["metadata_blob"] = inner
    assert within_depth(body, depth)
    assert not within_depth(body, depth - 1)
    return orjson.dumps(body)


def test_nesting_at_the_limit_is_forwarded(http: httpx.Client, fake: FakeOpenAI) -> None:
    body = _nested(LIMITS.max_json_depth)
    assert http.post(CHAT, content=body).status_code == 200
    assert fake.last.body == body


@pytest.mark.parametrize("depth", [LIMITS.max_json_depth + 1, 300, 5000])
def test_nesting_beyond_the_limit_is_400(http: httpx.Client, fake: FakeOpenAI, depth: int) -> None:
    # 300 decodes but could not be re-encoded; 5000 is past orjson's own decoding limit,
    # and is refused too rather than forwarded as merely invalid JSON.
    body = b'{"model":"gpt-4o","messages":[{"role":"user","content":"hi","x":'
    body += b"[" * depth + b"]" * depth + b"}]}"
    response = http.post(CHAT, content=body)
    _assert_error(response.status_code, response.content, 400, "nesting_too_deep")
    assert fake.requests == []


@pytest.mark.parametrize("padding", [0, BRACKET_COUNT_MAX_BYTES], ids=["small", "big"])
@pytest.mark.parametrize("extra", [0, 1], ids=["at-limit", "beyond"])
def test_depth_check_on_small_and_big_bodies(padding: int, extra: int) -> None:
    # Small bodies are first screened by counting brackets, big ones walked directly;
    # both must reach the same verdict, brackets inside strings included.
    depth = LIMITS.max_json_depth + extra
    parsed = orjson.loads(_nested(depth))
    parsed["messages"][0]["content"] = "[{" * 40 + "x" * padding
    raw = orjson.dumps(parsed)
    if extra:
        with pytest.raises(ProxyError) as caught:
            check_depth(raw, parsed, LIMITS.max_json_depth)
        assert caught.value.code == "nesting_too_deep"
    else:
        check_depth(raw, parsed, LIMITS.max_json_depth)


def test_invalid_json_is_still_forwarded_unchanged(http: httpx.Client, fake: FakeOpenAI) -> None:
    body = b'{"model": "gpt-4o", "messages": [' + b"{" * 10
    response = http.post(CHAT, content=body)
    assert response.status_code == 400  # the upstream's verdict, not the proxy's
    assert response.headers["x-curator-skipped"] == "invalid_json"
    assert fake.last.body == body


# -- overload --------------------------------------------------------------------------
def test_beyond_max_inflight_a_fast_503_with_retry_after(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    release = threading.Event()
    fake.queue(Behavior(release=release), Behavior(release=release))
    with ExitStack() as stack:
        http = stack.enter_context(httpx.Client(base_url=proxy.origin, timeout=30))
        held = [
            stack.enter_context(http.stream("POST", CHAT, content=chat_body(stream=True)))
            for _ in range(2)
        ]
        streams = [response.iter_raw() for response in held]
        firsts = [next(s) for s in streams]  # both are inside the proxy, waiting upstream
        refused = http.post(CHAT, content=chat_body())
        assert http.get("/healthz").status_code == 200  # health checks are never refused
        assert http.get("/metrics").status_code == 200  # nor scrapes
        release.set()
        bodies = [first + b"".join(s) for first, s in zip(firsts, streams, strict=True)]
        _assert_error(refused.status_code, refused.content, 503, "proxy_overloaded")
        assert refused.headers["retry-after"] == "1"
        assert all(b.endswith(b"data: [DONE]\n\n") for b in bodies)
        assert len(fake.requests) == 2  # the refused one never went upstream
    with httpx.Client(base_url=proxy.origin, timeout=30) as http:
        # Finished requests free their slots.
        assert http.post(CHAT, content=chat_body()).status_code == 200


def test_a_client_that_leaves_frees_its_slot(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    never = threading.Event()
    fake.queue(Behavior(release=never), Behavior(release=never))
    for _ in range(2):
        with (
            httpx.Client(base_url=proxy.origin, timeout=30) as http,
            http.stream("POST", CHAT, content=chat_body(stream=True)) as response,
        ):
            next(response.iter_raw())
    wait_for(lambda: len(proxy.records) == 2, "both abandoned streams to end")
    with httpx.Client(base_url=proxy.origin, timeout=30) as http:
        assert http.post(CHAT, content=chat_body()).status_code == 200
