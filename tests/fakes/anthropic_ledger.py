"""The Anthropic fake's own record of what its prompt cache re-billed, and why.

Kept by the fake from the blocks it received (`tests.fakes.anthropic_cache`), so tests can hold
the proxy's cache-miss attribution against it. Per session (`x-session-id`), each request is
compared with the session's previous one, block by block in the fake's own token space:
`expected` is the longest prefix of the previous request that the cache held right after it
(what a breakpoint wrote, or had written before), `cached` what this request read
(`cache_read_input_tokens`), `rebilled` what it read less than `expected`, and `why`:

- `first_turn`: the session's first request;
- `model_change`: the previous request went to another model (the cache is per model);
- `diverged`: the request parted from the previous one at `element` (`tools`, `system`, or
  message i of the request's `messages`);
- `expired`: it extended the previous request, and the cache was dropped since (`expire`);
- `lookback`: it extended the previous request, and no breakpoint of it was within 20
  blocks of what was held;
- `none`: nothing was re-billed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tests.fakes.cache_ledger import Billed

Owner = tuple[str, int | None]
"""The element a block belongs to: ("tools", None), ("system", None) or ("message", i)."""


@dataclass(frozen=True, slots=True)
class Previous:
    """What a session's last request leaves for the next to be compared with."""

    model: str
    digests: Sequence[bytes]
    held: int
    """The tokens of its longest prefix the cache held right after it."""
    epoch: int
    """The cache's expiry count when it was sent."""


def owners(body: dict[str, Any]) -> Iterator[Owner]:
    """Each block's element, in `anthropic_rules.all_blocks` order."""
    for tool in body.get("tools") or ():
        if isinstance(tool, dict):
            yield ("tools", None)
    system = body.get("system")
    if isinstance(system, list):
        yield from (("system", None) for b in system if isinstance(b, dict))
    elif isinstance(system, str) and system:
        yield ("system", None)
    for i, msg in enumerate(body.get("messages") or ()):
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            yield ("message", i)
        elif isinstance(content, list):
            yield from (("message", i) for b in content if isinstance(b, dict))


def entry(
    session: str,
    model: str,
    last: Previous | None,
    digests: Sequence[bytes],
    elements: Sequence[Owner],
    cached: int,
    epoch: int,
) -> Billed:
    """This request (it read `cached`) against the session's `last`."""
    if last is None:
        return Billed(session, model, 0, cached, 0, "first_turn")
    rebilled = max(last.held - cached, 0)
    if last.model != model:
        return Billed(session, model, last.held, cached, rebilled, "model_change")
    at = next(
        (i for i, (a, b) in enumerate(zip(last.digests, digests, strict=False)) if a != b),
        min(len(last.digests), len(digests)),
    )
    if at >= len(last.digests):
        why = "none" if not rebilled else "expired" if epoch != last.epoch else "lookback"
        return Billed(session, model, last.held, cached, rebilled, why)
    return Billed(session, model, last.held, cached, rebilled, "diverged", elements[at])
