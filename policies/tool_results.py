"""tool_result_truncation: cuts oversized tool results to head + marker + tail.

Agents' histories are mostly tool output: file dumps, search hits, logs. The start and the
end of such output usually carry what matters (headers, the error at the bottom), so a
result over `max_tokens` keeps a head and a tail around a marker naming how much was cut.
The whole cut result is at most `max_tokens` tokens, so curating it again changes nothing.

Shapes: string content is cut. A content array made only of text parts is cut as its
joined text and becomes one text part (keeping the first part's other keys); arrays with
images, audio or files are left alone, since cutting them would mean guessing which part
matters. The newest `keep_recent` results stay whole: the model is usually acting on them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from policies import params
from policies.base import Action, CurationContext, CuratorOutput
from policies.messages import Message, ResultNames, is_result, opens_block, role
from policies.tally import Tally
from policies.tokens import TOKENS_PER_MESSAGE, Plan


def marker(removed: int) -> str:
    """The text standing in for the cut middle of a result."""
    return f"\n\n[... {removed:,} tokens truncated by context-curator ...]\n\n"


@dataclass(frozen=True, slots=True)
class ToolResultTruncation:
    """Shortens tool and function results over `max_tokens` to head + marker + tail."""

    name: ClassVar[str] = "tool_result_truncation"

    max_tokens: int = 2000
    keep_recent: int = 2
    head_ratio: float = 0.7
    exclude_tools: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        params.integer("max_tokens", self.max_tokens, minimum=1)
        params.integer("keep_recent", self.keep_recent, minimum=0)
        object.__setattr__(
            self, "head_ratio", params.ratio("head_ratio", self.head_ratio, allow_zero=True)
        )
        object.__setattr__(self, "exclude_tools", params.names("exclude_tools", self.exclude_tools))

    def cuts_above(self) -> int:
        return self.max_tokens

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        tally = ctx.tally
        out = list(messages)
        actions: list[Action] = []
        for i, tool in self._candidates(messages, ctx):
            msg = messages[i]
            before = tally.one(msg)
            # Most results are judged by their (known) count alone.
            if before - TOKENS_PER_MESSAGE <= self.max_tokens:
                continue
            cut = self._cut_message(msg, before, tally)
            if cut is None:
                continue
            out[i] = cut
            after = tally.one(cut)
            label = f"{tool!r} result" if tool else "tool result"
            reason = f"{label} cut from {before:,} to {after:,} tokens"
            actions.append(Action(self.name, "truncate", (i,), before - after, reason))
        return CuratorOutput(out if actions else list(messages), tuple(actions))

    def _candidates(
        self, messages: Sequence[Message], ctx: CurationContext
    ) -> list[tuple[int, str]]:
        """(index, function name) of each result that may be cut, oldest first."""
        pinned = ctx.pinned(messages)
        results: list[tuple[int, str]] = []
        names = ResultNames({})
        for i, msg in enumerate(messages):
            if opens_block(msg):
                names = ResultNames(ctx.tally.tool_names(msg), msg)
            elif is_result(msg):
                results.append((i, _function_name(msg, names)))
        recent = len(results) - self.keep_recent
        return [
            (i, tool)
            for k, (i, tool) in enumerate(results)
            if k < recent and i not in pinned and tool not in self.exclude_tools
        ]

    def _cut_message(self, msg: Message, before: int, tally: Tally) -> Message | None:
        """The shortened message, or None when it is within bounds or has no cuttable text."""
        content = msg.get("content")
        parts = None if isinstance(content, str) else _text_parts(content)
        if parts is not None:
            text = "".join(p["text"] for p in parts)
        elif isinstance(content, str):
            text = content
        else:
            return None
        # A result is resent every turn: its cut is planned once, with the message.
        tag = f"|{self.name}|{self.max_tokens}|{self.head_ratio!r}".encode()
        head, tail, removed, after, bare = tally.remember(
            msg, tag, lambda: self._plan(msg, text, before, tally)
        )
        if head < 0:
            return None
        middle = marker(removed) if removed >= 0 else ""
        cut = text[:head] + middle + text[len(text) - tail :]
        new = {**msg, "content": cut if parts is None else [{**parts[0], "text": cut}]}
        tally.note(new, after, bare, source=(msg, tag))
        return new

    def _plan(self, msg: Message, text: str, before: int, tally: Tally) -> Plan:
        """(head chars, tail chars, tokens the marker names or -1 for none, tokens after,
        tokens without the content), or all -1 when the text is within bounds."""
        bare = tally.bare(msg)
        # A string content costs what the message costs without it; parts are re-joined.
        total = before - bare if isinstance(msg.get("content"), str) else tally.text(text)
        if total <= self.max_tokens:
            return (-1, -1, -1, -1, -1)
        head, tail, removed, tokens = self._shorten(text, total, tally)
        return (head, tail, removed, bare + tokens, bare)

    def _shorten(self, text: str, total: int, tally: Tally) -> Plan:
        """head + marker + tail of at most `max_tokens` tokens (`total` is the text's count):
        (head chars, tail chars, the marker's number or -1 for no marker, tokens)."""
        room = self.max_tokens - tally.text(marker(total))
        n = len(text)
        while room > 0:
            head_n = int(room * self.head_ratio)
            head = tally.fit(text, head_n, from_end=False)
            tail = tally.fit(text, room - head_n, from_end=True)
            removed = max(0, total - tally.span(text, 0, head) - tally.span(text, n - tail, n))
            # Tokens can merge across the joins, so the sum of the parts is not the count.
            tokens = tally.joined(text, head, marker(removed), tail)
            over = tokens - self.max_tokens
            if over <= 0:
                return (head, tail, removed, tokens)
            room -= over
        head = _head_within(text, self.max_tokens, tally)
        return (head, 0, -1, tally.span(text, 0, head))


def _head_within(text: str, limit: int, tally: Tally) -> int:
    """Characters of a plain prefix of at most `limit` tokens, for limits too small to hold
    the marker."""
    n = limit
    head = tally.fit(text, n, from_end=False)
    while n > 0 and (size := tally.span(text, 0, head)) > limit:
        n -= size - limit
        head = tally.fit(text, n, from_end=False)
    return head if n > 0 else 0


def _function_name(msg: Message, names: ResultNames) -> str:
    if role(msg) == "function":
        name = msg.get("name")
        return name if isinstance(name, str) else ""
    return names.answer(msg.get("tool_call_id"))[0]


def _text_parts(content: object) -> list[Mapping[str, Any]] | None:
    """The parts of a content array made only of text parts, else None."""
    if not isinstance(content, list) or not content:
        return None
    for part in content:
        if not (
            isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        ):
            return None
    return list(content)
