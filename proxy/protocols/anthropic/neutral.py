"""A Messages request's `system` and `messages` as neutral chat messages.

The curators know one message model (chat completions'); mapped like this, their
invariants are Anthropic's rules:
- `system` (a string or text blocks) is a system message in front: pinned, never written
  back (the field goes upstream as sent);
- a user message is a user message; its blocks are parts: `text` blocks stay themselves
  (a cut keeps their other keys), an `image` becomes an `image_url` part (priced by its
  tiles) mapped back by identity, anything else (`document`, `search_result`,
  `container_upload`, unknown types) is an opaque part: priced by its size, never edited;
- an assistant message is an assistant message: `tool_use` blocks are its `tool_calls`
  (arguments: the input's JSON), every other block a part as above; `thinking`,
  `redacted_thinking`, `server_tool_use` and server tool results are opaque, so no
  curator edits them;
- the `tool_result` blocks of the user message after it are `tool` messages answering
  those calls, so the unit rule keeps an assistant turn with every result that answers it
  (it stands or falls whole); the blocks after the results are a user message of their
  own (Anthropic merges consecutive user messages, so either may go alone).
A history those rules cannot express (a result not first in its message, a result
answering no call of the turn before, a call without its result) is not curated: a skip
reason, and the request goes as sent.

Each neutral message carries `INDEX`, the index of the Anthropic message it stands for
(`SYSTEM` for the system message), and a result its block's position (`SLOT`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from policies.marks import CACHE_CONTROL

INDEX = "_anthropic_message"
SLOT = "_anthropic_block"
SYSTEM = -1
ROLES = ("user", "assistant", "system")
"""`system` inside `messages`: Claude Code (2.1) sends its agent list that way."""
SKIPS = frozenset({"bad_messages", "result_not_first", "orphan_tool_result", "unanswered_tool_use"})


@dataclass(frozen=True, slots=True)
class Mapped:
    """The request's messages, their neutral form, and what maps one back to the other."""

    messages: Sequence[Mapping[str, Any]]
    neutral: list[dict[str, Any]]
    images: dict[int, Mapping[str, Any]]
    """id() of each neutral `image_url` part -> the client's `image` block."""


def to_neutral(messages: Sequence[object], system: object = None) -> Mapped | str:
    """The mapped request, or why it cannot be curated (a skip reason)."""
    out: list[dict[str, Any]] = []
    images: dict[int, Mapping[str, Any]] = {}
    if system is not None:
        content = system if isinstance(system, str) else _parts(system, images)
        out.append({"role": "system", "content": content, INDEX: SYSTEM})
    pending: set[str] = set()
    for i, msg in enumerate(messages):
        if type(msg) is not dict or msg.get("role") not in ROLES or "content" not in msg:
            return "bad_messages"
        if msg["role"] == "system":  # Claude Code's own context, between turns: pinned
            if not out or out[-1].get(INDEX) == SYSTEM:
                return "bad_messages"  # only between turns, never first
            if pending:
                return "unanswered_tool_use"
            out.append({"role": "system", "content": _system(msg["content"], images), INDEX: i})
            continue
        problem = _add(out, i, msg, pending, images)
        if problem is not None:
            return problem
    if pending:
        return "unanswered_tool_use"
    checked: Sequence[Mapping[str, Any]] = messages  # type: ignore[assignment]
    return Mapped(checked, out, images)


def _system(content: object, images: dict[int, Mapping[str, Any]]) -> Any:
    return content if isinstance(content, str) else _parts(content, images)


def _add(
    out: list[dict[str, Any]],
    i: int,
    msg: Mapping[str, Any],
    pending: set[str],
    images: dict[int, Mapping[str, Any]],
) -> str | None:
    content = msg["content"]
    if isinstance(content, str):
        if pending:
            return "unanswered_tool_use"
        out.append({"role": msg["role"], "content": content, INDEX: i})
        return None
    if not isinstance(content, list) or not all(type(b) is dict for b in content):
        return "bad_messages"
    if msg["role"] == "assistant":
        if pending:
            return "unanswered_tool_use"
        out.append(_assistant(i, content, pending, images))
        return None
    return _user(out, i, content, pending, images)


def _assistant(
    i: int, blocks: list[dict[str, Any]], pending: set[str], images: dict[int, Mapping[str, Any]]
) -> dict[str, Any]:
    calls = [_call(b) for b in blocks if b.get("type") == "tool_use"]
    others = [b for b in blocks if b.get("type") != "tool_use"]
    content: Any = _parts(others, images) if others else None
    if not calls:
        return {"role": "assistant", "content": content, INDEX: i}
    pending.update(c["id"] for c in calls)
    turn = {"role": "assistant", "content": content, "tool_calls": calls, INDEX: i}
    marks = [b[CACHE_CONTROL] for b in blocks if b.get("type") == "tool_use" and CACHE_CONTROL in b]
    if marks:  # a tool use's breakpoint, for the prefix-cache model (never written back)
        turn[CACHE_CONTROL] = marks[-1]
    return turn


def _call(block: Mapping[str, Any]) -> dict[str, Any]:
    uid = block.get("id")
    arguments = orjson.dumps(block.get("input", {})).decode()
    fn = {"name": block.get("name"), "arguments": arguments}
    return {"id": uid if isinstance(uid, str) else "", "type": "function", "function": fn}


def _user(
    out: list[dict[str, Any]],
    i: int,
    blocks: list[dict[str, Any]],
    pending: set[str],
    images: dict[int, Mapping[str, Any]],
) -> str | None:
    n = 0
    while n < len(blocks) and blocks[n].get("type") == "tool_result":
        uid = blocks[n].get("tool_use_id")
        if not isinstance(uid, str) or uid not in pending:
            return "orphan_tool_result"
        pending.discard(uid)
        result = blocks[n].get("content", "")
        content = result if isinstance(result, str) else _parts(result, images)
        tool = {"role": "tool", "tool_call_id": uid, "content": content, INDEX: i, SLOT: n}
        if CACHE_CONTROL in blocks[n]:  # the result's breakpoint, for the prefix-cache model
            tool[CACHE_CONTROL] = blocks[n][CACHE_CONTROL]
        out.append(tool)
        n += 1
    rest = blocks[n:]
    if any(b.get("type") == "tool_result" for b in rest):
        return "result_not_first"
    if pending:
        return "unanswered_tool_use"
    if rest or not n:
        out.append({"role": "user", "content": _parts(rest, images), INDEX: i, SLOT: n})
    return None


def _parts(blocks: object, images: dict[int, Mapping[str, Any]]) -> list[Any]:
    if not isinstance(blocks, list):
        return [blocks]
    parts: list[Any] = []
    for block in blocks:
        if type(block) is dict and block.get("type") == "image":
            part = _image(block)
            if part is not None:
                images[id(part)] = block
                parts.append(part)
                continue
        parts.append(block)
    return parts


def _image(block: Mapping[str, Any]) -> dict[str, Any] | None:
    source = block.get("source")
    if not isinstance(source, dict):
        return None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        url = f"data:{source.get('media_type')};base64,{source['data']}"
    elif source.get("type") == "url" and isinstance(source.get("url"), str):
        url = source["url"]
    else:
        return None
    return {"type": "image_url", "image_url": {"url": url}}
