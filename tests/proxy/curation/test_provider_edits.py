"""What a Messages request asked the provider to clear is left to it."""

from __future__ import annotations

from typing import Any

import pytest

from policies.budget import TokenBudget
from policies.chain import Chain
from policies.history_retention import HistoryRetention
from policies.policy import Policy
from policies.tool_results import ToolResultTruncation
from policies.tool_use_clearing import ToolUseClearing
from policies.turn_masking import TurnMasking
from proxy.curation.provider_edits import leaving_tool_results, left_to_provider, requested_edits
from proxy.serving.routing import PolicyChoice


def body(*kinds: Any) -> dict[str, Any]:
    return {"context_management": {"edits": [{"type": k} for k in kinds]}}


@pytest.mark.parametrize(
    ("request_body", "expected"),
    [
        (body("clear_tool_uses_20250919"), ("clear_tool_uses",)),
        (
            body("clear_thinking_20251015", "clear_tool_uses_20250919"),
            ("clear_thinking", "clear_tool_uses"),
        ),
        (body("clear_tool_uses_20250919", "clear_tool_uses_20250919"), ("clear_tool_uses",)),
        (body("compact_20260112", 7), ()),
        ({"context_management": {"edits": "clear_tool_uses"}}, ()),
        ({"context_management": None}, ()),
        ({}, ()),
        (None, ()),
    ],
)
def test_requested_edits_are_read_undated_in_order(
    request_body: Any, expected: tuple[str, ...]
) -> None:
    assert requested_edits(request_body) == expected


def policy() -> Policy:
    chain = Chain(
        (
            HistoryRetention(tool="summary"),
            ToolResultTruncation(),
            ToolUseClearing(),
            TurnMasking(),
            TokenBudget(),
        )
    )
    return Policy("p", chain)


def test_clearing_tool_uses_leaves_out_the_tool_result_curators() -> None:
    kept = leaving_tool_results(policy()).chain.curators
    assert [c.name for c in kept] == ["history_retention", "token_budget"]
    assert isinstance(kept[0], HistoryRetention)
    assert kept[0].tool == "full"


def test_a_policy_with_nothing_to_leave_out_is_the_same_policy() -> None:
    plain = Policy("p", Chain((TokenBudget(),)))
    assert leaving_tool_results(plain) is plain


def test_only_anthropic_requests_with_known_edits_change_the_choice() -> None:
    choice = PolicyChoice("p", policy())
    assert left_to_provider(choice, "openai", body("clear_tool_uses_20250919")) is choice
    assert left_to_provider(choice, "anthropic", {}) is choice
    thinking = left_to_provider(choice, "anthropic", body("clear_thinking_20251015"))
    assert thinking.left == ("clear_thinking",)
    assert thinking.policy is choice.policy
    tools = left_to_provider(choice, "anthropic", body("clear_tool_uses_20250919"))
    assert tools.left == ("clear_tool_uses",)
    assert "tool_result_truncation" not in tools.policy.chain.names
