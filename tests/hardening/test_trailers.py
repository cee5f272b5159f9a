"""Chunked trailers over real sockets: the request head is frozen once it is complete.

Trailer fields never join the request's headers (so they pick no route, lend no
credential and never travel upstream), and a trailer section is bounded like a head:
past `server.max_header_kb` the request gets 431, however the trailers are cut up.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson
import pytest

from proxy.config.limits import Limits
from tests.fakes.upstream import FakeOpenAI
from tests.hardening.raw_http import (
    RawResponse,
    connect,
    read_response,
    request_head,
    send_all_tolerant,
)
from tests.hardening.support import (
    CHAT,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
)

HEAD_KB = 4
LIMITS = Limits(max_header_kb=HEAD_KB, max_body_mb=1)
CHUNKED = {"content-type": "application/json", "transfer-encoding": "chunked"}


@pytest.fixture
def proxy(fake: FakeOpenAI) -> Iterator[RunningProxy]:
    with running_proxy(hardening_config(fake.origin, limits=LIMITS)) as running:
        yield running


def _chunked(body: bytes, trailers: bytes) -> bytes:
    return f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n" + trailers + b"\r\n"


def _post(proxy: RunningProxy, head: dict[str, str], rest: bytes) -> RawResponse:
    with connect(proxy.port) as sock:
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port))
        send_all_tolerant(sock, rest)
        return read_response(sock)


def test_trailer_fields_pick_no_route_and_never_go_upstream(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    # `x-route: dead` in the head would send this to a port nobody listens on (502).
    trailers = b"x-route: dead\r\nauthorization: Bearer sk-trailer-smuggled\r\nx-smuggled: 1\r\n"
    response = _post(proxy, CHUNKED, _chunked(chat_body(), trailers))
    assert response.status == 200, response.body
    assert fake.last.body == chat_body()
    names = fake.last.header_names()
    assert not {"x-route", "authorization", "x-smuggled"} & names, names
    assert proxy.wait_records(1)[0].route == "default"


def test_a_trailer_does_not_override_the_heads_own_field(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    head = {**CHUNKED, "x-route": "keyed"}  # the keyed route sends the upstream key
    response = _post(proxy, head, _chunked(chat_body(), b"x-route: dead\r\n"))
    assert response.status == 200, response.body
    assert proxy.wait_records(1)[0].route == "keyed"
    assert fake.last.header("x-route") == "keyed"


def _refused(response: RawResponse) -> None:
    assert response.status == 431, response.body
    assert orjson.loads(response.body)["error"]["code"] == "request_header_too_large"


def test_many_small_trailer_fields_past_the_head_limit_get_431(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    # 1 MB of trailers: 256 times the head limit, and as big as the body limit.
    field = b"x-pad: " + b"p" * 100 + b"\r\n"
    trailers = field * (1024 * 1024 // len(field))
    _refused(_post(proxy, CHUNKED, _chunked(chat_body(), trailers)))
    assert fake.requests == []
    record = proxy.wait_records(1)[0]
    assert (record.status, record.error) == (431, "request_header_too_large")


def test_one_huge_trailer_field_is_cut_off_as_it_arrives(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    # The parser would buffer a field's value until its end: 8 MB that never ends.
    start = _chunked(chat_body(), b"")[:-2] + b"x-pad: "
    _refused(_post(proxy, CHUNKED, start + b"p" * (8 * 1024 * 1024)))
    assert fake.requests == []


def test_trailers_within_the_limit_are_dropped_and_the_request_served(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    trailers = b"x-checksum: " + b"c" * (HEAD_KB * 1024 // 2) + b"\r\n"
    response = _post(proxy, CHUNKED, _chunked(chat_body(), trailers))
    assert response.status == 200, response.body
    assert "x-checksum" not in fake.last.header_names()


def test_a_body_of_many_tiny_chunks_is_not_mistaken_for_trailers(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    # Each byte its own chunk: five bytes of framing a byte, far past the head limit in all.
    body = chat_body("tiny " * 4000)
    framed = b"".join(b"1\r\n" + body[i : i + 1] + b"\r\n" for i in range(len(body)))
    response = _post(proxy, CHUNKED, framed + b"0\r\n\r\n")
    assert response.status == 200, response.body
    assert fake.last.body == body
