"""What each Responses input item is to curation: a message, a call, a call's output, a
reasoning item, or opaque.

Calls and outputs are joined by their call id. A call whose output the request does not
carry is an error upstream ("No tool output found ..."), except an MCP approval request,
which the model may leave pending: that one is opaque (a unit of its own). Hosted-tool
items (web search, file search, code interpreter, image generation) and `mcp_call` carry
their call and its result in one item, so they are opaque too: kept whole, never cut.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROLES = ("system", "developer", "user", "assistant")
"""A tuple: `in` compares any value, even an unhashable one."""
CALLS = frozenset(
    {
        "function_call",
        "custom_tool_call",
        "local_shell_call",
        "computer_call",
        "shell_call",
        "apply_patch_call",
        "mcp_approval_request",
    }
)
OUTPUTS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "computer_call_output",
        "shell_call_output",
        "apply_patch_call_output",
        "mcp_approval_response",
    }
)


def call_id(item: Mapping[str, Any]) -> str | None:
    """The id a call's output answers with."""
    key = "id" if item.get("type") == "mcp_approval_request" else "call_id"
    value = item.get(key)
    return value if isinstance(value, str) else None


def output_id(item: Mapping[str, Any]) -> str | None:
    """The call id an output answers."""
    t = item.get("type")
    for key in ("approval_request_id",) if t == "mcp_approval_response" else ("call_id", "id"):
        value = item.get(key)
        if isinstance(value, str):
            return value
    return None
