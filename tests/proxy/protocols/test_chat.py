"""protocols/chat: reading a chat body, its shape limits, the rebuild, and usage."""

from __future__ import annotations

import orjson
import pytest

from proxy.config.limits import Limits
from proxy.errors import ProxyError
from proxy.protocols.base import Usage
from proxy.protocols.chat import CHAT
from tests import factories as f

LIMITS = Limits(max_messages=3, max_json_depth=16)


def test_a_readable_body_gives_its_messages_model_and_facts() -> None:
    body = {"model": "gpt-4o", "messages": [f.user("hi")], "tools": [], "max_tokens": 5}
    raw = orjson.dumps(body)
    request = CHAT.parse(raw, LIMITS)
    assert (request.raw, request.body, request.model, request.skip) == (raw, body, "gpt-4o", None)
    assert request.messages == [f.user("hi")]
    assert request.facts is request.body  # the policy reads the chat body itself


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"{nope", "invalid_json"),
        (b"[1, 2]", "not_an_object"),
        (b'{"model": "gpt-4o"}', "no_messages"),
        (b'{"messages": []}', "no_messages"),
        (b'{"messages": [{"content": "no role"}]}', "bad_messages"),
    ],
)
def test_what_cannot_be_curated_is_a_skip_reason(raw: bytes, reason: str) -> None:
    assert CHAT.parse(raw, LIMITS).skip == reason


def test_bad_messages_are_still_read_for_the_audit() -> None:
    request = CHAT.parse(b'{"messages": [{"role": "user"}, 7]}', LIMITS)
    assert (request.skip, request.messages) == ("bad_messages", [{"role": "user"}, 7])


def test_shape_limits_answer_400() -> None:
    many = orjson.dumps({"messages": [f.user("x")] * 4})
    with pytest.raises(ProxyError) as caught:
        CHAT.parse(many, LIMITS)
    assert (caught.value.status, caught.value.code) == (400, "too_many_messages")
    deep = b'{"messages": [' + b"[" * 20 + b"]" * 20 + b"]}"
    with pytest.raises(ProxyError) as caught:
        CHAT.parse(deep, LIMITS)
    assert caught.value.code == "nesting_too_deep"


def test_rebuild_replaces_messages_and_keeps_every_other_byte() -> None:
    raw = b'{"z": 1E2, "messages": [{"role": "user", "content": "long"}], "a": "\\u00e9"}'
    request = CHAT.parse(raw, LIMITS)
    rebuilt = CHAT.rebuild(request, [f.user("short")])
    assert rebuilt == b'{"z": 1E2, "messages": [{"role":"user","content":"short"}], "a": "\\u00e9"}'


FULL = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "prompt_tokens_details": {"cached_tokens": 100},
    "completion_tokens_details": {"reasoning_tokens": 12},
}


def test_usage_from_a_json_body() -> None:
    body = orjson.dumps({"choices": [], "usage": FULL})
    assert CHAT.usage(body) == Usage(120, 100, 30, 12)


@pytest.mark.parametrize("key", ["cache_write_tokens", "cache_creation_tokens"])
def test_usage_reads_cache_writes_where_reported(key: str) -> None:
    details = {"cached_tokens": 0, key: 96}
    body = orjson.dumps({"usage": {**FULL, "prompt_tokens_details": details}})
    assert CHAT.usage(body) == Usage(120, 0, 30, 12, cache_write_tokens=96)


def test_usage_from_the_tail_of_a_stream() -> None:
    # A cut before the usage chunk: the tail starts mid-event, as the relay keeps it.
    events = [b'data: {"choices":[{"delta":{"content":"hi"}}],"usage":null}\n\n']
    events.append(b'data: {"choices":[],"usage":' + orjson.dumps(FULL) + b"}\n\n")
    events.append(b"data: [DONE]\n\n")
    stream = b"".join(events)
    assert CHAT.usage(stream[20:]) == Usage(120, 100, 30, 12)


@pytest.mark.parametrize(
    "tail",
    [
        b"",
        b'data: {"usage":null}\n\ndata: [DONE]\n\n',
        b'{"choices":[{"message":{"content":"the \\"usage\\": {1}"}}]}',
        b'{"usage": {"prompt_tokens": 1',  # cut short
    ],
)
def test_no_usage_is_none(tail: bytes) -> None:
    assert CHAT.usage(tail) is None


def test_odd_counts_are_left_out() -> None:
    body = orjson.dumps({"usage": {"prompt_tokens": -1, "completion_tokens": True}})
    assert CHAT.usage(body) == Usage()
