"""The shipped presets never blind the agent: the newest turn and the task stay whole.

On random agent sessions and budgets, whenever the pinned messages, the task, the newest
user message and the newest turn (the last unit: the last assistant step with all its
results, or the last message) fit the budget together, each of them reaches the model
verbatim, the output is valid, within budget and idempotent.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import CurationContext
from policies.loader import load_preset
from policies.messages import role, units
from tests import factories as f
from tests.strategies import agent_sessions

Msgs = list[dict[str, Any]]
PRESETS = ("default", "coding-agent", "chat")


def protected(messages: Msgs) -> list[int]:
    """Indexes that must stay whole: system, the task, the newest user message, the last unit."""
    users = [i for i, m in enumerate(messages) if role(m) == "user"]
    keep = {i for i, m in enumerate(messages) if role(m) in ("system", "developer")}
    keep.update(users[:1] + users[-1:])
    keep.update(units(messages)[-1].indexes())
    return sorted(keep)


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=60, deadline=None)
@given(messages=agent_sessions(max_steps=14), fraction=st.floats(0.1, 1.2))
def test_the_newest_turn_and_the_task_are_never_shortened(
    preset: str, messages: Msgs, fraction: float
) -> None:
    policy = load_preset(preset)
    keep = protected(messages)
    needed = f.tokens([messages[i] for i in keep])
    budget = max(needed, int(fraction * f.tokens(messages)))
    ctx = CurationContext("gpt-4o", f.counter(), budget, pins=policy.pins)
    before = copy.deepcopy(messages)
    out = policy.chain.run(messages, ctx, check=False).messages
    assert messages == before
    invariants.check(messages, out, ctx)
    assert f.tokens(out) <= budget
    for i in keep:
        assert messages[i] in out, f"message {i} ({role(messages[i])}) was shortened or dropped"
    last = units(messages)[-1]
    assert out[-len(last.indexes()) :] == messages[last.start :]
    again = CurationContext("gpt-4o", f.counter(), budget, pins=policy.pins)
    assert policy.chain.run(out, again, check=False).messages == out
