"""Reassembling a relayed Messages API response, streamed (SSE) or not, for the audit log.

A whole message is read from its `content` blocks. A stream is folded event by event:
`message_start` gives the message, `content_block_start` each block, `content_block_delta`
its text (`text_delta`), thinking (`thinking_delta`, `signature_delta`) or tool input
(`input_json_delta`), `message_delta` the stop reason and the final usage. A stream cut
short gives what arrived.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from proxy.protocols.base import Assembled
from proxy.protocols.wire import sse_events

_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")


def assemble(data: bytes) -> Assembled:
    if data.lstrip()[:8].startswith(_SSE_STARTS):
        return assemble_sse(data)
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Assembled(data.decode("utf-8", "replace"), [], None, None)
    if not isinstance(body, dict):
        return Assembled(data.decode("utf-8", "replace"), [], None, None)
    return from_message(body)


def from_message(message: Mapping[str, Any]) -> Assembled:
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    usage = message.get("usage")
    stop = message.get("stop_reason")
    return Assembled(
        "".join(
            b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)
        ),
        _calls(blocks),
        usage if isinstance(usage, dict) else None,
        stop if isinstance(stop, str) else None,
    )


def assemble_sse(data: bytes) -> Assembled:
    message: dict[str, Any] = {"content": []}
    partial: dict[int, str] = {}
    for payload in sse_events(data.decode("utf-8", "replace")):
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        if isinstance(event, dict):
            _fold(message, partial, event)
    for i, text in partial.items():
        block = message["content"][i]
        try:
            block["input"] = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError:
            block["input"] = text
    return from_message(message)


def _fold(message: dict[str, Any], partial: dict[int, str], event: Mapping[str, Any]) -> None:
    kind, blocks = event.get("type"), message["content"]
    if kind == "message_start" and isinstance(event.get("message"), dict):
        message.update({k: v for k, v in event["message"].items() if k != "content"})
    elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
        blocks.append(dict(event["content_block"]))
    elif kind == "content_block_delta" and isinstance(event.get("delta"), dict) and blocks:
        index = event.get("index")
        at = index if isinstance(index, int) and 0 <= index < len(blocks) else len(blocks) - 1
        _delta(blocks[at], at, partial, event["delta"])
    elif kind == "message_delta":
        delta = event.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
            message["stop_reason"] = delta["stop_reason"]
        usage = event.get("usage")
        if isinstance(usage, dict):
            message["usage"] = {**(message.get("usage") or {}), **usage}


def _delta(
    block: dict[str, Any], at: int, partial: dict[int, str], delta: Mapping[str, Any]
) -> None:
    for kind, field in (
        ("text_delta", "text"),
        ("thinking_delta", "thinking"),
        ("signature_delta", "signature"),
    ):
        if delta.get("type") == kind and isinstance(delta.get(field), str):
            block[field] = str(block.get(field) or "") + delta[field]
            return
    if delta.get("type") == "input_json_delta" and isinstance(delta.get("partial_json"), str):
        partial[at] = partial.get(at, "") + delta["partial_json"]


def _calls(blocks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool uses in chat's shape; thinking and server tool blocks keep their own shape."""
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "tool_use":
            arguments = orjson.dumps(block.get("input", {})).decode()
            fn = {"name": block.get("name"), "arguments": arguments}
            calls.append({"id": block.get("id"), "type": "function", "function": fn})
        elif kind != "text":
            calls.append({"id": block.get("id"), **block})
    return calls
