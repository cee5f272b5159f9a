"""The facts a policy reads from a Responses request, in chat-completions form.

The policy's budget reads a chat-shaped view of the body: the model, `max_output_tokens`
as the output reserve, and the tools as chat tool definitions. Function and custom tools
render as in chat; hosted tools (web search, MCP, computer use, ...) have no published
rendering and are priced as their JSON, high rather than low.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from policies.messages import MAPPING


def budget_body(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """Model, output reserve (`max_output_tokens`) and tools, as a chat body has them."""
    view: dict[str, Any] = {"model": parsed.get("model")}
    reserve = parsed.get("max_output_tokens")
    if isinstance(reserve, int) and not isinstance(reserve, bool):
        view["max_completion_tokens"] = reserve
    tools = parsed.get("tools")
    if isinstance(tools, list) and tools:
        view["tools"] = [chat_tool(t) for t in tools if isinstance(t, MAPPING)]
    return view


def chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A Responses tool definition as chat's `tools` entry (see the module docstring)."""
    kind = tool.get("type")
    fields = ("name", "description", "parameters", "strict")
    if kind == "function":
        return {"type": "function", "function": {k: tool[k] for k in fields if k in tool}}
    if kind == "custom":
        custom = {k: tool[k] for k in ("name", "description", "format") if k in tool}
        return {"type": "custom", "custom": custom}
    described = orjson.dumps(tool).decode()
    return {"type": "custom", "custom": {"name": str(kind), "description": described}}
