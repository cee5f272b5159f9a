from __future__ import annotations

import copy
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import PinSpec
from policies.errors import ParamError
from policies.masking_refs import kept_lines, message_names, names_in
from policies.turn_masking import MARK, TurnMasking
from tests.factories import (
    assistant_calls,
    call,
    ctx,
    long_text,
    system,
    tokens,
    tool_result,
    user,
)

Msgs = list[dict[str, Any]]
OUTPUT = long_text(300)  # about 600 tokens


def step(k: int, output: str = OUTPUT, thought: str = "", command: str = "ls") -> Msgs:
    """One agent step: a bash call and its result."""
    head = assistant_calls(call(f"c{k}", "bash", {"command": command}), content=thought or None)
    return [head, tool_result(f"c{k}", f"{output} {k}")]


def session(n: int, **kw: Any) -> Msgs:
    messages: Msgs = [system(), user("Fix the bug in parse_config.")]
    for k in range(n):
        messages += step(k, **kw)
    return messages


def masked(messages: Msgs) -> list[int]:
    out = []
    for i, m in enumerate(messages):
        texts = [m.get("content")] + [c["function"]["arguments"] for c in m.get("tool_calls") or ()]
        if any(isinstance(t, str) and MARK in t for t in texts):
            out.append(i)
    return out


def test_nothing_happens_at_or_below_the_trigger() -> None:
    messages = session(12)
    curator = TurnMasking(keep_turns=2, trigger_tokens=tokens(messages), step_tokens=1)
    out = curator.curate(messages, ctx())
    assert out.messages == messages
    assert not out.actions


def test_the_newest_turns_the_task_and_the_system_stay_whole() -> None:
    messages = session(12)
    out = TurnMasking(keep_turns=3, trigger_tokens=0, step_tokens=1).curate(messages, ctx())
    assert masked(out.messages)
    assert out.messages[:2] == messages[:2]
    assert out.messages[-6:] == messages[-6:]  # the newest three steps, calls and results
    assert max(masked(out.messages)) < len(messages) - 6


def test_a_masked_result_keeps_its_head_a_marker_and_its_call() -> None:
    messages = session(6)
    out = TurnMasking(keep_turns=1, trigger_tokens=0, step_tokens=1, keep_chars=50).curate(
        messages, ctx()
    )
    first = out.messages[3]
    assert first["content"].startswith(messages[3]["content"][:50])
    assert MARK in first["content"]
    assert "KB of an old step" in first["content"]
    assert out.messages[2] == messages[2]  # a short call is not masked
    invariants.check(messages, out.messages, ctx())


def test_long_call_arguments_are_masked_and_stay_valid_json() -> None:
    heredoc = "cat > fix.py <<'EOF'\n" + long_text(400, "x = 1\n") + "\nEOF"
    messages = session(4, command=heredoc)
    out = TurnMasking(keep_turns=1, trigger_tokens=0, step_tokens=1).curate(messages, ctx())
    args = out.messages[2]["tool_calls"][0]["function"]["arguments"]
    assert MARK in json.loads(args)["command"]
    assert out.messages[2]["tool_calls"][0]["id"] == "c0"


def test_masking_waits_for_a_whole_step_of_savings() -> None:
    messages = session(12)
    per_step = tokens(step(0)) - 60
    small = TurnMasking(keep_turns=2, trigger_tokens=0, step_tokens=per_step * 3)
    chunks = [len(masked(small.curate(session(n), ctx()).messages)) for n in range(3, 13)]
    # The masked region grows by whole chunks of three or four steps, never one at a time.
    sizes = sorted(set(chunks))
    assert len(sizes) >= 3
    assert chunks == sorted(chunks)
    assert {b - a for a, b in itertools.pairwise(sizes)} <= {3, 4}
    assert masked(small.curate(messages, ctx()).messages)


def test_the_masked_prefix_is_the_same_bytes_on_later_turns() -> None:
    curator = TurnMasking(keep_turns=2, trigger_tokens=0, step_tokens=1500)
    earlier = curator.curate(session(10), ctx()).messages
    later = curator.curate(session(11), ctx()).messages
    done = masked(earlier)
    assert done
    assert later[: max(done) + 1] == earlier[: max(done) + 1]


def test_lines_the_next_steps_name_are_kept() -> None:
    grep = "\n".join(f"src/mod{k}.py:{k}: filler line {k}" for k in range(200))
    grep += "\nsrc/config.py:88:def parse_config(path):\n" + long_text(200)
    messages: Msgs = [system(), user("Fix it.")]
    messages += step(0, output=grep, command="grep -rn def src")
    messages += step(1, command="sed -n '80,100p' src/config.py  # parse_config")
    messages += step(2) + step(3)
    out = TurnMasking(keep_turns=3, trigger_tokens=0, step_tokens=1).curate(messages, ctx())
    content = out.messages[3]["content"]
    assert MARK in content
    assert "src/config.py:88:def parse_config(path):" in content


def test_names_and_lines_can_be_turned_off() -> None:
    messages = session(4)
    plain = TurnMasking(keep_turns=1, trigger_tokens=0, step_tokens=1, keep_names=0, keep_lines=0)
    out = plain.curate(messages, ctx())
    assert "names:" not in out.messages[3]["content"]
    assert "used next" not in out.messages[3]["content"]


def test_pinned_user_messages_and_tools_of_pinned_units_are_kept() -> None:
    messages = session(6)
    messages[1] = user(long_text(900))
    out = TurnMasking(keep_turns=1, trigger_tokens=0, step_tokens=1).curate(
        messages, ctx(pins=PinSpec(first_user=True))
    )
    assert out.messages[1] == messages[1]


def test_min_fill_keeps_the_prompt_above_its_share_of_the_budget() -> None:
    messages = session(12)
    budget = tokens(messages)
    curator = TurnMasking(
        keep_turns=1, trigger_tokens=10**6, trigger_share=0.01, step_tokens=1, min_fill=0.9
    )
    out = curator.curate(messages, ctx(budget=budget))
    assert out.actions
    assert tokens(out.messages) >= 0.9 * budget
    # The floor is never above trigger_tokens: a large window is masked for cost.
    low = TurnMasking(keep_turns=1, trigger_tokens=2000, step_tokens=1, min_fill=0.9)
    assert tokens(low.curate(messages, ctx(budget=budget)).messages) < 0.5 * budget


def test_curating_twice_changes_nothing_and_the_input_is_not_mutated() -> None:
    messages = session(10)
    before = copy.deepcopy(messages)
    curator = TurnMasking(keep_turns=2, trigger_tokens=0, step_tokens=700)
    once = curator.curate(messages, ctx()).messages
    assert messages == before
    assert curator.curate(once, ctx()).messages == once


def test_the_action_names_what_was_masked() -> None:
    out = TurnMasking(keep_turns=2, trigger_tokens=0, step_tokens=1).curate(session(8), ctx())
    (action,) = out.actions
    assert action.curator == "turn_masking"
    assert action.kind == "replace"
    assert action.tokens_removed > 0
    assert "older than the newest 2" in action.reason


@pytest.mark.parametrize(
    ("field", "value"),
    [("keep_turns", 0), ("trigger_tokens", -1), ("step_tokens", 0), ("keep_chars", -1)],
)
def test_bad_parameters_name_their_field(field: str, value: int) -> None:
    with pytest.raises(ParamError, match=field):
        TurnMasking(**{field: value})


def test_references_read_text_and_call_arguments() -> None:
    messages = [
        assistant_calls(
            call("a", "bash", {"command": "grep -n get_FOO_display django/db/models/base.py"}),
            content="Look at ModelBase next.",
        ),
        tool_result("a", "ignored_name in a result"),
    ]
    found = set().union(*(message_names(m) for m in messages if m["role"] == "assistant"))
    assert {"get_FOO_display", "django/db/models/base.py", "base.py", "ModelBase"} <= found
    assert "ignored_name" not in found


def test_kept_lines_and_names_in() -> None:
    text = "alpha beta\nuses parse_config here\nnothing\nparse_config again"
    assert kept_lines(text, frozenset({"parse_config"}), 1) == "uses parse_config here"
    assert kept_lines(text, frozenset(), 5) == ""
    assert names_in("a get_x b.py get_x Other", exclude="Other", limit=5) == "get_x, b.py"


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 14), keep=st.integers(1, 4), step_tokens=st.integers(1, 3000))
def test_valid_idempotent_and_the_newest_turn_whole(n: int, keep: int, step_tokens: int) -> None:
    messages = session(n)
    curator = TurnMasking(keep_turns=keep, trigger_tokens=0, step_tokens=step_tokens)
    out = curator.curate(messages, ctx()).messages
    invariants.check(messages, out, ctx())
    assert out[-2:] == messages[-2:]
    assert out[:2] == messages[:2]
    assert curator.curate(out, ctx()).messages == out


def test_over_the_budget_old_steps_are_masked_deeper_and_counted_once() -> None:
    thought = long_text(120, "why")  # under min_chars: the usual pass keeps it
    messages = session(12, thought=thought)
    budget = tokens(messages) // 3
    curator = TurnMasking(keep_turns=2, trigger_tokens=0, step_tokens=500, min_chars=2000)
    out = curator.curate(messages, ctx(budget=budget))
    (action,) = out.actions
    assert action.tokens_removed == tokens(messages) - tokens(out.messages)
    assert len(set(action.indexes)) == len(action.indexes)
    # The deep pass masked the short thoughts of the oldest steps too.
    assert MARK in out.messages[2]["content"]
    assert tokens(out.messages) <= budget
