"""dedupe: a tool result repeated verbatim later is kept once, the newest.

Agents re-read the same file and re-run the same listing; each copy costs its full size
on every later request. An earlier copy's content becomes a pointer,
`[duplicate of a later tool result (call <id> / <tool>), N tokens]`, so the model knows
where the text is. Copies are identified by their exact content (a SHA-256 of its
canonical bytes; string and text-part contents alike). Only contents of at least
`min_tokens` tokens are worth a pointer, and only when the pointer is shorter. The
message stays, so tool-call pairs stay valid; pinned messages are kept as they are.

Prefix caching. An earlier copy points to the *next* copy, not to the newest, so it is
rewritten exactly once, on the turn its first repeat arrives, and is the same bytes from
then on however many copies follow (a pointer depends only on that copy and its next
one). That one rewrite breaks the provider's cache at the old copy, so a chain that also
clears old tool uses should run `tool_use_clearing` first: old copies are then already
cleared, and dedupe only rewrites within the recent, uncleared tail.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import orjson

from policies import params
from policies.base import Action, CurationContext, CuratorOutput
from policies.messages import Message, is_result, opens_block, role, tool_names

DUPLICATE_PREFIX = "[duplicate of a later tool result"


def pointer(reference: str, tokens: int) -> str:
    """What an earlier copy says instead of its content."""
    return f"{DUPLICATE_PREFIX} ({reference}), {tokens:,} tokens]"


@dataclass(frozen=True, slots=True)
class Dedupe:
    """Replaces earlier copies of a repeated tool result with a pointer to the next copy."""

    name: ClassVar[str] = "dedupe"

    min_tokens: int = 50

    def __post_init__(self) -> None:
        params.integer("min_tokens", self.min_tokens, minimum=0)

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        counter, model = ctx.counter, ctx.model
        pinned = ctx.pinned(messages)
        later: dict[bytes, str] = {}  # digest -> the nearest later copy seen so far
        out = list(messages)
        actions: list[Action] = []
        for i, reference in reversed(_results(messages)):
            msg = messages[i]
            key = _digest(msg.get("content"))
            if key is None:
                continue
            next_copy = later.get(key)
            later[key] = reference
            if next_copy is None or i in pinned:
                continue
            empty = counter.count_message({**msg, "content": ""}, model)
            before = counter.count_message(msg, model)
            if before - empty < self.min_tokens:
                continue
            new = {**msg, "content": pointer(next_copy, before - empty)}
            saved = before - counter.count_message(new, model)
            if saved > 0:
                out[i] = new
                reason = f"repeated later as {next_copy}: kept that copy only"
                actions.append(Action(self.name, "replace", (i,), saved, reason))
        if not actions:
            return CuratorOutput(list(messages))
        return CuratorOutput(out, tuple(reversed(actions)))


def _results(messages: Sequence[Message]) -> list[tuple[int, str]]:
    """(index, reference) of each tool and function result, oldest first."""
    found: list[tuple[int, str]] = []
    names: dict[str, str] = {}
    for i, msg in enumerate(messages):
        if opens_block(msg):
            names = tool_names(msg)
        elif role(msg) == "function":
            found.append((i, f"function {msg.get('name') or 'unnamed'}"))
        elif is_result(msg):
            tid = msg.get("tool_call_id")
            tool = names.get(tid, "") if isinstance(tid, str) else ""
            found.append((i, f"call {tid} / {tool or 'unnamed tool'}"))
    return found


def _digest(content: object) -> bytes | None:
    """A digest of the content's exact bytes; None for no content, or a pointer already."""
    if isinstance(content, str):
        if content.startswith(DUPLICATE_PREFIX):
            return None
        data = b"s" + content.encode("utf-8", "surrogatepass")
    elif isinstance(content, list):
        try:
            data = b"l" + orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # not plain JSON (a library caller's objects): never a duplicate
            return None
    else:
        return None
    return hashlib.sha256(data).digest()
