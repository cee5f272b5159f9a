"""role_truncation: per-role length limits on older messages, and a cap on their number.

Messages older than the newest `keep_recent_turns` turns are shortened to their role's
`max_chars`: a head of that many characters, then a marker saying the message was
shortened and how long it was. Pinned messages are never shortened; system and developer
roles cannot be listed, as they are instructions (pin them with system_preservation).
An assistant message that calls tools has its text shortened, never its calls. Contents
made of text parts only are shortened as their joined text; parts with images or audio
are left alone, as are summaries a summarizer inserted. With `keep_recent_turns: 0` every
message but the last unit is older.

`max_messages` (default 200; null for none) caps the list's length: the oldest
non-pinned whole units go, never the last unit, so tool-call pairs stay valid, and never
the newest user message: in an agent's run it is often the only one, the task, with
hundreds of tool calls after it, and a cap that dropped it would leave the model working
without knowing on what. When even the pins, that message and the last unit exceed the
cap, everything else goes and the action says so.
No role is limited unless listed, so `role_truncation: {}` is just the cap.

Prefix caching. A message is shortened the turn it stops being recent, and from then on
to the same bytes every turn: the cut depends only on its text and its role's limit. So
the cache breaks at most at that message, once per user turn. The cap moves in large
steps like token_budget's cut: cut points are the first unit boundaries at or past each
multiple of `(1 - low_water) * max_messages` droppable messages counted from the start
of the conversation, so appending messages leaves the cut in place until it must move,
and then it jumps by about that many messages. `low_water: 1.0` drops the minimum.

With `min_fill` (`policies.fill`), drops (in order, stopping at the first) and then
shortenings (each, oldest first) are not made when they would take the prompt below that
share of the budget: the cap yields to the budget.
"""

from __future__ import annotations

import bisect
import itertools
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from policies import fill, params
from policies.base import Action, CurationContext, CuratorOutput
from policies.errors import ParamError
from policies.marks import carried, joinable
from policies.messages import SUMMARY_PREFIX, Message, Unit, role, turn_starts, units

LIMITABLE_ROLES = frozenset({"user", "assistant", "tool", "function"})
LIMIT_KEYS = ("max_chars",)
_MARKED = re.compile(r"\n\[\.\.\. shortened by context-curator; originally [\d,]+ chars\]\Z")


def marker(original_chars: int) -> str:
    """What follows the kept head of a shortened message."""
    return f"\n[... shortened by context-curator; originally {original_chars:,} chars]"


def _limits(value: object) -> Mapping[str, Mapping[str, int]]:
    """`{role: {max_chars: n}}`, checked, as a read-only mapping."""
    if not isinstance(value, Mapping):
        raise ParamError("roles", f"must be a mapping of role -> limits, got {value!r}")
    out: dict[str, Mapping[str, int]] = {}
    for name, limits in value.items():
        if name not in LIMITABLE_ROLES:
            hint = (
                "; system and developer messages are instructions: pin them instead"
                if name in ("system", "developer")
                else ""
            )
            choices = ", ".join(sorted(LIMITABLE_ROLES))
            raise ParamError("roles", f"unknown role {name!r}{hint} (roles: {choices})")
        if not isinstance(limits, Mapping) or not limits:
            raise ParamError(
                f"roles.{name}", f"must be a mapping like {{max_chars: 4000}}, got {limits!r}"
            )
        for key in limits:
            if key not in LIMIT_KEYS:
                raise ParamError(
                    f"roles.{name}.{key}", f"unknown limit (limits: {', '.join(LIMIT_KEYS)})"
                )
        chars = params.integer(f"roles.{name}.max_chars", limits["max_chars"], minimum=0)
        out[name] = types.MappingProxyType({"max_chars": chars})
    return types.MappingProxyType(out)


@dataclass(frozen=True, slots=True)
class RoleTruncation:
    """Shortens older messages to per-role lengths, and caps how many messages are kept."""

    name: ClassVar[str] = "role_truncation"

    # A mapping cannot be hashed: `limits` is its hashable twin, so policies stay hashable.
    roles: Mapping[str, Mapping[str, int]] = field(default_factory=dict, hash=False)
    keep_recent_turns: int = 2
    max_messages: int | None = 200
    low_water: float = 1.0
    min_fill: float = 0.0
    limits: tuple[tuple[str, int], ...] = field(init=False, default=(), repr=False)

    def __post_init__(self) -> None:
        roles = _limits(self.roles)
        object.__setattr__(self, "roles", roles)
        limits = tuple(sorted((name, v["max_chars"]) for name, v in roles.items()))
        object.__setattr__(self, "limits", limits)
        params.integer("keep_recent_turns", self.keep_recent_turns, minimum=0)
        if self.max_messages is not None:
            params.integer("max_messages", self.max_messages, minimum=1)
        elif not self.roles:
            raise ParamError("roles", "set a limit for at least one role, or max_messages")
        object.__setattr__(
            self, "low_water", params.ratio("low_water", self.low_water, allow_zero=False)
        )
        object.__setattr__(self, "min_fill", fill.check(self.min_fill))

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        if not messages:
            return CuratorOutput([])
        pinned = ctx.pinned(messages)
        actions: list[Action] = []
        floor = fill.floor(messages, ctx, self.min_fill)
        dropped = self._drop_over_cap(messages, pinned, ctx, actions, floor)
        out: list[Message] = []
        old = self._old_before(messages)
        for i, msg in enumerate(messages):
            if i in dropped:
                continue
            cut = self._shorten(msg) if i < old and i not in pinned else None
            if cut is not None and floor.lowest and fill.cut_to_fit(msg):
                cut = None  # token_budget already gave it its size
            if cut is not None and not floor.allows(ctx.count(msg) - ctx.count(cut)):
                cut = None
            if cut is not None:
                saved = ctx.count(msg) - ctx.count(cut)
                chars = _text_length(msg)
                reason = f"older {role(msg)} message of {chars:,} chars shortened"
                actions.append(Action(self.name, "truncate", (i,), saved, reason))
            out.append(msg if cut is None else cut)
        return CuratorOutput(out if actions else list(messages), tuple(actions))

    def _old_before(self, messages: Sequence[Message]) -> int:
        """Messages before this index are older than the newest `keep_recent_turns` turns."""
        if self.keep_recent_turns == 0:
            return units(messages)[-1].start
        starts = turn_starts(messages)
        return starts[-self.keep_recent_turns] if len(starts) > self.keep_recent_turns else 0

    def _shorten(self, msg: Message) -> Message | None:
        """The shortened message, or None when it is within its limit or not shortenable."""
        limits = self.roles.get(role(msg))
        if limits is None:
            return None
        content = msg.get("content")
        text = content if isinstance(content, str) else _joined_text(content)
        # A summarizer's summary already is the short form of what it replaced.
        if text is None or _MARKED.search(text) or text.startswith(SUMMARY_PREFIX):
            return None
        keep = limits["max_chars"]
        cut = text[:keep] + marker(len(text))
        if len(cut) >= len(text):
            return None
        if isinstance(content, list):
            if not joinable(content):
                return None  # never cut across a client's breakpoint (policies.marks)
            # Text parts become one, carrying the last part's breakpoint.
            return {**msg, "content": carried(content, [{**content[0], "text": cut}])}
        return {**msg, "content": cut}

    def _drop_over_cap(
        self,
        messages: Sequence[Message],
        pinned: frozenset[int],
        ctx: CurationContext,
        actions: list[Action],
        floor: fill.Floor,
    ) -> frozenset[int]:
        """Indexes of the oldest units dropped to meet `max_messages` (see the docstring)."""
        if self.max_messages is None or len(messages) <= self.max_messages:
            return frozenset()
        candidates = [u for u in units(messages)[:-1] if pinned.isdisjoint(u.indexes())]
        cap = self.max_messages
        excess = len(messages) - cap
        sizes = [u.stop - u.start for u in candidates]
        k = self._units_to_drop(sizes, excess, cap) if candidates else 0
        newest = _newest_user(messages)
        spared = next((j for j, u in enumerate(candidates) if u.start <= newest < u.stop), k)
        if spared < k:
            # The newest user message stays. Its unit still counts towards the anchored cut
            # points, so the cut never moves back when a newer one comes.
            k = self._units_to_drop(sizes, excess + sizes[spared], cap)
        droppable = [u for j, u in enumerate(candidates[:k]) if j != spared]
        k = next(
            (j for j, u in enumerate(droppable) if not floor.allows(_tokens(messages, u, ctx))),
            len(droppable),
        )
        if not k:
            return frozenset()
        gone = [i for u in droppable[:k] for i in u.indexes()]
        tokens = sum(ctx.count(messages[i]) for i in gone)
        reason = f"dropped the {k} oldest unit(s): {len(messages)} messages, over the cap of {cap}"
        if len(gone) < excess:
            reason += (
                "; still over it with only pinned messages, the newest user message and the "
                "newest unit left"
            )
        actions.append(Action(self.name, "drop", tuple(gone), tokens, reason))
        return frozenset(gone)

    def _units_to_drop(self, sizes: list[int], excess: int, cap: int) -> int:
        """How many of the oldest droppable units go: the first anchored cut point that fits."""
        step = max(1, round((1 - self.low_water) * cap))
        cumulative = list(itertools.accumulate(sizes))
        fewest = bisect.bisect_left(cumulative, excess)
        below = cumulative[fewest - 1] if fewest else 0
        target = (below // step + 1) * step
        return min(bisect.bisect_left(cumulative, target), len(cumulative) - 1) + 1


def _newest_user(messages: Sequence[Message]) -> int:
    """The index of the newest user message (-1 when there is none)."""
    return next((i for i in reversed(range(len(messages))) if role(messages[i]) == "user"), -1)


def _joined_text(content: object) -> str | None:
    """The text of a content array made only of text parts, else None."""
    if not isinstance(content, list) or not content:
        return None
    texts: list[str] = []
    for part in content:
        if not (isinstance(part, Mapping) and part.get("type") == "text"):
            return None
        text: Any = part.get("text")
        if not isinstance(text, str):
            return None
        texts.append(text)
    return "".join(texts)


def _text_length(msg: Message) -> int:
    content = msg.get("content")
    text = content if isinstance(content, str) else _joined_text(content)
    return len(text or "")


def _tokens(messages: Sequence[Message], unit: Unit, ctx: CurationContext) -> int:
    return sum(ctx.count(messages[i]) for i in unit.indexes())
