"""What Anthropic's Messages API refuses, checked the way it checks it, independent of
`policies/` and `proxy/`: a request this accepts is one Anthropic would accept.

Consecutive messages of one role are merged into one turn first, as the API does. Then:
- `max_tokens` and a non-empty `messages` are required; roles are `user` and `assistant`
  (and `system`, between turns, as Claude Code sends it);
- each block type is one its role may send; a text block is never empty;
- every `tool_use` of an assistant turn is answered by a `tool_result` in the next turn (a
  user turn), whose `tool_result` blocks come first; a `tool_result` answers a `tool_use`
  of the turn just before it;
- a `thinking` block's `signature` must be the one this fake signed its text with (an
  edited thinking or signature is refused); with thinking enabled, an assistant turn a
  tool loop continues (the last turn is user tool results) starts with thinking;
- at most 4 blocks carry `cache_control` (tools, system and messages together), and no
  thinking block carries one;
- the prompt fits the model's window (`prompt is too long: N tokens > M maximum`).
Errors use Anthropic's shape and wording: `{"type": "error", "error": {"type":
"invalid_request_error", "message": ...}}`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator, Sequence
from typing import Any

import orjson

SECRET = b"fake-anthropic-thinking"
MAX_BREAKPOINTS = 4
USER_TYPES = frozenset(
    {"text", "image", "document", "tool_result", "search_result", "container_upload"}
)
ASSISTANT_TYPES = frozenset(
    {
        "text",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "bash_code_execution_tool_result",
        "text_editor_code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "container_upload",
    }
)
THINKING = ("thinking", "redacted_thinking")


class Rejected(Exception):
    """A request Anthropic would refuse: 400 with this message."""


def sign(thinking: str) -> str:
    return hmac.new(SECRET, thinking.encode(), hashlib.sha256).hexdigest()


def error_body(message: str, kind: str = "invalid_request_error") -> bytes:
    return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})


def check(body: object) -> None:
    """Raise `Rejected` for a body Anthropic's API would refuse (before counting tokens)."""
    if not isinstance(body, dict):
        raise Rejected("Request body must be a JSON object")
    if not isinstance(body.get("max_tokens"), int):
        raise Rejected("max_tokens: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Rejected(
            "messages: Field required"
            if messages is None
            else "messages: at least one message is required"
        )
    turns = merged_turns(messages)
    for k, (role, blocks) in enumerate(turns):
        _check_blocks(k, role, blocks)
    _check_tools(turns)
    if _thinking_enabled(body):
        _check_continued_thinking(turns)
    found = sum(1 for block in all_blocks(body) if "cache_control" in block)
    if found > MAX_BREAKPOINTS:
        raise Rejected(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be "
            f"provided. Found {found}."
        )


def merged_turns(messages: Sequence[Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    turns: list[tuple[str, list[dict[str, Any]]]] = []
    for i, msg in enumerate(messages):
        if isinstance(msg, dict) and msg.get("role") == "system":
            _blocks(i, msg.get("content"))  # Claude Code's own context between turns
            continue
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            role = msg.get("role") if isinstance(msg, dict) else None
            raise Rejected(
                f"messages.{i}.role: Input should be 'user', 'assistant' or 'system', got {role!r}"
            )
        blocks = _blocks(i, msg.get("content"))
        if turns and turns[-1][0] == msg["role"]:
            turns[-1][1].extend(blocks)
        else:
            turns.append((msg["role"], blocks))
    return turns


def _blocks(i: int, content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content:
            raise Rejected(f"messages.{i}: user messages must have non-empty content")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise Rejected(f"messages.{i}.content: Input should be a valid list")
    return list(content)


def _check_blocks(k: int, role: str, blocks: list[dict[str, Any]]) -> None:
    allowed = USER_TYPES if role == "user" else ASSISTANT_TYPES
    for j, block in enumerate(blocks):
        kind = block.get("type")
        if kind not in allowed:
            raise Rejected(
                f"messages.{k}.content.{j}.type: Input tag {kind!r} found using 'type' "
                f"does not match any of the expected tags for a {role} message"
            )
        if kind == "text" and not (isinstance(block.get("text"), str) and block["text"]):
            raise Rejected("messages: text content blocks must be non-empty")
        if kind == "thinking":
            if "cache_control" in block:
                raise Rejected(
                    f"messages.{k}.content.{j}.thinking.cache_control: Extra inputs are not "
                    f"permitted"
                )
            if block.get("signature") != sign(str(block.get("thinking"))):
                raise Rejected(f"messages.{k}.content.{j}: Invalid `signature` in `thinking` block")


def _check_tools(turns: list[tuple[str, list[dict[str, Any]]]]) -> None:
    for k, (role, blocks) in enumerate(turns):
        if role == "user":
            _check_results(k, blocks, turns[k - 1] if k else None)
    for k, (role, blocks) in enumerate(turns):
        if role == "user":
            continue
        uses = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
        if not uses:
            continue
        following = turns[k + 1][1] if k + 1 < len(turns) else []
        answered = {b.get("tool_use_id") for b in following if b.get("type") == "tool_result"}
        missing = [u for u in uses if u not in answered]
        if missing:
            raise Rejected(
                f"messages.{k + 1 if k + 1 < len(turns) else k}: `tool_use` ids were "
                f"found without `tool_result` blocks immediately after: "
                f"{', '.join(map(str, missing))}. Each `tool_use` block must have a "
                f"corresponding `tool_result` block in the next message."
            )


def _check_results(
    k: int, blocks: list[dict[str, Any]], before: tuple[str, list[dict[str, Any]]] | None
) -> None:
    uses = {b.get("id") for b in (before[1] if before else []) if b.get("type") == "tool_use"}
    results_done = False
    for j, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            results_done = True
            continue
        if results_done:
            raise Rejected(
                f"messages.{k}.content.{j}: `tool_result` blocks must come first in the "
                f"user message, before any other content"
            )
        if block.get("tool_use_id") not in uses:
            raise Rejected(
                f"messages.{k}.content.{j}: unexpected `tool_use_id` found in "
                f"`tool_result` blocks: {block.get('tool_use_id')}. "
                "Each `tool_result` block must have a corresponding `tool_use` block "
                "in the previous message."
            )


def _thinking_enabled(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")


def _check_continued_thinking(turns: list[tuple[str, list[dict[str, Any]]]]) -> None:
    """A tool loop being continued: its assistant turn must start with thinking."""
    if len(turns) < 2 or turns[-1][0] != "user":
        return
    last, before = turns[-1][1], turns[-2][1]
    if not any(b.get("type") == "tool_result" for b in last):
        return
    if before and before[0].get("type") not in THINKING:
        raise Rejected(
            f"messages.{len(turns) - 2}.content.0.type: Expected `thinking` or "
            f"`redacted_thinking`, but found "
            f"`{before[0].get('type')}`. When `thinking` is enabled, a final "
            f"`assistant` message must start with a thinking block"
        )


def all_blocks(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Tools, system blocks, then every message block, in the order caching reads them."""
    for tool in body.get("tools") or ():
        if isinstance(tool, dict):
            yield tool
    system = body.get("system")
    if isinstance(system, list):
        yield from (b for b in system if isinstance(b, dict))
    elif isinstance(system, str) and system:
        yield {"type": "text", "text": system}
    for msg in body.get("messages") or ():
        content = msg.get("content") if isinstance(msg, dict) else None
        if isinstance(content, str):
            yield {"type": "text", "text": content}
        elif isinstance(content, list):
            yield from (b for b in content if isinstance(b, dict))
