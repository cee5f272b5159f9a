"""Rebuilding a body in place: the value of one top-level member is replaced within the
client's own bytes, so every field curation does not touch keeps its exact bytes.

Decoding and encoding again would not: orjson reads `18446744073709551617` as a float and
writes `1.8446744073709552e+19`, `1E2` as `100.0`, `"\\u00e9"` as `"é"`.

The replaced value (an agent's whole history) is never scanned: it begins after the first
`"key":` that follows a `{` or `,`, and ends before the next top-level key's `,"next":`,
searched from the body's end (or before the closing brace). A string cannot hold those
bytes unescaped, but a nested object can, so each guess is checked: the body with `null`
in that place must decode to the decoded body with `null` under `key`, every other member
equal and in the same order. When no guess passes (a key written with escapes, a nested
look-alike, a body too odd), the decoded body is encoded again, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson

_BLANK = b" \t\r\n"
MAX_GUESSES = 4
"""How many places for the value's end are checked before encoding the body again."""


def spliced(raw: bytes, body: Mapping[str, Any], key: str, value: object) -> bytes:
    """`raw` (decoded: `body`) with the value of its top-level member `key` replaced by
    `value`, every other byte as it was whenever a guess (above) passes its check."""
    start = _start(raw, key)
    if start is not None:
        expected = list({**body, key: None}.items())
        for end, _ in zip(_ends(raw, body, key, start), range(MAX_GUESSES), strict=False):
            if _decodes_as(raw[:start] + b"null" + raw[end:], expected):
                return b"".join((raw[:start], orjson.dumps(value), raw[end:]))
    return orjson.dumps({**body, key: value})


def _decodes_as(candidate: bytes, expected: list[tuple[str, Any]]) -> bool:
    try:
        decoded = orjson.loads(candidate)
    except orjson.JSONDecodeError:
        return False
    return type(decoded) is dict and list(decoded.items()) == expected


def _start(raw: bytes, key: str) -> int | None:
    """Where the value of the first member named `key` begins."""
    quoted = orjson.dumps(key)
    at = 0
    while (found := raw.find(quoted, at)) >= 0:
        colon = _skip(raw, found + len(quoted))
        if _after_brace_or_comma(raw, found) and raw[colon : colon + 1] == b":":
            return _skip(raw, colon + 1)
        at = found + 1
    return None


def _ends(raw: bytes, body: Mapping[str, Any], key: str, start: int) -> Iterator[int]:
    """Candidate ends of the value starting at `start`, the likeliest first."""
    names = list(body)
    following = names[names.index(key) + 1 :] if key in names else []
    if not following:
        yield _trim(raw, start, raw.rfind(b"}"))
        return
    quoted = orjson.dumps(following[0])
    at = len(raw)
    while (found := raw.rfind(quoted, start, at)) >= 0:
        comma = found
        while comma > start and raw[comma - 1] in _BLANK:
            comma -= 1
        after = _skip(raw, found + len(quoted))
        if raw[comma - 1 : comma] == b"," and raw[after : after + 1] == b":":
            yield _trim(raw, start, comma - 1)
        at = found


def _trim(raw: bytes, start: int, end: int) -> int:
    while end > start and raw[end - 1] in _BLANK:
        end -= 1
    return end


def _after_brace_or_comma(raw: bytes, at: int) -> bool:
    while at > 0 and raw[at - 1] in _BLANK:
        at -= 1
    return at > 0 and raw[at - 1] in b"{,"


def _skip(raw: bytes, at: int) -> int:
    while at < len(raw) and raw[at] in _BLANK:
        at += 1
    return at
