"""The Messages protocol piece by piece: skips, the breakpoint rule, usage, assembly."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.config.limits import Limits
from proxy.protocols.anthropic.breakpoints import restore
from proxy.protocols.anthropic.protocol import ANTHROPIC
from tests.fakes.anthropic_upstream import Reply, events

CC = {"type": "ephemeral"}


def text(t: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": t, **extra}


def test_a_system_message_between_turns_is_pinned_and_sent_as_it_came() -> None:
    """Claude Code 2.1 sends its agent list as a `system` message inside `messages`."""
    agents = {"role": "system", "content": "Available agent types: ..."}
    body = {
        "model": "claude-x",
        "max_tokens": 5,
        "messages": [
            {"role": "user", "content": "task " * 400},
            agents,
            {"role": "assistant", "content": "ok " * 400},
            {"role": "user", "content": "go"},
        ],
    }
    wire = ANTHROPIC.parse(orjson.dumps(body), Limits())
    assert wire.skip is None
    assert [m["role"] for m in wire.messages] == ["user", "system", "assistant", "user"]
    dropped = [m for m in wire.messages if m["role"] != "assistant"]
    sent = orjson.loads(ANTHROPIC.rebuild(wire, dropped))
    assert sent["messages"][1] == agents
    assert [m["role"] for m in sent["messages"]] == ["user", "system", "user"]


@pytest.mark.parametrize(
    ("messages", "reason"),
    [
        ([{"role": "system", "content": "x"}], "bad_messages"),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}],
                },
                {"role": "user", "content": "no"},
            ],
            "unanswered_tool_use",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}],
                }
            ],
            "orphan_tool_result",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [
                        {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                        {"type": "tool_use", "id": "b", "name": "f", "input": {}},
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": "a", "content": "x"},
                        text("t"),
                        {"type": "tool_result", "tool_use_id": "b", "content": "x"},
                    ],
                },
            ],
            "result_not_first",
        ),
    ],
)
def test_histories_anthropic_would_refuse_are_not_curated(messages: list[Any], reason: str) -> None:
    raw = orjson.dumps({"model": "claude-x", "max_tokens": 5, "messages": messages})
    assert ANTHROPIC.parse(raw, Limits()).skip == reason


def test_a_removed_blocks_breakpoint_moves_to_the_nearest_kept_block_before_it() -> None:
    original = [
        {"role": "user", "content": [text("a"), text("b")]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
        {"role": "user", "content": [text("c", cache_control=CC)]},
    ]
    # Message 2 removed: its breakpoint skips the thinking block and lands on "b".
    out = [original[0], original[1]]
    origins = [[(0, 0), (0, 1)], [(1, 0)]]
    moved = restore(original, out, origins)
    assert moved[0]["content"][1] == text("b", cache_control=CC)
    assert moved[1] is original[1]
    assert moved[0]["content"][0] is original[0]["content"][0]


def test_a_moved_breakpoint_onto_a_marked_block_is_one_breakpoint() -> None:
    original = [
        {"role": "user", "content": [text("a", cache_control=CC)]},
        {"role": "user", "content": [text("b", cache_control={"type": "ephemeral", "ttl": "1h"})]},
    ]
    moved = restore(original, [original[0]], [[(0, 0)]])
    assert moved == [original[0]]


def test_a_cut_block_keeps_its_breakpoint() -> None:
    original = [{"role": "user", "content": [text("long text", cache_control=CC)]}]
    cut = [{"role": "user", "content": [text("long")]}]  # a curator that lost the key
    assert restore(original, cut, [[(0, 0)]])[0]["content"][0] == text("long", cache_control=CC)


def test_usage_counts_cache_reads_and_writes_into_the_prompt() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 1000,
        "cache_creation_input_tokens": 200,
        "output_tokens": 7,
    }
    found = ANTHROPIC.usage(orjson.dumps({"type": "message", "usage": usage}))
    assert found is not None
    assert (found.input_tokens, found.cached_tokens, found.output_tokens) == (1210, 1000, 7)
    assert (found.cache_write_tokens, found.cache_write_1h_tokens) == (200, 0)


def test_usage_splits_cache_writes_by_ttl() -> None:
    usage = {
        "input_tokens": 10,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 100, "ephemeral_1h_input_tokens": 200},
        "output_tokens": 7,
    }
    found = ANTHROPIC.usage(orjson.dumps({"type": "message", "usage": usage}))
    assert found is not None
    assert found.input_tokens == 310
    assert (found.cache_write_tokens, found.cache_write_1h_tokens) == (100, 200)


def test_a_streams_usage_merges_message_start_and_message_delta() -> None:
    message = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "model": "c",
        "stop_reason": "tool_use",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            text("hi"),
            {"type": "tool_use", "id": "t", "name": "f", "input": {"a": 1}},
        ],
        "usage": {
            "input_tokens": 5,
            "cache_read_input_tokens": 50,
            "cache_creation_input_tokens": 0,
            "output_tokens": 9,
        },
    }
    stream = b"".join(events(message))
    found = ANTHROPIC.usage(stream)
    assert found is not None
    assert (found.input_tokens, found.cached_tokens, found.output_tokens) == (55, 50, 9)
    assembled = ANTHROPIC.assemble(stream)
    assert assembled.text == "hi"
    assert assembled.finish_reason == "tool_use"
    assert assembled.tool_calls[0]["signature"] == "sig"
    assert assembled.tool_calls[1]["function"] == {"name": "f", "arguments": '{"a":1}'}
    assert Reply().text  # the fake's default reply is text
