from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.base import Action, PinSpec
from policies.errors import ParamError
from policies.turns import TurnWindow
from tests.factories import (
    assistant,
    assistant_calls,
    counter,
    ctx,
    function_call,
    function_result,
    system,
    tool_result,
    user,
)


def conversation() -> list[dict[str, Any]]:
    return [
        system(),  # 0
        user("1"),  # 1
        assistant("a1"),  # 2
        user("2"),  # 3
        assistant_calls("x", "y"),  # 4
        tool_result("y"),  # 5
        tool_result("x"),  # 6
        assistant("a2"),  # 7
        user("3"),  # 8
        function_call(),  # 9
        function_result(),  # 10
    ]


def test_few_turns_are_left_alone() -> None:
    messages = conversation()
    out = TurnWindow(max_turns=4).curate(messages, ctx())
    assert out.messages == messages
    assert out.actions == ()


def test_keeps_the_newest_turns_and_the_pinned_system_message() -> None:
    messages = conversation()
    out = TurnWindow(max_turns=2).curate(messages, ctx())
    assert out.messages == [messages[0], *messages[3:]]
    dropped = sum(counter().count_message(m, "gpt-4o") for m in messages[1:3])
    assert out.actions == (
        Action("turn_window", "drop", (1, 2), dropped, "kept the newest 2 of 4 turns"),
    )


def test_tool_blocks_go_whole() -> None:
    out = TurnWindow(max_turns=1).curate(conversation(), ctx())
    assert out.messages == [system(), user("3"), function_call(), function_result()]
    assert out.actions[0].indexes == (1, 2, 3, 4, 5, 6, 7)


def test_pinned_first_user_stays_in_place_without_its_replies() -> None:
    pins = PinSpec(first_user=True)
    out = TurnWindow(max_turns=1).curate(conversation(), ctx(pins=pins))
    assert out.messages == [system(), user("1"), user("3"), function_call(), function_result()]


def test_a_history_that_starts_without_a_user_counts_that_opening_as_a_turn() -> None:
    messages = [assistant("Welcome!"), user("hi"), assistant("hello")]
    out = TurnWindow(max_turns=1).curate(messages, ctx())
    assert out.messages == messages[1:]


def test_a_unit_holding_a_pinned_message_stays_whole() -> None:
    messages = [user("1"), assistant_calls("a"), tool_result("a"), user("2"), assistant()]
    pins = PinSpec(roles=frozenset({"tool"}))
    out = TurnWindow(max_turns=1).curate(messages, ctx(pins=pins))
    assert out.messages == messages[1:]


def test_idempotent_and_input_untouched() -> None:
    messages = conversation()
    before = copy.deepcopy(messages)
    pins = PinSpec(first_user=True)
    first = TurnWindow(max_turns=2).curate(messages, ctx(pins=pins))
    assert messages == before
    again = TurnWindow(max_turns=2).curate(first.messages, ctx(pins=pins))
    assert again.messages == first.messages
    assert again.actions == ()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "must be > 0, got 0"),
        (-3, "must be > 0, got -3"),
        ("ten", "must be an integer, got 'ten' (str)"),
        (False, "must be an integer, got False (bool)"),
        (None, "must be an integer, got None (NoneType)"),
    ],
)
def test_invalid_max_turns(value: object, message: str) -> None:
    with pytest.raises(ParamError) as info:
        TurnWindow(max_turns=value)  # type: ignore[arg-type]
    assert (info.value.field, info.value.message) == ("max_turns", message)
