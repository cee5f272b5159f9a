"""Example parameters of every registered curator, for the contract's property tests.

The property tests (test_properties*.py) run over `registered()`: every curator in
`policies.registry.CURATORS`, with each example here. A curator registered without an
entry here fails `test_every_registered_curator_has_examples`, so none skips them.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence

from policies.base import AsyncCurator, CurationContext, Curator, CuratorOutput
from policies.budget import TokenBudget
from policies.coherence import ToolPairCoherence
from policies.dedupe import Dedupe
from policies.history_retention import HistoryRetention
from policies.messages import Message
from policies.registry import CURATORS
from policies.role_truncation import RoleTruncation
from policies.summarizer import Summarizer
from policies.summary_cache import MemoryCache
from policies.summary_io import Completion, Services, SummaryRequest
from policies.system import SystemPreservation
from policies.tool_results import ToolResultTruncation
from policies.tool_use_clearing import ToolUseClearing
from policies.turn_masking import TurnMasking
from policies.turns import TurnWindow

EXAMPLES: Mapping[str, tuple[Curator, ...]] = {
    "system_preservation": (SystemPreservation(),),
    "tool_pair_coherence": (ToolPairCoherence(),),
    "tool_result_truncation": (
        ToolResultTruncation(max_tokens=300, keep_recent=1),
        ToolResultTruncation(
            max_tokens=30, keep_recent=0, head_ratio=0.0, exclude_tools=("shell",)
        ),
    ),
    "turn_window": (TurnWindow(max_turns=2),),
    "token_budget": (TokenBudget(), TokenBudget(low_water=0.6)),
    "role_truncation": (
        RoleTruncation(
            roles={
                "user": {"max_chars": 40},
                "assistant": {"max_chars": 0},
                "tool": {"max_chars": 90},
            },
            keep_recent_turns=1,
            max_messages=8,
            low_water=0.5,
        ),
        RoleTruncation(roles={"tool": {"max_chars": 10}}, keep_recent_turns=0, max_messages=None),
    ),
    "history_retention": (
        HistoryRetention(threshold_chars=256, keep_recent_turns=1),
        HistoryRetention(threshold_chars=300, keep_recent_turns=0, user="drop", tool="drop"),
    ),
    "tool_use_clearing": (
        ToolUseClearing(trigger_tokens=0, keep=1),
        ToolUseClearing(
            trigger_tokens=2000,
            keep=0,
            clear_at_least=1500,
            exclude_tools=("shell",),
            clear_arguments=True,
        ),
    ),
    "dedupe": (Dedupe(min_tokens=1), Dedupe()),
    "turn_masking": (
        TurnMasking(keep_turns=1, trigger_tokens=0, step_tokens=1, keep_chars=20, min_chars=40),
        TurnMasking(keep_turns=2, trigger_tokens=500, step_tokens=300, keep_lines=0, keep_names=0),
    ),
    "summarizer": (
        Summarizer(upstream="u", model="m", trigger_ratio=0.5, max_summary_tokens=30),
        Summarizer(
            upstream="u", model="m", trigger_tokens=200, keep_recent_turns=0, max_summary_tokens=8
        ),
    ),
}


def registered() -> list[Curator]:
    """Each registered curator's examples, in the registry's order."""
    return [c for name in CURATORS for c in EXAMPLES.get(name, ())]


async def _summary(_messages: list[Message], _request: SummaryRequest) -> Completion:
    return Completion("The user and the assistant worked on the task; files were read.")


def with_services(ctx: CurationContext) -> CurationContext:
    """`ctx` with services an async curator can call: a model that always answers the same
    summary, and a fresh summary cache."""
    return dataclasses.replace(ctx, services=Services(_summary, {"memory": MemoryCache()}))


def curate(curator: Curator, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
    """`curator.curate`, or its `acurate` run to completion for a curator that awaits I/O."""
    if isinstance(curator, AsyncCurator):
        return asyncio.run(curator.acurate(messages, ctx))
    return curator.curate(messages, ctx)
