"""The client's prompt-cache breakpoints (`cache_control`) through curation.

The rule: every `cache_control` the client set on a message block stays on that block
while the block is kept (also when its text was cut). A breakpoint whose block curation
removed moves to the nearest kept block before it (in the client's order) that can carry
one: not a `thinking` or `redacted_thinking` block, and not a message whose content is a
plain string. If that block already has a breakpoint, the two are one, so the moved one is
dropped; so is one with no such block before it among the messages (`system` and `tools`
are never rewritten). Moving never adds a breakpoint, so a request never carries more than
the client's (at most Anthropic's 4), and never puts a longer-lived one after a shorter
one that was before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from proxy.protocols.anthropic.rebuild import Origin

CACHE_CONTROL = "cache_control"
UNMARKABLE = ("thinking", "redacted_thinking")


def breakpoints(messages: Sequence[Mapping[str, Any]]) -> list[tuple[tuple[int, int], Any]]:
    """Each marked message block's position and its `cache_control`, in order."""
    found: list[tuple[tuple[int, int], Any]] = []
    for i, msg in enumerate(messages):
        content = msg.get("content")
        for j, block in enumerate(content if isinstance(content, list) else ()):
            if isinstance(block, Mapping) and CACHE_CONTROL in block:
                found.append(((i, j), block[CACHE_CONTROL]))
    return found


def restore(
    original: Sequence[Mapping[str, Any]],
    out: list[Mapping[str, Any]],
    origins: Sequence[Sequence[Origin]],
) -> list[Mapping[str, Any]]:
    """`out` with the client's breakpoints kept or moved by the rule, nothing else."""
    marks = breakpoints(original)
    if not marks:
        return out
    where: dict[tuple[int, int], tuple[int, int]] = {}
    for m, row in enumerate(origins):
        for b, origin in enumerate(row):
            if origin is not None:
                where.setdefault(origin, (m, b))
    placed: dict[tuple[int, int], Any] = {}
    for origin, control in marks:
        target = where.get(origin)
        if target is None or not _markable(out, target):
            target = _before(out, where, origin)
        if target is not None and target not in placed:
            placed[target] = control
    return _apply(out, placed)


def _markable(out: Sequence[Mapping[str, Any]], at: tuple[int, int]) -> bool:
    content = out[at[0]].get("content")
    if not isinstance(content, list) or at[1] >= len(content):
        return False
    block = content[at[1]]
    return isinstance(block, Mapping) and block.get("type") not in UNMARKABLE


def _before(
    out: Sequence[Mapping[str, Any]],
    where: Mapping[tuple[int, int], tuple[int, int]],
    origin: tuple[int, int],
) -> tuple[int, int] | None:
    """The kept, markable block nearest before `origin` in the client's order."""
    kept = sorted((o for o in where if o < origin), reverse=True)
    for o in kept:
        if _markable(out, where[o]):
            return where[o]
    return None


def _apply(
    out: list[Mapping[str, Any]], placed: Mapping[tuple[int, int], Any]
) -> list[Mapping[str, Any]]:
    result: list[Mapping[str, Any]] = []
    for m, msg in enumerate(out):
        content = msg.get("content")
        if not isinstance(content, list):
            result.append(msg)
            continue
        blocks = []
        for b, block in enumerate(content):
            want = placed.get((m, b))
            has = isinstance(block, Mapping) and CACHE_CONTROL in block
            if want is not None and (not has or block[CACHE_CONTROL] != want):
                block = {**block, CACHE_CONTROL: want}
            elif want is None and has:
                block = {k: v for k, v in block.items() if k != CACHE_CONTROL}
            blocks.append(block)
        changed = any(x is not y for x, y in zip(blocks, content, strict=True))
        result.append({**msg, "content": blocks} if changed else msg)
    return result
