"""The client's prompt-cache breakpoints on neutral messages, kept through curation.

A breakpoint is a `cache_control` the client set on a content part (OpenRouter and LiteLLM
take Anthropic's on chat parts; the Messages protocol maps text blocks to parts that keep
it), or on a whole message (LiteLLM's shorthand; a Messages tool result as mapped). It
asks the provider to cache the prompt up to the end of that part. The rule every curator
keeps (docs/cache.md, "Client cache controls"):

- a marked part stays in its message, in its place, as its own part, with the client's
  value, for as long as the message is kept, also when its text is cut;
- a cut never lands between a breakpoint and the content it covers: text is never joined
  across a breakpoint, so parts are cut as one text only when none but the last is marked
  (`joinable`), and the cut part carries that last mark, which still ends the content;
- a content replaced whole (a placeholder, a description, a pointer) becomes one text part
  carrying the content's last mark (`carried`): the breakpoint stays at the end of what
  now stands for the content it covered;
- a message curation drops takes its breakpoints with it: moving them back is the
  protocol's (`proxy.protocols.anthropic.breakpoints`); chat has no limit to keep under.
Curation never adds a breakpoint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.messages import MAPPING, Content, Message

CACHE_CONTROL = "cache_control"


def last_mark(content: object) -> Any:
    """The `cache_control` of the last marked part of a content array (None: none)."""
    if type(content) is not list:
        return None
    for part in reversed(content):
        if isinstance(part, MAPPING) and CACHE_CONTROL in part:
            return part[CACHE_CONTROL]
    return None


def marked(msg: Message) -> bool:
    """Whether the message carries a breakpoint (on itself or on one of its parts); False
    for what is not a message (a skipped request's `messages` may hold anything)."""
    if not isinstance(msg, MAPPING):
        return False
    return CACHE_CONTROL in msg or last_mark(msg.get("content")) is not None


def joinable(parts: Sequence[object]) -> bool:
    """Whether these parts' texts may be cut as one: no part before the last is marked."""
    return not any(isinstance(p, MAPPING) and CACHE_CONTROL in p for p in parts[:-1])


def carried(old: object, new: Content) -> Content:
    """`new`, a rewrite of the content `old`, with `old`'s last breakpoint kept on it."""
    mark = last_mark(old)
    if mark is None or last_mark(new) is not None:
        return new
    if isinstance(new, str):
        return [{"type": "text", "text": new, CACHE_CONTROL: mark}] if new else new
    for at in range(len(new) - 1, -1, -1):
        part = new[at]
        if isinstance(part, MAPPING) and part.get("type") == "text":
            return [*new[:at], {**part, CACHE_CONTROL: mark}, *new[at + 1 :]]
    return new


def unmarked(msg: Message) -> Message:
    """`msg` without breakpoints: what a provider caches of it (a breakpoint is no part of
    the cached bytes, so a message marked one turn and not the next is the same block)."""
    content = msg.get("content")
    if type(content) is list:
        content = [
            {k: v for k, v in p.items() if k != CACHE_CONTROL}
            if isinstance(p, MAPPING) and CACHE_CONTROL in p
            else p
            for p in content
        ]
    return {**{k: v for k, v in msg.items() if k != CACHE_CONTROL}, "content": content}


def plain(content: object) -> str | None:
    """The text of a string content, or of a content that is one text part (a rewrite
    `carried` wrapped to keep its mark); None otherwise."""
    if isinstance(content, str):
        return content
    if type(content) is list and len(content) == 1:
        part = content[0]
        text = part.get("text") if isinstance(part, Mapping) else None
        return text if isinstance(text, str) and part.get("type") == "text" else None
    return None
