"""The upstream's reported usage (read by the request's protocol from the relay's kept tail,
`ExchangeRecord.usage`) in the pricing's terms."""

from __future__ import annotations

from policies.pricing import Usage
from proxy.protocols.base import Usage as WireUsage


def from_wire(usage: WireUsage | None) -> Usage | None:
    """The protocol's usage (None where a count was not reported) as the pricing's."""
    if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
        return None
    return Usage(
        input=usage.input_tokens or 0,
        cached=usage.cached_tokens or 0,
        output=usage.output_tokens or 0,
        reasoning=usage.reasoning_tokens or 0,
        written=usage.cache_write_tokens or 0,
        written_1h=usage.cache_write_1h_tokens or 0,
    )
