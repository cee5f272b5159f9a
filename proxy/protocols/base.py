"""The protocol seam: what the proxy must know about one wire API to curate it.

Serving, curation, metrics and the audit never look inside a request or response body;
they ask the request's `WireProtocol`. A protocol turns the client's bytes into a
`WireRequest` (the parsed body, the neutral chat-format messages the curators see, the
facts the policy reads) or a reason to skip curation; rebuilds the body from curated
messages; reads token usage from the tail of a relayed response; and assembles a relayed
response into one message for the audit log.

The neutral model is the chat-completions one (`policies.messages.Message`): curators know
nothing else. A protocol whose wire form differs (the Responses API's items) maps its units
onto chat messages in `parse`, keeps what it needs to map them back in `WireRequest.state`,
and undoes the mapping in `rebuild`.

Implementations are stateless singletons registered in `proxy.protocols.PROTOCOLS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from policies.messages import Message
from proxy.config.limits import Limits
from proxy.protocols.vendor import Vendor


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage the upstream reported for one response (None: not reported).

    `input_tokens` includes `cached_tokens`; `output_tokens` includes `reasoning_tokens`,
    as both APIs count them.
    """

    input_tokens: int | None = None
    cached_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_write_tokens: int | None = None
    """Written to the prompt cache (5-minute or unspecified TTL); part of `input_tokens`."""
    cache_write_1h_tokens: int | None = None
    """Written to the prompt cache with a 1-hour TTL; part of `input_tokens`."""


@dataclass(slots=True)  # not frozen: built on every request, and freezing costs ~1 us
class WireRequest:
    """A request body as the proxy reads it, before routing and curation.

    No default factories: one is a call per request on the hot path."""

    raw: bytes
    """The client's exact bytes: what goes upstream unless curation changed the messages."""
    body: dict[str, Any] | None
    """The decoded JSON object; None when the body is not one."""
    model: str | None
    skip: str | None
    """Why this request cannot be curated (`x-curator-skipped`), None when it can."""
    messages: Sequence[Message]
    """The neutral messages the curators see. With `skip` set, what could be read of them
    (the audit log shows it), whatever their shape; never curated."""
    facts: Mapping[str, Any]
    """What the policy reads, in chat-completions form: `model`, `tools` (or `functions`),
    `max_completion_tokens` / `max_tokens`. For chat, the body itself."""
    state: Any = None
    """Protocol-private: whatever `rebuild` needs beyond the curated messages."""


class Assembled(NamedTuple):
    """A relayed response as one message, for the audit log: text, tool calls, usage (as
    the upstream wrote it) and why it ended."""

    text: str
    tool_calls: list[dict[str, Any]]
    usage: dict[str, Any] | None
    finish_reason: str | None


class WireProtocol(Protocol):
    """One wire API the proxy curates (chat completions, the Responses API, ...)."""

    @property
    def name(self) -> str:
        """Short and stable: the audit record's `kind`, a metrics label value."""
        ...

    @property
    def vendor(self) -> Vendor:
        """Whose API it is: it is routed only to upstreams of that kind."""
        ...

    @property
    def method(self) -> str:
        """The HTTP method of the requests it curates (`POST`)."""
        ...

    @property
    def internal_keys(self) -> frozenset[str]:
        """Keys its neutral messages carry for its own `rebuild` only: the audit log leaves
        them out (it shows what the client sent and the model saw, nothing of ours)."""
        ...

    @property
    def path(self) -> str:
        """The exact request path it curates (`/v1/chat/completions`)."""
        ...

    @property
    def skip_reasons(self) -> frozenset[str]:
        """Every `WireRequest.skip` its `parse` may give: the values the skipped-requests
        metric names (any other would be counted as `other`)."""
        ...

    def parse(self, raw: bytes, limits: Limits) -> WireRequest:
        """Read a request body; never raises for a body it cannot curate (it sets `skip`).

        Raises `ProxyError` (400) only for the shape limits of the `server:` section (too
        many messages or items, nesting too deep), before any curation work.
        """
        ...

    def rebuild(self, request: WireRequest, curated: Sequence[Message]) -> bytes:
        """The body to send upstream with `curated` in place of the request's messages,
        every other field kept. Called only when curation changed something: an unchanged
        request goes upstream as the client's own bytes."""
        ...

    def usage(self, tail: bytes) -> Usage | None:
        """The usage the upstream reported, read from the last bytes relayed (`tail`, at
        most `USAGE_TAIL_BYTES`, the whole body when it was shorter); None when absent.
        Runs for every response that is observed, so it must stay cheap."""
        ...

    def assemble(self, body: bytes) -> Assembled:
        """A relayed response body (JSON or an SSE stream, possibly cut short) as one
        message; runs in the audit writer's thread, never on the event loop."""
        ...


USAGE_TAIL_BYTES = 16 * 1024
"""How many of a response's last bytes the relay keeps for `WireProtocol.usage`."""
