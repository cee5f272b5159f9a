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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from proxy.protocols.responses.kinds import CALLS, OUTPUTS, ROLES, call_id, output_id
from proxy.protocols.responses.parts import to_neutral_content

GROUP = "_responses_group"
"""Key of a neutral message: index of its `Group` (absent on a summary a curator wrote)."""
INSTRUCTIONS = -1
"""`GROUP` of the system message standing for `instructions`."""

GroupKind = Literal["message", "calls", "output", "opaque"]
_KINDS: dict[object, str] = {
    "message": "message",
    "reasoning": "reasoning",
    **dict.fromkeys(CALLS, "call"),
    **dict.fromkeys(OUTPUTS, "output"),
}


@dataclass(frozen=True, slots=True)
class Group:
    """The items one neutral message stands for, in order."""

    kind: GroupKind
    items: tuple[int, ...]
    primary: int
    """The item whose content the message carries (-1: none, for calls alone)."""
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

    __slots__ = (
        "approvals",
        "block",
        "groups",
        "items",
        "kinds",
        "open",
        "pending",
        "primaries",
        "riders",
    )

    def __init__(self, items: Sequence[Mapping[str, Any]]) -> None:
        self.items = items
        self.groups: list[list[int]] = []
        self.kinds: list[GroupKind] = []
        self.primaries: list[int] = []
        self.riders: list[int] = []
        """Reasoning items waiting for the item they belong to."""
        self.pending: dict[str, int] = {}
        self.open = 0
        """Calls still waiting for their output."""
        self.block = -1
        """The group later calls join: an assistant message or calls with no output yet."""
        self.approvals: frozenset[str] | None = None

    def add(self, i: int, item: Mapping[str, Any]) -> str | None:
        t = item.get("type")
        # Only a string type can name a kind (any JSON value may come: a list is unhashable).
        k = _KINDS.get(t, "opaque") if type(t) is str else "message" if t is None else "opaque"
        if k == "reasoning":
            self.riders.append(i)
            return None
        if k == "output":
            return self._output(i, item)
        if k == "call" and t == "mcp_approval_request" and call_id(item) not in self._answered():
            k = "opaque"  # the model may leave it pending: a unit of its own
        if k == "call":
            cid = call_id(item) or ""
            self.pending[cid] = self.pending.get(cid, 0) + 1
            self.open += 1
            if self.block >= 0:
                self.groups[self.block].extend(self.riders)
                self.groups[self.block].append(i)
                self.kinds[self.block] = "calls"
                self.riders.clear()
                return None
            self.block = self._group("calls", i, -1)
            return None
        if self.open:
            return "unanswered_call"
        said = k == "message" and item.get("role") in ROLES and "content" in item
        n = self._group("message" if said else "opaque", i, i)
        self.block = n if said and item.get("role") == "assistant" else -1
        return None

    def _answered(self) -> frozenset[str]:
        if self.approvals is None:  # once, and only for a list holding approval requests
            self.approvals = _approvals(self.items)
        return self.approvals

    def _output(self, i: int, item: Mapping[str, Any]) -> str | None:
        if self.riders:
            return "reasoning_before_output"
        cid = output_id(item)
        left = self.pending.get(cid, 0) if cid is not None else 0
        if not left:
            return "unpaired_output"
        self.pending[cid] = left - 1  # type: ignore[index]  # cid is a str when left > 0
        self.open -= 1
        self.block = -1
        self._group("output", i, i)
        return None

    def _group(self, k: GroupKind, i: int, primary: int) -> int:
        self.groups.append([*self.riders, i])
        self.kinds.append(k)
        self.primaries.append(primary)
        self.riders.clear()
        return len(self.groups) - 1

    def finish(self) -> str | None:
        if self.riders:
            return "orphan_reasoning"
        return "unanswered_call" if self.open else None


def _approvals(items: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The approval request ids some `mcp_approval_response` answers."""
    return frozenset(
        item["approval_request_id"]
        for item in items
        if item.get("type") == "mcp_approval_response"
        and type(item.get("approval_request_id")) is str
    )


def to_neutral(items: Sequence[object], instructions: object = None) -> Mapped | str:
    """The mapped request, or why it cannot be curated (a skip reason)."""
    for item in items:  # a plain loop: this runs on every request
        if type(item) is not dict:
            return "bad_items"
    checked: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    builder = _Builder(checked)
    add = builder.add
    for i, item in enumerate(checked):
        problem = add(i, item)
        if problem is not None:
            return problem
    problem = builder.finish()
    if problem is not None:
        return problem
    groups: list[Group] = []
    messages: list[dict[str, Any]] = []
    if instructions is not None:
        # A string as chat has it; any other shape is priced by its size, never edited.
        content = instructions if isinstance(instructions, str) else [_opaque(instructions)]
        messages.append({"role": "system", "content": content, GROUP: INSTRUCTIONS})
    shape = zip(builder.kinds, builder.groups, builder.primaries, strict=True)
    for n, (k, ids, primary) in enumerate(shape):
        group = _frozen(checked, k, tuple(ids), primary)
        groups.append(group)
        messages.append(_message(checked, group, n))
    return Mapped(checked, messages, tuple(groups), 0 if instructions is None else 1)


def _opaque(value: object) -> dict[str, Any]:
    return {"type": "instructions", "value": value}


def _frozen(
    items: Sequence[Mapping[str, Any]], k: GroupKind, ids: tuple[int, ...], primary: int
) -> Group:
    if primary < 0:
        return Group(k, ids, primary, editable=False)
    alone = len(ids) == 1 or (k == "calls" and not _has_riders(items, ids))
    value = items[primary].get("output" if k == "output" else "content")
    shaped = type(value) is str or type(value) is list
    return Group(k, ids, primary, editable=k != "opaque" and alone and shaped)


def _has_riders(items: Sequence[Mapping[str, Any]], ids: tuple[int, ...]) -> bool:
    return any(items[i].get("type") == "reasoning" for i in ids)


def _message(items: Sequence[Mapping[str, Any]], group: Group, n: int) -> dict[str, Any]:
    k = group.kind
    if len(group.items) == 1 and k != "calls":
        item = items[group.primary]
        if k == "message":
            return {"role": item["role"], "content": to_neutral_content(item["content"]), GROUP: n}
        if k == "output":
            result = to_neutral_content(item["output"]) if group.editable else [item]
            return {"role": "tool", "tool_call_id": output_id(item), "content": result, GROUP: n}
        return {"role": "assistant", "content": [item], GROUP: n}
    riders = [items[i] for i in group.items if items[i].get("type") == "reasoning"]
    content: Any = None
    if group.primary >= 0:
        item = items[group.primary]
        content = to_neutral_content(item.get("content"))
        if riders:
            text = content if isinstance(content, list) else [{"type": "text", "text": content}]
            content = [*riders, *text] if k != "opaque" else [*riders, item]
    elif riders:
        content = riders
    if k != "calls":
        role = items[group.primary].get("role") if k == "message" else "assistant"
        return {"role": role, "content": content, GROUP: n}
    calls = [_call(items[i]) for i in group.items if _KINDS.get(items[i].get("type")) == "call"]
    return {"role": "assistant", "content": content, "tool_calls": calls, GROUP: n}


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
