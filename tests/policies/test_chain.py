from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import pytest

from policies.base import Action, CurationContext, CuratorOutput, PinSpec
from policies.budget import TokenBudget
from policies.chain import Chain
from policies.coherence import ToolPairCoherence
from policies.dedupe import Dedupe
from policies.history_retention import HistoryRetention
from policies.messages import Message
from policies.policy import Policy
from policies.registry import CURATORS
from policies.role_truncation import RoleTruncation
from policies.splits import PROFILE_MIN_CHARS
from policies.summarizer import Summarizer
from policies.system import SystemPreservation
from policies.tokens import REPLY_PRIMING
from policies.tool_results import ToolResultTruncation
from policies.tool_use_clearing import ToolUseClearing
from policies.turn_masking import TurnMasking
from policies.turns import TurnWindow
from tests.factories import (
    assistant,
    assistant_calls,
    ctx,
    long_text,
    system,
    tokens,
    tool_result,
    user,
)


@dataclass(frozen=True, slots=True)
class DropsFirst:
    """A deliberately broken curator: drops message 0 whatever it is."""

    name: ClassVar[str] = "drops_first"

    def curate(
        self,
        messages: Sequence[Message],
        ctx: CurationContext,  # noqa: ARG002 - the Curator protocol's signature
    ) -> CuratorOutput:
        action = Action(self.name, "drop", (0,), 0, "test")
        return CuratorOutput(list(messages[1:]), (action,))


DEFAULT_CHAIN = Chain(
    (
        SystemPreservation(),
        ToolResultTruncation(max_tokens=200, keep_recent=1),
        TurnWindow(max_turns=3),
        TokenBudget(),
        ToolPairCoherence(),
    )
)


def agent_history() -> list[dict[str, object]]:
    messages: list[dict[str, object]] = [system()]
    for k in range(5):
        messages += [
            user(f"step {k}"),
            assistant_calls(f"c{k}"),
            tool_result(f"c{k}", long_text(300)),
            assistant(f"did {k}"),
        ]
    return messages


def test_names_follow_the_chain_order() -> None:
    assert DEFAULT_CHAIN.names == (
        "system_preservation",
        "tool_result_truncation",
        "turn_window",
        "token_budget",
        "tool_pair_coherence",
    )


def test_run_collects_every_curators_actions_in_order() -> None:
    messages = agent_history()
    result = DEFAULT_CHAIN.run(messages, ctx(), check=True)
    assert result.changed
    kinds = [(a.curator, a.kind) for a in result.actions]
    assert kinds == [("tool_result_truncation", "truncate")] * 4 + [("turn_window", "drop")]
    assert result.tokens_before == tokens(messages)
    assert result.tokens_after == tokens(result.messages) < result.tokens_before
    assert result.messages[0] == system()
    assert result.messages[-1] == messages[-1]


def test_a_run_reports_each_input_messages_digest() -> None:
    """The keys the counter caches the input by, in order, the equal messages alike:
    what the audit log caches its redacted copies by."""
    messages = [*agent_history(), user("again")]
    context = ctx()
    result = DEFAULT_CHAIN.run(messages, context)
    assert result.keys == tuple(context.counter.measure(messages, context.model)[0])
    assert len(set(result.keys)) == len({repr(m) for m in messages})
    assert result.keys[-1] != DEFAULT_CHAIN.run([user("other")], ctx()).keys[0]


def test_a_run_reports_each_input_messages_tokens() -> None:
    """What the spend's counterfactual prices the uncurated prompt with, uncounted again."""
    messages = [*agent_history(), user("again")]
    context = ctx()
    result = DEFAULT_CHAIN.run(messages, context)
    assert result.messages != messages  # the history was curated: counts are the input's
    assert result.counts == tuple(context.counter.count_each(messages, context.model))
    assert sum(result.counts) + REPLY_PRIMING == result.tokens_before


def test_unchanged_run_reports_no_actions_and_equal_counts() -> None:
    messages = [system(), user(), assistant()]
    result = DEFAULT_CHAIN.run(messages, ctx(), check=True)
    assert not result.changed
    assert result.messages == messages
    assert result.tokens_before == result.tokens_after == tokens(messages)


def test_budget_step_sees_earlier_steps_output() -> None:
    messages = agent_history()
    truncated = Chain(DEFAULT_CHAIN.curators[:3]).run(messages, ctx())
    budget = tokens(truncated.messages) - 10
    result = DEFAULT_CHAIN.run(messages, ctx(budget=budget), check=True)
    assert result.tokens_after <= budget
    assert result.actions[-1].curator == "token_budget"


def test_check_catches_a_curator_that_breaks_the_contract() -> None:
    chain = Chain((DropsFirst(),))
    with pytest.raises(AssertionError, match="drops_first broke the curator contract"):
        chain.run([system(), user()], ctx(), check=True)
    assert chain.run([system(), user()], ctx()).messages == [user()]


def test_registry_maps_yaml_names_to_curator_classes() -> None:
    assert dict(CURATORS) == {
        "system_preservation": SystemPreservation,
        "tool_pair_coherence": ToolPairCoherence,
        "tool_result_truncation": ToolResultTruncation,
        "turn_window": TurnWindow,
        "token_budget": TokenBudget,
        "role_truncation": RoleTruncation,
        "history_retention": HistoryRetention,
        "tool_use_clearing": ToolUseClearing,
        "dedupe": Dedupe,
        "turn_masking": TurnMasking,
        "summarizer": Summarizer,
    }
    for name, cls in CURATORS.items():
        assert cls.name == name
        if cls is Summarizer:  # needs an upstream and a model, and only runs async
            continue
        assert cls().curate([user()], ctx()).messages == [user()]
    with pytest.raises(TypeError):
        CURATORS["x"] = DropsFirst  # type: ignore[index]


def test_pins_declared_by_system_preservation_protect_the_first_user() -> None:
    pins = SystemPreservation(pin_first_user=True).pin_spec()
    assert pins == PinSpec(frozenset({"system", "developer"}), first_user=True)
    messages = agent_history()
    result = Chain((TurnWindow(max_turns=1),)).run(messages, ctx(pins=pins), check=True)
    assert result.messages[:2] == [system(), user("step 0")]
    assert result.messages[2:] == messages[-4:]


def test_a_run_leaves_the_context_as_it_was() -> None:
    """A chain profiles the texts its own curators may cut, in a context of its own when
    the one it is handed was built for another chain: the caller's is never changed."""
    messages = agent_history()
    context = ctx()
    cutting = Chain((ToolResultTruncation(max_tokens=100, keep_recent=0),))
    assert cutting.profile_chars == 100
    assert Chain(()).profile_chars is None
    first = cutting.run(messages, context, check=True)
    assert context.profile_chars == PROFILE_MIN_CHARS
    assert Chain(()).run(messages, context).messages == messages
    assert context.profile_chars == PROFILE_MIN_CHARS
    assert cutting.run(messages, context).messages == first.messages


def test_a_policy_builds_the_context_its_chain_runs_in() -> None:
    policy = Policy("cuts", Chain((ToolResultTruncation(), TokenBudget())))
    body = {"model": "gpt-4o", "messages": []}
    context = policy.context(body, ctx().counter)
    assert context.profile_chars == policy.chain.profile_chars is not None
