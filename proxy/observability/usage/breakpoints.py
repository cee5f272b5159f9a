"""Where a prompt's breakpoints let the provider write and read, for the attribution.

With breakpoints (`cache_control`, Anthropic: `policies.breakpoint_cache`) a provider does not
hold every prefix of a prompt, only those ending at a breakpoint past its minimum, and a
later prompt reads one only within `LOOKBACK_BLOCKS` provider content blocks before one of
its own breakpoints. The attribution keeps, per turn, these few block indexes (a client sets
at most a handful of breakpoints), not the prompt.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from policies.breakpoint_cache import LOOKBACK_BLOCKS, Block


@dataclass(frozen=True, slots=True)
class Marks:
    """An explicit prompt's breakpoints, at block granularity."""

    written: tuple[int, ...]
    """The blocks that end a prefix the provider holds after the prompt: its breakpoints
    whose prefix reaches the minimum."""
    reach: tuple[tuple[int, int], ...]
    """Each breakpoint's lookback: the first and the last block its read can end at."""

    @property
    def bytes(self) -> int:
        """What it keeps alive (two tuples of small ints), as `Turn.bytes` counts."""
        return 120 + 8 * len(self.written) + 72 * len(self.reach)

    def reads(self, block: int) -> bool:
        """Whether a prefix ending at `block` is within one breakpoint's lookback."""
        return any(first <= block <= last for first, last in self.reach)


def marks_of(blocks: Sequence[Block], ends: Sequence[int], min_tokens: int) -> Marks:
    """The breakpoints of `blocks` (`ends[i]`: the tokens of blocks 0..i)."""
    at = list(itertools.accumulate(b.width for b in blocks))
    written: list[int] = []
    reach: list[tuple[int, int]] = []
    for i, block in enumerate(blocks):
        if not block.mark:
            continue
        if ends[i] >= min_tokens:
            written.append(i)
        first = i
        while first > 0 and at[i] - at[first - 1] <= LOOKBACK_BLOCKS:
            first -= 1
        reach.append((first, i))
    return Marks(tuple(written), tuple(reach))
