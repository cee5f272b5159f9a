"""policy: how a request's message budget is derived, and the context a chain runs in."""

from __future__ import annotations

import math
from typing import Any

import pytest

from policies.chain import Chain
from policies.models import ModelInfo, ModelTable
from policies.policy import DEFAULT_OUTPUT_RESERVE, SAFETY_MARGIN, Policy
from policies.tokens import TokenCounter
from policies.tool_results import ToolResultTruncation
from tests import factories as f

TOOL = {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}


@pytest.fixture(scope="module")
def counter() -> TokenCounter:
    table = ModelTable.with_overrides(
        [("small", ModelInfo(16_000)), ("capped", ModelInfo(400_000, max_input_tokens=272_000))]
    )
    return TokenCounter(table)


def test_the_budget_is_the_window_less_reserve_tools_and_margin(counter: TokenCounter) -> None:
    body: dict[str, Any] = {"model": "small", "max_completion_tokens": 1_000, "tools": [TOOL]}
    budget = Policy("p").budget(body, counter)
    tools = counter.count_tools([TOOL], "small")
    assert tools > 0
    margin = math.ceil(16_000 * SAFETY_MARGIN)
    assert (budget.context_window, budget.reserve_output, budget.tools) == (16_000, 1_000, tools)
    assert budget.messages == 16_000 - 1_000 - tools - margin
    assert budget.margin == margin


@pytest.mark.parametrize(
    ("body", "reserve"),
    [
        ({"max_tokens": 500}, 500),
        ({"max_completion_tokens": 700, "max_tokens": 500}, 700),
        ({"max_tokens": True}, DEFAULT_OUTPUT_RESERVE),
        ({"max_tokens": 0}, DEFAULT_OUTPUT_RESERVE),
        ({}, DEFAULT_OUTPUT_RESERVE),
    ],
)
def test_the_reserve_is_what_the_request_asks_for(
    counter: TokenCounter, body: dict[str, Any], reserve: int
) -> None:
    assert Policy("p").budget({"model": "small", **body}, counter).reserve_output == reserve


def test_settings_override_the_model_table(counter: TokenCounter) -> None:
    policy = Policy("p", context_window=8_000, reserve_output_tokens=100)
    budget = policy.budget({"model": "small", "max_tokens": 5_000}, counter)
    assert (budget.context_window, budget.reserve_output) == (8_000, 100)


def test_a_models_input_cap_bounds_the_budget_unless_a_window_is_set(
    counter: TokenCounter,
) -> None:
    capped = Policy("p").budget({"model": "capped"}, counter)
    assert capped.messages == 272_000 - capped.margin
    set_window = Policy("p", context_window=400_000).budget({"model": "capped"}, counter)
    assert set_window.messages == 400_000 - DEFAULT_OUTPUT_RESERVE - set_window.margin


def test_legacy_functions_count_as_tools(counter: TokenCounter) -> None:
    body = {"model": "small", "functions": [TOOL["function"]]}
    assert Policy("p").budget(body, counter).tools == counter.count_tools([TOOL], "small")


def test_the_context_carries_the_policys_settings_and_its_chains_needs() -> None:
    chain = Chain((ToolResultTruncation(max_tokens=500),))
    policy = Policy("p", chain, context_window=10_000, on_overflow="reject")
    context = policy.context({"model": "gpt-4o"}, f.counter())
    assert (context.model, context.on_overflow, context.pins) == ("gpt-4o", "reject", policy.pins)
    assert context.budget == policy.budget({"model": "gpt-4o"}, f.counter()).messages
    assert context.profile_chars == 500
