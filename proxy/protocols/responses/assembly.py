"""Reassembling a relayed Responses API response, streamed (SSE) or not, for the audit log.

A whole response (the JSON body, or the `response` of a `response.completed`,
`response.incomplete` or `response.failed` event) is read from its `output` items. A
stream cut short has no such event: its text comes from the `response.output_text.delta`
events and its calls from the `response.output_item.done` events seen so far.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from proxy.protocols.base import Assembled
from proxy.protocols.wire import sse_events

_SSE_STARTS = (b"data:", b":", b"event:", b"id:", b"retry:")
_ENDS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def assemble(data: bytes) -> Assembled:
    first = data.lstrip()[:8]
    if first.startswith(_SSE_STARTS):
        return assemble_sse(data)
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return Assembled(data.decode("utf-8", "replace"), [], None, None)
    if not isinstance(body, dict):
        return Assembled(data.decode("utf-8", "replace"), [], None, None)
    return from_response(body)


def assemble_sse(data: bytes) -> Assembled:
    text: list[str] = []
    items: list[Mapping[str, Any]] = []
    for payload in sse_events(data.decode("utf-8", "replace")):
        try:
            event = orjson.loads(payload)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind in _ENDS and isinstance(event.get("response"), dict):
            return from_response(event["response"])
        if kind == "response.output_text.delta" and isinstance(event.get("delta"), str):
            text.append(event["delta"])
        elif kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            items.append(event["item"])
    return Assembled("".join(text), _calls(items), None, None)


def from_response(response: Mapping[str, Any]) -> Assembled:
    output = response.get("output")
    items = [i for i in output if isinstance(i, dict)] if isinstance(output, list) else []
    usage = response.get("usage")
    return Assembled(
        _text(items),
        _calls(items),
        usage if isinstance(usage, dict) else None,
        _finish(response),
    )


def _text(items: Sequence[Mapping[str, Any]]) -> str:
    texts: list[str] = []
    for item in items:
        content = item.get("content") if item.get("type") == "message" else None
        for part in content if isinstance(content, list) else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return "".join(texts)


def _calls(items: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool calls in chat's shape; other tool items keep their type and fields."""
    calls: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type")
        if kind == "function_call":
            fn = {"name": item.get("name"), "arguments": item.get("arguments")}
            calls.append({"id": item.get("call_id"), "type": "function", "function": fn})
        elif isinstance(kind, str) and kind not in ("message", "reasoning"):
            calls.append({"id": item.get("call_id") or item.get("id"), **item})
    return calls


def _finish(response: Mapping[str, Any]) -> str | None:
    details = response.get("incomplete_details")
    if isinstance(details, dict) and isinstance(details.get("reason"), str):
        return str(details["reason"])
    status = response.get("status")
    return status if isinstance(status, str) else None
