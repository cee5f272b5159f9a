"""Reassembling a relayed chat completion, streamed (SSE) or not, for the audit log.

Runs in the audit writer's thread on the joined bytes, so chunk boundaries can fall
anywhere (mid-line, mid-UTF-8 character). Only choice 0 is assembled: agents ask for one
completion, and the audit keeps what the client most likely used.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from proxy.protocols.base import Assembled
from proxy.protocols.wire import sse_events

_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")
"""How an SSE stream's first line starts (a field name, or a comment)."""


def assemble(data: bytes) -> Assembled:
    """Parse a response body: an SSE stream of chunks, else one JSON object (or plain text)."""
    first = data.lstrip()[:8]
    if first.startswith(_SSE_STARTS):
        return assemble_sse(data)
    return assemble_json(data)


def assemble_json(data: bytes) -> Assembled:
    """A non-streamed chat.completion; a body that is not one is kept as plain text."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Assembled(data.decode("utf-8", "replace"), [], None, None)
    if not isinstance(body, dict):
        return Assembled(data.decode("utf-8", "replace"), [], None, None)
    choice = _first_choice(body)
    message = choice.get("message")
    message = message if isinstance(message, dict) else {}
    calls = message.get("tool_calls")
    tool_calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        tool_calls.append({"id": None, "type": "function_call", "function": legacy})
    return Assembled(
        _content_text(message.get("content")),
        tool_calls,
        _usage(body),
        _finish_reason(choice),
    )


def assemble_sse(data: bytes) -> Assembled:
    """A stream of chat.completion.chunk events, up to `[DONE]` or the end of the data."""
    text: list[str] = []
    calls = _ToolCalls()
    usage: dict[str, Any] | None = None
    finish: str | None = None
    for payload in sse_events(data.decode("utf-8", "replace")):
        if payload == "[DONE]":
            break
        try:
            chunk = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(chunk, dict):
            continue
        usage = _usage(chunk) or usage
        choice = _first_choice(chunk)
        delta = choice.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str):
                text.append(content)
            calls.add(delta)
        finish = _finish_reason(choice) or finish
    return Assembled("".join(text), calls.result(), usage, finish)


class _ToolCalls:
    """Tool calls rebuilt from their deltas: id and name first, arguments in fragments."""

    def __init__(self) -> None:
        self._slots: dict[int, dict[str, Any]] = {}

    def add(self, delta: Mapping[str, Any]) -> None:
        deltas = delta.get("tool_calls")
        for item in deltas if isinstance(deltas, list) else ():
            if isinstance(item, dict):
                index = item.get("index")
                key = index if isinstance(index, int) else len(self._slots)
                self._merge(key, item, item.get("function"))
        legacy = delta.get("function_call")
        if isinstance(legacy, dict):
            self._merge(-1, {"type": "function_call"}, legacy)

    def _merge(self, key: int, item: Mapping[str, Any], function: object) -> None:
        slot = self._slots.setdefault(key, {"id": None, "type": "function", "name": [], "args": []})
        if isinstance(item.get("id"), str):
            slot["id"] = item["id"]
        if isinstance(item.get("type"), str):
            slot["type"] = item["type"]
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                slot["name"].append(function["name"])
            if isinstance(function.get("arguments"), str):
                slot["args"].append(function["arguments"])

    def result(self) -> list[dict[str, Any]]:
        return [
            {
                "id": slot["id"],
                "type": slot["type"],
                "function": {"name": "".join(slot["name"]), "arguments": "".join(slot["args"])},
            }
            for _, slot in sorted(self._slots.items(), key=lambda kv: (kv[0] < 0, kv[0]))
        ]


def _first_choice(body: Mapping[str, Any]) -> dict[str, Any]:
    choices = body.get("choices")
    if isinstance(choices, list):
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                return choice
    return {}


def _usage(body: Mapping[str, Any]) -> dict[str, Any] | None:
    usage = body.get("usage")
    return usage if isinstance(usage, dict) else None


def _finish_reason(choice: Mapping[str, Any]) -> str | None:
    reason = choice.get("finish_reason")
    return reason if isinstance(reason, str) else None


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        )
    return ""
