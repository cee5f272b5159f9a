"""turn_window: keeps the newest `max_turns` turns.

A turn starts at each user message (`messages.turn_starts`). Older turns are dropped a
whole unit at a time, so a tool call never loses its results; a unit that holds a pinned
message stays, whole and in place. The cut only ever falls on a turn start, and the last
turn always survives, so the newest unit is never touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from policies import params
from policies.base import Action, CurationContext, CuratorOutput
from policies.messages import Message, turn_starts, units


@dataclass(frozen=True, slots=True)
class TurnWindow:
    """Drops every turn but the newest `max_turns`, keeping pinned messages."""

    name: ClassVar[str] = "turn_window"

    max_turns: int = 50

    def __post_init__(self) -> None:
        params.integer("max_turns", self.max_turns, minimum=1)

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        starts = turn_starts(messages)
        if len(starts) <= self.max_turns:
            return CuratorOutput(list(messages))
        cut = starts[-self.max_turns]
        pinned = ctx.pinned(messages)
        dropped = [
            i
            for unit in units(messages)
            # A unit straddling the cut (only in malformed input) stays whole.
            if unit.stop <= cut and pinned.isdisjoint(unit.indexes())
            for i in unit.indexes()
        ]
        if not dropped:
            return CuratorOutput(list(messages))
        gone = set(dropped)
        tokens = sum(ctx.count(messages[i]) for i in dropped)
        reason = f"kept the newest {self.max_turns} of {len(starts)} turns"
        return CuratorOutput(
            [m for i, m in enumerate(messages) if i not in gone],
            (Action(self.name, "drop", tuple(dropped), tokens, reason),),
        )
