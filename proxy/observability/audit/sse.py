"""Reassembling a relayed chat completion, streamed (SSE) or not, for the audit log.

The relay calls `feed` with every chunk it forwards, so that call only appends to a list,
capped so that a runaway stream cannot exhaust memory. Parsing happens later, in the audit
writer thread: chunk boundaries can fall anywhere (mid-line, mid-UTF-8 character) because
the bytes are joined before they are decoded.

Only choice 0 is assembled: agents ask for one completion, and the audit keeps what the
client most likely used.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import orjson

DEFAULT_MAX_BYTES = 4 * 1024 * 1024
_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")
"""How an SSE stream's first line starts (a field name, or a comment)."""


class Assembled(NamedTuple):
    """The response as one message: text, tool calls, usage and why it ended."""

    text: str
    tool_calls: list[dict[str, Any]]
    usage: dict[str, Any] | None
    finish_reason: str | None


class SSEAccumulator:
    """Collects response bytes as they are relayed; parses them later, off the request path."""

    __slots__ = ("_parts", "_size", "max_bytes", "truncated")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self.max_bytes = max_bytes
        self.truncated = False

    def feed(self, chunk: bytes) -> None:
        room = self.max_bytes - self._size
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        if chunk:
            self._parts.append(chunk)
            self._size += len(chunk)

    @property
    def size(self) -> int:
        return self._size

    def data(self) -> bytes:
        return b"".join(self._parts)

    def assemble(self) -> Assembled:
        return assemble(self.data())


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
    for payload in _events(data.decode("utf-8", "replace")):
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


def _events(text: str) -> Iterator[str]:
    """The data of each SSE event (multi-line data joined with newlines)."""
    lines: list[str] = []
    # Not splitlines(): JSON may carry a raw U+2028, which it would treat as a line break.
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line:
            if lines:
                yield "\n".join(lines)
                lines = []
            continue
        field, _, value = line.partition(":")
        if field == "data":
            lines.append(value[1:] if value.startswith(" ") else value)
    if lines:
        # The stream ended (or was cut) without the blank line that closes an event.
        yield "\n".join(lines)


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
