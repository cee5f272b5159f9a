"""Usage as the upstream reports it, read from the relayed response body, streamed or not.

The relay hands every body chunk to `ResponseTap.feed`, which keeps what the audit log wants
(the whole body, up to a cap; nothing when the audit is off) and, for the usage, only the
last `TAIL_BYTES`: providers put `usage` at the end of a chat completion, in the last
chunk of a stream (`stream_options.include_usage`), and at the end of the Responses API's
`response.completed` event. So reading usage costs a bounded copy per chunk and one small
parse per response, whatever the response's size.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from policies.pricing import Usage
from proxy.observability.audit.sse import SSEAccumulator

TAIL_BYTES = 16 * 1024
_KEY = b'"usage"'
_MAX_TRIES = 8
"""`"usage"` occurrences tried from the end: streams may send `"usage": null` per chunk."""
_DECODER = json.JSONDecoder()


class ResponseTap(SSEAccumulator):
    """An `SSEAccumulator` for the audit log (capped at `max_bytes`, 0 keeps nothing) that
    also keeps the body's last `TAIL_BYTES` for the usage."""

    __slots__ = ("_tail",)

    def __init__(self, max_bytes: int) -> None:
        super().__init__(max_bytes)
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        if self.max_bytes:
            super().feed(chunk)
        tail = self._tail + chunk if len(chunk) < TAIL_BYTES else chunk
        self._tail = tail[-TAIL_BYTES:]

    def usage(self) -> Usage | None:
        """The upstream's reported usage, or None when the response carried none."""
        return usage_in(self._tail)


def usage_in(data: bytes) -> Usage | None:
    """The last `"usage": {...}` object in `data` with token counts, as a `Usage`."""
    end = len(data)
    for _ in range(_MAX_TRIES):
        at = data.rfind(_KEY, 0, end)
        if at < 0:
            return None
        end = at
        if at and data[at - 1 : at] == b"\\":
            continue  # inside a JSON string: the model's text, not the provider's usage
        found = _object_after(data, at + len(_KEY))
        if found is not None:
            usage = usage_of(found)
            if usage is not None:
                return usage
    return None


def _object_after(data: bytes, start: int) -> Mapping[str, Any] | None:
    text = data[start : start + 4096].decode("utf-8", "replace").lstrip()
    if not text.startswith(":"):
        return None
    text = text[1:].lstrip()
    try:
        value, _ = _DECODER.raw_decode(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def usage_of(usage: Mapping[str, Any]) -> Usage | None:
    """A chat completion's or a Responses API's usage object as a `Usage`."""
    input_tokens = _count(usage, "prompt_tokens", "input_tokens")
    output = _count(usage, "completion_tokens", "output_tokens")
    if input_tokens is None and output is None:
        return None
    in_details = _details(usage, "prompt_tokens_details", "input_tokens_details")
    out_details = _details(usage, "completion_tokens_details", "output_tokens_details")
    return Usage(
        input=input_tokens or 0,
        cached=_count(in_details, "cached_tokens") or 0,
        output=output or 0,
        reasoning=_count(out_details, "reasoning_tokens") or 0,
    )


def _count(data: Mapping[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _details(usage: Mapping[str, Any], *keys: str) -> Mapping[str, Any]:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, dict):
            return value
    return {}
