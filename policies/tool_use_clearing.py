"""tool_use_clearing: once a conversation is big, old tool results make way (like
Anthropic's clear_tool_uses_20250919).

Nothing happens until the conversation exceeds `trigger_tokens`. Then older tool uses
are cleared: each result's content becomes `[tool result cleared: <tool>, <size>]`, and
with `clear_arguments` the call's arguments become `{"cleared": true}` (still valid JSON;
legacy `function_call` arguments stay, as do calls of non-function tool types). The
newest `keep` tool results stay whole, as do results of `exclude_tools`, pinned messages
and the last unit. Pairs stay valid: no message is removed.

Clearing works a tool block at a time (an assistant message with its results) and only in
steps worth a cache break. Prefix caching: the blocks that may be cleared are those before
the newest `keep` results, oldest first, each with the tokens clearing it would save.
They are grouped into chunks from the start of the conversation, each chunk ending at the
first block where its savings reach `clear_at_least`; only whole chunks are cleared. So:
- the cleared region only grows as the conversation grows, and a cleared block is the
  same bytes every turn (a placeholder depends only on its own result);
- the region moves a whole chunk at a time, each clearing at least `clear_at_least`
  tokens: the provider's cache breaks once per chunk, at the first newly cleared block,
  instead of every turn, and never for a small gain;
- `clear_at_least: 0` clears everything older than the newest `keep` results each turn.
Curating again changes nothing: cleared results save nothing more, so what is left never
completes a chunk.

With `min_fill` (`policies.fill`), chunks are cleared oldest first and stop before the
prompt would fall below that share of the budget, or below a quarter of `trigger_tokens`
when that is lower. A small window is never starved, and on a window far above the trigger
clearing still does what it is for, keeping a long session's prompt near the trigger: a
prompt of a quarter of the trigger (the newest `keep` results whole, every call still
named) is not a starved one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from policies import fill, params
from policies.base import Action, CurationContext, CuratorOutput
from policies.describe import content_bytes, size_label
from policies.marks import plain
from policies.messages import Message, ResultNames, Unit, opens_block, role, units
from policies.tokens import Plan

CLEARED_PREFIX = "[tool result cleared: "
CLEARED_ARGUMENTS = '{"cleared": true}'


def placeholder(tool: str, content: object) -> str:
    """What a cleared result says instead of its content."""
    return _placeholder(tool, content_bytes(content))


def _placeholder(tool: str, size: int) -> str:
    return f"{CLEARED_PREFIX}{tool or 'unnamed tool'}, {size_label(size)}]"


@dataclass(slots=True)
class _Block:
    """One tool block that may be cleared, and what clearing it would change."""

    unit: Unit
    replaced: dict[int, Message] = field(default_factory=dict)
    saved: int = 0
    tools: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ToolUseClearing:
    """Clears old tool results (and optionally their arguments) in cache-friendly steps."""

    name: ClassVar[str] = "tool_use_clearing"

    trigger_tokens: int = 100_000
    keep: int = 3
    clear_at_least: int = 0
    exclude_tools: tuple[str, ...] = ()
    clear_arguments: bool = False
    min_fill: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_fill", fill.check(self.min_fill))
        params.integer("trigger_tokens", self.trigger_tokens, minimum=0)
        params.integer("keep", self.keep, minimum=0)
        params.integer("clear_at_least", self.clear_at_least, minimum=0)
        object.__setattr__(self, "exclude_tools", params.names("exclude_tools", self.exclude_tools))
        params.boolean("clear_arguments", self.clear_arguments)

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        total = ctx.count_total(messages) if messages else 0
        if total <= self.trigger_tokens:
            return CuratorOutput(list(messages))
        blocks = self._clearable(messages, ctx)
        floor = fill.floor(messages, ctx, self.min_fill, cap=self.trigger_tokens // 4)  # see above
        cleared = 0
        for end in self._chunk_ends([b.saved for b in blocks]):
            if not floor.allows(sum(b.saved for b in blocks[cleared:end])):
                break
            cleared = end
        chosen = [b for b in blocks[:cleared] if b.replaced]
        if not chosen:
            return CuratorOutput(list(messages))
        out = list(messages)
        actions: list[Action] = []
        for block in chosen:
            for i, msg in block.replaced.items():
                out[i] = msg
            tools = ", ".join(sorted({repr(t) for t in block.tools}))
            what = f"{len(block.tools)} old result(s) of {tools}" if tools else "call arguments"
            reason = (
                f"cleared {what}: the conversation has {total:,} tokens, "
                f"over the trigger of {self.trigger_tokens:,}"
            )
            indexes = tuple(sorted(block.replaced))
            actions.append(Action(self.name, "replace", indexes, block.saved, reason))
        return CuratorOutput(out, tuple(actions))

    def _chunk_ends(self, savings: list[int]) -> list[int]:
        """Where each whole chunk of the oldest clearable blocks ends (exclusive).

        Chunks are cut greedily from the start of the conversation: each ends at the first
        block where its savings reach `clear_at_least`. A later block never moves an earlier
        chunk's end, so the cleared region only grows, a chunk at a time.
        """
        step = max(1, self.clear_at_least)
        ends: list[int] = []
        chunk = 0
        for k, saved in enumerate(savings, 1):
            chunk += saved
            if chunk >= step:
                ends.append(k)
                chunk = 0
        return ends

    def _clearable(self, messages: Sequence[Message], ctx: CurationContext) -> list[_Block]:
        """The blocks older than the newest `keep` results, oldest first, with their savings."""
        found = units(messages)
        results = [i for u in found if opens_block(messages[u.start]) for i in u.indexes()[1:]]
        if self.keep > len(results):
            return []
        newest = results[-self.keep] if self.keep else len(messages)
        pinned = ctx.pinned(messages)
        blocks: list[_Block] = []
        for unit in found[:-1]:
            if unit.stop > newest:
                break
            if opens_block(messages[unit.start]) and pinned.isdisjoint(unit.indexes()):
                blocks.append(self._plan(messages, unit, ctx))
        return blocks

    def _plan(self, messages: Sequence[Message], unit: Unit, ctx: CurationContext) -> _Block:
        """What clearing this block would replace, and the tokens it would save."""
        head = messages[unit.start]
        names = ResultNames(ctx.tool_names(head), head)
        block = _Block(unit)
        # (id, k): the k-th call with that id, which the k-th result with it answers.
        cleared_ids: set[tuple[str, int]] = set()
        for i in unit.indexes()[1:]:
            msg = messages[i]
            tid = msg.get("tool_call_id")
            tool, nth = _tool_of(msg, names)
            if tool in self.exclude_tools:
                continue
            text = plain(msg.get("content"))  # a placeholder may be a marked part (marks)
            if not (text is not None and text.startswith(CLEARED_PREFIX)):
                new, saved = _cleared(msg, tool, ctx)
                if saved <= 0:
                    continue
                block.replaced[i], block.saved = new, block.saved + saved
                block.tools.append(tool)
            if isinstance(tid, str) and role(msg) == "tool":
                cleared_ids.add((tid, nth))
        if self.clear_arguments and cleared_ids:
            new_head = _without_arguments(head, cleared_ids)
            saved = ctx.count(head) - ctx.count(new_head)
            if saved > 0:
                block.replaced[unit.start], block.saved = new_head, block.saved + saved
        return block


def _cleared(msg: Message, tool: str, ctx: CurationContext) -> tuple[Message, int]:
    """`msg` with its placeholder, and the tokens that saves. A placeholder depends on the
    message and its tool only, so its size and count are remembered with the message."""
    made: list[str] = []

    def plan() -> Plan:
        size = ctx.content_bytes(msg.get("content"))
        made.append(_placeholder(tool, size))
        return (size, ctx.count_text(made[0]))

    tag = b"|clear|" + tool.encode("utf-8", "surrogatepass")
    size, tokens = ctx.recall(msg, tag, plan)
    new = ctx.with_content(msg, made[0] if made else _placeholder(tool, size), tokens)
    return new, ctx.count(msg) - ctx.count(new)


def _tool_of(msg: Message, names: ResultNames) -> tuple[str, int]:
    """The tool a result's call names, and which call of its id it answers."""
    if role(msg) == "function":
        name = msg.get("name")
        return (name if isinstance(name, str) else ""), 0
    return names.answer(msg.get("tool_call_id"))


def _without_arguments(head: Message, ids: set[tuple[str, int]]) -> Message:
    """`head` with the arguments of the calls in `ids` ((id, k): the k-th call with that
    id) replaced by `CLEARED_ARGUMENTS`."""
    calls = head.get("tool_calls")
    if not isinstance(calls, list):
        return head
    out: list[Any] = []
    seen: dict[str, int] = {}
    for call in calls:
        fn = call.get("function") if isinstance(call, Mapping) else None
        cid = call.get("id") if isinstance(call, Mapping) else None
        if not isinstance(cid, str):
            out.append(call)
            continue
        nth = seen[cid] = seen.get(cid, -1) + 1
        if (cid, nth) in ids and isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
            call = {**call, "function": {**fn, "arguments": CLEARED_ARGUMENTS}}
        out.append(call)
    return {**head, "tool_calls": out}
