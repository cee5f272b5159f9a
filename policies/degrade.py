"""Graceful degradation for token_budget: shorten long contents before dropping units.

Dropping whole units is a blunt move: on an 8k window two fresh 2k-token tool results
cannot both stay, and dropping them whole left an agent with nothing it had just read.
So the budget first measures every long content as if cut to a *floor* (`floor_cap`:
an eighth of the budget), head and tail kept around a marker, the way
`tool_result_truncation` cuts. Only what still does not fit at the floor is dropped, oldest
units first. The room left is then given back newest first: the newest long content is
restored whole if it fits, else cut to the largest *rung* that fits, and everything older
stays at the floor. Old content degrades first and the newest last.

A unit is still dropped whole when its contents are each below the floor, and that can
starve a small window: on a 4k one, a block of five 390-token tool results dropped for
being 200 tokens over left the prompt at 47% of the budget. So when even the finest cut
leaves less than `FILL` of the budget in use, the last unit it would drop is kept instead
with its contents measured down to `MIN_CAP` (`boundary`), if that fits; as the oldest
content kept, they get back only the room the newer ones leave.

Prefix stability: a content at the floor is a function of the message and the budget
only, so it is cut the same way every turn. Rungs are a fixed geometric ladder above the
floor (`RUNG_RATIO`), so the one content between "restored" and "at the floor" changes
only when the room crosses a rung, and it is among the newest messages, where a cache
break is cheap. Each rung is at most `RUNG_RATIO` times the one below, which bounds the
room a rung leaves unused.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policies.base import CurationContext
from policies.messages import Message, Unit
from policies.shorten import Cut, as_content, cuttable_text, head_tail

MIN_CAP = 64
"""Fewest tokens a content is cut to: room for a head, the marker and a tail."""
FLOOR_SHARE = 8
"""A content is cut to at most 1/FLOOR_SHARE of the budget before any unit is dropped."""
RUNG_RATIO = 1.125
FILL = 0.85
"""The share of the budget an over-budget prompt is curated to use, at least, when the
units allow it (token_budget takes a finer step when a large one would leave less)."""
HEAD_RATIO = 0.6
MARK_END = " tokens removed by context-curator to fit the context window ...]"


def marker(removed: int) -> str:
    """What is left of a content cut to fit (after its head, if any)."""
    return f"[... {removed:,}{MARK_END}"


def floor_cap(limit: int) -> int:
    """Tokens every long content is measured at before any unit is dropped."""
    return max(MIN_CAP, limit // FLOOR_SHARE)


def step_shares(share: float) -> list[float]:
    """Cut steps to try, as shares of the budget: `share` (from `low_water`), then halves
    from `1 - FILL` down, then 0 (the minimal cut). Each is anchored at the start of the
    conversation, so a turn that takes one takes it wherever the next turn does."""
    shares, finer = [share], 1 - FILL
    while finer >= 0.01:
        if finer < share:
            shares.append(finer)
        finer /= 2
    return [*shares, 0.0]


def rung_at_most(tokens: int, floor: int) -> int:
    """The largest cap of the ladder floor, floor * RUNG_RATIO, ... that is <= `tokens`
    (the floor itself when none is)."""
    cap = floor
    while (up := max(cap + 1, int(cap * RUNG_RATIO))) <= tokens:
        cap = up
    return cap


@dataclass(frozen=True, slots=True)
class Long:
    """A content that may be cut: its message's tokens, and those of the message without it."""

    index: int
    tokens: int
    bare: int

    @property
    def content(self) -> int:
        return self.tokens - self.bare

    def at(self, cap: int) -> int:
        """An upper bound on the message's tokens with its content cut to `cap`."""
        return min(self.tokens, self.bare + cap)


def long_contents(
    messages: Sequence[Message],
    each: Sequence[int],
    skip: frozenset[int],
    cap: int,
    ctx: CurationContext,
    among: Iterable[int] | None = None,
) -> dict[int, Long]:
    """Messages (not in `skip`; among `among` only, when given) whose cuttable text is
    over `cap` tokens, by index."""
    found: dict[int, Long] = {}
    for i in range(len(messages)) if among is None else among:
        msg = messages[i]
        if i in skip or each[i] <= cap or cuttable_text(msg) is None:
            continue
        bare = ctx.count_bare(msg)
        if each[i] - bare > cap:
            found[i] = Long(i, each[i], bare)
    return found


def boundary(
    messages: Sequence[Message],
    each: Sequence[int],
    unit: Unit,
    at_floor: Sequence[int],
    over: int,
    ctx: CurationContext,
) -> tuple[dict[int, Long], int]:
    """The contents of `unit`, the last one a cut would drop whole, that could be cut to
    `MIN_CAP` instead, and the tokens that would save on `at_floor` (each message's size
    with long contents at the floor); nothing when that would not save `over` tokens."""
    deep = long_contents(messages, each, frozenset(), MIN_CAP, ctx, unit.indexes())
    saved = sum(at_floor[i] - long.at(MIN_CAP) for i, long in deep.items())
    return (deep, saved) if deep and saved >= over else ({}, 0)


def cut(msg: Message, long: Long, cap: int, ctx: CurationContext) -> tuple[Message, int]:
    """`msg` with its text cut to head + marker + tail of at most `cap` tokens; and the new
    message's tokens."""
    text, parts = cuttable_text(msg) or ("", None)
    # A history is resent every turn, and a content at the floor is cut the same way each
    # time: the plan is remembered with the message.
    tag = f"|token_budget|{cap}".encode()

    def plan() -> Cut:
        total = long.content if parts is None else ctx.count_text(text)
        return _shorten(text, total, cap, ctx)

    cut = Cut.of(ctx.recall(msg, tag, plan))
    new = ctx.with_content(msg, as_content(cut.apply(text, _middle), parts), cut.tokens, tag=tag)
    return new, long.bare + cut.tokens


def _middle(removed: int) -> str:
    return f"\n\n{marker(removed)}\n\n"


def shortened(text: str, total: int, cap: int, ctx: CurationContext) -> tuple[str, int]:
    """`text` (of `total` tokens) cut to a head and a tail around the marker within `cap`
    tokens (the marker alone when no head fits), and its tokens."""
    cut = _shorten(text, total, cap, ctx)
    return cut.apply(text, _middle), cut.tokens


def _shorten(text: str, total: int, cap: int, ctx: CurationContext) -> Cut:
    """The longest head/tail cut of `text` (of `total` tokens) within `cap` tokens, or
    the marker alone."""
    found = head_tail(ctx, text, total, cap, _middle, HEAD_RATIO)
    return found if found is not None else Cut(0, 0, total, ctx.count_text(_middle(total)))
