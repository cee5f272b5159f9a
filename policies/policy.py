"""A named policy: window and reserve settings, pins, overflow handling and its chain.

`curate` runs a chain of plain curators; `acurate` runs any chain, awaiting the curators
that call out (the summarizer) through the `services` it is handed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from policies.base import CurationContext, PinSpec
from policies.calibration import NEUTRAL, BudgetHints
from policies.chain import Chain, CurationResult
from policies.messages import Message
from policies.summary_io import Services
from policies.tokens import TokenCounter

DEFAULT_OUTPUT_RESERVE = 4096
SAFETY_MARGIN = 0.01
"""Share of the window kept free: the cookbook formula is exact for text, but servers add
a few tokens per tool call or content part that it does not see, and a curated request
that is rejected for a handful of tokens is the one failure this proxy must not cause."""
OnOverflow = Literal["truncate", "reject", "forward"]
OnUpstreamOverflow = Literal["retry", "pass"]


@dataclass(frozen=True, slots=True)
class Budget:
    """How the message budget for one request was derived (shown by `curator simulate`)."""

    context_window: int
    reserve_output: int
    tools: int
    messages: int
    """Tokens the messages may use, reply priming included."""
    margin: int = 0
    """Kept free for what the counting formula cannot see (`SAFETY_MARGIN`)."""
    scale: float = 1.0
    """Calibration: the upstream counts `scale` times what we count (`BudgetHints`)."""


@dataclass(frozen=True, slots=True)
class Policy:
    name: str
    chain: Chain = field(default_factory=Chain)
    context_window: int | None = None
    """None = auto: the `models:` section, then the built-in table, then 128000."""
    reserve_output_tokens: int | None = None
    """None = auto: the request's max_completion_tokens / max_tokens, else 4096."""
    on_overflow: OnOverflow = "truncate"
    pins: PinSpec = field(default_factory=PinSpec)
    on_upstream_overflow: OnUpstreamOverflow = "retry"
    """An upstream `context_length_exceeded` on a curated request: `retry` curates again
    tighter and sends once more before the client sees anything; `pass` relays the error."""

    def budget(
        self, body: Mapping[str, Any], counter: TokenCounter, hints: BudgetHints = NEUTRAL
    ) -> Budget:
        model = str(body.get("model") or "")
        info = counter.models.lookup(model, hints.window)
        window = self.context_window or info.context_window
        reserve = self.reserve_output_tokens
        if reserve is None:
            reserve = _requested_output(body)
        limit = window - reserve
        if info.max_input_tokens is not None and self.context_window is None:
            limit = min(limit, info.max_input_tokens)
        tools = tool_list(body)
        tools_tokens = counter.count_tools(tools, model) if tools else 0
        margin = math.ceil(window * SAFETY_MARGIN)
        # Our counts times `scale` is what the upstream sees: prompt and tools share the room.
        messages = max(0, math.floor((limit - margin) / hints.scale) - tools_tokens)
        return Budget(window, reserve, tools_tokens, messages, margin, hints.scale)

    @property
    def is_async(self) -> bool:
        """True when the chain awaits I/O: run it with `acurate`, not `curate`."""
        return self.chain.is_async

    def context(
        self,
        body: Mapping[str, Any],
        counter: TokenCounter,
        services: Services | None = None,
        hints: BudgetHints = NEUTRAL,
    ) -> CurationContext:
        budget = self.budget(body, counter, hints)
        return CurationContext(
            model=str(body.get("model") or ""),
            counter=counter,
            budget=budget.messages,
            tools_tokens=budget.tools,
            pins=self.pins,
            on_overflow=self.on_overflow,
            services=services,
            profile_chars=self.chain.profile_chars,
        )

    def curate(
        self,
        messages: Sequence[Message],
        body: Mapping[str, Any],
        counter: TokenCounter,
        *,
        check: bool = False,
        hints: BudgetHints = NEUTRAL,
    ) -> CurationResult:
        """Run the chain on `messages` for the request `body` (model, tools, max_tokens);
        `hints` is what the proxy learned about the upstream (window, calibration).

        Raises `AsyncOnlyError` when the chain holds an async curator (see `acurate`).
        """
        return self.chain.run(messages, self.context(body, counter, None, hints), check=check)

    async def acurate(
        self,
        messages: Sequence[Message],
        body: Mapping[str, Any],
        counter: TokenCounter,
        *,
        services: Services | None = None,
        check: bool = False,
        hints: BudgetHints = NEUTRAL,
    ) -> CurationResult:
        """Like `curate`, for any chain; async curators reach out only through `services`."""
        ctx = self.context(body, counter, services, hints)
        return await self.chain.arun(messages, ctx, check=check)


def _requested_output(body: Mapping[str, Any]) -> int:
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_OUTPUT_RESERVE


def tool_list(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The request's tool definitions, to read: the body's own list when every entry is an
    object (so a list requests share is known by identity, `digests.ByIdentity`)."""
    tools = body.get("tools")
    if isinstance(tools, list):
        if all(isinstance(t, Mapping) for t in tools):
            return tools
        return [t for t in tools if isinstance(t, Mapping)]
    functions = body.get("functions")  # legacy: a bare list of function definitions
    if isinstance(functions, list):
        return [{"type": "function", "function": f} for f in functions if isinstance(f, Mapping)]
    return []
