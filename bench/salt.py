"""Making a request body never seen before, and listing the text a tokenizer must encode.

The proxy caches token counts per message, so a cold measurement needs every message to
differ from anything sent earlier: `with_nonce` tags each message's text and each tool
call id (and the matching `tool_call_id`, so ordering stays valid).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _salted(msg: Mapping[str, Any], tag: str) -> dict[str, Any]:
    out = dict(msg)
    content = msg.get("content")
    if isinstance(content, str):
        out["content"] = f"[{tag}] {content}"
    elif isinstance(content, list):
        out["content"] = [{"type": "text", "text": f"[{tag}]"}, *content]
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [{**c, "id": f"{c['id']}-{tag}"} for c in calls]
    if isinstance(msg.get("tool_call_id"), str):
        out["tool_call_id"] = f"{msg['tool_call_id']}-{tag}"
    return out


def with_nonce(body: Mapping[str, Any], tag: str) -> dict[str, Any]:
    """A copy of a chat request body whose every message is new (see module docstring)."""
    return {**body, "messages": [_salted(m, tag) for m in body["messages"]]}


def body_texts(body: Mapping[str, Any]) -> list[str]:
    """Every string of the messages a token counter encodes: contents, text parts, tool
    call names and arguments, and other string fields (role, name, tool_call_id)."""
    texts: list[str] = []
    for msg in body["messages"]:
        content = msg.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [p["text"] for p in content if isinstance(p.get("text"), str)]
        for call in msg.get("tool_calls") or ():
            texts += [call["function"]["name"], call["function"]["arguments"]]
        texts += [v for k, v in msg.items() if k != "content" and isinstance(v, str)]
    return texts
