"""Curated neutral messages back to Messages API messages.

The neutral messages of one Anthropic message (an assistant turn; or a user message: its
results, then the rest) come back together. All of them there and unchanged: the client's
very object, so it serializes to the client's bytes. Otherwise its blocks are rebuilt from
what is left, in the client's order: results first (a cut result keeps its block's other
keys: `is_error`, `cache_control`), then the rest. A text part a curator cut is a text
block already (it kept the block's keys); an `image_url` part maps back to the client's
`image` block; opaque parts are the client's blocks. An assistant turn's changed text goes
back where its text blocks were; its thinking, tool uses and other blocks stay as sent.

The assistant turn a tool loop continues (the last one, when the request ends with its
results) is never rebuilt: Anthropic wants its thinking byte-identical, and it is the turn
the model answers. A message the curators wrote (a summary) becomes a user message (a
`system` role has no place among Anthropic's messages), or an assistant one.

Every block comes out with the position it came from (its origin), for the breakpoints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from policies.messages import MAPPING, Message
from proxy.protocols.anthropic.neutral import INDEX, SLOT, SYSTEM, Mapped

Origin = tuple[int, int] | None
"""(message index, block index) in the client's messages; None for a block we wrote."""
Built = tuple[list[Mapping[str, Any]], list[list[Origin]]]


def rebuild(mapped: Mapped, curated: Sequence[Message]) -> Built:
    """The `messages` for the curated neutral ones, and each block's origin."""
    groups = _grouped(curated)
    originals = mapped.messages
    continued = _continued(originals)
    counts = _counts(mapped.neutral)
    ids = {id(n) for n in mapped.neutral}
    out: list[Mapping[str, Any]] = []
    origins: list[list[Origin]] = []
    for i, pieces in groups:
        if i is None:
            out.append(_written(pieces[0]))
            origins.append([None] * _length(out[-1]))
            continue
        msg = originals[i]
        whole = len(pieces) == counts.get(i, 0) and all(id(p) in ids for p in pieces)
        if whole or i == continued:
            out.append(msg)
            origins.append([(i, j) for j in range(_length(msg))])
            continue
        built = _changed(mapped, i, pieces)
        if built is not None:
            out.append(built[0])
            origins.append(built[1])
    return out, origins


def _grouped(curated: Sequence[Message]) -> list[tuple[int | None, list[Message]]]:
    """Consecutive curated messages of one Anthropic message (None: one a curator wrote)."""
    groups: list[tuple[int | None, list[Message]]] = []
    for msg in curated:
        i = msg.get(INDEX)
        if i == SYSTEM:
            continue
        if type(i) is not int:
            groups.append((None, [msg]))
        elif groups and groups[-1][0] == i:
            groups[-1][1].append(msg)
        else:
            groups.append((i, [msg]))
    return groups


def _counts(neutral: Sequence[Message]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for msg in neutral:
        i = msg.get(INDEX)
        if type(i) is int and i >= 0:
            counts[i] = counts.get(i, 0) + 1
    return counts


def _continued(messages: Sequence[Mapping[str, Any]]) -> int:
    """The assistant turn a tool loop continues (-1: none)."""
    if len(messages) < 2 or messages[-1].get("role") != "user":
        return -1
    content = messages[-1].get("content")
    first = content[0] if isinstance(content, list) and content else None
    if not (isinstance(first, MAPPING) and first.get("type") == "tool_result"):
        return -1
    return len(messages) - 2 if messages[-2].get("role") == "assistant" else -1


def _length(msg: Mapping[str, Any]) -> int:
    content = msg.get("content")
    return len(content) if isinstance(content, list) else 1


def _written(msg: Message) -> dict[str, Any]:
    role = "assistant" if msg.get("role") == "assistant" else "user"
    content = msg.get("content")
    return {"role": role, "content": content if isinstance(content, str | list) else ""}


def _changed(
    mapped: Mapped, i: int, pieces: list[Message]
) -> tuple[dict[str, Any], list[Origin]] | None:
    msg = mapped.messages[i]
    blocks: list[Any] = msg["content"] if isinstance(msg["content"], list) else []
    if msg.get("role") == "assistant":
        return _assistant(mapped, i, msg, blocks, pieces[0])
    out: list[Any] = []
    origins: list[Origin] = []
    for piece in pieces:
        if piece.get("role") == "tool":
            slot = piece.get(SLOT)
            block = blocks[slot] if isinstance(slot, int) and slot < len(blocks) else None
            if block is None:
                continue
            content = _content(mapped, piece.get("content"))
            out.append(block if content is None else {**block, "content": content})
            origins.append((i, slot))  # type: ignore[arg-type]
        else:
            _rest(mapped, i, msg, blocks, piece, out, origins)
    if not out:
        return None
    return {**msg, "content": out}, origins


def _rest(
    mapped: Mapped,
    i: int,
    msg: Mapping[str, Any],
    blocks: list[Any],
    piece: Message,
    out: list[Any],
    origins: list[Origin],
) -> None:
    """The blocks after the results (or a whole user message without results)."""
    start = piece.get(SLOT, 0)
    content = piece.get("content")
    if isinstance(content, str):
        if isinstance(msg["content"], str):
            out.append({"type": "text", "text": content})
            origins.append((i, 0))
        elif content:
            out.append({"type": "text", "text": content})
            origins.append(None)
        return
    parts = content if isinstance(content, list) else []
    aligned = len(parts) == len(blocks) - start
    first_text = next((j for j in range(start, len(blocks)) if _is_text(blocks[j])), -1)
    for k, part in enumerate(parts):
        block = mapped.images.get(id(part), part)
        if not _usable(block):
            continue  # Anthropic refuses an empty text block
        if aligned:
            at = start + k
        else:  # text parts a curator joined into one: where the first text was
            at = next((j for j in range(start, len(blocks)) if blocks[j] is block), -1)
            at = first_text if at < 0 and _is_text(block) else at
        out.append(block)
        origins.append((i, at) if at >= 0 else None)


def _is_text(block: object) -> bool:
    return isinstance(block, MAPPING) and block.get("type") == "text"


def _content(mapped: Mapped, content: object) -> object | None:
    """A result's curated content in Anthropic's shape (None: keep the block as sent)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    return [mapped.images.get(id(p), p) for p in content]


def _assistant(
    mapped: Mapped, i: int, msg: Mapping[str, Any], blocks: list[Any], piece: Message
) -> tuple[dict[str, Any], list[Origin]] | None:
    others = [j for j, b in enumerate(blocks) if b.get("type") != "tool_use"]
    replaced = _replaced(mapped, blocks, others, piece.get("content"))
    inputs = _inputs(piece)
    out: list[Any] = []
    origins: list[Origin] = []
    for j, block in enumerate(blocks):
        if block.get("type") == "tool_use":
            new = inputs.get(block.get("id"))
            changed = new is not None and new != block.get("input")
            out.append({**block, "input": new} if changed else block)
        else:
            block = replaced.get(j)
            if block is None:
                continue
            out.append(block)
        origins.append((i, j))
    return ({**msg, "content": out}, origins) if out else None


def _replaced(
    mapped: Mapped, blocks: list[Any], others: list[int], content: object
) -> dict[int, Any]:
    """Block position -> what goes there now (absent: the block is gone). Curated parts
    map by position; text a curator joined into one part goes where the first text was."""
    same = {j: blocks[j] for j in others}
    if isinstance(content, str):
        content = [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        return same
    parts = [mapped.images.get(id(p), p) for p in content]
    if len(parts) == len(others):
        return {j: p for j, p in zip(others, parts, strict=True) if _usable(p)}
    if all(blocks[j].get("type") == "text" for j in others) and others:
        texts = [p for p in parts if _usable(p)]
        if len(texts) == 1:
            return {others[0]: texts[0]}
    return same


def _usable(part: object) -> bool:
    """Not an empty text block (Anthropic refuses one)."""
    if not isinstance(part, MAPPING):
        return False
    return part.get("type") != "text" or bool(part.get("text"))


def _inputs(piece: Message) -> dict[object, Any]:
    """Tool inputs a curator changed (their arguments still a JSON object)."""
    found: dict[object, Any] = {}
    calls = piece.get("tool_calls")
    for call in calls if isinstance(calls, list) else ():
        fn = call.get("function") if isinstance(call, MAPPING) else None
        args = fn.get("arguments") if isinstance(fn, MAPPING) else None
        if isinstance(args, str):
            try:
                value = orjson.loads(args)
            except orjson.JSONDecodeError:
                continue
            if isinstance(value, dict):
                found[call.get("id")] = value
    return found
