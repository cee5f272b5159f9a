"""Cutting a long text to a head and a tail around a marker: the shared part of the
curators that shorten contents (`tool_result_truncation`, `token_budget`).

A cut is planned as numbers (`Cut`), not as the cut text, so a curator can remember the
plan with the message (`CurationContext.recall`) and rebuild the text each turn for free.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from policies.base import CurationContext
from policies.marks import carried, joinable
from policies.messages import Content, Message
from policies.tokens import Plan

Marker = Callable[[int], str]
"""The text standing in for a cut middle, given how many tokens it stands for."""


class Cut(NamedTuple):
    """Keep `head` characters, a marker naming `removed` tokens (none when not `marked`),
    then `tail` characters: `tokens` tokens in all."""

    head: int
    tail: int
    removed: int
    tokens: int
    marked: bool = True

    @classmethod
    def of(cls, plan: Plan) -> Cut:
        """The cut a plan remembered with `CurationContext.recall` holds."""
        head, tail, removed, tokens, marked = plan
        return cls(head, tail, removed, tokens, bool(marked))

    def apply(self, text: str, marker: Marker) -> str:
        middle = marker(self.removed) if self.marked else ""
        return text[: self.head] + middle + text[len(text) - self.tail :]


def head_tail(
    ctx: CurationContext, text: str, total: int, cap: int, marker: Marker, head_ratio: float
) -> Cut | None:
    """The longest head + marker + tail of `text` (of `total` tokens) within `cap` tokens,
    `head_ratio` of the room given to the head; None when not even the marker fits."""
    n = len(text)
    room = cap - ctx.count_text(marker(total))
    while room > 0:
        head_n = int(room * head_ratio)
        head = ctx.fit_head(text, head_n)
        tail = ctx.fit_tail(text, room - head_n)
        removed = max(0, total - ctx.count_span(text, 0, head) - ctx.count_span(text, n - tail, n))
        # Tokens can merge across the joins, so the sum of the parts is not the count.
        tokens = ctx.count_joined(text, head, marker(removed), tail)
        if tokens <= cap:
            return Cut(head, tail, removed, tokens)
        room -= tokens - cap
    return None


def head_only(ctx: CurationContext, text: str, cap: int) -> Cut:
    """The longest plain start of `text` within `cap` tokens (no marker): for caps too
    small to hold one."""
    n = cap
    head = ctx.fit_head(text, n)
    while n > 0 and (size := ctx.count_span(text, 0, head)) > cap:
        n -= size - cap
        head = ctx.fit_head(text, n)
    head = head if n > 0 else 0
    return Cut(head, 0, 0, ctx.count_span(text, 0, head), marked=False)


def cuttable_text(msg: Message) -> tuple[str, list[Mapping[str, Any]] | None] | None:
    """(text, None) for a non-empty string content, (joined text, parts) for an array of
    text parts only; else None: arrays with images, audio or files are not cut, since that
    would mean guessing which part matters, nor are parts with a client's breakpoint on
    any but the last (a joined cut would land between it and the text it covers)."""
    content = msg.get("content")
    if isinstance(content, str):
        return (content, None) if content else None
    if not isinstance(content, list) or not content:
        return None
    for part in content:
        if not (
            isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            return None
    if not joinable(content):
        return None
    return "".join(p["text"] for p in content), list(content)


def as_content(text: str, parts: list[Mapping[str, Any]] | None) -> Content:
    """A cut text as the content it came from: a string, or one text part (keeping the
    first part's other keys, and the last part's breakpoint: `marks.carried`)."""
    return text if parts is None else carried(parts, [{**parts[0], "text": text}])
