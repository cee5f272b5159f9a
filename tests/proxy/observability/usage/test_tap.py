"""Usage read from the response tap by the protocol: JSON or SSE, whatever the size."""

from __future__ import annotations

import orjson

from policies.pricing import Usage
from proxy.observability.usage.tap import ResponseTap
from proxy.protocols.base import USAGE_TAIL_BYTES as TAIL_BYTES
from proxy.protocols.chat import CHAT

CHAT_USAGE = {
    "prompt_tokens": 2048,
    "completion_tokens": 300,
    "total_tokens": 2348,
    "prompt_tokens_details": {"cached_tokens": 1920},
    "completion_tokens_details": {"reasoning_tokens": 128},
}


def feed(tap: ResponseTap, data: bytes, size: int = 7) -> None:
    for i in range(0, len(data), size):
        tap.feed(data[i : i + size])


def test_non_streamed_chat_completion() -> None:
    body = orjson.dumps({"choices": [{"message": {"content": "x" * 100_000}}], "usage": CHAT_USAGE})
    tap = ResponseTap(0, CHAT)
    feed(tap, body, size=4096)
    assert tap.usage() == Usage(2048, 1920, 300, 128)
    assert tap.size == 0, "the audit wanted none of the body"


def test_stream_with_null_usage_in_every_chunk_but_the_last() -> None:
    chunk = {"choices": [{"delta": {"content": "hi"}}], "usage": None}
    events = [b"data: " + orjson.dumps(chunk) + b"\n\n" for _ in range(50)]
    events.append(b"data: " + orjson.dumps({"choices": [], "usage": CHAT_USAGE}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    tap = ResponseTap(1 << 20, CHAT)
    feed(tap, b"".join(events))
    assert tap.usage() == Usage(2048, 1920, 300, 128)
    assert tap.size == len(b"".join(events)), "the audit's copy is whole"


def test_model_text_quoting_usage_is_not_the_usage() -> None:
    text = 'the API returns "usage": {"prompt_tokens": 1}'
    tap = ResponseTap(0, CHAT)
    tap.feed(orjson.dumps({"choices": [{"message": {"content": text}}]}))
    assert tap.usage() is None


def test_no_usage_and_bounded_memory() -> None:
    tap = ResponseTap(0, CHAT)
    feed(tap, b"x" * (TAIL_BYTES * 3), size=1000)
    assert tap.usage() is None
    assert len(tap._tail) <= TAIL_BYTES
