from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from typing import Any

import pytest

from policies import invariants
from policies.base import PinSpec
from policies.errors import ParamError
from policies.messages import Message
from policies.tool_use_clearing import CLEARED_ARGUMENTS, ToolUseClearing, placeholder
from tests.factories import (
    assistant,
    assistant_calls,
    call,
    counter,
    ctx,
    function_call,
    function_result,
    long_text,
    system,
    tokens,
    tool_result,
    tool_use,
    user,
)

Msgs = list[dict[str, Any]]
OUTPUT = long_text(300)  # about 600 tokens


def session(n_uses: int, output: str = OUTPUT, names: tuple[str, ...] = ()) -> Msgs:
    """A system prompt and a task, then `n_uses` single tool calls, each answered."""
    messages: Msgs = [system(), user("Fix the bug.")]
    for k in range(n_uses):
        name = names[k % len(names)] if names else "read_file"
        messages += tool_use(f"c{k}", f"{output} {k}", name)
    return messages


def cleared(messages: Sequence[Message]) -> list[int]:
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m.get("content"), str) and m["content"].startswith("[tool result cleared")
    ]


def test_placeholder_names_the_tool_and_the_size() -> None:
    assert placeholder("read_file", "x" * 18_000) == "[tool result cleared: read_file, 18 KB]"
    assert placeholder("", "abc") == "[tool result cleared: unnamed tool, 3 B]"


def test_nothing_happens_below_the_trigger() -> None:
    messages = session(6)
    curator = ToolUseClearing(trigger_tokens=tokens(messages), keep=1)
    out = curator.curate(messages, ctx())
    assert out.messages == messages
    assert out.actions == ()


def test_over_the_trigger_all_but_the_newest_keep_results_are_cleared() -> None:
    messages = session(6)
    out = ToolUseClearing(trigger_tokens=100, keep=2).curate(messages, ctx())
    assert cleared(out.messages) == [3, 5, 7, 9]
    assert out.messages[3] == tool_result("c0", placeholder("read_file", f"{OUTPUT} 0"))
    assert out.messages[:3] == messages[:3]
    assert out.messages[10:] == messages[10:]
    # One action per block; the arguments stay unless asked.
    assert [a.indexes for a in out.actions] == [(3,), (5,), (7,), (9,)]
    assert all(out.messages[i] == messages[i] for i in (2, 4, 6, 8))
    first = out.actions[0]
    assert (first.curator, first.kind) == ("tool_use_clearing", "replace")
    saved = counter().count_message(messages[3], "gpt-4o")
    saved -= counter().count_message(out.messages[3], "gpt-4o")
    assert first.tokens_removed == saved > 0
    assert first.reason == (
        f"cleared 1 old result(s) of 'read_file': the conversation has "
        f"{tokens(messages):,} tokens, over the trigger of 100"
    )
    assert invariants.check(messages, out.messages, ctx()) == []


def test_keep_counts_results_so_a_parallel_block_is_kept_whole() -> None:
    block = [assistant_calls("p1", "p2"), tool_result("p1", OUTPUT), tool_result("p2", OUTPUT)]
    messages = [*session(2), *block, assistant("Done."), user("Thanks.")]
    out = ToolUseClearing(trigger_tokens=0, keep=1).curate(messages, ctx())
    # The newest result is p2: its whole block stays, and so does everything after it.
    assert cleared(out.messages) == [3, 5]


def test_the_last_unit_and_excluded_tools_are_never_cleared() -> None:
    messages = session(4, names=("read_file", "run_tests"))
    out = ToolUseClearing(trigger_tokens=0, keep=0, exclude_tools=("run_tests",)).curate(
        messages, ctx()
    )
    # c0 and c2 are read_file; c3 (run_tests) is excluded, and c1 too; the last unit stays.
    assert cleared(out.messages) == [3, 7]
    messages = session(3)
    out = ToolUseClearing(trigger_tokens=0, keep=0).curate(messages, ctx())
    assert cleared(out.messages) == [3, 5]  # not 7: the newest block is the last unit


def test_results_shorter_than_their_placeholder_are_left_alone() -> None:
    messages = session(3, output="ok")
    out = ToolUseClearing(trigger_tokens=0, keep=0).curate(messages, ctx())
    assert out.actions == ()


def test_repeated_call_ids_pair_with_results_by_position() -> None:
    # Two calls share id `d`; the first result answers the excluded tool, so only the
    # second result and the second call's arguments are cleared.
    big_args = {"path": "src/app.py", "note": long_text(40)}
    head = assistant_calls(call("d", "run_tests", big_args), call("d", "read_file", big_args))
    messages = [user("go"), head, tool_result("d", OUTPUT), tool_result("d", OUTPUT)]
    messages += tool_use("c", OUTPUT)
    curator = ToolUseClearing(
        trigger_tokens=0, keep=1, exclude_tools=("run_tests",), clear_arguments=True
    )
    out = curator.curate(messages, ctx())
    new_head = out.messages[1]
    assert new_head["tool_calls"][0] == head["tool_calls"][0]
    assert new_head["tool_calls"][1]["function"]["arguments"] == CLEARED_ARGUMENTS
    assert out.messages[2] == messages[2]
    assert out.messages[3]["content"] == placeholder("read_file", OUTPUT)
    assert invariants.ordering_errors(out.messages) == []


def test_clear_arguments_replaces_only_the_cleared_calls_arguments() -> None:
    big_args = {"path": "src/app.py", "note": long_text(40)}
    head = assistant_calls(call("a", "read_file", big_args), call("b", "run_tests", big_args))
    messages = [
        user("go"),
        head,
        tool_result("a", OUTPUT),
        tool_result("b", OUTPUT),
        *tool_use("c", OUTPUT),
    ]
    curator = ToolUseClearing(
        trigger_tokens=0, keep=1, exclude_tools=("run_tests",), clear_arguments=True
    )
    out = curator.curate(messages, ctx())
    new_head = out.messages[1]
    assert new_head["tool_calls"][0]["function"] == {
        "name": "read_file",
        "arguments": CLEARED_ARGUMENTS,
    }
    assert json.loads(CLEARED_ARGUMENTS) == {"cleared": True}
    assert new_head["tool_calls"][1] == head["tool_calls"][1]
    assert out.messages[3] == messages[3]
    (action,) = out.actions
    assert action.indexes == (1, 2)
    assert action.tokens_removed == tokens(messages) - tokens(out.messages)
    assert invariants.check(messages, out.messages, ctx()) == []


def test_legacy_function_results_are_cleared_but_their_call_stays() -> None:
    messages = [user("go"), function_call("lookup"), function_result("lookup", OUTPUT)]
    messages += tool_use("c", "ok")
    out = ToolUseClearing(trigger_tokens=0, keep=1, clear_arguments=True).curate(messages, ctx())
    assert out.messages[1] == messages[1]
    assert out.messages[2] == function_result("lookup", placeholder("lookup", OUTPUT))


def test_pinned_blocks_are_skipped() -> None:
    messages = session(4)
    out = ToolUseClearing(trigger_tokens=0, keep=1).curate(
        messages, ctx(pins=PinSpec(roles=frozenset({"system", "tool"})))
    )
    assert out.actions == ()


def test_clearing_moves_in_whole_chunks_of_at_least_clear_at_least_tokens() -> None:
    """Each block saves about 600 tokens, so chunks of 1500 tokens hold 3 blocks: the
    cleared region grows 3 blocks at a time, and never changes in between."""
    curator = ToolUseClearing(trigger_tokens=0, keep=1, clear_at_least=1500)
    per_block = counter().count_message(tool_result("c0", f"{OUTPUT} 0"), "gpt-4o")
    assert 520 < per_block < 740
    previous: list[Message] = list(session(0))
    history = [0]
    for n in range(1, 12):
        out = curator.curate(session(n), ctx())
        blocks = len(cleared(out.messages))
        assert blocks % 3 == 0
        assert sum(a.tokens_removed for a in out.actions) >= 1500 * (blocks // 3)
        # Up to the end of the previous turn's cleared region, nothing changed.
        end = 2 + 2 * history[-1]
        assert out.messages[:end] == previous[:end]
        history.append(blocks)
        previous = out.messages
    history.pop(0)
    assert history == [0, 0, 0, 3, 3, 3, 6, 6, 6, 9, 9]


def test_clear_at_least_zero_clears_everything_older_than_keep_every_turn() -> None:
    curator = ToolUseClearing(trigger_tokens=0, keep=2)
    assert [len(cleared(curator.curate(session(n), ctx()).messages)) for n in range(1, 6)] == [
        0,
        0,
        1,
        2,
        3,
    ]


def test_curating_twice_changes_nothing_and_input_is_not_mutated() -> None:
    messages = session(9)
    before = copy.deepcopy(messages)
    curator = ToolUseClearing(trigger_tokens=0, keep=2, clear_at_least=1500, clear_arguments=True)
    out = curator.curate(messages, ctx())
    assert messages == before
    assert out.actions
    again = curator.curate(out.messages, ctx())
    assert again.messages == out.messages
    assert again.actions == ()


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        ({"trigger_tokens": -1}, "trigger_tokens", "must be >= 0"),
        ({"keep": "3"}, "keep", "an integer"),
        ({"clear_at_least": -5}, "clear_at_least", "must be >= 0"),
        ({"exclude_tools": "shell"}, "exclude_tools", "a list of strings"),
        ({"clear_arguments": "yes"}, "clear_arguments", "true or false"),
    ],
)
def test_bad_parameters_are_rejected(kwargs: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(ParamError) as info:
        ToolUseClearing(**kwargs)
    assert info.value.field == field
    assert message in info.value.message
