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
from policies.messages import Message, is_result, opens_block, role, tool_names
from policies.tokens import TOKENS_PER_MESSAGE, TokenCounter


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

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        out = list(messages)
        actions: list[Action] = []
        for i, tool in self._candidates(messages, ctx):
            msg = messages[i]
            cut = self._cut_message(msg, ctx)
            if cut is None:
                continue
            before = ctx.counter.count_message(msg, ctx.model)
            after = ctx.counter.count_message(cut, ctx.model)
            out[i] = cut
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
        names: dict[str, str] = {}
        for i, msg in enumerate(messages):
            if opens_block(msg):
                names = tool_names(msg)
            elif is_result(msg):
                results.append((i, _function_name(msg, names)))
        recent = len(results) - self.keep_recent
        return [
            (i, tool)
            for k, (i, tool) in enumerate(results)
            if k < recent and i not in pinned and tool not in self.exclude_tools
        ]

    def _cut_message(self, msg: Message, ctx: CurationContext) -> Message | None:
        """The shortened message, or None when it is within bounds or has no cuttable text."""
        counter, model = ctx.counter, ctx.model
        content = msg.get("content")
        # The message count is cached, so most results are judged without re-tokenizing.
        if counter.count_message(msg, model) - TOKENS_PER_MESSAGE <= self.max_tokens:
            return None
        if isinstance(content, str):
            total = counter.count_message(msg, model) - counter.count_message(
                {**msg, "content": ""}, model
            )
            if total <= self.max_tokens:
                return None
            return {**msg, "content": self._shorten(content, total, counter, model)}
        parts = _text_parts(content)
        if parts is None:
            return None
        text = "".join(p["text"] for p in parts)
        total = counter.count_text(text, model)
        if total <= self.max_tokens:
            return None
        cut = self._shorten(text, total, counter, model)
        return {**msg, "content": [{**parts[0], "text": cut}]}

    def _shorten(self, text: str, total: int, counter: TokenCounter, model: str) -> str:
        """head + marker + tail of at most `max_tokens` tokens (`total` is the text's count)."""
        room = self.max_tokens - counter.count_text(marker(total), model)
        while room > 0:
            head_n = int(room * self.head_ratio)
            head = counter.head(text, model, head_n)
            tail = counter.tail(text, model, room - head_n)
            kept = counter.count_text(head, model) + counter.count_text(tail, model)
            out = head + marker(max(0, total - kept)) + tail
            # Tokens can merge across the joins, so the sum of the parts is not the count.
            over = counter.count_text(out, model) - self.max_tokens
            if over <= 0:
                return out
            room -= over
        return _head_within(text, self.max_tokens, counter, model)


def _head_within(text: str, limit: int, counter: TokenCounter, model: str) -> str:
    """A plain prefix of at most `limit` tokens, for limits too small to hold the marker."""
    n = limit
    cut = counter.head(text, model, n)
    while n > 0 and (size := counter.count_text(cut, model)) > limit:
        n -= size - limit
        cut = counter.head(text, model, n)
    return cut if n > 0 else ""


def _function_name(msg: Message, names: Mapping[str, str]) -> str:
    if role(msg) == "function":
        name = msg.get("name")
        return name if isinstance(name, str) else ""
    tid = msg.get("tool_call_id")
    return names.get(tid, "") if isinstance(tid, str) else ""


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
