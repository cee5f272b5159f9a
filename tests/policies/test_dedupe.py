from __future__ import annotations

import copy
from typing import Any

import pytest

from policies import invariants
from policies.base import PinSpec
from policies.dedupe import Dedupe, pointer
from policies.errors import ParamError
from tests.factories import (
    assistant_calls,
    call,
    counter,
    ctx,
    function_call,
    function_result,
    long_text,
    system,
    text_part,
    tool_result,
    tool_use,
    user,
)

Msgs = list[dict[str, Any]]
FILE = long_text(200)  # about 400 tokens
OTHER = long_text(200, "ipsum")


def reads(*outputs: Any) -> Msgs:
    """A task, then one read_file call per output, each answered."""
    messages: Msgs = [system(), user("Fix it.")]
    for k, output in enumerate(outputs):
        messages += tool_use(f"c{k}", output)
    return messages


def content_tokens(output: Any) -> int:
    msg = tool_result("x", output)
    return counter().count_message(msg, "gpt-4o") - counter().count_message(
        {**msg, "content": ""}, "gpt-4o"
    )


def test_pointer_text() -> None:
    assert pointer("call c1 / read_file", 1234) == (
        "[duplicate of a later tool result (call c1 / read_file), 1,234 tokens]"
    )


def test_an_earlier_copy_points_to_the_next_one_and_the_newest_stays() -> None:
    messages = reads(FILE, OTHER, FILE, FILE)
    out = Dedupe().curate(messages, ctx())
    n = content_tokens(FILE)
    assert out.messages[3] == tool_result("c0", pointer("call c2 / read_file", n))
    assert out.messages[7] == tool_result("c2", pointer("call c3 / read_file", n))
    assert out.messages[9] == messages[9]
    assert out.messages[5] == messages[5]
    first, second = out.actions
    assert (first.curator, first.kind, first.indexes) == ("dedupe", "replace", (3,))
    assert second.indexes == (7,)
    saved = counter().count_message(messages[3], "gpt-4o")
    saved -= counter().count_message(out.messages[3], "gpt-4o")
    assert first.tokens_removed == saved > 0
    assert first.reason == "repeated later as call c2 / read_file: kept that copy only"
    assert invariants.check(messages, out.messages, ctx()) == []


def test_a_pointer_does_not_change_when_more_copies_arrive() -> None:
    """Prefix stability: the oldest copy is rewritten once, on the turn its first repeat
    arrives, and then stays byte-identical."""
    two = Dedupe().curate(reads(FILE, FILE), ctx()).messages
    three = Dedupe().curate(reads(FILE, FILE, FILE), ctx()).messages
    assert three[:5] == two[:5]
    # The second copy becomes a pointer on the turn the third arrives, and the newest stays.
    assert two[5] == reads(FILE, FILE)[5]
    assert three[5]["content"] == pointer("call c2 / read_file", content_tokens(FILE))
    assert three[7] == reads(FILE, FILE, FILE)[7]


def test_small_or_different_results_are_left_alone() -> None:
    messages = reads("ok", "ok", FILE, FILE + ".")
    assert Dedupe().curate(messages, ctx()).actions == ()
    small = content_tokens(FILE)
    assert Dedupe(min_tokens=small + 1).curate(reads(FILE, FILE), ctx()).actions == ()
    assert len(Dedupe(min_tokens=small).curate(reads(FILE, FILE), ctx()).actions) == 1


def test_a_pointer_longer_than_the_copy_is_not_made() -> None:
    assert Dedupe(min_tokens=0).curate(reads("ok", "ok"), ctx()).actions == ()


def test_text_part_contents_and_parallel_results_are_deduplicated() -> None:
    parts = [text_part(FILE)]
    head = assistant_calls(call("a", "read_file"), call("b", "grep"))
    messages = [user("go"), head, tool_result("a", parts), tool_result("b", parts)]
    out = Dedupe().curate(messages, ctx())
    assert out.messages[2]["content"] == pointer("call b / grep", content_tokens(parts))
    assert out.messages[3] == messages[3]
    # A string and a text part with the same text are different contents.
    assert Dedupe().curate(reads(FILE, [text_part(FILE)]), ctx()).actions == ()


def test_legacy_function_results_are_deduplicated() -> None:
    messages = [user("go"), function_call("lookup"), function_result("lookup", FILE)]
    messages += [function_call("lookup"), function_result("lookup", FILE)]
    out = Dedupe().curate(messages, ctx())
    assert out.messages[2]["content"] == pointer("function lookup", content_tokens(FILE))


def test_pinned_copies_stay_but_still_count_as_the_later_copy() -> None:
    messages = reads(FILE, FILE, FILE)
    pins = PinSpec(roles=frozenset({"system"}), first_user=True)
    out = Dedupe().curate(messages, ctx(pins=pins))
    assert len(out.actions) == 2
    tool_pins = PinSpec(roles=frozenset({"system", "tool"}))
    assert Dedupe().curate(messages, ctx(pins=tool_pins)).actions == ()


def test_curating_twice_changes_nothing_and_input_is_not_mutated() -> None:
    messages = reads(FILE, OTHER, FILE, OTHER, FILE)
    before = copy.deepcopy(messages)
    out = Dedupe(min_tokens=1).curate(messages, ctx())
    assert messages == before
    assert len(out.actions) == 3
    again = Dedupe(min_tokens=1).curate(out.messages, ctx())
    assert again.messages == out.messages
    assert again.actions == ()


@pytest.mark.parametrize(("value", "message"), [(-1, "must be >= 0"), (1.5, "an integer")])
def test_bad_parameters_are_rejected(value: Any, message: str) -> None:
    with pytest.raises(ParamError) as info:
        Dedupe(min_tokens=value)
    assert info.value.field == "min_tokens"
    assert message in info.value.message
