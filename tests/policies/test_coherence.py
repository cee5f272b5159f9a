from __future__ import annotations

import copy

from policies.base import Action
from policies.coherence import ToolPairCoherence
from policies.invariants import ordering_errors
from tests.factories import (
    assistant,
    assistant_calls,
    call,
    counter,
    ctx,
    developer,
    function_call,
    function_result,
    system,
    tool_result,
    user,
)

COHERENCE = ToolPairCoherence()


def repair(messages: list[dict[str, object]]) -> tuple[list[dict[str, object]], tuple[Action, ...]]:
    out = COHERENCE.curate(messages, ctx())
    assert ordering_errors(out.messages) == []
    return [dict(m) for m in out.messages], out.actions


def cost(*messages: dict[str, object]) -> int:
    return sum(counter().count_message(m, "gpt-4o") for m in messages)


def test_valid_conversation_with_parallel_and_legacy_calls_is_unchanged() -> None:
    messages = [
        system(),
        user(),
        assistant_calls("a", "b", content="checking"),
        tool_result("b"),
        tool_result("a"),
        function_call(),
        function_result(),
        assistant("done"),
    ]
    out = COHERENCE.curate(messages, ctx())
    assert out.messages == messages
    assert out.actions == ()


def test_orphan_result_at_the_start_is_dropped() -> None:
    orphan = tool_result("gone", "stale output")
    out, actions = repair([orphan, user(), assistant()])
    assert out == [user(), assistant()]
    assert actions == (
        Action(
            "tool_pair_coherence",
            "drop",
            (0,),
            cost(orphan),
            "dropped 1 result(s) answering no pending call",
        ),
    )


def test_result_answering_an_earlier_block_is_an_orphan() -> None:
    messages = [
        user(),
        assistant_calls("a"),
        tool_result("a"),
        assistant_calls("b"),
        tool_result("b"),
        tool_result("a", "late"),
    ]
    out, actions = repair(messages)
    assert out == messages[:5]
    assert [a.indexes for a in actions] == [(5,)]


def test_duplicate_result_is_dropped_and_the_first_answer_kept() -> None:
    messages = [user(), assistant_calls("a"), tool_result("a", "first"), tool_result("a", "again")]
    out, _ = repair(messages)
    assert out == messages[:3]


def test_repeated_call_ids_answered_once_each_are_left_unchanged() -> None:
    head = assistant_calls(call("d", "search"), call("d", "read_file"))
    messages = [user(), head, tool_result("d", "one"), tool_result("d", "two"), assistant("ok")]
    out = COHERENCE.curate(messages, ctx())
    assert out.messages == messages
    assert out.actions == ()


def test_repeated_call_ids_pair_by_position() -> None:
    first, second = call("d", "search"), call("d", "read_file")
    # One result for two calls `d`: it answers the first; the second call goes.
    out, _ = repair([user(), assistant_calls(first, second), tool_result("d"), user("next")])
    assert out == [user(), assistant_calls(first), tool_result("d"), user("next")]
    # Three results for two calls `d`: the third answers nothing.
    messages = [
        user(),
        assistant_calls(first, second),
        *[tool_result("d", str(k)) for k in range(3)],
    ]
    out, actions = repair(messages)
    assert out == messages[:4]
    assert [(a.kind, a.indexes) for a in actions] == [("drop", (4,))]


def test_unanswered_parallel_call_is_removed_and_the_answered_ones_kept() -> None:
    head = assistant_calls(call("a"), call("b"), call("c"), content=None)
    messages = [user(), head, tool_result("c"), tool_result("a"), user("next")]
    out, actions = repair(messages)
    assert out == [
        user(),
        {**head, "tool_calls": [call("a"), call("c")]},
        tool_result("c"),
        tool_result("a"),
        user("next"),
    ]
    fixed = {**head, "tool_calls": [call("a"), call("c")]}
    assert actions == (
        Action(
            "tool_pair_coherence",
            "repair",
            (1,),
            cost(head) - cost(fixed),
            "removed unanswered calls from 1 assistant message(s)",
        ),
    )


def test_message_with_no_answered_call_loses_the_key_or_goes() -> None:
    with_text = assistant_calls("a", content="Let me check.")
    out, actions = repair([user(), with_text, user("never mind")])
    assert out == [user(), {"role": "assistant", "content": "Let me check."}, user("never mind")]
    assert [a.kind for a in actions] == ["repair"]
    for silent in (assistant_calls("a"), assistant_calls("a", content="")):
        out, actions = repair([user(), silent, user("never mind")])
        assert out == [user(), user("never mind")]
        assert [(a.kind, a.indexes) for a in actions] == [("drop", (1,))]


def test_unanswered_calls_in_the_last_unit_are_repaired() -> None:
    out, _ = repair([user(), assistant_calls("a", content="Calling.")])
    assert out == [user(), {"role": "assistant", "content": "Calling."}]


def test_empty_tool_calls_are_never_emitted() -> None:
    out, actions = repair([user(), assistant_calls(content="hi"), assistant_calls()])
    assert out == [user(), {"role": "assistant", "content": "hi"}]
    assert [(a.kind, a.indexes) for a in actions] == [("repair", (1,)), ("drop", (2,))]


def test_assistant_with_nothing_to_say_is_dropped() -> None:
    out, _ = repair([user(), assistant(None), user("2")])
    assert out == [user(), user("2")]


def test_stray_function_result_is_dropped() -> None:
    messages = [user(), function_result(), function_call(), function_result(), function_result()]
    out, _ = repair(messages)
    assert out == [user(), function_call(), function_result()]


def test_unanswered_function_call_is_removed() -> None:
    out, _ = repair([user(), function_call(content="Looking it up."), user("2")])
    assert out == [user(), {"role": "assistant", "content": "Looking it up."}, user("2")]
    out, _ = repair([user(), function_call(), user("2")])
    assert out == [user(), user("2")]


def test_a_message_between_call_and_result_breaks_the_pair_but_pins_stay() -> None:
    messages = [user(), assistant_calls("a"), developer(), tool_result("a"), assistant("ok")]
    out, actions = repair(messages)
    assert out == [user(), developer(), assistant("ok")]
    assert sorted(i for a in actions for i in a.indexes) == [1, 3]


def test_calls_without_an_id_are_left_as_sent() -> None:
    odd = assistant_calls(call("a"), {"type": "function"})
    out, _ = repair([user(), odd, tool_result("b")])
    assert out == [user(), {**odd, "tool_calls": [{"type": "function"}]}]


def test_input_is_not_mutated_and_repeating_changes_nothing() -> None:
    messages = [tool_result("x"), user(), assistant_calls("a", "b"), tool_result("a"), user()]
    before = copy.deepcopy(messages)
    first = COHERENCE.curate(messages, ctx())
    assert messages == before
    second = COHERENCE.curate(first.messages, ctx())
    assert second.messages == first.messages
    assert second.actions == ()
