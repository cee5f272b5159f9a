from __future__ import annotations

from policies.messages import (
    Unit,
    call_ids,
    is_result,
    opens_block,
    role,
    text_of,
    tool_names,
    turn_starts,
    units,
)
from tests.factories import (
    assistant,
    assistant_calls,
    call,
    function_call,
    function_result,
    image_part,
    system,
    text_part,
    tool_result,
    user,
)


def test_role_is_empty_for_missing_or_non_string_roles() -> None:
    assert role(user()) == "user"
    assert role({}) == ""
    assert role({"role": 3}) == ""


def test_call_ids_and_tool_names_of_parallel_calls() -> None:
    msg = assistant_calls(call("a", "search"), call("b", "read_file"), {"type": "function"})
    assert call_ids(msg) == ("a", "b")
    assert tool_names(msg) == {"a": "search", "b": "read_file"}
    assert call_ids(user()) == ()
    assert tool_names(assistant()) == {}


def test_opens_block_needs_calls_or_a_function_call() -> None:
    assert opens_block(assistant_calls("a"))
    assert opens_block(function_call())
    assert not opens_block(assistant_calls())
    assert not opens_block(assistant())
    assert not opens_block({"role": "user", "tool_calls": [call("a")]})


def test_is_result_covers_tool_and_function_roles() -> None:
    assert is_result(tool_result("a"))
    assert is_result(function_result())
    assert not is_result(assistant())


def test_text_of_joins_text_parts_and_skips_images() -> None:
    assert text_of(user("plain")) == "plain"
    assert text_of(user([text_part("a"), image_part(), text_part("b")])) == "ab"
    assert text_of(assistant(None)) == ""


def test_units_group_a_call_with_all_its_results() -> None:
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
    assert units(messages) == [Unit(0, 1), Unit(1, 2), Unit(2, 5), Unit(5, 7), Unit(7, 8)]
    assert list(units(messages)[2].indexes()) == [2, 3, 4]


def test_units_keep_stray_results_as_their_own_units() -> None:
    messages = [tool_result("x"), user(), tool_result("y")]
    assert units(messages) == [Unit(0, 1), Unit(1, 2), Unit(2, 3)]
    assert units([]) == []


def test_turns_start_at_each_user_message_and_at_zero() -> None:
    messages = [system(), user("1"), assistant(), user("2"), assistant()]
    assert turn_starts(messages) == [0, 1, 3]
    assert turn_starts([user(), assistant()]) == [0]
    assert turn_starts([]) == []
