"""`min_fill`: the cost curators stop before the prompt falls below a share of the budget.

Each case builds a history whose old tool results (or turns) are all over the curator's
threshold, and a budget whose 85% floor leaves room for only some of the cuts: the
oldest go, the rest stay whole, and the prompt stays at or above the floor.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from policies import fill
from policies.base import CuratorOutput
from policies.dedupe import Dedupe
from policies.errors import ParamError
from policies.history_retention import HistoryRetention
from policies.role_truncation import RoleTruncation
from policies.tool_results import ToolResultTruncation
from policies.tool_use_clearing import ToolUseClearing
from tests import factories as f

Msgs = list[dict[str, Any]]
BIG = f.long_text(1500)  # about 3,000 tokens


def agent_run(n: int, same: bool = False) -> Msgs:
    """A task, then `n` reads of about 3,000 tokens each (identical with `same`)."""
    messages: Msgs = [f.system(), f.user("Fix the bug.")]
    for k in range(n):
        messages += f.tool_use(f"c{k}", BIG if same else f"{BIG} {k}")
    return [*messages, f.user("And now?")]


def changed(before: Msgs, out: CuratorOutput) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(before, out.messages, strict=False)) if a != b]


# Clearing's floor is capped by its trigger: see its own test below.
FLOORED = [
    ToolResultTruncation(max_tokens=500, keep_recent=0, min_fill=0.85),
    HistoryRetention(threshold_chars=1000, keep_recent_turns=1, min_fill=0.85),
    Dedupe(min_tokens=50, min_fill=0.85),
]


@pytest.mark.parametrize("curator", FLOORED, ids=lambda c: c.name)
def test_the_oldest_are_cut_until_the_floor(curator: Any) -> None:
    messages = agent_run(8, same=isinstance(curator, Dedupe))
    total = f.tokens(messages)
    ctx = f.ctx(budget=int(total / 0.85 * 0.7))  # the floor is 70% of the input
    out = curator.curate(messages, ctx)
    used = f.tokens(out.messages)
    assert used >= math.ceil(0.85 * ctx.budget)
    cut = changed(messages, out)
    assert cut, "something was cut"
    # Only the oldest: every result after the last one cut is whole.
    results = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    assert cut == results[: len(cut)]
    assert len(cut) < len(results) - (0 if isinstance(curator, Dedupe) else 1)
    # Curating again changes nothing.
    assert curator.curate(out.messages, ctx).messages == out.messages


@pytest.mark.parametrize("curator", FLOORED, ids=lambda c: c.name)
def test_without_min_fill_every_candidate_is_cut(curator: Any) -> None:
    messages = agent_run(8, same=isinstance(curator, Dedupe))
    ctx = f.ctx(budget=int(f.tokens(messages) * 0.8))
    bare = dataclasses.replace(curator, min_fill=0.0)
    floored = curator.curate(messages, ctx)
    assert len(changed(messages, bare.curate(messages, ctx))) > len(changed(messages, floored))


@pytest.mark.parametrize("curator", FLOORED, ids=lambda c: c.name)
def test_a_prompt_already_under_the_floor_is_left_alone(curator: Any) -> None:
    messages = agent_run(8, same=isinstance(curator, Dedupe))
    ctx = f.ctx(budget=f.tokens(messages) * 2)
    assert curator.curate(messages, ctx).actions == ()


def test_clearing_floor_is_at_most_a_quarter_of_its_trigger() -> None:
    """Clearing keeps a long session near its trigger whatever the window: its floor is
    85% of the budget, or a quarter of the trigger when that is lower."""
    messages = agent_run(8)
    total = f.tokens(messages)  # about 24k
    roomy = f.ctx(budget=total)  # 85%: ~20.6k, above a quarter of the trigger
    out = ToolUseClearing(trigger_tokens=16_000, keep=0, min_fill=0.85).curate(messages, roomy)
    used = f.tokens(out.messages)
    assert 4_000 <= used < 0.85 * roomy.budget
    small = f.ctx(budget=4_000)  # 85%: 3,400, below a quarter of the trigger
    out = ToolUseClearing(trigger_tokens=16_000, keep=0, min_fill=0.85).curate(messages, small)
    assert f.tokens(out.messages) >= math.ceil(0.85 * small.budget)
    assert out.actions


def test_role_truncation_cap_yields_to_the_floor() -> None:
    messages: Msgs = [f.system()]
    for k in range(60):
        messages += [f.user(f"question {k} " + f.long_text(40)), f.assistant(f"answer {k}")]
    ctx = f.ctx(budget=int(f.tokens(messages) * 0.9))
    capped = RoleTruncation(max_messages=20).curate(messages, ctx)
    assert len(capped.messages) <= 20
    floored = RoleTruncation(max_messages=20, min_fill=0.85).curate(messages, ctx)
    assert f.tokens(floored.messages) >= math.ceil(0.85 * ctx.budget)
    assert 20 < len(floored.messages) < len(messages)
    assert floored.messages[-1] == messages[-1]


def test_role_truncation_shortening_stops_at_the_floor() -> None:
    messages: Msgs = [f.system()]
    for k in range(10):
        messages += [f.user(f"paste {k} " + f.long_text(400)), f.assistant(f"answer {k}")]
    ctx = f.ctx(budget=int(f.tokens(messages) / 0.85 * 0.6))
    curator = RoleTruncation(roles={"user": {"max_chars": 100}}, max_messages=None, min_fill=0.85)
    out = curator.curate(messages, ctx)
    assert f.tokens(out.messages) >= math.ceil(0.85 * ctx.budget)
    cut = changed(messages, out)
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    assert cut
    assert cut == users[: len(cut)]


def test_floor_counts_what_was_applied() -> None:
    floor = fill.Floor(total=100, lowest=80)
    assert floor.allows(15)
    assert not floor.allows(10)  # 85 - 10 < 80
    assert floor.allows(5)
    assert floor.total == 80
    off = fill.Floor(0, 0)
    assert off.allows(10**9)


@pytest.mark.parametrize("value", [-0.1, 1.5, "half", True])
def test_min_fill_must_be_a_share(value: object) -> None:
    with pytest.raises(ParamError, match="min_fill"):
        ToolResultTruncation(min_fill=value)  # type: ignore[arg-type]
