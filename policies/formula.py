"""OpenAI's cookbook formula for a chat message's prompt tokens, with what it leaves out.

3 per message, plus the encoded string values, plus 1 for a `name` (the cookbook, which
the API's `prompt_tokens` match). A call the assistant made costs `CALL_TOKENS` plus its
name and arguments: the API reports exactly that for a legacy `function_call`. For
`tool_calls` OpenAI has published nothing; each call is counted like a `function_call`
plus its `id`, which is what a history of short-id calls measured upstream needs, so the
count can be a few tokens high for long ids, never low. A tool message's `tool_call_id`
counts as a string value. Text parts after the first cost `PART_SEPARATOR` more (how
parts are joined is not published). Image, audio and other parts are priced by
`policies.images` (Responses' own image shapes by `policies.image_parts`).
The formula is a sum over the message's keys, so replacing one value changes the count
by exactly that value's difference; curators rely on that to count what they rewrite
without encoding the rest again (`CurationContext.with_content`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.encoders import Encoder, counter_of
from policies.image_parts import image_tokens, is_image_part
from policies.images import (
    ImagePricing,
    audio_part_tokens,
    image_part_tokens,
    opaque_part_tokens,
)
from policies.messages import MAPPING, Message
from policies.splits import PROFILE_MIN_CHARS, Profile, splits

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
CALL_TOKENS = 3
"""Per call the assistant made, beyond its name and arguments (measured for function_call)."""
PART_SEPARATOR = 1


class Sink:
    """What counting a request's new messages leaves for its curators, by `id()`: the split
    profiles of long string contents (each holds its text), and each message's tokens
    without its content (its "bare" count: what a rewritten content is added to)."""

    __slots__ = ("bare", "profile_chars", "profiles")

    def __init__(self) -> None:
        self.profiles: dict[int, Profile] = {}
        self.bare: dict[int, int] = {}
        self.profile_chars: int | None = PROFILE_MIN_CHARS
        """Profile strings at least this long (never fewer than PROFILE_MIN_CHARS); None:
        none."""


def count(enc: Encoder, text: str) -> int:
    return counter_of(enc)(text) if text else 0


def message_tokens(
    msg: Message, enc: Encoder, sink: Sink | None = None, images: ImagePricing = "tiles"
) -> int:
    """The message's tokens; with a `sink`, also what `Sink` keeps. `images`: how the
    model counts image parts (`policies.images.pricing_for`)."""
    if not isinstance(msg, MAPPING):
        return TOKENS_PER_MESSAGE
    n = TOKENS_PER_MESSAGE
    content = 0
    for key, value in msg.items():
        if key == "content":
            if sink is not None and isinstance(value, str):
                content = _profiled(value, enc, sink)
            else:
                content = content_tokens(value, enc, images)
        elif key == "tool_calls":
            if isinstance(value, list):
                n += sum(_call_tokens(c, enc) for c in value if isinstance(c, MAPPING))
        elif key == "function_call":
            n += _function_tokens(value, enc) + (CALL_TOKENS if isinstance(value, MAPPING) else 0)
        elif isinstance(value, str):
            n += count(enc, value) + (TOKENS_PER_NAME if key == "name" else 0)
    if sink is not None:
        sink.bare[id(msg)] = n
    return n + content


def _profiled(text: str, enc: Encoder, sink: Sink) -> int:
    least = sink.profile_chars
    rule = splits(enc) if least is not None and len(text) >= max(least, PROFILE_MIN_CHARS) else None
    if rule is None:
        return count(enc, text)
    profile = Profile(enc, text, rule)
    sink.profiles[id(text)] = profile
    return profile.total


def _call_tokens(call: Mapping[str, Any], enc: Encoder) -> int:
    fn = call.get("function")
    call_id = call.get("id")
    n = CALL_TOKENS + (count(enc, call_id) if isinstance(call_id, str) else 0)
    return n + _function_tokens(fn if isinstance(fn, Mapping) else call.get("custom"), enc)


def _function_tokens(fn: object, enc: Encoder) -> int:
    """A call's name and arguments (`input` for custom tools)."""
    if not isinstance(fn, Mapping):
        return 0
    fields = (fn.get(k) for k in ("name", "arguments", "input"))
    return sum(count(enc, v) for v in fields if isinstance(v, str))


def content_tokens(content: object, enc: Encoder, images: ImagePricing = "tiles") -> int:
    if isinstance(content, str):
        return count(enc, content)
    if not isinstance(content, list):
        return 0
    n = 0
    texts = 0
    for part in content:
        if not isinstance(part, MAPPING):
            continue
        kind = part.get("type")
        if kind in ("text", "refusal"):
            value = part.get(kind)
            if isinstance(value, str):
                n += count(enc, value) + (PART_SEPARATOR if texts else 0)
                texts += 1
        elif kind == "image_url":
            n += image_part_tokens(part.get("image_url"), images)
        elif kind == "input_audio":
            n += audio_part_tokens(part.get("input_audio"))
        elif is_image_part(part):
            n += image_tokens(part, images, lambda s: count(enc, s))
        else:
            n += opaque_part_tokens(part, lambda s: count(enc, s))
    return n
