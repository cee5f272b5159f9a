"""Searching a long text a window at a time, with the same results as one search.

`re` keeps the GIL for the whole of one call, and so does `str.find`: one search over a
25 MB prompt with no match (a pasted blob) held it for 1.1 s in the audit writer, and the
event loop, every client's, waited as long (issue U item 4). So a text longer than
`WINDOW` is searched in windows of `WINDOW` characters, letting the GIL go between them.

A window is searched with the pattern's reach beyond it (`reach`: its longest match plus
its longest lookahead), and only the matches starting inside it count: a match attempt at
a position decides on the characters from there to its reach, which the window holds, and
lookbehinds see the text before the window (`re` reads the whole string, `pos` only says
where to start). So the matches are those of one `finditer` over the whole text. A
pattern whose reach is unbounded or past `LONGEST_REACH` is searched whole, as before.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from typing import Any

from proxy.priority import let_the_loop_in

WINDOW = 65_536
"""Characters searched per call: ~3 ms for the slowest detector on text it never matches."""
LONGEST_REACH = 131_072
"""Past this reach a pattern is searched in one call (an operator's unbounded pattern)."""


def reach(pattern: re.Pattern[str]) -> int | None:
    """How far past a match's start `pattern` reads at most (its longest match plus the
    lookaheads in it); None when unbounded, past `LONGEST_REACH`, or not known."""
    try:
        parser: Any = importlib.import_module("re._parser")  # CPython's own
        parsed: Any = parser.parse(pattern.pattern, pattern.flags)
        total = parsed.getwidth()[1] + _lookahead_widths(parsed, parser)
    except (ImportError, AttributeError, TypeError, ValueError):
        return None
    return total if total <= LONGEST_REACH else None


def _lookahead_widths(node: Any, parser: Any) -> int:
    """The widths of every lookahead inside a parsed pattern, summed (an upper bound)."""
    total = 0
    items = node.data if isinstance(node, parser.SubPattern) else node
    for item in items if isinstance(items, list | tuple) else ():
        if isinstance(item, tuple) and len(item) == 2 and str(item[0]) in ("ASSERT", "ASSERT_NOT"):
            direction, sub = item[1]
            total += sub.getwidth()[1] if direction == 1 else 0
            total += _lookahead_widths(sub, parser)
        elif isinstance(item, parser.SubPattern | list | tuple):
            total += _lookahead_widths(item, parser)
    return total


def finditer(pattern: re.Pattern[str], text: str, far: int | None) -> Iterator[re.Match[str]]:
    """`pattern.finditer(text)`, a window at a time when its reach `far` is bounded."""
    if far is None or len(text) <= WINDOW:
        return pattern.finditer(text)  # most texts: no generator around it
    return _windowed(pattern, text, far)


def _windowed(pattern: re.Pattern[str], text: str, far: int) -> Iterator[re.Match[str]]:
    pos = 0
    while pos < len(text):
        stop = pos + WINDOW
        last = stop
        for match in pattern.finditer(text, pos, stop + far):
            if match.start() >= stop:
                break
            last = max(last, match.end())
            yield match
        pos = last
        let_the_loop_in()


def search(pattern: re.Pattern[str], text: str, far: int | None) -> bool:
    """Whether `pattern` matches somewhere in `text` (windows, as `finditer`)."""
    if far is None or len(text) <= WINDOW:
        return pattern.search(text) is not None
    return next(_windowed(pattern, text, far), None) is not None


def contains(text: str, needle: str) -> bool:
    """`needle in text`, a window at a time."""
    if len(text) <= WINDOW:
        return needle in text
    for pos in range(0, len(text), WINDOW):
        if text.find(needle, pos, pos + WINDOW + len(needle) - 1) >= 0:
            return True
        let_the_loop_in()
    return False
