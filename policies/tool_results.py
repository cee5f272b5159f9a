"""tool_result_truncation: cuts oversized tool results to head + marker + tail.

Agents' histories are mostly tool output: file dumps, search hits, logs. The start and the
end of such output usually carry what matters (headers, the error at the bottom), so a
result over `max_tokens` keeps a head and a tail around a marker naming how much was cut.
The whole cut result is at most `max_tokens` tokens, so curating it again changes nothing.

Shapes: string content is cut. A content array made only of text parts is cut as its
joined text and becomes one text part (keeping the first part's other keys); arrays with
images, audio or files are left alone, since cutting them would mean guessing which part
matters. The newest `keep_recent` results stay whole: the model is usually acting on them.
Whatever `keep_recent` says, the results of the newest turn (the last unit: the last
assistant step with all its results) are never cut here: the model has not seen them yet,
and a cut there hides what it is about to act on (token_budget alone may shorten them,
when they alone exceed the budget).
With `min_fill` (`policies.fill`), cuts go oldest first, and a cut that would take the
prompt below that share of the budget is not made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from policies import fill, params
from policies.base import Action, CurationContext, CuratorOutput
from policies.messages import Message, ResultNames, is_result, opens_block, role, units
from policies.shorten import Cut, as_content, cuttable_text, head_only, head_tail
from policies.tokens import TOKENS_PER_MESSAGE


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
    min_fill: float = 0.0

    def __post_init__(self) -> None:
        params.integer("max_tokens", self.max_tokens, minimum=1)
        object.__setattr__(self, "min_fill", fill.check(self.min_fill))
        params.integer("keep_recent", self.keep_recent, minimum=0)
        object.__setattr__(
            self, "head_ratio", params.ratio("head_ratio", self.head_ratio, allow_zero=True)
        )
        object.__setattr__(self, "exclude_tools", params.names("exclude_tools", self.exclude_tools))

    def cuts_above(self) -> int:
        return self.max_tokens

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        # The counts are known (the chain counted every message first): when none is over
        # the limit, no result can be cut, and finding the candidates is all this would do.
        over = self.max_tokens + TOKENS_PER_MESSAGE
        if all(n <= over for n in ctx.count_each(messages)):
            return CuratorOutput(list(messages))
        out = list(messages)
        actions: list[Action] = []
        floor = fill.floor(messages, ctx, self.min_fill)
        for i, tool in self._candidates(messages, ctx):
            msg = messages[i]
            before = ctx.count(msg)
            # Most results are judged by their (known) count alone.
            if before - TOKENS_PER_MESSAGE <= self.max_tokens:
                continue
            cut = self._cut_message(msg, before, ctx)
            if cut is None or (floor.lowest and fill.cut_to_fit(msg)):
                continue
            after = ctx.count(cut)
            if not floor.allows(before - after):
                continue
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
        names = ResultNames({})
        for i, msg in enumerate(messages):
            if opens_block(msg):
                names = ResultNames(ctx.tool_names(msg), msg)
            elif is_result(msg):
                results.append((i, _function_name(msg, names)))
        recent = len(results) - self.keep_recent
        newest = units(messages)[-1].start if messages else 0
        return [
            (i, tool)
            for k, (i, tool) in enumerate(results)
            if k < recent and i < newest and i not in pinned and tool not in self.exclude_tools
        ]

    def _cut_message(self, msg: Message, before: int, ctx: CurationContext) -> Message | None:
        """The shortened message, or None when it is within bounds or has no cuttable text."""
        found = cuttable_text(msg)
        if found is None:
            return None
        text, parts = found
        # A result is resent every turn: its cut is planned once, with the message.
        tag = f"|{self.name}|{self.max_tokens}|{self.head_ratio!r}".encode()
        plan = ctx.recall(msg, tag, lambda: self._plan(msg, text, before, ctx) or ())
        if not plan:
            return None
        cut = Cut.of(plan)
        return ctx.with_content(
            msg, as_content(cut.apply(text, marker), parts), cut.tokens, tag=tag
        )

    def _plan(self, msg: Message, text: str, before: int, ctx: CurationContext) -> Cut | None:
        """How to cut `text` to at most `max_tokens` tokens; None when it is within."""
        # A string content costs what the message costs without it; parts are re-joined.
        string = isinstance(msg.get("content"), str)
        total = before - ctx.count_bare(msg) if string else ctx.count_text(text)
        if total <= self.max_tokens:
            return None
        cut = head_tail(ctx, text, total, self.max_tokens, marker, self.head_ratio)
        return cut if cut is not None else head_only(ctx, text, self.max_tokens)


def _function_name(msg: Message, names: ResultNames) -> str:
    if role(msg) == "function":
        name = msg.get("name")
        return name if isinstance(name, str) else ""
    return names.answer(msg.get("tool_call_id"))[0]
