"""token_budget: drops the oldest units until the messages fit the token budget.

Prefix stability. Providers cache prompt prefixes, so a request whose kept prefix is
byte-identical to the previous turn's costs much less. A cut that moved with every new
turn would break that cache every turn. So the cut is a stateless function of the list
that moves only in large steps: the cumulative token count of the droppable units is
measured from the start of the conversation, and the only cut points are the first unit
boundaries at or after each multiple of `step = (1 - low_water) * budget`. The smallest
such cut that fits is taken. Appending turns leaves it where it is until the budget
forces it on, and then it jumps by about a step, leaving room for several more turns.
With `low_water: 1.0` the step is one token: drop the minimum.

Overflow (the pins plus the newest unit alone exceed the budget) follows
`ctx.on_overflow`: `reject` raises `ContextOverflow`; `forward` drops all it may and lets
the upstream decide; `truncate` also cuts the largest non-pinned string contents to a
head plus a marker. Every overflow is reported as an action, never silent.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from policies import params
from policies.base import Action, CurationContext, CuratorOutput
from policies.errors import ContextOverflow
from policies.messages import Message, Unit, units
from policies.tally import Tally
from policies.tokens import REPLY_PRIMING

_MARK_END = " tokens removed by context-curator to fit the context window ...]"


def marker(removed: int) -> str:
    """What is left of a content cut on overflow (after its head, if any)."""
    return f"[... {removed:,}{_MARK_END}"


@dataclass(frozen=True, slots=True)
class TokenBudget:
    """Drops whole units, oldest first and in stable steps, until the list fits the budget."""

    name: ClassVar[str] = "token_budget"

    max_tokens: int | Literal["auto"] = "auto"
    low_water: float = 1.0

    def __post_init__(self) -> None:
        if self.max_tokens != "auto":
            params.integer(
                "max_tokens", self.max_tokens, minimum=1, expected='an integer or "auto"'
            )
        low_water = params.ratio("low_water", self.low_water, allow_zero=False)
        object.__setattr__(self, "low_water", low_water)

    def limit(self, ctx: CurationContext) -> int:
        """The budget in force: `max_tokens`, never more than the request's own budget."""
        return ctx.budget if self.max_tokens == "auto" else min(self.max_tokens, ctx.budget)

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        limit = self.limit(ctx)
        each = ctx.tally.each(messages)
        total = sum(each) + REPLY_PRIMING
        if not messages or total <= limit:
            return CuratorOutput(list(messages))
        pinned = ctx.pinned(messages)
        droppable = [u for u in units(messages)[:-1] if pinned.isdisjoint(u.indexes())]
        sizes = [sum(each[u.start : u.stop]) for u in droppable]
        floor = total - sum(sizes)
        if floor > limit:
            return self._overflow(messages, droppable, floor, limit, ctx)
        k = self._units_to_drop(sizes, total - limit, limit)
        dropped = [i for u in droppable[:k] for i in u.indexes()]
        removed = sum(sizes[:k])
        reason = f"dropped the {k} oldest unit(s): {total:,} tokens over the budget of {limit:,}"
        action = Action(self.name, "drop", tuple(dropped), removed, reason)
        return CuratorOutput(_without(messages, dropped), (action,))

    def _units_to_drop(self, sizes: list[int], excess: int, limit: int) -> int:
        """How many of the oldest droppable units to drop (see the module docstring)."""
        step = max(1, round((1 - self.low_water) * limit))
        cumulative = list(itertools.accumulate(sizes))
        fewest = bisect.bisect_left(cumulative, excess)  # cumulative[fewest] >= excess
        below = cumulative[fewest - 1] if fewest else 0
        # The first multiple of `step` past what dropping one unit fewer would remove.
        target = (below // step + 1) * step
        anchored = bisect.bisect_left(cumulative, target)
        return min(anchored, len(cumulative) - 1) + 1

    def _overflow(
        self,
        messages: Sequence[Message],
        droppable: list[Unit],
        floor: int,
        limit: int,
        ctx: CurationContext,
    ) -> CuratorOutput:
        if ctx.on_overflow == "reject":
            raise ContextOverflow(floor, limit)
        dropped = [i for u in droppable for i in u.indexes()]
        removed = sum(ctx.tally.one(messages[i]) for i in dropped)
        reason = (
            f"overflow: pinned messages and the newest unit need {floor:,} tokens, "
            f"over the budget of {limit:,}; "
        )
        if ctx.on_overflow == "forward":
            reason += "kept only those and forwarded for the upstream to decide"
        else:
            reason += "kept only those and cut the largest contents"
        drop = Action(self.name, "drop", tuple(dropped), removed, reason)
        gone = set(dropped)
        kept = {i: m for i, m in enumerate(messages) if i not in gone}
        if ctx.on_overflow == "forward":
            return CuratorOutput(list(kept.values()), (drop,))
        actions = [drop, *self._cut_contents(kept, ctx.pinned(messages), floor - limit, ctx)]
        return CuratorOutput(list(kept.values()), tuple(actions))

    def _cut_contents(
        self, kept: dict[int, Message], pinned: frozenset[int], over: int, ctx: CurationContext
    ) -> list[Action]:
        """Cut the largest non-pinned string contents (in `kept`, in place) until within."""
        tally = ctx.tally
        sizes = {
            i: tally.one(m) - tally.bare(m)
            for i, m in kept.items()
            if i not in pinned and _cuttable(m)
        }
        actions: list[Action] = []
        for i in sorted(sizes, key=lambda i: (-sizes[i], i)):
            if over <= 0:
                break
            msg = kept[i]
            text, tokens = _head_cut(msg["content"], sizes[i], sizes[i] - over, tally)
            cut = tally.replaced(msg, text, tokens)
            saved = tally.one(msg) - tally.one(cut)
            if saved <= 0:
                continue
            kept[i] = cut
            over -= saved
            reason = f"overflow: content of {sizes[i]:,} tokens cut to fit"
            actions.append(Action(self.name, "truncate", (i,), saved, reason))
        if over > 0:
            reason = (
                f"overflow: still {over:,} tokens over the budget after cutting every "
                "non-pinned content; forwarded as is"
            )
            actions.append(Action(self.name, "truncate", (), 0, reason))
        return actions


def _without(messages: Sequence[Message], dropped: list[int]) -> list[Message]:
    gone = set(dropped)
    return [m for i, m in enumerate(messages) if i not in gone]


def _cuttable(msg: Message) -> bool:
    """String content not already cut by this curator (so a re-run changes nothing)."""
    content = msg.get("content")
    return isinstance(content, str) and bool(content) and not content.endswith(_MARK_END)


def _head_cut(text: str, total: int, target: int, tally: Tally) -> tuple[str, int]:
    """A prefix of `text` plus a marker, at most `target` tokens if at all possible; and
    its tokens."""
    room = target - tally.text(marker(total))
    while room > 0:
        head = tally.fit(text, room, from_end=False)
        rest = f"\n\n{marker(max(0, total - tally.span(text, 0, head)))}"
        tokens = tally.joined(text, head, rest, 0)
        over = tokens - target
        if over <= 0:
            return text[:head] + rest, tokens
        room -= over
    out = marker(total)
    return out, tally.text(out)
