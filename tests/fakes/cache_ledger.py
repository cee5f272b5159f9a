"""The fake upstream's own record of what its prompt cache re-billed, and why.

Kept by the fake itself, from the bytes it received, so tests can hold the proxy's cache-miss
attribution against it. Per session (`x-session-id`), each request is compared with the
session's previous one in the fake's own token space (its rendering, not the proxy's block
model): `expected` is what it would credit had the prompt only appended to the last one,
`rebilled` what it credited less than that, and `why`:

- `first_turn`: the session's first request;
- `model_change`: the previous request went to another model (the cache is per model);
- `diverged`: the prompt parted from the previous one at `element` (`tools`, or message i);
- `expired`: it extended the previous prompt, and the cache had dropped it (`expire`);
- `none`: nothing was re-billed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Billed:
    """One request as the fake billed it."""

    session: str
    model: str
    expected: int
    cached: int
    rebilled: int
    why: str
    element: tuple[str, int | None] | None = None
    """Where the prompt parted from the session's previous one: ("tools", None) or
    ("message", i)."""


@dataclass(frozen=True, slots=True)
class Rendered:
    """A prompt in the fake's token space: its tokens, and where each element ends."""

    tokens: list[int]
    ends: list[int]
    tools: bool


def render_elements(elements: Sequence[list[int]], tools: bool) -> Rendered:
    tokens: list[int] = []
    ends: list[int] = []
    for element in elements:
        tokens += element
        ends.append(len(tokens))
    return Rendered(tokens, ends, tools)


def entry(
    session: str,
    model: str,
    last: tuple[str, Rendered] | None,
    now: Rendered,
    cached: int,
    cacheable: int,
) -> Billed:
    """`now` (credited `cached`) against the session's `last` (model, prompt); `cacheable`
    is what the cache credits for the whole of the last prompt."""
    if last is None:
        return Billed(session, model, 0, cached, 0, "first_turn")
    rebilled = max(cacheable - cached, 0)
    if last[0] != model:
        return Billed(session, model, cacheable, cached, rebilled, "model_change")
    before = last[1]
    shared = common(before.tokens, now.tokens)
    if shared >= len(before.tokens):
        why = "expired" if rebilled else "none"
        return Billed(session, model, cacheable, cached, rebilled, why)
    at = next((i for i, end in enumerate(now.ends) if end > shared), len(now.ends))
    element = ("tools", None) if now.tools and at == 0 else ("message", at - int(now.tools))
    return Billed(session, model, cacheable, cached, rebilled, "diverged", element)


def common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i
