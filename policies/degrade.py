"""Graceful degradation for token_budget: shorten long contents before dropping units.

Dropping whole units is a blunt move: on an 8k window two fresh 2k-token tool results
cannot both stay, and dropping them whole left an agent with nothing it had just read.
So the budget first measures every long content as if cut to a *floor* (`floor_cap`:
an eighth of the budget), head and tail kept around a marker, the way
`tool_result_truncation` cuts. Only what still does not fit at the floor is dropped, oldest
units first. The room left is then given back newest first: the newest long content is
restored whole if it fits, else cut to the largest *rung* that fits, and everything older
stays at the floor. Old content degrades first and the newest last.

Prefix stability: a content at the floor is a function of the message and the budget
only, so it is cut the same way every turn. Rungs are a fixed geometric ladder above the
floor (`RUNG_RATIO`), so the one content between "restored" and "at the floor" changes
only when the room crosses a rung, and it is among the newest messages, where a cache
break is cheap. Each rung is at most `RUNG_RATIO` times the one below, which bounds the
room a rung leaves unused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.messages import Message
from policies.tally import Tally

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
    messages: Sequence[Message], each: Sequence[int], skip: frozenset[int], cap: int, tally: Tally
) -> dict[int, Long]:
    """Messages (not in `skip`) whose cuttable text is over `cap` tokens, by index."""
    found: dict[int, Long] = {}
    for i, msg in enumerate(messages):
        if i in skip or each[i] <= cap or _text(msg) is None:
            continue
        bare = tally.bare(msg)
        if each[i] - bare > cap:
            found[i] = Long(i, each[i], bare)
    return found


def cut(msg: Message, long: Long, cap: int, tally: Tally) -> tuple[Message, int]:
    """`msg` with its text cut to head + marker + tail of at most `cap` tokens; and the new
    message's tokens. Counted here and noted in the tally."""
    text, parts = _text(msg) or ("", None)
    # A history is resent every turn, and a content at the floor is cut the same way each
    # time: the plan is remembered with the message.
    tag = f"|token_budget|{cap}".encode()
    head, tail, removed, tokens = tally.remember(
        msg,
        tag,
        lambda: _shorten(text, long.content if parts is None else tally.text(text), cap, tally),
    )
    short = text[:head] + _middle(removed) + text[len(text) - tail :]
    new = {**msg, "content": short if parts is None else [{**parts[0], "text": short}]}
    after = long.bare + tokens
    tally.note(new, after, long.bare, source=(msg, tag))
    return new, after


def _middle(removed: int) -> str:
    return f"\n\n{marker(removed)}\n\n"


def _shorten(text: str, total: int, cap: int, tally: Tally) -> tuple[int, int, int, int]:
    """(head chars, tail chars, tokens the marker names, tokens) of the longest head/tail
    cut of `text` (of `total` tokens) within `cap` tokens."""
    n = len(text)
    room = cap - tally.text(_middle(total))
    while room > 1:
        head_n = int(room * HEAD_RATIO)
        head = tally.fit(text, head_n, from_end=False)
        tail = tally.fit(text, room - head_n, from_end=True)
        removed = max(0, total - tally.span(text, 0, head) - tally.span(text, n - tail, n))
        # Tokens can merge across the joins, so the sum of the parts is not the count.
        tokens = tally.joined(text, head, _middle(removed), tail)
        if tokens <= cap:
            return head, tail, removed, tokens
        room -= tokens - cap
    return 0, 0, total, tally.text(_middle(total))


def _text(msg: Message) -> tuple[str, list[Mapping[str, Any]] | None] | None:
    """(text, None) for string content, (joined text, parts) for text-only parts, else None."""
    content = msg.get("content")
    if isinstance(content, str):
        return (content, None) if content else None
    if not isinstance(content, list) or not content:
        return None
    for part in content:
        if not (
            isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            return None
    return "".join(p["text"] for p in content), list(content)
