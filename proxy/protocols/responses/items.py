"""A Responses request's `instructions` and `input` items as neutral chat messages.

The curators know one message model (chat completions'), and their invariants are what
keep a Responses request valid once it is mapped like this:
- a `message` item is a chat message of its role, its content mapped part by part
  (`parts`); system and developer messages are pinned as in chat;
- `instructions` is a system message in front, so it is pinned; it is never written
  back (the field goes upstream as the client sent it);
- consecutive calls (`function_call`, `custom_tool_call`, `local_shell_call`, ...) are
  one assistant `tool_calls` message and their outputs its `tool` results, joined by call
  id, so the unit rule keeps every call with its output;
- a `reasoning` item belongs to the item after it: it rides in that item's message as an
  opaque content part, so the two stand or fall together and no curator edits either;
- any other item (`item_reference`, compaction items, hosted-tool calls, `mcp_call`,
  unknown types) is an assistant message whose content is the item itself: kept
  verbatim and in place, dropped only as a whole unit.
Opaque parts are priced by their size (`policies.images.opaque_part_tokens`: JSON
tokens, or 1 token per 4 bytes past 8 KiB), which errs high for encrypted reasoning.

Each neutral message carries `GROUP`, the index of the items it stands for (an int: the
counting formula prices only strings, so it costs nothing). `rebuild` maps curated
messages back through it. A list the chat ordering rules cannot express (an output far
from its call, a call without output, a reasoning item with nothing after it) is not
curated: `to_neutral` returns a skip reason and the request goes as sent.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from proxy.protocols.responses.kinds import answered_ids, call_id, kind, output_id
from proxy.protocols.responses.parts import to_neutral_content

GROUP = "_responses_group"
"""Key of a neutral message: index of its `Group` (absent on a summary a curator wrote)."""
INSTRUCTIONS = -1
"""`GROUP` of the system message standing for `instructions`."""

GroupKind = Literal["message", "calls", "output", "opaque"]


@dataclass(frozen=True, slots=True)
class Group:
    """The items one neutral message stands for, in order."""

    kind: GroupKind
    items: tuple[int, ...]
    primary: int
    """The item whose content the message carries (-1 for a calls message)."""
    editable: bool
    """True when a changed content can be written back in the client's shape."""


@dataclass(frozen=True, slots=True)
class Mapped:
    """A request's items, the neutral messages for them, and how one maps to the other."""

    items: Sequence[Mapping[str, Any]]
    messages: list[dict[str, Any]]
    groups: tuple[Group, ...]
    offset: int = 0
    """1 when `messages` starts with the `instructions` message."""

    def neutral(self, n: int) -> dict[str, Any]:
        """The neutral message of group `n`."""
        return self.messages[n + self.offset]


class _Builder:
    """Walks the items once, grouping them; local to one `to_neutral` call."""

    def __init__(self, items: Sequence[Mapping[str, Any]]) -> None:
        self.items = items
        self.answered = answered_ids(items)
        self.groups: list[list[int]] = []
        self.kinds: list[GroupKind] = []
        self.reasoning: list[int] = []
        self.pending: Counter[str] = Counter()
        self.block: int | None = None
        """The open calls group, while no output came yet (later calls join it)."""

    def add(self, i: int) -> str | None:
        item = self.items[i]
        k = kind(item, self.answered)
        if k == "reasoning":
            self.reasoning.append(i)
            return None
        if k == "output":
            cid = output_id(item)
            if self.reasoning:
                return "reasoning_before_output"
            if cid is None or not self.pending[cid]:
                return "unpaired_output"
            self.pending[cid] -= 1
            self.block = None
            self._group("output", [i])
            return None
        if k == "call" and self.block is not None:
            self.groups[self.block].extend([*self.reasoning, i])
            self.reasoning.clear()
            self.pending[call_id(item) or ""] += 1
            return None
        if +self.pending:
            return "unanswered_call"
        self.block = None
        if k == "call":
            self.pending[call_id(item) or ""] += 1
            self.block = len(self.groups)
            self._group("calls", [i])
            return None
        self._group("message" if k == "message" else "opaque", [i])
        return None

    def _group(self, k: GroupKind, items: list[int]) -> None:
        self.groups.append([*self.reasoning, *items])
        self.kinds.append(k)
        self.reasoning.clear()

    def finish(self) -> str | None:
        if self.reasoning:
            return "orphan_reasoning"
        return "unanswered_call" if +self.pending else None


def to_neutral(items: Sequence[object], instructions: object = None) -> Mapped | str:
    """The mapped request, or why it cannot be curated (a skip reason)."""
    if not all(isinstance(item, dict) for item in items):
        return "bad_items"
    checked: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    builder = _Builder(checked)
    for i in range(len(checked)):
        problem = builder.add(i)
        if problem is not None:
            return problem
    problem = builder.finish()
    if problem is not None:
        return problem
    groups = tuple(
        _frozen(checked, k, tuple(ids))
        for k, ids in zip(builder.kinds, builder.groups, strict=True)
    )
    messages = [_message(checked, g, n) for n, g in enumerate(groups)]
    if instructions is not None:
        # A string as chat has it; any other shape is priced by its size, never edited.
        content = instructions if isinstance(instructions, str) else [instructions]
        messages.insert(0, {"role": "system", "content": content, GROUP: INSTRUCTIONS})
    offset = 0 if instructions is None else 1
    return Mapped(checked, messages, groups, offset)


def _frozen(items: Sequence[Mapping[str, Any]], k: GroupKind, ids: tuple[int, ...]) -> Group:
    if k == "calls":
        return Group(k, ids, -1, editable=True)
    primary = ids[-1]
    alone = len(ids) == 1  # no reasoning rides along
    field = "output" if k == "output" else "content"
    shaped = isinstance(items[primary].get(field), str | list)
    return Group(k, ids, primary, editable=k != "opaque" and alone and shaped)


def _message(items: Sequence[Mapping[str, Any]], group: Group, n: int) -> dict[str, Any]:
    riders = [items[i] for i in group.items if items[i].get("type") == "reasoning"]
    if group.kind == "calls":
        calls = [_call(items[i]) for i in group.items if items[i].get("type") != "reasoning"]
        return {"role": "assistant", "content": riders or None, "tool_calls": calls, GROUP: n}
    item = items[group.primary]
    if group.kind == "opaque":
        return {"role": "assistant", "content": [*riders, item], GROUP: n}
    if group.kind == "output":
        content = to_neutral_content(item["output"]) if group.editable else [item]
        return {"role": "tool", "tool_call_id": output_id(item), "content": content, GROUP: n}
    content = to_neutral_content(item.get("content"))
    if riders:
        parts = content if isinstance(content, list) else [{"type": "text", "text": content}]
        content = [*riders, *parts]
    return {"role": item["role"], "content": content, GROUP: n}


def _call(item: Mapping[str, Any]) -> dict[str, Any]:
    cid = call_id(item)
    t = item.get("type")
    if t == "function_call":
        fn = {"name": item.get("name"), "arguments": item.get("arguments")}
        return {"id": cid, "type": "function", "function": fn}
    if t == "custom_tool_call":
        return {
            "id": cid,
            "type": "custom",
            "custom": {"name": item.get("name"), "input": item.get("input")},
        }
    # Shell, computer and MCP approval calls: priced by their JSON; no curator edits a
    # custom call's input.
    rest = {k: v for k, v in item.items() if k not in ("type", "id", "call_id", "status")}
    text = orjson.dumps(rest).decode()
    return {"id": cid, "type": "custom", "custom": {"name": str(t), "input": text}}
