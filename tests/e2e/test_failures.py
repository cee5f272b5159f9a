"""Upstream failures and client disconnects, over real sockets."""

from __future__ import annotations

import threading

import httpx
import openai
import orjson
import pytest
from openai import OpenAI

from tests.e2e.conftest import UPSTREAM_KEY
from tests.fakes.servers import HOST
from tests.fakes.upstream import Behavior, FakeOpenAI

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
BODY = orjson.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "Status?"}]})
STREAM = orjson.dumps(
    {"model": "gpt-4o", "messages": [{"role": "user", "content": "Status?"}], "stream": True}
)
WAIT_S = 10.0
"""Generous bound for waiting on events; never a speed assertion."""


def _assert_no_leak(body: str, port: int) -> None:
    for secret in (HOST, f":{port}", UPSTREAM_KEY, "Traceback", "aiohttp"):
        assert secret not in body


def test_connection_refused_is_502_upstream_unreachable(http: httpx.Client, dead_port: int) -> None:
    response = http.post(CHAT, content=BODY, headers={"x-e2e-route": "dead"})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "upstream_unreachable"
    assert set(error) == {"message", "type", "param", "code"}
    assert response.headers["x-curator-route"] == "dead"
    _assert_no_leak(response.text, dead_port)


def test_sdk_sees_a_502_it_can_read(openai_client: OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as caught:
        openai_client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "hi"}],
            extra_headers={"x-e2e-route": "dead"},
        )
    assert caught.value.status_code == 502
    assert caught.value.code == "upstream_unreachable"


def test_stall_past_the_read_timeout_is_504_upstream_timeout(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(stall_s=30))
    response = http.post(CHAT, content=BODY, headers={"x-e2e-route": "short"})
    assert response.status_code == 504
    assert response.json()["error"]["code"] == "upstream_timeout"
    _assert_no_leak(response.text, int(fake.origin.rsplit(":", 1)[1]))
    assert fake.disconnected.wait(WAIT_S)  # the proxy hung up on the stalled upstream


def test_a_pause_shorter_than_the_read_timeout_survives(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(reply="after a pause", pause_after=1, pause_s=1.0))
    with http.stream("POST", CHAT, content=STREAM, headers={"x-e2e-route": "short"}) as response:
        body = b"".join(response.iter_raw())
    assert body == fake.sent[0]
    assert body.endswith(b"data: [DONE]\n\n")
    assert not fake.disconnected.is_set()


def test_client_disconnect_mid_stream_closes_the_upstream_stream(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    never = threading.Event()
    fake.queue(Behavior(release=never))
    with http.stream("POST", CHAT, content=STREAM) as response:
        first = next(response.iter_raw())
        assert first.startswith(b"data: ")
    # Leaving the block closed the client's connection mid-stream.
    assert fake.disconnected.wait(WAIT_S)
    assert not never.is_set()


def test_client_giving_up_before_the_response_closes_the_upstream_request(
    proxy_origin: str, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(stall_s=30))
    with (
        httpx.Client(base_url=proxy_origin, timeout=0.5) as impatient,
        pytest.raises(httpx.ReadTimeout),
    ):
        impatient.post(CHAT, content=BODY)
    assert fake.disconnected.wait(WAIT_S)


def test_upstream_5xx_is_relayed_not_rewritten(http: httpx.Client, fake: FakeOpenAI) -> None:
    body = b'{"error":{"message":"boom","type":"server_error","param":null,"code":null}}'
    fake.queue(Behavior(status=500, body=body))
    response = http.post(CHAT, content=BODY)
    assert response.status_code == 500
    assert response.content == body


def test_upstream_dropping_a_plain_body_drops_the_client_connection(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(abort_after=20))
    # A truncated JSON body must never look complete: the client sees the connection fail.
    with pytest.raises(httpx.RemoteProtocolError):
        http.post(CHAT, content=BODY)
