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
from proxy.protocols.responses.kinds import ROLES, call_id, output_id
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
    found = _plain(items) or _general(items)
    if isinstance(found, str):
        return found
    groups, messages = found
    if instructions is not None:
        # A string as chat has it; any other shape is priced by its size, never edited.
        content = instructions if isinstance(instructions, str) else [_opaque(instructions)]
        messages.insert(0, {"role": "system", "content": content, GROUP: INSTRUCTIONS})
    checked: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    return Mapped(checked, messages, tuple(groups), 0 if instructions is None else 1)


def _general(items: Sequence[object]) -> tuple[list[Group], list[dict[str, Any]]] | str:
    """Every item kind, grouped by `grouping.Builder`; or a skip reason."""
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
    shape = zip(builder.kinds, builder.groups, builder.primaries, strict=True)
    for n, (k, ids, primary) in enumerate(shape):
        group = _frozen(checked, k, tuple(ids), primary)
        groups.append(group)
        messages.append(_message(checked, group, n))
    return groups, messages


def _plain(items: Sequence[object]) -> tuple[list[Group], list[dict[str, Any]]] | None:
    """The usual list (messages, function calls and their outputs) mapped in one walk, as
    `_general` maps it (its cost is most of what a Responses request adds to a chat one);
    None for any other list, which `_general` then maps or names the problem of."""
    kinds: list[GroupKind] = []
    ids: list[list[int]] = []
    messages: list[dict[str, Any]] = []
    pending: dict[str, int] = {}
    waiting = 0  # calls without their output yet
    block = -1  # the group later calls join: an assistant message, or calls
    for i, item in enumerate(items):
        if type(item) is not dict:
            return None
        t = item.get("type")
        if t == "function_call_output":
            cid = item.get("call_id")
            left = pending.get(cid, 0) if type(cid) is str else 0
            if not left:
                return None
            pending[cid], waiting, block = left - 1, waiting - 1, -1  # type: ignore[index]
            out = item.get("output")
            shaped = type(out) is str or type(out) is list
            content: object = to_neutral_content(out) if shaped else [item]
            kinds.append("output")
            ids.append([i])
            n = len(kinds) - 1
            messages.append({"role": "tool", "tool_call_id": cid, "content": content, GROUP: n})
        elif t == "function_call":
            cid = item.get("call_id")
            key = cid if type(cid) is str else ""
            pending[key] = pending.get(key, 0) + 1
            waiting += 1
            fn = {"name": item.get("name"), "arguments": item.get("arguments")}
            call = {"id": cid if type(cid) is str else None, "type": "function", "function": fn}
            block = _join(kinds, ids, messages, block, i, call)
        elif t == "message" or t is None:
            role = item.get("role")
            if waiting or role not in ROLES or "content" not in item:
                return None
            value = item["content"]
            kinds.append("message")
            ids.append([i])
            content = to_neutral_content(value)
            messages.append({"role": role, "content": content, GROUP: len(kinds) - 1})
            block = len(kinds) - 1 if role == "assistant" else -1
        else:
            return None
    checked: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    return None if waiting else (_plain_groups(checked, kinds, ids), messages)


def _join(
    kinds: list[GroupKind],
    ids: list[list[int]],
    messages: list[dict[str, Any]],
    block: int,
    i: int,
    call: dict[str, Any],
) -> int:
    """Add function call `i` to the open block (-1: none yet, start one); the block."""
    if block < 0:
        kinds.append("calls")
        ids.append([i])
        block = len(kinds) - 1
        messages.append({"role": "assistant", "content": None, "tool_calls": [call], GROUP: block})
        return block
    ids[block].append(i)
    head = messages[block]
    if kinds[block] == "calls":
        head["tool_calls"].append(call)
    else:  # the assistant message the calls came with: keys in chat's order
        kinds[block] = "calls"
        messages[block] = {
            "role": "assistant",
            "content": head["content"],
            "tool_calls": [call],
            GROUP: block,
        }
    return block


def _plain_groups(
    items: Sequence[Mapping[str, Any]], kinds: list[GroupKind], ids: list[list[int]]
) -> list[Group]:
    """`_plain`'s groups, as `_frozen` makes them (no reasoning rides in one)."""
    make = tuple.__new__  # a NamedTuple's own constructor is a Python function: 2.5x slower
    groups: list[Group] = []
    for k, members in zip(kinds, ids, strict=True):
        first = items[members[0]]
        if k == "calls" and first.get("type") == "function_call":
            groups.append(make(Group, (k, tuple(members), -1, False)))
            continue
        value = first.get("output" if k == "output" else "content")
        shaped = type(value) is str or type(value) is list
        groups.append(make(Group, (k, tuple(members), members[0], shaped)))
    return groups


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
