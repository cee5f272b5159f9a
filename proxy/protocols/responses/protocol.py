"""The `WireProtocol` of OpenAI's Responses API (`POST /v1/responses`).

`input` as a string has nothing to curate, and with `previous_response_id` or
`conversation` the history lives upstream where the proxy cannot see it: both go as sent,
with a skip reason (`string_input`, `server_state`). Every field but `input`
(`instructions`, `truncation`, `store`, `include`, `context_management`, ...) goes
upstream as the client sent it; a rebuild replaces `input` and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.messages import Message
from proxy.config.limits import Limits
from proxy.protocols.base import Assembled, Usage, WireRequest
from proxy.protocols.responses.assembly import assemble
from proxy.protocols.responses.facts import budget_body
from proxy.protocols.responses.items import GROUP, ITEM_SKIPS, Mapped, to_neutral
from proxy.protocols.responses.rebuild import rebuild
from proxy.protocols.splice import spliced
from proxy.protocols.vendor import Vendor
from proxy.protocols.wire import cache_writes, count_of, last_object, open_body

SERVER_STATE = "server_state"
"""Skip reason: the conversation lives upstream (`previous_response_id`, `conversation`)."""
STRING_INPUT = "string_input"
"""Skip reason: `input` is a string (or absent): nothing to curate."""


class ResponsesAPI:
    """The `WireProtocol` of OpenAI's Responses API."""

    __slots__ = ()
    name = "responses"
    method = "POST"
    vendor: Vendor = "openai"
    path = "/v1/responses"
    internal_keys = frozenset({GROUP})
    skip_reasons = frozenset(
        {"invalid_json", "not_an_object", "no_messages", SERVER_STATE, STRING_INPUT, *ITEM_SKIPS}
    )

    def parse(self, raw: bytes, limits: Limits) -> WireRequest:
        opened = open_body(raw, limits, "input", "items")
        if isinstance(opened, WireRequest):
            return opened
        parsed, items, model = opened
        facts = budget_body(parsed)
        skip = _skip(parsed, items)
        if skip is not None or not isinstance(items, list):
            return WireRequest(raw, parsed, model, skip, (), facts)
        mapped = to_neutral(items, parsed.get("instructions"))
        if isinstance(mapped, str):
            # The items as sent are what the audit log shows; never curated.
            return WireRequest(raw, parsed, model, mapped, items, facts)
        return WireRequest(raw, parsed, model, None, mapped.messages, facts, mapped)

    def rebuild(self, request: WireRequest, curated: Sequence[Message]) -> bytes:
        mapped: Mapped = request.state
        # Only `input` is replaced, in the client's bytes: every other key keeps its.
        return spliced(request.raw, request.body or {}, "input", rebuild(mapped, curated))

    def usage(self, tail: bytes) -> Usage | None:
        # Streamed, usage comes in the `response.completed` event; earlier events carry
        # `"usage":null`, which the scan passes over.
        found = last_object(tail, b"usage", ("input_tokens", "output_tokens"))
        if found is None:
            return None
        return Usage(
            input_tokens=count_of(found, "input_tokens"),
            cached_tokens=count_of(found, "input_tokens_details", "cached_tokens"),
            output_tokens=count_of(found, "output_tokens"),
            reasoning_tokens=count_of(found, "output_tokens_details", "reasoning_tokens"),
            cache_write_tokens=cache_writes(found, "input_tokens_details"),
        )

    def assemble(self, body: bytes) -> Assembled:
        return assemble(body)


def _skip(parsed: dict[str, object], items: object) -> str | None:
    if parsed.get("previous_response_id") is not None or parsed.get("conversation") is not None:
        return SERVER_STATE
    if not isinstance(items, list):
        return STRING_INPUT
    return None if items else "no_messages"


RESPONSES = ResponsesAPI()
