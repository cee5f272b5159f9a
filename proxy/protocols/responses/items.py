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
from typing import Any

from proxy.protocols.responses.grouping import Builder
from proxy.protocols.responses.neutral import (
    GROUP,
    INSTRUCTIONS,
    Group,
    Mapped,
    full_group,
    group_message,
)
from proxy.protocols.responses.walk import Walked, one_walk

__all__ = ["GROUP", "INSTRUCTIONS", "Group", "Mapped", "to_neutral"]


ITEM_SKIPS = frozenset(
    {
        "bad_items",
        "unanswered_call",
        "reasoning_before_output",
        "unpaired_output",
        "orphan_reasoning",
    }
)
"""What `to_neutral` may answer instead of a mapping: an item that is no object, or an
order chat cannot express (`grouping.Builder`)."""


def to_neutral(items: Sequence[object], instructions: object = None) -> Mapped | str:
    """The mapped request, or why it cannot be curated (a skip reason)."""
    found = one_walk(items) or _general(items)
    if isinstance(found, str):
        return found
    kinds, ids, messages = found
    if instructions is not None:
        # A string as chat has it; any other shape is priced by its size, never edited.
        content = instructions if isinstance(instructions, str) else [_opaque(instructions)]
        messages.insert(0, {"role": "system", "content": content, GROUP: INSTRUCTIONS})
    checked: Sequence[Mapping[str, Any]] = items  # type: ignore[assignment]
    return Mapped(checked, messages, kinds, ids, 0 if instructions is None else 1)


def _general(items: Sequence[object]) -> Walked | str:
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
    messages = [
        group_message(checked, full_group(checked, k, ids), n)
        for n, (k, ids) in enumerate(zip(builder.kinds, builder.groups, strict=True))
    ]
    return builder.kinds, builder.groups, messages


def _opaque(value: object) -> dict[str, Any]:
    return {"type": "instructions", "value": value}
