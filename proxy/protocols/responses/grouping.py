"""How a Responses request's items group into the units one neutral message stands for:
one walk over the items, in order (see `proxy.protocols.responses.items`).

A reasoning item rides with the item after it; consecutive calls (after the assistant
message they came with, if any) are one group and each output another, joined to its call
by call id; any other item is a group of its own. A list the chat ordering rules cannot
express gets a skip reason instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from proxy.protocols.responses.kinds import CALLS, OUTPUTS, ROLES, call_id, output_id

GroupKind = Literal["message", "calls", "output", "opaque"]
KINDS: dict[object, str] = {
    "message": "message",
    "reasoning": "reasoning",
    **dict.fromkeys(CALLS, "call"),
    **dict.fromkeys(OUTPUTS, "output"),
}


class Builder:
    """Walks the items once, grouping them; local to one `to_neutral` call."""

    __slots__ = (
        "approvals",
        "block",
        "groups",
        "items",
        "kinds",
        "open",
        "pending",
        "riders",
    )

    def __init__(self, items: Sequence[Mapping[str, Any]]) -> None:
        self.items = items
        self.groups: list[list[int]] = []
        self.kinds: list[GroupKind] = []
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
        k = KINDS.get(t, "opaque") if type(t) is str else "message" if t is None else "opaque"
        if k == "reasoning":
            self.riders.append(i)
            return None
        if k == "output":
            return self._output(i, item, t)
        if k == "call" and t == "mcp_approval_request" and call_id(item) not in self._answered():
            k = "opaque"  # the model may leave it pending: a unit of its own
        if k == "call":
            cid = item.get("call_id") if t == "function_call" else call_id(item)
            cid = cid if type(cid) is str else ""
            self.pending[cid] = self.pending.get(cid, 0) + 1
            self.open += 1
            if self.block >= 0:
                self.groups[self.block].extend(self.riders)
                self.groups[self.block].append(i)
                self.kinds[self.block] = "calls"
                self.riders.clear()
                return None
            self.block = self._group("calls", i)
            return None
        if self.open:
            return "unanswered_call"
        said = k == "message" and item.get("role") in ROLES and "content" in item
        n = self._group("message" if said else "opaque", i)
        self.block = n if said and item.get("role") == "assistant" else -1
        return None

    def _answered(self) -> frozenset[str]:
        if self.approvals is None:  # once, and only for a list holding approval requests
            self.approvals = _approvals(self.items)
        return self.approvals

    def _output(self, i: int, item: Mapping[str, Any], t: object) -> str | None:
        if self.riders:
            return "reasoning_before_output"
        cid = item.get("call_id") if t == "function_call_output" else None  # the usual
        if type(cid) is not str:
            cid = output_id(item)
        left = self.pending.get(cid, 0) if cid is not None else 0
        if not left:
            return "unpaired_output"
        self.pending[cid] = left - 1  # type: ignore[index]  # cid is a str when left > 0
        self.open -= 1
        self.block = -1
        self._group("output", i)
        return None

    def _group(self, k: GroupKind, i: int) -> int:
        riders = self.riders
        if riders:
            self.groups.append([*riders, i])
            riders.clear()
        else:
            self.groups.append([i])
        self.kinds.append(k)
        return len(self.kinds) - 1

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
