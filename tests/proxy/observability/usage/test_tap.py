"""The protocol's usage, as the pricing reads it (the tail itself: tests/e2e/test_usage.py)."""

from __future__ import annotations

import orjson

from policies.pricing import Usage
from proxy.observability.usage.tap import from_wire
from proxy.protocols.base import Usage as WireUsage
from proxy.protocols.chat import CHAT

CHAT_USAGE = {
    "prompt_tokens": 2048,
    "completion_tokens": 300,
    "total_tokens": 2348,
    "prompt_tokens_details": {"cached_tokens": 1920},
    "completion_tokens_details": {"reasoning_tokens": 128},
}


def test_chat_usage_from_the_tail() -> None:
    body = orjson.dumps({"choices": [{"message": {"content": "x" * 1000}}], "usage": CHAT_USAGE})
    assert from_wire(CHAT.usage(body)) == Usage(2048, 1920, 300, 128)


def test_counts_not_reported_are_zero() -> None:
    assert from_wire(WireUsage(100, None, 7, None)) == Usage(100, 0, 7, 0)


def test_no_counts_is_no_usage() -> None:
    assert from_wire(None) is None
    assert from_wire(WireUsage(None, None, None, None)) is None


def test_model_text_quoting_usage_is_not_the_usage() -> None:
    text = 'the API returns "usage": {"prompt_tokens": 1}'
    assert (
        from_wire(CHAT.usage(orjson.dumps({"choices": [{"message": {"content": text}}]}))) is None
    )
