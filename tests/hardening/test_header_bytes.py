"""Header bytes on real sockets: a client's header values reach the upstream byte for byte,
whether or not they are UTF-8 (obs-text such as latin-1 `caf\\xe9` is legal in HTTP/1.1),
through the production client (aiohttp), on curated and plain paths alike.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.raw_upstream import RawRequest, RawUpstream
from tests.hardening.raw_http import connect, read_response
from tests.hardening.support import UPSTREAM_KEY, RunningProxy, chat_body, running_proxy
from tests.hardening.test_paths import tenant_config

VALUES = [
    b"caf\xe9\xff",  # latin-1, not UTF-8
    b"\xc3(",  # a truncated UTF-8 sequence
    b"\xed\xa0\x80",  # an encoded surrogate, which UTF-8 forbids
    b"Caf\xc3\xa9 \xf0\x9f\x9a\x80",  # valid UTF-8
    b"plain ascii",
]


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[RunningProxy, RawUpstream]]:
    with RawUpstream() as upstream, running_proxy(tenant_config(upstream.origin)) as proxy:
        yield proxy, upstream


def exchange(
    served: tuple[RunningProxy, RawUpstream], method: bytes, path: bytes, value: bytes
) -> RawRequest:
    proxy, upstream = served
    body = chat_body() if method == b"POST" else b""
    head = (
        method + b" " + path + b" HTTP/1.1\r\nHost: proxy\r\nX-Title: " + value + b"\r\n"
        b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n"
        b"Authorization: Bearer sk-client-own\r\n\r\n"
    )
    before = len(upstream.requests)
    with connect(proxy.port) as sock:
        sock.sendall(head + body)
        assert read_response(sock).status == 200
    (seen,) = upstream.requests[before:]
    return seen


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize(
    ("method", "path"), [(b"GET", b"/v1/models"), (b"POST", b"/v1/chat/completions")]
)
def test_header_values_arrive_byte_for_byte(
    served: tuple[RunningProxy, RawUpstream], method: bytes, path: bytes, value: bytes
) -> None:
    seen = exchange(served, method, path, value)
    assert seen.header(b"x-title") == value
    assert seen.header(b"authorization") == b"Bearer " + UPSTREAM_KEY.encode()
    assert seen.target == b"/tenant-a" + path


def test_a_request_with_non_utf8_bytes_carries_the_same_headers_as_any_other(
    served: tuple[RunningProxy, RawUpstream],
) -> None:
    odd = exchange(served, b"POST", b"/v1/chat/completions", b"caf\xe9")
    usual = exchange(served, b"POST", b"/v1/chat/completions", b"cafe")
    assert sorted(n.lower() for n, _ in odd.headers) == sorted(n.lower() for n, _ in usual.headers)
    assert odd.body == usual.body
    assert odd.header(b"host") == usual.header(b"host")
