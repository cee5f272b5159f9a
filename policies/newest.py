"""What token_budget keeps whole: the newest turn and the newest user message.

The model has not seen the newest turn yet (the last unit: the last assistant step with
every result that answers it, or the last message), and the newest user message says what
to do now. Shortening either hides what the agent is about to act on, so token_budget
treats them like pinned messages whenever the pins and they fit the budget together: it
drops older units instead, however many. Only when they alone exceed the budget are they
cut, as `on_overflow` says.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.messages import Message, Unit, role, units
from policies.tokens import REPLY_PRIMING


def newest_user(messages: Sequence[Message]) -> int:
    """Index of the newest user message, -1 when there is none."""
    return next((i for i in reversed(range(len(messages))) if role(messages[i]) == "user"), -1)


def never_cut(
    messages: Sequence[Message], each: Sequence[int], pinned: frozenset[int], limit: int
) -> frozenset[int]:
    """`pinned`, plus the newest turn and the newest user message when all of them fit
    `limit` whole together (reply priming included)."""
    if not messages:
        return pinned
    whole = set(pinned) | set(units(messages)[-1].indexes())
    user = newest_user(messages)
    if user >= 0:
        whole.add(user)
    if sum(each[i] for i in whole) + REPLY_PRIMING > limit:
        return pinned
    return frozenset(whole)


def spare_newest_user(
    messages: Sequence[Message],
    droppable: list[Unit],
    at_floor: list[int],
    floor_total: int,
    limit: int,
) -> list[Unit]:
    """`droppable` without the unit of the newest user message, when what may not be
    dropped still fits with it (all long contents at the floor)."""
    newest = newest_user(messages)
    kept = floor_total - sum(sum(at_floor[u.start : u.stop]) for u in droppable)
    for u in droppable:
        if u.start <= newest < u.stop:
            if kept + sum(at_floor[u.start : u.stop]) <= limit:
                return [v for v in droppable if v is not u]
            break
    return droppable
