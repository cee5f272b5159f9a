"""Decoding a huge body without holding the GIL for the whole of it.

orjson keeps the GIL while it decodes, and a 25 MB prompt is one string: `orjson.loads` of
such a body held it 45-60 ms in the curation thread, and the event loop (every client's)
waited as long (issue U item 4). So a body of `LIFT_BYTES` or more has its long strings
lifted out: a stretch of `STRETCH` bytes with no quote in it can only be inside a string (or
blanks, or numbers); the string around it, from the quote before to the quote after, is
replaced by a marker, the small rest is decoded, and the string is decoded `PIECE` bytes at
a time, cut where no escape or UTF-8 sequence is split, the GIL let go between pieces, then
joined (one copy). The marker must come back exactly once, as a string value where the
string was; anything else (a stretch that was not a string, a quote escaped, a piece that
does not decode) and the body is decoded whole, as before, with the same result or error.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

LIFT_BYTES = 4 << 20
STRETCH = 1 << 18
"""A quote-free stretch this long marks a string worth lifting."""
PIECE = 1 << 20
_SEARCH = 4096
"""How far past a piece's length its cut is looked for."""
_MARKER = "\x1ecurator-lifted-{}\x1e"
"""Written as JSON (`\\u001e`): a body cannot hold it without the marker's escape."""


class _NotLifted(Exception):
    """The body is decoded whole instead."""


def loads(raw: bytes) -> Any:
    """`orjson.loads(raw)`, a huge body's long strings decoded a piece at a time."""
    if len(raw) < LIFT_BYTES:
        return orjson.loads(raw)
    try:
        return _lifted(raw)
    except (_NotLifted, orjson.JSONDecodeError, RecursionError):
        return orjson.loads(raw)


def _lifted(raw: bytes) -> Any:
    spans = _strings(raw)
    if not spans:
        raise _NotLifted
    markers = [orjson.dumps(_MARKER.format(k))[1:-1] for k in range(len(spans))]
    if any(m in raw for m in markers):  # short needles: memchr-fast, ~1 ms each here
        raise _NotLifted
    parts: list[bytes] = []
    last = 0
    for (start, end), marker in zip(spans, markers, strict=True):
        parts += (raw[last:start], marker)
        last = end
    parts.append(raw[last:])
    skeleton = orjson.loads(b"".join(parts))
    values = {_MARKER.format(k): _decoded(raw, *span) for k, span in enumerate(spans)}
    found = _put_back(skeleton, values)
    if found != len(values):
        raise _NotLifted
    return skeleton


def _strings(raw: bytes) -> list[tuple[int, int]]:
    """(start, end) of each long string's content: between its quotes, none escaped."""
    spans: list[tuple[int, int]] = []
    at = 0
    while (at := _quote_free(raw, at)) >= 0:
        start = raw.rfind(b'"', 0, at) + 1
        end = raw.find(b'"', at)
        while end > 0 and _escaped(raw, end):
            end = raw.find(b'"', end + 1)
        if start <= 0 or end < 0 or _escaped(raw, start - 1):
            raise _NotLifted
        spans.append((start, end))
        at = end + 1
    return spans


def _quote_free(raw: bytes, at: int) -> int:
    """Where a stretch of `STRETCH` bytes without a quote starts, from `at` on (-1: none)."""
    while at + STRETCH <= len(raw):
        quote = raw.find(b'"', at, at + STRETCH)
        if quote < 0:
            return at
        at = quote + 1
    return -1


def _escaped(raw: bytes, at: int) -> bool:
    """Whether the quote at `at` follows an odd run of backslashes."""
    run = at
    while run > 0 and raw[run - 1] == 0x5C:
        run -= 1
    return (at - run) % 2 == 1


def _decoded(raw: bytes, start: int, end: int) -> str:
    view = memoryview(raw)
    pieces: list[str] = []
    while start < end:
        cut = _cut(raw, start + PIECE, end)
        pieces.append(orjson.loads(b'"' + view[start:cut] + b'"'))
        start = cut
        time.sleep(0)  # off the loop (bodies this big are planned in a thread): let it in
    return "".join(pieces)


def _cut(raw: bytes, at: int, end: int) -> int:
    """The first place from `at` where a piece may end (`_may_cut`); past `_SEARCH` bytes
    without one the body is decoded whole."""
    for place in range(at, min(end, at + _SEARCH)):
        if _may_cut(raw, place):
            return place
    if at + _SEARCH < end:
        raise _NotLifted
    return end


def _may_cut(raw: bytes, at: int) -> bool:
    """Whether a string's bytes may be cut before `at`: not inside a UTF-8 sequence, nor an
    escape (`\\n`, `\\u00e9`), nor between the two escapes of a surrogate pair."""
    if 0x80 <= raw[at] < 0xC0:
        return False
    slash = raw.rfind(b"\\", at - 6, at)
    if slash >= 0 and _escaped(raw, slash + 1):  # an escape starts there: up to `at`?
        reach = slash + (6 if raw[slash + 1] == 0x75 else 2)  # `\\u` and four digits
        if at < reach:
            return False
    low = raw[at : at + 4].lower()
    return not (low.startswith(b"\\ud") and low[3:4] in b"cdef")


def _put_back(node: Any, values: dict[str, str]) -> int:
    """Replace each marker string in `node` by its value; how many were replaced (a marker
    used as a key counts nothing, and so fails the check)."""
    found = 0
    items = node.items() if type(node) is dict else enumerate(node) if type(node) is list else ()
    for key, value in items:
        if type(value) is str and value in values:
            node[key] = values[value]
            found += 1
        elif type(value) in (dict, list):
            found += _put_back(value, values)
    return found
