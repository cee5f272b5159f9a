"""What an agent's messages work with: the names in them, and the lines of a text that hold one.

`turn_masking` keeps, of a tool result it masks, the lines that name what the agent's next
steps named: a path it opened, a function it grepped for, a class it edited. Names are
code-like words of at least 4 characters: with a slash or a dot (paths, files, dotted
names), an underscore inside, or an inner capital (camelCase), read from the assistant's
text and its calls' arguments. Deterministic and cheap: regular expressions and substring
tests, no tokenizer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from policies.messages import Message

_WORD = re.compile(r"[\w./-]*[A-Za-z_][\w./-]*")
_CODELIKE = re.compile(r"[/.]|[A-Za-z0-9]_[A-Za-z0-9]|[a-z0-9][A-Z]")
MIN_NAME = 4
MAX_LINE = 400
"""Longer lines (minified code, base64) are never kept."""
NAMES_SCAN = 6_000
"""Names are looked for in a masked text's first 6,000 characters: a huge dump's later
names cost time on first sight and rarely fit the marker's limit anyway."""


def names(text: str) -> set[str]:
    """The code-like names in `text` (a path's segments count as names too)."""
    out: set[str] = set()
    for word in _WORD.findall(text):
        word = word.strip("./-")
        if len(word) >= MIN_NAME and _CODELIKE.search(word):
            out.add(word)
            if "/" in word:
                out.update(p for p in word.split("/") if len(p) >= MIN_NAME and _CODELIKE.search(p))
    return out


def message_names(msg: Message) -> set[str]:
    """The names an assistant message uses: in its text and its calls' arguments."""
    out: set[str] = set()
    content = msg.get("content")
    if isinstance(content, str):
        out |= names(content)
    for call in msg.get("tool_calls") or ():
        fn = call.get("function") if isinstance(call, Mapping) else None
        args = fn.get("arguments") if isinstance(fn, Mapping) else None
        if isinstance(args, str):
            out |= names(args.replace("\\n", "\n").replace('\\"', '"'))
    return out


def kept_lines(text: str, wanted: frozenset[str], limit: int) -> str:
    """Up to `limit` lines of `text` that hold one of the `wanted` names, in order, joined."""
    present = [n for n in wanted if n in text] if limit > 0 else []
    if not present:
        return ""
    kept: list[str] = []
    for line in text.splitlines():
        if len(line) <= MAX_LINE and any(n in line for n in present):
            kept.append(line)
            if len(kept) >= limit:
                break
    return "\n".join(kept)


def names_in(text: str, *, exclude: str = "", limit: int) -> str:
    """The first `limit` distinct code-like names of `text` not already in `exclude`, joined."""
    found: dict[str, None] = {}
    for match in _WORD.finditer(text, 0, NAMES_SCAN):
        word = match.group().strip("./-")
        fresh = word not in found and word not in exclude
        if fresh and len(word) >= MIN_NAME and _CODELIKE.search(word):
            found[word] = None
            if len(found) >= limit:
                break
    return ", ".join(found)
