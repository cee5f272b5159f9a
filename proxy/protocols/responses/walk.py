"""The usual Responses `input` mapped to neutral messages in one walk.

Agents resend their whole history every turn, and mapping it is most of what curating a
Responses request costs beyond a chat one. Most histories hold only messages, function
calls, their outputs and reasoning items: `one_walk` groups and maps those in a single
pass, exactly as `grouping.Builder` with `neutral.full_group` and `neutral.group_message`
would (a property test holds it to that). Any other item, or any list those would refuse,
makes it answer None, and the general walk then maps the list or names its problem. A
group a reasoning item rides in is rare enough to be built by the general functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.protocols.responses.grouping import GroupKind
from proxy.protocols.responses.kinds import ROLES
from proxy.protocols.responses.neutral import GROUP, full_group, group_message
from proxy.protocols.responses.parts import to_neutral_content

Walked = tuple[list[GroupKind], list[list[int]], list[dict[str, Any]]]
"""Each group's kind and item indexes, and the neutral messages."""


def one_walk(items: Sequence[object]) -> Walked | None:
    """The groups and neutral messages of `items`, or None (see the module docstring)."""
    walk = _Walk()
    output, call, message, riders = walk.output, walk.call, walk.message, walk.riders
    for i, item in enumerate(items):
        if type(item) is not dict:
            return None
        t = item.get("type")
        if t == "function_call_output":
            if not output(i, item):
                return None
        elif t == "function_call":
            call(i, item)
        elif t == "message" or t is None:
            if not message(i, item):
                return None
        elif t == "reasoning":
            riders.append(i)
        else:
            return None
    if walk.waiting or walk.riders:
        return None
    checked: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    walk.finish(checked)
    return walk.kinds, walk.ids, walk.messages


class _Walk:
    """The walk's state: groups so far (kind, item indexes), their messages."""

    __slots__ = ("block", "ids", "kinds", "messages", "pending", "ridden", "riders", "waiting")

    def __init__(self) -> None:
        self.kinds: list[GroupKind] = []
        self.ids: list[list[int]] = []
        self.messages: list[dict[str, Any]] = []
        self.pending: dict[str, int] = {}
        self.waiting = 0
        """Calls without their output yet."""
        self.block = -1
        """The group later calls join: an assistant message, or calls."""
        self.riders: list[int] = []
        """Reasoning items waiting for the item they belong to."""
        self.ridden: list[int] = []
        """Groups a reasoning item rides in."""

    def output(self, i: int, item: Mapping[str, Any]) -> bool:
        cid = item.get("call_id")
        left = self.pending.get(cid, 0) if type(cid) is str else 0
        if not left or self.riders:
            return False
        self.pending[cid] = left - 1  # type: ignore[index]  # a str when left > 0
        self.waiting -= 1
        self.block = -1
        out = item.get("output")
        content: object = (
            out if type(out) is str else to_neutral_content(out) if type(out) is list else [item]
        )
        n = len(self.kinds)  # `_group`, inlined: no rider here (checked above)
        self.kinds.append("output")
        self.ids.append([i])
        self.messages.append({"role": "tool", "tool_call_id": cid, "content": content, GROUP: n})
        return True

    def call(self, i: int, item: Mapping[str, Any]) -> None:
        cid = item.get("call_id")
        key = cid if type(cid) is str else ""
        self.pending[key] = self.pending.get(key, 0) + 1
        self.waiting += 1
        fn = {"name": item.get("name"), "arguments": item.get("arguments")}
        call = {"id": cid if type(cid) is str else None, "type": "function", "function": fn}
        block = self.block
        if block < 0:
            self.block = n = self._group("calls", i)
            self.messages.append(
                {"role": "assistant", "content": None, "tool_calls": [call], GROUP: n}
            )
            return
        if self.riders:
            self.ridden.append(block)
            self.ids[block].extend(self.riders)
            self.riders.clear()
        self.ids[block].append(i)
        head = self.messages[block]
        if self.kinds[block] == "calls":
            head["tool_calls"].append(call)
            return
        # The assistant message the calls came with: keys in chat's order.
        self.kinds[block] = "calls"
        self.messages[block] = {
            "role": "assistant",
            "content": head["content"],
            "tool_calls": [call],
            GROUP: block,
        }

    def message(self, i: int, item: Mapping[str, Any]) -> bool:
        role = item.get("role")
        if self.waiting or role not in ROLES or "content" not in item:
            return False
        value = item["content"]
        content = value if type(value) is str else to_neutral_content(value)
        n = self._group("message", i)
        self.messages.append({"role": role, "content": content, GROUP: n})
        self.block = n if role == "assistant" else -1
        return True

    def _group(self, k: GroupKind, i: int) -> int:
        n = len(self.kinds)
        if self.riders:
            self.ridden.append(n)
            self.ids.append([*self.riders, i])
            self.riders.clear()
        else:
            self.ids.append([i])
        self.kinds.append(k)
        return n

    def finish(self, items: Sequence[Mapping[str, Any]]) -> None:
        """A group a reasoning item rides in gets its message from `group_message`."""
        for n in self.ridden:
            group = full_group(items, self.kinds[n], self.ids[n])
            self.messages[n] = group_message(items, group, n)
