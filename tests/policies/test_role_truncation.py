from __future__ import annotations

import copy
from typing import Any

import pytest

from policies import invariants
from policies.base import PinSpec
from policies.errors import ConfigError, ParamError
from policies.loader import load_policy
from policies.messages import SUMMARY_PREFIX
from policies.role_truncation import RoleTruncation, marker
from tests.factories import (
    assistant,
    assistant_calls,
    call,
    counter,
    ctx,
    image_part,
    long_text,
    system,
    text_part,
    tool_result,
    user,
)

Msgs = list[dict[str, Any]]
LONG = long_text(400)  # about 3,000 chars


def turns(n: int, text: str = LONG) -> Msgs:
    """A system prompt, then `n` turns of a long question and a long answer."""
    messages: Msgs = [system()]
    for k in range(n):
        messages += [user(f"{k}: {text}"), assistant(f"{k}: {text}")]
    return messages


def test_marker_gives_the_original_length() -> None:
    assert marker(12345) == "\n[... shortened by context-curator; originally 12,345 chars]"


def test_older_messages_are_cut_to_their_roles_limit() -> None:
    messages = turns(4)
    curator = RoleTruncation(
        roles={"user": {"max_chars": 500}, "assistant": {"max_chars": 100}}, keep_recent_turns=2
    )
    out = curator.curate(messages, ctx())
    # Turns 0 and 1 (messages 1-4) are older than the newest two turns.
    for i, limit in ((1, 500), (2, 100), (3, 500), (4, 100)):
        text = messages[i]["content"]
        assert out.messages[i]["content"] == text[:limit] + marker(len(text))
    assert out.messages[0] == messages[0]
    assert out.messages[5:] == messages[5:]
    assert [a.indexes for a in out.actions] == [(1,), (2,), (3,), (4,)]
    first = out.actions[0]
    assert (first.curator, first.kind) == ("role_truncation", "truncate")
    saved = counter().count_message(messages[1], "gpt-4o")
    saved -= counter().count_message(out.messages[1], "gpt-4o")
    assert first.tokens_removed == saved > 0
    assert first.reason == f"older user message of {len(messages[1]['content']):,} chars shortened"
    assert invariants.check(messages, out.messages, ctx()) == []


def test_roles_not_listed_and_short_messages_are_left_alone() -> None:
    messages = [*turns(1), user("short"), assistant("short"), *turns(2)[1:]]
    out = RoleTruncation(roles={"user": {"max_chars": 100}}).curate(messages, ctx())
    assert [a.indexes for a in out.actions] == [(1,)]
    assert out.messages[2] == messages[2]  # assistant is not listed
    assert out.messages[3:] == messages[3:]


def test_a_cut_that_would_not_save_anything_is_not_made() -> None:
    text = "x" * (100 + len(marker(150)))  # head + marker would be as long as the text
    messages = [user(text), assistant("ok"), user("next")]
    curator = RoleTruncation(roles={"user": {"max_chars": 100}}, keep_recent_turns=1)
    assert curator.curate(messages, ctx()).actions == ()
    messages[0] = user(text + "y")
    assert len(curator.curate(messages, ctx()).actions) == 1


def test_pinned_messages_are_never_shortened() -> None:
    messages = turns(3)
    curator = RoleTruncation(roles={"user": {"max_chars": 10}}, keep_recent_turns=1)
    out = curator.curate(messages, ctx(pins=PinSpec(first_user=True)))
    assert out.messages[1] == messages[1]
    assert out.messages[3]["content"].endswith(marker(len(messages[3]["content"])))


def test_assistant_calls_keep_their_arguments() -> None:
    calling = assistant_calls(call("c1", "read_file", {"path": LONG}), content=LONG)
    messages = [user("go"), calling, tool_result("c1", "ok"), user("next")]
    curator = RoleTruncation(roles={"assistant": {"max_chars": 50}}, keep_recent_turns=1)
    out = curator.curate(messages, ctx())
    assert out.messages[1]["tool_calls"] == calling["tool_calls"]
    assert out.messages[1]["content"] == LONG[:50] + marker(len(LONG))
    assert invariants.check(messages, out.messages, ctx()) == []


def test_summaries_are_left_alone() -> None:
    summary = assistant(f"{SUMMARY_PREFIX}]: {LONG}")
    messages = [user("go"), summary, user("next"), assistant(LONG), user("now")]
    curator = RoleTruncation(roles={"assistant": {"max_chars": 10}}, keep_recent_turns=1)
    out = curator.curate(messages, ctx())
    assert [a.indexes for a in out.actions] == [(3,)]


def test_text_parts_are_cut_as_one_text_and_images_are_left_alone() -> None:
    parts = [text_part(LONG[:2000]), text_part(LONG[2000:])]
    with_image = [text_part(LONG), image_part()]
    messages = [user(parts), assistant("a"), user(with_image), assistant("b"), user("now")]
    curator = RoleTruncation(roles={"user": {"max_chars": 40}}, keep_recent_turns=1)
    out = curator.curate(messages, ctx())
    assert out.messages[0]["content"] == [text_part(LONG[:40] + marker(len(LONG)))]
    assert out.messages[2] == messages[2]


def test_keep_recent_turns_zero_spares_only_the_last_unit() -> None:
    messages = [user(LONG), assistant(LONG), user(LONG)]
    out = RoleTruncation(roles={"user": {"max_chars": 10}}, keep_recent_turns=0).curate(
        messages, ctx()
    )
    assert [a.indexes for a in out.actions] == [(0,)]
    assert out.messages[2] == messages[2]


def test_curating_twice_changes_nothing_and_input_is_not_mutated() -> None:
    messages = turns(5)
    before = copy.deepcopy(messages)
    curator = RoleTruncation(
        roles={"user": {"max_chars": 0}, "assistant": {"max_chars": 30}}, max_messages=6
    )
    out = curator.curate(messages, ctx())
    assert messages == before
    again = curator.curate(out.messages, ctx())
    assert again.messages == out.messages
    assert again.actions == ()


def chatter(n_turns: int) -> Msgs:
    """A pinned system prompt, then short question/answer turns."""
    messages: Msgs = [system()]
    for k in range(n_turns):
        messages += [user(f"q{k}"), assistant(f"a{k}")]
    return messages


def test_max_messages_drops_the_oldest_units_keeping_pins() -> None:
    messages = chatter(10)  # 21 messages
    out = RoleTruncation(max_messages=10).curate(messages, ctx())
    assert out.messages == [messages[0], *messages[-9:]]
    (action,) = out.actions
    assert (action.kind, action.indexes) == ("drop", tuple(range(1, 12)))
    assert action.reason == "dropped the 11 oldest unit(s): 21 messages, over the cap of 10"
    assert action.tokens_removed == sum(
        counter().count_message(messages[i], "gpt-4o") for i in range(1, 12)
    )


def test_max_messages_keeps_tool_blocks_whole() -> None:
    block = [assistant_calls("c1", "c2"), tool_result("c1"), tool_result("c2")]
    messages = [system(), user("go"), *block, assistant("done"), user("thanks")]
    out = RoleTruncation(max_messages=4).curate(messages, ctx())
    assert out.messages == [system(), assistant("done"), user("thanks")]
    assert invariants.ordering_errors(out.messages) == []


def test_max_messages_never_drops_the_last_unit_and_says_when_it_cannot_meet_the_cap() -> None:
    block = [assistant_calls("c1", "c2", "c3"), tool_result("c1"), tool_result("c2")]
    messages = [system(), user("go"), assistant("on it"), *block, tool_result("c3")]
    out = RoleTruncation(max_messages=2).curate(messages, ctx())
    assert out.messages == [system(), user("go"), *messages[3:]]
    assert out.actions[0].reason == (
        "dropped the 1 oldest unit(s): 7 messages, over the cap of 2; still over it with "
        "only pinned messages, the newest user message and the newest unit left"
    )


def agent_run(n_calls: int) -> Msgs:
    """A system prompt, the task (the only user message), then `n_calls` tool calls."""
    messages: Msgs = [system(), user("Fix the failing test in tests/test_io.py.")]
    for k in range(n_calls):
        messages += [assistant_calls(f"c{k}"), tool_result(f"c{k}", f"output {k}")]
    return messages


def test_max_messages_keeps_the_task_of_an_agent_run() -> None:
    messages = agent_run(60)  # 122 messages, one user message
    out = RoleTruncation(max_messages=100, low_water=0.7).curate(messages, ctx())
    assert out.messages[:2] == messages[:2]
    assert len(out.messages) <= 100
    assert out.messages[-2:] == messages[-2:]
    assert invariants.ordering_errors(out.messages) == []
    (action,) = out.actions
    assert 1 not in action.indexes
    again = RoleTruncation(max_messages=100, low_water=0.7).curate(out.messages, ctx())
    assert (again.messages, again.actions) == (out.messages, ())


def test_max_messages_keeps_the_newest_user_message_and_drops_older_ones() -> None:
    messages = [system(), user("first"), assistant("a"), *agent_run(5)[1:], assistant("b")]
    out = RoleTruncation(max_messages=4).curate(messages, ctx())
    assert out.messages == [system(), messages[3], messages[-1]]


def test_max_messages_cut_moves_in_anchored_steps() -> None:
    """With low_water 0.5 and a cap of 20, the cut lands on multiples of 10 droppable
    messages from the start, so it stays put while the conversation grows."""
    curator = RoleTruncation(max_messages=20, low_water=0.5)
    for n_turns in range(9, 30):
        messages = chatter(n_turns)
        out = curator.curate(messages, ctx())
        excess = len(messages) - 20
        expected = 0 if excess <= 0 else -(-excess // 10) * 10
        assert len(messages) - len(out.messages) == expected, len(messages)
        assert out.messages[1:] == messages[1 + expected :]


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"roles": {"system": {"max_chars": 10}}}, "roles", "pin them instead"),
        ({"roles": {"bot": {"max_chars": 10}}}, "roles", "unknown role 'bot'"),
        ({"roles": ["user"]}, "roles", "must be a mapping"),
        ({"roles": {"user": 10}}, "roles.user", "must be a mapping like"),
        ({"roles": {"user": {"max_tokens": 10}}}, "roles.user.max_tokens", "unknown limit"),
        ({"roles": {"user": {"max_chars": -1}}}, "roles.user.max_chars", "must be >= 0"),
        ({"roles": {"user": {"max_chars": True}}}, "roles.user.max_chars", "an integer"),
        ({"roles": {}, "max_messages": None}, "roles", "at least one role"),
        ({"max_messages": 0}, "max_messages", "must be > 0"),
        ({"keep_recent_turns": -1}, "keep_recent_turns", "must be >= 0"),
        ({"low_water": 0}, "low_water", "(0, 1]"),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ParamError) as info:
        RoleTruncation(**kwargs)
    assert info.value.field == field
    assert message in info.value.message


def test_loader_names_the_nested_key_of_a_bad_limit() -> None:
    data = {"curators": [{"role_truncation": {"roles": {"tool": {"max_chars": -5}}}}]}
    with pytest.raises(ConfigError) as info:
        load_policy(data, name="p", file="p.yaml", lines={})
    assert (
        str(info.value)
        == "p.yaml: curators[0].role_truncation.roles.tool.max_chars: must be >= 0, got -5"
    )


def test_defaults_are_just_a_cap_of_200_messages() -> None:
    curator = RoleTruncation()
    assert (dict(curator.roles), curator.max_messages, curator.keep_recent_turns) == ({}, 200, 2)
    messages = chatter(150)
    assert len(curator.curate(messages, ctx()).messages) == 200
