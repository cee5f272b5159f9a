"""The conversation generator: deterministic, valid OpenAI ordering, realistic shapes, sizes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import conversations
from bench.conversations import (
    coding_agent_session,
    growing_requests,
    large_request,
    small_request,
)
from bench.salt import body_texts, with_nonce
from policies.invariants import ordering_errors
from policies.tokens import TokenCounter

Msg = dict[str, Any]


@pytest.fixture(scope="module")
def large() -> Msg:
    return large_request()


def _parts(messages: list[Msg]) -> Iterator[Msg]:
    for m in messages:
        if isinstance(m.get("content"), list):
            yield from m["content"]


def test_same_seed_same_session_and_different_seeds_differ() -> None:
    a = coding_agent_session(3, 6_000)
    assert a == coding_agent_session(3, 6_000)
    assert a != coding_agent_session(4, 6_000)


@pytest.mark.parametrize("target", [500, 2_000, 8_000, 30_000])
@pytest.mark.parametrize("seed", range(6))
def test_session_is_valid_ordering_and_near_its_token_target(
    seed: int, target: int, counter: TokenCounter
) -> None:
    messages = coding_agent_session(seed, target)
    assert ordering_errors(messages) == []
    tokens = counter.count_messages(messages, conversations.DEFAULT_MODEL)
    # Untrimmable pieces (one-line tool answers, the system prompt) bound the overshoot.
    assert target <= tokens <= target * 1.03 + 400
    assert messages[0]["role"] == "system"
    assert messages[1]["role"] == "user"
    assert messages[-1]["role"] in ("tool", "user"), "a request must end awaiting the model"


def test_large_request_has_the_promised_shape(large: Msg, counter: TokenCounter) -> None:
    messages = large["messages"]
    assert ordering_errors(messages) == []
    assert len(messages) >= conversations.LARGE_MIN_MESSAGES
    tokens = counter.count_messages(messages, large["model"])
    assert 127_000 <= tokens <= 127_000 * 1.03
    widest = max(len(m.get("tool_calls") or ()) for m in messages)
    assert widest >= 2, "parallel tool calls expected"
    sizes = [len(m["content"].encode()) for m in messages if m["role"] == "tool"]
    assert sum(size >= 30_000 for size in sizes) >= 2


def test_large_request_is_a_complete_chat_body(large: Msg) -> None:
    assert {"model", "messages", "tools", "tool_choice"} <= set(large)
    names = {t["function"]["name"] for t in large["tools"]}
    called = {c["function"]["name"] for m in large["messages"] for c in m.get("tool_calls") or ()}
    assert called <= names
    assert json.loads(json.dumps(large, ensure_ascii=False)) == large


def test_tool_calls_carry_json_arguments_and_unique_ids(large: Msg) -> None:
    ids = []
    for m in large["messages"]:
        for call in m.get("tool_calls") or ():
            assert call["type"] == "function"
            assert isinstance(json.loads(call["function"]["arguments"]), dict)
            ids.append(call["id"])
    assert len(ids) == len(set(ids))


def test_tool_outputs_have_realistic_shapes(large: Msg) -> None:
    outputs = "\n".join(m["content"] for m in large["messages"] if m["role"] == "tool")
    assert "test session starts" in outputs  # pytest logs
    assert "\tfrom __future__ import annotations" in outputs  # numbered source files
    assert '"object": "list"' in outputs  # JSON documents
    assert any(ch > "\u007f" for ch in outputs), "unicode expected in tool outputs"


def test_sessions_sometimes_carry_follow_ups_with_images() -> None:
    messages = [m for seed in range(4) for m in coding_agent_session(seed, 60_000)]
    users = [m for m in messages if m["role"] == "user"]
    assert len(users) > 4, "follow-ups after the first task expected"
    images = [p for p in _parts(messages) if p.get("type") == "image_url"]
    assert images
    assert all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)


def test_growing_requests_resend_history_and_append() -> None:
    bodies = list(growing_requests(11, 30))
    assert len(bodies) == 30
    assert [m["role"] for m in bodies[0]["messages"]] == ["system", "user"]
    for before, after in itertools.pairwise(bodies):
        n = len(before["messages"])
        assert len(after["messages"]) > n
        assert after["messages"][:n] == before["messages"]
        assert ordering_errors(after["messages"]) == []
        assert after["messages"][-1]["role"] in ("tool", "user")
    assert not any("stream" in b for b in bodies)


def test_growing_requests_can_ask_for_streams() -> None:
    (body,) = growing_requests(1, 1, "gpt-4.1", stream=True)
    assert body["stream"] is True
    assert body["model"] == "gpt-4.1"


@settings(max_examples=20)
@given(seed=st.integers(0, 2**32 - 1), turns=st.integers(1, 25))
def test_any_seed_grows_a_valid_conversation(seed: int, turns: int) -> None:
    *_, last = growing_requests(seed, turns)
    assert ordering_errors(last["messages"]) == []


def test_small_request_is_small_and_valid() -> None:
    body = small_request()
    assert ordering_errors(body["messages"]) == []
    assert len(json.dumps(body["messages"])) < 2_000


def test_with_nonce_makes_every_message_new_and_keeps_ordering(large: Msg) -> None:
    salted = with_nonce(large, "n1")
    originals = large["messages"]
    assert ordering_errors(salted["messages"]) == []
    assert all(s != o for s, o in zip(salted["messages"], originals, strict=True))
    assert with_nonce(large, "n2")["messages"] != salted["messages"]
    assert large == large_request(), "the original body must not be mutated"


def test_body_texts_covers_contents_and_call_arguments(large: Msg) -> None:
    texts = body_texts(large)
    joined = "".join(texts)
    assert large["messages"][0]["content"] in texts
    first_call = next(m for m in large["messages"] if m.get("tool_calls"))["tool_calls"][0]
    assert first_call["function"]["arguments"] in texts
    assert all(m["tool_call_id"] in joined for m in large["messages"] if m["role"] == "tool")
