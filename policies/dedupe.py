"""dedupe: a tool result repeated verbatim later is kept once, the newest.

Agents re-read the same file and re-run the same listing; each copy costs its full size
on every later request. An earlier copy's content becomes a pointer,
`[duplicate of a later tool result (call <id> / <tool>), N tokens]`, so the model knows
where the text is. Copies are identified by their exact content (a string as it is, a
list of parts by its canonical JSON), compared only among contents of the same length,
so a long history is not hashed every turn. Only contents of at least
`min_tokens` tokens are worth a pointer, and only when the pointer is shorter. The
message stays, so tool-call pairs stay valid; pinned messages are kept as they are.

Prefix caching. An earlier copy points to the *next* copy, not to the newest, so it is
rewritten exactly once, on the turn its first repeat arrives, and is the same bytes from
then on however many copies follow (a pointer depends only on that copy and its next
one). That one rewrite breaks the provider's cache at the old copy, so a chain that also
clears old tool uses should run `tool_use_clearing` first: old copies are then already
cleared, and dedupe only rewrites within the recent, uncleared tail. With `min_fill`
(`policies.fill`), copies are replaced oldest first, and a replacement that would take the
prompt below that share of the budget is not made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import orjson

from policies import fill, params
from policies.base import Action, CurationContext, CuratorOutput
from policies.messages import Message, ResultNames, is_result, opens_block, role

DUPLICATE_PREFIX = "[duplicate of a later tool result"


def pointer(reference: str, tokens: int) -> str:
    """What an earlier copy says instead of its content."""
    return f"{DUPLICATE_PREFIX} ({reference}), {tokens:,} tokens]"


@dataclass(frozen=True, slots=True)
class Dedupe:
    """Replaces earlier copies of a repeated tool result with a pointer to the next copy."""

    name: ClassVar[str] = "dedupe"

    min_tokens: int = 50
    min_fill: float = 0.0

    def __post_init__(self) -> None:
        params.integer("min_tokens", self.min_tokens, minimum=0)
        object.__setattr__(self, "min_fill", fill.check(self.min_fill))

    def curate(self, messages: Sequence[Message], ctx: CurationContext) -> CuratorOutput:
        pinned = ctx.pinned(messages)
        later: dict[str | bytes, str] = {}  # content -> the nearest later copy seen so far
        edits: list[tuple[int, Message, Action]] = []
        for i, reference, content in reversed(_candidates(messages, ctx)):
            next_copy = later.get(content)
            later[content] = reference
            if next_copy is None or i in pinned:
                continue
            msg = messages[i]
            empty = ctx.count_bare(msg)
            before = ctx.count(msg)
            if before - empty < self.min_tokens:
                continue
            new = ctx.with_content(msg, pointer(next_copy, before - empty))
            saved = before - ctx.count(new)
            if saved > 0:
                reason = f"repeated later as {next_copy}: kept that copy only"
                edits.append((i, new, Action(self.name, "replace", (i,), saved, reason)))
        out = list(messages)
        actions: list[Action] = []
        floor = fill.floor(messages, ctx, self.min_fill)
        for i, new, action in reversed(edits):  # oldest first
            if not floor.allows(action.tokens_removed):
                continue
            out[i] = new
            actions.append(action)
        return CuratorOutput(out, tuple(actions)) if actions else CuratorOutput(list(messages))


def _candidates(
    messages: Sequence[Message], ctx: CurationContext
) -> list[tuple[int, str, str | bytes]]:
    """(index, reference, content) of the results whose content may have a copy, oldest
    first. Only a content of the same length can be a copy, so the others are left out
    before any content is hashed: a long history is not hashed again every turn."""
    found = [
        (i, names, c)
        for i, names in _results(messages, ctx)
        if (c := _content(messages[i])) is not None
    ]
    sizes = Counter((type(c), len(c)) for _, _, c in found)
    return [
        (i, _reference(messages[i], names), c)
        for i, names, c in found
        if sizes[type(c), len(c)] > 1
    ]


def _results(messages: Sequence[Message], ctx: CurationContext) -> list[tuple[int, str]]:
    """(index, the tool its call names) of each tool and function result."""
    found: list[tuple[int, str]] = []
    names = ResultNames({})
    for i, msg in enumerate(messages):
        if opens_block(msg):
            names = ResultNames(ctx.tool_names(msg), msg)
        elif is_result(msg):
            tool = names.answer(msg.get("tool_call_id"))[0] if role(msg) == "tool" else ""
            found.append((i, tool))
    return found


def _reference(msg: Message, tool: str) -> str:
    """How a pointer names this result."""
    if role(msg) == "function":
        return f"function {msg.get('name') or 'unnamed'}"
    return f"call {msg.get('tool_call_id')} / {tool or 'unnamed tool'}"


def _content(msg: Message) -> str | bytes | None:
    """The content as compared: a string as it is, a list as its canonical JSON; None for
    no content, or a pointer already."""
    content = msg.get("content")
    if isinstance(content, str):
        return None if content.startswith(DUPLICATE_PREFIX) else content
    if isinstance(content, list):
        try:
            return orjson.dumps(content, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # not plain JSON (a library caller's objects): never a duplicate
            return None
    return None
