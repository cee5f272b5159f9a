"""Tokens taken by a request's tool definitions: the rendered namespace, encoded.

OpenAI renders the `tools` list into the system prompt (`policies.tool_render`). What the
API reports for it is the rendered text's tokens plus `TOOLS_MESSAGE`, the overhead of the
system message that carries it. When the request has its own system message, the
namespace joins it and the API reports 4 tokens fewer; the budget is computed before the
curators decide which messages stay, so that saving is not counted: the count is exact
without a system message and 4 high with one, never low.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policies.tool_render import render_tools

CountText = Callable[[str], int]
TOOLS_MESSAGE = 3
"""The system message the tools section travels in (the cookbook's 3 per message)."""
JOINED_SYSTEM_SAVING = 4
"""What the API reports fewer when the request already has a system message."""


def tool_definition_tokens(tools: Sequence[Mapping[str, Any]], count: CountText) -> int:
    """Tokens for the `tools` list of a request; 0 when there are none."""
    if not tools:
        return 0
    return count(render_tools(tools)) + TOOLS_MESSAGE
