"""Tokens taken by a request's tool definitions: the rendered namespace, encoded.

OpenAI renders the `tools` list into the system prompt (`policies.tool_render`). What the
API reports for it is the rendered text's tokens plus `TOOLS_MESSAGE`, the overhead of the
system message that carries it. When the request has its own system message, the
namespace joins it and the API reports 4 tokens fewer; the budget is computed before the
curators decide which messages stay, so that saving is not counted: the count is exact
without a system message and 4 high with one, never low.

Open models served by vLLM, Ollama and the like render tools with their own chat
templates, most as JSON (Llama 3.x indents it by 4, Qwen and Mistral wrap it in
instructions). How a given server does it is unknown here, so for a model OpenAI's rules
do not cover the count is the larger of the OpenAI rendering and the tools as 4-space
indented JSON plus `OPEN_TEMPLATE_TOKENS` of instructions: high rather than low.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policies.tool_render import render_tools

CountText = Callable[[str], int]
TOOLS_MESSAGE = 3
"""The system message the tools section travels in (the cookbook's 3 per message)."""


OPEN_TEMPLATE_TOKENS = 128
"""Open models' templates put about 50 (Llama 3.x) to 100 (Qwen 2.5) tokens of
instructions around the tools."""


def tool_definition_tokens(
    tools: Sequence[Mapping[str, Any]], count: CountText, *, openai: bool = True
) -> int:
    """Tokens for the `tools` list of a request; 0 when there are none. `openai`: the
    model follows OpenAI's rendering (else the count also covers a JSON template)."""
    if not tools:
        return 0
    rendered = count(render_tools(tools)) + TOOLS_MESSAGE
    return rendered if openai else max(rendered, open_template_tokens(tools, count))


def open_template_tokens(tools: Sequence[Mapping[str, Any]], count: CountText) -> int:
    """The tools as an open model's chat template shows them, at the verbose end."""
    dumped = (json.dumps(t, indent=4, ensure_ascii=False, default=str) for t in tools)
    return count("\n\n".join(dumped)) + OPEN_TEMPLATE_TOKENS
