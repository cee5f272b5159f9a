"""SSE through the proxy: relayed as it arrives, byte for byte, and ended honestly on failure."""

from __future__ import annotations

import threading

import httpx
import openai
import orjson
import pytest
from openai import OpenAI

from tests.fakes.upstream import Behavior, FakeOpenAI

pytestmark = pytest.mark.e2e

CHAT = "/v1/chat/completions"
REPLY = "one two three four five six"


def stream_body(model: str = "gpt-4o") -> bytes:
    return orjson.dumps(
        {
            "model": model,
            "messages": [{"role": "user", "content": "Count to six."}],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


def test_first_chunk_reaches_the_client_before_the_upstream_finishes(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    release = threading.Event()
    fake.queue(Behavior(reply=REPLY, release=release))
    with http.stream("POST", CHAT, content=stream_body()) as response:
        chunks = response.iter_raw()
        first = next(chunks)
        # The upstream is still holding the rest of its stream until we say so.
        assert first.startswith(b"data: ")
        assert not release.is_set()
        release.set()
        rest = b"".join(chunks)
    assert response.headers["content-type"].startswith("text/event-stream")
    assert first + rest == fake.sent[0]
    assert rest.endswith(b"data: [DONE]\n\n")


def test_trickled_stream_is_relayed_byte_for_byte(http: httpx.Client, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY, chunk_delay_s=0.02))
    with http.stream("POST", CHAT, content=stream_body()) as response:
        received = list(response.iter_raw())
    assert b"".join(received) == fake.sent[0]
    assert len(received) > 1
    assert "x-curator-request-id" in response.headers


def test_sdk_stream_sees_every_delta(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY, chunk_delay_s=0.01))
    stream = openai_client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Count to six."}],
        stream=True,
        stream_options={"include_usage": True},
    )
    deltas = [c.choices[0].delta.content for c in stream if c.choices]
    assert "".join(d or "" for d in deltas) == REPLY
    assert len([d for d in deltas if d]) == len(REPLY.split())


def test_upstream_dropping_mid_stream_ends_with_an_error_event(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(reply=REPLY, abort_after=2))
    with http.stream("POST", CHAT, content=stream_body()) as response:
        body = b"".join(response.iter_raw())
    assert response.status_code == 200
    events = body.split(b"\n\n")
    assert body.startswith(b"".join(e + b"\n\n" for e in fake.sent[0].split(b"\n\n")[:2]))
    assert b"[DONE]" not in body
    error_event = next(e for e in events if e.startswith(b"event: error"))
    error = orjson.loads(error_event.split(b"data: ", 1)[1])["error"]
    assert error["code"] == "upstream_error"
    assert set(error) == {"message", "type", "param", "code"}


def test_sdk_raises_on_the_error_event(openai_client: OpenAI, fake: FakeOpenAI) -> None:
    fake.queue(Behavior(reply=REPLY, abort_after=2))
    stream = openai_client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Count."}], stream=True
    )
    with pytest.raises(openai.APIError, match="upstream"):
        for _ in stream:
            pass


def test_stall_mid_stream_past_the_read_timeout_ends_with_upstream_timeout(
    http: httpx.Client, fake: FakeOpenAI
) -> None:
    fake.queue(Behavior(reply=REPLY, pause_after=1, pause_s=10))
    headers = {"x-e2e-route": "short"}
    with http.stream("POST", CHAT, content=stream_body(), headers=headers) as response:
        body = b"".join(response.iter_raw())
    assert body.startswith(fake.sent[0].split(b"\n\n")[0] + b"\n\n")
    assert b"event: error" in body
    assert b'"code":"upstream_timeout"' in body
    assert b"[DONE]" not in body
    assert fake.disconnected.wait(10)
