from __future__ import annotations

import pytest

from policies import invariants
from policies.base import PinSpec
from policies.invariants import check, derives_from, ordering_errors
from policies.messages import SUMMARY_PREFIX
from tests.factories import (
    assistant,
    assistant_calls,
    call,
    ctx,
    function_call,
    function_result,
    long_text,
    system,
    tokens,
    tool_result,
    user,
)


def test_a_valid_agent_loop_has_no_ordering_errors() -> None:
    messages = [
        system(),
        user(),
        assistant_calls("a", "b"),
        tool_result("b"),
        tool_result("a"),
        function_call(),
        function_result(),
        assistant("done"),
    ]
    assert ordering_errors(messages) == []


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([user(), tool_result("a")], "messages[1]: tool result 'a' answers no pending call"),
        ([assistant_calls("a"), user()], "messages[1]: calls ['a'] are unanswered"),
        ([user(), assistant_calls("a")], "end: calls ['a'] are unanswered"),
        ([user(), assistant_calls(content="x")], "messages[1]: empty tool_calls"),
        (
            [user(), assistant(None)],
            "messages[1]: assistant message with no content and no calls",
        ),
        ([user(), function_result()], "messages[1]: function result without a function_call"),
        ([function_call(), user()], "messages[1]: function_call is unanswered"),
        ([user(), function_call()], "end: function_call is unanswered"),
    ],
)
def test_ordering_errors_name_the_message_and_the_problem(
    messages: list[dict[str, object]], expected: str
) -> None:
    assert ordering_errors(messages) == [expected]


def test_a_second_answer_to_the_same_call_is_an_error() -> None:
    messages = [assistant_calls("a"), tool_result("a"), tool_result("a")]
    assert ordering_errors(messages) == ["messages[2]: tool result 'a' answers no pending call"]


def test_a_repeated_call_id_is_answered_once_per_call() -> None:
    # OpenAI accepts two calls sharing an id when each gets its own result.
    head = assistant_calls(call("d", "search"), call("d", "read_file"))
    assert ordering_errors([user(), head, tool_result("d"), tool_result("d")]) == []
    assert ordering_errors([user(), head, tool_result("d"), user()]) == [
        "messages[3]: calls ['d'] are unanswered"
    ]
    assert ordering_errors([user(), head, *[tool_result("d")] * 3]) == [
        "messages[4]: tool result 'd' answers no pending call"
    ]


def test_a_malformed_tool_call_id_is_reported_not_raised() -> None:
    messages = [assistant_calls("a"), {"role": "tool", "tool_call_id": ["a"], "content": "x"}]
    assert ordering_errors(messages) == [
        "messages[1]: tool result ['a'] answers no pending call",
        "end: calls ['a'] are unanswered",
    ]


def test_derives_from_accepts_calls_removed_by_repair() -> None:
    original = assistant_calls(call("a"), call("b"), content="thinking")
    fewer = {**original, "tool_calls": [call("b")]}
    none_left = {"role": "assistant", "content": "thinking"}
    assert derives_from(fewer, original)
    assert derives_from(none_left, original)
    assert not derives_from({**original, "tool_calls": [call("z")]}, original)
    legacy = function_call(content="let me look")
    assert derives_from({"role": "assistant", "content": "let me look"}, legacy)
    other_call = {**legacy, "function_call": {"name": "other", "arguments": "{}"}}
    assert not derives_from(other_call, legacy)


def test_derives_from_accepts_cuts_around_a_placeholder() -> None:
    text = long_text(200)
    assert derives_from(tool_result("a", text[:100]), tool_result("a", text))
    assert derives_from(tool_result("a", text[-100:]), tool_result("a", text))
    short_ends = text[:5] + "\n\n[... 900 tokens truncated ...]\n\n" + text[-5:]
    assert derives_from(tool_result("a", short_ends), tool_result("a", text))
    assert derives_from(tool_result("a", "[removed]"), tool_result("a", text))
    assert not derives_from(tool_result("a", "something else entirely"), tool_result("a", text))
    assert not derives_from(tool_result("b", text), tool_result("a", text))
    assert not derives_from({**user(text), "name": "eve"}, user(text))


def test_check_accepts_dropping_old_units() -> None:
    original = [system(), user("1"), assistant("a"), user("2")]
    assert check(original, [system(), user("2")], ctx()) == []


def test_check_reports_changed_pins_and_a_dropped_last_unit() -> None:
    original = [system(), user("1"), assistant_calls("a"), tool_result("a")]
    curated = [system("You are a helpful"), user("1")]  # a shortened pin
    errors = check(original, curated, ctx())
    assert "pinned message 0 was not kept verbatim" in errors
    assert "last unit messages [2, 3] were dropped" in errors


def test_check_reports_a_dropped_pinned_first_user() -> None:
    original = [user("first"), assistant(), user("second")]
    errors = check(original, original[1:], ctx(pins=PinSpec(first_user=True)))
    assert errors == ["pinned message 0 was not kept verbatim"]


def test_check_reports_reordering_and_invented_messages() -> None:
    original = [user("1"), user("2")]
    expected = ["curated messages are not an ordered derivation of the original"]
    assert check(original, [user("2"), user("1")], ctx()) == expected
    assert check(original, [user("3"), user("2")], ctx()) == expected


def test_check_allows_inserted_summaries() -> None:
    original = [user("1"), assistant("a"), user("2")]
    summary = {"role": "system", "content": f"{SUMMARY_PREFIX}: user said 1]"}
    assert check(original, [summary, user("2")], ctx()) == []


def test_check_compares_with_the_budget_when_given() -> None:
    messages = [user(long_text(50))]
    used = tokens(messages)
    assert check(messages, messages, ctx(), budget=used) == []
    assert check(messages, messages, ctx(), budget=used - 1) == [
        f"curated tokens {used} exceed budget {used - 1}"
    ]


def test_check_lets_repair_fix_the_last_unit_of_an_invalid_list() -> None:
    original = [user("1"), assistant_calls("a")]
    assert check(original, [user("1")], ctx()) == []


def test_check_reports_ordering_broken_by_a_curator() -> None:
    original = [user(), assistant_calls("a"), tool_result("a"), user("2")]
    errors = check(original, [user(), tool_result("a"), user("2")], ctx())
    assert errors == ["messages[1]: tool result 'a' answers no pending call"]


def test_assert_ok_names_the_step() -> None:
    with pytest.raises(AssertionError, match="my_step broke the curator contract"):
        invariants.assert_ok([system(), user()], [user()], ctx(), "my_step")
