"""Pieces of secrets that a curator's cut leaves behind in the curated copy.

`tool_result_truncation` keeps a result's head and tail. A cut through a secret leaves its
beginning at the end of the head and its end at the start of the tail, and neither piece
is something a detector recognises on its own (a PEM body without its BEGIN line, the last
30 characters of a key). The record builder knows the secrets it found in the original
messages, so the curated copy also loses every piece of one that is `MIN_PIECE` or more
characters long and starts or ends the way that secret does.
"""

from __future__ import annotations

MIN_PIECE = 12
"""Shorter pieces are left: too little of a secret to matter, too likely to be a
coincidence (`sk-proj-` alone is 8)."""

Known = tuple[tuple[str, int], ...]
"""(secret as found in an original message, detector index)."""
Span = tuple[int, int, int]


def piece_spans(text: str, known: Known) -> list[Span]:
    """Spans of `text` that are a beginning or an end of a known secret."""
    spans: list[Span] = []
    for secret, which in known:
        if len(secret) < MIN_PIECE:
            continue
        for at in _occurrences(text, secret[:MIN_PIECE]):
            size = _common(text[at : at + len(secret)], secret)
            spans.append((at, at + size, which))
        reverse = secret[::-1]
        for at in _occurrences(text, secret[-MIN_PIECE:]):
            end = at + MIN_PIECE
            before = text[max(0, end - len(secret)) : end][::-1]
            spans.append((end - _common(before, reverse), end, which))
    return spans


def _occurrences(text: str, needle: str) -> list[int]:
    found: list[int] = []
    at = text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _common(a: str, b: str) -> int:
    """The length of the common beginning of `a` and `b`."""
    size = min(len(a), len(b))
    i = 0
    while i < size and a[i] == b[i]:
        i += 1
    return i
