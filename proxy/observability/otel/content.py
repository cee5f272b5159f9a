"""Message content on spans, only when `otel.capture_content` is on, and then redacted by the
audit's own redactor (`audit.redact`: the built-in detectors and the operator's patterns).

The request span's `gen_ai.input.messages` holds the messages the model saw (after
curation), in the conventions' shape: `{"role", "parts": [...]}` with text, tool-call and
tool-call-response parts. Redacting runs on the event loop, so it costs time in proportion
to the history's size: that is why it is opt-in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from policies.messages import Message
from proxy.config.audit import RedactConfig
from proxy.observability.audit.redact import Redactor


class ContentCapture:
    """Redacts a record's messages into the `gen_ai.input.messages` JSON."""

    __slots__ = ("_redactor",)

    def __init__(self, redact: RedactConfig) -> None:
        self._redactor = Redactor.build(builtin=redact.builtin, custom=redact.patterns)

    def input_messages(self, messages: Sequence[Message]) -> str:
        redacted = self._redactor.value([_semconv(m) for m in messages])
        return orjson.dumps(redacted).decode()


def _semconv(message: Message) -> dict[str, Any]:
    """A chat message in the conventions' shape (only the keys it names are read)."""
    role = message.get("role")
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}
        )
    elif isinstance(content, str):
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append({"type": "text", "content": part["text"]})
            elif isinstance(part, dict):
                parts.append({"type": str(part.get("type", "unknown"))})
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {} if isinstance(call, dict) else {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id") if isinstance(call, dict) else None,
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    out: dict[str, Any] = {"role": role, "parts": parts}
    name = message.get("name")
    if isinstance(name, str):
        out["name"] = name
    return out
