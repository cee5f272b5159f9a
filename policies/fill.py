"""`min_fill`: a curator that cuts for cost never starves the prompt.

Curators that shorten, clear or drop content whatever the budget (tool_result_truncation,
tool_use_clearing, dedupe, history_retention, role_truncation) take `min_fill`, a share of
the request's token budget. Their edits are applied oldest first, and one that would take
the prompt below `min_fill * budget` is not made (edits that move in order, as clearing's
chunks, stop there). So a conversation over the budget reaches token_budget with at least
that much left for it to degrade gracefully, instead of being cut far below what the
window could hold. `0` (the default) cuts regardless of the budget.

Curating again changes nothing. An edit is skipped when it would cross the floor, and the
prompt only shrinks down the chain, so an edit skipped in a first pass would cross it again;
the one exception, a content token_budget has since cut to fit, is never edited again for
cost (`cut_to_fit`): its saving is smaller now, and the budget already gave it its size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from policies import params
from policies.base import CurationContext
from policies.degrade import MARK_END
from policies.messages import Message
from policies.shorten import cuttable_text


def check(value: object) -> float:
    """A checked `min_fill`: a share of the budget, from 0 (off) to 1."""
    return params.ratio("min_fill", value, allow_zero=True)


@dataclass(slots=True)
class Floor:
    """What is left of the prompt as edits are applied, and how low it may go."""

    total: int
    lowest: int

    def allows(self, saved: int) -> bool:
        """Whether an edit saving `saved` tokens keeps the prompt at or above the floor;
        when it does, the edit is counted as applied."""
        if self.lowest > 0 and self.total - saved < self.lowest:
            return False
        self.total -= saved
        return True


def floor(
    messages: Sequence[Message], ctx: CurationContext, min_fill: float, cap: int | None = None
) -> Floor:
    """The floor for a curator with this `min_fill` (no floor when it is 0), never above
    `cap` tokens when one is given."""
    if min_fill <= 0 or not messages:
        return Floor(0, 0)
    lowest = math.ceil(min_fill * ctx.budget)
    return Floor(ctx.count_total(messages), lowest if cap is None else min(lowest, cap))


def cut_to_fit(msg: Message) -> bool:
    """Whether token_budget has cut this message's content to fit the window."""
    found = cuttable_text(msg)
    return found is not None and MARK_END in found[0]
