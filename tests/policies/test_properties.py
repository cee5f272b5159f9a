"""Properties every curator and chain must have, on random conversations.

Valid input must stay valid, keep its pins verbatim and in place, keep its last unit, fit
the budget when pins plus the last unit fit, come out the same when curated twice, and
never be mutated. Broken input must come out valid whenever coherence repair is in the
chain, wherever it sits.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import CurationContext, Curator, PinSpec
from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.errors import ContextOverflow
from policies.registry import CURATORS
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from policies.turns import TurnWindow
from tests import factories as f
from tests.policies import examples
from tests.strategies import agent_sessions, broken_conversations, conversations

Msgs = list[dict[str, Any]]

FULL = (
    SystemPreservation(),
    ToolResultTruncation(max_tokens=200, keep_recent=1),
    TurnWindow(max_turns=3),
    TokenBudget(low_water=0.8),
)
CHAINS = {
    "coherence_last": Chain((*FULL, ToolPairCoherence())),
    "coherence_first": Chain((ToolPairCoherence(), *FULL)),
}

any_conversation = st.one_of(conversations(), agent_sessions())
pin_specs = st.sampled_from([PinSpec(), PinSpec(first_user=True)])
lenient = st.sampled_from(["truncate", "forward"])
budget_fractions = st.floats(0.05, 1.2)


def context(messages: Msgs, fraction: float, pins: PinSpec, on_overflow: Any) -> CurationContext:
    budget = max(1, int(fraction * f.tokens(messages)))
    return f.ctx(budget=budget, pins=pins, on_overflow=on_overflow)


def test_every_registered_curator_has_examples() -> None:
    assert sorted(examples.EXAMPLES) == sorted(CURATORS)
    for name, found in examples.EXAMPLES.items():
        assert found, f"{name}: no example parameters"
        assert all(type(c) is CURATORS[name] for c in found), name


@pytest.mark.parametrize("curator", examples.registered(), ids=repr)
@settings(max_examples=30)
@given(any_conversation, budget_fractions, pin_specs, lenient)
def test_each_curator_keeps_the_contract(
    curator: Curator, messages: Msgs, fraction: float, pins: PinSpec, on_overflow: str
) -> None:
    ctx = examples.with_services(context(messages, fraction, pins, on_overflow))
    before = copy.deepcopy(messages)
    out = examples.curate(curator, messages, ctx)
    assert messages == before
    assert invariants.check(messages, out.messages, ctx) == []
    if not out.actions:
        assert out.messages == messages
    assert all(0 <= i < len(messages) for a in out.actions for i in a.indexes)
    assert examples.curate(curator, out.messages, ctx).messages == out.messages


@settings(max_examples=80)
@given(conversations(), budget_fractions, pin_specs, st.sampled_from([1.0, 0.8, 0.5]), lenient)
def test_budget_fits_whenever_pins_and_the_last_unit_fit(
    messages: Msgs, fraction: float, pins: PinSpec, low_water: float, on_overflow: str
) -> None:
    ctx = context(messages, fraction, pins, on_overflow)
    out = TokenBudget(low_water=low_water).curate(messages, ctx)
    used = f.tokens(out.messages)
    if f.floor_tokens(messages, ctx) <= ctx.budget:
        assert used <= ctx.budget
    else:
        assert any(a.reason.startswith("overflow") for a in out.actions)
    if used > ctx.budget and on_overflow == "forward":
        assert f.tokens(out.messages) == f.floor_tokens(messages, ctx)


@settings(max_examples=60)
@given(conversations(), budget_fractions, pin_specs)
def test_budget_rejects_exactly_when_it_cannot_fit(
    messages: Msgs, fraction: float, pins: PinSpec
) -> None:
    ctx = context(messages, fraction, pins, "reject")
    if f.floor_tokens(messages, ctx) > ctx.budget:
        with pytest.raises(ContextOverflow):
            TokenBudget().curate(messages, ctx)
    else:
        assert f.tokens(TokenBudget().curate(messages, ctx).messages) <= ctx.budget


@settings(max_examples=150)
@given(broken_conversations, pin_specs)
def test_coherence_makes_any_ordering_valid(messages: Msgs, pins: PinSpec) -> None:
    ctx = f.ctx(pins=pins)
    before = copy.deepcopy(messages)
    out = ToolPairCoherence().curate(messages, ctx)
    assert messages == before
    assert invariants.ordering_errors(out.messages) == []
    assert invariants.check(messages, out.messages, ctx) == []
    again = ToolPairCoherence().curate(out.messages, ctx)
    assert again.messages == out.messages
    assert again.actions == ()


@settings(max_examples=60)
@given(conversations())
def test_coherence_is_the_identity_on_valid_input(messages: Msgs) -> None:
    out = ToolPairCoherence().curate(messages, f.ctx())
    assert out.messages == messages
    assert out.actions == ()


@pytest.mark.parametrize("order", sorted(CHAINS))
@settings(max_examples=50)
@given(conversations(), budget_fractions, pin_specs, lenient)
def test_chains_keep_the_contract_on_valid_input(
    order: str, messages: Msgs, fraction: float, pins: PinSpec, on_overflow: str
) -> None:
    chain = CHAINS[order]
    ctx = context(messages, fraction, pins, on_overflow)
    before = copy.deepcopy(messages)
    result = chain.run(messages, ctx, check=True)
    assert messages == before
    feasible = f.floor_tokens(messages, ctx) <= ctx.budget
    budget = ctx.budget if feasible else None
    assert invariants.check(messages, result.messages, ctx, budget=budget) == []
    assert result.tokens_after == f.tokens(result.messages)
    assert chain.run(result.messages, ctx).messages == result.messages


@pytest.mark.parametrize("order", sorted(CHAINS))
@settings(max_examples=50)
@given(broken_conversations, budget_fractions, pin_specs, lenient)
def test_chains_with_coherence_anywhere_end_valid_on_broken_input(
    order: str, messages: Msgs, fraction: float, pins: PinSpec, on_overflow: str
) -> None:
    chain = CHAINS[order]
    ctx = context(messages, fraction, pins, on_overflow)
    result = chain.run(messages, ctx, check=True)
    assert invariants.ordering_errors(result.messages) == []
    if order == "coherence_first":
        # Repair last may drop what earlier steps counted on (a "recent" orphan result),
        # so only a chain that repairs first is idempotent on broken input.
        assert chain.run(result.messages, ctx).messages == result.messages
