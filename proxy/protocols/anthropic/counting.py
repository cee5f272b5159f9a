"""Counting Claude's tokens without its tokenizer.

Anthropic publishes no tokenizer. The proxy counts a Messages request as it counts chat
(the neutral messages, with the encoding the `models:` table gives `claude*`: cl100k_base,
denser than o200k_base on code), and errs high: until the first response of an
(upstream, model) has reported its usage, the budget divides the room it gives the prompt
by `SAFETY` (Claude's tokenizer gives more tokens than cl100k_base for the same text; a
quarter more covers what was seen on code and English). From then on the calibration
(`policies.calibration`) learns the ratio from each response's prompt count,
`input_tokens + cache_read_input_tokens + cache_creation_input_tokens`
(`proxy.protocols.anthropic.protocol`), and the budget uses that.

The window is the model's (200k for Claude in the built-in table) unless the request's
`anthropic-beta` header asks for the 1M context (`context-1m-...`): then 1M.
"""

from __future__ import annotations

from collections.abc import Mapping

from policies.calibration import BudgetHints

SAFETY = 1.25
WINDOW_1M = 1_000_000
BETA_HEADER = "anthropic-beta"
BETA_1M = "context-1m"


def claude_hints(hints: BudgetHints, headers: Mapping[str, str], calibrated: bool) -> BudgetHints:
    """The budget's hints for a Messages request (see the module docstring)."""
    window = WINDOW_1M if BETA_1M in headers.get(BETA_HEADER, "") else hints.window
    scale = hints.scale if calibrated else max(hints.scale, SAFETY)
    if window == hints.window and scale == hints.scale:
        return hints
    return BudgetHints(window, scale)
