"""The terms a turn's cache attribution is measured in: the client's cache partition, how
the upstream's token count compares with ours, and what a re-billed token cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.prefix_cache import Prompt
from policies.pricing import PER_TOKENS, Price, Usage

MIN_SCALE, MAX_SCALE = 0.5, 2.0


def cache_partition(body: Mapping[str, Any] | None) -> str:
    """The client's `prompt_cache_key` (OpenAI): prompts under distinct keys share no
    cache. "" when unset."""
    value = body.get("prompt_cache_key") if body is not None else None
    return value if isinstance(value, str) else ""


def count_scale(usage: Usage | None, upstream: Prompt) -> float:
    """The upstream's count of the prompt it received per token of ours, within
    [`MIN_SCALE`, `MAX_SCALE`] (1.0: unknown, or no breakpoints). Where breakpoints decide,
    reads are billed to the token, and our count of such a prompt (Anthropic's) is an
    estimate: held against the reads, it is scaled by the turn's own measure of it."""
    ours = upstream.tokens - upstream.blocks[-1].tokens  # the reply priming left out
    if usage is None or usage.input <= 0 or ours <= 0 or not upstream.explicit:
        return 1.0
    return min(max(usage.input / ours, MIN_SCALE), MAX_SCALE)


def rebill_price(price: Price | None, usage: Usage | None, explicit: bool) -> float | None:
    """What one re-billed token cost over a read, in dollars (None: unpriced). Where
    breakpoints decide and the turn wrote, the tokens it did not read were written again at
    its breakpoint (at the write price of the TTL it wrote more of); else billed as input."""
    if price is None:
        return None
    paid = price.input
    if explicit and usage is not None and (usage.written or usage.written_1h):
        paid = price.write_1h if usage.written_1h > usage.written else price.write
    return (paid - price.cached_input) / PER_TOKENS
