"""Upstream statuses HTTP gives no final meaning, over real sockets: 600-999 (three digits,
so the parser takes them) and a 101 to a POST. Each is answered 502 `upstream_error` in
OpenAI's shape and audited as that, and the client's connection keeps serving HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import orjson
import pytest

from proxy.config.loader import UpstreamConfig
from tests.fakes.servers import HOST
from tests.hardening.raw_http import connect, read_response, request_head
from tests.hardening.support import CHAT, RunningProxy, chat_body, hardening_config, running_proxy
from tests.hardening.upstreams import RawUpstream

ODD = {
    "600": b"HTTP/1.1 600 Beyond\r\nContent-Length: 2\r\n\r\nhi",
    "999": b"HTTP/1.1 999 Whatever\r\nContent-Type: application/json\r\n\r\n{}",
    "101 to a POST": (
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        b"GET / HTTP/1.1\r\n\r\n"
    ),
}


@pytest.fixture(params=list(ODD))
def proxy(request: pytest.FixtureRequest) -> Iterator[RunningProxy]:
    upstream = RawUpstream(ODD[request.param])
    config = hardening_config("http://127.0.0.1:9")
    odd = UpstreamConfig("fake", f"http://{HOST}:{upstream.port}/v1", read_timeout_s=5)
    try:
        with running_proxy(replace(config, upstreams={**config.upstreams, "fake": odd})) as p:
            yield p
    finally:
        upstream.close()


def test_a_status_without_final_meaning_is_a_502(proxy: RunningProxy) -> None:
    body = chat_body()
    head = {"content-type": "application/json", "content-length": str(len(body))}
    with connect(proxy.port) as sock:
        for _ in range(2):  # the same connection serves the next request
            sock.sendall(request_head("POST", CHAT, head, port=proxy.port) + body)
            response = read_response(sock)
            assert response.status == 502, response
            error = orjson.loads(response.body)["error"]
            assert (error["code"], error["type"]) == ("upstream_error", "upstream_error")
    for record in proxy.wait_records(2):
        assert (record.status, record.outcome, record.error) == (
            502,
            "upstream_error",
            "upstream_error",
        )
        assert (record.upstream_status, record.incomplete) == (None, None)  # none relayed
