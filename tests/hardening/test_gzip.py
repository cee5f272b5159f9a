"""Gzip in both directions stays consistent: Content-Encoding, Content-Length and the bytes
all describe the same body, and the proxy never inflates, re-compresses or asks for gzip."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import httpx
import orjson
import pytest

from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.raw_http import connect, read_response, request_head
from tests.hardening.support import CHAT, RunningProxy, chat_body, hardening_config, running_proxy


@pytest.fixture
def proxy(fake: FakeOpenAI) -> Iterator[RunningProxy]:
    with running_proxy(hardening_config(fake.origin)) as running:
        yield running


def test_a_gzip_response_keeps_encoding_length_and_bytes(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(reply="compressed " * 200, gzip=True))
    body = chat_body()
    head = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "accept-encoding": "gzip",
    }
    with connect(proxy.port) as sock:  # raw, so nothing on our side decodes anything
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + body)
        response = read_response(sock)
    assert response.status == 200
    assert response.headers["content-encoding"] == "gzip"
    assert int(response.headers["content-length"]) == len(response.body)
    assert response.body == fake.sent[0]
    completion = orjson.loads(gzip.decompress(response.body))
    assert completion["choices"][0]["message"]["content"] == "compressed " * 200
    assert fake.last.header("accept-encoding") == "gzip"
    assert proxy.wait_records(1)[0].outcome == "ok"


def test_the_proxy_asks_for_no_encoding_of_its_own(proxy: RunningProxy, fake: FakeOpenAI) -> None:
    body = chat_body()
    head = {"content-type": "application/json", "content-length": str(len(body))}
    with connect(proxy.port) as sock:
        sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + body)
        response = read_response(sock)
    assert response.status == 200
    assert "accept-encoding" not in fake.last.header_names()
    assert "content-encoding" not in response.headers
    assert int(response.headers["content-length"]) == len(response.body) == len(fake.sent[0])


def test_a_gzip_request_body_goes_upstream_byte_for_byte(
    proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    packed = gzip.compress(chat_body("a compressed request"))
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    with httpx.Client(base_url=proxy.origin) as http:
        response = http.post(CHAT, content=packed, headers=headers)
    # The proxy cannot read it, so it is not curated: forwarded as sent, and said so.
    assert response.headers["x-curator-skipped"] == "invalid_json"
    assert fake.last.body == packed
    assert fake.last.header("content-encoding") == "gzip"
    assert fake.last.header("content-length") == str(len(packed))
