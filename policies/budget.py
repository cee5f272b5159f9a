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
the upstream decide; `truncate` also cuts the largest non-pinned string contents (the
newest turn's too: it alone is over) to a head and a tail around a marker. Every overflow
is reported as an action, never silent.

Degradation (`policies.degrade`): before any unit is dropped, long contents are measured
as cut to a floor of an eighth of the budget; the cut above is taken on those sizes, and
the room it leaves is given back newest first. So fresh tool results are shortened, not
dropped, the oldest content degrades first, and the curated prompt fills the budget. When
nothing kept is long enough to fill the room a large step leaves (short chat messages),
the cut takes the largest of finer steps (`degrade.step_shares`) that leaves at least
`FILL` (85%) of the budget in use, down to the minimal cut; when even that leaves less,
its last unit is kept with its contents cut (`degrade.boundary`). The newest user
message is kept (its unit is never dropped) whenever it fits at the floor.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from policies import degrade, newest, params
from policies.base import Action, CurationContext, CuratorOutput
from policies.errors import ContextOverflow
from policies.messages import Message, Unit, units
from policies.tokens import REPLY_PRIMING

_MARK_END = degrade.MARK_END
marker = degrade.marker


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
        each = ctx.count_each(messages)
        total = sum(each) + REPLY_PRIMING
        if not messages or total <= limit:
            return CuratorOutput(list(messages))
        pinned = ctx.pinned(messages)
        droppable = [u for u in units(messages)[:-1] if pinned.isdisjoint(u.indexes())]
        floor = total - sum(sum(each[u.start : u.stop]) for u in droppable)
        if floor > limit:
            return self._overflow(messages, droppable, floor, limit, ctx)
        return self._degrade(messages, each, droppable, limit, ctx)

    def _degrade(
        self,
        messages: Sequence[Message],
        each: list[int],
        droppable: list[Unit],
        limit: int,
        ctx: CurationContext,
    ) -> CuratorOutput:
        """Drop the oldest units measured with long contents at the floor, then give the
        room back newest first (see `policies.degrade`)."""
        cap = degrade.floor_cap(limit)
        whole = newest.never_cut(messages, each, ctx.pinned(messages), limit)
        longs = degrade.long_contents(messages, each, whole, cap, ctx)
        at_floor = [longs[i].at(cap) if i in longs else n for i, n in enumerate(each)]
        floor_total = sum(at_floor) + REPLY_PRIMING
        droppable = newest.spare_newest_user(messages, droppable, at_floor, floor_total, limit)
        sizes = [sum(at_floor[u.start : u.stop]) for u in droppable]
        excess = floor_total - limit
        k, saved, deep = 0, 0, dict[int, degrade.Long]()
        for share in degrade.step_shares(1 - self.low_water) if excess > 0 else ():
            k = self._units_to_drop(sizes, excess, limit, share)
            # A large step can starve the prompt (short messages, nothing to restore):
            # then a finer one, anchored the same way, keeps its share of the budget.
            if _best_fill(sizes, k, longs, droppable, floor_total, cap) >= degrade.FILL * limit:
                break
        else:  # even the finest cut starves it: its last unit is kept, cut, if that fits
            if k:
                over, unit = floor_total - sum(sizes[: k - 1]) - limit, droppable[k - 1]
                deep, saved = degrade.boundary(messages, each, unit, at_floor, over, ctx)
                k -= bool(deep)
        dropped = [i for u in droppable[:k] for i in u.indexes()]
        room = limit - floor_total + sum(sizes[:k]) + saved
        longs = {**longs, **deep}
        caps = _restore(longs, set(dropped), room, dict.fromkeys(deep, degrade.MIN_CAP), cap)
        return self._apply(messages, each, dropped, k, longs, caps, limit, ctx)

    def _apply(
        self,
        messages: Sequence[Message],
        each: list[int],
        dropped: list[int],
        k: int,
        longs: dict[int, degrade.Long],
        caps: dict[int, int],
        limit: int,
        ctx: CurationContext,
    ) -> CuratorOutput:
        """`messages` without `dropped` (`k` units) and with contents cut to `caps`."""
        actions: list[Action] = []
        if dropped:
            total, removed = sum(each) + REPLY_PRIMING, sum(each[i] for i in dropped)
            reason = (
                f"dropped the {k} oldest unit(s): {total:,} tokens over the budget of {limit:,}"
            )
            actions.append(Action(self.name, "drop", tuple(dropped), removed, reason))
        out: list[Message] = []
        gone = set(dropped)
        for i, msg in enumerate(messages):
            if i in gone:
                continue
            if i in caps:
                msg, after = degrade.cut(msg, longs[i], caps[i], ctx)
                reason = (
                    f"content of {longs[i].content:,} tokens cut to {caps[i]:,} to fit the "
                    "budget (older content is cut first and most)"
                )
                actions.append(Action(self.name, "truncate", (i,), each[i] - after, reason))
            out.append(msg)
        return CuratorOutput(out, tuple(actions))

    def _units_to_drop(self, sizes: list[int], excess: int, limit: int, share: float) -> int:
        """How many of the oldest droppable units to drop, cutting at multiples of `share`
        of the budget (see the module docstring)."""
        step = max(1, round(share * limit))
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
        removed = sum(ctx.count(messages[i]) for i in dropped)
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
        sizes = {
            i: ctx.count(m) - ctx.count_bare(m)
            for i, m in kept.items()
            if i not in pinned and _cuttable(m)
        }
        actions: list[Action] = []
        for i in sorted(sizes, key=lambda i: (-sizes[i], i)):
            if over <= 0:
                break
            msg = kept[i]
            text, tokens = _overflow_cut(msg["content"], sizes[i], sizes[i] - over, ctx)
            cut = ctx.with_content(msg, text, tokens)
            saved = ctx.count(msg) - ctx.count(cut)
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


def _best_fill(
    sizes: list[int],
    k: int,
    longs: dict[int, degrade.Long],
    droppable: list[Unit],
    floor_total: int,
    floor: int,
) -> int:
    """Tokens the prompt would use after dropping `k` units, every kept long content whole."""
    gone = {i for u in droppable[:k] for i in u.indexes()}
    grow = sum(long.tokens - long.at(floor) for i, long in longs.items() if i not in gone)
    return floor_total - sum(sizes[:k]) + grow


def _restore(
    longs: dict[int, degrade.Long],
    gone: set[int],
    room: int,
    floors: dict[int, int],
    floor: int,
) -> dict[int, int]:
    """The cap of each kept long content: the newest are whole while `room` lasts, the
    next one is cut to the largest rung that fits, and all older ones to their floor
    (`floors`, else `floor`)."""
    caps: dict[int, int] = {}
    short = False
    for i in sorted((i for i in longs if i not in gone), reverse=True):
        long = longs[i]
        floor_i = floors.get(i, floor)
        grow = long.tokens - long.at(floor_i)
        if short:
            caps[i] = floor_i
        elif grow <= room:
            room -= grow
        else:
            caps[i] = degrade.rung_at_most(room + floor_i, floor_i)
            short = True
    return caps


def _cuttable(msg: Message) -> bool:
    """String content not already cut by this curator (so a re-run changes nothing): its
    marker sits between a head and a tail, or alone between blank lines, never last."""
    content = msg.get("content")
    return isinstance(content, str) and bool(content) and _MARK_END not in content


def _overflow_cut(text: str, total: int, target: int, ctx: CurationContext) -> tuple[str, int]:
    """`text` cut to a head and a tail around the marker (the start and the end of a log or
    a file carry what matters), at most `target` tokens if at all possible; and its tokens."""
    return degrade.shortened(text, total, max(0, target), ctx)
