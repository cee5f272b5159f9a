"""The `WireProtocol` of Anthropic's Messages API (`POST /v1/messages`).

Every field but `messages` (`system`, `tools`, `thinking`, `context_management`,
`metadata`, ...) goes upstream as the client sent it; a rebuild replaces `messages` and
nothing else, with the client's cache breakpoints kept or moved (`breakpoints`).

Usage: Anthropic's `input_tokens` leaves out what the prompt cache read and wrote, so the
prompt is `input_tokens + cache_read_input_tokens + cache_creation_input_tokens`, of which
the reads are the cached tokens. A stream states the input in `message_start` and the
output in `message_delta` (whose usage, in newer streams, repeats the input): the usage
objects in the tail are merged, the later winning.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policies.messages import Message
from proxy.config.limits import Limits
from proxy.protocols.anthropic.assembly import assemble
from proxy.protocols.anthropic.breakpoints import restore
from proxy.protocols.anthropic.facts import budget_body
from proxy.protocols.anthropic.neutral import INDEX, SKIPS, SLOT, Mapped, to_neutral
from proxy.protocols.anthropic.rebuild import rebuild
from proxy.protocols.base import Assembled, Usage, WireRequest
from proxy.protocols.splice import spliced
from proxy.protocols.vendor import Vendor
from proxy.protocols.wire import count_of, last_object, open_body

MAX_USAGES = 4
"""Usage objects read back from a response's tail (a stream has two; a message one)."""


class AnthropicMessages:
    """The `WireProtocol` of Anthropic's Messages API."""

    __slots__ = ()
    name = "anthropic"
    method = "POST"
    vendor: Vendor = "anthropic"
    path = "/v1/messages"
    internal_keys = frozenset({INDEX, SLOT})
    skip_reasons = frozenset({"invalid_json", "not_an_object", "no_messages", *SKIPS})

    def parse(self, raw: bytes, limits: Limits) -> WireRequest:
        opened = open_body(raw, limits, "messages", "messages")
        if isinstance(opened, WireRequest):
            return opened
        parsed, messages, model = opened
        facts = budget_body(parsed)
        if not isinstance(messages, list) or not messages:
            return WireRequest(raw, parsed, model, "no_messages", (), facts)
        mapped = to_neutral(messages, parsed.get("system"))
        if isinstance(mapped, str):
            return WireRequest(raw, parsed, model, mapped, messages, facts)
        return WireRequest(raw, parsed, model, None, mapped.neutral, facts, mapped)

    def rebuild(self, request: WireRequest, curated: Sequence[Message]) -> bytes:
        mapped: Mapped = request.state
        out, origins = rebuild(mapped, curated)
        messages = restore(mapped.messages, out, origins)
        # Only `messages` is replaced, in the client's bytes: every other key (`system`,
        # `tools`, `diagnostics`, a vendor's own) goes exactly as the client wrote it.
        return spliced(request.raw, request.body or {}, "messages", messages)

    def usage(self, tail: bytes) -> Usage | None:
        found = _merged_usage(tail)
        if found is None:
            return None
        plain = count_of(found, "input_tokens")
        read = count_of(found, "cache_read_input_tokens") or 0
        written = count_of(found, "cache_creation_input_tokens") or 0
        # The TTL split, where reported; the rest of the writes are 5-minute ones.
        hour = min(count_of(found, "cache_creation", "ephemeral_1h_input_tokens") or 0, written)
        return Usage(
            input_tokens=None if plain is None else plain + read + written,
            cached_tokens=read,
            output_tokens=count_of(found, "output_tokens"),
            cache_write_tokens=written - hour,
            cache_write_1h_tokens=hour,
        )

    def assemble(self, body: bytes) -> Assembled:
        return assemble(body)


def _merged_usage(tail: bytes) -> dict[str, Any] | None:
    """The usage objects in `tail`, merged in order (see the module docstring)."""
    found: list[dict[str, Any]] = []
    end = len(tail)
    while len(found) < MAX_USAGES:
        at = tail.rfind(b'"usage"', 0, end)
        if at < 0:
            break
        usage = last_object(tail[:end], b"usage")
        if usage is not None:
            found.append(usage)
        end = at
    if not found:
        return None
    merged: dict[str, Any] = {}
    for usage in reversed(found):
        merged.update({k: v for k, v in usage.items() if v is not None})
    return merged


ANTHROPIC = AnthropicMessages()
