"""Usage as the upstream reports it, read from the relayed response body, streamed or not.

The relay hands every body chunk to `ResponseTap.feed`, which keeps what the audit log wants
(the whole body, up to a cap; nothing when the audit is off) and, for the usage, only the
last `USAGE_TAIL_BYTES`: providers put `usage` at the end of a chat completion, in the last
chunk of a stream (`stream_options.include_usage`), and at the end of the Responses API's
`response.completed` event. The request's `WireProtocol` reads it from there, so reading
usage costs a bounded copy per chunk and one small parse per response, whatever its size.
"""

from __future__ import annotations

from policies.pricing import Usage
from proxy.observability.audit.sse import SSEAccumulator
from proxy.protocols.base import USAGE_TAIL_BYTES, WireProtocol
from proxy.protocols.base import Usage as WireUsage


class ResponseTap(SSEAccumulator):
    """An `SSEAccumulator` for the audit log (capped at `max_bytes`, 0 keeps nothing) that
    also keeps the body's last `USAGE_TAIL_BYTES` for the protocol's usage reader."""

    __slots__ = ("_tail", "protocol")

    def __init__(self, max_bytes: int, protocol: WireProtocol) -> None:
        super().__init__(max_bytes)
        self.protocol = protocol
        self._tail = b""

    def feed(self, chunk: bytes) -> None:
        if self.max_bytes:
            super().feed(chunk)
        tail = self._tail + chunk if len(chunk) < USAGE_TAIL_BYTES else chunk
        self._tail = tail[-USAGE_TAIL_BYTES:]

    def usage(self) -> Usage | None:
        """The upstream's reported usage, or None when the response carried none."""
        return from_wire(self.protocol.usage(self._tail))


def from_wire(usage: WireUsage | None) -> Usage | None:
    """The protocol's usage (None where a count was not reported) as the pricing's."""
    if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
        return None
    return Usage(
        input=usage.input_tokens or 0,
        cached=usage.cached_tokens or 0,
        output=usage.output_tokens or 0,
        reasoning=usage.reasoning_tokens or 0,
    )
