"""Usage read from the response tap: JSON or SSE, chat or Responses, whatever its size."""

from __future__ import annotations

import orjson

from policies.pricing import Usage
from proxy.observability.usage.tap import TAIL_BYTES, ResponseTap, usage_in

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
    tap = ResponseTap(0)
    feed(tap, body, size=4096)
    assert tap.usage() == Usage(2048, 1920, 300, 128)
    assert tap.size == 0, "the audit wanted none of the body"


def test_stream_with_null_usage_in_every_chunk_but_the_last() -> None:
    chunk = {"choices": [{"delta": {"content": "hi"}}], "usage": None}
    events = [b"data: " + orjson.dumps(chunk) + b"\n\n" for _ in range(50)]
    events.append(b"data: " + orjson.dumps({"choices": [], "usage": CHAT_USAGE}) + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    tap = ResponseTap(1 << 20)
    feed(tap, b"".join(events))
    assert tap.usage() == Usage(2048, 1920, 300, 128)
    assert tap.size == len(b"".join(events)), "the audit's copy is whole"


def test_responses_api_completed_event() -> None:
    usage = {
        "input_tokens": 5000,
        "input_tokens_details": {"cached_tokens": 4096},
        "output_tokens": 700,
        "output_tokens_details": {"reasoning_tokens": 500},
    }
    event = {"type": "response.completed", "response": {"output": [], "usage": usage}}
    data = b"event: response.completed\ndata: " + orjson.dumps(event) + b"\n\n"
    assert usage_in(data) == Usage(5000, 4096, 700, 500)


def test_model_text_quoting_usage_is_not_the_usage() -> None:
    text = 'the API returns "usage": {"prompt_tokens": 1}'
    body = orjson.dumps({"choices": [{"message": {"content": text}}]})
    assert usage_in(body) is None


def test_no_usage_and_bounded_memory() -> None:
    tap = ResponseTap(0)
    feed(tap, b"x" * (TAIL_BYTES * 3), size=1000)
    assert tap.usage() is None
    assert len(tap._tail) <= TAIL_BYTES
