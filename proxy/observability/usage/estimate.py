"""Where the uncurated figure is an estimate: encrypted reasoning items, and their range.

An encrypted reasoning item (`{"type": "reasoning", "encrypted_content": ...}`) is priced
by its size (`policies.images.opaque_part_tokens`), which errs high: the upstream bills the
reasoning tokens it decrypts, far fewer than the base64 it travels as. Counted that way,
the "uncurated" cost of a reasoning conversation came out 42% above what the upstream
billed, and the savings looked bigger than they were. So the counterfactual of a prompt
holding such items is an `Estimate` with a range:

- `high`: the prompt as counted (every reasoning item at its size estimate);
- `low`: the prompt without its reasoning items' estimate (as if they cost nothing);
- the figure itself: the count scaled by what the upstream reported for the prompt that
  went upstream (`input_tokens / our count of it`: the request's own measurement of how
  far our count of its reasoning items is off), kept within the range. Without that
  report (no usage, or our count was not above it) the figure is `high`, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.images import opaque_part_tokens
from policies.tokens import TokenCounter

ENCRYPTED_REASONING = "encrypted_reasoning"


@dataclass(frozen=True, slots=True)
class Estimate:
    """The uncurated prompt's input tokens where they are an estimate: why, and the range."""

    reason: str
    value: int
    """The figure the cost uses, within [low, high]."""
    low: int
    high: int
    learned: bool
    """Whether `value` was learned from the upstream's input-token count."""


def reasoning_tokens(messages: Sequence[Any], counter: TokenCounter, model: str) -> int:
    """What our count gives the encrypted reasoning parts of `messages` (0: none)."""
    total = 0
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if type(content) is not list:
            continue
        for part in content:
            kind = part.get("type") if type(part) is dict else None
            if kind == "reasoning" and part.get("encrypted_content") is not None:
                total += opaque_part_tokens(part, lambda s: counter.count_text(s, model))
    return total


def estimate(counted: int, reasoning: int, sent: int | None, billed: int | None) -> Estimate:
    """The range of an uncurated prompt counted at `counted` tokens, `reasoning` of them
    encrypted reasoning; learned when the upstream `billed` fewer than our `sent` count."""
    low = max(counted - reasoning, 0)
    if sent is None or billed is None or sent <= 0 or billed >= sent:
        return Estimate(ENCRYPTED_REASONING, counted, low, counted, learned=False)
    scaled = min(max(round(counted * billed / sent), low), counted)
    return Estimate(ENCRYPTED_REASONING, scaled, low, counted, learned=True)
