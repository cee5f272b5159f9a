"""Curated neutral messages back to Responses input items.

An unchanged message gives back its items, the very same objects, so they serialize to
the client's bytes. A changed one writes its change into its primary item in the shape
the client used (`parts.from_neutral_content`), or into its calls' `arguments`; every
other field of the item stays. A message the curators wrote (a summary) becomes an
`EasyInputMessage` of its role. The `instructions` message is never written back: the
field goes upstream as sent.

A change that cannot be expressed in the client's shape (a curator that edited a
reasoning-bound or opaque message; none of the shipped ones does) keeps the original
items: the request stays valid, at the cost of tokens the curators thought were saved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.messages import MAPPING, Message
from proxy.protocols.responses.items import GROUP, INSTRUCTIONS, Group, Mapped
from proxy.protocols.responses.kinds import CALLS, call_id
from proxy.protocols.responses.parts import from_neutral_content


def rebuild(mapped: Mapped, curated: Sequence[Message]) -> list[Mapping[str, Any]]:
    """The `input` items for the curated messages."""
    out: list[Mapping[str, Any]] = []
    items, kinds, groups = mapped.items, mapped.kinds, mapped.ids
    neutral, offset = mapped.messages, mapped.offset
    count, append = len(groups), out.append
    for msg in curated:
        n = msg.get(GROUP)
        if type(n) is not int or not 0 <= n < count:
            if n != INSTRUCTIONS:  # a message a curator wrote (a summary)
                append({"role": msg.get("role", "user"), "content": msg.get("content", "")})
            continue
        ids = groups[n]
        if msg is neutral[n + offset]:
            if len(ids) == 1:
                append(items[ids[0]])
            else:
                out.extend([items[i] for i in ids])
            continue
        if len(ids) == 1 and kinds[n] == "output":
            # The usual change: a tool output's text, cut or cleared (inlined: it runs for
            # every old output of a long agent history).
            item, new = items[ids[0]], msg.get("content")
            old = item.get("output")
            if type(new) is str and type(old) is str:
                append(item if new == old else {**item, "output": new})
                continue
        out.extend(_changed(mapped, mapped.group(n), mapped.neutral(n), msg))
    return out


def _changed(
    mapped: Mapped, group: Group, neutral: Message, msg: Message
) -> list[Mapping[str, Any]]:
    items = [mapped.items[i] for i in group.items]
    if group.kind == "calls":
        items = _calls(items, msg)
    if not group.editable or msg.get("content") is neutral.get("content"):
        return items
    item = mapped.items[group.primary]
    field = "output" if group.kind == "output" else "content"
    role = str(item.get("role") or "")
    content = from_neutral_content(
        msg.get("content"), item.get(field), neutral.get("content"), role
    )
    if content is None:
        return items
    return [{**x, field: content} if x is item else x for x in items]


def _calls(items: list[Mapping[str, Any]], msg: Message) -> list[Mapping[str, Any]]:
    """Calls whose `arguments` a curator cleared get the new arguments; a call the
    curators took out of the message (never, for a valid list) goes with it."""
    calls = msg.get("tool_calls")
    by_id: dict[object, list[Mapping[str, Any]]] = {}
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, MAPPING):
            by_id.setdefault(call.get("id"), []).append(call)
    out: list[Mapping[str, Any]] = []
    for item in items:
        if item.get("type") not in CALLS:
            out.append(item)  # its reasoning, or the message the calls came with
            continue
        left = by_id.get(call_id(item))
        if not left:
            continue
        args = _arguments(left.pop(0))
        if item.get("type") == "function_call" and args is not None:
            out.append(item if args == item.get("arguments") else {**item, "arguments": args})
        else:
            out.append(item)
    return out


def _arguments(call: Mapping[str, Any]) -> str | None:
    fn = call.get("function")
    args = fn.get("arguments") if isinstance(fn, MAPPING) else None
    return args if isinstance(args, str) else None
