"""Budget utilization: an over-budget input is curated to at least 85% of the budget.

Starving the model is a failure too: a curated prompt far below the budget has thrown
away context it had room for. Unless pins plus the newest unit alone exceed the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import CurationContext, PinSpec
from policies.budget import TokenBudget
from policies.loader import load_preset
from policies.messages import Message
from tests import factories as f
from tests.strategies import agent_sessions, conversations

Msgs = list[dict[str, Any]]
FILL = 0.85
SHIPPED = {"default": 16_000, "chat": 64_000, "coding-agent": 16_000}
"""Each preset, and the budget share up to which it promises 85%: turn_masking's floor is
never above its trigger_tokens (past that it masks for cost, keeping the prompt near it)."""
MIN_BUDGET = 1000
"""Below this, one short message is already a large share of the budget: no curator can
cut finely enough to promise a share, and no real window is that small."""


def fills_the_budget(messages: Msgs, out: Sequence[Message], ctx: CurationContext) -> bool:
    """Assert `out` is within the budget and fills at least `FILL` of it; False (nothing
    to check) when the pins plus the newest unit alone exceed the budget."""
    if f.floor_tokens(messages, ctx) > ctx.budget:
        return False
    used = f.tokens(list(out))
    assert used <= ctx.budget
    if ctx.budget >= MIN_BUDGET:
        assert used >= FILL * ctx.budget, (used, ctx.budget)
    return True


@settings(max_examples=80, deadline=None)
@given(
    st.one_of(conversations(), agent_sessions()),
    st.floats(0.05, 0.99),
    st.sampled_from([PinSpec(), PinSpec(first_user=True)]),
    st.sampled_from([1.0, 0.9, 0.6]),
)
def test_over_budget_input_fills_the_budget(
    messages: Msgs, fraction: float, pins: PinSpec, low_water: float
) -> None:
    ctx = f.ctx(budget=max(1, int(fraction * f.tokens(messages))), pins=pins)
    out = TokenBudget(low_water=low_water).curate(messages, ctx)
    if not fills_the_budget(messages, out.messages, ctx):
        return
    assert invariants.check(messages, out.messages, ctx, budget=ctx.budget) == []
    again = TokenBudget(low_water=low_water).curate(out.messages, ctx)
    assert again.messages == out.messages


@pytest.mark.parametrize("preset", list(SHIPPED))
@settings(max_examples=60, deadline=None)
@given(st.one_of(conversations(), agent_sessions()), st.floats(0.05, 0.99))
def test_every_shipped_preset_fills_the_budget(
    preset: str, messages: Msgs, fraction: float
) -> None:
    """The cost curators of the presets (truncation, clearing, retention, the message cap)
    stop at `min_fill`, so the chain as a whole never starves an over-budget prompt."""
    policy = load_preset(preset)
    ctx = f.ctx(budget=max(1, int(fraction * f.tokens(messages))), pins=policy.pins)
    result = policy.chain.run(messages, ctx, check=True)
    up_to = SHIPPED[preset]
    if up_to is not None and FILL * ctx.budget > up_to:
        if f.floor_tokens(messages, ctx) <= ctx.budget:
            assert f.tokens(result.messages) <= ctx.budget
    elif not fills_the_budget(messages, result.messages, ctx):
        return
    assert policy.chain.run(result.messages, ctx).messages == result.messages
