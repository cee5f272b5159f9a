"""What a group of Responses items is as one neutral chat message (see `items`), and the
types that say which items a message stands for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from proxy.protocols.responses.grouping import KINDS, GroupKind
from proxy.protocols.responses.kinds import call_id, output_id
from proxy.protocols.responses.parts import to_neutral_content

MESSAGE_TYPES = ("message", None)
"""The `type` of a message item (EasyInputMessage may leave it out)."""
GROUP = "_responses_group"
"""Key of a neutral message: index of its `Group` (absent on a summary a curator wrote)."""
INSTRUCTIONS = -1
"""`GROUP` of the system message standing for `instructions`."""


class Group(NamedTuple):
    """The items one neutral message stands for, in order, and what the message carries
    of them (built for the general walk, and for a changed message; see `Mapped`)."""

    kind: GroupKind
    items: tuple[int, ...]
    primary: int
    """The item whose content the message carries (-1: none, for calls alone)."""
    editable: bool
    """True when a changed content can be written back in the client's shape."""


@dataclass(frozen=True, slots=True)
class Mapped:
    """A request's items, the neutral messages for them, and how one maps to the other.

    Per group, only its kind and its item indexes are kept: that is all an unchanged or
    cut message needs to be written back, and building a whole `Group` for each of a long
    history's messages, on every request, cost a tenth of the mapping. `group` builds one
    for the rare message whose change needs more.
    """

    items: Sequence[Mapping[str, Any]]
    messages: list[dict[str, Any]]
    kinds: Sequence[GroupKind]
    ids: Sequence[Sequence[int]]
    """The items of each group, in order."""
    offset: int = 0
    """1 when `messages` starts with the `instructions` message."""

    def neutral(self, n: int) -> dict[str, Any]:
        """The neutral message of group `n`."""
        return self.messages[n + self.offset]

    def group(self, n: int) -> Group:
        """Group `n` in full."""
        return full_group(self.items, self.kinds[n], self.ids[n])


def full_group(items: Sequence[Mapping[str, Any]], k: GroupKind, ids: Sequence[int]) -> Group:
    """The group of kind `k` over the items `ids`, its primary item found among them."""
    at = primary(items, k, ids)
    if at < 0:
        return Group(k, tuple(ids), at, editable=False)
    alone = len(ids) == 1 or (k == "calls" and not _has_riders(items, ids))
    value = items[at].get("output" if k == "output" else "content")
    shaped = type(value) is str or type(value) is list
    return Group(k, tuple(ids), at, editable=k != "opaque" and alone and shaped)


def primary(items: Sequence[Mapping[str, Any]], k: GroupKind, ids: Sequence[int]) -> int:
    """The item whose content a group's message carries: the group's last item (any
    reasoning rides in front of it), or for calls the assistant message they came with
    (-1: they came alone)."""
    if k != "calls":
        return ids[-1]
    return next((i for i in ids if items[i].get("type") in MESSAGE_TYPES), -1)


def _has_riders(items: Sequence[Mapping[str, Any]], ids: Sequence[int]) -> bool:
    return any(items[i].get("type") == "reasoning" for i in ids)


def group_message(items: Sequence[Mapping[str, Any]], group: Group, n: int) -> dict[str, Any]:
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
