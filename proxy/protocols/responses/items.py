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
from typing import Any, NamedTuple

import orjson

from proxy.protocols.responses.grouping import KINDS, Builder, GroupKind
from proxy.protocols.responses.kinds import call_id, output_id
from proxy.protocols.responses.parts import to_neutral_content

GROUP = "_responses_group"
"""Key of a neutral message: index of its `Group` (absent on a summary a curator wrote)."""
INSTRUCTIONS = -1
"""`GROUP` of the system message standing for `instructions`."""


class Group(NamedTuple):
    """The items one neutral message stands for, in order (a tuple: one is made per
    message of every request, and a frozen dataclass costs ten times as much to build)."""

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


def to_neutral(items: Sequence[object], instructions: object = None) -> Mapped | str:
    """The mapped request, or why it cannot be curated (a skip reason)."""
    for item in items:  # a plain loop: this runs on every request
        if type(item) is not dict:
            return "bad_items"
    checked: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    builder = Builder(checked)
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
        if len(ids) == 1 and (k == "message" or k == "output"):
            group, message = _single(checked[primary], k, primary, n)  # most groups
        elif k != "calls" or (found := _function_calls(checked, ids, primary, n)) is None:
            group = _frozen(checked, k, tuple(ids), primary)
            message = _message(checked, group, n)
        else:
            group, message = found
        groups.append(group)
        messages.append(message)
    return Mapped(checked, messages, tuple(groups), 0 if instructions is None else 1)


def _single(
    item: Mapping[str, Any], k: GroupKind, primary: int, n: int
) -> tuple[Group, dict[str, Any]]:
    """A message or a call output alone: what `_frozen` and `_message` make of it, inlined."""
    value = item.get("output" if k == "output" else "content")
    editable = type(value) is str or type(value) is list
    content = value if type(value) is str else to_neutral_content(value)
    if k == "message":
        message = {"role": item["role"], "content": content, GROUP: n}
    else:
        result = content if editable else [item]
        message = {"role": "tool", "tool_call_id": output_id(item), "content": result, GROUP: n}
    return Group(k, (primary,), primary, editable), message


def _function_calls(
    items: Sequence[Mapping[str, Any]], ids: list[int], primary: int, n: int
) -> tuple[Group, dict[str, Any]] | None:
    """The usual calls group, function calls alone or after the message they came with,
    built in one pass (what `_frozen` and `_message` make of it); None for any other."""
    calls: list[dict[str, Any]] = []
    for i in ids:
        if i == primary:
            continue
        item = items[i]
        if item.get("type") != "function_call":
            return None
        cid = item.get("call_id")
        fn = {"name": item.get("name"), "arguments": item.get("arguments")}
        calls.append({"id": cid if type(cid) is str else None, "type": "function", "function": fn})
    content: object = None
    editable = False
    if primary >= 0:
        value = items[primary].get("content")
        editable = type(value) is str or type(value) is list
        content = value if type(value) is str else to_neutral_content(value)
    message = {"role": "assistant", "content": content, "tool_calls": calls, GROUP: n}
    return Group("calls", tuple(ids), primary, editable), message


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
    calls = [_call(items[i]) for i in group.items if KINDS.get(items[i].get("type")) == "call"]
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
