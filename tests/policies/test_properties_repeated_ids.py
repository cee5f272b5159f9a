"""The curator contract on conversations whose tool calls share ids.

OpenAI accepts an assistant message with two calls `d` answered by two results `d`, so
every curator must keep such a list acceptable: checked with the invariants and with the
strict fake's own rules (written independently of `policies/`).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies import invariants
from policies.base import Curator, PinSpec
from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from policies.tool_use_clearing import ToolUseClearing
from tests import factories as f
from tests.fakes.openai_rules import check_ordering
from tests.policies import examples
from tests.strategies import repeated_id_conversations

Msgs = list[dict[str, Any]]

CHAIN = Chain(
    (
        SystemPreservation(),
        ToolUseClearing(trigger_tokens=1, keep=1, clear_arguments=True),
        ToolResultTruncation(max_tokens=200, keep_recent=1),
        TokenBudget(low_water=0.8),
        ToolPairCoherence(),
    )
)
pin_specs = st.sampled_from([PinSpec(), PinSpec(first_user=True)])


@settings(max_examples=60)
@given(repeated_id_conversations())
def test_the_strategy_makes_repeated_ids_that_openai_accepts(messages: Msgs) -> None:
    assert check_ordering(messages) is None
    assert invariants.ordering_errors(messages) == []


@settings(max_examples=60)
@given(repeated_id_conversations())
def test_coherence_is_the_identity_on_repeated_ids(messages: Msgs) -> None:
    out = ToolPairCoherence().curate(messages, f.ctx())
    assert out.messages == messages
    assert out.actions == ()


@pytest.mark.parametrize("curator", examples.registered(), ids=repr)
@settings(max_examples=30)
@given(repeated_id_conversations(), st.floats(0.05, 1.2), pin_specs)
def test_each_curator_keeps_repeated_ids_acceptable(
    curator: Curator, messages: Msgs, fraction: float, pins: PinSpec
) -> None:
    ctx = f.ctx(budget=max(1, int(fraction * f.tokens(messages))), pins=pins)
    ctx = examples.with_services(ctx)
    before = copy.deepcopy(messages)
    out = examples.curate(curator, messages, ctx)
    assert messages == before
    assert invariants.check(messages, out.messages, ctx) == []
    assert check_ordering(list(out.messages)) is None


@settings(max_examples=40)
@given(repeated_id_conversations(), st.floats(0.05, 1.2), pin_specs)
def test_a_chain_keeps_repeated_ids_acceptable(
    messages: Msgs, fraction: float, pins: PinSpec
) -> None:
    ctx = f.ctx(budget=max(1, int(fraction * f.tokens(messages))), pins=pins)
    result = CHAIN.run(messages, ctx, check=True)
    assert invariants.check(messages, result.messages, ctx) == []
    assert check_ordering(list(result.messages)) is None
