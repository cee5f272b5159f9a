from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from policies.base import PinSpec
from policies.errors import ParamError
from policies.tool_results import ToolResultTruncation, marker
from tests.factories import (
    assistant,
    assistant_calls,
    call,
    counter,
    ctx,
    function_call,
    function_result,
    image_part,
    long_text,
    text_part,
    text_tokens,
    tool_result,
    user,
)

BIG = long_text(3000)  # about 8,000 tokens, 25 KB
MARKER_RE = re.compile(r"\n\n\[\.\.\. ([\d,]+) tokens truncated by context-curator \.\.\.\]\n\n")


def agent_loop(*outputs: Any, names: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """One user turn, then one tool call per output, each answered in turn, then the
    assistant's answer (so every result has been seen: none is in the newest turn)."""
    messages: list[dict[str, Any]] = [user("Investigate.")]
    for k, output in enumerate(outputs):
        name = names[k] if k < len(names) else "search"
        messages += [assistant_calls(call(f"c{k}", name)), tool_result(f"c{k}", output)]
    return [*messages, assistant("Found it.")]


def test_the_newest_turns_results_are_never_cut() -> None:
    messages = agent_loop(BIG, BIG)[:-1]
    messages[-2] = assistant_calls(call("c1", "search"), call("c2", "search"))
    messages.append(tool_result("c2", BIG))
    out = ToolResultTruncation(max_tokens=300, keep_recent=0).curate(messages, ctx())
    assert [a.indexes for a in out.actions] == [(2,)]
    assert out.messages[3:] == messages[3:]


def test_marker_names_how_much_was_cut() -> None:
    assert marker(12345) == "\n\n[... 12,345 tokens truncated by context-curator ...]\n\n"


def test_small_results_are_left_alone() -> None:
    messages = agent_loop("short", "also short")
    out = ToolResultTruncation(keep_recent=0).curate(messages, ctx())
    assert out.messages == messages
    assert out.actions == ()


@pytest.mark.parametrize("over", [0, 1])
def test_a_result_one_token_over_max_tokens_is_cut_and_one_at_it_is_not(over: int) -> None:
    text = long_text(60)
    limit = text_tokens(text) - over
    messages = agent_loop(text, "recent")
    out = ToolResultTruncation(max_tokens=limit, keep_recent=1).curate(messages, ctx())
    cut = out.messages[2]["content"]
    assert (cut != text) is bool(over)
    assert text_tokens(cut) <= limit
    assert len(out.actions) == over


def test_big_result_becomes_head_marker_tail_within_max_tokens() -> None:
    messages = agent_loop(BIG, "recent")
    curator = ToolResultTruncation(max_tokens=500, keep_recent=1, head_ratio=0.7)
    out = curator.curate(messages, ctx())
    cut = out.messages[2]["content"]
    assert text_tokens(cut) <= 500
    head, removed, tail = MARKER_RE.split(cut)
    assert BIG.startswith(head)
    assert BIG.endswith(tail)
    assert int(removed.replace(",", "")) == text_tokens(BIG) - text_tokens(head) - text_tokens(tail)
    # The 0.7 split holds up to the marker and the BPE joins.
    assert text_tokens(head) > 2 * text_tokens(tail) > 0
    assert out.messages[:2] == messages[:2]
    assert out.messages[3:] == messages[3:]
    before = counter().count_message(messages[2], "gpt-4o")
    after = counter().count_message(out.messages[2], "gpt-4o")
    (action,) = out.actions
    assert (action.curator, action.kind, action.indexes) == (
        "tool_result_truncation",
        "truncate",
        (2,),
    )
    assert action.tokens_removed == before - after
    assert action.reason == f"'search' result cut from {before:,} to {after:,} tokens"


@pytest.mark.parametrize(("head_ratio", "keeps"), [(1.0, "head"), (0.0, "tail")])
def test_head_ratio_extremes_keep_one_end(head_ratio: float, keeps: str) -> None:
    curator = ToolResultTruncation(max_tokens=200, keep_recent=0, head_ratio=head_ratio)
    cut = curator.curate(agent_loop(BIG), ctx()).messages[2]["content"]
    head, _, tail = MARKER_RE.split(cut)
    assert (head, tail) != ("", "")
    assert (tail if keeps == "head" else head) == ""
    assert text_tokens(cut) <= 200


def test_the_newest_results_stay_whole() -> None:
    messages = agent_loop(BIG, BIG, BIG)
    out = ToolResultTruncation(max_tokens=300, keep_recent=2).curate(messages, ctx())
    assert [a.indexes for a in out.actions] == [(2,)]
    assert out.messages[4] == messages[4]
    assert out.messages[6] == messages[6]
    everything = ToolResultTruncation(max_tokens=300, keep_recent=0).curate(messages, ctx())
    assert [a.indexes for a in everything.actions] == [(2,), (4,), (6,)]


def test_excluded_tools_are_found_through_their_call() -> None:
    messages = agent_loop(BIG, BIG, names=("read_file", "search"))
    curator = ToolResultTruncation(max_tokens=300, keep_recent=0, exclude_tools=["read_file"])  # type: ignore[arg-type]
    out = curator.curate(messages, ctx())
    assert curator.exclude_tools == ("read_file",)
    assert [a.indexes for a in out.actions] == [(4,)]
    assert out.messages[2] == messages[2]


def test_parallel_results_are_named_by_their_own_call() -> None:
    messages = [
        user(),
        assistant_calls(call("a", "read_file"), call("b", "search")),
        tool_result("b", BIG),
        tool_result("a", BIG),
        assistant(),
    ]
    curator = ToolResultTruncation(max_tokens=300, keep_recent=0, exclude_tools=("search",))
    assert [a.indexes for a in curator.curate(messages, ctx()).actions] == [(3,)]


def test_repeated_call_ids_name_their_tool_by_position() -> None:
    messages = [
        user(),
        assistant_calls(call("d", "read_file"), call("d", "search")),
        tool_result("d", BIG),
        tool_result("d", BIG),
        assistant(),
    ]
    curator = ToolResultTruncation(max_tokens=300, keep_recent=0, exclude_tools=("search",))
    assert [a.indexes for a in curator.curate(messages, ctx()).actions] == [(2,)]


def test_legacy_function_results_are_cut_and_excluded_by_name() -> None:
    messages = [user(), function_call("lookup"), function_result("lookup", BIG), assistant()]
    out = ToolResultTruncation(max_tokens=300, keep_recent=0).curate(messages, ctx())
    assert out.actions[0].reason.startswith("'lookup' result cut from")
    assert text_tokens(out.messages[2]["content"]) <= 300
    excluded = ToolResultTruncation(max_tokens=300, keep_recent=0, exclude_tools=("lookup",))
    assert excluded.curate(messages, ctx()).actions == ()


def test_text_part_arrays_are_cut_as_one_text_part() -> None:
    parts = [text_part(BIG[:10_000]), text_part(BIG[10_000:])]
    out = ToolResultTruncation(max_tokens=300, keep_recent=0).curate(agent_loop(parts), ctx())
    (cut,) = out.messages[2]["content"]
    assert cut["type"] == "text"
    assert BIG.startswith(MARKER_RE.split(cut["text"])[0])
    assert text_tokens(cut["text"]) <= 300


def test_arrays_with_images_are_left_alone() -> None:
    messages = agent_loop([text_part(BIG), image_part()])
    assert ToolResultTruncation(max_tokens=300, keep_recent=0).curate(messages, ctx()).actions == ()


def test_max_tokens_smaller_than_the_marker_keeps_a_plain_head() -> None:
    out = ToolResultTruncation(max_tokens=5, keep_recent=0).curate(agent_loop(BIG), ctx())
    cut = out.messages[2]["content"]
    assert BIG.startswith(cut)
    assert 0 < text_tokens(cut) <= 5


def test_unicode_results_are_cut_on_character_boundaries() -> None:
    text = long_text(2000, "数据🙂")
    cut = ToolResultTruncation(max_tokens=301, keep_recent=0).curate(agent_loop(text), ctx())
    content = cut.messages[2]["content"]
    assert "\ufffd" not in content
    head, _, tail = MARKER_RE.split(content)
    assert text.startswith(head)
    assert text.endswith(tail)


def test_pinned_results_and_other_roles_are_never_cut() -> None:
    messages = [user(BIG), assistant(BIG), *agent_loop(BIG)[1:]]
    pins = PinSpec(roles=frozenset({"tool"}))
    out = ToolResultTruncation(max_tokens=300, keep_recent=0).curate(messages, ctx(pins=pins))
    assert out.messages == messages
    assert out.actions == ()


def test_cutting_is_deterministic_idempotent_and_leaves_the_input_alone() -> None:
    messages = agent_loop(BIG, long_text(900, "line"), "tiny")
    before = copy.deepcopy(messages)
    curator = ToolResultTruncation(max_tokens=400, keep_recent=1, head_ratio=0.5)
    first = curator.curate(messages, ctx())
    assert messages == before
    assert curator.curate(messages, ctx()) == first
    again = curator.curate(first.messages, ctx())
    assert again.messages == first.messages
    assert again.actions == ()


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"max_tokens": 0}, "max_tokens", "must be > 0, got 0"),
        ({"max_tokens": -5}, "max_tokens", "must be > 0, got -5"),
        ({"max_tokens": "abc"}, "max_tokens", "must be an integer, got 'abc' (str)"),
        ({"max_tokens": True}, "max_tokens", "must be an integer, got True (bool)"),
        ({"max_tokens": 2.5}, "max_tokens", "must be an integer"),
        ({"keep_recent": -1}, "keep_recent", "must be >= 0, got -1"),
        ({"head_ratio": 1.5}, "head_ratio", "must be in [0, 1], got 1.5"),
        ({"head_ratio": "half"}, "head_ratio", "must be a number"),
        ({"head_ratio": float("nan")}, "head_ratio", "must be in [0, 1]"),
        ({"exclude_tools": "search"}, "exclude_tools", "must be a list of strings"),
        ({"exclude_tools": [None]}, "exclude_tools", "items must be non-empty strings"),
    ],
)
def test_invalid_parameters_name_the_field(
    kwargs: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(ParamError) as info:
        ToolResultTruncation(**kwargs)
    assert info.value.field == field
    assert message in info.value.message


def test_integer_head_ratio_is_accepted_as_a_float() -> None:
    assert ToolResultTruncation(head_ratio=1).head_ratio == 1.0
