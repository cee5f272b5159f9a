"""Chat completions (`POST /v1/chat/completions`): the first protocol, and the neutral model.

Its messages are what the curators see already, so parsing only checks their shape, the
policy's facts are the body itself, and a rebuild replaces `messages` and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

from policies.messages import Message
from proxy.config.limits import Limits
from proxy.protocols.base import Assembled, Usage, WireRequest
from proxy.protocols.chat.assembly import assemble
from proxy.protocols.splice import spliced
from proxy.protocols.vendor import Vendor
from proxy.protocols.wire import cache_writes, count_of, last_object, open_body


class ChatCompletions:
    """The `WireProtocol` of OpenAI's chat completions API."""

    __slots__ = ()
    name = "chat"
    method = "POST"
    vendor: Vendor = "openai"
    path = "/v1/chat/completions"
    internal_keys: frozenset[str] = frozenset()
    skip_reasons = frozenset({"invalid_json", "not_an_object", "no_messages", "bad_messages"})

    def parse(self, raw: bytes, limits: Limits) -> WireRequest:
        opened = open_body(raw, limits, "messages", "messages")
        if isinstance(opened, WireRequest):
            return opened
        parsed, messages, model = opened
        if not isinstance(messages, list) or not messages:
            return WireRequest(raw, parsed, model, "no_messages", (), parsed)
        skip = None
        for msg in messages:  # a plain loop: this runs on every request
            if not isinstance(msg, dict) or not isinstance(msg.get("role"), str):
                skip = "bad_messages"
                break
        return WireRequest(raw, parsed, model, skip, messages, parsed)

    def rebuild(self, request: WireRequest, curated: Sequence[Message]) -> bytes:
        # Only `messages` is replaced, in the client's bytes: every other key keeps its.
        return spliced(request.raw, request.body or {}, "messages", curated)

    def usage(self, tail: bytes) -> Usage | None:
        # Streamed, usage comes in the last chunk (with stream_options.include_usage);
        # earlier chunks carry `"usage":null`, which the scan passes over.
        found = last_object(tail, b"usage", ("prompt_tokens", "completion_tokens"))
        if found is None:
            return None
        return Usage(
            input_tokens=count_of(found, "prompt_tokens"),
            cached_tokens=count_of(found, "prompt_tokens_details", "cached_tokens"),
            output_tokens=count_of(found, "completion_tokens"),
            reasoning_tokens=count_of(found, "completion_tokens_details", "reasoning_tokens"),
            cache_write_tokens=cache_writes(found, "prompt_tokens_details"),
        )

    def assemble(self, body: bytes) -> Assembled:
        return assemble(body)


CHAT = ChatCompletions()
