"""The facts a policy reads from a Messages request, in chat-completions form.

The budget reads the model, `max_tokens` as the output reserve (it includes any thinking
budget), and the tools as chat tool definitions: a custom tool (`name`, `description`,
`input_schema`) renders as a chat function; a server tool (`web_search_20250305`,
`bash_20250124`, ...) has no published rendering and is priced as its JSON, high rather
than low.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from policies.messages import MAPPING


def budget_body(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """Model, output reserve (`max_tokens`) and tools, as a chat body has them."""
    view: dict[str, Any] = {"model": parsed.get("model")}
    reserve = parsed.get("max_tokens")
    if isinstance(reserve, int) and not isinstance(reserve, bool):
        view["max_completion_tokens"] = reserve
    tools = parsed.get("tools")
    if isinstance(tools, list) and tools:
        view["tools"] = [chat_tool(t) for t in tools if isinstance(t, MAPPING)]
    return view


def chat_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages tool definition as chat's `tools` entry (see the module docstring)."""
    if "input_schema" in tool and tool.get("type") in (None, "custom"):
        fn = {"name": tool.get("name"), "parameters": tool.get("input_schema")}
        if "description" in tool:
            fn["description"] = tool["description"]
        return {"type": "function", "function": fn}
    kept = {k: v for k, v in tool.items() if k != "cache_control"}
    described = orjson.dumps(kept).decode()
    return {"type": "custom", "custom": {"name": str(tool.get("name")), "description": described}}
