"""Message helpers: roles, text access, units and turns.

A *unit* is the smallest slice of a conversation that can be dropped without breaking
OpenAI's ordering rules: a single message, or an assistant message carrying `tool_calls`
(or a legacy `function_call`) together with every `tool` (or `function`) message that
answers it. Curators that drop history drop whole units, so they can never orphan a
tool result or leave a call unanswered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

Message = Mapping[str, Any]
Content = str | list[Any]
"""A message's content: a string, or an array of parts."""

MAPPING = (dict, Mapping)
"""For `isinstance`: dict first, as checking against the Mapping ABC alone costs four times
as much, and hot loops ask it of every message and call."""

SUMMARY_PREFIX = "[Summary of earlier conversation"
"""Every summary message a summarizer inserts starts with this text (see invariants)."""


def role(msg: Message) -> str:
    value = msg.get("role")
    return value if isinstance(value, str) else ""


def call_ids(msg: Message) -> tuple[str, ...]:
    """Ids of the tool calls an assistant message makes (empty for other messages)."""
    calls = msg.get("tool_calls")
    if not isinstance(calls, list):
        return ()
    return tuple(c["id"] for c in calls if isinstance(c, MAPPING) and isinstance(c.get("id"), str))


def opens_block(msg: Message) -> bool:
    """True for an assistant message that expects tool or function results after it."""
    if msg.get("role") != "assistant":  # not `role()`: this runs per message, many times
        return False
    calls = msg.get("tool_calls")
    return bool(isinstance(calls, list) and calls) or bool(msg.get("function_call"))


def is_result(msg: Message) -> bool:
    return msg.get("role") in ("tool", "function")  # a tuple: any value compares, even a list


def tool_names(msg: Message) -> dict[str, str]:
    """Map call id -> function name for an assistant `tool_calls` message."""
    names: dict[str, str] = {}
    calls = msg.get("tool_calls")
    if isinstance(calls, list):
        for call in calls:
            if isinstance(call, MAPPING) and isinstance(call.get("id"), str):
                fn = call.get("function")
                name = fn.get("name") if isinstance(fn, MAPPING) else None
                names[call["id"]] = name if isinstance(name, str) else ""
    return names


class ResultNames:
    """Names the call each `tool` result of one block answers, in the order they come.

    By id, from `names` (the block head's `tool_names`); when ids repeat within the head
    (OpenAI accepts two calls `d` answered by two results `d`), by position instead: the
    k-th result `d` answers the k-th call `d`. Local to one pass over one block.
    """

    __slots__ = ("_names", "_repeated", "_seen")

    def __init__(self, names: Mapping[str, str], head: Message | None = None) -> None:
        self._names = names
        self._repeated: dict[str, list[str]] | None = None
        self._seen: dict[str, int] = {}
        calls = head.get("tool_calls") if head is not None else None
        # Fewer names than calls: an id repeats (or a call has none); the rare slow path.
        if isinstance(calls, list) and len(names) < len(calls):
            repeated: dict[str, list[str]] = {}
            for call in calls:
                if isinstance(call, MAPPING) and isinstance(call.get("id"), str):
                    fn = call.get("function")
                    name = fn.get("name") if isinstance(fn, MAPPING) else None
                    repeated.setdefault(call["id"], []).append(
                        name if isinstance(name, str) else ""
                    )
            self._repeated = repeated

    def answer(self, tid: object) -> tuple[str, int]:
        """(tool name, k) for the next result with id `tid`: it answers the k-th call with
        that id. ("", 0) for an id that is not a string."""
        if not isinstance(tid, str):
            return "", 0
        k = self._seen.get(tid, 0)
        self._seen[tid] = k + 1
        if self._repeated is None:
            return self._names.get(tid, ""), k
        names = self._repeated.get(tid, ())
        return (names[k] if k < len(names) else ""), k


def text_of(msg: Message) -> str:
    """The text a message carries: its string content, or its text parts joined."""
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "")
            for p in content
            if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return ""


def shown_text(msg: Message) -> str:
    """`text_of` as a reader sees it: text parts on lines of their own. Joined bare, a
    system prompt sent as blocks ("You are careful." + "Rules.") read as one run-on line."""
    content = msg.get("content")
    if isinstance(content, list):
        return "\n".join(
            p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str)
        )
    return text_of(msg)


class Unit(NamedTuple):
    """A half-open index range [start, stop) of messages that stand or fall together."""

    # A named tuple, not a frozen dataclass: curators split every request into units, and
    # a frozen dataclass's __init__ cost a third of that.
    start: int
    stop: int

    def indexes(self) -> range:
        return range(self.start, self.stop)


def units(messages: Sequence[Message]) -> list[Unit]:
    """Split a conversation into units (see the module docstring).

    Results that follow a block belong to it even when their ids do not match; the
    coherence curator, not this function, decides what is an orphan.
    """
    out: list[Unit] = []
    i, n = 0, len(messages)
    while i < n:
        j = i + 1
        if opens_block(messages[i]):
            while j < n and is_result(messages[j]):
                j += 1
        out.append(Unit(i, j))
        i = j
    return out


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indexes where a turn starts: each user message (and 0 if history starts otherwise)."""
    starts = [i for i, m in enumerate(messages) if role(m) == "user"]
    if messages and (not starts or starts[0] != 0):
        starts.insert(0, 0)
    return starts
