"""The item model: Responses input items <-> neutral messages, checked against the strict
fake's rules (`tests.fakes.responses_rules`), which know nothing of the mapping."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import tiktoken
from hypothesis import event, given, settings
from hypothesis import strategies as st

from policies.loader import load_preset
from policies.policy import Policy
from proxy.protocols.responses.facts import budget_body
from proxy.protocols.responses.items import GROUP, Mapped, to_neutral
from proxy.protocols.responses.rebuild import rebuild
from tests import factories as f
from tests.fakes import responses_items as r
from tests.fakes import responses_rules

Items = list[dict[str, Any]]
PRESETS = ("default", "coding-agent", "chat")
INSTRUCTIONS = "You are a coding agent. Be careful."
ENC = tiktoken.get_encoding("o200k_base")


def mapped(items: Items, instructions: object = INSTRUCTIONS) -> Mapped:
    out = to_neutral(items, instructions)
    assert isinstance(out, Mapped), out
    return out


def every_kind() -> Items:
    return [
        r.developer(),
        r.user_parts(),
        r.reasoning(1),
        r.function_call("a"),
        r.reasoning(2),
        r.function_call("b"),
        r.function_output("b", "B"),
        r.function_output("a", [{"type": "input_text", "text": "A"}]),  # type: ignore[arg-type]
        r.custom_call("c"),
        r.custom_output("c"),
        r.shell_call("s"),
        r.shell_output("s"),
        r.computer_call("k"),
        r.computer_output("k"),
        *(r.hosted(kind, n) for n, kind in enumerate(r.HOSTED)),
        r.approval_request(1),
        r.approval_response(1),
        r.approval_request(2),
        r.item_reference(1),
        r.compaction(1),
        {"type": "some_future_item", "payload": {"x": 1}},
        r.reasoning(3),
        r.assistant("Done.", 3),
        r.user("Thanks"),
    ]


def test_every_item_kind_maps_and_comes_back_as_the_same_objects() -> None:
    items = every_kind()
    assert responses_rules.check_items(items) is None
    m = mapped(items)
    back = rebuild(m, m.messages)
    assert back == items
    assert all(a is b for a, b in zip(back, items, strict=True))


def test_instructions_are_a_pinned_system_message_never_written_back() -> None:
    m = mapped([r.user()])
    assert m.messages[0]["role"] == "system"
    assert m.messages[0]["content"] == INSTRUCTIONS
    assert rebuild(m, m.messages) == [r.user()]


def test_calls_become_one_tool_block_with_reasoning_riding_along() -> None:
    items = [r.user(), r.reasoning(1), r.function_call("a"), r.function_call("b")]
    items += [r.function_output("b"), r.function_output("a")]
    m = mapped(items, None)
    head = m.messages[1]
    assert head["content"] == [items[1]]
    assert [c["id"] for c in head["tool_calls"]] == ["a", "b"]
    assert [(x["role"], x["tool_call_id"]) for x in m.messages[2:]] == [
        ("tool", "b"),
        ("tool", "a"),
    ]


def test_an_assistant_message_and_its_calls_are_one_chat_message() -> None:
    items = [r.user(), r.assistant("Reading it.", 1), r.function_call("a"), r.function_output("a")]
    m = mapped(items, None)
    assert [x["role"] for x in m.messages] == ["user", "assistant", "tool"]
    # One text part is its text, as chat has it; a change goes back into that part.
    assert m.messages[1]["content"] == "Reading it."
    cut = {**m.messages[1], "content": "Read."}
    call = cut["tool_calls"][0]
    cut["tool_calls"] = [{**call, "function": {**call["function"], "arguments": "{}"}}]
    back = rebuild(m, [m.messages[0], cut, m.messages[2]])
    assert back[1] == {**items[1], "content": [{**items[1]["content"][0], "text": "Read."}]}
    assert back[2] == {**items[2], "arguments": "{}"}
    assert back[3] is items[3]


@pytest.mark.parametrize(
    ("items", "reason"),
    [
        ([r.user(), r.function_output("x")], "unpaired_output"),
        ([r.user(), r.function_call("x")], "unanswered_call"),
        ([r.user(), r.function_call("x"), r.user(), r.function_output("x")], "unanswered_call"),
        ([r.user(), r.reasoning()], "orphan_reasoning"),
        (
            [r.user(), r.function_call("x"), r.reasoning(), r.function_output("x")],
            "reasoning_before_output",
        ),
        ([r.user(), "not an item"], "bad_items"),
    ],
)
def test_lists_the_chat_rules_cannot_express_are_not_curated(items: Items, reason: str) -> None:
    assert to_neutral(items) == reason


def test_a_shortened_output_keeps_every_other_field() -> None:
    items = [r.user(), r.function_call("a"), {**r.function_output("a", "x" * 50), "id": "fco_1"}]
    m = mapped(items, None)
    curated = [*m.messages[:-1], {**m.messages[-1], "content": "cut"}]
    assert rebuild(m, curated)[-1] == {**items[-1], "output": "cut"}


def test_shortened_text_parts_reuse_the_clients_part() -> None:
    items = [r.user(), r.assistant("long answer", 1), r.user("next")]
    m = mapped(items, None)
    cut = {**m.messages[1], "content": [{"type": "text", "text": "long…"}]}
    back = rebuild(m, [m.messages[0], cut, m.messages[2]])
    assert back[1] == {**items[1], "content": [{**items[1]["content"][0], "text": "long…"}]}


def test_cleared_arguments_go_into_the_function_call() -> None:
    items = [r.user(), r.function_call("a"), r.function_output("a")]
    m = mapped(items, None)
    head = m.messages[1]
    call = head["tool_calls"][0]
    cleared = {
        **head,
        "tool_calls": [{**call, "function": {**call["function"], "arguments": "{}"}}],
    }
    back = rebuild(m, [m.messages[0], cleared, m.messages[2]])
    assert back[1] == {**items[1], "arguments": "{}"}


def test_a_summary_becomes_a_message_item() -> None:
    items = [r.user(), r.assistant(), r.user("next")]
    m = mapped(items, None)
    summary = {"role": "assistant", "content": "[Summary of earlier conversation] ..."}
    back = rebuild(m, [summary, m.messages[2]])
    assert back == [{"role": "assistant", "content": summary["content"]}, items[2]]


def test_the_budget_reads_responses_tools_and_reserve() -> None:
    body = {
        "model": "gpt-4.1",
        "max_output_tokens": 500,
        "tools": [
            {"type": "function", "name": "f", "description": "d", "parameters": {}},
            {"type": "custom", "name": "apply_patch", "description": "patch"},
            {"type": "web_search"},
        ],
    }
    view = budget_body(body)
    assert view["max_completion_tokens"] == 500
    assert view["tools"][0] == {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": {}},
    }
    assert view["tools"][1]["custom"]["name"] == "apply_patch"
    assert "web_search" in view["tools"][2]["custom"]["description"]
    assert f.counter().count_tools(view["tools"], "gpt-4.1") > 0


# -- properties ---------------------------------------------------------------------------


@settings(max_examples=60)
@given(r.conversations(), st.sampled_from([None, INSTRUCTIONS]))
def test_round_trip_is_identity(items: Items, instructions: str | None) -> None:
    assert responses_rules.check_items(items) is None
    m = mapped(items, instructions)
    back = rebuild(m, m.messages)
    assert len(back) == len(items)
    assert all(a is b for a, b in zip(back, items, strict=True))


@settings(max_examples=60)
@given(r.conversations())
def test_our_count_is_never_below_the_strict_upstreams(items: Items) -> None:
    m = mapped(items)
    ours = f.tokens(m.messages, "gpt-4.1")
    theirs = responses_rules.count_prompt({"instructions": INSTRUCTIONS, "input": items}, ENC)
    assert ours >= theirs


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=25)
@given(r.conversations(max_steps=12), st.floats(0.05, 1.0))
def test_curated_items_are_valid_and_keep_reasoning_and_opaque_items(
    preset: str, items: Items, fraction: float
) -> None:
    m = mapped(items)
    size = f.tokens(m.messages, "gpt-4.1")
    policy: Policy = dataclasses.replace(
        load_preset(preset),
        context_window=max(2000, int(size * fraction)),
        reserve_output_tokens=100,
    )
    result = policy.curate(m.messages, budget_body({"model": "gpt-4.1"}), f.counter())
    back = rebuild(m, result.messages)
    event("curated" if result.changed else "unchanged")
    assert responses_rules.check_items(back) is None
    assert_reasoning_kept_with_its_item(items, back)
    assert_opaque_items_verbatim(items, back)
    assert back[-1] == items[-1] or _same_item(back[-1], items[-1])
    if result.tokens_after <= policy.budget({"model": "gpt-4.1"}, f.counter()).messages:
        theirs = responses_rules.count_prompt({"instructions": INSTRUCTIONS, "input": back}, ENC)
        assert theirs <= result.tokens_after


def assert_reasoning_kept_with_its_item(items: Sequence[Mapping[str, Any]], back: Items) -> None:
    """A reasoning item and the item after it are both kept, next to each other, or both
    gone; the reasoning item is never edited."""
    where = {id(item): i for i, item in enumerate(items)}
    kept = [k for k, item in enumerate(back) if item.get("type") == "reasoning"]
    for k in kept:
        assert id(back[k]) in where, "a reasoning item was edited"
        following = items[where[id(back[k])] + 1]
        assert k + 1 < len(back)
        assert _same_item(back[k + 1], following)
    reasoned = [items[i + 1] for i, item in enumerate(items) if item.get("type") == "reasoning"]
    for item in reasoned:
        at = next((k for k, b in enumerate(back) if _same_item(b, item)), None)
        if at is not None:
            assert at > 0
            assert back[at - 1].get("type") == "reasoning", f"{item.get('id')} lost its reasoning"


def assert_opaque_items_verbatim(items: Sequence[Mapping[str, Any]], back: Items) -> None:
    known = {"message", "reasoning", "function_call", "function_call_output", None}
    originals = {id(item) for item in items}
    for item in back:
        if item.get("type") not in known and "output" not in str(item.get("type")):
            assert id(item) in originals, f"{item.get('type')} was edited"


def _same_item(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    keys = ("type", "id", "call_id", "role")
    return all(a.get(k) == b.get(k) for k in keys)


def test_neutral_messages_carry_their_group() -> None:
    m = mapped(every_kind())
    assert all(isinstance(msg[GROUP], int) for msg in m.messages)


WORDS = (
    *r.HOSTED,
    "reasoning",
    "function_call",
    "function_call_output",
    "mcp_approval_request",
    "mcp_approval_response",
    "message",
    "user",
    "assistant",
    "c1",
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
fields = st.sampled_from(
    ["type", "role", "content", "call_id", "id", "output", "approval_request_id"]
)
soup_items = st.dictionaries(fields, json_values | st.sampled_from(WORDS), max_size=5)


@settings(max_examples=300)
@given(st.lists(soup_items | json_values, max_size=8), json_values)
def test_any_json_maps_or_says_why_and_round_trips(items: list[Any], instructions: object) -> None:
    out = to_neutral(items, instructions)
    if isinstance(out, str):
        return
    back = rebuild(out, out.messages)
    assert all(a is b for a, b in zip(back, items, strict=True))
    assert f.tokens(out.messages) > 0
