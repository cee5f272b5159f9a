"""Upstream faults by phase, over real sockets: connect refused, silence before the head,
a hang-up after the request, a reset mid-stream. Each gets its own answer and record, no
body carries a traceback, an address or the key, and a POST is never sent twice."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import httpx
import orjson
import pytest

from proxy.config.loader import UpstreamConfig
from proxy.observability.exchange import ExchangeRecord
from tests.fakes.servers import HOST
from tests.fakes.upstream import Behavior, FakeOpenAI
from tests.hardening.support import (
    CHAT,
    UPSTREAM_KEY,
    WAIT_S,
    RunningProxy,
    chat_body,
    hardening_config,
    running_proxy,
)
from tests.hardening.upstreams import HangUp

REPLY = "one two three four five six"


@pytest.fixture
def proxy(fake: FakeOpenAI, dead_port: int) -> Iterator[RunningProxy]:
    config = hardening_config(fake.origin, dead_port=dead_port, read_timeout_s=3.0)
    with running_proxy(config) as running:
        yield running


@pytest.fixture
def http(proxy: RunningProxy) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=proxy.origin, timeout=30) as client:
        yield client


def _assert_clean(text: str, *ports: int) -> None:
    for leak in (UPSTREAM_KEY, "Traceback", "aiohttp", "Error:", HOST, *map(str, ports)):
        assert leak not in text


def _phase(record: ExchangeRecord) -> tuple[int | None, int | None, str, str | None]:
    return record.upstream_status, record.status, record.outcome, record.error


def test_connect_refused_is_502(http: httpx.Client, proxy: RunningProxy, dead_port: int) -> None:
    response = http.post(CHAT, content=chat_body(), headers={"x-route": "dead"})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_unreachable"
    _assert_clean(response.text + str(response.headers), dead_port)
    record = proxy.wait_records(1)[0]
    assert _phase(record) == (None, 502, "upstream_error", "upstream_unreachable")


def test_silence_past_the_read_timeout_is_504(
    http: httpx.Client, proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(stall_s=60))
    response = http.post(CHAT, content=chat_body(), headers={"x-route": "short"})
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    _assert_clean(response.text + str(response.headers))
    assert _phase(proxy.wait_records(1)[0]) == (None, 504, "upstream_error", "upstream_timeout")
    assert fake.disconnected.wait(WAIT_S)


def test_a_hang_up_after_the_request_is_502_and_never_retried(fake: FakeOpenAI) -> None:
    hang = HangUp()
    config = hardening_config(fake.origin)
    upstream = UpstreamConfig("fake", f"http://{HOST}:{hang.port}/v1", api_key=UPSTREAM_KEY)
    config = replace(config, upstreams={**config.upstreams, "fake": upstream})
    try:
        with running_proxy(config) as proxy, httpx.Client(base_url=proxy.origin) as http:
            response = http.post(CHAT, content=chat_body())
            assert response.status_code == 502
            assert response.json()["error"]["code"] == "upstream_error"
            _assert_clean(response.text, hang.port)
            record = proxy.wait_records(1)[0]
    finally:
        hang.close()
    # It reached the upstream, which may have acted on it: sending it again is not ours to do.
    assert hang.requests == 1
    assert _phase(record) == (None, 502, "upstream_error", "upstream_error")


def test_a_reset_mid_stream_ends_with_an_error_event_never_done(
    http: httpx.Client, proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(reply=REPLY, abort_after=3))
    with http.stream("POST", CHAT, content=chat_body(stream=True)) as response:
        body = b"".join(response.iter_raw())
    assert response.status_code == 200
    relayed, _, tail = body.partition(b"event: error\n")
    assert relayed == b"".join(e + b"\n\n" for e in fake.sent[0].split(b"\n\n")[:3])
    assert b"[DONE]" not in body
    error = orjson.loads(tail.removeprefix(b"data: ").strip())["error"]
    assert error["code"] == "upstream_error"
    _assert_clean(body.decode())
    assert _phase(proxy.wait_records(1)[0]) == (200, 200, "upstream_error", "upstream_error")


def test_a_pause_just_under_the_read_timeout_survives(
    http: httpx.Client, proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    # The fake route allows 3 s of silence between bytes; the stream pauses 2.5 s twice.
    fake.queue(Behavior(reply=REPLY, pause_after=1, pause_s=2.5))
    fake.queue(Behavior(reply=REPLY, pause_after=3, pause_s=2.5))
    for i in range(2):
        with http.stream("POST", CHAT, content=chat_body(stream=True)) as response:
            body = b"".join(response.iter_raw())
        assert body == fake.sent[i]
        assert body.endswith(b"data: [DONE]\n\n")
    records = proxy.wait_records(2)
    assert [r.outcome for r in records] == ["ok", "ok"]
    assert not fake.disconnected.is_set()


def test_a_plain_body_cut_short_drops_the_client_connection(
    http: httpx.Client, proxy: RunningProxy, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(abort_after=20))
    with pytest.raises(httpx.RemoteProtocolError):
        http.post(CHAT, content=chat_body())
    # The client got the head (200) and then a connection that failed: never a short body.
    assert _phase(proxy.wait_records(1)[0]) == (200, 200, "upstream_error", "upstream_error")
